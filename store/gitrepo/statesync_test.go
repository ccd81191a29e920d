package gitrepo_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/pemdev/pem/store"
	"github.com/pemdev/pem/store/gitrepo"
	"github.com/pemdev/pem/store/storetest/gitcli"
)

// stateFleet is a bare remote (file://) with one commit and clones of it.
func stateFleet(t *testing.T, names ...string) (bare string, clones map[string]string) {
	t.Helper()
	root := t.TempDir()
	bare = filepath.Join(root, "shared.git")
	gitcli.Run(t, root, "init", "-q", "--bare", "-b", "main", bare)
	seed := filepath.Join(root, "seed")
	gitcli.Run(t, root, "clone", "-q", bare, seed)
	gitlogWrite(t, seed, "pem.yaml", "format: 1\n")
	gitlogWrite(t, seed, ".gitignore", store.StateIgnore)
	gitlogWrite(t, seed, "facts/a.example/x.yaml", "facts\n")
	gitlogCommit(t, seed, "init", 0)
	gitcli.Run(t, seed, "push", "-q", "origin", "main")
	clones = map[string]string{}
	for _, n := range names {
		clones[n] = filepath.Join(root, n)
		gitcli.Run(t, root, "clone", "-q", "file://"+bare, clones[n])
	}
	return bare, clones
}

var stateOpt = gitrepo.SyncOptions{Now: func() time.Time { return time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC) },
	TracesDir: store.TracesDir, TraceExt: store.TraceExt}

func mustSync(t *testing.T, dir string) *gitrepo.SyncResult {
	t.Helper()
	res, err := syncDir(context.Background(), dir, stateOpt)
	if err != nil {
		t.Fatalf("sync in %s: %v", filepath.Base(dir), err)
	}
	return res
}

// consolidateState stands for a consolidation: experience written, traces
// folded, the expired ones deleted, one state commit (a snapshot when
// anything expired).
func consolidateState(t *testing.T, dir, experience string, expire ...string) {
	t.Helper()
	gitlogWrite(t, dir, "experience/a.example/x.yaml", experience)
	paths := []string{"experience/a.example/x.yaml"}
	for _, p := range expire {
		if err := os.Remove(filepath.Join(dir, p)); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	r, err := gitrepo.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.CommitState(context.Background(), &gitrepo.StateRequest{Dirs: store.StateDirs, Paths: paths,
		Message: "pem: consolidate", Squash: len(expire) > 0, MaxChain: gitrepo.DefaultStateMaxChain}, gitrepo.Signature{}); err != nil {
		t.Fatal(err)
	}
}

// stateFiles lists a ref's state files, or a clone's state files on disk.
func stateFiles(t *testing.T, dir, ref string) string {
	t.Helper()
	if ref != "" {
		return gitcli.Run(t, dir, "ls-tree", "-r", "--name-only", ref)
	}
	var out []string
	for _, d := range store.StateDirs {
		filepath.WalkDir(filepath.Join(dir, d), func(p string, e os.DirEntry, err error) error {
			if err == nil && !e.IsDir() {
				rel, _ := filepath.Rel(dir, p)
				out = append(out, filepath.ToSlash(rel))
			}
			return nil
		})
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// An agent's traces reach a consolidator, which squashes the state while the
// agent adds more; syncing in both directions around the snapshot loses no
// trace, brings the expiry and the experience to the agent, and leaves the
// remote's state history bounded by the snapshot.
func TestSyncStateAroundASnapshot(t *testing.T) {
	bare, c := stateFleet(t, "agent", "consolidator")
	agent, cons := c["agent"], c["consolidator"]
	state := gitrepo.StateRef.String()
	t1 := gitlogTrace(t, agent, "a.example", 1)
	t2 := gitlogTrace(t, agent, "a.example", 2)
	if res := mustSync(t, agent); res.Committed != 2 || !res.StatePushed {
		t.Fatalf("agent's first sync: %+v", res)
	}
	if res := mustSync(t, cons); res.StateFiles != 2 {
		t.Fatalf("consolidator's sync: %+v", res)
	}
	if got := stateFiles(t, cons, ""); got != t1+"\n"+t2 {
		t.Fatalf("consolidator's disk:\n%s", got)
	}

	// The consolidator folds both and expires t1 (a snapshot); meanwhile
	// the agent syncs a third trace.
	consolidateState(t, cons, "folded 1 and 2\n", t1)
	t3 := gitlogTrace(t, agent, "a.example", 3)
	mustSync(t, agent)
	res := mustSync(t, cons)
	if res.StateReplayed != 1 || !res.StatePushed || len(res.Notes) != 0 {
		t.Fatalf("consolidator's sync after its snapshot: %+v", res)
	}
	want := "experience/a.example/x.yaml\n" + t2 + "\n" + t3
	if got := stateFiles(t, bare, state); got != want {
		t.Fatalf("remote state:\n%s\nwant:\n%s", got, want)
	}
	// The remote's state: the agent's trace replayed on the snapshot, which
	// has no parent.
	if got := gitcli.Run(t, bare, "log", "--format=%s|%P", state); strings.Count(got, "\n") != 1 || !strings.HasSuffix(got, "pem: consolidate|") {
		t.Fatalf("remote state history:\n%s", got)
	}

	// The agent takes it: t1 leaves its disk, the experience arrives, its
	// traces stay; nothing to push.
	t4 := gitlogTrace(t, agent, "a.example", 4) // pending
	res = mustSync(t, agent)
	if res.Committed != 1 || !res.StatePushed {
		t.Fatalf("agent's sync after the snapshot: %+v", res)
	}
	if got := stateFiles(t, agent, ""); got != want+"\n"+t4 {
		t.Fatalf("agent's disk:\n%s\nwant:\n%s", got, want+"\n"+t4)
	}
	if got, _ := os.ReadFile(filepath.Join(agent, "experience/a.example/x.yaml")); string(got) != "folded 1 and 2\n" {
		t.Fatalf("agent's experience %q", got)
	}
	mustSync(t, cons)
	for _, d := range []string{agent, cons} {
		if got := stateFiles(t, d, state); got != want+"\n"+t4 {
			t.Fatalf("%s's state:\n%s", filepath.Base(d), got)
		}
		gitlogStatusClean(t, d)
		gitcli.Run(t, d, "fsck", "--strict")
	}
	// The expired trace is reachable from no ref of the remote.
	if objs := gitcli.Run(t, bare, "rev-list", "--objects", "--all"); strings.Contains(objs, t1) {
		t.Fatalf("the expired trace is still reachable on the remote")
	}
}

// The lease: an agent's push that lands between a consolidator's fetch and
// its push of a snapshot (forced: a snapshot is no descendant) makes the
// push lose; the retry fetches, replays the agent's commit onto the
// snapshot and pushes — the agent's trace is not overwritten.
func TestSyncStateLeaseProtectsAnAgentsPush(t *testing.T) {
	bare, c := stateFleet(t, "agent", "consolidator")
	agent, cons := c["agent"], c["consolidator"]
	state := gitrepo.StateRef.String()
	t1 := gitlogTrace(t, agent, "a.example", 1)
	mustSync(t, agent)
	mustSync(t, cons)
	consolidateState(t, cons, "folded 1\n", t1)

	t2 := gitlogTrace(t, agent, "a.example", 2)
	pushed := false
	restore := gitrepo.SetTestHookBeforeStatePush(func() {
		if pushed {
			return
		}
		pushed = true
		restore := gitrepo.SetTestHookBeforeStatePush(func() {}) // the agent's own sync
		defer restore()
		if res := mustSync(t, agent); !res.StatePushed {
			t.Errorf("the agent's push in between did not land: %+v", res)
		}
	})
	defer restore()
	var pauses int
	opt := stateOpt
	opt.Sleep = func(context.Context, time.Duration) error { pauses++; return nil }
	res, err := syncDir(context.Background(), cons, opt)
	if err != nil {
		t.Fatal(err)
	}
	if !pushed || res.Retries != 1 || pauses != 1 || !res.StatePushed || res.StateReplayed != 1 {
		t.Fatalf("consolidator's sync with an agent's push in between: %+v (pauses %d)", res, pauses)
	}
	if got, want := stateFiles(t, bare, state), "experience/a.example/x.yaml\n"+t2; got != want {
		t.Fatalf("remote state:\n%s\nwant:\n%s", got, want)
	}
}

// Two consolidators snapshot the same state: the second to sync takes the
// remote's state, keeps its own pending traces on top, and says so; no trace
// is lost, and a consolidation of the result folds them again.
func TestSyncStateDivergedSnapshots(t *testing.T) {
	bare, c := stateFleet(t, "agent", "c1", "c2")
	state := gitrepo.StateRef.String()
	t1 := gitlogTrace(t, c["agent"], "a.example", 1)
	t2 := gitlogTrace(t, c["agent"], "a.example", 2)
	mustSync(t, c["agent"])
	mustSync(t, c["c1"])
	mustSync(t, c["c2"])
	consolidateState(t, c["c1"], "c1's fold\n", t1)
	consolidateState(t, c["c2"], "c2's fold\n", t1)
	mustSync(t, c["c1"])
	t9 := gitlogTrace(t, c["c2"], "a.example", 9) // pending on c2
	res := mustSync(t, c["c2"])
	if len(res.Notes) != 1 || !strings.Contains(res.Notes[0], "both consolidated") || !res.StatePushed || res.Committed != 1 {
		t.Fatalf("second consolidator's sync: %+v", res)
	}
	if got, want := stateFiles(t, bare, state), "experience/a.example/x.yaml\n"+t2+"\n"+t9; got != want {
		t.Fatalf("remote state:\n%s\nwant:\n%s", got, want)
	}
	if got, _ := os.ReadFile(filepath.Join(c["c2"], "experience/a.example/x.yaml")); string(got) != "c1's fold\n" {
		t.Fatalf("c2's experience after taking the remote's: %q", got)
	}
	gitlogStatusClean(t, c["c2"])
}

// A remote whose state is absent, and an agent with no state ref: the first
// push creates it; an idle sync pushes nothing; a fresh clone's sync
// materializes the state's files.
func TestSyncStateCreatesAndMaterializes(t *testing.T) {
	bare, c := stateFleet(t, "a")
	var traces []string
	for i := 0; i < 3; i++ {
		traces = append(traces, gitlogTrace(t, c["a"], fmt.Sprintf("d%d.example", i), i))
	}
	if res := mustSync(t, c["a"]); !res.StatePushed || res.Committed != 3 {
		t.Fatalf("%+v", res)
	}
	if res := mustSync(t, c["a"]); res.StatePushed || res.Committed != 0 || res.StateReplayed != 0 {
		t.Fatalf("idle sync: %+v", res)
	}
	fresh := filepath.Join(t.TempDir(), "fresh")
	gitcli.Run(t, filepath.Dir(fresh), "clone", "-q", "file://"+bare, fresh)
	if res := mustSync(t, fresh); res.StateFiles != 3 || res.StatePushed {
		t.Fatalf("fresh clone's sync: %+v", res)
	}
	sort.Strings(traces)
	if got := stateFiles(t, fresh, ""); got != strings.Join(traces, "\n") {
		t.Fatalf("fresh clone's disk:\n%s", got)
	}
}

// StateOnly (the consolidation workflow): the state is synced with its
// lease, the branch's local consolidation commit stays local (it goes to a
// pull request) and the remote's branch does not move.
func TestSyncStateOnlyLeavesTheBranch(t *testing.T) {
	bare, c := stateFleet(t, "agent", "ci")
	t1 := gitlogTrace(t, c["agent"], "a.example", 1)
	mustSync(t, c["agent"])
	opt := stateOpt
	opt.StateOnly = true
	if res, err := syncDir(context.Background(), c["ci"], opt); err != nil || res.StateFiles != 1 {
		t.Fatalf("state-only sync before the consolidation: %+v, %v", res, err)
	}
	remoteMain := gitcli.Run(t, bare, "rev-parse", "main")
	gitlogWrite(t, c["ci"], "facts/a.example/x.yaml", "facts from the consolidation\n")
	gitlogCommit(t, c["ci"], "pem: consolidate 1 trace", 3)
	localMain := gitcli.Run(t, c["ci"], "rev-parse", "HEAD")
	consolidateState(t, c["ci"], "folded 1\n")
	t2 := gitlogTrace(t, c["agent"], "a.example", 2)
	mustSync(t, c["agent"]) // an agent's trace while the job ran
	res, err := syncDir(context.Background(), c["ci"], opt)
	if err != nil || !res.StatePushed || res.Pushed || res.StateReplayed != 1 {
		t.Fatalf("state-only sync after the consolidation: %+v, %v", res, err)
	}
	if got := gitcli.Run(t, bare, "rev-parse", "main"); got != remoteMain {
		t.Fatal("a state-only sync moved the remote's branch")
	}
	if got := gitcli.Run(t, c["ci"], "rev-parse", "HEAD"); got != localMain {
		t.Fatal("a state-only sync moved the local branch")
	}
	if got, want := stateFiles(t, bare, gitrepo.StateRef.String()), "experience/a.example/x.yaml\n"+t1+"\n"+t2; got != want {
		t.Fatalf("remote state:\n%s\nwant:\n%s", got, want)
	}
}
