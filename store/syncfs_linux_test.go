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
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), steps...)
	}
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
	if _, _, err := s.PutBatch(ctx, sites, facts, exps, nil); err != nil {
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
	_, cached, err := s.PutBatch(ctx, sites, facts, exps, nil)
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
	if _, _, err := s.PutBatch(ctx, sites, facts, exps, nil); err != nil {
		t.Fatal(err)
	}
	want = []string{"write -1", "rename 0", "fsync group 0", "rename 1", "fsync group 1", "rename 2", "fsync group 2"}
	if got := steps(); strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Fatalf("steps of a batch of 6 files:\n got %v\nwant %v", got, want)
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
			if _, _, err := s.PutBatch(ctx, sites, facts, exps, nil); err != nil {
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
			_, cached, err := s.PutBatch(ctx, sites, facts, exps, nil)
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
			if _, _, err := s.PutBatch(ctx, sites, facts, exps, nil); err != nil {
				t.Fatal(err)
			}
			if got := steps(); got[1] != "rename 0" || got[2] != "fsync group 0" {
				t.Fatalf("the next batch of the Store tried syncfs again: %v", got)
			}
		})
	}
}
