package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/pemdev/pem/engine"
)

// Session is a run whose actions someone else decides: an MCP client
// calling pem's browser tools one at a time (agent/mcpbrowser). It records
// every action exactly as Run does — the same step records, secrets
// scrubbed, typing into a password field redacted, landing on an error page
// counted as a failed step, click and type targets fingerprinted — and
// Finish deposits the trace through Engine.SaveTrace with the outcome and
// answer the caller reports. A Session is not safe for concurrent use.
type Session struct {
	r       *run
	start   time.Time
	done    bool
	blocked *ApprovalError
}

// ErrFinished is returned by Session.Finish for a session already deposited.
var ErrFinished = errors.New("session already finished")

// NewSession starts recording on cfg.Page (required; left open) at
// cfg.StartURL. Unless cfg.NoRecall, it asks memory for (StartURL, Intent)
// once: Memory then holds the rendered "## Memory" section (empty when
// nothing is known) and the trace is tied to the facts revision served.
// cfg.Task may be empty; Intent defaults to the task text. Planner,
// Browser and MaxTurns are not used.
func NewSession(ctx context.Context, cfg RunConfig) (*Session, error) {
	if cfg.Engine == nil || cfg.Engine.Store == nil {
		return nil, fmt.Errorf("%w: no engine (memory store)", ErrConfig)
	}
	if cfg.Page == nil {
		return nil, fmt.Errorf("%w: a session needs its page", ErrConfig)
	}
	if _, err := engine.NormalizeURL(cfg.StartURL); err != nil {
		return nil, fmt.Errorf("%w: start URL: %w", ErrConfig, err)
	}
	r := &run{cfg: cfg, log: cfg.Logger, now: cfg.Now, res: &RunResult{}, page: cfg.Page}
	if r.log == nil {
		r.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if r.now == nil {
		r.now = time.Now
	}
	r.params = TaskParams(cfg.Task)
	for k, v := range cfg.Params {
		r.params[k] = v
	}
	r.cfg.Intent = sessionIntent(cfg.Intent, cfg.Task)
	if len(cfg.Secrets) > 0 {
		r.cfg.Engine = cfg.Engine.WithSecrets(cfg.Secrets)
	}
	// The tree's approval policy holds for every step, as in Run; the
	// session asks cfg.Approver.
	if err := r.loadApproval(ctx); err != nil {
		return nil, err
	}
	r.res.Tier, r.res.RecallTier = engine.P5, engine.P5
	if !cfg.NoRecall {
		rc, err := r.cfg.Engine.Query(ctx, cfg.StartURL, r.cfg.Intent)
		if err != nil {
			r.log.Warn("memory query failed; the session goes on without memory", "url", cfg.StartURL, "err", err)
		} else {
			r.recall = rc
			r.res.RecallTier, r.res.Tier, r.res.Confidence = rc.Tier, rc.Tier, rc.Confidence
			if rc.Tier != engine.P5 {
				r.memory = Scrub(engine.RenderMemory(rc, cfg.MemoryChars), cfg.Secrets)
			}
		}
	}
	return &Session{r: r, start: r.now()}, nil
}

func sessionIntent(intent, task string) string {
	if intent = strings.Join(strings.Fields(intent), " "); intent == "" {
		intent = strings.Join(strings.Fields(task), " ")
	}
	if len(intent) > engine.MaxIntent {
		intent = intent[:engine.MaxIntent]
	}
	return intent
}

// Memory is the "## Memory" section memory gave at the start ("" when
// nothing is known); Tier and Confidence what it answered.
func (s *Session) Memory() string { return s.r.memory }

// Tier is the tier memory answered for the session's start.
func (s *Session) Tier() engine.Tier { return s.r.res.RecallTier }

// Intent is the intent the session is recorded under.
func (s *Session) Intent() string { return s.r.cfg.Intent }

// SetIntent changes the intent (and task, when given) recorded at Finish;
// memory is not asked again.
func (s *Session) SetIntent(intent, task string) {
	if strings.TrimSpace(task) != "" {
		s.r.cfg.Task = task
	}
	if i := sessionIntent(intent, task); i != "" {
		s.r.cfg.Intent = i
	}
}

// LastKind is the error kind (engine.Kind*) of the last step recorded, ""
// when it succeeded or nothing is known.
func (s *Session) LastKind() string {
	if n := len(s.r.steps); n > 0 {
		return s.r.steps[n-1].ErrorKind
	}
	return ""
}

// Steps is the number of steps recorded so far.
func (s *Session) Steps() int { return len(s.r.steps) }

// Exec runs one action on the session's page and records it as a step (see
// Exec for the tools). A typed value goes into the trace redacted when the
// field is a password field or the value holds a {{secret:NAME}}.
func (s *Session) Exec(ctx context.Context, a Action) ToolResult {
	r := s.r
	s.describe(ctx, a)
	tr := r.exec(ctx, a, r.paramFor(a), false)
	// A step the approval policy stopped was not taken; unlike a run, a
	// session goes on (the caller decides what next).
	s.blocked = nil
	if r.stop != nil {
		errors.As(r.stop, &s.blocked)
		r.stop = nil
	}
	return tr
}

// describe observes the field a types into: password detection reads the
// last observed elements, and a session has no observation loop.
func (s *Session) describe(ctx context.Context, a Action) {
	r := s.r
	if a.Tool != "type" || a.Selector == "" || len(r.lastEls) == 1 && r.lastEls[0].Selector == a.Selector {
		return
	}
	if d, ok := r.page.(Describer); ok {
		if e, found, err := d.Describe(ctx, a.Selector); err == nil && found {
			e.Selector = a.Selector
			r.lastEls = []Element{e}
		}
	}
}

// NeedsApproval returns the approval request for a when the tree's policy
// (pem.yaml approval:) marks it, nil otherwise; nobody is asked and nothing
// is recorded. Exec asks RunConfig.Approver for such a step.
func (s *Session) NeedsApproval(ctx context.Context, a Action) *ApprovalRequest {
	r := s.r
	s.describe(ctx, a)
	resolved := a.Value
	if a.Tool == "navigate" {
		if t, err := ResolveURL(r.page.URL(), a.Value); err == nil {
			a.Value, resolved = t, t
		}
	}
	a.Value = Scrub(a.Value, r.cfg.Secrets)
	req, ok := r.approvalRequest(ctx, a, resolved, false)
	if !ok {
		return nil
	}
	return &req
}

// Blocked is the approval the last Exec stopped at (its step not taken,
// the decision recorded in the trace), or nil.
func (s *Session) Blocked() *ApprovalError { return s.blocked }

// Record adds a step the caller carried out itself (a screenshot returned as
// bytes, a refused approval): tr's Error marks it failed. Values are
// scrubbed of declared secrets.
func (s *Session) Record(a Action, tr ToolResult, d time.Duration) {
	r := s.r
	a.Value = Scrub(a.Value, r.cfg.Secrets)
	tr = scrubResult(tr, r.cfg.Secrets)
	r.record(a, "", false, tr, d, KindOf(tr.Error))
}

// Outcome is how the caller says a session ended.
type Outcome struct {
	// Answer is what the task read ("" for none).
	Answer string
	// Success is the caller's verdict.
	Success bool
	// Error says why a failed session failed ("" lets the engine classify).
	Error string
	// Category forces the failure category (engine.Aborted for a session
	// that ended without a verdict); "" lets the engine classify.
	Category engine.FailureCategory
}

// Finish deposits the session's trace with o's outcome and answer (once;
// a second call returns ErrFinished). A session with no step deposits
// nothing and returns a result with no TraceID. The page is left open.
func (s *Session) Finish(ctx context.Context, o Outcome) (*RunResult, error) {
	if s.done {
		return nil, ErrFinished
	}
	s.done = true
	r, res := s.r, s.r.res
	sec := r.cfg.Secrets
	res.Answer, res.Success = Scrub(o.Answer, sec), o.Success
	res.Steps = len(r.steps)
	res.Duration = r.now().Sub(s.start)
	if len(r.steps) == 0 {
		return res, nil
	}
	fin, cancel := context.WithTimeout(context.WithoutCancel(ctx), depositTimeout)
	defer cancel()
	var cond *engine.SuccessCondition
	if o.Success && r.page != nil {
		cond = r.condition(fin)
	}
	var finalURL, finalTitle string
	if r.page != nil {
		finalURL = r.page.URL()
		finalTitle, _ = r.page.Title(fin)
	}
	t := &engine.Trace{
		Task: Scrub(r.cfg.Task, sec), Intent: r.cfg.Intent, TaskType: r.cfg.TaskType,
		URL: r.cfg.StartURL, Steps: r.steps, Outcome: engine.Success, StartedAt: s.start.UTC(),
		Result:     engine.Result{Answer: res.Answer, FinalURL: Scrub(finalURL, sec), FinalTitle: Scrub(finalTitle, sec)},
		DurationMs: res.Duration.Milliseconds(), Session: r.cfg.Session,
		Tier: res.Tier, Params: r.usedParams(), Writer: r.cfg.Engine.Writer, Approvals: r.approvals,
	}
	res.Approvals = r.approvals
	if r.recall != nil && res.Tier != engine.P5 {
		t.FactsRevision = r.recall.Revision
	}
	if !o.Success && o.Category == "" && r.blocked != nil {
		o.Category = engine.ApprovalRequired // the task stopped at a step nobody approved
	}
	if o.Success {
		t.SuccessCondition = cond
	} else {
		t.Outcome, t.Error, t.FailureCategory = engine.Failure, Scrub(o.Error, sec), o.Category
		res.Error = t.Error
	}
	saved, err := r.cfg.Engine.SaveTrace(fin, t, r.sensitive)
	if err != nil {
		return res, fmt.Errorf("depositing the trace of %q: %w", r.cfg.Intent, err)
	}
	res.TraceID, res.TracePath, res.FailureCategory = saved.ID, saved.TracePath, saved.FailureCategory
	return res, nil
}
