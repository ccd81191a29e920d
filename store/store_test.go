package store_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store"
	"github.com/pemdev/pem/store/storetest"
)

// openTree initializes a tree in a temporary directory and opens it; the
// store is closed when the test ends.
func openTree(t testing.TB) *store.Store {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "knowledge")
	if _, err := store.Init(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// newTree is openTree, and at the end of the test the whole tree must pass
// Check (bbolt-style).
func newTree(t testing.TB) *store.Store {
	t.Helper()
	s := openTree(t)
	t.Cleanup(func() { // before the close: cleanups run last first
		for _, err := range s.Check(context.Background()) {
			t.Errorf("Check after the test: %v", err)
		}
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
	// The state's directories live on gitrepo.StateRef, not on main.
	if err != nil || string(ign) != ".pem.lock\n*.tmp\n/traces/\n/experience/\n" {
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
	if !reflect.DeepEqual(cfg, engine.DefaultConfig()) {
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
	if !reflect.DeepEqual(cfg, want) {
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
	if got := string(mustRead(t, filepath.Join(dir, ".gitignore"))); got != "node_modules\n*.tmp\n.pem.lock\n/traces/\n/experience/\n" {
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

// pem.yaml's approval list decodes strictly and is validated; a trace that
// records approvals is written and read back whole, scrubbed like the rest.
func TestApprovalConfigAndTrace(t *testing.T) {
	ctx := context.Background()
	s := newTree(t)
	write := func(body string) error {
		if err := os.WriteFile(filepath.Join(s.Root(), "pem.yaml"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		s2, err := store.Open(s.Root(), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s2.Close()
		cfg, err := s2.Config(ctx)
		if err == nil && len(cfg.Approval) != 2 {
			t.Errorf("approval = %+v, want 2 rules", cfg.Approval)
		}
		return err
	}
	if err := write("format: 1\napproval:\n  - name: payment\n    text: [buy, pay]\n  - name: admin\n    url: ['*/admin/*']\n    actions: [type]\n"); err != nil {
		t.Fatalf("a valid approval list: %v", err)
	}
	for _, bad := range []string{
		"format: 1\napproval:\n  - text: [buy]\n",                      // no name
		"format: 1\napproval:\n  - name: x\n    texts: [buy]\n",        // unknown field
		"format: 1\napproval:\n  - name: x\n    actions: [purchase]\n", // unknown action
	} {
		if err := write(bad); !errors.Is(err, engine.ErrCorrupt) {
			t.Errorf("%q: %v, want ErrCorrupt", bad, err)
		}
	}
	if err := write("format: 1\napproval:\n  - name: a\n    text: [buy]\n  - name: b\n    selector: [delete]\n"); err != nil {
		t.Fatal(err)
	}

	eng := &engine.Engine{Store: s}
	tr := &engine.Trace{Task: "buy it", URL: "https://shop.test/item/1", Outcome: engine.Failure, FailureCategory: engine.ApprovalRequired,
		Steps: []engine.Step{{Action: "navigate", URL: "https://shop.test/item/1", OK: true}},
		Approvals: []engine.Approval{
			{Step: 2, Action: "click", Selector: "#buy", URL: "https://shop.test/item/1?token=ghp_" + strings.Repeat("a", 36), Rule: "payment", Why: `text "Buy now" has "buy"`, Decision: engine.Refused, Note: "terminal"},
		}}
	saved, err := eng.SaveTrace(ctx, tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	refs, err := s.TraceRefs(ctx, saved.Domain)
	if err != nil || len(refs) != 1 || refs[0].ID != saved.ID {
		t.Fatalf("trace refs %v, %v; want the one saved (%s)", refs, err, saved.ID)
	}
	got, err := s.Trace(ctx, refs[0])
	if err != nil {
		t.Fatal(err)
	}
	if got.FailureCategory != engine.ApprovalRequired || len(got.Approvals) != 1 {
		t.Fatalf("read back %s, approvals %+v", got.FailureCategory, got.Approvals)
	}
	a := got.Approvals[0]
	if a.Rule != "payment" || a.Decision != engine.Refused || a.Step != 2 || strings.Contains(a.URL, "ghp_") {
		t.Errorf("approval read back as %+v (the token must be scrubbed)", a)
	}
	bad := &engine.Trace{URL: "https://shop.test/", Outcome: engine.Success, Steps: tr.Steps,
		Approvals: []engine.Approval{{Step: 2, Action: "click", Rule: "payment", Decision: "maybe"}}}
	if _, err := eng.SaveTrace(ctx, bad, nil); !errors.Is(err, engine.ErrInvalid) {
		t.Errorf("an unknown decision saved: %v", err)
	}
}

// The starter approval rules pem init writes, commented out, work once
// uncommented: they are engine.DefaultApproval.
func TestInitApprovalStarter(t *testing.T) {
	s := newTree(t)
	p := filepath.Join(s.Root(), "pem.yaml")
	b := mustRead(t, p)
	if !strings.Contains(string(b), "\n# approval:\n") {
		t.Fatalf("pem.yaml has no commented approval block:\n%s", b)
	}
	before, block, _ := strings.Cut(string(b), "# approval:\n")
	var out strings.Builder
	out.WriteString(before + "approval:\n")
	for _, l := range strings.SplitAfter(block, "\n") {
		out.WriteString(strings.TrimPrefix(l, "# "))
	}
	if err := os.WriteFile(p, []byte(out.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	s2, err := store.Open(s.Root(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	cfg, err := s2.Config(context.Background())
	if err != nil {
		t.Fatalf("the uncommented starter rules: %v", err)
	}
	if !reflect.DeepEqual(cfg.Approval, engine.DefaultApproval()) {
		t.Errorf("uncommented: %+v, want engine.DefaultApproval", cfg.Approval)
	}
}
