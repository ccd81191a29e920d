package store_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store"
	"github.com/pemdev/pem/store/storetest"
)

// newTree initializes a tree in a temporary directory and opens it. At the
// end of the test the whole tree must pass Check (bbolt-style).
func newTree(t testing.TB) *store.Store {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "knowledge")
	if _, err := store.Init(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, err := range s.Check(context.Background()) {
			t.Errorf("Check after the test: %v", err)
		}
		s.Close()
	})
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) engine.Store { return newTree(t) })
}

func TestOpenNoTree(t *testing.T) {
	dir := t.TempDir()
	_, err := store.Open(dir, nil)
	if !errors.Is(err, engine.ErrNoTree) {
		t.Fatalf("Open of an empty dir: err = %v, want ErrNoTree", err)
	}
	if want := `run "pem init ` + dir + `"`; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
}

func TestInit(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "k")
	created, err := store.Init(ctx, dir)
	if err != nil || !created {
		t.Fatalf("Init = %v, %v; want true, nil", created, err)
	}
	attrs, err := os.ReadFile(filepath.Join(dir, ".gitattributes"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "experience/** linguist-generated=true merge=pem\ntraces/** linguist-generated=true\nverdicts/** linguist-generated=true\nfacts/** merge=pem\n"; string(attrs) != want {
		t.Errorf(".gitattributes = %q, want %q", attrs, want)
	}
	ign, err := os.ReadFile(filepath.Join(dir, ".gitignore"))
	if err != nil || string(ign) != ".pem.lock\n*.tmp\n" {
		t.Errorf(".gitignore = %q, %v", ign, err)
	}
	for _, d := range []string{"traces", "experience", "facts"} {
		if _, err := os.Stat(filepath.Join(dir, d, ".gitkeep")); err != nil {
			t.Errorf("%s/.gitkeep: %v", d, err)
		}
	}
	golden(t, "pem.yaml", mustRead(t, filepath.Join(dir, "pem.yaml")))
	s, err := store.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cfg, err := s.Config(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cfg != engine.DefaultConfig() {
		t.Errorf("Config of a new tree = %+v, want the defaults", cfg)
	}

	// A second Init leaves the tree as it is.
	if err := os.WriteFile(filepath.Join(dir, "pem.yaml"), []byte("format: 1\npolicy:\n  ttl_days: 7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	created, err = store.Init(ctx, dir)
	if err != nil || created {
		t.Fatalf("second Init = %v, %v; want false, nil", created, err)
	}
	if got := mustRead(t, filepath.Join(dir, "pem.yaml")); string(got) != "format: 1\npolicy:\n  ttl_days: 7\n" {
		t.Errorf("second Init rewrote pem.yaml: %q", got)
	}
	// Overrides keep the other defaults.
	s2, err := store.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	cfg, err = s2.Config(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := engine.DefaultConfig()
	want.Policy.TTLDays = 7
	if cfg != want {
		t.Errorf("Config with ttl_days: 7 = %+v, want %+v", cfg, want)
	}
}

func TestInitExistingDirKeepsFiles(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ".gitignore"), []byte("node_modules\n*.tmp\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Init(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	if got := string(mustRead(t, filepath.Join(dir, ".gitignore"))); got != "node_modules\n*.tmp\n.pem.lock\n" {
		t.Errorf(".gitignore = %q: want the user's lines kept and .pem.lock added", got)
	}
}

func mustRead(t testing.TB, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
