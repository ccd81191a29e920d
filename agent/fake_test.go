package agent

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pemdev/pem/engine"
)

// A fake Browser over a tiny in-memory site, and an in-memory engine.Store,
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

// memStore is an in-memory engine.Store.
type memStore struct {
	mu     sync.Mutex
	traces map[string]*engine.Trace // id → trace
	facts  map[string]*engine.Facts // domain/key → facts
	exp    map[string]*engine.Experience
	lock   chan struct{}
	fail   error // when set, PutTrace fails with it
}

func newMemStore() *memStore {
	return &memStore{traces: map[string]*engine.Trace{}, facts: map[string]*engine.Facts{},
		exp: map[string]*engine.Experience{}, lock: make(chan struct{}, 1)}
}

// Config is the default policy except a ladder that trusts one run
// (first_success_confidence 0.65, p2_sessions 1), so that one cold run earns
// the replay these unit tests exercise; the ladder itself is engine's, and
// the e2e tests climb it with the default policy.
func (m *memStore) Config(ctx context.Context) (engine.Config, error) {
	c := engine.DefaultConfig()
	c.Policy.FirstSuccessConfidence, c.Policy.P2Sessions = 0.65, 1
	return c, nil
}

func (m *memStore) PutTrace(ctx context.Context, t *engine.Trace) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return "", m.fail
	}
	if _, ok := m.traces[t.ID]; ok {
		return "", engine.ErrExists
	}
	c := *t
	m.traces[t.ID] = &c
	return "traces/" + t.Domain + "/" + t.StartedAt.Format("2006-01-02") + "/" + t.ID + ".yaml", nil
}

func (m *memStore) Trace(ctx context.Context, ref engine.TraceRef) (*engine.Trace, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.traces[ref.ID]
	if !ok {
		return nil, engine.ErrNotFound
	}
	c := *t
	return &c, nil
}

func (m *memStore) TraceRefs(ctx context.Context, domain string) ([]engine.TraceRef, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []engine.TraceRef
	for _, t := range m.traces {
		if domain == "" || t.Domain == domain {
			out = append(out, engine.TraceRef{Domain: t.Domain, Day: t.StartedAt.Format("2006-01-02"), ID: t.ID})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func (m *memStore) DeleteTrace(ctx context.Context, ref engine.TraceRef) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.traces, ref.ID)
	return nil
}

func (m *memStore) Facts(ctx context.Context, domain, key string) (*engine.Facts, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f, ok := m.facts[domain+"/"+key]
	if !ok {
		return nil, engine.ErrNotFound
	}
	c := *f
	return &c, nil
}

func (m *memStore) PutFacts(ctx context.Context, f *engine.Facts) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := *f
	m.facts[f.Domain+"/"+f.IntentKey] = &c
	return "facts/" + f.Domain + "/" + f.IntentKey + ".yaml", nil
}

func (m *memStore) FactsKeys(ctx context.Context, domain string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for k := range m.facts {
		if d, key, _ := strings.Cut(k, "/"); d == domain {
			out = append(out, key)
		}
	}
	sort.Strings(out)
	return out, nil
}

func (m *memStore) Experience(ctx context.Context, domain, key string) (*engine.Experience, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	x, ok := m.exp[domain+"/"+key]
	if !ok {
		return nil, engine.ErrNotFound
	}
	c := *x
	return &c, nil
}

func (m *memStore) PutExperience(ctx context.Context, x *engine.Experience) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := *x
	m.exp[x.Domain+"/"+x.IntentKey] = &c
	return "experience/" + x.Domain + "/" + x.IntentKey + ".yaml", nil
}

func (m *memStore) ExperienceKeys(ctx context.Context, domain string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for k := range m.exp {
		if d, key, _ := strings.Cut(k, "/"); d == domain {
			out = append(out, key)
		}
	}
	sort.Strings(out)
	return out, nil
}

func (m *memStore) Domains(ctx context.Context) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	seen := map[string]bool{}
	for _, t := range m.traces {
		seen[t.Domain] = true
	}
	var out []string
	for d := range seen {
		out = append(out, d)
	}
	sort.Strings(out)
	return out, nil
}

func (m *memStore) Lock(ctx context.Context) (func() error, error) {
	select {
	case m.lock <- struct{}{}:
		var once sync.Once
		return func() error { once.Do(func() { <-m.lock }); return nil }, nil
	case <-ctx.Done():
		return nil, errors.Join(engine.ErrLocked, ctx.Err())
	}
}

func (m *memStore) all() []*engine.Trace {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*engine.Trace
	for _, t := range m.traces {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

var _ engine.Store = (*memStore)(nil)
