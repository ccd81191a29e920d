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
