package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pemdev/pem/agent/demosite"
	"github.com/pemdev/pem/agent/llm"
	"github.com/pemdev/pem/agent/rod"
	"github.com/pemdev/pem/consolidate"
	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store"
	"github.com/pemdev/pem/store/gitrepo"
)

// The bench end to end, in real headless Chromium against sites served on
// 127.0.0.1: one browser for the package (TestMain).

var browser *rod.Browser

func TestMain(m *testing.M) {
	if _, err := rod.Bin(rod.Options{}); err != nil {
		fmt.Fprintf(os.Stderr, "install chromium: apt-get install chromium (%v)\n", err)
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	b, err := rod.Launch(ctx, rod.Options{})
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "install chromium: apt-get install chromium (launch: %v)\n", err)
		os.Exit(1)
	}
	browser = b
	code := m.Run()
	b.Close()
	os.Exit(code)
}

// arm is a real knowledge tree (git repository) in a temporary directory.
func arm(t testing.TB, name string) (Arm, string) {
	t.Helper()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), name)
	if _, err := store.Init(ctx, dir); err != nil {
		t.Fatal(err)
	}
	if err := gitrepo.Init(ctx, dir); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	eng := &engine.Engine{Store: st, Writer: "bench-test", Secrets: map[string]string{"demo_password": demosite.DemoPassword}}
	return Arm{Engine: eng, Consolidate: func(ctx context.Context) error {
		_, err := consolidate.Run(ctx, st, consolidate.Options{})
		return err
	}}, dir
}

func verdicts(t *testing.T, dir string) map[string]int {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "verdicts", "*", "*", "pem-grader.yaml"))
	out := map[string]int{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case strings.Contains(string(data), "verdict: right"):
			out["right"]++
		case strings.Contains(string(data), "verdict: wrong"):
			out["wrong"]++
		}
	}
	return out
}

func find(runs []Run, task string, round int, memory string) Run {
	for _, r := range runs {
		if r.Task == task && r.Round == round && r.Memory == memory {
			return r
		}
	}
	return Run{}
}

// TestBenchExploreTraps: the harder demo tasks with the offline planner,
// memory on vs off over two rounds. Cold, the misleading links make
// explore wander; warm, memory's route (detours dropped) leads straight
// to the answer; nothing memory-on does is worse than memory-off.
func TestBenchExploreTraps(t *testing.T) {
	ctx := context.Background()
	h, err := Start(ctx, browser, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	on, onDir := arm(t, "on")
	off, offDir := arm(t, "off")
	ids := "security-contact,release-downloads,wiki-go-version,contributors"
	runs, err := h.Bench(ctx, on, off, BenchOptions{Rounds: 2, Only: ids})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 16 {
		t.Fatalf("%d runs, want 16", len(runs))
	}
	for _, r := range runs {
		if !r.Success || r.Stale || r.Harm {
			t.Errorf("round %d memory %s %s: success %v stale %v harm %v answer %q want %q: %s", r.Round, r.Memory, r.Task, r.Success, r.Stale, r.Harm, r.Answer, r.Expected, r.Error)
		}
		if r.Planner != "explore" || r.Site != h.Base {
			t.Errorf("%s: planner %q site %q", r.Task, r.Planner, r.Site)
		}
	}
	for _, id := range strings.Split(ids, ",") {
		warm, offWarm := find(runs, id, 2, "on"), find(runs, id, 2, "off")
		if warm.Tier != engine.P3 || !contains(warm.Recalled, "route") || len(offWarm.Recalled) != 0 {
			t.Errorf("%s round 2: tier %s recalled %v (off: %v), want P3 with the route", id, warm.Tier, warm.Recalled, offWarm.Recalled)
		}
		if warm.Steps > offWarm.Steps || warm.Clicks > offWarm.Clicks {
			t.Errorf("%s round 2: memory-on %d steps %d clicks, memory-off %d steps %d clicks", id, warm.Steps, warm.Clicks, offWarm.Steps, offWarm.Clicks)
		}
	}
	// The traps that mislead explore cold: memory's route skips the detour.
	for _, id := range []string{"security-contact", "release-downloads"} {
		cold, warm := find(runs, id, 1, "on"), find(runs, id, 2, "on")
		if warm.Steps >= cold.Steps || warm.Searches != 0 || cold.Searches == 0 {
			t.Errorf("%s: cold %d steps %d searches, warm %d steps %d searches: memory did not skip the detour", id, cold.Steps, cold.Searches, warm.Steps, warm.Searches)
		}
	}
	// The overlay: cold, a click was covered and the overlay dismissed; warm, the
	// route dismisses it first, with no failed click.
	if c, w := find(runs, "wiki-go-version", 1, "on"), find(runs, "wiki-go-version", 2, "on"); w.Steps != c.Steps-1 {
		t.Errorf("wiki: cold %d steps, warm %d: want one covered click fewer", c.Steps, w.Steps)
	}
	// The graders' verdicts reached both trees, one per run that claimed success.
	if v := verdicts(t, onDir); v["right"] != 8 || v["wrong"] != 0 {
		t.Errorf("memory-on verdicts %v, want 8 right", v)
	}
	if v := verdicts(t, offDir); v["right"] != 8 {
		t.Errorf("memory-off verdicts %v, want 8 right", v)
	}
	md, _ := Summary(runs, Info{Planner: "explore", Site: "demo site", Rounds: 2})
	if !strings.Contains(string(md), "## Harm (0)") {
		t.Errorf("summary:\n%s", md)
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// fakeModel is an OpenAI-compatible chat completions server: on the demo's
// repository page it calls click on the stars counter's neighbour (the
// repository name, which stays on the page), then extract on the stars
// label, then done with the value the extraction returned; every reply
// carries usage fields.
type fakeModel struct {
	mu      sync.Mutex
	calls   int
	in, out int
	memory  int // prompts that held a Memory section
}

var clickedRe = regexp.MustCompile(`(?m)^\d+\. click "#repo-name"`)

var extractedRe = regexp.MustCompile(`\d+\. extract → result:\n(\d[\d,]*)`)

func (f *fakeModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
		Tools []any `json:"tools"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || r.URL.Path != "/v1/chat/completions" || len(req.Tools) == 0 {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	var prompt string
	for _, m := range req.Messages {
		if s, ok := m.Content.(string); ok && m.Role == "user" {
			prompt = s
		}
	}
	f.mu.Lock()
	f.calls++
	in, out := len(prompt)/4, 20+f.calls%3
	f.in, f.out = f.in+in, f.out+out
	if strings.Contains(prompt, "## Memory") {
		f.memory++
	}
	f.mu.Unlock()
	name, args := "click", `{"selector":"#repo-name"}`
	switch {
	case extractedRe.MatchString(prompt):
		name, args = "done", fmt.Sprintf(`{"answer":%q}`, extractedRe.FindStringSubmatch(prompt)[1])
	case clickedRe.MatchString(prompt):
		name, args = "extract", `{"label":"stars"}`
	}
	resp := map[string]any{
		"choices": []any{map[string]any{"finish_reason": "tool_calls", "message": map[string]any{"role": "assistant", "content": nil,
			"tool_calls": []any{map[string]any{"id": fmt.Sprintf("call_%d", f.calls), "type": "function", "function": map[string]any{"name": name, "arguments": args}}}}}},
		"usage": map[string]any{"prompt_tokens": in, "completion_tokens": out, "total_tokens": in + out},
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(resp)
}

// TestBenchOpenAIPlanner: the bench with an OpenAI-compatible model on
// 127.0.0.1: its tool calls are followed, its usage fields are counted per
// run, and memory-on's warm round shows it the Memory section.
func TestBenchOpenAIPlanner(t *testing.T) {
	ctx := context.Background()
	fake := &fakeModel{}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	p, err := llm.NewOpenAI(llm.Config{BaseURL: srv.URL + "/v1", Model: "fake-1", APIKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	h, err := Start(ctx, browser, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	h.Planner = p
	on, _ := arm(t, "on")
	off, _ := arm(t, "off")
	runs, err := h.Bench(ctx, on, off, BenchOptions{Rounds: 2, Only: "stars"})
	if err != nil {
		t.Fatal(err)
	}
	in, out, calls := 0, 0, 0
	for _, r := range runs {
		if !r.Success || r.Planner != "openai" {
			t.Errorf("round %d memory %s: success %v planner %q answer %q want %q: %s", r.Round, r.Memory, r.Success, r.Planner, r.Answer, r.Expected, r.Error)
		}
		// navigate, click, extract: every tool call was carried out.
		if r.PlannerCalls > 0 && (r.Clicks != 1 || r.Extracts != 1 || r.Steps != 3) {
			t.Errorf("round %d memory %s: %d steps %d clicks %d extracts, want 3, 1, 1", r.Round, r.Memory, r.Steps, r.Clicks, r.Extracts)
		}
		if r.PlannerCalls > 0 && (r.InputTokens == 0 || r.OutputTokens == 0) {
			t.Errorf("round %d memory %s: no tokens counted (%d/%d)", r.Round, r.Memory, r.InputTokens, r.OutputTokens)
		}
		in, out, calls = in+r.InputTokens, out+r.OutputTokens, calls+r.PlannerCalls
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if calls != fake.calls || in != fake.in || out != fake.out {
		t.Errorf("runs counted %d calls %d/%d tokens; the server answered %d calls with %d/%d", calls, in, out, fake.calls, fake.in, fake.out)
	}
	if w := find(runs, "stars", 2, "on"); w.Tier != engine.P3 || fake.memory != w.PlannerCalls || fake.memory == 0 {
		t.Errorf("warm memory-on: tier %s, %d planner calls, %d prompts with a Memory section", w.Tier, w.PlannerCalls, fake.memory)
	}
	md, csvData := Summary(runs, Info{Planner: "openai (fake-1)", Site: "demo site", Rounds: 2})
	if !strings.Contains(string(md), "Planner: openai (fake-1).") || !strings.Contains(string(csvData), ",openai (fake-1),demo site,off,total,,,2,1.000,0,0,") {
		t.Errorf("summary:\n%s\n%s", md, csvData)
	}
}

// TestBenchUserSite: --site/--tasks on a real third-party documentation
// set served by the test: graded live by exact answer and by regular
// expression, a wrong expectation graded wrong and its verdict recorded.
func TestBenchUserSite(t *testing.T) {
	const docs = "/usr/share/doc/python-flask-doc/html"
	if _, err := os.Stat(filepath.Join(docs, "installation.html")); err != nil {
		t.Fatalf("install the Flask documentation: apt-get install python-flask-doc (%v)", err)
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(docs)))
	defer srv.Close()
	ctx := context.Background()
	tasks := []Task{
		{ID: "install", Text: "What command installs Flask?", StartURL: srv.URL + "/index.html", Expected: "pip install Flask"},
		{ID: "released", Text: "When was Flask version 2.2.1 released?", StartURL: srv.URL + "/index.html", Pattern: `2022-08-0[0-9]`},
		{ID: "wrong-expectation", Text: "What command installs Flask?", Intent: "install flask, graded against a wrong answer",
			StartURL: srv.URL + "/index.html", Expected: "pip install Django"},
	}
	if err := PrepareTasks(tasks); err != nil {
		t.Fatal(err)
	}
	h, err := Open(ctx, browser, srv.URL+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	on, onDir := arm(t, "on")
	off, _ := arm(t, "off")
	runs, err := h.Bench(ctx, on, off, BenchOptions{Rounds: 1, Tasks: tasks})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 6 {
		t.Fatalf("%d runs", len(runs))
	}
	for _, r := range runs {
		want := r.Task != "wrong-expectation"
		if r.Success != want || r.Site != srv.URL {
			t.Errorf("%s memory %s: success %v (want %v), answer %q, site %q: %s", r.Task, r.Memory, r.Success, want, r.Answer, r.Site, r.Error)
		}
		if r.Task == "wrong-expectation" && (!strings.Contains(r.Answer, "pip install") || r.Error != `wrong answer: want "pip install Django"`) {
			t.Errorf("wrong expectation: answer %q error %q", r.Answer, r.Error)
		}
		if r.Task == "released" && r.Expected != "/2022-08-0[0-9]/" {
			t.Errorf("regex task's expected column %q", r.Expected)
		}
	}
	if v := verdicts(t, onDir); v["right"] != 2 || v["wrong"] != 1 {
		t.Errorf("verdicts %v, want 2 right and 1 wrong", v)
	}
}
