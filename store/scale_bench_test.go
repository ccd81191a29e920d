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

// pemBinary builds cmd/pem once per benchmark binary.
var pemBinaryPath string

func pemBinary(b *testing.B) string {
	b.Helper()
	if pemBinaryPath != "" {
		return pemBinaryPath
	}
	dir, err := os.MkdirTemp("", "pem-bench-bin-")
	if err != nil {
		b.Fatal(err)
	}
	bin := filepath.Join(dir, "pem")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/pemdev/pem/cmd/pem").CombinedOutput(); err != nil {
		b.Fatalf("building pem (go must be on PATH): %v\n%s", err, out)
	}
	pemBinaryPath = bin
	return bin
}

// runProc runs a command and returns its wall time and peak RSS (KiB).
func runProc(b *testing.B, name string, args ...string) (time.Duration, int64, []byte) {
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
	return d, rss, out.Bytes()
}

// BenchmarkQueryFreshProcess: `pem experience query` in a new process on a
// domain with 1k / 10k / 30k traces, against `cat` of the matched facts file
// in the same run. "first" is the first query of the tree on this machine
// (it builds the trace index when the store keeps one); the timed loop runs
// after it. Reports ms per query, peak RSS and the ratio to cat.
func BenchmarkQueryFreshProcess(b *testing.B) {
	if runtime.GOOS != "linux" {
		b.Skip("peak RSS via rusage: linux only")
	}
	bin := pemBinary(b)
	for _, n := range hotSizes {
		b.Run(fmt.Sprintf("traces=%d", n), func(b *testing.B) {
			dir := hotTree(b, n)
			facts := filepath.Join(dir, filepath.FromSlash(store.FactsPath(treegen.Domain(0), engine.IntentKey(treegen.Intent(7)))))
			query := func(j int) (time.Duration, int64) {
				d, rss, out := runProc(b, bin, "--knowledge", dir, "experience", "query", treegen.URL(0, j), "--intent", treegen.Intent(j))
				if !bytes.Contains(out, []byte(`"tier"`)) || bytes.Contains(out, []byte(`"P5"`)) {
					b.Fatalf("query %d answered %s", j, out)
				}
				return d, rss
			}
			first, _ := query(3)
			var total, cat time.Duration
			var peak int64
			b.ResetTimer()
			for i := range b.N {
				d, rss := query(i % hotIntents)
				total += d
				peak = max(peak, rss)
			}
			b.StopTimer()
			for range b.N {
				d, _, _ := runProc(b, "cat", facts)
				cat += d
			}
			ms := float64(total) / float64(b.N) / 1e6
			b.ReportMetric(ms, "ms/query")
			b.ReportMetric(float64(first)/1e6, "first-ms")
			b.ReportMetric(float64(peak)/1024, "peak-MiB")
			b.ReportMetric(float64(cat)/float64(b.N)/1e6, "cat-ms")
			b.ReportMetric(float64(total)/float64(cat), "x-cat")
		})
	}
}
