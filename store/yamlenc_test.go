package store

import (
	"bytes"
	"fmt"
	"math"
	"math/rand"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pemdev/pem/engine"
)

// edgeStrings are the scalars whose YAML form is not obvious: quoting
// (indicators, words and numbers that resolve to other types), blocks
// (line breaks, leading/trailing space), escapes (control, non-printable,
// 4-byte runes), and what the encoder does not model (invalid UTF-8, other
// line breaks, a byte-order mark, keep-chomped blocks).
var edgeStrings = append(slices.Clone(tricky),
	"\r", "a\rb", "a\r\nb", "nel\u0085", "ls\u2028x", "ps\u2029", "\uFEFFbom", "mid\uFEFFbom", "emoji 😀", "😀",
	"\x00", "nul\x00", "\x7f", "\x1b[0m", "bell\a", "\t", "\ttab", "tab\t", "a\n", "\n", "\n\n", "a\n\n", "a\n\n\n",
	" a\nb", "a \nb", "a\n b", "a\n\tb", "\na", "\n a", "a\nb\n", "x\n\ny", "---", "...", "--- x", "...x", "- ", "-",
	"-x", "? x", "?x", "?", ":x", ": x", ":", "a: b", "a:b", "a:", "a #b", "a#b", "#", "0o17", "0o9", "-0o7", "0b101",
	"0b2", "-0b1", "1_000", "_1", "12:30:45", "1:2", "1:60", "+1:30", "-1", "+1", "+", ".5", "1.", "1e3", "1E+3",
	"1e", "0x1F", "0xZZ", "0X1f", "-0x1", "yes", "on", "off", "y", "n", "Y", "No", "True", "TRUE", "tRUE", "NULL",
	"nUll", "<<", "<", "<a", ".inf", "+.inf", "-.Inf", ".nan", ".NaN", ".", "..", ".x", "2025-1-2", "2025-01-02",
	"2025-01-02 10:00:00", "2025-01-02T10:00:00Z", "2025-01-02t10:00:00Z", "2025-13-45", "20250102", "0", "00",
	"007", "-0", "1.5e-7", "123456789012345678901234567890", "9223372036854775808", "-9223372036854775809",
	"'", "''", "'a'", "\"", "\\", "\\n", "é", "\u00a0", "\u00a0nbsp", "ä\u00a0", "\u00ad", "\ufffe", "\uffff",
	"\ue000", "\ud7ff", "漢字", "a  b", "  ", " ", "a ", "=", "==", "~x", "~", "null", "Null", "%TAG", "!tag",
	"&anchor", "*alias", "|", ">", "`", "@", "{", "}", "[", "]", ",", "a,b", "a]", "a}", "{a: 1}", "[1, 2]",
	"\xff", "\xc3\x28", "bad\xe2\x28\xa1", strings.Repeat("x", 129), strings.Repeat("ab ", 60),
	strings.Repeat("line of text\n", 4), "trailing\n  ", "a\n  \nb", "\x85", "\xc2\x85")

func edge(r *rand.Rand) string {
	if r.Intn(8) == 0 {
		// Two at random, joined: contexts no list holds.
		return edgeStrings[r.Intn(len(edgeStrings))] + edgeStrings[r.Intn(len(edgeStrings))]
	}
	return edgeStrings[r.Intn(len(edgeStrings))]
}

func edgeTime(r *rand.Rand) time.Time {
	switch r.Intn(6) {
	case 0:
		return time.Time{}
	case 1:
		return time.Date(2025, 3, 14, 9, 26, 53, r.Intn(1e9), time.UTC)
	}
	return time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(r.Int63n(int64(400 * 24 * time.Hour))))
}

func edgeFloat(r *rand.Rand) float64 {
	return []float64{0, 1, 2.5, 0.1, 1234, 1e21, 1e-7, -3.25, 33.33, math.Inf(1), math.Inf(-1), math.NaN(), 1.0 / 3, 123456789.125}[r.Intn(14)]
}

// randExperience fills every field of an experience, strings from s.
func randExperience(r *rand.Rand, s func() string) *engine.Experience {
	x := &engine.Experience{Format: 1, Domain: s(), Intent: s(), IntentKey: s(), Attempts: r.Intn(100) - 5,
		Successes: r.Intn(50), Failures: r.Intn(50), AvgSteps: edgeFloat(r), AvgDurationMs: edgeFloat(r),
		LastSuccessAt: edgeTime(r), LastFailureAt: edgeTime(r)}
	if r.Intn(3) == 0 {
		x.Lessons = r.Intn(3)
	}
	for i := r.Intn(3); i > 0; i-- {
		x.TaskTypes = append(x.TaskTypes, s())
	}
	if r.Intn(2) == 0 {
		x.ByCategory = map[engine.FailureCategory]int{}
		for i := r.Intn(4); i >= 0; i-- {
			x.ByCategory[engine.FailureCategory(s())] = r.Intn(9)
		}
	}
	if r.Intn(2) == 0 {
		x.Patterns = map[string]*engine.Counts{}
		for i := r.Intn(4); i >= 0; i-- {
			x.Patterns[s()] = &engine.Counts{OK: r.Intn(9), Fail: r.Intn(9)}
		}
		// Keys with digit runs: the natural order.
		x.Patterns[fmt.Sprintf("/p/%d/x", r.Intn(200))] = &engine.Counts{OK: 1}
		x.Patterns[fmt.Sprintf("/p/%03d", r.Intn(200))] = &engine.Counts{Fail: 1}
	}
	if r.Intn(4) != 0 {
		x.Selectors = map[string]*engine.SelectorStats{}
		for i := r.Intn(6); i >= 0; i-- {
			x.Selectors[s()] = &engine.SelectorStats{OK: r.Intn(9), Fail: r.Intn(9), LastOK: edgeTime(r), LastFail: edgeTime(r)}
		}
		x.Selectors[fmt.Sprintf("#item-%d", r.Intn(20))] = &engine.SelectorStats{OK: 2}
		x.Selectors[fmt.Sprintf("li:nth-child(%d) > a", r.Intn(20))] = &engine.SelectorStats{Fail: 3}
	}
	for i := r.Intn(6); i > 0; i-- {
		ev := engine.Evidence{Trace: fmt.Sprintf("01JNXCDFG0CPYQ18HXM016PS%02d", i), At: edgeTime(r), Outcome: engine.Outcome(s())}
		if r.Intn(2) == 0 {
			ev.Trace = s()
		}
		if r.Intn(2) == 0 {
			ev.Category, ev.Session, ev.URLPattern, ev.Revision = engine.FailureCategory(s()), s(), s(), s()
		}
		if r.Intn(2) == 0 {
			ev.Steps, ev.DurationMs = r.Intn(30), r.Int63n(1e6)
		}
		if r.Intn(3) == 0 {
			ev.Verdict, ev.VerdictBy, ev.VerdictAt = engine.VerdictValue(s()), s(), edgeTime(r)
		}
		x.Evidence = append(x.Evidence, ev)
	}
	for i := r.Intn(3); i > 0; i-- {
		o := engine.Observed{Value: s()}
		if r.Intn(2) == 0 {
			o.SourceURL = s()
		}
		for j := r.Intn(3); j > 0; j-- {
			rd := engine.AnswerRead{Trace: s(), At: edgeTime(r)}
			if r.Intn(2) == 0 {
				rd.Session = s()
			}
			o.Reads = append(o.Reads, rd)
		}
		x.Answers = append(x.Answers, o)
	}
	if r.Intn(2) == 0 {
		d := &engine.Digest{Before: edgeTime(r), HalfLifeDays: edgeFloat(r), S: edgeFloat(r), F: edgeFloat(r),
			Traces: r.Intn(100), Successes: r.Intn(50), Failures: r.Intn(50), Steps: r.Int63n(500), DurationMs: r.Int63n(1e7),
			Streak: r.Intn(4), Newest: edgeTime(r), Judged: edgeTime(r), LastSuccessAt: edgeTime(r), LastFailureAt: edgeTime(r)}
		if r.Intn(2) == 0 {
			d.Gates, d.NoFault, d.Confirmed, d.Lessons = r.Intn(3), r.Intn(3), r.Intn(3), r.Intn(3)
			d.OpenGate, d.OpenWrong, d.OpenWrongRevision = engine.FailureCategory(s()), s(), s()
		}
		if r.Intn(2) == 0 {
			d.ByCategory = map[engine.FailureCategory]int{engine.FailureCategory(s()): 1, "selector_drift": 2}
			d.Patterns = map[string]*engine.Counts{s(): {OK: 1}, "/*": {Fail: 2}}
		}
		for i := r.Intn(3); i > 0; i-- {
			d.Sessions = append(d.Sessions, s())
			d.Recent = append(d.Recent, engine.Outcome(s()))
		}
		x.Digest = d
	}
	return x
}

// checkExperienceEncoding compares the hand-written encoder with yaml.v3
// on x; it reports whether the fast path took it.
func checkExperienceEncoding(t *testing.T, x *engine.Experience) bool {
	t.Helper()
	// What Marshal wrote before the hand-written encoder: yaml.v3, through
	// the node tree when a time is outside UTC.
	encode := encodeYAML
	if !utcOnly(reflect.ValueOf(x), 0) {
		encode = marshalNode
	}
	want, err := encode(x)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := marshalExperience(x)
	if ok && !bytes.Equal(got, want) {
		t.Fatalf("the hand-written encoder differs from yaml.v3 for %#v:\n%s\n--- yaml.v3:\n%s", x, got, want)
	}
	m, err := Marshal(x)
	if err != nil {
		t.Fatal(err)
	}
	if ok && !bytes.Equal(m, want) {
		t.Fatalf("Marshal did not use the hand-written encoder's bytes:\n%s\n--- yaml.v3:\n%s", m, want)
	}
	if !ok {
		// yaml.v3's path; byte equality cannot be asked of it when its own
		// key order is not strict (it then depends on the map's order), so
		// both must decode to the same value.
		var a, b engine.Experience
		errA, errB := Unmarshal(m, &a, KindExperience), Unmarshal(want, &b, KindExperience)
		unNaN(&a)
		unNaN(&b)
		if (errA == nil) != (errB == nil) || errA == nil && !reflect.DeepEqual(a, b) {
			t.Fatalf("Marshal's fallback and yaml.v3 decode differently (%v, %v):\n%s\n--- yaml.v3:\n%s", errA, errB, m, want)
		}
	}
	return ok
}

// unNaN replaces NaN floats (never DeepEqual to themselves) with a sentinel.
func unNaN(x *engine.Experience) {
	for _, f := range []*float64{&x.AvgSteps, &x.AvgDurationMs} {
		if math.IsNaN(*f) {
			*f = -12345
		}
	}
	if d := x.Digest; d != nil {
		for _, f := range []*float64{&d.HalfLifeDays, &d.S, &d.F} {
			if math.IsNaN(*f) {
				*f = -12345
			}
		}
	}
}

// TestMarshalExperienceMatches: on generated experiences with every field
// set and edge strings everywhere, the hand-written encoder writes yaml.v3's
// bytes exactly, or declines; Marshal always gives yaml.v3's bytes.
func TestMarshalExperienceMatches(t *testing.T) {
	if !experienceLayoutOK() {
		t.Fatal("the experience encoder is off: its field table does not match engine's types (TestExperienceEncoderCoversFields)")
	}
	r := rand.New(rand.NewSource(19))
	fast, all := 0, 0
	for i := 0; i < 1500; i++ {
		var s func() string
		switch i % 3 {
		case 0: // every string an edge case: most records hold one the encoder declines
			s = func() string { return edge(r) }
		case 1: // mostly ordinary strings, some edge cases
			s = func() string {
				if r.Intn(12) == 0 {
					return edge(r)
				}
				return randStr(r)
			}
		default: // what consolidation writes: ids, patterns, selectors
			s = func() string {
				return []string{"success", "failure", "selector_drift", "s-1", "/*/*", "#stars", "div > a[href*='x']",
					"example.com", "count the stars", "count-the-stars", "01JP9ZMPT8ABYZR1S1G9JMY5HZ", "lookup", "r3"}[r.Intn(13)]
			}
		}
		all++
		if checkExperienceEncoding(t, randExperience(r, s)) {
			fast++
		}
	}
	// The comparison means something only if both paths ran often.
	if fast < all/3 || fast == all {
		t.Fatalf("the fast path took %d of %d records: the generator does not exercise both paths", fast, all)
	}
	t.Logf("fast path: %d of %d records", fast, all)

	// Each edge string alone in each string field of an otherwise plain
	// record, so that a string the encoder gets wrong cannot hide behind
	// another it declines.
	declined := 0
	for _, es := range edgeStrings {
		for field := 0; field < 12; field++ {
			x := &engine.Experience{Format: 1, Domain: "example.com", Intent: "i", IntentKey: "i", AvgSteps: 2.5,
				Evidence: []engine.Evidence{{Trace: "t", Outcome: engine.Success}}}
			switch field {
			case 0:
				x.Intent = es
			case 1:
				x.TaskTypes = []string{es, "b"}
			case 2:
				x.ByCategory = map[engine.FailureCategory]int{engine.FailureCategory(es): 1, "a": 2}
			case 3:
				x.Patterns = map[string]*engine.Counts{es: {OK: 1}, "/x": {}}
			case 4:
				x.Selectors = map[string]*engine.SelectorStats{es: {OK: 1}, "#a": {}}
			case 5:
				x.Evidence = []engine.Evidence{{Trace: es, Session: es, URLPattern: es}}
			case 6:
				x.Answers = []engine.Observed{{Value: es, SourceURL: es, Reads: []engine.AnswerRead{{Trace: es, Session: es}}}}
			case 7:
				x.Digest = &engine.Digest{Sessions: []string{es}, Recent: []engine.Outcome{engine.Outcome(es)}, OpenWrong: es}
			case 8:
				x.Digest = &engine.Digest{Patterns: map[string]*engine.Counts{es: {OK: 1}}, ByCategory: map[engine.FailureCategory]int{engine.FailureCategory(es): 1}}
			case 9:
				x.Evidence = []engine.Evidence{{Trace: "t", Outcome: engine.Outcome(es), Category: engine.FailureCategory(es), Revision: es, Verdict: engine.VerdictValue(es), VerdictBy: es}}
			case 10:
				x.Answers = []engine.Observed{{Value: es}}
			case 11:
				x.Domain, x.IntentKey = es, es
			}
			if !checkExperienceEncoding(t, x) {
				declined++
			}
		}
	}
	if declined == 0 || declined == len(edgeStrings)*12 {
		t.Fatalf("%d of %d single-edge records declined: the cases do not exercise both paths", declined, len(edgeStrings)*12)
	}
}

// TestMarshalExperienceDeclines: what the encoder does not model goes to
// yaml.v3, which Marshal then uses.
func TestMarshalExperienceDeclines(t *testing.T) {
	base := func() *engine.Experience {
		return &engine.Experience{Format: 1, Domain: "example.com", Intent: "i", IntentKey: "i"}
	}
	cases := map[string]func(x *engine.Experience){
		"invalid UTF-8 (yaml.v3 writes !!binary)": func(x *engine.Experience) { x.Intent = "\xff" },
		"a carriage return":                       func(x *engine.Experience) { x.Intent = "a\rb" },
		"a byte-order mark first":                 func(x *engine.Experience) { x.Intent = "\uFEFFx" },
		"a block that keeps its last breaks":      func(x *engine.Experience) { x.Intent = "a\n\n" },
		"a multi-line map key":                    func(x *engine.Experience) { x.Patterns = map[string]*engine.Counts{"a\nb": {}} },
		"a map key over 128 bytes":                func(x *engine.Experience) { x.Patterns = map[string]*engine.Counts{strings.Repeat("k", 129): {}} },
		"a nil map value":                         func(x *engine.Experience) { x.Selectors = map[string]*engine.SelectorStats{"#a": nil} },
		"a time outside UTC": func(x *engine.Experience) {
			x.LastSuccessAt = time.Date(2025, 3, 1, 10, 0, 0, 0, time.FixedZone("CET", 3600))
		},
	}
	for name, mod := range cases {
		x := base()
		mod(x)
		if _, ok := marshalExperience(x); ok {
			t.Errorf("%s: the hand-written encoder took it", name)
		}
		checkExperienceEncoding(t, x)
	}
	if _, ok := marshalExperience(base()); !ok {
		t.Fatal("a plain experience did not take the hand-written encoder")
	}
}

// TestExperienceEncoderCoversFields: the encoder's field table is every
// struct type an experience holds, field for field (name, type, yaml tag).
// A field added to engine.Experience (or a type it holds) fails here, and
// turns the encoder off until yamlenc.go writes it.
func TestExperienceEncoderCoversFields(t *testing.T) {
	seen := map[reflect.Type]bool{}
	var walk func(reflect.Type)
	walk = func(rt reflect.Type) {
		switch rt.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array:
			walk(rt.Elem())
		case reflect.Map:
			walk(rt.Key())
			walk(rt.Elem())
		case reflect.Struct:
			if rt == timeType || seen[rt] {
				return
			}
			seen[rt] = true
			for i := 0; i < rt.NumField(); i++ {
				walk(rt.Field(i).Type)
			}
		}
	}
	walk(reflect.TypeOf(engine.Experience{}))
	for rt := range seen {
		want, ok := experienceLayout[rt]
		if !ok {
			t.Errorf("%s is held by engine.Experience but not in yamlenc.go's experienceLayout", rt)
			continue
		}
		if got := layoutOf(rt); !slices.Equal(got, want) {
			t.Errorf("%s: its fields are\n%q\nbut yamlenc.go writes\n%q", rt, got, want)
		}
	}
	for rt := range experienceLayout {
		if !seen[rt] {
			t.Errorf("experienceLayout lists %s, which engine.Experience does not hold", rt)
		}
	}
	if !experienceLayoutOK() {
		t.Error("experienceLayoutOK is false")
	}
}

// FuzzMarshalExperience: strings from the fuzzer in every kind of place
// (values, map keys, sequence items, blocks inside sequences).
func FuzzMarshalExperience(f *testing.F) {
	for i, s := range edgeStrings {
		f.Add(s, edgeStrings[(i+7)%len(edgeStrings)], int64(i), float64(i)/3)
	}
	f.Fuzz(func(t *testing.T, a, b string, n int64, fl float64) {
		r := rand.New(rand.NewSource(n))
		pick := []string{a, b, a + b, "plain"}
		x := randExperience(r, func() string { return pick[r.Intn(len(pick))] })
		x.AvgSteps = fl
		x.Intent = a
		if x.Selectors == nil {
			x.Selectors = map[string]*engine.SelectorStats{}
		}
		x.Selectors[b] = &engine.SelectorStats{OK: 1}
		checkExperienceEncoding(t, x)
	})
}

// benchExperience is an entry as treegen writes them (ten runs, two
// selectors, one pattern), the shape consolidation writes ~1,000 of a run.
func benchExperience() *engine.Experience {
	x := &engine.Experience{}
	at := time.Date(2025, 5, 2, 23, 21, 39, 412422006, time.UTC)
	for i := 0; i < 10; i++ {
		x.Fold(&engine.Trace{Format: 1, ID: fmt.Sprintf("01JT9MWEAMMF9ND24MX5SSB8%02d", i), Domain: "site0000.example",
			Intent: "find item 0 details", IntentKey: "find-item-0-details", TaskType: "lookup", Session: fmt.Sprintf("s%d", i%5),
			URL: "https://site0000.example/section0/item/7", Outcome: engine.Success, StartedAt: at.Add(time.Duration(i) * 17 * time.Hour),
			DurationMs: int64(3000 + 97*i), Steps: []engine.Step{{Seq: 1, Action: "navigate", URL: "https://site0000.example/section0/item/7", OK: true},
				{Seq: 2, Action: "click", Selector: "#tab-0", OK: true}, {Seq: 3, Action: "extract", Selector: ".details .value", OK: true}}})
	}
	return x
}

// BenchmarkMarshalExperience: the hand-written encoder against yaml.v3's
// (the path Marshal took before), on the same record in the same run.
func BenchmarkMarshalExperience(b *testing.B) {
	x := benchExperience()
	if _, ok := marshalExperience(x); !ok {
		b.Fatal("the benchmark record does not take the hand-written encoder")
	}
	b.Run("yaml.v3", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := encodeYAML(x); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("hand-written", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, ok := marshalExperience(x); !ok {
				b.Fatal("declined")
			}
		}
	})
}
