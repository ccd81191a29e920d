package mcpbrowser_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pemdev/pem/engine"
)

// The delegation tools over real stdio, pem mcp --browser (the real binary,
// explore planner: no model, no network) and the Go SDK client.

const (
	starsTask  = "How many stars does the acme/widgets repository have?"
	pullsTask  = "How many open pull requests does acme/widgets have?"
	checksTask = "What is the checks status of the first pull request in acme/widgets?"
	checksRule = "approval:\n  - name: checks tab\n    actions: [click]\n    selector: [checks-tab]\n"
)

// agentResult is the structured content of a delegation tool's answer.
type agentResult struct {
	RunID            string                 `json:"run_id"`
	BrowserSession   string                 `json:"browser_session"`
	Answer           string                 `json:"answer"`
	Success          bool                   `json:"success"`
	Tier             engine.Tier            `json:"tier"`
	Steps            int                    `json:"steps"`
	PlannerCalls     int                    `json:"planner_calls"`
	Replayed         int                    `json:"replayed"`
	TraceID          string                 `json:"trace_id"`
	FailureCategory  engine.FailureCategory `json:"failure_category"`
	Error            string                 `json:"error"`
	Resumed          bool                   `json:"resumed"`
	Screenshot       string                 `json:"screenshot"`
	ApprovalRequired *struct {
		Step     int    `json:"step"`
		Action   string `json:"action"`
		Selector string `json:"selector"`
		Rule     string `json:"rule"`
		Replayed bool   `json:"replayed"`
	} `json:"approval_required"`
	Approvals []engine.Approval `json:"approvals"`
	// isError results
	Kind string `json:"kind"`
}

// client is a Go SDK client of pem mcp --browser with an elicitation
// handler whose answer the test sets, and a progress handler.
type client struct {
	cs *sdk.ClientSession

	mu       sync.Mutex
	answer   string // "accept", "decline", or "" (no elicitation capability)
	asked    []string
	progress map[any]int
	onProg   func()
}

func (c *client) setAnswer(a string) { c.mu.Lock(); c.answer = a; c.mu.Unlock() }

func (c *client) progressFor(tok any) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.progress[tok]
}

// connectAgent starts pem mcp --browser on dir and connects a client:
// elicit says whether it declares elicitation; version pins the protocol
// version ("" = the SDK's latest).
func connectAgent(t *testing.T, dir string, elicit bool, version string, args ...string) *client {
	t.Helper()
	c := &client{progress: map[any]int{}}
	opts := &sdk.ClientOptions{
		ProgressNotificationHandler: func(ctx context.Context, req *sdk.ProgressNotificationClientRequest) {
			c.mu.Lock()
			c.progress[req.Params.ProgressToken]++
			f := c.onProg
			c.mu.Unlock()
			if f != nil {
				f()
			}
		},
	}
	if elicit {
		opts.ElicitationHandler = func(ctx context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.asked = append(c.asked, req.Params.Message)
			if c.answer == "accept" {
				return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}, nil
			}
			return &sdk.ElicitResult{Action: "decline"}, nil
		}
	}
	cmd := exec.Command(pemBinary(t), append([]string{"mcp", "--knowledge", dir, "--browser"}, args...)...)
	stderr := &strings.Builder{}
	cmd.Stderr = &lockedWriter{w: stderr}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "pem-delegation-test", Version: "1"}, opts).
		Connect(context.Background(), &sdk.CommandTransport{Command: cmd, TerminateDuration: 20 * time.Second}, &sdk.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connecting to pem mcp --browser: %v (stderr: %s)", err, stderr)
	}
	t.Cleanup(func() {
		if err := cs.Close(); err != nil {
			t.Errorf("closing the session: %v (stderr: %s)", err, stderr)
		}
	})
	c.cs = cs
	return c
}

// agentCall calls a delegation tool with a progress token and decodes it.
func (c *client) call(t *testing.T, ctx context.Context, name string, args map[string]any, token string) (agentResult, *sdk.CallToolResult, error) {
	t.Helper()
	p := &sdk.CallToolParams{Name: name, Arguments: args}
	if token != "" {
		p.SetProgressToken(token)
	}
	res, err := c.cs.CallTool(ctx, p)
	if err != nil {
		return agentResult{}, nil, err
	}
	var r agentResult
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("decoding %s: %v", b, err)
	}
	return r, res, nil
}

func (c *client) run(t *testing.T, name string, args map[string]any) (agentResult, *sdk.CallToolResult) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, res, err := c.call(t, ctx, name, args, "")
	if err != nil {
		t.Fatalf("%s %v: %v", name, args, err)
	}
	if res.IsError {
		t.Fatalf("%s %v: isError: %s", name, args, text(res))
	}
	return r, res
}

func image(res *sdk.CallToolResult) *sdk.ImageContent {
	for _, c := range res.Content {
		if im, ok := c.(*sdk.ImageContent); ok {
			return im
		}
	}
	return nil
}

func traceByID(t *testing.T, dir, id string) engine.Trace {
	t.Helper()
	for _, tr := range traces(t, dir) {
		if tr.ID == id {
			return tr
		}
	}
	t.Fatalf("no trace %s in the tree", id)
	return engine.Trace{}
}

func withRule(t *testing.T, dir, rule string) {
	t.Helper()
	p := filepath.Join(dir, "pem.yaml")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, append(b, rule...), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A delegated run learns like pem agent run: after consolidation a second
// session's success earns P2, and the third run replays with no planner
// call. Progress is reported, the final screenshot comes back as an image,
// parallel runs leave a trace each, and bad arguments are isError results
// on a session that goes on working.
func TestDelegatedRunsReplayAndRunInParallel(t *testing.T) {
	t.Parallel()
	needChromium(t)
	repo := demoSite(t) + "/acme/widgets"
	dir := newTree(t)
	c := connectAgent(t, dir, true, "")

	tools, err := c.cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, tl := range tools.Tools {
		have[tl.Name] = true
	}
	for _, n := range []string{"browser_agent_run", "browser_agent_continue", "browser_agents_run", "browser_navigate", "experience_query"} {
		if !have[n] {
			t.Errorf("tool %s is not listed", n)
		}
	}

	// Malformed arguments: isError, nothing run, the session survives.
	for _, bad := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"browser_agent_run", map[string]any{}, "task is required"},
		{"browser_agent_run", map[string]any{"task": starsTask}, "url is required"},
		{"browser_agent_run", map[string]any{"task": starsTask, "url": "notaurl"}, "url"},
		{"browser_agent_run", map[string]any{"task": starsTask, "url": repo, "max_turns": 0}, "max_turns"},
		{"browser_agent_run", map[string]any{"task": starsTask, "url": repo, "params": []any{"x"}}, "params"},
		{"browser_agent_run", map[string]any{"task": starsTask, "url": repo, "colour": "red"}, "colour"},
		{"browser_agents_run", map[string]any{"tasks": "all of them"}, "tasks"},
		{"browser_agents_run", map[string]any{"tasks": []any{map[string]any{"task": starsTask}}}, "tasks[0]"},
		{"browser_agent_continue", map[string]any{"run_id": "../../etc"}, "run_id"},
		{"browser_agent_continue", map[string]any{"run_id": "01NOSUCHRUN"}, "no snapshot"},
	} {
		_, res, err := c.call(t, context.Background(), bad.tool, bad.args, "")
		if err != nil {
			t.Fatalf("%s %v: a protocol error (%v), want an isError result", bad.tool, bad.args, err)
		}
		if !res.IsError || !strings.Contains(text(res), bad.want) {
			t.Errorf("%s %v: isError %v, text %q (want it to mention %q)", bad.tool, bad.args, res.IsError, text(res), bad.want)
		}
	}
	if n := len(traces(t, dir)); n != 0 {
		t.Fatalf("bad calls deposited %d traces", n)
	}

	// Cold, then hints, then replay.
	var last agentResult
	for i, want := range []engine.Tier{engine.P5, engine.P3, engine.P2} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		tok := "stars-" + string(rune('a'+i))
		r, res, err := c.call(t, ctx, "browser_agent_run", map[string]any{"task": starsTask, "url": repo}, tok)
		cancel()
		if err != nil || res.IsError {
			t.Fatalf("run %d: %v %s", i+1, err, text(res))
		}
		if r.Tier != want || !r.Success || r.Answer != "1,234" || r.TraceID == "" || r.RunID == "" {
			t.Fatalf("run %d, want %s: %+v", i+1, want, r)
		}
		if want == engine.P2 && (r.PlannerCalls != 0 || r.Replayed == 0) {
			t.Fatalf("the P2 run called the planner %d times (replayed %d): want 0", r.PlannerCalls, r.Replayed)
		}
		if want == engine.P5 && r.PlannerCalls == 0 {
			t.Fatalf("the cold run made no planner call: %+v", r)
		}
		if n := c.progressFor(tok); n < r.Steps {
			t.Errorf("run %d: %d progress notifications for %d steps", i+1, n, r.Steps)
		}
		if im := image(res); im == nil || len(im.Data) < 1000 || !strings.HasPrefix(im.MIMEType, "image/") || r.Screenshot == "" {
			t.Errorf("run %d: no final screenshot as image content", i+1)
		}
		if !strings.Contains(text(res), "answer: 1,234") || !strings.Contains(text(res), "tier "+string(want)) {
			t.Errorf("run %d text: %q", i+1, text(res))
		}
		if tr := traceByID(t, dir, r.TraceID); tr.Outcome != engine.Success || tr.PlannerCalls != r.PlannerCalls || tr.Tier != want {
			t.Errorf("run %d trace: %s planner calls %d tier %s", i+1, tr.Outcome, tr.PlannerCalls, tr.Tier)
		}
		last = r
		consolidate(t, dir)
	}

	// A new task in the same browser session.
	r2, _ := c.run(t, "browser_agent_continue", map[string]any{"run_id": last.RunID, "task": pullsTask, "url": repo})
	if r2.BrowserSession != last.BrowserSession || r2.RunID == last.RunID || !r2.Success || r2.Answer != "3" {
		t.Fatalf("continue with a task: %+v (first %s)", r2, last.BrowserSession)
	}

	// Parallel runs: each its own browser session and trace.
	before := len(traces(t, dir))
	var many struct {
		Runs []agentResult `json:"runs"`
	}
	_, res := c.run(t, "browser_agents_run", map[string]any{"tasks": []any{
		map[string]any{"task": pullsTask, "url": repo, "intent": "open pull requests"},
		map[string]any{"task": starsTask, "url": repo, "intent": "star count"},
	}, "parallel": 2})
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &many); err != nil || len(many.Runs) != 2 {
		t.Fatalf("browser_agents_run: %s", b)
	}
	if many.Runs[0].Answer != "3" || many.Runs[1].Answer != "1,234" || !many.Runs[0].Success || !many.Runs[1].Success ||
		many.Runs[0].TraceID == many.Runs[1].TraceID || many.Runs[0].BrowserSession == many.Runs[1].BrowserSession {
		t.Fatalf("parallel runs: %+v", many.Runs)
	}
	if n := len(traces(t, dir)); n != before+2 {
		t.Fatalf("%d traces after the parallel runs, want %d", n, before+2)
	}
	a, bb := traceByID(t, dir, many.Runs[0].TraceID), traceByID(t, dir, many.Runs[1].TraceID)
	if a.Session == bb.Session || a.Intent != "open pull requests" || bb.Intent != "star count" {
		t.Errorf("parallel traces: sessions %q %q, intents %q %q", a.Session, bb.Session, a.Intent, bb.Intent)
	}
	if n := 0; true {
		for _, c := range res.Content {
			if _, ok := c.(*sdk.ImageContent); ok {
				n++
			}
		}
		if n != 2 {
			t.Errorf("%d screenshots for 2 runs: %q, %q", n, many.Runs[0].Screenshot, many.Runs[1].Screenshot)
		}
	}
}

// An approval rule stops a click, planned and replayed: the client is asked
// by elicitation (accepted: the step is taken; declined: the run stops
// before it, approval_required), and a client that cannot be asked gets a
// result naming the step, which browser_agent_continue resumes once a
// person says yes. Both ways of asking are covered: an input-required
// result (the SDK's latest protocol) and a direct elicitation (2025-11-25).
func TestDelegatedApproval(t *testing.T) {
	t.Parallel()
	needChromium(t)
	repo := demoSite(t) + "/acme/widgets"
	dir := newTree(t)
	withRule(t, dir, checksRule)
	c := connectAgent(t, dir, true, "")
	task := map[string]any{"task": checksTask, "url": repo}

	// Planned, declined.
	c.setAnswer("decline")
	r, res := c.run(t, "browser_agent_run", task)
	if r.Success || r.FailureCategory != engine.ApprovalRequired || r.ApprovalRequired == nil || r.ApprovalRequired.Selector != "#checks-tab" ||
		r.ApprovalRequired.Replayed || !strings.Contains(text(res), "approval required") {
		t.Fatalf("declined: %+v\n%s", r, text(res))
	}
	if tr := traceByID(t, dir, r.TraceID); len(tr.Approvals) != 1 || tr.Approvals[0].Decision != engine.Refused || tr.Approvals[0].Note != "mcp elicitation" {
		t.Fatalf("declined trace approvals: %+v", tr.Approvals)
	}
	c.mu.Lock()
	asked := append([]string(nil), c.asked...)
	c.mu.Unlock()
	if len(asked) != 1 || !strings.Contains(asked[0], "#checks-tab") || !strings.Contains(asked[0], "checks tab") {
		t.Fatalf("the elicitation asked %q", asked)
	}

	// Planned, accepted — twice, from two sessions, so the route earns P2.
	c.setAnswer("accept")
	for i := 0; i < 2; i++ {
		r, _ = c.run(t, "browser_agent_run", task)
		if !r.Success || r.Answer != "success" || len(r.Approvals) != 1 || r.Approvals[0].Decision != engine.Approved {
			t.Fatalf("accepted %d: %+v", i+1, r)
		}
		consolidate(t, dir)
	}

	// Replayed, declined: the remembered route stops before the click too.
	c.setAnswer("decline")
	r, _ = c.run(t, "browser_agent_run", task)
	if r.Tier != engine.P2 || r.PlannerCalls != 0 || r.FailureCategory != engine.ApprovalRequired || r.ApprovalRequired == nil || !r.ApprovalRequired.Replayed {
		t.Fatalf("replayed, declined: %+v", r)
	}
	if tr := traceByID(t, dir, r.TraceID); len(tr.Approvals) != 1 || !tr.Approvals[0].Replayed || tr.Approvals[0].Decision != engine.Refused {
		t.Fatalf("replayed trace approvals: %+v", tr.Approvals)
	}
	// Replayed, accepted: no planner call, the step taken.
	c.setAnswer("accept")
	r, _ = c.run(t, "browser_agent_run", task)
	if r.Tier != engine.P2 || r.PlannerCalls != 0 || !r.Success || r.Answer != "success" {
		t.Fatalf("replayed, accepted: %+v", r)
	}

	// A client without elicitation: the result names the step.
	plain := connectAgent(t, dir, false, "")
	r, res = plain.run(t, "browser_agent_run", task)
	if r.FailureCategory != engine.ApprovalRequired || r.ApprovalRequired == nil || r.ApprovalRequired.Selector != "#checks-tab" ||
		!strings.Contains(text(res), "browser_agent_continue") || !strings.Contains(text(res), r.RunID) {
		t.Fatalf("no elicitation: %+v\n%s", r, text(res))
	}
	if tr := traceByID(t, dir, r.TraceID); len(tr.Approvals) != 1 || tr.Approvals[0].Decision != engine.Unanswered || !strings.Contains(tr.Approvals[0].Note, "elicitation") {
		t.Fatalf("unanswered approvals: %+v", tr.Approvals)
	}
	// The person said yes (to the main agent): another client resumes it,
	// by the direct elicitation of protocol 2025-11-25.
	legacy := connectAgent(t, dir, true, "2025-11-25")
	legacy.setAnswer("accept")
	rr, _ := legacy.run(t, "browser_agent_continue", map[string]any{"run_id": r.RunID})
	if !rr.Resumed || rr.RunID != r.RunID || !rr.Success || rr.Answer != "success" || len(rr.Approvals) != 2 || rr.Approvals[1].Decision != engine.Approved {
		t.Fatalf("resumed after approval: %+v", rr)
	}
	legacy.mu.Lock()
	n := len(legacy.asked)
	legacy.mu.Unlock()
	if n != 1 {
		t.Errorf("the 2025-11-25 client was asked %d times, want 1", n)
	}
}

// A delegated run cancelled by the client stops, leaving an aborted trace.
func TestDelegatedRunCancel(t *testing.T) {
	t.Parallel()
	needChromium(t)
	repo := demoSite(t) + "/acme/widgets"
	dir := newTree(t)
	c := connectAgent(t, dir, false, "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.mu.Lock()
	c.onProg = cancel // at the first step
	c.mu.Unlock()
	_, _, err := c.call(t, ctx, "browser_agent_run", map[string]any{"task": checksTask, "url": repo}, "cancel-me")
	if err == nil {
		t.Fatal("the cancelled call returned a result")
	}
	c.mu.Lock()
	c.onProg = nil
	c.mu.Unlock()
	ts := waitTraces(t, dir, 1, 30*time.Second)
	if len(ts) != 1 || ts[0].Outcome != engine.Failure || ts[0].FailureCategory != engine.Aborted || len(ts[0].Steps) >= 5 {
		t.Fatalf("after the cancel: %+v", ts)
	}
	// The session goes on.
	r, _ := c.run(t, "browser_agent_run", map[string]any{"task": pullsTask, "url": repo})
	if !r.Success || r.Answer != "3" {
		t.Fatalf("after a cancel: %+v", r)
	}
}
