package gitrepo

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pemdev/pem/store"
	"github.com/pemdev/pem/store/storetest/gitcli"
)

// treeWithOneCommit is a new knowledge tree and repository whose branch
// holds one commit of facts/x.example/old.yaml.
func treeWithOneCommit(t *testing.T) (context.Context, string) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	if _, err := store.Init(ctx, dir); err != nil {
		t.Fatal(err)
	}
	if err := Init(ctx, dir); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "facts/x.example/old.yaml", "format: 1\n")
	if _, err := commitDir(ctx, dir, []string{"facts/x.example/old.yaml"}, "add old", Signature{}); err != nil {
		t.Fatal(err)
	}
	return ctx, dir
}

func TestCommitToBranchLeavesWorkingBranchAlone(t *testing.T) {
	ctx, dir := treeWithOneCommit(t)
	writeFile(t, dir, "notes.txt", "uncommitted work\n") // an untracked file stays untracked
	head := gitcli.Run(t, dir, "rev-parse", "HEAD")
	branchBefore := gitcli.Run(t, dir, "rev-parse", "--abbrev-ref", "HEAD")
	indexBefore := gitcli.Run(t, dir, "write-tree")

	files := map[string][]byte{
		"facts/x.example/new.yaml": []byte("format: 1\nstatus: candidate\n"),
		"facts/x.example/old.yaml": nil, // deleted on the branch only
	}
	h, err := commitToBranchDir(ctx, dir, "pem/deep-learn/2026-11-30", files, "pem: deep-learn proposals", Signature{})
	if err != nil {
		t.Fatal(err)
	}
	if h == "" {
		t.Fatal("no commit made for a real change")
	}
	if got := gitcli.Run(t, dir, "rev-parse", "HEAD"); got != head {
		t.Fatalf("HEAD moved: %s → %s", head, got)
	}
	if got := gitcli.Run(t, dir, "rev-parse", "--abbrev-ref", "HEAD"); got != branchBefore {
		t.Fatalf("checked-out branch changed to %s", got)
	}
	if got := gitcli.Run(t, dir, "write-tree"); got != indexBefore {
		t.Fatal("the index changed")
	}
	if st := gitcli.Run(t, dir, "status", "--porcelain"); st != "?? notes.txt" {
		t.Fatalf("git status = %q, want only the untracked file", st)
	}
	if got := gitcli.Run(t, dir, "rev-parse", "pem/deep-learn/2026-11-30^"); got != head {
		t.Fatalf("the proposal's parent is %s, want HEAD %s", got, head)
	}
	diff := gitcli.Run(t, dir, "diff", "--name-status", "HEAD", "pem/deep-learn/2026-11-30")
	if !strings.Contains(diff, "A\tfacts/x.example/new.yaml") || !strings.Contains(diff, "D\tfacts/x.example/old.yaml") {
		t.Fatalf("branch diff = %q", diff)
	}
	if got := gitcli.Run(t, dir, "show", "pem/deep-learn/2026-11-30:facts/x.example/new.yaml"); got != "format: 1\nstatus: candidate" {
		t.Fatalf("file on branch = %q", got)
	}
	gitcli.Run(t, dir, "fsck", "--strict", "--no-dangling")

	// Again with nothing different from HEAD: no commit, branch unchanged.
	tip := gitcli.Run(t, dir, "rev-parse", "pem/deep-learn/2026-11-30")
	h2, err := commitToBranchDir(ctx, dir, "pem/deep-learn/2026-11-30", map[string][]byte{"facts/x.example/old.yaml": []byte("format: 1\n")}, "noop", Signature{})
	if err != nil || h2 != "" {
		t.Fatalf("no-change commit = %q, %v", h2, err)
	}
	if got := gitcli.Run(t, dir, "rev-parse", "pem/deep-learn/2026-11-30"); got != tip {
		t.Fatal("a no-change proposal moved the branch")
	}
	if _, err := commitToBranchDir(ctx, dir, "bad..name", files, "x", Signature{}); err == nil {
		t.Fatal("an invalid branch name was accepted")
	}
	if _, err := commitToBranchDir(ctx, dir, "main", files, "x", Signature{}); err == nil {
		t.Fatal("committing onto the checked-out branch was accepted")
	}
}

// A knowledge tree in a subdirectory of a project's repository (pem's own
// layout, knowledge/): the branch's paths are under it, and files of the
// project outside the tree are carried over unchanged.
func TestCommitToBranchTreeInSubdirectory(t *testing.T) {
	ctx := context.Background()
	repo := t.TempDir()
	gitcli.Run(t, repo, "init", "-q", "-b", "main")
	writeFile(t, repo, "README.md", "project\n")
	dir := filepath.Join(repo, "knowledge")
	if _, err := store.Init(ctx, dir); err != nil {
		t.Fatal(err)
	}
	gitcli.Run(t, repo, "add", "-A")
	gitcli.Run(t, repo, "commit", "-q", "-m", "base")
	writeFile(t, repo, "README.md", "project, edited but not committed\n")
	gitcli.Run(t, repo, "add", "README.md") // staged work stays staged
	head := gitcli.Run(t, repo, "rev-parse", "HEAD")
	staged := gitcli.Run(t, repo, "diff", "--cached", "--name-only")

	h, err := commitToBranchDir(ctx, dir, "pem/deep-learn/x", map[string][]byte{"facts/a.example/k.yaml": []byte("format: 1\n")}, "proposal", Signature{Name: "bot", Email: "bot@example.com", When: time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)})
	if err != nil || h == "" {
		t.Fatalf("commit = %q, %v", h, err)
	}
	if got := gitcli.Run(t, repo, "diff", "--name-only", "HEAD", "pem/deep-learn/x"); got != "knowledge/facts/a.example/k.yaml" {
		t.Fatalf("branch diff = %q", got)
	}
	if got := gitcli.Run(t, repo, "show", "pem/deep-learn/x:README.md"); got != "project" {
		t.Fatalf("README on the branch = %q, want HEAD's", got)
	}
	if got := gitcli.Run(t, repo, "log", "-1", "--format=%an <%ae> %aI", "pem/deep-learn/x"); got != "bot <bot@example.com> 2026-11-30T03:00:00+00:00" {
		t.Fatalf("author = %q", got)
	}
	if gitcli.Run(t, repo, "rev-parse", "HEAD") != head || gitcli.Run(t, repo, "diff", "--cached", "--name-only") != staged {
		t.Fatal("HEAD or the index moved")
	}
	if _, err := commitToBranchDir(ctx, dir, "x", map[string][]byte{"../outside.txt": []byte("x")}, "escape", Signature{}); err == nil {
		t.Fatal("a path escaping the knowledge tree was committed")
	}
	gitcli.Run(t, repo, "fsck", "--strict", "--no-dangling")
}

// A proposal of many files is written as one pack, not as loose objects;
// the next one, on the same HEAD with the same files (a deep-learn run
// that found nothing new) after the objects were packed, writes no object
// that the store holds already: only its commit.
func TestCommitToBranchWritesOnePackAndNothingTwice(t *testing.T) {
	ctx, dir := treeWithOneCommit(t)
	gitcli.Run(t, dir, "repack", "-a", "-d", "-q")
	files := map[string][]byte{}
	for i := range 200 {
		files[fmt.Sprintf("facts/d%03d.example/k%d.yaml", i%40, i/40)] = []byte(fmt.Sprintf("format: 1\nn: %d\n", i))
	}
	loose := func() int {
		n := 0
		filepath.WalkDir(filepath.Join(dir, ".git", "objects"), func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && len(filepath.Base(filepath.Dir(p))) == 2 {
				n++
			}
			return nil
		})
		return n
	}
	packs := func() int {
		m, _ := filepath.Glob(filepath.Join(dir, ".git", "objects", "pack", "*.pack"))
		return len(m)
	}
	if _, err := commitToBranchDir(ctx, dir, "pem/review-1", files, "proposals", Signature{}); err != nil {
		t.Fatal(err)
	}
	if n, p := loose(), packs(); n != 0 || p != 2 {
		t.Fatalf("after a proposal of %d files: %d loose objects and %d packs, want 0 and 2", len(files), n, p)
	}
	gitcli.Run(t, dir, "repack", "-a", "-d", "-q")
	if _, err := commitToBranchDir(ctx, dir, "pem/review-2", files, "proposals again", Signature{When: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if n, p := loose(), packs(); n != 1 || p != 1 {
		t.Fatalf("the same proposal again: %d loose objects and %d packs, want 1 (its commit) and 1", n, p)
	}
	if a, b := gitcli.Run(t, dir, "rev-parse", "pem/review-1^{tree}"), gitcli.Run(t, dir, "rev-parse", "pem/review-2^{tree}"); a != b {
		t.Fatalf("the same files gave trees %s and %s", a, b)
	}
	gitcli.Run(t, dir, "fsck", "--strict", "--no-dangling")
}

// TestPruneReviewBranches: of the dated review branches, the newest keep stay;
// older ones go when their tip is the single commit a proposal run wrote —
// not one someone committed onto, not one checked out in a linked worktree,
// not one packed into packed-refs by git gc (deleted there too), not a
// branch of another name, not the spared one.
func TestPruneReviewBranches(t *testing.T) {
	ctx, dir := treeWithOneCommit(t)
	const prefix, title = "pem/deep-learn/", "pem: deep-learn proposals"
	for d := 1; d <= 9; d++ {
		name := fmt.Sprintf("%s2026-11-%02d", prefix, d)
		files := map[string][]byte{"facts/x.example/new.yaml": []byte(fmt.Sprintf("format: 1\nday: %d\n", d))}
		if _, err := commitToBranchDir(ctx, dir, name, files, title+" for 1 entries", Signature{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := commitToBranchDir(ctx, dir, "pem/deep-learn/mine", map[string][]byte{"facts/x.example/m.yaml": []byte("format: 1\n")}, title, Signature{}); err != nil {
		t.Fatal(err)
	}
	// A reviewer's commit on 11-02; 11-03 checked out in a linked worktree;
	// 11-04 and the rest packed by git (packed-refs).
	gitcli.Run(t, dir, "pack-refs", "--all")
	wt := filepath.Join(t.TempDir(), "wt")
	gitcli.Run(t, dir, "worktree", "add", "-q", wt, prefix+"2026-11-03")
	gitcli.Run(t, dir, "worktree", "add", "-q", "-b", "review", filepath.Join(t.TempDir(), "wt2"), prefix+"2026-11-02")
	r, err := Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// Move 11-02 forward with a reviewer's own commit, through git.
	reviewDir := ""
	for _, line := range strings.Split(gitcli.Run(t, dir, "worktree", "list", "--porcelain"), "\n") {
		if p, ok := strings.CutPrefix(line, "worktree "); ok && strings.HasSuffix(p, "wt2") {
			reviewDir = p
		}
	}
	writeFile(t, reviewDir, "facts/x.example/new.yaml", "format: 1\nday: 2, reviewed\n")
	gitcli.Run(t, reviewDir, "-c", "user.name=Ann", "-c", "user.email=ann@example.com", "commit", "-q", "-am", "review")
	gitcli.Run(t, reviewDir, "checkout", "-q", "--detach")
	gitcli.Run(t, dir, "branch", "-f", prefix+"2026-11-02", "review")

	pruned, err := r.PruneReviewBranches(ctx, prefix, title, prefix+"2026-11-05", 3, Signature{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{prefix + "2026-11-06", prefix + "2026-11-04", prefix + "2026-11-01"}
	if strings.Join(pruned, " ") != strings.Join(want, " ") {
		t.Errorf("pruned %v, want %v", pruned, want)
	}
	left := gitcli.Run(t, dir, "for-each-ref", "--format=%(refname:short)", "refs/heads/pem/")
	wantLeft := []string{"2026-11-02", "2026-11-03", "2026-11-05", "2026-11-07", "2026-11-08", "2026-11-09", "mine"}
	for i := range wantLeft {
		wantLeft[i] = prefix + wantLeft[i]
	}
	if left != strings.Join(wantLeft, "\n") {
		t.Errorf("branches left:\n%s\nwant:\n%s", left, strings.Join(wantLeft, "\n"))
	}
	if out := gitcli.Run(t, dir, "fsck", "--no-dangling"); strings.TrimSpace(out) != "" {
		t.Errorf("git fsck after pruning: %s", out)
	}
	// keep 0 deletes nothing.
	if pruned, err := r.PruneReviewBranches(ctx, prefix, title, "", 0, Signature{}); err != nil || pruned != nil {
		t.Errorf("keep 0 pruned %v (%v)", pruned, err)
	}
}
