package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/engine/clonetest"
)

// TestCloneIsDeep fails when a field is added to a record type without
// being copied in copy.go.
func TestCloneIsDeep(t *testing.T) {
	for _, tc := range []struct {
		name  string
		orig  any
		clone func(any) any
	}{
		{"Trace", new(engine.Trace), func(v any) any { return v.(*engine.Trace).Clone() }},
		{"Facts", new(engine.Facts), func(v any) any { return v.(*engine.Facts).Clone() }},
		{"Experience", new(engine.Experience), func(v any) any { return v.(*engine.Experience).Clone() }},
	} {
		clonetest.Fill(reflect.ValueOf(tc.orig).Elem(), false)
		c := tc.clone(tc.orig)
		if !reflect.DeepEqual(c, tc.orig) {
			t.Errorf("%s: the clone differs from the original", tc.name)
		}
		if p := clonetest.Shared(reflect.ValueOf(tc.orig).Elem(), reflect.ValueOf(c).Elem(), tc.name, false); p != "" {
			t.Errorf("clone%s shares %s with the original: copy it in copy.go", tc.name, p)
		}
	}
}

func testStore(t *testing.T, now func() time.Time) *Store {
	t.Helper()
	dir := t.TempDir()
	if _, err := Init(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir, &Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestCacheSeesEveryChange: with a clock that trusts every file (an hour
// ahead), cached records are still re-read after an edit in place of the
// same size with the old mtime restored, after a replace by rename, and
// after a delete.
func TestCacheSeesEveryChange(t *testing.T) {
	ctx := context.Background()
	s := testStore(t, func() time.Time { return time.Now().Add(time.Hour) })
	f := &engine.Facts{Format: 1, Domain: "example.com", Intent: "stars", IntentKey: "stars", Status: engine.Candidate, ExtractionQuery: "aaaa"}
	rel, err := s.PutFacts(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	read := func() string {
		t.Helper()
		got, err := s.Facts(ctx, "example.com", "stars")
		if err != nil {
			t.Fatal(err)
		}
		return got.ExtractionQuery
	}
	if read() != "aaaa" || read() != "aaaa" {
		t.Fatal("first reads")
	}
	if s.records.len() != 1 {
		t.Fatalf("the record is not cached (%d entries)", s.records.len())
	}
	p := filepath.Join(s.Root(), rel)
	fi, _ := os.Stat(p)
	data, _ := os.ReadFile(p)
	// In place, same size, mtime put back: only ctime tells.
	data2 := []byte(string(data[:len(data)-5]) + "bbbb\n")
	if err := os.WriteFile(p, data2, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != "bbbb" {
		t.Errorf("after an edit in place: %q, want bbbb", got)
	}
	// Replaced by rename.
	data3 := []byte(string(data[:len(data)-5]) + "cccc\n")
	if err := os.WriteFile(p+".new", data3, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p+".new", p); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != "cccc" {
		t.Errorf("after a rename: %q, want cccc", got)
	}
	// Listing caches see new and removed files.
	keys, _ := s.FactsKeys(ctx, "example.com")
	if err := os.WriteFile(filepath.Join(s.Root(), "facts", "example.com", "forks.yaml"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	keys2, _ := s.FactsKeys(ctx, "example.com")
	if len(keys) != 1 || len(keys2) != 2 {
		t.Errorf("FactsKeys before/after adding a file: %v / %v", keys, keys2)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Facts(ctx, "example.com", "stars"); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("after a delete: err = %v, want ErrNotFound", err)
	}
}

// TestRacyFilesNotCached: a file that changed within racyWindow of the read
// is not cached, since a second change in the same clock tick could keep its
// identity.
func TestRacyFilesNotCached(t *testing.T) {
	ctx := context.Background()
	s := testStore(t, time.Now)
	f := &engine.Facts{Format: 1, Domain: "example.com", Intent: "stars", IntentKey: "stars", Status: engine.Candidate}
	if _, err := s.PutFacts(ctx, f); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Facts(ctx, "example.com", "stars"); err != nil {
		t.Fatal(err)
	}
	if n := s.records.len(); n != 0 {
		t.Errorf("a file written just now was cached (%d entries)", n)
	}
}

func TestSymlinksRefused(t *testing.T) {
	ctx := context.Background()
	s := testStore(t, nil)
	outside := t.TempDir()
	secret := filepath.Join(outside, "stars.yaml")
	if err := os.WriteFile(secret, []byte("format: 1\ndomain: example.com\nintent: s\nintent_key: stars\nstatus: candidate\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	root := s.Root()
	// A symlinked file.
	if err := os.MkdirAll(filepath.Join(root, "facts", "example.com"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(root, "facts", "example.com", "stars.yaml")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Facts(ctx, "example.com", "stars"); !errors.Is(err, engine.ErrUnsafePath) {
		t.Errorf("Facts through a symlinked file: err = %v, want ErrUnsafePath", err)
	}
	if _, err := s.PutFacts(ctx, &engine.Facts{Format: 1, Domain: "example.com", IntentKey: "stars", Status: engine.Candidate}); !errors.Is(err, engine.ErrUnsafePath) {
		t.Errorf("PutFacts over a symlink: err = %v, want ErrUnsafePath", err)
	}
	// A symlinked directory (pointing inside the tree, which os.Root alone would allow).
	if err := os.MkdirAll(filepath.Join(root, "experience", "real.example"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "experience", "real.example"), filepath.Join(root, "experience", "link.example")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutExperience(ctx, &engine.Experience{Format: 1, Domain: "link.example", IntentKey: "stars"}); !errors.Is(err, engine.ErrUnsafePath) {
		t.Errorf("PutExperience into a symlinked dir: err = %v, want ErrUnsafePath", err)
	}
	if ents, _ := os.ReadDir(filepath.Join(root, "experience", "real.example")); len(ents) != 0 {
		t.Errorf("a write went through the symlink: %v", ents)
	}
	if _, err := s.ExperienceKeys(ctx, "link.example"); !errors.Is(err, engine.ErrUnsafePath) {
		t.Errorf("ExperienceKeys of a symlinked dir: err = %v, want ErrUnsafePath", err)
	}
	// A symlink escaping the tree.
	if err := os.Symlink(outside, filepath.Join(root, "traces", "evil.example")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TraceRefs(ctx, "evil.example"); !errors.Is(err, engine.ErrUnsafePath) {
		t.Errorf("TraceRefs of a symlinked dir: err = %v, want ErrUnsafePath", err)
	}
	ds, err := s.Domains(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		if d == "evil.example" || d == "link.example" {
			t.Errorf("Domains lists the symlink %s", d)
		}
	}
	errs := s.Check(ctx)
	if len(errs) != 3 {
		t.Errorf("Check found %d problems, want the 3 symlinks: %v", len(errs), errs)
	}
	for _, err := range errs {
		if !errors.Is(err, engine.ErrUnsafePath) {
			t.Errorf("Check: %v, want ErrUnsafePath", err)
		}
	}
}

func TestReservedNames(t *testing.T) {
	for _, n := range []string{".git", ".GIT", ".git.yaml", "con", "CON", "con.txt", "Nul.yaml", "aux", "prn.x", "com1", "COM9.a", "lpt1", "LPT9"} {
		if !reservedName(n) {
			t.Errorf("reservedName(%q) = false", n)
		}
	}
	for _, n := range []string{"git", ".gitx", "com", "com0", "com10", "lpt", "console", "nullable", "auxiliary", "example.com"} {
		if reservedName(n) {
			t.Errorf("reservedName(%q) = true", n)
		}
	}
}

// TestRevalidate: with Options.Revalidate, another process's change is seen
// once the window has passed; this Store's own writes are seen at once.
func TestRevalidate(t *testing.T) {
	ctx := context.Background()
	clock := time.Now().Add(time.Hour) // every file is old enough to cache
	dir := t.TempDir()
	if _, err := Init(ctx, dir); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir, &Options{Now: func() time.Time { return clock }, Revalidate: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	f := &engine.Facts{Format: 1, Domain: "example.com", Intent: "stars", IntentKey: "stars", Status: engine.Candidate, ExtractionQuery: "aaaa"}
	rel, err := s.PutFacts(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	query := func() string {
		t.Helper()
		got, err := s.Facts(ctx, "example.com", "stars")
		if err != nil {
			t.Fatal(err)
		}
		return got.ExtractionQuery
	}
	if query() != "aaaa" {
		t.Fatal("first read")
	}
	// Another writer replaces the file.
	p := filepath.Join(dir, rel)
	data, _ := os.ReadFile(p)
	if err := os.WriteFile(p, []byte(string(data[:len(data)-5])+"bbbb\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := query(); got != "aaaa" {
		t.Errorf("within the window: %q, want the cached aaaa", got)
	}
	clock = clock.Add(1100 * time.Millisecond)
	if got := query(); got != "bbbb" {
		t.Errorf("after the window: %q, want bbbb", got)
	}
	// Our own write is seen at once.
	cur, _ := s.Facts(ctx, "example.com", "stars")
	cur.ExtractionQuery = "cccc"
	if _, err := s.PutFacts(ctx, cur); err != nil {
		t.Fatal(err)
	}
	if got := query(); got != "cccc" {
		t.Errorf("after our own write: %q, want cccc", got)
	}
}
