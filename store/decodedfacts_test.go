package store_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store"
	"github.com/pemdev/pem/store/storetest"
	"github.com/pemdev/pem/store/treegen"
)

func decodedFactsFile(dir, domain, key string) string {
	return filepath.Join(dir, ".pem-cache", "decoded", filepath.FromSlash(store.FactsPath(domain, key))+".bin")
}

// yamlFacts is the YAML decode of the facts file at path: what a read of
// it must equal.
func yamlFacts(t *testing.T, path string) *engine.Facts {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	v := new(engine.Facts)
	if err := store.Unmarshal(data, v, store.KindFacts); err != nil {
		t.Fatal(err)
	}
	return v
}

// swapBody returns the cache file cur with its value replaced by v (the
// same header lines: the same identity or the same sum).
func swapBody(t *testing.T, cur []byte, v any) []byte {
	t.Helper()
	i := bytes.Index(cur, []byte("\nfile "))
	if i < 0 {
		i = bytes.Index(cur, []byte("\nsum "))
	}
	if i < 0 {
		t.Fatalf("test setup: no file or sum line in the cache file")
	}
	j := bytes.IndexByte(cur[i+1:], '\n')
	body, ok := store.DecodedBodyForTest(v)
	if !ok {
		t.Fatal("test setup: the value was not encoded")
	}
	return append(bytes.Clone(cur[:i+1+j+1]), body...)
}

// TestDecodedFactsCache: a new process reads facts from the decoded cache,
// equal to the YAML's decode; a replacement, an edit in place, a rename
// over the file and a git checkout are all seen; a damaged, truncated,
// other-types or mislabelled cache file is rebuilt from the YAML and never
// served; the value handed out is the caller's own.
func TestDecodedFactsCache(t *testing.T) {
	ctx := context.Background()
	dir := initTree(t)
	s0, err := store.Open(dir, nil) // the real clock: its writes are too recent to trust
	if err != nil {
		t.Fatal(err)
	}
	defer s0.Close()
	f := storetest.NewFacts("example.com", "count the stars")
	key := f.IntentKey
	if _, err := s0.PutFacts(ctx, f); err != nil {
		t.Fatal(err)
	}
	yamlPath := filepath.Join(dir, filepath.FromSlash(store.FactsPath("example.com", key)))
	cache := decodedFactsFile(dir, "example.com", key)
	read := func(what string) *engine.Facts {
		t.Helper()
		got, err := openLater(t, dir).Facts(ctx, "example.com", key)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return got
	}
	want := func() *engine.Facts {
		t.Helper()
		return yamlFacts(t, yamlPath)
	}

	if _, err := s0.Facts(ctx, "example.com", key); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(cache); err == nil {
		t.Fatalf("a decoded cache file was written for a file changed within the racy window")
	}
	if got := read("first trusted read"); !reflect.DeepEqual(got, want()) || !reflect.DeepEqual(got, f) {
		t.Fatalf("first read differs from the YAML")
	}
	good, err := os.ReadFile(cache)
	if err != nil {
		t.Fatalf("no decoded cache file after a trusted read: %v", err)
	}
	if got := read("from the cache"); !reflect.DeepEqual(got, want()) {
		t.Fatalf("the cached decode differs from the YAML:\n%+v\nwant\n%+v", got, want())
	}
	// Each read is the caller's own: changing it changes nothing the store serves.
	s1 := openLater(t, dir)
	mine, err := s1.Facts(ctx, "example.com", key)
	if err != nil {
		t.Fatal(err)
	}
	mine.Steps[0].Selector, mine.Selectors["stars"].Fallbacks[0], mine.Intent = "#mine", ".mine", "mine"
	if again, err := s1.Facts(ctx, "example.com", key); err != nil || !reflect.DeepEqual(again, want()) {
		t.Fatalf("a caller's change to its copy reached the store's value: %v", err)
	}

	// The cache is what a new process reads: a cache file for the same
	// identity holding another (valid) value of the entry is returned.
	other := storetest.NewFacts("example.com", "count the stars")
	other.InteractionHints = []string{"from the cache"}
	swapped := swapBody(t, good, other)
	if err := os.WriteFile(cache, swapped, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := read("swapped cache"); !reflect.DeepEqual(got.InteractionHints, other.InteractionHints) {
		t.Fatalf("the decoded cache was not used: hints %q", got.InteractionHints)
	}

	// A damaged, truncated, other-types, other-header or foreign cache file:
	// the YAML is decoded and the cache file rebuilt.
	foreign := storetest.NewFacts("example.com", "count the forks")
	for name, bad := range map[string][]byte{
		"garbage":     []byte("garbage"),
		"truncated":   swapped[:len(swapped)-3],
		"trailing":    append(bytes.Clone(swapped), 0),
		"empty":       {},
		"other types": []byte(strings.Replace(string(swapped), "\ntypes ", "\ntypes 0", 1)),
		"old header":  []byte(strings.Replace(string(swapped), "pem decoded 3\n", "pem decoded 2\n", 1)),
		"other file":  []byte(strings.Replace(string(swapped), "\nfile {", "\nfile {1", 1)),
		"foreign":     swapBody(t, good, foreign),
	} {
		if err := os.WriteFile(cache, bad, 0o644); err != nil {
			t.Fatal(err)
		}
		if got := read(name); !reflect.DeepEqual(got, want()) {
			t.Fatalf("with a %s cache file, the read differs from the YAML: %+v", name, got)
		}
		// Rebuilt: the good file's length (map order may differ).
		if b, _ := os.ReadFile(cache); bytes.Equal(b, bad) || len(b) != len(good) {
			t.Fatalf("the %s cache file was not rebuilt:\n%q\nwant\n%q", name, b, good)
		}
	}

	// Another process replaces the file: a new inode.
	f2 := storetest.NewFacts("example.com", "count the stars")
	f2.InteractionHints = append(f2.InteractionHints, "replaced")
	if _, err := openLater(t, dir).PutFacts(ctx, f2); err != nil {
		t.Fatal(err)
	}
	if got := read("after a replacement"); !reflect.DeepEqual(got, f2) || !reflect.DeepEqual(got, want()) {
		t.Fatalf("a replacement was not seen: hints %q", got.InteractionHints)
	}
	// An edit in place (same inode, an editor).
	editInPlace(t, yamlPath, "- replaced", "- edited in place")
	if got := read("after an edit in place"); got.InteractionHints[1] != "edited in place" || !reflect.DeepEqual(got, want()) {
		t.Fatalf("an edit in place was not seen: hints %q", got.InteractionHints)
	}
	// Another file renamed over it (mv).
	f3 := storetest.NewFacts("example.com", "count the stars")
	f3.InteractionHints = []string{"renamed over"}
	b3, err := store.Marshal(f3)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(yamlPath+".new", b3, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(yamlPath+".new", yamlPath); err != nil {
		t.Fatal(err)
	}
	if got := read("after a rename"); !reflect.DeepEqual(got, f3) {
		t.Fatalf("a file renamed over it was not seen: hints %q", got.InteractionHints)
	}

	// A git checkout of an older version.
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	git("init", "-q")
	git("add", "-A")
	git("commit", "-qm", "f3")
	if _, err := openLater(t, dir).PutFacts(ctx, f2); err != nil {
		t.Fatal(err)
	}
	git("commit", "-qam", "f2")
	if got := read("before the checkout"); !reflect.DeepEqual(got, f2) {
		t.Fatalf("before the checkout: hints %q", got.InteractionHints)
	}
	git("checkout", "-q", "HEAD~1", "--", filepath.ToSlash(store.FactsPath("example.com", key)))
	if got := read("after a checkout"); !reflect.DeepEqual(got, f3) {
		t.Fatalf("a checkout of the older file was not seen: hints %q", got.InteractionHints)
	}

	// Removing .pem-cache loses nothing.
	if err := os.RemoveAll(filepath.Join(dir, ".pem-cache")); err != nil {
		t.Fatal(err)
	}
	if got := read("no cache"); !reflect.DeepEqual(got, want()) {
		t.Fatalf("without .pem-cache the read differs from the YAML")
	}
}

// TestPutRecordsFactsCache: a batch leaves the decoded cache of the facts
// it wrote, keyed by the bytes written: a new process reads them from it;
// other bytes in the file are seen; a time outside UTC is not cached.
func TestPutRecordsFactsCache(t *testing.T) {
	ctx := context.Background()
	dir := initTree(t)
	s := openLater(t, dir)
	f := storetest.NewFacts("example.com", "count the stars")
	x := storetest.NewExperience("example.com", "count the stars")
	if _, err := s.PutRecords(ctx, []*engine.Facts{f}, []*engine.Experience{x}, nil); err != nil {
		t.Fatal(err)
	}
	yamlPath := filepath.Join(dir, filepath.FromSlash(store.FactsPath("example.com", f.IntentKey)))
	cache := decodedFactsFile(dir, "example.com", f.IntentKey)
	good, err := os.ReadFile(cache)
	if err != nil {
		t.Fatalf("no decoded cache file of the facts after PutRecords: %v", err)
	}
	if !bytes.Contains(good, []byte("\nsum ")) {
		t.Fatalf("the cache file is not keyed by the bytes written:\n%s", good[:min(len(good), 120)])
	}
	read := func(what string) *engine.Facts {
		t.Helper()
		got, err := openLater(t, dir).Facts(ctx, "example.com", f.IntentKey)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return got
	}
	if got := read("first read"); !reflect.DeepEqual(got, yamlFacts(t, yamlPath)) {
		t.Fatalf("the cached value differs from the YAML's decode")
	}
	other := storetest.NewFacts("example.com", "count the stars")
	other.AntiPatterns = []string{"from the cache"}
	if err := os.WriteFile(cache, swapBody(t, good, other), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := read("swapped cache"); !reflect.DeepEqual(got.AntiPatterns, other.AntiPatterns) {
		t.Fatalf("the decoded cache was not used: anti-patterns %q", got.AntiPatterns)
	}
	editInPlace(t, yamlPath, "- .old-stars", "- .old-starz")
	if got := read("after an edit in place"); !reflect.DeepEqual(got.AntiPatterns, []string{".old-starz"}) {
		t.Fatalf("an edit in place of the same size was not seen: anti-patterns %q", got.AntiPatterns)
	}
	g := storetest.NewFacts("example.com", "read the news")
	g.Provenance.FirstSeen = g.Provenance.FirstSeen.In(time.FixedZone("X", 3600))
	if _, err := s.PutRecords(ctx, []*engine.Facts{g}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(decodedFactsFile(dir, "example.com", g.IntentKey)); err == nil {
		t.Fatalf("facts with a time outside UTC were cached")
	}
}

// TestRecallSameWithFactsCache: on the bench's tree below P2 (the query
// reads the facts of related entries too), a query in a new store answers
// the same Recall, field for field, from the YAML (no .pem-cache) and from
// the decoded caches that query left.
func TestRecallSameWithFactsCache(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "knowledge")
	if err := treegen.GenerateHot(ctx, dir, 8, 120, 3, 30, treegen.Base, 1); err != nil {
		t.Fatal(err)
	}
	for _, now := range []time.Time{treegen.Base, treegen.Base.AddDate(0, 18, 0)} {
		query := func() *engine.Recall {
			t.Helper()
			e := engine.New(openLater(t, dir))
			e.Now = func() time.Time { return now }
			r, err := e.Query(ctx, treegen.URL(0, 3), treegen.Intent(3))
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		if err := os.RemoveAll(filepath.Join(dir, ".pem-cache")); err != nil {
			t.Fatal(err)
		}
		fromYAML := query()
		cached, _ := filepath.Glob(filepath.Join(dir, ".pem-cache", "decoded", "facts", treegen.Domain(0), "*.bin"))
		if want := 1 + len(fromYAML.RelatedRoutes); len(cached) < want {
			t.Fatalf("at %s (%s): %d facts cache files after the query, want at least %d", now.Format("2006-01"), fromYAML.Tier, len(cached), want)
		}
		fromCache := query()
		if !reflect.DeepEqual(fromCache, fromYAML) {
			t.Fatalf("at %s: the recall from the decoded caches differs from the YAML's:\n%+v\nwant\n%+v", now.Format("2006-01"), fromCache, fromYAML)
		}
		if now.After(treegen.Base) && len(fromYAML.RelatedRoutes) == 0 {
			t.Fatalf("test setup: no related routes below P2 (tier %s)", fromYAML.Tier)
		}
	}
}

// BenchmarkFactsRead: Store.Facts of 200 entries in a new Store (a new
// process's reads: a consolidation's "read the entries the plan changes",
// a deep-learn's, a query's), per read: "yaml" with no cache file (the
// YAML decoded, and the cache file written), "cached" from the cache file
// a read left (keyed by the file's identity), "by-sum" from the one
// PutRecords left (keyed by the bytes written: the YAML file is read and
// hashed too).
func BenchmarkFactsRead(b *testing.B) {
	ctx := context.Background()
	dir := filepath.Join(b.TempDir(), "knowledge")
	if _, err := store.Init(ctx, dir); err != nil {
		b.Fatal(err)
	}
	later := &store.Options{Now: func() time.Time { return time.Now().Add(time.Hour) }}
	var fs []*engine.Facts
	for i := range 200 {
		fs = append(fs, storetest.NewFacts("example.com", "count the stars "+strconv.Itoa(i)))
	}
	for _, f := range fs { // as a checkout or treegen writes them: no cache
		data, err := store.Marshal(f)
		if err != nil {
			b.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(store.FactsPath(f.Domain, f.IntentKey)))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	dropCache := func() {
		if err := os.RemoveAll(filepath.Join(dir, ".pem-cache", "decoded", "facts")); err != nil {
			b.Fatal(err)
		}
	}
	readAll := func(b *testing.B) time.Duration {
		s, err := store.Open(dir, later)
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		t := time.Now()
		for _, f := range fs {
			if _, err := s.Facts(ctx, f.Domain, f.IntentKey); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(t)
	}
	put := func(b *testing.B) {
		s, err := store.Open(dir, later)
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		if _, err := s.PutRecords(ctx, fs, nil, nil); err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range []struct {
		name  string
		setup func(b *testing.B)
	}{
		{"yaml", func(b *testing.B) { dropCache() }},
		{"cached", func(b *testing.B) { dropCache(); readAll(b) }},
		{"by-sum", func(b *testing.B) {
			// Other bytes first, so that PutRecords writes every file anew.
			for _, f := range fs {
				f.Revision = "x" + f.Revision
			}
			put(b)
			for _, f := range fs {
				f.Revision = f.Revision[1:]
			}
			dropCache()
			put(b)
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			var total time.Duration
			for range b.N {
				b.StopTimer()
				c.setup(b)
				b.StartTimer()
				total += readAll(b)
			}
			b.ReportMetric(float64(total)/float64(b.N*len(fs))/1e3, "us/read")
		})
	}
}

// TestDecodedConfigCache: a new process reads pem.yaml from the decoded
// cache (a swapped value is what it returns), equal to the YAML's decode;
// an edit in place and a replacement are seen; a damaged cache file, or
// one whose value a pem.yaml could not hold (an invalid policy), is
// never served.
func TestDecodedConfigCache(t *testing.T) {
	ctx := context.Background()
	dir := initTree(t)
	cfgPath := filepath.Join(dir, "pem.yaml")
	cache := filepath.Join(dir, ".pem-cache", "decoded", "pem.yaml.bin")
	read := func(what string) engine.Config {
		t.Helper()
		c, err := openLater(t, dir).Config(ctx)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return c
	}
	want := func() engine.Config {
		t.Helper()
		data, err := os.ReadFile(cfgPath)
		if err != nil {
			t.Fatal(err)
		}
		c := engine.DefaultConfig()
		if err := store.Unmarshal(data, &c, store.KindConfig); err != nil {
			t.Fatal(err)
		}
		return c
	}
	if got := read("first read"); !reflect.DeepEqual(got, want()) {
		t.Fatalf("first read differs from the YAML")
	}
	good, err := os.ReadFile(cache)
	if err != nil {
		t.Fatalf("no decoded cache file of pem.yaml after a trusted read: %v", err)
	}
	other := want()
	other.Policy.RelatedRoutes = 7
	if err := os.WriteFile(cache, swapBody(t, good, other), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := read("swapped cache"); got.Policy.RelatedRoutes != 7 {
		t.Fatalf("the decoded cache was not used: related_routes %d", got.Policy.RelatedRoutes)
	}
	bad := want()
	bad.Policy.P1 = 2 // Validate refuses it
	for name, b := range map[string][]byte{
		"garbage":   []byte("garbage"),
		"truncated": good[:len(good)-2],
		"invalid":   swapBody(t, good, bad),
	} {
		if err := os.WriteFile(cache, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if got := read(name); !reflect.DeepEqual(got, want()) {
			t.Fatalf("with a %s cache file, the read differs from the YAML", name)
		}
	}
	data, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(data), "ttl_days: 30", "ttl_days: 31", 1)
	if edited == string(data) {
		t.Fatalf("test setup: no ttl_days: 30 in pem.yaml:\n%s", data)
	}
	if err := os.WriteFile(cfgPath, []byte(edited), 0o644); err != nil { // in place
		t.Fatal(err)
	}
	if got := read("after an edit in place"); got.Policy.TTLDays != 31 {
		t.Fatalf("an edit in place of pem.yaml was not seen: ttl_days %d", got.Policy.TTLDays)
	}
	if err := os.WriteFile(cfgPath+".new", []byte(strings.Replace(edited, "ttl_days: 31", "ttl_days: 12", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(cfgPath+".new", cfgPath); err != nil {
		t.Fatal(err)
	}
	if got := read("after a rename"); got.Policy.TTLDays != 12 {
		t.Fatalf("a pem.yaml renamed into place was not seen: ttl_days %d", got.Policy.TTLDays)
	}
}
