package agent

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/pemdev/pem/engine"
)

// Tier-driven replay (DESIGN §4, §7):
//
//   - P1: the route is replayed with no planner call; before each click or
//     type the selector must exist (one bounded check, no visibility test).
//   - P2: before each step its selector (or one of its fallbacks) must be
//     present and visible; at the first miss the miss is recorded as a
//     failed step (error kind no_element, so it counts as selector_drift
//     against the selector) and the planner takes over on the current page.
//   - A step whose value is a route parameter types the value bound for this
//     run (--param, or a quoted string of the task), never the recorded one;
//     a route with a parameter that cannot be bound is not replayed at P1
//     (it runs as P2 and hands over at that step).
//   - The answer is read live: the route's extraction steps run on the
//     current page, or the entry's extraction_query when the route has none.
//     Cached answers in memory are never returned.

// settleGrace is how long a replayed step waits for a selector that the
// first bounded check did not find, before calling it a miss.
const settleGrace = 1500 * time.Millisecond

// replayOutcome says how a replay ended.
type replayOutcome struct {
	answer string
	done   bool   // the route read an answer
	why    string // why it handed over (done false)
}

// Route returns the replayable steps of a stored route: successful steps
// only, without observation-only actions (screenshots, element listings,
// whole-page text), without "done" and without detours (a navigation back
// to a page the route had reached, and the moves in between). A route
// whose steps carry no ok flag at all (hand-written facts) is taken whole.
func Route(steps []engine.Step) []engine.Step {
	anyOK := false
	for _, s := range steps {
		anyOK = anyOK || s.OK
	}
	var out []engine.Step
	for _, s := range steps {
		if anyOK && !s.OK {
			continue
		}
		switch s.Action {
		case "done", "screenshot", "get_elements":
			continue
		case "get_text":
			if s.Selector == "" {
				continue
			}
		}
		out = append(out, s)
	}
	return withoutDetours(out)
}

// shortcut shortens a trusted (P1) route: when everything before the first
// extraction only moves between pages (navigate, click, scroll, wait) and
// the page the answer is read on has a URL with no per-item part (no id
// segment, no query value: pattern without "*"), the route navigates there
// directly. Routes that type (a search, a sign-in) or read an item's page
// ("the first issue" may be another one next time) are kept whole.
func shortcut(route []engine.Step) []engine.Step {
	first := -1
	for i, s := range route {
		if isExtraction(s) {
			first = i
			break
		}
		switch s.Action {
		case "navigate", "click", "scroll", "wait":
		default:
			return route
		}
	}
	if first <= 0 || route[first].URL == "" {
		return route
	}
	n, err := engine.NormalizeURL(route[first].URL)
	if err != nil || strings.Contains(engine.Pattern(n), "*") {
		return route
	}
	nav := engine.Step{Seq: 1, Action: "navigate", URL: route[first].URL, OK: true}
	if first == 1 && route[0].Action == "navigate" && sameURL(route[0].URL, nav.URL) {
		return route
	}
	return append([]engine.Step{nav}, route[first:]...)
}

// isExtraction reports whether a step reads the answer.
func isExtraction(s engine.Step) bool {
	return s.Action == "extract" || s.Action == "get_text" && s.Selector != ""
}

func (r *run) replay(ctx context.Context) replayOutcome {
	route := Route(r.recall.Steps)
	if len(route) == 0 {
		return replayOutcome{why: "memory holds no route to replay"}
	}
	tier := r.res.Tier
	if tier == engine.P1 {
		if name, ok := r.unbound(route); !ok {
			// A runtime fact: the tier is re-decided by engine.
			pol := engine.DefaultPolicy()
			if cfg, err := r.cfg.Engine.Store.Config(ctx); err == nil {
				pol = cfg.Policy
			}
			tier = r.recall.Apply(name, pol)
			r.res.Tier = tier
			r.logf("P1 route has parameter %s that this run cannot bind: replaying as %s", name, tier)
		}
	}
	verify := tier == engine.P2
	if tier == engine.P1 {
		route = shortcut(route)
	}
	var answers []string
	start := 0
	if r.replayFrom > 0 && r.replayFrom <= len(route) {
		// A resumed run: the snapshot's completed route steps are done, and
		// the page is where the interrupted run stood.
		start = r.replayFrom
		r.replayDone = start
		r.logf("resuming the replay at route step %d of %d", start+1, len(route))
		for _, st := range r.steps {
			if isExtraction(st) && st.OK && strings.TrimSpace(st.Result) != "" {
				answers = append(answers, strings.TrimSpace(st.Result))
			}
		}
	}
	for i := start; i < len(route); i++ {
		s := route[i]
		if len(r.steps) >= r.maxTurns {
			return replayOutcome{why: "turn limit reached during replay"}
		}
		if ctx.Err() != nil {
			return replayOutcome{why: "cancelled"}
		}
		a := Action{Tool: s.Action, Selector: s.Selector, Value: s.Value}
		switch s.Action {
		case "navigate":
			target := r.rebase(firstNonEmpty(s.URL, s.Value))
			// A page loaded before this run may hold last round's values:
			// the first navigation always loads.
			if target == "" || len(r.steps) > 0 && sameURL(target, r.page.URL()) {
				continue
			}
			a.Value = target
		case "type":
			v, ok := r.bind(s)
			if !ok {
				return replayOutcome{why: fmt.Sprintf("step %d types parameter %s, which this run does not bind", i+1, paramName(s))}
			}
			a.Value = v
			if i+1 < len(route) && route[i+1].Action == "press" && route[i+1].Selector == s.Selector &&
				(route[i+1].Value == "" || route[i+1].Value == "Enter") {
				a.Submit = true
				i++
			}
		}
		if a.Selector != "" {
			sel, kind, msg := r.check(ctx, s, verify)
			if sel == "" {
				r.recordMiss(s, kind, msg)
				return replayOutcome{why: msg}
			}
			if msg := r.checkTarget(ctx, s, sel); msg != "" {
				// The selector resolves, to another control: drift.
				r.recordMiss(s, engine.KindNoElement, msg)
				return replayOutcome{why: msg}
			}
			a.Selector = sel
		}
		// What the snapshot written after this step says is done and left.
		r.replayDone, r.pending = i+1, r.pending[:0]
		for _, p := range route[i+1:] {
			r.pending = append(r.pending, "replay "+describeStep(p))
		}
		tr := r.exec(ctx, a, s.Param, true)
		if tr.Error != "" {
			r.replayDone, r.pending = i, r.pending[:0]
			for _, p := range route[i:] {
				r.pending = append(r.pending, "replay "+describeStep(p))
			}
			return replayOutcome{why: fmt.Sprintf("replayed step %d (%s) failed: %s", i+1, s.Action, tr.Error)}
		}
		if isExtraction(s) {
			v := strings.TrimSpace(tr.ExtractedContent)
			if v == "" {
				return replayOutcome{why: fmt.Sprintf("replayed step %d (%s) read nothing", i+1, s.Action)}
			}
			answers = append(answers, v)
		}
	}
	if len(answers) == 0 && r.recall.ExtractionQuery != "" {
		q := r.recall.ExtractionQuery
		a := Action{Tool: "extract", Value: q}
		if looksLikeSelector(q) {
			a = Action{Tool: "extract", Selector: q}
		}
		if len(r.steps) < r.maxTurns {
			tr := r.exec(ctx, a, "", true)
			if tr.Error == "" && strings.TrimSpace(tr.ExtractedContent) != "" {
				answers = append(answers, strings.TrimSpace(tr.ExtractedContent))
			}
		}
	}
	if len(answers) == 0 {
		return replayOutcome{why: "the route ended without reading an answer"}
	}
	answer := strings.Join(answers, AnswerSep)
	if why := r.checkCondition(ctx, answer); why != "" {
		msg := "success condition failed: " + why
		r.recordMiss(engine.Step{Action: "extract", Selector: r.recall.SuccessCondition.Selector}, engine.KindSuccessCondition, msg)
		return replayOutcome{why: msg}
	}
	return replayOutcome{answer: answer, done: true}
}

// check verifies a step's selector before it is used, trying the recorded
// fallbacks in order. verify (P2) requires the element to be visible; P1
// requires only that it exists. It returns the selector to use, or "" with
// the error kind and a message for the miss.
func (r *run) check(ctx context.Context, s engine.Step, verify bool) (string, string, string) {
	cands := []string{s.Selector}
	cands = append(cands, s.Fallbacks...)
	for name, primary := range r.recall.PrimarySelectors {
		if primary == s.Selector {
			cands = append(cands, r.recall.Fallbacks[name]...)
		}
	}
	kind, detail := "", ""
	seen := map[string]bool{}
	for _, c := range cands {
		if c == "" || seen[c] {
			continue
		}
		seen[c] = true
		vis, err := r.page.Exists(ctx, c)
		if errors.Is(err, ErrNoElement) && ctx.Err() == nil {
			// A slow page is not a drifted one: give it a moment once.
			if r.page.WaitFor(ctx, c, settleGrace) == nil {
				vis, err = r.page.Exists(ctx, c)
			}
		}
		switch {
		case err == nil && (vis || !verify):
			if c != s.Selector {
				r.logf("selector %s missed; fallback %s found", s.Selector, c)
			}
			return c, "", ""
		case err == nil:
			if kind == "" {
				kind, detail = engine.KindNotVisible, "present but not visible"
			}
		case errors.Is(err, ErrNoElement):
			if kind == "" {
				kind, detail = engine.KindNoElement, "matches nothing"
			}
		default:
			if kind == "" {
				kind, detail = KindOf(err.Error()), Scrub(err.Error(), r.cfg.Secrets)
			}
		}
	}
	if kind == "" {
		kind = engine.KindNoElement
	}
	level := "P1 existence check"
	if verify {
		level = "P2 verification"
	}
	return "", kind, fmt.Sprintf("selector drift: %s %s on %s (%s)", s.Selector, detail, Scrub(r.page.URL(), r.cfg.Secrets), level)
}

// bind returns the value a replayed type step types in this run.
func (r *run) bind(s engine.Step) (string, bool) {
	if s.Param != "" {
		v, ok := r.params[s.Param]
		return v, ok && v != ""
	}
	if strings.Contains(s.Value, engine.Redacted) {
		return "", false
	}
	for _, name := range SecretNamesIn(s.Value) {
		if _, ok := r.cfg.Secrets[name]; !ok {
			return "", false
		}
	}
	return s.Value, true
}

// unbound returns the first route parameter this run cannot bind.
func (r *run) unbound(route []engine.Step) (string, bool) {
	for _, s := range route {
		if s.Action != "type" {
			continue
		}
		if _, ok := r.bind(s); !ok {
			return paramName(s), false
		}
	}
	return "", true
}

func paramName(s engine.Step) string {
	if s.Param != "" {
		return s.Param
	}
	if n := SecretNamesIn(s.Value); len(n) > 0 {
		return engine.SecretPlaceholder(n[0])
	}
	return "(a redacted value)"
}

// rebase moves a recorded URL onto this run's origin when it is on the same
// domain: a demo site or a staging server on another port is the same site.
func (r *run) rebase(raw string) string {
	if raw == "" {
		return ""
	}
	rec, err := url.Parse(raw)
	if err != nil || !rec.IsAbs() {
		t, err := ResolveURL(r.page.URL(), raw)
		if err != nil {
			return ""
		}
		return t
	}
	start, err := url.Parse(r.cfg.StartURL)
	if err != nil {
		return raw
	}
	d1, err1 := engine.NormalizeDomain(rec.Hostname())
	d2, err2 := engine.NormalizeDomain(start.Hostname())
	if err1 == nil && err2 == nil && d1 == d2 {
		rec.Scheme, rec.Host = start.Scheme, start.Host
	}
	return rec.String()
}

func sameURL(a, b string) bool {
	na, err1 := engine.NormalizeURL(a)
	nb, err2 := engine.NormalizeURL(b)
	return err1 == nil && err2 == nil && na.URL == nb.URL
}

func looksLikeSelector(q string) bool {
	q = strings.TrimSpace(q)
	return strings.HasPrefix(q, "#") || strings.HasPrefix(q, ".") || strings.HasPrefix(q, "[") ||
		strings.ContainsAny(q, "[]>#=")
}

func firstNonEmpty(xs ...string) string {
	for _, x := range xs {
		if x != "" {
			return x
		}
	}
	return ""
}
