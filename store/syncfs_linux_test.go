package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pemdev/pem/engine"
	"golang.org/x/sys/unix"
)

// syncBatch is a PutBatch of n site entries, n facts and n experience
// records (one domain each), version v of each.
func syncBatch(n, v int) ([]*engine.Site, []*engine.Facts, []*engine.Experience) {
	var sites []*engine.Site
	var facts []*engine.Facts
	var exps []*engine.Experience
	for i := 0; i < n; i++ {
		d := fmt.Sprintf("d%03d.example", i)
		sites = append(sites, &engine.Site{Format: engine.Format, Domain: d, Notes: []engine.SiteNote{{Kind: engine.NoteAntiPattern,
			Selector: fmt.Sprintf("#v%d", v), Intents: []string{"k"}, Traces: []string{"01JNXCDFG0CPYQ18HXM016PSGG"}, LastSeen: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}}})
		facts = append(facts, &engine.Facts{Format: 1, Domain: d, Intent: "k", IntentKey: "k", Status: engine.Candidate, ExtractionQuery: fmt.Sprintf("q v%d", v)})
		exps = append(exps, &engine.Experience{Format: 1, Domain: d, Intent: "k", IntentKey: "k", Attempts: v, Successes: v})
	}
	return sites, facts, exps
}

// batchSteps records the steps of batches (batchFault) while the test runs;
// fail, if not nil, may fail one.
func batchSteps(t *testing.T, fail func(step string, group int) error) func() []string {
	var mu sync.Mutex
	var steps []string
	batchFault = func(step string, group int) error {
		mu.Lock()
		if n := len(steps); step == "write" || step == "rename" || step == "fsync temps" || step == "fsync group" {
			// one entry for a run of the same step (they run many at once)
			if n == 0 || steps[n-1] != fmt.Sprint(step, " ", group) {
				steps = append(steps, fmt.Sprint(step, " ", group))
			}
		} else {
			steps = append(steps, fmt.Sprint(step, " ", group))
		}
		mu.Unlock()
		if fail != nil {
			return fail(step, group)
		}
		return nil
	}
	t.Cleanup(func() { batchFault = nil })
	cleanMachine(t)
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), steps...)
	}
}

// cleanMachine stands in for /proc/meminfo while t runs: nothing dirty
// (other processes' writes must not change which path a test sees).
func cleanMachine(t testing.TB) {
	real := dirtyBytes
	dirtyBytes = func() (int64, error) { return 0, nil }
	t.Cleanup(func() { dirtyBytes = real })
}

// version reads which version (syncBatch's v) the files of group g hold:
// -1 where one is missing; it fails the test when the group is mixed.
func version(t *testing.T, s *Store, g, n int) int {
	t.Helper()
	got := map[int]bool{}
	for i := 0; i < n; i++ {
		d := fmt.Sprintf("d%03d.example", i)
		rel := []string{SitePath(d), FactsPath(d, "k"), ExperiencePath(d, "k")}[g]
		data, err := os.ReadFile(filepath.Join(s.Root(), rel))
		if errors.Is(err, fs.ErrNotExist) {
			got[-1] = true
			continue
		}
		for v := 1; v <= 3; v++ {
			mark := [][]byte{fmt.Appendf(nil, "#v%d", v), fmt.Appendf(nil, "q v%d", v), fmt.Appendf(nil, "attempts: %d", v)}[g]
			if bytes.Contains(data, mark) {
				got[v] = true
			}
		}
	}
	if len(got) != 1 {
		t.Fatalf("group %d holds versions %v at once", g, got)
	}
	for v := range got {
		return v
	}
	return 0
}

func noTemps(t *testing.T, s *Store) {
	t.Helper()
	var left []string
	filepath.WalkDir(s.Root(), func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".tmp") {
			left = append(left, p)
		}
		return nil
	})
	if len(left) > 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

// TestBatchSyncFS: a batch of at least syncFSMin changed files flushes its
// temporary files with one syncfs, then each group's renames with one more,
// in order — when the syncfs after the site entries runs they are all in
// place and no facts file has changed, and the experience only after the
// facts' syncfs — with no fsync per file; a small batch keeps the fsyncs.
func TestBatchSyncFS(t *testing.T) {
	ctx := context.Background()
	s := testStore(t, nil)
	n := syncFSMin/3 + 1
	sites, facts, exps := syncBatch(n, 1)
	_, cached, err := s.PutBatch(ctx, sites, facts, exps, nil)
	cached()
	if err != nil {
		t.Fatal(err)
	}
	sites, facts, exps = syncBatch(n, 2)
	seen := map[int][3]int{}
	steps := batchSteps(t, func(step string, g int) error {
		if step == "syncfs group" {
			seen[g] = [3]int{version(t, s, 0, n), version(t, s, 1, n), version(t, s, 2, n)}
		}
		return nil
	})
	_, cached, err = s.PutBatch(ctx, sites, facts, exps, nil)
	cached()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"write -1", "syncfs temps -1", "rename 0", "syncfs group 0", "rename 1", "syncfs group 1", "rename 2", "syncfs group 2"}
	if got := steps(); strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Fatalf("steps of a batch of %d files:\n got %v\nwant %v", 3*n, got, want)
	}
	if seen[0] != [3]int{2, 1, 1} || seen[1] != [3]int{2, 2, 1} || seen[2] != [3]int{2, 2, 2} {
		t.Fatalf("versions of sites, facts, experience at each group's syncfs: %v (want 2,1,1 then 2,2,1 then 2,2,2)", seen)
	}
	noTemps(t, s)

	// A small batch: an fsync per temporary file and per directory.
	steps = batchSteps(t, nil)
	sites, facts, exps = syncBatch(2, 3)
	_, cached, err = s.PutBatch(ctx, sites, facts, exps, nil)
	cached()
	if err != nil {
		t.Fatal(err)
	}
	want = []string{"write -1", "rename 0", "fsync group 0", "rename 1", "fsync group 1", "rename 2", "fsync group 2"}
	if got := steps(); strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Fatalf("steps of a batch of 6 files:\n got %v\nwant %v", got, want)
	}
}

// TestBatchSyncFSDirty: with more than syncFSMaxDirty of the machine's
// page cache dirty, or /proc/meminfo unreadable, a large batch takes the
// fsync path (syncfs would first write all of that back); parseDirty reads
// this machine's /proc/meminfo.
func TestBatchSyncFSDirty(t *testing.T) {
	if _, err := dirtyBytes(); err != nil {
		t.Fatalf("reading this machine's /proc/meminfo: %v", err)
	}
	n, err := parseDirty([]byte("MemTotal:       24683584 kB\nDirty:             79068 kB\nWriteback:           100 kB\nWritebackTmp:          7 kB\n"))
	if err != nil || n != (79068+100)<<10 {
		t.Fatalf("parseDirty: %d, %v", n, err)
	}
	if _, err := parseDirty([]byte("Dirty: 12 kB\n")); err == nil {
		t.Fatal("parseDirty without a Writeback line: no error")
	}
	ctx := context.Background()
	s := testStore(t, nil)
	k := syncFSMin/3 + 1
	for i, dirty := range []func() (int64, error){
		func() (int64, error) { return syncFSMaxDirty, nil },
		func() (int64, error) { return 0, errors.New("no /proc") },
	} {
		steps := batchSteps(t, nil)
		dirtyBytes = dirty
		sites, facts, exps := syncBatch(k, i+1)
		_, cached, err := s.PutBatch(ctx, sites, facts, exps, nil)
		cached()
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range steps() {
			if strings.HasPrefix(st, "syncfs") {
				t.Fatalf("case %d: a batch of %d files took syncfs on a dirty machine: %v", i, 3*k, steps())
			}
		}
	}
}

// TestBatchSyncFSFailures: on the syncfs path, a failed temporary write or
// a failed first syncfs places nothing; a failed syncfs after the facts'
// renames leaves the site entries and facts placed and the experience
// untouched; no temporary file is left either way. A syncfs that is
// unavailable (ENOSYS) falls back to fsyncs, and the Store keeps to them.
func TestBatchSyncFSFailures(t *testing.T) {
	ctx := context.Background()
	n := syncFSMin/3 + 1
	boom := errors.New("injected")
	for _, tc := range []struct {
		name    string
		fail    func(step string, g int, calls int) error
		want    [3]int // versions after the failed batch
		wantErr bool
	}{
		{"the 100th temporary write", func(step string, g, calls int) error {
			if step == "write" && calls == 100 {
				return boom
			}
			return nil
		}, [3]int{1, 1, 1}, true},
		{"the syncfs of the temporary files", func(step string, g, _ int) error {
			if step == "syncfs temps" {
				return &fs.PathError{Op: "syncfs", Path: ".", Err: unix.EIO}
			}
			return nil
		}, [3]int{1, 1, 1}, true},
		{"the syncfs of the facts' renames", func(step string, g, _ int) error {
			if step == "syncfs group" && g == 1 {
				return &fs.PathError{Op: "syncfs", Path: ".", Err: unix.EIO}
			}
			return nil
		}, [3]int{2, 2, 1}, true},
		{"syncfs unavailable", func(step string, g, _ int) error {
			if step == "syncfs temps" {
				return &fs.PathError{Op: "syncfs", Path: ".", Err: errors.Join(errSyncFSUnavailable, unix.ENOSYS)}
			}
			return nil
		}, [3]int{2, 2, 2}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := testStore(t, nil)
			sites, facts, exps := syncBatch(n, 1)
			_, cached, err := s.PutBatch(ctx, sites, facts, exps, nil)
			cached()
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			calls := map[string]int{}
			steps := batchSteps(t, func(step string, g int) error {
				mu.Lock()
				calls[step]++
				c := calls[step]
				mu.Unlock()
				return tc.fail(step, g, c)
			})
			sites, facts, exps = syncBatch(n, 2)
			_, cached, err = s.PutBatch(ctx, sites, facts, exps, nil)
			cached()
			if (err != nil) != tc.wantErr || tc.wantErr && !errors.Is(err, boom) && !errors.Is(err, unix.EIO) {
				t.Fatalf("PutBatch: %v (want an error: %v)", err, tc.wantErr)
			}
			got := [3]int{version(t, s, 0, n), version(t, s, 1, n), version(t, s, 2, n)}
			if got != tc.want {
				t.Fatalf("versions of sites, facts, experience after the batch: %v, want %v (steps %v)", got, tc.want, steps())
			}
			noTemps(t, s)
			if tc.wantErr {
				return
			}
			want := []string{"write -1", "syncfs temps -1", "fsync temps -1", "rename 0", "fsync group 0", "rename 1", "fsync group 1", "rename 2", "fsync group 2"}
			if got := steps(); strings.Join(got, ", ") != strings.Join(want, ", ") {
				t.Fatalf("steps when syncfs is unavailable:\n got %v\nwant %v", got, want)
			}
			steps = batchSteps(t, nil)
			sites, facts, exps = syncBatch(n, 3)
			_, cached, err = s.PutBatch(ctx, sites, facts, exps, nil)
			cached()
			if err != nil {
				t.Fatal(err)
			}
			if got := steps(); got[1] != "rename 0" || got[2] != "fsync group 0" {
				t.Fatalf("the next batch of the Store tried syncfs again: %v", got)
			}
		})
	}
}

// BenchmarkBatchDurable: a consolidation-sized PutBatch (n site entries,
// facts and experience records, every one changed), made durable by syncfs
// and by fsyncs, the two alternated within each iteration (the same tree,
// the same versions' sizes); ms/syncfs and ms/fsync are the batch's wall
// until PutBatch returns (its decoded cache waited for untimed). dirty-MB:
// that many MB written to another file of the same file system without an
// fsync before each batch — other processes' dirty data, which syncfs
// flushes too. PEM_BENCH_BATCH sets n (default 1,000: 3,000 files).
func BenchmarkBatchDurable(b *testing.B) {
	n := 1000
	if v := os.Getenv("PEM_BENCH_BATCH"); v != "" {
		fmt.Sscan(v, &n)
	}
	for _, dirtyMB := range []int{0, 256} {
		b.Run(fmt.Sprintf("dirty-MB=%d", dirtyMB), func(b *testing.B) {
			ctx := context.Background()
			dir := b.TempDir()
			if _, err := Init(ctx, dir); err != nil {
				b.Fatal(err)
			}
			junk := make([]byte, 1<<20)
			for i := range junk {
				junk[i] = byte(i * 7)
			}
			dirty := func() {
				if dirtyMB == 0 {
					return
				}
				f, err := os.Create(filepath.Join(b.TempDir(), "dirty"))
				if err != nil {
					b.Fatal(err)
				}
				for i := 0; i < dirtyMB; i++ {
					f.Write(junk)
				}
				f.Close()
			}
			cleanMachine(b)
			v := 1
			batch := func(s *Store) time.Duration {
				v++
				sites, facts, exps := syncBatch(n, v)
				dirty()
				t0 := time.Now()
				_, cached, err := s.PutBatch(ctx, sites, facts, exps, nil)
				d := time.Since(t0)
				cached()
				if err != nil {
					b.Fatal(err)
				}
				return d
			}
			s, err := Open(dir, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			batch(s)
			var tSync, tFsync time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				s.noSyncFS.Store(false)
				tSync += batch(s)
				s.noSyncFS.Store(true)
				tFsync += batch(s)
			}
			b.ReportMetric(float64(tSync.Microseconds())/1e3/float64(b.N), "ms/syncfs")
			b.ReportMetric(float64(tFsync.Microseconds())/1e3/float64(b.N), "ms/fsync")
		})
	}
}
