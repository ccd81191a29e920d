package agent_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pemdev/pem/agent"
	"github.com/pemdev/pem/agent/demosite"
	"github.com/pemdev/pem/agent/rod"
	"github.com/pemdev/pem/consolidate"
	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store"
	"github.com/pemdev/pem/store/gitrepo"
)

// End-to-end runs on the demo site in real headless Chromium: one browser
// for the whole package (TestMain), a handful of tasks per test.

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
	if err := b.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "closing the browser:", err)
		code = 1
	}
	os.Exit(code)
}

// world is a demo site and a knowledge tree (a real git repository).
type world struct {
	site  *demosite.Site
	base  string
	dir   string
	st    *store.Store
	eng   *engine.Engine
	logs  *bytes.Buffer
	page  agent.Page // one tab for the test's sequential runs
	mu    sync.Mutex
	clock time.Time
}

func newWorld(t *testing.T, variant string) *world {
	t.Helper()
	ctx := context.Background()
	w := &world{site: demosite.New(demosite.Options{Variant: variant, Round: 1}), dir: t.TempDir(), logs: &bytes.Buffer{},
		clock: time.Now().UTC().Add(-time.Hour)}
	base, stop, err := w.site.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	w.base = base
	if _, err := store.Init(ctx, w.dir); err != nil {
		t.Fatal(err)
	}
	if err := gitrepo.Init(ctx, w.dir); err != nil {
		t.Fatal(err)
	}
	w.st, err = store.Open(w.dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.st.Close() })
	w.eng = &engine.Engine{Store: w.st, Writer: "e2e", Now: w.now}
	w.page, err = browser.NewPage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.page.Close() })
	return w
}

// now is a clock that moves 50 ms per reading from an hour ago, so that
// runs and consolidations order deterministically.
func (w *world) now() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.clock = w.clock.Add(50 * time.Millisecond)
	return w.clock
}

func (w *world) task(t *testing.T, id string) demosite.Task {
	t.Helper()
	for _, k := range demosite.Tasks(w.base, w.site.Round(), "") {
		if k.ID == id {
			return k
		}
	}
	t.Fatalf("no demo task %q", id)
	return demosite.Task{}
}

func (w *world) run(t *testing.T, id, session string) (*agent.RunResult, demosite.Task) {
	t.Helper()
	k := w.task(t, id)
	res, err := agent.Run(context.Background(), agent.RunConfig{
		Engine: w.eng, Page: w.page, Planner: agent.NewExplore(), Task: k.Text, StartURL: k.StartURL,
		Intent: "demo: " + k.ID, Secrets: k.Secrets, Session: session, Now: w.now,
		Logger: slog.New(slog.NewTextHandler(w.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatalf("%s: %v", id, err)
	}
	return res, k
}

func (w *world) consolidate(t *testing.T) {
	t.Helper()
	if _, err := consolidate.Run(context.Background(), w.st, consolidate.Options{Now: w.now}); err != nil {
		t.Fatalf("consolidate: %v", err)
	}
}

func logOf(res *agent.RunResult) string { return strings.Join(res.ActionLog, "\n") }

// TestDemoColdWarm: cold runs with explore, consolidation, warm runs that
// replay at P2 with zero planner calls and read moved values live; after
// enough sessions the entries are verified and replay at P1. The canary
// password never reaches the tree, git or the logs.
func TestDemoColdWarm(t *testing.T) {
	w := newWorld(t, demosite.Stable)
	all := []string{"stars", "search-memory", "latest-workflow", "first-pull-checks", "unread-notifications"}
	cold := map[string]*agent.RunResult{}
	prev := map[string]demosite.Task{}
	var results []*agent.RunResult
	for _, id := range all {
		res, k := w.run(t, id, "round-1")
		results = append(results, res)
		if !res.Success || !demosite.Check(k, res.Answer) || res.Tier != engine.P5 || res.PlannerCalls == 0 {
			t.Fatalf("cold %s: answer %q (want %q) success %v tier %s\n%s", id, res.Answer, k.Expected, res.Success, res.Tier, logOf(res))
		}
		cold[id], prev[id] = res, k
	}
	w.consolidate(t)

	for round := 2; round <= 6; round++ {
		w.site.SetRound(round)
		ids := all
		if round > 2 {
			ids = all[2:] // the rest climb to P1
		}
		for _, id := range ids {
			res, k := w.run(t, id, fmt.Sprintf("round-%d", round))
			results = append(results, res)
			// Round 2: one session's success is a hint (P3, the planner
			// runs with the Memory section); then P2, replayed; then P1.
			want := engine.P2
			switch round {
			case 2:
				want = engine.P3
			case 6:
				want = engine.P1
			}
			if res.Tier != want || (want != engine.P3) != (res.PlannerCalls == 0) || !res.Success || !demosite.Check(k, res.Answer) {
				t.Fatalf("round %d %s: tier %s (want %s) planner calls %d answer %q (want %q) success %v\n%s",
					round, id, res.Tier, want, res.PlannerCalls, res.Answer, k.Expected, res.Success, logOf(res))
			}
			if res.Steps > cold[id].Steps {
				t.Errorf("round %d %s: %d steps, more than cold (%d)", round, id, res.Steps, cold[id].Steps)
			}
			if k.Volatile && k.Expected != prev[id].Expected && demosite.Check(prev[id], res.Answer) {
				t.Errorf("round %d %s answered last round's value %q: %q", round, id, prev[id].Expected, res.Answer)
			}
			prev[id] = k
		}
		w.consolidate(t)
	}
	// P1 went straight to the page it reads from where it could: the
	// latest-workflow route is the results of the round-6 batch's first.
	if p1 := results[len(results)-3]; p1.Steps >= cold["latest-workflow"].Steps {
		t.Errorf("P1 latest-workflow took %d steps, cold %d\n%s", p1.Steps, cold["latest-workflow"].Steps, logOf(p1))
	}
	assertNoCanary(t, w, results)
}

// assertNoCanary: zero hits of the demo password in the tree's files, every
// git object, the logs and the run results.
func assertNoCanary(t *testing.T, w *world, results []*agent.RunResult) {
	t.Helper()
	canary := []byte(demosite.DemoPassword)
	files := 0
	err := filepath.WalkDir(w.dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		files++
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.Contains(data, canary) {
			t.Errorf("the canary secret is in %s", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("git", "cat-file", "--batch-all-objects", "--batch")
	cmd.Dir = w.dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git cat-file: %v", err)
	}
	if len(out) < 1000 || files < 10 {
		t.Fatalf("suspiciously little to scan: %d bytes of git objects, %d files", len(out), files)
	}
	if bytes.Contains(out, canary) {
		t.Error("the canary secret is in a git object")
	}
	// Loose objects are zlib-compressed: the batch output above is their
	// content. The trace of the sign-in task must record the placeholder.
	if !bytes.Contains(out, []byte("{{secret:demo_password}}")) {
		t.Error("no trace records the password as its placeholder")
	}
	if bytes.Contains(w.logs.Bytes(), canary) {
		t.Error("the canary secret is in the logs")
	}
	for _, r := range results {
		if strings.Contains(fmt.Sprintf("%+v", *r), demosite.DemoPassword) {
			t.Error("the canary secret is in a run result")
		}
	}
}

// TestDemoDrift: the drift variant renames ids and classes; P2 verification
// catches the renamed selector before using it, the planner recovers, the
// run succeeds and the miss is recorded as selector_drift.
func TestDemoDrift(t *testing.T) {
	w := newWorld(t, demosite.Stable)
	res, k := w.run(t, "first-pull-checks", "round-1")
	if !res.Success || !demosite.Check(k, res.Answer) {
		t.Fatalf("cold: %q\n%s", res.Answer, logOf(res))
	}
	w.consolidate(t)
	// A second session's success earns P2 (the first is a hint, P3).
	w.site.SetRound(2)
	if res, k = w.run(t, "first-pull-checks", "round-2"); res.Tier != engine.P3 || !res.Success || !demosite.Check(k, res.Answer) {
		t.Fatalf("round 2: tier %s answer %q\n%s", res.Tier, res.Answer, logOf(res))
	}
	w.consolidate(t)
	w.site.SetVariant(demosite.Drift)
	w.site.SetRound(3)
	res, k = w.run(t, "first-pull-checks", "round-3")
	if res.Tier != engine.P2 || !res.HandedOver || res.PlannerCalls == 0 || !res.Success || !demosite.Check(k, res.Answer) {
		t.Fatalf("drift: tier %s handed over %v planner calls %d answer %q (want %q)\n%s", res.Tier, res.HandedOver, res.PlannerCalls, res.Answer, k.Expected, logOf(res))
	}
	if len(res.Recovered) == 0 || res.Recovered[0].Category != engine.SelectorDrift || res.Recovered[0].Kind != engine.KindNoElement {
		t.Fatalf("recovered: %+v", res.Recovered)
	}
	ref := engine.TraceRef{}
	refs, err := w.st.TraceRefs(context.Background(), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range refs {
		if r.ID == res.TraceID {
			ref = r
		}
	}
	tr, err := w.st.Trace(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	miss := false
	for _, s := range tr.Steps {
		if !s.OK && s.ErrorKind == engine.KindNoElement && s.Selector == res.Recovered[0].Selector {
			miss = true
		}
	}
	if !miss || tr.Outcome != engine.Success {
		t.Fatalf("the stored trace does not record the drift: outcome %s steps %+v", tr.Outcome, tr.Steps)
	}
}

// bookshop is a small site the explore planner has never seen: other words,
// other markup (tables with th/td, a sidebar menu, a form that posts).
func bookshop(password string) http.Handler {
	page := func(title, body string) string {
		return `<!doctype html><html><head><meta charset="utf-8"><title>` + title + `</title></head><body>
<div class="menu"><a href="/">Paper &amp; Ink</a> | <a href="/shelf">Catalogue</a> | <a href="/visit">Opening hours</a> | <a href="/account">Log in</a></div>
<div class="content">` + body + `</div></body></html>`
	}
	books := []struct{ isbn, title, author, price string }{
		{"9780441013593", "Dune", "Frank Herbert", "€9.99"},
		{"9780141439587", "Emma", "Jane Austen", "€7.50"},
		{"9780553293357", "Foundation", "Isaac Asimov", "€8.25"},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, page("Paper & Ink", `<h1>Welcome</h1><p>An independent bookshop.</p>`))
	})
	mux.HandleFunc("/shelf", func(w http.ResponseWriter, r *http.Request) {
		var b strings.Builder
		b.WriteString(`<form action="/shelf/find"><input name="s" placeholder="Find a book"><button>Go</button></form><ol>`)
		for _, bk := range books {
			fmt.Fprintf(&b, `<li><a href="/shelf/%s">%s</a> by %s</li>`, bk.isbn, bk.title, bk.author)
		}
		b.WriteString(`</ol>`)
		fmt.Fprint(w, page("Catalogue", b.String()))
	})
	for _, bk := range books {
		bk := bk
		mux.HandleFunc("/shelf/"+bk.isbn, func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, page(bk.title, `<h1>`+bk.title+`</h1><table><tr><th>Author</th><td>`+bk.author+`</td></tr><tr><th>Price</th><td>`+bk.price+`</td></tr></table>`))
		})
	}
	mux.HandleFunc("/shelf/find", func(w http.ResponseWriter, r *http.Request) {
		q := strings.ToLower(r.URL.Query().Get("s"))
		n := 0
		for _, bk := range books {
			if strings.Contains(strings.ToLower(bk.title), q) {
				n++
			}
		}
		fmt.Fprint(w, page("Results", fmt.Sprintf(`<p>Books found: <b>%d</b></p>`, n)))
	})
	mux.HandleFunc("/visit", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, page("Visit us", `<dl><dt>Weekdays</dt><dd>09:00–18:00</dd><dt>Saturday</dt><dd>10:00–16:00</dd></dl>`))
	})
	mux.HandleFunc("/account", func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			r.ParseForm()
			if r.PostForm.Get("email") == "reader@example.com" && r.PostForm.Get("pass") == password {
				fmt.Fprint(w, page("Your account", `<p>Welcome back.</p><p>Loyalty points: <span>120</span></p>`))
				return
			}
			fmt.Fprint(w, page("Log in", `<p>Wrong e-mail or password.</p>`))
			return
		}
		fmt.Fprint(w, page("Log in", `<form method="post" action="/account"><input type="email" name="email" placeholder="you@example.com"><input type="password" name="pass"><button>Log in</button></form>`))
	})
	return mux
}

func TestExploreOnAnUnseenSite(t *testing.T) {
	const pw = "shop-canary-4711"
	srv := httptest.NewServer(bookshop(pw))
	defer srv.Close()
	w := newWorld(t, demosite.Stable)
	cases := []struct{ task, answer string }{
		{"What is the price of the second book in the catalogue?", "€7.50"},
		{`Search the catalogue for "dune": how many books found?`, "1"},
		{"What are the opening hours on Saturday?", "10:00–16:00"},
		{"Log in as reader@example.com and report the loyalty points.", "120"},
	}
	run := func(task string) *agent.RunResult {
		res, err := agent.Run(context.Background(), agent.RunConfig{Engine: w.eng, Page: w.page, Planner: agent.NewExplore(),
			Task: task, StartURL: srv.URL + "/", Secrets: map[string]string{"shop_password": pw}, Now: w.now})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	for _, c := range cases {
		res := run(c.task)
		if !res.Success || res.Answer != c.answer {
			t.Errorf("%s: answer %q success %v, want %q\n%s", c.task, res.Answer, res.Success, c.answer, logOf(res))
		}
	}
	// One success is a hint (P3); a second run (its own session) earns P2.
	if again := run(cases[0].task); again.Tier != engine.P3 || again.Answer != cases[0].answer {
		t.Fatalf("second run: tier %s answer %q\n%s", again.Tier, again.Answer, logOf(again))
	}
	warm := run(cases[0].task)
	if warm.Tier != engine.P2 || warm.PlannerCalls != 0 || warm.Answer != cases[0].answer {
		t.Fatalf("warm: tier %s planner calls %d answer %q\n%s", warm.Tier, warm.PlannerCalls, warm.Answer, logOf(warm))
	}
}
