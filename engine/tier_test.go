package engine_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store/storetest"
)

// TestLadder is the trust ladder of docs/data-model.md: confidence after 1…8
// fresh successes, and the tier they earn from one session and from two.
func TestLadder(t *testing.T) {
	p := engine.DefaultPolicy()
	want := []struct {
		conf        float64
		one, two    engine.Tier // from one session; from two (status as consolidation moves it)
		twoVerified bool
	}{
		{0.50, engine.P3, engine.P3, false},
		{0.75, engine.P3, engine.P2, false},
		{0.875, engine.P3, engine.P2, false},
		{0.9375, engine.P3, engine.P2, false},
		{0.96875, engine.P3, engine.P1, true}, // verified at 5 successes: P1 from then on
		{0.984375, engine.P3, engine.P1, true},
		{0.9921875, engine.P3, engine.P1, true},
		{0.99609375, engine.P3, engine.P1, true},
	}
	for n := 1; n <= 8; n++ {
		w := want[n-1]
		for _, sessions := range []int{1, 2} {
			var ev []engine.Evidence
			for i := 0; i < n; i++ {
				ev = append(ev, ok(fmt.Sprintf("t%d", i), t0, fmt.Sprintf("s%d", i%sessions)))
			}
			sc := engine.Confidence(ev, t0, p)
			if !near(sc.Confidence, w.conf) {
				t.Errorf("%d successes: confidence %v, want %v", n, sc.Confidence, w.conf)
			}
			status, _ := engine.NextStatus(engine.Hypothesis, sc, false, p)
			tier, reasons := engine.DecideTier(engine.TierBasis{Score: sc, Status: status, PatternOK: true}, p)
			wantTier := w.one
			if sessions == 2 {
				wantTier = w.two
				if (status == engine.Verified) != w.twoVerified {
					t.Errorf("%d successes from 2 sessions: status %s", n, status)
				}
			} else if status == engine.Verified {
				t.Errorf("%d successes from one session verified", n)
			}
			if tier != wantTier {
				t.Errorf("%d successes from %d sessions: tier %s, want %s (%q)", n, sessions, tier, wantTier, reasons)
			}
		}
	}
}

// TestLadderMonotone: one more success never lowers confidence, one more
// failure never raises it, for any weights the policy allows.
func TestLadderMonotone(t *testing.T) {
	for _, c1 := range []float64{0.3, 0.5, 0.8} {
		for s := 0.0; s <= 10; s += 0.25 {
			for f := 0.0; f <= 10; f += 0.25 {
				c := engine.ConfidenceOf(s, f, c1)
				if engine.ConfidenceOf(s+0.25, f, c1) < c-1e-12 || engine.ConfidenceOf(s, f+0.25, c1) > c+1e-12 || c < 0 || c > 1 {
					t.Fatalf("c1 %v S %v F %v: not monotone or out of [0,1]", c1, s, f)
				}
			}
		}
	}
}

func TestDecideTierReasons(t *testing.T) {
	p := engine.DefaultPolicy()
	sc := func(succ, sessions int, conf float64) engine.Score {
		return engine.Score{Successes: succ, Sessions: sessions, Confidence: conf}
	}
	tests := []struct {
		name   string
		b      engine.TierBasis
		want   engine.Tier
		reason string // a line that must be among the reasons
	}{
		{"nothing", engine.TierBasis{PatternOK: true}, engine.P5, "P4 needs at least one run; none so far"},
		{"lessons only", engine.TierBasis{Score: engine.Score{Lessons: 2}, PatternOK: true}, engine.P5, "2 lessons recorded but no runs"},
		{"one session", engine.TierBasis{Score: sc(2, 1, 0.75), Status: engine.Candidate, PatternOK: true}, engine.P3, "P2 needs successes from 2 sessions; 1 so far"},
		{"low", engine.TierBasis{Score: sc(1, 1, 0.5), PatternOK: true}, engine.P3, "P2 needs confidence ≥ 0.60; 0.50 so far (1 success, 0 failures)"},
		{"P2, next up", engine.TierBasis{Score: sc(3, 2, 0.875), Status: engine.Candidate, PatternOK: true}, engine.P2, "P1 needs status verified; status is candidate"},
		{"P1", engine.TierBasis{Score: sc(6, 2, 0.98), Status: engine.Verified, PatternOK: true}, engine.P1, "P1: confidence 0.98 ≥ 0.85 (6 successes, 0 failures); status verified; no open blocker; every route parameter bound; successes from 2 sessions (P2 needs 2); no open wrong verdict; exact intent; no URL to check the page type against"},
		{"blocker", engine.TierBasis{Score: sc(6, 2, 0.98), Status: engine.Verified, OpenBlocker: true, PatternOK: true}, engine.P2, "P1 needs no open blocker"},
		{"unbound", engine.TierBasis{Score: sc(6, 2, 0.98), Status: engine.Verified, Unbound: "query", PatternOK: true}, engine.P2, "P1 needs every route parameter bound; this run cannot bind query"},
		{"overlap", engine.TierBasis{Score: sc(6, 2, 0.98), Status: engine.Verified, Match: engine.MatchOverlap, MatchedIntent: "star count", PatternOK: true}, engine.P3, `P2 needs the exact intent; matched "star count" by word overlap`},
		{"no intent", engine.TierBasis{Score: sc(6, 2, 0.98), Status: engine.Verified, Match: engine.MatchURL, PatternOK: true}, engine.P3, "P2 needs an intent"},
		{"other page type", engine.TierBasis{Score: sc(6, 2, 0.98), Status: engine.Verified, Patterns: []string{"/dp/*"}, QueryPattern: "/s?k=*"}, engine.P3, "P2 needs the URL on a page type the entry was learned on; /s?k=* matches none of /dp/*"},
		{"judged wrong", engine.TierBasis{Score: engine.Score{Successes: 6, Sessions: 2, Confidence: 0.9, OpenWrong: "01JDB000000000000000000001", OpenWrongRevision: "abc"}, Status: engine.Contested, Revision: "abc", PatternOK: true}, engine.P3, "P2 needs no open wrong verdict; run 01JDB000000000000000000001 was judged wrong"},
		{"judged wrong on an older route", engine.TierBasis{Score: engine.Score{Successes: 6, Sessions: 2, Confidence: 0.9, OpenWrong: "01JDB000000000000000000001", OpenWrongRevision: "old"}, Status: engine.Contested, Revision: "new", PatternOK: true}, engine.P2, "no open wrong verdict"},
		{"P4", engine.TierBasis{Score: engine.Score{Successes: 1, Failures: 1, Sessions: 1, Confidence: 0.25}, PatternOK: true}, engine.P4, "P3 needs confidence ≥ 0.40; 0.25 so far (1 success, 1 failure)"},
	}
	for _, tt := range tests {
		tier, reasons := engine.DecideTier(tt.b, p)
		if tier != tt.want {
			t.Errorf("%s: tier %s, want %s (%q)", tt.name, tier, tt.want, reasons)
		}
		if !containsSub(reasons, tt.reason) {
			t.Errorf("%s: reasons %q lack %q", tt.name, reasons, tt.reason)
		}
		if !strings.HasPrefix(reasons[0], string(tier)+":") {
			t.Errorf("%s: the first reason %q does not name the tier", tt.name, reasons[0])
		}
	}
}

// TestPageTypeGuard: knowledge learned on /dp/* is a P3 hint on /s?k=*, with
// the pattern_mismatch warning and no route; on /dp/* it is served in full.
func TestPageTypeGuard(t *testing.T) {
	st := storetest.NewMemStore()
	e := tickingEngine(st)
	run := &engine.TraceInput{Steps: []engine.StepInput{{Action: "navigate", URL: "https://shop.example.com/dp/B0012345"}, {Action: "get_text", Selector: "#price"}}}
	for _, s := range []string{"s1", "s2"} {
		save(t, e, engine.SaveRequest{URL: "https://shop.example.com/dp/B0012345", Intent: "read the price", Session: s, Trace: run})
	}
	on := query(t, e, "https://shop.example.com/dp/B0099999", "read the price")
	if on.Tier != engine.P2 || len(on.Steps) != 2 || containsSub(on.Warnings, "pattern_mismatch") {
		t.Errorf("on its page type: tier %s, %d steps, warnings %q", on.Tier, len(on.Steps), on.Warnings)
	}
	off := query(t, e, "https://shop.example.com/s?k=widgets&qid=1712&sr=8-1", "read the price")
	if off.Tier != engine.P3 || len(off.Steps) != 0 || !containsSub(off.Warnings, "pattern_mismatch: the knowledge was learned on /dp/*, not on /s?k=*") {
		t.Errorf("another page type: tier %s, %d steps, warnings %q", off.Tier, len(off.Steps), off.Warnings)
	}
	if !containsSub(off.Reasons, "P2 needs the URL on a page type the entry was learned on; /s?k=* matches none of /dp/*") {
		t.Errorf("reasons %q", off.Reasons)
	}
	if off.PrimarySelectors["get_text:#price"] != "#price" {
		t.Errorf("the hint keeps the selectors: %+v", off.PrimarySelectors)
	}
}

// TestLessonsAreNotEvidence: a save with steps is a run; one with only a
// facts patch is a lesson (applied, recorded, not counted); one with neither
// is refused and writes nothing.
func TestLessonsAreNotEvidence(t *testing.T) {
	st := storetest.NewMemStore()
	e := tickingEngine(st)
	u := "https://github.com/pemdev/pem"
	res := save(t, e, engine.SaveRequest{URL: u, Intent: "star count", Trace: starTrace(t)})
	if res.Lesson || res.Confidence != 0.5 {
		t.Fatalf("a run: %+v", res)
	}
	for i := 0; i < 3; i++ {
		res, err := e.Save(ctx, engine.SaveRequest{URL: u, Intent: "star count", Trace: &engine.TraceInput{},
			Facts: &engine.Patch{InteractionHints: []string{fmt.Sprintf("hint %d", i)}}})
		if err != nil || !res.Lesson || !res.FactsMerged || res.Confidence != 0.5 {
			t.Fatalf("lesson %d: %+v, %v", i, res, err)
		}
	}
	r := query(t, e, u, "star count")
	if r.SuccessCount != 1 || r.FailureCount != 0 || r.LessonCount != 3 || r.Confidence != 0.5 || len(r.InteractionHints) != 3 {
		t.Errorf("after 1 run and 3 lessons: %+v", r)
	}
	before := len(st.RawTraces())
	for _, in := range []*engine.TraceInput{nil, {}, {ErrorMessage: "x"}} {
		if _, err := e.Save(ctx, engine.SaveRequest{URL: u, Intent: "star count", Trace: in}); err == nil || !strings.Contains(err.Error(), "nothing to save") {
			t.Errorf("empty save %+v: %v", in, err)
		}
	}
	if _, err := e.Save(ctx, engine.SaveRequest{URL: "notaurl", Trace: starTrace(t)}); err == nil || !strings.Contains(err.Error(), "has no host") {
		t.Errorf("notaurl: %v", err)
	}
	if n := len(st.RawTraces()); n != before {
		t.Errorf("refused saves wrote %d traces", n-before)
	}
}

// TestNoFaultOutcomes: aborted and planner_error runs weigh nothing, are not
// route failures in a streak, and are counted apart.
func TestNoFaultOutcomes(t *testing.T) {
	p := engine.DefaultPolicy()
	ev := []engine.Evidence{ok("a", t0, "s1"), ok("b", t0.Add(time.Minute), "s2"),
		fail("c", t0.Add(2*time.Minute), engine.Aborted), fail("d", t0.Add(3*time.Minute), engine.PlannerError)}
	sc := engine.Confidence(ev, t0.Add(time.Hour), p)
	base := engine.Confidence(ev[:2], t0.Add(time.Hour), p)
	if !near(sc.Confidence, base.Confidence) || sc.NoFault != 2 || sc.Streak != 0 || sc.LastN[0] != engine.Success {
		t.Errorf("no-fault runs moved the score: %+v vs %+v", sc, base)
	}
	st := storetest.NewMemStore()
	e := tickingEngine(st)
	for _, c := range []string{"", "aborted", "planner_error"} {
		in := &engine.TraceInput{Steps: []engine.StepInput{{Action: "get_text", Selector: "#n"}}, FailureCategory: c}
		outcome := "failure"
		if c == "" {
			outcome = "success"
		}
		save(t, e, engine.SaveRequest{URL: "https://example.com/", Intent: "count", Outcome: outcome, Trace: in})
	}
	l, err := e.List(ctx, engine.ListRequest{})
	if err != nil || len(l.Entries) != 1 {
		t.Fatal(l, err)
	}
	if en := l.Entries[0]; en.SuccessCount != 1 || en.FailureCount != 0 || en.AbortedCount != 1 || en.PlannerErrorCount != 1 || en.Confidence != 0.5 {
		t.Errorf("list entry %+v", en)
	}
}

// TestConsecutiveFailuresContest: a verified entry whose last N outcomes
// failed is contested even with confidence above contest_below.
func TestConsecutiveFailuresContest(t *testing.T) {
	p := engine.DefaultPolicy()
	var ev []engine.Evidence
	for i := 0; i < 12; i++ {
		ev = append(ev, ok(fmt.Sprintf("a%02d", i), t0.Add(time.Duration(i)*time.Minute), fmt.Sprintf("s%d", i%3)))
	}
	for n := 1; n <= 3; n++ {
		ev = append(ev, fail(fmt.Sprintf("f%d", n), t0.Add(time.Hour+time.Duration(n)*time.Minute), engine.SelectorDrift))
		sc := engine.Confidence(ev, t0.Add(2*time.Hour), p)
		if sc.Confidence < p.ContestBelow || sc.Streak != n {
			t.Fatalf("%d failures: confidence %v streak %d", n, sc.Confidence, sc.Streak)
		}
		next, why := engine.NextStatus(engine.Verified, sc, false, p)
		if want := n >= 3; (next == engine.Contested) != want {
			t.Errorf("%d failures in a row: %s (%s)", n, next, why)
		}
		if n == 3 && why != "the last 3 outcomes failed" {
			t.Errorf("reason %q", why)
		}
	}
	// A gate in between says nothing about the route: the streak goes on.
	gated := append(append([]engine.Evidence{}, ev[:13]...), fail("g", t0.Add(time.Hour+90*time.Second), engine.AntiBot))
	if sc := engine.Confidence(gated, t0.Add(2*time.Hour), p); sc.Streak != 1 {
		t.Errorf("streak across a gate: %d, want 1", sc.Streak)
	}
}

// TestVerdictFolding: a wrong verdict makes a run a judged_wrong failure and
// opens the cap; a newer right verdict closes it; the same verdicts applied
// again, in any order, change nothing.
func TestVerdictFolding(t *testing.T) {
	p := engine.DefaultPolicy()
	wrong := &engine.Verdict{Trace: "b", Verdict: engine.Wrong, Judge: "qa", At: t0.Add(time.Hour)}
	right := &engine.Verdict{Trace: "c", Verdict: engine.Right, Judge: "qa", At: t0.Add(2 * time.Hour)}
	fresh := func() []engine.Evidence {
		return []engine.Evidence{ok("a", t0, "s1"), ok("b", t0.Add(time.Minute), "s2"), ok("c", t0.Add(2*time.Minute), "s3")}
	}
	ev := fresh()
	if !engine.ApplyVerdict(&ev[1], wrong) || engine.ApplyVerdict(&ev[1], wrong) {
		t.Fatal("a verdict applies once")
	}
	if ev[1].Outcome != engine.Failure || ev[1].Category != engine.JudgedWrong {
		t.Errorf("wrong: %+v", ev[1])
	}
	sc := engine.Confidence(ev, t0.Add(3*time.Hour), p)
	if sc.OpenWrong != "b" || sc.Failures != 1 || !near(sc.F, 3*engine.Decay(3*time.Hour-time.Minute, p.HalfLifeDays)) {
		t.Errorf("after wrong: %+v", sc)
	}
	if next, _ := engine.NextStatus(engine.Verified, sc, false, p); next != engine.Contested {
		t.Errorf("a wrong verdict leaves a verified entry %s", next)
	}
	engine.ApplyVerdict(&ev[2], right)
	sc = engine.Confidence(ev, t0.Add(3*time.Hour), p)
	if sc.OpenWrong != "" || sc.Confirmed != 1 {
		t.Errorf("after a newer right: %+v", sc)
	}
	// Order does not matter: the newest verdict on a run decides.
	older := &engine.Verdict{Trace: "b", Verdict: engine.Right, Judge: "bot", At: t0.Add(30 * time.Minute)}
	x, y := fresh()[1], fresh()[1]
	engine.ApplyVerdict(&x, older)
	engine.ApplyVerdict(&x, wrong)
	engine.ApplyVerdict(&y, wrong)
	if engine.ApplyVerdict(&y, older) || x != y {
		t.Errorf("order matters: %+v vs %+v", x, y)
	}
}

// TestFeedback: unknown ids, lessons and contradictions are clear errors; the
// same verdict twice is recorded once.
func TestFeedback(t *testing.T) {
	st := storetest.NewMemStore()
	e := tickingEngine(st)
	if _, err := e.Feedback(ctx, engine.FeedbackRequest{Trace: "01JDB000000000000000000001", Verdict: "right"}); err == nil || !strings.Contains(err.Error(), "this store keeps no verdicts") {
		t.Errorf("a store without verdicts: %v", err)
	}
}

// TestVerifiedNeedsVerdict: with the policy switch on, nothing is verified
// before a success is confirmed by a right verdict.
func TestVerifiedNeedsVerdict(t *testing.T) {
	p := engine.DefaultPolicy()
	p.VerifiedNeedsVerdict = true
	var ev []engine.Evidence
	for i := 0; i < 6; i++ {
		ev = append(ev, ok(fmt.Sprintf("t%d", i), t0, fmt.Sprintf("s%d", i%2)))
	}
	if s, _ := engine.NextStatus(engine.Candidate, engine.Confidence(ev, t0, p), false, p); s == engine.Verified {
		t.Fatal("verified with no confirmed success")
	}
	engine.ApplyVerdict(&ev[5], &engine.Verdict{Trace: "t5", Verdict: engine.Right, Judge: "qa", At: t0})
	if s, why := engine.NextStatus(engine.Candidate, engine.Confidence(ev, t0, p), false, p); s != engine.Verified {
		t.Fatalf("one confirmed success: %s %s", s, why)
	}
}

// TestConsecutiveFailuresWarn: query warns about a verified entry's failing
// streak before consolidation contests it.
func TestConsecutiveFailuresWarn(t *testing.T) {
	st := storetest.NewMemStore()
	e := tickingEngine(st)
	u := "https://example.com/a"
	run := func(outcome string) {
		save(t, e, engine.SaveRequest{URL: u, Intent: "read a", Outcome: outcome, Session: outcome + fmt.Sprint(len(st.RawTraces())),
			Trace: &engine.TraceInput{Steps: []engine.StepInput{{Action: "get_text", Selector: "#a"}}}})
	}
	for i := 0; i < 8; i++ {
		run("success")
	}
	f := &engine.Facts{Format: engine.Format, Domain: "example.com", Intent: "read a", IntentKey: "read-a", Status: engine.Verified, URLPatterns: []string{"/a"}}
	if _, err := st.PutFacts(ctx, f); err != nil {
		t.Fatal(err)
	}
	run("failure")
	run("failure")
	r := query(t, e, u, "read a")
	if !containsSub(r.Warnings, "consecutive_failures: the last 2 runs failed; 3 in a row contest this entry") {
		t.Errorf("warnings %q", r.Warnings)
	}
}
