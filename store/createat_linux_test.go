//go:build linux

package store

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pemdev/pem/engine"
)

func stepTrace(t *testing.T, at time.Time) *engine.Trace {
	t.Helper()
	return domainTrace(t, "example.com", at)
}

func domainTrace(t *testing.T, domain string, at time.Time) *engine.Trace {
	t.Helper()
	id, err := engine.NewTraceID(at, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &engine.Trace{Format: 1, ID: id, Domain: domain, URL: "https://" + domain + "/", Intent: "find the price",
		IntentKey: engine.IntentKey("find the price"), StartedAt: at, Outcome: engine.Success,
		Steps: []engine.Step{{Seq: 1, Action: "navigate", URL: "https://" + domain + "/"}}}
}

// recordSteps makes createAt report each step it takes to steps, and fail
// the one named fail (if any) with the error it returns. The hook is
// package-wide: a test that sets it must not run in parallel.
func recordSteps(t *testing.T, steps *[]string, fail string) error {
	injected := errors.New("injected failure of " + fail)
	createAtFault = func(step string) error {
		*steps = append(*steps, step)
		if step == fail {
			return injected
		}
		return nil
	}
	t.Cleanup(func() { createAtFault = nil })
	return injected
}

// tmpLeft lists the temporary files left in a trace's day directory.
func tmpLeft(t *testing.T, s *Store, rel string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(s.Root(), filepath.FromSlash(filepath.Dir(rel))))
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			left = append(left, e.Name())
		}
	}
	return left
}

// complete fails unless the trace is under its final name, whole.
func complete(t *testing.T, s *Store, rel string, tr *engine.Trace) {
	t.Helper()
	want, err := Marshal(tr)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(s.Root(), filepath.FromSlash(rel)))
	if err != nil {
		t.Fatalf("after the save: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s holds %d bytes, not the %d of the trace", rel, len(got), len(want))
	}
	if left := tmpLeft(t, s, rel); len(left) > 0 {
		t.Errorf("temporary files left beside %s: %v", rel, left)
	}
}

// A save links the file to its name before the file's fsync (one journal
// commit for the data and the name), after the data's writes completed
// (sync_file_range), and fsyncs the directory after, and the domain
// directory last when the day directory is new (and the traces directory
// after it when the domain is new too); the trace is whole under its name,
// no temporary file is left.
func TestCreateAtOrder(t *testing.T) {
	ctx := context.Background()
	s := testStore(t, nil)
	day := time.Date(2025, 5, 1, 12, 0, 0, 0, time.UTC)
	if _, err := s.PutTrace(ctx, stepTrace(t, day)); err != nil { // creates the domain directory
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, domain string
		at           time.Time
		want         []string
	}{
		{"into an existing day directory", "example.com", day.Add(time.Hour), []string{"write", "sync_file_range", "link", "fsync", "fsync dir"}},
		{"the first of a day", "example.com", day.Add(48 * time.Hour), []string{"write", "sync_file_range", "link", "fsync", "fsync dir", "fsync parent"}},
		{"the first of a domain", "new.example", day, []string{"write", "sync_file_range", "link", "fsync", "fsync dir", "fsync parent", "fsync parent"}},
	} {
		var steps []string
		recordSteps(t, &steps, "")
		tr := domainTrace(t, tc.domain, tc.at)
		rel, err := s.PutTrace(ctx, tr)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !slices.Equal(steps, tc.want) {
			t.Errorf("%s: steps %v, want %v", tc.name, steps, tc.want)
		}
		complete(t, s, rel, tr)
	}
}

// A failure at each step of a save (the first of a day, so every step is
// taken) leaves nothing under the trace's name and no temporary file, or
// is reported with the error; a file system without sync_file_range gets
// the old order (fsync before the link) and a whole trace.
func TestCreateAtFailureAtEachStep(t *testing.T) {
	ctx := context.Background()
	s := testStore(t, nil)
	day := time.Date(2025, 5, 1, 12, 0, 0, 0, time.UTC)
	if _, err := s.PutTrace(ctx, stepTrace(t, day)); err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		fail  string
		saved bool     // PutTrace succeeds
		named bool     // the name exists after the failure (which is reported)
		want  []string // the steps taken
	}{
		{"write", false, false, []string{"write", "fsync parent"}},
		{"sync_file_range", true, true, []string{"write", "sync_file_range", "fsync", "link", "fsync dir", "fsync parent"}},
		{"link", false, false, []string{"write", "sync_file_range", "link", "fsync parent"}},
		{"fsync", false, false, []string{"write", "sync_file_range", "link", "fsync", "fsync parent"}},
		{"fsync dir", false, true, []string{"write", "sync_file_range", "link", "fsync", "fsync dir", "fsync parent"}},
		{"fsync parent", false, true, []string{"write", "sync_file_range", "link", "fsync", "fsync dir", "fsync parent"}},
	} {
		var steps []string
		injected := recordSteps(t, &steps, tc.fail)
		tr := stepTrace(t, day.Add(time.Duration(i+1)*24*time.Hour))
		rel := TracePath(RefOf(tr))
		_, err := s.PutTrace(ctx, tr)
		switch {
		case tc.saved && err != nil:
			t.Errorf("%s failing: %v, want the save to succeed", tc.fail, err)
		case !tc.saved && !errors.Is(err, injected):
			t.Errorf("%s failing: err = %v, want the injected failure", tc.fail, err)
		case !tc.saved && !strings.Contains(err.Error(), "example.com/"):
			t.Errorf("%s failing: %q does not name the file or directory", tc.fail, err)
		}
		if !slices.Equal(steps, tc.want) {
			t.Errorf("%s failing: steps %v, want %v", tc.fail, steps, tc.want)
		}
		if tc.named {
			complete(t, s, rel, tr)
			continue
		}
		if _, err := os.Lstat(filepath.Join(s.Root(), filepath.FromSlash(rel))); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s failing: %s is there (%v), want nothing under the name", tc.fail, rel, err)
		}
		if left := tmpLeft(t, s, rel); len(left) > 0 {
			t.Errorf("%s failing: temporary files left: %v", tc.fail, left)
		}
	}
	createAtFault = nil
	for _, err := range s.Check(ctx) {
		t.Errorf("Check after the failures: %v", err)
	}
}
