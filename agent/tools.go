package agent

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode"
)

// ToolResult is what every tool returns (the browser-use-style result model).
type ToolResult struct {
	ExtractedContent string `json:"extracted_content,omitempty"`
	// LongTermMemory is kept in the agent's context for later steps.
	LongTermMemory                  string   `json:"long_term_memory,omitempty"`
	IncludeExtractedContentOnlyOnce bool     `json:"include_extracted_content_only_once,omitempty"`
	Error                           string   `json:"error,omitempty"`
	IsDone                          bool     `json:"is_done,omitempty"`
	Success                         *bool    `json:"success,omitempty"`
	Attachments                     []string `json:"attachments,omitempty"` // file paths (screenshots)
}

// Action is one tool call; also what a planner returns.
type Action struct {
	// Tool is one of ToolNames.
	Tool     string `json:"tool"`
	Selector string `json:"selector,omitempty"`
	// Value is the url for navigate, the text for type (it may hold a
	// {{secret:NAME}} placeholder, resolved by the caller before Exec), the JS
	// for evaluate, the label for extract and the answer for done.
	Value  string `json:"value,omitempty"`
	Submit bool   `json:"submit,omitempty"` // type: press Enter after
	Amount int    `json:"amount,omitempty"` // scroll: dy in px; wait: ms; get_elements: limit
}

// ToolNames are the tools Exec understands: the browser tools of DESIGN §3/§7 and "done".
var ToolNames = []string{
	"navigate", "click", "type", "get_text", "get_elements", "extract",
	"evaluate", "scroll", "wait", "screenshot", "done",
}

// Limits of the tools' output; a planner's context is small.
const (
	MaxTextChars        = 8000 // get_text, evaluate, extract
	DefaultElementLimit = 50   // get_elements when Amount is 0
	DefaultScroll       = 600  // scroll when Amount is 0 (about one screen)
	DefaultWait         = 1000 // wait in ms when Amount is 0
)

// Exec runs one action on p and reports the result. It never panics: every
// failure (including an unknown tool or a panicking Page) comes back in
// Error with Success=false. Screenshots are written into shotDir (the
// system temp dir when empty).
func Exec(ctx context.Context, p Page, a Action, shotDir string) (res ToolResult) {
	defer func() {
		if r := recover(); r != nil {
			res = fail(a.Tool, fmt.Errorf("panic: %v", r))
		}
	}()
	if p == nil {
		return fail(a.Tool, errors.New("no page"))
	}
	if err := ctx.Err(); err != nil {
		return fail(a.Tool, err)
	}
	switch a.Tool {
	case "navigate":
		return navigate(ctx, p, a)
	case "click":
		if a.Selector == "" {
			return fail(a.Tool, errors.New("selector is required"))
		}
		if err := p.Click(ctx, a.Selector); err != nil {
			return fail(a.Tool, err)
		}
		title, _ := p.Title(ctx)
		return ToolResult{
			ExtractedContent: fmt.Sprintf("clicked %s; now at %s (title %q)", a.Selector, p.URL(), title),
			LongTermMemory:   "clicked " + a.Selector,
		}
	case "type":
		if a.Selector == "" {
			return fail(a.Tool, errors.New("selector is required"))
		}
		// Never echo a.Value: it may be a secret.
		if err := p.Type(ctx, a.Selector, a.Value); err != nil {
			return fail(a.Tool, err)
		}
		msg := fmt.Sprintf("typed %d characters into %s", len([]rune(a.Value)), a.Selector)
		if a.Submit {
			if err := p.Press(ctx, a.Selector, "Enter"); err != nil {
				return fail(a.Tool, err)
			}
			msg += " and pressed Enter; now at " + p.URL()
		}
		return ToolResult{ExtractedContent: msg, LongTermMemory: msg}
	case "get_text":
		text, err := p.Text(ctx, a.Selector)
		if err != nil {
			return fail(a.Tool, err)
		}
		return ToolResult{ExtractedContent: capText(text, MaxTextChars), IncludeExtractedContentOnlyOnce: true}
	case "get_elements":
		limit := a.Amount
		if limit <= 0 {
			limit = DefaultElementLimit
		}
		els, err := p.Elements(ctx, a.Selector, limit)
		if err != nil {
			return fail(a.Tool, err)
		}
		return ToolResult{ExtractedContent: FormatElements(els), IncludeExtractedContentOnlyOnce: true}
	case "extract":
		return extract(ctx, p, a)
	case "evaluate":
		if strings.TrimSpace(a.Value) == "" {
			return fail(a.Tool, errors.New("value (the JS) is required"))
		}
		out, err := p.Evaluate(ctx, a.Value)
		if err != nil {
			return fail(a.Tool, err)
		}
		return ToolResult{ExtractedContent: capText(out, MaxTextChars)}
	case "scroll":
		dy := a.Amount
		if dy == 0 {
			dy = DefaultScroll
		}
		if err := p.Scroll(ctx, dy); err != nil {
			return fail(a.Tool, err)
		}
		return ToolResult{ExtractedContent: fmt.Sprintf("scrolled %d px", dy)}
	case "wait":
		ms := a.Amount
		if ms <= 0 {
			ms = DefaultWait
		}
		if err := p.WaitFor(ctx, a.Selector, time.Duration(ms)*time.Millisecond); err != nil {
			return fail(a.Tool, err)
		}
		if a.Selector != "" {
			return ToolResult{ExtractedContent: a.Selector + " appeared"}
		}
		return ToolResult{ExtractedContent: fmt.Sprintf("waited %d ms", ms)}
	case "screenshot":
		return screenshot(ctx, p, a, shotDir)
	case "done":
		ok := true
		return ToolResult{IsDone: true, Success: &ok, ExtractedContent: a.Value, LongTermMemory: "done"}
	case "":
		return fail(a.Tool, errors.New("no tool given"))
	default:
		return fail(a.Tool, fmt.Errorf("unknown tool (want one of %s)", strings.Join(ToolNames, ", ")))
	}
}

func fail(tool string, err error) ToolResult {
	ok := false
	return ToolResult{Error: tool + ": " + err.Error(), Success: &ok}
}

func navigate(ctx context.Context, p Page, a Action) ToolResult {
	target, err := ResolveURL(p.URL(), a.Value)
	if err != nil {
		return fail(a.Tool, err)
	}
	if err := p.Navigate(ctx, target); err != nil {
		return fail(a.Tool, err)
	}
	title, _ := p.Title(ctx)
	return ToolResult{
		ExtractedContent: fmt.Sprintf("title %q, url %s", title, p.URL()),
		LongTermMemory:   "navigated to " + p.URL(),
	}
}

// ResolveURL resolves ref against base (the page's current URL). A ref with
// no scheme and no base is taken as https.
func ResolveURL(base, ref string) (string, error) {
	ref = strings.TrimSpace(ref)
	if ref == "" {
		return "", errors.New("value (the URL) is required")
	}
	r, err := url.Parse(ref)
	if err != nil {
		return "", fmt.Errorf("url %q: %w", ref, err)
	}
	if r.IsAbs() {
		return r.String(), nil
	}
	b, err := url.Parse(base)
	if err != nil || !b.IsAbs() || b.Scheme == "about" || b.Scheme == "data" {
		if strings.HasPrefix(ref, "/") {
			return "", fmt.Errorf("url %q: relative, and the page has no base URL", ref)
		}
		return "https://" + ref, nil
	}
	return b.ResolveReference(r).String(), nil
}

func extract(ctx context.Context, p Page, a Action) ToolResult {
	switch {
	case a.Selector != "":
		text, err := p.Text(ctx, a.Selector)
		if err != nil {
			return fail(a.Tool, err)
		}
		text = capText(strings.TrimSpace(text), MaxTextChars)
		return ToolResult{ExtractedContent: text, LongTermMemory: "extracted " + a.Selector + ": " + capText(text, 200)}
	case strings.TrimSpace(a.Value) != "":
		pairs, err := p.Labelled(ctx)
		if err != nil {
			return fail(a.Tool, err)
		}
		lv, ok := BestLabel(pairs, a.Value)
		if !ok {
			return fail(a.Tool, fmt.Errorf("no label matches %q on %s (labels: %s)", a.Value, p.URL(), labelList(pairs, 20)))
		}
		return ToolResult{
			ExtractedContent: lv.Value,
			LongTermMemory:   fmt.Sprintf("extracted %s: %s (from %s)", lv.Label, capText(lv.Value, 200), lv.Selector),
		}
	default:
		pairs, err := p.Labelled(ctx)
		if err != nil {
			return fail(a.Tool, err)
		}
		var b strings.Builder
		for _, lv := range pairs {
			fmt.Fprintf(&b, "%s: %s\n", lv.Label, lv.Value)
		}
		return ToolResult{ExtractedContent: capText(b.String(), MaxTextChars), IncludeExtractedContentOnlyOnce: true}
	}
}

func labelList(pairs []LabelValue, max int) string {
	var names []string
	for i, lv := range pairs {
		if i == max {
			names = append(names, "…")
			break
		}
		names = append(names, fmt.Sprintf("%q", lv.Label))
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

func screenshot(ctx context.Context, p Page, a Action, dir string) ToolResult {
	data, mime, err := p.Screenshot(ctx)
	if err != nil {
		return fail(a.Tool, err)
	}
	if dir == "" {
		dir = os.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fail(a.Tool, err)
	}
	ext := ".png"
	if mime == "image/jpeg" {
		ext = ".jpg"
	}
	f, err := os.CreateTemp(dir, "screenshot-*"+ext)
	if err != nil {
		return fail(a.Tool, err)
	}
	_, werr := f.Write(data)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(f.Name())
		return fail(a.Tool, fmt.Errorf("write %s: %w", f.Name(), err))
	}
	path := filepath.Clean(f.Name())
	return ToolResult{
		ExtractedContent: fmt.Sprintf("screenshot of %s saved to %s (%s, %d bytes)", p.URL(), path, mime, len(data)),
		Attachments:      []string{path},
	}
}

// capText cuts s to max characters (runes) and marks the cut.
func capText(s string, max int) string {
	r := []rune(s)
	if len(r) <= max {
		return s
	}
	return string(r[:max]) + fmt.Sprintf("\n…[truncated: %d of %d characters shown]", max, len(r))
}

// FormatElements renders elements as the compact listing get_elements
// returns: one line each, "selector tag "text"" plus the attributes that
// help a planner pick a control.
func FormatElements(els []Element) string {
	var b strings.Builder
	for _, e := range els {
		fmt.Fprintf(&b, "%s %s", e.Selector, e.Tag)
		if t := oneLine(e.Text, 80); t != "" {
			fmt.Fprintf(&b, " %q", t)
		}
		for _, kv := range [][2]string{
			{"type", e.Type}, {"name", e.Name}, {"placeholder", e.Placeholder},
			{"label", e.Label}, {"role", e.Role}, {"href", e.Href},
		} {
			if kv[1] != "" && !(kv[0] == "label" && kv[1] == e.Text) {
				fmt.Fprintf(&b, " %s=%q", kv[0], oneLine(kv[1], 80))
			}
		}
		if !e.Visible {
			b.WriteString(" (hidden)")
		}
		b.WriteByte('\n')
	}
	if b.Len() == 0 {
		return "no elements"
	}
	return b.String()
}

func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > max {
		s = string(r[:max]) + "…"
	}
	return s
}

// BestLabel picks the pair whose label best matches query: an exact
// case-insensitive match first, then the most query tokens found among the
// label's tokens (plural "s" ignored), then the shortest label. ok is false
// when no token matches.
func BestLabel(pairs []LabelValue, query string) (best LabelValue, ok bool) {
	q := Tokens(query)
	if len(q) == 0 {
		return LabelValue{}, false
	}
	bestScore := 0.0
	for _, lv := range pairs {
		l := Tokens(lv.Label)
		if len(l) == 0 {
			continue
		}
		inLabel := map[string]bool{}
		for _, t := range l {
			inLabel[t] = true
		}
		hits := 0
		for _, t := range q {
			if inLabel[t] {
				hits++
			}
		}
		if hits == 0 {
			continue
		}
		// Recall of the query's tokens dominates; precision (a short label)
		// breaks ties; an exact match beats both.
		score := float64(hits)/float64(len(q)) + 0.5*float64(hits)/float64(len(l))
		if strings.Join(l, " ") == strings.Join(q, " ") {
			score += 2
		}
		if score > bestScore {
			best, bestScore, ok = lv, score, true
		}
	}
	return best, ok
}

// Tokens splits s into lower-case alphanumeric words, with a plural "s"
// trimmed from words longer than three letters ("Stars" → "star").
func Tokens(s string) []string {
	words := strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	for i, w := range words {
		if len(w) > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") {
			words[i] = strings.TrimSuffix(w, "s")
		}
	}
	return words
}
