package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pemdev/pem/agent/bench"
	"github.com/pemdev/pem/agent/demosite"
	"github.com/pemdev/pem/agent/rod"
)

func TestParseTasks(t *testing.T) {
	jl := "{\"task\":\"count stars\",\"url\":\"https://a.example/\"}\n\n{\"task\":\"b\",\"url\":\"https://b.example/\",\"params\":{\"q\":\"x\"}}\n"
	got, err := parseTasks([]byte(jl))
	if err != nil || len(got) != 2 || got[1].Params["q"] != "x" {
		t.Fatalf("%+v %v", got, err)
	}
	y := "- task: count stars\n  url: https://a.example/\n  intent: stars\n"
	got, err = parseTasks([]byte(y))
	if err != nil || len(got) != 1 || got[0].Intent != "stars" {
		t.Fatalf("%+v %v", got, err)
	}
	for _, bad := range []string{"{\"task\":\"x\"}\n", "- task: x\n  url: u\n  colour: red\n", "", "{\"task\":\"x\",\"url\":\"u\",\"extra\":1}"} {
		if _, err := parseTasks([]byte(bad)); err == nil {
			t.Errorf("parseTasks(%q) accepted bad input", bad)
		}
	}
	if _, err := parseParams([]string{"novalue"}); err == nil {
		t.Error("--param without = accepted")
	}
}

func needChromium(t *testing.T) {
	t.Helper()
	if _, err := rod.Bin(rod.Options{}); err != nil {
		t.Fatalf("install chromium: apt-get install chromium (%v)", err)
	}
}

// runPem runs pem in-process and returns its exit code, stdout and stderr.
func runPem(t testing.TB, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), append([]string{"pem"}, args...), strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func TestAgentRunCommand(t *testing.T) {
	needChromium(t)
	ctx := context.Background()
	site := demosite.New(demosite.Options{})
	base, stop, err := site.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	dir := filepath.Join(t.TempDir(), "k")
	if code, _, errs := runPem(t, "init", dir); code != 0 {
		t.Fatalf("init: %s", errs)
	}
	task := "How many stars does the acme/widgets repository have?"
	code, out, errs := runPem(t, "--knowledge", dir, "agent", "run", task, "--url", base+"/acme/widgets")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	line := regexp.MustCompile(`(?m)^tier P5 · \d+ steps · [1-9]\d* planner calls · trace traces/127\.0\.0\.1/\S+\.yaml$`)
	if !strings.HasPrefix(out, "1,234\n") || !line.MatchString(out) {
		t.Fatalf("cold output:\n%s", out)
	}
	// One success from one session is a hint (P3: the planner runs with the
	// Memory section); a second session's success earns P2 (replay, no planner).
	var res runJSON
	for _, want := range []string{"P3", "P2"} {
		code, out, errs = runPem(t, "--knowledge", dir, "agent", "run", task, "--url", base+"/acme/widgets", "--json")
		res = runJSON{}
		if code != 0 || json.Unmarshal([]byte(out), &res) != nil {
			t.Fatalf("exit %d\n%s\n%s", code, out, errs)
		}
		if string(res.Tier) != want || (want == "P2") != (res.PlannerCalls == 0) || !res.Success || res.Answer != "1,234" {
			t.Fatalf("warm, want %s: %+v", want, res)
		}
	}

	// The model planners: configured the usual way, a key only when a model
	// is called. A replay at P2 calls none, so --planner anthropic with no key
	// at all runs.
	for _, v := range []string{"PEM_LLM_BASE_URL", "PEM_LLM_MODEL", "PEM_LLM_API_KEY", "PEM_LLM_TEMPERATURE",
		"OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL", "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_MODEL"} {
		t.Setenv(v, "")
	}
	code, out, errs = runPem(t, "--knowledge", dir, "agent", "run", task, "--url", base+"/acme/widgets", "--json", "--planner", "anthropic", "--model", "claude-x")
	res = runJSON{}
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.PlannerCalls != 0 || res.Answer != "1,234" {
		t.Fatalf("P2 replay with the anthropic planner and no key: exit %d\n%s\n%s", code, out, errs)
	}
	// A run that must call the model says which variable to set.
	code, _, errs = runPem(t, "--knowledge", dir, "agent", "run", task, "--intent", "no key yet", "--url", base+"/acme/widgets", "--planner", "anthropic", "--model", "claude-x")
	if code != exitUsage || !strings.Contains(errs, "set ANTHROPIC_API_KEY") || strings.Contains(errs, "report it") {
		t.Fatalf("a model call with no key: exit %d\n%s", code, errs)
	}
	// The flags reach the server, over the variables.
	var mu sync.Mutex
	var reqs []string
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		reqs = append(reqs, fmt.Sprintf("%s %s %v %v", r.URL.Path, r.Header.Get("Authorization"), body["model"], body["temperature"]))
		mu.Unlock()
		io.WriteString(w, `{"choices":[{"message":{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"done","arguments":"{\"answer\":\"1,234\"}"}}]}}]}`)
	}))
	defer model.Close()
	t.Setenv("OPENAI_API_KEY", "sk-test")
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1") // --base-url wins
	t.Setenv("PEM_LLM_MODEL", "env-model")               // --model wins
	code, out, errs = runPem(t, "--knowledge", dir, "agent", "run", task, "--intent", "fake model", "--url", base+"/acme/widgets",
		"--planner", "openai", "--base-url", model.URL+"/v1", "--model", "flag-model", "--temperature", "0.3")
	mu.Lock()
	got := strings.Join(reqs, "; ")
	mu.Unlock()
	if code != 0 || got != "/v1/chat/completions Bearer sk-test flag-model 0.3" {
		t.Fatalf("openai planner with flags: exit %d, requests %q\n%s\n%s", code, got, out, errs)
	}
	if code, _, errs = runPem(t, "--knowledge", dir, "agent", "run", task, "--url", base, "--model", "m"); code != exitUsage || !strings.Contains(errs, "--planner openai") {
		t.Fatalf("--model with explore: exit %d %s", code, errs)
	}

	// Secrets from the environment, tasks from a file, two at once.
	t.Setenv("PEM_TEST_DEMO_PW", demosite.DemoPassword)
	tasks := filepath.Join(t.TempDir(), "tasks.jsonl")
	login := `{"task":"Sign in as demo with the password {{secret:demo_password}} and report the unread notifications count.","url":"` + base + `/login?return_to=%2Fnotifications"}`
	branch := `{"task":"What is the default branch of acme/widgets?","url":"` + base + `/acme/widgets"}`
	os.WriteFile(tasks, []byte(login+"\n"+branch+"\n"), 0o600)
	code, out, errs = runPem(t, "--knowledge", dir, "--verbose", "agent", "run", "--tasks", tasks, "--parallel", "2", "--secret", "demo_password=PEM_TEST_DEMO_PW")
	if code != 0 || !strings.Contains(out, "\n  3\n") || !strings.Contains(out, "\n  main\n") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	if strings.Contains(out+errs, demosite.DemoPassword) {
		t.Fatal("the secret reached stdout or stderr")
	}
	// Undeclared secret: a usage error, nothing run.
	code, _, errs = runPem(t, "--knowledge", dir, "agent", "run", "log in with {{secret:nope}}", "--url", base+"/login")
	if code != exitUsage || !strings.Contains(errs, "nope") {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if code, _, errs = runPem(t, "--knowledge", dir, "agent", "run", "x", "--url", base, "--planner", "gpt"); code != exitUsage {
		t.Fatalf("unknown planner: exit %d %s", code, errs)
	}
}

func TestDemoCommand(t *testing.T) {
	needChromium(t)
	dir := filepath.Join(t.TempDir(), "k")
	code, out, errs := runPem(t, "--knowledge", dir, "demo", "--json", "--rounds", "3", "--only", "stars,latest-workflow,unread-notifications")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	var v struct {
		Runs   []bench.Run `json:"runs"`
		Totals struct {
			Cold, Warm bench.Totals
		} `json:"totals"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(v.Runs) != 9 || v.Totals.Cold.Successes != 3 || v.Totals.Warm.Successes != 6 || v.Totals.Cold.PlannerCalls == 0 {
		t.Fatalf("%+v", v)
	}
	// Round 2: one session's success is a hint (P3, planner); round 3: two
	// sessions, P2, replayed with no planner call.
	for _, r := range v.Runs {
		if want := map[int]string{2: "P3", 3: "P2"}[r.Round]; want != "" && string(r.Tier) != want {
			t.Errorf("round %d %s ran at %s, want %s", r.Round, r.Task, r.Tier, want)
		}
		if r.Round == 3 && r.PlannerCalls != 0 {
			t.Errorf("round 3 %s: %d planner calls, want 0", r.Task, r.PlannerCalls)
		}
	}
	// The grader's verdicts were recorded beside the traces and folded.
	if vs, _ := filepath.Glob(filepath.Join(dir, "verdicts", "*", "*", "pem-grader.yaml")); len(vs) != 9 {
		t.Errorf("%d grader verdicts recorded, want 9", len(vs))
	}
	if strings.Contains(out+errs, demosite.DemoPassword) {
		t.Fatal("the demo password reached stdout or stderr")
	}
	if _, err := os.Stat(filepath.Join(dir, "pem.yaml")); err != nil {
		t.Fatalf("the demo did not use --knowledge: %v", err)
	}
}

func TestBenchCommand(t *testing.T) {
	needChromium(t)
	t.Setenv("TMPDIR", t.TempDir()) // the bench's two trees
	out := filepath.Join(t.TempDir(), "bench")
	keep := filepath.Join(t.TempDir(), "trees")
	code, stdout, errs := runPem(t, "bench", "--rounds", "3", "--only", "stars", "--out", out, "--keep", keep)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, errs)
	}
	md, err := os.ReadFile(filepath.Join(out, "summary.md"))
	if err != nil || !strings.HasPrefix(stdout, string(md)) || !strings.Contains(stdout, "wrote "+filepath.Join(out, "summary.md")) {
		t.Fatalf("summary.md (%v) not what was printed:\n%s", err, stdout)
	}
	// report.html beside them: self-contained, a chart per metric.
	if html, err := os.ReadFile(filepath.Join(out, "report.html")); err != nil || !strings.Contains(string(html), `data-metric="steps"`) || strings.Contains(string(html), "<script") {
		t.Errorf("report.html (%v) is not the bench report", err)
	}
	if !strings.Contains(string(md), "Planner: explore. Site: demo site.") {
		t.Errorf("summary.md does not name the planner and the site:\n%s", md)
	}
	csvData, err := os.ReadFile(filepath.Join(out, "summary.csv"))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(bytes.NewReader(csvData)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	var arms []string
	runs := 0
	for _, r := range rows[1:] {
		if r[col["planner"]] != "explore" || r[col["site"]] != "demo site" {
			t.Errorf("row does not name planner and site: %v", r)
		}
		if r[0] == "run" {
			runs++
			continue
		}
		arm, round, calls := r[col["memory"]], r[col["round"]], r[col["planner_calls"]]
		arms = append(arms, arm+" "+round)
		// Round 2 has one session's success: hints (P3), the planner runs.
		// Round 3 has successes from two sessions: P2, replayed with no planner.
		if arm == "on" && round == "2" && calls == "0" {
			t.Errorf("memory-on round 2 replayed on one session's success: %v", r)
		}
		if arm == "on" && round == "3" && calls != "0" {
			t.Errorf("memory-on round 3 asked the planner: %v", r)
		}
		if arm == "off" && calls == "0" {
			t.Errorf("memory-off ran without the planner: %v", r)
		}
	}
	if runs != 6 || strings.Join(arms, ",") != "on 1,on 2,on 3,on total,off 1,off 2,off 3,off total" {
		t.Errorf("summary.csv: %d run rows, total rows %v", runs, arms)
	}
	for _, want := range []string{"round 1 memory on  stars", "round 2 memory off stars"} {
		if !strings.Contains(errs, want) {
			t.Errorf("progress lacks %q:\n%s", want, errs)
		}
	}
	// --keep kept both trees, with the graders' verdicts in them.
	for _, d := range []string{"knowledge-on", "knowledge-off"} {
		if vs, _ := filepath.Glob(filepath.Join(keep, d, "verdicts", "*", "*", "pem-grader.yaml")); len(vs) != 3 {
			t.Errorf("%s: %d grader verdicts, want 3", d, len(vs))
		}
	}
	// A second run into the same --keep would not start cold: refused.
	code, _, errs = runPem(t, "bench", "--rounds", "1", "--only", "stars", "--out", out, "--keep", keep)
	if code != exitUsage || !strings.Contains(errs, "already exists") {
		t.Errorf("reused --keep: exit %d\n%s", code, errs)
	}
}

// TestBenchFlagErrors: bad flags and bad task files are usage errors that
// say what to fix, and nothing is written.
func TestBenchFlagErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.yaml", "- task: What command installs Flask?\n  expected: pip install Flask\n")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--rounds", "0"}, "--rounds must be at least 1"},
		{[]string{"--site", "http://127.0.0.1:1/"}, "--site needs --tasks FILE"},
		{[]string{"--site", "ftp://x/", "--tasks", good}, "want an http(s) URL"},
		{[]string{"--tasks", filepath.Join(dir, "missing.yaml")}, "--tasks: open"},
		{[]string{"--tasks", good}, "no url: give the task a url, or give --site URL"},
		{[]string{"--site", "http://127.0.0.1:1/", "--tasks", write("nograde.yaml", "- task: x\n")}, "task 1: no grading: give expected"},
		{[]string{"--site", "http://127.0.0.1:1/", "--tasks", write("both.jsonl", `{"task":"x","expected":"a","regex":"b"}`+"\n")}, "not both"},
		{[]string{"--site", "http://127.0.0.1:1/", "--tasks", write("badre.jsonl", `{"task":"x","regex":"("}`+"\n")}, "regex \"(\""},
		{[]string{"--site", "http://127.0.0.1:1/", "--tasks", write("unknown.yaml", "- task: x\n  expected: y\n  colour: red\n")}, "colour"},
		{[]string{"--site", "http://127.0.0.1:1/", "--tasks", write("dup.yaml", "- {id: a, task: x, expected: y}\n- {id: a, task: z, expected: y}\n")}, "task 2: id \"a\""},
		{[]string{"--site", "http://127.0.0.1:1/", "--tasks", write("empty.yaml", "")}, "no tasks"},
		{[]string{"--site", "http://127.0.0.1:1/", "--tasks", good, "--only", "nope"}, "--only: no task \"nope\""},
		{[]string{"--only", "nope"}, "--only: no demo task"},
		{[]string{"--model", "m"}, "--planner openai"},
		{[]string{"--planner", "gpt"}, "use explore, openai or anthropic"},
	} {
		out := filepath.Join(dir, "out")
		keep := filepath.Join(dir, "keep")
		args := append([]string{"bench", "--out", out, "--keep", keep}, c.args...)
		code, stdout, errs := runPem(t, args...)
		if code != exitUsage || !strings.Contains(errs, c.want) || !strings.HasPrefix(errs, "pem: ") {
			t.Errorf("%v: exit %d, stderr %q, want %q", c.args, code, errs, c.want)
		}
		for _, p := range []string{out, keep} {
			if _, err := os.Stat(p); err == nil {
				t.Errorf("%v: %s was written", c.args, p)
			}
		}
		if stdout != "" {
			t.Errorf("%v: stdout %q", c.args, stdout)
		}
	}
	if code, _, errs := runPem(t, "demo", "--round", "2"); code != exitUsage || !strings.Contains(errs, "add --serve ADDR") {
		t.Errorf("demo --round without --serve: exit %d %s", code, errs)
	}
	if code, _, errs := runPem(t, "demo", "--serve", "nonsense"); code != exitUsage || !strings.Contains(errs, "want host:port") {
		t.Errorf("demo --serve nonsense: exit %d %s", code, errs)
	}
}

// syncBuffer is a bytes.Buffer safe to read while pem writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestDemoServe: pem demo --serve serves the round and variant asked for
// until interrupted, and prints its URL and the round's tasks.
func TestDemoServe(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb syncBuffer
	done := make(chan int)
	go func() {
		done <- run(ctx, []string{"pem", "demo", "--serve", "127.0.0.1:0", "--round", "3", "--variant", "drift", "--json"}, strings.NewReader(""), &out, &errb)
	}()
	var v struct {
		URL   string `json:"url"`
		Round int    `json:"round"`
		Tasks []struct {
			ID, Task, URL, Expected string
		} `json:"tasks"`
	}
	for i := 0; i < 200 && json.Unmarshal([]byte(out.String()), &v) != nil; i++ {
		time.Sleep(20 * time.Millisecond)
	}
	if v.URL == "" || v.Round != 3 || len(v.Tasks) != len(demosite.Tasks("http://x", 3, demosite.Drift)) {
		cancel()
		t.Fatalf("output %q (stderr %q)", out.String(), errb.String())
	}
	res, err := http.Get(v.URL + "acme/widgets")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	stars := demosite.Tasks(v.URL, 3, demosite.Drift)[0]
	if !strings.Contains(string(body), stars.Expected+"</strong> stars") || !strings.Contains(string(body), `id="`+demosite.Rename("repo-sidebar", true)+`"`) {
		t.Errorf("the served page is not round 3's drift markup:\n%s", body)
	}
	if v.Tasks[0].Expected != stars.Expected {
		t.Errorf("printed task %+v, want expected %q", v.Tasks[0], stars.Expected)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("interrupted --serve: exit %d, %s", code, errb.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("pem demo --serve did not stop when interrupted")
	}
	if _, err := http.Get(v.URL); err == nil {
		t.Error("the demo site still answers after the interrupt")
	}
}
