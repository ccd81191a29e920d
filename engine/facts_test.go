package engine_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pemdev/pem/engine"
)

func TestParsePatchSpellings(t *testing.T) {
	want := &engine.Patch{
		InteractionHints: []string{"scroll first"},
		KnownBlockers:    []engine.Blocker{{Type: "cookie_banner", Selector: "#accept", Action: "click", Note: "EU only"}},
		AntiPatterns:     []string{".old-button"},
		ExtractionQuery:  "the star count",
	}
	for _, in := range []string{
		`{"interaction_hints":["scroll first"],"known_blockers":[{"type":"cookie_banner","selector":"#accept","action":"click","note":"EU only"}],"anti_patterns":[".old-button"],"extraction_query":"the star count"}`,
		`{"interactionHints":["scroll first"],"knownBlockers":[{"type":"cookie_banner","selector":"#accept","action":"click","note":"EU only"}],"antiPatterns":[".old-button"],"extractionQuery":"the star count"}`,
		`{"hints":["scroll first"],"blockers":[{"type":"cookie_banner","selector":"#accept","action":"click","description":"EU only"}],"anti_patterns":[".old-button"],"extraction_query":"the star count"}`,
	} {
		got, err := engine.ParsePatch([]byte(in))
		if err != nil {
			t.Errorf("ParsePatch(%s): %v", in, err)
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("ParsePatch(%s) = %+v, want %+v", in, got, want)
		}
	}
}

// A blocker given as a plain string is {type: <string>}.
func TestParsePatchBlockerStrings(t *testing.T) {
	got, err := engine.ParsePatch([]byte(`{"known_blockers":["a cookie banner covers the header",{"type":"login_wall","selector":"#login"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []engine.Blocker{{Type: "a cookie banner covers the header"}, {Type: "login_wall", Selector: "#login"}}
	if !reflect.DeepEqual(got.KnownBlockers, want) {
		t.Errorf("blockers = %+v, want %+v", got.KnownBlockers, want)
	}
}

func TestParsePatchSelectors(t *testing.T) {
	got, err := engine.ParsePatch([]byte(`{"selectors":{"stars":"#repo-stars","search":{"primary":"input[name=q]","fallbacks":["#q",".search"]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]engine.Selector{
		"stars":  {Primary: "#repo-stars"},
		"search": {Primary: "input[name=q]", Fallbacks: []string{"#q", ".search"}},
	}
	if !reflect.DeepEqual(got.Selectors, want) {
		t.Errorf("selectors = %+v, want %+v", got.Selectors, want)
	}
}

func TestParsePatchErrors(t *testing.T) {
	tests := []struct{ in, mention string }{
		{`{"hintz":["x"]}`, `"hintz"`},
		{`{"hints":["a"],"interaction_hints":["b"]}`, "interaction_hints"},
		{`{"blockers":[],"knownBlockers":[]}`, "known_blockers"},
		{`{"anti_patterns":["a"],"antiPatterns":["b"]}`, "anti_patterns"},
		{`[1,2]`, "JSON object"},
		{`{"hints":["a"]} {"hints":["b"]}`, "more than one"},
		{`not json`, "JSON"},
		{`{"hints":"one string"}`, "hints"},
		{`{"selectors":{"x":{"primary":"#a","color":"red"}}}`, `"x"`},
		{`{"selectors":{"x":{"fallbacks":["#b"]}}}`, "no primary"},
		{`{"selectors":{"x":""}}`, `"x"`},
		{`{"selectors":{"x":null}}`, `"x"`},
		{`{"selectors":["#a"]}`, "selectors"},
		{`{"blockers":[{"selector":"#x"}]}`, "no type"},
		{`{"blockers":[{"type":"modal","when":"always"}]}`, `"when"`},
		{`{"blockers":[{"type":3}]}`, "string"},
		{`{"blockers":[""]}`, "empty string"},
		{`{"blockers":[3]}`, "want a string or"},
		{`{"blockers":[null]}`, "want a string or"},
	}
	for _, tt := range tests {
		_, err := engine.ParsePatch([]byte(tt.in))
		if !errors.Is(err, engine.ErrBadPatch) {
			t.Errorf("ParsePatch(%s) = %v, want ErrBadPatch", tt.in, err)
			continue
		}
		if !strings.Contains(err.Error(), tt.mention) {
			t.Errorf("ParsePatch(%s) error %q does not mention %s", tt.in, err, tt.mention)
		}
	}
}

func TestParsePatchEmpty(t *testing.T) {
	for _, in := range []string{`{}`, `null`, `{"hints":[]}`} {
		p, err := engine.ParsePatch([]byte(in))
		if err != nil || !p.Empty() {
			t.Errorf("ParsePatch(%s) = %+v, %v; want an empty patch", in, p, err)
		}
	}
	var nilPatch *engine.Patch
	if !nilPatch.Empty() {
		t.Error("nil patch is not Empty")
	}
}

func baseFacts() *engine.Facts {
	return &engine.Facts{
		Format: 1, Domain: "github.com", Intent: "star count", IntentKey: "star-count", Status: engine.Candidate,
		URLPatterns:      []string{"/*/*"},
		Selectors:        map[string]engine.Selector{"stars": {Primary: "#old-stars"}, "forks": {Primary: "#forks"}},
		InteractionHints: []string{"wait for the header"},
		AntiPatterns:     []string{".counter"},
		KnownBlockers:    []engine.Blocker{{Type: "cookie_banner", Selector: "#accept", Action: "click", Note: "old note"}},
	}
}

func TestApply(t *testing.T) {
	f := baseFacts()
	p := &engine.Patch{
		Selectors:        map[string]engine.Selector{"stars": {Primary: "#repo-stars", Fallbacks: []string{".stars"}}, "branch": {Primary: "#branch"}},
		InteractionHints: []string{"wait for the header", "  scroll to the sidebar ", "scroll to the sidebar", ""},
		AntiPatterns:     []string{".counter", ".Counter"},
		KnownBlockers: []engine.Blocker{
			{Type: "cookie_banner", Selector: "#accept", Action: "click", Note: "new note"},
			{Type: "cookie_banner", Selector: "#accept", Action: "dismiss"},
			{Type: "cookie_banner", Selector: "#accept", Action: "click"}, // no note: keeps the newest note
		},
		ExtractionQuery: "the number next to Star",
	}
	if err := f.Apply(p); err != nil {
		t.Fatal(err)
	}
	wantSel := map[string]engine.Selector{"stars": {Primary: "#repo-stars", Fallbacks: []string{".stars"}}, "forks": {Primary: "#forks"}, "branch": {Primary: "#branch"}}
	if !reflect.DeepEqual(f.Selectors, wantSel) {
		t.Errorf("selectors = %+v, want %+v", f.Selectors, wantSel)
	}
	if want := []string{"wait for the header", "scroll to the sidebar"}; !reflect.DeepEqual(f.InteractionHints, want) {
		t.Errorf("hints = %q, want %q", f.InteractionHints, want)
	}
	if want := []string{".counter", ".Counter"}; !reflect.DeepEqual(f.AntiPatterns, want) {
		t.Errorf("anti-patterns = %q, want %q", f.AntiPatterns, want)
	}
	wantBl := []engine.Blocker{
		{Type: "cookie_banner", Selector: "#accept", Action: "click", Note: "new note"},
		{Type: "cookie_banner", Selector: "#accept", Action: "dismiss"},
	}
	if !reflect.DeepEqual(f.KnownBlockers, wantBl) {
		t.Errorf("blockers = %+v, want %+v", f.KnownBlockers, wantBl)
	}
	if f.ExtractionQuery != "the number next to Star" {
		t.Errorf("extraction query = %q", f.ExtractionQuery)
	}
	if f.Revision != f.ContentHash() || f.Revision == baseFacts().ContentHash() {
		t.Errorf("revision %q not updated to the new content hash %q", f.Revision, f.ContentHash())
	}
	// Applying the same patch again changes nothing.
	before := f.ContentHash()
	if err := f.Apply(p); err != nil || f.ContentHash() != before {
		t.Errorf("re-applying the patch changed the content: %v", err)
	}
}

func TestApplyToEmptyFacts(t *testing.T) {
	f := &engine.Facts{Status: engine.Hypothesis}
	if err := f.Apply(&engine.Patch{Selectors: map[string]engine.Selector{"a": {Primary: "#a"}}, KnownBlockers: []engine.Blocker{{Type: "modal"}}}); err != nil {
		t.Fatal(err)
	}
	if f.Selectors["a"].Primary != "#a" || len(f.KnownBlockers) != 1 {
		t.Errorf("facts after patch: %+v", f)
	}
}

func TestApplyVerifiedFrozen(t *testing.T) {
	f := baseFacts()
	f.Status = engine.Verified
	f.Revision = f.ContentHash()
	before := *baseFacts()
	before.Status, before.Revision = engine.Verified, f.Revision
	err := f.Apply(&engine.Patch{Selectors: map[string]engine.Selector{"stars": {Primary: "#new"}}, InteractionHints: []string{"new hint"}})
	if !errors.Is(err, engine.ErrFrozen) {
		t.Fatalf("Apply to verified = %v, want ErrFrozen", err)
	}
	if !strings.Contains(err.Error(), "github.com/star-count") {
		t.Errorf("error %q should name the entry", err)
	}
	if !reflect.DeepEqual(*f, before) {
		t.Errorf("verified entry changed:\n got %+v\nwant %+v", *f, before)
	}
}

func TestContentHash(t *testing.T) {
	f := baseFacts()
	h := f.ContentHash()
	if len(h) != 12 || strings.Trim(h, "0123456789abcdef") != "" {
		t.Errorf("ContentHash = %q, want 12 hex characters", h)
	}
	if baseFacts().ContentHash() != h {
		t.Error("ContentHash not stable across equal values")
	}
	// Map order cannot matter: build the same selectors in another order.
	g := baseFacts()
	g.Selectors = map[string]engine.Selector{}
	g.Selectors["forks"] = engine.Selector{Primary: "#forks"}
	g.Selectors["stars"] = engine.Selector{Primary: "#old-stars"}
	if g.ContentHash() != h {
		t.Error("ContentHash depends on map insertion order")
	}
	// Lifecycle fields do not move it.
	g.Status = engine.Verified
	g.Revision = "abc"
	g.Supersedes = "def"
	g.History = []engine.Transition{{From: engine.Candidate, To: engine.Verified, At: t0, Reason: "r"}}
	g.Provenance = engine.Provenance{Traces: []string{"x"}, LastVerified: t0, FirstSeen: t0.Add(-time.Hour)}
	g.Intent = "Star count"
	if g.ContentHash() != h {
		t.Error("ContentHash depends on lifecycle fields")
	}
	// Content does.
	for name, mut := range map[string]func(*engine.Facts){
		"selector":   func(f *engine.Facts) { f.Selectors["stars"] = engine.Selector{Primary: "#x"} },
		"step":       func(f *engine.Facts) { f.Steps = []engine.Step{{Seq: 1, Action: "click", Selector: "#a"}} },
		"hint":       func(f *engine.Facts) { f.InteractionHints = append(f.InteractionHints, "x") },
		"blocker":    func(f *engine.Facts) { f.KnownBlockers[0].Note = "x" },
		"anti":       func(f *engine.Facts) { f.AntiPatterns = nil },
		"answer":     func(f *engine.Facts) { f.Answers = []engine.Answer{{Query: "q", Value: "v", Freshness: engine.Stable}} },
		"extraction": func(f *engine.Facts) { f.ExtractionQuery = "x" },
		"patterns":   func(f *engine.Facts) { f.URLPatterns = []string{"/"} },
	} {
		m := baseFacts()
		mut(m)
		if m.ContentHash() == h {
			t.Errorf("changing the %s did not change ContentHash", name)
		}
	}
}

func TestMergeBlocker(t *testing.T) {
	bs := []engine.Blocker{{Type: "modal", Selector: "#m", Action: "close", Note: "a"}}
	bs = engine.MergeBlocker(bs, engine.Blocker{Type: "modal", Selector: "#m", Action: "close", Note: "b"})
	bs = engine.MergeBlocker(bs, engine.Blocker{Type: "modal", Selector: "#m", Action: "", Note: "c"})
	bs = engine.MergeBlocker(bs, engine.Blocker{Type: "anti_bot"})
	want := []engine.Blocker{{Type: "modal", Selector: "#m", Action: "close", Note: "b"}, {Type: "modal", Selector: "#m", Note: "c"}, {Type: "anti_bot"}}
	if !reflect.DeepEqual(bs, want) {
		t.Errorf("MergeBlocker → %+v, want %+v", bs, want)
	}
}
