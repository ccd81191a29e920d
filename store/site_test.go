package store_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store"
)

func siteOf(domain string, notes ...engine.SiteNote) *engine.Site {
	return &engine.Site{Format: engine.Format, Domain: domain, Notes: notes}
}

func note(sel string, intents ...string) engine.SiteNote {
	return engine.SiteNote{Kind: engine.NoteAntiPattern, Selector: sel, Intents: intents, Traces: []string{"01JNXCDFG0CPYQ18HXM016PSGG"},
		LastSeen: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
}

// TestSiteEntry: the site entry is read and written like a record, never
// listed as an intent, placed as KindSite, checked by Check, described by
// pem log and joined by the merge driver.
func TestSiteEntry(t *testing.T) {
	ctx := context.Background()
	st := openTree(t)
	dir := st.Root()
	if _, err := st.Site(ctx, "github.com"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("missing site: %v", err)
	}
	s := siteOf("github.com", note("#a", "x", "y"))
	rel, err := st.PutSite(ctx, s)
	if err != nil || rel != "facts/github.com/_site.yaml" {
		t.Fatalf("PutSite: %q %v", rel, err)
	}
	got, err := st.Site(ctx, "github.com")
	if err != nil || !got.Equal(s) {
		t.Fatalf("read back %+v, %v", got, err)
	}
	if keys, err := st.FactsKeys(ctx, "github.com"); err != nil || len(keys) != 0 {
		t.Fatalf("facts keys %v %v: the site entry is no intent", keys, err)
	}
	if errs := st.Check(ctx); len(errs) != 0 {
		t.Fatalf("Check: %v", errs)
	}
	if _, err := st.PutSite(ctx, siteOf("../x")); !errors.Is(err, engine.ErrUnsafePath) {
		t.Fatalf("unsafe domain: %v", err)
	}
	if pl := store.PlaceOf(rel); pl.Kind != store.KindSite || pl.Domain != "github.com" || pl.Key != "" {
		t.Fatalf("PlaceOf: %+v", pl)
	}
	data, _ := os.ReadFile(filepath.Join(dir, rel))
	if d := store.Describe(rel, func(int) ([]byte, error) { return data, nil }); !strings.HasPrefix(d, "site entry: 1 note(s), 1 served") {
		t.Fatalf("Describe: %q", d)
	}
	// A site file naming another domain is corrupt.
	if err := os.WriteFile(filepath.Join(dir, rel), []byte(strings.Replace(string(data), "domain: github.com", "domain: gitlab.com", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if errs := st.Check(ctx); len(errs) != 1 || !errors.Is(errs[0], engine.ErrCorrupt) {
		t.Fatalf("Check of a misplaced site entry: %v", errs)
	}

	// The merge driver joins both sides.
	write := func(name string, s *engine.Site) string {
		b, err := store.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	base := write("base", siteOf("github.com", note("#a", "x")))
	ours := write("ours", siteOf("github.com", note("#a", "x", "y")))
	theirs := write("theirs", siteOf("github.com", note("#a", "x", "z"), note("#b", "w")))
	out, err := store.MergeFiles(ctx, base, ours, theirs, "knowledge/facts/github.com/_site.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var m engine.Site
	if err := store.Unmarshal(out, &m, store.KindSite); err != nil {
		t.Fatal(err)
	}
	want := siteOf("github.com", note("#a", "x", "y", "z"), note("#b", "w"))
	if !m.Equal(want) {
		t.Fatalf("merged %s", out)
	}
}

// TestPutSites: a batch writes the bytes PutSite writes, reads back the
// same, leaves an unchanged entry alone (its mtime), calls placed once per
// file renamed, and refuses bad input before writing anything.
func TestPutSites(t *testing.T) {
	ctx := context.Background()
	st := openTree(t)
	dir := st.Root()
	one := openTree(t)
	sites := []*engine.Site{siteOf("github.com", note("#a", "x")), siteOf("example.com", note(".b", "y", "z")), siteOf("go.dev")}
	var placed []string
	rels, err := st.PutSites(ctx, sites, func(rel string) { placed = append(placed, rel) })
	if err != nil || len(rels) != 3 || len(placed) != 3 {
		t.Fatalf("PutSites: %v %v, placed %v", rels, err, placed)
	}
	for i, s := range sites {
		if _, err := one.PutSite(ctx, s); err != nil {
			t.Fatal(err)
		}
		a, _ := os.ReadFile(filepath.Join(dir, rels[i]))
		b, _ := os.ReadFile(filepath.Join(one.Root(), rels[i]))
		if len(a) == 0 || string(a) != string(b) {
			t.Fatalf("%s: PutSites wrote\n%s\nPutSite writes\n%s", rels[i], a, b)
		}
		got, err := openLater(t, dir).Site(ctx, s.Domain)
		if err != nil || got.Domain != s.Domain || len(got.Notes) != len(s.Notes) {
			t.Fatalf("%s read back: %+v %v", s.Domain, got, err)
		}
	}
	p := filepath.Join(dir, rels[0])
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	if err := os.Chtimes(p, old, old); err != nil {
		t.Fatal(err)
	}
	placed = nil
	sites[1].Notes = append(sites[1].Notes, note("#c", "w"))
	if _, err := st.PutSites(ctx, sites, func(rel string) { placed = append(placed, rel) }); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(p); err != nil || !fi.ModTime().Equal(old) {
		t.Fatalf("an unchanged site entry was rewritten: %v %v", fi.ModTime(), err)
	}
	if len(placed) != 1 || placed[0] != rels[1] {
		t.Fatalf("placed %v, want only the changed %s", placed, rels[1])
	}
	for _, bad := range [][]*engine.Site{{siteOf("new.example"), nil}, {siteOf("new.example"), siteOf("../etc")}, {{Format: 99, Domain: "new.example"}}} {
		if _, err := st.PutSites(ctx, bad, nil); err == nil {
			t.Fatalf("bad input %v accepted", bad)
		}
		if _, err := os.Stat(filepath.Join(dir, "facts", "new.example", "_site.yaml")); err == nil {
			t.Fatal("a batch refused for bad input wrote a file")
		}
	}
}
