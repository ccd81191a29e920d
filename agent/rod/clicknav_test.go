package rod

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/pemdev/pem/agent"
	"github.com/pemdev/pem/engine"
)

// busyJS blocks the page's main thread for ms milliseconds, starting right
// after the handler that calls it has returned (so the click's or submit's
// navigation has been requested first).
const busyJS = `setTimeout(() => { const end = performance.now() + %d; while (performance.now() < end); }, 0)`

// busyFor is how long /links keeps its main thread busy after a click or an
// Enter, and how long /slower-target takes to answer: longer than a click
// used to wait for anything (the page timeout of 1 s, then up to 2.5 s for a
// quiet DOM), so that the old code returned ok before the page changed.
const busyFor = 6 * time.Second

// tell sends s on c when c is not nil and has room.
func tell(c chan<- string, s string) {
	if c != nil {
		select {
		case c <- s:
		default:
		}
	}
}

// clickSite is busySite plus /links: links and forms whose click or Enter
// starts a navigation to a page that commits, to a 204, to a server slower
// than the page timeout, to a hash in the same document, with the page's
// own script busy for busyMs after the navigation was requested, and a
// button and a form that do not navigate.
func clickSite(slow chan<- string) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", busySite(nil))
	// A server that answers after everything a click waits for.
	mux.HandleFunc("/slower-target", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
			tell(slow, "cancelled")
			return
		case <-time.After(busyFor):
		}
		fmt.Fprintf(w, layout, "Slow target", `<h1 id="new">slow new page</h1>`)
		tell(slow, "answered")
	})
	busy := fmt.Sprintf(busyJS, busyFor.Milliseconds())
	form := func(id, action, extra string) string {
		return fmt.Sprintf(`<form id="f-%s" action="%s" method="get" %s><input id="q-%s" name="q"></form>`, id, action, extra, id)
	}
	body := `<h1 id="old">links page</h1>
<p><a id="to-target" href="/target">target</a> <a id="to-nocontent" href="/no-content">204</a>
<a id="to-slow" href="/slower-target">slow</a> <a id="to-hash" href="#sec">section</a>
<a id="download" href="/target" download="target.html">download</a> <a id="new-tab" href="/target" target="_blank">new tab</a>
<a id="busy-link" href="/target" onclick="` + busy + `">busy</a>
<button id="button" onclick="document.getElementById('out').textContent = 'clicked ' + (++window.n || (window.n = 1))">button</button></p>
<p id="out"></p>` +
		form("target", "/target", "") + form("nocontent", "/no-content", "") + form("slow", "/slower-target", "") +
		form("busy", "/target", `onsubmit="`+busy+`"`) +
		form("none", "/target", `onsubmit="document.getElementById('out').textContent = 'submitted ' + this.q.value; return false"`) +
		`<div style="height: 3000px"></div><h2 id="sec">section</h2>`
	mux.HandleFunc("/links", func(w http.ResponseWriter, r *http.Request) {
		// A link to the same server under another site's name: the
		// navigation moves to another renderer process.
		other := strings.Replace("http://"+r.Host, "127.0.0.1", "localhost", 1) + "/target"
		fmt.Fprintf(w, layout, "Links", body+fmt.Sprintf(`<p><a id="other-site" href="%s">other site</a></p>`, other))
	})
	return mux
}

// closeTabsAt closes, when the test ends, the shared browser's tabs whose
// URL starts with prefix (the tabs a target=_blank link opened).
func closeTabsAt(t *testing.T, prefix string) {
	t.Cleanup(func() {
		pages, _ := shared.b.Pages()
		for _, pg := range pages {
			if info, err := pg.Info(); err == nil && strings.HasPrefix(info.URL, prefix) {
				pg.Close()
			}
		}
	})
}

// clickAction is a click on a link or an Enter in a form of /links.
type clickAction struct {
	name string
	do   func(ctx context.Context, p *Page) error
}

func clickOn(sel string) clickAction {
	return clickAction{"click " + sel, func(ctx context.Context, p *Page) error { return p.Click(ctx, sel) }}
}

func enterIn(form string) clickAction {
	sel := "#q-" + form
	return clickAction{"enter in " + sel, func(ctx context.Context, p *Page) error {
		if err := p.Type(ctx, sel, "x"); err != nil {
			return err
		}
		return p.Press(ctx, sel, "Enter")
	}}
}

// where reads the tab's location and the text of its h1, in the page itself.
func where(ctx context.Context, p *Page) (href, h1 string) {
	href, _ = p.Evaluate(ctx, `location.href`)
	h1, _ = p.Evaluate(ctx, `document.querySelector("h1") ? document.querySelector("h1").textContent : ""`)
	return strings.Trim(href, `"`), strings.Trim(h1, `"`)
}

// TestClickNavigationLands: a click on a link or an Enter in a form that
// starts a navigation returns ok only on the new document — every read
// right after it sees the target — and a navigation that does not commit
// (a 204, a server slower than the page timeout) is an error naming the
// page the tab still shows, which it does, also later: the given-up
// navigation was stopped.
func TestClickNavigationLands(t *testing.T) {
	slow := make(chan string, 8)
	hs := httptest.NewServer(clickSite(slow))
	defer hs.Close()
	old := hs.URL + "/links"
	for _, c := range []struct {
		act    clickAction
		target string // "" when no page is shown: an error is required
	}{
		{clickOn("#to-target"), "/target"},
		{clickOn("#other-site"), "/target"},
		{enterIn("target"), "/target?q=x"},
		{clickOn("#to-nocontent"), ""},
		{enterIn("nocontent"), ""},
		{clickOn("#to-slow"), ""},
		{enterIn("slow"), ""},
	} {
		t.Run(c.act.name, func(t *testing.T) {
			ctx := context.Background()
			p := openAt(t, old, time.Second)
			err := c.act.do(ctx, p)
			href, h1 := where(ctx, p)
			if c.target != "" {
				want := hs.URL + c.target
				if c.act.name == "click #other-site" {
					want = strings.Replace(want, "127.0.0.1", "localhost", 1)
				}
				if err != nil || href != want || h1 != "new page" || p.URL() != href {
					t.Fatalf("%s = %v; then location %s, h1 %q, URL() %s; want ok on %s", c.act.name, err, href, h1, p.URL(), want)
				}
				return
			}
			if err == nil {
				t.Fatalf("%s returned ok, but no page was shown: location %s, h1 %q", c.act.name, href, h1)
			}
			t.Logf("%s: %v", c.act.name, err)
			if href != old || h1 != "links page" || !strings.Contains(err.Error(), "still shows "+old) {
				t.Errorf("the tab shows %s (h1 %q); the error must say it still shows %s: %v", href, h1, old, err)
			}
			if strings.Contains(c.act.name, "slow") {
				select {
				case how := <-slow:
					if how != "cancelled" {
						t.Errorf("the given-up navigation's request was %s, want cancelled", how)
					}
				case <-time.After(busyFor):
					t.Error("the slow server heard nothing of the given-up request")
				}
				if href, _ := where(ctx, p); href != old {
					t.Errorf("after the error the tab moved on to %s behind the caller's back", href)
				}
			}
			// The tab is usable afterwards.
			if err := p.Click(ctx, "#to-target"); err != nil {
				t.Errorf("a click after the failed one: %v", err)
			}
		})
	}
}

// TestClickNavigationBusyPage: when the old page's main thread is busy
// after the click or the Enter (its own script, or a listing of pem's that
// timed out), the action either lands on the target or is an error saying
// what the tab shows, and, if the tab may still change (a commit Chromium
// cannot stop), saying that too; never ok while the old document is shown.
func TestClickNavigationBusyPage(t *testing.T) {
	hs := httptest.NewServer(clickSite(nil))
	defer hs.Close()
	for _, c := range []struct {
		path   string
		act    clickAction
		target string
		busy   bool // the page's own script is busy after the action
	}{
		{"/links", clickOn("#busy-link"), "/target", true},
		{"/links", enterIn("busy"), "/target?q=x", true},
		{"/slow-list", clickOn(`a[href="/target?3"]`), "/target?3", false},
		{"/slow-list", enterIn("list"), "/target?q=x", false},
	} {
		t.Run(c.path+" "+c.act.name, func(t *testing.T) {
			ctx := context.Background()
			old := hs.URL + c.path
			p := openAt(t, old, time.Second)
			if !c.busy {
				if _, err := p.Elements(ctx, "", 0); err == nil {
					t.Fatal("Elements on /slow-list returned in time; the test needs it to time out")
				}
			}
			t0 := time.Now()
			err := c.act.do(ctx, p)
			href, h1 := where(ctx, p)
			if err == nil {
				if href != hs.URL+c.target || h1 != "new page" {
					t.Fatalf("%s returned ok, but location %s, h1 %q; want %s", c.act.name, href, h1, hs.URL+c.target)
				}
				return
			}
			t.Logf("%s: %v", c.act.name, err)
			if !strings.Contains(err.Error(), "still shows "+old) {
				t.Errorf("the error does not say the tab still shows %s: %v", old, err)
			}
			time.Sleep(busyFor - time.Since(t0) + 500*time.Millisecond) // the busy script has ended
			if later, _ := where(ctx, p); later != old && !strings.Contains(err.Error(), "may still replace it") {
				t.Errorf("after the error the tab moved on to %s, and the error did not say it might", later)
			}
		})
	}
}

// TestClickNoNavigation: a click on a hash link stays in the document (its
// URL follows), and a download link, a link that opens another tab, a
// button and a form whose submit is cancelled do not navigate this tab: the
// action returns ok and the page is as the handler left it.
func TestClickNoNavigation(t *testing.T) {
	hs := httptest.NewServer(clickSite(nil))
	defer hs.Close()
	ctx := context.Background()
	p := openAt(t, hs.URL+"/links", time.Second)
	p.Evaluate(ctx, `window.mark = "same document"`)
	if err := p.Click(ctx, "#to-hash"); err != nil {
		t.Fatalf("click on a hash link: %v", err)
	}
	if href, _ := where(ctx, p); href != hs.URL+"/links#sec" || p.URL() != href {
		t.Errorf("after the hash link: location %s, URL() %s", href, p.URL())
	}
	closeTabsAt(t, hs.URL+"/target") // the tab #new-tab opens
	if err := enterIn("none").do(ctx, p); err != nil {
		t.Fatal(err)
	}
	out, _ := p.Text(ctx, "#out")
	mark, _ := p.Evaluate(ctx, `window.mark`)
	// #new-tab brings the tab it opens to the front; a click in this tab
	// after it is TestInputInBackgroundTab's.
	for _, sel := range []string{"#download", "#button", "#new-tab"} {
		if err := p.Click(ctx, sel); err != nil {
			t.Fatalf("click %s: %v", sel, err)
		}
		if href, _ := where(ctx, p); href != hs.URL+"/links#sec" {
			t.Errorf("after clicking %s the tab shows %s, want it to stay on /links#sec", sel, href)
		}
	}
	out2, _ := p.Text(ctx, "#out")
	mark2, _ := p.Evaluate(ctx, `window.mark`)
	if out != "submitted x" || out2 != "clicked 1" || mark != `"same document"` || mark2 != mark {
		t.Errorf("#out = %q after the Enter, %q after the clicks, window.mark = %s, %s; want the handlers' results in the same document", out, out2, mark, mark2)
	}
}

// TestExecClickNoPage: the agent's click and type-and-submit tools report a
// navigation that showed no page as a failed step (Success false, the
// error saying what the tab shows), which the run records as failed; a
// timed-out one is of kind timeout.
func TestExecClickNoPage(t *testing.T) {
	hs := httptest.NewServer(clickSite(nil))
	defer hs.Close()
	ctx := context.Background()
	p := openAt(t, hs.URL+"/links", time.Second)
	for _, c := range []struct {
		a    agent.Action
		kind string
	}{
		{agent.Action{Tool: "click", Selector: "#to-nocontent"}, ""},
		{agent.Action{Tool: "type", Selector: "#q-slow", Value: "x", Submit: true}, engine.KindTimeout},
	} {
		r := agent.Exec(ctx, p, c.a, "")
		if r.Error == "" || r.Success == nil || *r.Success || !strings.Contains(r.Error, "still shows "+hs.URL+"/links") {
			t.Errorf("Exec(%+v) = %+v; want a failure saying the tab still shows /links", c.a, r)
		}
		if k := agent.KindOf(r.Error); k != c.kind {
			t.Errorf("Exec(%+v): error kind %q, want %q (%s)", c.a, k, c.kind, r.Error)
		}
	}
	if r := agent.Exec(ctx, p, agent.Action{Tool: "click", Selector: "#to-target"}, ""); r.Error != "" || !strings.Contains(r.ExtractedContent, "now at "+hs.URL+"/target") {
		t.Errorf("Exec(click #to-target) = %+v", r)
	}
}
