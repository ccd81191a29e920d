package mcpbrowser_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pemdev/pem/engine"
)

// The same as a client no one here wrote: the official TypeScript SDK
// (@modelcontextprotocol/sdk, the version engine/mcp's client test pins)
// under the machine's Node.js drives `pem mcp --browser` over stdio. The
// first session deposits one trace with every step at browser_done; after
// pem consolidate the second gets the Memory section at navigate, and its
// unfinished task is deposited when the client closes the session.
func TestTypeScriptClientSession(t *testing.T) {
	t.Parallel() // each its own pem, tree and demo site: their waits overlap
	needChromium(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("Node.js is missing: this end-to-end test runs the official TypeScript MCP SDK under node; install Node.js ≥ 18 and npm (Debian: apt-get install nodejs npm): %v", err)
	}
	work := tsClient(t)
	base := demoSite(t)
	dir := newTree(t)
	repo := base + "/acme/widgets"
	addApproval(t, dir, "  - name: actions\n    actions: [click]\n    text: [actions]\n")

	type result struct {
		IsError           bool             `json:"isError"`
		Content           []map[string]any `json:"content"`
		StructuredContent map[string]any   `json:"structuredContent"`
	}
	run := func(mode string) map[string]json.RawMessage {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, node, filepath.Join(work, "browser_client.mjs"), pemBinary(t), dir, repo, mode)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("node browser_client.mjs %s: %v\nstdout: %s\nstderr: %s", mode, err, stdout.String(), stderr.String())
		}
		var got map[string]json.RawMessage
		if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
			t.Fatalf("client output is not JSON: %v\n%s\nstderr: %s", err, stdout.String(), stderr.String())
		}
		return got
	}
	get := func(got map[string]json.RawMessage, key string) result {
		var r result
		if err := json.Unmarshal(got[key], &r); err != nil {
			t.Fatalf("%s: %v (%s)", key, err, got[key])
		}
		return r
	}

	first := run("first")
	var tools []string
	json.Unmarshal(first["tools"], &tools)
	for _, n := range []string{"browser_navigate", "browser_click", "browser_extract", "browser_done", "experience_save"} {
		if !slices.Contains(tools, n) {
			t.Errorf("tool %s not listed: %v", n, tools)
		}
	}
	if nav := get(first, "navigate"); nav.IsError || nav.StructuredContent["memory"] != nil || nav.StructuredContent["tier"] != "P5" {
		t.Errorf("first navigation: %+v", nav)
	}
	if el := get(first, "elements"); el.IsError || !strings.Contains(el.StructuredContent["extracted_content"].(string), "#pull-requests-tab") {
		t.Errorf("elements: %+v", el)
	}
	for _, k := range []string{"bad", "unknownArg"} {
		if r := get(first, k); !r.IsError || r.StructuredContent["kind"] != "invalid_arguments" || len(r.Content) != 1 ||
			!strings.Contains(r.Content[0]["text"].(string), "What to do") {
			t.Errorf("%s: want an invalid_arguments isError result with a hint: %+v", k, r)
		}
	}
	// This client declares no elicitation: the sensitive click is not
	// taken, and the answer names the step.
	if r := get(first, "sensitive"); !r.IsError || r.StructuredContent["kind"] != "approval_required" ||
		!strings.Contains(r.Content[0]["text"].(string), "click #actions-tab") {
		t.Errorf("sensitive click: %+v", r)
	}
	read := get(first, "read")
	answer, _ := read.StructuredContent["extracted_content"].(string)
	if read.IsError || answer == "" {
		t.Fatalf("extract: %+v", read)
	}
	done := get(first, "done")
	deps, _ := done.StructuredContent["deposited"].([]any)
	if done.IsError || done.StructuredContent["is_done"] != true || len(deps) != 1 {
		t.Fatalf("done: %+v", done)
	}
	ts := traces(t, dir)
	if len(ts) != 1 {
		t.Fatalf("after the first session: %d traces, want 1", len(ts))
	}
	var actions []string
	for _, s := range ts[0].Steps {
		actions = append(actions, s.Action)
	}
	if got, want := strings.Join(actions, " "), "navigate get_elements click extract"; got != want || ts[0].Outcome != engine.Success ||
		ts[0].Result.Answer != strings.TrimSpace(answer) || ts[0].Intent != "count open pull requests" {
		t.Errorf("trace: steps %q (want %q), outcome %s, answer %q, intent %q", got, want, ts[0].Outcome, ts[0].Result.Answer, ts[0].Intent)
	}
	if ap := ts[0].Approvals; len(ap) != 1 || ap[0].Decision != engine.Unanswered || ap[0].Selector != "#actions-tab" || ap[0].Step != 3 ||
		!strings.Contains(ap[0].Note, "elicitation") {
		t.Errorf("approvals in the trace: %+v", ap)
	}

	first1 := ts[0].ID
	consolidate(t, dir)
	second := run("second")
	nav := get(second, "navigate")
	mem, _ := nav.StructuredContent["memory"].(string)
	if nav.IsError || !strings.Contains(mem, "## Memory") || !strings.Contains(mem, "#pull-requests-tab") || nav.StructuredContent["tier"] == "P5" {
		t.Errorf("second session's navigation: %+v", nav)
	}
	if len(nav.Content) != 1 || !strings.Contains(nav.Content[0]["text"].(string), "## Memory") {
		t.Errorf("the memory is not in the text the model reads: %v", nav.Content)
	}
	// This client asks its user (elicitation, on its protocol version the
	// server's SDK asks it directly): approved, taken.
	if r := get(second, "sensitive"); r.IsError || !strings.HasSuffix(r.StructuredContent["url"].(string), "/actions") {
		t.Errorf("approved sensitive click: %+v", r)
	}
	var asked []string
	json.Unmarshal(second["asked"], &asked)
	if len(asked) != 1 || !strings.Contains(asked[0], "click #actions-tab") {
		t.Errorf("elicitation requests: %q", asked)
	}
	ts = traces(t, dir)
	if len(ts) != 2 {
		t.Fatalf("after the second session closed: %d traces, want 2", len(ts))
	}
	var left engine.Trace
	for _, x := range ts {
		if x.ID != first1 {
			left = x
		}
	}
	if left.Outcome != engine.Failure || left.FailureCategory != engine.Aborted || len(left.Steps) != 2 || left.Steps[1].Selector != "#actions-tab" ||
		len(left.Approvals) != 1 || left.Approvals[0].Decision != engine.Approved {
		t.Errorf("the unfinished task's trace: %+v", left)
	}
}

// tsClient returns a directory holding browser_client.mjs with the
// TypeScript SDK resolvable from it. The SDK is the one engine/mcp's client
// test pins (its package.json and lock), installed with npm into the user
// cache directory once per lock, or taken from that test's node_modules.
func tsClient(t *testing.T) string {
	t.Helper()
	src, err := filepath.Abs(filepath.Join("..", "..", "engine", "mcp", "testdata", "tsclient"))
	if err != nil {
		t.Fatal(err)
	}
	modules := filepath.Join(src, "node_modules")
	if !installed(src) {
		npm, err := exec.LookPath("npm")
		if err != nil {
			t.Fatalf("npm is missing: this end-to-end test installs @modelcontextprotocol/sdk with npm; install npm (Debian: apt-get install npm): %v", err)
		}
		h := sha256.New()
		for _, f := range []string{"package.json", "package-lock.json"} {
			b, err := os.ReadFile(filepath.Join(src, f))
			if err != nil {
				t.Fatal(err)
			}
			h.Write(b)
		}
		base := t.TempDir()
		if c, err := os.UserCacheDir(); err == nil {
			base = filepath.Join(c, "pem-test")
		}
		cache := filepath.Join(base, "tsclient-"+hex.EncodeToString(h.Sum(nil))[:12])
		if !installed(cache) {
			if err := os.MkdirAll(base, 0o755); err != nil {
				t.Fatal(err)
			}
			tmp, err := os.MkdirTemp(base, "install-")
			if err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(tmp)
			for _, f := range []string{"package.json", "package-lock.json"} {
				copyFile(t, filepath.Join(src, f), filepath.Join(tmp, f))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, npm, "install", "--no-audit", "--no-fund")
			cmd.Dir = tmp
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("npm install @modelcontextprotocol/sdk in %s: %v\n%s", tmp, err, out)
			}
			if err := os.Rename(tmp, cache); err != nil && !installed(cache) {
				t.Fatalf("caching the npm install: %v", err)
			}
		}
		modules = filepath.Join(cache, "node_modules")
	}
	work := t.TempDir()
	copyFile(t, filepath.Join("testdata", "browser_client.mjs"), filepath.Join(work, "browser_client.mjs"))
	copyFile(t, filepath.Join(src, "package.json"), filepath.Join(work, "package.json"))
	if err := os.Symlink(modules, filepath.Join(work, "node_modules")); err != nil {
		t.Fatal(err)
	}
	return work
}

func installed(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk", "package.json"))
	return err == nil
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
