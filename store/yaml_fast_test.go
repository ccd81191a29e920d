package store

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/pemdev/pem/engine"
)

// slowUnmarshal is the reference decode: the node pass for the checks, then
// a second parse with yaml's own KnownFields.
func slowUnmarshal(data []byte, v any) error {
	var doc, extra yaml.Node
	d := yaml.NewDecoder(bytes.NewReader(data))
	if err := d.Decode(&doc); err != nil {
		return err
	}
	if err := d.Decode(&extra); err == nil {
		return fmt.Errorf("more than one document")
	}
	if err := checkNode(&doc, 0); err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	return dec.Decode(v)
}

var tricky = []string{"", "plain", "two\nlines: with a colon", "yes", "no", "null", "~", "1e3", "0x1F", "-", "- item",
	"2025-03-14T09:26:53Z", "a: b", "#not a comment", "'quoted'", "\"dq\"", "tab\there", "trailing space ",
	" leading", "ünïcödé ✓", strings.Repeat("long words here ", 12), "a\n\nb\n", "line\n", "{flow}", "[x]", "*star", "&amp",
	"div > a[href*='x']", "100%", "@at", "`tick`", "%percent", "!bang", "|pipe", ">gt"}

func randStr(r *rand.Rand) string { return tricky[r.Intn(len(tricky))] }

func randTime(r *rand.Rand) time.Time {
	if r.Intn(5) == 0 {
		return time.Time{}
	}
	return time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(r.Int63n(int64(400 * 24 * time.Hour))))
}

func randRecords(r *rand.Rand) []any {
	t := &engine.Trace{Format: 1, ID: "01JNXCDFG0CPYQ18HXM016PSGG", Writer: randStr(r), Session: randStr(r), Task: randStr(r),
		Intent: randStr(r), IntentKey: "k", URL: randStr(r), Domain: "example.com", Outcome: engine.Success, StartedAt: randTime(r),
		DurationMs: r.Int63n(1e6)}
	for i := 0; i < r.Intn(4); i++ {
		t.Steps = append(t.Steps, engine.Step{Seq: i + 1, Action: "click", Selector: randStr(r), Fallbacks: []string{randStr(r)},
			Value: randStr(r), URL: randStr(r), OK: r.Intn(2) == 0, Error: randStr(r)})
	}
	t.Result.Answer = randStr(r)
	if r.Intn(2) == 0 {
		t.Result.Extracted = map[string]string{randStr(r): randStr(r), "k": randStr(r)}
	}
	x := &engine.Experience{Format: 1, Domain: "example.com", Intent: randStr(r), IntentKey: "k"}
	for i := 0; i < r.Intn(6); i++ {
		tr := *t
		tr.ID = fmt.Sprintf("01JNXCDFG0CPYQ18HXM016PS%02d", i)
		tr.StartedAt = randTime(r)
		tr.Session = randStr(r)
		x.Fold(&tr)
	}
	f := &engine.Facts{Format: 1, Domain: "example.com", Intent: randStr(r), IntentKey: "k", Status: engine.Candidate,
		URLPatterns: []string{randStr(r)}, Steps: t.Steps, InteractionHints: []string{randStr(r), randStr(r)},
		AntiPatterns: []string{randStr(r)}, Selectors: map[string]engine.Selector{randStr(r): {Primary: randStr(r), Fallbacks: []string{randStr(r)}, Stability: r.Float64()}}}
	f.Provenance.FirstSeen, f.Provenance.LastVerified = randTime(r), randTime(r)
	f.History = []engine.Transition{{From: engine.Hypothesis, To: engine.Candidate, At: randTime(r), Reason: randStr(r)}}
	return []any{t, x, f}
}

// TestMarshalFastPathMatches: the one-pass encoding gives exactly the bytes
// of the canonicalized node path, and non-UTC times take the node path.
func TestMarshalFastPathMatches(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for i := 0; i < 300; i++ {
		for _, v := range randRecords(r) {
			if !utcOnly(reflect.ValueOf(v), 0) {
				t.Fatalf("record %d (%T) should qualify for the fast path", i, v)
			}
			fast, err := encodeYAML(v)
			if err != nil {
				t.Fatal(err)
			}
			slow, err := marshalNode(v)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(fast, slow) {
				t.Fatalf("record %d (%T): one-pass bytes differ from the canonical ones:\n%s\n---\n%s", i, v, fast, slow)
			}
		}
	}
	tr := &engine.Trace{Format: 1, StartedAt: time.Date(2025, 3, 1, 10, 0, 0, 0, time.FixedZone("CET", 3600))}
	if utcOnly(reflect.ValueOf(tr), 0) {
		t.Fatal("a time in CET qualified for the one-pass encoding")
	}
	b, err := Marshal(tr)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte("2025-03-01T09:00:00Z")) {
		t.Fatalf("the time was not written in UTC:\n%s", b)
	}
}

// TestUnmarshalMatchesKnownFieldsDecoder: the one-parse decode accepts and
// refuses the same documents as yaml's KnownFields decoder and gives the
// same values, on valid records, the bad files, and records with an
// unknown key inserted at every line.
func TestUnmarshalMatchesKnownFieldsDecoder(t *testing.T) {
	type kind struct {
		name string
		new  func() any
	}
	kinds := []kind{{KindTrace, func() any { return new(engine.Trace) }}, {KindExperience, func() any { return new(engine.Experience) }},
		{KindFacts, func() any { return new(engine.Facts) }}}
	var inputs [][]byte
	r := rand.New(rand.NewSource(2))
	for i := 0; i < 30; i++ {
		for _, v := range randRecords(r) {
			b, err := Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			inputs = append(inputs, b)
			lines := strings.Split(string(b), "\n")
			for j := 0; j < len(lines); j++ {
				indent := len(lines[j]) - len(strings.TrimLeft(lines[j], " -"))
				mut := append(append(append([]string{}, lines[:j]...), strings.Repeat(" ", indent)+"bogus_field: 1"), lines[j:]...)
				inputs = append(inputs, []byte(strings.Join(mut, "\n")))
			}
			inputs = append(inputs, bytes.Replace(b, []byte("format: 1"), []byte("format: {a: 1}"), 1),
				bytes.Replace(b, []byte("domain:"), []byte("<<: {x: 1}\ndomain:"), 1),
				bytes.Replace(b, []byte("domain:"), []byte("domain: dup\ndomain:"), 1))
		}
	}
	for _, dir := range []string{"testdata/golden", "testdata/bad"} {
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			inputs = append(inputs, b)
		}
	}
	refused := 0
	for i, in := range inputs {
		for _, k := range kinds {
			a, b := k.new(), k.new()
			errA := Unmarshal(in, a, k.name)
			errB := slowUnmarshal(in, b)
			if (errA == nil) != (errB == nil) {
				t.Fatalf("input %d as %s: one-parse decode: %v; KnownFields decoder: %v\n%s", i, k.name, errA, errB, in)
			}
			if errA == nil && !reflect.DeepEqual(a, b) {
				t.Fatalf("input %d as %s: values differ:\n%+v\n%+v", i, k.name, a, b)
			}
			if errA != nil {
				refused++
			}
		}
	}
	if refused == 0 || refused == len(inputs)*len(kinds) {
		t.Fatalf("%d of %d decodes refused: the inputs do not exercise both sides", refused, len(inputs)*len(kinds))
	}
}
