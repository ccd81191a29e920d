package store_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store"
	"github.com/pemdev/pem/store/treegen"
)

// Benchmarks. The big tree (1,000 domains × 10 intents, 100,000 traces) is
// generated once into $TMPDIR/pem-bench-<params> and reused across runs;
// PEM_BENCH_TRACES shrinks it (e.g. 10000). See docs/performance.md.

const benchDomains, benchIntents = 1000, 10

func benchTree(b *testing.B) string {
	b.Helper()
	traces := 100_000
	if v := os.Getenv("PEM_BENCH_TRACES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			b.Fatalf("PEM_BENCH_TRACES=%q: want a number of traces", v)
		}
		traces = n
	}
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("pem-bench-%d-%d-%d-1", benchDomains, benchIntents, traces))
	done := filepath.Join(dir, "complete")
	if _, err := os.Stat(done); err == nil {
		return filepath.Join(dir, "knowledge")
	}
	os.RemoveAll(dir)
	start := time.Now()
	if err := treegen.Generate(context.Background(), filepath.Join(dir, "knowledge"), benchDomains, benchIntents, traces, 1); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(done, nil, 0o644); err != nil {
		b.Fatal(err)
	}
	b.Logf("generated %d domains × %d intents, %d traces in %v into %s", benchDomains, benchIntents, traces, time.Since(start), dir)
	// Files changed in the last racyWindow are not cached yet: let them age.
	time.Sleep(2100 * time.Millisecond)
	return filepath.Join(dir, "knowledge")
}

type pair struct{ d, j int }

func benchPairs(n int) []pair {
	ps := make([]pair, n)
	for i := range ps {
		ps[i] = pair{(i * 7919) % benchDomains, (i * 31) % benchIntents}
	}
	return ps
}

func percentiles(ds []time.Duration) (p50, p99 float64) {
	slices.Sort(ds)
	return float64(ds[len(ds)/2]), float64(ds[len(ds)*99/100])
}

// readFactsBaseline times a bare os.ReadFile of each pair's facts file.
func readFactsBaseline(b *testing.B, dir string, ps []pair, n int) []time.Duration {
	ds := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		p := ps[i%len(ps)]
		path := filepath.Join(dir, filepath.FromSlash(store.FactsPath(treegen.Domain(p.d), engine.IntentKey(treegen.Intent(p.j)))))
		t := time.Now()
		if _, err := os.ReadFile(path); err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(t))
	}
	return ds
}

// BenchmarkQuery: warm engine.Query on the big tree; reports p50/p99 and
// their ratio to a bare os.ReadFile of the matched facts file, measured in
// the same run. "kept" is the default store: with its change watch, a warm
// query serves the answer it kept while nothing it read changed
// (engine/querymemo.go); "exact" computes every query (NoWatch), statting
// every file it touches; "revalidate-1s" is Options.Revalidate = 1s.
func BenchmarkQuery(b *testing.B) {
	dir := benchTree(b)
	for _, mode := range []struct {
		name string
		opts *store.Options
	}{
		{"kept", nil},
		{"exact", &store.Options{NoWatch: true}},
		{"revalidate-1s", &store.Options{Revalidate: time.Second}},
	} {
		b.Run(mode.name, func(b *testing.B) { benchQuery(b, dir, mode.opts) })
	}
}

func benchQuery(b *testing.B, dir string, opts *store.Options) {
	s, err := store.Open(dir, opts)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	e := engine.New(s)
	e.Now = func() time.Time { return treegen.Base }
	ctx := context.Background()
	ps := benchPairs(2000)
	query := func(p pair) {
		r, err := e.Query(ctx, treegen.URL(p.d, p.j), treegen.Intent(p.j))
		if err != nil {
			b.Fatal(err)
		}
		if r.Source != "facts" || r.Tier == engine.P5 {
			b.Fatalf("query %v answered %s from %q", p, r.Tier, r.Source)
		}
	}
	for _, p := range ps { // warm the caches
		query(p)
	}
	ds := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t := time.Now()
		query(ps[i%len(ps)])
		ds = append(ds, time.Since(t))
	}
	b.StopTimer()
	p50, p99 := percentiles(ds)
	bp50, bp99 := percentiles(readFactsBaseline(b, dir, ps, max(b.N, 1000)))
	b.ReportMetric(p50, "p50-ns")
	b.ReportMetric(p99, "p99-ns")
	b.ReportMetric(p50/bp50, "p50-x-readfile")
	b.ReportMetric(p99/bp99, "p99-x-readfile")
}

// BenchmarkReadFactsBaseline: os.ReadFile of the facts file a query matches.
func BenchmarkReadFactsBaseline(b *testing.B) {
	dir := benchTree(b)
	ps := benchPairs(2000)
	readFactsBaseline(b, dir, ps, len(ps)) // warm the page cache
	b.ResetTimer()
	ds := readFactsBaseline(b, dir, ps, b.N)
	b.StopTimer()
	p50, p99 := percentiles(ds)
	b.ReportMetric(p50, "p50-ns")
	b.ReportMetric(p99, "p99-ns")
}

// saveRequests spreads saves over 100 entries, like a busy tree.
func saveRequest(i int) engine.SaveRequest {
	d, j := i%100, (i/100)%10
	return engine.SaveRequest{URL: treegen.URL(d, j), Intent: treegen.Intent(j),
		Trace: &engine.TraceInput{Steps: []engine.StepInput{
			{Action: "navigate", Value: treegen.URL(d, j)},
			{Action: "click", Selector: fmt.Sprintf("#tab-%d", j)},
			{Action: "get_text", Selector: ".details .value", Result: "value"},
		}}}
}

// saveBaseline writes the same bytes n times with write + fsync + rename
// (syncDir: and an fsync of the directory, what makes the rename durable).
func saveBaseline(b *testing.B, dir string, data [][]byte) time.Duration {
	return saveBaselineSync(b, dir, data, false)
}

func saveBaselineSync(b *testing.B, dir string, data [][]byte, syncDir bool) time.Duration {
	var took time.Duration
	for i, d := range data {
		took += writeBaseline(b, dir, i, d, syncDir)
	}
	return took
}

// writeBaseline writes one file as saveBaselineSync does and returns how
// long that took.
func writeBaseline(b *testing.B, dir string, i int, d []byte, syncDir bool) time.Duration {
	start := time.Now()
	final := filepath.Join(dir, fmt.Sprintf("%d.yaml", i))
	tmp := final + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := f.Write(d); err != nil {
		b.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
	f.Close()
	if err := os.Rename(tmp, final); err != nil {
		b.Fatal(err)
	}
	if syncDir {
		d, err := os.Open(dir)
		if err != nil {
			b.Fatal(err)
		}
		if err := d.Sync(); err != nil {
			b.Fatal(err)
		}
		d.Close()
	}
	return time.Since(start)
}

// BenchmarkSave: engine.Save (trace only) on a store, with the ratio to
// write + fsync + rename of the same bytes (x-baseline), and to the same
// plus an fsync of the directory (x-baseline-dirsync: the two fsyncs a
// durable new file needs, which is what a save does). Each save is
// followed by its bytes written both ways, so that all three see the same
// load (fsync latency on a shared machine swings several-fold within
// seconds); ns/op counts all three, save-us the save alone. The first 100
// saves are the first of their domain (they make its directories), the
// rest go into a day directory that exists.
func BenchmarkSave(b *testing.B) {
	s := newTree(b)
	e := engine.New(s)
	ctx := context.Background()
	// A tree in use is older than the racy window: pem.yaml, written just
	// now, would otherwise be decoded again at every save (not cached yet).
	time.Sleep(2100 * time.Millisecond)
	baseDir, dirDir := b.TempDir(), b.TempDir()
	var saveT, baseT, dirT time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		res, err := e.Save(ctx, saveRequest(i))
		if err != nil {
			b.Fatal(err)
		}
		saveT += time.Since(start)
		data := mustRead(b, filepath.Join(s.Root(), res.TracePath))
		baseT += writeBaseline(b, baseDir, i, data, false)
		dirT += writeBaseline(b, dirDir, i, data, true)
	}
	b.StopTimer()
	b.ReportMetric(float64(saveT)/float64(b.N)/1e3, "save-us")
	b.ReportMetric(float64(baseT)/float64(b.N)/1e3, "baseline-us")
	b.ReportMetric(float64(saveT)/float64(baseT), "x-baseline")
	b.ReportMetric(float64(saveT)/float64(dirT), "x-baseline-dirsync")
}

// BenchmarkSaveBaseline: write + fsync + rename of a trace's bytes.
func BenchmarkSaveBaseline(b *testing.B) {
	s := newTree(b)
	res, err := engine.New(s).Save(context.Background(), saveRequest(0))
	if err != nil {
		b.Fatal(err)
	}
	d := mustRead(b, filepath.Join(s.Root(), res.TracePath))
	data := make([][]byte, b.N)
	for i := range data {
		data[i] = d
	}
	dir := b.TempDir()
	b.ResetTimer()
	saveBaseline(b, dir, data)
}
