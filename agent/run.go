package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/pemdev/pem/engine"
)

// DefaultMaxTurns caps a run's actions (replayed and planned) when
// RunConfig.MaxTurns is 0.
const DefaultMaxTurns = 25

// maxObserved caps the elements a planner is shown per page.
const maxObserved = 2000

// depositTimeout bounds the trace deposit after a cancelled run.
const depositTimeout = 10 * time.Second

// RunConfig is one task for Run.
type RunConfig struct {
	// Engine is the memory: queried at the start, the trace deposited at the
	// end. Required.
	Engine *engine.Engine
	// Browser opens the run's page (closed at the end); or Page, used as is
	// and left open. One of the two is required.
	Browser Browser
	Page    Page
	// Planner decides when memory does not. Required unless every run is a
	// full replay (P1 with an answer); a nil Planner that is needed ends the
	// run as a failure.
	Planner Planner
	// Task is the task text; secrets only as {{secret:NAME}}.
	Task string
	// StartURL is where the run starts, and the URL memory is keyed on.
	StartURL string
	// Intent keys the memory; default: the task text.
	Intent string
	// TaskType is recorded in the trace (optional).
	TaskType string
	// MaxTurns caps the actions of the run; 0 means DefaultMaxTurns.
	MaxTurns int
	// Params bind route parameters (--param NAME=VALUE). Quoted strings of
	// the task are bound too, as "quote1", "quote2", … (see TaskParams);
	// Params wins on a clash.
	Params map[string]string
	// Secrets are name → value; typed into the page only.
	Secrets map[string]string
	// ShotDir receives the final screenshot; "" takes none.
	ShotDir string
	// Session groups runs in the evidence (one session per agent process or
	// per demo round); "" makes each run its own session.
	Session string
	// NoRecall skips the memory query: the run starts cold (P5) whatever the
	// tree holds, and is still deposited (pem bench's memory-off arm).
	NoRecall bool
	// MemoryChars caps the Memory section; 0 uses the tree's policy.
	MemoryChars int
	// Approver is asked before every step the tree's approval policy
	// (pem.yaml `approval:`) marks, planned or replayed; nil asks nobody, so
	// such a step stops the run with approval_required (see approval.go).
	Approver Approver
	// RunID names the run (its snapshot, an approval request); "" leaves
	// it unnamed, unless SnapshotDir is set (then Run makes one). A run
	// with a RunID and no Session uses the RunID as its session, so a
	// resumed run's trace joins the same session.
	RunID string
	// SnapshotDir receives the run's snapshot after every step
	// (snapshot.go); "" writes none. Keep it out of git.
	SnapshotDir string
	// Resume continues the run a snapshot describes (Snapshot.Configure
	// fills the rest of the config from it).
	Resume *Snapshot
	// OnStep, when set, is called after every recorded step with the
	// number of steps so far, the turn cap and the step's action-log line
	// (MCP progress notifications). It must not block for long.
	OnStep func(steps, maxTurns int, line string)
	Logger *slog.Logger     // nil: discard
	Now    func() time.Time // nil: time.Now
}

// RunResult is what a run did.
type RunResult struct {
	// Answer is what the run read; "" when it found nothing.
	Answer string
	// Success is true only when the answer was read on the page in this run.
	Success bool
	// Tier is how the run used memory: P1/P2 replayed, P3/P4 planned with
	// the Memory section, P5 planned cold.
	Tier engine.Tier
	// RecallTier is what memory answered; it differs from Tier when a P1
	// route had parameters that could not be bound.
	RecallTier engine.Tier
	Confidence float64
	// Steps is the number of recorded actions; PlannerCalls the Next calls.
	Steps        int
	PlannerCalls int
	// Replayed is the number of steps taken from memory; HandedOver is true
	// when a replay stopped at a miss and the planner took over.
	Replayed   int
	HandedOver bool
	// Clicks and Extracts count those actions (pem bench).
	Clicks, Extracts int
	// PromptChars sums State.PromptChars over the planner calls.
	PromptChars int
	// InputTokens and OutputTokens sum what the model planner reported in
	// its usage fields (State.Usage); zero for explore.
	InputTokens, OutputTokens int
	// Searches counts submitted searches (a typed value with Enter that is
	// not a secret).
	Searches int
	// Recalled names the memory blocks the run was given (RecalledBlocks);
	// empty at P5 and with NoRecall.
	Recalled []string
	// Recovered lists the failed steps of a run that went on (for example a
	// drifted selector caught by P2 verification), each classified.
	Recovered []StepFailure
	// FailureCategory classifies a failed run.
	FailureCategory engine.FailureCategory
	Error           string
	TraceID         string
	TracePath       string
	ScreenshotPath  string
	ActionLog       []string
	Duration        time.Duration
	// Timings splits Duration by phase (and adds the deposit after it).
	Timings Timings
	// Approvals are the decisions on sensitive steps, as in the trace;
	// Blocked is the step the run stopped before (approval_required).
	Approvals []engine.Approval
	Blocked   *ApprovalRequest
	// RunID is the run's id (its snapshot's name); Resumed is true for a
	// run continued from a snapshot.
	RunID   string
	Resumed bool
}

// StepFailure is one failed step and its failure category.
type StepFailure struct {
	Seq      int
	Action   string
	Selector string
	Kind     string
	Category engine.FailureCategory
}

// ErrConfig is returned for a RunConfig that cannot run.
var ErrConfig = errors.New("agent run config")

// ErrPlanner wraps an error of the planner (its model failed): the run is
// recorded as planner_error, which does not count against the site.
var ErrPlanner = errors.New("planner")

// run is the state of one Run.
type run struct {
	cfg      RunConfig
	log      *slog.Logger
	now      func() time.Time
	page     Page
	params   map[string]string
	recall   *engine.Recall
	memory   string
	hints    Hints
	maxTurns int
	res      *RunResult

	steps     []engine.Step
	sensitive map[int]bool // indexes of steps whose typed value is a secret
	history   []Turn
	corpus    []string // every text read from a page in this run (grounding)
	lastEls   []Element
	lastTitle string
	// landStatus is the HTTP status of the error page the step being
	// recorded landed on (0 otherwise); landTarget the fingerprint of the
	// control it acted on.
	landStatus int
	landTarget *engine.Fingerprint
	// endBlocks are the blocks of the page the answer was checked on.
	endBlocks []Block
	// lastBlocks were listed when the run had blocksAt steps (a replay's
	// success condition check); the answer checks reuse them while no
	// step has been taken since.
	lastBlocks []Block
	blocksAt   int

	approval  engine.ApprovalPolicy // the tree's approval rules
	approvals []engine.Approval     // decisions so far
	// stop is the error that ends the run before the next step (an
	// unapproved step); blocked the step it names.
	stop    error
	blocked *ApprovalRequest

	started    time.Time
	replayDone int      // steps of the replayed route done (a resume skips them)
	replayFrom int      // route steps a resumed replay skips
	pending    []string // the replayed route's remaining steps, described
	// described caches the last live fingerprint; landChecked is true
	// while the step being recorded had its landing status read (exec):
	// landCode.
	described   describedFP
	landChecked bool
	landCode    int
}

// Run performs one task: it asks memory (engine.Query on StartURL and the
// intent), picks the tier, replays or plans, records every step, and
// deposits the trace in every case — success, failure, error and
// cancellation (with a fresh short context). The returned error is non-nil
// when the run could not be carried out (bad config, browser or store
// failure, cancellation); a task that simply was not achieved is a nil error
// with Success false. The result is non-nil whenever the config was valid.
func Run(ctx context.Context, cfg RunConfig) (*RunResult, error) {
	if cfg.Engine == nil || cfg.Engine.Store == nil {
		return nil, fmt.Errorf("%w: no engine (memory store)", ErrConfig)
	}
	if cfg.Browser == nil && cfg.Page == nil {
		return nil, fmt.Errorf("%w: no browser or page", ErrConfig)
	}
	if strings.TrimSpace(cfg.Task) == "" {
		return nil, fmt.Errorf("%w: the task is empty", ErrConfig)
	}
	if n, err := engine.NormalizeURL(cfg.StartURL); err != nil {
		return nil, fmt.Errorf("%w: start URL: %w", ErrConfig, err)
	} else if err := engine.CheckHost(n, cfg.StartURL); err != nil {
		return nil, fmt.Errorf("%w: start URL: %w", ErrConfig, err)
	}
	for name := range cfg.Secrets {
		if !ValidSecretName(name) {
			return nil, fmt.Errorf("%w: secret name %q: use letters, digits, '_', '.', '-'", ErrConfig, name)
		}
	}
	if len(SecretNamesIn(cfg.Task)) > 0 {
		if _, err := ResolveSecrets(cfg.Task, cfg.Secrets); err != nil {
			return nil, fmt.Errorf("%w: task: %w", ErrConfig, err)
		}
	}
	r := &run{cfg: cfg, log: cfg.Logger, now: cfg.Now, maxTurns: cfg.MaxTurns, res: &RunResult{}}
	if r.log == nil {
		r.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if r.now == nil {
		r.now = time.Now
	}
	if r.maxTurns <= 0 {
		r.maxTurns = DefaultMaxTurns
	}
	r.params = TaskParams(cfg.Task)
	for k, v := range cfg.Params {
		r.params[k] = v
	}
	if cfg.Intent == "" {
		r.cfg.Intent = strings.Join(strings.Fields(cfg.Task), " ")
		if len(r.cfg.Intent) > engine.MaxIntent {
			r.cfg.Intent = r.cfg.Intent[:engine.MaxIntent]
		}
	}
	// An engine that also scrubs this run's secrets, so parallel runs never
	// share or race on the map.
	if len(cfg.Secrets) > 0 {
		r.cfg.Engine = cfg.Engine.WithSecrets(cfg.Secrets)
	}
	if err := r.loadApproval(ctx); err != nil {
		return nil, err
	}
	if r.cfg.RunID == "" && r.cfg.SnapshotDir != "" {
		r.cfg.RunID = NewRunID(r.now())
	}
	if r.cfg.RunID != "" && !ValidRunID(r.cfg.RunID) {
		return nil, fmt.Errorf("%w: run id %q: use letters, digits, '-', '_' (at most 64)", ErrConfig, r.cfg.RunID)
	}
	if r.cfg.Session == "" {
		r.cfg.Session = r.cfg.RunID
	}
	r.res.RunID = r.cfg.RunID
	return r.do(ctx)
}

func (r *run) do(ctx context.Context) (*RunResult, error) {
	start := r.now()
	res := r.res
	res.Tier, res.RecallTier = engine.P5, engine.P5
	r.started = start
	if rs := r.cfg.Resume; rs != nil {
		r.resumeFrom(rs)
		start = r.started
	}

	var runErr error
	tm := &res.Timings
	if !r.cfg.NoRecall {
		t0 := r.now()
		rc, err := r.cfg.Engine.Query(ctx, r.cfg.StartURL, r.cfg.Intent)
		if err != nil {
			// No memory to trust: a broken tree must not stop the run, but it
			// is said loudly.
			r.log.Warn("memory query failed; running cold", "url", r.cfg.StartURL, "err", err)
			r.logf("memory: query failed (%v); running cold", err)
		} else {
			// The tier is engine's (engine.DecideTier: overlap matches and
			// other page types are at most P3); the run only adds its own
			// facts through Recall.Apply (replay).
			r.recall = rc
			res.RecallTier, res.Tier, res.Confidence = rc.Tier, rc.Tier, rc.Confidence
			if len(rc.Reasons) > 0 {
				r.logf("memory tier: %s", rc.Reasons[0])
			}
			if Recalled(rc) {
				r.memory = Scrub(engine.RenderMemory(rc, r.cfg.MemoryChars), r.cfg.Secrets)
				r.hints = hintsOf(rc)
				res.Recalled = RecalledBlocks(rc)
			}
		}
		r.clock(&tm.Query, t0)
	}
	r.logf("memory: %s (confidence %.2f)", res.RecallTier, res.Confidence)
	r.snapshot(SnapRunning, "")

	answer, done, err := r.execute(ctx)
	if err != nil {
		runErr = err
	}
	var unverified string
	t0 := r.now()
	if done {
		res.Answer = Scrub(answer, r.cfg.Secrets)
		res.Success = res.Answer != "" && r.grounded(res.Answer)
		if res.Answer != "" && !res.Success {
			r.logf("answer %q was not read on the page in this run: not a success", oneLine(res.Answer, 80))
		}
		if res.Success && r.page != nil {
			src, blocks := sourceOf(ctx, r.page, r.blocksNow())
			r.endBlocks = blocks
			if why := CheckAnswer(r.cfg.Task, r.cfg.StartURL, res.Answer, src); why != "" {
				unverified = "unverified answer: " + why
				res.Success = false
				r.logf("answer %q fails the answer checks: %s", oneLine(res.Answer, 80), why)
			}
		}
	}
	if runErr != nil {
		res.Success = false
		res.Error = Scrub(runErr.Error(), r.cfg.Secrets)
	} else if !res.Success && res.Error == "" {
		switch {
		case !done:
			res.Error = fmt.Sprintf("no answer within %d turns", r.maxTurns)
		case res.Answer == "":
			res.Error = "the planner gave up without an answer"
		case unverified != "":
			res.Error = unverified
		default:
			res.Error = "the answer was not read on the page in this run"
		}
	}

	// The final screenshot and page, best effort, with a context that
	// survives cancellation.
	var cond *engine.SuccessCondition
	if res.Success && r.page != nil {
		// Before the page closes, on its own budget: the deposit's must
		// not be spent reading a long page.
		cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), depositTimeout)
		cond = r.condition(cctx)
		ccancel()
	}
	t0 = r.clock(&tm.Answer, t0)
	fin, cancel := context.WithTimeout(context.WithoutCancel(ctx), depositTimeout)
	defer cancel()
	var finalURL, finalTitle string
	if r.page != nil {
		finalURL = r.page.URL()
		finalTitle, _ = r.page.Title(fin)
		if r.cfg.ShotDir != "" {
			if sr := Exec(fin, r.page, Action{Tool: "screenshot"}, r.cfg.ShotDir); sr.Error == "" && len(sr.Attachments) > 0 {
				res.ScreenshotPath = sr.Attachments[0]
			}
		}
		if r.cfg.Page == nil {
			if err := r.page.Close(); err != nil {
				r.log.Warn("closing page", "err", err)
			}
		}
	}
	r.clock(&tm.Finish, t0)
	res.Duration = r.now().Sub(start)
	res.Steps = len(r.steps)
	res.Approvals, res.Blocked = r.approvals, r.blocked
	if r.blocked != nil {
		res.FailureCategory = engine.ApprovalRequired
	}

	// Deposit: always — but a run that took no step is no evidence of
	// anything (engine refuses it), so there is nothing to deposit.
	if len(r.steps) == 0 {
		r.logf("no step was taken: nothing to deposit")
		r.finalSnapshot(ctx, runErr)
		return res, runErr
	}
	t := &engine.Trace{
		Task: Scrub(r.cfg.Task, r.cfg.Secrets), Intent: r.cfg.Intent, TaskType: r.cfg.TaskType,
		URL: r.cfg.StartURL, Steps: r.steps, Outcome: engine.Success, StartedAt: start.UTC(),
		Result:     engine.Result{Answer: res.Answer, FinalURL: Scrub(finalURL, r.cfg.Secrets), FinalTitle: Scrub(finalTitle, r.cfg.Secrets)},
		DurationMs: res.Duration.Milliseconds(), Session: r.cfg.Session, PlannerCalls: res.PlannerCalls,
		Tier: res.Tier, Params: r.usedParams(), Writer: r.cfg.Engine.Writer, Approvals: r.approvals,
	}
	if r.recall != nil && res.Tier != engine.P5 {
		t.FactsRevision = r.recall.Revision // ties the outcome to the knowledge used
	}
	if res.Success {
		t.SuccessCondition = cond
	} else {
		t.Outcome, t.Error = engine.Failure, res.Error
		t.FailureCategory = r.noFault(ctx, runErr, done)
		if unverified != "" && runErr == nil {
			t.FailureCategory = engine.UnverifiedAnswer
		}
	}
	t0 = r.now()
	saved, err := r.cfg.Engine.SaveTrace(fin, t, r.sensitive)
	r.clock(&tm.Deposit, t0)
	if err != nil {
		r.log.Error("depositing the trace failed", "url", r.cfg.StartURL, "err", err)
		runErr = errors.Join(runErr, fmt.Errorf("depositing the trace of %q: %w", r.cfg.Intent, err))
	} else {
		res.TraceID, res.TracePath = saved.ID, saved.TracePath
		res.FailureCategory = saved.FailureCategory
	}
	r.log.Info("run finished", "tier", res.Tier, "steps", res.Steps, "planner_calls", res.PlannerCalls,
		"success", res.Success, "trace", res.TracePath)
	r.finalSnapshot(ctx, runErr)
	return res, runErr
}

// finalSnapshot archives the snapshot of a run that ended, and keeps that
// of a run that can go on (cancelled, or stopped before an unapproved
// step) as resumable.
func (r *run) finalSnapshot(ctx context.Context, runErr error) {
	status := SnapFailed
	switch {
	case r.res.Success:
		status = SnapDone
	case r.blocked != nil:
		status = SnapBlocked
	case ctx.Err() != nil || errors.Is(runErr, context.Canceled):
		status = SnapInterrupted
	}
	r.snapshot(status, r.res.Error)
}

// noFault returns the category of a failed run the site is not to blame
// for, or "": cancelled (Ctrl-C, SIGTERM) or the turn limit reached with no
// step failing is aborted; the planner's model failing is planner_error.
func (r *run) noFault(ctx context.Context, runErr error, done bool) engine.FailureCategory {
	switch {
	case ctx.Err() != nil || errors.Is(runErr, context.Canceled):
		return engine.Aborted
	case errors.Is(runErr, ErrApprovalRequired):
		return engine.ApprovalRequired
	case errors.Is(runErr, ErrPlanner):
		return engine.PlannerError
	case runErr == nil && !done:
		for _, s := range r.steps {
			if !s.OK || s.Error != "" {
				return ""
			}
		}
		return engine.Aborted
	}
	return ""
}

// execute opens the page, navigates to the start, replays what memory allows
// and plans the rest. It returns the answer and whether the run ended with one.
func (r *run) execute(ctx context.Context) (string, bool, error) {
	if r.cfg.Page != nil {
		r.page = r.cfg.Page
	} else {
		t0 := r.now()
		p, err := r.cfg.Browser.NewPage(ctx)
		r.clock(&r.res.Timings.Open, t0)
		if err != nil {
			return "", false, fmt.Errorf("opening a browser page: %w", err)
		}
		r.page = p
	}
	if rs := r.cfg.Resume; rs != nil && len(r.steps) > 0 {
		if err := r.resumeAt(ctx, rs); err != nil {
			return "", false, err
		}
	}
	// A replay starts with the route's own first navigation (P1 may go
	// straight to the page the answer is read on); planning starts at StartURL.
	if r.recall != nil && (r.res.Tier == engine.P1 || r.res.Tier == engine.P2) && (r.cfg.Resume == nil || r.replayFrom > 0 || len(r.steps) == 0) {
		rp := r.replay(ctx)
		if err := ctx.Err(); err != nil {
			return "", false, fmt.Errorf("run cancelled: %w", err)
		}
		if r.stop != nil {
			return "", false, r.stop
		}
		if rp.done {
			return rp.answer, true, nil
		}
		r.pending = nil
		r.res.HandedOver = true
		r.logf("replay handed over to the planner: %s", rp.why)
	}
	if u := r.page.URL(); len(r.steps) == 0 || u == "" || strings.HasPrefix(u, "about:") {
		tr := r.exec(ctx, Action{Tool: "navigate", Value: r.cfg.StartURL}, "", false)
		if r.stop != nil {
			return "", false, r.stop
		}
		if tr.Error != "" && KindOf(tr.Error) == engine.KindTimeout && ctx.Err() == nil {
			// A slow first load (a cold browser, a busy machine): once more.
			tr = r.exec(ctx, Action{Tool: "navigate", Value: r.cfg.StartURL}, "", false)
		}
		if tr.Error != "" {
			if err := ctx.Err(); err != nil {
				return "", false, fmt.Errorf("run cancelled: %w", err)
			}
			return "", false, fmt.Errorf("the start page %s did not load: %s", r.cfg.StartURL, tr.Error)
		}
	}
	return r.plan(ctx)
}

// plan runs the planner loop until done, an error or the turn limit.
func (r *run) plan(ctx context.Context) (string, bool, error) {
	for len(r.steps) < r.maxTurns {
		if err := ctx.Err(); err != nil {
			return "", false, fmt.Errorf("run cancelled: %w", err)
		}
		if r.cfg.Planner == nil {
			return "", false, fmt.Errorf("%w: memory could not finish the task and no planner is configured", ErrConfig)
		}
		t0 := r.now()
		s := r.state(ctx)
		t0 = r.clock(&r.res.Timings.Observe, t0)
		r.res.PlannerCalls++
		r.res.PromptChars += s.PromptChars()
		a, err := r.cfg.Planner.Next(ctx, s)
		r.clock(&r.res.Timings.Plan, t0)
		r.res.InputTokens += s.Usage.InputTokens
		r.res.OutputTokens += s.Usage.OutputTokens
		if err != nil {
			if ctx.Err() != nil {
				return "", false, fmt.Errorf("run cancelled: %w", ctx.Err())
			}
			return "", false, fmt.Errorf("%w %s: %w", ErrPlanner, r.cfg.Planner.Name(), err)
		}
		if a.Tool == "done" {
			r.logf("[%s] done %q", r.cfg.Planner.Name(), oneLine(Scrub(a.Value, r.cfg.Secrets), 120))
			return a.Value, true, nil
		}
		r.exec(ctx, a, r.paramFor(a), false)
		if r.stop != nil {
			return "", false, r.stop
		}
	}
	return "", false, nil
}

// state observes the page and builds the planner's State.
func (r *run) state(ctx context.Context) *State {
	p := r.page
	url := p.URL()
	title, _ := p.Title(ctx)
	// Every control of the page: a real index page has hundreds of links,
	// and the one the task needs is rarely among the first.
	els, err := p.Elements(ctx, "", maxObserved)
	if err != nil {
		r.log.Debug("observe: elements", "err", err)
	}
	labels, err := p.Labelled(ctx)
	if err != nil {
		r.log.Debug("observe: labels", "err", err)
	}
	text, err := p.Text(ctx, "")
	if err != nil {
		r.log.Debug("observe: text", "err", err)
	}
	sec := r.cfg.Secrets
	title, text = Scrub(title, sec), Scrub(capText(text, MaxPageText), sec)
	for i := range els {
		els[i].Text, els[i].Label, els[i].Placeholder = Scrub(els[i].Text, sec), Scrub(els[i].Label, sec), Scrub(els[i].Placeholder, sec)
	}
	for i := range labels {
		labels[i].Value = Scrub(labels[i].Value, sec)
	}
	r.lastEls, r.lastTitle = els, title
	r.corpus = append(r.corpus, text)
	for _, lv := range labels {
		r.corpus = append(r.corpus, lv.Label+": "+lv.Value)
	}
	var blocks []Block
	status := 0
	if rd, ok := p.(Reader); ok {
		if blocks, err = rd.Blocks(ctx); err != nil {
			r.log.Debug("observe: blocks", "err", err)
		}
		for i := range blocks {
			blocks[i].Text, blocks[i].Under = Scrub(blocks[i].Text, sec), Scrub(blocks[i].Under, sec)
		}
		status = rd.StatusCode(ctx)
	}
	hist := make([]Turn, len(r.history))
	copy(hist, r.history)
	return &State{
		Task: r.cfg.Task, Memory: r.memory, Tier: r.res.Tier, URL: Scrub(url, sec), Title: title,
		Observation: Observe(Scrub(url, sec), title, els, labels, text), Elements: els, Labels: labels,
		PageText: text, Blocks: blocks, Status: status, History: hist, Turn: len(r.steps) + 1, MaxTurns: r.maxTurns,
		Params: copyMap(r.params), SecretNames: sortedNames(r.cfg.Secrets), Hints: r.hints,
	}
}

// exec resolves secrets, runs one action, records it as a step and a turn.
// param names the route parameter a typed value came from.
func (r *run) exec(ctx context.Context, a Action, param string, replayed bool) ToolResult {
	real := a
	shown := a // what is recorded and shown: placeholders, never values
	shown.Value = Scrub(a.Value, r.cfg.Secrets)
	if a.Tool == "type" && len(SecretNamesIn(a.Value)) > 0 {
		v, err := ResolveSecrets(a.Value, r.cfg.Secrets)
		if err != nil {
			tr := fail(a.Tool, err)
			r.record(shown, param, replayed, tr, 0, KindOf(tr.Error))
			return tr
		}
		real.Value = v
	}
	if a.Tool == "navigate" {
		if target, err := ResolveURL(r.page.URL(), a.Value); err == nil {
			shown.Value, real.Value = target, target
		}
	}
	if err := r.approve(ctx, shown, real.Value, replayed); err != nil {
		// Not taken, so not a step: the decision is in r.approvals.
		r.stop = err
		return fail(a.Tool, err)
	}
	if a.Tool == "click" || a.Tool == "type" {
		t0 := r.now()
		r.landTarget = r.target(ctx, a.Selector, !replayed)
		r.clock(&r.res.Timings.Checks, t0)
	}
	t0 := r.now()
	var tr ToolResult
	if a.Tool == "press" {
		// Not a planner tool: replayed routes press Enter after typing.
		key := a.Value
		if key == "" {
			key = "Enter"
		}
		if err := r.page.Press(ctx, a.Selector, key); err != nil {
			tr = fail(a.Tool, err)
		} else {
			tr = ToolResult{ExtractedContent: "pressed " + key + " in " + a.Selector + "; now at " + r.page.URL()}
		}
	} else {
		tr = Exec(ctx, r.page, real, r.cfg.ShotDir)
	}
	t1 := r.now()
	d := t1.Sub(t0)
	r.res.Timings.Actions += d
	kind := KindOf(tr.Error)
	if tr.Error == "" && (a.Tool == "navigate" || a.Tool == "click" || a.Tool == "press" || a.Tool == "type" && a.Submit) {
		// A step that lands on an error page failed, whatever the browser
		// said about the load.
		why, status := landedOnError(ctx, r.page)
		if why != "" {
			tr.Error = fmt.Sprintf("%s: landed on an error page (%s) at %s", a.Tool, why, r.page.URL())
			kind, r.landStatus = engine.KindErrorPage, status
		}
		if _, isReader := r.page.(Reader); isReader {
			r.landCode, r.landChecked = status, true
		}
		r.clock(&r.res.Timings.Landing, t1)
	}
	tr = scrubResult(tr, r.cfg.Secrets)
	r.record(shown, param, replayed, tr, d, kind)
	r.landStatus, r.landTarget, r.landCode, r.landChecked = 0, nil, 0, false
	return tr
}

func scrubResult(tr ToolResult, sec map[string]string) ToolResult {
	tr.ExtractedContent = Scrub(tr.ExtractedContent, sec)
	tr.LongTermMemory = Scrub(tr.LongTermMemory, sec)
	tr.Error = Scrub(tr.Error, sec)
	return tr
}

// record appends one step to the trace and one turn to the history.
func (r *run) record(a Action, param string, replayed bool, tr ToolResult, d time.Duration, kind string) {
	ok := tr.Error == ""
	url := ""
	if r.page != nil {
		url = Scrub(r.page.URL(), r.cfg.Secrets)
	}
	st := engine.Step{Action: a.Tool, Selector: a.Selector, Value: a.Value, Param: param,
		OK: ok, Error: tr.Error, ErrorKind: kind, DurationMs: d.Milliseconds(), URL: url, HTTPStatus: r.landStatus, Target: r.landTarget}
	sensitive := false
	logSensitive := false // the action log line redacts by the typed value, also when Enter follows
	switch a.Tool {
	case "navigate":
		// The URL asked for (resolved), not where redirects ended.
		st.URL, st.Value = Scrub(a.Value, r.cfg.Secrets), ""
		if r.landChecked && ok {
			if r.landCode >= 400 {
				st.HTTPStatus = r.landCode // read once, by exec
			}
		} else if sc, isSC := r.page.(interface{ StatusCode(context.Context) int }); isSC && ok {
			if code := sc.StatusCode(context.Background()); code >= 400 {
				st.HTTPStatus = code
			}
		}
	case "type":
		sensitive = r.isPasswordField(a.Selector) || len(SecretNamesIn(a.Value)) > 0
		logSensitive = sensitive
		if a.Submit {
			// The route keeps the Enter press with the typing; a separate
			// "press" step replays it.
			r.addStep(st, sensitive)
			st, sensitive = engine.Step{Action: "press", Selector: a.Selector, Value: "Enter", OK: ok, URL: url}, false
		}
	case "extract", "get_text", "evaluate":
		if ok {
			st.Result = capText(tr.ExtractedContent, 1000)
			r.corpus = append(r.corpus, tr.ExtractedContent)
		}
	case "wait":
		st.Result = capText(tr.ExtractedContent, 200) // how long, and for what (replayWait)
	}
	switch a.Tool {
	case "click":
		r.res.Clicks++
	case "extract":
		r.res.Extracts++
	case "type":
		if a.Submit && len(SecretNamesIn(a.Value)) == 0 {
			r.res.Searches++
		}
	}
	if replayed {
		r.res.Replayed++
	}
	r.addStep(st, sensitive)
	r.history = append(r.history, Turn{Action: a, Result: tr, URL: url, Replayed: replayed})
	defer r.snapshot(SnapRunning, "")
	mode := "plan"
	if replayed {
		mode = "replay"
	}
	line := fmt.Sprintf("[%s %s] %s", r.res.Tier, mode, describeAction(a, logSensitive))
	if ok {
		line += fmt.Sprintf(" → ok (%d ms)", d.Milliseconds())
	} else {
		line += " → " + oneLine(tr.Error, 200)
	}
	r.logf("%s", line)
	r.log.Debug("step", "action", a.Tool, "selector", a.Selector, "ok", ok, "ms", d.Milliseconds())
	r.progress()
}

// progress reports the last action-log line to RunConfig.OnStep.
func (r *run) progress() {
	if r.cfg.OnStep != nil && len(r.res.ActionLog) > 0 {
		r.cfg.OnStep(len(r.steps), r.maxTurns, r.res.ActionLog[len(r.res.ActionLog)-1])
	}
}

// addStep appends st to the trace; sensitive marks a typed value that is a
// secret, which the engine redacts when the trace is saved.
func (r *run) addStep(st engine.Step, sensitive bool) {
	if sensitive {
		if r.sensitive == nil {
			r.sensitive = map[int]bool{}
		}
		r.sensitive[len(r.steps)] = true
	}
	r.steps = append(r.steps, st)
}

// recordMiss records a replayed step whose selector failed verification: a
// failed step with a structured error kind, so that the drift is counted
// against the selector (engine.Classify reads it as selector_drift).
func (r *run) recordMiss(s engine.Step, kind, msg string) {
	ok := false
	url := ""
	if r.page != nil {
		url = r.page.URL()
	}
	r.addStep(engine.Step{Action: s.Action, Selector: s.Selector, Param: s.Param,
		OK: ok, Error: msg, ErrorKind: kind, URL: url}, false)
	seq := len(r.steps)
	cat := engine.Classify(&engine.Trace{Outcome: engine.Failure, Steps: []engine.Step{{Seq: seq, Action: s.Action, Selector: s.Selector, ErrorKind: kind, Error: msg}}})
	r.res.Recovered = append(r.res.Recovered, StepFailure{Seq: seq, Action: s.Action, Selector: s.Selector, Kind: kind, Category: cat})
	r.history = append(r.history, Turn{Action: Action{Tool: s.Action, Selector: s.Selector}, Result: fail(s.Action, errors.New(msg)), URL: url, Replayed: true})
	r.logf("[%s replay] %s %s → miss: %s (%s)", r.res.Tier, s.Action, s.Selector, msg, cat)
	r.pending = nil
	r.snapshot(SnapRunning, "")
	r.progress()
}

func (r *run) isPasswordField(selector string) bool {
	for _, e := range r.lastEls {
		if e.Selector == selector {
			return strings.EqualFold(e.Type, "password")
		}
	}
	return strings.Contains(strings.ToLower(selector), "password")
}

// paramFor names the route parameter a typed value came from: a bound
// parameter whose value it is (explicit --param names first).
func (r *run) paramFor(a Action) string {
	if a.Tool != "type" || a.Value == "" || len(SecretNamesIn(a.Value)) > 0 {
		return ""
	}
	for _, name := range sortedNames(r.cfg.Params) {
		if r.cfg.Params[name] == a.Value {
			return name
		}
	}
	for _, name := range sortedNames(r.params) {
		if r.params[name] == a.Value {
			return name
		}
	}
	return ""
}

func (r *run) usedParams() []string {
	var out []string
	for _, s := range r.steps {
		if s.Param != "" && !contains(out, s.Param) {
			out = append(out, s.Param)
		}
	}
	return out
}

func (r *run) logf(format string, args ...any) {
	r.res.ActionLog = append(r.res.ActionLog, Scrub(fmt.Sprintf(format, args...), r.cfg.Secrets))
}

func describeAction(a Action, sensitive bool) string {
	s := a.Tool
	if a.Selector != "" {
		s += " " + a.Selector
	}
	switch {
	case a.Tool == "type" && sensitive && len(SecretNamesIn(a.Value)) == 0:
		s += " " + engine.Redacted
	case a.Value != "":
		s += fmt.Sprintf(" %q", oneLine(a.Value, 120))
	}
	if a.Submit {
		s += " +Enter"
	}
	return s
}

// KindOf maps a tool error to an engine error kind (engine.Kind*), from the
// messages the tools and the adapter produce; "" when nothing is known.
func KindOf(msg string) string {
	if msg == "" {
		return ""
	}
	m := strings.ToLower(msg)
	switch {
	case strings.Contains(m, strings.ToLower(ErrNoElement.Error())), strings.Contains(m, "no label matches"):
		return engine.KindNoElement
	case strings.Contains(m, "net::err"), strings.Contains(m, "connection refused"), strings.Contains(m, "no such host"):
		return engine.KindNetwork
	case strings.Contains(m, "deadline exceeded"), strings.Contains(m, "timeout"), strings.Contains(m, "timed out"):
		return engine.KindTimeout
	case strings.Contains(m, "not visible"), strings.Contains(m, "covered by"), strings.Contains(m, "obscured"):
		return engine.KindNotVisible
	}
	return ""
}

var quotedRe = engine.LazyRE(`"([^"]+)"|“([^”]+)”|'([^']{2,})'`)

// TaskParams binds the quoted strings of a task as route parameters
// "quote1", "quote2", … in order, so that a route recorded for
// `search issues for "memory"` types the current task's text on replay,
// never the last run's.
func TaskParams(task string) map[string]string {
	out := map[string]string{}
	n := 0
	for _, m := range quotedRe.FindAllStringSubmatch(task, -1) {
		v := m[1] + m[2] + m[3]
		if strings.TrimSpace(v) == "" || len(SecretNamesIn(v)) > 0 {
			continue
		}
		n++
		out[fmt.Sprintf("quote%d", n)] = v
	}
	return out
}

func copyMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// grounded reports whether an answer was read on a page in this run: the
// whole answer, or each of its "; "-separated parts, appears in the texts the
// run read (page text, labelled values, extractions); a part that is not
// found literally must have all its numbers and most of its words there.
func (r *run) grounded(answer string) bool {
	corpus := strings.ToLower(strings.Join(strings.Fields(strings.Join(r.corpus, "\n")), " "))
	if corpus == "" {
		return false
	}
	norm := func(s string) string { return strings.ToLower(strings.Join(strings.Fields(s), " ")) }
	if strings.Contains(corpus, norm(answer)) {
		return true
	}
	words := map[string]bool{}
	for _, w := range Tokens(corpus) {
		words[w] = true
	}
	for _, part := range strings.Split(answer, AnswerSep) {
		p := norm(part)
		if p == "" || strings.Contains(corpus, p) {
			continue
		}
		toks := Tokens(p)
		if len(toks) == 0 {
			return false
		}
		hit := 0
		for _, t := range toks {
			if words[t] {
				hit++
			} else if isNumber(t) {
				return false
			}
		}
		if float64(hit) < 0.6*float64(len(toks)) {
			return false
		}
	}
	return true
}

// AnswerSep joins several values read for one task ("stars; forks").
const AnswerSep = "; "

func isNumber(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// Job is one task of RunAll.
type Job struct {
	Config RunConfig
	Result *RunResult
	Err    error
}

// RunAll runs the jobs with at most parallel at once, each with its own
// trace, in tabs of cfg.Browser (one browser, several tabs): a tab is
// reused by the next job once its run has ended (its first navigation
// always loads, so nothing of the previous run is trusted), so a task file
// opens at most parallel tabs instead of one per task. A run that ended with
// an error (cancelled, the browser failing) closes its tab. A job with its
// own Page, or whose Browser differs from the first job's, runs as Run
// would. It fills each job's Result and Err and returns when all are done.
func RunAll(ctx context.Context, jobs []*Job, parallel int) {
	if parallel < 1 {
		parallel = 1
	}
	var pool tabPool
	if len(jobs) > 0 {
		pool.browser = jobs[0].Config.Browser
	}
	defer pool.close()
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for _, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				j.Err = fmt.Errorf("not started: %w", ctx.Err())
				return
			}
			defer func() { <-sem }()
			cfg := j.Config
			if cfg.Page != nil || cfg.Browser == nil || cfg.Browser != pool.browser {
				j.Result, j.Err = Run(ctx, cfg)
				return
			}
			page, err := pool.get(ctx)
			if err != nil {
				j.Err = fmt.Errorf("opening a browser page: %w", err)
				return
			}
			cfg.Page = page
			j.Result, j.Err = Run(ctx, cfg)
			pool.put(page, j.Err == nil)
		}()
	}
	wg.Wait()
}

// tabPool holds the idle tabs of RunAll's browser.
type tabPool struct {
	browser Browser
	mu      sync.Mutex
	idle    []Page
}

func (p *tabPool) get(ctx context.Context) (Page, error) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		pg := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return pg, nil
	}
	p.mu.Unlock()
	return p.browser.NewPage(ctx)
}

// put returns a tab for the next job, or closes it when its run failed
// to run (reuse false).
func (p *tabPool) put(pg Page, reuse bool) {
	if !reuse {
		pg.Close()
		return
	}
	p.mu.Lock()
	p.idle = append(p.idle, pg)
	p.mu.Unlock()
}

func (p *tabPool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pg := range p.idle {
		pg.Close()
	}
	p.idle = nil
}
