package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pemdev/pem/engine"
)

// fillRandom sets every field reachable from v (a settable value): strings
// from s, numbers, bools and times at random; slices, maps and pointers
// nil, empty or filled when full is false, always filled (non-zero all the
// way down) when it is true. Floats are never NaN (DeepEqual).
func fillRandom(r *rand.Rand, v reflect.Value, s func() string, full bool) {
	switch v.Kind() {
	case reflect.String:
		str := s()
		for full && str == "" {
			str = s()
		}
		v.SetString(str)
	case reflect.Bool:
		v.SetBool(full || r.Intn(2) == 0)
	case reflect.Int, reflect.Int64, reflect.Int32:
		n := r.Int63n(1<<40) - 1<<20
		if full && n == 0 {
			n = 7
		}
		v.SetInt(n)
	case reflect.Float64:
		f := []float64{1, 2.5, 0.1, 1e21, 1e-7, -3.25, math.Inf(1), math.Inf(-1), 1.0 / 3, 0}[r.Intn(9+b2i(!full))]
		v.SetFloat(f)
	case reflect.Struct:
		if v.Type() == reflect.TypeOf(time.Time{}) {
			t := edgeTime(r)
			for full && t.IsZero() {
				t = edgeTime(r)
			}
			v.Set(reflect.ValueOf(t))
			return
		}
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				fillRandom(r, v.Field(i), s, full)
			}
		}
	case reflect.Pointer:
		if !full && r.Intn(3) == 0 {
			return
		}
		p := reflect.New(v.Type().Elem())
		fillRandom(r, p.Elem(), s, full)
		v.Set(p)
	case reflect.Slice:
		n := r.Intn(4) - 1 // -1: nil
		if full {
			n = 1 + r.Intn(3)
		}
		if n < 0 {
			return
		}
		sl := reflect.MakeSlice(v.Type(), n, n)
		for i := 0; i < n; i++ {
			fillRandom(r, sl.Index(i), s, full)
		}
		v.Set(sl)
	case reflect.Map:
		n := r.Intn(4) - 1
		if full {
			n = 1 + r.Intn(3)
		}
		if n < 0 {
			return
		}
		m := reflect.MakeMap(v.Type())
		for i := 0; i < n; i++ {
			k := reflect.New(v.Type().Key()).Elem()
			fillRandom(r, k, s, full)
			e := reflect.New(v.Type().Elem()).Elem()
			fillRandom(r, e, s, full)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	default:
		panic("fillRandom: no case for " + v.Type().String())
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// zeroField returns the path of a field left at its zero value under v
// ("" when none is): what fillRandom's full mode must never leave.
func zeroField(v reflect.Value, path string) string {
	if v.IsZero() {
		return path
	}
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == reflect.TypeOf(time.Time{}) {
			return ""
		}
		for i := 0; i < v.NumField(); i++ {
			if z := zeroField(v.Field(i), path+"."+v.Type().Field(i).Name); z != "" {
				return z
			}
		}
	case reflect.Pointer:
		return zeroField(v.Elem(), path)
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			if z := zeroField(v.Index(i), path+"[]"); z != "" {
				return z
			}
		}
	case reflect.Map:
		it := v.MapRange()
		for it.Next() {
			if z := zeroField(it.Value(), path+"{}"); z != "" {
				return z
			}
		}
	}
	return ""
}

// TestFactsBinRoundTrip: facts with every field filled by reflection (so a
// field the codec forgot comes back zero and fails), and with nil, empty
// and absent parts at random, come back DeepEqual; so does the YAML decode
// of what Marshal wrote of them (what the query path caches); a time
// outside UTC is declined.
func TestFactsBinRoundTrip(t *testing.T) {
	if !factsLayoutOK() {
		t.Fatal("the facts codec is off: factsLayout does not match engine's types (a field was added or changed: add it to factscodec.go)")
	}
	r := rand.New(rand.NewSource(11))
	strs := []func() string{func() string { return edge(r) }, func() string { return randStr(r) }}
	yamlChecked := 0
	for i := 0; i < 1000; i++ {
		f := new(engine.Facts)
		full := i%2 == 0
		fillRandom(r, reflect.ValueOf(f).Elem(), strs[i%4/2], full)
		if full {
			if z := zeroField(reflect.ValueOf(f).Elem(), "Facts"); z != "" {
				t.Fatalf("test setup: fillRandom left %s zero", z)
			}
		}
		b, ok := appendFactsBin(nil, f)
		if !ok {
			t.Fatalf("record %d: declined", i)
		}
		got, ok := decodeFactsBin(b)
		if !ok {
			t.Fatalf("record %d: its own encoding did not decode", i)
		}
		if !reflect.DeepEqual(got, f) {
			t.Fatalf("record %d came back different:\n%#v\nwant\n%#v", i, got, f)
		}
		// Through the YAML, as the query path caches it.
		y, err := Marshal(f)
		if err != nil {
			continue
		}
		var fromYAML engine.Facts
		if Unmarshal(y, &fromYAML, KindFacts) != nil {
			continue
		}
		b, ok = appendFactsBin(nil, &fromYAML)
		if !ok {
			continue // a time the YAML kept outside UTC
		}
		back, ok := decodeFactsBin(b)
		if !ok || !reflect.DeepEqual(back, &fromYAML) {
			t.Fatalf("record %d: the YAML's decode came back different from the codec:\n%#v\nwant\n%#v", i, back, &fromYAML)
		}
		yamlChecked++
	}
	if yamlChecked < 300 {
		t.Fatalf("only %d records went through the YAML: the test checks too little", yamlChecked)
	}
	for _, set := range []func(f *engine.Facts, at time.Time){
		func(f *engine.Facts, at time.Time) { f.Provenance.FirstSeen = at },
		func(f *engine.Facts, at time.Time) { f.Provenance.LastVerified = at },
		func(f *engine.Facts, at time.Time) { f.History = []engine.Transition{{At: at}} },
		func(f *engine.Facts, at time.Time) { f.Answers = []engine.Answer{{ObservedAt: at}} },
	} {
		f := &engine.Facts{Format: 1}
		set(f, time.Date(2025, 1, 1, 0, 0, 0, 0, time.FixedZone("CET", 3600)))
		if _, ok := appendFactsBin(nil, f); ok {
			t.Fatal("a time outside UTC was encoded (it would come back in UTC)")
		}
	}
}

// TestFactsBinDamaged: no truncation of a valid encoding decodes; trailing
// bytes are refused; random byte flips never panic; a huge length
// allocates nothing.
func TestFactsBinDamaged(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	f := new(engine.Facts)
	fillRandom(r, reflect.ValueOf(f).Elem(), func() string { return randStr(r) }, true)
	b, ok := appendFactsBin(nil, f)
	if !ok {
		t.Fatal("declined")
	}
	for n := 0; n < len(b); n++ {
		if _, ok := decodeFactsBin(b[:n]); ok {
			t.Fatalf("a truncation to %d of %d bytes decoded", n, len(b))
		}
	}
	if _, ok := decodeFactsBin(append(bytes.Clone(b), 0)); ok {
		t.Fatal("trailing bytes were accepted")
	}
	for i := 0; i < 3000; i++ {
		c := bytes.Clone(b)
		for k := r.Intn(3) + 1; k > 0; k-- {
			c[r.Intn(len(c))] = byte(r.Intn(256))
		}
		decodeFactsBin(c) // must not panic
	}
	if _, ok := decodeFactsBin([]byte{2, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f}); ok {
		t.Fatal("a length past the bytes left decoded")
	}
}

// FuzzDecodeFactsBin: the decoder never panics on any input, and what it
// accepts encodes and decodes again to the same value.
func FuzzDecodeFactsBin(f *testing.F) {
	r := rand.New(rand.NewSource(9))
	for i := 0; i < 8; i++ {
		v := new(engine.Facts)
		fillRandom(r, reflect.ValueOf(v).Elem(), func() string { return randStr(r) }, i%2 == 0)
		if b, ok := appendFactsBin(nil, v); ok {
			f.Add(b)
		}
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		v, ok := decodeFactsBin(data)
		if !ok {
			return
		}
		b, ok := appendFactsBin(nil, v)
		if !ok {
			t.Fatal("a decoded value was declined by the encoder")
		}
		w, ok := decodeFactsBin(b)
		if !ok {
			t.Fatal("a re-encoded value did not decode")
		}
		unNaNFacts(v)
		unNaNFacts(w)
		if !reflect.DeepEqual(v, w) {
			t.Fatalf("not the same value after a re-encode:\n%#v\n%#v", v, w)
		}
	})
}

// unNaNFacts replaces NaN stabilities (a fuzzed input may hold them) by a
// number DeepEqual can compare.
func unNaNFacts(f *engine.Facts) {
	for k, s := range f.Selectors {
		if math.IsNaN(s.Stability) {
			s.Stability = -12345
			f.Selectors[k] = s
		}
	}
}

// BenchmarkDecodeFacts: the codec against the strict YAML decode of the
// same facts (treegen's shape), in the same run.
func BenchmarkDecodeFacts(b *testing.B) {
	f := &engine.Facts{Format: 1, Domain: "site0000.example", Intent: "find item 3 details", IntentKey: "find-item-3-details",
		TaskType: "lookup", URLPatterns: []string{"/section3/item/*"}, Status: engine.Verified,
		Selectors: map[string]engine.Selector{
			"tab":   {Primary: "#tab-3", Fallbacks: []string{"[role=tab]:nth-child(2)"}, Stability: 0.95},
			"value": {Primary: ".details .value", Fallbacks: []string{"dd.value"}, Stability: 0.9},
		},
		Steps: []engine.Step{
			{Seq: 1, Action: "navigate", URL: "https://site0000.example/section3/item/1003", OK: true},
			{Seq: 2, Action: "click", Selector: "#tab-3", OK: true},
			{Seq: 3, Action: "get_text", Selector: ".details .value", OK: true},
		},
		ExtractionQuery:  "the value in the details panel",
		InteractionHints: []string{"the details tab loads lazily: wait for .details"},
		KnownBlockers:    []engine.Blocker{{Type: "overlay_blocked", Selector: "#cookie-banner", Action: "click", Note: "accept cookies first"}},
		AntiPatterns:     []string{".old-details"},
		Provenance: engine.Provenance{Sources: []string{"treegen"}, FirstSeen: time.Date(2025, 5, 2, 12, 0, 0, 0, time.UTC),
			LastVerified: time.Date(2025, 5, 31, 12, 0, 0, 0, time.UTC)},
	}
	f.Revision = f.ContentHash()
	y, err := Marshal(f)
	if err != nil {
		b.Fatal(err)
	}
	bin, ok := appendFactsBin(nil, f)
	if !ok {
		b.Fatal("declined")
	}
	b.Logf("YAML %d bytes, binary %d", len(y), len(bin))
	b.Run("yaml", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			var v engine.Facts
			if err := Unmarshal(y, &v, KindFacts); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("binary", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, ok := decodeFactsBin(bin); !ok {
				b.Fatal("did not decode")
			}
		}
	})
	b.Run("clone", func(b *testing.B) { // what Facts adds to either
		b.ReportAllocs()
		for range b.N {
			_ = f.Clone()
		}
	})
}

// TestFingerprintAsFmt: the hand-written fingerprint is fmt's of session
// 7 byte for byte (cache files written before it stay valid), also for a
// tag that needs strconv's quoting.
func TestFingerprintAsFmt(t *testing.T) {
	old := func(labelled ...any) string {
		var b strings.Builder
		seen := map[reflect.Type]bool{}
		var walk func(t reflect.Type)
		walk = func(t reflect.Type) {
			fmt.Fprintf(&b, "%s/%s;", t.String(), t.Kind())
			if seen[t] {
				return
			}
			seen[t] = true
			switch t.Kind() {
			case reflect.Pointer, reflect.Slice, reflect.Array:
				walk(t.Elem())
			case reflect.Map:
				walk(t.Key())
				walk(t.Elem())
			case reflect.Struct:
				for i := 0; i < t.NumField(); i++ {
					f := t.Field(i)
					fmt.Fprintf(&b, "%s %q ", f.Name, f.Tag)
					walk(f.Type)
				}
			}
		}
		for _, v := range labelled {
			if label, ok := v.(string); ok {
				b.WriteString(label)
				continue
			}
			walk(reflect.TypeOf(v))
		}
		sum := sha256.Sum256([]byte(b.String()))
		return hex.EncodeToString(sum[:8])
	}
	type odd struct {
		A int `yaml:"a\\b" json:"é\t"`
		B map[string][]*odd
	}
	for _, c := range [][]any{
		{"experience:", new(engine.Experience), "summary:", new(engine.ExperienceSummary)},
		{"facts:", new(engine.Facts)},
		{"odd:", new(odd)},
	} {
		if got, want := fingerprint(c...), old(c...); got != want {
			t.Errorf("%v: fingerprint %s, fmt's %s", c[0], got, want)
		}
	}
}

// TestConfigBinRoundTrip: configs with every field filled by reflection
// (and nil or empty approval lists) come back DeepEqual; the defaults are
// part of the config cache files' fingerprint.
func TestConfigBinRoundTrip(t *testing.T) {
	if !configCodecOK() {
		t.Fatal("the config codec is off: engine.Config holds a kind configcodec.go does not encode")
	}
	r := rand.New(rand.NewSource(13))
	for i := 0; i < 500; i++ {
		var c engine.Config
		full := i%2 == 0
		fillRandom(r, reflect.ValueOf(&c).Elem(), func() string { return edge(r) }, full)
		if full {
			if z := zeroField(reflect.ValueOf(&c).Elem(), "Config"); z != "" {
				t.Fatalf("test setup: fillRandom left %s zero", z)
			}
		}
		b, ok := appendConfigBin(nil, c)
		if !ok {
			t.Fatalf("config %d: declined", i)
		}
		got, ok := decodeConfigBin(b)
		if !ok || !reflect.DeepEqual(got, c) {
			t.Fatalf("config %d came back different (%v):\n%#v\nwant\n%#v", i, ok, got, c)
		}
		for n := 0; n < len(b); n += 1 + n/8 {
			if _, ok := decodeConfigBin(b[:n]); ok {
				t.Fatalf("config %d: a truncation to %d of %d bytes decoded", i, n, len(b))
			}
		}
		if _, ok := decodeConfigBin(append(bytes.Clone(b), 0)); ok {
			t.Fatal("trailing bytes were accepted")
		}
	}
	def, _ := appendConfigBin(nil, engine.DefaultConfig())
	if configTypePrint() != fingerprint("config:", new(engine.Config), "defaults:"+string(def)) ||
		configTypePrint() == fingerprint("config:", new(engine.Config), "defaults:") {
		t.Fatal("the config cache files' fingerprint does not cover the defaults")
	}
}

// FuzzDecodeConfigBin: the reflection decoder never panics, and what it
// accepts encodes and decodes again to the same value.
func FuzzDecodeConfigBin(f *testing.F) {
	r := rand.New(rand.NewSource(17))
	for i := 0; i < 6; i++ {
		var c engine.Config
		fillRandom(r, reflect.ValueOf(&c).Elem(), func() string { return randStr(r) }, i%2 == 0)
		if b, ok := appendConfigBin(nil, c); ok {
			f.Add(b)
		}
	}
	if b, ok := appendConfigBin(nil, engine.DefaultConfig()); ok {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, ok := decodeConfigBin(data)
		if !ok {
			return
		}
		b, ok := appendConfigBin(nil, c)
		if !ok {
			t.Fatal("a decoded config was declined by the encoder")
		}
		d, ok := decodeConfigBin(b)
		if !ok {
			t.Fatal("a re-encoded config did not decode")
		}
		if !reflect.DeepEqual(unNaNConfig(c), unNaNConfig(d)) {
			t.Fatalf("not the same config after a re-encode:\n%#v\n%#v", c, d)
		}
	})
}

// unNaNConfig replaces NaN floats of the policy (a fuzzed input may hold
// them) by a number DeepEqual can compare.
func unNaNConfig(c engine.Config) engine.Config {
	v := reflect.ValueOf(&c.Policy).Elem()
	for i := 0; i < v.NumField(); i++ {
		if f := v.Field(i); f.Kind() == reflect.Float64 && math.IsNaN(f.Float()) {
			f.SetFloat(-12345)
		}
	}
	return c
}
