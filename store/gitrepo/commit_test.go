package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pemdev/pem/store/storetest/gitcli"
)

func writeFile(t testing.TB, dir, rel, content string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// assertClean checks that the worktree, the index and HEAD agree, and that
// the repository is consistent.
func assertClean(t *testing.T, repo string) {
	t.Helper()
	assertSynced(t, repo)
	gitcli.Run(t, repo, "fsck", "--strict", "--no-dangling")
}

// assertSynced checks that the worktree, the index and HEAD agree.
func assertSynced(t *testing.T, repo string) {
	t.Helper()
	if st := gitcli.Run(t, repo, "status", "--porcelain", "--untracked-files=all"); st != "" {
		t.Fatalf("git status not clean:\n%s", st)
	}
	if wt, head := gitcli.Run(t, repo, "write-tree"), gitcli.Run(t, repo, "rev-parse", "HEAD^{tree}"); wt != head {
		t.Fatalf("index tree %s != HEAD tree %s", wt, head)
	}
}

var testSig = Signature{Name: "tester", Email: "tester@example.com", When: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)}

func TestInitRepoFreshAndIdempotent(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	writeFile(t, dir, "pem.yaml", "format: 1\n")
	writeFile(t, dir, "facts/.keep", "")
	writeFile(t, dir, ".gitignore", ".pem.lock\n*.tmp\n")
	writeFile(t, dir, ".pem.lock", "")
	writeFile(t, dir, "facts/x.tmp", "junk")
	if err := Init(ctx, dir); err != nil {
		t.Fatal(err)
	}
	if got := gitcli.Run(t, dir, "config", "merge.pem.driver"); got != MergeDriverCommand {
		t.Fatalf("merge.pem.driver = %q", got)
	}
	if got := gitcli.Run(t, dir, "config", "merge.pem.name"); got != MergeDriverName {
		t.Fatalf("merge.pem.name = %q", got)
	}
	if br := gitcli.Run(t, dir, "symbolic-ref", "HEAD"); br != "refs/heads/main" {
		t.Fatalf("HEAD -> %s, want refs/heads/main", br)
	}
	if files := gitcli.Run(t, dir, "ls-tree", "-r", "--name-only", "HEAD"); files != ".gitignore\nfacts/.keep\npem.yaml" {
		t.Fatalf("first commit holds %q", files)
	}
	if msg := gitcli.Run(t, dir, "log", "-1", "--format=%an <%ae> %s"); msg != "pem <pem@localhost> pem: init knowledge tree" {
		t.Fatalf("first commit: %q", msg)
	}
	assertClean(t, dir)
	head := gitcli.Run(t, dir, "rev-parse", "HEAD")
	cfg, _ := os.ReadFile(filepath.Join(dir, ".git", "config"))
	if err := Init(ctx, dir); err != nil {
		t.Fatal(err)
	}
	if again := gitcli.Run(t, dir, "rev-parse", "HEAD"); again != head {
		t.Fatalf("second InitRepo committed: %s -> %s", head, again)
	}
	cfg2, _ := os.ReadFile(filepath.Join(dir, ".git", "config"))
	if string(cfg) != string(cfg2) {
		t.Fatalf("second InitRepo rewrote the config:\n%s\n---\n%s", cfg, cfg2)
	}
	if h, err := headDir(ctx, dir); err != nil || h != head {
		t.Fatalf("HeadCommit = %q, %v; want %s", h, err, head)
	}
}

func TestInitRepoInsideProjectRepo(t *testing.T) {
	ctx := context.Background()
	proj := t.TempDir()
	gitcli.Run(t, proj, "init", "-q", "-b", "trunk")
	writeFile(t, proj, "README", "project\n")
	gitcli.Run(t, proj, "add", "README")
	gitcli.Run(t, proj, "commit", "-q", "-m", "project")
	kdir := filepath.Join(proj, "knowledge")
	writeFile(t, kdir, "pem.yaml", "format: 1\n")
	if err := Init(ctx, kdir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(kdir, ".git")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("InitRepo made a nested repository inside the project: %v", err)
	}
	if got := gitcli.Run(t, proj, "config", "merge.pem.driver"); got != MergeDriverCommand {
		t.Fatalf("merge driver not registered in the project repo: %q", got)
	}
	if n := gitcli.Run(t, proj, "rev-list", "--count", "HEAD"); n != "1" {
		t.Fatalf("InitRepo committed into a project that has history: %s commits", n)
	}
	// Commit paths relative to the knowledge dir land under knowledge/.
	h, err := commitDir(ctx, kdir, []string{"pem.yaml"}, "pem: add tree", testSig)
	if err != nil || h == "" {
		t.Fatalf("Commit = %q, %v", h, err)
	}
	if files := gitcli.Run(t, proj, "show", "--name-only", "--format=", "HEAD"); files != "knowledge/pem.yaml" {
		t.Fatalf("commit holds %q", files)
	}
	if br := gitcli.Run(t, proj, "rev-parse", "--abbrev-ref", "HEAD"); br != "trunk" {
		t.Fatalf("branch %s", br)
	}
	assertClean(t, proj)
}

func TestCommitExactPaths(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	writeFile(t, dir, "pem.yaml", "format: 1\n")
	writeFile(t, dir, "facts/a.com/x.yaml", "x: 1\n")
	writeFile(t, dir, "facts/a.com/y.yaml", "y: 1\n")
	writeFile(t, dir, "traces/a.com/2025-01-01/OLD.yaml", "old\n")
	if err := Init(ctx, dir); err != nil {
		t.Fatal(err)
	}
	first := gitcli.Run(t, dir, "rev-parse", "HEAD")

	// Changes: one modified, one added in a new directory, one deleted (its
	// directory becomes empty), plus an unrelated untracked file and an
	// unrelated staged change that must stay out of the commit.
	writeFile(t, dir, "facts/a.com/x.yaml", "x: 2\n")
	writeFile(t, dir, "traces/b.org/2025-02-01/NEW.yaml", "new\n")
	if err := os.Remove(filepath.Join(dir, "traces/a.com/2025-01-01/OLD.yaml")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "scratch.txt", "not mine\n")
	writeFile(t, dir, "facts/a.com/y.yaml", "y: staged\n")
	gitcli.Run(t, dir, "add", "facts/a.com/y.yaml")

	h, err := commitDir(ctx, dir, []string{"facts/a.com/x.yaml", "traces/b.org/2025-02-01/NEW.yaml", "traces/a.com/2025-01-01/OLD.yaml", "facts/a.com/x.yaml"},
		"pem: consolidate 1 trace\n\nbody line\n", testSig)
	if err != nil {
		t.Fatal(err)
	}
	if h != gitcli.Run(t, dir, "rev-parse", "HEAD") {
		t.Fatalf("returned %s, HEAD is %s", h, gitcli.Run(t, dir, "rev-parse", "HEAD"))
	}
	if p := gitcli.Run(t, dir, "rev-parse", "HEAD^"); p != first {
		t.Fatalf("parent %s, want %s", p, first)
	}
	got := gitcli.Run(t, dir, "show", "--name-status", "--format=%an <%ae>|%at|%B", "HEAD")
	want := "tester <tester@example.com>|1740830400|pem: consolidate 1 trace\n\nbody line\n\n\nM\tfacts/a.com/x.yaml\nD\ttraces/a.com/2025-01-01/OLD.yaml\nA\ttraces/b.org/2025-02-01/NEW.yaml"
	if got != want {
		t.Fatalf("commit:\n%s\nwant:\n%s", got, want)
	}
	if ls := gitcli.Run(t, dir, "ls-tree", "-d", "HEAD", "traces/"); strings.Contains(ls, "a.com") {
		t.Fatalf("empty directory kept in the tree: %s", ls)
	}
	// The unrelated changes are as they were: y staged, scratch untracked.
	if st := gitcli.Run(t, dir, "status", "--porcelain"); st != "M  facts/a.com/y.yaml\n?? scratch.txt" {
		t.Fatalf("status after commit:\n%s", st)
	}
	gitcli.Run(t, dir, "fsck", "--strict", "--no-dangling")

	// Nothing new: no commit.
	h2, err := commitDir(ctx, dir, []string{"facts/a.com/x.yaml", "traces/a.com/2025-01-01/OLD.yaml"}, "again", testSig)
	if err != nil || h2 != "" {
		t.Fatalf("commit of unchanged paths = %q, %v; want no commit", h2, err)
	}
	if now := gitcli.Run(t, dir, "rev-parse", "HEAD"); now != h {
		t.Fatalf("HEAD moved without changes: %s", now)
	}
	// Committing the staged path too leaves everything clean.
	if _, err := commitDir(ctx, dir, []string{"facts/a.com/y.yaml"}, "y", testSig); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, "scratch.txt"))
	assertClean(t, dir)
}

func TestCommitRefusesUnsafePaths(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	writeFile(t, dir, "pem.yaml", "format: 1\n")
	if err := Init(ctx, dir); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"../x", "/etc/passwd", "a/../../b", ".git/config", "", "a//b", "./pem.yaml"} {
		if _, err := commitDir(ctx, dir, []string{p}, "m", testSig); !errors.Is(err, ErrUnsafePathGit) {
			t.Errorf("Commit(%q) = %v, want ErrUnsafePathGit", p, err)
		}
	}
	if _, err := commitDir(ctx, t.TempDir(), []string{"x"}, "m", testSig); !errors.Is(err, ErrNoRepo) {
		t.Errorf("outside a repository: %v, want ErrNoRepo", err)
	}
}

func TestCommitSeriesChainsCommits(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	writeFile(t, dir, "pem.yaml", "format: 1\n")
	if err := Init(ctx, dir); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "experience/a.com/k.yaml", "e\n")
	writeFile(t, dir, "facts/a.com/k.yaml", "f\n")
	hs, err := commitSeriesDir(ctx, dir, []CommitRequest{
		{Paths: []string{"experience/a.com/k.yaml"}, Message: "pem: consolidate"},
		{Paths: []string{"pem.yaml"}, Message: "nothing"},
		{Paths: []string{"facts/a.com/k.yaml"}, Message: "pem: verify a.com/k r1\n\nConfidence: 0.91"},
	}, testSig)
	if err != nil {
		t.Fatal(err)
	}
	if hs[0] == "" || hs[1] != "" || hs[2] == "" {
		t.Fatalf("hashes %q", hs)
	}
	if log := gitcli.Run(t, dir, "log", "--format=%s", "-3"); log != "pem: verify a.com/k r1\npem: consolidate\npem: init knowledge tree" {
		t.Fatalf("log:\n%s", log)
	}
	if f := gitcli.Run(t, dir, "show", "--name-only", "--format=", "HEAD"); f != "facts/a.com/k.yaml" {
		t.Fatalf("verify commit holds %q", f)
	}
	if tr := gitcli.Run(t, dir, "log", "-1", "--format=%(trailers:key=Confidence,valueonly)"); tr != "0.91" {
		t.Fatalf("trailer %q", tr)
	}
	assertClean(t, dir)
}

// TestCommitRandomEdits applies random adds, edits and deletions over many
// commits and checks after each that HEAD, the index (git write-tree) and the
// worktree agree, as git computes them.
func TestCommitRandomEdits(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	writeFile(t, dir, "pem.yaml", "format: 1\n")
	if err := Init(ctx, dir); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(7))
	names := []string{"a", "b", "c-d", "c", "c.x", "e"}
	pick := func() string {
		depth := 1 + rng.Intn(3)
		parts := make([]string, depth)
		for i := range parts {
			parts[i] = names[rng.Intn(len(names))]
		}
		return strings.Join(parts, "/") + ".yaml"
	}
	live := map[string]bool{}
	for round := 0; round < 12; round++ {
		var paths []string
		for i := 0; i < 1+rng.Intn(6); i++ {
			p := pick()
			full := filepath.Join(dir, filepath.FromSlash(p))
			if live[p] && rng.Intn(3) == 0 {
				os.Remove(full)
				delete(live, p)
			} else {
				// Files end in .yaml and directories never do, so a
				// path is never both; "c", "c-d", "c.x" and "c.yaml"
				// exercise git's tree order.
				writeFile(t, dir, p, fmt.Sprintf("round %d %d\n", round, rng.Int()))
				live[p] = true
			}
			paths = append(paths, p)
		}
		if _, err := commitDir(ctx, dir, paths, "round "+strconv.Itoa(round), testSig); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		removeEmptyDirs(dir)
		assertSynced(t, dir)
	}
	gitcli.Run(t, dir, "fsck", "--strict", "--no-dangling")
}

func removeEmptyDirs(root string) {
	for i := 0; i < 4; i++ {
		filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
			if err == nil && fi.IsDir() && p != root && !strings.Contains(p, ".git") {
				if ents, _ := os.ReadDir(p); len(ents) == 0 {
					os.Remove(p)
				}
			}
			return nil
		})
	}
}

func TestCommitStaleAndForeignLocks(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	writeFile(t, dir, "pem.yaml", "format: 1\n")
	if err := Init(ctx, dir); err != nil {
		t.Fatal(err)
	}
	gitDir := filepath.Join(dir, ".git")

	// A foreign index.lock (a git process running): refused, and left alone.
	writeFile(t, gitDir, "index.lock", "x")
	writeFile(t, dir, "a.yaml", "a\n")
	if _, err := commitDir(ctx, dir, []string{"a.yaml"}, "a", testSig); !errors.Is(err, ErrGitLocked) {
		t.Fatalf("with a foreign index.lock: %v, want ErrGitLocked", err)
	}
	if _, err := os.Stat(filepath.Join(gitDir, "index.lock")); err != nil {
		t.Fatalf("foreign lock removed: %v", err)
	}

	// The same lock left by a pem that died (its pid no longer runs): cleaned.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	writeFile(t, gitDir, "pem-commit.pid", strconv.Itoa(dead.Process.Pid)+"\n")
	writeFile(t, gitDir, "refs/heads/main.lock", "")
	if _, err := commitDir(ctx, dir, []string{"a.yaml"}, "a", testSig); err != nil {
		t.Fatalf("stale locks of a dead pem not cleaned: %v", err)
	}
	for _, f := range []string{"index.lock", "refs/heads/main.lock", "pem-commit.pid"} {
		if _, err := os.Stat(filepath.Join(gitDir, f)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left behind: %v", f, err)
		}
	}
	assertClean(t, dir)

	// A live pem process committing: refused.
	live := exec.Command("sleep", "30")
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { live.Process.Kill(); live.Wait() }()
	writeFile(t, gitDir, "pem-commit.pid", strconv.Itoa(live.Process.Pid)+"\n")
	writeFile(t, dir, "b.yaml", "b\n")
	if _, err := commitDir(ctx, dir, []string{"b.yaml"}, "b", testSig); !errors.Is(err, ErrGitLocked) {
		t.Fatalf("with a live pem committing: %v, want ErrGitLocked", err)
	}
}

func TestCommitInterruptedBeforeRefMove(t *testing.T) {
	// A crash after the index was written but before the branch moved leaves
	// the changes staged; committing the same paths again completes the work.
	ctx := context.Background()
	dir := t.TempDir()
	writeFile(t, dir, "pem.yaml", "format: 1\n")
	if err := Init(ctx, dir); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "x.yaml", "x\n")
	gitcli.Run(t, dir, "add", "x.yaml") // the index as the crashed run left it
	h, err := commitDir(ctx, dir, []string{"x.yaml"}, "x", testSig)
	if err != nil || h == "" {
		t.Fatalf("Commit = %q, %v", h, err)
	}
	assertClean(t, dir)
}

func TestDefaultSignatureFromEnv(t *testing.T) {
	t.Setenv("PEM_GIT_AUTHOR_NAME", "Bot")
	t.Setenv("PEM_GIT_AUTHOR_EMAIL", "bot@example.org")
	if s := DefaultSignature(); s.Name != "Bot" || s.Email != "bot@example.org" {
		t.Fatalf("%+v", s)
	}
	t.Setenv("PEM_GIT_AUTHOR_NAME", "")
	t.Setenv("PEM_GIT_AUTHOR_EMAIL", "")
	if s := DefaultSignature(); s.Name != "pem" || s.Email != "pem@localhost" {
		t.Fatalf("%+v", s)
	}
}
