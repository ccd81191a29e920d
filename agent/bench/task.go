package bench

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/pemdev/pem/agent/demosite"
	"github.com/pemdev/pem/engine"
)

// Task is one graded task of a bench: a demo task, or one of a user's
// --tasks file (see docs/cli.md, "pem bench --tasks").
type Task struct {
	ID       string            // short name for the tables; default task-N
	Text     string            // the task given to the agent
	StartURL string            // where it starts
	Intent   string            // the intent memory is keyed on; default the text
	Expected string            // the answer must contain it (case, commas, quotes ignored)
	Pattern  string            // or match this regular expression (RE2)
	Volatile bool              // the answer changes over time: never served from memory
	Params   map[string]string // route parameters
	Secrets  map[string]string // {{secret:NAME}} values, typed into the page only

	re   *regexp.Regexp
	demo *demosite.Task
}

// Prepare checks t and compiles its pattern: a task needs text, a start URL
// (http or https) and one of Expected or Pattern.
func (t *Task) Prepare() error {
	if strings.TrimSpace(t.Text) == "" {
		return errors.New("task is empty")
	}
	if t.demo != nil {
		return nil
	}
	if _, err := engine.NormalizeURL(t.StartURL); err != nil || !(strings.HasPrefix(t.StartURL, "http://") || strings.HasPrefix(t.StartURL, "https://")) {
		return fmt.Errorf("url %q: want an http(s) URL", t.StartURL)
	}
	switch {
	case t.Expected == "" && t.Pattern == "":
		return errors.New("no grading: give expected (the answer) or regex (a pattern the answer must match)")
	case t.Expected != "" && t.Pattern != "":
		return errors.New("give expected or regex, not both")
	case t.Pattern != "":
		re, err := regexp.Compile(t.Pattern)
		if err != nil {
			return fmt.Errorf("regex %q: %v", t.Pattern, err)
		}
		t.re = re
	}
	return nil
}

// Grade reports whether answer is right for t: a demo task by the demo's
// own check (demosite.Check); else the answer matches Pattern, or contains
// Expected as demosite.Check reads it (numbers whole, case, commas and
// quotes ignored).
func (t *Task) Grade(answer string) bool {
	switch {
	case t.demo != nil:
		return demosite.Check(*t.demo, answer)
	case t.re != nil:
		return strings.TrimSpace(answer) != "" && t.re.MatchString(answer)
	case t.Pattern != "":
		re, err := regexp.Compile(t.Pattern)
		return err == nil && strings.TrimSpace(answer) != "" && re.MatchString(answer)
	}
	return demosite.Check(demosite.Task{Expected: t.Expected}, answer)
}

// want is what a wrong answer's note says was expected.
func (t *Task) want() string {
	if t.Pattern != "" {
		return "/" + t.Pattern + "/"
	}
	return fmt.Sprintf("%q", t.Expected)
}

// DemoTask wraps a demo task.
func DemoTask(k demosite.Task) Task {
	return Task{ID: k.ID, Text: k.Text, StartURL: k.StartURL, Intent: k.Text, Expected: k.Expected,
		Volatile: k.Volatile, Secrets: k.Secrets, demo: &k}
}

// PrepareTasks checks a user's tasks (Prepare), gives each an ID
// (task-1, task-2, … where none is set) and refuses duplicate IDs. Errors
// name the task by its number in the file.
func PrepareTasks(tasks []Task) error {
	if len(tasks) == 0 {
		return errors.New("no tasks")
	}
	seen := map[string]int{}
	for i := range tasks {
		t := &tasks[i]
		if err := t.Prepare(); err != nil {
			return fmt.Errorf("task %d: %w", i+1, err)
		}
		if t.ID == "" {
			t.ID = fmt.Sprintf("task-%d", i+1)
		}
		if j, dup := seen[t.ID]; dup {
			return fmt.Errorf("task %d: id %q is task %d's too", i+1, t.ID, j)
		}
		seen[t.ID] = i + 1
	}
	return nil
}
