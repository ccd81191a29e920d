package mcpbrowser

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pemdev/pem/agent"
	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/engine/mcp"
)

// Results in browser-use's ActionResult model, and errors as isError
// results with a hint.

// result is a successful call's answer, in browser-use's ActionResult
// model: the extracted content (shown once: pem never sends it again),
// the short long-term memory line to keep, and where the page is now.
type result struct {
	ExtractedContent string `json:"extracted_content,omitempty"`
	LongTermMemory   string `json:"long_term_memory,omitempty"`
	OnlyOnce         bool   `json:"include_extracted_content_only_once,omitempty"`
	IsDone           bool   `json:"is_done,omitempty"`
	Success          *bool  `json:"success,omitempty"`
	URL              string `json:"url,omitempty"`
	Title            string `json:"title,omitempty"`
	Domain           string `json:"domain,omitempty"`
	Step             int    `json:"step,omitempty"`
	// Memory is the site's "## Memory" section, given at the first call
	// on a site in a task; Tier what memory answered there.
	Memory    string      `json:"memory,omitempty"`
	Tier      engine.Tier `json:"tier,omitempty"`
	Intent    string      `json:"intent,omitempty"`
	Deposited []deposited `json:"deposited,omitempty"`
	Answer    string      `json:"answer,omitempty"`

	image     []byte
	imageMIME string
}

// stepError is a browser call that failed: an isError result with a hint.
type stepError struct {
	kind, msg, hint string
	url             string
	step            int
}

func (e *stepError) Error() string { return e.msg }

func argError(tool string, err error) *stepError {
	msg := strings.TrimPrefix(err.Error(), "invalid arguments: ")
	return &stepError{kind: "invalid_arguments", msg: tool + ": " + msg,
		hint: "Nothing was done. Fix the arguments and call " + tool + " again."}
}

func (s *Server) explain(tool string, err error) *stepError {
	switch {
	case mcp.IsArgError(err):
		return argError(tool, err)
	case errors.Is(err, errNoPage):
		return &stepError{kind: "no_page", msg: tool + ": no page is loaded yet",
			hint: "Call browser_navigate with the URL of the site first."}
	case errors.Is(err, errBrowser):
		return &stepError{kind: "browser_unavailable", msg: fmt.Sprintf("%s: %v", tool, err),
			hint: "pem could not start or use its Chromium; nothing was done. Tell the user (pem needs Chromium: apt-get install chromium, or PEM_CHROME pointing at one). The experience_* tools still work."}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &stepError{kind: "cancelled", msg: fmt.Sprintf("%s: cancelled (%v)", tool, err), hint: "Call the tool again if you still need it."}
	case errors.Is(err, agent.ErrConfig), errors.Is(err, engine.ErrInvalid), errors.Is(err, engine.ErrBadURL):
		return &stepError{kind: "invalid_arguments", msg: fmt.Sprintf("%s: %v", tool, err), hint: "Nothing was done. Fix the arguments and call " + tool + " again."}
	}
	s.log.Error("browser tool error", "tool", tool, "err", err)
	return &stepError{kind: "internal", msg: fmt.Sprintf("%s failed: %v", tool, err),
		hint: "The browser may be unavailable (is Chromium installed? see pem mcp --help). Retry once; if it fails again, continue without the browser tools."}
}

// stepFailed turns a tool's error result into a stepError with a hint
// chosen by what failed.
func stepFailed(tool string, tr agent.ToolResult, kind, url string, step int) *stepError {
	se := &stepError{kind: "step_failed", msg: tool + ": " + capText(strings.TrimPrefix(tr.Error, toolAction(tool)+": "), maxError), url: url, step: step}
	if kind == "" {
		kind = agent.KindOf(tr.Error)
	}
	switch kind {
	case engine.KindNoElement:
		se.kind, se.hint = "no_element", "No element matches. Call browser_get_elements (with no selector: the page's controls and their selectors) or browser_get_text, then retry with a selector from the listing."
	case engine.KindTimeout:
		se.kind, se.hint = "timeout", "The page was slow. Call browser_wait (a duration, or the selector you expect), then retry once."
	case engine.KindNetwork:
		se.kind, se.hint = "network", "The site did not answer. Check the URL (scheme, host, port); retry later or try another page."
	case engine.KindNotVisible:
		se.kind, se.hint = "not_visible", "The element is hidden or covered. Dismiss what covers it (a cookie banner, a dialog) or browser_scroll it into view, then retry."
	case engine.KindErrorPage:
		se.kind, se.hint = "error_page", "The action led to an error page. Go back with browser_navigate to the last good page and try another route."
	default:
		se.hint = "Look at the page (browser_screenshot or browser_get_text) and try another approach; the step is recorded as failed."
	}
	return se
}

func toolAction(tool string) string { return strings.TrimPrefix(tool, "browser_") }

func failResult(tool string, e *stepError) *sdk.CallToolResult {
	msg, _ := engine.ScrubText(e.msg)
	text := msg
	if e.hint != "" {
		text += "\nWhat to do: " + e.hint
	}
	b, _ := json.Marshal(struct {
		Error string `json:"error"`
		Kind  string `json:"kind"`
		Tool  string `json:"tool"`
		Hint  string `json:"hint,omitempty"`
		URL   string `json:"url,omitempty"`
		Step  int    `json:"step,omitempty"`
	}{msg, e.kind, tool, e.hint, e.url, e.step})
	return &sdk.CallToolResult{
		IsError:           true,
		Content:           []sdk.Content{&sdk.TextContent{Text: text}},
		StructuredContent: json.RawMessage(engine.ScrubJSON(b)),
	}
}

func okResult(r *result) *sdk.CallToolResult {
	b, err := json.Marshal(r)
	if err != nil {
		return failResult("browser", &stepError{kind: "internal", msg: "encoding the answer: " + err.Error()})
	}
	b = engine.ScrubJSON(b)
	var text strings.Builder
	text.WriteString(r.ExtractedContent)
	if r.ExtractedContent == "" {
		text.WriteString(r.LongTermMemory)
	}
	if r.Memory != "" {
		text.WriteString("\n\n")
		text.WriteString(r.Memory)
	}
	t, _ := engine.ScrubText(text.String())
	content := []sdk.Content{&sdk.TextContent{Text: t}}
	if r.image != nil {
		content = append([]sdk.Content{&sdk.ImageContent{Data: r.image, MIMEType: r.imageMIME}}, content...)
	}
	return &sdk.CallToolResult{Content: content, StructuredContent: json.RawMessage(b)}
}

// longTerm is the line to keep of a result whose content is shown once.
func longTerm(a agent.Action, content string) string {
	where := a.Selector
	if where == "" {
		where = "the page"
	}
	switch a.Tool {
	case "get_elements":
		n := strings.Count(content, "\n")
		if content == "no elements" {
			n = 0
		}
		return fmt.Sprintf("listed %d elements of %s", n, where)
	case "get_text", "extract":
		return fmt.Sprintf("read %d characters of %s", len([]rune(content)), where)
	case "evaluate":
		return fmt.Sprintf("evaluated a script: %s", oneLine(content, 120))
	}
	return oneLine(content, 200)
}

func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > max {
		s = string(r[:max]) + "…"
	}
	return s
}
