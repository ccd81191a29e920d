//go:build unix

// Command benchscale is `make bench-scale`: it generates knowledge trees with
// store/treegen in a temporary directory (nothing is written into the
// repository), builds pem there, and prints every row of the scale table of
// docs/performance.md — pem's figure, the baseline measured in the same run,
// their ratio and the goal. It is a benchmark, not a test: it asserts
// nothing and is not part of make test.
//
//	go run ./store/treegen/benchscale                 # SCALE=small: a few minutes
//	go run ./store/treegen/benchscale -scale full     # the sizes: tens of minutes
//	go run ./store/treegen/benchscale -keep /tmp/bs   # keep the trees (reused next time)
//	go run ./store/treegen/benchscale -only log,startup   # some rows only
//	go run ./store/treegen/benchscale -pem /tmp/old/pem   # another build of pem (compare two versions under one harness)
//	go run ./store/treegen/benchscale -scale full -only consolidate -steady=false   # that row on the tree as generated
//
// Wall times on a shared machine move with its load (printed with the
// table); CPU times (user + system of the process) move much less.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store"
	"github.com/pemdev/pem/store/treegen"
)

type sizes struct {
	query    []int // traces in the one domain of the fresh-process query
	big      int   // traces of the big tree (1,000 domains × 10 intents): warm query, deep-learn, consolidate
	newer    int   // new traces consolidated (and deep-learned) into the big tree
	evidence []int // evidence items of one entry
	commits  int   // history of the pem log tree
}

var scales = map[string]sizes{
	"small": {query: []int{1000, 3000, 10000}, big: 10000, newer: 100, evidence: []int{100, 1000, 3000}, commits: 1090},
	"full":  {query: []int{1000, 10000, 30000}, big: 100000, newer: 1000, evidence: []int{100, 1000, 3000}, commits: 1090},
}

type row struct{ figure, pem, baseline, ratio, goal string }

var (
	rows    []row
	pem     string // the binary
	steady  bool   // -steady: the consolidate row's tree with every experience entry's decoded cache
	work    string
	cleanup = func() {}
)

func main() {
	if dir := os.Getenv(fillEnv); dir != "" {
		fillDecodedHere(dir) // the child fillDecoded starts
		return
	}
	scale := flag.String("scale", envOr("SCALE", "small"), "small (a few minutes) or full (the issue's sizes: tens of minutes)")
	keep := flag.String("keep", os.Getenv("BENCH_SCALE_DIR"), "keep the trees in `DIR` (reused when present) instead of a temporary directory")
	only := flag.String("only", os.Getenv("ROWS"), "run only these `ROWS` (comma-separated: startup,query,evidence,save,warm,deeplearn,consolidate,log)")
	bin := flag.String("pem", os.Getenv("PEM_BIN"), "measure this pem `BINARY` instead of building ./cmd/pem (the harness stays this one)")
	flag.BoolVar(&steady, "steady", true, "consolidate row: first give every experience entry of the big tree the decoded cache that weeks of consolidation leave (false: the tree as generated and settled, as rounds before the fourth measured it; docs/performance.md)")
	flag.Parse()
	want := func(name string) bool {
		return *only == "" || slices.Contains(strings.Split(*only, ","), name)
	}
	sz, ok := scales[*scale]
	if !ok {
		fatalf("unknown -scale %q: use small or full", *scale)
	}
	work = *keep
	if work == "" {
		d, err := os.MkdirTemp("", "pem-bench-scale-")
		if err != nil {
			fatalf("%v", err)
		}
		work = d
		cleanup = func() { os.RemoveAll(d) }
		defer cleanup()
	} else if err := os.MkdirAll(work, 0o755); err != nil {
		fatalf("%v", err)
	}
	for _, tool := range []string{"git", "cat", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			fatalf("%s is not on PATH: install it (the baselines run it)", tool)
		}
	}
	start := time.Now()
	load0 := treegen.LoadAverage()
	pem = filepath.Join(work, "pem")
	if *bin != "" {
		var err error
		if pem, err = filepath.Abs(*bin); err != nil {
			fatalf("-pem %s: %v", *bin, err)
		}
		logf("measuring %s (not built)", pem)
	} else {
		logf("building pem into %s", pem)
		// Built as the release and make build build it: static (CGO_ENABLED=0), without urfave/cli's doc writers.
		build := exec.Command("go", "build", "-tags", "urfave_cli_no_docs", "-o", pem, "./cmd/pem")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			fatalf("go build ./cmd/pem (run from the repository root): %v\n%s", err, out)
		}
	}
	ctx := context.Background()

	if want("startup") {
		startup()
	}
	if want("query") {
		for _, n := range sz.query {
			freshQuery(ctx, n)
		}
	}
	if want("evidence") {
		for _, n := range sz.evidence {
			evidence(ctx, n)
		}
	}
	if want("save") {
		save(ctx)
	}
	if want("warm") || want("deeplearn") || want("consolidate") {
		big := bigTree(ctx, sz.big)
		if want("consolidate") {
			settle(big)
		}
		if want("warm") {
			warmQuery(big, sz.big)
		}
		if want("deeplearn") {
			deepLearn(ctx, big, sz.big, sz.newer)
		}
		if want("consolidate") {
			if !want("deeplearn") {
				commitAll(big, "the generated tree")
				addTraces(ctx, big, sz.newer)
			}
			consolidate(big, sz.big, sz.newer)
		}
	}
	if want("log") {
		pemLog(ctx, sz.commits)
	}
	rows = append(rows, row{"agent, demo tasks, P1 round vs cold", "measured by `pem bench` (make bench), not here", "—", "—", "P1 ≤ 0.3× cold"})

	fmt.Printf("\npem bench-scale, scale %s, %s, GOMAXPROCS %d, load average %s at start, %s at the end; %s in all\n\n",
		*scale, time.Now().UTC().Format("2006-01-02 15:04 MST"), runtime.GOMAXPROCS(0), load0, treegen.LoadAverage(), time.Since(start).Round(time.Second))
	fmt.Println("| figure | pem | baseline in the same run | ratio | goal |")
	fmt.Println("|---|---|---|---|---|")
	for _, r := range rows {
		fmt.Printf("| %s | %s | %s | %s | %s |\n", r.figure, r.pem, r.baseline, r.ratio, r.goal)
	}
}

// ---- processes ----

type run struct {
	wall, cpu time.Duration
	rssKB     int64
	out       []byte
	errOut    []byte
}

// proc runs a command and measures it (wall, user+system CPU, peak RSS).
func proc(dir string, name string, args ...string) run {
	c := exec.Command(name, args...)
	c.Dir = dir
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	t := time.Now()
	if err := c.Run(); err != nil {
		fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, errb.String())
	}
	r := run{wall: time.Since(t), cpu: c.ProcessState.UserTime() + c.ProcessState.SystemTime(), out: out.Bytes(), errOut: errb.Bytes()}
	if ru, ok := c.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.rssKB = ru.Maxrss
	}
	return r
}

// median runs f n times and returns the run with the median wall time, the
// mean CPU and the largest RSS.
func median(n int, f func() run) run {
	rs := make([]run, n)
	var cpu time.Duration
	var rss int64
	for i := range rs {
		rs[i] = f()
		cpu += rs[i].cpu
		rss = max(rss, rs[i].rssKB)
	}
	slices.SortFunc(rs, func(a, b run) int { return int(a.wall - b.wall) })
	m := rs[n/2]
	m.cpu, m.rssKB = cpu/time.Duration(n), rss
	return m
}

// ---- rows ----

func startup() {
	logf("start-up: pem --help vs git --version")
	p := median(41, func() run { return proc(work, pem, "--help") })
	g := median(41, func() run { return proc(work, "git", "--version") })
	rows = append(rows, row{"`pem` process start (`pem --help`), median of 41",
		fmt.Sprintf("%s (CPU %s)", ms(p.wall), ms(p.cpu)), fmt.Sprintf("`git --version` %s (CPU %s)", ms(g.wall), ms(g.cpu)),
		fmt.Sprintf("%.1f× (CPU %.1f×)", ratio(p.wall, g.wall), ratio(p.cpu, g.cpu)), "≤ 3×"})
}

// freshQuery: one domain with n traces over 20 intents, of which the
// queried intent holds a fixed 50 (its own evidence stays the same while
// the traces of the other intents grow); a query in a new process. Twice:
// on a tree whose runs are recent, so that the entry is served on its own
// route (P1/P2: no other entry is read), and on one whose runs are 18 months
// old (May 2025), so that it falls below P2 and the query also reads the related
// routes of up to 4 other intents (engine/related.go).
func freshQuery(ctx context.Context, n int) {
	const hot, hotTraces = 3, 50
	url, intent := treegen.URL(0, hot), treegen.Intent(hot)
	today := time.Now().UTC().Truncate(24 * time.Hour)
	for _, v := range []struct {
		name, label string
		base        time.Time
	}{{"recent-" + today.Format("2006-01-02"), "runs of the last 30 days", today}, {"old", "runs of May 2025 (treegen.Base)", treegen.Base}} {
		dir := filepath.Join(work, fmt.Sprintf("query-%s-%d", v.name, n))
		if _, err := os.Stat(dir + ".done"); err != nil {
			os.RemoveAll(dir)
			logf("generating %s: 1 domain × 20 intents, %d traces (%d of the queried intent)", filepath.Base(dir), n, hotTraces)
			if err := treegen.GenerateHot(ctx, dir, 20, n, hot, hotTraces, v.base, 1); err != nil {
				fatalf("treegen: %v", err)
			}
			os.WriteFile(dir+".done", nil, 0o644)
			time.Sleep(2100 * time.Millisecond) // the store does not trust files changed in the last 2 s
		}
		logf("fresh-process query, one domain with %d traces (%s runs)", n, v.name)
		q := func() run { return proc(work, pem, "--knowledge", dir, "experience", "query", url, "--intent", intent) }
		q() // the first query after generation builds the trace index: not measured
		p := median(7, q)
		var rec struct {
			Tier    string `json:"tier"`
			Related []any  `json:"related_routes"`
		}
		if err := json.Unmarshal(p.out, &rec); err != nil || rec.Tier == "" {
			fatalf("pem experience query printed no tier (%v):\n%s", err, p.out)
		}
		factsFile := filepath.Join(dir, filepath.FromSlash(store.FactsPath(treegen.Domain(0), engine.IntentKey(intent))))
		c := median(7, func() run { return proc(work, "cat", factsFile) })
		// The first query of a new Store in this process: what the first
		// MCP query of the domain costs a running pem mcp.
		firsts := make([]time.Duration, 7)
		for i := range firsts {
			st, err := store.Open(dir, nil)
			if err != nil {
				fatalf("%v", err)
			}
			t := time.Now()
			if _, err := engine.New(st).Query(ctx, url, intent); err != nil {
				fatalf("query: %v", err)
			}
			firsts[i] = time.Since(t)
			st.Close()
		}
		first, _ := pct(firsts)
		what := "served on its own route"
		if rec.Tier != "P1" && rec.Tier != "P2" {
			what = fmt.Sprintf("%d related routes read", len(rec.Related))
		}
		rows = append(rows, row{fmt.Sprintf("query in a fresh process, one domain with %s traces (%d of the queried intent), %s: %s, %s", thousands(n), hotTraces, v.name[:min(len(v.name), 6)]+" runs", rec.Tier, what),
			fmt.Sprintf("%s (CPU %s), %s; first query of a new Store in-process (a new `pem mcp`) %s", ms(p.wall), ms(p.cpu), mib(p.rssKB), ms(first)), fmt.Sprintf("`cat` of the facts file %s", ms(c.wall)),
			fmt.Sprintf("%.0f×", ratio(p.wall, c.wall)), "≤ 20 ms, flat in traces per domain"})
	}
}

// evidence: one entry whose experience holds n evidence items; warm queries,
// each computed.
func evidence(ctx context.Context, n int) {
	dir := tree(ctx, fmt.Sprintf("evidence-%d", n), 1, 1, n)
	logf("warm query, one entry with %d evidence items", n)
	// NoWatch: every query scores the evidence (the row measures that), as
	// the first query after a change does; kept answers are the warm row's.
	st, err := store.Open(dir, &store.Options{NoWatch: true})
	if err != nil {
		fatalf("%v", err)
	}
	defer st.Close()
	e := engine.New(st)
	e.Now = func() time.Time { return treegen.Base }
	q := func() time.Duration {
		t := time.Now()
		if _, err := e.Query(ctx, treegen.URL(0, 0), treegen.Intent(0)); err != nil {
			fatalf("query: %v", err)
		}
		return time.Since(t)
	}
	q() // warm
	ds := make([]time.Duration, 0, 21)
	for i := 0; i < 21 || (i < 500 && sum(ds) < time.Second); i++ {
		ds = append(ds, q())
	}
	p50, _ := pct(ds)
	rows = append(rows, row{fmt.Sprintf("warm query, one entry with %s evidence items", thousands(n)), "p50 " + ms(p50), "—", "—", "linear or better"})
}

// save: engine.Save in-process against write + fsync + rename of the same
// bytes, and against the same plus an fsync of the directory (what makes a
// new name durable, and what a save does). The three are interleaved — one
// save, then its bytes written both ways — so that all see the same load:
// fsync latency on a shared machine swings several-fold within seconds.
// Each save is the first of its entry in the process (200 entries): it reads
// the entry's experience, facts, trace index and unfolded traces once.
func save(ctx context.Context) {
	dir := tree(ctx, "save", 100, 10, 1000)
	// A tree in use has its trace index (.pem-cache) built; a generated one
	// has none, and the first save of each domain would build it (read
	// every trace of the domain): that is the index's cost, measured by the
	// query rows. Build it in another store, untimed, as an earlier process would.
	logf("building the trace index of the save tree (untimed)")
	if err := warmIndex(ctx, dir); err != nil {
		fatalf("%v", err)
	}
	logf("experience save in-process vs write+fsync+rename")
	st, err := store.Open(dir, nil)
	if err != nil {
		fatalf("%v", err)
	}
	defer st.Close()
	e := engine.New(st)
	base := filepath.Join(work, "save-baseline")
	os.RemoveAll(base)
	os.MkdirAll(base, 0o755)
	baseDir, err := os.Open(base)
	if err != nil {
		fatalf("%v", err)
	}
	defer baseDir.Close()
	write := func(name string, data []byte, syncDir bool) time.Duration {
		t := time.Now()
		final := filepath.Join(base, name)
		f, err := os.OpenFile(final+".tmp", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			fatalf("%v", err)
		}
		f.Write(data)
		f.Sync()
		f.Close()
		if err := os.Rename(final+".tmp", final); err != nil {
			fatalf("%v", err)
		}
		if syncDir {
			baseDir.Sync()
		}
		return time.Since(t)
	}
	// Saves 0–99 are the first of their domain today: each creates the
	// day directory (a mkdir and an fsync of the domain directory more).
	// Saves 100–199 go into a day directory that exists, as most saves do.
	// Saves 200–299 are a second save of the entries of 100–199: what the
	// process read of them (experience, facts, index) is cached, as for an
	// agent that queried the entry before its run.
	const n = 300
	var pemT, baseT, dirT, cpuT [3]time.Duration
	// Per save, its time ÷ its own baselines' (written right after it):
	// the median of those is steadier than the ratio of the means when one
	// fsync in a hundred takes 20× the others.
	var perBase, perDir [3][]float64
	for i := 0; i < n; i++ {
		d, j := i%100, min(i/100, 1)
		g := i / 100
		c := selfCPU()
		t0 := time.Now()
		res, err := e.Save(ctx, engine.SaveRequest{URL: treegen.URL(d, j), Intent: treegen.Intent(j),
			Trace: &engine.TraceInput{Steps: []engine.StepInput{
				{Action: "navigate", Value: treegen.URL(d, j)},
				{Action: "click", Selector: fmt.Sprintf("#tab-%d", j)},
				{Action: "get_text", Selector: ".details .value", Result: "value"},
			}}})
		if err != nil {
			fatalf("save: %v", err)
		}
		pemT[g] += time.Since(t0)
		cpuT[g] += selfCPU() - c
		data, err := os.ReadFile(filepath.Join(dir, res.TracePath))
		if err != nil {
			fatalf("%v", err)
		}
		took := time.Since(t0)
		b1 := write(fmt.Sprintf("%d.yaml", i), data, false)
		b2 := write(fmt.Sprintf("%d-d.yaml", i), data, true)
		baseT[g] += b1
		dirT[g] += b2
		perBase[g] = append(perBase[g], ratio(took, b1))
		perDir[g] = append(perDir[g], ratio(took, b2))
	}
	const m = n / 3
	for g, what := range []string{"the first of its domain today (creates the day directory)", "into an existing day directory", "a second save of its entry in the process (its files cached)"} {
		pemPer, basePer, dirPer := pemT[g]/m, baseT[g]/m, dirT[g]/m
		rows = append(rows,
			row{fmt.Sprintf("`experience save` in-process, mean of %d, each %s; trace index built, interleaved with the baselines", m, what),
				fmt.Sprintf("%s (CPU %s)", ms(pemPer), ms(cpuT[g]/m)), "write+fsync+rename " + ms(basePer),
				fmt.Sprintf("%.1f× (median of the per-save ratios %.1f×)", ratio(pemPer, basePer), medianOf(perBase[g])), "≤ 1.5×"},
			row{"— the same saves against the two fsyncs a durable new name needs",
				ms(pemPer), "write+fsync+rename+fsync of the directory " + ms(dirPer),
				fmt.Sprintf("%.1f× (median %.1f×)", ratio(pemPer, dirPer), medianOf(perDir[g])), "— (the issue's baseline has no directory fsync)"})
	}
}

// warmIndex builds the trace index of every domain of dir, as a query of
// each domain in an earlier process would.
func warmIndex(ctx context.Context, dir string) error {
	st, err := store.Open(dir, nil)
	if err != nil {
		return err
	}
	defer st.Close()
	domains, err := st.Domains(ctx)
	if err != nil {
		return err
	}
	for _, d := range domains {
		if _, err := st.IntentTraceRefs(ctx, d, engine.IntentKey(treegen.Intent(0))); err != nil {
			return err
		}
	}
	return nil
}

// selfCPU is the user + system CPU of this process so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func bigTree(ctx context.Context, n int) string {
	return tree(ctx, fmt.Sprintf("big-%d", n), 1000, 10, n)
}

// warmQuery: in-process queries over the big tree, p50/p99 against
// os.ReadFile of the facts file. Twice: with the store's change watch (a
// warm query serves the answer it kept while nothing it read changed:
// engine/querymemo.go), and without it (store.Options.NoWatch: every query
// computed, as the first query after a change is).
func warmQuery(dir string, n int) {
	for _, mode := range []struct {
		name string
		opts *store.Options
	}{{"kept answers (change watch on)", nil}, {"every query computed (NoWatch)", &store.Options{NoWatch: true}}} {
		logf("warm in-process query, %d traces, %s", n, mode.name)
		st, err := store.Open(dir, mode.opts)
		if err != nil {
			fatalf("%v", err)
		}
		e := engine.New(st)
		e.Now = func() time.Time { return treegen.Base }
		ctx := context.Background()
		type pair struct{ d, j int }
		ps := make([]pair, 2000)
		for i := range ps {
			ps[i] = pair{(i * 7919) % 1000, (i * 31) % 10}
		}
		for _, p := range ps { // warm
			if _, err := e.Query(ctx, treegen.URL(p.d, p.j), treegen.Intent(p.j)); err != nil {
				fatalf("query: %v", err)
			}
		}
		served0, computed0 := e.KeptAnswers()
		var qs, rs []time.Duration
		var tier engine.Tier
		for i := 0; i < 10000; i++ {
			p := ps[i%len(ps)]
			t := time.Now()
			r, _ := e.Query(ctx, treegen.URL(p.d, p.j), treegen.Intent(p.j))
			qs = append(qs, time.Since(t))
			tier = r.Tier
			t = time.Now()
			if _, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(store.FactsPath(treegen.Domain(p.d), engine.IntentKey(treegen.Intent(p.j)))))); err != nil {
				fatalf("%v", err)
			}
			rs = append(rs, time.Since(t))
		}
		served, computed := e.KeptAnswers()
		st.Close()
		q50, q99 := pct(qs)
		r50, r99 := pct(rs)
		rows = append(rows, row{fmt.Sprintf("warm in-process query, %s traces (1,000 domains × 10 intents), 10,000 queries (%s), %s; %d served kept, %d computed", thousands(n), tier, mode.name, served-served0, computed-computed0),
			fmt.Sprintf("p50 %s, p99 %s", us(q50), us(q99)), fmt.Sprintf("`os.ReadFile` of the facts file p50 %s, p99 %s (SQLite: not measured, no driver in the module)", us(r50), us(r99)),
			fmt.Sprintf("p50 %.1f× ReadFile", ratio(q50, r50)), "p50 ≤ 3× ReadFile, p99 < 1 ms"})
	}
}

// deepLearn: the first run on the big tree (nothing remembered), a run with
// nothing new, a run after `newer` new traces, --full, and a run a day later
// with nothing new, against cat of every file.
func deepLearn(ctx context.Context, dir string, n, newer int) {
	commitAll(dir, "the generated tree")
	logf("deep-learn, %d traces: cat of every file (baseline)", n)
	cat := catAll(dir)
	os.RemoveAll(filepath.Join(dir, ".git", "pem-deeplearn"))
	now := treegen.Base.Format(time.RFC3339)
	logf("deep-learn: the first run")
	first := proc(dir, pem, "--knowledge", dir, "deep-learn", "--now", now, "--branch", "pem/bench-1")
	logf("deep-learn: nothing new")
	again := proc(dir, pem, "--knowledge", dir, "deep-learn", "--now", now, "--branch", "pem/bench-2")
	if !bytes.Equal(first.out, again.out) {
		fatalf("deep-learn's second run printed another report than the first")
	}
	addTraces(ctx, dir, newer)
	logf("deep-learn: after %d new traces", newer)
	inc := proc(dir, pem, "--knowledge", dir, "deep-learn", "--now", now, "--branch", "pem/bench-3")
	full := proc(dir, pem, "--knowledge", dir, "deep-learn", "--now", now, "--branch", "pem/bench-4", "--full")
	if !bytes.Equal(inc.out, full.out) {
		fatalf("deep-learn after new traces: the incremental report differs from --full's")
	}
	// A nightly run: nothing new, but the clock moved a day (every status is
	// derived again, and every history transition dated anew).
	logf("deep-learn: a day later, nothing new")
	later := proc(dir, pem, "--knowledge", dir, "deep-learn", "--now", treegen.Base.Add(24*time.Hour).Format(time.RFC3339), "--branch", "pem/bench-5")
	entries := 1000 * 10
	desc := func(r run) string {
		d := fmt.Sprintf("%s (CPU %s), %s", sec(r.wall), sec(r.cpu), mib(r.rssKB))
		// The maintenance after the review commit repacks now and then
		// (geometrically: when the packs have doubled): say so, with its
		// time, so that a run that paid for it is told apart.
		if m := repackRe.FindSubmatch(r.errOut); m != nil {
			d += fmt.Sprintf("; the run repacked the object store (%s of it)", m[1])
		}
		return d
	}
	cats := fmt.Sprintf("`cat` of every file %s", sec(cat.wall))
	rows = append(rows,
		row{fmt.Sprintf("deep-learn, %s traces, %s entries, first run (nothing remembered)", thousands(n), thousands(entries)), desc(first), cats, fmt.Sprintf("%.1f×", ratio(first.wall, cat.wall)), "≤ 10 s, ≤ 512 MB"},
		row{"deep-learn again, nothing new", desc(again), cats, fmt.Sprintf("%.2f×", ratio(again.wall, cat.wall)), "≤ 10 s, ≤ 512 MB"},
		row{fmt.Sprintf("deep-learn after %s new traces (same report as --full: checked)", thousands(newer)), desc(inc), cats, fmt.Sprintf("%.2f×", ratio(inc.wall, cat.wall)), "≤ 10 s, ≤ 512 MB"},
		row{"deep-learn --full on the same tree", desc(full), cats, fmt.Sprintf("%.1f×", ratio(full.wall, cat.wall)), "—"},
		row{"deep-learn a day later (`--now` +24 h), nothing new", desc(later), cats, fmt.Sprintf("%.2f×", ratio(later.wall, cat.wall)), "≤ 10 s, ≤ 512 MB"})
}

// repackRe finds, in pem's stderr, the line maintainTree prints after a repack.
var repackRe = regexp.MustCompile(`pem: repacked the git object store: .*\(([0-9][0-9.mµs]*)\)`)

// settle brings the generated tree to a consolidated steady state (untimed),
// so that the consolidate row measures the new traces alone: the generator
// writes experience and facts by hand, and a first consolidation normalizes
// every entry of them (10,000+ files), which is not what a scheduled run
// over a consolidated tree does. A second pass, past the summary cache's
// racy window (2 s), has nothing to fold and only refreshes that cache:
// the cache trusts no file written after it was, so without it the measured
// run would decode every file the first pass rewrote — a cost of that
// pass's 10,000 files, not of the new traces (a scheduled run re-reads only
// the ~200 files the run before it wrote).
//
// Before that, the generated traces and experience go on refs/pem/state
// (the generator's .gitignore keeps them off main), as a tree consolidated
// before holds them, so the measured state commit builds on a state of
// 100,000 traces rather than on none; and the repository is packed, as a
// maintained one is (without it, the measured run's maintenance repacked
// the ~10,000 loose objects `git add` had just written).
func settle(dir string) {
	commitAll(dir, "the generated tree")
	if _, err := os.Stat(filepath.Join(dir, ".git", "refs", "pem", "state")); err != nil {
		logf("committing the generated traces and experience on refs/pem/state, and packing (untimed)")
		idx := filepath.Join(dir, ".git", "bench-state-index")
		os.Remove(idx)
		gitIndex(dir, idx, "add", "-f", "traces", "experience")
		tree := gitIndex(dir, idx, "write-tree")
		commit := gitIndex(dir, idx, "commit-tree", "-m", "the generated state", tree)
		proc(dir, "git", "update-ref", "refs/pem/state", commit)
		os.Remove(idx)
		proc(dir, "git", "gc", "-q")
	}
	logf("consolidating the generated tree once, then refreshing its summary cache (untimed)")
	proc(dir, pem, "--knowledge", dir, "consolidate", "--now", treegen.Base.Format(time.RFC3339))
	if steady && fillDecoded(dir) {
		// The files fillDecoded rewrote are younger than the summary
		// cache: one more pass re-reads them (through their decoded cache).
		time.Sleep(2100 * time.Millisecond)
		proc(dir, pem, "--knowledge", dir, "consolidate", "--now", treegen.Base.Format(time.RFC3339))
	}
	time.Sleep(2100 * time.Millisecond)
	proc(dir, pem, "--knowledge", dir, "consolidate", "--now", treegen.Base.Format(time.RFC3339))
}

// fillDecoded gives every experience entry of dir the decoded cache file a
// consolidation leaves for the experience it writes (store.PutRecords:
// keyed by the bytes' SHA-256, so it survives cp -a), once per tree
// (false: done before). A tree consolidated for weeks has one for every
// entry its runs touched, since each was written by an earlier run; the
// generated tree has none, and the settling pass leaves the ~6,000
// entries it finds unchanged without one — then the measured run decodes
// the YAML of most entries its new traces touch (docs/performance.md,
// "Consolidation", the fourth round). Each file is removed and written
// again with the same bytes: nothing in git changes.
func fillDecoded(dir string) bool {
	mark := filepath.Join(dir, ".git", "bench-decoded-filled")
	if _, err := os.Stat(mark); err == nil {
		return false
	}
	logf("-steady: writing every experience entry again with its decoded cache (untimed)")
	// In a child process: the harness starts pem with vfork, and Linux
	// reports as the child's peak RSS at least the parent's peak at the
	// exec, so the ~10,000 records held here would show in the next
	// measured run's RSS (335–350 MiB instead of ~170 MiB).
	exe, err := os.Executable()
	if err != nil {
		fatalf("%v", err)
	}
	c := exec.Command(exe)
	c.Env = append(os.Environ(), fillEnv+"="+dir)
	if out, err := c.CombinedOutput(); err != nil {
		fatalf("filling the decoded cache of %s: %v\n%s", dir, err, out)
	}
	if err := os.WriteFile(mark, nil, 0o644); err != nil {
		fatalf("%v", err)
	}
	return true
}

// fillEnv names the tree a child started by fillDecoded fills.
const fillEnv = "PEM_BENCH_FILL_DECODED"

// fillDecodedHere is fillDecoded's work, in its own process.
func fillDecodedHere(dir string) {
	ctx := context.Background()
	st, err := store.Open(dir, nil)
	if err != nil {
		fatalf("%v", err)
	}
	defer st.Close()
	domains, err := st.Domains(ctx)
	if err != nil {
		fatalf("domains: %v", err)
	}
	var xs []*engine.Experience
	for _, d := range domains {
		keys, err := st.ExperienceKeys(ctx, d)
		if err != nil && !errors.Is(err, engine.ErrNotFound) {
			fatalf("experience keys of %s: %v", d, err)
		}
		for _, k := range keys {
			x, err := st.Experience(ctx, d, k)
			if err != nil {
				fatalf("%v", err)
			}
			xs = append(xs, x)
		}
	}
	before := make([][]byte, len(xs))
	for i, x := range xs {
		p := filepath.Join(dir, filepath.FromSlash(store.ExperiencePath(x.Domain, x.IntentKey)))
		if before[i], err = os.ReadFile(p); err == nil {
			err = os.Remove(p)
		}
		if err != nil {
			fatalf("%v", err)
		}
	}
	if _, err := st.PutRecords(ctx, nil, xs, nil); err != nil {
		fatalf("rewriting the experience: %v", err)
	}
	for i, x := range xs {
		p := filepath.Join(dir, filepath.FromSlash(store.ExperiencePath(x.Domain, x.IntentKey)))
		if after, err := os.ReadFile(p); err != nil || !bytes.Equal(after, before[i]) {
			fatalf("%s: rewritten with other bytes (%v): the tree is not the one generated", p, err)
		}
	}
}

// gitIndex runs git in dir with idx as its index (the state's own, as a git
// user would keep one for refs/pem/state) and returns its trimmed output.
func gitIndex(dir, idx string, args ...string) string {
	c := exec.Command("git", args...)
	c.Dir, c.Env = dir, append(os.Environ(), "GIT_INDEX_FILE="+idx, "GIT_AUTHOR_NAME=bench", "GIT_AUTHOR_EMAIL=bench@example.com",
		"GIT_COMMITTER_NAME=bench", "GIT_COMMITTER_EMAIL=bench@example.com")
	out, err := c.Output()
	if err != nil {
		fatalf("git %s: %v", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out))
}

// consolidate: the `newer` traces deep-learn's row added, consolidated into
// the big tree with its commit; the baseline commits the very same change
// with git add -A && git commit.
func consolidate(dir string, n, newer int) {
	// A kept tree keeps each run's new traces: the row says how many the
	// run folded into, not how many the tree was generated with.
	if held := countTraces(dir) - newer; held != n {
		logf("the kept tree holds %d traces besides the new ones (each run on it adds %d; remove %s to measure at %d again)", held, newer, dir, n)
		n = held
	}
	logf("consolidate %d new traces into %d", newer, n)
	now := treegen.Base.Add(time.Hour).Format(time.RFC3339)
	head := strings.TrimSpace(string(proc(dir, "git", "rev-parse", "HEAD").out))
	state := strings.TrimSpace(string(proc(dir, "git", "rev-parse", "refs/pem/state").out))
	c := proc(dir, pem, "--verbose", "--knowledge", dir, "consolidate", "--now", now)
	if strings.TrimSpace(string(proc(dir, "git", "rev-parse", "HEAD").out)) == head {
		fatalf("pem consolidate made no commit:\n%s", c.out)
	}
	// The commit step alone, as pem logs it (consolidate/apply.go).
	m := regexp.MustCompile(`msg="commit step".* took=(\S+)`).FindSubmatch(c.errOut)
	if m == nil {
		fatalf("pem consolidate --verbose logged no commit step:\n%s", c.errOut)
	}
	commitStep, err := time.ParseDuration(string(m[1]))
	if err != nil {
		fatalf("the commit step's time %q: %v", m[1], err)
	}
	// The run's phases as pem logs them (consolidate/timeline.go), to read
	// its wall by phase.
	for _, p := range regexp.MustCompile(`msg=phase name="?([^"=]+?)"? took=(\S+) at=(\S+)`).FindAllSubmatch(c.errOut, -1) {
		logf("  phase %-28s %10s  (at %s)", p[1], p[2], p[3])
	}
	files := strings.Count(string(proc(dir, "git", "diff", "--name-only", "HEAD~1", "HEAD").out), "\n")
	stateFiles := strings.Count(string(proc(dir, "git", "diff", "--name-only", state, "refs/pem/state").out), "\n")
	// The same change by the git CLI: main rewound (the worktree keeps the
	// change) and committed with git add -A && git commit; and the state's
	// part, which pem commits on refs/pem/state, the same way on the state's
	// own index (made and refreshed beforehand, untimed, as a user keeping
	// one would have it).
	proc(dir, "git", "reset", "-q", "--mixed", "HEAD~1")
	proc(dir, "git", "update-ref", "refs/pem/state", state)
	idx := filepath.Join(dir, ".git", "bench-state-index")
	os.Remove(idx)
	gitIndex(dir, idx, "read-tree", state)
	c2 := exec.Command("git", "update-index", "-q", "--refresh")
	c2.Dir, c2.Env = dir, append(os.Environ(), "GIT_INDEX_FILE="+idx)
	_ = c2.Run() // exits 1 when files changed: they are the change
	g := timed(func() {
		proc(dir, "git", "add", "-A")
		proc(dir, "git", "-c", "user.name=bench", "-c", "user.email=bench@example.com", "commit", "-q", "-m", "the same change")
	})
	gs := timed(func() {
		gitIndex(dir, idx, "add", "-f", "-A", "traces", "experience")
		tree := gitIndex(dir, idx, "write-tree")
		commit := gitIndex(dir, idx, "commit-tree", "-p", state, "-m", "the same change", tree)
		gitIndex(dir, idx, "update-ref", "refs/pem/state", commit)
	})
	os.Remove(idx)
	shape := "steady state: every experience entry with its decoded cache, as weeks of consolidation leave it"
	if !steady {
		shape = "-steady=false: the tree as generated and settled"
	}
	rows = append(rows, row{fmt.Sprintf("consolidate %s new into %s, commit included (%d files changed on main, %d on refs/pem/state; %s)", thousands(newer), thousands(n), files, stateFiles, shape),
		fmt.Sprintf("%s (CPU %s), %s; commit step %s", sec(c.wall), sec(c.cpu), mib(c.rssKB), sec(commitStep)),
		fmt.Sprintf("the same change by `git add -A && git commit` %s on main + %s on the state's own index (`add -A`, `write-tree`, `commit-tree`, `update-ref`) = %s", sec(g), sec(gs), sec(g+gs)),
		fmt.Sprintf("commit step %.2f× git (whole run %.2f×)", ratio(commitStep, g+gs), ratio(c.wall, g+gs)), "≤ 2 s, ≤ 200 MB; commit ≤ 0.5× git"})
}

// countTraces counts the trace files of the tree at dir.
func countTraces(dir string) int {
	n := 0
	err := filepath.WalkDir(filepath.Join(dir, "traces"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".yaml") {
			n++
		}
		return nil
	})
	if err != nil {
		fatalf("counting the traces of %s: %v", dir, err)
	}
	return n
}

// pemLog: a tree whose history holds `commits` commits (git fast-import),
// one entry changed in every tenth; pem log of it against git log.
func pemLog(ctx context.Context, commits int) {
	name := fmt.Sprintf("log-%d", commits)
	dir := filepath.Join(work, name)
	d, key := treegen.Domain(7), engine.IntentKey(treegen.Intent(3))
	target := d + "/" + key
	if _, err := os.Stat(filepath.Join(dir, ".git", "bench-done")); err != nil {
		os.RemoveAll(dir)
		tree(ctx, name, 100, 10, 2000)
		commitAll(dir, "the generated tree")
		logf("pem log: writing %d commits", commits-1)
		var stream bytes.Buffer
		st, err := store.Open(dir, nil)
		if err != nil {
			fatalf("%v", err)
		}
		// Like consolidation rounds: each commit folds a run into one
		// entry's experience (its evidence grows) and, every third time,
		// edits its facts; every tenth commit is the target entry's.
		at := treegen.Base.Unix()
		rng := rand.New(rand.NewSource(3))
		for i := 1; i < commits; i++ {
			dd, j := (i*7)%100, i%10
			if i%10 == 0 {
				dd, j = 7, 3
			}
			dom, k := treegen.Domain(dd), engine.IntentKey(treegen.Intent(j))
			msg := fmt.Sprintf("pem: consolidate round %d", i)
			fmt.Fprintf(&stream, "commit refs/heads/main\ncommitter bench <bench@example.com> %d +0000\ndata %d\n%s\n", at+int64(i*60), len(msg), msg)
			if i == 1 {
				stream.WriteString("from refs/heads/main^0\n")
			}
			x, err := st.Experience(ctx, dom, k)
			if err != nil {
				fatalf("%v", err)
			}
			refs, err := st.TraceRefs(ctx, dom)
			if err != nil || len(refs) == 0 {
				fatalf("trace refs: %v", err)
			}
			t, err := st.Trace(ctx, refs[rng.Intn(len(refs))])
			if err != nil {
				fatalf("%v", err)
			}
			t.StartedAt = treegen.Base.Add(time.Duration(i) * time.Minute)
			if t.ID, err = engine.NewTraceID(t.StartedAt, rng); err != nil {
				fatalf("%v", err)
			}
			t.IntentKey, t.Intent = k, treegen.Intent(j)
			x.Fold(t)
			data, err := store.Marshal(x)
			if err != nil {
				fatalf("%v", err)
			}
			fmt.Fprintf(&stream, "M 100644 inline %s\ndata %d\n%s\n", store.ExperiencePath(dom, k), len(data), data)
			if _, err := st.PutExperience(ctx, x); err != nil {
				fatalf("%v", err)
			}
			if i%3 != 0 {
				continue
			}
			f, err := st.Facts(ctx, dom, k)
			if err != nil {
				fatalf("%v", err)
			}
			f.InteractionHints = append(f.InteractionHints, fmt.Sprintf("note %d", i))
			f.Revision = f.ContentHash()
			if data, err = store.Marshal(f); err != nil {
				fatalf("%v", err)
			}
			fmt.Fprintf(&stream, "M 100644 inline %s\ndata %d\n%s\n", store.FactsPath(f.Domain, f.IntentKey), len(data), data)
			if _, err := st.PutFacts(ctx, f); err != nil {
				fatalf("%v", err)
			}
		}
		st.Close()
		c := exec.Command("git", "fast-import", "--quiet")
		c.Dir, c.Stdin = dir, &stream
		if out, err := c.CombinedOutput(); err != nil {
			fatalf("git fast-import: %v\n%s", err, out)
		}
		proc(dir, "git", "reset", "-q", "--hard")
		proc(dir, "git", "gc", "-q")
		os.WriteFile(filepath.Join(dir, ".git", "bench-done"), nil, 0o644)
	}
	total := strings.TrimSpace(string(proc(dir, "git", "rev-list", "--count", "HEAD").out))
	logf("pem log %s vs git log, %s commits", target, total)
	// The first pem log of a clone walks the trees and writes the log and
	// description caches in the git directory (store/gitrepo/logcache.go);
	// every later one reads them. Both are measured, each against git.
	cold := median(3, func() run {
		for _, f := range []string{"pem-log-cache", "pem-log-describe"} {
			if err := os.Remove(filepath.Join(dir, ".git", f)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				fatalf("%v", err)
			}
		}
		return proc(dir, pem, "--knowledge", dir, "log", target)
	})
	p := median(11, func() run { return proc(dir, pem, "--knowledge", dir, "log", target) })
	if !bytes.Equal(cold.out, p.out) {
		fatalf("pem log printed one thing without its caches and another from them:\n%s\n----\n%s", cold.out, p.out)
	}
	g := median(11, func() run {
		return proc(dir, "git", "log", "--first-parent", "--oneline", "--", store.FactsPath(d, key), store.ExperiencePath(d, key))
	})
	pn, gn := strings.Count(string(p.out), "consolidate round"), strings.Count(string(g.out), "consolidate round")
	if pn != gn {
		fatalf("pem log lists %d commits, git log %d", pn, gn)
	}
	rows = append(rows, row{fmt.Sprintf("`pem log D/I`, %s commits (%d of them change the entry), median of 11", total, pn),
		fmt.Sprintf("%s (CPU %s)", ms(p.wall), ms(p.cpu)), fmt.Sprintf("`git log --oneline -- path` %s (CPU %s)", ms(g.wall), ms(g.cpu)),
		fmt.Sprintf("%.1f× (CPU %.1f×)", ratio(p.wall, g.wall), ratio(p.cpu, g.cpu)), "≤ 2×"})
	rows = append(rows, row{"… the first `pem log` of the clone (no log cache yet: it walks the trees and writes it), median of 3",
		fmt.Sprintf("%s (CPU %s)", ms(cold.wall), ms(cold.cpu)), fmt.Sprintf("`git log --oneline -- path` %s (CPU %s)", ms(g.wall), ms(g.cpu)),
		fmt.Sprintf("%.1f× (CPU %.1f×)", ratio(cold.wall, g.wall), ratio(cold.cpu, g.cpu)), "—"})
}

// ---- trees ----

// tree generates (or reuses) a treegen tree under work.
func tree(ctx context.Context, name string, domains, intents, traces int) string {
	dir := filepath.Join(work, name)
	done := filepath.Join(work, name+".done")
	if _, err := os.Stat(done); err == nil {
		return dir
	}
	os.RemoveAll(dir)
	logf("generating %s: %d domains × %d intents, %d traces", name, domains, intents, traces)
	if err := treegen.Generate(ctx, dir, domains, intents, traces, 1); err != nil {
		fatalf("treegen: %v", err)
	}
	os.WriteFile(done, nil, 0o644)
	// The store does not trust files changed in the last 2 s: let them settle.
	time.Sleep(2100 * time.Millisecond)
	return dir
}

func commitAll(dir, msg string) {
	if _, err := os.Stat(filepath.Join(dir, ".git")); err == nil {
		return
	}
	logf("committing %s", dir)
	proc(dir, "git", "init", "-q", "-b", "main")
	proc(dir, "git", "add", "-A")
	proc(dir, "git", "-c", "user.name=bench", "-c", "user.email=bench@example.com", "commit", "-q", "-m", msg)
}

// addTraces writes n new traces, copies of existing ones with new ids, spread over the entries.
func addTraces(ctx context.Context, dir string, n int) {
	st, err := store.Open(dir, nil)
	if err != nil {
		fatalf("%v", err)
	}
	defer st.Close()
	rng := rand.New(rand.NewSource(7))
	domains, err := st.Domains(ctx)
	if err != nil || len(domains) == 0 {
		fatalf("domains: %v", err)
	}
	for i := 0; i < n; i++ {
		refs, err := st.TraceRefs(ctx, domains[(i*37)%len(domains)])
		if err != nil || len(refs) == 0 {
			fatalf("trace refs: %v", err)
		}
		t, err := st.Trace(ctx, refs[rng.Intn(len(refs))])
		if err != nil {
			fatalf("%v", err)
		}
		for {
			t.StartedAt = treegen.Base.Add(-time.Duration(rng.Intn(3600)) * time.Second)
			if t.ID, err = engine.NewTraceID(t.StartedAt, rng); err != nil {
				fatalf("%v", err)
			}
			// A kept tree may hold this sequence of ids already (an earlier
			// run of the deep-learn row): draw again.
			if _, err = st.PutTrace(ctx, t); !errors.Is(err, engine.ErrExists) {
				break
			}
		}
		if err != nil {
			fatalf("%v", err)
		}
	}
	time.Sleep(2100 * time.Millisecond)
}

// catAll is `cat` of every file of the tree (page cache warm: a second pass).
func catAll(dir string) run {
	var files []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return nil
	})
	list := filepath.Join(work, "files.txt")
	os.WriteFile(list, []byte(strings.Join(files, "\x00")), 0o644)
	do := func() run { return proc(dir, "sh", "-c", "xargs -0 cat < "+list+" > /dev/null") }
	do()
	return do()
}

// ---- helpers ----

func timed(f func()) time.Duration {
	t := time.Now()
	f()
	return time.Since(t)
}

func pct(ds []time.Duration) (p50, p99 time.Duration) {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2], s[len(s)*99/100]
}

func medianOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func sum(ds []time.Duration) (t time.Duration) {
	for _, d := range ds {
		t += d
	}
	return t
}

func ratio(a, b time.Duration) float64 {
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func ms(d time.Duration) string  { return fmt.Sprintf("%.1f ms", float64(d)/1e6) }
func us(d time.Duration) string  { return fmt.Sprintf("%.0f µs", float64(d)/1e3) }
func sec(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }
func mib(kb int64) string        { return fmt.Sprintf("%.0f MiB RSS", float64(kb)/1024) }

func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func logf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "bench-scale: %s: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, a...))
}

func fatalf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "bench-scale: "+format+"\n", a...)
	cleanup()
	os.Exit(1)
}
