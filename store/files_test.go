package store_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store"
)

func TestFiles(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "k")
	if _, err := store.Init(ctx, dir); err != nil {
		t.Fatal(err)
	}
	write := func(rel, data string) {
		t.Helper()
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(".git/config", "[core]\n")       // skipped: git's own
	write("sub/.git/HEAD", "ref: x\n")     // skipped at any depth
	write(".pem.lock", "")                 // skipped: the writer lock
	write(".hidden/note", "hidden text\n") // hidden files are read
	write("facts/a.example/x.yaml", "format: 1\n")
	write("big", strings.Repeat("b", 100)) // longer than max: its prefix
	outside := filepath.Join(t.TempDir(), "outside")
	if err := os.WriteFile(outside, []byte("secret outside the tree"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
		t.Skip("no symlinks here:", err)
	}
	s, err := store.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got := map[string]string{}
	err = s.Files(ctx, 16, func(rel string, data []byte) error {
		got[rel] = string(data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{".git/config", "sub/.git/HEAD", ".pem.lock", "link"} {
		if _, ok := got[rel]; ok {
			t.Errorf("Files gave %s, want it skipped", rel)
		}
	}
	if got[".hidden/note"] != "hidden text\n" || got["facts/a.example/x.yaml"] != "format: 1\n" {
		t.Errorf("Files contents = %q", got)
	}
	if got["big"] != strings.Repeat("b", 16) {
		t.Errorf("big = %q, want its first 16 bytes", got["big"])
	}
	if _, ok := got["pem.yaml"]; !ok {
		t.Errorf("pem.yaml missing from %q", got)
	}
	stop := context.Canceled
	if err := s.Files(ctx, 16, func(string, []byte) error { return stop }); err != stop {
		t.Errorf("an error from fn: Files = %v, want it returned", err)
	}
}

// TestFilesCapsByKind: a file the layout gives a kind is read at most up to
// its kind's cap, so an over-cap trace (which Check refuses) is not read
// past the cap; a file of no kind is read up to max.
func TestFilesCapsByKind(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "k")
	if _, err := store.Init(ctx, dir); err != nil {
		t.Fatal(err)
	}
	ref := engine.TraceRef{Domain: "example.com", Day: "2026-03-01", ID: "01J00000000000000000000001"}
	over := store.MaxTraceBytes + 4096
	for _, rel := range []string{store.TracePath(ref), "notes/big.txt"} {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(strings.Repeat("x", over)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s, err := store.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got := map[string]int{}
	if err := s.Files(ctx, store.MaxExperienceBytes, func(rel string, data []byte) error {
		got[rel] = len(data)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n := got[store.TracePath(ref)]; n != store.MaxTraceBytes {
		t.Errorf("an over-cap trace gave %d bytes, want its cap %d", n, store.MaxTraceBytes)
	}
	if n := got["notes/big.txt"]; n != over {
		t.Errorf("a file of no kind gave %d bytes, want all %d", n, over)
	}
}
