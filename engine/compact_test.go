package engine_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store/storetest"
)

var compactNow = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

// run is one piece of evidence `ageDays` before compactNow.
func run(id int, ageDays float64, ok bool, session string) engine.Evidence {
	e := engine.Evidence{Trace: fmt.Sprintf("01JZ%022d", id), At: compactNow.Add(-time.Duration(ageDays * 24 * float64(time.Hour))),
		Outcome: engine.Success, Session: session, URLPattern: "/p/*", Steps: 3, DurationMs: 1000 + int64(id)}
	if !ok {
		e.Outcome, e.Category = engine.Failure, engine.SelectorDrift
	}
	return e
}

func experienceOf(ev ...engine.Evidence) *engine.Experience {
	x := &engine.Experience{Format: engine.Format, Domain: "example.com", Intent: "find the price", IntentKey: "find-the-price", Evidence: ev}
	x.Recount()
	return x
}

func asJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Compacting twice at the same time changes nothing the second time, and
// the totals of the entry stay what they were.
func TestCompactIdempotent(t *testing.T) {
	p := engine.DefaultPolicy()
	var ev []engine.Evidence
	for i := range 300 {
		ev = append(ev, run(i, 300-float64(i), i%7 != 0, fmt.Sprintf("s%d", i%4)))
	}
	x := experienceOf(ev...)
	before := *x
	if !x.Compact(compactNow, p) {
		t.Fatal("nothing compacted in 300 days of evidence")
	}
	if x.Digest == nil || len(x.Evidence) == 0 || len(x.Evidence) >= 300 {
		t.Fatalf("compacted to %d items, digest %+v", len(x.Evidence), x.Digest)
	}
	if x.Attempts != before.Attempts || x.Successes != before.Successes || x.Failures != before.Failures ||
		x.AvgSteps != before.AvgSteps || x.AvgDurationMs != before.AvgDurationMs || !reflect.DeepEqual(x.ByCategory, before.ByCategory) ||
		!x.LastSuccessAt.Equal(before.LastSuccessAt) || !x.LastFailureAt.Equal(before.LastFailureAt) || asJSON(t, x.Patterns) != asJSON(t, before.Patterns) {
		t.Errorf("totals changed:\nbefore %+v\nafter  %+v", before, *x)
	}
	once := asJSON(t, x)
	if x.Compact(compactNow, p) {
		t.Error("a second compaction at the same time changed something")
	}
	if asJSON(t, x) != once {
		t.Error("a second compaction changed the bytes")
	}
	// Later, more decays: it compacts again, into the same digest.
	if !x.Compact(compactNow.Add(30*24*time.Hour), p) || x.Digest.Traces+len(x.Evidence) != 300 {
		t.Errorf("a later compaction: %d in the digest + %d items, want 300", x.Digest.Traces, len(x.Evidence))
	}
	off := p
	off.CompactBelowWeight = 0
	y := experienceOf(ev...)
	if y.Compact(compactNow, off) || y.Digest != nil {
		t.Error("compact_below_weight 0 compacted")
	}
}

// The trust rules read a compacted entry as they read it before: when the
// dropped evidence weighed below the threshold, the tier, status moves,
// confidence and counts agree.
func TestCompactKeepsTrust(t *testing.T) {
	p := engine.DefaultPolicy()
	old := func(from, n int, ok bool, sessions ...string) []engine.Evidence {
		var ev []engine.Evidence
		for i := range n {
			ev = append(ev, run(from+i, 500-float64(i), ok, sessions[i%len(sessions)]))
		}
		return ev
	}
	recent := func(from, n int, ok bool, sessions ...string) []engine.Evidence {
		var ev []engine.Evidence
		for i := range n {
			ev = append(ev, run(from+i, 10-float64(i)*0.5, ok, sessions[i%len(sessions)]))
		}
		return ev
	}
	oldStreak := []engine.Evidence{run(50, 300, false, "a"), run(51, 299, false, "a"), run(52, 298, false, "a"), run(53, 297, false, "a")}
	wrong := run(900, 450, true, "w")
	wrong.Verdict, wrong.Category, wrong.Outcome = engine.Wrong, engine.JudgedWrong, engine.Failure
	gate := run(901, 300, false, "g")
	gate.Category = engine.AntiBot
	cases := []struct {
		name   string
		status engine.Status
		ev     []engine.Evidence
	}{
		{"verified, old and recent successes", engine.Verified, append(old(0, 40, true, "a", "b"), recent(100, 6, true, "c", "d")...)},
		{"sessions only in the old evidence", engine.Candidate, append(old(0, 20, true, "a", "b", "c"), recent(100, 4, true, "a")...)},
		{"old failures, recent successes", engine.Candidate, append(old(0, 30, false, "a"), recent(100, 5, true, "b", "c")...)},
		{"recent failure streak on a verified entry", engine.Verified, append(old(0, 30, true, "a", "b"), recent(100, 3, false, "a")...)},
		{"nothing but old evidence", engine.Verified, old(0, 50, true, "a", "b")},
		{"old streak of failures and nothing live", engine.Verified, append(old(0, 10, true, "a", "b"), oldStreak...)},
		{"an old wrong verdict, no live verdict", engine.Verified, append(append(old(0, 10, true, "a", "b"), wrong), recent(100, 5, true, "c", "d")...)},
		{"an old gate, nothing newer", engine.Candidate, append(old(0, 10, true, "a"), gate)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			x := experienceOf(c.ev...)
			y := x.Clone()
			if !y.Compact(compactNow, p) {
				t.Fatal("nothing to compact")
			}
			for _, now := range []time.Time{compactNow, compactNow.Add(20 * 24 * time.Hour)} {
				a := engine.ScoreOf(x.Evidence, nil, now, p)
				b := engine.ScoreOf(y.Evidence, y.Digest, now, p)
				if a.Successes != b.Successes || a.Failures != b.Failures || a.Sessions != b.Sessions || a.Confirmed != b.Confirmed ||
					a.Streak != b.Streak || !reflect.DeepEqual(a.LastN, b.LastN) || a.OpenWrong != b.OpenWrong || a.OpenGate != b.OpenGate ||
					fmt.Sprintf("%.6f", a.Confidence) != fmt.Sprintf("%.6f", b.Confidence) {
					t.Errorf("at %s:\nbefore %+v\nafter  %+v", now.Format(time.DateOnly), a, b)
				}
				na, wa := engine.NextStatus(c.status, a, false, p)
				nb, wb := engine.NextStatus(c.status, b, false, p)
				if na != nb || wa != wb {
					t.Errorf("status moves differ: %s (%s) vs %s (%s)", na, wa, nb, wb)
				}
			}
			// Through the engine: the same recall.
			got := func(x *engine.Experience) *engine.Recall {
				st := storetest.NewMemStore()
				f := storetest.NewFacts("example.com", "find the price")
				f.Status, f.URLPatterns = c.status, []string{"/p/*"}
				if _, err := st.PutFacts(ctx, f); err != nil {
					t.Fatal(err)
				}
				if _, err := st.PutExperience(ctx, x); err != nil {
					t.Fatal(err)
				}
				e := engine.New(st)
				e.Now = func() time.Time { return compactNow }
				r, err := e.Query(ctx, "https://example.com/p/1", "find the price")
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
			ra, rb := got(x), got(y)
			if ra.Tier != rb.Tier || ra.Confidence != rb.Confidence || ra.SuccessCount != rb.SuccessCount || ra.FailureCount != rb.FailureCount ||
				ra.JudgedWrongCount != rb.JudgedWrongCount || !reflect.DeepEqual(ra.Warnings, rb.Warnings) || !reflect.DeepEqual(ra.Reasons, rb.Reasons) {
				t.Errorf("recall differs:\nbefore %s %.2f %v %v\nafter  %s %.2f %v %v", ra.Tier, ra.Confidence, ra.Reasons, ra.Warnings, rb.Tier, rb.Confidence, rb.Reasons, rb.Warnings)
			}
		})
	}
}

// Merging copies of an entry where one side, both or neither compacted
// loses nothing and counts nothing twice.
func TestMergeCompacted(t *testing.T) {
	p := engine.DefaultPolicy()
	var base []engine.Evidence
	for i := range 60 {
		base = append(base, run(i, 420-float64(i)*5, i%5 != 0, fmt.Sprintf("s%d", i%3)))
	}
	ours1, theirs1 := run(500, 1, true, "o"), run(501, 2, false, "t")
	// The truth: every run once.
	truth := experienceOf(append(append(append([]engine.Evidence{}, base...), ours1), theirs1)...)
	want := engine.ScoreOf(truth.Evidence, nil, compactNow, p)

	mk := func(compact bool, extra ...engine.Evidence) *engine.Experience {
		x := experienceOf(append(append([]engine.Evidence{}, base...), extra...)...)
		if compact && !x.Compact(compactNow, p) {
			t.Fatal("nothing compacted")
		}
		return x
	}
	for _, c := range []struct {
		name                   string
		base, ours, theirs     bool // which compacted
		baseLater, oursEarlier bool
	}{
		{name: "ours compacted", ours: true},
		{name: "theirs compacted", theirs: true},
		{name: "both compacted", ours: true, theirs: true},
		{name: "base compacted, neither side again", base: true, ours: true, theirs: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := mk(c.base)
			o := mk(c.ours, ours1)
			th := mk(c.theirs, theirs1)
			m, err := engine.MergeExperience(b, o, th, &engine.MergeOptions{Policy: &p})
			if err != nil {
				t.Fatal(err)
			}
			got := engine.ScoreOf(m.Evidence, m.Digest, compactNow, p)
			if got.Successes != want.Successes || got.Failures != want.Failures || got.Sessions != want.Sessions ||
				fmt.Sprintf("%.6f", got.Confidence) != fmt.Sprintf("%.6f", want.Confidence) || !reflect.DeepEqual(got.LastN, want.LastN) {
				t.Errorf("merged score %+v, want %+v", got, want)
			}
			if m.Attempts != truth.Attempts || m.Successes != truth.Successes || m.Failures != truth.Failures {
				t.Errorf("merged totals %d/%d/%d, want %d/%d/%d", m.Attempts, m.Successes, m.Failures, truth.Attempts, truth.Successes, truth.Failures)
			}
			// Merging the result with itself changes nothing.
			again, err := engine.MergeExperience(m, m, m, &engine.MergeOptions{Policy: &p})
			if err != nil {
				t.Fatal(err)
			}
			if asJSON(t, again.Digest) != asJSON(t, m.Digest) || len(again.Evidence) != len(m.Evidence) {
				t.Errorf("merge of a result with itself changed it:\n%s\n%s", asJSON(t, m.Digest), asJSON(t, again.Digest))
			}
		})
	}
}
