package engine

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"
)

var mergeT0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// mergeTrace makes a trace id n clicking the given selectors (ok or not).
func mergeTrace(n int, outcome Outcome, sels ...string) *Trace {
	t := &Trace{
		ID: fmt.Sprintf("01J%023d", n), Domain: "example.com", Intent: "find stars", IntentKey: "find-stars",
		URL: "https://example.com/r", URLPattern: "example.com/r", Outcome: outcome, Session: fmt.Sprintf("s%d", n%3),
		StartedAt: mergeT0.Add(time.Duration(n) * time.Minute), DurationMs: int64(100 * n),
	}
	t.Steps = append(t.Steps, Step{Seq: 1, Action: "navigate", URL: t.URL, OK: true})
	for i, s := range sels {
		t.Steps = append(t.Steps, Step{Seq: i + 2, Action: "click", Selector: s, OK: outcome == Success || i < len(sels)-1})
	}
	if outcome == Failure {
		t.Error = "element not found"
		t.FailureCategory = SelectorDrift
	}
	return t
}

func mergeFold(ts ...*Trace) *Experience {
	x := &Experience{}
	for _, t := range ts {
		x.Fold(t)
	}
	return x
}

func mergeIDs(x *Experience) []string {
	var ids []string
	for _, e := range x.Evidence {
		ids = append(ids, e.Trace)
	}
	sort.Strings(ids)
	return ids
}

func TestMergeExperienceUnionNotSum(t *testing.T) {
	tr := map[int]*Trace{}
	for i := 1; i <= 9; i++ {
		o := Success
		if i%4 == 0 {
			o = Failure
		}
		tr[i] = mergeTrace(i, o, "#stars", "#forks")
	}
	lookup := func(e Evidence) (*Trace, bool) {
		for _, t := range tr {
			if t.ID == e.Trace {
				return t, true
			}
		}
		return nil, false
	}
	cases := []struct {
		name               string
		base, ours, theirs []int
		lookup             bool
	}{
		{"disjoint additions", []int{1, 2}, []int{1, 2, 3, 4}, []int{1, 2, 5, 6}, false},
		{"no ancestor", nil, []int{1, 2}, []int{3}, false},
		{"same trace folded on both sides, trace readable", []int{1}, []int{1, 2, 3}, []int{1, 3, 4}, true},
		{"identical sides", []int{1}, []int{1, 2}, []int{1, 2}, true},
		{"one side unchanged", []int{1, 2}, []int{1, 2}, []int{1, 2, 7, 8, 9}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pick := func(ns []int) []*Trace {
				var out []*Trace
				for _, n := range ns {
					out = append(out, tr[n])
				}
				return out
			}
			var base *Experience
			if c.base != nil {
				base = mergeFold(pick(c.base)...)
			}
			ours, theirs := mergeFold(pick(c.ours)...), mergeFold(pick(c.theirs)...)
			opt := &MergeOptions{}
			if c.lookup {
				opt.Trace = lookup
			}
			got, err := MergeExperience(base, ours, theirs, opt)
			if err != nil {
				t.Fatal(err)
			}
			// The reference: one experience that folded the union of traces.
			union := map[int]bool{}
			for _, n := range append(append([]int{}, c.ours...), c.theirs...) {
				union[n] = true
			}
			var all []int
			for n := range union {
				all = append(all, n)
			}
			sort.Ints(all)
			want := mergeFold(pick(all)...)
			if !reflect.DeepEqual(mergeIDs(got), mergeIDs(want)) {
				t.Fatalf("evidence = %v, want the union %v", mergeIDs(got), mergeIDs(want))
			}
			if got.Attempts != want.Attempts || got.Successes != want.Successes || got.Failures != want.Failures {
				t.Errorf("counts = %d/%d/%d, want %d/%d/%d", got.Attempts, got.Successes, got.Failures, want.Attempts, want.Successes, want.Failures)
			}
			if !reflect.DeepEqual(got.ByCategory, want.ByCategory) || !reflect.DeepEqual(got.Patterns, want.Patterns) {
				t.Errorf("by_category/patterns = %v/%v, want %v/%v", got.ByCategory, got.Patterns, want.ByCategory, want.Patterns)
			}
			for name, w := range want.Selectors {
				g := got.Selectors[name]
				if g == nil || g.OK != w.OK || g.Fail != w.Fail || !g.LastOK.Equal(w.LastOK) || !g.LastFail.Equal(w.LastFail) {
					t.Errorf("selector %s = %+v, want %+v", name, g, w)
				}
			}
			// Order of the sides does not matter.
			rev, err := MergeExperience(base, theirs, ours, opt)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(rev.Evidence, got.Evidence) || !reflect.DeepEqual(rev.Selectors, got.Selectors) {
				t.Errorf("merge is not symmetric")
			}
		})
	}
}

func TestMergeExperienceOverlapWithoutTraceStaysBounded(t *testing.T) {
	a, b, c := mergeTrace(1, Success, "#x"), mergeTrace(2, Success, "#x"), mergeTrace(3, Success, "#x")
	base := mergeFold(a)
	ours, theirs := mergeFold(a, b), mergeFold(a, b, c) // b folded on both sides, its file gone
	got, err := MergeExperience(base, ours, theirs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Attempts != 3 {
		t.Fatalf("attempts = %d, want 3 (the union)", got.Attempts)
	}
	// ours+theirs-base = 2+3-1 = 4 over-counts by one; bounded by the sum and the larger side.
	if st := got.Selectors["#x"]; st.OK < 3 || st.OK > 5 {
		t.Fatalf("#x ok = %d, want within [3, 5]", st.OK)
	}
}

func TestMergeExperienceHonoursRemoval(t *testing.T) {
	a, b := mergeTrace(1, Success), mergeTrace(2, Success)
	base := mergeFold(a, b)
	ours := mergeFold(a) // a side dropped b on purpose
	theirs := mergeFold(a, b, mergeTrace(3, Success))
	got, err := MergeExperience(base, ours, theirs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ids := mergeIDs(got); !reflect.DeepEqual(ids, []string{a.ID, mergeTrace(3, Success).ID}) {
		t.Fatalf("evidence = %v", ids)
	}
}

func TestMergeExperienceRefusesDifferentEntries(t *testing.T) {
	o := mergeFold(mergeTrace(1, Success))
	th := mergeFold(mergeTrace(2, Success))
	th.IntentKey = "other"
	if _, err := MergeExperience(nil, o, th, nil); err == nil {
		t.Fatal("merging two different entries succeeded")
	}
}

func mergeFacts(status Status, mod func(*Facts)) *Facts {
	f := &Facts{Format: 1, Domain: "example.com", Intent: "find stars", IntentKey: "find-stars", Status: status,
		URLPatterns: []string{"example.com/r"},
		Selectors:   map[string]Selector{"stars": {Primary: "#stars"}},
		Steps:       []Step{{Seq: 1, Action: "navigate", URL: "https://example.com/r", OK: true}, {Seq: 2, Action: "get_text", Selector: "#stars", OK: true}},
	}
	if mod != nil {
		mod(f)
	}
	f.Revision = f.ContentHash()
	return f
}

func TestMergeFactsUnverifiedFieldByField(t *testing.T) {
	base := mergeFacts(Candidate, func(f *Facts) {
		f.InteractionHints = []string{"wait for the list", "old hint"}
		f.KnownBlockers = []Blocker{{Type: "cookie_banner", Selector: "#cookies", Action: "click"}}
	})
	ours := mergeFacts(Candidate, func(f *Facts) {
		f.InteractionHints = []string{"wait for the list", "scroll first"} // removed "old hint"
		f.KnownBlockers = []Blocker{{Type: "cookie_banner", Selector: "#cookies", Action: "click"}}
		f.Selectors["forks"] = Selector{Primary: "#forks"}
		f.AntiPatterns = []string{".old-stars"}
		f.Provenance.Traces = []string{"A", "B"}
	})
	theirs := mergeFacts(Hypothesis, func(f *Facts) {
		f.InteractionHints = []string{"wait for the list", "old hint", "dismiss the banner"}
		f.KnownBlockers = []Blocker{{Type: "cookie_banner", Selector: "#cookies", Action: "click", Note: "appears once"}, {Type: "login_wall"}}
		f.Selectors["watchers"] = Selector{Primary: "#watchers"}
		f.AntiPatterns = []string{".old-stars", "#sidebar"}
		f.Provenance.Traces = []string{"B", "C"}
		f.History = []Transition{{From: Candidate, To: Hypothesis, At: mergeT0, Reason: "confidence fell"}}
		f.SuccessCondition = &SuccessCondition{URLPattern: "/owner/repo", Selector: "#stars", AnswerType: "number"}
	})
	got, err := MergeFacts(base, ours, theirs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c := got.SuccessCondition; c == nil || c.Selector != "#stars" || c.AnswerType != "number" {
		t.Errorf("success condition = %+v, want the one side's new condition", c)
	}
	if want := []string{"wait for the list", "scroll first", "dismiss the banner"}; !reflect.DeepEqual(got.InteractionHints, want) {
		t.Errorf("hints = %q, want %q (union; the removed one stays removed)", got.InteractionHints, want)
	}
	if len(got.Selectors) != 3 || got.Selectors["forks"].Primary != "#forks" || got.Selectors["watchers"].Primary != "#watchers" {
		t.Errorf("selectors = %v, want stars, forks, watchers", got.Selectors)
	}
	if want := []string{".old-stars", "#sidebar"}; !reflect.DeepEqual(got.AntiPatterns, want) {
		t.Errorf("anti-patterns = %q, want %q", got.AntiPatterns, want)
	}
	if len(got.KnownBlockers) != 2 || got.KnownBlockers[0].Note != "appears once" {
		t.Errorf("blockers = %+v, want the changed note and the new login wall", got.KnownBlockers)
	}
	if got.Status != Hypothesis {
		t.Errorf("status = %s, want the lower of candidate and hypothesis", got.Status)
	}
	if !reflect.DeepEqual(got.Provenance.Traces, []string{"A", "B", "C"}) {
		t.Errorf("provenance traces = %v", got.Provenance.Traces)
	}
	if len(got.History) != 1 {
		t.Errorf("history = %v", got.History)
	}
	if got.Revision != got.ContentHash() {
		t.Errorf("revision %s does not name the merged content %s", got.Revision, got.ContentHash())
	}
	// Both orders give the same content.
	rev, err := MergeFacts(base, theirs, ours, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(mergeSet(rev.InteractionHints), mergeSet(got.InteractionHints)) || !reflect.DeepEqual(rev.Selectors, got.Selectors) ||
		!reflect.DeepEqual(mergeSet(rev.AntiPatterns), mergeSet(got.AntiPatterns)) || len(rev.KnownBlockers) != len(got.KnownBlockers) || rev.Status != got.Status {
		t.Errorf("the merge depends on the order of the sides beyond list order: %+v vs %+v", rev, got)
	}
}

func TestMergeFactsVerifiedWins(t *testing.T) {
	base := mergeFacts(Candidate, nil)
	verified := mergeFacts(Verified, func(f *Facts) {
		f.Provenance.LastVerified = mergeT0
	})
	edited := mergeFacts(Candidate, func(f *Facts) {
		f.Selectors["stars"] = Selector{Primary: ".stars-new"}
		f.InteractionHints = []string{"a hint"}
	})
	for _, order := range []bool{true, false} {
		o, th := verified, edited
		if !order {
			o, th = edited, verified
		}
		got, err := MergeFacts(base, o, th, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != Verified || got.ContentHash() != verified.ContentHash() || got.Revision != verified.Revision {
			t.Errorf("order %v: got status %s content %s, want the verified side's frozen content %s", order, got.Status, got.ContentHash(), verified.ContentHash())
		}
		if !got.Provenance.LastVerified.Equal(mergeT0) {
			t.Errorf("last_verified lost")
		}
	}
}

func TestMergeFactsTwoVerifiedRevisions(t *testing.T) {
	now := func() time.Time { return mergeT0.Add(48 * time.Hour) }
	a := mergeFacts(Verified, func(f *Facts) { f.Provenance.Traces = []string{"1", "2", "3"} })
	b := mergeFacts(Verified, func(f *Facts) {
		f.Selectors["stars"] = Selector{Primary: "#star-count"}
		f.Provenance.Traces = []string{"4", "5"}
	})
	super := mergeFacts(Verified, func(f *Facts) {
		f.Selectors["stars"] = Selector{Primary: "[data-stars]"}
		f.Supersedes = a.Revision
	})
	cases := []struct {
		name     string
		x, y     *Facts
		keep     *Facts
		dropped  string
		whyMatch string
	}{
		{"more evidence", a, b, a, b.Revision, "more evidence"},
		{"supersedes", a, super, super, a.Revision, "supersedes"},
	}
	for _, c := range cases {
		for _, swap := range []bool{false, true} {
			x, y := c.x, c.y
			if swap {
				x, y = y, x
			}
			got, err := MergeFacts(nil, x, y, &MergeOptions{Now: now})
			if err != nil {
				t.Fatal(err)
			}
			if got.Revision != c.keep.Revision || got.ContentHash() != c.keep.ContentHash() {
				t.Errorf("%s (swap %v): kept %s, want %s", c.name, swap, got.Revision, c.keep.Revision)
			}
			if got.Status != Verified {
				t.Errorf("%s: status %s", c.name, got.Status)
			}
			last := got.History[len(got.History)-1]
			if !last.At.Equal(now()) || !strings.Contains(last.Reason, c.dropped) || !strings.Contains(last.Reason, c.whyMatch) {
				t.Errorf("%s: history note %+v does not record the dropped revision %s", c.name, last, c.dropped)
			}
		}
	}
}

func TestMergeStatus(t *testing.T) {
	cases := []struct{ a, b, want Status }{
		{Hypothesis, Candidate, Hypothesis},
		{Candidate, Candidate, Candidate},
		{Contested, Candidate, Contested},
		{Contested, Verified, Verified},
		{Retired, Candidate, Retired},
		{"", Candidate, Candidate},
	}
	for _, c := range cases {
		if got := mergeStatus(c.a, c.b); got != c.want {
			t.Errorf("mergeStatus(%s, %s) = %s, want %s", c.a, c.b, got, c.want)
		}
		if got := mergeStatus(c.b, c.a); got != c.want {
			t.Errorf("mergeStatus(%s, %s) = %s, want %s", c.b, c.a, got, c.want)
		}
	}
}

func TestMergeFactsAnswersNewerObservationWins(t *testing.T) {
	base := mergeFacts(Candidate, func(f *Facts) {
		f.Answers = []Answer{{Query: "stars", Value: "10", ObservedAt: mergeT0, Freshness: Volatile}}
	})
	o := mergeFacts(Candidate, func(f *Facts) {
		f.Answers = []Answer{{Query: "stars", Value: "12", ObservedAt: mergeT0.Add(time.Hour), Freshness: Volatile}}
	})
	th := mergeFacts(Candidate, func(f *Facts) {
		f.Answers = []Answer{{Query: "stars", Value: "15", ObservedAt: mergeT0.Add(2 * time.Hour), Freshness: Volatile},
			{Query: "branch", Value: "main", Freshness: Stable}}
	})
	for _, swap := range []bool{false, true} {
		x, y := o, th
		if swap {
			x, y = th, o
		}
		got, err := MergeFacts(base, x, y, nil)
		if err != nil {
			t.Fatal(err)
		}
		vals := map[string]string{}
		for _, a := range got.Answers {
			vals[a.Query] = a.Value
		}
		if vals["stars"] != "15" || vals["branch"] != "main" || len(vals) != 2 {
			t.Errorf("swap %v: answers = %v, want stars=15 (newer) and branch=main", swap, vals)
		}
	}
}

func TestMergeCount(t *testing.T) {
	cases := []struct {
		name                           string
		base, ours, theirs, overlap, n int
	}{
		{"disjoint additions add up", 1, 2, 3, 0, 4},
		{"a trace folded on both sides counts once", 1, 2, 3, 1, 3},
		{"no ancestor", 0, 2, 3, 0, 5},
		{"never below the larger side", 0, 2, 3, 9, 3},
		{"never above the sum of the sides", 5, 2, 3, 0, 3},
		{"unchanged", 4, 4, 4, 0, 4},
	}
	for _, c := range cases {
		if got := mergeCount(c.base, c.ours, c.theirs, c.overlap); got != c.n {
			t.Errorf("%s: mergeCount(%d, %d, %d, %d) = %d, want %d", c.name, c.base, c.ours, c.theirs, c.overlap, got, c.n)
		}
	}
}

// TestMergeFactsSymmetric: the order of the sides never changes what is
// kept (lists keep ours' order, then theirs' additions, so only their order
// may differ).
func TestMergeFactsSymmetric(t *testing.T) {
	setHash := func(f *Facts) string {
		c := f.Clone()
		sort.Strings(c.InteractionHints)
		return c.ContentHash()
	}
	base := mergeFacts(Candidate, func(f *Facts) { f.InteractionHints = []string{"old"} })
	hints := func(status Status, hs ...string) *Facts {
		return mergeFacts(status, func(f *Facts) { f.InteractionHints = hs })
	}
	verifiedA := mergeFacts(Verified, func(f *Facts) { f.Provenance.Traces = []string{"1", "2"} })
	verifiedB := mergeFacts(Verified, func(f *Facts) {
		f.Selectors["stars"] = Selector{Primary: "#star-count"}
		f.Provenance.Traces = []string{"1"}
	})
	cases := []struct {
		name     string
		a, b     *Facts
		want     Status
		wantHash string // the content with a as ours; "" to skip
	}{
		{"two candidates add different hints", hints(Candidate, "old", "a"), hints(Candidate, "old", "b"), Candidate, hints(Candidate, "old", "a", "b").ContentHash()},
		{"a removal and an addition", hints(Candidate), hints(Candidate, "old", "b"), Candidate, hints(Candidate, "b").ContentHash()},
		{"hypothesis and candidate: the lower", hints(Hypothesis, "old"), hints(Candidate, "old"), Hypothesis, ""},
		{"verified against an edit: frozen content wins", verifiedA, hints(Candidate, "edited"), Verified, verifiedA.ContentHash()},
		{"two verified revisions: more evidence wins", verifiedA, verifiedB, Verified, verifiedA.ContentHash()},
	}
	now := func() time.Time { return mergeT0 }
	for _, c := range cases {
		ab, err := MergeFacts(base, c.a, c.b, &MergeOptions{Now: now})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		ba, err := MergeFacts(base, c.b, c.a, &MergeOptions{Now: now})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if setHash(ab) != setHash(ba) || ab.Status != ba.Status || !reflect.DeepEqual(ab.History, ba.History) {
			t.Errorf("%s: the order of the sides matters: %s %q vs %s %q", c.name, ab.Status, ab.InteractionHints, ba.Status, ba.InteractionHints)
		}
		if ab.Status != c.want {
			t.Errorf("%s: status %s, want %s", c.name, ab.Status, c.want)
		}
		if c.wantHash != "" && ab.ContentHash() != c.wantHash {
			t.Errorf("%s: content %s (hints %q), want %s", c.name, ab.ContentHash(), ab.InteractionHints, c.wantHash)
		}
	}
}
