package gitrepo

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pemdev/pem/store/storetest/gitcli"
)

// BenchmarkCommitState: a consolidation's state commit (CommitState) of
// new traces and rewritten experience onto a packed state of 300 domains
// × (10 experience files + 30 traces), against the same kind of change
// committed by the git CLI on the state's own index (add -f -A,
// write-tree, commit-tree, update-ref) in the same iteration. Reports
// pem's and git's time per commit and their ratio (x-git). Run with
//
//	go test ./store/gitrepo -run '^$' -bench CommitState -benchtime 5x
func BenchmarkCommitState(b *testing.B) {
	const domains, exps, traces = 300, 10, 30
	ctx := context.Background()
	dir := b.TempDir()
	gitcli.Run(b, dir, "init", "-q", "-b", "main")
	writeFile(b, dir, "pem.yaml", "format: 1\n")
	gitcli.Run(b, dir, "add", "-A")
	gitcli.Run(b, dir, "-c", "user.name=b", "-c", "user.email=b@example.com", "commit", "-q", "-m", "init")
	exp := func(d, e, round int) string {
		return fmt.Sprintf("experience/site%04d.example/intent-%d.yaml", d, e)
	}
	expBody := func(d, e, round int) string {
		var s strings.Builder
		fmt.Fprintf(&s, "format: 1\ndomain: site%04d.example\nintent_key: intent-%d\nevidence:\n", d, e)
		for k := 0; k < 12+round%3; k++ {
			fmt.Fprintf(&s, "  - trace: 01J%06d%04d%02d%03d\n    outcome: success\n    at: 2025-05-%02dT10:00:00Z\n    session: s%d\n", round, d, e, k, 1+k%28, k%3)
		}
		return s.String()
	}
	trace := func(d, day, n int) string {
		return fmt.Sprintf("traces/site%04d.example/2025-05-%02d/01J%04d%02d%06d.yaml", d, 1+day%28, d, day%100, n)
	}
	traceBody := func(d, n int) string {
		return fmt.Sprintf("format: 1\nid: t%d-%d\ndomain: site%04d.example\nsteps:\n  - seq: 1\n    action: navigate\n    url: https://site%04d.example/item/%d\n    ok: true\n%s", d, n, d, d, n, strings.Repeat("  - seq: 2\n    action: extract\n    ok: true\n", 10))
	}
	for d := 0; d < domains; d++ {
		for e := 0; e < exps; e++ {
			writeFile(b, dir, exp(d, e, 0), expBody(d, e, 0))
		}
		for n := 0; n < traces; n++ {
			writeFile(b, dir, trace(d, n%3, n), traceBody(d, n))
		}
	}
	idx := filepath.Join(dir, ".git", "bench-state-index")
	gitIdx := func(args ...string) string {
		out, err := gitcli.OutputEnv(dir, []string{"GIT_INDEX_FILE=" + idx, "GIT_AUTHOR_NAME=b", "GIT_AUTHOR_EMAIL=b@example.com",
			"GIT_COMMITTER_NAME=b", "GIT_COMMITTER_EMAIL=b@example.com"}, args...)
		if err != nil {
			b.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(out)
	}
	gitState := func(msg string) {
		gitIdx("add", "-f", "-A", "traces", "experience")
		tree := gitIdx("write-tree")
		args := []string{"commit-tree", "-m", msg, tree}
		if tip, err := gitcli.Output(dir, "rev-parse", "-q", "--verify", string(StateRef)); err == nil {
			args = append(args, "-p", strings.TrimSpace(tip))
		}
		gitIdx("update-ref", string(StateRef), gitIdx(args...))
	}
	gitState("the generated state")
	gitcli.Run(b, dir, "gc", "-q")

	// change writes one round's files: two new traces in every domain (a
	// new day) and two of its experience files rewritten.
	change := func(round int) []string {
		var paths []string
		for d := 0; d < domains; d++ {
			for k := 0; k < 2; k++ {
				p := trace(d, 10+round, 1000*round+k)
				writeFile(b, dir, p, traceBody(d, 1000*round+k))
				e := exp(d, (round*2+k)%exps, round)
				writeFile(b, dir, e, expBody(d, (round*2+k)%exps, round))
				paths = append(paths, p, e)
			}
		}
		return paths
	}
	// The files just written must look settled to git's index as they do
	// to pem (neither checks mtimes here), and the git directory be warm.
	time.Sleep(10 * time.Millisecond)
	var pemTime, gitTime time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		paths := change(2 * i)
		b.StartTimer()
		start := time.Now()
		r, err := Open(ctx, dir)
		if err != nil {
			b.Fatal(err)
		}
		res, err := r.CommitState(ctx, &StateRequest{Dirs: []string{"traces", "experience"}, Paths: paths, Message: "consolidate", KeepMain: true}, Signature{Name: "b", Email: "b@example.com", When: time.Unix(int64(1e9+i), 0)})
		r.Close()
		if err != nil || res.Hash == "" {
			b.Fatalf("CommitState: %+v, %v", res, err)
		}
		pemTime += time.Since(start)
		b.StopTimer()
		// git's own index for the state, refreshed to what pem committed.
		os.Remove(idx)
		gitIdx("read-tree", string(StateRef))
		_, _ = gitcli.OutputEnv(dir, []string{"GIT_INDEX_FILE=" + idx}, "update-index", "-q", "--refresh")
		change(2*i + 1)
		start = time.Now()
		gitState("the same change")
		gitTime += time.Since(start)
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(float64(pemTime.Milliseconds())/float64(b.N), "pem-ms/op")
	b.ReportMetric(float64(gitTime.Milliseconds())/float64(b.N), "git-ms/op")
	b.ReportMetric(float64(pemTime)/float64(gitTime), "x-git")
}
