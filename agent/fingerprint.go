package agent

import (
	"context"
	"fmt"
	"strings"

	"github.com/pemdev/pem/engine"
)

// Fingerprints and success conditions: what a replay checks live besides
// "the selector resolves" (DESIGN §7).
//
//   - Each recorded click/type step keeps its target's fingerprint (tag,
//     role, accessible name or visible text). P1 and P2 check it before
//     acting: a selector that now finds another control is drift
//     (selector_drift), and the planner takes over.
//   - A successful run records where it read its answer (the page's URL
//     pattern, the selector, the heading or label it sits under, the asked
//     type); consolidation keeps what the route's runs agree on. A replay
//     checks it after reading; a replay that fails it is a failure
//     (success_condition_failed) and hands over in the same run.

// Describer is what a Page may offer to describe the one element a
// selector finds, without observing the whole page (the rod adapter
// implements it); replays check fingerprints through it.
type Describer interface {
	Describe(ctx context.Context, selector string) (e Element, found bool, err error)
}

// implicitRole is the ARIA role a tag has without a role attribute.
func implicitRole(e Element) string {
	if e.Role != "" {
		return e.Role
	}
	switch e.Tag {
	case "a":
		if e.Href != "" {
			return "link"
		}
	case "button":
		return "button"
	case "select":
		return "combobox"
	case "textarea":
		return "textbox"
	case "input":
		switch strings.ToLower(e.Type) {
		case "submit", "button", "reset":
			return "button"
		case "checkbox":
			return "checkbox"
		case "radio":
			return "radio"
		case "search":
			return "searchbox"
		default:
			return "textbox"
		}
	}
	return ""
}

// fingerprintOf describes an element as a fingerprint.
func fingerprintOf(e Element) *engine.Fingerprint {
	name := e.Label
	if name == "" {
		name = e.Text
	}
	if name == "" && (e.Tag == "input" || e.Tag == "textarea") {
		name = firstNonEmpty(e.Placeholder, e.Name)
	}
	if e.Tag == "input" || e.Tag == "textarea" {
		if name == e.Text && e.Label == "" {
			name = firstNonEmpty(e.Placeholder, e.Name) // a field's value is not its name
		}
	}
	return &engine.Fingerprint{Tag: e.Tag, Role: implicitRole(e), Name: oneLine(name, 80)}
}

// target reads the fingerprint of the element selector finds now: from the
// last observation when it listed it, else from the page.
func (r *run) target(ctx context.Context, selector string, observed bool) *engine.Fingerprint {
	if selector == "" {
		return nil
	}
	if observed {
		for _, e := range r.lastEls {
			if e.Selector == selector {
				fp := fingerprintOf(e)
				fp.Name = Scrub(fp.Name, r.cfg.Secrets)
				return fp
			}
		}
	}
	if c := r.described; c.ok && c.selector == selector && c.steps == len(r.steps) {
		// Described already since the last step (a replay's fingerprint
		// check, then the step's own record): the page has not been acted on.
		return c.fp
	}
	d, ok := r.page.(Describer)
	if !ok {
		return nil
	}
	e, found, err := d.Describe(ctx, selector)
	if err != nil || !found {
		return nil
	}
	fp := fingerprintOf(e)
	fp.Name = Scrub(fp.Name, r.cfg.Secrets)
	r.described = describedFP{ok: true, selector: selector, steps: len(r.steps), fp: fp}
	return fp
}

// describedFP is the last fingerprint described live, valid while no step
// has been taken since (steps is len(run.steps) then).
type describedFP struct {
	ok       bool
	selector string
	steps    int
	fp       *engine.Fingerprint
}

// checkTarget compares a replayed step's recorded fingerprint with the
// control sel finds now; "" when they match (or nothing was recorded).
func (r *run) checkTarget(ctx context.Context, s engine.Step, sel string) string {
	if s.Target == nil || s.Action != "click" && s.Action != "type" {
		return ""
	}
	now := r.target(ctx, sel, false)
	if now == nil || s.Target.Same(now) {
		return ""
	}
	return fmt.Sprintf("selector drift: %s now finds another control (%s) than the one recorded (%s) on %s",
		sel, describeFP(now), describeFP(s.Target), Scrub(r.page.URL(), r.cfg.Secrets))
}

func describeFP(f *engine.Fingerprint) string {
	s := f.Tag
	if f.Role != "" {
		s += " role=" + f.Role
	}
	return s + fmt.Sprintf(" %q", f.Name)
}

// condition is where this run read its answer, for the trace of a success.
func (r *run) condition(ctx context.Context) *engine.SuccessCondition {
	var last *engine.Step
	for i := len(r.steps) - 1; i >= 0; i-- {
		if s := &r.steps[i]; s.OK && (s.Action == "extract" || s.Action == "get_text" && s.Selector != "") {
			last = s
			break
		}
	}
	if last == nil || r.page == nil {
		return nil
	}
	c := &engine.SuccessCondition{AnswerType: string(AskedType(r.cfg.Task))}
	if n, err := engine.NormalizeURL(r.page.URL()); err == nil {
		c.URLPattern = engine.Pattern(n)
	}
	if last.Selector != "" {
		c.Selector = last.Selector
		text := last.Result
		c.Under = r.underOf(ctx, last.Selector, text)
	} else {
		c.Under = last.Value // extract by label: the label
	}
	if c.Empty() {
		return nil
	}
	return c
}

// underOf is the nearest heading of the block selector reads, found by its
// selector or, when the page's own selector for it differs, by the text it
// read ("" unknown).
func (r *run) underOf(ctx context.Context, selector, text string) string {
	bs := r.endBlocks
	if bs == nil {
		if bs = r.blocksNow(); bs == nil {
			rd, ok := r.page.(Reader)
			if !ok {
				return ""
			}
			var err error
			if bs, err = rd.Blocks(ctx); err != nil {
				return ""
			}
			r.lastBlocks, r.blocksAt = bs, len(r.steps)
		}
	}
	for _, b := range bs {
		if b.Selector == selector {
			return Scrub(Nearest(b.Under), r.cfg.Secrets)
		}
	}
	if t := normText(text); t != "" {
		for _, b := range bs {
			if normText(b.Text) == t {
				return Scrub(Nearest(b.Under), r.cfg.Secrets)
			}
		}
	}
	return ""
}

// checkCondition checks a replay's end against the route's success
// condition; "" when it holds (or there is none).
func (r *run) checkCondition(ctx context.Context, answer string) string {
	c := r.recall.SuccessCondition
	if c.Empty() {
		return ""
	}
	if c.URLPattern != "" {
		n, err := engine.NormalizeURL(r.page.URL())
		if err != nil {
			return "the page's URL cannot be read"
		}
		if _, ok := engine.MatchPattern(c.URLPattern, n); !ok {
			return fmt.Sprintf("the answer was read on %s, not on a page of %s", engine.Pattern(n), c.URLPattern)
		}
	}
	if c.Under != "" && c.Selector != "" {
		if _, ok := r.page.(Reader); ok {
			if under := r.underOf(ctx, c.Selector, r.lastRead()); under != "" && normText(under) != normText(c.Under) {
				return fmt.Sprintf("the answer sits under %q, not under %q", under, c.Under)
			}
		}
	}
	if c.AnswerType != "" && !HasValueOf(AnswerType(c.AnswerType), answer, r.cfg.Task) {
		return fmt.Sprintf("the answer is not a %s", c.AnswerType)
	}
	return ""
}

// lastRead is the text the run's last successful extraction read.
func (r *run) lastRead() string {
	for i := len(r.history) - 1; i >= 0; i-- {
		t := r.history[i]
		if t.Result.Error == "" && (t.Action.Tool == "extract" || t.Action.Tool == "get_text" && t.Action.Selector != "") {
			return t.Result.ExtractedContent
		}
	}
	return ""
}

// blocksNow returns the blocks listed on the page since its last step, or
// nil.
func (r *run) blocksNow() []Block {
	if r.lastBlocks != nil && r.blocksAt == len(r.steps) {
		return r.lastBlocks
	}
	return nil
}
