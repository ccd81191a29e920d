package gitrepo_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pemdev/pem/store/gitrepo"
	"github.com/pemdev/pem/store/storetest/gitcli"
)

// History.Log lists exactly the commits `git log --first-parent -- paths`
// lists, on a real repository: 80 commits changing random entries' facts
// and experience (with deletions, re-creations and a rename), a merge of a
// side branch, and sibling directories enough for deltified trees — read
// loose, then packed with long delta chains and a commit-graph file. The
// audit trail (pem log) must not lose or invent a commit.
func TestLogAgainstGitLog(t *testing.T) {
	ctx := context.Background()
	repo := t.TempDir()
	gitlogInit(t, repo)
	gitcli.Run(t, repo, "config", "gc.auto", "0")
	rng := rand.New(rand.NewSource(17))
	entry := func(d, k int) string { return fmt.Sprintf("d%02d.example/k%d", d, k) }
	var body strings.Builder
	for i := 0; i < 60; i++ {
		fmt.Fprintf(&body, "  - evidence line %03d of a growing experience file\n", i)
	}
	for d := 0; d < 40; d++ {
		for k := 0; k < 3; k++ {
			gitlogWrite(t, repo, "facts/"+entry(d, k)+".yaml", "format: 1\nstatus: candidate\nrevision: 0\n")
			gitlogWrite(t, repo, "experience/"+entry(d, k)+".yaml", "format: 1\nattempts: 0\n")
		}
	}
	gitlogCommit(t, repo, "the tree", 0)
	for c := 1; c <= 80; c++ {
		for n := 0; n < 1+rng.Intn(4); n++ {
			e := entry(rng.Intn(8), rng.Intn(3)) // a few entries change often
			switch r := rng.Intn(20); {
			case r == 0:
				gitcli.Run(t, repo, "rm", "-q", "--ignore-unmatch", "facts/"+e+".yaml")
			case r < 8:
				gitlogWrite(t, repo, "facts/"+e+".yaml", fmt.Sprintf("format: 1\nstatus: candidate\nrevision: %d\n%s", c, body.String()))
			default:
				gitlogWrite(t, repo, "experience/"+e+".yaml", fmt.Sprintf("format: 1\nattempts: %d\nevidence:\n%s", c, body.String()))
			}
		}
		if c == 40 {
			gitcli.Run(t, repo, "mv", "facts/"+entry(1, 1)+".yaml", "facts/"+entry(1, 2)+".renamed.yaml")
		}
		if c == 60 {
			// A side branch merged into main (pem's sync merges; log follows the first parent).
			gitcli.Run(t, repo, "checkout", "-q", "-b", "side")
			gitlogWrite(t, repo, "facts/"+entry(2, 0)+".yaml", "format: 1\nstatus: verified\nrevision: side\n")
			gitlogCommit(t, repo, "side change", c)
			gitcli.Run(t, repo, "checkout", "-q", "main")
			gitlogWrite(t, repo, "experience/"+entry(2, 0)+".yaml", "format: 1\nattempts: 999\n")
			gitlogCommit(t, repo, "main change", c)
			gitcli.Run(t, repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "merge", "-q", "--no-ff", "-m", "merge side", "side")
			continue
		}
		gitlogCommit(t, repo, fmt.Sprintf("round %d", c), c)
	}
	var checkOnce func(string)
	paths := [][]string{
		{"facts/" + entry(0, 0) + ".yaml", "experience/" + entry(0, 0) + ".yaml"},
		{"facts/" + entry(1, 1) + ".yaml", "experience/" + entry(1, 1) + ".yaml"},
		{"facts/" + entry(1, 2) + ".renamed.yaml"},
		{"facts/" + entry(2, 0) + ".yaml", "experience/" + entry(2, 0) + ".yaml"},
		{"facts/" + entry(30, 2) + ".yaml"}, // never changed after the first commit
		{"facts/d03.example"},
		{"experience"},
		{"facts/nothing.example/none.yaml"},
	}
	cache := filepath.Join(repo, ".git", "pem-log-cache")
	// Each stage twice: without the log cache (the walk reads the trees and
	// writes it), then from it (no tree read for a commit seen before).
	check := func(stage string) {
		t.Helper()
		if err := os.Remove(cache); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		checkOnce(stage + ", no log cache")
		if _, err := os.Stat(cache); err != nil {
			t.Fatalf("%s: the walk left no log cache: %v", stage, err)
		}
		checkOnce(stage + ", from the log cache")
	}
	checkOnce = func(stage string) {
		t.Helper()
		h, err := gitrepo.OpenHistory(repo)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		for _, ps := range paths {
			es, err := h.Log(ctx, ps, 0)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range es {
				got = append(got, e.Hash)
			}
			args := append([]string{"log", "--first-parent", "--format=%H", "--"}, ps...)
			want := gitcli.Run(t, repo, args...)
			if strings.Join(got, "\n") != want {
				t.Fatalf("%s: Log(%v) lists %d commits, git log %d:\npem:\n%s\ngit:\n%s", stage, ps, len(got), strings.Count(want, "\n")+1, strings.Join(got, "\n"), want)
			}
			if len(ps) == 2 && ps[0] == "facts/"+entry(0, 0)+".yaml" && len(got) < 10 {
				t.Fatalf("%s: only %d commits for a busy entry: the test proves little", stage, len(got))
			}
		}
	}
	check("loose objects")
	gitcli.Run(t, repo, "repack", "-adfq", "--depth=50", "--window=50")
	gitcli.Run(t, repo, "prune-packed")
	check("packed with delta chains")
	gitcli.Run(t, repo, "commit-graph", "write", "--reachable")
	check("packed, with a commit-graph")
}
