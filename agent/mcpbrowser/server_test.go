package mcpbrowser_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pemdev/pem/agent"
	"github.com/pemdev/pem/agent/mcpbrowser"
	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/engine/mcp"
	"github.com/pemdev/pem/store"
)

// In-process tests of the rules the binary tests cannot see cheaply, over
// a fake browser whose pages return oversized content: one browser for
// every session, launched at the first browser call; a page per session;
// every output bounded.

type fakeBrowser struct {
	mu    sync.Mutex
	pages []*fakePage
}

func (b *fakeBrowser) NewPage(context.Context) (agent.Page, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := &fakePage{url: "about:blank"}
	b.pages = append(b.pages, p)
	return p, nil
}

func (b *fakeBrowser) Close() error { return nil }

type fakePage struct {
	mu     sync.Mutex
	url    string
	closed bool
}

func (p *fakePage) Navigate(_ context.Context, u string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.url = u
	return nil
}
func (p *fakePage) URL() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.url
}
func (p *fakePage) Title(context.Context) (string, error)                { return "Fake", nil }
func (p *fakePage) Click(context.Context, string) error                  { return nil }
func (p *fakePage) Type(context.Context, string, string) error           { return nil }
func (p *fakePage) Press(context.Context, string, string) error          { return nil }
func (p *fakePage) Exists(context.Context, string) (bool, error)         { return true, nil }
func (p *fakePage) Scroll(context.Context, int) error                    { return nil }
func (p *fakePage) Labelled(context.Context) ([]agent.LabelValue, error) { return nil, nil }
func (p *fakePage) WaitFor(context.Context, string, time.Duration) error { return nil }
func (p *fakePage) Screenshot(context.Context) ([]byte, string, error) {
	return []byte("\x89PNG fake"), "image/png", nil
}
func (p *fakePage) Text(context.Context, string) (string, error) {
	return strings.Repeat("long text ", 5000), nil // 50,000 characters
}
func (p *fakePage) Evaluate(context.Context, string) (string, error) {
	return `"` + strings.Repeat("x", 30000) + `"`, nil
}
func (p *fakePage) Elements(_ context.Context, _ string, limit int) ([]agent.Element, error) {
	var out []agent.Element
	for i := 0; i < 1000 && i < limit; i++ {
		out = append(out, agent.Element{Selector: fmt.Sprintf("#e%d", i), Tag: "a", Text: strings.Repeat("label ", 30), Visible: true})
	}
	return out, nil
}
func (p *fakePage) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	return nil
}

type fixture struct {
	srv      *mcpbrowser.Server
	server   *sdk.Server
	eng      *engine.Engine
	browser  *fakeBrowser
	launches atomic.Int32
}

func newFixture(t *testing.T, idle time.Duration) *fixture {
	t.Helper()
	dir := t.TempDir() + "/knowledge"
	if _, err := store.Init(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := &fixture{eng: engine.New(st), browser: &fakeBrowser{}}
	f.srv = mcpbrowser.New(mcpbrowser.Options{Engine: f.eng, IdleTimeout: idle,
		Launch: func(context.Context) (agent.Browser, error) { f.launches.Add(1); return f.browser, nil }})
	f.server = mcp.NewServer(f.eng, &mcp.Options{Register: f.srv.Register})
	t.Cleanup(func() { f.srv.Close(context.Background()) })
	return f
}

// session connects one more client to the fixture's server.
func (f *fixture) session(t *testing.T) *sdk.ClientSession {
	t.Helper()
	ct, st := sdk.NewInMemoryTransports()
	if _, err := f.server.Connect(context.Background(), st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, nil).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func (f *fixture) traces(t *testing.T) []*engine.Trace {
	t.Helper()
	refs, err := f.eng.Store.TraceRefs(context.Background(), "example.com")
	if err != nil {
		t.Fatal(err)
	}
	var out []*engine.Trace
	for _, r := range refs {
		tr, err := f.eng.Store.Trace(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, tr)
	}
	return out
}

func TestSharedBrowserLaunchedLazily(t *testing.T) {
	f := newFixture(t, -1)
	a, b := f.session(t), f.session(t)
	if res := call(t, a, "experience_list", map[string]any{}); res.IsError || f.launches.Load() != 0 {
		t.Fatalf("experience_list launched the browser (%d launches) or failed: %s", f.launches.Load(), text(res))
	}
	okCall(t, a, "browser_navigate", map[string]any{"url": "https://example.com/a", "intent": "read a"})
	okCall(t, b, "browser_navigate", map[string]any{"url": "https://example.com/b", "intent": "read b"})
	okCall(t, a, "browser_get_text", nil)
	if n := f.launches.Load(); n != 1 {
		t.Errorf("%d browser launches for two sessions, want 1", n)
	}
	if len(f.browser.pages) != 2 || f.browser.pages[0].URL() != "https://example.com/a" || f.browser.pages[1].URL() != "https://example.com/b" {
		t.Errorf("pages: %d, want one per session", len(f.browser.pages))
	}
	okCall(t, a, "browser_done", map[string]any{"answer": "x"})
	okCall(t, b, "browser_done", map[string]any{"success": false, "error": "gave up"})
	ts := f.traces(t)
	if len(ts) != 2 || ts[0].Session == ts[1].Session {
		t.Fatalf("traces: %d, want 2 from distinct sessions", len(ts))
	}
	for _, tr := range ts {
		switch tr.Intent {
		case "read a":
			if len(tr.Steps) != 2 || tr.Outcome != engine.Success {
				t.Errorf("session a's trace: %+v", tr)
			}
		case "read b":
			if len(tr.Steps) != 1 || tr.Outcome != engine.Failure || tr.Error != "gave up" {
				t.Errorf("session b's trace: %+v", tr)
			}
		default:
			t.Errorf("unexpected trace %q", tr.Intent)
		}
	}
}

func TestOutputsBounded(t *testing.T) {
	f := newFixture(t, -1)
	cs := f.session(t)
	okCall(t, cs, "browser_navigate", map[string]any{"url": "https://example.com/", "intent": "bounds"})
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"browser_get_text", nil},
		{"browser_evaluate", map[string]any{"expression": "document.body.innerHTML"}},
		{"browser_get_elements", map[string]any{"limit": 200}},
		{"browser_get_elements", nil},
	} {
		r, _ := okCall(t, cs, c.tool, c.args)
		if n := utf8.RuneCountInString(r.ExtractedContent); n > agent.MaxTextChars+100 {
			t.Errorf("%s %v: %d characters, over the bound %d", c.tool, c.args, n, agent.MaxTextChars)
		}
		if len(r.LongTermMemory) > 300 {
			t.Errorf("%s: long-term memory of %d bytes", c.tool, len(r.LongTermMemory))
		}
	}
	if r, _ := okCall(t, cs, "browser_get_elements", nil); strings.Count(r.ExtractedContent, "\n") != agent.DefaultElementLimit {
		t.Errorf("default element limit: %d lines", strings.Count(r.ExtractedContent, "\n"))
	}
	if res := call(t, cs, "browser_get_elements", map[string]any{"limit": 5000}); !res.IsError || decode(t, res).Kind != "invalid_arguments" {
		t.Errorf("limit 5000: %s", text(res))
	}
	if res := call(t, cs, "browser_wait", map[string]any{"duration": 3600000}); !res.IsError {
		t.Errorf("an hour's wait was accepted: %s", text(res))
	}
}

func TestIdleDeposit(t *testing.T) {
	f := newFixture(t, 150*time.Millisecond)
	cs := f.session(t)
	okCall(t, cs, "browser_navigate", map[string]any{"url": "https://example.com/", "intent": "idle"})
	okCall(t, cs, "browser_scroll", nil)
	var ts []*engine.Trace
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end) && len(ts) == 0; time.Sleep(20 * time.Millisecond) {
		ts = f.traces(t)
	}
	if len(ts) != 1 || len(ts[0].Steps) != 2 || ts[0].FailureCategory != engine.Aborted {
		t.Fatalf("idle deposit: %d traces %+v", len(ts), ts)
	}
	// Nothing more to deposit: a second idle period leaves no trace.
	time.Sleep(400 * time.Millisecond)
	if n := len(f.traces(t)); n != 1 {
		t.Errorf("%d traces after a second idle period, want 1", n)
	}
	// browser_done with nothing recorded since is an error, not a trace.
	if res := call(t, cs, "browser_done", map[string]any{"answer": "x"}); !res.IsError || decode(t, res).Kind != "nothing_to_save" {
		t.Errorf("done after the idle deposit: %s", text(res))
	}
	// A page tool before any navigation in a fresh session.
	other := f.session(t)
	if res := call(t, other, "browser_click", map[string]any{"selector": "#x"}); !res.IsError || decode(t, res).Kind != "no_page" {
		t.Errorf("click before navigation: %s", text(res))
	}
}

// Typing into a password field: never echoed, redacted in the trace.
func TestPasswordRedacted(t *testing.T) {
	f := newFixture(t, -1)
	cs := f.session(t)
	const secret = "hunter2-correct-horse"
	okCall(t, cs, "browser_navigate", map[string]any{"url": "https://example.com/login", "intent": "sign in"})
	r, res := okCall(t, cs, "browser_type", map[string]any{"selector": "#password", "text": secret, "submit": true})
	if strings.Contains(text(res), secret) || strings.Contains(r.LongTermMemory, secret) {
		t.Errorf("the typed password is echoed: %s", text(res))
	}
	okCall(t, cs, "browser_done", map[string]any{"success": false, "error": "wrong password"})
	ts := f.traces(t)
	if len(ts) != 1 {
		t.Fatalf("%d traces", len(ts))
	}
	b, _ := json.Marshal(ts[0])
	if strings.Contains(string(b), secret) {
		t.Errorf("the password is in the trace: %s", b)
	}
	if st := ts[0].Steps[1]; st.Action != "type" || st.Value != engine.Redacted || ts[0].Steps[2].Action != "press" {
		t.Errorf("typed step: %+v (steps %+v)", st, ts[0].Steps)
	}
}
