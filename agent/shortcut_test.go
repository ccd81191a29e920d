package agent

import (
	"strings"
	"testing"

	"github.com/pemdev/pem/engine"
)

func routeString(steps []engine.Step) string {
	var parts []string
	for _, s := range steps {
		p := s.Action
		if s.Selector != "" {
			p += " " + s.Selector
		}
		if s.Action == "navigate" {
			p += " " + strings.TrimPrefix(s.URL, "https://x.test")
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ", ")
}

func TestShortcutJumpsToTheLastStablePageOverLinksOnly(t *testing.T) {
	const b = "https://x.test"
	link := func(sel, to string) engine.Step {
		return engine.Step{Action: "click", Selector: sel, URL: b + to, OK: true, Target: &engine.Fingerprint{Tag: "a", Role: "link", Name: sel}}
	}
	nav := engine.Step{Action: "navigate", URL: b + "/repo", OK: true}
	read := func(on string) engine.Step {
		return engine.Step{Action: "extract", Value: "Status", URL: b + on, OK: true}
	}
	wait := engine.Step{Action: "wait", URL: b + "/repo/graphs", OK: true}
	button := engine.Step{Action: "click", Selector: "#go", URL: b + "/repo/pulls", OK: true, Target: &engine.Fingerprint{Tag: "button", Role: "button", Name: "Go"}}
	typ := engine.Step{Action: "type", Selector: "#q", Value: "memory", OK: true, URL: b + "/repo/issues"}
	plain := &run{} // no approval policy
	for _, c := range []struct {
		name  string
		route []engine.Step
		want  string
	}{
		{"answer page reached by links", []engine.Step{nav, link("#pulls", "/repo/pulls"), read("/repo/pulls")},
			"navigate /repo/pulls, extract"},
		{"the wait on the answer page is kept", []engine.Step{nav, link("#graphs", "/repo/graphs"), wait, read("/repo/graphs")},
			"navigate /repo/graphs, wait, extract"},
		{"the first item is still clicked", []engine.Step{nav, link("#pulls", "/repo/pulls"), link("#pr-1", "/repo/pull/12"), link("#checks", "/repo/pull/12/checks"), read("/repo/pull/12/checks")},
			"navigate /repo/pulls, click #pr-1, click #checks, extract"},
		{"typing runs on the page it was recorded on", []engine.Step{nav, link("#issues", "/repo/issues"), typ, read("/repo/issues")},
			"navigate /repo/issues, type #q, extract"},
		{"a button is never jumped over", []engine.Step{nav, button, read("/repo/pulls")},
			"navigate /repo, click #go, extract"},
		{"nothing to shorten", []engine.Step{nav, read("/repo")}, "navigate /repo, extract"},
	} {
		if got := routeString(shortcut(c.route, plain.skippable)); got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}

	// A step the approval policy marks is never jumped over, by its text or
	// by the page it acts on.
	r := &run{approval: engine.ApprovalPolicy{{Name: "admin", Actions: []string{"click"}, Text: []string{"settings"}}}}
	route := []engine.Step{nav, link("settings", "/repo/settings"), read("/repo/settings")}
	if got, want := routeString(shortcut(route, r.skippable)), "navigate /repo, click settings, extract"; got != want {
		t.Errorf("marked step: got %q, want %q", got, want)
	}
	r.approval = nil
	if got, want := routeString(shortcut(route, r.skippable)), "navigate /repo/settings, extract"; got != want {
		t.Errorf("unmarked step: got %q, want %q", got, want)
	}
}
