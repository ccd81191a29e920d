package gitrepo

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/pemdev/pem/store/storetest/gitcli"
)

// TestCommitWritesOnePack: a commit with many new objects writes them as one
// pack with its index and no loose objects, and git reads every object of
// it (fsck, verify-pack, the files' contents); a small commit stays loose.
func TestCommitWritesOnePack(t *testing.T) {
	ctx := context.Background()
	repo := t.TempDir()
	gitcli.Run(t, repo, "init", "-q", "-b", "main")
	writeFile(t, repo, "seed.yaml", "seed\n")
	gitcli.Run(t, repo, "add", "-A")
	gitcli.Run(t, repo, "commit", "-q", "-m", "seed")
	loose := func() int {
		n := 0
		dirs, _ := filepath.Glob(filepath.Join(repo, ".git", "objects", "??"))
		for _, d := range dirs {
			ents, _ := os.ReadDir(d)
			n += len(ents)
		}
		return n
	}
	before := loose()
	var paths []string
	for i := 0; i < 200; i++ {
		p := fmt.Sprintf("traces/d%d/day/%03d.yaml", i%7, i)
		// Sizes across the header's 4-bit and 7-bit boundaries.
		writeFile(t, repo, p, strings.Repeat(fmt.Sprintf("line %d\n", i), i%40))
		paths = append(paths, p)
	}
	writeFile(t, repo, "empty.yaml", "")
	paths = append(paths, "empty.yaml", "seed.yaml")
	if err := os.Remove(filepath.Join(repo, "seed.yaml")); err != nil {
		t.Fatal(err)
	}
	if _, err := commitDir(ctx, repo, paths, "many", Signature{Name: "t", Email: "t@t"}); err != nil {
		t.Fatal(err)
	}
	if n := loose(); n != before {
		t.Fatalf("%d loose objects written next to the pack", n-before)
	}
	packs, _ := filepath.Glob(filepath.Join(repo, ".git", "objects", "pack", "pack-*.idx"))
	if len(packs) != 1 {
		t.Fatalf("packs: %v", packs)
	}
	out := gitcli.Run(t, repo, "verify-pack", "-v", packs[0])
	if !strings.Contains(out, "blob") || !strings.Contains(out, "tree") || !strings.Contains(out, "commit") {
		t.Fatalf("verify-pack:\n%s", out)
	}
	assertClean(t, repo)
	for _, i := range []int{0, 1, 17, 199} {
		p := fmt.Sprintf("traces/d%d/day/%03d.yaml", i%7, i)
		if got, want := gitcli.Run(t, repo, "cat-file", "-p", "HEAD:"+p), strings.TrimSpace(strings.Repeat(fmt.Sprintf("line %d\n", i), i%40)); got != want {
			t.Fatalf("%s in the pack = %q, want %q", p, got, want)
		}
	}
	// go-git (pem's log and diff) reads the pack too.
	r, err := openRepo(repo)
	if err != nil {
		t.Fatal(err)
	}
	_, head, err := r.head()
	if err != nil {
		t.Fatal(err)
	}
	c, err := object.GetCommit(r.st, head)
	if err != nil {
		t.Fatal(err)
	}
	f, err := c.File("traces/d3/day/017.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := f.Contents(); got != strings.Repeat("line 17\n", 17) {
		t.Fatalf("go-git read %q from the pack", got)
	}
	r.close()
	if leftovers, _ := filepath.Glob(filepath.Join(repo, ".git", "objects", "pack", "tmp_*")); len(leftovers) > 0 {
		t.Fatalf("temporary files left: %v", leftovers)
	}

	// A small commit writes loose objects.
	writeFile(t, repo, "one.yaml", "one\n")
	if _, err := commitDir(ctx, repo, []string{"one.yaml"}, "one", Signature{Name: "t", Email: "t@t"}); err != nil {
		t.Fatal(err)
	}
	if n := loose(); n != before+3 {
		t.Fatalf("a small commit wrote %d loose objects, want 3 (blob, tree, commit)", n-before)
	}
	assertClean(t, repo)
}

// TestHandleReadsThePacksItWrites: one handle serves a whole command, so a
// commit must find HEAD in the pack the handle's previous commit wrote, and
// the history reader must see it too.
func TestHandleReadsThePacksItWrites(t *testing.T) {
	ctx := context.Background()
	repo := t.TempDir()
	gitcli.Run(t, repo, "init", "-q", "-b", "main")
	r, err := Open(ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	h, err := r.History()
	if err != nil {
		t.Fatal(err)
	}
	var last string
	for round := 0; round < 3; round++ {
		var paths []string
		for i := 0; i < 40; i++ {
			p := fmt.Sprintf("traces/r%d/%02d.yaml", round, i)
			writeFile(t, repo, p, fmt.Sprintf("round %d file %d\n", round, i))
			paths = append(paths, p)
		}
		c, err := r.Commit(ctx, paths, fmt.Sprintf("round %d", round), Signature{Name: "t", Email: "t@t"})
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if c == "" {
			t.Fatalf("round %d made no commit", round)
		}
		got, err := h.FileAt(ctx, "HEAD", fmt.Sprintf("traces/r%d/07.yaml", round))
		if err != nil {
			t.Fatalf("round %d: reading the new file back: %v", round, err)
		}
		if got == "" {
			t.Fatalf("round %d: the history reader does not see the new commit", round)
		}
		last = c
	}
	if head := gitcli.Run(t, repo, "rev-parse", "HEAD"); head != last {
		t.Fatalf("HEAD %s, want %s", head, last)
	}
	if packs, _ := filepath.Glob(filepath.Join(repo, ".git", "objects", "pack", "pack-*.idx")); len(packs) != 3 {
		t.Fatalf("want three packs, one per commit: %v", packs)
	}
	assertClean(t, repo)
}
