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

// shortcut shortens a trusted (P1) route: of the steps before the first
// extraction that only move between pages (navigate, link clicks, scroll,
// wait), it finds the last one that landed on a page whose URL has no
// per-item part (no id segment, no query value: pattern without "*") and
// navigates there directly; the steps after it run as recorded (the waits
// on the answer page, the clicks into "the first issue", which may be
// another one next time, the typing of a search or a sign-in). skippable
// says whether a step may be jumped over: never a step the approval policy
// marks, never a click on a control that is not a link (a button may
// submit a form).
func shortcut(route []engine.Step, skippable func(s engine.Step, on string) bool) []engine.Step {
	first := -1
	for i, s := range route {
		if isExtraction(s) {
			first = i
			break
		}
	}
	if first <= 0 {
		return route
	}
	jump := -1
	for i := 0; i < first; i++ {
		s := route[i]
		if s.Action == "scroll" || s.Action == "wait" {
			continue // on the page reached; kept when it is the jump's
		}
		on := "" // the page the step acted on
		if i > 0 {
			on = route[i-1].URL
		}
		if s.Action != "navigate" && s.Action != "click" || !skippable(s, on) {
			break
		}
		if stableURL(s.URL) {
			jump = i
		}
	}
	if jump < 0 {
		return route
	}
	target := route[jump].URL
	if onlyWaits(route[jump+1:first]) && route[first].URL != "" {
		// The page the answer is read on, where redirects ended.
		if !stableURL(route[first].URL) {
			return route
		}
		target = route[first].URL
	}
	if jump == 0 && route[0].Action == "navigate" && sameURL(route[0].URL, target) {
		return route
	}
	nav := engine.Step{Seq: 1, Action: "navigate", URL: target, OK: true}
	out := append([]engine.Step{nav}, route[jump+1:]...)
	for i := range out {
		out[i].Seq = i + 1
	}
	return out
}

// onlyWaits reports whether steps stay on one page (scroll and wait only).
func onlyWaits(steps []engine.Step) bool {
	for _, s := range steps {
		if s.Action != "scroll" && s.Action != "wait" {
			return false
		}
	}
	return true
}

// stableURL reports whether u is a page with no per-item part.
func stableURL(u string) bool {
	if u == "" {
		return false
	}
	n, err := engine.NormalizeURL(u)
	return err == nil && !strings.Contains(engine.Pattern(n), "*")
}

// skippable says whether the P1 shortcut may jump over a recorded step:
// a navigation, or a click on a link (or on a control the route recorded
// no fingerprint for: hand-written facts), that the approval policy does
// not mark, neither on the page it acted on (on) nor on the one it reached.
func (r *run) skippable(s engine.Step, on string) bool {
	if s.Action == "click" && s.Target != nil && s.Target.Role != "link" && s.Target.Tag != "a" {
		return false
	}
	if len(r.approval) == 0 {
		return true
	}
	st := engine.ApprovalStep{Action: s.Action, Selector: s.Selector, URL: s.URL}
	if s.Target != nil {
		st.Text = s.Target.Name
	}
	if _, marked := r.approval.Match(st); marked {
		return false
	}
	if s.Action == "click" && on != "" {
		st.URL = on
		if _, marked := r.approval.Match(st); marked {
			return false
		}
	}
	return true
}

// linkClick reports whether a route step clicks a link (an a element with an
// href, as recorded): a click that navigates with no handler of the page's.
// A P1 replay takes the page before it at its load event (SettleAtLoad).
func linkClick(s engine.Step) bool {
	return s.Action == "click" && s.Target != nil && s.Target.Tag == "a" && s.Target.Role == "link"
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
		route = shortcut(route, r.skippable)
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
	atLoad := false // the last step's page was taken at its load event (SettleAtLoad)
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
			t0 := r.now()
			sel, kind, msg := r.check(ctx, s, verify)
			t0 = r.clock(&r.res.Timings.Checks, t0)
			if sel == "" {
				r.recordMiss(s, kind, msg)
				return replayOutcome{why: msg}
			}
			msg = r.checkTarget(ctx, s, sel)
			if msg != "" && atLoad {
				// The page was taken at its load event: what its timers
				// render may not be there yet. Let it settle, then look again.
				_ = r.page.WaitFor(ctx, "", 0)
				r.described = describedFP{}
				if sel, kind, msg = r.check(ctx, s, verify); sel == "" {
					r.clock(&r.res.Timings.Checks, t0)
					r.recordMiss(s, kind, msg)
					return replayOutcome{why: msg}
				}
				msg = r.checkTarget(ctx, s, sel)
			}
			r.clock(&r.res.Timings.Checks, t0)
			if msg != "" {
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
		var tr ToolResult
		atLoad = false
		if s.Action == "wait" && s.Selector == "" && i+1 < len(route) && isExtraction(route[i+1]) {
			tr = r.replayWait(ctx, route[i+1])
		} else {
			actx := ctx
			if tier == engine.P1 && i+1 < len(route) && linkClick(route[i+1]) {
				actx, atLoad = SettleAtLoad(ctx), true
			}
			tr = r.exec(actx, a, s.Param, true)
		}
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
	t0 := r.now()
	why := r.checkCondition(ctx, answer)
	r.clock(&r.res.Timings.Answer, t0)
	if why != "" {
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
		vis, err := r.exists(ctx, s, c)
		if errors.Is(err, ErrNoElement) && ctx.Err() == nil {
			// A slow page is not a drifted one: give it a moment once.
			if r.page.WaitFor(ctx, c, settleGrace) == nil {
				vis, err = r.exists(ctx, s, c)
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

// waitPoll is how often a replayed wait reads the page for its answer.
const waitPoll = 50 * time.Millisecond

// replayWait replays a recorded wait with no selector that comes right
// before an extraction (next) as a wait for the answer instead of a fixed
// sleep: it reads next at once, and when the page does not show a value of
// the asked type yet (a "Loading…" placeholder) it reads again every
// waitPoll until it does, the DOM has gone quiet and a second read agrees —
// at most the wait's own time (DefaultWait), after which the extraction
// runs as it would have. A page that already shows such a value at the
// first read waits the full time, as before: a placeholder that looks like
// an answer cannot be told from one. The wait is recorded as a step; the
// reads are not (the extraction that follows is).
func (r *run) replayWait(ctx context.Context, next engine.Step) ToolResult {
	want := AskedType(r.cfg.Task)
	if c := r.recall.SuccessCondition; c != nil && c.AnswerType != "" {
		want = AnswerType(c.AnswerType)
	}
	read := Action{Tool: next.Action, Selector: next.Selector, Value: next.Value}
	value := func() (string, bool) {
		tr := Exec(ctx, r.page, read, "")
		v := strings.TrimSpace(tr.ExtractedContent)
		return v, tr.Error == "" && v != "" && HasValueOf(want, v, r.cfg.Task)
	}
	budget := time.Duration(DefaultWait) * time.Millisecond
	t0, deadline := r.now(), time.Now().Add(budget) // the bound is wall time, whatever RunConfig.Now says
	if _, ok := value(); ok {
		return r.exec(ctx, Action{Tool: "wait"}, "", true) // cannot tell: the full wait
	}
	seen, result := "", ""
	for {
		if err := ctx.Err(); err != nil {
			result = ""
			break
		}
		if !time.Now().Before(deadline) {
			result = fmt.Sprintf("waited %d ms; the answer had not appeared", r.now().Sub(t0).Milliseconds())
			break
		}
		v, ok := value()
		switch {
		case ok && v == seen:
			result = fmt.Sprintf("waited %d ms until the answer appeared", r.now().Sub(t0).Milliseconds())
		case ok:
			seen = v
			_ = r.page.WaitFor(ctx, "", 0) // until the DOM is quiet, then read again
			continue
		default:
			seen = ""
			tm := time.NewTimer(waitPoll)
			select {
			case <-tm.C:
			case <-ctx.Done():
			}
			tm.Stop()
			continue
		}
		break
	}
	d := r.now().Sub(t0)
	r.res.Timings.Actions += d
	tr := ToolResult{ExtractedContent: result}
	if result == "" {
		tr = fail("wait", ctx.Err())
	}
	r.record(Action{Tool: "wait"}, "", true, tr, d, KindOf(tr.Error))
	return tr
}

// exists is Page.Exists for a replayed step's candidate selector c. For a
// click or type whose target the route fingerprinted, on a page that can
// describe an element, it describes the element instead — one round trip
// that answers existence, visibility and the fingerprint the target check
// and the step's record then reuse (run.described).
func (r *run) exists(ctx context.Context, s engine.Step, c string) (bool, error) {
	d, ok := r.page.(Describer)
	if !ok || s.Target == nil || s.Action != "click" && s.Action != "type" {
		return r.page.Exists(ctx, c)
	}
	e, found, err := d.Describe(ctx, c)
	switch {
	case err != nil:
		return false, err
	case !found:
		return false, fmt.Errorf("exists %q: %w (on %s)", c, ErrNoElement, Scrub(r.page.URL(), r.cfg.Secrets))
	}
	fp := fingerprintOf(e)
	fp.Name = Scrub(fp.Name, r.cfg.Secrets)
	r.described = describedFP{ok: true, selector: c, steps: len(r.steps), fp: fp}
	return e.Visible, nil
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
