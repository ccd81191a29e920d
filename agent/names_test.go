package agent

import (
	"slices"
	"testing"
)

// TestTaskNames: the proper names of a task are the capitalised words
// inside a sentence, not its first word, a literal or an identifier.
func TestTaskNames(t *testing.T) {
	for task, want := range map[string][]string{
		"What is the special loop variable called in Django?":           {"django"},
		"Which Python version does Jinja support?":                      {"python", "jinja"},
		"When was Werkzeug version 2.2.1 released?":                     {"werkzeug"},
		"How many stars does the repository have?":                      nil,
		"Which method of Environment.overlay copies it? Use maxTurns.":  nil,
		"What does the README say? Install it from PyPI.":               nil,
		"Where is SECRET_KEY set in Flask (the “Config” object)?":       {"flask", "config"},
		"Find the install command. Then open the Getting Started guide": {"start"}, // "getting": a stop word
	} {
		if got := taskNames(task); !slices.Equal(got, want) {
			t.Errorf("taskNames(%q) = %q, want %q", task, got, want)
		}
	}
}

// TestReadPageNeedsTheTasksNames: a block that answers the task's words
// but about another thing than the task's proper name (Jinja's loop
// variable, asked for Django's) is not read; the block under the name's
// heading is, and so is one whose page title carries the name.
func TestReadPageNeedsTheTasksNames(t *testing.T) {
	task := "What is the special loop variable called in Django?"
	jinja := Block{Selector: "#loop-index", Tag: "dd", Text: "The current iteration of the loop. (1 indexed)",
		Under: "Template Designer Documentation" + HeadingSep + "Special Variables" + HeadingSep + "loop.index"}
	django := Block{Selector: "#django-loops", Tag: "p",
		Text:  "In Django, the special variable for the loop is called forloop. In Jinja, it is called loop.",
		Under: "Switching from other Template Engines" + HeadingSep + "Django" + HeadingSep + "Loops"}
	g := parseGoal(task, "http://127.0.0.1:8080/html/templates.html")
	if !slices.Equal(g.names, []string{"django"}) {
		t.Fatalf("names %q", g.names)
	}
	s := &State{Task: task, Title: "Template Designer Documentation — Jinja", Blocks: []Block{jinja}}
	if pick, ok := readPage(s, g); ok {
		t.Fatalf("read %v on a page that never names Django", pick.sels)
	}
	s.Blocks = []Block{jinja, django}
	if pick, ok := readPage(s, g); !ok || !slices.Equal(pick.sels, []string{"#django-loops"}) {
		t.Fatalf("readPage = %v, %v; want the Django section's block", pick.sels, ok)
	}
	// The name in the page's title is the block's context.
	s = &State{Task: task, Title: "Django templates", Blocks: []Block{jinja}}
	if _, ok := readPage(s, g); !ok {
		t.Fatal("a block on a page titled with the name was not read")
	}
}
