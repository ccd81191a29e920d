package agent

import (
	"net/url"
	"strings"

	"github.com/pemdev/pem/engine"
)

// The explore planner's general recoveries for real sites' traps, and how
// it follows memory's structured hints (State.Hints). None of it knows a
// particular site: only general web vocabulary (dismiss, next page,
// loading) and what memory recorded.

// dismissWords name the control that closes an overlay (a consent banner,
// a modal, a newsletter box).
var dismissWords = setOf("accept", "agree", "dismiss", "close", "reject", "decline", "got", "ok", "okay", "continue", "skip", "later", "thanks", "×", "x")

// nextWords name the link to a list's next page.
var nextWords = setOf("next", "older", "more", "›", "»", "→")

// loadingWords make a value a placeholder, not an answer.
var loadingWords = setOf("loading", "wait", "fetching", "spinner", "…", "...")

// coveredFailure reports whether the last turn's click failed because
// something covered its target (an overlay), and which selector it was.
func coveredFailure(s *State) (string, bool) {
	if len(s.History) == 0 {
		return "", false
	}
	t := s.History[len(s.History)-1]
	if t.Action.Tool != "click" || t.Result.Error == "" {
		return "", false
	}
	return t.Action.Selector, isCovered(t.Result.Error)
}

// dismissControl is a visible button whose text says it closes an overlay
// (accept, close, dismiss, …), not one already clicked on this page.
func dismissControl(s *State, h seen) *Element {
	cur := normURL(s.URL)
	for i := range s.Elements {
		e := &s.Elements[i]
		if !e.Visible || h.failed[e.Selector] || h.clicked[cur+" "+e.Selector] {
			continue
		}
		if e.Tag != "button" && e.Role != "button" && !(e.Tag == "input" && (strings.EqualFold(e.Type, "button") || strings.EqualFold(e.Type, "submit"))) {
			continue
		}
		words := stems(e.Text + " " + e.Label)
		if len(words) == 0 || len(words) > 3 {
			continue
		}
		for _, w := range words {
			if dismissWords[w] {
				return e
			}
		}
	}
	return nil
}

// placeholder reports whether a value reads as "still loading".
func placeholder(v string) bool {
	v = strings.TrimSpace(strings.ToLower(v))
	if v == "" || v == "…" || v == "..." || v == "-" || v == "—" {
		return true
	}
	if len(strings.Fields(v)) > 4 {
		return false // a sentence, not a placeholder
	}
	for _, w := range stems(v) {
		if loadingWords[w] {
			return true
		}
	}
	return strings.HasSuffix(v, "…") && len([]rune(v)) <= 12
}

// waitedHere reports whether the run already waited on this page.
func waitedHere(s *State) int {
	n := 0
	cur := normURL(s.URL)
	for i := len(s.History) - 1; i >= 0 && normURL(s.History[i].URL) == cur; i-- {
		if s.History[i].Action.Tool == "wait" {
			n++
		}
	}
	return n
}

// nextPage is the link to the next page of a paginated list: its text is
// "Next", "Older", "›" …, and it points to this page with another page
// number (a query value or a number in the path). Nil when the page has none
// or it was visited.
func nextPage(s *State, h seen) *Element {
	cur, err := url.Parse(s.URL)
	if err != nil {
		return nil
	}
	for i := range s.Elements {
		e := &s.Elements[i]
		if !e.Visible || e.Href == "" || h.failed[e.Selector] {
			continue
		}
		words := strings.Fields(strings.ToLower(e.Text + " " + e.Label))
		if len(words) == 0 || len(words) > 4 {
			continue
		}
		named := false
		for _, w := range words {
			if nextWords[stem(w)] || nextWords[w] {
				named = true
			}
		}
		if !named {
			continue
		}
		target := resolve(s.URL, e.Href)
		u, err := url.Parse(target)
		if err != nil || u.Host != cur.Host || h.visited[normURL(target)] {
			continue
		}
		if u.Path == cur.Path || strings.TrimRight(u.Path, "/0123456789") == strings.TrimRight(cur.Path, "/0123456789") {
			return e
		}
	}
	return nil
}

// literalOnPage reports whether any of the task's literals appears in the
// page's text or its controls.
func literalOnPage(s *State, g goal) bool {
	for _, l := range g.literals {
		if hasLiteral(s.PageText, l) {
			return true
		}
		for _, e := range s.Elements {
			if e.Visible && hasLiteral(e.Text+" "+e.Label, l) {
				return true
			}
		}
	}
	return false
}

// routePos is how far the run has followed the remembered route: the
// run's turns are matched against the route's steps in order (a typing
// with Enter covers the route's press), skipping the turns that left it.
func routePos(s *State) int {
	route := s.Hints.Route
	p := 0
	for _, t := range s.History {
		if p >= len(route) {
			break
		}
		if t.Result.Error != "" {
			continue
		}
		switch {
		case sameStep(t.Action, route[p]):
		case route[p].Action == "wait" && p+1 < len(route) && sameStep(t.Action, route[p+1]):
			p++ // the wait was not needed (routeStep skips it when nothing loads)
		default:
			continue
		}
		p++
		if t.Action.Submit && p < len(route) && route[p].Action == "press" {
			p++
		}
	}
	return p
}

func sameStep(a Action, st engine.Step) bool {
	if a.Tool != st.Action {
		return false
	}
	switch a.Tool {
	case "navigate":
		return sameURL(a.Value, firstNonEmpty(st.URL, st.Value))
	case "extract":
		return a.Selector == st.Selector && (st.Selector != "" || a.Value == st.Value)
	}
	return a.Selector == st.Selector
}

// routeStep is the remembered route's next step: the step after the ones
// the run has followed, when the run stands where the previous step landed,
// the step's control is on the page and it is no anti-pattern (else the
// run explores).
func routeStep(s *State, h seen) (Action, bool) {
	route := s.Hints.Route
	p := routePos(s)
	if p == 0 || p >= len(route) {
		return Action{}, false
	}
	if at := route[p-1].URL; at == "" || normURL(at) != normURL(s.URL) {
		return Action{}, false
	}
	next := route[p]
	// A remembered wait is needed only while something still loads.
	for next.Action == "wait" && !loadingHere(s) && p+1 < len(route) {
		p++
		next = route[p]
	}
	if next.Selector != "" && (h.failed[next.Selector] || anti(s, next.Selector)) {
		return Action{}, false
	}
	switch next.Action {
	case "click":
		if present(s, next.Selector) {
			return Action{Tool: "click", Selector: next.Selector}, true
		}
	case "type":
		v := next.Value
		if next.Param != "" {
			v = s.Params[next.Param]
		}
		if v != "" && present(s, next.Selector) {
			submit := p+1 < len(route) && route[p+1].Action == "press" && route[p+1].Selector == next.Selector
			return Action{Tool: "type", Selector: next.Selector, Value: v, Submit: submit}, true
		}
	case "wait":
		return Action{Tool: "wait", Selector: next.Selector}, true
	case "extract":
		return Action{Tool: "extract", Selector: next.Selector, Value: next.Value}, true
	case "navigate":
		if target := firstNonEmpty(next.URL, next.Value); target != "" {
			return Action{Tool: "navigate", Value: target}, true
		}
	}
	return Action{}, false
}

// routeDone is the answer when the remembered route's extractions on this
// page have all been read (the route ends here).
func routeDone(s *State, h seen) (string, bool) {
	route := s.Hints.Route
	if len(route) == 0 {
		return "", false
	}
	cur := normURL(s.URL)
	var vals []string
	for i := len(route) - 1; i >= 0; i-- {
		st := route[i]
		if st.Action != "extract" {
			break
		}
		if st.URL != "" && normURL(st.URL) != cur {
			return "", false
		}
		key := st.Value
		if st.Selector != "" {
			key = "css:" + st.Selector
		}
		v, ok := h.here[key]
		if !ok || v == "" || placeholder(v) {
			return "", false
		}
		vals = append([]string{v}, vals...)
	}
	if len(vals) == 0 {
		return "", false
	}
	return strings.Join(vals, AnswerSep), true
}

func present(s *State, sel string) bool {
	for _, e := range s.Elements {
		if e.Selector == sel && e.Visible {
			return true
		}
	}
	return false
}

// anti reports whether memory lists sel as an anti-pattern.
func anti(s *State, sel string) bool {
	for _, a := range s.Hints.AntiPatterns {
		if a == sel || strings.Contains(a, strconvQuote(sel)) || strings.HasSuffix(a, " "+sel) {
			return true
		}
	}
	return false
}

func isCovered(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "covered by") || strings.Contains(m, "obscured")
}

// echoesSearch reports whether text quotes a search this run submitted
// ("Results for “…”"): the page repeating the query is not content.
func echoesSearch(s *State, text string) bool {
	low := strings.ToLower(text)
	for _, t := range s.History {
		a := t.Action
		if a.Tool != "type" || !a.Submit || len(SecretNamesIn(a.Value)) > 0 || len(strings.TrimSpace(a.Value)) < 4 {
			continue
		}
		if strings.Contains(low, strings.ToLower(strings.TrimSpace(a.Value))) && len(strings.Fields(a.Value)) > 1 {
			return true
		}
	}
	return false
}

// replayed reports whether memory's route was replayed in this run: after a
// replay handed over, the route is what failed, and no hint.
func replayed(s *State) bool {
	for _, t := range s.History {
		if t.Replayed {
			return true
		}
	}
	return false
}

// recoveryBefore is what memory says to do before acting on sel on this
// page: the first step of a remembered recovery for it (its URL pattern
// matching this page) that the run has not done here yet — a wait, or a
// click on a control that is on the page. ok is false when there is none.
func recoveryBefore(s *State, h seen, sel string) (Action, bool) {
	if sel == "" || len(s.Hints.Recoveries) == 0 {
		return Action{}, false
	}
	n, err := engine.NormalizeURL(s.URL)
	if err != nil {
		return Action{}, false
	}
	cur := normURL(s.URL)
	for _, rv := range s.Hints.Recoveries {
		if rv.Action == "" || rv.Selector != sel {
			continue
		}
		if rv.URLPattern != "" {
			if _, ok := engine.MatchPattern(rv.URLPattern, n); !ok {
				continue
			}
		}
		for _, part := range strings.Split(rv.Action, ", then ") {
			f := strings.Fields(part)
			switch {
			case len(f) == 1 && f[0] == "wait":
				if waitedHere(s) == 0 {
					return Action{Tool: "wait"}, true
				}
			case len(f) == 2 && f[0] == "click":
				if !h.clicked[cur+" "+f[1]] && present(s, f[1]) && !anti(s, f[1]) {
					return Action{Tool: "click", Selector: f[1]}, true
				}
			}
		}
	}
	return Action{}, false
}

// withRecovery puts a remembered recovery before a click or a typing.
func withRecovery(s *State, h seen, a Action) Action {
	if a.Tool != "click" && a.Tool != "type" {
		return a
	}
	if r, ok := recoveryBefore(s, h, a.Selector); ok {
		return r
	}
	return a
}

// memoryUsed reports whether memory's route for this task used sel: the
// exact entry's route, or, with none (an overlap match), a selector the
// Memory section names at P1–P4 — never only another task's related route
// at P5.
func memoryUsed(s *State, sel string) bool {
	for _, st := range s.Hints.Route {
		if st.Selector == sel {
			return true
		}
	}
	return len(s.Hints.Route) == 0 && s.Tier != engine.P5 && s.Memory != "" && strings.Contains(s.Memory, strconvQuote(sel))
}

// loadingHere reports whether a labelled value of the page still reads as
// loading.
func loadingHere(s *State) bool {
	for _, lv := range s.Labels {
		if placeholder(lv.Value) {
			return true
		}
	}
	return false
}
