package store_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store"
)

func summaryFile(dir, domain, key string) string {
	return filepath.Join(dir, ".pem-cache", "decoded", "summary", filepath.FromSlash(store.ExperiencePath(domain, key))+".json")
}

// TestSummaryCache: a new process reads an experience's summary from
// .pem-cache, equal to the summary of the YAML; every way the YAML file
// changes is seen; a damaged, mislabelled or other-policy summary is never
// believed.
func TestSummaryCache(t *testing.T) {
	ctx := context.Background()
	s0 := newTree(t)
	dir := s0.Root()
	p := engine.DefaultConfig().Policy
	x := experienceWith("find the price", 5)
	key := x.IntentKey
	if _, err := s0.PutExperience(ctx, x); err != nil {
		t.Fatal(err)
	}
	yamlPath := filepath.Join(dir, filepath.FromSlash(store.ExperiencePath("example.com", key)))
	cache := summaryFile(dir, "example.com", key)
	js := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	read := func(what string, p engine.Policy) *engine.ExperienceSummary {
		t.Helper()
		got, err := openLater(t, dir).ExperienceSummary(ctx, "example.com", key, p)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return got
	}
	want := func(p engine.Policy) string {
		t.Helper()
		return js(engine.Summarize(yamlExperience(t, yamlPath), p))
	}
	if _, err := s0.ExperienceSummary(ctx, "example.com", key, p); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(cache); err == nil {
		t.Fatal("a summary file was written for an experience changed within the racy window")
	}
	if got := read("first trusted read", p); js(got) != want(p) {
		t.Fatalf("first read:\n %s\nwant %s", js(got), want(p))
	}
	good, err := os.ReadFile(cache)
	if err != nil {
		t.Fatalf("no summary file after a trusted read: %v", err)
	}
	// The file is what a new process reads: another (valid) summary under
	// the same head is what it returns.
	other := engine.Summarize(experienceWith("find the price", 2), p)
	head := good[:bytes.Index(good, []byte("\nfile "))+1]
	head = append(head, good[len(head):len(head)+bytes.IndexByte(good[len(head):], '\n')+1]...)
	body, err := json.Marshal(other)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(cache, append(append([]byte{}, head...), body...), 0o644)
	if js(other) == want(p) {
		t.Fatal("test setup: the swapped summary equals the YAML's")
	}
	if got := read("swapped summary", p); js(got) != js(other) {
		t.Fatalf("the summary file was not used: %d evidence items, want the file's %d", got.Evidence, other.Evidence)
	}
	os.WriteFile(cache, good[:len(good)-7], 0o644)
	if got := read("damaged summary", p); js(got) != want(p) {
		t.Fatalf("a damaged summary file was believed:\n %s", js(got))
	}
	mislabelled := engine.Summarize(experienceWith("find the price", 5), p)
	mislabelled.IntentKey = "another-key"
	body, _ = json.Marshal(mislabelled)
	os.WriteFile(cache, append(append([]byte{}, head...), body...), 0o644)
	if got := read("mislabelled summary", p); got.IntentKey != key {
		t.Fatalf("a summary naming another entry was believed: %s", got.IntentKey)
	}
	q := p
	q.HalfLifeDays = 7
	if got := read("another policy", q); got.Policy != q || js(got) != want(q) {
		t.Fatalf("under another policy:\n %s\nwant %s", js(got), want(q))
	}

	// Another process replaces the file: a new inode.
	read("the summary kept again", p)
	if _, err := openLater(t, dir).PutExperience(ctx, experienceWith("find the price", 7)); err != nil {
		t.Fatal(err)
	}
	if got := read("replaced", p); js(got) != want(p) {
		t.Fatalf("after a replacement:\n %s\nwant %s", js(got), want(p))
	}
	// An edit in place of the same size, its mtime put back.
	fi, _ := os.Stat(yamlPath)
	old := want(p)
	editInPlace(t, yamlPath, "outcome: success", "outcome: failure")
	os.Chtimes(yamlPath, fi.ModTime(), fi.ModTime())
	if want(p) == old {
		t.Fatal("test setup: the edit does not change the summary")
	}
	if got := read("edited in place", p); js(got) != want(p) {
		t.Fatalf("after an edit in place:\n %s\nwant %s", js(got), want(p))
	}
	if _, err := openLater(t, dir).ExperienceSummary(ctx, "example.com", "no-such-entry", p); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("a missing entry: %v, want ErrNotFound", err)
	}
}
