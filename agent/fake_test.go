package agent

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"
)

// A fake Browser over a tiny in-memory site (the store is storetest.MemStore),
// for testing the run loop without Chromium or a disk tree.

// fakeSite is a set of pages keyed by path ("/", "/issues", …). Element
// selectors are plain strings matched exactly.
type fakeSite struct {
	mu    sync.Mutex
	pages map[string]*sitePage
	// typed records every value typed into any page, for secret checks.
	typed []string
	// onNavigate, when set, runs before each navigation (cancellation tests).
	onNavigate func(ctx context.Context, u string) error
	calls      []string
}

type sitePage struct {
	title  string
	els    []siteEl
	labels []LabelValue
	text   string
	// search: the path Enter in a field leads to, with ?q=<typed value>.
	search string
}

type siteEl struct {
	Element
	to     string // a link's or button's target path
	hidden bool
}

func (s *fakeSite) page(path string) *sitePage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pages[path]
}

func (s *fakeSite) call(c string) {
	s.mu.Lock()
	s.calls = append(s.calls, c)
	s.mu.Unlock()
}

func (s *fakeSite) countCalls(prefix string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.calls {
		if strings.HasPrefix(c, prefix) {
			n++
		}
	}
	return n
}

type fakeBrowser struct {
	site   *fakeSite
	base   string // e.g. http://fake.test:8080
	mu     sync.Mutex
	opened int
	closed int
}

func (b *fakeBrowser) NewPage(ctx context.Context) (Page, error) {
	b.mu.Lock()
	b.opened++
	b.mu.Unlock()
	return &fakeTab{b: b, url: "about:blank"}, nil
}

func (b *fakeBrowser) Close() error { return nil }

type fakeTab struct {
	b      *fakeBrowser
	mu     sync.Mutex
	url    string
	fields map[string]string
}

func (t *fakeTab) cur() (*sitePage, string) {
	t.mu.Lock()
	u := t.url
	t.mu.Unlock()
	pu, err := url.Parse(u)
	if err != nil {
		return nil, ""
	}
	return t.b.site.page(pu.Path), pu.RawQuery
}

func (t *fakeTab) Navigate(ctx context.Context, u string) error {
	t.b.site.call("navigate " + u)
	if f := t.b.site.onNavigate; f != nil {
		if err := f(ctx, u); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("navigate %s: %w", u, err)
	}
	pu, err := url.Parse(u)
	if err != nil || !strings.HasPrefix(u, t.b.base) {
		return fmt.Errorf("navigate %s: net::ERR_NAME_NOT_RESOLVED", u)
	}
	if t.b.site.page(pu.Path) == nil {
		return fmt.Errorf("navigate %s: net::ERR_CONNECTION_REFUSED (no page)", u)
	}
	t.mu.Lock()
	t.url = u
	t.fields = nil
	t.mu.Unlock()
	return nil
}

func (t *fakeTab) URL() string { t.mu.Lock(); defer t.mu.Unlock(); return t.url }

func (t *fakeTab) Title(ctx context.Context) (string, error) {
	p, _ := t.cur()
	if p == nil {
		return "", nil
	}
	return p.title, nil
}

func (t *fakeTab) find(sel string) (*siteEl, error) {
	p, _ := t.cur()
	if p != nil {
		for i := range p.els {
			if p.els[i].Selector == sel {
				return &p.els[i], nil
			}
		}
	}
	return nil, fmt.Errorf("%q on %s: %w", sel, t.URL(), ErrNoElement)
}

func (t *fakeTab) Click(ctx context.Context, sel string) error {
	t.b.site.call("click " + sel)
	e, err := t.find(sel)
	if err != nil {
		return fmt.Errorf("click %w", err)
	}
	if e.hidden {
		return fmt.Errorf("click %q: not visible", sel)
	}
	if e.to != "" {
		return t.Navigate(ctx, t.b.base+e.to)
	}
	return nil
}

func (t *fakeTab) Type(ctx context.Context, sel, text string) error {
	t.b.site.call("type " + sel)
	if _, err := t.find(sel); err != nil {
		return fmt.Errorf("type into %w", err)
	}
	t.b.site.mu.Lock()
	t.b.site.typed = append(t.b.site.typed, text)
	t.b.site.mu.Unlock()
	t.mu.Lock()
	if t.fields == nil {
		t.fields = map[string]string{}
	}
	t.fields[sel] = text
	t.mu.Unlock()
	return nil
}

func (t *fakeTab) Press(ctx context.Context, sel, key string) error {
	t.b.site.call("press " + sel)
	if _, err := t.find(sel); err != nil {
		return fmt.Errorf("press %w", err)
	}
	p, _ := t.cur()
	if key == "Enter" && p.search != "" {
		t.mu.Lock()
		v := t.fields[sel]
		t.mu.Unlock()
		e, _ := t.find(sel)
		if e.Type == "password" {
			return t.Navigate(ctx, t.b.base+p.search)
		}
		return t.Navigate(ctx, t.b.base+p.search+"?q="+url.QueryEscape(v))
	}
	return nil
}

func (t *fakeTab) Text(ctx context.Context, sel string) (string, error) {
	p, q := t.cur()
	if p == nil {
		return "", nil
	}
	if sel == "" {
		var b strings.Builder
		b.WriteString(p.title + "\n")
		for _, e := range p.els {
			b.WriteString(e.Text + "\n")
		}
		for _, lv := range p.labels {
			b.WriteString(lv.Label + ": " + lv.Value + "\n")
		}
		b.WriteString(strings.ReplaceAll(p.text, "{q}", queryValue(q)))
		return b.String(), nil
	}
	for _, lv := range p.labels {
		if lv.Selector == sel {
			return lv.Value, nil
		}
	}
	e, err := t.find(sel)
	if err != nil {
		return "", fmt.Errorf("text of %w", err)
	}
	return e.Text, nil
}

func queryValue(raw string) string {
	v, _ := url.ParseQuery(raw)
	return v.Get("q")
}

func (t *fakeTab) Exists(ctx context.Context, sel string) (bool, error) {
	t.b.site.call("exists " + sel)
	for _, lv := range t.labels() {
		if lv.Selector == sel {
			return true, nil
		}
	}
	e, err := t.find(sel)
	if err != nil {
		return false, fmt.Errorf("exists %w", err)
	}
	return !e.hidden, nil
}

func (t *fakeTab) labels() []LabelValue {
	p, q := t.cur()
	if p == nil {
		return nil
	}
	out := make([]LabelValue, len(p.labels))
	for i, lv := range p.labels {
		lv.Value = strings.ReplaceAll(lv.Value, "{q}", queryValue(q))
		out[i] = lv
	}
	return out
}

func (t *fakeTab) Elements(ctx context.Context, sel string, limit int) ([]Element, error) {
	t.b.site.call("elements")
	p, _ := t.cur()
	if p == nil {
		return nil, nil
	}
	var out []Element
	for _, e := range p.els {
		el := e.Element
		el.Visible = !e.hidden
		if el.Href == "" && e.to != "" && el.Tag == "a" {
			el.Href = e.to
		}
		out = append(out, el)
	}
	return out, nil
}

func (t *fakeTab) Labelled(ctx context.Context) ([]LabelValue, error) {
	t.b.site.call("labelled")
	return t.labels(), nil
}

func (t *fakeTab) Evaluate(ctx context.Context, js string) (string, error) {
	return "null", nil
}
func (t *fakeTab) Scroll(ctx context.Context, dy int) error { return nil }
func (t *fakeTab) WaitFor(ctx context.Context, sel string, d time.Duration) error {
	return nil
}
func (t *fakeTab) Screenshot(ctx context.Context) ([]byte, string, error) {
	return []byte("\x89PNG fake"), "image/png", nil
}
func (t *fakeTab) Close() error {
	t.b.mu.Lock()
	t.b.closed++
	t.b.mu.Unlock()
	return nil
}
