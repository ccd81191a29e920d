package engine_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/pemdev/pem/engine"
)

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func ok(id string, at time.Time, session string) engine.Evidence {
	return engine.Evidence{Trace: id, At: at, Outcome: engine.Success, Session: session, Steps: 2}
}

func fail(id string, at time.Time, c engine.FailureCategory) engine.Evidence {
	return engine.Evidence{Trace: id, At: at, Outcome: engine.Failure, Category: c, Steps: 2}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestDecay(t *testing.T) {
	tests := []struct {
		age  time.Duration
		half float64
		want float64
	}{
		{0, 30, 1},
		{-time.Hour, 30, 1}, // from the future: clock skew
		{30 * 24 * time.Hour, 30, 0.5},
		{60 * 24 * time.Hour, 30, 0.25},
		{15 * 24 * time.Hour, 30, math.Sqrt(0.5)},
		{7 * 24 * time.Hour, 7, 0.5},
	}
	for _, tt := range tests {
		if got := engine.Decay(tt.age, tt.half); !near(got, tt.want) {
			t.Errorf("Decay(%v, %v) = %v, want %v", tt.age, tt.half, got, tt.want)
		}
	}
}

func TestConfidenceFormula(t *testing.T) {
	p := engine.DefaultPolicy()
	day := 24 * time.Hour
	tests := []struct {
		name string
		ev   []engine.Evidence
		now  time.Time
		want float64 // (1 − 0.5^S) · S/(S+F)
		s, f float64
	}{
		{"one fresh success", []engine.Evidence{ok("a", t0, "s1")}, t0, 0.5, 1, 0},
		{"three successes", []engine.Evidence{ok("a", t0, "s1"), ok("b", t0, "s1"), ok("c", t0, "s2")}, t0, 0.875, 3, 0},
		{"one route failure", []engine.Evidence{fail("a", t0, engine.SelectorDrift)}, t0, 0, 0, 1},
		{"network weighs 0.25", []engine.Evidence{ok("a", t0, ""), fail("b", t0, engine.Network)}, t0, 0.5 / 1.25, 1, 0.25},
		{"gates weigh 0", []engine.Evidence{ok("a", t0, ""), fail("b", t0, engine.AntiBot), fail("c", t0, engine.AuthRequired), fail("d", t0, engine.PermissionDenied)}, t0, 0.5, 1, 0},
		{"no-fault runs weigh 0", []engine.Evidence{ok("a", t0, ""), fail("b", t0, engine.Aborted), fail("c", t0, engine.PlannerError)}, t0, 0.5, 1, 0},
		{"judged wrong weighs 3", []engine.Evidence{ok("a", t0, ""), ok("a2", t0, ""), fail("b", t0, engine.JudgedWrong)}, t0, 0.75 * 2 / 5, 2, 3},
		{"unknown weighs 1", []engine.Evidence{ok("a", t0, ""), fail("b", t0, engine.Unknown)}, t0, 0.25, 1, 1},
		{"success a half-life old", []engine.Evidence{ok("a", t0, "")}, t0.Add(30 * day), 1 - math.Sqrt(0.5), 0.5, 0},
		{"failure a half-life old", []engine.Evidence{ok("a", t0.Add(30*day), ""), fail("b", t0, engine.Timing)}, t0.Add(30 * day), 0.5 / 1.5, 1, 0.5},
		{"same trace id counted once", []engine.Evidence{ok("a", t0, ""), ok("a", t0, ""), ok("a", t0, "")}, t0, 0.5, 1, 0},
		{"a lesson is no evidence", []engine.Evidence{ok("a", t0, ""), {Trace: "l", At: t0, Outcome: engine.Success}}, t0, 0.5, 1, 0},
	}
	for _, tt := range tests {
		sc := engine.Confidence(tt.ev, tt.now, p)
		if !near(sc.Confidence, tt.want) || !near(sc.S, tt.s) || !near(sc.F, tt.f) {
			t.Errorf("%s: Confidence = %v (S %v, F %v), want %v (S %v, F %v)", tt.name, sc.Confidence, sc.S, sc.F, tt.want, tt.s, tt.f)
		}
	}
}

func TestConfidenceNoEvidence(t *testing.T) {
	p := engine.DefaultPolicy()
	sc := engine.Confidence(nil, t0, p)
	if sc.Confidence != 0 || sc.Successes != 0 || sc.Failures != 0 {
		t.Errorf("no evidence: %+v, want zero", sc)
	}
	if tier, _ := engine.DecideTier(engine.TierBasis{Score: sc, Status: engine.Verified, PatternOK: true}, p); tier != engine.P5 {
		t.Errorf("no evidence: tier %s, want P5", tier)
	}
}

func TestConfidenceCounts(t *testing.T) {
	p := engine.DefaultPolicy()
	ev := []engine.Evidence{
		ok("a", t0, "s1"), ok("b", t0.Add(time.Minute), "s1"), ok("c", t0.Add(2*time.Minute), "s2"),
		fail("d", t0.Add(3*time.Minute), engine.AntiBot), fail("e", t0.Add(4*time.Minute), engine.Timing),
		ok("f", t0.Add(5*time.Minute), ""), ok("b", t0.Add(time.Minute), "s1"),
	}
	sc := engine.Confidence(ev, t0.Add(time.Hour), p)
	if sc.Successes != 4 || sc.Failures != 2 || sc.Gates != 1 {
		t.Errorf("counts %d/%d/%d, want 4 successes, 2 failures, 1 gate", sc.Successes, sc.Failures, sc.Gates)
	}
	if sc.Sessions != 3 { // s1, s2, and the session-less trace f counts as its own
		t.Errorf("Sessions = %d, want 3", sc.Sessions)
	}
	want := []engine.Outcome{engine.Success, engine.Failure, engine.Success} // f, e, c — the gate d skipped
	if fmt.Sprint(sc.LastN) != fmt.Sprint(want) {
		t.Errorf("LastN = %v, want %v", sc.LastN, want)
	}
	if sc.OpenGate != "" {
		t.Errorf("OpenGate = %q after a later success, want none", sc.OpenGate)
	}
}

func TestConfidenceOpenGate(t *testing.T) {
	p := engine.DefaultPolicy()
	ev := []engine.Evidence{ok("a", t0, ""), fail("b", t0.Add(time.Minute), engine.AntiBot)}
	sc := engine.Confidence(ev, t0.Add(time.Hour), p)
	if sc.OpenGate != engine.AntiBot {
		t.Errorf("OpenGate = %q, want anti_bot (the newest outcome is a gate)", sc.OpenGate)
	}
	// Order of the slice does not matter, time does.
	sc = engine.Confidence([]engine.Evidence{ev[1], ev[0]}, t0.Add(time.Hour), p)
	if sc.OpenGate != engine.AntiBot {
		t.Errorf("reversed: OpenGate = %q, want anti_bot", sc.OpenGate)
	}
	if tier, _ := engine.DecideTier(engine.TierBasis{Score: engine.Score{Successes: 9, Sessions: 2, Confidence: 0.95, OpenGate: engine.AntiBot}, Status: engine.Verified, PatternOK: true}, p); tier != engine.P2 {
		t.Errorf("open gate: tier %s, want P2", tier)
	}
}

// TestConfidenceDecaysAtQueryTime: the same evidence read later is less sure.
func TestConfidenceDecaysAtQueryTime(t *testing.T) {
	p := engine.DefaultPolicy()
	ev := []engine.Evidence{ok("a", t0, "s1"), ok("b", t0, "s2"), ok("c", t0, "s3"), ok("d", t0, "s4"), ok("e", t0, "s5"), ok("f", t0, "s6")}
	prev := 2.0
	for _, days := range []int{0, 1, 7, 30, 90, 365} {
		c := engine.Confidence(ev, t0.Add(time.Duration(days)*24*time.Hour), p).Confidence
		if c >= prev {
			t.Errorf("after %d days confidence %v, not below %v", days, c, prev)
		}
		prev = c
	}
	tierOf := func(sc engine.Score) engine.Tier {
		tier, _ := engine.DecideTier(engine.TierBasis{Score: sc, Status: engine.Verified, PatternOK: true}, p)
		return tier
	}
	if fresh := engine.Confidence(ev, t0, p); tierOf(fresh) != engine.P1 {
		t.Errorf("six fresh successes, verified: tier %s, want P1", tierOf(fresh))
	}
	if old := engine.Confidence(ev, t0.AddDate(0, 6, 0), p); tierOf(old) == engine.P1 {
		t.Errorf("six months later: still P1 (confidence %v)", old.Confidence)
	}
}

// randomEvidence makes n outcomes over 60 days, with ids unique to prefix.
func randomEvidence(r *rand.Rand, prefix string, n int) []engine.Evidence {
	cats := engine.FailureCategories
	var ev []engine.Evidence
	for i := 0; i < n; i++ {
		at := t0.Add(time.Duration(r.IntN(60*24)) * time.Hour)
		id := fmt.Sprintf("%s%03d", prefix, i)
		if r.IntN(3) == 0 {
			ev = append(ev, fail(id, at, cats[r.IntN(len(cats))]))
		} else {
			ev = append(ev, ok(id, at, fmt.Sprintf("s%d", r.IntN(4))))
		}
	}
	return ev
}

// TestConfidenceMonotone: adding a success never lowers confidence, adding a
// failure never raises it, whatever the evidence before.
func TestConfidenceMonotone(t *testing.T) {
	p := engine.DefaultPolicy()
	r := rand.New(rand.NewPCG(1, 2))
	now := t0.Add(61 * 24 * time.Hour)
	for i := 0; i < 500; i++ {
		ev := randomEvidence(r, "t", r.IntN(12))
		base := engine.Confidence(ev, now, p).Confidence
		at := t0.Add(time.Duration(r.IntN(61*24)) * time.Hour)
		more := engine.Confidence(append(append([]engine.Evidence{}, ev...), ok("new", at, "sx")), now, p).Confidence
		if more < base-1e-12 {
			t.Fatalf("adding a success lowered confidence %v → %v (evidence %+v)", base, more, ev)
		}
		if len(ev) > 0 {
			less := engine.Confidence(append(append([]engine.Evidence{}, ev...), fail("new", at, engine.SelectorDrift)), now, p).Confidence
			if less > base+1e-12 {
				t.Fatalf("adding a failure raised confidence %v → %v", base, less)
			}
		}
	}
}

func TestNextStatus(t *testing.T) {
	p := engine.DefaultPolicy()
	S, F := engine.Success, engine.Failure
	tests := []struct {
		name     string
		cur      engine.Status
		sc       engine.Score
		pageText bool
		want     engine.Status
	}{
		{"empty is hypothesis", "", engine.Score{Successes: 1, Confidence: 0.66}, false, engine.Hypothesis},
		{"hypothesis stays below the bar", engine.Hypothesis, engine.Score{Successes: 1, Confidence: 0.66}, false, engine.Hypothesis},
		{"hypothesis → candidate", engine.Hypothesis, engine.Score{Successes: 2, Confidence: 0.75}, false, engine.Candidate},
		{"two successes but low confidence", engine.Hypothesis, engine.Score{Successes: 2, Failures: 3, Confidence: 0.5}, false, engine.Hypothesis},
		{"candidate → verified", engine.Candidate, engine.Score{Successes: 5, Confidence: 0.86, Sessions: 2, LastN: []engine.Outcome{S, S, S}}, false, engine.Verified},
		{"hypothesis → verified in one step", engine.Hypothesis, engine.Score{Successes: 6, Confidence: 0.88, Sessions: 2, LastN: []engine.Outcome{S, S, S}}, false, engine.Verified},
		{"verified needs 2 sessions", engine.Candidate, engine.Score{Successes: 6, Confidence: 0.88, Sessions: 1, LastN: []engine.Outcome{S, S, S}}, false, engine.Candidate},
		{"verified needs last 3 successes", engine.Candidate, engine.Score{Successes: 9, Failures: 1, Confidence: 0.86, Sessions: 3, LastN: []engine.Outcome{S, F, S}}, false, engine.Candidate},
		{"verified needs 5 successes", engine.Candidate, engine.Score{Successes: 4, Confidence: 0.86, Sessions: 3, LastN: []engine.Outcome{S, S, S}}, false, engine.Candidate},
		{"no 0.90 dead zone", engine.Candidate, engine.Score{Successes: 5, Confidence: 0.851, Sessions: 2, LastN: []engine.Outcome{S, S, S}}, false, engine.Verified},
		{"candidate falls back", engine.Candidate, engine.Score{Successes: 2, Failures: 4, Confidence: 0.4}, false, engine.Hypothesis},
		{"verified stays at 0.60", engine.Verified, engine.Score{Successes: 5, Failures: 4, Confidence: 0.60}, false, engine.Verified},
		{"verified → contested below 0.60", engine.Verified, engine.Score{Successes: 5, Failures: 5, Confidence: 0.59}, false, engine.Contested},
		{"contested stays until the verified bar", engine.Contested, engine.Score{Successes: 6, Confidence: 0.80, Sessions: 2, LastN: []engine.Outcome{S, S, S}}, false, engine.Contested},
		{"contested → verified", engine.Contested, engine.Score{Successes: 9, Confidence: 0.86, Sessions: 2, LastN: []engine.Outcome{S, S, S}}, false, engine.Verified},
		{"retired stays", engine.Retired, engine.Score{Successes: 9, Confidence: 0.95, Sessions: 3, LastN: []engine.Outcome{S, S, S}}, false, engine.Retired},
		{"page text needs answer sessions", engine.Candidate, engine.Score{Successes: 6, Confidence: 0.9, Sessions: 1, LastN: []engine.Outcome{S, S, S}}, true, engine.Candidate},
	}
	for _, tt := range tests {
		got, reason := engine.NextStatus(tt.cur, tt.sc, tt.pageText, p)
		if got != tt.want {
			t.Errorf("%s: NextStatus = %s (%s), want %s", tt.name, got, reason, tt.want)
		}
		cur := tt.cur
		if cur == "" {
			cur = engine.Hypothesis
		}
		if (got != cur) != (reason != "") {
			t.Errorf("%s: %s → %s with reason %q: a change needs a reason, no change none", tt.name, cur, got, reason)
		}
	}
}

// TestNextStatusMonotone: more successes never demote. Starting from any
// status, the status reached with one more (newest) success ranks at least as
// high as without it.
func TestNextStatusMonotone(t *testing.T) {
	p := engine.DefaultPolicy()
	rank := map[engine.Status]int{engine.Hypothesis: 0, engine.Contested: 1, engine.Candidate: 1, engine.Verified: 2, engine.Retired: 3}
	r := rand.New(rand.NewPCG(3, 4))
	now := t0.Add(61 * 24 * time.Hour)
	for i := 0; i < 2000; i++ {
		ev := randomEvidence(r, "t", r.IntN(15))
		more := append(append([]engine.Evidence{}, ev...), ok("new", now, fmt.Sprintf("s%d", r.IntN(4))))
		for _, cur := range []engine.Status{engine.Hypothesis, engine.Candidate, engine.Verified, engine.Contested} {
			pageText := r.IntN(2) == 0
			a, _ := engine.NextStatus(cur, engine.Confidence(ev, now, p), pageText, p)
			b, _ := engine.NextStatus(cur, engine.Confidence(more, now, p), pageText, p)
			if rank[b] < rank[a] {
				t.Fatalf("from %s: %s without the success, %s with it (evidence %+v)", cur, a, b, ev)
			}
		}
	}
}

// TestStatusWalk runs an entry through its life with real evidence.
func TestStatusWalk(t *testing.T) {
	p := engine.DefaultPolicy()
	var ev []engine.Evidence
	status := engine.Hypothesis
	at := t0
	step := func(o engine.Evidence) engine.Status {
		ev = append(ev, o)
		at = at.Add(time.Hour)
		status, _ = engine.NextStatus(status, engine.Confidence(ev, at, p), false, p)
		return status
	}
	var path []engine.Status
	for i := 0; i < 7; i++ {
		path = append(path, step(ok(fmt.Sprintf("ok%d", i), at, fmt.Sprintf("s%d", i%2))))
	}
	for i := 0; i < 5; i++ {
		path = append(path, step(fail(fmt.Sprintf("f%d", i), at, engine.SelectorDrift)))
	}
	for i := 0; i < 40; i++ { // (1+S)/(7+S) ≥ 0.85 takes S ≥ 33
		path = append(path, step(ok(fmt.Sprintf("back%d", i), at, fmt.Sprintf("s%d", i%2))))
	}
	want := []engine.Status{engine.Hypothesis, engine.Candidate, engine.Candidate, engine.Candidate, engine.Verified, engine.Verified}
	for i, w := range want {
		if path[i] != w {
			t.Fatalf("walk %v: step %d is %s, want %s", path, i, path[i], w)
		}
	}
	sawContested, endVerified := false, path[len(path)-1] == engine.Verified
	for _, s := range path {
		sawContested = sawContested || s == engine.Contested
	}
	if !sawContested || !endVerified {
		t.Errorf("walk %v: want verified → contested → verified", path)
	}
}

func TestPolicy(t *testing.T) {
	p := engine.DefaultPolicy()
	if err := p.Validate(); err != nil {
		t.Fatalf("DefaultPolicy invalid: %v", err)
	}
	if p.P1 != 0.85 || p.P2 != 0.60 || p.P3 != 0.40 || p.HalfLifeDays != 30 || p.TTLDays != 30 || p.MemoryMaxChars != 2000 {
		t.Errorf("DefaultPolicy %+v differs from DESIGN §4", p)
	}
	if p.FailureWeight(engine.Network) != 0.25 || p.FailureWeight(engine.SelectorDrift) != 1 || p.FailureWeight(engine.AntiBot) != 0 {
		t.Errorf("failure weights: network %v, selector_drift %v, anti_bot %v", p.FailureWeight(engine.Network), p.FailureWeight(engine.SelectorDrift), p.FailureWeight(engine.AntiBot))
	}
	bad := []func(*engine.Policy){
		func(p *engine.Policy) { p.HalfLifeDays = 0 },
		func(p *engine.Policy) { p.P2 = 0.9 },
		func(p *engine.Policy) { p.TTLDays = 0 },
		func(p *engine.Policy) { p.ContestBelow = 0.95 },
		func(p *engine.Policy) { p.MemoryMaxChars = 10 },
		func(p *engine.Policy) { p.EnvironmentFailureWeight = -1 },
	}
	for i, f := range bad {
		q := engine.DefaultPolicy()
		f(&q)
		if err := q.Validate(); err == nil {
			t.Errorf("bad policy %d accepted: %+v", i, q)
		}
	}
}

// TestConfidenceTiesByTraceID: evidence at the same instant is ordered by
// trace id, whatever the slice order, so the open gate is deterministic.
func TestConfidenceTiesByTraceID(t *testing.T) {
	p := engine.DefaultPolicy()
	a, b := ok("01A", t0, "s"), fail("01B", t0, engine.AuthRequired)
	for _, ev := range [][]engine.Evidence{{a, b}, {b, a}} {
		if sc := engine.Confidence(ev, t0, p); sc.OpenGate != engine.AuthRequired {
			t.Errorf("order %s,%s: OpenGate %q, want auth_required (01B is newer)", ev[0].Trace, ev[1].Trace, sc.OpenGate)
		}
	}
}
