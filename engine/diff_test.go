package engine

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

var diffUpdate = flag.Bool("update-diff", false, "rewrite engine/testdata/diff golden files")

func diffExp(attempts, ok int) *Experience {
	return &Experience{Domain: "example.com", IntentKey: "find-stars", Intent: "find stars", Attempts: attempts, Successes: ok, Failures: attempts - ok}
}

func TestDiffEntry(t *testing.T) {
	old := mergeFacts(Candidate, func(f *Facts) {
		f.Selectors["forks"] = Selector{Primary: "#forks"}
		f.InteractionHints = []string{"wait for the list"}
		f.KnownBlockers = []Blocker{{Type: "cookie_banner", Selector: "#cookies", Action: "click"}}
		f.Answers = []Answer{{Query: "stars", Value: "10", Freshness: Volatile}, {Query: "gone", Value: "x", Freshness: Stable}}
	})
	new := mergeFacts(Verified, func(f *Facts) {
		f.Selectors["stars"] = Selector{Primary: "#star-count", Fallbacks: []string{"#stars"}}
		f.Selectors["watchers"] = Selector{Primary: "#watchers"}
		f.Steps = append(f.Steps, Step{Seq: 3, Action: "click", Selector: "#watchers", OK: true})
		f.InteractionHints = []string{"wait for the list", "scroll first"}
		f.AntiPatterns = []string{".old-stars"}
		f.Answers = []Answer{{Query: "stars", Value: "12", Freshness: Volatile}, {Query: "branch", Value: "main", Freshness: Stable}}
	})
	d := DiffEntry(old, new, diffExp(4, 3), diffExp(7, 6))
	want := EntryDiff{
		Domain: "example.com", IntentKey: "find-stars", Intent: "find stars",
		StatusFrom: Candidate, StatusTo: Verified,
		RevisionFrom: old.Revision, RevisionTo: new.Revision,
		SelectorsAdded:    []string{"watchers: #watchers"},
		SelectorsRemoved:  []string{"forks: #forks"},
		SelectorsChanged:  []string{"stars: #stars → #star-count (fallbacks #stars)"},
		RouteFrom:         []string{"navigate https://example.com/r", "get_text #stars"},
		RouteTo:           []string{"navigate https://example.com/r", "get_text #stars", "click #watchers"},
		HintsAdded:        []string{"scroll first"},
		BlockersRemoved:   []string{"cookie_banner #cookies → click"},
		AntiPatternsAdded: []string{".old-stars"},
		AnswersAdded:      []string{"branch = main [stable]"},
		AnswersRemoved:    []string{"gone = x [stable]"},
		AnswersChanged:    []string{"stars: 10 [volatile] → 12 [volatile]"},
		AttemptsFrom:      4, AttemptsTo: 7, SuccessesFrom: 3, SuccessesTo: 6, FailuresFrom: 1, FailuresTo: 1,
	}
	if !reflect.DeepEqual(d, want) {
		t.Fatalf("DiffEntry =\n%+v\nwant\n%+v", d, want)
	}
	if d.Empty() {
		t.Fatal("a diff with changes reports Empty")
	}
	if same := DiffEntry(old, old, diffExp(4, 3), diffExp(4, 3)); !same.Empty() {
		t.Fatalf("identical versions give %+v", same)
	}
	added := DiffEntry(nil, new, nil, diffExp(1, 1))
	if !added.Added || added.StatusTo != Verified || len(added.SelectorsAdded) != 2 {
		t.Fatalf("a new entry gives %+v", added)
	}
	removed := DiffEntry(old, nil, diffExp(1, 1), nil)
	if !removed.Removed || removed.Empty() {
		t.Fatalf("a removed entry gives %+v", removed)
	}
}

func TestDiffReportGolden(t *testing.T) {
	old := mergeFacts(Candidate, nil)
	new := mergeFacts(Verified, func(f *Facts) {
		f.InteractionHints = []string{"click `here` | then [wait](http://evil.example) @team"}
		f.Provenance.LastVerified = time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	})
	rep := &DiffReport{From: "1111111111", To: "2222222222",
		Entries: []EntryDiff{
			DiffEntry(nil, mergeFacts(Hypothesis, func(f *Facts) { f.Domain, f.IntentKey, f.Intent = "b.example", "open-issues", "Open issues" }), nil, nil),
			DiffEntry(old, new, diffExp(5, 4), diffExp(8, 7)),
		},
		Traces:   []TraceDelta{{Domain: "example.com", Added: 3, Removed: 1}, {Domain: "b.example", Added: 1}},
		Problems: []string{"facts/x/y.yaml at 0123456789: corrupt file"},
	}
	rep.Sort()
	if rep.Entries[0].Domain != "b.example" || rep.Traces[0].Domain != "b.example" {
		t.Fatalf("Sort did not order by domain: %+v", rep)
	}
	for _, f := range []struct {
		name  string
		write func(*bytes.Buffer) error
	}{
		{"report.txt", func(b *bytes.Buffer) error { return rep.WriteText(b) }},
		{"report.md", func(b *bytes.Buffer) error { return rep.WriteMarkdown(b) }},
	} {
		var buf bytes.Buffer
		if err := f.write(&buf); err != nil {
			t.Fatal(err)
		}
		golden := filepath.Join("testdata", "diff", f.name)
		if *diffUpdate {
			if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%v (run go test ./consolidate -run Golden -update-diff to create it)", err)
		}
		if buf.String() != string(want) {
			t.Errorf("%s differs from %s:\n%s", f.name, golden, buf.String())
		}
	}
}

func TestDiffMarkdownNeutralizesStoredText(t *testing.T) {
	hostile := "x` <script>alert(1)</script> [link](http://evil) @someone |cell|\n## heading"
	rep := &DiffReport{From: "a", To: "b", Entries: []EntryDiff{{Domain: "d.example", IntentKey: "k", HintsAdded: []string{hostile}}}}
	var buf bytes.Buffer
	if err := rep.WriteMarkdown(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if strings.Contains(out, "\n## heading") {
		t.Errorf("a newline in stored text started a Markdown heading:\n%s", out)
	}
	line := ""
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "- hints added") {
			line = l
		}
	}
	// The value sits in one code span whose fence is longer than any backtick run inside.
	if !strings.Contains(line, "``x`") || strings.Count(line, "``") != 2 {
		t.Errorf("stored text is not inside one code span: %q", line)
	}
}

func TestDiffCode(t *testing.T) {
	cases := map[string]string{
		"plain":   "`plain`",
		"a`b":     "``a`b``",
		"`start":  "`` `start ``",
		"":        "` `",
		"new\nln": "`new ln`",
	}
	for in, want := range cases {
		if got := diffCode(in); got != want {
			t.Errorf("diffCode(%q) = %q, want %q", in, got, want)
		}
	}
}
