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
}

// Arm is one knowledge tree: the engine runs save into and query, and how to
// consolidate it between rounds.
type Arm struct {
	Engine      *engine.Engine
	Consolidate func(context.Context) error
}

// Harness is the demo site served on 127.0.0.1 and one browser tab on it.
type Harness struct {
	Site    *demosite.Site
	Base    string // the site's base URL
	Page    agent.Page
	Planner agent.Planner    // agent.NewExplore() unless set before a run
	Logger  *slog.Logger     // nil: no logging
	Now     func() time.Time // names the sessions; nil means time.Now

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
	if h.Page, err = b.NewPage(ctx); err != nil {
		h.Close()
		return nil, fmt.Errorf("opening a browser tab: %w", err)
	}
	if err := h.Page.Navigate(ctx, h.Base+"/"); err != nil {
		h.Close()
		return nil, fmt.Errorf("loading the demo site: %w", err)
	}
	return h, nil
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

// Tasks returns the demo tasks of a round, only those whose ids are listed
// in only (comma-separated) when it is not empty; an unknown id is an error
// that lists the known ones.
func Tasks(base string, round int, variant, only string) ([]demosite.Task, error) {
	all := demosite.Tasks(base, round, variant)
	if only == "" {
		return all, nil
	}
	var out []demosite.Task
	for _, id := range strings.Split(only, ",") {
		id = strings.TrimSpace(id)
		found := false
		for _, k := range all {
			if k.ID == id {
				out, found = append(out, k), true
			}
		}
		if !found {
			var ids []string
			for _, k := range all {
				ids = append(ids, k.ID)
			}
			return nil, fmt.Errorf("no demo task %q (tasks: %s)", id, strings.Join(ids, ", "))
		}
	}
	return out, nil
}

// RunTask runs one demo task on eng and grades it against the site's
// expected answer; a volatile answer that matches the previous round's value
// (prev) and not this round's is stale, and wrong.
func (h *Harness) RunTask(ctx context.Context, eng *engine.Engine, k demosite.Task, round int, session string, noRecall bool, prev *demosite.Task) Run {
	res, err := agent.Run(ctx, agent.RunConfig{
		Engine: eng, Page: h.Page, Planner: h.Planner, Task: k.Text, StartURL: k.StartURL,
		Intent: k.Text, Secrets: k.Secrets, Session: session, Logger: h.Logger, NoRecall: noRecall,
	})
	row := Run{Task: k.ID, Round: round, Memory: "on", Expected: k.Expected}
	if noRecall {
		row.Memory = "off"
	}
	if res != nil {
		right := demosite.Check(k, res.Answer)
		row.Tier, row.Steps, row.PlannerCalls = res.Tier, res.Steps, res.PlannerCalls
		row.Success = res.Success && right
		row.Seconds = round3(res.Duration.Seconds())
		row.Answer, row.Clicks, row.Extracts, row.PromptChars = res.Answer, res.Clicks, res.Extracts, res.PromptChars
		row.Trace, row.Error = res.TracePath, res.Error
		if res.Success && !right && prev != nil && prev.Expected != k.Expected && demosite.Check(*prev, res.Answer) {
			row.Stale = true
			row.Error = "stale: answered last round's value"
		} else if res.Success && !right {
			row.Error = fmt.Sprintf("wrong answer: want %q", k.Expected)
		}
		h.judge(ctx, eng, res, right, k.Expected)
	}
	if err != nil {
		row.Error = err.Error()
	}
	return row
}

// judge feeds the grader's verdict on a run that claimed success into the
// tree (engine.Feedback), as a person would with pem experience feedback:
// self-reported success is never the last word. A failed run needs none.
func (h *Harness) judge(ctx context.Context, eng *engine.Engine, res *agent.RunResult, right bool, expected string) {
	if res.TraceID == "" || !res.Success {
		return
	}
	v, note := engine.Right, ""
	if !right {
		v, note = engine.Wrong, fmt.Sprintf("the grader expected %q", expected)
	}
	if _, err := eng.Feedback(ctx, engine.FeedbackRequest{Trace: res.TraceID, Verdict: string(v), Note: note, Judge: "pem-grader"}); err != nil && h.Logger != nil {
		h.Logger.Warn("recording the grader's verdict", "trace", res.TraceID, "err", err)
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
	prev := map[string]demosite.Task{}
	for round := 1; round <= o.Rounds; round++ {
		h.Site.SetRound(round)
		if round > 1 {
			h.Site.SetVariant(o.Variant)
		}
		tasks, _ := Tasks(h.Base, round, o.Variant, o.Only)
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
	Rounds   int         // rounds per arm
	Only     string      // comma-separated task ids; empty: all
	Progress func(r Run) // called after each run; nil: silent
}

// Bench runs every round's tasks twice: memory-on (on, consolidated after
// each round) and memory-off (off, memory not consulted; its own tree so
// that on's tree holds only its own evidence). Volatile values move every
// round.
func (h *Harness) Bench(ctx context.Context, on, off Arm, o BenchOptions) ([]Run, error) {
	if _, err := Tasks("http://x", 1, "", o.Only); err != nil {
		return nil, err
	}
	if on.Engine == nil || off.Engine == nil {
		return nil, errors.New("bench: both arms need an engine")
	}
	stamp := h.stamp()
	var runs []Run
	prev := map[string]demosite.Task{}
	for round := 1; round <= o.Rounds; round++ {
		h.Site.SetRound(round)
		tasks, _ := Tasks(h.Base, round, "", o.Only)
		for _, arm := range []struct {
			name string
			eng  *engine.Engine
		}{{"on", on.Engine}, {"off", off.Engine}} {
			session := fmt.Sprintf("bench-%s-%s-round-%d", stamp, arm.name, round)
			for _, k := range tasks {
				row := h.RunTask(ctx, arm.eng, k, round, session, arm.name == "off", previous(prev, k.ID))
				runs = append(runs, row)
				if err := ctx.Err(); err != nil {
					return runs, err
				}
				if o.Progress != nil {
					o.Progress(row)
				}
			}
		}
		for _, k := range tasks {
			prev[k.ID] = k
		}
		if err := on.Consolidate(ctx); err != nil {
			return runs, err
		}
	}
	return runs, nil
}

func previous(prev map[string]demosite.Task, id string) *demosite.Task {
	if t, ok := prev[id]; ok {
		return &t
	}
	return nil
}
