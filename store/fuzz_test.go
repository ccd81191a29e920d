package store_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store"
)

// FuzzUnmarshal: the strict reader never panics, every refusal is
// ErrCorrupt, and whatever it accepts re-encodes canonically (decode +
// encode is a fixed point). Seeds: testdata/fuzz/FuzzUnmarshal, plus the
// golden and bad files.
func FuzzUnmarshal(f *testing.F) {
	for _, dir := range []string{"testdata/golden", "testdata/bad"} {
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				f.Fatal(err)
			}
			for _, k := range []string{store.KindTrace, store.KindFacts, store.KindExperience, store.KindConfig} {
				f.Add(b, k)
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, kind string) {
		var v any
		switch kind {
		case store.KindTrace:
			v = new(engine.Trace)
		case store.KindExperience:
			v = new(engine.Experience)
		case store.KindConfig:
			v = new(engine.Config)
		default:
			kind, v = store.KindFacts, new(engine.Facts)
		}
		if err := store.Unmarshal(data, v, kind); err != nil {
			if !errors.Is(err, engine.ErrCorrupt) {
				t.Fatalf("refusal is not ErrCorrupt: %v", err)
			}
			return
		}
		b1, err := store.Marshal(v)
		if err != nil {
			return // e.g. a time.Time outside RFC 3339's years; never written by pem
		}
		w := newOf(v)
		if err := store.Unmarshal(b1, w, kind); err != nil {
			if len(b1) > store.MaxBytes(kind) {
				return // canonical form can be longer than the input
			}
			t.Fatalf("canonical bytes do not read back: %v\n%s", err, b1)
		}
		b2, err := store.Marshal(w)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b1, b2) {
			t.Fatalf("not a fixed point:\n%s\nvs\n%s", b1, b2)
		}
	})
}

func newOf(v any) any {
	switch v.(type) {
	case *engine.Trace:
		return new(engine.Trace)
	case *engine.Experience:
		return new(engine.Experience)
	case *engine.Config:
		return new(engine.Config)
	}
	return new(engine.Facts)
}
