package agent_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/pemdev/pem/agent"
	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store/storetest"
)

// What a P1 replay waits for, in real Chromium: a replayed wait ends when
// the answer has replaced a placeholder (and only then), and the replay
// goes straight to the last page the route reached through links.

// lateCount serves a home page linking to /count, where the count appears
// 700 ms after the load in place of placeholder; hits counts the requests
// of each path. 700 ms, not less: the replayed wait can tell that the
// answer appeared only if its first read comes before it (on a loaded
// machine the navigation's settle took over 300 ms), and it must come
// before the wait's 1 s budget ends, counted from that first read.
func lateCount(placeholder string, hits map[string]*atomic.Int32) http.Handler {
	return htmlSite("Project", func(path string) string {
		if c := hits[path]; c != nil {
			c.Add(1)
		}
		switch path {
		case "/":
			return `<h1>Project</h1><p><a id="count-link" href="/count">Contributors</a></p>`
		case "/count":
			return `<h1>Contributors</h1><dl><dt>Contributors</dt><dd id="n">` + placeholder + `</dd></dl>
<script>setTimeout(function () { document.getElementById("n").textContent = "58" }, 700)</script>`
		}
		return ""
	})
}

// htmlSite serves, uncached, each path's body (page(path)) in a page titled
// title; a path whose body is "" is not found.
func htmlSite(title string, page func(path string) string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := page(r.URL.Path)
		if body == "" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		fmt.Fprintf(w, "<!doctype html><html><head><title>%s</title></head><body><main>%s</main></body></html>", title, body)
	})
}

// p1Engine is a memory whose entry for intent on base+path is verified
// with route, with enough successful evidence from two sessions to replay
// at P1.
func p1Engine(t *testing.T, base, path, intent string, route []engine.Step) (*engine.Engine, *storetest.MemStore) {
	t.Helper()
	ctx := context.Background()
	st := storetest.NewMemStore()
	c := engine.DefaultConfig()
	c.Policy.FirstSuccessConfidence, c.Policy.P2Sessions = 0.65, 1
	st.SetConfig(c)
	eng := &engine.Engine{Store: st, Writer: "test"}
	for i := 0; i < 6; i++ {
		in := &engine.TraceInput{Steps: []engine.StepInput{{Action: "navigate", URL: base + path}}}
		if _, err := eng.Save(ctx, engine.SaveRequest{URL: base + path, Trace: in, Intent: intent, Session: fmt.Sprintf("s%d", i%2)}); err != nil {
			t.Fatal(err)
		}
	}
	f := &engine.Facts{Format: engine.Format, Domain: "127.0.0.1", Intent: intent, IntentKey: engine.IntentKey(intent),
		Status: engine.Verified, URLPatterns: []string{path}, Steps: route}
	if _, err := st.PutFacts(ctx, f); err != nil {
		t.Fatal(err)
	}
	return eng, st
}

func TestP1ReplayedWaitEndsWhenTheAnswerReplacesThePlaceholder(t *testing.T) {
	const task = "How many contributors does the project have?"
	for _, c := range []struct {
		name, placeholder string
		early             bool // the wait may end before its full time
	}{
		{"text placeholder", "Loading…", true},
		// "0" is a number too: the replay cannot tell it from the answer,
		// so it waits the full time and reads 58, never 0.
		{"number placeholder", "0", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			hits := map[string]*atomic.Int32{"/": {}, "/count": {}}
			srv := httptest.NewServer(lateCount(c.placeholder, hits))
			t.Cleanup(srv.Close)
			route := []engine.Step{
				{Seq: 1, Action: "navigate", URL: srv.URL + "/", OK: true},
				{Seq: 2, Action: "click", Selector: "#count-link", URL: srv.URL + "/count", OK: true,
					Target: &engine.Fingerprint{Tag: "a", Role: "link", Name: "Contributors"}},
				{Seq: 3, Action: "wait", URL: srv.URL + "/count", OK: true},
				{Seq: 4, Action: "extract", Value: "Contributors", URL: srv.URL + "/count", OK: true, Result: "41"},
			}
			eng, st := p1Engine(t, srv.URL, "/", task, route)
			page, err := browser.NewPage(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { page.Close() })
			res, err := agent.Run(t.Context(), agent.RunConfig{Engine: eng, Page: page, Task: task, StartURL: srv.URL + "/"})
			if err != nil {
				t.Fatal(err)
			}
			log := strings.Join(res.ActionLog, "\n")
			if res.Tier != engine.P1 || res.PlannerCalls != 0 || res.HandedOver || !res.Success || res.Answer != "58" {
				t.Fatalf("tier %s planner calls %d handed over %v success %v answer %q\n%s", res.Tier, res.PlannerCalls, res.HandedOver, res.Success, res.Answer, log)
			}
			// Straight to the answer page: the link on the home page is not
			// followed, and the home page is not loaded.
			if res.Clicks != 0 || hits["/"].Load() != 0 || hits["/count"].Load() != 1 {
				t.Fatalf("clicks %d, requests / %d, /count %d: want 0, 0, 1\n%s", res.Clicks, hits["/"].Load(), hits["/count"].Load(), log)
			}
			trs := st.Traces()
			tr := trs[len(trs)-1]
			var wait *engine.Step
			for i := range tr.Steps {
				if tr.Steps[i].Action == "wait" {
					wait = &tr.Steps[i]
				}
			}
			if wait == nil || !wait.OK {
				t.Fatalf("no successful wait step in the trace: %+v", tr.Steps)
			}
			if got := strings.Contains(wait.Result, "until the answer appeared"); got != c.early {
				t.Fatalf("wait step %q: ended early %v, want %v", wait.Result, got, c.early)
			}
		})
	}
}

// readingTab is a real Chromium tab behind a wrapper that overrides some
// of agent.Page's methods: it passes the adapter's Describer and Reader
// methods on, which embedding the interface alone would hide.
type readingTab struct{ agent.Page }

func (p readingTab) Describe(ctx context.Context, sel string) (agent.Element, bool, error) {
	return p.Page.(agent.Describer).Describe(ctx, sel)
}

func (p readingTab) Blocks(ctx context.Context) ([]agent.Block, error) {
	return p.Page.(agent.Reader).Blocks(ctx)
}

func (p readingTab) StatusCode(ctx context.Context) int {
	return p.Page.(agent.Reader).StatusCode(ctx)
}

// countingPage is a real Chromium tab that counts the replay's element
// checks.
type countingPage struct {
	readingTab
	exists, describes atomic.Int32
}

func (p *countingPage) Exists(ctx context.Context, sel string) (bool, error) {
	p.exists.Add(1)
	return p.Page.Exists(ctx, sel)
}

func (p *countingPage) Describe(ctx context.Context, sel string) (agent.Element, bool, error) {
	p.describes.Add(1)
	return p.Page.(agent.Describer).Describe(ctx, sel)
}

// A replayed click checks its element once: one description answers
// existence and the fingerprint, and the step's record reuses it; a
// control that is no longer the recorded one still hands over.
func TestP1ClickChecksItsTargetInOneLookup(t *testing.T) {
	const task = "What is the status of the first order?"
	var renamed atomic.Bool
	srv := httptest.NewServer(htmlSite("Shop", func(path string) string {
		switch path {
		case "/orders":
			name := "Order 7"
			if renamed.Load() {
				name = "Delete all orders"
			}
			return `<h1>Orders</h1><p><a id="first" href="/orders/7">` + name + `</a></p><p><a href="/orders/6">Order 6</a></p>`
		case "/orders/7":
			return `<h1>Order 7</h1><dl><dt>Status</dt><dd>shipped</dd></dl>`
		case "/orders/6":
			return `<h1>Order 6</h1><dl><dt>Status</dt><dd>pending</dd></dl>`
		}
		return ""
	}))
	t.Cleanup(srv.Close)
	route := []engine.Step{
		{Seq: 1, Action: "navigate", URL: srv.URL + "/orders", OK: true},
		{Seq: 2, Action: "click", Selector: "#first", URL: srv.URL + "/orders/7", OK: true,
			Target: &engine.Fingerprint{Tag: "a", Role: "link", Name: "Order 7"}},
		{Seq: 3, Action: "extract", Value: "Status", URL: srv.URL + "/orders/7", OK: true},
	}
	tab, err := browser.NewPage(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tab.Close() })
	page := &countingPage{readingTab: readingTab{tab}}
	run := func(eng *engine.Engine, p agent.Planner) *agent.RunResult {
		t.Helper()
		page.exists.Store(0)
		page.describes.Store(0)
		res, err := agent.Run(t.Context(), agent.RunConfig{Engine: eng, Page: page, Planner: p, Task: task, StartURL: srv.URL + "/orders"})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	eng, st := p1Engine(t, srv.URL, "/orders", task, route)
	res := run(eng, nil)
	if res.Tier != engine.P1 || !res.Success || res.Answer != "shipped" || res.Clicks != 1 {
		t.Fatalf("tier %s success %v answer %q clicks %d\n%s", res.Tier, res.Success, res.Answer, res.Clicks, strings.Join(res.ActionLog, "\n"))
	}
	if e, d := page.exists.Load(), page.describes.Load(); e != 0 || d != 1 {
		t.Fatalf("the click's element was checked with %d Exists and %d Describe calls, want 0 and 1", e, d)
	}
	trs := st.Traces()
	if got := trs[len(trs)-1].Steps[1].Target; got == nil || got.Name != "Order 7" {
		t.Fatalf("the click's recorded target %+v, want the described link", got)
	}

	renamed.Store(true) // #first now finds another control: drift, and the planner takes over
	eng, _ = p1Engine(t, srv.URL, "/orders", task, route)
	res = run(eng, agent.NewExplore())
	if res.Tier != engine.P1 || !res.HandedOver || res.PlannerCalls == 0 {
		t.Fatalf("renamed control: tier %s handed over %v planner calls %d\n%s", res.Tier, res.HandedOver, res.PlannerCalls, strings.Join(res.ActionLog, "\n"))
	}
	drift := false
	for _, f := range res.Recovered {
		drift = drift || f.Category == engine.SelectorDrift
	}
	if !drift || page.exists.Load() != 0 {
		t.Fatalf("recovered %+v (want selector drift), Exists calls %d\n%s", res.Recovered, page.exists.Load(), strings.Join(res.ActionLog, "\n"))
	}
}

// countingBrowser counts the tabs a run opens and closes.
type countingBrowser struct {
	agent.Browser
	opened, closed atomic.Int32
}

type closeCounted struct {
	agent.Page
	b *countingBrowser
}

func (p closeCounted) Close() error { p.b.closed.Add(1); return p.Page.Close() }

func (b *countingBrowser) NewPage(ctx context.Context) (agent.Page, error) {
	p, err := b.Browser.NewPage(ctx)
	if err != nil {
		return nil, err
	}
	b.opened.Add(1)
	return closeCounted{p, b}, nil
}

// A task file run one at a time opens one tab and reuses it; each run
// still loads its start page and reads its own answer.
func TestRunAllReusesATab(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := map[string]string{"/a": "11", "/b": "22", "/c": "33"}[r.URL.Path]
		if v == "" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintf(w, `<!doctype html><html><head><title>Project</title></head><body><main><h1>Project</h1><dl><dt>Stars</dt><dd>%s</dd></dl></main></body></html>`, v)
	}))
	t.Cleanup(srv.Close)
	br := &countingBrowser{Browser: browser}
	var jobs []*agent.Job
	for _, p := range []string{"/a", "/b", "/c"} {
		jobs = append(jobs, &agent.Job{Config: agent.RunConfig{Engine: &engine.Engine{Store: storetest.NewMemStore(), Writer: "test"},
			Browser: br, Planner: agent.NewExplore(), Task: "How many stars does the project have?", StartURL: srv.URL + p}})
	}
	agent.RunAll(t.Context(), jobs, 1)
	for i, want := range []string{"11", "22", "33"} {
		if j := jobs[i]; j.Err != nil || !j.Result.Success || j.Result.Answer != want {
			t.Fatalf("job %d: err %v answer %q, want %q", i, j.Err, j.Result.Answer, want)
		}
	}
	if o, c := br.opened.Load(), br.closed.Load(); o != 1 || c != 1 {
		t.Fatalf("opened %d tabs, closed %d: want one tab, reused and closed at the end", o, c)
	}
}

// atLoadPage is a real Chromium tab that records, for each navigation and
// click, whether the replay asked for the page it loads at its load event
// (agent.SettleAtLoad).
type atLoadPage struct {
	readingTab
	mu    sync.Mutex
	marks []string
}

func (p *atLoadPage) note(what string, ctx context.Context) {
	p.mu.Lock()
	p.marks = append(p.marks, fmt.Sprintf("%s %v", what, agent.SettlesAtLoad(ctx)))
	p.mu.Unlock()
}

func (p *atLoadPage) Navigate(ctx context.Context, u string) error {
	p.note("navigate", ctx)
	return p.Page.Navigate(ctx, u)
}

func (p *atLoadPage) Click(ctx context.Context, sel string) error {
	p.note("click "+sel, ctx)
	return p.Page.Click(ctx, sel)
}

// A P1 replay takes a page whose next step is a click on a recorded link at
// its load event, and every other page (the one the answer is read on)
// after the quiet window; a link that the page names only after its load
// (a timer) is looked at again once the page has settled, so the replay
// neither hands over nor clicks it unchecked; a link that is another one
// for good still hands over.
func TestP1TakesPagesBeforeALinkClickAtLoad(t *testing.T) {
	const task = "What is the status of the checks of the first order?"
	var mode atomic.Int32 // 0: static, 1: the link named after the load, 2: another link
	srv := httptest.NewServer(htmlSite("Shop", func(path string) string {
		switch path {
		case "/orders":
			switch mode.Load() {
			case 0:
				return `<h1>Orders</h1><p><a id="first" href="/orders/7">Order 7</a></p>`
			case 1:
				return `<h1>Orders</h1><p><a id="first" href="/orders/7">Loading…</a></p>
<script>addEventListener("load", () => setTimeout(() => { document.getElementById("first").textContent = "Order 7" }, 30))</script>`
			default:
				return `<h1>Orders</h1><p><a id="first" href="/orders/7">Delete all orders</a></p>`
			}
		case "/orders/7":
			return `<h1>Order 7</h1><p><a id="checks" href="/orders/7/checks">Checks</a></p>`
		case "/orders/7/checks":
			return `<h1>Checks of order 7</h1><dl><dt>Status</dt><dd>passing</dd></dl>`
		}
		return ""
	}))
	t.Cleanup(srv.Close)
	route := []engine.Step{
		{Seq: 1, Action: "navigate", URL: srv.URL + "/orders", OK: true},
		{Seq: 2, Action: "click", Selector: "#first", URL: srv.URL + "/orders/7", OK: true,
			Target: &engine.Fingerprint{Tag: "a", Role: "link", Name: "Order 7"}},
		{Seq: 3, Action: "click", Selector: "#checks", URL: srv.URL + "/orders/7/checks", OK: true,
			Target: &engine.Fingerprint{Tag: "a", Role: "link", Name: "Checks"}},
		{Seq: 4, Action: "extract", Value: "Status", URL: srv.URL + "/orders/7/checks", OK: true},
	}
	tab, err := browser.NewPage(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tab.Close() })
	page := &atLoadPage{readingTab: readingTab{tab}}
	for _, c := range []struct {
		name string
		mode int32
	}{{"static link", 0}, {"link named after the load", 1}} {
		mode.Store(c.mode)
		page.marks = nil
		eng, _ := p1Engine(t, srv.URL, "/orders", task, route)
		res, err := agent.Run(t.Context(), agent.RunConfig{Engine: eng, Page: page, Task: task, StartURL: srv.URL + "/orders"})
		if err != nil {
			t.Fatal(err)
		}
		log := strings.Join(res.ActionLog, "\n")
		if res.Tier != engine.P1 || res.HandedOver || res.PlannerCalls != 0 || !res.Success || res.Answer != "passing" || res.Clicks != 2 {
			t.Fatalf("%s: tier %s handed over %v planner calls %d success %v answer %q clicks %d\n%s",
				c.name, res.Tier, res.HandedOver, res.PlannerCalls, res.Success, res.Answer, res.Clicks, log)
		}
		want := "navigate true|click #first true|click #checks false"
		if got := strings.Join(page.marks, "|"); got != want {
			t.Fatalf("%s: settle at load %s, want %s\n%s", c.name, got, want, log)
		}
	}

	mode.Store(2) // #first is another link for good: drift, and the planner takes over
	eng, _ := p1Engine(t, srv.URL, "/orders", task, route)
	res, err := agent.Run(t.Context(), agent.RunConfig{Engine: eng, Page: page, Planner: agent.NewExplore(), Task: task, StartURL: srv.URL + "/orders"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Tier != engine.P1 || !res.HandedOver {
		t.Fatalf("another link: tier %s handed over %v answer %q\n%s", res.Tier, res.HandedOver, res.Answer, strings.Join(res.ActionLog, "\n"))
	}
}
