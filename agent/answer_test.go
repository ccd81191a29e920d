package agent

import (
	"strings"
	"testing"

	"github.com/pemdev/pem/engine"
)

func TestAskedType(t *testing.T) {
	for task, want := range map[string]AnswerType{
		"How many stars does acme/widgets have?":              NumberAnswer,
		"When was Flask version 2.2.1 released?":              DateAnswer,
		"Which Python version does Flask support?":            VersionAnswer,
		"Which Jinja version dropped support for Python 3.6?": VersionAnswer,
		"What command installs Flask?":                        CommandAnswer,
		"Who is the author of the first issue?":               NameAnswer,
		"Why is HTML escaping not the default?":               ExplainAnswer,
		"What is the default value of SECRET_KEY?":            AnyAnswer,
		// "which exception (argument, …)" asks for a name; a "when …" or
		// "number of" later in the task does not make it a date or a
		// number (Debian's attrs and Beautiful Soup docs).
		"Which exception is raised when you assign to a frozen record?":            AnyAnswer,
		"Which argument tells find_all to stop after a certain number of results?": AnyAnswer,
		"When was the counters function added?":                                    DateAnswer,
		"How many counters does the record function return?":                       NumberAnswer,
		"Which version added the counters function?":                               VersionAnswer,
	} {
		if got := AskedType(task); got != want {
			t.Errorf("AskedType(%q) = %q, want %q", task, got, want)
		}
	}
}

func TestCodeLike(t *testing.T) {
	for s, want := range map[string]bool{
		"$ pip install Flask":                   true,
		"flask --app hello --debug run":         true,
		"go install example.com/x/cmd/x@latest": true,
		"Within the activated environment, use the following command to install Flask:": false,
		"Install Flask": false,
		"":              false,
		// A program is not a command (humanfriendly's docs answered "Which
		// command demonstrates the terminal text styles?" with one).
		"from humanfriendly.text import dedent\nfrom humanfriendly.terminal import html_to_ansi": false,
		"import os":                    false,
		"package main":                 false,
		"const fs = require('fs')":     false,
		"rainbow = ['#FF0000']":        false,
		"pip install humanfriendly":    true,
		"import -window root shot.png": true,
		"$ humanfriendly --demo":       true,
	} {
		if got := CodeLike(s); got != want {
			t.Errorf("CodeLike(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestCheckAnswer(t *testing.T) {
	const start = "http://127.0.0.1:8080/flask/index.html"
	page := AnswerSource{URL: "http://127.0.0.1:8080/flask/installation.html", Status: 200, Headings: []string{"Python Version", "Version 3.1.0"}}
	cases := []struct {
		task, answer string
		src          AnswerSource
		want         string // a word of the reason; "" passes
	}{
		{"What command installs Flask?", "$ pip install Flask", page, ""},
		{"What command installs Flask?", "Within the activated environment, use the following command to install Flask:", page, "command"},
		{"Which Python version does Flask support?", "Python Version", page, "repeats"},
		{"Which Python version does Flask support?", "Flask supports Python 3.7 and newer.", page, ""},
		{"Which Jinja version dropped support for Python 3.6?", "Version 3.1.0", page, ""},
		{"Which Jinja version dropped support for Python 3.6?", "Drop support for Python 3.6. #1534", page, "version"},
		{"When was Flask 2.2.1 released?", "Released 2022-08-03", page, ""},
		{"When was Flask 2.2.1 released?", "Version 2.2.1", page, "date"},
		{"How many stars does it have?", "1,234", page, ""},
		{"How many stars does it have?", "lots of them", page, "number"},
		{"What is the default value of SESSION_COOKIE_NAME?", "Default: 'session'", page, ""},
		{"What is the file name of the getting-started example?", "getting-started.go", page, ""},
		{"What is in the docs?", "This site can’t be reached", AnswerSource{URL: "chrome-error://chromewebdata/"}, "error page"},
		{"What is in the docs?", "Not Found", AnswerSource{URL: "http://127.0.0.1:8080/x", Status: 404}, "HTTP 404"},
		{"What is in the docs?", "Jinja is a template engine", AnswerSource{URL: "https://jinja.palletsprojects.com/"}, "another site"},
		{"What is on jinja.palletsprojects.com?", "Jinja is a template engine", AnswerSource{URL: "https://jinja.palletsprojects.com/"}, ""},
		// A section heading names a topic, not the person a "who" asks for.
		{"Who maintains the project?", "Previous Maintainers", AnswerSource{URL: start, Headings: []string{"Previous Maintainers"}}, "heading"},
		{"Who maintains the project?", "Ada Lovelace", AnswerSource{URL: start, Headings: []string{"Previous Maintainers"}}, ""},
		// A heading's section number is its place, not an answer; a
		// version that heads a changelog's section is one.
		{"Which locale should you use on Mac OS X?", "4.3.2.", AnswerSource{URL: start, Headings: []string{"4.3.2. The locale Module Is Broken on Mac OS X"}}, "section number"},
		{"Which version is the latest?", "4.3.2", AnswerSource{URL: start, Headings: []string{"4.3.2 (2024-01-05)"}}, ""},
	}
	for _, c := range cases {
		got := CheckAnswer(c.task, start, c.answer, c.src)
		if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("CheckAnswer(%q, %q) = %q, want %q", c.task, c.answer, got, c.want)
		}
	}
}

func TestLiterals(t *testing.T) {
	g := parseGoal("When was version 8.1.0 released?", "http://127.0.0.1:8080/docs/")
	if strings.Join(g.literals, ",") != "8.1.0" {
		t.Fatalf("literals %v", g.literals)
	}
	for _, w := range g.targets {
		if isNumber(w) {
			t.Errorf("a literal's digit %q is a target word (targets %v)", w, g.targets)
		}
	}
	if !hasLiteral("Version 8.1.0", "8.1.0") || hasLiteral("Version 8.1.01", "8.1.0") || hasLiteral("18.1.0", "8.1.0") {
		t.Errorf("hasLiteral is not whole-token")
	}
	if got := taskLiterals("Which version was released on 2022-08-03?"); strings.Join(got, ",") != "2022-08-03" {
		t.Errorf("date literal %v", got)
	}
	if got := taskLiterals("What is the default value of SECRET_KEY?"); strings.Join(got, ",") != "secret_key" {
		t.Errorf("identifier literal %v", got)
	}
}

// agent's expressions are compiled on first use (engine.LazyRE): they must all compile.
func TestLazyRegexps(t *testing.T) {
	if n, err := engine.AllLazyCompile(); err != nil || n < 60 {
		t.Fatalf("%d expressions, %v", n, err)
	}
}
