package agent

import (
	"context"
	"errors"
	"strings"
	"time"
)

// Browser opens pages; one Browser is reused across tasks (a launch costs
// ~0.5 s, a tab ~0.4 s).
type Browser interface {
	NewPage(ctx context.Context) (Page, error)
	Close() error
}

// Page is one tab. Every method that looks up an element has a timeout (the
// adapter's default, 5 s, or ctx's deadline if sooner) and its error names the
// selector or URL that failed.
type Page interface {
	// Navigate loads url and waits for load + settle. It returns nil only
	// when the page shows the new document; one that did not commit in time
	// (or had nothing to show) is an error naming the page still shown.
	Navigate(ctx context.Context, url string) error
	URL() string
	Title(ctx context.Context) (string, error)
	// Click clicks the element matching the CSS selector and waits for the page to settle.
	// A click that starts a navigation returns nil only when the page shows
	// the new document (or the same-document change); one that showed no
	// page or did not commit in time is an error naming the page still shown,
	// as for Navigate, so the step is recorded as failed.
	Click(ctx context.Context, selector string) error
	// Type clears the field then types text; Enter is not pressed.
	Type(ctx context.Context, selector, text string) error
	// Press presses key (e.g. "Enter") in the element; a navigation it
	// starts (a form submit) is confirmed as Click's is.
	Press(ctx context.Context, selector, key string) error
	// Text returns the element's innerText; selector "" means the whole body.
	Text(ctx context.Context, selector string) (string, error)
	// Exists reports whether the selector matches and the element is visible.
	// It returns ErrNoElement (wrapped, with the selector) when nothing matches,
	// after one query of the page (a single round trip, never a poll), so absence
	// is answered fast and a busy page is never mistaken for a missing element.
	Exists(ctx context.Context, selector string) (visible bool, err error)
	// Elements lists up to limit elements matching selector; selector "" means
	// all visible interactive elements (a, button, input, select, textarea,
	// [role=button], [onclick]).
	Elements(ctx context.Context, selector string, limit int) ([]Element, error)
	// Labelled reads label→value pairs from the page: dl dt/dd, th/td rows,
	// "Label: value" text, elements with aria-label/title and a sibling value,
	// and counters inside links such as "Issues 12".
	Labelled(ctx context.Context) ([]LabelValue, error)
	// Evaluate runs a JS expression or function body and returns the result as JSON text.
	Evaluate(ctx context.Context, js string) (string, error)
	Scroll(ctx context.Context, dy int) error
	// WaitFor waits up to d for selector to appear; selector "" waits d, then for settle.
	WaitFor(ctx context.Context, selector string, d time.Duration) error
	// Screenshot returns the image bytes and mime ("image/png" or
	// "image/jpeg"); over 400 KB it is scaled to 1024 px wide, JPEG quality 60.
	Screenshot(ctx context.Context) ([]byte, string, error)
	Close() error
}

// SettleAtLoad marks ctx for a Navigate, Click or Press whose next step is a
// replayed click on a recorded link: when the action loads a new document,
// the page returns at that document's load event, without the quiet-DOM
// window after it (the adapter's 50 ms, most of a fast page's load). A link
// needs no handler to navigate, and the click's own checks (existence, the
// fingerprint, a reachable point) run live on the page; a page on which the
// link is not yet there or not yet the recorded one settles fully before it
// is looked at again (run.replay). Every other action, and the page an
// answer is read on, settles fully.
func SettleAtLoad(ctx context.Context) context.Context {
	return context.WithValue(ctx, settleAtLoadKey{}, true)
}

// SettlesAtLoad reports whether ctx was marked by SettleAtLoad.
func SettlesAtLoad(ctx context.Context) bool {
	v, _ := ctx.Value(settleAtLoadKey{}).(bool)
	return v
}

type settleAtLoadKey struct{}

// Element describes one element on the page.
type Element struct {
	// Selector is a CSS selector that uniquely finds this element now (#id,
	// then [name=..], then a stable attribute like [data-testid], [href=".."]
	// for links, else a short nth-of-type path).
	Selector                                              string
	Tag, Text, Href, Type, Name, Placeholder, Label, Role string
	Visible                                               bool
	// Region is where the element sits, from semantic markup only: "main"
	// content, "nav" chrome (navigation, header, footer, sidebars), or ""
	// when the page does not say.
	Region string
}

// Block is one readable block of a page (a heading, a paragraph, a code
// block, a list item, a table cell, a definition), in document order.
type Block struct {
	Selector string
	Tag      string
	Text     string
	// Under is the path of headings the block sits under, outermost first,
	// joined by HeadingSep; a definition's term last.
	Under string
	// Link is true for a block that is nothing but links (a table of
	// contents entry): navigation, not content.
	Link bool
	// Level is a heading's level (1–6); 0 for other blocks.
	Level  int
	Region string
}

// HeadingSep joins the headings of Block.Under.
const HeadingSep = " › "

// Nearest is the innermost heading of a Block.Under path.
func Nearest(under string) string {
	if i := strings.LastIndex(under, HeadingSep); i >= 0 {
		return under[i+len(HeadingSep):]
	}
	return under
}

// Reader is what a Page may offer beyond the tools, for planners that read
// pages (the rod adapter implements it): the page's blocks and the HTTP
// status of the current document (0 when unknown).
type Reader interface {
	Blocks(ctx context.Context) ([]Block, error)
	StatusCode(ctx context.Context) int
}

// LabelValue is one label→value pair read from a page; Selector finds the
// value element, Under is its place: the headings it sits under and the
// terms of the definitions it is inside, joined by HeadingSep ("" where the
// page has none).
type LabelValue struct{ Label, Value, Selector, Under string }

// ErrNoElement is returned (wrapped, with the selector) when no element matches.
var ErrNoElement = errors.New("no element matches the selector")
