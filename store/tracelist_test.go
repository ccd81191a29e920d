package store_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store"
	"github.com/pemdev/pem/store/storetest"
)

// putPriceTrace saves a "find the price" trace of domain at at (seed makes
// its id) and returns its ref.
func putPriceTrace(t *testing.T, s *store.Store, domain string, at time.Time, seed int64) engine.TraceRef {
	t.Helper()
	tr := storetest.NewTrace(domain, "find the price", at, seed)
	if _, err := s.PutTrace(context.Background(), tr); err != nil {
		t.Fatal(err)
	}
	return engine.TraceRef{Domain: tr.Domain, Day: tr.StartedAt.UTC().Format("2006-01-02"), ID: tr.ID}
}

// TestTraceRefsListing: the listing gives what TraceRefs gives; it reuses
// the names of a directory whose identity did not change (shown by
// planting a name in the remembered listing), lists again every directory
// that gained or lost a trace, a day or a domain, and never remembers a
// directory holding a link or a foreign name, so those are reported at
// every call.
func TestTraceRefsListing(t *testing.T) {
	ctx := context.Background()
	dir := initTree(t)
	s, err := store.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	base := time.Date(2025, 6, 1, 10, 0, 0, 0, time.UTC)
	put := func(domain string, at time.Time, seed int64) engine.TraceRef {
		t.Helper()
		return putPriceTrace(t, s, domain, at, seed)
	}
	var gone engine.TraceRef
	for i, d := range []string{"a.example", "b.example"} {
		for day := range 3 {
			for j := range 2 {
				r := put(d, base.Add(time.Duration(day)*24*time.Hour+time.Duration(j)*time.Minute), int64(100*i+10*day+j))
				if d == "b.example" && day == 1 && j == 0 {
					gone = r
				}
			}
		}
	}
	// A day holding a link and a foreign name.
	odd := filepath.Join(dir, "traces", "a.example", "2025-06-02")
	if err := os.Symlink(filepath.Join(dir, "pem.yaml"), filepath.Join(odd, "01JX0000000000000000000000.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(odd, "notes.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2100 * time.Millisecond) // past the racy window: the directories may be remembered

	check := func(what string, prev *store.TraceListing) *store.TraceListing {
		t.Helper()
		fresh, err := store.Open(dir, nil) // no listing cached in memory
		if err != nil {
			t.Fatal(err)
		}
		defer fresh.Close()
		got, next, err := fresh.TraceRefsListing(ctx, prev)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		links := fresh.SkippedLinks()
		other, err := store.Open(dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		want, err := other.TraceRefs(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: the listing gives\n%v\nTraceRefs gives\n%v", what, got, want)
		}
		if wantLinks := other.SkippedLinks(); !reflect.DeepEqual(links, wantLinks) || len(links) != 1 {
			t.Fatalf("%s: links reported %v, TraceRefs reports %v (want the one link)", what, links, wantLinks)
		}
		if _, ok := next.Dirs["traces/a.example/2025-06-02"]; ok {
			t.Fatalf("%s: a day holding a link and a foreign name was remembered", what)
		}
		return next
	}
	l1 := check("first listing", nil)
	if n := len(l1.Dirs); n != 2+5 {
		t.Fatalf("remembered %d directories, want 2 domains and 5 clean days: %v", n, l1.Dirs)
	}

	// The remembered names are used: a name planted in an unchanged day's
	// listing comes back.
	planted := &store.TraceListing{Dirs: map[string]store.ListedDir{}}
	for k, v := range l1.Dirs {
		planted.Dirs[k] = v
	}
	day := "traces/a.example/2025-06-01"
	d := planted.Dirs[day]
	d.Names += "01JX1111111111111111111111\n"
	planted.Dirs[day] = d
	fresh, _ := store.Open(dir, nil)
	got, _, err := fresh.TraceRefsListing(ctx, planted)
	fresh.Close()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(got, func(r engine.TraceRef) bool { return r.ID == "01JX1111111111111111111111" }) {
		t.Fatalf("an unchanged day was listed again instead of reusing its names")
	}

	// Changes: a trace more in a day, one deleted, a new day, a new domain.
	put("a.example", base.Add(30*time.Minute), 900)
	if err := s.DeleteTrace(ctx, gone); err != nil {
		t.Fatal(err)
	}
	put("b.example", base.Add(5*24*time.Hour), 901)
	put("c.example", base, 902)
	l2 := check("after changes", l1)
	for _, k := range []string{"traces/a.example/2025-06-01", "traces/b.example/2025-06-02", "traces/b.example"} {
		if _, ok := l2.Dirs[k]; ok {
			t.Fatalf("%s changed just now (within the racy window) and was remembered", k)
		}
	}
	if _, ok := l2.Dirs["traces/a.example/2025-06-03"]; !ok {
		t.Fatalf("an unchanged day was not carried over: %v", l2.Dirs)
	}
	check("again", l2)
}

// TestTraceRefsListingParallel: the listing walks domains on GOMAXPROCS
// workers; with many domains (one of them holding a link), before and
// after changes in several domains, it gives the refs, the remembered
// directories and the reported links a walk on one worker gives, and
// TraceRefs' refs.
func TestTraceRefsListingParallel(t *testing.T) {
	ctx := context.Background()
	dir := initTree(t)
	s, err := store.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	base := time.Date(2025, 6, 1, 10, 0, 0, 0, time.UTC)
	put := func(domain string, at time.Time, seed int64) { t.Helper(); putPriceTrace(t, s, domain, at, seed) }
	domain := func(i int) string { return fmt.Sprintf("d%02d.example", i) }
	for i := range 24 {
		for day := range 3 {
			for j := range 2 {
				put(domain(i), base.Add(time.Duration(day)*24*time.Hour+time.Duration(j)*time.Minute), int64(1000*i+10*day+j))
			}
		}
	}
	odd := filepath.Join(dir, "traces", domain(17), "2025-06-02")
	if err := os.Symlink(filepath.Join(dir, "pem.yaml"), filepath.Join(odd, "01JX0000000000000000000000.yaml")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2100 * time.Millisecond) // past the racy window: directories may be remembered

	list := func(procs int, prev *store.TraceListing) ([]engine.TraceRef, *store.TraceListing, []string) {
		t.Helper()
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		fresh, err := store.Open(dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer fresh.Close()
		refs, next, err := fresh.TraceRefsListing(ctx, prev)
		if err != nil {
			t.Fatal(err)
		}
		return refs, next, fresh.SkippedLinks()
	}
	check := func(what string, prev *store.TraceListing) *store.TraceListing {
		t.Helper()
		r1, l1, k1 := list(1, prev)
		r8, l8, k8 := list(8, prev)
		if !reflect.DeepEqual(r1, r8) {
			t.Fatalf("%s: 8 workers list\n%v\none worker lists\n%v", what, r8, r1)
		}
		if !reflect.DeepEqual(l1, l8) {
			t.Fatalf("%s: 8 workers remember %d directories, one worker %d", what, len(l8.Dirs), len(l1.Dirs))
		}
		if !reflect.DeepEqual(k1, k8) || len(k8) != 1 {
			t.Fatalf("%s: links reported %v by 8 workers, %v by one (want the one link)", what, k8, k1)
		}
		want, err := s.TraceRefs(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(r8, want) {
			t.Fatalf("%s: the listing gives %d refs, TraceRefs %d", what, len(r8), len(want))
		}
		return l8
	}
	l := check("first listing", nil)
	if n := len(l.Dirs); n != 24+24*3-1 {
		t.Fatalf("remembered %d directories, want 24 domains and 71 clean days", n)
	}
	l = check("reusing the listing", l)
	for _, i := range []int{0, 5, 11, 23} {
		put(domain(i), base.Add(time.Duration(i)*time.Hour+30*time.Second), int64(90000+i))
	}
	put("new.example", base, 99999)
	check("after changes in five domains", l)
}
