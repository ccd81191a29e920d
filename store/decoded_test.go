package store_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store"
	"github.com/pemdev/pem/store/storetest"
)

// experienceWith is an experience of example.com/intent with n runs folded.
func experienceWith(intent string, n int) *engine.Experience {
	x := storetest.NewExperience("example.com", intent)
	base := time.Date(2025, 6, 1, 10, 0, 0, 0, time.UTC)
	for i := range n {
		x.Fold(storetest.NewTrace("example.com", intent, base.Add(time.Duration(i)*time.Hour), int64(i+1)))
	}
	return x
}

// yamlExperience is the YAML decode of the experience file at path: what a
// read of it must equal.
func yamlExperience(t *testing.T, path string) *engine.Experience {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	v := new(engine.Experience)
	if err := store.Unmarshal(data, v, store.KindExperience); err != nil {
		t.Fatal(err)
	}
	return v
}

// editInPlace rewrites the file at path in place (the same inode, as an
// editor does) with its first from replaced by to; it returns the bytes
// before the edit.
func editInPlace(t *testing.T, path, from, to string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(data), from, to, 1)
	if edited == string(data) {
		t.Fatalf("test setup: no %q to edit in %s", from, path)
	}
	if err := os.WriteFile(path, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	return data
}

func decodedFile(dir, domain, key string) string {
	return filepath.Join(dir, ".pem-cache", "decoded", filepath.FromSlash(store.ExperiencePath(domain, key))+".bin")
}

// TestDecodedCache: a new process reads an experience from the decoded
// cache, equal to the YAML's decode; every way the YAML file changes is
// seen; a damaged, foreign or mislabelled cache file is never believed.
func TestDecodedCache(t *testing.T) {
	ctx := context.Background()
	s0 := newTree(t)
	dir := s0.Root()
	x := experienceWith("find the price", 5)
	key := x.IntentKey
	if _, err := s0.PutExperience(ctx, x); err != nil {
		t.Fatal(err)
	}
	yamlPath := filepath.Join(dir, filepath.FromSlash(store.ExperiencePath("example.com", key)))
	cache := decodedFile(dir, "example.com", key)
	// read is a query's read in a new process (ExperienceShared: it fills
	// the cache); Experience, a copy for a writer, only reads the cache.
	read := func(what string) *engine.Experience {
		t.Helper()
		got, err := openLater(t, dir).ExperienceShared(ctx, "example.com", key)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return got
	}
	want := func() *engine.Experience {
		t.Helper()
		return yamlExperience(t, yamlPath)
	}

	// Just written: too recent to trust, so no cache file yet.
	if _, err := s0.Experience(ctx, "example.com", key); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(cache); err == nil {
		t.Fatalf("a decoded cache file was written for a file changed within the racy window")
	}
	if _, err := openLater(t, dir).Experience(ctx, "example.com", key); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(cache); err == nil {
		t.Fatalf("Experience (a writer's copy) wrote a decoded cache file: only the query path fills it")
	}
	if got := read("first trusted read"); !reflect.DeepEqual(got, want()) {
		t.Fatalf("first read differs from the YAML")
	}
	if _, err := os.Stat(cache); err != nil {
		t.Fatalf("no decoded cache file after a trusted read: %v", err)
	}
	if got := read("from the cache"); !reflect.DeepEqual(got, want()) {
		t.Fatalf("the cached decode differs from the YAML:\n%+v\nwant\n%+v", got, want())
	}

	// The cache is what a new process reads: a cache file for the same
	// identity holding another (valid) value is what it returns. (This
	// is how the test tells that the YAML was not decoded again.)
	good, err := os.ReadFile(cache)
	if err != nil {
		t.Fatal(err)
	}
	other := experienceWith("find the price", 2)
	swapped := encodeLike(t, good, other)
	if err := os.WriteFile(cache, swapped, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := read("swapped cache"); len(got.Evidence) != len(other.Evidence) || len(other.Evidence) == len(x.Evidence) {
		t.Fatalf("the decoded cache was not used: %d evidence items, want the cache's %d (the YAML has %d)", len(got.Evidence), len(other.Evidence), len(x.Evidence))
	}
	if got, err := openLater(t, dir).Experience(ctx, "example.com", key); err != nil || len(got.Evidence) != len(other.Evidence) {
		t.Fatalf("Experience did not read the decoded cache: %v, %d evidence items", err, len(got.Evidence))
	}
	if err := os.WriteFile(cache, good, 0o644); err != nil {
		t.Fatal(err)
	}

	// Another process replaces the file (a save, a consolidation, a pull): a new inode.
	x2 := experienceWith("find the price", 7)
	s1 := openLater(t, dir)
	if _, err := s1.PutExperience(ctx, x2); err != nil {
		t.Fatal(err)
	}
	if got := read("after a replacement"); len(got.Evidence) != len(x2.Evidence) || !reflect.DeepEqual(got, want()) {
		t.Fatalf("after another process replaced the file: %d evidence items, want %d", len(got.Evidence), len(x2.Evidence))
	}
	// An edit in place (same inode, an editor): seen.
	editInPlace(t, yamlPath, "intent: find the price", "intent: find the price now")
	if got := read("after an edit in place"); got.Intent != "find the price now" {
		t.Fatalf("an edit in place was not seen: intent %q", got.Intent)
	}

	// A damaged cache file: the YAML is decoded and the cache rebuilt.
	for _, bad := range [][]byte{[]byte("garbage"), good[:len(good)/2], append([]byte(strings.Replace(string(good), "types ", "types 0", 1)), 0)} {
		if err := os.WriteFile(cache, bad, 0o644); err != nil {
			t.Fatal(err)
		}
		if got := read("damaged cache"); !reflect.DeepEqual(got, want()) {
			t.Fatalf("with a damaged cache file (%q…), the read differs from the YAML", bad[:min(len(bad), 20)])
		}
		if b, _ := os.ReadFile(cache); string(b) == string(bad) {
			t.Fatalf("the damaged cache file was not rebuilt")
		}
	}

	// A cache that names another entry is refused (the YAML decides).
	cur, err := os.ReadFile(cache)
	if err != nil {
		t.Fatal(err)
	}
	foreign := experienceWith("read the news", 3)
	if err := os.WriteFile(cache, encodeLike(t, cur, foreign), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := read("foreign cache"); got.IntentKey != key || !reflect.DeepEqual(got, want()) {
		t.Fatalf("a cache file of another entry was believed: %s", got.IntentKey)
	}

	// Removing .pem-cache loses nothing.
	if err := os.RemoveAll(filepath.Join(dir, ".pem-cache")); err != nil {
		t.Fatal(err)
	}
	if got := read("no cache"); !reflect.DeepEqual(got, want()) {
		t.Fatalf("without .pem-cache the read differs from the YAML")
	}
}

// encodeLike returns the cache file cur with its value replaced by v (the
// same header: the same identity).
func encodeLike(t *testing.T, cur []byte, v *engine.Experience) []byte {
	t.Helper()
	s := string(cur)
	i := strings.Index(s, "\nfile ")
	if i < 0 {
		t.Fatalf("test setup: no file line in the cache file")
	}
	j := strings.IndexByte(s[i+1:], '\n')
	head := s[:i+1+j+1]
	body, ok := store.DecodedBodyForTest(v)
	if !ok {
		t.Fatal("test setup: the value was not encoded")
	}
	return append([]byte(head), body...)
}

// Child process for TestOtherProcessSeen: writes example.com's "count open
// issues" experience with PEM_HELPER_RUNS runs folded.
func TestHelperExperience(t *testing.T) {
	dir := os.Getenv("PEM_HELPER_XTREE")
	if dir == "" {
		return // not a child
	}
	n, _ := strconv.Atoi(os.Getenv("PEM_HELPER_RUNS"))
	s, err := store.Open(dir, nil)
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(2)
	}
	if _, err := s.PutExperience(context.Background(), issuesExperience(n)); err != nil {
		fmt.Println("ERR", err)
		os.Exit(2)
	}
	os.Exit(0)
}

func issuesExperience(n int) *engine.Experience {
	x := &engine.Experience{}
	base := time.Date(2025, 6, 1, 10, 0, 0, 0, time.UTC)
	for i := range n {
		tr := storetest.NewTrace("example.com", "count open issues", base.Add(time.Duration(i)*time.Hour), int64(500+i))
		tr.Outcome, tr.FailureCategory = engine.Success, ""
		x.Fold(tr)
	}
	return x
}

// TestOtherProcessSeen: a warm engine (every cache filled and trusted) and
// a new Store (the decoded cache and the index file on disk) see at their
// next query what another process wrote: a consolidation's new experience
// file, then saved runs (traces and a facts patch).
func TestOtherProcessSeen(t *testing.T) {
	ctx := context.Background()
	dir := initTree(t)
	s := openLater(t, dir)
	if _, err := s.PutExperience(ctx, issuesExperience(3)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutFacts(ctx, storetest.NewFacts("example.com", "count open issues")); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2025, 6, 3, 0, 0, 0, 0, time.UTC)
	e := engine.New(s)
	e.Now = func() time.Time { return now }
	const u = "https://example.com/pemdev/pem/issues"
	runs := func(e *engine.Engine, what string) (int, []string) {
		t.Helper()
		r, err := e.Query(ctx, u, "count open issues")
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return r.SuccessCount + r.FailureCount, r.InteractionHints
	}
	fresh := func() *engine.Engine {
		e := engine.New(openLater(t, dir))
		e.Now = func() time.Time { return now }
		return e
	}
	for _, q := range []*engine.Engine{e, e, fresh(), fresh()} { // warm, and the caches on disk written
		if n, _ := runs(q, "before"); n != 3 {
			t.Fatalf("before: %d runs, want 3", n)
		}
	}
	if _, err := os.Stat(decodedFile(dir, "example.com", engine.IntentKey("count open issues"))); err != nil {
		t.Fatalf("no decoded cache file after the queries: %v", err)
	}
	child := func(cmd *exec.Cmd) {
		t.Helper()
		if out, err := cmd.Output(); err != nil {
			t.Fatalf("child process: %v\n%s", err, out)
		}
	}
	xcmd := exec.Command(os.Args[0], "-test.run=^TestHelperExperience$", "-test.count=1")
	xcmd.Env = append(os.Environ(), "PEM_HELPER_XTREE="+dir, "PEM_HELPER_RUNS=5")
	xcmd.Stderr = os.Stderr
	child(xcmd)
	if n, _ := runs(e, "warm, after another process's new experience"); n != 5 {
		t.Errorf("warm engine after another process wrote the experience: %d runs, want 5", n)
	}
	if n, _ := runs(fresh(), "new store, after another process's new experience"); n != 5 {
		t.Errorf("new store after another process wrote the experience: %d runs, want 5 (a stale decoded cache?)", n)
	}
	child(helperCmd(t, dir, 2, "other")) // two saves: traces and a facts patch
	n, hints := runs(e, "warm, after another process's saves")
	if n != 7 || !slices.Contains(hints, "hint other-1") {
		t.Errorf("warm engine after another process saved twice: %d runs, hints %q; want 7 and hint other-1", n, hints)
	}
	if n, _ := runs(fresh(), "new store, after another process's saves"); n != 7 {
		t.Errorf("new store after another process saved twice: %d runs, want 7 (a stale trace index?)", n)
	}
}
