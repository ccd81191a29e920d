package rod

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	_ "image/jpeg"
	_ "image/png"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/pemdev/pem/agent"
	"github.com/pemdev/pem/agent/demosite"
)

var (
	shared *Browser
	srv    *httptest.Server
)

func TestMain(m *testing.M) {
	if os.Getenv("PEM_LEAK_CHILD") == "1" { // see TestKilledProcessLeavesNoChromium
		os.Exit(m.Run())
	}
	bin, err := Bin(Options{})
	if err != nil {
		fmt.Fprintf(os.Stderr, "install chromium: apt-get install chromium chromium-headless-shell (%v)\n", err)
		os.Exit(1)
	}
	fmt.Fprintln(os.Stderr, "agent/rod: the tests' browser is", bin)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	b, err := Launch(ctx, Options{})
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "install chromium: apt-get install chromium chromium-headless-shell (launch %s: %v)\n", bin, err)
		os.Exit(1)
	}
	shared = b
	srv = httptest.NewServer(testSite())
	code := m.Run()
	srv.Close()
	if err := b.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "close browser:", err)
		code = 1
	}
	os.Exit(code)
}

// page opens a tab of the shared browser on the test site's path ("": none).
func page(t *testing.T, path string) *Page {
	t.Helper()
	if path == "" {
		return openAt(t, "", 0)
	}
	return openAt(t, srv.URL+path, 0)
}

// openAt opens a tab of the shared browser, closed when the test ends, with
// its timeout set to timeout (0: the default), navigated to url ("": none).
func openAt(tb testing.TB, url string, timeout time.Duration) *Page {
	tb.Helper()
	ctx := context.Background()
	p, err := shared.Open(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { p.Close() })
	if timeout > 0 {
		p.timeout = timeout
	}
	if url != "" {
		if err := p.Navigate(ctx, url); err != nil {
			tb.Fatal(err)
		}
	}
	return p
}

const layout = `<!doctype html><html><head><meta charset="utf-8"><title>%s</title>
<style>.hidden{display:none} .overlay{position:fixed;inset:0;background:rgba(0,0,0,.5)}</style></head><body>%s</body></html>`

func testSite() http.Handler {
	mux := http.NewServeMux()
	serve := func(path, title, body string) {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, layout, title, body)
		})
	}
	serve("/{$}", "Home", `
<nav><a href="/repo" id="repo-link">Repository</a> <a href="/search">Search</a></nav>
<h1 id="title">Welcome</h1>
<p id="intro">Hello <b>world</b></p>
<p class="hidden" id="secret-note">hidden text</p>
<button id="more" onclick="document.getElementById('out').textContent='loaded ' + (++window.n||(window.n=1))">More</button>
<div id="out"></div>
<div id="late"></div>
<script>setTimeout(() => { document.getElementById('late').innerHTML = '<span id="late-item">late</span>' }, 300)</script>`)
	serve("/repo", "acme/widgets", `
<nav class="tabs">
 <a href="/repo/issues">Issues <span class="Counter">12</span></a>
 <a href="/repo/pulls">Pull requests <span class="Counter">3</span></a>
 <a href="/repo/actions">Actions</a>
</nav>
<ul><li><a href="/x">One</a></li><li><a href="/x">Two</a></li><li><a href="/x">Three</a></li></ul>
<div class="social"><span>Stars 1,234</span> <span><svg aria-label="Forks" width="10" height="10"></svg><strong>56</strong></span></div>
<dl><dt>Default branch</dt><dd id="branch">main</dd><dt>License</dt><dd>MIT</dd></dl>
<table id="checks"><thead><tr><th>Check</th><th>Status</th></tr></thead>
<tbody><tr><td>build</td><td>success</td></tr><tr><td>lint</td><td>failure</td></tr></tbody></table>
<table><tr><th>Language</th><td>Go</td></tr></table>
<p>Latest release: <strong>v1.2.0</strong></p>
<h2>Installation</h2><p>Run:</p><pre><code>go install example.com/acme/widgets@latest</code></pre>
<form><input name="q" placeholder="Filter"><input type="password" name="pw" aria-label="Password"><button type="submit">Go</button></form>`)
	// Two items' options on one page, each labelled value under its own
	// heading (API pages list every function's "Default" alike).
	serve("/options", "Options", `
<h1>Streams</h1>
<h2>tally.openReader(path[, options])</h2>
<ul><li><code>bufferSize</code> <strong>Default:</strong> <code>65536</code></li></ul>
<h2>tally.openWriter(path[, options])</h2>
<ul><li><code>mode</code> <strong>Default:</strong> <code>0o666</code></li></ul>
<dl><dt>tally.flush(stream)</dt><dd><dl><dt>Returns</dt><dd id="ret">a promise</dd></dl></dd></dl>`)
	// Text a reader cannot see, planted beside the visible values.
	serve("/planted", "Planted", `
<div class="social"><span>Stars 1,234</span></div>
<dl><dt>License</dt><dd>MIT</dd></dl>
<p>The project is maintained by volunteers.</p>
<div style="position:absolute;left:-9999px"><dl><dt>Maintainer</dt><dd>off-screen planted</dd></dl><p>Off-screen planted paragraph about the project.</p></div>
<div style="opacity:0"><dl><dt>Owner</dt><dd>transparent planted</dd></dl><p>Transparent planted paragraph about the project.</p></div>
<div style="font-size:0"><dl><dt>Author</dt><dd>tiny planted</dd></dl><p>Tiny planted paragraph about the project.</p></div>
<div style="color:transparent"><dl><dt>Sponsor</dt><dd>colourless planted</dd></dl><p>Colourless planted paragraph about the project.</p></div>`)
	mux.HandleFunc("/search", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query().Get("q")
		body := `<form action="/search" method="get"><input type="search" id="q" name="q" value=""></form>`
		if q != "" {
			body += fmt.Sprintf(`<p id="count">%d results for "%s"</p>`, len(q), q)
		}
		fmt.Fprintf(w, layout, "Search", body)
	})
	// Containers whose collapsed text looks like "Label: value": only the
	// innermost pairs are labelled values.
	serve("/containers", "Containers", `
<nav aria-label="Repository"><a href="/code">Code</a> <a href="/issues">Issues <span class="Counter">13</span></a></nav>
<div class="Box-header" id="issues-header">
 <p id="summary">Matching issues: <strong id="search-count">3</strong></p>
 <p>3 open issues matching “memory”. <a href="/issues">Clear search</a></p>
</div>
<div class="Box-header" id="counts">
 <p>Open issues: <span id="open-count">13</span> · Sort: oldest first</p>
</div>
<div class="file-header" id="file-header">
 <div>File name: <code id="fname">x.go</code></div>
 <div>First line: <code id="fline">// Getting started: render your first widget</code></div>
</div>
<div class="Box-header"><dl><dt>File name</dt><dd id="dl-name">getting-started.go</dd>
<dt>First line</dt><dd id="dl-line">// Getting started: render it</dd></dl></div>`)
	// Numbered section headings (Sphinx's section-number) beside real
	// counters: the numbering is no count.
	serve("/numbered", "Numbered", `
<h2><span class="section-number">2. </span>Examples and Recipes</h2>
<h3 id="mac"><span class="section-number">4.3.2. </span>The locale Module Is Broken on Mac OS X</h3>
<p id="stars"><span>1,234</span> stars</p>
<p id="open">12 open issues</p>`)
	// A page that keeps changing for a while after load, then stops.
	serve("/late-render", "Late", `<ul id="list"></ul><script>
window.addEventListener("load", () => {
  let i = 0;
  const step = () => { const li = document.createElement("li"); li.textContent = "item " + (++i); list.appendChild(li); if (i < 3) setTimeout(step, 20) };
  setTimeout(step, 20);
});</script>`)
	// A page that never stops changing.
	serve("/restless", "Restless", `<p id="tick">0</p><script>setInterval(() => { tick.textContent = String(+tick.textContent + 1) }, 10)</script>`)
	// A button that renders its result over a few timer hops.
	serve("/hops", "Hops", `<button id="go" onclick="setTimeout(() => { out.textContent = 'working'; setTimeout(() => { out.textContent = 'done' }, 20) }, 20)">Go</button><p id="out"></p>`)
	// A page whose load event waits on a slow image (see slowImage).
	serve("/slow-load", "Slow", `<p id="ready">content</p><img src="/slow-image" alt="">`)
	mux.HandleFunc("/slow-image", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(4 * time.Second):
		}
	})
	// A page whose load event waits 300 ms on an image, and a link to it.
	serve("/held-load", "Held", `<p id="ready">content</p><img src="/held-image" alt="">`)
	mux.HandleFunc("/held-image", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(300 * time.Millisecond):
		}
	})
	serve("/to-held", "To held", `<a id="held" href="/held-load">Held</a>`)
	serve("/covered", "Covered", `<button id="under">Under</button><div class="overlay" id="modal"></div>`)
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		// Noise drawn on a canvas: a PNG of it is far over 400 KB.
		fmt.Fprintf(w, layout, "Big", `<canvas id="c" width="1280" height="800"></canvas><script>
const c = document.getElementById('c').getContext('2d'); const d = c.createImageData(1280, 800);
const px = new Uint32Array(d.data.buffer); let s = 2463534242;
for (let i = 0; i < px.length; i++) { s ^= s << 13; s ^= s >>> 17; s ^= s << 5; px[i] = (s | 0xff000000) >>> 0 }
c.putImageData(d, 0, 0);</script>`)
	})
	return mux
}

func TestNavigateTitleURL(t *testing.T) {
	p := page(t, "/")
	ctx := context.Background()
	if title, err := p.Title(ctx); err != nil || title != "Home" {
		t.Errorf("Title = %q, %v", title, err)
	}
	if p.URL() != srv.URL+"/" {
		t.Errorf("URL = %q", p.URL())
	}
	if code := p.StatusCode(ctx); code != 200 {
		t.Errorf("StatusCode = %d", code)
	}
	if err := p.Navigate(ctx, srv.URL+"/missing"); err != nil {
		t.Errorf("404 is a page, not an error: %v", err)
	}
	if code := p.StatusCode(ctx); code != 404 {
		t.Errorf("StatusCode = %d, want 404", code)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String() + "/"
	l.Close()
	err = p.Navigate(ctx, dead)
	if err == nil || !strings.Contains(err.Error(), "ERR_CONNECTION_REFUSED") || !strings.Contains(err.Error(), dead) {
		t.Errorf("Navigate(dead) = %v", err)
	}
}

func TestClick(t *testing.T) {
	p := page(t, "/")
	ctx := context.Background()
	if err := p.Click(ctx, "#more"); err != nil {
		t.Fatal(err)
	}
	if got, _ := p.Text(ctx, "#out"); got != "loaded 1" {
		t.Errorf("after click #out = %q", got)
	}
	if err := p.Click(ctx, "#repo-link"); err != nil {
		t.Fatal(err)
	}
	if title, _ := p.Title(ctx); title != "acme/widgets" {
		t.Errorf("after clicking a link: title %q", title)
	}
	if got, err := p.Text(ctx, "#branch"); err != nil || got != "main" {
		t.Errorf("Text(#branch) = %q, %v", got, err)
	}
}

func TestTypePressSubmits(t *testing.T) {
	p := page(t, "/search")
	ctx := context.Background()
	if err := p.Type(ctx, "#q", "wrong"); err != nil {
		t.Fatal(err)
	}
	if err := p.Type(ctx, "#q", "memory"); err != nil { // clears first
		t.Fatal(err)
	}
	if err := p.Press(ctx, "#q", "Enter"); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(p.URL(), "/search?q=memory") {
		t.Errorf("URL after submit = %q", p.URL())
	}
	if got, err := p.Text(ctx, "#count"); err != nil || got != `6 results for "memory"` {
		t.Errorf("Text(#count) = %q, %v", got, err)
	}
}

func TestText(t *testing.T) {
	p := page(t, "/")
	ctx := context.Background()
	body, err := p.Text(ctx, "")
	if err != nil || !strings.Contains(body, "Welcome") || !strings.Contains(body, "Hello world") || strings.Contains(body, "hidden text") {
		t.Errorf("Text(body) = %q, %v", body, err)
	}
	if got, _ := p.Text(ctx, "#intro"); got != "Hello world" {
		t.Errorf("Text(#intro) = %q", got)
	}
	if got, err := p.Text(ctx, "#late-item"); err != nil || got != "late" { // appears after 300 ms: lookups wait
		t.Errorf("Text(#late-item) = %q, %v", got, err)
	}
}

// TestReadsFollowNavigation: every read right after a navigation, a link
// click or a submit is of the new document (the reads run in whatever
// document the frame holds, not in a cached window), and element actions
// still work on each new document; Text of a field is its value, of a
// select its chosen option, as rod's Element.Text.
func TestReadsFollowNavigation(t *testing.T) {
	p := page(t, "")
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		if err := p.Navigate(ctx, srv.URL+"/"); err != nil {
			t.Fatal(err)
		}
		if got, err := p.Text(ctx, "#title"); err != nil || got != "Welcome" {
			t.Fatalf("round %d: Text(#title) after navigating home = %q, %v", i, got, err)
		}
		if err := p.Click(ctx, "#repo-link"); err != nil {
			t.Fatal(err)
		}
		if vis, err := p.Exists(ctx, "#branch"); err != nil || !vis {
			t.Fatalf("round %d: Exists(#branch) after the link click = %v, %v", i, vis, err)
		}
		if got, err := p.Text(ctx, "#branch"); err != nil || got != "main" {
			t.Fatalf("round %d: Text(#branch) = %q, %v", i, got, err)
		}
		if _, err := p.Exists(ctx, "#title"); !errors.Is(err, agent.ErrNoElement) {
			t.Fatalf("round %d: the old page's #title still found: %v", i, err)
		}
		if err := p.Navigate(ctx, srv.URL+"/search"); err != nil {
			t.Fatal(err)
		}
		if err := p.Type(ctx, "#q", "abc"); err != nil {
			t.Fatal(err)
		}
		if got, err := p.Text(ctx, "#q"); err != nil || got != "abc" {
			t.Fatalf("round %d: Text of the field = %q, %v", i, got, err)
		}
		if err := p.Press(ctx, "#q", "Enter"); err != nil {
			t.Fatal(err)
		}
		if got, err := p.Text(ctx, "#count"); err != nil || got != `3 results for "abc"` {
			t.Fatalf("round %d: Text(#count) after the submit = %q, %v", i, got, err)
		}
		if code := p.StatusCode(ctx); code != 200 {
			t.Fatalf("round %d: StatusCode = %d", i, code)
		}
	}
	if _, err := p.Evaluate(ctx, `document.body.innerHTML = '<select id="s"><option>one</option><option selected>two</option></select>'`); err != nil {
		t.Fatal(err)
	}
	if got, err := p.Text(ctx, "#s"); err != nil || got != "two" {
		t.Errorf("Text of a select = %q, %v", got, err)
	}
}

func TestExists(t *testing.T) {
	p := page(t, "/")
	ctx := context.Background()
	if vis, err := p.Exists(ctx, "#title"); !vis || err != nil {
		t.Errorf("Exists(#title) = %v, %v", vis, err)
	}
	if vis, err := p.Exists(ctx, "#secret-note"); vis || err != nil {
		t.Errorf("Exists(hidden) = %v, %v", vis, err)
	}
	// Absence is answered by a single query, not a polling window: count the
	// page's querySelector calls.
	if _, err := p.Evaluate(ctx, `() => {
		const q = Document.prototype.querySelector;
		window.__queries = 0;
		Document.prototype.querySelector = function (s) { window.__queries++; return q.call(this, s) };
	}`); err != nil {
		t.Fatal(err)
	}
	vis, err := p.Exists(ctx, "#absent")
	if vis || !errors.Is(err, agent.ErrNoElement) || !strings.Contains(err.Error(), "#absent") {
		t.Errorf("Exists(#absent) = %v, %v", vis, err)
	}
	if n, err := p.Evaluate(ctx, "window.__queries"); err != nil || n != "1" {
		t.Errorf("Exists(#absent) queried the page %s times (%v), want once", n, err)
	}
	if _, err := p.Exists(ctx, "div[["); err == nil || errors.Is(err, agent.ErrNoElement) || !strings.Contains(err.Error(), "invalid selector") {
		t.Errorf("Exists(invalid) = %v", err)
	}
	ctx2, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := p.Exists(ctx2, "#title"); err == nil || errors.Is(err, agent.ErrNoElement) {
		t.Errorf("Exists(cancelled ctx) = %v, want an error that is not ErrNoElement", err)
	}
}

// TestExistsBusyPage: a page whose main thread is blocked (as on a loaded
// machine) answers late; an element that exists is still reported present,
// never as missing.
func TestExistsBusyPage(t *testing.T) {
	p := page(t, "/")
	ctx := context.Background()
	for _, sel := range []string{"#title", "#secret-note"} {
		// Block the page for 700 ms, longer than the old 500 ms check.
		if _, err := p.Evaluate(ctx, `() => { setTimeout(() => { const end = performance.now() + 700; while (performance.now() < end); }, 0) }`); err != nil {
			t.Fatal(err)
		}
		vis, err := p.Exists(ctx, sel)
		if err != nil || vis != (sel == "#title") {
			t.Errorf("Exists(%s) on a busy page = %v, %v", sel, vis, err)
		}
	}
}

func TestMissingSelectorTimesOut(t *testing.T) {
	p := page(t, "/")
	p.timeout = 700 * time.Millisecond
	for _, tc := range []struct {
		name string
		do   func(ctx context.Context) error
	}{
		{"click", func(ctx context.Context) error { return p.Click(ctx, "#nope") }},
		{"type", func(ctx context.Context) error { return p.Type(ctx, "#nope", "hunter2") }},
		{"text", func(ctx context.Context) error { _, err := p.Text(ctx, "#nope"); return err }},
		{"wait", func(ctx context.Context) error { return p.WaitFor(ctx, "#nope", 300*time.Millisecond) }},
	} {
		err := tc.do(context.Background())
		if !errors.Is(err, agent.ErrNoElement) || !strings.Contains(err.Error(), `"#nope"`) {
			t.Errorf("%s: err = %v", tc.name, err)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: error echoes typed text: %v", tc.name, err)
		}
	}
	// The caller's deadline wins when it is sooner than the page timeout.
	p.timeout = DefaultTimeout
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := p.Click(ctx, "#nope"); !errors.Is(err, agent.ErrNoElement) {
		t.Errorf("click with deadline: %v", err)
	}
	if err := p.Click(context.Background(), "div[["); err == nil || !strings.Contains(err.Error(), "invalid selector") {
		t.Errorf("invalid selector: %v", err)
	}
}

func TestClickCovered(t *testing.T) {
	p := page(t, "/covered")
	p.timeout = 700 * time.Millisecond
	err := p.Click(context.Background(), "#under")
	if err == nil || !strings.Contains(err.Error(), "covered by div#modal.overlay") {
		t.Errorf("Click(covered) = %v", err)
	}
}

func TestElements(t *testing.T) {
	p := page(t, "/repo")
	ctx := context.Background()
	els, err := p.Elements(ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	var sels []string
	for _, e := range els {
		sels = append(sels, e.Selector)
		if !e.Visible {
			t.Errorf("%s: invisible element listed", e.Selector)
		}
		n, err := p.Evaluate(ctx, fmt.Sprintf("document.querySelectorAll(%q).length", e.Selector))
		if err != nil || n != "1" {
			t.Errorf("selector %s matches %s elements (%v)", e.Selector, n, err)
		}
	}
	want := []string{
		`a[href="/repo/issues"]`, `a[href="/repo/pulls"]`, `a[href="/repo/actions"]`,
		`li:nth-of-type(1) > a`, `li:nth-of-type(2) > a`, `li:nth-of-type(3) > a`,
		`input[name="q"]`, `input[name="pw"]`, `button`,
	}
	if strings.Join(sels, " | ") != strings.Join(want, " | ") {
		t.Errorf("selectors\n got %s\nwant %s", strings.Join(sels, " | "), strings.Join(want, " | "))
	}
	if len(els) > 0 && (els[0].Text != "Issues 12" || els[0].Href != "/repo/issues" || els[0].Tag != "a") {
		t.Errorf("first element %+v", els[0])
	}
	if len(els) > 7 && (els[6].Placeholder != "Filter" || els[7].Label != "Password" || els[7].Type != "password") {
		t.Errorf("inputs %+v %+v", els[6], els[7])
	}
	if lim, _ := p.Elements(ctx, "", 2); len(lim) != 2 {
		t.Errorf("limit 2: %d elements", len(lim))
	}
	if none, err := p.Elements(ctx, "#absent", 0); err != nil || len(none) != 0 {
		t.Errorf("Elements(#absent) = %v, %v", none, err)
	}
	// A listed selector works when used back.
	if err := p.Click(ctx, els[4].Selector); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(p.URL(), "/x") {
		t.Errorf("URL after clicking %s: %s", els[4].Selector, p.URL())
	}
}

func TestLabelled(t *testing.T) {
	p := page(t, "/repo")
	ctx := context.Background()
	pairs, err := p.Labelled(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]agent.LabelValue{}
	for _, lv := range pairs {
		got[lv.Label] = lv
	}
	for label, value := range map[string]string{
		"Issues": "12", "Pull requests": "3", "Stars": "1,234", "Forks": "56",
		"Default branch": "main", "License": "MIT", "build": "success", "lint": "failure",
		"Language": "Go", "Latest release": "v1.2.0", "Installation": "go install example.com/acme/widgets@latest",
	} {
		lv, ok := got[label]
		if !ok || lv.Value != value {
			t.Errorf("label %q = %q (found %v), want %q", label, lv.Value, ok, value)
			continue
		}
		txt, err := p.Text(ctx, lv.Selector)
		if err != nil || !strings.Contains(txt, value) {
			t.Errorf("label %q: selector %s reads %q, %v", label, lv.Selector, txt, err)
		}
	}
	if lv := got["Default branch"]; lv.Selector != "#branch" {
		t.Errorf("Default branch selector %q", lv.Selector)
	}
	if t.Failed() {
		t.Logf("pairs: %+v", pairs)
	}
}

// TestLabelledPlace: each labelled value says its place, the headings it
// sits under and the term of the definition it belongs to, so that a task
// naming one item reads that item's value.
func TestLabelledPlace(t *testing.T) {
	p := page(t, "/options")
	pairs, err := p.Labelled(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"65536":     "Streams › tally.openReader(path[, options])",
		"0o666":     "Streams › tally.openWriter(path[, options])",
		"a promise": "Streams › tally.openWriter(path[, options]) › tally.flush(stream)",
	}
	for _, lv := range pairs {
		if u, ok := want[lv.Value]; ok {
			if lv.Under != u {
				t.Errorf("%q = %q under %q, want under %q", lv.Label, lv.Value, lv.Under, u)
			}
			delete(want, lv.Value)
		}
	}
	for v := range want {
		t.Errorf("no labelled value %q in %+v", v, pairs)
	}
}

// TestPlantedTextIsNotRead: text a reader of the page cannot see — moved
// off the page, under an ancestor of opacity 0, in a zero-size font or a
// transparent colour — gives neither labelled values nor blocks, so a page
// cannot plant an answer for the agent that its users never see; the
// visible values beside it still read.
func TestPlantedTextIsNotRead(t *testing.T) {
	p := page(t, "/planted")
	ctx := context.Background()
	pairs, err := p.Labelled(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, lv := range pairs {
		got[lv.Label] = lv.Value
		if strings.Contains(lv.Value, "planted") {
			t.Errorf("planted text read as a value: %+v", lv)
		}
	}
	if got["Stars"] != "1,234" || got["License"] != "MIT" {
		t.Errorf("visible values: %+v", pairs)
	}
	blocks, err := p.Blocks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen := false
	for _, b := range blocks {
		if strings.Contains(b.Text, "planted") {
			t.Errorf("planted text read as a block: %+v", b)
		}
		seen = seen || strings.Contains(b.Text, "maintained by volunteers")
	}
	if !seen {
		t.Errorf("the visible paragraph is not among the blocks: %+v", blocks)
	}
}

// TestLabelledSectionNumbers: a heading's section number ("4.3.2. The
// locale Module Is Broken on Mac OS X") is no "1,234 stars" counter; the
// counters beside it still are (natsort's docs answered a question with
// "4.3.2." and memory served it at P2).
func TestLabelledSectionNumbers(t *testing.T) {
	p := page(t, "/numbered")
	pairs, err := p.Labelled(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, lv := range pairs {
		got[lv.Label] = lv.Value
		if strings.HasSuffix(lv.Value, ".") {
			t.Errorf("a section number read as a value: %+v", lv)
		}
	}
	if got["stars"] != "1,234" || got["open issues"] != "12" {
		t.Errorf("counters: stars %q, open issues %q; pairs %+v", got["stars"], got["open issues"], pairs)
	}
}

// TestLabelledContainers: a container whose text, collapsed, reads like
// "Label: value" does not yield a pair; the deepest element does.
func TestLabelledContainers(t *testing.T) {
	p := page(t, "/containers")
	ctx := context.Background()
	pairs, err := p.Labelled(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]agent.LabelValue{}
	for _, lv := range pairs {
		got[lv.Label] = append(got[lv.Label], lv)
		if strings.Contains(lv.Value, "Clear search") || strings.Contains(lv.Label, "Clear search") ||
			strings.Contains(lv.Label, "x.go") || strings.Contains(lv.Label, "getting-started.go") ||
			strings.HasPrefix(lv.Label, "//") || strings.Contains(lv.Value, "Sort") || lv.Label == "Repository" {
			t.Errorf("container text read as a pair: %+v", lv)
		}
	}
	for _, c := range []struct{ label, value, selector string }{
		{"Matching issues", "3", "#search-count"},
		{"Open issues", "13", "#open-count"},
		{"File name", "x.go", "#fname"},
		{"First line", "// Getting started: render your first widget", "#fline"},
		{"File name", "getting-started.go", "#dl-name"},
		{"First line", "// Getting started: render it", "#dl-line"},
		{"Issues", "13", ""},
	} {
		found := false
		for _, lv := range got[c.label] {
			if lv.Value == c.value && (c.selector == "" || lv.Selector == c.selector) {
				found = true
			}
		}
		if !found {
			t.Errorf("missing %q = %q at %s; have %+v", c.label, c.value, c.selector, got[c.label])
		}
	}
	if len(got["Matching issues"]) != 1 {
		t.Errorf("Matching issues read %d times: %+v", len(got["Matching issues"]), got["Matching issues"])
	}
	if lv, ok := agent.BestLabel(pairs, "matching issues"); !ok || lv.Value != "3" {
		t.Errorf("BestLabel(matching issues) = %+v, %v", lv, ok)
	}
	if t.Failed() {
		t.Logf("pairs: %+v", pairs)
	}
}

// TestSettle: actions return once the page has loaded and stopped changing,
// so a read that does not wait (Evaluate) sees the final DOM; a page that
// never stops changing, or whose load event is held up, does not hang them.
func TestSettle(t *testing.T) {
	ctx := context.Background()
	p := page(t, "/late-render")
	if n, err := p.Evaluate(ctx, "document.querySelectorAll('#list li').length"); err != nil || n != "3" {
		t.Errorf("after Navigate: %s items rendered (%v), want 3", n, err)
	}
	if err := p.Navigate(ctx, srv.URL+"/hops"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Evaluate(ctx, "document.getElementById('out').textContent = 'idle'"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // let the page be quiet for longer than the window before the click
	if err := p.Click(ctx, "#go"); err != nil {
		t.Fatal(err)
	}
	if out, err := p.Evaluate(ctx, "document.getElementById('out').textContent"); err != nil || out != `"done"` {
		t.Errorf("after Click: #out = %s (%v), want \"done\"", out, err)
	}
	if err := p.Navigate(ctx, srv.URL+"/restless"); err != nil {
		t.Errorf("Navigate(restless) = %v", err)
	}
	if err := p.Navigate(ctx, srv.URL+"/hops#below"); err != nil || !strings.HasSuffix(p.URL(), "#below") {
		t.Errorf("same-document Navigate = %v, URL %s", err, p.URL())
	}
	// The load event waits 4 s on an image; the page timeout is 1 s. The
	// navigation still succeeds (after at most settleMax) and the page is usable.
	p.timeout = time.Second
	if err := p.Navigate(ctx, srv.URL+"/slow-load"); err != nil {
		t.Fatalf("Navigate(slow-load) = %v", err)
	}
	if got, err := p.Text(ctx, "#ready"); err != nil || got != "content" {
		t.Errorf("Text(#ready) = %q, %v", got, err)
	}
	p.timeout = DefaultTimeout
	if err := p.Navigate(ctx, srv.URL+"/"); err != nil {
		t.Fatal(err)
	}
	if err := p.Click(ctx, "#more"); err != nil { // the loading state is not left stale
		t.Fatal(err)
	}
}

// Under agent.SettleAtLoad a new document is taken at its load event, with
// no quiet window after it: the load itself (here held 300 ms by an image)
// is still waited for, after a Navigate and after a link click, and a
// settle asked for afterwards (what a replay does when the page is not yet
// the recorded one) waits for what the page renders on timers after it.
func TestSettleAtLoad(t *testing.T) {
	p := page(t, "")
	bg := context.Background()
	ctx := agent.SettleAtLoad(bg)
	for _, via := range []string{"navigate", "click"} {
		var err error
		if via == "navigate" {
			err = p.Navigate(ctx, srv.URL+"/held-load")
		} else {
			if err := p.Navigate(bg, srv.URL+"/to-held"); err != nil {
				t.Fatal(err)
			}
			err = p.Click(ctx, "#held")
		}
		if err != nil {
			t.Fatalf("%s: %v", via, err)
		}
		if got, err := p.Evaluate(bg, "document.readyState + ' ' + document.images[0].complete"); err != nil || got != `"complete true"` {
			t.Errorf("after %s at load: %s (%v), want the load event done", via, got, err)
		}
	}
	if err := p.Navigate(ctx, srv.URL+"/late-render"); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitFor(bg, "", 0); err != nil {
		t.Fatal(err)
	}
	if n, err := p.Evaluate(bg, "document.querySelectorAll('#list li').length"); err != nil || n != "3" {
		t.Errorf("a settle after a navigation at load: %s items rendered (%v), want 3", n, err)
	}
}

func TestEvaluate(t *testing.T) {
	p := page(t, "/")
	ctx := context.Background()
	for js, want := range map[string]string{
		"document.title":             `"Home"`,
		"document.title;":            `"Home"`,
		"1 + 2":                      `3`,
		"const x = 2; return x * 21": `42`,
		"() => ({a: [1, 'b']})":      `{"a":[1,"b"]}`,
		"function () { return location.pathname }": `"/"`,
		"async () => 7": `7`,
		"void 0":        `null`,
	} {
		got, err := p.Evaluate(ctx, js)
		if err != nil || got != want {
			t.Errorf("Evaluate(%q) = %s, %v; want %s", js, got, err, want)
		}
	}
	if _, err := p.Evaluate(ctx, "nope.x"); err == nil || !strings.Contains(err.Error(), "nope is not defined") {
		t.Errorf("Evaluate(nope.x) err = %v", err)
	}
	if err := p.Scroll(ctx, 200); err != nil {
		t.Error(err)
	}
	if err := p.WaitFor(ctx, "", 50*time.Millisecond); err != nil {
		t.Error(err)
	}
	if err := p.WaitFor(ctx, "#late-item", 3*time.Second); err != nil {
		t.Error(err)
	}
}

func TestScreenshot(t *testing.T) {
	p := page(t, "/")
	ctx := context.Background()
	b, mime, err := p.Screenshot(ctx)
	if err != nil || mime != "image/png" || !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Fatalf("small page: %s %d bytes, %v", mime, len(b), err)
	}
	if err := p.Navigate(ctx, srv.URL+"/big"); err != nil {
		t.Fatal(err)
	}
	b, mime, err = p.Screenshot(ctx)
	if err != nil || mime != "image/jpeg" {
		t.Fatalf("big page: %s %d bytes, %v", mime, len(b), err)
	}
	cfg, format, err := image.DecodeConfig(bytes.NewReader(b))
	if err != nil || format != "jpeg" || cfg.Width != 1024 || len(b) > 400<<10 {
		t.Errorf("big page: %s %dx%d, %d bytes, %v", format, cfg.Width, cfg.Height, len(b), err)
	}
}

func TestExecOnRealPage(t *testing.T) {
	p := page(t, "/repo")
	ctx := context.Background()
	r := agent.Exec(ctx, p, agent.Action{Tool: "extract", Value: "stars"}, t.TempDir())
	if r.Error != "" || r.ExtractedContent != "1,234" {
		t.Errorf("extract stars: %+v", r)
	}
	r = agent.Exec(ctx, p, agent.Action{Tool: "navigate", Value: "/search"}, "")
	if r.Error != "" {
		t.Fatal(r.Error)
	}
	r = agent.Exec(ctx, p, agent.Action{Tool: "type", Selector: "#q", Value: "memory", Submit: true}, "")
	if r.Error != "" || !strings.HasSuffix(p.URL(), "?q=memory") {
		t.Errorf("type+submit: %+v at %s", r, p.URL())
	}
}

func TestLaunchCloseCleansUp(t *testing.T) {
	if _, err := Launch(context.Background(), Options{Bin: "/nonexistent/chromium"}); !errors.Is(err, ErrNoChromium) ||
		!strings.Contains(err.Error(), "chromium not found: Options.Bin=/nonexistent/chromium does not exist; "+InstallHint) {
		t.Errorf("missing bin: %v", err)
	}
	b, err := Launch(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir, pid := b.tmpDir, b.PID()
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("user data dir: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("user data dir %s left behind: %v", dir, err)
	}
	if !waitExit(pid, time.Second) {
		t.Errorf("chromium %d still running after Close", pid)
	}
	if err := b.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func BenchmarkNewPage(b *testing.B) {
	ctx := context.Background()
	for b.Loop() {
		p, err := shared.Open(ctx)
		if err != nil {
			b.Fatal(err)
		}
		p.Close()
	}
}

func BenchmarkNavigate(b *testing.B) {
	ctx := context.Background()
	p, err := shared.Open(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	for b.Loop() {
		if err := p.Navigate(ctx, srv.URL+"/repo"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkClickLink(b *testing.B) {
	ctx := context.Background()
	p, err := shared.Open(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	for b.Loop() {
		if err := p.Navigate(ctx, srv.URL+"/"); err != nil {
			b.Fatal(err)
		}
		if err := p.Click(ctx, "#repo-link"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkClickInPage(b *testing.B) {
	ctx := context.Background()
	p, err := shared.Open(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	if err := p.Navigate(ctx, srv.URL+"/"); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := p.Click(ctx, "#more"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLabelled(b *testing.B) {
	ctx := context.Background()
	p, err := shared.Open(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	if err := p.Navigate(ctx, srv.URL+"/repo"); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := p.Labelled(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// TestDemoSite reads every demo task's answer as a labelled value, on the
// drift variant, the way a generic explorer would.
func TestDemoSite(t *testing.T) {
	const round = 1
	site := demosite.New(demosite.Options{Variant: demosite.Drift, Round: round})
	base, stop, err := site.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	p := page(t, "")
	ctx := context.Background()
	ask := map[string]struct{ path, label string }{
		"stars":                {"/acme/widgets", "stars"},
		"open-issues":          {"/acme/widgets/issues", "open issues"},
		"search-memory":        {"/acme/widgets/issues?q=memory", "matching issues"},
		"open-pulls":           {"/acme/widgets/pulls", "open pull requests"},
		"first-pull-checks":    {"/acme/widgets/pull/31/checks", "checks status"},
		"latest-workflow":      {"/acme/widgets/actions", "status"},
		"install-command":      {"/acme/widgets/blob/main/README.md", "installation"},
		"getting-started":      {"/acme/widgets/blob/main/examples/getting-started.go", "file name"},
		"default-branch":       {"/acme/widgets", "default branch"},
		"unread-notifications": {"/notifications", "unread notifications"},
		"security-contact":     {"/acme/widgets/security/policy", "security contact email"},
		"release-downloads":    {"/acme/widgets/releases/109/assets", "widgets-linux-amd64.tar.gz downloads"},
		"release-date":         {"/acme/widgets/releases/100", "release date"},
		"wiki-go-version":      {"/acme/widgets/wiki/Requirements", "minimum go version"},
		"contributors":         {"/acme/widgets/graphs/contributors", "contributors"},
		"discussion-author":    {"/acme/widgets/discussions/1", "started by"},
	}
	for _, task := range demosite.Tasks(base, round, demosite.Drift) {
		switch task.ID {
		case "first-issues":
			if err := p.Navigate(ctx, base+"/acme/widgets/issues"); err != nil {
				t.Fatal(err)
			}
			els, err := p.Elements(ctx, `a[href^="/acme/widgets/issues/"]`, 2)
			if err != nil || len(els) != 2 || !demosite.Check(task, els[0].Text+"; "+els[1].Text) {
				t.Errorf("%s: %+v, %v", task.ID, els, err)
			}
			continue
		case "unread-notifications":
			if err := p.Navigate(ctx, task.StartURL); err != nil {
				t.Fatal(err)
			}
			if err := p.Type(ctx, `input[name="login"]`, "demo"); err != nil {
				t.Fatal(err)
			}
			if err := p.Type(ctx, `input[type="password"]`, task.Secrets["demo_password"]); err != nil {
				t.Fatal(err)
			}
			if err := p.Press(ctx, `input[type="password"]`, "Enter"); err != nil {
				t.Fatal(err)
			}
		}
		a := ask[task.ID]
		if !strings.HasSuffix(p.URL(), a.path) {
			if err := p.Navigate(ctx, base+a.path); err != nil {
				t.Fatal(err)
			}
		}
		pairs, err := p.Labelled(ctx)
		if err != nil {
			t.Fatal(err)
		}
		lv, ok := agent.BestLabel(pairs, a.label)
		// A value that loads late (contributors) is read once it is there.
		for i := 0; i < 40 && ok && strings.HasPrefix(lv.Value, "Loading"); i++ {
			time.Sleep(50 * time.Millisecond)
			if pairs, err = p.Labelled(ctx); err != nil {
				t.Fatal(err)
			}
			lv, ok = agent.BestLabel(pairs, a.label)
		}
		if !ok || !demosite.Check(task, lv.Value) {
			t.Errorf("%s on %s: label %q → %+v (want %q)\npairs: %+v", task.ID, p.URL(), a.label, lv, task.Expected, pairs)
		}
	}
}

// On this machine's real binaries: with PEM_CHROME unset a headless Launch
// starts Debian's headless shell when it is installed (the process's own
// executable says so), and a headful one would start the system Chromium.
func TestLaunchHeadlessShell(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc/PID/exe is Linux's")
	}
	t.Setenv("PEM_CHROME", "")
	if _, err := os.Stat(debianShell); err != nil {
		t.Skipf("Debian's headless shell is not installed (%v): apt-get install chromium-headless-shell", err)
	}
	if got, err := Bin(Options{}); err != nil || got != debianShell {
		t.Errorf("Bin(headless) = %q, %v; want %s", got, err, debianShell)
	}
	if _, err := os.Stat(debianBinary); err == nil {
		if got, err := Bin(Options{Headful: true}); err != nil || got != debianBinary {
			t.Errorf("Bin(headful) = %q, %v; want %s", got, err, debianBinary)
		}
	}
	for _, c := range []struct{ env, want string }{{"", debianShell}, {debianBinary, debianBinary}} {
		if c.env != "" {
			if _, err := os.Stat(c.env); err != nil {
				continue
			}
		}
		t.Setenv("PEM_CHROME", c.env)
		b, err := Launch(context.Background(), Options{})
		if err != nil {
			t.Fatal(err)
		}
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", b.PID()))
		if err != nil || exe != c.want {
			t.Errorf("PEM_CHROME=%q: the launched process runs %q (%v), want %s", c.env, exe, err, c.want)
		}
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	}
	t.Setenv("PEM_CHROME", debianShell)
	if _, err := Launch(context.Background(), Options{Headful: true}); !errors.Is(err, ErrNoChromium) ||
		!strings.Contains(err.Error(), "is a headless shell") {
		t.Errorf("headful on PEM_CHROME=%s: %v", debianShell, err)
	}
}
