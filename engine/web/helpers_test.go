package web_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/pemdev/pem/agent/bench"
	"github.com/pemdev/pem/consolidate"
	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/engine/web"
	"github.com/pemdev/pem/store"
	"github.com/pemdev/pem/store/gitrepo"
)

var ctx = context.Background()

// tree is a knowledge tree built by a test: a real store in a real git
// repository under t.TempDir().
type tree struct {
	dir string
	st  *store.Store
	eng *engine.Engine
	ids map[string]string // name → trace id
}

func newTree(t testing.TB) *tree {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "knowledge")
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
	return &tree{dir: dir, st: st, eng: &engine.Engine{Store: st, Writer: "test"}, ids: map[string]string{}}
}

// run is a trace JSON with a navigation and a read of sel.
func run(url, sel, value string, ok bool) string {
	step := map[string]any{"action": "get_text", "selector": sel, "result": value, "ok": ok}
	outcome := "success"
	tr := map[string]any{"url": url, "steps": []any{map[string]any{"action": "navigate", "value": url}, step}, "outcome": outcome}
	if !ok {
		step["error"] = "no such element " + sel
		tr["outcome"] = "failure"
		tr["error_message"] = "no such element " + sel
	}
	b, _ := json.Marshal(tr)
	return string(b)
}

func (tr *tree) save(t testing.TB, name, url, intent, session, traceJSON, facts string) {
	t.Helper()
	in, err := engine.ParseTraceInput([]byte(traceJSON))
	if err != nil {
		t.Fatal(err)
	}
	req := engine.SaveRequest{URL: url, Trace: in, Intent: intent, Session: session}
	if facts != "" {
		if req.Facts, err = engine.ParsePatch([]byte(facts)); err != nil {
			t.Fatal(err)
		}
	}
	res, err := tr.eng.Save(ctx, req)
	if err != nil {
		t.Fatalf("save %s: %v", name, err)
	}
	tr.ids[name] = res.ID
}

func (tr *tree) judge(t testing.TB, name, verdict string) {
	t.Helper()
	if _, err := tr.eng.Feedback(ctx, engine.FeedbackRequest{Trace: tr.ids[name], Verdict: verdict, Judge: "tester"}); err != nil {
		t.Fatal(err)
	}
}

func (tr *tree) consolidate(t testing.TB) {
	t.Helper()
	if _, err := consolidate.Run(ctx, tr.st, consolidate.Options{}); err != nil {
		t.Fatal(err)
	}
}

const (
	repo = "https://example.com/acme/widgets"
	docs = "https://docs.example.org/install"
)

// sample is the tree the page tests read: on example.com, "star count"
// (three successes from three sessions, one judged right, a facts patch
// with a selector, a blocker and an anti-pattern; then a failure on a
// missing selector, not consolidated: drifting and failing) and "open
// issues" (two successes, the second judged wrong: judged wrong); on
// docs.example.org, "install command" (one success, pending: P3).
func sample(t testing.TB) *tree {
	tr := newTree(t)
	patch := `{"selectors": {"stars": {"primary": "#stars", "fallbacks": [".stars"]}},
		"known_blockers": [{"type": "cookie_banner", "selector": "#cookies", "action": "click #accept"}],
		"anti_patterns": ["#old-stars"]}`
	tr.save(t, "star1", repo, "star count", "s1", run(repo, "#stars", "42", true), patch)
	tr.save(t, "issues1", repo+"/issues", "open issues", "s1", run(repo+"/issues", "#count", "7", true), "")
	tr.consolidate(t)
	tr.save(t, "star2", repo, "star count", "s2", run(repo, "#stars", "43", true), "")
	tr.save(t, "issues2", repo+"/issues", "open issues", "s2", run(repo+"/issues", "#count", "8", true), "")
	tr.judge(t, "star1", "right")
	tr.judge(t, "issues2", "wrong")
	tr.consolidate(t)
	tr.save(t, "star3", repo, "star count", "s3", run(repo, "#stars", "44", true), "")
	tr.consolidate(t)
	tr.save(t, "star4", repo, "star count", "s4", run(repo, "#stars", "", false), "")
	tr.save(t, "install1", docs, "install command", "s1", run(docs, "pre code", "go install example.org/x@latest", true), "")
	return tr
}

// history is cmd/pem's entry history (pem log DOMAIN/KEY) in small.
func history(dir string) func(ctx context.Context, domain, key string) ([]web.Commit, error) {
	return func(ctx context.Context, domain, key string) ([]web.Commit, error) {
		paths, err := store.EntryPaths(domain + "/" + key)
		if err != nil {
			return nil, err
		}
		h, err := gitrepo.OpenHistory(dir)
		if err != nil {
			return nil, err
		}
		defer h.Close()
		log, err := h.Log(ctx, paths, 50)
		if err != nil {
			return nil, err
		}
		var out []web.Commit
		for _, e := range log {
			c := web.Commit{Hash: e.Hash, When: e.When, Subject: e.Subject}
			for _, ch := range e.Changes {
				c.Changes = append(c.Changes, ch.Path)
			}
			out = append(out, c)
		}
		return out, nil
	}
}

// benchRuns are two rounds of two tasks, memory on and off, with one harm
// row (task b, round 2).
var benchRuns = []bench.Run{
	{Task: "a", Round: 1, Memory: "on", Steps: 4, PlannerCalls: 4, Success: true, Seconds: 1, PromptChars: 900},
	{Task: "b", Round: 1, Memory: "on", Steps: 3, PlannerCalls: 3, Success: true, Seconds: 1, PromptChars: 700},
	{Task: "a", Round: 1, Memory: "off", Steps: 4, PlannerCalls: 4, Success: true, Seconds: 1, PromptChars: 900},
	{Task: "b", Round: 1, Memory: "off", Steps: 3, PlannerCalls: 3, Success: true, Seconds: 1, PromptChars: 700},
	{Task: "a", Round: 2, Memory: "on", Steps: 1, Success: true, Seconds: 0.25},
	{Task: "b", Round: 2, Memory: "on", Steps: 2, Success: false, Seconds: 0.5, Error: "stale: answered last round's value"},
	{Task: "a", Round: 2, Memory: "off", Steps: 4, PlannerCalls: 4, Success: true, Seconds: 1, PromptChars: 800},
	{Task: "b", Round: 2, Memory: "off", Steps: 3, PlannerCalls: 3, Success: true, Seconds: 1, PromptChars: 650},
}

// reports serves one bench report written from benchRuns.
func reports(t testing.TB) func(context.Context) ([]web.Report, error) {
	p := filepath.Join(t.TempDir(), "bench", "report.html")
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, bench.Report(benchRuns, bench.ReportOptions{Planner: "explore"}), 0o644); err != nil {
		t.Fatal(err)
	}
	return func(context.Context) ([]web.Report, error) {
		return []web.Report{{Name: "bench", Dir: filepath.Dir(p), Read: func() ([]byte, error) { return os.ReadFile(p) }}}, nil
	}
}

// classify stands in for cmd/pem's httpError: enough to tell the classes apart.
func classify(err error) (int, int, string) {
	switch {
	case errors.Is(err, web.ErrUnauthorized):
		return http.StatusUnauthorized, 2, err.Error()
	case errors.Is(err, engine.ErrTooLarge):
		return http.StatusRequestEntityTooLarge, 2, err.Error()
	case errors.Is(err, web.ErrWriteDisabled):
		return http.StatusForbidden, 10, err.Error()
	case errors.Is(err, engine.ErrNotFound), errors.Is(err, engine.ErrUnknownTrace):
		return http.StatusNotFound, 4, err.Error()
	case errors.Is(err, engine.ErrInvalid), errors.Is(err, engine.ErrBadTrace), errors.Is(err, engine.ErrBadURL), errors.Is(err, engine.ErrBadPatch):
		return http.StatusBadRequest, 2, err.Error()
	}
	return http.StatusInternalServerError, 1, fmt.Sprint(err)
}

// serve starts the server over tr on 127.0.0.1.
func serve(t testing.TB, tr *tree, o web.Options) *httptest.Server {
	t.Helper()
	if o.Classify == nil {
		o.Classify = classify
	}
	if o.History == nil {
		o.History = history(tr.dir)
	}
	srv := httptest.NewServer(web.New(tr.eng, o))
	t.Cleanup(srv.Close)
	return srv
}
