package store_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store"
)

// TestPutRecordsDecodedCache: a batch leaves the decoded cache of the
// experience it wrote, keyed by the bytes written: a new process reads the
// entry from it, equal to the YAML's decode (digest, selectors, patterns
// and all); a change of the file's bytes is seen, and the same bytes again
// make the cache good again whatever the file's identity; a value that
// would not decode back to itself (a time outside UTC) is not cached.
func TestPutRecordsDecodedCache(t *testing.T) {
	ctx := context.Background()
	dir := initTree(t)
	s := openLater(t, dir)
	x := experienceWith("find the price", 40)
	if !x.Compact(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), engine.DefaultPolicy()) || x.Digest == nil {
		t.Fatalf("test setup: want a digest")
	}
	x.Evidence = append(x.Evidence, experienceWith("find the price", 45).Evidence[40:]...) // and evidence after it
	key := x.IntentKey
	if _, err := s.PutRecords(ctx, nil, []*engine.Experience{x}, nil); err != nil {
		t.Fatal(err)
	}
	yamlPath := filepath.Join(dir, filepath.FromSlash(store.ExperiencePath("example.com", key)))
	cache := decodedFile(dir, "example.com", key)
	good, err := os.ReadFile(cache)
	if err != nil {
		t.Fatalf("no decoded cache file after PutRecords: %v", err)
	}
	want := func() *engine.Experience {
		t.Helper()
		return yamlExperience(t, yamlPath)
	}
	read := func(what string) *engine.Experience {
		t.Helper()
		got, err := openLater(t, dir).Experience(ctx, "example.com", key)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return got
	}
	if got := read("first read"); !reflect.DeepEqual(got, want()) {
		t.Fatalf("the cached value differs from the YAML's decode:\n%+v\nwant\n%+v", got, want())
	}

	// Swap the cached value (same header): a new process returns it, so
	// the YAML was not decoded.
	other := experienceWith("find the price", 2)
	head := good[:bytes.Index(good, []byte("\nsum "))+len("\nsum ")+64+1]
	body, ok := store.DecodedBodyForTest(other)
	if !ok {
		t.Fatal("test setup: the value was not encoded")
	}
	swapped := append(append([]byte(nil), head...), body...)
	if err := os.WriteFile(cache, swapped, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := read("swapped cache"); len(got.Evidence) != len(other.Evidence) {
		t.Fatalf("the decoded cache was not used: %d evidence items, want the cache's %d", len(got.Evidence), len(other.Evidence))
	}

	// Other bytes in the file, written in place: the YAML decides.
	data := editInPlace(t, yamlPath, "intent: find the price", "intent: find the pricE")
	if got := read("after an edit in place"); got.Intent != "find the pricE" || len(got.Evidence) != len(x.Evidence) {
		t.Fatalf("an edit in place of the same size was not seen: intent %q, %d evidence items", got.Intent, len(got.Evidence))
	}
	// The bytes written back (another identity): the cache serves again.
	if err := os.WriteFile(yamlPath, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cache, swapped, 0o644); err != nil { // the read above may have left it alone or not
		t.Fatal(err)
	}
	if got := read("the same bytes again"); len(got.Evidence) != len(other.Evidence) {
		t.Fatalf("the cache keyed by the bytes was not used for the same bytes: %d evidence items", len(got.Evidence))
	}

	// A time outside UTC would come back as UTC from the YAML: not cached.
	y := experienceWith("read the news", 3)
	y.LastSuccessAt = y.LastSuccessAt.In(time.FixedZone("X", 3600))
	if _, err := s.PutRecords(ctx, nil, []*engine.Experience{y}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(decodedFile(dir, "example.com", y.IntentKey)); err == nil {
		t.Fatalf("a value with a time outside UTC was cached")
	}
}

// TestPutRecordsDecodedCacheMany: a batch of entries in several domains
// leaves a cache file for each (written one directory at a time), each
// serving its own entry, and no temporary file behind.
func TestPutRecordsDecodedCacheMany(t *testing.T) {
	ctx := context.Background()
	dir := initTree(t)
	s := openLater(t, dir)
	var xs []*engine.Experience
	for i, d := range []string{"example.com", "example.com", "example.com", "go.dev", "go.dev", "python.org"} {
		x := experienceWith(fmt.Sprintf("task %d", i), i+1)
		x.Domain = d
		for j := range x.Evidence {
			x.Evidence[j].Trace = fmt.Sprintf("01JNXCDFG0CPYQ18HXM016P%d%02d", i, j)
		}
		xs = append(xs, x)
	}
	if _, err := s.PutRecords(ctx, nil, xs, nil); err != nil {
		t.Fatal(err)
	}
	for _, x := range xs {
		c, err := os.ReadFile(decodedFile(dir, x.Domain, x.IntentKey))
		if err != nil {
			t.Fatalf("%s/%s: no decoded cache file: %v", x.Domain, x.IntentKey, err)
		}
		y, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(store.ExperiencePath(x.Domain, x.IntentKey))))
		if err != nil {
			t.Fatal(err)
		}
		if sum := sha256.Sum256(y); !bytes.Contains(c, []byte("\nsum "+hex.EncodeToString(sum[:])+"\n")) {
			t.Fatalf("%s/%s: the cache file is not keyed by its own file's bytes", x.Domain, x.IntentKey)
		}
		got, err := openLater(t, dir).Experience(ctx, x.Domain, x.IntentKey)
		want := yamlExperience(t, filepath.Join(dir, filepath.FromSlash(store.ExperiencePath(x.Domain, x.IntentKey))))
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s/%s: %v, or the cached value differs from the YAML's decode", x.Domain, x.IntentKey, err)
		}
	}
	filepath.WalkDir(filepath.Join(dir, ".pem-cache"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".tmp") {
			t.Errorf("a temporary file was left: %s", p)
		}
		return nil
	})
}
