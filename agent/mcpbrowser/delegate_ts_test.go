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
// an isError result, an approved run answers with progress and a final
// screenshot, a declined one stops before the step (approval_required),
// and a call the client aborts leaves an aborted trace while the session
// goes on.
func TestTypeScriptClientDelegation(t *testing.T) {
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

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(work, "delegate_client.mjs"), pemBinary(t), dir, repo, checksTask)
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
		Tools    []string `json:"tools"`
		Bad      result   `json:"bad"`
		Accepted result   `json:"accepted"`
		Declined result   `json:"declined"`
		Cancel   string   `json:"cancel"`
		After    result   `json:"after"`
		Asked    []string `json:"asked"`
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
	if got.Declined.IsError || d.FailureCategory != engine.ApprovalRequired || d.ApprovalRequired == nil || d.ApprovalRequired.Selector != "#checks-tab" {
		t.Errorf("declined run: %+v", d)
	}
	if len(got.Asked) != 2 || !strings.Contains(got.Asked[0], "#checks-tab") {
		t.Errorf("elicitations: %q", got.Asked)
	}
	if c := strings.ToLower(got.Cancel); got.Cancel == "returned" || !strings.Contains(c, "abort") && !strings.Contains(c, "cancel") && !strings.Contains(c, "changed their mind") {
		t.Errorf("the aborted call: %q", got.Cancel)
	}
	if got.After.IsError {
		t.Errorf("the session did not survive the cancel: %+v", got.After)
	}
	ts := waitTraces(t, dir, 3, 30*time.Second)
	aborted := 0
	for _, tr := range ts {
		if tr.FailureCategory == engine.Aborted {
			aborted++
		}
	}
	if len(ts) != 3 || aborted != 1 {
		t.Fatalf("%d traces (%d aborted), want 3 with 1 aborted", len(ts), aborted)
	}
}
