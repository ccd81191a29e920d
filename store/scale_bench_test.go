//go:build unix

package store_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store"
	"github.com/pemdev/pem/store/treegen"
)

// Scale benchmarks of the query path in one hot domain (docs/performance.md,
// "Scale: query, evidence, save"). The trees (one domain, 100 intents, 1k /
// 10k / 30k traces, every trace folded) are generated once into
// $TMPDIR/pem-bench-hot-<traces> and reused.

var hotSizes = []int{1_000, 10_000, 30_000}

const hotIntents = 100

func hotTree(b *testing.B, traces int) string {
	b.Helper()
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("pem-bench-hot-%d-%d", hotIntents, traces))
	if _, err := os.Stat(filepath.Join(dir, "complete")); err == nil {
		return filepath.Join(dir, "knowledge")
	}
	os.RemoveAll(dir)
	start := time.Now()
	if err := treegen.Generate(context.Background(), filepath.Join(dir, "knowledge"), 1, hotIntents, traces, 1); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "complete"), nil, 0o644); err != nil {
		b.Fatal(err)
	}
	b.Logf("generated one domain, %d intents, %d traces in %v into %s", hotIntents, traces, time.Since(start), dir)
	time.Sleep(2100 * time.Millisecond) // let the files age past the racy window
	return filepath.Join(dir, "knowledge")
}

// pemBinary builds cmd/pem into a temporary directory of b (removed when b ends).
func pemBinary(b *testing.B) string {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "pem")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/pemdev/pem/cmd/pem").CombinedOutput(); err != nil {
		b.Fatalf("building pem (go must be on PATH): %v\n%s", err, out)
	}
	return bin
}

// runProc runs a command and returns its wall time and peak RSS (KiB).
func runProc(b *testing.B, name string, args ...string) (time.Duration, int64, []byte) {
	d, rss, _, out := runProcCPU(b, name, args...)
	return d, rss, out
}

// runProcCPU is runProc that also returns the process's CPU time (user + system).
func runProcCPU(b *testing.B, name string, args ...string) (time.Duration, int64, time.Duration, []byte) {
	b.Helper()
	cmd := exec.Command(name, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	t := time.Now()
	if err := cmd.Run(); err != nil {
		b.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, errb.String())
	}
	d := time.Since(t)
	var rss int64
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		rss = ru.Maxrss
	}
	return d, rss, cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), out.Bytes()
}

// BenchmarkQueryFreshProcess: `pem experience query` in a new process on a
// domain with 1k / 10k / 30k traces, against `cat` of the matched facts file
// in the same run. first-ms is the first query after the trace index was
// deleted (as on a fresh clone: it rebuilds the index); the timed loop runs
// after it. Reports ms per query, CPU ms per query, peak RSS, the ratio to
// cat, and `pem --version` (start-up alone) in the same run.
func BenchmarkQueryFreshProcess(b *testing.B) {
	if runtime.GOOS != "linux" {
		b.Skip("peak RSS via rusage: linux only")
	}
	bin := pemBinary(b)
	for _, n := range hotSizes {
		b.Run(fmt.Sprintf("traces=%d", n), func(b *testing.B) {
			dir := hotTree(b, n)
			facts := filepath.Join(dir, filepath.FromSlash(store.FactsPath(treegen.Domain(0), engine.IntentKey(treegen.Intent(7)))))
			var cpu time.Duration
			query := func(j int) (time.Duration, int64) {
				d, rss, c, out := runProcCPU(b, bin, "--knowledge", dir, "experience", "query", treegen.URL(0, j), "--intent", treegen.Intent(j))
				if !bytes.Contains(out, []byte(`"tier"`)) || bytes.Contains(out, []byte(`"P5"`)) {
					b.Fatalf("query %d answered %s", j, out)
				}
				cpu += c
				return d, rss
			}
			// The first query after the index is lost (a fresh clone) rebuilds it.
			if err := os.RemoveAll(filepath.Join(dir, ".pem-cache")); err != nil {
				b.Fatal(err)
			}
			first, _ := query(3)
			cpu = 0
			var total, cat, catCPU time.Duration
			var peak int64
			b.ResetTimer()
			for i := range b.N {
				d, rss := query(i % hotIntents)
				total += d
				peak = max(peak, rss)
			}
			b.StopTimer()
			var start, startCPU time.Duration
			for range b.N {
				d, _, c, _ := runProcCPU(b, "cat", facts)
				cat += d
				catCPU += c
				d, _, c, _ = runProcCPU(b, bin, "--version")
				start += d
				startCPU += c
			}
			ms := float64(total) / float64(b.N) / 1e6
			b.ReportMetric(ms, "ms/query")
			b.ReportMetric(float64(cpu)/float64(b.N)/1e6, "cpu-ms/query")
			b.ReportMetric(float64(catCPU)/float64(b.N)/1e6, "cat-cpu-ms")
			// pem's own start-up (pem --version), to tell it from the query's work.
			b.ReportMetric(float64(start)/float64(b.N)/1e6, "start-ms")
			b.ReportMetric(float64(startCPU)/float64(b.N)/1e6, "start-cpu-ms")
			b.ReportMetric(float64(first)/1e6, "first-ms")
			b.ReportMetric(float64(peak)/1024, "peak-MiB")
			b.ReportMetric(float64(cat)/float64(b.N)/1e6, "cat-ms")
			b.ReportMetric(float64(total)/float64(cat), "x-cat")
		})
	}
}

// BenchmarkQueryHotDomain: engine.Query in process on one domain with 1k /
// 10k / 30k traces. "first" opens a new Store for every query (what a new
// `pem mcp` server pays at the first query of a domain, the trace index on
// disk); "warm" reuses one Store (p50, p99). Both against os.ReadFile of the
// matched facts file in the same run.
func BenchmarkQueryHotDomain(b *testing.B) {
	for _, n := range hotSizes {
		dir := hotTree(b, n)
		ctx := context.Background()
		check := func(r *engine.Recall, err error) {
			if err != nil {
				b.Fatal(err)
			}
			if r.Source != "facts" || r.Tier == engine.P5 {
				b.Fatalf("answered %s from %q", r.Tier, r.Source)
			}
		}
		readBase := func(count int) []time.Duration {
			ds := make([]time.Duration, 0, count)
			for i := range count {
				j := i % hotIntents
				p := filepath.Join(dir, filepath.FromSlash(store.FactsPath(treegen.Domain(0), engine.IntentKey(treegen.Intent(j)))))
				t := time.Now()
				if _, err := os.ReadFile(p); err != nil {
					b.Fatal(err)
				}
				ds = append(ds, time.Since(t))
			}
			return ds
		}
		b.Run(fmt.Sprintf("first/traces=%d", n), func(b *testing.B) {
			ds := make([]time.Duration, 0, b.N)
			for i := range b.N {
				j := i % hotIntents
				t := time.Now()
				s, err := store.Open(dir, nil)
				if err != nil {
					b.Fatal(err)
				}
				e := engine.New(s)
				e.Now = func() time.Time { return treegen.Base }
				check(e.Query(ctx, treegen.URL(0, j), treegen.Intent(j)))
				ds = append(ds, time.Since(t))
				s.Close()
			}
			b.StopTimer()
			p50, p99 := percentiles(ds)
			bp50, _ := percentiles(readBase(max(b.N, 200)))
			b.ReportMetric(p50/1e6, "p50-ms")
			b.ReportMetric(p99/1e6, "p99-ms")
			b.ReportMetric(p50/bp50, "p50-x-readfile")
		})
		b.Run(fmt.Sprintf("warm/traces=%d", n), func(b *testing.B) {
			s, err := store.Open(dir, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			e := engine.New(s)
			e.Now = func() time.Time { return treegen.Base }
			for j := range hotIntents { // warm every intent twice: the index's maps
				check(e.Query(ctx, treegen.URL(0, j), treegen.Intent(j)))
				check(e.Query(ctx, treegen.URL(0, j), treegen.Intent(j)))
			}
			ds := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				j := i % hotIntents
				t := time.Now()
				check(e.Query(ctx, treegen.URL(0, j), treegen.Intent(j)))
				ds = append(ds, time.Since(t))
			}
			b.StopTimer()
			p50, p99 := percentiles(ds)
			bp50, bp99 := percentiles(readBase(max(b.N, 1000)))
			b.ReportMetric(p50/1e3, "p50-us")
			b.ReportMetric(p99/1e3, "p99-us")
			b.ReportMetric(p50/bp50, "p50-x-readfile")
			b.ReportMetric(p99/bp99, "p99-x-readfile")
		})
	}
}

// BenchmarkQueryFirstTier: the first engine.Query of a new Store (a new
// `pem mcp`'s first query of the domain; most of a CLI query's work after
// start-up) on the fresh-process row's trees of make bench-scale (one
// domain, 20 intents, the queried one with a fixed 50 runs of the 30 days
// before treegen.Base, the others the rest), at two clocks: treegen.Base,
// where the entry is served on its own route (P2), and 18 months later,
// where it has decayed below P2 and the query also reads the related routes
// of up to 4 other intents (their facts and summaries). The decoded caches
// on disk are filled by one untimed query first, as a CLI query's are after
// the first. Reports p50 and p99 and the tier served.
func BenchmarkQueryFirstTier(b *testing.B) {
	const intents, hot, hotTraces = 20, 3, 50
	for _, n := range []int{1_000, 10_000} {
		dir := filepath.Join(os.TempDir(), fmt.Sprintf("pem-bench-tier-%d", n))
		if _, err := os.Stat(filepath.Join(dir, "complete")); err != nil {
			os.RemoveAll(dir)
			if err := treegen.GenerateHot(context.Background(), filepath.Join(dir, "knowledge"), intents, n, hot, hotTraces, treegen.Base, 1); err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "complete"), nil, 0o644); err != nil {
				b.Fatal(err)
			}
			time.Sleep(2100 * time.Millisecond) // past the racy window
		}
		root := filepath.Join(dir, "knowledge")
		for _, at := range []struct {
			name string
			now  time.Time
		}{{"P2", treegen.Base}, {"P4", treegen.Base.AddDate(0, 18, 0)}} {
			b.Run(fmt.Sprintf("%s/traces=%d", at.name, n), func(b *testing.B) {
				ctx := context.Background()
				query := func() *engine.Recall {
					s, err := store.Open(root, nil)
					if err != nil {
						b.Fatal(err)
					}
					defer s.Close()
					e := engine.New(s)
					e.Now = func() time.Time { return at.now }
					r, err := e.Query(ctx, treegen.URL(0, hot), treegen.Intent(hot))
					if err != nil {
						b.Fatal(err)
					}
					return r
				}
				r := query() // fills the caches on disk
				if string(r.Tier) != at.name {
					b.Fatalf("served %s, want %s (%v)", r.Tier, at.name, r.Reasons)
				}
				if at.name == "P4" && len(r.RelatedRoutes) == 0 {
					b.Fatal("no related routes at P4")
				}
				ds := make([]time.Duration, 0, b.N)
				b.ResetTimer()
				for range b.N {
					t := time.Now()
					query()
					ds = append(ds, time.Since(t))
				}
				b.StopTimer()
				p50, p99 := percentiles(ds)
				b.ReportMetric(p50/1e6, "p50-ms")
				b.ReportMetric(p99/1e6, "p99-ms")
				b.ReportMetric(float64(len(r.RelatedRoutes)), "related")
			})
		}
	}
}
