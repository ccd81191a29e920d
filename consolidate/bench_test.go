package consolidate

// BenchmarkConsolidate: 1,000 new traces consolidated into a tree of 100,000
// traces and 10,000 facts entries, commit included, measured in a child
// process (for its peak RSS), next to `git add -A && git commit` of the same
// change by the git CLI in the same run.
//
//	go test ./consolidate -run '^$' -bench Consolidate -benchtime 1x
//	PEM_BENCH_SCALE=0.1 go test ./consolidate -run '^$' -bench Consolidate -benchtime 1x   # 10,000 traces, 1,000 entries, 100 new
//
// Results and how to read them: docs/performance.md, "Consolidation".

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store"
	"github.com/pemdev/pem/store/gitrepo"
	"github.com/pemdev/pem/store/storetest/gitcli"
	"github.com/pemdev/pem/store/treegen"
)

type benchReport struct {
	LoadMs, PlanMs, WriteMs, CommitMs, TotalMs float64
	Folded, Written, Expired                   int
	PeakRSSMB, CPUMs                           float64
}

// childBench is the measured consolidation, run in its own process.
func childBench() int {
	dir := os.Getenv("PEM_TEST_DIR")
	now, _ := time.Parse(time.RFC3339, os.Getenv("PEM_TEST_NOW"))
	ctx := context.Background()
	st, err := store.Open(dir, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	repo, err := gitrepo.Open(ctx, dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer repo.Close()
	var r benchReport
	if p := os.Getenv("PEM_BENCH_CPUPROFILE"); p != "" {
		f, err := os.Create(p)
		if err == nil {
			pprof.StartCPUProfile(f)
			defer pprof.StopCPUProfile()
		}
	}
	t0 := time.Now()
	in, err := Load(ctx, st, LoadOptions{Now: now, Repo: repo})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	t1 := time.Now()
	plan := Plan(now, in)
	t2 := time.Now()
	res := &Result{}
	opts := Options{Now: func() time.Time { return now }, NoCommit: true}
	if err := apply(ctx, st, repo, plan, opts, res, nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	t3 := time.Now()
	state, reqs := commitRequests(plan)
	if _, err := repo.CommitState(ctx, state, gitrepo.Signature{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if _, err := repo.CommitSeries(ctx, reqs, gitrepo.Signature{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	t4 := time.Now()
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	r.LoadMs, r.PlanMs, r.WriteMs, r.CommitMs, r.TotalMs = ms(t1.Sub(t0)), ms(t2.Sub(t1)), ms(t3.Sub(t2)), ms(t4.Sub(t3)), ms(t4.Sub(t0))
	r.Folded, r.Written, r.Expired = plan.Count(KindFold), len(res.Written), len(plan.Expire)
	r.PeakRSSMB = peakRSSMB()
	r.CPUMs = selfCPUMs()
	json.NewEncoder(os.Stdout).Encode(r)
	pprof.StopCPUProfile()
	return 0
}

// peakRSSMB reads the process's peak resident set (Linux; 0 elsewhere).
func peakRSSMB() float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			return kb / 1024
		}
	}
	return 0
}

func benchScale() float64 {
	if s, err := strconv.ParseFloat(os.Getenv("PEM_BENCH_SCALE"), 64); err == nil && s > 0 && s <= 1 {
		return s
	}
	return 1
}

func gitTimed(b *testing.B, dir string, args ...string) time.Duration {
	b.Helper()
	start := time.Now()
	gitcli.Run(b, dir, args...)
	return time.Since(start)
}

// benchBase returns the steady-state tree the benchmark starts from: the
// generated tree committed with the git CLI and consolidated once. It is
// built once into $TMPDIR/pem-consolidate-bench-<params> (delete it to
// rebuild) and copied for each run.
func benchBase(b *testing.B, domains, intents, traces int) string {
	b.Helper()
	ctx := context.Background()
	base := filepath.Join(os.TempDir(), fmt.Sprintf("pem-consolidate-bench-%d-%d-%d-2", domains, intents, traces)) // 2: with the state ref
	if _, err := os.Stat(filepath.Join(base, ".complete")); err == nil {
		return filepath.Join(base, "tree")
	}
	setup := time.Now()
	if err := os.RemoveAll(base); err != nil {
		b.Fatal(err)
	}
	dir := filepath.Join(base, "tree")
	if err := treegen.Generate(ctx, dir, domains, intents, traces, 1); err != nil {
		b.Fatal(err)
	}
	gitcli.Run(b, dir, "init", "-q", "-b", "main")
	gitcli.Run(b, dir, "-c", "user.name=bench", "-c", "user.email=bench@localhost", "add", "-A")
	gitcli.Run(b, dir, "-c", "user.name=bench", "-c", "user.email=bench@localhost", "-c", "gc.auto=0", "commit", "-q", "-m", "tree")
	// The traces and experience on refs/pem/state, as a tree consolidated
	// before holds them (the generator's .gitignore keeps them off main;
	// without a state the measured state commit would build on none).
	idx := filepath.Join(dir, ".git", "bench-state-index")
	gitEnv := func(args ...string) string {
		c := exec.Command("git", args...)
		c.Dir, c.Env = dir, append(os.Environ(), "GIT_INDEX_FILE="+idx, "GIT_AUTHOR_NAME=bench", "GIT_AUTHOR_EMAIL=bench@localhost",
			"GIT_COMMITTER_NAME=bench", "GIT_COMMITTER_EMAIL=bench@localhost")
		out, err := c.Output()
		if err != nil {
			b.Fatalf("git %s: %v", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out))
	}
	gitEnv("add", "-f", "traces", "experience")
	stateCommit := gitEnv("commit-tree", "-m", "the generated state", gitEnv("write-tree"))
	gitcli.Run(b, dir, "update-ref", string(gitrepo.StateRef), stateCommit)
	os.Remove(idx)
	// Packed, like a repository that lives long; no automatic gc in the
	// background of a measurement.
	gitcli.Run(b, dir, "gc", "-q")
	gitcli.Run(b, dir, "config", "gc.auto", "0")
	if err := gitrepo.Init(ctx, dir); err != nil {
		b.Fatal(err)
	}
	st, err := store.Open(dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	// Steady state: an earlier consolidation ran (and left its summary
	// cache). Files must be older than the cache's racy window.
	time.Sleep(racyWindow)
	if _, err := Run(ctx, st, Options{Now: func() time.Time { return treegen.Base }}); err != nil {
		b.Fatal(err)
	}
	st.Close()
	if err := os.WriteFile(filepath.Join(base, ".complete"), nil, 0o644); err != nil {
		b.Fatal(err)
	}
	b.Logf("built %s in %v", base, time.Since(setup).Round(time.Second))
	return dir
}

func BenchmarkConsolidate(b *testing.B) {
	ctx := context.Background()
	s := benchScale()
	domains := max(1, int(100*s))
	const intents = 100
	traces := int(100_000 * s)
	fresh := max(10, int(1000*s))

	setup := time.Now()
	base := benchBase(b, domains, intents, traces)
	dir := filepath.Join(b.TempDir(), "tree")
	if out, err := exec.Command("cp", "-a", base, dir).CombinedOutput(); err != nil {
		b.Fatalf("copying the base tree: %v: %s", err, out)
	}
	// The copy has new inodes and ctimes: refresh git's index so that both
	// pem and the git CLI start from a fresh index, and refresh the summary
	// cache with this code's format (a no-op when it is current).
	gitcli.Run(b, dir, "update-index", "-q", "--refresh")
	// The copy leaves a gigabyte of dirty pages: write them back now, not
	// during the measurement.
	syncDisks()
	st, err := store.Open(dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	repo, err := gitrepo.Open(ctx, dir)
	if err != nil {
		b.Fatal(err)
	}
	_, err = Load(ctx, st, LoadOptions{Now: treegen.Base, Repo: repo})
	repo.Close()
	if err != nil {
		b.Fatal(err)
	}
	before := gitcli.Run(b, dir, "rev-parse", "HEAD")
	stateBefore := gitcli.Run(b, dir, "rev-parse", string(gitrepo.StateRef))
	rng := rand.New(rand.NewSource(2))
	for i := 0; i < fresh; i++ {
		d, j := rng.Intn(domains), rng.Intn(intents)
		n, _ := engine.NormalizeURL(treegen.URL(d, j))
		at := treegen.Base.Add(-time.Duration(rng.Intn(3600)) * time.Second)
		id, _ := engine.NewTraceID(at, rng)
		t := &engine.Trace{Format: engine.Format, ID: id, Session: fmt.Sprintf("n%d", rng.Intn(9)), Intent: treegen.Intent(j),
			IntentKey: engine.IntentKey(treegen.Intent(j)), URL: n.URL, Domain: n.Domain, URLPattern: engine.Pattern(n),
			Outcome: engine.Success, StartedAt: at, Steps: []engine.Step{
				{Seq: 1, Action: "navigate", URL: n.URL, OK: true},
				{Seq: 2, Action: "click", Selector: fmt.Sprintf("#tab-%d", j), OK: true},
				{Seq: 3, Action: "get_text", Selector: ".details .value", OK: true},
			}}
		if _, err := st.PutTrace(ctx, t); err != nil {
			b.Fatal(err)
		}
	}
	st.Close()
	syncDisks()
	b.Logf("setup: %d entries, %d traces, %d new, in %v", domains*intents, traces, fresh, time.Since(setup).Round(time.Second))

	b.ResetTimer()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "PEM_TEST_CHILD=bench", "PEM_TEST_DIR="+dir, "PEM_TEST_NOW="+treegen.Base.Format(time.RFC3339))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("consolidation: %v", err)
	}
	b.StopTimer()
	var r benchReport
	if err := json.Unmarshal(out, &r); err != nil {
		b.Fatalf("%v: %s", err, out)
	}
	if st := gitcli.Run(b, dir, "status", "--porcelain"); st != "" {
		b.Fatalf("git status not clean after consolidation:\n%.2000s", st)
	}

	// The same change committed by the git CLI: back to the tree before,
	// with the worktree as consolidation left it; main with git add -A &&
	// git commit (when anything changed there: traces and experience are
	// ignored on main), and the state's part as make bench-scale commits it
	// (store/treegen/benchscale): on the state's own index, read from the
	// state and refreshed beforehand (untimed), add -f -A, write-tree,
	// commit-tree, update-ref.
	gitcli.Run(b, dir, "reset", "-q", "--mixed", before)
	gitcli.Run(b, dir, "update-ref", string(gitrepo.StateRef), stateBefore)
	addCommit := gitTimed(b, dir, "add", "-A")
	if gitcli.Run(b, dir, "status", "--porcelain") != "" {
		addCommit += gitTimed(b, dir, "-c", "user.name=bench", "-c", "user.email=bench@localhost", "commit", "-q", "-m", "same change")
	}
	idx := filepath.Join(dir, ".git", "bench-state-index")
	stateGit := func(args ...string) string {
		c := exec.Command("git", args...)
		c.Dir, c.Env = dir, append(os.Environ(), "GIT_INDEX_FILE="+idx, "GIT_AUTHOR_NAME=bench", "GIT_AUTHOR_EMAIL=bench@localhost",
			"GIT_COMMITTER_NAME=bench", "GIT_COMMITTER_EMAIL=bench@localhost")
		out, err := c.Output()
		if err != nil && args[0] != "update-index" { // update-index --refresh exits 1 when files changed: they are the change
			b.Fatalf("git %s: %v", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out))
	}
	stateGit("read-tree", stateBefore)
	stateGit("update-index", "-q", "--refresh")
	start := time.Now()
	stateGit("add", "-f", "-A", "traces", "experience")
	tree := stateGit("write-tree")
	commit := stateGit("commit-tree", "-p", stateBefore, "-m", "same change", tree)
	stateGit("update-ref", string(gitrepo.StateRef), commit)
	addCommit += time.Since(start)
	cliMs := float64(addCommit.Microseconds()) / 1000

	b.ReportMetric(r.TotalMs, "total-ms")
	b.ReportMetric(r.CommitMs, "commit-ms")
	b.ReportMetric(cliMs, "git-cli-ms")
	b.ReportMetric(r.CommitMs/cliMs, "commit/git-cli")
	b.ReportMetric(r.PeakRSSMB, "peak-MB")
	b.ReportMetric(r.CPUMs, "cpu-ms")
	b.Logf("load %.0f ms, plan %.0f ms, write %.0f ms (%d files, %d expired), commit %.0f ms, total %.0f ms (CPU %.0f ms), peak RSS %.0f MB; git add -A && git commit, and the state's part on its own index, %.0f ms",
		r.LoadMs, r.PlanMs, r.WriteMs, r.Written, r.Expired, r.CommitMs, r.TotalMs, r.CPUMs, r.PeakRSSMB, cliMs)
}
