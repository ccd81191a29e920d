package agent

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/pemdev/pem/engine"
)

// Planner decides the next action of a run. Run calls Next once per turn in
// which memory does not already say what to do (P3–P5 every turn; P1/P2 only
// after a replay handed over), and counts each call as one planner call.
//
// Next returns Action{Tool: "done", Value: answer} to end the run with an
// answer, or Action{Tool: "done"} with an empty Value to give up. Any other
// Tool is one of ToolNames and is executed by Run (see Exec). A Type action
// may carry {{secret:NAME}} placeholders (NAME from State.SecretNames): Run
// resolves them only when typing into the page; the planner never sees a
// secret's value. An error ends the run as a failure (its trace is still
// deposited).
//
// Implementations must not keep per-run state outside State: one Planner may
// serve several runs at once (pem agent run --parallel). Next must honour ctx.
type Planner interface {
	// Name is the planner's short name ("explore", "openai", "anthropic").
	Name() string
	// Next returns the next action for s.
	Next(ctx context.Context, s *State) (Action, error)
}

// State is everything a planner sees on one turn. Secrets appear only as
// {{secret:NAME}} placeholders; no field ever holds a secret's value.
type State struct {
	// Task is the task text as given (with {{secret:NAME}} placeholders).
	Task string
	// Memory is the "## Memory" section for this task (engine.RenderMemory);
	// "" at P5 (nothing known) and for runs with memory off.
	Memory string
	// Tier is the retrieval tier memory answered with.
	Tier engine.Tier
	// URL and Title of the current page.
	URL, Title string
	// Observation is a compact digest of the current page: URL, title, the
	// interactive elements (selector + text), labelled values and a text
	// excerpt, bounded by MaxObservation characters.
	Observation string
	// Elements are the visible interactive elements of the current page.
	Elements []Element
	// Labels are the label→value pairs read from the current page.
	Labels []LabelValue
	// PageText is the page's text, bounded by MaxPageText characters (the
	// excerpt in Observation is shorter).
	PageText string
	// Blocks are the page's readable blocks in document order (headings,
	// paragraphs, code, list items, cells, definitions), when the page can
	// say (agent.Reader); nil otherwise.
	Blocks []Block
	// Status is the HTTP status of the current document; 0 when unknown.
	Status int
	// History holds the turns so far, oldest first: replayed steps and planner
	// actions alike.
	History []Turn
	// Turn is this turn's number (from 1); MaxTurns the run's cap.
	Turn, MaxTurns int
	// Params are the route parameters bound for this run (--param NAME=VALUE).
	Params map[string]string
	// SecretNames are the names of the secrets the planner may type as
	// {{secret:NAME}}, sorted. Never their values.
	SecretNames []string
	// Hints is what memory remembers for this task in structured form (the
	// same knowledge the Memory section renders as text): the remembered
	// route with its detours removed, the selectors that kept failing, the
	// recoveries that worked. Empty when Memory is.
	Hints Hints
	// Usage is where a model planner adds the tokens its Next call used, as
	// the model's usage fields report them; Run sums it per run. Planners
	// with no model leave it zero.
	Usage Usage
}

// Hints is memory's structured advice to a planner (State.Hints).
type Hints struct {
	// Route is the remembered route's steps (Route, detours removed).
	Route []engine.Step
	// AntiPatterns are selectors memory says not to use.
	AntiPatterns []string
	// Recoveries are what got past a failure before: the site's recovery
	// notes (on a URL pattern, a step on Selector failed until Action — "wait",
	// "click #accept" — was done) and the entry's blockers and hints as notes.
	Recoveries []Recovery
}

// Recovery is one remembered way past a failure (Hints.Recoveries).
type Recovery struct {
	URLPattern string // where it holds; "" everywhere on the site
	Selector   string // the control whose step failed; "" any
	Action     string // what got past it: "wait", "scroll", "click SELECTOR", joined by ", then "
	Note       string // free text (an interaction hint, a blocker's note)
}

// Usage counts a model's tokens (State.Usage, RunResult).
type Usage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

// Turn is one executed action and its result.
type Turn struct {
	Action Action
	Result ToolResult
	// URL is the page's URL after the action.
	URL string
	// Replayed is true for steps taken from memory, not asked of the planner.
	Replayed bool
}

// Bounds of what a planner is shown.
const (
	MaxObservation     = 4000 // characters of State.Observation
	MaxPageText        = 8000 // characters of State.PageText
	observationExcerpt = 1200 // characters of page text inside Observation
	observationEls     = 60   // elements listed in Observation
	observationLabels  = 40   // labels listed in Observation
)

// PromptChars is the size of what a planner is sent on this turn: task,
// memory and observation. pem bench sums it as "prompt characters".
func (s *State) PromptChars() int {
	return len(s.Task) + len(s.Memory) + len(s.Observation)
}

// Observe builds the page digest a planner reads: URL, title, interactive
// elements, labelled values and a text excerpt, at most MaxObservation
// characters. It is deterministic for the same page.
func Observe(url, title string, els []Element, labels []LabelValue, text string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "URL: %s\nTitle: %s\n", url, oneLine(title, 200))
	if len(els) > 0 {
		b.WriteString("Elements:\n")
		n := 0
		for _, e := range els {
			if !e.Visible {
				continue
			}
			if n == observationEls {
				fmt.Fprintf(&b, "  (%d more)\n", len(els)-n)
				break
			}
			line := "  " + strings.TrimSuffix(FormatElements([]Element{e}), "\n")
			b.WriteString(oneLine(line, 240) + "\n")
			n++
		}
	}
	if len(labels) > 0 {
		b.WriteString("Values:\n")
		for i, lv := range labels {
			if i == observationLabels {
				fmt.Fprintf(&b, "  (%d more)\n", len(labels)-i)
				break
			}
			fmt.Fprintf(&b, "  %s: %s\n", oneLine(lv.Label, 80), oneLine(lv.Value, 120))
		}
	}
	if t := strings.TrimSpace(text); t != "" {
		b.WriteString("Text:\n" + capText(strings.Join(strings.Fields(t), " "), observationExcerpt) + "\n")
	}
	out := b.String()
	if r := []rune(out); len(r) > MaxObservation {
		out = string(r[:MaxObservation-1]) + "…"
	}
	return out
}

// sortedNames returns m's keys, sorted.
func sortedNames(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
