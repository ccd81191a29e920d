package agent

import (
	"context"
	"strings"
	"testing"

	"github.com/pemdev/pem/engine"
)

func runExplore(t *testing.T, e *env, task string, secrets map[string]string) *RunResult {
	t.Helper()
	cfg := e.cfg(task, NewExplore())
	cfg.Secrets = secrets
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("%s: %v", task, err)
	}
	return res
}

func TestExploreOnTheFakeSite(t *testing.T) {
	cases := []struct {
		task, answer string
		secrets      map[string]string
	}{
		{"how many open issues are there", "7", nil},
		{"read the stars", "42", nil},
		{"who is the author of the second issue", "bob", nil},
		{"who is the author of the first issue", "alice", nil},
		{`search for "memory" and report how many matches`, "5", nil},
		{"sign in as demo and read the unread notifications count", "4", map[string]string{"demo_password": "canary-value-1234"}},
	}
	for _, c := range cases {
		t.Run(c.task, func(t *testing.T) {
			e := newEnv()
			res := runExplore(t, e, c.task, c.secrets)
			if !res.Success || res.Answer != c.answer {
				t.Fatalf("answer %q success %v, want %q\n%s", res.Answer, res.Success, c.answer, strings.Join(res.ActionLog, "\n"))
			}
			if res.Tier != engine.P5 || res.PlannerCalls == 0 {
				t.Fatalf("tier %s planner calls %d", res.Tier, res.PlannerCalls)
			}
			for _, v := range c.secrets {
				e.site.mu.Lock()
				typed := strings.Join(e.site.typed, "|")
				e.site.mu.Unlock()
				if !strings.Contains(typed, v) {
					t.Fatal("the password was not typed")
				}
				if strings.Contains(strings.Join(res.ActionLog, "\n"), v) {
					t.Fatal("the action log holds the secret")
				}
			}
			// Warm: the same task replays from memory with no planner call.
			warm := runExplore(t, e, c.task, c.secrets)
			if !warm.Success || warm.Answer != c.answer || warm.PlannerCalls != 0 || warm.Tier != engine.P2 {
				t.Fatalf("warm: %+v\n%s", warm, strings.Join(warm.ActionLog, "\n"))
			}
		})
	}
}

func TestExploreGivesUpCleanly(t *testing.T) {
	e := newEnv()
	res := runExplore(t, e, "what is the airspeed velocity of an unladen swallow", nil)
	if res.Success || res.Answer != "" || res.Steps > 3 {
		t.Fatalf("%+v\n%s", res, strings.Join(res.ActionLog, "\n"))
	}
	e = newEnv()
	res = runExplore(t, e, "sign in as demo and read the unread notifications count", nil) // no secret declared
	if res.Success {
		t.Fatalf("signed in without a password: %+v", res)
	}
	for _, v := range e.site.typed {
		if strings.Contains(v, "secret") {
			t.Fatalf("typed a placeholder as text: %q", v)
		}
	}
}

// A second site with other words and structure: a bookshop.
func bookshop() *fakeSite {
	return &fakeSite{pages: map[string]*sitePage{
		"/": {title: "Paper & Ink",
			els: []siteEl{
				{Element: Element{Selector: "nav > a:nth-of-type(1)", Tag: "a", Text: "Catalogue"}, to: "/books"},
				{Element: Element{Selector: "nav > a:nth-of-type(2)", Tag: "a", Text: "Opening hours"}, to: "/hours"},
				{Element: Element{Selector: "nav > a:nth-of-type(3)", Tag: "a", Text: "Log in"}, to: "/account"},
			},
		},
		"/books": {title: "Catalogue", search: "/books/find",
			els: []siteEl{
				{Element: Element{Selector: "input[name=\"s\"]", Tag: "input", Name: "s"}},
				{Element: Element{Selector: "ul > li:nth-of-type(1) > a", Tag: "a", Text: "Dune"}, to: "/books/9780441013593"},
				{Element: Element{Selector: "ul > li:nth-of-type(2) > a", Tag: "a", Text: "Emma"}, to: "/books/9780141439587"},
			},
			labels: []LabelValue{{Label: "Titles in stock", Value: "2", Selector: ".stock"}},
		},
		"/books/9780441013593": {title: "Dune", labels: []LabelValue{{Label: "Price", Value: "€9.99", Selector: ".price"}, {Label: "Author", Value: "Frank Herbert", Selector: ".by"}}},
		"/books/9780141439587": {title: "Emma", labels: []LabelValue{{Label: "Price", Value: "€7.50", Selector: ".price"}, {Label: "Author", Value: "Jane Austen", Selector: ".by"}}},
		"/books/find":          {title: "Results", labels: []LabelValue{{Label: "Books found", Value: "1", Selector: ".found"}}},
		"/hours":               {title: "Hours", labels: []LabelValue{{Label: "Saturday", Value: "10:00–16:00", Selector: "dd:nth-of-type(6)"}}},
		"/account": {title: "Log in", search: "/account/home",
			els: []siteEl{
				{Element: Element{Selector: "form > input:nth-of-type(1)", Tag: "input", Type: "email", Placeholder: "you@example.com"}},
				{Element: Element{Selector: "form > input:nth-of-type(2)", Tag: "input", Type: "password"}},
			},
		},
		"/account/home": {title: "Your account", labels: []LabelValue{{Label: "Loyalty points", Value: "120", Selector: ".pts"}}},
	}}
}

func TestExploreGeneralizesToAnotherSite(t *testing.T) {
	cases := []struct{ task, answer string }{
		{"what is the price of the second book in the catalogue", "€7.50"},
		{"who is the author of the first book", "Frank Herbert"},
		{"opening hours on saturday", "10:00–16:00"},
		{`search the catalogue for "dune": how many books found`, "1"},
		{"log in as reader@example.com and read my loyalty points", "120"},
	}
	for _, c := range cases {
		t.Run(c.task, func(t *testing.T) {
			e := newEnv()
			e.site = bookshop()
			e.br.site = e.site
			res := runExplore(t, e, c.task, map[string]string{"shop_password": "bookshop-pass-77"})
			if !res.Success || res.Answer != c.answer {
				t.Fatalf("answer %q success %v, want %q\n%s", res.Answer, res.Success, c.answer, strings.Join(res.ActionLog, "\n"))
			}
		})
	}
}

func TestParseGoal(t *testing.T) {
	g := parseGoal(`Sign in as demo and search issues for "memory leak", then read the second result`, "https://example.com/")
	if g.user != "demo" || g.query != "memory leak" || len(g.ordinals) != 1 || g.ordinals[0] != 2 {
		t.Fatalf("%+v", g)
	}
	if contains(g.targets, "memory") || contains(g.targets, "demo") || contains(g.targets, "sign") || !contains(g.targets, "issu") || !contains(g.targets, "result") {
		t.Fatalf("targets %v", g.targets)
	}
	if g = parseGoal("search issues for memory", ""); g.query != "memory" {
		t.Fatalf("unquoted query: %+v", g)
	}
	g = parseGoal("What is the checks status of the first pull request in acme/widgets?", "http://127.0.0.1:8080/acme/widgets")
	if strings.Join(g.attr, " ") != "check status" || strings.Join(g.entity, " ") != "pull request" || g.ordinals[0] != 1 {
		t.Fatalf("attr %v entity %v ordinals %v", g.attr, g.entity, g.ordinals)
	}
	g = parseGoal("How many open issues match?", "")
	if strings.Join(g.attr, " ") != "issu match" {
		t.Fatalf("attr %v", g.attr)
	}
	g = parseGoal("What are the titles of the first and second items?", "")
	if len(g.ordinals) != 2 || !wantsText(g) {
		t.Fatalf("%+v", g)
	}
	// Stems are consistent, not pretty: every form of a word meets the others.
	for in, want := range map[string]string{"matching": "match", "matches": "match", "installs": "install",
		"installation": "install", "issues": "issu", "issue": "issu", "stories": "story", "status": "status", "failed": "fail",
		"release": "releas", "released": "releas", "releases": "releas", "dropped": "drop", "drop": "drop",
		"escaping": "escap", "escape": "escap", "supports": "support", "supported": "support"} {
		if got := stem(in); got != want {
			t.Errorf("stem(%q) = %q, want %q", in, got, want)
		}
	}
}
