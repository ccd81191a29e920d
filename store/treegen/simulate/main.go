//go:build unix

// Command simulate runs a knowledge tree through simulated days of fleet use
// and prints, per simulated week, what the repository costs: the size of
// .git, its pack count and loose objects, a full clone and a facts-only clone
// (pem clone) and their times, the size of the state ref (refs/pem/state:
// the live traces and experience), and the CPU time and peak memory of the
// consolidations of that week; at the end, the extrapolation to one year at
// -year-runs runs a day. It drives the real pem binary (-pem) as a fleet
// would: traces are written into traces/ as the agents' saves leave them
// (directly, like store/treegen, so the simulation is not bound by process
// starts), then `pem consolidate --now` runs -per-day times a day with the
// clock advancing, `pem deep-learn --now` every -deep-learn-every days.
//
// It is not part of `make test` (it runs minutes): `make simulate`, or
//
//	go run ./store/treegen/simulate -pem bin/pem -days 35 -traces 1200
//
// docs/scale.md records what it printed and how to read it.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io/fs"
	"math"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store"
	"github.com/pemdev/pem/store/treegen"
)

type config struct {
	pem        string
	dir        string
	days       int
	traces     int // per simulated day
	perDay     int // consolidations a day
	domains    int
	intents    int
	deepEvery  int // days; 0: never
	yearRuns   int
	seed       int64
	keep       bool
	cloneEvery int    // weeks between clone measurements; 0: never
	policy     string // "key=value,…": pem.yaml policy values set after pem init
}

func main() {
	var c config
	flag.StringVar(&c.pem, "pem", "pem", "the pem binary to drive")
	flag.StringVar(&c.dir, "dir", "", "work directory (default: a new temporary directory, removed afterwards unless -keep)")
	flag.IntVar(&c.days, "days", 35, "simulated days")
	flag.IntVar(&c.traces, "traces", 1200, "traces saved per simulated day")
	flag.IntVar(&c.perDay, "per-day", 2, "consolidations per simulated day")
	flag.IntVar(&c.domains, "domains", 20, "domains the traces are spread over")
	flag.IntVar(&c.intents, "intents", 30, "intents per domain")
	flag.IntVar(&c.deepEvery, "deep-learn-every", 7, "run pem deep-learn every N simulated days (0: never)")
	flag.IntVar(&c.yearRuns, "year-runs", 10000, "runs a day the one-year extrapolation scales to")
	flag.Int64Var(&c.seed, "seed", 1, "random seed")
	flag.BoolVar(&c.keep, "keep", false, "keep the work directory")
	flag.IntVar(&c.cloneEvery, "clone-every", 1, "measure the clones every N weeks (0: never)")
	flag.StringVar(&c.policy, "policy", "", "pem.yaml policy values to set after pem init, as key=value,… (e.g. compact_below_weight=0.5)")
	flag.Parse()
	if err := run(context.Background(), c); err != nil {
		fmt.Fprintln(os.Stderr, "simulate:", err)
		os.Exit(1)
	}
}

// Base is the first simulated day.
var Base = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)

type week struct {
	n                   int
	gitBytes            int64
	packs, loose        int
	fullClone, facts    time.Duration
	fullBytes, factsB   int64
	stateBytes          int64 // the objects refs/pem/state reaches, packed
	stateCommits        int
	factsCPU            time.Duration
	cpu, maxCPU         time.Duration
	consolidations      int
	peakRSS             int64 // KiB
	traceFiles          int
	commits             int
	deepCPU, deepMaxRSS int64
}

func run(ctx context.Context, c config) error {
	pem, err := exec.LookPath(c.pem)
	if err != nil {
		return fmt.Errorf("the pem binary %q: %w (build it: make build, then -pem bin/pem)", c.pem, err)
	}
	if pem, err = filepath.Abs(pem); err != nil {
		return err
	}
	c.pem = pem
	if c.dir == "" {
		if c.dir, err = os.MkdirTemp("", "pem-simulate-"); err != nil {
			return err
		}
		if !c.keep {
			defer os.RemoveAll(c.dir)
		}
	}
	tree := filepath.Join(c.dir, "knowledge")
	if _, err := pemRun(c, tree, "init", tree); err != nil {
		return err
	}
	if err := setPolicy(filepath.Join(tree, "pem.yaml"), c.policy); err != nil {
		return err
	}
	fmt.Printf("simulate: %d days, %d traces a day over %d domains × %d intents, %d consolidations a day, deep-learn every %d days; GOMAXPROCS %d\n",
		c.days, c.traces, c.domains, c.intents, c.perDay, c.deepEvery, runtime.GOMAXPROCS(0))
	fmt.Printf("load average at the start: %s\n", treegen.LoadAverage())
	fmt.Println()
	fmt.Println("| week | traces in tree | commits | .git | packs | loose | full clone (wall, size) | state ref (packed, commits) | facts-only clone (pem clone: wall, CPU, size) | consolidation CPU mean / max | peak RSS | deep-learn CPU, RSS |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|")
	rng := rand.New(rand.NewSource(c.seed))
	var weeks []week
	w := week{n: 1}
	for day := 0; day < c.days; day++ {
		for slot := 0; slot < c.perDay; slot++ {
			from := Base.Add(time.Duration(day)*24*time.Hour + time.Duration(slot)*24*time.Hour/time.Duration(c.perDay))
			span := 24 * time.Hour / time.Duration(c.perDay)
			n := c.traces / c.perDay
			if slot < c.traces%c.perDay {
				n++
			}
			for i := 0; i < n; i++ {
				t := trace(rng, c, from.Add(time.Duration(rng.Int63n(int64(span-time.Minute)))))
				if err := write(tree, store.TracePath(store.RefOf(t)), t); err != nil {
					return err
				}
			}
			ru, err := pemRun(c, tree, "consolidate", "--now", from.Add(span).Format(time.RFC3339))
			if err != nil {
				return err
			}
			cpu := cpuOf(ru)
			w.cpu += cpu
			w.maxCPU = max(w.maxCPU, cpu)
			w.peakRSS = max(w.peakRSS, ru.Maxrss)
			w.consolidations++
		}
		if c.deepEvery > 0 && (day+1)%c.deepEvery == 0 {
			ru, err := pemRun(c, tree, "deep-learn", "--now", Base.Add(time.Duration(day+1)*24*time.Hour).Format(time.RFC3339))
			if err != nil {
				return err
			}
			w.deepCPU += int64(cpuOf(ru) / time.Millisecond)
			w.deepMaxRSS = max(w.deepMaxRSS, ru.Maxrss)
		}
		if (day+1)%7 == 0 || day == c.days-1 {
			if err := measure(ctx, c, tree, &w, c.cloneEvery > 0 && (w.n%c.cloneEvery == 0 || day == c.days-1)); err != nil {
				return err
			}
			printWeek(w)
			weeks = append(weeks, w)
			w = week{n: w.n + 1}
		}
	}
	extrapolate(c, weeks)
	fmt.Printf("  load average at the end: %s (wall times on a shared machine; the CPU times are the process's own)\n", treegen.LoadAverage())
	return nil
}

func printWeek(w week) {
	clone := func(d time.Duration, b int64) string {
		if d == 0 {
			return "—"
		}
		return fmt.Sprintf("%.2f s, %s", d.Seconds(), size(b))
	}
	mean := time.Duration(0)
	if w.consolidations > 0 {
		mean = w.cpu / time.Duration(w.consolidations)
	}
	deep := "—"
	if w.deepMaxRSS > 0 {
		deep = fmt.Sprintf("%.2f s, %d MiB", float64(w.deepCPU)/1000, w.deepMaxRSS/1024)
	}
	facts := clone(w.facts, w.factsB)
	if w.facts > 0 {
		facts = fmt.Sprintf("%.2f s, %.2f s CPU, %s", w.facts.Seconds(), w.factsCPU.Seconds(), size(w.factsB))
	}
	state := "—"
	if w.stateBytes > 0 {
		state = fmt.Sprintf("%s, %d", size(w.stateBytes), w.stateCommits)
	}
	fmt.Printf("| %d | %d | %d | %s | %d | %d | %s | %s | %s | %.2f / %.2f s | %d MiB | %s |\n", w.n, w.traceFiles, w.commits, size(w.gitBytes), w.packs, w.loose,
		clone(w.fullClone, w.fullBytes), state, facts, mean.Seconds(), w.maxCPU.Seconds(), w.peakRSS/1024, deep)
}

// extrapolate scales the growth of the last week to one year at c.yearRuns
// runs a day: the history grows linearly with the runs (traces and the
// experience they change), so a day of the simulation is yearRuns/traces of
// a day of the fleet.
func extrapolate(c config, weeks []week) {
	if len(weeks) < 2 {
		return
	}
	last := weeks[len(weeks)-1]
	// Each figure grows from the latest earlier week that measured it and
	// ended at least 7 days before the last (a last week of one day would
	// scale one point of a sawtooth to a year; with -clone-every N the
	// clone sizes are measured every N weeks only).
	// Once traces expire (week 5 with the default ttl_days of 30) the tree
	// is in its steady state: with two weeks or more of it, the growth is
	// taken over all of it, not over the last week (the object store is a
	// sawtooth of repacks and prunes, and one week of it scales to nonsense).
	end := func(w week) int { return min(7*w.n, c.days) }
	steady := -1
	for i, w := range weeks {
		if w.n >= 5 && end(last)-end(w) >= 14 {
			steady = i
			break
		}
	}
	before := func(has func(week) bool) (week, float64, bool) {
		if steady >= 0 {
			for i := steady; i < len(weeks)-1; i++ {
				if has(weeks[i]) && end(last)-end(weeks[i]) >= 7 {
					return weeks[i], float64(end(last) - end(weeks[i])), true
				}
			}
		}
		for i := len(weeks) - 2; i >= 0; i-- {
			if d := end(last) - end(weeks[i]); d >= 7 && has(weeks[i]) {
				return weeks[i], float64(d), true
			}
		}
		return week{}, 0, false
	}
	scale := float64(c.yearRuns) / float64(c.traces)
	yearOf := func(now, then int64, days float64) (perDay, year float64) {
		perDay = float64(now-then) / days
		return perDay * scale, (float64(now) + perDay*(365-float64(c.days))) * scale
	}
	fmt.Println()
	if steady >= 0 {
		fmt.Printf("extrapolation to one year at %d runs a day (×%.2f the simulated load), from the growth over the steady state (week %d on: traces expire):\n", c.yearRuns, scale, weeks[steady].n)
	} else {
		fmt.Printf("extrapolation to one year at %d runs a day (×%.2f the simulated load), from the growth since the latest week measured 7 days or more before the last (run 7 weeks or more to see the steady state):\n", c.yearRuns, scale)
	}
	lo, hi := last.gitBytes, last.gitBytes
	if steady >= 0 {
		for _, w := range weeks[steady:] {
			lo, hi = min(lo, w.gitBytes), max(hi, w.gitBytes)
		}
	}
	if prev, days, ok := before(func(week) bool { return true }); !ok {
		fmt.Printf("  .git of the consolidating clone: %s now (no week 7 days earlier to extrapolate from)\n", size(last.gitBytes))
	} else if d, y := yearOf(last.gitBytes, prev.gitBytes, days); d >= 0 && (steady < 0 || hi == last.gitBytes && lo == prev.gitBytes) {
		fmt.Printf("  .git of the consolidating clone: +%s a day (weeks %d -> %d) -> %s at one year\n", size(int64(d)), prev.n, last.n, size(int64(y)))
	} else if steady >= 0 {
		fmt.Printf("  .git of the consolidating clone: between %s and %s from week %d to week %d, up and down (repacks, and prunes of what the state's snapshots dropped): bounded, not extrapolated; %s now\n",
			size(lo), size(hi), weeks[steady].n, last.n, size(last.gitBytes))
	} else {
		// A prune (Maintain) dropped what the state's snapshots no longer
		// reach: the size is a sawtooth, and a line through it says nothing
		// about a year.
		fmt.Printf("  .git of the consolidating clone: shrank by %s since week %d (a prune of what the state's snapshots dropped): not extrapolated; %s now\n",
			size(prev.gitBytes-last.gitBytes), prev.n, size(last.gitBytes))
	}
	if prev, days, ok := before(func(w week) bool { return w.fullBytes > 0 }); ok && last.fullBytes > 0 {
		d, y := yearOf(last.fullBytes, prev.fullBytes, days)
		if d < 0 {
			// git packs a clone anew each time; a smaller pack is no
			// shrinking history, and no growth to scale.
			d, y = 0, float64(last.fullBytes)*scale
			fmt.Printf("  history a new full clone fetches: no growth (%s in week %d, %s in week %d) -> ~%s at one year, scaled as it is (goal ≤ 1 GiB)\n", size(prev.fullBytes), prev.n, size(last.fullBytes), last.n, size(int64(y)))
		} else {
			fmt.Printf("  history a new full clone fetches: +%s a day (weeks %d -> %d) -> %s at one year (goal ≤ 1 GiB)\n", size(int64(d)), prev.n, last.n, size(int64(y)))
		}
		if last.fullClone > 0 {
			rate := float64(last.fullBytes) / last.fullClone.Seconds()
			fmt.Printf("  full clone at one year: ~%.0f s at the %s/s this machine cloned locally in the last week\n", y/rate, size(int64(rate)))
		}
	} else if last.fullBytes == 0 {
		fmt.Printf("  history a new full clone fetches: not measured in the last week (-clone-every): not extrapolated\n")
	} else {
		fmt.Printf("  history a new full clone fetches: %s now; no clone measured 7 days or more before it (-clone-every): not extrapolated\n", size(last.fullBytes))
	}
	if last.stateBytes > 0 {
		// Not a history: the live traces and the experience, bounded by
		// ttl_days through the snapshots; it scales with the runs a day.
		fmt.Printf("  state ref (refs/pem/state, what pem clone and sync fetch of it at most): %s in the last week (%d commits since its snapshot), ×%.2f at %d runs a day: ~%s, flat in time once ttl_days expire traces\n",
			size(last.stateBytes), last.stateCommits, scale, c.yearRuns, size(int64(float64(last.stateBytes)*scale)))
	}
	if last.facts > 0 {
		fmt.Printf("  facts-only clone (pem clone) in the last week: %.2f s, %s (depends on the live tree, not on the history)\n", last.facts.Seconds(), size(last.factsB))
	}
	fmt.Printf("  packs in the last week: %d (bounded by the repack policy, not by the number of consolidations: %d so far)\n", last.packs, c.days*c.perDay)
	if len(weeks) >= 5 {
		w5 := weeks[4]
		m := func(w week) float64 { return w.cpu.Seconds() / float64(max(1, w.consolidations)) }
		fmt.Printf("  consolidation CPU, week 5 -> week %d: %.2f -> %.2f s (×%.2f); peak RSS %d -> %d MiB\n", last.n, m(w5), m(last), m(last)/math.Max(m(w5), 1e-9), w5.peakRSS/1024, last.peakRSS/1024)
	}
}

func measure(ctx context.Context, c config, tree string, w *week, clones bool) error {
	gitDir := filepath.Join(tree, ".git")
	var err error
	if w.gitBytes, err = duBytes(gitDir); err != nil {
		return err
	}
	w.packs, w.loose = objectCounts(gitDir)
	w.traceFiles = countFiles(filepath.Join(tree, store.TracesDir))
	if out, err := exec.CommandContext(ctx, "git", "-C", tree, "rev-list", "--count", "HEAD").Output(); err == nil {
		fmt.Sscan(string(out), &w.commits)
	}
	if !clones {
		return nil
	}
	if w.stateBytes, err = packedSize(ctx, tree, "refs/pem/state"); err != nil {
		return err
	}
	if out, err := exec.CommandContext(ctx, "git", "-C", tree, "rev-list", "--count", "refs/pem/state").Output(); err == nil {
		fmt.Sscan(string(out), &w.stateCommits)
	}
	url := "file://" + tree
	full := filepath.Join(c.dir, "clone-full")
	os.RemoveAll(full)
	start := time.Now()
	if out, err := exec.CommandContext(ctx, "git", "clone", "-q", url, full).CombinedOutput(); err != nil {
		return fmt.Errorf("git clone %s: %v\n%s", url, err, out)
	}
	w.fullClone = time.Since(start)
	w.fullBytes, _ = duBytes(filepath.Join(full, ".git"))
	os.RemoveAll(full)
	facts := filepath.Join(c.dir, "clone-facts")
	os.RemoveAll(facts)
	start = time.Now()
	ru, err := pemRun(c, "", "clone", url, facts)
	if err != nil {
		return err
	}
	w.facts = time.Since(start)
	w.factsCPU = cpuOf(ru) // pem's and its git children's (RUSAGE_CHILDREN of pem's own)
	w.factsB, _ = duBytes(filepath.Join(facts, ".git"))
	os.RemoveAll(facts)
	return nil
}

// packedSize packs every object rev reaches and returns the pack's size
// (0 when rev does not exist).
func packedSize(ctx context.Context, tree, rev string) (int64, error) {
	if exec.CommandContext(ctx, "git", "-C", tree, "rev-parse", "-q", "--verify", rev).Run() != nil {
		return 0, nil
	}
	cmd := exec.CommandContext(ctx, "git", "-C", tree, "pack-objects", "--revs", "--stdout", "-q")
	cmd.Stdin = strings.NewReader(rev + "\n")
	var n countWriter
	cmd.Stdout = &n
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("git pack-objects %s: %w", rev, err)
	}
	return int64(n), nil
}

type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) { *c += countWriter(len(p)); return len(p), nil }

// pemRun runs pem with args on tree (when not "") and returns its resource use.
func pemRun(c config, tree string, args ...string) (*syscall.Rusage, error) {
	if tree != "" && args[0] != "init" {
		args = append([]string{"--knowledge", tree}, args...)
	}
	cmd := exec.Command(c.pem, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// The simulated days pass in minutes: the prune's day of grace for
	// unreachable objects would keep them all.
	cmd.Env = append(os.Environ(), "PEM_GIT_AUTHOR_NAME=simulate", "PEM_GIT_AUTHOR_EMAIL=simulate@localhost", "PEM_PRUNE_EXPIRE=now")
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("pem %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	ru, _ := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if ru == nil {
		ru = &syscall.Rusage{}
	}
	return ru, nil
}

func cpuOf(ru *syscall.Rusage) time.Duration {
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// trace is one run of a fleet agent at time at: the treegen shape (a
// navigate, a click, a text read; one in five fails), with the agent's
// session and a free-text answer so traces differ like real ones.
func trace(rng *rand.Rand, c config, at time.Time) *engine.Trace {
	d, j := rng.Intn(c.domains), rng.Intn(c.intents)
	domain := fmt.Sprintf("site%04d.example", d)
	intent := fmt.Sprintf("find item %d details", j)
	id, _ := engine.NewTraceID(at, rng)
	n, _ := engine.NormalizeURL(fmt.Sprintf("https://%s/section%d/item/%d", domain, j, 1000+j))
	t := &engine.Trace{Format: engine.Format, ID: id, Writer: fmt.Sprintf("agent%03d", rng.Intn(100)), Session: fmt.Sprintf("s%d", rng.Intn(50)),
		Task: intent, Intent: intent, IntentKey: engine.IntentKey(intent), TaskType: "lookup",
		URL: n.URL, Domain: n.Domain, URLPattern: engine.Pattern(n), Outcome: engine.Success, StartedAt: at,
		DurationMs: 500 + rng.Int63n(5000), PlannerCalls: 1}
	t.Steps = []engine.Step{
		{Seq: 1, Action: "navigate", URL: n.URL, OK: true, DurationMs: 300 + rng.Int63n(900)},
		{Seq: 2, Action: "click", Selector: fmt.Sprintf("#tab-%d", j), OK: true, DurationMs: 40 + rng.Int63n(200)},
		{Seq: 3, Action: "get_text", Selector: ".details .value", OK: true, Result: fmt.Sprintf("value %d", rng.Intn(1000)), DurationMs: 12 + rng.Int63n(50)},
	}
	if rng.Intn(5) == 0 {
		t.Outcome = engine.Failure
		t.Steps[2].OK, t.Steps[2].Error, t.Steps[2].Result = false, "no element matches .details .value", ""
		t.FailureCategory = engine.Classify(t)
	}
	t.Result = engine.Result{Answer: t.Steps[2].Result, FinalURL: n.URL}
	return t
}

func write(dir, rel string, v any) error {
	b, err := store.Marshal(v)
	if err != nil {
		return err
	}
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, b, 0o644)
}

func duBytes(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n, err
}

// objectCounts counts the pack files and the loose objects of a git directory.
func objectCounts(gitDir string) (packs, loose int) {
	idx, _ := filepath.Glob(filepath.Join(gitDir, "objects", "pack", "*.idx"))
	dirs, _ := filepath.Glob(filepath.Join(gitDir, "objects", "[0-9a-f][0-9a-f]"))
	for _, d := range dirs {
		es, _ := os.ReadDir(d)
		loose += len(es)
	}
	return len(idx), loose
}

func countFiles(dir string) int {
	n := 0
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, store.TraceExt) {
			n++
		}
		return nil
	})
	return n
}

func size(b int64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	default:
		return fmt.Sprintf("%.0f KiB", float64(b)/(1<<10))
	}
}

// setPolicy sets policy values of the pem.yaml pem init wrote: each
// "key=value" of spec replaces the line "  key: …" under policy. A key the
// file does not have is an error (pem would refuse or ignore it).
func setPolicy(file, spec string) error {
	if spec == "" {
		return nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	lines := strings.Split(string(b), "\n")
	for _, kv := range strings.Split(spec, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || k == "" {
			return fmt.Errorf("-policy %q: want key=value, e.g. compact_below_weight=0.5", kv)
		}
		found := false
		for i, l := range lines {
			if strings.HasPrefix(l, "  "+k+":") {
				lines[i] = "  " + k + ": " + v
				found = true
			}
		}
		if !found {
			return fmt.Errorf("-policy: %s has no policy key %q (see docs/data-model.md for the keys)", file, k)
		}
	}
	return os.WriteFile(file, []byte(strings.Join(lines, "\n")), 0o644)
}
