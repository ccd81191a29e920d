package rod

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/pemdev/pem/agent"
	"github.com/pemdev/pem/engine"
)

// busyInputSite serves a page that is busy from its load on (/busy of
// busySite), and controls whose own input handlers keep the main thread busy
// far past the page timeout: a button on mousedown, a field on keydown.
func busyInputSite() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", busySite(nil))
	loop := fmt.Sprintf(`const end = performance.now() + %d; while (performance.now() < end);`, busyFor.Milliseconds())
	mux.HandleFunc("/handlers", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, layout, "Handlers", `<h1 id="old">handlers</h1>
<button id="b" onmousedown="`+loop+`">busy button</button>
<input id="q" onkeydown="`+loop+`">`)
	})
	return mux
}

// TestBusyPageLookupIsNotAbsence: a lookup on a page whose main thread is
// busy past the timeout says the page did not answer (a timeout, the timing
// category), never that nothing matches: "no element" is the route's fault
// (selector_drift) and would count against a route for the page's own
// slowness. On an idle page a missing element is still ErrNoElement.
func TestBusyPageLookupIsNotAbsence(t *testing.T) {
	hs := httptest.NewServer(busyInputSite())
	defer hs.Close()
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		act  func(p *Page) error
	}{
		{"click", func(p *Page) error { return p.Click(ctx, "#old") }},
		{"wait for", func(p *Page) error { return p.WaitFor(ctx, "#old", 500*time.Millisecond) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := openAt(t, hs.URL+"/busy", time.Second)
			time.Sleep(300 * time.Millisecond) // the page's 8 s loop has started
			err := tc.act(p)
			if err == nil {
				t.Fatalf("%s on a page busy for 8 s returned ok within a 1 s timeout", tc.name)
			}
			if errors.Is(err, agent.ErrNoElement) {
				t.Errorf("a busy page was reported as a missing element: %v", err)
			}
			if k := agent.KindOf(err.Error()); k != engine.KindTimeout {
				t.Errorf("kind of %q = %q, want %q", err, k, engine.KindTimeout)
			}
			if !strings.Contains(err.Error(), "did not answer") || !strings.Contains(err.Error(), hs.URL+"/busy") {
				t.Errorf("the error does not say the page did not answer, or which page: %v", err)
			}
		})
	}
	t.Run("idle page, missing element", func(t *testing.T) {
		p := openAt(t, hs.URL+"/target", 500*time.Millisecond)
		err := p.Click(ctx, "#missing")
		if !errors.Is(err, agent.ErrNoElement) {
			t.Errorf("a missing element on an idle page: %v, want ErrNoElement", err)
		}
	})
}

// TestBusyInputHandlerIsBounded: a click or a key whose handler keeps the
// page busy returns within the page timeout with an error that says the page
// did not take the input; rod's Mouse and Keyboard had no deadline (they
// send on the page they were made for), so the call waited for the handler
// — forever for a hung one, deaf to the run's context.
func TestBusyInputHandlerIsBounded(t *testing.T) {
	hs := httptest.NewServer(busyInputSite())
	defer hs.Close()
	for _, tc := range []struct {
		name string
		act  func(ctx context.Context, p *Page) error
	}{
		{"click", func(ctx context.Context, p *Page) error { return p.Click(ctx, "#b") }},
		{"press", func(ctx context.Context, p *Page) error { return p.Press(ctx, "#q", "a") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := openAt(t, hs.URL+"/handlers", time.Second)
			done := make(chan error, 1)
			go func() { done <- tc.act(context.Background(), p) }()
			var err error
			select {
			case err = <-done:
			case <-time.After(busyFor - time.Second):
				// Not a timing assertion: the handler runs for busyFor, so
				// still waiting here means the call waits for the handler.
				t.Fatalf("%s waited for the page's busy handler (%s) instead of its 1 s timeout", tc.name, busyFor)
			}
			if err == nil {
				t.Fatalf("%s into a handler busy for %s returned ok within a 1 s timeout", tc.name, busyFor)
			}
			if !strings.Contains(err.Error(), "did not take the input") {
				t.Errorf("the error does not say the page did not take the input: %v", err)
			}
			if k := agent.KindOf(err.Error()); k != engine.KindTimeout {
				t.Errorf("kind of %q = %q, want %q", err, k, engine.KindTimeout)
			}
		})
	}
}

// TestInputInBackgroundTab: clicks and key presses reach a tab that is not
// the browser's front one — an older tab while a newer one is open (runs in
// parallel share one browser), or the agent's own tab after a target=_blank
// link brought the new one to the front — also when tabs send input at the
// same time. Chromium held a background tab's input ~5 s, so with the page
// timeout (3 s here) every such click failed before tabs were brought to the
// front for their input.
func TestInputInBackgroundTab(t *testing.T) {
	hs := httptest.NewServer(clickSite(nil))
	defer hs.Close()
	ctx := context.Background()
	old := openAt(t, hs.URL+"/links", 3*time.Second)
	newer := openAt(t, hs.URL+"/links", 3*time.Second) // the front tab now
	closeTabsAt(t, hs.URL+"/target")                   // the tab #new-tab opens
	if err := old.Click(ctx, "#button"); err != nil {
		t.Fatalf("click in the older tab: %v", err)
	}
	if err := old.Type(ctx, "#q-none", "x"); err != nil {
		t.Fatal(err)
	}
	if err := old.Press(ctx, "#q-none", "Enter"); err != nil {
		t.Fatalf("Enter in the older tab: %v", err)
	}
	if out, err := old.Text(ctx, "#out"); err != nil || out != "submitted x" {
		t.Errorf("#out in the older tab = %q (%v), want the form's handler to have run", out, err)
	}
	if err := newer.Click(ctx, "#new-tab"); err != nil { // a third tab comes to the front
		t.Fatal(err)
	}
	const n = 4
	errs := make(chan error, 2*n)
	for _, p := range []*Page{old, newer} {
		go func() {
			for range n {
				errs <- p.Click(ctx, "#button")
			}
		}()
	}
	for range 2 * n {
		if err := <-errs; err != nil {
			t.Errorf("a click while two tabs click at once: %v", err)
		}
	}
	for name, want := range map[*Page]string{old: fmt.Sprintf("clicked %d", n+1), newer: fmt.Sprintf("clicked %d", n)} {
		if out, err := name.Text(ctx, "#out"); err != nil || out != want {
			t.Errorf("#out = %q (%v), want %q: every click landed once in its own tab", out, err, want)
		}
	}
}
