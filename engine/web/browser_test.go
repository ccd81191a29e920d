package web_test

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	gorod "github.com/go-rod/rod"
	"github.com/go-rod/rod/lib/proto"

	pemrod "github.com/pemdev/pem/agent/rod"
	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/engine/web"
)

// One Chromium for the test binary, launched by the first browser test
// with agent/rod's settings (headless, leakless, closed network flags).
var (
	browserOnce sync.Once
	browser     *pemrod.Browser
	browserErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if browser != nil {
		browser.Close()
	}
	os.Exit(code)
}

func chromium(t *testing.T) *gorod.Browser {
	t.Helper()
	browserOnce.Do(func() {
		if _, err := pemrod.Bin(pemrod.Options{}); err != nil {
			browserErr = fmt.Errorf("install chromium: apt-get install chromium (%v)", err)
			return
		}
		browser, browserErr = pemrod.Launch(ctx, pemrod.Options{})
	})
	if browserErr != nil {
		t.Fatal(browserErr)
	}
	return browser.Rod()
}

// watched is a tab that records console errors, uncaught exceptions, and
// every request it makes.
type watched struct {
	p        *gorod.Page
	mu       sync.Mutex
	errors   []string
	requests []string
}

func open(t *testing.T) *watched {
	t.Helper()
	p, err := chromium(t).Page(proto.TargetCreateTarget{URL: "about:blank"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	w := &watched{p: p}
	for _, enable := range []interface{ Call(proto.Client) error }{proto.RuntimeEnable{}, proto.LogEnable{}, proto.NetworkEnable{}} {
		if err := enable.Call(p); err != nil {
			t.Fatal(err)
		}
	}
	go p.EachEvent(func(e *proto.RuntimeConsoleAPICalled) {
		if e.Type == proto.RuntimeConsoleAPICalledTypeError || e.Type == proto.RuntimeConsoleAPICalledTypeAssert {
			w.add(&w.errors, fmt.Sprintf("console.%s: %v", e.Type, e.Args))
		}
	}, func(e *proto.RuntimeExceptionThrown) {
		w.add(&w.errors, "exception: "+e.ExceptionDetails.Text)
	}, func(e *proto.LogEntryAdded) {
		if e.Entry.Level == proto.LogLogEntryLevelError || e.Entry.Level == proto.LogLogEntryLevelWarning {
			w.add(&w.errors, fmt.Sprintf("log %s: %s (%s)", e.Entry.Level, e.Entry.Text, e.Entry.URL))
		}
	}, func(e *proto.NetworkRequestWillBeSent) {
		w.add(&w.requests, e.Request.URL)
	})()
	return w
}

func (w *watched) add(to *[]string, s string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	*to = append(*to, s)
}

func (w *watched) goTo(t *testing.T, u string) {
	t.Helper()
	if err := w.p.Timeout(20 * time.Second).Navigate(u); err != nil {
		t.Fatalf("navigate %s: %v", u, err)
	}
	if err := w.p.Timeout(20 * time.Second).WaitLoad(); err != nil {
		t.Fatalf("load %s: %v", u, err)
	}
}

func (w *watched) text(t *testing.T, sel string) string {
	t.Helper()
	el, err := w.p.Timeout(5 * time.Second).Element(sel)
	if err != nil {
		t.Fatalf("%s: no element %s: %v", w.p.MustInfo().URL, sel, err)
	}
	s, err := el.Text()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(s)
}

func (w *watched) attr(t *testing.T, sel, name string) string {
	t.Helper()
	el, err := w.p.Timeout(5 * time.Second).Element(sel)
	if err != nil {
		t.Fatalf("no element %s: %v", sel, err)
	}
	v, err := el.Attribute(name)
	if err != nil || v == nil {
		t.Fatalf("%s has no %s (%v)", sel, name, err)
	}
	return *v
}

func (w *watched) count(t *testing.T, sel string) int {
	t.Helper()
	els, err := w.p.Timeout(5 * time.Second).Elements(sel)
	if err != nil {
		t.Fatal(err)
	}
	return len(els)
}

// check fails on any console error and on any request to another host
// than allowed ("" allows file: and data: only).
func (w *watched) check(t *testing.T, allowedHost string) {
	t.Helper()
	time.Sleep(200 * time.Millisecond) // late events
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, e := range w.errors {
		t.Errorf("browser console: %s", e)
	}
	for _, r := range w.requests {
		u, err := url.Parse(r)
		if err != nil {
			t.Errorf("request to %q", r)
			continue
		}
		switch u.Scheme {
		case "data", "about":
			continue
		case "file":
			if allowedHost == "" {
				continue
			}
		case "http", "https":
			if u.Host == allowedHost {
				continue
			}
		}
		t.Errorf("request to %s: only %q may be asked", r, allowedHost)
	}
	if len(w.requests) == 0 && allowedHost != "" {
		t.Error("no request seen: the network watch is broken")
	}
}

// shot keeps a screenshot: in $PEM_TEST_ARTIFACTS when set, else in the test's temp dir.
func (w *watched) shot(t *testing.T, name string) {
	t.Helper()
	dir := os.Getenv("PEM_TEST_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := w.p.Timeout(20*time.Second).Screenshot(true, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name+".png")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if len(b) < 1000 {
		t.Errorf("screenshot %s is %d bytes", p, len(b))
	}
	t.Logf("screenshot: %s", p)
}

// The knowledge browser in headless Chromium over a tree the test built:
// the index lists the tree's entries with their numbers, flagged first;
// an entry page shows its route, selectors, blockers, Memory, reasons and
// the evidence chart with the tree's runs; the bench report's charts show
// the runs' figures; nothing logs an error and nothing is asked of any
// host but the server.
func TestBrowserServed(t *testing.T) {
	tr := sample(t)
	srv := serve(t, tr, web.Options{Reports: reports(t)})
	host := strings.TrimPrefix(srv.URL, "http://")
	list, err := tr.eng.List(ctx, engine.ListRequest{PageSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	w := open(t)
	w.goTo(t, srv.URL+"/")
	checkIndex(t, w, list)
	w.shot(t, "index")

	// Follow the link, as a reader would: one URL per entry.
	if err := w.p.Timeout(5*time.Second).MustElement(`tr.entry[data-key="star-count"] a`).Click(proto.InputMouseButtonLeft, 1); err != nil {
		t.Fatal(err)
	}
	if err := w.p.Timeout(10 * time.Second).WaitLoad(); err != nil {
		t.Fatal(err)
	}
	if u := w.p.MustInfo().URL; u != srv.URL+"/entry/example.com/star-count.html" {
		t.Fatalf("the entry's link went to %s", u)
	}
	checkEntry(t, w, tr)
	w.shot(t, "entry")

	w.goTo(t, srv.URL+"/")
	if err := w.p.Timeout(5*time.Second).MustElement(`#reports a`).Click(proto.InputMouseButtonLeft, 1); err != nil {
		t.Fatal(err)
	}
	w.p.Timeout(10 * time.Second).WaitLoad()
	checkReport(t, w)
	w.shot(t, "report")
	w.check(t, host)
}

// The same pages written by Export open from disk, links and all, with no
// request anywhere.
func TestBrowserExported(t *testing.T) {
	tr := sample(t)
	s := web.New(tr.eng, web.Options{History: history(tr.dir), Reports: reports(t), Classify: classify})
	dir := t.TempDir()
	n, err := s.Export(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1+3+1 {
		t.Errorf("exported %d files, want the index, 3 entries and 1 report", n)
	}
	list, _ := tr.eng.List(ctx, engine.ListRequest{PageSize: 100})
	w := open(t)
	w.goTo(t, "file://"+filepath.Join(dir, "index.html"))
	checkIndex(t, w, list)
	if err := w.p.Timeout(5*time.Second).MustElement(`tr.entry[data-key="star-count"] a`).Click(proto.InputMouseButtonLeft, 1); err != nil {
		t.Fatal(err)
	}
	w.p.Timeout(10 * time.Second).WaitLoad()
	checkEntry(t, w, tr)
	w.p.Timeout(5 * time.Second).MustElement(`nav a`).MustClick()
	w.p.Timeout(10 * time.Second).WaitLoad()
	if got := w.count(t, "tr.entry"); got != 3 {
		t.Errorf("back on the index from disk: %d entries", got)
	}
	w.p.Timeout(5 * time.Second).MustElement(`#reports a`).MustClick()
	w.p.Timeout(10 * time.Second).WaitLoad()
	checkReport(t, w)
	w.shot(t, "exported-entry")
	w.check(t, "")
}

func checkIndex(t *testing.T, w *watched, list *engine.ListResult) {
	t.Helper()
	if got := w.count(t, "tr.entry"); got != list.Total || got != 3 {
		t.Fatalf("index: %d entries, the tree has %d", got, list.Total)
	}
	for _, e := range list.Entries {
		row := fmt.Sprintf(`tr.entry[data-key=%q]`, e.IntentKey)
		if got := w.attr(t, row, "data-tier"); got != string(e.RetrievalTier) {
			t.Errorf("%s: tier %s, list says %s", e.IntentKey, got, e.RetrievalTier)
		}
		if got := w.text(t, row+` .badge.conf`); got != fmt.Sprintf("%.2f", e.Confidence) {
			t.Errorf("%s: confidence %s, list says %.2f", e.IntentKey, got, e.Confidence)
		}
		if got := w.text(t, row+` td[data-col=successes]`); got != fmt.Sprint(e.SuccessCount) {
			t.Errorf("%s: %s successes, list says %d", e.IntentKey, got, e.SuccessCount)
		}
		if got := w.text(t, row+` td[data-col=failures]`); got != fmt.Sprint(e.FailureCount) {
			t.Errorf("%s: %s failures, list says %d", e.IntentKey, got, e.FailureCount)
		}
	}
	// Flagged first: star count drifts and fails, open issues was judged wrong.
	if got := w.count(t, "#flagged tr.flagged"); got != 2 {
		t.Errorf("%d flagged entries, want 2", got)
	}
	for sel, want := range map[string]int{
		`tr.entry[data-key="star-count"] [data-flag="drifting"]`:      1,
		`tr.entry[data-key="star-count"] [data-flag="failing"]`:       1,
		`tr.entry[data-key="open-issues"] [data-flag="judged-wrong"]`: 1,
		`tr.entry[data-key="install-command"] [data-flag]`:            0,
	} {
		if got := w.count(t, sel); got != want {
			t.Errorf("%s: %d, want %d", sel, got, want)
		}
	}
	if first := w.attr(t, `table.entries[data-domain="example.com"] tr.entry`, "data-key"); first != "star-count" {
		t.Errorf("the most flagged entry is not first: %s", first)
	}
}

func checkEntry(t *testing.T, w *watched, tr *tree) {
	t.Helper()
	v, err := tr.eng.Entry(ctx, "example.com", "star-count")
	if err != nil {
		t.Fatal(err)
	}
	if got := w.text(t, "#intent"); got != "star count" {
		t.Errorf("title %q", got)
	}
	if got := w.attr(t, "h1 + p [data-tier]", "data-tier"); got != string(v.Recall.Tier) {
		t.Errorf("tier badge %s, recall %s", got, v.Recall.Tier)
	}
	if got := w.text(t, "#memory"); got != strings.TrimSpace(v.Memory) {
		t.Errorf("Memory section:\n%s\nwant (Engine.Memory):\n%s", got, v.Memory)
	}
	if got := w.count(t, "#reasons li"); got != len(v.Recall.Reasons) || got == 0 {
		t.Errorf("%d reasons, recall has %d", got, len(v.Recall.Reasons))
	}
	// Selectors: the facts' (consolidation named them from the route) with
	// their stability and the experience's record of each.
	if v.Facts == nil || len(v.Facts.Selectors) != 1 {
		t.Fatalf("facts selectors: %+v", v.Facts)
	}
	if got := w.count(t, "#selectors tbody tr"); got != len(v.Facts.Selectors) {
		t.Errorf("%d selectors shown, the facts have %d", got, len(v.Facts.Selectors))
	}
	for name, sel := range v.Facts.Selectors {
		st := v.Experience.Selectors[sel.Primary]
		if st == nil {
			t.Fatalf("no experience record of %s", sel.Primary)
		}
		for col, want := range map[int]string{1: name, 2: sel.Primary, 4: fmt.Sprintf("%.2f", sel.Stability), 5: fmt.Sprint(st.OK), 6: fmt.Sprint(st.Fail)} {
			if got := w.text(t, fmt.Sprintf("#selectors tbody tr td:nth-child(%d)", col)); got != want {
				t.Errorf("selector column %d: %q, want %q", col, got, want)
			}
		}
	}
	if got := w.text(t, "#blockers tbody tr"); !strings.Contains(got, "cookie_banner") || !strings.Contains(got, "click #accept") {
		t.Errorf("blocker %q", got)
	}
	if got := w.text(t, "#anti-patterns"); got != "#old-stars" {
		t.Errorf("anti-patterns %q", got)
	}
	if got := w.count(t, "#route tbody tr"); got != len(v.Recall.Steps) || got == 0 {
		t.Errorf("route: %d steps, recall has %d", got, len(v.Recall.Steps))
	}
	// The chart: one mark per run, from the evidence.
	if got := w.count(t, "#evidence-chart g.run"); got != 4 {
		t.Errorf("chart: %d runs, want 4", got)
	}
	if got := w.count(t, `#evidence-chart g.run[data-outcome="failure"]`); got != 1 {
		t.Errorf("chart: %d failures, want 1", got)
	}
	if got := w.count(t, `#evidence-chart g.run[data-verdict="right"]`); got != 1 {
		t.Errorf("chart: %d judged right, want 1", got)
	}
	if got := w.count(t, `#evidence-chart rect.band`); got != 4 {
		t.Errorf("chart: %d session bands, want 4", got)
	}
	for i, s := range []string{"s1", "s2", "s3", "s4"} {
		if got := w.attr(t, fmt.Sprintf("#evidence-chart g.run:nth-of-type(%d)", i+1), "data-session"); got != s {
			t.Errorf("run %d: session %s, want %s", i+1, got, s)
		}
	}
	if got := w.text(t, "#evidence-summary"); !strings.HasPrefix(got, "4 runs from 4 sessions") || !strings.Contains(got, "1 not consolidated yet") {
		t.Errorf("evidence summary %q", got)
	}
	// History: the consolidations that moved its facts on the branch — the
	// first two; the third folded one more success of the same route, which
	// moves neither content nor status (its evidence went to refs/pem/state).
	if got := w.count(t, "#commits tbody tr"); got != 2 {
		t.Errorf("%d commits listed, want the 2 consolidations that changed its facts", got)
	}
}

func checkReport(t *testing.T, w *watched) {
	t.Helper()
	for _, c := range []struct{ metric, arm, round, want string }{
		{"steps", "on", "1", "7"}, {"steps", "on", "2", "3"}, {"steps", "off", "2", "7"},
		{"accuracy", "on", "2", "0.5"}, {"prompt chars", "off", "2", "1450"},
	} {
		sel := fmt.Sprintf(`svg[data-metric=%q] circle[data-arm=%q][data-round=%q]`, c.metric, c.arm, c.round)
		if got := w.attr(t, sel, "data-value"); got != c.want {
			t.Errorf("report %s %s round %s: %s, want %s", c.metric, c.arm, c.round, got, c.want)
		}
	}
	if got := w.count(t, "#tasks tr.harm"); got != 1 {
		t.Errorf("%d harm rows, want 1", got)
	}
	if got := w.attr(t, "#tasks tr.harm", "data-task"); got != "b" {
		t.Errorf("harm row for %s, want b", got)
	}
	if got := w.text(t, `#totals tr[data-arm="on"] td[data-col="steps"]`); got != "10" {
		t.Errorf("total steps on %s, want 10", got)
	}
}
