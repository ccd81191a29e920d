package mcpbrowser

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pemdev/pem/agent"
	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/engine/mcp"
)

// The delegation tools (the seed's CreateBrowserAgent, BrowserAgent and
// BrowserAgents): a main agent hands pem's own agent a whole task and gets
// the answer back. Each run is agent.Run with memory — a trusted route is
// replayed (P1/P2) with no model call, the rest is planned by the planner
// the server was started with — on the shared browser, in a page of its
// own (a "browser session" that browser_agent_continue can go on using).
//
//   - Progress: when the call carries a progress token, every step is sent
//     as a notifications/progress (progress = steps so far, total = the
//     turn cap, message = the step's action-log line).
//   - Cancellation: a cancelled call cancels its runs; each leaves an
//     aborted trace and a resumable snapshot.
//   - Approval (pem.yaml `approval:`): before a sensitive step the client is
//     asked with elicitation — a direct elicitation/create request on
//     sessions of protocol versions before 2026-07-28, an input-required
//     result (multi round-trip: the client answers and calls again) on
//     newer ones. A client that cannot be asked gets the run's result with
//     failure_category approval_required and approval_required naming the
//     step; the run's snapshot stays resumable (browser_agent_continue).

// Tool names of the delegation tools.
const (
	ToolAgentRun      = "browser_agent_run"
	ToolAgentContinue = "browser_agent_continue"
	ToolAgentsRun     = "browser_agents_run"
)

// Bounds of the delegation tools.
const (
	DefaultMaxParallel = 3  // browser_agents_run: tasks at once
	MaxAgentTasks      = 10 // tasks in one browser_agents_run call
	MaxAgentTurns      = 50 // the highest max_turns accepted
	maxBrowserSessions = 16 // delegated pages kept open; the least recently used idle one closes
	// approvalTimeout bounds how long a run waits for the client to answer
	// an approval; then the step counts as unanswered.
	approvalTimeout = 10 * time.Minute
	// jobLinger is how long a finished job whose caller went away stays
	// collectable by a retried call.
	jobLinger = time.Minute
	maxParams = 50
)

// DelegationInstructions are added to the server's instructions with the
// delegation tools.
const DelegationInstructions = `Delegation (browser_agent_* tools): hand pem's own browser agent a whole task. browser_agent_run {task, url} runs it in a new browser session with memory — a route pem trusts is replayed with no model call — and returns answer, tier, steps, planner calls, trace id and a final screenshot. browser_agent_continue {run_id} resumes an interrupted run (or, with task, runs a new task in that run's browser session); browser_agents_run {tasks: [...]} runs several at once. Steps that the tree's approval policy marks (buy, delete, send, …) are asked of the user through elicitation; without it the result says approval_required and names the step: ask the user, then call browser_agent_continue {run_id}.`

// DelegateOptions configure the delegation tools.
type DelegateOptions struct {
	// Planner decides what memory does not (the server's --planner); nil
	// lets only replays finish a task.
	Planner agent.Planner
	// SnapshotDir keeps the runs' snapshots (resumable by
	// browser_agent_continue and pem agent run --resume); "" keeps none.
	SnapshotDir string
	// MaxParallel bounds browser_agents_run; 0 means DefaultMaxParallel.
	MaxParallel int
	// MaxTurns is a run's default turn cap; 0 means agent.DefaultMaxTurns.
	MaxTurns int
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// Delegation is the delegation tools over a Server's shared browser.
type Delegation struct {
	srv *Server
	o   DelegateOptions

	mu       sync.Mutex
	browsers map[string]*browserSession // browser session id → its page
	runs     map[string]string          // run id → browser session id
	jobs     map[string]*job            // calls in progress, by request state
	closed   bool
}

// browserSession is one delegated page; one run at a time uses it.
type browserSession struct {
	id   string
	page agent.Page
	busy bool
	used time.Time
}

// Delegation returns the delegation tools, sharing s's browser.
func (s *Server) Delegation(o DelegateOptions) *Delegation {
	if o.MaxParallel <= 0 {
		o.MaxParallel = DefaultMaxParallel
	}
	if o.MaxTurns <= 0 {
		o.MaxTurns = agent.DefaultMaxTurns
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Delegation{srv: s, o: o, browsers: map[string]*browserSession{}, runs: map[string]string{}, jobs: map[string]*job{}}
}

// Register adds the delegation tools to srv.
func (d *Delegation) Register(srv *sdk.Server) {
	taskProps := func() map[string]any {
		return map[string]any{
			"task":      prop("string", "The task in plain words, e.g. \"How many open issues does acme/widgets have?\". Secrets only as {{secret:NAME}}."),
			"url":       prop("string", "The page the task starts on (memory is keyed on it)."),
			"intent":    prop("string", "What the task is, in a few words (memory is keyed on it); default: the task text."),
			"params":    map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string"}, "description": "Route parameters NAME → VALUE typed by a replayed route (quoted strings of the task are bound as quote1, quote2, …)."},
			"max_turns": map[string]any{"type": "integer", "minimum": 1, "maximum": MaxAgentTurns, "description": fmt.Sprintf("Cap on the run's actions (default %d).", d.o.MaxTurns)},
		}
	}
	cont := taskProps()
	cont["run_id"] = prop("string", "The run_id a browser_agent_* result gave. Without task: resume that run from its snapshot (an interrupted run, or one stopped before an unapproved step). With task: run the new task in that run's browser session.")
	cont["task"] = prop("string", "A new task for the same browser session (optional: without it the run is resumed).")
	cont["url"] = prop("string", "With task: where the new task starts (default: the page the session is on).")
	item := taskProps()
	ro := ptr(true)
	tools := []struct {
		tool *sdk.Tool
		run  func(ctx context.Context, req *sdk.CallToolRequest, j *job, raw json.RawMessage) error
	}{
		{&sdk.Tool{Name: ToolAgentRun, Title: "Run pem's browser agent on a task",
			Description: "Runs pem's browser agent on the task in a new browser session, with memory (a trusted route replays with no model call), and returns answer, success, tier, steps, planner_calls, trace_id, run_id and the final screenshot. Sends progress notifications when the call has a progress token; honours cancellation.",
			InputSchema: mcp.ObjectSchema(taskProps(), "task", "url"), Annotations: &sdk.ToolAnnotations{OpenWorldHint: ro}}, d.startRun},
		{&sdk.Tool{Name: ToolAgentContinue, Title: "Continue a delegated browser run",
			Description: "Resumes the run run_id from its snapshot (back to the page it stood on; steps done are not redone), or with task runs a new task in that run's browser session. Returns what browser_agent_run returns.",
			InputSchema: mcp.ObjectSchema(cont, "run_id"), Annotations: &sdk.ToolAnnotations{OpenWorldHint: ro}}, d.startContinue},
		{&sdk.Tool{Name: ToolAgentsRun, Title: "Run several browser tasks in parallel",
			Description: fmt.Sprintf("Runs up to %d tasks, at most %d at once, each in its own browser session with its own trace; returns one result per task, in order.", MaxAgentTasks, d.o.MaxParallel),
			InputSchema: mcp.ObjectSchema(map[string]any{
				"tasks":    map[string]any{"type": "array", "minItems": 1, "maxItems": MaxAgentTasks, "items": map[string]any{"type": "object", "properties": item, "required": []string{"task", "url"}}, "description": "The tasks: {task, url, intent?, params?, max_turns?} each."},
				"parallel": map[string]any{"type": "integer", "minimum": 1, "maximum": d.o.MaxParallel, "description": fmt.Sprintf("How many run at once (default and most: %d).", d.o.MaxParallel)},
			}, "tasks"), Annotations: &sdk.ToolAnnotations{OpenWorldHint: ro}}, d.startMany},
	}
	for _, t := range tools {
		srv.AddTool(t.tool, d.handler(t.tool.Name, t.run))
	}
}

// Close cancels the runs in progress (each deposits its aborted trace) and
// closes the delegated pages. The Server's Close closes the browser.
func (d *Delegation) Close(ctx context.Context) error {
	d.mu.Lock()
	d.closed = true
	jobs := make([]*job, 0, len(d.jobs))
	for _, j := range d.jobs {
		jobs = append(jobs, j)
	}
	d.mu.Unlock()
	for _, j := range jobs {
		j.cancel()
		select {
		case <-j.done:
		case <-ctx.Done():
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var errs []error
	for id, b := range d.browsers {
		errs = append(errs, b.page.Close())
		delete(d.browsers, id)
	}
	return errors.Join(errs...)
}

// ---- one call: a job of one or more runs --------------------------------

// job is the work of one tool call: its runs, their results, and the
// approvals they wait for. It outlives the call when the client is asked
// with an input-required result, and is found again by its id (the
// request state the client echoes).
type job struct {
	id     string
	d      *Delegation
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	wake   chan struct{} // an approval is waiting (input-required path)
	ask    string        // how approvals are asked: "elicit", "input", ""
	total  int           // the runs' turn caps, summed: progress's total

	mu      sync.Mutex
	results []*AgentResult
	err     error // an argument or setup error: the call's isError result
	pending map[string]*pendingApproval
	waiter  *waiter
}

type pendingApproval struct {
	req    agent.ApprovalRequest
	answer chan bool
	asked  bool
}

// waiter is the call currently waiting on a job: where its progress goes.
type waiter struct {
	ss    *sdk.ServerSession
	token any
	sent  float64
}

// AgentResult is what a delegated run returns (the structured content of
// the tools' results; browser_agents_run returns {runs: [...]}).
type AgentResult struct {
	RunID            string                 `json:"run_id"`
	BrowserSession   string                 `json:"browser_session"`
	Task             string                 `json:"task"`
	URL              string                 `json:"url"`
	Answer           string                 `json:"answer"`
	Success          bool                   `json:"success"`
	Tier             engine.Tier            `json:"tier"`
	RecallTier       engine.Tier            `json:"recall_tier"`
	Steps            int                    `json:"steps"`
	PlannerCalls     int                    `json:"planner_calls"`
	Replayed         int                    `json:"replayed"`
	TraceID          string                 `json:"trace_id,omitempty"`
	TracePath        string                 `json:"trace_path,omitempty"`
	FailureCategory  engine.FailureCategory `json:"failure_category,omitempty"`
	Error            string                 `json:"error,omitempty"`
	FinalURL         string                 `json:"final_url,omitempty"`
	Resumed          bool                   `json:"resumed,omitempty"`
	ApprovalRequired *agent.ApprovalRequest `json:"approval_required,omitempty"`
	Approvals        []engine.Approval      `json:"approvals,omitempty"`
	Screenshot       string                 `json:"screenshot,omitempty"` // what the image content is

	image     []byte
	imageMIME string
	refused   bool // the run could not start (agent.ErrConfig): nothing was done
}

// handler runs a delegation tool: a first call starts a job; a retried
// call (multi round-trip) hands the client's answers to its job; both wait
// for the job to finish or to need the client.
func (d *Delegation) handler(name string, start func(context.Context, *sdk.CallToolRequest, *job, json.RawMessage) error) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (res *sdk.CallToolResult, err error) {
		defer func() {
			if p := recover(); p != nil {
				d.srv.log.Error("delegation tool panicked", "tool", name, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
				res, err = mcp.ErrorResult(name, "internal", fmt.Sprintf("%s failed inside pem (%v): this is a bug in pem, not in your call; retry once, then go on without this tool", name, p)), nil
			}
		}()
		var raw json.RawMessage
		var state string
		var answers sdk.InputResponseMap
		if req != nil && req.Params != nil {
			raw, state, answers = req.Params.Arguments, req.Params.RequestState, req.Params.InputResponses
		}
		var j *job
		if state != "" {
			d.mu.Lock()
			j = d.jobs[state]
			d.mu.Unlock()
			if j == nil {
				return mcp.ErrorResult(name, "expired", name+": the run this answer was for is no longer waiting (it finished, timed out or the server restarted): call the tool again"), nil
			}
			j.answer(answers)
		} else {
			var err error
			if j, err = d.newJob(req); err != nil {
				return mcp.ErrorResult(name, "shutting_down", name+": "+err.Error()+": start the server again"), nil
			}
			if err := start(ctx, req, j, raw); err != nil {
				d.drop(j)
				j.cancel()
				kind := "invalid_arguments"
				msg := err.Error()
				if mcp.IsArgError(err) {
					msg = strings.TrimPrefix(msg, "invalid arguments: ")
					return mcp.ErrorResult(name, kind, name+": "+msg+". Nothing was run. Fix the arguments and call "+name+" again."), nil
				}
				return mcp.ErrorResult(name, "failed", name+": "+msg), nil
			}
		}
		return d.wait(ctx, req, name, j), nil
	}
}

func (d *Delegation) newJob(req *sdk.CallToolRequest) (*job, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, errors.New("the server is shutting down")
	}
	ctx, cancel := context.WithCancel(context.Background())
	j := &job{id: agent.NewRunID(d.o.Now()), d: d, ctx: ctx, cancel: cancel, done: make(chan struct{}),
		wake: make(chan struct{}, 1), pending: map[string]*pendingApproval{}, ask: askMode(req)}
	d.jobs[j.id] = j
	return j, nil
}

func (d *Delegation) drop(j *job) {
	d.mu.Lock()
	delete(d.jobs, j.id)
	d.mu.Unlock()
}

// askMode says how this client can be asked: "elicit" (a server-initiated
// elicitation/create, sessions before 2026-07-28), "input" (an
// input-required result, 2026-07-28 on), or "" (it cannot be asked).
func askMode(req *sdk.CallToolRequest) string {
	if req == nil {
		return ""
	}
	caps := req.ClientCapabilities()
	if caps == nil || caps.Elicitation == nil {
		return ""
	}
	if req.Session == nil {
		return ""
	}
	if ip := req.Session.InitializeParams(); ip != nil && ip.ProtocolVersion != "" && ip.ProtocolVersion < "2026-07-28" {
		return "elicit"
	}
	return "input"
}

// wait waits for j to finish, to need the client's answer, or for the
// call to be cancelled.
func (d *Delegation) wait(ctx context.Context, req *sdk.CallToolRequest, name string, j *job) *sdk.CallToolResult {
	w := &waiter{}
	if req != nil && req.Params != nil {
		w.ss, w.token = req.Session, req.Params.GetProgressToken()
	}
	j.mu.Lock()
	if j.waiter != nil {
		w.sent = j.waiter.sent
	}
	j.waiter = w
	j.mu.Unlock()
	for {
		select {
		case <-j.done:
			d.drop(j)
			return j.result(name)
		case <-j.wake:
			if asks := j.toAsk(); len(asks) > 0 {
				return &sdk.CallToolResult{InputRequests: asks, RequestState: j.id}
			}
		case <-ctx.Done():
			// The client cancelled the call: the runs stop, each leaving an
			// aborted trace; the answer goes nowhere.
			j.cancel()
			<-j.done
			d.drop(j)
			return mcp.ErrorResult(name, "cancelled", name+": cancelled; each run left an aborted trace and a resumable snapshot (browser_agent_continue {run_id})")
		}
	}
}

// go runs f in the job; the job is done when every f has returned.
func (j *job) run(fs []func()) {
	var wg sync.WaitGroup
	for _, f := range fs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f()
		}()
	}
	go func() {
		wg.Wait()
		j.cancel()
		close(j.done)
		// A caller that went away (an input-required answer never came
		// back) leaves the job; it is dropped after a while.
		time.AfterFunc(jobLinger, func() { j.d.drop(j) })
	}()
}

// progress sends a progress notification to the waiting call, if it asked.
func (j *job) progress(steps, total int, line string) {
	j.mu.Lock()
	w := j.waiter
	if w == nil || w.token == nil || w.ss == nil {
		j.mu.Unlock()
		return
	}
	w.sent++
	p := &sdk.ProgressNotificationParams{ProgressToken: w.token, Progress: w.sent, Total: float64(max(j.total, total)), Message: line}
	j.mu.Unlock()
	_ = w.ss.NotifyProgress(j.ctx, p)
}

// toAsk returns the approvals not yet asked as input requests.
func (j *job) toAsk() sdk.InputRequestMap {
	j.mu.Lock()
	defer j.mu.Unlock()
	var m sdk.InputRequestMap
	for key, pa := range j.pending {
		if pa.asked {
			continue
		}
		pa.asked = true
		if m == nil {
			m = sdk.InputRequestMap{}
		}
		m[key] = elicitParams(pa.req)
	}
	return m
}

// answer hands the client's answers to the runs waiting for them.
func (j *job) answer(answers sdk.InputResponseMap) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for key, resp := range answers {
		pa := j.pending[key]
		if pa == nil {
			continue
		}
		res, _ := resp.(*sdk.ElicitResult)
		pa.answer <- accepted(res)
		delete(j.pending, key)
	}
	for _, pa := range j.pending {
		pa.asked = false // not answered in this round: ask again
	}
	if len(j.pending) > 0 {
		select {
		case j.wake <- struct{}{}:
		default:
		}
	}
}

// approver is how a run of j asks for approval.
func (j *job) approver(ss *sdk.ServerSession) agent.Approver {
	switch j.ask {
	case "elicit":
		return elicitApprover{ss: ss}
	case "input":
		return inputApprover{j: j}
	}
	return agent.ApproverFunc(func(ctx context.Context, req agent.ApprovalRequest) (bool, error) {
		return false, errors.New("the MCP client does not support elicitation, so nobody can be asked: ask the user, then call browser_agent_continue with the run_id to ask again")
	})
}

type elicitApprover struct{ ss *sdk.ServerSession }

func (a elicitApprover) Name() string { return "mcp elicitation" }

func (a elicitApprover) Approve(ctx context.Context, req agent.ApprovalRequest) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, approvalTimeout)
	defer cancel()
	res, err := a.ss.Elicit(ctx, elicitParams(req))
	if err != nil {
		if ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return false, fmt.Errorf("the MCP client gave no answer within %s", approvalTimeout)
		}
		return false, fmt.Errorf("asking the MCP client failed: %w", err)
	}
	return accepted(res), nil
}

type inputApprover struct{ j *job }

func (a inputApprover) Name() string { return "mcp elicitation" }

func (a inputApprover) Approve(ctx context.Context, req agent.ApprovalRequest) (bool, error) {
	pa := &pendingApproval{req: req, answer: make(chan bool, 1)}
	key := "approve-" + req.RunID
	j := a.j
	j.mu.Lock()
	j.pending[key] = pa
	j.mu.Unlock()
	select {
	case j.wake <- struct{}{}:
	default:
	}
	t := time.NewTimer(approvalTimeout)
	defer t.Stop()
	select {
	case ok := <-pa.answer:
		return ok, nil
	case <-ctx.Done():
		return false, ctx.Err()
	case <-t.C:
		j.mu.Lock()
		delete(j.pending, key)
		j.mu.Unlock()
		return false, fmt.Errorf("the MCP client gave no answer within %s", approvalTimeout)
	}
}

// elicitParams is the question put to the user.
func elicitParams(req agent.ApprovalRequest) *sdk.ElicitParams {
	return &sdk.ElicitParams{
		Message: "pem's browser agent wants to take a step that needs your approval (rule " + fmt.Sprintf("%q", req.Rule) + "):\n" +
			req.Describe() + "\nTask: " + oneLine(req.Task, 200) + "\nApprove it?",
		RequestedSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"approve": map[string]any{"type": "boolean", "title": "Take this step", "description": "true to let the agent take the step, false to stop the run before it"},
			},
			"required": []string{"approve"},
		},
	}
}

// accepted reads an elicitation answer: accept with approve true (or no
// content) is a yes; decline, cancel, approve false are a no.
func accepted(res *sdk.ElicitResult) bool {
	if res == nil || res.Action != "accept" {
		return false
	}
	if v, ok := res.Content["approve"]; ok {
		b, isBool := v.(bool)
		return isBool && b
	}
	return true
}

// result is the call's answer once the job is done.
func (j *job) result(name string) *sdk.CallToolResult {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.err != nil {
		return mcp.ErrorResult(name, "failed", name+": "+j.err.Error())
	}
	if len(j.results) == 1 && j.results[0] != nil && j.results[0].refused {
		return mcp.ErrorResult(name, "invalid_arguments", name+": "+j.results[0].Error+". Nothing was run: fix the arguments (or the tree's pem.yaml) and call "+name+" again.")
	}
	var content []sdk.Content
	var text strings.Builder
	for i, r := range j.results {
		if r == nil {
			continue
		}
		if len(j.results) > 1 {
			fmt.Fprintf(&text, "%d. %s\n", i+1, oneLine(r.Task, 100))
		}
		text.WriteString(r.summary())
		text.WriteString("\n")
		if r.image != nil {
			content = append(content, &sdk.ImageContent{Data: r.image, MIMEType: r.imageMIME})
		}
	}
	var v any = map[string]any{"runs": j.results}
	if name != ToolAgentsRun && len(j.results) == 1 {
		v = j.results[0]
	}
	b, err := json.Marshal(v)
	if err != nil {
		return mcp.ErrorResult(name, "internal", name+": encoding the result: "+err.Error())
	}
	t, _ := engine.ScrubText(strings.TrimSpace(text.String()))
	content = append([]sdk.Content{&sdk.TextContent{Text: t}}, content...)
	return &sdk.CallToolResult{Content: content, StructuredContent: json.RawMessage(engine.ScrubJSON(b))}
}

func (r *AgentResult) summary() string {
	var b strings.Builder
	switch {
	case r.ApprovalRequired != nil:
		fmt.Fprintf(&b, "approval required: %s. The step was not taken. Ask the user; to go on, call %s {\"run_id\": %q}.", r.ApprovalRequired.Describe(), ToolAgentContinue, r.RunID)
	case r.Success:
		fmt.Fprintf(&b, "answer: %s", r.Answer)
	default:
		fmt.Fprintf(&b, "not achieved: %s", firstNonEmpty(r.Error, "no answer"))
		if r.Answer != "" {
			fmt.Fprintf(&b, " (answer given: %s)", r.Answer)
		}
	}
	fmt.Fprintf(&b, "\ntier %s · %d steps · %d planner calls · run %s · trace %s", r.Tier, r.Steps, r.PlannerCalls, r.RunID, firstNonEmpty(r.TraceID, "(not deposited)"))
	return b.String()
}

func firstNonEmpty(xs ...string) string {
	for _, x := range xs {
		if x != "" {
			return x
		}
	}
	return ""
}

// ---- the three tools ------------------------------------------------------

// taskArgs are one task's arguments.
type taskArgs struct {
	Task     string            `json:"task"`
	URL      string            `json:"url"`
	Intent   string            `json:"intent"`
	Params   map[string]string `json:"params"`
	MaxTurns int               `json:"max_turns"`
}

var taskKeys = []string{"task", "url", "intent", "params", "max_turns"}

// parseTask reads and checks one task's arguments from raw (keys in
// snake_case or camelCase, unknown keys refused).
func (d *Delegation) parseTask(raw json.RawMessage, keys []string, needTask bool) (taskArgs, *mcp.Args, error) {
	a, err := mcp.ParseArgs(raw, keys)
	if err != nil {
		return taskArgs{}, nil, err
	}
	var t taskArgs
	if t.Task, err = a.String("task"); err != nil {
		return t, nil, err
	}
	if t.URL, err = a.String("url"); err != nil {
		return t, nil, err
	}
	if t.Intent, err = a.String("intent"); err != nil {
		return t, nil, err
	}
	if t.MaxTurns, err = a.Int("max_turns"); err != nil {
		return t, nil, err
	}
	t.Task, t.URL, t.Intent = strings.TrimSpace(t.Task), strings.TrimSpace(t.URL), strings.TrimSpace(t.Intent)
	switch {
	case needTask && t.Task == "":
		return t, nil, mcp.ArgErrorf("task is required: the task in plain words")
	case needTask && t.URL == "":
		return t, nil, mcp.ArgErrorf("url is required: the page the task starts on")
	case len(t.Task) > maxTask:
		return t, nil, mcp.ArgErrorf("task is %d bytes: keep it under %d", len(t.Task), maxTask)
	case len(t.Intent) > engine.MaxIntent || strings.ContainsAny(t.Intent, "\r\n\x00"):
		return t, nil, mcp.ArgErrorf("intent must be one line of at most %d bytes", engine.MaxIntent)
	case a.Has("max_turns") && (t.MaxTurns < 1 || t.MaxTurns > MaxAgentTurns):
		return t, nil, mcp.ArgErrorf("max_turns must be between 1 and %d, got %d", MaxAgentTurns, t.MaxTurns)
	}
	if t.URL != "" {
		n, err := engine.NormalizeURL(t.URL)
		if err == nil {
			err = engine.CheckHost(n, t.URL)
		}
		if err != nil {
			return t, nil, mcp.ArgErrorf("url: %v", err)
		}
	}
	if a.Has("params") {
		if t.Params, err = paramsOf(raw); err != nil {
			return t, nil, err
		}
	}
	if t.MaxTurns == 0 {
		t.MaxTurns = d.o.MaxTurns
	}
	return t, a, nil
}

// paramsOf reads the params object: string values only, bounded.
func paramsOf(raw json.RawMessage) (map[string]string, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, mcp.ArgErrorf("the arguments must be an object: %v", err)
	}
	var p map[string]any
	if err := json.Unmarshal(m["params"], &p); err != nil {
		return nil, mcp.ArgErrorf("params must be an object of NAME: VALUE strings, e.g. {\"query\": \"memory\"}")
	}
	if len(p) > maxParams {
		return nil, mcp.ArgErrorf("params has %d entries: at most %d", len(p), maxParams)
	}
	out := make(map[string]string, len(p))
	for k, v := range p {
		s, ok := v.(string)
		if !ok || strings.TrimSpace(k) == "" || len(k) > 100 || len(s) > 1000 {
			return nil, mcp.ArgErrorf("params[%q] must be a string of at most 1000 bytes under a name of at most 100", k)
		}
		out[k] = s
	}
	return out, nil
}

func (d *Delegation) startRun(ctx context.Context, req *sdk.CallToolRequest, j *job, raw json.RawMessage) error {
	t, _, err := d.parseTask(raw, taskKeys, true)
	if err != nil {
		return err
	}
	bs, err := d.newBrowserSession(ctx)
	if err != nil {
		return err
	}
	j.results, j.total = make([]*AgentResult, 1), t.MaxTurns
	j.run([]func(){func() { j.results[0] = d.runOn(j, sessionOf(req), bs, t, nil) }})
	return nil
}

func (d *Delegation) startContinue(ctx context.Context, req *sdk.CallToolRequest, j *job, raw json.RawMessage) error {
	t, a, err := d.parseTask(raw, append([]string{"run_id"}, taskKeys...), false)
	if err != nil {
		return err
	}
	runID, err := required(a, "run_id", "the run_id a browser_agent_* result gave")
	if err != nil {
		return err
	}
	runID = strings.TrimSpace(runID)
	if !agent.ValidRunID(runID) {
		return mcp.ArgErrorf("run_id %q is not a run id: use the run_id a browser_agent_* result gave", runID)
	}
	d.mu.Lock()
	bs := d.browsers[d.runs[runID]]
	d.mu.Unlock()
	var snap *agent.Snapshot
	if t.Task == "" {
		// Resume the run itself.
		if t.URL != "" || t.Intent != "" {
			return mcp.ArgErrorf("url and intent go with a new task; to resume run %s give run_id alone", runID)
		}
		if d.o.SnapshotDir == "" {
			return errors.New("this server keeps no snapshots, so no run can be resumed: give a task to run in the session")
		}
		if snap, err = agent.LoadSnapshot(d.o.SnapshotDir, runID); err != nil {
			return mcp.ArgErrorf("%v", err)
		}
	} else if bs == nil {
		return mcp.ArgErrorf("run %s has no open browser session (it was closed, or the server restarted): start one with %s", runID, ToolAgentRun)
	} else if t.URL == "" {
		t.URL = bs.page.URL()
		if _, err := engine.NormalizeURL(t.URL); err != nil {
			return mcp.ArgErrorf("the session's page (%s) is not a place to start a task: give url", t.URL)
		}
	}
	if bs == nil {
		if bs, err = d.newBrowserSession(ctx); err != nil {
			return err
		}
	} else if !d.claim(bs) {
		return mcp.ArgErrorf("the browser session of run %s is busy with another run: wait for it, or start a new one with %s", runID, ToolAgentRun)
	}
	j.results, j.total = make([]*AgentResult, 1), t.MaxTurns
	if snap != nil {
		j.total = max(snap.MaxTurns, len(snap.Completed)+1)
	}
	j.run([]func(){func() { j.results[0] = d.runOn(j, sessionOf(req), bs, t, snap) }})
	return nil
}

func (d *Delegation) startMany(ctx context.Context, req *sdk.CallToolRequest, j *job, raw json.RawMessage) error {
	a, err := mcp.ParseArgs(raw, []string{"tasks", "parallel"})
	if err != nil {
		return err
	}
	parallel := d.o.MaxParallel
	if a.Has("parallel") {
		if parallel, err = a.Int("parallel"); err != nil {
			return err
		}
		if parallel < 1 || parallel > d.o.MaxParallel {
			return mcp.ArgErrorf("parallel must be between 1 and %d (the server's --max-parallel), got %d", d.o.MaxParallel, parallel)
		}
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return mcp.ArgErrorf("the arguments must be an object: %v", err)
	}
	var items []json.RawMessage
	if err := json.Unmarshal(m["tasks"], &items); err != nil || len(items) == 0 {
		return mcp.ArgErrorf("tasks is required: a list of {task, url, intent?, params?, max_turns?}")
	}
	if len(items) > MaxAgentTasks {
		return mcp.ArgErrorf("tasks has %d entries: at most %d a call", len(items), MaxAgentTasks)
	}
	tasks := make([]taskArgs, len(items))
	for i, it := range items {
		if tasks[i], _, err = d.parseTask(it, taskKeys, true); err != nil {
			return mcp.ArgErrorf("tasks[%d]: %s", i, strings.TrimPrefix(err.Error(), "invalid arguments: "))
		}
	}
	sessions := make([]*browserSession, len(tasks))
	for i := range tasks {
		if sessions[i], err = d.newBrowserSession(ctx); err != nil {
			for _, bs := range sessions[:i] {
				d.release(bs)
			}
			return err
		}
	}
	j.results = make([]*AgentResult, len(tasks))
	for _, t := range tasks {
		j.total += t.MaxTurns
	}
	sem := make(chan struct{}, parallel)
	ss := sessionOf(req)
	var fs []func()
	for i := range tasks {
		fs = append(fs, func() {
			select {
			case sem <- struct{}{}:
			case <-j.ctx.Done():
				d.release(sessions[i])
				j.mu.Lock()
				j.results[i] = &AgentResult{Task: tasks[i].Task, URL: tasks[i].URL, BrowserSession: sessions[i].id, Error: "not started: cancelled", FailureCategory: engine.Aborted}
				j.mu.Unlock()
				return
			}
			defer func() { <-sem }()
			r := d.runOn(j, ss, sessions[i], tasks[i], nil)
			j.mu.Lock()
			j.results[i] = r
			j.mu.Unlock()
		})
	}
	j.run(fs)
	return nil
}

func sessionOf(req *sdk.CallToolRequest) *sdk.ServerSession {
	if req == nil {
		return nil
	}
	return req.Session
}

// runOn runs one task (or resumes snap) on bs's page, and releases bs.
func (d *Delegation) runOn(j *job, ss *sdk.ServerSession, bs *browserSession, t taskArgs, snap *agent.Snapshot) *AgentResult {
	defer d.release(bs)
	cfg := agent.RunConfig{
		Engine: d.srv.opts.Engine, Page: bs.page, Planner: d.o.Planner, Task: t.Task, StartURL: t.URL, Intent: t.Intent,
		MaxTurns: t.MaxTurns, Params: t.Params, MemoryChars: d.srv.opts.MemoryChars, Logger: d.srv.log,
		Approver: j.approver(ss), SnapshotDir: d.o.SnapshotDir, RunID: agent.NewRunID(d.o.Now()), OnStep: j.progress,
	}
	if snap != nil {
		cfg.MaxTurns = 0
		snap.Configure(&cfg)
	}
	d.mu.Lock()
	d.runs[cfg.RunID] = bs.id
	d.mu.Unlock()
	out := &AgentResult{RunID: cfg.RunID, BrowserSession: bs.id, Task: cfg.Task, URL: cfg.StartURL}
	res, err := agent.Run(j.ctx, cfg)
	if res != nil {
		out.Answer, out.Success, out.Tier, out.RecallTier = res.Answer, res.Success, res.Tier, res.RecallTier
		out.Steps, out.PlannerCalls, out.Replayed, out.TraceID, out.TracePath = res.Steps, res.PlannerCalls, res.Replayed, res.TraceID, res.TracePath
		out.FailureCategory, out.Error, out.Resumed = res.FailureCategory, res.Error, res.Resumed
		out.ApprovalRequired, out.Approvals = res.Blocked, res.Approvals
	}
	if err != nil && out.Error == "" {
		out.Error = err.Error()
	}
	if res == nil && errors.Is(err, agent.ErrConfig) {
		out.refused = true
		return out
	}
	if j.ctx.Err() != nil && out.FailureCategory == "" {
		out.FailureCategory = engine.Aborted
	}
	// The final page and screenshot, on a budget of their own (the run may
	// have been cancelled).
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out.FinalURL = bs.page.URL()
	if data, mime, err := bs.page.Screenshot(sctx); err == nil && len(data) > 0 {
		out.image, out.imageMIME = data, mime
		out.Screenshot = fmt.Sprintf("final page %s (%s, %d bytes)", out.FinalURL, mime, len(data))
	} else {
		out.Screenshot = fmt.Sprintf("no screenshot: %v", err)
	}
	return out
}

// newBrowserSession opens a page in the shared browser (launched at the
// first call), claimed for one run.
func (d *Delegation) newBrowserSession(ctx context.Context) (*browserSession, error) {
	b, err := d.srv.launched(ctx)
	if err != nil {
		return nil, fmt.Errorf("starting the browser: %w", err)
	}
	p, err := b.NewPage(ctx)
	if err != nil {
		return nil, fmt.Errorf("opening a page: %w", err)
	}
	bs := &browserSession{id: "bs-" + agent.NewRunID(d.o.Now()), page: p, busy: true, used: d.o.Now()}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		p.Close()
		return nil, errors.New("the server is shutting down")
	}
	d.browsers[bs.id] = bs
	// Bounded: the least recently used idle session closes.
	for len(d.browsers) > maxBrowserSessions {
		var old *browserSession
		for _, x := range d.browsers {
			if !x.busy && (old == nil || x.used.Before(old.used)) {
				old = x
			}
		}
		if old == nil {
			break
		}
		old.page.Close()
		delete(d.browsers, old.id)
		for r, id := range d.runs {
			if id == old.id {
				delete(d.runs, r)
			}
		}
	}
	return bs, nil
}

func (d *Delegation) claim(bs *browserSession) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if bs.busy {
		return false
	}
	bs.busy, bs.used = true, d.o.Now()
	return true
}

func (d *Delegation) release(bs *browserSession) {
	d.mu.Lock()
	defer d.mu.Unlock()
	bs.busy, bs.used = false, d.o.Now()
}
