package mcpbrowser_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pemdev/pem/engine"
)

// A new user's MCP agent browsing the demo site through `pem mcp --browser`
// with the Go SDK client, over the real binary's stdin/stdout: a session of
// browser tools (with a failing step and malformed calls in between)
// deposits one trace with every step at browser_done; after `pem
// consolidate` a second session gets the site's Memory at its first
// navigation; left idle, that session's trace is deposited with no
// browser_done; and the session's end deposits the task it began after.
func TestGoClientSession(t *testing.T) {
	t.Parallel() // each its own pem, tree and demo site: their waits overlap
	needChromium(t)
	base := demoSite(t)
	dir := newTree(t)
	repo := base + "/acme/widgets"
	intent := "count open issues"

	cs, stderr, stop := connect(t, dir)
	tools, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tl := range tools.Tools {
		names[tl.Name] = true
	}
	for _, n := range []string{"browser_navigate", "browser_click", "browser_type", "browser_get_text", "browser_get_elements",
		"browser_evaluate", "browser_scroll", "browser_wait", "browser_screenshot", "browser_extract", "browser_done", "experience_query"} {
		if !names[n] {
			t.Errorf("tool %s is not listed (tools: %v)", n, names)
		}
	}

	nav, _ := okCall(t, cs, "browser_navigate", map[string]any{"url": repo, "intent": intent})
	if nav.Memory != "" || nav.Tier != engine.P5 || nav.Intent != intent || nav.Step != 1 {
		t.Errorf("first navigation on an empty tree: %+v", nav)
	}
	els, _ := okCall(t, cs, "browser_get_elements", map[string]any{"limit": 20})
	if !strings.Contains(els.ExtractedContent, "#issues-tab") || strings.Count(els.ExtractedContent, "\n") > 20 {
		t.Errorf("get_elements (limit 20): %q", els.ExtractedContent)
	}

	// A step that fails (a link to a missing page): an isError result with
	// a hint, recorded as failed.
	miss := call(t, cs, "browser_navigate", map[string]any{"url": "/acme/widgets/no-such-page"})
	if mr := decode(t, miss); !miss.IsError || mr.Kind != "error_page" || !strings.Contains(mr.Hint, "browser_navigate") {
		t.Errorf("navigation to a missing page: isError %v %+v", miss.IsError, mr)
	}
	okCall(t, cs, "browser_navigate", map[string]any{"url": repo})
	// Malformed calls: isError, nothing done, the session goes on.
	for _, bad := range []struct {
		tool string
		args map[string]any
	}{
		{"browser_click", map[string]any{"css": "#issues-tab"}},
		{"browser_click", map[string]any{"selector": 42}},
		{"browser_type", map[string]any{"selector": "input[name=q]"}},
		{"browser_scroll", map[string]any{"direction": "sideways"}},
		{"browser_wait", map[string]any{"duration": "soon"}},
		{"browser_navigate", map[string]any{"url": "javascript:alert(1)"}},
		{"browser_done", map[string]any{"outcome": "maybe"}},
	} {
		res := call(t, cs, bad.tool, bad.args)
		if r := decode(t, res); !res.IsError || r.Kind != "invalid_arguments" || !strings.Contains(text(res), "What to do") {
			t.Errorf("%s %v: want an invalid_arguments isError result with a hint, got isError %v: %s", bad.tool, bad.args, res.IsError, text(res))
		}
	}

	click, _ := okCall(t, cs, "browser_click", map[string]any{"selector": "#issues-tab"})
	if !strings.HasSuffix(click.URL, "/acme/widgets/issues") {
		t.Errorf("click #issues-tab: now at %s", click.URL)
	}
	count, _ := okCall(t, cs, "browser_get_text", map[string]any{"selector": "#issues-repo-tab-count"})
	answer := strings.TrimSpace(count.ExtractedContent)
	if answer == "" {
		t.Fatalf("get_text: %+v", count)
	}
	_, shot := okCall(t, cs, "browser_screenshot", nil)
	if len(shot.Content) != 2 {
		t.Fatalf("screenshot: %d content items, want an image and a text", len(shot.Content))
	}
	img, isImg := shot.Content[0].(*sdk.ImageContent)
	if !isImg || (img.MIMEType != "image/png" && img.MIMEType != "image/jpeg") || len(img.Data) < 1000 || len(img.Data) > 400<<10 {
		t.Errorf("screenshot content: %T", shot.Content[0])
	} else if img.MIMEType == "image/png" && string(img.Data[1:4]) != "PNG" {
		t.Errorf("screenshot is not a PNG: % x", img.Data[:8])
	}
	done, _ := okCall(t, cs, "browser_done", map[string]any{"answer": answer, "success": true})
	if !done.IsDone || done.Success == nil || !*done.Success || len(done.Deposited) != 1 || done.Deposited[0].Steps != 7 {
		t.Fatalf("done: %+v", done)
	}

	ts := traces(t, dir)
	if len(ts) != 1 {
		t.Fatalf("after browser_done: %d traces, want 1", len(ts))
	}
	tr := ts[0]
	var actions []string
	for _, s := range tr.Steps {
		a := s.Action
		if !s.OK {
			a += "!"
		}
		actions = append(actions, a)
	}
	if got, want := strings.Join(actions, " "), "navigate get_elements navigate! navigate click get_text screenshot"; got != want {
		t.Errorf("trace steps %q, want %q", got, want)
	}
	if tr.Outcome != engine.Success || tr.Result.Answer != answer || tr.Intent != intent || tr.ID != done.Deposited[0].TraceID {
		t.Errorf("trace: outcome %s answer %q intent %q id %s", tr.Outcome, tr.Result.Answer, tr.Intent, tr.ID)
	}
	if tr.Steps[1].URL == "" || tr.Steps[2].HTTPStatus != 404 || tr.Steps[4].Selector != "#issues-tab" || tr.Steps[5].Result != answer {
		t.Errorf("trace step details: %+v", tr.Steps)
	}
	stop()
	if strings.Contains(stderr.String(), "panic") {
		t.Errorf("stderr: %s", stderr)
	}
	if n := len(traces(t, dir)); n != 1 {
		t.Errorf("a session that ended after browser_done left %d traces, want 1", n)
	}

	consolidate(t, dir)

	// Second session: the Memory section at the first navigation; then idle.
	// Its client can ask its user (elicitation): it says yes, then no.
	addApproval(t, dir, "  - name: pull requests\n    actions: [click]\n    text: [pull requests]\n")
	var asked []string
	answers := []string{"accept", "decline"}
	elicit := func(_ context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
		asked = append(asked, req.Params.Message)
		a := answers[0]
		answers = answers[1:]
		return &sdk.ElicitResult{Action: a, Content: map[string]any{"approve": a == "accept"}}, nil
	}
	cs2, stderr2, stop2 := connectWith(t, dir, &sdk.ClientOptions{ElicitationHandler: elicit}, "--idle-timeout", "1s")
	nav2, _ := okCall(t, cs2, "browser_navigate", map[string]any{"url": repo, "task": "How many open issues does acme/widgets have?", "intent": intent})
	if !strings.Contains(nav2.Memory, "## Memory") || !strings.Contains(nav2.Memory, "#issues-tab") || nav2.Tier == engine.P5 {
		t.Errorf("second session's first navigation: tier %s memory %q", nav2.Tier, nav2.Memory)
	}
	// Navigating again in the same task does not repeat it.
	again, _ := okCall(t, cs2, "browser_navigate", map[string]any{"url": "/acme/widgets/issues"})
	if again.Memory != "" {
		t.Errorf("memory repeated at the second navigation: %q", again.Memory)
	}
	ts = waitTraces(t, dir, 2, 30*time.Second)
	if len(ts) != 2 {
		t.Fatalf("the idle session's trace was not deposited: %d traces (stderr: %s)", len(ts), stderr2)
	}
	idle := newest(ts, tr.ID)
	if idle.Outcome != engine.Failure || idle.FailureCategory != engine.Aborted || len(idle.Steps) != 2 || idle.Intent != intent ||
		idle.Task != "How many open issues does acme/widgets have?" {
		t.Errorf("idle trace: outcome %s category %s steps %d intent %q task %q", idle.Outcome, idle.FailureCategory, len(idle.Steps), idle.Intent, idle.Task)
	}
	// The session survives the idle deposit; its next call starts a new
	// task. This one visits a second site (the same server as localhost):
	// one trace per site, the answer on the site it was read on.
	okCall(t, cs2, "browser_get_text", map[string]any{"selector": "h1", "intent": "read the license"})
	// A sensitive click: asked, approved, taken; asked again, declined, not taken.
	if pr, _ := okCall(t, cs2, "browser_click", map[string]any{"selector": "#pull-requests-tab"}); !strings.HasSuffix(pr.URL, "/pulls") {
		t.Errorf("approved click: now at %s", pr.URL)
	}
	refused := call(t, cs2, "browser_click", map[string]any{"selector": "#pull-requests-tab"})
	if r := decode(t, refused); !refused.IsError || r.Kind != "approval_required" || !strings.Contains(r.Error, "#pull-requests-tab") ||
		!strings.Contains(r.Hint, "said no") {
		t.Errorf("declined click: isError %v %+v", refused.IsError, r)
	}
	if len(asked) != 2 || !strings.Contains(asked[0], "click #pull-requests-tab") || !strings.Contains(asked[0], `rule "pull requests"`) {
		t.Errorf("elicitation requests: %q", asked)
	}
	other := strings.Replace(repo, "127.0.0.1", "localhost", 1)
	nav3, _ := okCall(t, cs2, "browser_navigate", map[string]any{"url": other})
	if nav3.Intent != "read the license" || nav3.Step != 1 {
		t.Errorf("first navigation to the second site: %+v", nav3)
	}
	lic, _ := okCall(t, cs2, "browser_extract", map[string]any{"label": "License"})
	done2, _ := okCall(t, cs2, "browser_done", map[string]any{"answer": lic.ExtractedContent})
	if len(done2.Deposited) != 2 || lic.ExtractedContent != "MIT" {
		t.Errorf("a task over two sites: extract %q, deposited %+v", lic.ExtractedContent, done2.Deposited)
	}
	// A task begun and left: deposited when the session ends.
	okCall(t, cs2, "browser_scroll", map[string]any{"direction": "down", "intent": "scroll"})
	stop2()
	ts = traces(t, dir)
	if len(ts) != 5 {
		t.Fatalf("after the session's end: %d traces, want 5", len(ts))
	}
	bySite := map[string]engine.Trace{}
	for _, x := range ts {
		if x.Intent == "read the license" {
			bySite[x.Domain] = x
		}
		if x.Intent == "scroll" && (x.Outcome != engine.Failure || x.FailureCategory != engine.Aborted || len(x.Steps) != 1) {
			t.Errorf("trace left at the session's end: %+v", x)
		}
	}
	first, second := bySite["127.0.0.1"], bySite["localhost"]
	if ap := first.Approvals; len(ap) != 2 || ap[0].Decision != engine.Approved || ap[0].Step != 2 || ap[1].Decision != engine.Refused ||
		ap[1].Step != 3 || ap[1].Rule != "pull requests" || ap[1].Note != "mcp elicitation" {
		t.Errorf("approvals in the trace: %+v", ap)
	}
	if len(bySite) != 2 || len(first.Steps) != 2 || first.Result.Answer != "" || len(second.Steps) != 2 ||
		second.Result.Answer != "MIT" || second.Outcome != engine.Success || first.Session != second.Session {
		t.Errorf("traces of the two-site task: %+v", bySite)
	}
}

// newest is the trace of ts other than the one with id skip, the latest.
func newest(ts []engine.Trace, skip string) engine.Trace {
	var out engine.Trace
	for _, t := range ts {
		if t.ID != skip && t.StartedAt.After(out.StartedAt) || out.ID == "" && t.ID != skip {
			out = t
		}
	}
	return out
}

// `pem mcp --browser` starts without Chromium: the experience tools answer,
// and a browser call with no browser to launch is an isError result that
// says what to install; the server keeps serving.
func TestNoChromium(t *testing.T) {
	t.Parallel() // each its own pem, tree and demo site: their waits overlap
	dir := newTree(t)
	cmd := exec.Command(pemBinary(t), "mcp", "--knowledge", dir, "--browser")
	cmd.Env = append(os.Environ(), "PEM_CHROME="+filepath.Join(t.TempDir(), "no-chromium-here"))
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "pem-browser-test", Version: "1"}, nil).
		Connect(context.Background(), &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if res := call(t, cs, "experience_list", map[string]any{}); res.IsError {
		t.Errorf("experience_list: %s", text(res))
	}
	res := call(t, cs, "browser_navigate", map[string]any{"url": "http://127.0.0.1:9/"})
	if r := decode(t, res); !res.IsError || r.Kind != "browser_unavailable" || !strings.Contains(r.Error, "starting the browser") ||
		!strings.Contains(r.Error, "no-chromium-here") || !strings.Contains(r.Hint, "Chromium") {
		t.Errorf("browser_navigate with no browser: isError %v %+v", res.IsError, r)
	}
	if res := call(t, cs, "experience_list", map[string]any{}); res.IsError {
		t.Errorf("experience_list after the failed launch: %s", text(res))
	}
}
