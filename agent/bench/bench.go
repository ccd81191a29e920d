package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/pemdev/pem/agent"
	"github.com/pemdev/pem/agent/demosite"
	"github.com/pemdev/pem/engine"
)

// Run is one graded run: a row of the demo table and of the benchmark.
// Fields are added, never renamed (report.html reads them too).
type Run struct {
	Task         string      `json:"task"`
	Round        int         `json:"round"`
	Memory       string      `json:"memory"` // "on" or "off"
	Tier         engine.Tier `json:"tier"`
	Steps        int         `json:"steps"`
	PlannerCalls int         `json:"planner_calls"`
	Success      bool        `json:"success"`
	Seconds      float64     `json:"seconds"`
	Answer       string      `json:"answer"`
	Expected     string      `json:"expected"`
	Stale        bool        `json:"stale,omitempty"`
	Clicks       int         `json:"clicks"`
	Extracts     int         `json:"extracts"`
	PromptChars  int         `json:"prompt_chars"`
	Trace        string      `json:"trace,omitempty"`
	Error        string      `json:"error,omitempty"`

	// Planner and Site name what was measured ("explore", the site's URL).
	Planner string `json:"planner,omitempty"`
	Site    string `json:"site,omitempty"`
	// RecallTier is what memory answered (Tier is how the run used it).
	RecallTier engine.Tier `json:"recall_tier,omitempty"`
	// Volatile marks a task whose answer changes between rounds.
	Volatile bool `json:"volatile,omitempty"`
	// InputTokens and OutputTokens are the model's usage fields summed
	// over the run's planner calls (0 for explore: see PromptChars).
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
	// Searches counts submitted searches.
	Searches int `json:"searches"`
	// Recalled names the memory blocks the run was given
	// (agent.RecalledBlocks).
	Recalled []string `json:"recalled,omitempty"`
	// Harm marks a memory-on run that failed where the memory-off run of
	// the same task in the same round succeeded.
	Harm bool `json:"harm,omitempty"`
	// Phases splits Seconds by what the run waited for (agent.Timings);
	// deposit_s is the trace deposit after it, not part of Seconds.
	Phases Phases `json:"phases"`
}

// Phases is agent.Timings in seconds.
type Phases struct {
	Query   float64 `json:"query_s"`
	Open    float64 `json:"open_s"`
	Checks  float64 `json:"checks_s"`
	Actions float64 `json:"actions_s"`
	Landing float64 `json:"landing_s"`
	Observe float64 `json:"observe_s"`
	Plan    float64 `json:"plan_s"`
	Answer  float64 `json:"answer_s"`
	Finish  float64 `json:"finish_s"`
	Other   float64 `json:"other_s"`
	Deposit float64 `json:"deposit_s"`
}

// PhasesOf converts a run's timings (d its Duration).
func PhasesOf(t agent.Timings, d time.Duration) Phases {
	s := func(d time.Duration) float64 { return round3(d.Seconds()) }
	return Phases{Query: s(t.Query), Open: s(t.Open), Checks: s(t.Checks), Actions: s(t.Actions), Landing: s(t.Landing),
		Observe: s(t.Observe), Plan: s(t.Plan), Answer: s(t.Answer), Finish: s(t.Finish), Other: s(t.Other(d)), Deposit: s(t.Deposit)}
}

func (p Phases) add(q Phases) Phases {
	return Phases{p.Query + q.Query, p.Open + q.Open, p.Checks + q.Checks, p.Actions + q.Actions, p.Landing + q.Landing,
		p.Observe + q.Observe, p.Plan + q.Plan, p.Answer + q.Answer, p.Finish + q.Finish, p.Other + q.Other, p.Deposit + q.Deposit}
}

// Arm is one knowledge tree: the engine runs save into and query, and how to
// consolidate it between rounds.
type Arm struct {
	Engine      *engine.Engine
	Consolidate func(context.Context) error
}

// Harness is one browser tab on the site a bench runs against: the demo
// site served on 127.0.0.1 (Start), or a user's own site (Open).
type Harness struct {
	Site    *demosite.Site // nil on a user's site
	Base    string         // the site's base URL
	Page    agent.Page
	Planner agent.Planner    // agent.NewExplore() unless set before a run
	Logger  *slog.Logger     // nil: no logging
	Now     func() time.Time // names the sessions; nil means time.Now
	// MaxTurns caps each run's actions; 0 means agent.DefaultMaxTurns.
	MaxTurns int

	stop func()
}

// Start serves the demo site (stable markup, round 1) and opens one tab in b,
// loaded once so that the first cold run does not pay for the browser's
// start. Close stops both; b stays the caller's.
func Start(ctx context.Context, b agent.Browser, log *slog.Logger) (*Harness, error) {
	h := &Harness{Site: demosite.New(demosite.Options{Variant: demosite.Stable, Round: 1}), Planner: agent.NewExplore(), Logger: log}
	base, stop, err := h.Site.Start(ctx)
	if err != nil {
		return nil, err
	}
	h.Base, h.stop = base, stop
	if err := h.open(ctx, b, h.Base+"/"); err != nil {
		h.Close()
		return nil, err
	}
	return h, nil
}

// Open opens one tab in b on a user's site (site is its URL, loaded once);
// the tasks come with BenchOptions.Tasks. Close closes the tab.
func Open(ctx context.Context, b agent.Browser, site string, log *slog.Logger) (*Harness, error) {
	h := &Harness{Base: strings.TrimSuffix(site, "/"), Planner: agent.NewExplore(), Logger: log}
	if err := h.open(ctx, b, site); err != nil {
		h.Close()
		return nil, err
	}
	return h, nil
}

func (h *Harness) open(ctx context.Context, b agent.Browser, u string) error {
	var err error
	if h.Page, err = b.NewPage(ctx); err != nil {
		return fmt.Errorf("opening a browser tab: %w", err)
	}
	if err := h.Page.Navigate(ctx, u); err != nil {
		return fmt.Errorf("loading %s: %w", u, err)
	}
	return nil
}

// Close closes the tab and stops the site.
func (h *Harness) Close() {
	if h.Page != nil {
		h.Page.Close()
	}
	if h.stop != nil {
		h.stop()
	}
}

func (h *Harness) stamp() string {
	now := time.Now
	if h.Now != nil {
		now = h.Now
	}
	return now().UTC().Format("20060102T150405")
}

func (h *Harness) planner() agent.Planner {
	if h.Planner == nil {
		h.Planner = agent.NewExplore()
	}
	return h.Planner
}

// Tasks returns the demo tasks of a round, only those whose ids are listed
// in only (comma-separated) when it is not empty; an unknown id is an error
// that lists the known ones.
func Tasks(base string, round int, variant, only string) ([]demosite.Task, error) {
	return pick(demosite.Tasks(base, round, variant), only, func(k demosite.Task) string { return k.ID }, "demo task")
}

// PickTasks returns the tasks whose ids only lists (comma-separated), in
// that order; all when only is empty. An unknown id is an error listing
// the known ones.
func PickTasks(tasks []Task, only string) ([]Task, error) {
	return pick(tasks, only, func(k Task) string { return k.ID }, "task")
}

func pick[T any](all []T, only string, id func(T) string, what string) ([]T, error) {
	if only == "" {
		return all, nil
	}
	var out []T
	for _, want := range strings.Split(only, ",") {
		want = strings.TrimSpace(want)
		found := false
		for _, k := range all {
			if id(k) == want {
				out, found = append(out, k), true
			}
		}
		if !found {
			var ids []string
			for _, k := range all {
				ids = append(ids, id(k))
			}
			return nil, fmt.Errorf("no %s %q (tasks: %s)", what, want, strings.Join(ids, ", "))
		}
	}
	return out, nil
}

// RunTask runs one task on eng and grades it (Task.Grade); a volatile
// answer that matches the previous round's value (prev, demo tasks only)
// and not this round's is stale, and wrong. The grader's verdict goes to
// the tree (engine.Feedback).
func (h *Harness) RunTask(ctx context.Context, eng *engine.Engine, k Task, round int, session string, noRecall bool, prev *Task) Run {
	intent := k.Intent
	if intent == "" {
		intent = k.Text
	}
	res, err := agent.Run(ctx, agent.RunConfig{
		Engine: eng, Page: h.Page, Planner: h.planner(), Task: k.Text, StartURL: k.StartURL,
		Intent: intent, Params: k.Params, Secrets: k.Secrets, Session: session, Logger: h.Logger, NoRecall: noRecall,
		MaxTurns: h.MaxTurns,
	})
	row := Run{Task: k.ID, Round: round, Memory: "on", Expected: k.Expected, Planner: h.planner().Name(), Site: h.Base, Volatile: k.Volatile}
	if k.Pattern != "" {
		row.Expected = "/" + k.Pattern + "/"
	}
	if noRecall {
		row.Memory = "off"
	}
	if res != nil {
		right := k.Grade(res.Answer)
		row.Tier, row.RecallTier, row.Steps, row.PlannerCalls = res.Tier, res.RecallTier, res.Steps, res.PlannerCalls
		row.Success = res.Success && right
		row.Seconds = round3(res.Duration.Seconds())
		row.Phases = PhasesOf(res.Timings, res.Duration)
		row.Answer, row.Clicks, row.Extracts, row.PromptChars = res.Answer, res.Clicks, res.Extracts, res.PromptChars
		row.InputTokens, row.OutputTokens, row.Searches, row.Recalled = res.InputTokens, res.OutputTokens, res.Searches, res.Recalled
		row.Trace, row.Error = res.TracePath, res.Error
		if res.Success && !right && prev != nil && prev.Expected != k.Expected && prev.Grade(res.Answer) {
			row.Stale = true
			row.Error = "stale: answered last round's value"
		} else if res.Success && !right {
			row.Error = "wrong answer: want " + k.want()
		}
		h.judge(ctx, eng, res, right, k.want())
	}
	if err != nil {
		row.Error = err.Error()
	}
	return row
}

// judge feeds the grader's verdict on a run that claimed success into the
// tree (engine.Feedback), as a person would with pem experience feedback:
// self-reported success is never the last word. A failed run needs none.
func (h *Harness) judge(ctx context.Context, eng *engine.Engine, res *agent.RunResult, right bool, want string) {
	if res.TraceID == "" || !res.Success {
		return
	}
	v, note := engine.Right, ""
	if !right {
		v, note = engine.Wrong, "the grader expected "+want
	}
	if _, err := eng.Feedback(ctx, engine.FeedbackRequest{Trace: res.TraceID, Verdict: string(v), Note: note, Judge: "pem-grader"}); err != nil && h.Logger != nil {
		h.Logger.Warn("recording the grader's verdict", "trace", res.TraceID, "err", err)
	}
}

// roundTasks are the tasks of a round: the user's (the same every round),
// else the demo's with this round's values.
func (h *Harness) roundTasks(round int, variant, only string, user []Task) ([]Task, error) {
	if len(user) > 0 {
		return PickTasks(user, only)
	}
	ks, err := Tasks(h.Base, round, variant, only)
	if err != nil {
		return nil, err
	}
	out := make([]Task, len(ks))
	for i, k := range ks {
		out[i] = DemoTask(k)
	}
	return out, nil
}

func (h *Harness) setRound(round int) {
	if h.Site != nil {
		h.Site.SetRound(round)
	}
}

// DemoOptions are pem demo's knobs.
type DemoOptions struct {
	Rounds   int         // 1 cold, then warm
	Variant  string      // markup of the warm rounds: demosite.Stable or demosite.Drift
	Only     string      // comma-separated task ids; empty: all
	Progress func(r Run) // called after each run; nil: silent
}

// Demo runs the tasks cold (round 1), consolidates, then warm (rounds
// 2..Rounds, volatile values moved, Variant markup), each round its own
// session, and consolidates once more at the end. It returns the runs done
// so far also with an error.
func (h *Harness) Demo(ctx context.Context, on Arm, o DemoOptions) ([]Run, error) {
	if _, err := Tasks("http://x", 1, o.Variant, o.Only); err != nil {
		return nil, err
	}
	stamp := h.stamp()
	var runs []Run
	prev := map[string]Task{}
	for round := 1; round <= o.Rounds; round++ {
		h.setRound(round)
		if round > 1 && h.Site != nil {
			h.Site.SetVariant(o.Variant)
		}
		tasks, _ := h.roundTasks(round, o.Variant, o.Only, nil)
		session := fmt.Sprintf("demo-%s-round-%d", stamp, round)
		for _, k := range tasks {
			row := h.RunTask(ctx, on.Engine, k, round, session, false, previous(prev, k.ID))
			runs = append(runs, row)
			prev[k.ID] = k
			if err := ctx.Err(); err != nil {
				return runs, err
			}
			if o.Progress != nil {
				o.Progress(row)
			}
		}
		if round < o.Rounds {
			if err := on.Consolidate(ctx); err != nil {
				return runs, err
			}
		}
	}
	return runs, on.Consolidate(ctx)
}

// BenchOptions are pem bench's knobs.
type BenchOptions struct {
	Rounds int    // rounds per arm
	Only   string // comma-separated task ids; empty: all
	// Tasks are a user's graded tasks (PrepareTasks first); empty: the
	// demo's, on the demo site.
	Tasks    []Task
	Progress func(r Run) // called after each run; nil: silent
}

// Bench runs every round's tasks twice: memory-on (on, consolidated after
// each round) and memory-off (off, memory not consulted; its own tree so
// that on's tree holds only its own evidence). On the demo site volatile
// values move every round. After each round the memory-on runs that failed
// where memory-off succeeded are marked Harm.
func (h *Harness) Bench(ctx context.Context, on, off Arm, o BenchOptions) ([]Run, error) {
	if _, err := h.roundTasks(1, "", o.Only, o.Tasks); err != nil {
		return nil, err
	}
	if len(o.Tasks) == 0 && h.Site == nil {
		return nil, errors.New("bench: no tasks for a site that is not the demo site")
	}
	if on.Engine == nil || off.Engine == nil {
		return nil, errors.New("bench: both arms need an engine")
	}
	stamp := h.stamp()
	var runs []Run
	prev := map[string]Task{}
	for round := 1; round <= o.Rounds; round++ {
		h.setRound(round)
		tasks, _ := h.roundTasks(round, "", o.Only, o.Tasks)
		first := len(runs)
		for _, arm := range []struct {
			name string
			eng  *engine.Engine
		}{{"on", on.Engine}, {"off", off.Engine}} {
			session := fmt.Sprintf("bench-%s-%s-round-%d", stamp, arm.name, round)
			for _, k := range tasks {
				var p *Task
				if len(o.Tasks) == 0 {
					p = previous(prev, k.ID)
				}
				row := h.RunTask(ctx, arm.eng, k, round, session, arm.name == "off", p)
				runs = append(runs, row)
				if err := ctx.Err(); err != nil {
					return runs, err
				}
				if o.Progress != nil {
					o.Progress(row)
				}
			}
		}
		MarkHarm(runs[first:])
		for _, k := range tasks {
			prev[k.ID] = k
		}
		if err := on.Consolidate(ctx); err != nil {
			return runs, err
		}
	}
	return runs, nil
}

// MarkHarm marks the memory-on runs that did worse than the memory-off run
// of the same task in the same round (Harm: paired harm).
func MarkHarm(runs []Run) {
	type key struct {
		task  string
		round int
	}
	off := map[key]Run{}
	for _, r := range runs {
		if r.Memory == "off" {
			off[key{r.Task, r.Round}] = r
		}
	}
	for i := range runs {
		r := &runs[i]
		o, paired := off[key{r.Task, r.Round}]
		r.Harm = false
		if r.Memory == "on" && paired {
			r.Harm, _ = Harm(*r, o)
		}
	}
}

func previous(prev map[string]Task, id string) *Task {
	if t, ok := prev[id]; ok {
		return &t
	}
	return nil
}
