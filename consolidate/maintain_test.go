package consolidate

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store/gitrepo"
	"github.com/pemdev/pem/store/storetest/gitcli"
)

// TestConsolidationRepacksAndStaysIdempotent: with pem.yaml's repack_packs
// at 2, consolidations that each write a pack repack the store once it has
// more than 2 packs; the packs stay bounded, git fsck --strict finds every
// object, and a consolidation after the repack still does nothing a second
// time (same tree, same HEAD).
func TestConsolidationRepacksAndStaysIdempotent(t *testing.T) {
	ctx := context.Background()
	st, dir := newRepoTree(t)
	setPolicy(t, dir, "repack_packs", "20", "2")
	packs := func() int {
		m, _ := filepath.Glob(filepath.Join(dir, ".git", "objects", "pack", "pack-*.idx"))
		return len(m)
	}
	f := newFx(5)
	repacked := 0
	for run := 0; run < 6; run++ {
		now := day0.Add(days(float64(run)))
		var ts []*engine.Trace
		for i := 0; i < 12; i++ {
			ts = append(ts, f.trace(traceSpec{url: starsURL, intent: "star count", session: fmt.Sprintf("s%d", i%3),
				at: now.Add(-time.Hour + time.Duration(i)*time.Minute), ok: true, steps: starsRoute}))
		}
		put(t, st, ts...)
		res, err := Run(ctx, st, at(now))
		if err != nil {
			t.Fatal(err)
		}
		// Runs after the first only add evidence of the same route: the state
		// ref takes the commit, and main's facts do not move.
		if len(res.Commits) == 0 && res.State == "" || res.Maintenance == nil {
			t.Fatalf("run %d: commits %v, state %q, maintenance %v", run, res.Commits, res.State, res.Maintenance)
		}
		if len(res.Plan.Warnings) > 0 {
			t.Fatalf("run %d warned: %v", run, res.Plan.Warnings)
		}
		if res.Maintenance.Repacked {
			repacked++
		}
		if n := packs(); n > 2 {
			t.Fatalf("run %d: %d packs after maintenance (%+v), want at most 2", run, n, res.Maintenance)
		}
		assertGitClean(t, dir)

		// Idempotent after the repack: nothing to do, nothing written.
		head, digest := gitcli.Run(t, dir, "rev-parse", "HEAD"), treeDigest(t, dir)
		again, err := Run(ctx, st, at(now))
		if err != nil {
			t.Fatal(err)
		}
		if !again.Plan.Empty() || len(again.Commits) != 0 || len(again.Written) != 0 {
			t.Fatalf("run %d again did something: %s", run, again.Plan)
		}
		if h := gitcli.Run(t, dir, "rev-parse", "HEAD"); h != head || treeDigest(t, dir) != digest {
			t.Fatalf("run %d again changed HEAD or the tree", run)
		}
	}
	if repacked == 0 {
		t.Fatal("six packs' worth of consolidations never repacked")
	}
	// Every run folded traces: one state commit each (the facts changed on
	// main only when the entry's content did).
	if n := strings.Count(gitcli.Run(t, dir, "log", "--format=%s", gitrepo.StateRef.String()), "pem: consolidate "); n != 6 {
		t.Fatalf("%d consolidation commits on %s, want 6", n, gitrepo.StateRef)
	}
}
