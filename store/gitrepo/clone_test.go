package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pemdev/pem/store/storetest/gitcli"
)

// treeRemote makes a bare repository whose history holds a knowledge tree
// under prefix ("" or "dir/"): several commits of traces, experience and
// facts, as consolidation leaves them.
func treeRemote(t *testing.T, prefix string) (bare, src string) {
	t.Helper()
	ctx := context.Background()
	src = t.TempDir()
	gitcli.Run(t, src, "init", "-q", "-b", "main")
	writeFile(t, src, "README.md", "project\n")
	writeFile(t, src, prefix+"pem.yaml", "format: 1\n")
	gitcli.Run(t, src, "add", "-A")
	gitcli.Run(t, src, "commit", "-q", "-m", "init")
	for i := 0; i < 5; i++ {
		paths := []string{prefix + "experience/d/e.yaml", prefix + "facts/d/e.yaml"}
		writeFile(t, src, paths[0], strings.Repeat("evidence\n", i+1))
		writeFile(t, src, paths[1], fmt.Sprintf("revision: %d\n", i))
		for j := 0; j < 3; j++ {
			p := fmt.Sprintf("%straces/d/2026-01-0%d/t%d.yaml", prefix, i+1, j)
			writeFile(t, src, p, fmt.Sprintf("trace %d %d\n", i, j))
			paths = append(paths, p)
		}
		if _, err := commitDir(ctx, src, paths, fmt.Sprintf("consolidate %d", i), testSig); err != nil {
			t.Fatal(err)
		}
	}
	bare = filepath.Join(t.TempDir(), "remote.git")
	gitcli.Run(t, src, "clone", "-q", "--bare", src, bare)
	return bare, src
}

// TestCloneSubtreeAndMaterialize: a tree inside a project repository is
// cloned with --tree: the top-level files on the way and the tree's facts and
// experience are there, nothing else, one commit of history, and go-git opens
// the clone. Materialize then checks out every trace, keeps a trace written
// meanwhile, and leaves a full checkout that git status finds clean.
func TestCloneSubtreeAndMaterialize(t *testing.T) {
	ctx := context.Background()
	bare, src := treeRemote(t, "knowledge/")
	dir := filepath.Join(t.TempDir(), "clone")
	if err := Clone(ctx, bare, dir, CloneOptions{Tree: "knowledge"}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"README.md", "knowledge/pem.yaml", "knowledge/facts/d/e.yaml", "knowledge/experience/d/e.yaml"} {
		want, _ := os.ReadFile(filepath.Join(src, p))
		if got, err := os.ReadFile(filepath.Join(dir, p)); err != nil || string(got) != string(want) {
			t.Fatalf("%s: %q, %v; want %q", p, got, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "knowledge", "traces")); !os.IsNotExist(err) {
		t.Fatalf("traces checked out: %v", err)
	}
	if n := gitcli.Run(t, dir, "rev-list", "--count", "HEAD"); n != "1" {
		t.Fatalf("history: %s commits, want 1", n)
	}
	missing := gitcli.Run(t, dir, "rev-list", "--objects", "--missing=print", "HEAD")
	c := 0
	for _, l := range strings.Split(missing, "\n") {
		if strings.HasPrefix(l, "?") {
			c++
		}
	}
	if c != 15 {
		t.Fatalf("%d objects missing, want the 15 traces' blobs:\n%s", c, missing)
	}
	r, err := Open(ctx, filepath.Join(dir, "knowledge"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if sparse, err := r.Sparse(); err != nil || !sparse {
		t.Fatalf("Sparse = %v, %v", sparse, err)
	}
	writeFile(t, dir, "knowledge/traces/d/2026-02-01/new.yaml", "a saved trace\n")

	did, err := r.Materialize(ctx)
	if err != nil || !did {
		t.Fatalf("Materialize = %v, %v", did, err)
	}
	for i := 0; i < 5; i++ {
		p := fmt.Sprintf("knowledge/traces/d/2026-01-0%d/t2.yaml", i+1)
		if got, err := os.ReadFile(filepath.Join(dir, p)); err != nil || string(got) != fmt.Sprintf("trace %d 2\n", i) {
			t.Fatalf("%s: %q, %v", p, got, err)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "knowledge/traces/d/2026-02-01/new.yaml")); string(got) != "a saved trace\n" {
		t.Fatalf("the trace written before Materialize: %q", got)
	}
	if st := gitcli.Run(t, dir, "status", "--porcelain"); st != "?? knowledge/traces/d/2026-02-01/" {
		t.Fatalf("status: %q", st)
	}
	if sparse, err := r.Sparse(); err != nil || sparse {
		t.Fatalf("after Materialize, Sparse = %v, %v", sparse, err)
	}
	if did, err := r.Materialize(ctx); err != nil || did {
		t.Fatalf("second Materialize = %v, %v", did, err)
	}
	if _, err := r.Commit(ctx, []string{"traces/d/2026-02-01/new.yaml"}, "add", testSig); err != nil {
		t.Fatal(err)
	}
	assertSynced(t, dir)
	gitcli.Run(t, dir, "fsck", "--strict", "--no-dangling")
}

// TestCloneRefusals: a repository without a tree, a directory in use, a
// remote that is not there, no git program: each says so and leaves no
// directory behind.
func TestCloneRefusals(t *testing.T) {
	ctx := context.Background()
	bare, _ := treeRemote(t, "knowledge/")
	tmp := t.TempDir()
	if err := Clone(ctx, bare, filepath.Join(tmp, "a"), CloneOptions{}); !errors.Is(err, ErrNotATree) || !strings.Contains(err.Error(), "--tree") {
		t.Fatalf("no tree at the top: %v", err)
	}
	if _, err := os.Stat(filepath.Join(tmp, "a")); !os.IsNotExist(err) {
		t.Fatalf("the failed clone was left: %v", err)
	}
	writeFile(t, tmp, "used/file", "x")
	if err := Clone(ctx, bare, filepath.Join(tmp, "used"), CloneOptions{Tree: "knowledge"}); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("non-empty directory: %v", err)
	}
	if err := Clone(ctx, filepath.Join(tmp, "nosuch.git"), filepath.Join(tmp, "b"), CloneOptions{}); !errors.Is(err, ErrRemoteRefused) {
		t.Fatalf("missing remote: %v", err)
	}
	if err := Clone(ctx, bare, filepath.Join(tmp, "c"), CloneOptions{Tree: "../x"}); err == nil {
		t.Fatal("a tree outside the repository was accepted")
	}
	t.Setenv("PATH", t.TempDir())
	if err := Clone(ctx, bare, filepath.Join(tmp, "d"), CloneOptions{Tree: "knowledge"}); !errors.Is(err, ErrGitMissing) {
		t.Fatalf("no git: %v", err)
	}
	for _, d := range []string{"b", "c", "d"} {
		if _, err := os.Stat(filepath.Join(tmp, d)); !os.IsNotExist(err) {
			t.Fatalf("%s left behind: %v", d, err)
		}
	}
}

// A tree whose traces and experience live on the state ref: pem clone
// fetches main's last commit and the state's tip, both without blobs, then
// the experience's blobs; the experience is on disk, the traces are not and
// their blobs were never fetched. Materialize (before a consolidation)
// fetches them in one batch and writes them; git status stays clean.
func TestCloneTakesTheState(t *testing.T) {
	ctx := context.Background()
	_, src := treeRemote(t, "knowledge/")
	writeFile(t, src, "knowledge/.gitignore", stateIgnore)
	r, err := Open(ctx, filepath.Join(src, "knowledge"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, src, "knowledge/experience/d/e.yaml", "evidence after the move\n")
	if _, err := r.CommitState(ctx, &StateRequest{Dirs: stateDirs, Paths: []string{"experience/d/e.yaml"}, Message: "consolidate", MainPaths: []string{".gitignore"}}, testSig); err != nil {
		t.Fatal(err)
	}
	r.Close()
	bare := filepath.Join(t.TempDir(), "remote.git")
	gitcli.Run(t, src, "clone", "-q", "--bare", src, bare)
	gitcli.Run(t, src, "push", "-q", bare, StateRef.String())

	dir := filepath.Join(t.TempDir(), "clone")
	if err := Clone(ctx, bare, dir, CloneOptions{Tree: "knowledge"}); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "knowledge/experience/d/e.yaml")); err != nil || string(got) != "evidence after the move\n" {
		t.Fatalf("experience in the clone: %q, %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "knowledge", "traces")); !os.IsNotExist(err) {
		t.Fatalf("traces checked out: %v", err)
	}
	if got, want := gitcli.Run(t, dir, "rev-parse", StateRef.String()), gitcli.Run(t, src, "rev-parse", StateRef.String()); got != want {
		t.Fatalf("clone's state %s, want %s", got, want)
	}
	missing := 0
	for _, l := range strings.Split(gitcli.Run(t, dir, "rev-list", "--objects", "--missing=print", StateRef.String()), "\n") {
		if strings.HasPrefix(l, "?") {
			missing++
		}
	}
	if missing != 15 {
		t.Fatalf("%d state objects missing, want the 15 traces' blobs", missing)
	}
	assertClean(t, dir)

	// A trace saved in the clone meanwhile stays; consolidation's
	// Materialize brings the 15.
	writeFile(t, dir, "knowledge/traces/d/2026-02-01/mine.yaml", "saved here\n")
	r, err = Open(ctx, filepath.Join(dir, "knowledge"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if did, err := r.Materialize(ctx); err != nil || !did {
		t.Fatalf("Materialize = %v, %v", did, err)
	}
	n := 0
	filepath.WalkDir(filepath.Join(dir, "knowledge", "traces"), func(p string, e os.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			n++
		}
		return nil
	})
	if n != 16 {
		t.Fatalf("%d traces on disk after Materialize, want 15 and the one saved here", n)
	}
	for _, l := range strings.Split(gitcli.Run(t, dir, "rev-list", "--objects", "--missing=print", StateRef.String()), "\n") {
		if strings.HasPrefix(l, "?") {
			t.Fatalf("still missing after Materialize: %s", l)
		}
	}
	assertClean(t, dir)
}
