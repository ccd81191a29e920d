package consolidate

import (
	"context"
	"testing"
	"time"

	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store/gitrepo"
)

// TestRunWithRememberedListing: once the summary cache remembers the trace
// directories (store.TraceListing), a run folds exactly the traces saved
// since — into a day listed before and into a new day — and the run after
// it finds nothing.
func TestRunWithRememberedListing(t *testing.T) {
	ctx := context.Background()
	st, dir := newRepoTree(t)
	f := newFx(21)
	trace := func(at time.Time, s string) *engine.Trace {
		return f.trace(traceSpec{url: starsURL, intent: "star count", session: s, at: at, ok: true, steps: starsRoute})
	}
	put(t, st, trace(day0.Add(-days(2)), "a"), trace(day0.Add(-days(1)), "b"))
	if res, err := Run(ctx, st, at(day0)); err != nil || res.Plan.Count(KindFold) != 2 {
		t.Fatalf("first run: %v, %v", res, err)
	}
	time.Sleep(racyWindow + 100*time.Millisecond) // the directories may be remembered now
	if res, err := Run(ctx, st, at(day0)); err != nil || !res.Plan.Empty() {
		t.Fatalf("second run: %v, %v", res, err)
	}
	repo, err := gitrepo.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	c := openCache(repo, false)
	repo.Close()
	if l := c.traces(); l == nil || len(l.Dirs) != 3 {
		t.Fatalf("the cache remembers %v, want the domain and its two days", l)
	}

	put(t, st, trace(day0.Add(-days(1)+time.Minute), "c"), trace(day0.Add(-days(3)), "d"))
	res, err := Run(ctx, st, at(day0))
	if err != nil {
		t.Fatal(err)
	}
	if n := res.Plan.Count(KindFold); n != 2 {
		t.Fatalf("after two new traces (one in a remembered day, one in a new day) the run folded %d:\n%s", n, res.Plan)
	}
	if res, err := Run(ctx, st, at(day0)); err != nil || !res.Plan.Empty() {
		t.Fatalf("the run after: %v, %v", res.Plan, err)
	}
}
