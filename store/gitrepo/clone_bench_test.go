package gitrepo

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pemdev/pem/store/storetest/gitcli"
)

// BenchmarkClone: pem clone (facts and experience of the last commit) against
// a full git clone of the same bare remote, at two history lengths: the full
// clone grows with the history, pem clone with the last commit's tree only
// (the same 50 entries throughout; the traces' trees grow, since nothing
// expires them here). Run with
//
//	go test ./store/gitrepo -run '^$' -bench Clone -benchtime 5x
func BenchmarkClone(b *testing.B) {
	for _, commits := range []int{50, 400} {
		bare := historyRemote(b, commits)
		b.Run(fmt.Sprintf("history=%d/pem-clone", commits), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				dir := filepath.Join(b.TempDir(), "c")
				if err := Clone(context.Background(), bare, dir, CloneOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("history=%d/git-clone-full", commits), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				gitcli.Run(b, b.TempDir(), "clone", "-q", "--no-local", bare, "c")
			}
		})
	}
}

// historyRemote is a bare remote whose history has commits consolidations:
// 40 new traces each, and the 50 entries' experience rewritten.
func historyRemote(b *testing.B, commits int) string {
	b.Helper()
	ctx := context.Background()
	src := b.TempDir()
	gitcli.Run(b, src, "init", "-q", "-b", "main")
	writeFile(b, src, "pem.yaml", "format: 1\n")
	gitcli.Run(b, src, "add", "-A")
	gitcli.Run(b, src, "commit", "-q", "-m", "init")
	for i := 0; i < commits; i++ {
		var paths []string
		for e := 0; e < 50; e++ {
			p := fmt.Sprintf("experience/d%d/e%d.yaml", e%5, e)
			writeFile(b, src, p, strings.Repeat(fmt.Sprintf("- trace: t%d-%d\n  outcome: success\n", i, e), 8))
			paths = append(paths, p)
			if i == 0 {
				f := fmt.Sprintf("facts/d%d/e%d.yaml", e%5, e)
				writeFile(b, src, f, "status: verified\n")
				paths = append(paths, f)
			}
		}
		for j := 0; j < 40; j++ {
			p := fmt.Sprintf("traces/d%d/2026-01-%02d/t%d-%d.yaml", j%5, 1+i%28, i, j)
			writeFile(b, src, p, strings.Repeat(fmt.Sprintf("step %d of run %d\n", j, i), 20))
			paths = append(paths, p)
		}
		if _, err := commitDir(ctx, src, paths, fmt.Sprintf("consolidate %d", i), testSig); err != nil {
			b.Fatal(err)
		}
	}
	bare := filepath.Join(b.TempDir(), "remote.git")
	gitcli.Run(b, src, "clone", "-q", "--bare", src, bare)
	gitcli.Run(b, bare, "gc", "-q")
	if _, err := os.Stat(bare); err != nil {
		b.Fatal(err)
	}
	return bare
}
