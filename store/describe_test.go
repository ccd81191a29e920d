package store

import (
	"strings"
	"testing"
	"time"

	"github.com/pemdev/pem/engine"
)

// Describe reads the canonical form's top-level lines without decoding; it
// must say exactly what strict decoding says, and fall back to it for
// anything that is not canonical.
func TestDescribeCanonicalAgreesWithDecoding(t *testing.T) {
	at := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	f := &engine.Facts{Format: engine.Format, Domain: "git.example", Intent: "open issues", IntentKey: "open-issues",
		Status: engine.Verified, URLPatterns: []string{"/issues"}, InteractionHints: []string{"status: retired", "attempts: 9"},
		Steps: []engine.Step{{Seq: 1, Action: "navigate", URL: "https://git.example/issues", OK: true}}}
	f.Revision = f.ContentHash()
	sup := f.Clone()
	sup.Status, sup.Supersedes = engine.Candidate, f.Revision
	sup.Revision = sup.ContentHash()
	x := &engine.Experience{}
	for i := 0; i < 30; i++ {
		tr := &engine.Trace{Format: engine.Format, ID: "01JAAAAAAAAAAAAAAAAAAAAA" + string(rune('A'+i%26)) + string(rune('A'+i/26)),
			Domain: "git.example", Intent: "open issues", IntentKey: "open-issues", URL: "https://git.example/issues",
			Outcome: engine.Success, StartedAt: at.Add(time.Duration(i) * time.Hour),
			Steps: []engine.Step{{Seq: 1, Action: "navigate", URL: "https://git.example/issues", OK: true}}}
		if i%4 == 0 {
			tr.Outcome = engine.Failure
		}
		x.Fold(tr)
	}
	type doc struct {
		name, kind string
		data       string
		canonical  bool
	}
	var docs []doc
	for _, c := range []struct {
		name string
		v    any
		kind string
	}{{"facts", f, KindFacts}, {"superseding facts", sup, KindFacts}, {"experience", x, KindExperience}} {
		b, err := Marshal(c.v)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		docs = append(docs, doc{c.name, c.kind, s, true})
		// Not canonical: decoded strictly, whatever it says.
		for _, v := range []struct{ name, data string }{
			{"comment", "# hand edit\n" + s},
			{"document marker", "---\n" + s},
			{"repeated key", s + "format: 1\n"},
			{"CRLF", strings.ReplaceAll(s, "\n", "\r\n")},
			{"quoted status", strings.Replace(s, "status: verified", "status: 'verified'", 1)},
			{"flow mapping", "{format: 1, status: verified, revision: abc}\n"},
			{"no final newline", strings.TrimSuffix(s, "\n")},
			{"newer format", strings.Replace(s, "format: 1", "format: 99", 1)},
			{"no format", strings.Replace(s, "format: 1\n", "", 1)},
			{"odd status", strings.Replace(s, "status: verified", "status: great", 1)},
			{"no revision", strings.Replace(s, "revision: "+f.Revision+"\n", "", 1)},
			{"count with sign", strings.Replace(s, "attempts: 30", "attempts: +30", 1)},
			{"broken below", s + "  - [\n"},
		} {
			if v.data != s {
				docs = append(docs, doc{c.name + ", " + v.name, c.kind, v.data, false})
			}
		}
	}
	fast := 0
	for _, d := range docs {
		want := describeDecoded([]byte(d.data), d.kind)
		got, ok := describeCanonical([]byte(d.data), d.kind)
		if d.canonical && !ok {
			t.Errorf("%s: pem's own canonical form was not read without decoding", d.name)
		}
		if strings.HasSuffix(d.name, "broken below") {
			// Damage below the top level does not show in the description
			// (pem check reports the file); the top level does.
			canon, _ := describeCanonical([]byte(strings.TrimSuffix(d.data, "  - [\n")), d.kind)
			if !ok || got != canon {
				t.Errorf("%s: %q, %v; want the top level's %q", d.name, got, ok, canon)
			}
			continue
		}
		if ok {
			fast++
			if got != want {
				t.Errorf("%s: read as %q, decoded as %q", d.name, got, want)
			}
		}
		rel := FactsPath("git.example", "open-issues")
		if d.kind == KindExperience {
			rel = ExperiencePath("git.example", "open-issues")
		}
		if got := Describe(rel, func(int) ([]byte, error) { return []byte(d.data), nil }); got != want {
			t.Errorf("%s: Describe says %q, strict decoding %q", d.name, got, want)
		}
		if strings.Contains(d.name, "superseding") && d.canonical && !strings.Contains(want, "supersedes r") ||
			d.name == "experience" && !strings.Contains(want, "30 run(s): 22 succeeded, 8 failed") {
			t.Errorf("%s: the fixture describes as %q", d.name, want)
		}
	}
	if fast != 3 {
		t.Fatalf("%d documents read without decoding, want the 3 canonical ones", fast)
	}
}
