package store

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
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

// TestPutBatch: sites, facts and experience in one batch are placed in that
// order (every site entry before any facts file, every facts file before
// any experience file), with the bytes PutSite and PutRecords write; the
// decoded cache of the experience is there once cached returns; a batch
// with one record over its cap places nothing.
func TestPutBatch(t *testing.T) {
	ctx := context.Background()
	s := testStore(t, nil)
	one := testStore(t, nil)
	var sites []*engine.Site
	var facts []*engine.Facts
	var exps []*engine.Experience
	for _, d := range []string{"a.example", "b.example", "c.example"} {
		sites = append(sites, &engine.Site{Format: engine.Format, Domain: d, Notes: []engine.SiteNote{{Kind: engine.NoteAntiPattern, Selector: "#x", Intents: []string{"one"},
			Traces: []string{"01JNXCDFG0CPYQ18HXM016PSGG"}, LastSeen: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}}})
		for _, k := range []string{"one", "two"} {
			facts = append(facts, &engine.Facts{Format: 1, Domain: d, Intent: k, IntentKey: k, Status: engine.Candidate, ExtractionQuery: "q " + k})
			exps = append(exps, &engine.Experience{Format: 1, Domain: d, Intent: k, IntentKey: k, Attempts: 1, Successes: 1})
		}
	}
	var placed []string
	rels, cached, err := s.PutBatch(ctx, sites, facts, exps, func(rel string) { placed = append(placed, rel) })
	cached()
	if err != nil || len(rels) != 15 || len(placed) != 15 {
		t.Fatalf("PutBatch: %v, paths %v, placed %v", err, rels, placed)
	}
	for i, p := range placed {
		want := "experience/"
		if i < 9 {
			want = "facts/"
		}
		if i < 3 && p != SitePath(sites[i].Domain) || i >= 3 && !strings.HasPrefix(p, want) {
			t.Fatalf("placed order %v: sites, then facts, then experience", placed)
		}
	}
	if _, err := one.PutSites(ctx, sites, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := one.PutRecords(ctx, facts, exps, nil); err != nil {
		t.Fatal(err)
	}
	for _, rel := range rels {
		a, _ := os.ReadFile(filepath.Join(s.Root(), rel))
		b, _ := os.ReadFile(filepath.Join(one.Root(), rel))
		if len(a) == 0 || !bytes.Equal(a, b) {
			t.Fatalf("%s: PutBatch wrote\n%s\nPutSites and PutRecords write\n%s", rel, a, b)
		}
	}
	for _, x := range exps {
		if _, err := os.Stat(filepath.Join(s.Root(), filepath.FromSlash(decodedPath(ExperiencePath(x.Domain, x.IntentKey))))); err != nil {
			t.Fatalf("no decoded cache for %s/%s after cached(): %v", x.Domain, x.IntentKey, err)
		}
	}

	// One experience over the cap: an error, and nothing placed.
	sites[0].Notes[0].Selector, facts[0].ExtractionQuery = "#changed", "changed"
	big := *exps[5]
	big.Intent = strings.Repeat("x", MaxBytes(KindExperience))
	placed = nil
	_, cached, err = s.PutBatch(ctx, sites, facts, append(exps[:5:5], &big), func(rel string) { placed = append(placed, rel) })
	cached()
	if !errors.Is(err, engine.ErrTooLarge) || len(placed) != 0 {
		t.Fatalf("a batch with a record over its cap: %v, placed %v (want ErrTooLarge, nothing placed)", err, placed)
	}
	if got, _ := os.ReadFile(filepath.Join(s.Root(), rels[0])); bytes.Contains(got, []byte("#changed")) {
		t.Fatalf("a failed batch changed the site entry:\n%s", got)
	}
}
