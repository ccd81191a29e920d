package engine

import (
	"time"
)

// Format is the version of the knowledge tree's record format written by this code.
const Format = 1

// Outcome is how a run ended.
type Outcome string

const (
	Success Outcome = "success"
	Failure Outcome = "failure"
)

// Valid reports whether o is one of the known outcomes.
func (o Outcome) Valid() bool { return o == Success || o == Failure }

// Trace is the immutable record of one run. It is written once and never edited;
// consolidation folds it into Experience and removes it after the TTL.
type Trace struct {
	Format          int             `yaml:"format" json:"format"`
	ID              string          `yaml:"id" json:"id"`
	Writer          string          `yaml:"writer,omitempty" json:"writer,omitempty"`
	Session         string          `yaml:"session,omitempty" json:"session,omitempty"`
	Task            string          `yaml:"task,omitempty" json:"task,omitempty"`
	Intent          string          `yaml:"intent" json:"intent"`
	IntentKey       string          `yaml:"intent_key" json:"intent_key"`
	TaskType        string          `yaml:"task_type,omitempty" json:"task_type,omitempty"`
	URL             string          `yaml:"url" json:"url"`
	Domain          string          `yaml:"domain" json:"domain"`
	URLPattern      string          `yaml:"url_pattern" json:"url_pattern"`
	Outcome         Outcome         `yaml:"outcome" json:"outcome"`
	FailureCategory FailureCategory `yaml:"failure_category,omitempty" json:"failure_category,omitempty"`
	Error           string          `yaml:"error,omitempty" json:"error,omitempty"`
	HTTPStatus      int             `yaml:"http_status,omitempty" json:"http_status,omitempty"`
	StartedAt       time.Time       `yaml:"started_at" json:"started_at"`
	DurationMs      int64           `yaml:"duration_ms,omitempty" json:"duration_ms,omitempty"`
	PlannerCalls    int             `yaml:"planner_calls,omitempty" json:"planner_calls,omitempty"`
	Tier            Tier            `yaml:"tier,omitempty" json:"tier,omitempty"`
	FactsRevision   string          `yaml:"facts_revision,omitempty" json:"facts_revision,omitempty"` // the facts revision the run was served
	Params          []string        `yaml:"params,omitempty" json:"params,omitempty"`
	Steps           []Step          `yaml:"steps,omitempty" json:"steps,omitempty"`
	Result          Result          `yaml:"result,omitempty" json:"result,omitempty"`
	// SuccessCondition is where a successful run read its answer.
	SuccessCondition *SuccessCondition `yaml:"success_condition,omitempty" json:"success_condition,omitempty"`
	Redactions       []string          `yaml:"redactions,omitempty" json:"redactions,omitempty"`
	// Approvals are the decisions on the run's sensitive steps (pem.yaml's
	// approval policy), in order; absent when no step needed one.
	Approvals []Approval `yaml:"approvals,omitempty" json:"approvals,omitempty"`
}

// Step is one tool call of a run.
type Step struct {
	Seq        int      `yaml:"seq" json:"seq"`
	Action     string   `yaml:"action" json:"action"`
	Selector   string   `yaml:"selector,omitempty" json:"selector,omitempty"`
	Fallbacks  []string `yaml:"fallbacks,omitempty" json:"fallbacks,omitempty"`
	Value      string   `yaml:"value,omitempty" json:"value,omitempty"`
	Param      string   `yaml:"param,omitempty" json:"param,omitempty"`
	URL        string   `yaml:"url,omitempty" json:"url,omitempty"`
	OK         bool     `yaml:"ok" json:"ok"`
	Error      string   `yaml:"error,omitempty" json:"error,omitempty"`
	ErrorKind  string   `yaml:"error_kind,omitempty" json:"error_kind,omitempty"`
	HTTPStatus int      `yaml:"http_status,omitempty" json:"http_status,omitempty"`
	Result     string   `yaml:"result,omitempty" json:"result,omitempty"`
	DurationMs int64    `yaml:"duration_ms,omitempty" json:"duration_ms,omitempty"`
	// Target is the fingerprint of the control a click or type acted on.
	Target *Fingerprint `yaml:"target,omitempty" json:"target,omitempty"`
}

// Result is what a run produced.
type Result struct {
	Answer     string            `yaml:"answer,omitempty" json:"answer,omitempty"`
	Extracted  map[string]string `yaml:"extracted,omitempty" json:"extracted,omitempty"`
	FinalURL   string            `yaml:"final_url,omitempty" json:"final_url,omitempty"`
	FinalTitle string            `yaml:"final_title,omitempty" json:"final_title,omitempty"`
}

// Actions are the agent's tools; a step's action must be one of them.
var Actions = []string{"navigate", "click", "type", "press", "get_text", "get_elements", "extract", "evaluate", "scroll", "wait", "screenshot", "done"}

// IsAction reports whether a is a known step action.
func IsAction(a string) bool {
	for _, x := range Actions {
		if x == a {
			return true
		}
	}
	return false
}

// Selectors returns the distinct selectors the trace's steps used, in order.
func (t *Trace) Selectors() []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range t.Steps {
		if s.Selector != "" && !seen[s.Selector] {
			seen[s.Selector] = true
			out = append(out, s.Selector)
		}
	}
	return out
}
