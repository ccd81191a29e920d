package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/pemdev/pem/store/storetest/gitcli"
)

// manyPacks makes a repository the way consolidation leaves one: commits
// with many new objects (one pack each), small ones (loose objects) and a
// review branch (loose objects no branch of HEAD's reaches).
func manyPacks(t *testing.T, commits int) string {
	t.Helper()
	ctx := context.Background()
	repo := t.TempDir()
	gitcli.Run(t, repo, "init", "-q", "-b", "main")
	for i := 0; i < commits; i++ {
		var paths []string
		n := 20
		if i%4 == 3 {
			n = 2 // loose
		}
		for j := 0; j < n; j++ {
			p := fmt.Sprintf("traces/d%d/%03d-%02d.yaml", j%3, i, j)
			writeFile(t, repo, p, strings.Repeat(fmt.Sprintf("run %d step %d\n", i, j), 1+j%5))
			paths = append(paths, p)
		}
		p := "experience/d/e.yaml"
		writeFile(t, repo, p, strings.Repeat("evidence\n", i+1))
		paths = append(paths, p)
		if _, err := commitDir(ctx, repo, paths, fmt.Sprintf("c%d", i), testSig); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := commitToBranchDir(ctx, repo, "pem/deep-learn/today", map[string][]byte{"facts/d/e.yaml": []byte("proposal\n")}, "proposal", testSig); err != nil {
		t.Fatal(err)
	}
	return repo
}

// reachable lists every object the refs reach, as git sees them.
func reachable(t *testing.T, repo string) []string {
	t.Helper()
	out := gitcli.Run(t, repo, "rev-list", "--objects", "--all")
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		lines[i], _, _ = strings.Cut(l, " ")
	}
	sort.Strings(lines)
	return lines
}

// TestMaintainRepacksPastThreshold: past the pack threshold Maintain leaves
// fewer packs and no loose objects, every object the refs reached before is
// still there and reachable (git fsck --strict), and the same handle reads
// the history and commits afterwards (it forgot the deleted packs).
func TestMaintainRepacksPastThreshold(t *testing.T) {
	ctx := context.Background()
	repo := manyPacks(t, 24)
	before := reachable(t, repo)
	r, err := Open(ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c, err := r.Objects()
	if err != nil {
		t.Fatal(err)
	}
	if c.Packs != 18 || c.Loose == 0 {
		t.Fatalf("setup: %+v, want 18 packs and loose objects", c)
	}
	h, err := r.History()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Log(ctx, []string{"experience/d/e.yaml"}, 0); err != nil { // opens the packs
		t.Fatal(err)
	}

	// Below the thresholds: nothing happens.
	m, err := r.Maintain(ctx, MaintainOptions{MaxPacks: 18, MaxLoose: c.Loose})
	if err != nil || m.Repacked || m.After != c {
		t.Fatalf("below threshold: %+v, %v", m, err)
	}
	m, err = r.Maintain(ctx, MaintainOptions{MaxPacks: 10, MaxLoose: 0})
	if err != nil {
		t.Fatal(err)
	}
	if !m.Repacked || m.Before != c || m.After.Loose != 0 || m.After.Packs >= 3 || m.After.Packs < 1 {
		t.Fatalf("after repack: %+v", m)
	}
	if got, err := r.Objects(); err != nil || got != m.After {
		t.Fatalf("Objects after: %+v, %v; Maintain said %+v", got, err, m.After)
	}
	gitcli.Run(t, repo, "fsck", "--strict", "--no-dangling")
	if after := reachable(t, repo); strings.Join(after, ",") != strings.Join(before, ",") {
		t.Fatalf("reachable objects changed: %d before, %d after", len(before), len(after))
	}
	// The handle still reads (from the new pack) and commits.
	entries, err := h.Log(ctx, []string{"experience/d/e.yaml"}, 0)
	if err != nil || len(entries) != 24 {
		t.Fatalf("log after repack: %d entries, %v", len(entries), err)
	}
	writeFile(t, repo, "experience/d/e.yaml", "after the repack\n")
	if _, err := r.Commit(ctx, []string{"experience/d/e.yaml"}, "after", testSig); err != nil {
		t.Fatal(err)
	}
	assertClean(t, repo)
	if out := gitcli.Run(t, repo, "show", "pem/deep-learn/today:facts/d/e.yaml"); out != "proposal" {
		t.Fatalf("review branch's file: %q", out)
	}
}

// TestMaintainLooseThreshold: loose objects alone (what deep-learn's review
// commits leave) trigger the repack, which packs them.
func TestMaintainLooseThreshold(t *testing.T) {
	ctx := context.Background()
	repo := manyPacks(t, 4) // 3 packs, loose objects of one commit and the branch
	r, err := Open(ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c, _ := r.Objects()
	m, err := r.Maintain(ctx, MaintainOptions{MaxPacks: 100, MaxLoose: c.Loose - 1})
	if err != nil || !m.Repacked || m.After.Loose != 0 {
		t.Fatalf("%+v, %v", m, err)
	}
	gitcli.Run(t, repo, "fsck", "--strict", "--no-dangling")
}

// TestMaintainWithoutGit: with no git program Maintain says so
// (ErrGitMissing) and changes nothing.
func TestMaintainWithoutGit(t *testing.T) {
	ctx := context.Background()
	repo := manyPacks(t, 4)
	r, err := Open(ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c, _ := r.Objects()
	t.Setenv("PATH", t.TempDir())
	if _, err := exec.LookPath("git"); err == nil {
		t.Fatal("git still found")
	}
	_, err = r.Maintain(ctx, MaintainOptions{MaxPacks: 1})
	if !errors.Is(err, ErrGitMissing) || !strings.Contains(err.Error(), "install git") {
		t.Fatalf("err = %v, want ErrGitMissing saying what to do", err)
	}
	if got, _ := r.Objects(); got != c {
		t.Fatalf("objects changed: %+v -> %+v", c, got)
	}
}

// TestMaintainPrunesWhatSnapshotsDrop: state snapshots leave the objects of
// the state they replaced reachable from no ref. The first Maintain with
// PruneGrowth remembers the packs' bytes; once they have doubled, it repacks
// with a cruft pack and drops the unreachable objects older than
// PruneExpire ("now" here), keeps every reachable one, and fsck is clean.
func TestMaintainPrunesWhatSnapshotsDrop(t *testing.T) {
	ctx := context.Background()
	repo := t.TempDir()
	gitcli.Run(t, repo, "init", "-q", "-b", "main")
	writeFile(t, repo, "pem.yaml", "format: 1\n")
	writeFile(t, repo, ".gitignore", stateIgnore)
	if _, err := commitDir(ctx, repo, []string{"pem.yaml", ".gitignore"}, "init", testSig); err != nil {
		t.Fatal(err)
	}
	r, err := Open(ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	opt := MaintainOptions{PruneGrowth: 2, PruneExpire: "now"}
	round := func(i int, squash bool) (expired string) {
		var paths []string
		for j := 0; j < 40; j++ {
			p := fmt.Sprintf("traces/d/2026-01-%02d/t%03d.yaml", i+1, j)
			writeFile(t, repo, p, strings.Repeat(fmt.Sprintf("round %d run %d\n", i, j), 50))
			paths = append(paths, p)
		}
		if i > 0 { // the previous round's traces expire
			for j := 0; j < 40; j++ {
				p := fmt.Sprintf("traces/d/2026-01-%02d/t%03d.yaml", i, j)
				if j == 0 {
					expired = gitcli.Run(t, repo, "rev-parse", StateRef.String()+":"+p)
				}
				if err := removeFile(repo, p); err != nil {
					t.Fatal(err)
				}
				paths = append(paths, p)
			}
		}
		if _, err := r.CommitState(ctx, &StateRequest{Dirs: stateDirs, Paths: paths, Message: "state", Squash: squash}, testSig); err != nil {
			t.Fatal(err)
		}
		return expired
	}
	round(0, false)
	if m, err := r.Maintain(ctx, opt); err != nil || m.Pruned {
		t.Fatalf("first Maintain (it only remembers the bytes): %+v, %v", m, err)
	}
	var gone []string
	pruned, i := false, 1
	for ; i < 8 && !pruned; i++ {
		gone = append(gone, round(i, true))
		m, err := r.Maintain(ctx, opt)
		if err != nil {
			t.Fatal(err)
		}
		pruned = m.Pruned
	}
	if !pruned {
		t.Fatal("the packs grew past twice their size without a prune")
	}
	for _, h := range gone {
		if err := exec.Command("git", "-C", repo, "cat-file", "-e", h).Run(); err == nil {
			t.Errorf("object %s, which only replaced states reached, is still there", h)
		}
	}
	gitcli.Run(t, repo, "fsck", "--strict", "--no-dangling")
	if n := len(strings.Fields(gitcli.Run(t, repo, "ls-tree", "-r", "--name-only", StateRef.String()))); n != 40 {
		t.Fatalf("the state holds %d files after the prune, want the last round's 40", n)
	}
	// The handle still commits and reads after the prune.
	round(i, true)
	gitcli.Run(t, repo, "fsck", "--strict", "--no-dangling")
}

func removeFile(dir, rel string) error {
	return os.Remove(filepath.Join(dir, filepath.FromSlash(rel)))
}
