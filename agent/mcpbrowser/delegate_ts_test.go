package mcpbrowser_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pemdev/pem/engine"
)

// The delegation tools driven by the official TypeScript SDK (protocol
// 2025-11-25: pem asks by a direct elicitation/create): a malformed call is
// an isError result; an approval rule stops a click planned and, after
// consolidation, replayed at P2 with no planner call (accepted: taken;
// declined: approval_required; a client without elicitation: the result
// names the step); parallel runs leave a trace each; a call the client
// aborts leaves an aborted trace while the session goes on.
func TestTypeScriptClientDelegation(t *testing.T) {
	t.Parallel()
	needChromium(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("Node.js is missing: this end-to-end test runs the official TypeScript MCP SDK under node; install Node.js ≥ 18 and npm (Debian: apt-get install nodejs npm): %v", err)
	}
	work := tsClient(t)
	copyFile(t, filepath.Join("testdata", "delegate_client.mjs"), filepath.Join(work, "delegate_client.mjs"))
	repo := demoSite(t) + "/acme/widgets"
	dir := newTree(t)
	withRule(t, dir, checksRule)

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(work, "delegate_client.mjs"), pemBinary(t), dir, repo, checksTask, pullsTask, starsTask)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node delegate_client.mjs: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	type result struct {
		IsError           bool             `json:"isError"`
		Content           []map[string]any `json:"content"`
		StructuredContent agentResult      `json:"structuredContent"`
		Progress          int              `json:"progress"`
	}
	var got struct {
		Tools          []string `json:"tools"`
		Bad            result   `json:"bad"`
		Accepted       result   `json:"accepted"`
		Declined       result   `json:"declined"`
		Second         result   `json:"second"`
		ReplayDeclined result   `json:"replayDeclined"`
		Parallel       struct {
			IsError           bool `json:"isError"`
			StructuredContent struct {
				Runs []agentResult `json:"runs"`
			} `json:"structuredContent"`
		} `json:"parallel"`
		Cancel      string   `json:"cancel"`
		After       result   `json:"after"`
		Asked       []string `json:"asked"`
		Unsupported result   `json:"unsupported"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatalf("client output is not JSON: %v\n%s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	for _, n := range []string{"browser_agent_run", "browser_agent_continue", "browser_agents_run"} {
		if !slices.Contains(got.Tools, n) {
			t.Errorf("tool %s not listed: %v", n, got.Tools)
		}
	}
	if !got.Bad.IsError || len(got.Bad.Content) == 0 || !strings.Contains(got.Bad.Content[0]["text"].(string), "url is required") {
		t.Errorf("malformed call: %+v", got.Bad)
	}
	a := got.Accepted
	hasImage := false
	for _, c := range a.Content {
		hasImage = hasImage || c["type"] == "image" && c["mimeType"] != nil && c["data"] != ""
	}
	if a.IsError || !a.StructuredContent.Success || a.StructuredContent.Answer != "success" || len(a.StructuredContent.Approvals) != 1 ||
		a.StructuredContent.Approvals[0].Decision != engine.Approved || !hasImage || a.Progress < a.StructuredContent.Steps {
		t.Errorf("accepted run: %+v (progress %d, image %v)", a.StructuredContent, a.Progress, hasImage)
	}
	d := got.Declined.StructuredContent
	if got.Declined.IsError || d.FailureCategory != engine.ApprovalRequired || d.ApprovalRequired == nil || d.ApprovalRequired.Selector != "#checks-tab" || d.ApprovalRequired.Replayed {
		t.Errorf("declined run: %+v", d)
	}
	if s := got.Second.StructuredContent; !s.Success || s.Tier != engine.P3 {
		t.Errorf("second accepted run: %+v", s)
	}
	rd := got.ReplayDeclined.StructuredContent
	if rd.Tier != engine.P2 || rd.PlannerCalls != 0 || rd.FailureCategory != engine.ApprovalRequired || rd.ApprovalRequired == nil || !rd.ApprovalRequired.Replayed {
		t.Errorf("replayed, declined: %+v", rd)
	}
	if len(got.Asked) != 4 || !strings.Contains(got.Asked[0], "#checks-tab") {
		t.Errorf("elicitations: %d %q", len(got.Asked), got.Asked)
	}
	runs := got.Parallel.StructuredContent.Runs
	if got.Parallel.IsError || len(runs) != 2 || runs[0].Answer != "3" || runs[1].Answer != "1,234" || runs[0].TraceID == "" || runs[0].TraceID == runs[1].TraceID {
		t.Errorf("parallel runs: %+v", runs)
	}
	if c := strings.ToLower(got.Cancel); got.Cancel == "returned" || !strings.Contains(c, "abort") && !strings.Contains(c, "cancel") && !strings.Contains(c, "changed their mind") {
		t.Errorf("the aborted call: %q", got.Cancel)
	}
	if got.After.IsError {
		t.Errorf("the session did not survive the cancel: %+v", got.After)
	}
	u := got.Unsupported.StructuredContent
	if got.Unsupported.IsError || u.FailureCategory != engine.ApprovalRequired || u.ApprovalRequired == nil || len(u.Approvals) != 1 || u.Approvals[0].Decision != engine.Unanswered {
		t.Errorf("a client without elicitation: %+v", u)
	}
	ts := traces(t, dir)
	aborted := 0
	for _, tr := range ts {
		if tr.FailureCategory == engine.Aborted {
			aborted++
		}
	}
	// accepted, declined, second, replay declined, 2 parallel, the aborted one, unsupported
	if len(ts) != 8 || aborted != 1 {
		t.Fatalf("%d traces (%d aborted), want 8 with 1 aborted", len(ts), aborted)
	}
}
