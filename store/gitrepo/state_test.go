package gitrepo

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pemdev/pem/store/storetest/gitcli"
)

var stateDirs = []string{"traces", "experience"}

const stateIgnore = "/traces/\n/experience/\n"

// oldStyleTree is a knowledge tree made the way pem made them before the
// state ref: traces and experience committed on main with the facts, over
// two commits.
func oldStyleTree(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	gitcli.Run(t, dir, "init", "-q", "-b", "main")
	writeFile(t, dir, "pem.yaml", "format: 1\n")
	writeFile(t, dir, "facts/a.com/x.yaml", "facts x\n")
	writeFile(t, dir, "experience/a.com/x.yaml", "experience x v1\n")
	writeFile(t, dir, "traces/a.com/2025-03-01/t1.yaml", "trace 1\n")
	writeFile(t, dir, "traces/a.com/2025-03-01/t2.yaml", "trace 2\n")
	gitcli.Run(t, dir, "add", "-A")
	gitcli.Run(t, dir, "commit", "-qm", "old consolidation 1")
	writeFile(t, dir, "experience/a.com/x.yaml", "experience x v2\n")
	writeFile(t, dir, "experience/b.com/y.yaml", "experience y\n")
	writeFile(t, dir, "traces/b.com/2025-03-02/t3.yaml", "trace 3\n")
	gitcli.Run(t, dir, "add", "-A")
	gitcli.Run(t, dir, "commit", "-qm", "old consolidation 2")
	return dir
}

func lsTree(t *testing.T, dir, rev string) string {
	t.Helper()
	return gitcli.Run(t, dir, "ls-tree", "-r", "--format=%(path) %(objectname)", rev)
}

// An old-style tree's first state commit takes what main tracks under
// traces/ and experience/ (the state's newer version of a file wins, here
// the one the consolidation rewrote on disk), and one commit on main
// untracks them with the .gitignore that keeps them out of git status; the
// files stay on disk, the old history keeps what it had, and a second call
// moves nothing.
func TestStateMigratesOldStyleTree(t *testing.T) {
	ctx := context.Background()
	dir := oldStyleTree(t)
	oldHead := gitcli.Run(t, dir, "rev-parse", "HEAD")
	oldTree := lsTree(t, dir, "HEAD")

	// The consolidation with the new pem: it rewrites x's experience, folds
	// a new trace, and expires t1 (deleted from disk).
	writeFile(t, dir, "experience/a.com/x.yaml", "experience x v3\n")
	writeFile(t, dir, "traces/a.com/2025-03-05/t4.yaml", "trace 4\n")
	if err := os.Remove(filepath.Join(dir, "traces/a.com/2025-03-01/t1.yaml")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, ".gitignore", stateIgnore)
	r, err := Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if tracks, err := r.TracksState(stateDirs); err != nil || !tracks {
		t.Fatalf("TracksState of an old-style tree = %v, %v", tracks, err)
	}
	res, err := r.CommitState(ctx, &StateRequest{Dirs: stateDirs, Message: "consolidate",
		Paths:     []string{"experience/a.com/x.yaml", "traces/a.com/2025-03-05/t4.yaml", "traces/a.com/2025-03-01/t1.yaml"},
		MainPaths: []string{".gitignore"}}, testSig)
	if err != nil {
		t.Fatal(err)
	}
	if res.Hash == "" || res.Moved != 5 || res.Move == "" || res.Squashed {
		t.Fatalf("CommitState = %+v; want a state commit, 5 files moved, a move commit", res)
	}
	x3 := gitcli.Run(t, dir, "hash-object", "experience/a.com/x.yaml")
	t2 := gitcli.Run(t, dir, "rev-parse", oldHead+":traces/a.com/2025-03-01/t2.yaml")
	t3 := gitcli.Run(t, dir, "rev-parse", oldHead+":traces/b.com/2025-03-02/t3.yaml")
	t4 := gitcli.Run(t, dir, "hash-object", "traces/a.com/2025-03-05/t4.yaml")
	y := gitcli.Run(t, dir, "rev-parse", oldHead+":experience/b.com/y.yaml")
	want := strings.Join([]string{
		"experience/a.com/x.yaml " + x3, "experience/b.com/y.yaml " + y,
		"traces/a.com/2025-03-01/t2.yaml " + t2, "traces/a.com/2025-03-05/t4.yaml " + t4, "traces/b.com/2025-03-02/t3.yaml " + t3,
	}, "\n")
	if got := lsTree(t, dir, StateRef.String()); got != want {
		t.Fatalf("state tree:\n%s\nwant:\n%s", got, want)
	}
	if p := gitcli.Run(t, dir, "log", "--format=%P", StateRef.String()); p != "" {
		t.Fatalf("the first state commit has parents %q", p)
	}
	// Main: one commit on top, untracking the state and adding .gitignore.
	if p := gitcli.Run(t, dir, "rev-parse", "HEAD^"); p != oldHead || gitcli.Run(t, dir, "rev-parse", "HEAD") != res.Move {
		t.Fatalf("main's move commit %s is not on top of %s", res.Move, oldHead)
	}
	if got := lsTree(t, dir, "HEAD"); strings.Contains(got, "traces/") || strings.Contains(got, "experience/") ||
		!strings.Contains(got, "facts/a.com/x.yaml") || !strings.Contains(got, ".gitignore") {
		t.Fatalf("main after the move:\n%s", got)
	}
	if got := lsTree(t, dir, oldHead); got != oldTree {
		t.Fatal("the old history changed")
	}
	for _, f := range []string{"experience/a.com/x.yaml", "experience/b.com/y.yaml", "traces/a.com/2025-03-01/t2.yaml", "traces/b.com/2025-03-02/t3.yaml"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatalf("%s left the disk: %v", f, err)
		}
	}
	assertClean(t, dir)
	gitcli.Run(t, dir, "fsck", "--strict")

	// Nothing left to move; nothing new: no commit anywhere.
	head, state := gitcli.Run(t, dir, "rev-parse", "HEAD"), res.Hash
	if tracks, err := r.TracksState(stateDirs); err != nil || tracks {
		t.Fatalf("TracksState after the move = %v, %v", tracks, err)
	}
	res, err = r.CommitState(ctx, &StateRequest{Dirs: stateDirs, Message: "again", Paths: []string{"experience/a.com/x.yaml"}, MainPaths: []string{".gitignore"}}, testSig)
	if err != nil || res.Hash != "" || res.Moved != 0 || res.Move != "" {
		t.Fatalf("second CommitState = %+v, %v; want nothing", res, err)
	}
	if gitcli.Run(t, dir, "rev-parse", "HEAD") != head || gitcli.Run(t, dir, "rev-parse", StateRef.String()) != state {
		t.Fatal("a CommitState with nothing to do committed")
	}
}

// A trace that a trace-only pull request merged onto main after the move is
// moved into the state by the next state commit and untracked on main; a
// state commit without it leaves main as it is.
func TestStateTakesTracesMergedOnMain(t *testing.T) {
	ctx := context.Background()
	dir := oldStyleTree(t)
	writeFile(t, dir, ".gitignore", stateIgnore)
	r, err := Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.CommitState(ctx, &StateRequest{Dirs: stateDirs, Message: "move", MainPaths: []string{".gitignore"}}, testSig); err != nil {
		t.Fatal(err)
	}
	// The merged pull request: a contributor's trace, added with -f.
	writeFile(t, dir, "traces/c.com/2025-03-09/pr.yaml", "a contributor's trace\n")
	gitcli.Run(t, dir, "add", "-f", "traces/c.com/2025-03-09/pr.yaml")
	gitcli.Run(t, dir, "commit", "-qm", "Merge pull request #7: one trace")
	pr := gitcli.Run(t, dir, "rev-parse", "HEAD")
	res, err := r.CommitState(ctx, &StateRequest{Dirs: stateDirs, Message: "fold the PR's trace",
		Paths: []string{"traces/c.com/2025-03-09/pr.yaml", "experience/c.com/z.yaml"}, MainPaths: []string{".gitignore"}}, testSig)
	if err != nil {
		t.Fatal(err)
	}
	if res.Moved != 1 || res.Hash == "" || gitcli.Run(t, dir, "rev-parse", "HEAD^") != pr {
		t.Fatalf("CommitState after a merged PR = %+v", res)
	}
	if got := lsTree(t, dir, StateRef.String()); !strings.Contains(got, "traces/c.com/2025-03-09/pr.yaml "+gitcli.Run(t, dir, "rev-parse", pr+":traces/c.com/2025-03-09/pr.yaml")) {
		t.Fatalf("the PR's trace is not in the state:\n%s", got)
	}
	if got := lsTree(t, dir, "HEAD"); strings.Contains(got, "traces/") {
		t.Fatalf("main still tracks the PR's trace:\n%s", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "traces/c.com/2025-03-09/pr.yaml")); err != nil {
		t.Fatal("the PR's trace left the disk")
	}
	// experience/c.com/z.yaml does not exist: a missing path is no change.
	if strings.Contains(lsTree(t, dir, StateRef.String()), "z.yaml") {
		t.Fatal("a missing file was committed")
	}
	assertClean(t, dir)
}

// The state's history is bounded: a Squash request, or a chain of MaxChain
// commits, writes a snapshot with no parent, whose tree is the live state;
// what the snapshot dropped is reachable from no ref.
func TestStateSquashBoundsHistory(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	gitcli.Run(t, dir, "init", "-q", "-b", "main")
	writeFile(t, dir, "pem.yaml", "format: 1\n")
	writeFile(t, dir, ".gitignore", stateIgnore)
	if _, err := commitDir(ctx, dir, []string{"pem.yaml", ".gitignore"}, "init", testSig); err != nil {
		t.Fatal(err)
	}
	r, err := Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	commit := func(i int, squash bool, paths ...string) *StateCommit {
		t.Helper()
		res, err := r.CommitState(ctx, &StateRequest{Dirs: stateDirs, Message: "state", Paths: paths, Squash: squash, MaxChain: 3}, testSig)
		if err != nil {
			t.Fatal(err)
		}
		if res.Hash == "" {
			t.Fatalf("commit %d made nothing", i)
		}
		return res
	}
	parents := func() string { return gitcli.Run(t, dir, "log", "-1", "--format=%P", StateRef.String()) }
	chain := func() int { return len(strings.Fields(gitcli.Run(t, dir, "rev-list", StateRef.String()))) }
	for i := 1; i <= 3; i++ {
		p := "traces/a.com/2025-03-01/t" + string(rune('0'+i)) + ".yaml"
		writeFile(t, dir, p, "trace\n"+p)
		writeFile(t, dir, "experience/a.com/x.yaml", strings.Repeat("v", i))
		if res := commit(i, false, p, "experience/a.com/x.yaml"); res.Squashed {
			t.Fatalf("commit %d squashed before the limit", i)
		}
		if n := chain(); n != i {
			t.Fatalf("chain %d after %d commits", n, i)
		}
	}
	// The fourth: the chain holds MaxChain commits, so it is a snapshot.
	writeFile(t, dir, "experience/a.com/x.yaml", "v4")
	old := gitcli.Run(t, dir, "rev-parse", StateRef.String()+"~1:experience/a.com/x.yaml")
	if res := commit(4, false, "experience/a.com/x.yaml"); !res.Squashed || parents() != "" || chain() != 1 {
		t.Fatalf("commit 4 past MaxChain 3: squashed %v, parents %q, chain %d", res.Squashed, parents(), chain())
	}
	if got := gitcli.Run(t, dir, "ls-tree", "-r", "--name-only", StateRef.String()); got != "experience/a.com/x.yaml\ntraces/a.com/2025-03-01/t1.yaml\ntraces/a.com/2025-03-01/t2.yaml\ntraces/a.com/2025-03-01/t3.yaml" {
		t.Fatalf("snapshot tree:\n%s", got)
	}
	// Then a chain again, and an expiry asks for a snapshot at once.
	writeFile(t, dir, "experience/a.com/x.yaml", "v5")
	if res := commit(5, false, "experience/a.com/x.yaml"); res.Squashed || chain() != 2 {
		t.Fatalf("commit 5: squashed %v, chain %d", res.Squashed, chain())
	}
	os.Remove(filepath.Join(dir, "traces/a.com/2025-03-01/t1.yaml"))
	expired := gitcli.Run(t, dir, "rev-parse", StateRef.String()+":traces/a.com/2025-03-01/t1.yaml")
	if res := commit(6, true, "traces/a.com/2025-03-01/t1.yaml"); !res.Squashed || parents() != "" {
		t.Fatalf("an expiry's commit: squashed %v, parents %q", res.Squashed, parents())
	}
	reach := gitcli.Run(t, dir, "rev-list", "--objects", "--all")
	for _, h := range []string{expired, old} {
		if strings.Contains(reach, h) {
			t.Fatalf("object %s dropped by a snapshot is still reachable", h)
		}
	}
	gitcli.Run(t, dir, "fsck", "--strict")
}

// Killed after the state commit and before main's move commit: the journal
// makes the next command untrack what is left on main, without a second
// state commit; killed before the state commit, it makes both.
func TestStateSeriesRecovers(t *testing.T) {
	ctx := context.Background()
	for _, killedAfterState := range []bool{true, false} {
		dir := oldStyleTree(t)
		writeFile(t, dir, ".gitignore", stateIgnore)
		writeFile(t, dir, "experience/a.com/x.yaml", "experience x v3\n")
		writeFile(t, dir, "facts/a.com/x.yaml", "facts x v2\n")
		r, err := Open(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		state := &StateRequest{Dirs: stateDirs, Message: "consolidate", Paths: []string{"experience/a.com/x.yaml"}, MainPaths: []string{".gitignore"}}
		if _, err := r.BeginStateSeries("test", state, []CommitRequest{{Paths: []string{"facts/a.com/x.yaml"}, Message: "facts"}}); err != nil {
			t.Fatal(err)
		}
		var first string
		if killedAfterState {
			res, _, err := r.commitStateRef(ctx, state, testSig.orDefault())
			if err != nil || res.Hash == "" {
				t.Fatal(res, err)
			}
			first = res.Hash
		}
		r.Close()

		r2, err := Open(ctx, dir) // the next command
		if err != nil {
			t.Fatal(err)
		}
		hs, st, found, err := r2.RecoverStateSeries(ctx, "test", testSig)
		r2.Close()
		if err != nil || !found || len(hs) != 1 || hs[0] == "" || st == nil || st.Moved != 5 {
			t.Fatalf("killed after state %v: RecoverStateSeries = %v, %+v, %v, %v", killedAfterState, hs, st, found, err)
		}
		if killedAfterState && st.Hash != "" {
			t.Fatalf("recovery made a second state commit %s after %s", st.Hash, first)
		}
		if !killedAfterState && st.Hash == "" {
			t.Fatal("recovery made no state commit")
		}
		if got := gitcli.Run(t, dir, "log", "--format=%s", "-3"); got != "facts\npem: move traces/ and experience/ to refs/pem/state (5 files; they stay on disk)\nold consolidation 2" {
			t.Fatalf("killed after state %v: main's log:\n%s", killedAfterState, got)
		}
		if n := len(strings.Fields(gitcli.Run(t, dir, "rev-list", StateRef.String()))); n != 1 {
			t.Fatalf("killed after state %v: %d state commits, want 1", killedAfterState, n)
		}
		if got := gitcli.Run(t, dir, "show", StateRef.String()+":experience/a.com/x.yaml"); got != "experience x v3" {
			t.Fatalf("state's experience %q", got)
		}
		if _, err := os.Stat(filepath.Join(r2.GitDir(), "pem-test.journal")); !os.IsNotExist(err) {
			t.Fatal("journal left")
		}
		assertClean(t, dir)
	}
}
