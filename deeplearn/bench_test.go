//go:build unix

package deeplearn

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store"
	"github.com/pemdev/pem/store/treegen"
)

// benchTraces is the size of the benchmark tree: 100,000 traces by default
// (the goal: ≤ 10 s and ≤ 512 MB), PEM_BENCH_TRACES to shrink it.
func benchTraces(b *testing.B) int {
	n := 100_000
	if s := os.Getenv("PEM_BENCH_TRACES"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			b.Fatalf("PEM_BENCH_TRACES=%q: want a positive number", s)
		}
		n = v
	}
	return n
}

// rawDecodeCPU is the CPU time of reading and decoding one trace file with
// os.ReadFile and yaml.v3, no store, averaged over up to max files of dir.
// It also returns how many trace files dir holds.
func rawDecodeCPU(b *testing.B, dir string, max int) (time.Duration, int) {
	var paths []string
	total := 0
	filepath.WalkDir(filepath.Join(dir, "traces"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			total++
			if len(paths) < max {
				paths = append(paths, p)
			}
		}
		return err
	})
	if len(paths) == 0 {
		b.Fatal("no trace files")
	}
	runtime.GC()
	cpu0 := cpuTime()
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		var t engine.Trace
		if err := yaml.Unmarshal(data, &t); err != nil {
			b.Fatal(p, err)
		}
	}
	return (cpuTime() - cpu0) / time.Duration(len(paths)), total
}

// cpuTime is the process's user + system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// peakHeap samples the live heap while f runs and returns its peak in bytes.
func peakHeap(f func()) uint64 {
	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var ms runtime.MemStats
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	f()
	close(stop)
	wg.Wait()
	return peak.Load()
}

// BenchmarkDeepLearn mines a treegen tree of 100 domains × 20 intents (2,000
// entries, all with facts and experience) holding benchTraces traces, four
// ways in the same run: Collect then MineAll (every trace in memory at once;
// the baseline), MineTree (one domain's traces at a time), and Learn (what
// pem deep-learn runs) twice: its first run (nothing remembered) and a run
// with nothing new since. Each reports wall time, CPU seconds, traces/s and
// the peak live heap, and its speedup over the baseline.
// PEM_BENCH_LEARN_ONLY=1 runs the two Learn runs only.
func BenchmarkDeepLearn(b *testing.B) {
	ctx := context.Background()
	n := benchTraces(b)
	// PEM_BENCH_DIR keeps the tree (made when missing) to time pem deep-learn on it.
	dir := os.Getenv("PEM_BENCH_DIR")
	if dir == "" {
		dir = b.TempDir()
	}
	if _, err := os.Stat(filepath.Join(dir, "pem.yaml")); err != nil {
		if err := treegen.Generate(ctx, dir, 100, 20, n, 1); err != nil {
			b.Fatal(err)
		}
	}
	rawPerFile, n := rawDecodeCPU(b, dir, 2000) // n: the tree's traces (a kept tree may differ from PEM_BENCH_TRACES)
	b.Logf("baseline: os.ReadFile + yaml decode of one trace file, one goroutine: %.0f µs CPU", rawPerFile.Seconds()*1e6)
	var baseline time.Duration
	stateDir := b.TempDir()
	if os.Getenv("PEM_BENCH_LEARN_ONLY") != "" {
		baseline = 1 // skip the baselines: Learn's runs only
	}
	for _, bc := range []struct {
		name string
		mine func(st *store.Store) ([]Proposal, error)
	}{
		{"Collect+MineAll", func(st *store.Store) ([]Proposal, error) {
			ins, _, err := Collect(ctx, st, Filter{}, treegen.Base)
			return MineAll(ins), err
		}},
		{"MineTree", func(st *store.Store) ([]Proposal, error) {
			ps, _, err := MineTree(ctx, st, Filter{}, treegen.Base)
			return ps, err
		}},
		// Learn's first run (nothing remembered), then a run with nothing new.
		{"Learn-first", func(st *store.Store) ([]Proposal, error) {
			ps, _, _, err := Learn(ctx, st, Filter{}, treegen.Base, Options{StateDir: stateDir, Full: true})
			return ps, err
		}},
		{"Learn-again", func(st *store.Store) ([]Proposal, error) {
			ps, _, stats, err := Learn(ctx, st, Filter{}, treegen.Base, Options{StateDir: stateDir})
			if err == nil && stats.Reused != len(ps) {
				err = fmt.Errorf("Learn-again re-mined %d of %d entries", stats.Mined, len(ps))
			}
			return ps, err
		}},
	} {
		if baseline == 1 && !strings.HasPrefix(bc.name, "Learn") {
			continue
		}
		b.Run(bc.name, func(b *testing.B) {
			var total, cpu time.Duration
			var peak uint64
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				// A fresh store each time: nothing decoded is cached from the last run.
				st, err := store.Open(dir, nil)
				if err != nil {
					b.Fatal(err)
				}
				runtime.GC()
				cpu0 := cpuTime()
				start := time.Now()
				b.StartTimer()
				var ps []Proposal
				p := peakHeap(func() {
					if ps, err = bc.mine(st); err != nil {
						b.Fatal(err)
					}
				})
				b.StopTimer()
				total += time.Since(start)
				cpu += cpuTime() - cpu0
				peak = max(peak, p)
				st.Close()
				if len(ps) != 2000 {
					b.Fatalf("%d proposals, want 2000", len(ps))
				}
			}
			per := total / time.Duration(b.N)
			b.ReportMetric(float64(n)/per.Seconds(), "traces/s")
			// CPU seconds do not depend on what else the machine runs: on an
			// idle machine the wall time is about cpu-s / GOMAXPROCS.
			b.ReportMetric((cpu / time.Duration(b.N)).Seconds(), "cpu-s")
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
			// CPU against the bare decode of the same number of trace files.
			b.ReportMetric((cpu/time.Duration(b.N)).Seconds()/(rawPerFile.Seconds()*float64(n)), "cpu-x-raw-decode")
			if baseline == 0 {
				baseline = per
			} else if baseline > 1 {
				b.ReportMetric(baseline.Seconds()/per.Seconds(), "speedup-vs-Collect+MineAll")
			}
		})
	}
}
