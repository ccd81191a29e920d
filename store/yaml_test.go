package store_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store"
	"github.com/pemdev/pem/store/storetest"
)

var t0 = time.Date(2025, 3, 14, 9, 26, 53, 0, time.UTC)

// TestCanonicalGolden: each record kind encodes to the bytes in
// testdata/golden, and decoding those bytes and encoding again gives them back.
func TestCanonicalGolden(t *testing.T) {
	zone := time.FixedZone("CET", 3600)
	tr := storetest.NewTrace("example.com", "count the stars", t0.In(zone), 1)
	tr.Steps[0].Value = "two\nlines: with a colon"
	tr.Result.Answer = "2025-03-14T09:26:53Z" // looks like a time, is a string
	for _, tc := range []struct {
		name string
		v    any
		new  func() any
		kind string
	}{
		{"trace.yaml", tr, func() any { return new(engine.Trace) }, store.KindTrace},
		{"facts.yaml", storetest.NewFacts("example.com", "count the stars"), func() any { return new(engine.Facts) }, store.KindFacts},
		{"experience.yaml", storetest.NewExperience("example.com", "count the stars"), func() any { return new(engine.Experience) }, store.KindExperience},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := store.Marshal(tc.v)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, tc.name, b)
			if !bytes.HasSuffix(b, []byte("\n")) || bytes.HasSuffix(b, []byte("\n\n")) {
				t.Errorf("want exactly one trailing newline")
			}
			if bytes.Contains(b, []byte("+01:00")) {
				t.Errorf("a time was not written in UTC:\n%s", b)
			}
			back := tc.new()
			if err := store.Unmarshal(b, back, tc.kind); err != nil {
				t.Fatal(err)
			}
			again, err := store.Marshal(back)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(again, b) {
				t.Errorf("decode + encode changed the bytes:\n%s\nvs\n%s", again, b)
			}
		})
	}
}

func TestUnmarshalStrict(t *testing.T) {
	deep := strings.Repeat("[", store.MaxDepth+2) + strings.Repeat("]", store.MaxDepth+2)
	for _, tc := range []struct {
		file, data, want string
	}{
		{file: "unknown_field.yaml", want: "colour"},
		{file: "two_documents.yaml", want: "more than one YAML document"},
		{file: "anchor.yaml", want: "anchors and aliases"},
		{file: "alias_bomb.yaml", want: "anchors and aliases"},
		{file: "wrong_type.yaml", want: "cannot unmarshal"},
		{file: "not_yaml.yaml", want: "did not find"},
		{file: "empty.yaml", want: "empty"},
		{data: "selectors: " + deep, want: "nested deeper"},
		{data: "intent: " + strings.Repeat("x", store.MaxFactsBytes), want: "over the facts cap"},
	} {
		name := tc.file
		data := []byte(tc.data)
		if tc.file != "" {
			data = mustRead(t, filepath.Join("testdata", "bad", tc.file))
		} else {
			name = tc.want
		}
		t.Run(name, func(t *testing.T) {
			var f engine.Facts
			err := store.Unmarshal(data, &f, store.KindFacts)
			if !errors.Is(err, engine.ErrCorrupt) {
				t.Fatalf("err = %v, want ErrCorrupt", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %q, want it to mention %q", err, tc.want)
			}
		})
	}
}

// TestBadFilesInTree: a bad file is reported with its path and what to do,
// is never reset, and does not stop the rest of the tree from loading.
func TestBadFilesInTree(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "k")
	if _, err := store.Init(ctx, dir); err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	good := storetest.NewFacts("example.com", "forks")
	if _, err := s.PutFacts(ctx, good); err != nil {
		t.Fatal(err)
	}
	bad := []string{"unknown_field", "two_documents", "anchor", "alias_bomb", "wrong_type", "not_yaml", "empty", "no_format", "future_format", "wrong_place"}
	for _, name := range bad {
		key := strings.ReplaceAll(name, "_", "-")
		p := filepath.Join(dir, "facts", "example.com", key+".yaml")
		if err := os.WriteFile(p, mustRead(t, filepath.Join("testdata", "bad", name+".yaml")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	big := filepath.Join(dir, "facts", "example.com", "oversize.yaml")
	if err := os.WriteFile(big, bytes.Repeat([]byte("#"), store.MaxFactsBytes+1), 0o644); err != nil {
		t.Fatal(err)
	}
	keys, err := s.FactsKeys(ctx, "example.com")
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != len(bad)+2 {
		t.Errorf("FactsKeys = %v: want every file listed, bad ones too", keys)
	}
	for _, k := range append(keys, "oversize") {
		f, err := s.Facts(ctx, "example.com", k)
		if k == "forks" {
			if err != nil || f.Intent != "forks" {
				t.Errorf("the good file next to bad ones: %v", err)
			}
			continue
		}
		if !errors.Is(err, engine.ErrCorrupt) {
			t.Errorf("Facts(%s): err = %v, want ErrCorrupt", k, err)
			continue
		}
		for _, want := range []string{"facts/example.com/" + k + ".yaml", "fix or delete the file", "pem check"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("Facts(%s): error %q does not say %q", k, err, want)
			}
		}
	}
	// Never silently reset: the bytes are still there.
	if got := mustRead(t, filepath.Join(dir, "facts", "example.com", "anchor.yaml")); !bytes.Equal(got, mustRead(t, "testdata/bad/anchor.yaml")) {
		t.Error("a bad file was rewritten")
	}
	// The engine still answers for the good entry (reading only its own
	// files), and a look over the whole domain warns of every bad file.
	eng := engine.New(s)
	r, err := eng.Query(ctx, "https://example.com/a/b", "forks")
	if err != nil {
		t.Fatal(err)
	}
	if r.IntentKey != "forks" {
		t.Errorf("Query next to bad files = %s; want forks", r.IntentKey)
	}
	l, err := eng.List(ctx, engine.ListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if l.Total != 1 || len(l.Warnings) < len(bad) {
		t.Errorf("List next to bad files = %d entries, %d warnings; want 1 and a warning per bad file", l.Total, len(l.Warnings))
	}
	r, err = eng.Query(ctx, "https://example.com/a/b", "anchor")
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Warnings) == 0 || !strings.Contains(strings.Join(r.Warnings, " "), "anchor.yaml") {
		t.Errorf("Query of a bad entry: warnings %q, want one naming anchor.yaml", r.Warnings)
	}
	errs := s.Check(ctx)
	if len(errs) != len(bad)+1 {
		t.Errorf("Check found %d problems, want %d: %v", len(errs), len(bad)+1, errs)
	}
	for _, err := range errs {
		if !errors.Is(err, engine.ErrCorrupt) || !strings.Contains(err.Error(), "facts/example.com/") {
			t.Errorf("Check: %v: want ErrCorrupt naming the path", err)
		}
	}
}

func TestWriteOverCap(t *testing.T) {
	s := newTree(t)
	ctx := context.Background()
	f := storetest.NewFacts("example.com", "stars")
	f.InteractionHints = []string{strings.Repeat("h", store.MaxFactsBytes)}
	if _, err := s.PutFacts(ctx, f); !errors.Is(err, engine.ErrTooLarge) {
		t.Errorf("PutFacts over the cap: err = %v, want ErrTooLarge", err)
	}
	tr := storetest.NewTrace("example.com", "stars", t0, 1)
	tr.Steps[0].Result = strings.Repeat("r", store.MaxTraceBytes)
	if _, err := s.PutTrace(ctx, tr); !errors.Is(err, engine.ErrTooLarge) {
		t.Errorf("PutTrace over the cap: err = %v, want ErrTooLarge", err)
	}
	if ds, _ := s.Domains(ctx); len(ds) != 0 {
		t.Errorf("refused writes left %v", ds)
	}
}

// TestResaveKeepsFile: PutFacts/PutExperience of unchanged content leave the
// file's bytes and mtime alone.
func TestResaveKeepsFile(t *testing.T) {
	s := newTree(t)
	ctx := context.Background()
	f := storetest.NewFacts("example.com", "stars")
	x := storetest.NewExperience("example.com", "stars")
	for _, put := range []func() (string, error){
		func() (string, error) { return s.PutFacts(ctx, f) },
		func() (string, error) { return s.PutExperience(ctx, x) },
	} {
		rel, err := put()
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(s.Root(), rel)
		old := time.Now().Add(-time.Hour).Truncate(time.Second)
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
		before := mustRead(t, p)
		if _, err := put(); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if !fi.ModTime().Equal(old) {
			t.Errorf("%s: re-saving unchanged content rewrote the file (mtime %v)", rel, fi.ModTime())
		}
		if !bytes.Equal(mustRead(t, p), before) {
			t.Errorf("%s: bytes changed", rel)
		}
	}
}
