package mcp_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pemdev/pem/engine"
)

// The round trip a new user's agent makes, over real pipes to the built
// binary: save (camelCase, trace as a string) → save (snake_case, trace as an
// object, facts) → query → memory → list → deep-learn.
func TestBinaryRoundTrip(t *testing.T) {
	dir := newTree(t)
	cs, stderr := connectBinary(t, dir)
	u := "https://github.com/pemdev/pem/issues?utm_source=x"
	intent := "count open issues"

	var r0 engine.Recall
	ok(t, call(t, cs, "experience_query", map[string]any{"url": u, "intent": intent}), &r0)
	if r0.Tier != engine.P5 || r0.Domain != "github.com" {
		t.Fatalf("before any save: %+v", r0)
	}

	var s1 engine.SaveResult
	ok(t, call(t, cs, "experience_save", map[string]any{
		"url": u, "intent": intent, "outcome": "success", "taskType": "extraction", "session": "sess-1",
		"trace": `{"steps":[{"action":"navigate","url":"https://github.com/pemdev/pem"},{"action":"click","selector":"#issues-tab"},{"action":"get_text","selector":"#issues-tab .Counter","result":"42"}],"finalPageUrl":"https://github.com/pemdev/pem/issues","durationMs":1200}`,
	}), &s1)
	if !s1.Saved || s1.Domain != "github.com" || s1.Outcome != engine.Success || s1.TracePath == "" {
		t.Fatalf("save 1: %+v", s1)
	}
	if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(s1.TracePath))); err != nil {
		t.Errorf("trace file: %v", err)
	}

	var s2 engine.SaveResult
	ok(t, call(t, cs, "experience_save", map[string]any{
		"url": u, "intent": intent, "task_type": "extraction", "session": "sess-2",
		"trace": map[string]any{"steps": []any{
			map[string]any{"action": "click", "selector": "#issues-tab"},
			map[string]any{"action": "get_text", "selector": "#issues-tab .Counter", "result": "43"},
		}},
		"facts": map[string]any{
			"selectors":      map[string]any{"issue_count": "#issues-tab .Counter"},
			"known_blockers": []any{map[string]any{"type": "overlay_blocked", "selector": "#cookie", "action": "click #accept"}},
			"antiPatterns":   []any{"do not use the search box"},
		},
	}), &s2)
	if !s2.FactsMerged || s2.FactsRejected {
		t.Fatalf("save 2 facts: %+v", s2)
	}

	var r engine.Recall
	ok(t, call(t, cs, "experience_query", map[string]any{"url": u, "intent": intent}), &r)
	if r.SuccessCount != 2 || r.Tier == engine.P5 || r.Confidence <= 0 {
		t.Errorf("query after two saves: tier %s confidence %v successes %d", r.Tier, r.Confidence, r.SuccessCount)
	}
	if r.PrimarySelectors["issue_count"] != "#issues-tab .Counter" {
		t.Errorf("primary selectors %v", r.PrimarySelectors)
	}
	if len(r.KnownBlockers) == 0 || len(r.AntiPatterns) != 1 {
		t.Errorf("blockers %v anti-patterns %v", r.KnownBlockers, r.AntiPatterns)
	}

	var m struct {
		Memory string `json:"memory"`
		Chars  int    `json:"chars"`
	}
	ok(t, call(t, cs, "experience_memory", map[string]any{"url": u, "intent": intent, "maxChars": 1500}), &m)
	if !strings.Contains(m.Memory, "## Memory") || !strings.Contains(m.Memory, "issues-tab") || m.Chars > 1500 || m.Chars == 0 {
		t.Errorf("memory (%d chars): %q", m.Chars, m.Memory)
	}

	var l engine.ListResult
	ok(t, call(t, cs, "experience_list", map[string]any{"intentFilter": "open issues", "page_size": "10"}), &l)
	if l.Total != 1 || len(l.Entries) != 1 || l.Entries[0].Domain != "github.com" || l.Entries[0].SuccessCount != 2 || l.PageSize != 10 {
		t.Errorf("list: %+v", l)
	}
	// pem is built with deep-learn: the tool is listed and mines the two runs.
	var d struct {
		Completed      bool   `json:"completed"`
		IntentKey      string `json:"intent_key"`
		SelectorsFound int    `json:"selectors_found"`
		Message        string `json:"message"`
	}
	ok(t, call(t, cs, "experience_deep_learn", map[string]any{"url": u, "intent": intent}), &d)
	if !d.Completed || d.IntentKey != "count-open-issues" {
		t.Errorf("deep-learn: %+v", d)
	}
	if strings.Contains(stderr.String(), "panic") {
		t.Errorf("stderr: %s", stderr)
	}
}

// PEM_KNOWLEDGE_DIR selects the tree when --knowledge is absent.
func TestBinaryKnowledgeFromEnv(t *testing.T) {
	dir := newTree(t)
	eng := openEngine(t, dir)
	if _, err := eng.Save(t.Context(), engine.SaveRequest{URL: "https://example.com/a", Intent: "read title",
		Trace: &engine.TraceInput{Steps: []engine.StepInput{{Action: "get_text", Selector: "h1"}}}}); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(pemBinary(t), "mcp")
	cmd.Env = append(os.Environ(), "PEM_KNOWLEDGE_DIR="+dir)
	cmd.Dir = t.TempDir() // no ./knowledge here
	p := startRaw(t, cmd)
	p.initialize(t)
	p.send(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"experience_list","arguments":{}}}`)
	resp := p.expect(t, 2)
	if !strings.Contains(string(resp.Result), `example.com`) {
		t.Errorf("list over PEM_KNOWLEDGE_DIR: %s", resp.Result)
	}
	p.close(t)
}

func TestBinaryMissingTreeFailsAtStartup(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	cmd := exec.Command(pemBinary(t), "mcp", "--knowledge", missing)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Stdin = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n")
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("want exit code 3 (no tree), got %v", err)
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout must hold protocol only, got %q", stdout.String())
	}
	if !strings.Contains(stderr.String(), "pem init") || !strings.Contains(stderr.String(), "nope") {
		t.Errorf("stderr does not say what to do: %q", stderr.String())
	}
}

// rawProc talks JSON-RPC to `pem mcp` line by line and checks that every line
// it prints is a JSON-RPC message.
type rawProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan []byte
	stderr *bytes.Buffer
	bad    chan string
}

type rpcResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Result  json.RawMessage `json:"result"`
	Error   *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func startRaw(t *testing.T, cmd *exec.Cmd) *rawProc {
	t.Helper()
	p := &rawProc{cmd: cmd, lines: make(chan []byte, 100), stderr: &bytes.Buffer{}, bad: make(chan string, 100)}
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = &lockedWriter{w: p.stderr}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			line := append([]byte(nil), sc.Bytes()...)
			var r rpcResponse
			if err := json.Unmarshal(line, &r); err != nil || r.JSONRPC != "2.0" {
				p.bad <- string(line)
				continue
			}
			p.lines <- line
		}
	}()
	return p
}

func (p *rawProc) send(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(p.stdin, line+"\n"); err != nil {
		t.Fatalf("writing %.80q: %v", line, err)
	}
}

// next returns the next response (notifications skipped).
func (p *rawProc) next(t *testing.T) rpcResponse {
	t.Helper()
	for {
		select {
		case line, open := <-p.lines:
			if !open {
				t.Fatalf("server closed stdout; stderr: %s", p.stderr)
			}
			var r rpcResponse
			_ = json.Unmarshal(line, &r)
			if r.Method != "" {
				continue // a server notification
			}
			return r
		case b := <-p.bad:
			t.Fatalf("stdout line is not JSON-RPC: %.200q", b)
		case <-time.After(20 * time.Second):
			t.Fatalf("no response in 20s; stderr: %s", p.stderr)
		}
	}
}

func (p *rawProc) expect(t *testing.T, id int) rpcResponse {
	t.Helper()
	r := p.next(t)
	if string(r.ID) != fmt.Sprint(id) {
		t.Fatalf("response id %s, want %d: %+v", r.ID, id, r)
	}
	return r
}

func (p *rawProc) initialize(t *testing.T) {
	t.Helper()
	p.send(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if r := p.expect(t, 1); r.Error != nil {
		t.Fatalf("initialize: %+v", r.Error)
	}
	p.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
}

// close ends stdin and waits for a clean exit.
func (p *rawProc) close(t *testing.T) {
	t.Helper()
	p.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("pem mcp exited with %v after stdin closed; stderr: %s", err, p.stderr)
		}
	case <-time.After(20 * time.Second):
		t.Errorf("pem mcp did not exit after stdin closed")
	}
	for line := range p.lines {
		t.Errorf("unexpected output: %s", line)
	}
	select {
	case b := <-p.bad:
		t.Errorf("stdout line is not JSON-RPC: %.200q", b)
	default:
	}
}

func TestBinaryMalformedInputCorpus(t *testing.T) {
	dir := newTree(t)
	p := startRaw(t, exec.Command(pemBinary(t), "mcp", "--knowledge", dir))
	p.initialize(t)

	cases := []struct {
		name string
		line string
		id   string // expected response id ("null" for none readable)
		code int    // 0: a result, not an error
	}{
		{"not JSON", `{not json`, "null", -32700},
		{"truncated request", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"experience_query","arguments":{"url":`, "null", -32700},
		{"trailing garbage", `{"jsonrpc":"2.0","id":4,"method":"ping"} xyz`, "null", -32700},
		{"binary noise", "\x00\x01\x02\xff", "null", -32700},
		{"a number", `42`, "null", -32600},
		{"empty batch", `[]`, "null", -32600},
		{"batch", `[{"jsonrpc":"2.0","id":5,"method":"ping"}]`, "null", -32600},
		{"wrong version", `{"jsonrpc":"1.0","id":6,"method":"ping"}`, "6", -32600},
		{"no version", `{"id":7,"method":"ping"}`, "7", -32600},
		{"object id", `{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, "null", -32600},
		{"method not a string", `{"jsonrpc":"2.0","id":8,"method":5}`, "8", -32600},
		{"unknown method", `{"jsonrpc":"2.0","id":9,"method":"no/such/method"}`, "9", -32601},
		{"unknown tool", `{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"no_such_tool","arguments":{}}}`, "10", -32602},
		{"params not an object", `{"jsonrpc":"2.0","id":11,"method":"tools/call","params":"oops"}`, "11", -32602},
		{"ping after all that", `{"jsonrpc":"2.0","id":"s-12","method":"ping"}`, `"s-12"`, 0},
	}
	for _, c := range cases {
		p.send(t, c.line)
		r := p.next(t)
		if string(r.ID) != c.id {
			t.Errorf("%s: response id %s, want %s", c.name, r.ID, c.id)
		}
		switch {
		case c.code == 0 && r.Error != nil:
			t.Errorf("%s: want a result, got error %+v", c.name, r.Error)
		case c.code != 0 && r.Error == nil:
			t.Errorf("%s: want error %d, got result %s", c.name, c.code, r.Result)
		case c.code != 0 && r.Error.Code != c.code:
			t.Errorf("%s: error code %d (%s), want %d", c.name, r.Error.Code, r.Error.Message, c.code)
		}
	}

	// Blank lines and unknown notifications get no answer; the next request does.
	p.send(t, "")
	p.send(t, "   \t")
	p.send(t, `{"jsonrpc":"2.0","method":"notifications/bogus","params":{}}`)
	// Bad tool arguments: an isError result, not a protocol error.
	p.send(t, `{"jsonrpc":"2.0","id":20,"method":"tools/call","params":{"name":"experience_save","arguments":{"url":5,"trace":"{oops"}}}`)
	r := p.expect(t, 20)
	var res struct {
		IsError bool `json:"isError"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(r.Result, &res); err != nil || !res.IsError || len(res.Content) != 1 || !strings.Contains(res.Content[0].Text, "url must be a string") {
		t.Errorf("bad arguments: %s (%v)", r.Result, err)
	}
	// And the server still works.
	p.send(t, `{"jsonrpc":"2.0","id":21,"method":"tools/call","params":{"name":"experience_save","arguments":{"url":"https://example.com/x","intent":"ok","trace":{"steps":[{"action":"get_text","selector":"h1"}]}}}}`)
	r = p.expect(t, 21)
	res.IsError = false
	if err := json.Unmarshal(r.Result, &res); err != nil || res.IsError {
		t.Errorf("a valid save after the corpus: %s", r.Result)
	}
	p.close(t)
	if files := treeFiles(t, dir); len(files) != 1 {
		t.Errorf("want exactly the one valid trace written, got %v", files)
	}
}

func TestBinaryOversizedLine(t *testing.T) {
	dir := newTree(t)
	p := startRaw(t, exec.Command(pemBinary(t), "mcp", "--knowledge", dir))
	p.initialize(t)
	huge := strings.Repeat("A", 9<<20)
	// The id first (Go SDK order), then last (TypeScript SDK order): both are
	// answered with their own id although the line is never held whole.
	p.send(t, `{"jsonrpc":"2.0","id":31,"method":"tools/call","params":{"name":"experience_save","arguments":{"url":"https://example.com/a","trace":"`+huge+`"}}}`)
	r := p.expect(t, 31)
	if r.Error == nil || r.Error.Code != -32600 || !strings.Contains(r.Error.Message, "cap") {
		t.Errorf("9 MiB line: %+v", r.Error)
	}
	p.send(t, `{"method":"tools/call","params":{"name":"experience_save","arguments":{"url":"https://example.com/a","trace":"`+huge+`"}},"jsonrpc":"2.0","id":"late-id"}`)
	r = p.next(t)
	if string(r.ID) != `"late-id"` || r.Error == nil || r.Error.Code != -32600 {
		t.Errorf("9 MiB line with the id at its end: id %s error %+v", r.ID, r.Error)
	}
	// A line just under the cap is read (and refused by the engine's own trace cap, as an isError result).
	under := strings.Repeat("B", 7<<20)
	p.send(t, `{"jsonrpc":"2.0","id":32,"method":"tools/call","params":{"name":"experience_save","arguments":{"url":"https://example.com/a","trace":{"answer":"`+under+`"}}}}`)
	r = p.expect(t, 32)
	if r.Error != nil || !strings.Contains(string(r.Result), `"isError":true`) {
		t.Errorf("7 MiB line: %s %+v", r.Result, r.Error)
	}
	p.send(t, `{"jsonrpc":"2.0","id":33,"method":"tools/call","params":{"name":"experience_query","arguments":{"url":"https://example.com/a"}}}`)
	r = p.expect(t, 33)
	if r.Error != nil || !strings.Contains(string(r.Result), `"tier":"P5"`) {
		t.Errorf("after the oversized lines: %s %+v", r.Result, r.Error)
	}
	p.close(t)
	if files := treeFiles(t, dir); len(files) != 0 {
		t.Errorf("oversized lines wrote %v", files)
	}
}

// A client may write all its requests and close stdin at once (a pipe); every
// request is still answered before the server exits, and with --verbose the
// logs go to stderr while stdout stays protocol only.
func TestBinaryPipedSession(t *testing.T) {
	dir := newTree(t)
	var in strings.Builder
	in.WriteString(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"pipe","version":"1"}}}` + "\n")
	in.WriteString(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n")
	in.WriteString("{garbage\n")
	in.WriteString(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"experience_save","arguments":{"url":"https://example.com/p","intent":"read it","trace":{"steps":[{"action":"get_text","selector":"h1"}]}}}}` + "\n")
	cmd := exec.Command(pemBinary(t), "mcp", "--knowledge", dir, "--verbose") // logs, but on stderr only
	cmd.Stdin = strings.NewReader(in.String())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("pem mcp: %v; stderr: %s", err, stderr.String())
	}
	ids := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		var r rpcResponse
		if err := json.Unmarshal([]byte(line), &r); err != nil || r.JSONRPC != "2.0" {
			t.Fatalf("stdout line is not JSON-RPC: %q", line)
		}
		ids[string(r.ID)] = true
	}
	if !ids["1"] || !ids["null"] || !ids["2"] {
		t.Errorf("responses for ids %v, want 1, null (parse error), 2; stdout: %s", ids, stdout.String())
	}
	if files := treeFiles(t, dir); len(files) != 1 {
		t.Errorf("files %v, want the one trace", files)
	}
	if !strings.Contains(stderr.String(), "level=") {
		t.Errorf("--verbose logged nothing on stderr: %q", stderr.String())
	}
}
