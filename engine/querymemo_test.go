package engine_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store/storetest"
)

// watchedMem is a MemStore whose generation moves only when the test moves
// it (bump), as the disk store's moves with every change on disk.
type watchedMem struct {
	*storetest.MemStore
	gen atomic.Uint64
}

func (w *watchedMem) Generation(_ context.Context, _ string) (uint64, bool) {
	return w.gen.Load(), true
}

func (w *watchedMem) bump() { w.gen.Add(1) }

// decayTree: a verified entry whose confidence falls through P1, P2, P3
// and P4 within a month (a half-life of 2 days; successes in two sessions,
// a failure), and two other intents sharing its words, so that below P2
// the recall carries related routes, each decaying too.
func decayTree(t *testing.T, w *watchedMem) {
	t.Helper()
	cfg := engine.DefaultConfig()
	cfg.Policy.HalfLifeDays = 2
	w.SetConfig(cfg)
	for i, intent := range []string{"star count", "star count of the repo", "star count history"} {
		key := engine.IntentKey(intent)
		f := &engine.Facts{Format: 1, Domain: "github.com", Intent: intent, IntentKey: key, Status: engine.Verified,
			URLPatterns: []string{"/*/*"}, Steps: []engine.Step{{Seq: 1, Action: "get_text", Selector: fmt.Sprintf("#stars-%d", i)}},
			Provenance: engine.Provenance{LastVerified: t0.Add(-time.Hour)}}
		if _, err := w.PutFacts(ctx, f); err != nil {
			t.Fatal(err)
		}
		x := &engine.Experience{Format: 1, Domain: "github.com", Intent: intent, IntentKey: key}
		for j := 0; j < 10-3*i; j++ {
			x.Evidence = append(x.Evidence, ok(fmt.Sprintf("T%d%02d", i, j), t0.Add(-time.Duration(j*7+i)*time.Hour), fmt.Sprintf("s%d", j%2)))
		}
		x.Evidence = append(x.Evidence, fail(fmt.Sprintf("T%dF", i), t0.Add(-50*time.Hour), engine.SelectorDrift))
		if _, err := w.PutExperience(ctx, x); err != nil {
			t.Fatal(err)
		}
	}
}

// TestKeptAnswerFollowsDecay: over a month of queries every 55 minutes, an engine that
// keeps answers answers exactly as one that computes every query — as the
// entry's confidence and its related routes' decay through every tier and
// every second decimal — and it did keep answers.
func TestKeptAnswerFollowsDecay(t *testing.T) {
	w := &watchedMem{MemStore: storetest.NewMemStore()}
	decayTree(t, w)
	now := t0
	clock := func() time.Time { return now }
	kept := &engine.Engine{Store: w, Now: clock}
	plain := &engine.Engine{Store: w.MemStore, Now: clock} // no ChangeWatch: computes every query
	tiers := map[engine.Tier]bool{}
	outputs := map[string]bool{}
	n := 0
	for m := 0; m < 30*24*60; m += 55 {
		now = t0.Add(time.Duration(m) * time.Minute)
		n++
		got, wj := sameQuery(t, fmt.Sprintf("after %v the kept answer differs from the computed one", now.Sub(t0)),
			plain, kept, "https://github.com/pemdev/pem", "star count")
		tiers[got.Tier] = true
		outputs[wj] = true
		// The copy handed out is the caller's: changing it changes nothing kept.
		got.Steps = append(got.Steps, engine.Step{Action: "click"})
		got.PrimarySelectors["x"] = "y"
		got.Reasons[0] = "changed"
		if len(got.RelatedRoutes) > 0 {
			got.RelatedRoutes[0].Steps[0].Selector = "changed"
		}
	}
	for _, tier := range []engine.Tier{engine.P1, engine.P2, engine.P3, engine.P4} {
		if !tiers[tier] {
			t.Errorf("the month never reached %s (tiers seen %v): the test does not cross every threshold", tier, tiers)
		}
	}
	served, computed := kept.KeptAnswers()
	if served == 0 || computed < len(outputs)-1 {
		t.Errorf("served %d kept answers, computed %d, for %d distinct answers: want some served, and one computed per distinct answer at least", served, computed, len(outputs))
	}
	t.Logf("%d queries: %d served kept, %d computed, %d distinct answers", n, served, computed, len(outputs))
}

// TestKeptAnswerDropped: a new generation (something changed), a clock
// that went back, or evidence from the future: the answer is computed.
func TestKeptAnswerDropped(t *testing.T) {
	w := &watchedMem{MemStore: storetest.NewMemStore()}
	decayTree(t, w)
	now := t0
	clock := func() time.Time { return now }
	kept := &engine.Engine{Store: w, Now: clock}
	plain := &engine.Engine{Store: w.MemStore, Now: clock}
	same := func(what string) {
		t.Helper()
		sameQuery(t, what+": the kept answer differs", plain, kept, "https://github.com/pemdev/pem", "star count")
	}
	same("first")
	same("second")
	same("third")
	if served, _ := kept.KeptAnswers(); served == 0 {
		t.Fatal("nothing was kept")
	}
	f, err := w.Facts(ctx, "github.com", "star-count")
	if err != nil {
		t.Fatal(err)
	}
	f.Status = engine.Contested
	w.PutFacts(ctx, f)
	w.bump()
	same("after the facts changed")
	now = t0.Add(-24 * time.Hour)
	same("the clock went back a day")
	x, err := w.Experience(ctx, "github.com", "star-count")
	if err != nil {
		t.Fatal(err)
	}
	x.Evidence = append(x.Evidence, ok("TFUTURE", t0.Add(48*time.Hour), "s9"))
	w.PutExperience(ctx, x)
	w.bump()
	for _, h := range []int{0, 1, 47, 48, 49, 100} {
		now = t0.Add(time.Duration(h) * time.Hour)
		same(fmt.Sprintf("evidence from the future, %d hours on", h))
	}
}
