package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// fakePage is a scripted Page: elements by selector hold their text.
type fakePage struct {
	url, title string
	texts      map[string]string
	labels     []LabelValue
	typed      map[string]string
	pressed    []string
	calls      []string
	shot       []byte
	panicOn    string
}

func newFake() *fakePage {
	return &fakePage{
		url:   "http://127.0.0.1:8080/acme/widgets",
		title: "acme/widgets",
		texts: map[string]string{
			"":       "body text",
			"#stars": "1,234",
			"#q":     "",
			"#long":  strings.Repeat("x", MaxTextChars+10),
		},
		labels: []LabelValue{
			{Label: "Stars", Value: "1,234", Selector: "#stars"},
			{Label: "Forks", Value: "56", Selector: "#forks"},
			{Label: "Default branch", Value: "main", Selector: "#branch"},
			{Label: "Open issues", Value: "12", Selector: "#issues"},
			{Label: "Issues", Value: "12", Selector: "a[href=\"/issues\"]"},
		},
		typed: map[string]string{},
		shot:  []byte("\x89PNG fake"),
	}
}

func (f *fakePage) find(sel string) error {
	f.calls = append(f.calls, sel)
	if f.panicOn != "" && sel == f.panicOn {
		panic("boom")
	}
	if _, ok := f.texts[sel]; !ok {
		return fmt.Errorf("%q: %w", sel, ErrNoElement)
	}
	return nil
}

func (f *fakePage) Navigate(ctx context.Context, u string) error {
	if strings.Contains(u, "down") {
		return fmt.Errorf("navigate %s: net::ERR_CONNECTION_REFUSED", u)
	}
	f.url = u
	return nil
}
func (f *fakePage) URL() string                               { return f.url }
func (f *fakePage) Title(ctx context.Context) (string, error) { return f.title, nil }
func (f *fakePage) Click(ctx context.Context, sel string) error {
	if err := f.find(sel); err != nil {
		return err
	}
	f.url += "/clicked"
	return nil
}
func (f *fakePage) Type(ctx context.Context, sel, text string) error {
	if err := f.find(sel); err != nil {
		return err
	}
	f.typed[sel] = text
	return nil
}
func (f *fakePage) Press(ctx context.Context, sel, key string) error {
	if err := f.find(sel); err != nil {
		return err
	}
	f.pressed = append(f.pressed, key)
	f.url += "?q=" + f.typed[sel]
	return nil
}
func (f *fakePage) Text(ctx context.Context, sel string) (string, error) {
	if err := f.find(sel); err != nil {
		return "", err
	}
	return f.texts[sel], nil
}
func (f *fakePage) Exists(ctx context.Context, sel string) (bool, error) {
	return true, f.find(sel)
}
func (f *fakePage) Elements(ctx context.Context, sel string, limit int) ([]Element, error) {
	els := []Element{
		{Selector: "#q", Tag: "input", Type: "search", Name: "q", Placeholder: "Search issues", Visible: true},
		{Selector: `a[href="/acme/widgets/issues"]`, Tag: "a", Text: "Issues 12", Href: "/acme/widgets/issues", Visible: true},
		{Selector: "#hidden", Tag: "button", Text: "Hidden", Visible: false},
	}
	if limit < len(els) {
		els = els[:limit]
	}
	return els, nil
}
func (f *fakePage) Labelled(ctx context.Context) ([]LabelValue, error) { return f.labels, nil }
func (f *fakePage) Evaluate(ctx context.Context, js string) (string, error) {
	if js == "throw" {
		return "", errors.New("evaluate: Uncaught")
	}
	return `"` + js + `"`, nil
}
func (f *fakePage) Scroll(ctx context.Context, dy int) error {
	f.calls = append(f.calls, fmt.Sprint("scroll", dy))
	return nil
}
func (f *fakePage) WaitFor(ctx context.Context, sel string, d time.Duration) error {
	if sel == "" {
		return nil
	}
	return f.find(sel)
}
func (f *fakePage) Screenshot(ctx context.Context) ([]byte, string, error) {
	return f.shot, "image/png", nil
}
func (f *fakePage) Close() error { return nil }

var _ Page = (*fakePage)(nil)

func TestExec(t *testing.T) {
	const secret = "pem-demo-canary-8f07"
	tests := []struct {
		name  string
		a     Action
		want  string // substring of ExtractedContent
		ltm   string // substring of LongTermMemory
		err   string // substring of Error; "" = success
		url   string // page URL after
		check func(t *testing.T, f *fakePage, r ToolResult)
	}{
		{name: "navigate relative", a: Action{Tool: "navigate", Value: "issues?q=memory"},
			want: `title "acme/widgets", url http://127.0.0.1:8080/acme/issues?q=memory`,
			url:  "http://127.0.0.1:8080/acme/issues?q=memory"},
		{name: "navigate absolute-path", a: Action{Tool: "navigate", Value: "/login"},
			url: "http://127.0.0.1:8080/login", ltm: "navigated to http://127.0.0.1:8080/login"},
		{name: "navigate absolute", a: Action{Tool: "navigate", Value: "https://example.com/x"}, url: "https://example.com/x"},
		{name: "navigate empty", a: Action{Tool: "navigate"}, err: "navigate: value (the URL) is required"},
		{name: "navigate error", a: Action{Tool: "navigate", Value: "http://down/"}, err: "ERR_CONNECTION_REFUSED"},
		{name: "click", a: Action{Tool: "click", Selector: "#stars"}, ltm: "clicked #stars", want: "now at http://127.0.0.1:8080/acme/widgets/clicked"},
		{name: "click missing", a: Action{Tool: "click", Selector: "#nope"}, err: `click: "#nope": no element matches`},
		{name: "click no selector", a: Action{Tool: "click"}, err: "selector is required"},
		{name: "type hides value", a: Action{Tool: "type", Selector: "#q", Value: secret},
			ltm: "typed 20 characters into #q",
			check: func(t *testing.T, f *fakePage, r ToolResult) {
				if f.typed["#q"] != secret {
					t.Errorf("typed %q", f.typed["#q"])
				}
				if len(f.pressed) != 0 {
					t.Errorf("pressed %v without submit", f.pressed)
				}
			}},
		{name: "type submit", a: Action{Tool: "type", Selector: "#q", Value: "memory", Submit: true},
			ltm: "typed 6 characters into #q and pressed Enter",
			check: func(t *testing.T, f *fakePage, r ToolResult) {
				if fmt.Sprint(f.pressed) != "[Enter]" {
					t.Errorf("pressed %v", f.pressed)
				}
			}},
		{name: "type missing", a: Action{Tool: "type", Selector: "#nope", Value: secret}, err: `"#nope"`},
		{name: "get_text body", a: Action{Tool: "get_text"}, want: "body text"},
		{name: "get_text truncated", a: Action{Tool: "get_text", Selector: "#long"},
			want: fmt.Sprintf("[truncated: %d of %d characters shown]", MaxTextChars, MaxTextChars+10),
			check: func(t *testing.T, f *fakePage, r ToolResult) {
				if !r.IncludeExtractedContentOnlyOnce {
					t.Error("get_text should be included only once")
				}
			}},
		{name: "get_elements", a: Action{Tool: "get_elements"},
			want: `#q input type="search" name="q" placeholder="Search issues"` + "\n" +
				`a[href="/acme/widgets/issues"] a "Issues 12" href="/acme/widgets/issues"` + "\n" +
				`#hidden button "Hidden" (hidden)`},
		{name: "get_elements limit", a: Action{Tool: "get_elements", Amount: 1},
			check: func(t *testing.T, f *fakePage, r ToolResult) {
				if n := strings.Count(r.ExtractedContent, "\n"); n != 1 {
					t.Errorf("%d lines, want 1", n)
				}
			}},
		{name: "extract selector", a: Action{Tool: "extract", Selector: "#stars"}, want: "1,234", ltm: "extracted #stars: 1,234"},
		{name: "extract label", a: Action{Tool: "extract", Value: "star"}, want: "1,234", ltm: "extracted Stars: 1,234 (from #stars)"},
		{name: "extract label tokens", a: Action{Tool: "extract", Value: "default BRANCH"}, want: "main"},
		{name: "extract label exact wins", a: Action{Tool: "extract", Value: "issues"},
			check: func(t *testing.T, f *fakePage, r ToolResult) {
				if !strings.Contains(r.LongTermMemory, `a[href="/issues"]`) {
					t.Errorf("picked %q, want the exact label Issues", r.LongTermMemory)
				}
			}},
		{name: "extract label missing", a: Action{Tool: "extract", Value: "watchers"}, err: `no label matches "watchers"`},
		{name: "extract all", a: Action{Tool: "extract"}, want: "Stars: 1,234\nForks: 56\nDefault branch: main\n"},
		{name: "evaluate", a: Action{Tool: "evaluate", Value: "document.title"}, want: `"document.title"`},
		{name: "evaluate error", a: Action{Tool: "evaluate", Value: "throw"}, err: "Uncaught"},
		{name: "evaluate empty", a: Action{Tool: "evaluate"}, err: "required"},
		{name: "scroll default", a: Action{Tool: "scroll"}, want: "scrolled 600 px"},
		{name: "scroll up", a: Action{Tool: "scroll", Amount: -300}, want: "scrolled -300 px"},
		{name: "wait", a: Action{Tool: "wait", Amount: 10}, want: "waited 10 ms"},
		{name: "wait selector", a: Action{Tool: "wait", Selector: "#stars"}, want: "#stars appeared"},
		{name: "wait selector missing", a: Action{Tool: "wait", Selector: "#nope"}, err: "#nope"},
		{name: "screenshot", a: Action{Tool: "screenshot"}, want: "image/png",
			check: func(t *testing.T, f *fakePage, r ToolResult) {
				if len(r.Attachments) != 1 {
					t.Fatalf("attachments %v", r.Attachments)
				}
				b, err := os.ReadFile(r.Attachments[0])
				if err != nil || string(b) != string(f.shot) {
					t.Errorf("file %q: %v", b, err)
				}
				if !strings.HasSuffix(r.Attachments[0], ".png") {
					t.Errorf("name %s", r.Attachments[0])
				}
			}},
		{name: "done", a: Action{Tool: "done", Value: "1,234"}, want: "1,234",
			check: func(t *testing.T, f *fakePage, r ToolResult) {
				if !r.IsDone || r.Success == nil || !*r.Success {
					t.Errorf("done result %+v", r)
				}
			}},
		{name: "unknown", a: Action{Tool: "fly"}, err: "fly: unknown tool"},
		{name: "empty tool", a: Action{}, err: "no tool given"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			r := Exec(context.Background(), f, tt.a, t.TempDir())
			if tt.err != "" {
				if !strings.Contains(r.Error, tt.err) {
					t.Errorf("Error = %q, want it to contain %q", r.Error, tt.err)
				}
				if r.Success == nil || *r.Success {
					t.Errorf("Success = %v, want false", r.Success)
				}
			} else if r.Error != "" {
				t.Fatalf("unexpected Error %q", r.Error)
			}
			if !strings.Contains(r.ExtractedContent, tt.want) {
				t.Errorf("ExtractedContent = %q, want it to contain %q", r.ExtractedContent, tt.want)
			}
			if !strings.Contains(r.LongTermMemory, tt.ltm) {
				t.Errorf("LongTermMemory = %q, want it to contain %q", r.LongTermMemory, tt.ltm)
			}
			if tt.url != "" && f.url != tt.url {
				t.Errorf("URL = %q, want %q", f.url, tt.url)
			}
			if strings.Contains(fmt.Sprintf("%+v", r), secret) {
				t.Errorf("result echoes the typed secret: %+v", r)
			}
			if tt.check != nil {
				tt.check(t, f, r)
			}
		})
	}
}

func TestExecNeverPanics(t *testing.T) {
	f := newFake()
	f.panicOn = "#stars"
	r := Exec(context.Background(), f, Action{Tool: "click", Selector: "#stars"}, "")
	if !strings.Contains(r.Error, "panic: boom") {
		t.Errorf("Error = %q", r.Error)
	}
	r = Exec(context.Background(), nil, Action{Tool: "click", Selector: "#x"}, "")
	if r.Error == "" {
		t.Error("nil page: no error")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r = Exec(ctx, newFake(), Action{Tool: "get_text"}, "")
	if !strings.Contains(r.Error, "context canceled") {
		t.Errorf("cancelled: Error = %q", r.Error)
	}
}

func TestResolveURL(t *testing.T) {
	tests := []struct{ base, ref, want, err string }{
		{"http://h/a/b", "c", "http://h/a/c", ""},
		{"http://h/a/b", "/c?q=1", "http://h/c?q=1", ""},
		{"http://h/a/b", "https://x.org/", "https://x.org/", ""},
		{"about:blank", "example.com/x", "https://example.com/x", ""},
		{"", "/x", "", "no base URL"},
		{"", " ", "", "required"},
	}
	for _, tt := range tests {
		got, err := ResolveURL(tt.base, tt.ref)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ResolveURL(%q, %q) error %v, want %q", tt.base, tt.ref, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ResolveURL(%q, %q) = %q, %v; want %q", tt.base, tt.ref, got, err, tt.want)
		}
	}
}

func TestBestLabel(t *testing.T) {
	pairs := []LabelValue{
		{Label: "Stars", Value: "1"},
		{Label: "Open pull requests", Value: "2"},
		{Label: "Pull requests", Value: "3"},
		{Label: "Latest workflow run status", Value: "success"},
	}
	tests := []struct{ q, want string }{
		{"stars", "1"},
		{"STAR", "1"},
		{"pull requests", "3"},
		{"open pull requests", "2"},
		{"workflow status", "success"},
		{"watchers", ""},
		{"", ""},
	}
	for _, tt := range tests {
		got, ok := BestLabel(pairs, tt.q)
		if got.Value != tt.want || ok != (tt.want != "") {
			t.Errorf("BestLabel(%q) = %q, %v; want %q", tt.q, got.Value, ok, tt.want)
		}
	}
}
