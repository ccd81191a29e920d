package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store"
)

// canaryTexts returns one fake secret of every kind the scrubber knows, as
// it would occur in a run (text), and the part that must never be stored
// (value). Assembled at run time so that the repository holds no string of
// any token format; each is obviously fake (F4KE).
func canaryTexts() (texts, values []string) {
	r := strings.Repeat
	add := func(text, value string) {
		texts = append(texts, text)
		values = append(values, value)
	}
	gh := "gh" + "p_" + r("F4KE", 9)
	add("token "+gh, gh)
	pat := "github" + "_pat_" + r("F4KE1", 10)
	add("pat "+pat, pat)
	gl := "gl" + "pat-" + r("F4KE", 5)
	add("gitlab "+gl, gl)
	sl := "xo" + "xb-" + "1234567890-" + r("F4KE", 3)
	add("slack "+sl, sl)
	aws := "AK" + "IA" + r("F4KE", 4)
	add("aws "+aws, aws)
	goog := "AI" + "za" + r("F4KE", 8) + "F4K"
	add("maps "+goog, goog)
	stripe := "sk" + "_live_" + r("F4KE", 6)
	add("stripe "+stripe, stripe)
	jwt := "ey" + "JhbGciOiJIUzI1NiJ9." + "ey" + "JzdWIiOiJmYWtlIn0.F4KEjwtsignature"
	add("jwt "+jwt, jwt)
	add("-----BEGIN "+"EC PRIVATE KEY-----\nMHcF4KEprivkey\n-----END EC PRIVATE KEY-----", "MHcF4KEprivkey")
	add("Authorization: Bearer F4KEbearer0123456789", "F4KEbearer0123456789")
	basic := base64.StdEncoding.EncodeToString([]byte("fakeuser:F4KEbasicpw"))
	add("Proxy-Authorization: Basic "+basic, basic)
	add("Cookie: theme=dark; sessionid=F4KEcookie42", "F4KEcookie42")
	add("Set-Cookie: auth=F4KEsetcookie7; Path=/", "F4KEsetcookie7")
	add("https://fakeuser:F4KEurlpass9@example.com/x", "F4KEurlpass9")
	add("https://example.com/x?api_key=F4KEquerykey3", "F4KEquerykey3")
	add("user=a&password=F4KEformpass5", "F4KEformpass5")
	return texts, values
}

// canaryTrace puts one canary in every text field of a run.
func canaryTrace(c string, i int) map[string]any {
	return map[string]any{
		"task": "read the stars " + c, "answer": "12 " + c, "error_message": c,
		"final_page_url":     fmt.Sprintf("https://example.com/repo?token=F4KEfinal%d&x=%s", i, urlish(c)),
		"final_page_title":   c,
		"extraction_results": map[string]any{"stars": "12", "note": c},
		"steps": []map[string]any{
			{"action": "navigate", "url": "https://example.com/repo?x=" + urlish(c)},
			{"action": "type", "selector": "#search", "value": c},
			{"action": "click", "selector": "#stars", "result": c},
			{"action": "get_text", "selector": "span.count", "result": "12"},
		},
	}
}

func urlish(s string) string {
	return strings.NewReplacer(" ", "+", "\n", "%0A", "&", "%26", "#", "%23").Replace(s)
}

// Every canary through every door (CLI save, MCP save, the agent's typed
// save), then consolidation with real git: no canary in any tree file, any
// git object, stdout or stderr, an MCP answer, the Memory section or pem diff.
func TestCanariesNeverStored(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	texts, values := canaryTexts()
	dir := filepath.Join(t.TempDir(), "k")
	var outputs strings.Builder
	pem := func(args ...string) {
		t.Helper()
		code, out, errs := runPem(t, append([]string{"--knowledge", dir}, args...)...)
		outputs.WriteString(out + errs)
		if code != 0 {
			t.Fatalf("pem %v: exit %d\n%s%s", args, code, out, errs)
		}
	}
	pem("init")
	url := "https://example.com/repo"
	for i, c := range texts {
		b, _ := json.Marshal(canaryTrace(c, i))
		// 1. the CLI
		pem("experience", "save", url, string(b), "--intent", "star count", "--session", "cli")
	}
	// 2. MCP: one session saving every canary.
	var in strings.Builder
	in.WriteString(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"canary","version":"1"}}}` + "\n")
	in.WriteString(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n")
	for i, c := range texts {
		args := map[string]any{"url": url, "intent": "star count", "session": "mcp", "trace": canaryTrace(c, i),
			"facts": map[string]any{"interaction_hints": []string{"log in first: " + c}}}
		req, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 10 + i, "method": "tools/call",
			"params": map[string]any{"name": "experience_save", "arguments": args}})
		in.Write(append(req, '\n'))
	}
	mcp := func(input string) string {
		var out, errs bytes.Buffer
		code := run(context.Background(), []string{"pem", "--knowledge", dir, "mcp"}, strings.NewReader(input), &out, &errs)
		if code != 0 {
			t.Fatalf("pem mcp: exit %d: %s", code, errs.String())
		}
		return out.String() + errs.String()
	}
	mcpOut := mcp(in.String())
	if n := strings.Count(mcpOut, `"saved":true`); n != len(texts) {
		t.Errorf("MCP saved %d of %d", n, len(texts))
	}
	// 3. the agent's door: a typed request to the engine, as agent.Run makes it.
	st, err := store.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := engine.New(st)
	for i, c := range texts {
		in := &engine.TraceInput{Task: "read the stars " + c, Answer: c, ErrorMessage: c, FinalPageURL: "https://example.com/repo?sid=F4KEagent" + fmt.Sprint(i),
			Steps: []engine.StepInput{{Action: "navigate", URL: "https://example.com/repo"}, {Action: "type", Selector: "#q", Value: c},
				{Action: "click", Selector: "#stars", Result: c, Error: c}}}
		if _, err := e.Save(context.Background(), engine.SaveRequest{URL: url, Trace: in, Intent: "star count", Session: "agent"}); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()

	pem("consolidate")
	pem("experience", "query", url, "--intent", "star count")
	pem("experience", "list")
	pem("memory", url, "--intent", "star count")
	pem("diff")
	pem("log")
	pem("check")
	var q strings.Builder
	q.WriteString(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"canary","version":"1"}}}` + "\n")
	q.WriteString(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n")
	for i, tool := range []string{"experience_query", "experience_memory", "experience_list"} {
		q.WriteString(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{"url":%q,"intent":"star count"}}}`+"\n", 2+i, tool, url))
	}
	mcpOut += mcp(q.String())
	if !strings.Contains(mcpOut, "## Memory") {
		t.Errorf("the MCP memory answer is empty: %s", mcpOut)
	}

	// Every file of the tree, every git object, every output.
	var haystack strings.Builder
	haystack.WriteString(outputs.String())
	haystack.WriteString(mcpOut)
	files := 0
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(p)
			haystack.Write(b)
			files++
		}
		return nil
	})
	objs := exec.Command("git", "-C", dir, "cat-file", "--batch-all-objects", "--batch")
	ob, err := objs.Output()
	if err != nil {
		t.Fatalf("git cat-file: %v", err)
	}
	haystack.Write(ob)
	all := haystack.String()
	hits := 0
	for _, v := range append(values, "F4KEfinal", "F4KEagent") {
		if n := strings.Count(all, v); n > 0 {
			hits += n
			t.Errorf("canary %q found %d times", v, n)
		}
	}
	if !strings.Contains(all, engine.Redacted) {
		t.Errorf("nothing was redacted at all")
	}
	t.Logf("%d canaries × 3 doors: %d files, %d bytes of git objects, %d bytes of output searched: %d hits",
		len(values), files, len(ob), outputs.Len()+len(mcpOut), hits)
}
