//go:build unix

package main

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pemdev/pem/store/gitrepo"
	"github.com/pemdev/pem/store/treegen"
)

// BenchmarkCheck runs pem check --full on a generated tree with one big file
// (a password= assignment on every 64th line, so the secret scan has matches
// all through it) and reports its time as a ratio of reading every file of
// the tree with os.ReadFile, measured in the same run. The default is a
// 1 MiB file and 5,000 traces; PEM_BENCH_CHECK_FULL=1 gives issue 12's size,
// an 8 MiB file and 100,000 traces (minutes of setup).
func BenchmarkCheck(b *testing.B) {
	ctx := context.Background()
	size, traces := 1<<20, 5_000
	if os.Getenv("PEM_BENCH_CHECK_FULL") != "" {
		size, traces = 8<<20, 100_000
	}
	dir := filepath.Join(b.TempDir(), "knowledge")
	if err := treegen.Generate(ctx, dir, 20, 50, traces, 1); err != nil {
		b.Fatal(err)
	}
	var big strings.Builder
	for i := 0; big.Len() < size; i++ {
		if i%64 == 0 {
			fmt.Fprintf(&big, "password=hunter2secret%07d\n", i)
		} else {
			fmt.Fprintf(&big, "line %07d of an ordinary log some run attached to the tree\n", i)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "attachments.log"), []byte(big.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	if err := gitrepo.Init(ctx, dir); err != nil {
		b.Fatal(err)
	}
	readAll := func() int {
		n := 0
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() && d.Name() == ".git" {
				return err
			}
			if d.Type().IsRegular() {
				data, err := os.ReadFile(p)
				n += len(data)
				return err
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		return n
	}
	// CPU time (user + system) as well as wall time: on a shared machine the
	// load inflates wall time, not CPU time.
	cpu := func() time.Duration {
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	readAll() // both start from a warm page cache
	b.ResetTimer()
	var base, check, baseCPU, checkCPU time.Duration
	for i := 0; i < b.N; i++ {
		t0, c0 := time.Now(), cpu()
		readAll()
		t1, c1 := time.Now(), cpu()
		if code := run(ctx, []string{"pem", "--knowledge", dir, "check", "--full"}, strings.NewReader(""), io.Discard, io.Discard); code != exitInternal {
			b.Fatalf("pem check exit %d, want %d (the big file's secrets)", code, exitInternal)
		}
		base, check = base+t1.Sub(t0), check+time.Since(t1)
		baseCPU, checkCPU = baseCPU+c1-c0, checkCPU+cpu()-c1
	}
	b.ReportMetric(check.Seconds()/float64(b.N), "check-s/op")
	b.ReportMetric(base.Seconds()/float64(b.N), "readfile-s/op")
	b.ReportMetric(float64(check)/float64(base), "check/readfile")
	b.ReportMetric(checkCPU.Seconds()/float64(b.N), "check-cpu-s/op")
	b.ReportMetric(float64(checkCPU)/float64(max(baseCPU, 1)), "check/readfile-cpu")
}
