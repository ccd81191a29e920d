package rod

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// busySite serves pages that keep the renderer's main thread busy past the
// adapter's timeout, and a plain page to navigate to afterwards. slow, when
// not nil, is told how each request for /slow-target ended: "cancelled" (the
// browser gave it up) or "answered".
func busySite(slow chan<- string) http.Handler {
	tell := func(s string) {
		if slow != nil {
			select {
			case slow <- s:
			default:
			}
		}
	}
	mux := http.NewServeMux()
	serve := func(path, title, body string) {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, layout, title, body)
		})
	}
	// Every style lookup costs 100 ms: listing its 100 links takes ~10 s,
	// as listing a huge page does on a loaded machine.
	var links strings.Builder
	for i := 0; i < 100; i++ {
		fmt.Fprintf(&links, `<a href="/target?%d">link %d</a> `, i, i)
	}
	serve("/slow-list", "Slow list", `<h1 id="old">old page</h1>`+links.String()+`<form action="/target"><input id="q-list" name="q"></form><script>
const gcs = window.getComputedStyle;
window.getComputedStyle = function (el) { const end = performance.now() + 100; while (performance.now() < end); return gcs.apply(this, arguments) };
</script>`)
	// The page's own script blocks the main thread for 8 s, 100 ms after load.
	serve("/busy", "Busy", `<h1 id="old">old page</h1><script>
window.addEventListener("load", () => setTimeout(() => { const end = performance.now() + 8000; while (performance.now() < end); }, 100));
</script>`)
	serve("/target", "Target", `<h1 id="new">new page</h1>`)
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/target?from=redirect", http.StatusFound)
	})
	// No document to commit: the tab keeps the old one.
	mux.HandleFunc("/no-content", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	// A server that answers after the page timeout.
	mux.HandleFunc("/slow-target", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
			tell("cancelled")
			return
		case <-time.After(3 * time.Second):
		}
		fmt.Fprintf(w, layout, "Slow target", `<h1 id="new">slow new page</h1>`)
		tell("answered")
	})
	return mux
}

// TestNavigateAfterBusyPage: a navigation that returns ok is on the new page.
// When the old page's main thread is still busy (a listing that timed out but
// kept running in the page, or the page's own long script), Navigate either
// lands on the target — location and content are the target's — or returns
// an error that says what happened; never ok while the old document stays.
func TestNavigateAfterBusyPage(t *testing.T) {
	hs := httptest.NewServer(busySite(nil))
	defer hs.Close()
	bs := hs.URL
	for _, tc := range []struct {
		name, path string
		busy       func(ctx context.Context, p *Page) error
	}{
		{"timed-out listing", "/slow-list", func(ctx context.Context, p *Page) error {
			_, err := p.Elements(ctx, "", 0)
			if err == nil {
				return fmt.Errorf("Elements on /slow-list returned in time; the test needs it to time out")
			}
			return nil
		}},
		{"page's own long script", "/busy", func(ctx context.Context, p *Page) error {
			time.Sleep(300 * time.Millisecond) // the page's loop has started
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			p := openAt(t, bs+tc.path, time.Second)
			if err := tc.busy(ctx, p); err != nil {
				t.Fatal(err)
			}
			target := bs + "/target"
			err := p.Navigate(ctx, target)
			if err != nil {
				t.Logf("Navigate returned an error (allowed if it says what happened): %v", err)
				if !strings.Contains(err.Error(), target) {
					t.Errorf("the error does not name the target: %v", err)
				}
				return
			}
			// ok: the page must be the target.
			href, herr := p.Evaluate(ctx, `location.href`)
			h1, terr := p.Text(ctx, "h1")
			if herr != nil || href != fmt.Sprintf("%q", target) || terr != nil || h1 != "new page" {
				t.Errorf("Navigate(%s) returned ok, but location.href = %s (%v), h1 = %q (%v)", target, href, herr, h1, terr)
			}
		})
	}
}

// TestNavigateNoCommit: a navigation that commits no new document within
// the page timeout (a 204, a server that has not answered) is an error that
// names the target and the page the tab still shows, never ok on the old page.
func TestNavigateNoCommit(t *testing.T) {
	slow := make(chan string, 4)
	hs := httptest.NewServer(busySite(slow))
	defer hs.Close()
	for _, path := range []string{"/no-content", "/slow-target"} {
		t.Run(path, func(t *testing.T) {
			ctx := context.Background()
			p := openAt(t, hs.URL+"/target", time.Second)
			old := hs.URL + "/target"
			err := p.Navigate(ctx, hs.URL+path)
			href, herr := p.Evaluate(ctx, `location.href`)
			if err == nil {
				if href != fmt.Sprintf("%q", hs.URL+path) {
					t.Errorf("Navigate(%s) returned ok, but location.href = %s (%v)", path, href, herr)
				}
				return
			}
			t.Logf("Navigate(%s): %v", path, err)
			if !strings.Contains(err.Error(), hs.URL+path) {
				t.Errorf("the error does not name the target: %v", err)
			}
			if href == fmt.Sprintf("%q", old) && !strings.Contains(err.Error(), "still shows "+old) {
				t.Errorf("the tab shows %s, the error does not say so: %v", old, err)
			}
			if path == "/slow-target" {
				// The navigation given up was stopped: the browser cancelled the
				// request rather than waiting for the page (which would then
				// have replaced the one the error says the tab shows).
				select {
				case how := <-slow:
					if how != "cancelled" {
						t.Errorf("the given-up navigation's request was %s, want cancelled", how)
					}
				case <-time.After(5 * time.Second):
					t.Error("the slow server heard nothing of the given-up request")
				}
			}
			// The tab is usable afterwards.
			if err := p.Navigate(ctx, hs.URL+"/target"); err != nil {
				t.Errorf("Navigate after the failed one: %v", err)
			}
		})
	}
}

// TestTimedOutReadIsStopped: a listing or an Evaluate that times out does
// not keep running in the page (it is stopped), so the page answers the
// next read within the timeout; with the script left running the read
// below timed out.
func TestTimedOutReadIsStopped(t *testing.T) {
	hs := httptest.NewServer(busySite(nil))
	defer hs.Close()
	ctx := context.Background()
	p := openAt(t, hs.URL+"/slow-list", time.Second)
	if _, err := p.Elements(ctx, "", 0); err == nil {
		t.Fatal("Elements on /slow-list returned in time; the test needs it to time out")
	}
	if got, err := p.Text(ctx, "#old"); err != nil || got != "old page" {
		t.Errorf("Text(#old) after the timed-out listing = %q, %v", got, err)
	}
	_, err := p.Evaluate(ctx, `() => { while (true); }`)
	if err == nil || !strings.Contains(err.Error(), "stopped") {
		t.Errorf("Evaluate(endless loop) = %v, want an error saying the script was stopped", err)
	}
	if got, err := p.Evaluate(ctx, `document.title`); err != nil || got != `"Slow list"` {
		t.Errorf("Evaluate(document.title) after the stopped loop = %s, %v", got, err)
	}
}

// TestNavigateCommitKinds: the commit wait knows a server redirect (the
// redirect target commits under the navigation's loader), a same-document
// navigation (no new document) and about:blank and data: URLs.
func TestNavigateCommitKinds(t *testing.T) {
	hs := httptest.NewServer(busySite(nil))
	defer hs.Close()
	ctx := context.Background()
	p := openAt(t, "", 0)
	for _, c := range []struct{ url, href, h1 string }{
		{hs.URL + "/redirect", hs.URL + "/target?from=redirect", "new page"},
		{hs.URL + "/target?from=redirect#new", hs.URL + "/target?from=redirect#new", "new page"},
		{"about:blank", "about:blank", ""},
		{"data:text/html,<h1>data page</h1>", "data:text/html,<h1>data page</h1>", "data page"},
		{hs.URL + "/target", hs.URL + "/target", "new page"},
	} {
		if err := p.Navigate(ctx, c.url); err != nil {
			t.Errorf("Navigate(%s): %v", c.url, err)
			continue
		}
		href, err := p.Evaluate(ctx, `location.href`)
		if err != nil || href != fmt.Sprintf("%q", c.href) || p.URL() != c.href {
			t.Errorf("Navigate(%s): location.href = %s (%v), URL() = %s, want %s", c.url, href, err, p.URL(), c.href)
		}
		if h1, _ := p.Evaluate(ctx, `document.querySelector("h1") ? document.querySelector("h1").textContent : ""`); h1 != fmt.Sprintf("%q", c.h1) {
			t.Errorf("Navigate(%s): h1 = %s, want %q", c.url, h1, c.h1)
		}
	}
}
