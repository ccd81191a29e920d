package engine_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store/storetest"
)

// randomExperience: n evidence items over the 90 (or 400) days before t0 — successes
// and failures of every kind, sessions, lessons, verdicts, a duplicate —
// compacted (a digest) when compact.
func randomExperience(r *rand.Rand, n int, compact bool, p engine.Policy) *engine.Experience {
	x := &engine.Experience{Format: 1, Domain: "github.com", Intent: "star count", IntentKey: "star-count"}
	span := 90
	if compact {
		span = 400 // past the compaction's age (weight 0.01: ~200 days)
	}
	cats := []engine.FailureCategory{engine.SelectorDrift, engine.AntiBot, engine.Timing, engine.Aborted, engine.PlannerError, engine.JudgedWrong}
	for i := 0; i < n; i++ {
		e := engine.Evidence{Trace: fmt.Sprintf("T%05d", i), At: t0.Add(-time.Duration(r.IntN(span*24*60)) * time.Minute),
			Outcome: engine.Success, Session: fmt.Sprintf("s%d", r.IntN(4)), Steps: 1 + r.IntN(3), URLPattern: "/*/*"}
		switch k := r.IntN(10); {
		case k < 3:
			e.Outcome, e.Category = engine.Failure, cats[r.IntN(len(cats))]
		case k == 3:
			e.Steps = 0 // a lesson
		case k == 4:
			e.Verdict = engine.Right
		case k == 5:
			e.Verdict = engine.Wrong
		}
		x.Evidence = append(x.Evidence, e)
	}
	if n > 2 {
		x.Evidence = append(x.Evidence, x.Evidence[1]) // counted once
	}
	x.Patterns = map[string]*engine.Counts{"/*/*": {OK: 1}}
	if compact {
		x.Compact(t0, p)
	}
	return x
}

// TestSummaryScoresAsEvidence: the score a summary gives at any later time
// is the score summed over the evidence — every count and outcome equal,
// the confidence equal to rounding (1e-12), so equal where it is printed
// (two decimals) and decided (the tier thresholds) — or it declines; and
// it declines before the newest evidence and under another policy.
func TestSummaryScoresAsEvidence(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	p := engine.DefaultConfig().Policy
	declined, checked, digests := 0, 0, 0
	for round := 0; round < 300; round++ {
		x := randomExperience(r, r.IntN(60), round%3 == 0, p)
		sum := engine.Summarize(x, p)
		if x.Digest != nil {
			digests++
		}
		for _, days := range []float64{0, 0.01, 1, 7, 29.9, 45, 120, 400} {
			now := t0.Add(time.Duration(days * 24 * float64(time.Hour)))
			want := engine.ScoreOf(x.Evidence, x.Digest, now, p)
			got, ok := sum.ScoreAt(now, p)
			if !ok {
				declined++
				continue
			}
			checked++
			if math.Abs(got.Confidence-want.Confidence) > 1e-12 {
				t.Fatalf("round %d, %v days: confidence %v from the summary, %v from the evidence", round, days, got.Confidence, want.Confidence)
			}
			if math.Round(got.Confidence*100) != math.Round(want.Confidence*100) || fmt.Sprintf("%.2f", got.Confidence) != fmt.Sprintf("%.2f", want.Confidence) {
				t.Fatalf("round %d, %v days: prints %.2f from the summary, %.2f from the evidence", round, days, got.Confidence, want.Confidence)
			}
			got.S, got.F, got.Confidence = want.S, want.F, want.Confidence
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("round %d, %v days: score from the summary\n %+v\nfrom the evidence\n %+v", round, days, got, want)
			}
		}
	}
	if checked < 2000 || declined > checked/100 || digests < 50 {
		t.Errorf("%d scores checked (%d experiences with a digest), %d declined: want most answered, and digests", checked, digests, declined)
	}
	x := randomExperience(r, 20, false, p)
	sum := engine.Summarize(x, p)
	if _, ok := sum.ScoreAt(sum.Ref.Add(-time.Second), p); ok {
		t.Error("a time before the newest evidence: the summary answered")
	}
	q := p
	q.HalfLifeDays = 7
	if _, ok := sum.ScoreAt(t0, q); ok {
		t.Error("another policy: the summary answered")
	}
}

// summarizing is a MemStore that offers summaries (computed on each call).
type summarizing struct{ *storetest.MemStore }

func (s summarizing) ExperienceSummary(ctx context.Context, domain, key string, p engine.Policy) (*engine.ExperienceSummary, error) {
	x, err := s.Experience(ctx, domain, key)
	if err != nil {
		return nil, err
	}
	return engine.Summarize(x, p), nil
}

// TestRelatedRoutesFromSummaries: a query whose related routes are scored
// from summaries answers as one that decodes their evidence, over a month
// in which they decay through every tier.
func TestRelatedRoutesFromSummaries(t *testing.T) {
	w := &watchedMem{MemStore: storetest.NewMemStore()}
	decayTree(t, w)
	now := t0
	clock := func() time.Time { return now }
	sum := &engine.Engine{Store: summarizing{w.MemStore}, Now: clock}
	plain := &engine.Engine{Store: w.MemStore, Now: clock}
	related := 0
	for m := 0; m < 30*24*60; m += 240 {
		now = t0.Add(time.Duration(m) * time.Minute)
		got, _ := sameQuery(t, fmt.Sprintf("after %v, with summaries", now.Sub(t0)), plain, sum, "https://github.com/pemdev/pem", "star count")
		related += len(got.RelatedRoutes)
	}
	if related == 0 {
		t.Error("no related route was ever served: the test checks nothing")
	}
}
