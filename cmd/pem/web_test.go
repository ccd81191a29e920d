package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// webTree builds a tree with the CLI: two runs of one intent (two
// sessions), one of another, a consolidation, a verdict.
func webTree(t *testing.T) (dir, id string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "knowledge")
	if code, _, errs := runPem(t, "init", dir); code != 0 {
		t.Fatalf("init: %s", errs)
	}
	step := func(sel string) string {
		return `{"steps": [{"action": "navigate", "value": "https://example.com/acme/widgets"}, {"action": "get_text", "selector": "` + sel + `", "result": "42", "ok": true}]}`
	}
	for i, s := range []struct{ intent, session, sel string }{{"star count", "a", "#stars"}, {"star count", "b", "#stars"}, {"open issues", "a", "#issues"}} {
		code, out, errs := runPem(t, "--knowledge", dir, "experience", "save", "https://example.com/acme/widgets", step(s.sel), "--intent", s.intent, "--session", s.session)
		if code != 0 {
			t.Fatalf("save %d: %s", i, errs)
		}
		var res struct{ ID string }
		json.Unmarshal([]byte(out), &res)
		id = res.ID
	}
	if code, _, errs := runPem(t, "--knowledge", dir, "consolidate"); code != 0 {
		t.Fatalf("consolidate: %s", errs)
	}
	if code, _, errs := runPem(t, "--knowledge", dir, "experience", "feedback", id, "--verdict", "right", "--judge", "me"); code != 0 {
		t.Fatalf("feedback: %s", errs)
	}
	return dir, id
}

// startServe runs pem serve --http in-process until the test ends and
// returns its base URL.
func startServe(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	var errs strings.Builder
	go func() {
		code := run(ctx, append([]string{"pem"}, args...), strings.NewReader(""), pw, &errs)
		pw.Close()
		done <- code
	}()
	lines := bufio.NewScanner(pr)
	base := ""
	for lines.Scan() {
		if u, ok := strings.CutPrefix(lines.Text(), "knowledge browser: "); ok {
			base = strings.TrimSuffix(u, "/")
			break
		}
	}
	go io.Copy(io.Discard, pr)
	if base == "" {
		cancel()
		t.Fatalf("pem serve printed no address; exit %d: %s", <-done, errs.String())
	}
	t.Cleanup(func() {
		cancel() // as SIGINT does
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("pem serve stopped with exit %d: %s", code, errs.String())
			}
		case <-time.After(20 * time.Second):
			t.Error("pem serve did not stop after its context ended")
		}
	})
	return base
}

func get(t *testing.T, u, token string) (int, []byte) {
	t.Helper()
	return send(t, "GET", u, token, "")
}

func send(t *testing.T, method, u, token, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, u, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

func sameJSON(t *testing.T, what string, api []byte, cli string) {
	t.Helper()
	var a, c any
	if err := json.Unmarshal(api, &a); err != nil {
		t.Fatalf("%s: API: %v in %s", what, err, api)
	}
	if err := json.Unmarshal([]byte(cli), &c); err != nil {
		t.Fatalf("%s: CLI: %v in %s", what, err, cli)
	}
	if !reflect.DeepEqual(a, c) {
		t.Errorf("%s: the API's JSON is not the CLI's:\n%s\nCLI:\n%s", what, api, cli)
	}
}

// The API answers what the CLI prints for the same tree, and its errors
// carry the CLI's exit codes.
func TestServeHTTPAPIEqualsCLI(t *testing.T) {
	dir, id := webTree(t)
	const token = "a-long-test-token"
	base := startServe(t, "--knowledge", dir, "serve", "--http", "127.0.0.1:0", "--token", token, "--write", "--reports", t.TempDir())

	for name, tok := range map[string]string{"missing": "", "wrong": "a-long-test-tokeN"} {
		if code, body := get(t, base+"/api/entries", tok); code != 401 || !strings.Contains(string(body), `"code": 2`) {
			t.Errorf("%s token: %d %s", name, code, body)
		}
	}
	code, api := get(t, base+"/api/entries?page_size=50&intent_filter=star", token)
	_, cli, _ := runPem(t, "--knowledge", dir, "experience", "list", "--page-size", "50", "--intent-filter", "star")
	if code != 200 {
		t.Fatalf("list: %d %s", code, api)
	}
	sameJSON(t, "list", api, cli)

	u := "https://example.com/acme/widgets"
	_, api = get(t, base+"/api/query?url="+url.QueryEscape(u)+"&intent="+url.QueryEscape("star count"), token)
	_, cli, _ = runPem(t, "--knowledge", dir, "experience", "query", u, "--intent", "star count")
	sameJSON(t, "query", api, cli)

	_, api = get(t, base+"/api/memory?url="+url.QueryEscape(u)+"&intent="+url.QueryEscape("star count"), token)
	_, cli, _ = runPem(t, "--knowledge", dir, "memory", u, "--intent", "star count")
	var m struct{ Memory string }
	json.Unmarshal(api, &m)
	if m.Memory != cli || cli == "" {
		t.Errorf("memory: API\n%s\nCLI\n%s", m.Memory, cli)
	}

	// The entry's own answer: its history comes from the commits.
	_, api = get(t, base+"/api/entries/example.com/star%20count", token)
	var view struct {
		IntentKey string `json:"intent_key"`
		Evidence  []struct{ Verdict string }
	}
	if json.Unmarshal(api, &view); view.IntentKey != "star-count" || len(view.Evidence) != 2 {
		t.Errorf("entry: %s", api)
	}
	code, page := get(t, base+"/entry/example.com/star-count.html", token)
	if code != 200 || !strings.Contains(string(page), "pem: consolidate") {
		t.Errorf("entry page: %d, no commit listed:\n%.2000s", code, page)
	}

	// Errors: the same exit codes as the CLI.
	for _, c := range []struct {
		name         string
		method, path string
		body         string
		cli          []string
	}{
		{"bad URL", "GET", "/api/query?url=" + url.QueryEscape("ftp://example.com/x"), "", []string{"experience", "query", "ftp://example.com/x"}},
		{"bad page", "GET", "/api/entries?page=0", "", []string{"experience", "list", "--page", "0"}},
		{"unknown trace", "POST", "/api/feedback", `{"trace": "01J00000000000000000000000", "verdict": "right"}`, []string{"experience", "feedback", "01J00000000000000000000000", "--verdict", "right"}},
		{"contradiction", "POST", "/api/feedback", fmt.Sprintf(`{"trace": %q, "verdict": "wrong", "judge": "me"}`, id), []string{"experience", "feedback", id, "--verdict", "wrong", "--judge", "me"}},
		{"empty save", "POST", "/api/traces", `{"url": "https://example.com/x"}`, []string{"experience", "save", "https://example.com/x", ""}},
		{"bad trace", "POST", "/api/traces", `{"url": "https://example.com/x", "trace": {"steps": 3}}`, []string{"experience", "save", "https://example.com/x", `{"steps": 3}`}},
		{"no host", "POST", "/api/traces", `{"url": "https:///x", "trace": {"steps": [{"action": "click", "selector": "a"}]}}`, []string{"experience", "save", "https:///x", `{"steps": [{"action": "click", "selector": "a"}]}`}},
	} {
		_, body := send(t, c.method, base+c.path, token, c.body)
		var e struct {
			Error string
			Code  int
		}
		json.Unmarshal(body, &e)
		want, _, errs := runPem(t, append([]string{"--knowledge", dir}, c.cli...)...)
		if want == 0 || e.Code != want {
			t.Errorf("%s: API code %d (%s), CLI exit %d (%s)", c.name, e.Code, e.Error, want, errs)
		}
	}

	// A save through the API is a save: the CLI sees it.
	code, body := send(t, "POST", base+"/api/traces", token, `{"url": "https://example.com/acme/widgets", "intent": "fork count", "session": "c",
		"trace": {"steps": [{"action": "get_text", "selector": "#forks", "result": "3", "ok": true}]}}`)
	if code != 200 || !strings.Contains(string(body), `"saved": true`) {
		t.Fatalf("save: %d %s", code, body)
	}
	_, cli, _ = runPem(t, "--knowledge", dir, "experience", "list", "--intent-filter", "fork")
	if !strings.Contains(cli, `"total": 1`) {
		t.Errorf("the CLI does not see the API's save:\n%s", cli)
	}
}

func TestServeHTTPFlags(t *testing.T) {
	dir, _ := webTree(t)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"serve", "--http", "0.0.0.0:0"}, exitUsage, "--token"},
		{[]string{"serve", "--http", "nonsense"}, exitUsage, "HOST:PORT"},
		{[]string{"serve", "--write"}, exitUsage, "--write needs --http"},
	} {
		code, _, errs := runPem(t, append([]string{"--knowledge", dir}, c.args...)...)
		if code != c.code || !strings.Contains(errs, c.want) || !strings.HasPrefix(errs, "pem: ") {
			t.Errorf("%v: exit %d %q", c.args, code, errs)
		}
	}
	// Read-only by default; loopback needs no token; pem.yaml's schedules
	// do not start with --http alone (the tree has @hourly).
	base := startServe(t, "--knowledge", dir, "serve", "--http", "127.0.0.1:0")
	code, body := send(t, "POST", base+"/api/traces", "", `{"url": "https://example.com/x"}`)
	if code != 403 || !strings.Contains(string(body), `"code": 10`) {
		t.Errorf("a write to a read-only server: %d %s", code, body)
	}
	if code, _ := get(t, base+"/", ""); code != 200 {
		t.Errorf("index: %d", code)
	}
}

func TestReportHTML(t *testing.T) {
	dir, _ := webTree(t)
	benchDir := filepath.Join(t.TempDir(), "bench")
	os.MkdirAll(filepath.Join(benchDir, "run-2"), 0o755)
	os.WriteFile(filepath.Join(benchDir, "report.html"), []byte("<!doctype html><title>one</title>"), 0o644)
	os.WriteFile(filepath.Join(benchDir, "run-2", "report.html"), []byte("<!doctype html><title>two</title>"), 0o644)
	out := filepath.Join(t.TempDir(), "site")
	code, stdout, errs := runPem(t, "--knowledge", dir, "report", "--html", out, "--reports", benchDir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(stdout, "wrote 5 pages to "+out) {
		t.Errorf("stdout %q", stdout)
	}
	index, err := os.ReadFile(filepath.Join(out, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`href="entry/example.com/star-count.html"`, `href="entry/example.com/open-issues.html"`, `href="reports/bench.html"`, `href="reports/run-2.html"`} {
		if !strings.Contains(string(index), want) {
			t.Errorf("index.html lacks %s", want)
		}
	}
	for _, p := range []string{"entry/example.com/star-count.html", "entry/example.com/open-issues.html", "reports/bench.html", "reports/run-2.html"} {
		if _, err := os.Stat(filepath.Join(out, p)); err != nil {
			t.Error(err)
		}
	}
	if code, _, errs := runPem(t, "--knowledge", dir, "report"); code != exitUsage || !strings.Contains(errs, "--html DIR") {
		t.Errorf("no --html: exit %d %s", code, errs)
	}
}
