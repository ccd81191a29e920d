package store

import (
	"bytes"
	"encoding/gob"
	"math/rand"
	"reflect"
	"testing"
	"time"

	"github.com/pemdev/pem/engine"
)

// TestExperienceBinRoundTrip: every field of generated experiences (edge
// strings, nil and empty slices and maps, nil map values, digests) comes
// back DeepEqual; a time outside UTC is declined; the YAML decode of what
// Marshal wrote comes back from the codec as it came from the YAML.
func TestExperienceBinRoundTrip(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	for i := 0; i < 600; i++ {
		x := randExperience(r, func() string { return edge(r) })
		switch i % 5 {
		case 1:
			x.Evidence, x.TaskTypes, x.Selectors = []engine.Evidence{}, []string{}, map[string]*engine.SelectorStats{}
		case 2:
			x.Patterns = map[string]*engine.Counts{"/nil": nil}
			x.Selectors = map[string]*engine.SelectorStats{"#nil": nil}
		case 3:
			x.Answers = []engine.Observed{{Value: "v", Reads: []engine.AnswerRead{}}}
		}
		b, ok := appendExperienceBin(nil, x)
		if !ok {
			t.Fatalf("record %d: declined", i)
		}
		got, ok := decodeExperienceBin(b)
		if !ok {
			t.Fatalf("record %d: its own encoding did not decode", i)
		}
		unNaN(got)
		unNaN(x)
		if !reflect.DeepEqual(got, x) {
			t.Fatalf("record %d came back different:\n%#v\nwant\n%#v", i, got, x)
		}
		// Through the YAML, as the query path caches it.
		if y, err := Marshal(x); err == nil {
			var fromYAML engine.Experience
			if Unmarshal(y, &fromYAML, KindExperience) == nil {
				b, ok := appendExperienceBin(nil, &fromYAML)
				if !ok {
					continue // a time the YAML kept outside UTC
				}
				back, ok := decodeExperienceBin(b)
				unNaN(back)
				unNaN(&fromYAML)
				if !ok || !reflect.DeepEqual(back, &fromYAML) {
					t.Fatalf("record %d: the YAML's decode came back different from the codec", i)
				}
			}
		}
	}
	x := benchExperience()
	x.LastSuccessAt = x.LastSuccessAt.In(time.FixedZone("CET", 3600))
	if _, ok := appendExperienceBin(nil, x); ok {
		t.Fatal("a time outside UTC was encoded (it would come back in UTC)")
	}
}

// TestExperienceBinDamaged: every truncation and many byte flips of a
// valid encoding are refused or decode to some value, never panic; trailing
// bytes are refused.
func TestExperienceBinDamaged(t *testing.T) {
	x := benchExperience()
	x.Digest = &engine.Digest{Sessions: []string{"s1"}, Patterns: map[string]*engine.Counts{"/a": {OK: 1}}}
	b, ok := appendExperienceBin(nil, x)
	if !ok {
		t.Fatal("declined")
	}
	for n := 0; n < len(b); n++ {
		if _, ok := decodeExperienceBin(b[:n]); ok {
			t.Fatalf("a truncation to %d of %d bytes decoded", n, len(b))
		}
	}
	if _, ok := decodeExperienceBin(append(bytes.Clone(b), 0)); ok {
		t.Fatal("trailing bytes were accepted")
	}
	r := rand.New(rand.NewSource(3))
	for i := 0; i < 3000; i++ {
		c := bytes.Clone(b)
		for k := r.Intn(3) + 1; k > 0; k-- {
			c[r.Intn(len(c))] = byte(r.Intn(256))
		}
		decodeExperienceBin(c) // must not panic
	}
	// A huge length must not allocate for it.
	if _, ok := decodeExperienceBin([]byte{2, 0, 0xff, 0xff, 0xff, 0xff, 0x0f}); ok {
		t.Fatal("a length past the bytes left decoded")
	}
}

// BenchmarkDecodeExperience: the codec against a gob decoder per value
// (what the decoded cache did before), on the same record in the same run.
func BenchmarkDecodeExperience(b *testing.B) {
	x := benchExperience()
	var g bytes.Buffer
	if err := gob.NewEncoder(&g).Encode(x); err != nil {
		b.Fatal(err)
	}
	bin, ok := appendExperienceBin(nil, x)
	if !ok {
		b.Fatal("declined")
	}
	b.Run("gob", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			var v engine.Experience
			if err := gob.NewDecoder(bytes.NewReader(g.Bytes())).Decode(&v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("binary", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, ok := decodeExperienceBin(bin); !ok {
				b.Fatal("did not decode")
			}
		}
	})
}
