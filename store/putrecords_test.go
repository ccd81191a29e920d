package store

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pemdev/pem/engine"
)

// TestPutRecordsBatch: a batch writes the same canonical bytes as PutFacts
// and PutExperience, leaves unchanged files alone (bytes and mtime), leaves
// no temporary file, is seen by reads at once, and refuses a symlinked
// directory without writing through it.
func TestPutRecordsBatch(t *testing.T) {
	ctx := context.Background()
	s := testStore(t, nil)
	var facts []*engine.Facts
	var exps []*engine.Experience
	for _, d := range []string{"a.example", "b.example"} {
		for _, k := range []string{"one", "two", "three"} {
			facts = append(facts, &engine.Facts{Format: 1, Domain: d, Intent: k, IntentKey: k, Status: engine.Candidate, ExtractionQuery: "q " + k})
			exps = append(exps, &engine.Experience{Format: 1, Domain: d, Intent: k, IntentKey: k, Attempts: 1, Successes: 1})
		}
	}
	var placed []string
	paths, err := s.PutRecords(ctx, facts, exps, func(rel string) { placed = append(placed, rel) })
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 12 || len(placed) != 12 {
		t.Fatalf("paths %v, placed %v", paths, placed)
	}
	for i, p := range placed {
		if isFacts := filepath.Dir(filepath.Dir(p)) == "facts"; isFacts != (i < 6) {
			t.Fatalf("placed order %v: every facts file must be in place before any experience file", placed)
		}
	}
	for i, f := range facts {
		want, _ := Marshal(f)
		got, err := os.ReadFile(filepath.Join(s.Root(), FactsPath(f.Domain, f.IntentKey)))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("facts %d: %v\n%s", i, err, got)
		}
		back, err := s.Experience(ctx, exps[i].Domain, exps[i].IntentKey)
		if err != nil || back.Attempts != 1 {
			t.Fatalf("experience %d read back: %+v, %v", i, back, err)
		}
	}
	tmps, _ := filepath.Glob(filepath.Join(s.Root(), "*", "*", ".*.tmp"))
	if len(tmps) > 0 {
		t.Fatalf("temporary files left: %v", tmps)
	}

	// Unchanged records: nothing placed, mtimes kept; one change: one file.
	old := time.Now().Add(-time.Hour)
	for _, p := range paths {
		os.Chtimes(filepath.Join(s.Root(), p), old, old)
	}
	exps[4].Attempts = 2
	placed = nil
	if _, err := s.PutRecords(ctx, facts, exps, func(rel string) { placed = append(placed, rel) }); err != nil {
		t.Fatal(err)
	}
	if want := ExperiencePath(exps[4].Domain, exps[4].IntentKey); len(placed) != 1 || placed[0] != want {
		t.Fatalf("placed %v, want only %s", placed, want)
	}
	for _, p := range paths {
		fi, _ := os.Stat(filepath.Join(s.Root(), p))
		if changed := !fi.ModTime().Equal(old); changed != (p == placed[0]) {
			t.Fatalf("%s: mtime changed = %v", p, changed)
		}
	}
	if x, _ := s.Experience(ctx, exps[4].Domain, exps[4].IntentKey); x.Attempts != 2 {
		t.Fatalf("the store served a stale record after the batch: %d attempts", x.Attempts)
	}

	// A symlinked directory is refused and nothing goes through it.
	real := filepath.Join(s.Root(), "experience", "real.example")
	os.MkdirAll(real, 0o755)
	if err := os.Symlink(real, filepath.Join(s.Root(), "experience", "link.example")); err != nil {
		t.Fatal(err)
	}
	_, err = s.PutRecords(ctx, nil, []*engine.Experience{{Format: 1, Domain: "link.example", IntentKey: "k"}}, nil)
	if !errors.Is(err, engine.ErrUnsafePath) {
		t.Fatalf("batch into a symlinked dir: %v", err)
	}
	if ents, _ := os.ReadDir(real); len(ents) != 0 {
		t.Fatalf("written through the link: %v", ents)
	}
}
