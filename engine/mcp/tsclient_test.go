package mcp_test

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
)

// TestTypeScriptClient drives `pem mcp` with a client no one here wrote: the
// official TypeScript SDK (@modelcontextprotocol/sdk from npm) under the
// machine's Node.js. The SDK is installed once per package.json/lock into the
// user cache directory (npm install), or taken from testdata/tsclient/node_modules
// when a developer installed it there.
func TestTypeScriptClient(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("Node.js is missing: this end-to-end test runs the official TypeScript MCP SDK under node; install Node.js ≥ 18 and npm (Debian: apt-get install nodejs npm): %v", err)
	}
	work := tsClient(t)
	dir := newTree(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(work, "client.mjs"), pemBinary(t), dir)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node client.mjs: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	type result struct {
		IsError           bool             `json:"isError"`
		Content           []map[string]any `json:"content"`
		StructuredContent map[string]any   `json:"structuredContent"`
	}
	var got struct {
		Server       map[string]any `json:"server"`
		Instructions string         `json:"instructions"`
		Tools        []string       `json:"tools"`
		Save         result         `json:"save"`
		Query        result         `json:"query"`
		Memory       result         `json:"memory"`
		Deep         *result        `json:"deep"`
		Bad          result         `json:"bad"`
		UnknownTool  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"unknownTool"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatalf("client output is not JSON: %v\n%s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	if got.Server["name"] != "pem" {
		t.Errorf("server info %v", got.Server)
	}
	if !strings.Contains(got.Instructions, "experience_save") {
		t.Errorf("instructions %q", got.Instructions)
	}
	slices.Sort(got.Tools)
	if want := []string{"experience_deep_learn", "experience_feedback", "experience_list", "experience_memory", "experience_query", "experience_save"}; !slices.Equal(got.Tools, want) {
		t.Errorf("tools %v, want %v (pem is built with deep-learn)", got.Tools, want)
	}
	if d := got.Deep; d == nil || d.IsError || d.StructuredContent["completed"] != true || d.StructuredContent["domain"] != "github.com" {
		t.Errorf("deep-learn: %+v", d)
	}
	if s := got.Save; s.IsError || s.StructuredContent["saved"] != true || s.StructuredContent["facts_merged"] != true {
		t.Errorf("save: %+v", s)
	}
	q := got.Query.StructuredContent
	if got.Query.IsError || q["success_count"] != float64(1) || q["domain"] != "github.com" {
		t.Errorf("query: %+v", got.Query)
	}
	if sel, _ := q["primary_selectors"].(map[string]any); sel["issue_count"] != "#issues-tab .Counter" {
		t.Errorf("query selectors: %v", q["primary_selectors"])
	}
	if len(got.Query.Content) != 1 || got.Query.Content[0]["type"] != "text" {
		t.Errorf("query content: %v", got.Query.Content)
	} else {
		var text map[string]any
		if err := json.Unmarshal([]byte(got.Query.Content[0]["text"].(string)), &text); err != nil || text["tier"] != q["tier"] {
			t.Errorf("query text is not the structured JSON: %v", got.Query.Content[0]["text"])
		}
	}
	if m, _ := got.Memory.StructuredContent["memory"].(string); !strings.Contains(m, "## Memory") {
		t.Errorf("memory: %+v", got.Memory)
	}
	if b := got.Bad; !b.IsError || len(b.Content) != 1 || !strings.Contains(b.Content[0]["text"].(string), "Fix the arguments") {
		t.Errorf("bad call: %+v", b)
	}
	if u := got.UnknownTool; u == nil || u.Code != -32602 || !strings.Contains(u.Message, "no_such_tool") {
		t.Errorf("unknown tool: %+v", u)
	}
}

// tsClient returns a directory holding client.mjs with the TypeScript SDK
// resolvable from it, installing the SDK with npm when needed.
func tsClient(t *testing.T) string {
	t.Helper()
	src, err := filepath.Abs(filepath.Join("testdata", "tsclient"))
	if err != nil {
		t.Fatal(err)
	}
	if installed(src) {
		return src
	}
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
	work := t.TempDir()
	copyFile(t, filepath.Join(src, "client.mjs"), filepath.Join(work, "client.mjs"))
	copyFile(t, filepath.Join(src, "package.json"), filepath.Join(work, "package.json"))
	if err := os.Symlink(filepath.Join(cache, "node_modules"), filepath.Join(work, "node_modules")); err != nil {
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
