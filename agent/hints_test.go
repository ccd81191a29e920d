package agent

import (
	"reflect"
	"testing"

	"github.com/pemdev/pem/engine"
)

func steps(ss ...engine.Step) []engine.Step {
	for i := range ss {
		ss[i].Seq, ss[i].OK = i+1, true
	}
	return ss
}

func TestWithoutDetours(t *testing.T) {
	const a, b, c, d = "http://h/a", "http://h/b", "http://h/c", "http://h/d"
	nav := func(u string) engine.Step { return engine.Step{Action: "navigate", URL: u} }
	click := func(sel, u string) engine.Step { return engine.Step{Action: "click", Selector: sel, URL: u} }
	search := engine.Step{Action: "type", Selector: "#q", Value: "x y", URL: "http://h/search?q=x+y"}
	press := engine.Step{Action: "press", Selector: "#q", Value: "Enter", URL: "http://h/search?q=x+y"}
	extract := func(u string) engine.Step { return engine.Step{Action: "extract", Value: "Stars", URL: u} }
	signIn := engine.Step{Action: "type", Selector: "#pw", Value: "{{secret:pw}}", URL: b}
	for _, tc := range []struct {
		name      string
		in, want  []engine.Step
		wantNames []string
	}{
		{"a wrong link, back, the right one",
			steps(nav(a), click("#wrong", b), nav(a), click("#right", c), extract(c)),
			steps(nav(a), click("#right", c), extract(c)), nil},
		{"a search that led nowhere, back twice",
			steps(nav(a), click("#dl", b), search, press, nav(b), nav(a), click("#rel", c), extract(c)),
			steps(nav(a), click("#rel", c), extract(c)), nil},
		{"a detour that read a value is kept",
			steps(nav(a), click("#x", b), extract(b), nav(a), click("#y", c), extract(c)),
			steps(nav(a), click("#x", b), extract(b), nav(a), click("#y", c), extract(c)), nil},
		{"a detour that signed in is kept",
			steps(nav(a), click("#login", b), signIn, nav(a), click("#y", d), extract(d)),
			steps(nav(a), click("#login", b), signIn, nav(a), click("#y", d), extract(d)), nil},
		{"no detour",
			steps(nav(a), click("#x", b), click("#y", c), extract(c)),
			steps(nav(a), click("#x", b), click("#y", c), extract(c)), nil},
	} {
		if got := withoutDetours(tc.in); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.name, got, tc.want)
		}
	}
	// Route drops failed steps first, then the detours.
	in := steps(nav(a), click("#wrong", b), nav(a), click("#right", c), extract(c))
	in = append(in[:3], append([]engine.Step{{Action: "click", Selector: "#covered", URL: a, Error: "covered by div#modal"}}, in[3:]...)...)
	if got := Route(in); len(got) != 3 || got[1].Selector != "#right" {
		t.Errorf("Route: %+v", got)
	}
}

func TestRouteStepFollowsMemory(t *testing.T) {
	const a, b, c = "http://h/a", "http://h/b", "http://h/c"
	route := steps(
		engine.Step{Action: "navigate", URL: a},
		engine.Step{Action: "click", Selector: "#wiki", URL: b},
		engine.Step{Action: "click", Selector: "#accept", URL: b},
		engine.Step{Action: "click", Selector: "#req", URL: c},
		engine.Step{Action: "wait", URL: c},
		engine.Step{Action: "extract", Value: "Minimum Go version", URL: c},
	)
	el := func(sel string) Element { return Element{Selector: sel, Tag: "a", Visible: true, Text: sel} }
	turn := func(a Action, u string) Turn { return Turn{Action: a, URL: u} }
	s := &State{URL: b, Hints: Hints{Route: route}, Elements: []Element{el("#accept"), el("#req")},
		History: []Turn{turn(Action{Tool: "navigate", Value: a}, a), turn(Action{Tool: "click", Selector: "#wiki"}, b)}}
	g := parseGoal("What is the minimum Go version?", a)
	if got, ok := routeStep(s, readHistory(s, g)); !ok || got.Selector != "#accept" {
		t.Fatalf("after #wiki: %+v %v, want the overlay's #accept first", got, ok)
	}
	s.History = append(s.History, turn(Action{Tool: "click", Selector: "#accept"}, b))
	if got, ok := routeStep(s, readHistory(s, g)); !ok || got.Selector != "#req" {
		t.Fatalf("after #accept: %+v %v", got, ok)
	}
	// An anti-pattern or a missing control hands back to exploring.
	s.Hints.AntiPatterns = []string{"#req"}
	if got, ok := routeStep(s, readHistory(s, g)); ok {
		t.Errorf("anti-pattern followed: %+v", got)
	}
	s.Hints.AntiPatterns, s.Elements = nil, []Element{el("#accept")}
	if got, ok := routeStep(s, readHistory(s, g)); ok {
		t.Errorf("missing control followed: %+v", got)
	}
	// On the answer page: the remembered wait only while something loads.
	s.URL, s.Elements = c, nil
	s.History = append(s.History, turn(Action{Tool: "click", Selector: "#req"}, c))
	s.Labels = []LabelValue{{Label: "Minimum Go version", Value: "Loading…"}}
	if got, ok := routeStep(s, readHistory(s, g)); !ok || got.Tool != "wait" {
		t.Errorf("loading: %+v %v, want wait", got, ok)
	}
	s.Labels = []LabelValue{{Label: "Minimum Go version", Value: "1.24"}}
	if got, ok := routeStep(s, readHistory(s, g)); !ok || got.Tool != "extract" || got.Value != "Minimum Go version" {
		t.Errorf("loaded: %+v %v, want the extraction", got, ok)
	}
	s.History = append(s.History, Turn{Action: Action{Tool: "extract", Value: "Minimum Go version"}, URL: c, Result: ToolResult{ExtractedContent: "1.24"}})
	if v, ok := routeDone(s, readHistory(s, g)); !ok || v != "1.24" {
		t.Errorf("routeDone = %q %v", v, ok)
	}
	// After a replay handed over, the route is not followed again.
	s.History[0].Replayed = true
	if !replayed(s) {
		t.Error("replayed() missed the replayed turn")
	}
}

func TestRecoveryAndTraps(t *testing.T) {
	s := &State{URL: "http://h/wiki/x", Elements: []Element{{Selector: "#ok", Tag: "button", Text: "Accept all", Visible: true}, {Selector: "#req", Tag: "a", Text: "Requirements", Visible: true}},
		Hints: Hints{Recoveries: []Recovery{{URLPattern: "/wiki/x", Selector: "#req", Action: "click #ok"}}}}
	h := readHistory(s, goal{})
	if a := withRecovery(s, h, Action{Tool: "click", Selector: "#req"}); a.Selector != "#ok" {
		t.Errorf("recovery not applied: %+v", a)
	}
	s2 := *s
	s2.URL = "http://h/blog/x"
	if a := withRecovery(&s2, h, Action{Tool: "click", Selector: "#req"}); a.Selector != "#req" {
		t.Errorf("recovery applied on another page type: %+v", a)
	}
	if a := withRecovery(s, h, Action{Tool: "click", Selector: "#other"}); a.Selector != "#other" {
		t.Errorf("recovery for another control applied: %+v", a)
	}
	if d := dismissControl(s, h); d == nil || d.Selector != "#ok" {
		t.Errorf("dismissControl: %+v", d)
	}
	for v, want := range map[string]bool{"Loading…": true, "…": true, "please wait": true, "43": false, "1,234": false, "Loading dock 3 is open on weekdays from nine": false} {
		if placeholder(v) != want {
			t.Errorf("placeholder(%q) = %v", v, !want)
		}
	}
	for task, want := range map[string]AnswerType{"What is the security contact email of acme/widgets?": EmailAnswer,
		"Which email address receives reports?": EmailAnswer, "How many stars?": NumberAnswer} {
		if got := AskedType(task); got != want {
			t.Errorf("AskedType(%q) = %q, want %q", task, got, want)
		}
	}
	if !HasValueOf(EmailAnswer, "security@acme.example", "x") || HasValueOf(EmailAnswer, "Open issues matching", "x") {
		t.Error("email values")
	}
	if !hasLiteral("v1.0.0 First stable", "1.0.0") || hasLiteral("dev1.0.0", "1.0.0") {
		t.Error("a version tag names its version")
	}
}

func TestRecalledBlocks(t *testing.T) {
	if got := RecalledBlocks(&engine.Recall{Tier: engine.P5}); got != nil {
		t.Errorf("P5: %v", got)
	}
	rc := &engine.Recall{Tier: engine.P3, Steps: []engine.Step{{Action: "navigate"}}, AntiPatterns: []string{"#x"},
		SiteNotes: []engine.SiteNote{{Kind: engine.NoteRecovery, Selector: "#req", Action: "wait"}, {Kind: engine.NoteAntiPattern, Selector: "#bad"}}}
	if got := RecalledBlocks(rc); !reflect.DeepEqual(got, []string{"route", "anti_patterns", "site_notes"}) {
		t.Errorf("blocks %v", got)
	}
	h := hintsOf(rc)
	if len(h.Route) != 1 || !reflect.DeepEqual(h.AntiPatterns, []string{"#x", "#bad"}) || len(h.Recoveries) != 1 || h.Recoveries[0].Action != "wait" {
		t.Errorf("hints %+v", h)
	}
	rc.Match = "overlap"
	if h := hintsOf(rc); len(h.Route) != 0 {
		t.Errorf("another intent's route given as hints: %+v", h.Route)
	}
	if got := RecalledBlocks(&engine.Recall{Tier: engine.P5, RelatedRoutes: []engine.RelatedRoute{{Intent: "x"}}}); !reflect.DeepEqual(got, []string{"related_routes"}) {
		t.Errorf("P5 with related routes: %v", got)
	}
}
