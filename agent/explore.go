package agent

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/pemdev/pem/engine"
)

// Explore is the offline planner: deterministic, no model, no network. It
// reads the task's words and, on each turn,
//
//  1. signs in when the task says "sign in as USER" and the page has a
//     password field (the user into the username field, a declared secret's
//     {{secret:NAME}} placeholder into the password field, then Enter);
//  2. searches when the task names a search with a quoted (or single-word)
//     query and the page has a search field;
//  3. answers from labelled values whose labels match the task's words
//     (extract each, then done with the values joined by AnswerSep);
//  4. otherwise follows the link or control whose text best matches the
//     task's words (an ordinal — "first", "second", "latest" — picks that
//     item of a list of similar links), never a page it already visited;
//  5. gives up (done with no answer) when nothing on the page matches.
//
// It knows nothing of any particular site: only general web vocabulary
// (sign in, search, ordinals) and token overlap. It keeps no state between
// calls: everything it needs is in State (History holds the visited URLs),
// so one Explore serves parallel runs.
type Explore struct{}

// NewExplore returns the explore planner.
func NewExplore() *Explore { return &Explore{} }

// Name is "explore".
func (*Explore) Name() string { return "explore" }

var _ Planner = (*Explore)(nil)

// stopWords carry no meaning for matching links or labels.
var stopWords = setOf("a", "an", "the", "of", "for", "and", "or", "to", "in", "on", "at", "is", "are", "be",
	"what", "which", "who", "whose", "how", "many", "much", "read", "find", "get", "show", "tell", "me", "give",
	"its", "it", "this", "that", "with", "from", "by", "as", "current", "currently", "value", "number", "count",
	"report", "return", "answer", "please", "there", "then", "their", "do", "doe", "does", "did", "page", "see",
	"look", "up", "all", "any", "my", "our", "your", "about", "into", "over", "i", "we", "you", "ha", "has",
	"have", "wa", "was", "were", "will", "can", "under", "via", "using", "use", "go", "open", "visit", "navigate", "click",
	"say", "says", "listed", "shown", "now", "right", "according", "accord", "total", "s",
	"why", "when", "where", "not", "no")

// Ordinal words pick the n-th item of a list ("latest" and "newest": lists
// are newest first on most sites).
var ordinals = map[string]int{"first": 1, "1st": 1, "latest": 1, "newest": 1, "recent": 1, "top": 1,
	"second": 2, "2nd": 2, "third": 3, "3rd": 3, "fourth": 4, "4th": 4, "fifth": 5, "5th": 5}

var (
	signInRe  = engine.LazyRE(`(?i)\b(?:sign|log)\s*-?\s*(?:in|on)\s+as\s+["'“]?([^\s"'”,;]+)`)
	searchRe  = engine.LazyRE(`(?i)\bsearch(?:es|ing)?\b`)
	searchFor = engine.LazyRE(`(?i)\bsearch\b(?:\s+[\p{L}\p{N}/_-]+){0,3}?\s+for\s+([\p{L}\p{N}_-]+)`)
	// The asked-for attribute: "what is the X of …", "how many X does …",
	// "report the X".
	attrRes = []*engine.LazyRegexp{
		engine.LazyRE(`(?i)\b(?:what|which|who)(?:'s|\s+is|\s+are|\s+was|\s+were)?\s+(?:the\s+)?(.+?)(?:\s+(?:of|in|on|for|from|at|according|under|does|do|did|has|have|is|are)\b|[,?:;.!]|$)`),
		engine.LazyRE(`(?i)\bhow\s+many\s+(.+?)(?:\s+(?:does|do|did|are|is|were|in|on|of|for|has|have|at)\b|[,?:;.!]|$)`),
		engine.LazyRE(`(?i)\b(?:report|read|give|tell\s+me|show|get)\s+(?:me\s+)?(?:the\s+)?(.+?)(?:\s+(?:of|in|on|for|from|at)\b|[,?:;.!]|$)`),
	}
	signWords = setOf("sign", "log", "login", "signin", "logon")
	userWords = setOf("user", "username", "login", "email", "mail", "account", "name", "id", "handle")
	passWords = setOf("password", "pass", "passwd", "pw", "pwd", "secret")
	textWords = setOf("title", "name", "text", "subject", "heading", "headline", "label")
)

// goal is what the task asks, parsed on each turn (cheap and stateless).
type goal struct {
	attr     []string // what is asked: the words a label should carry
	entity   []string // where it is: the other content words
	targets  []string // attr then entity
	user     string   // sign in as …
	query    string   // search for …
	ordinals []int    // first, second, … in task order
	words    map[string]bool
	literals []string   // versions and identifiers, kept whole (8.1.0, SECRET_KEY)
	names    []string   // proper names the task is about (Django): the answer's block or its headings must say them
	typ      AnswerType // what kind of value is asked for
	kind     string     // the API kind asked for ("which function …"): its answer names one
	apiWords []string   // with kind: the words a name that answers should carry, as the task writes them
	verb     string     // with kind: the stem of what the asked one does ("exempts" of "which decorator exempts …"), or ""
	weak     bool       // targets are weak words, matched in link texts as they are
}

// parseGoal reads the task. Words of the start URL (the site, the item the
// task is about, such as owner/repo) are context, not targets.
func parseGoal(task, startURL string) goal {
	g := goal{words: map[string]bool{}}
	skip := map[string]bool{}
	signIn := ""
	if m := signInRe.FindStringSubmatch(task); m != nil {
		g.user, signIn = m[1], m[0]
		for _, t := range stems(m[0]) {
			skip[t] = true
		}
	}
	text := placeholerRe.ReplaceAllString(task, " ")
	if searchRe.MatchString(text) {
		if q := TaskParams(text)["quote1"]; q != "" {
			g.query = q
		} else if m := searchFor.FindStringSubmatch(text); m != nil {
			g.query = m[1]
		}
		for _, t := range stems(g.query) {
			skip[t] = true
		}
		skip["search"] = true
	}
	if g.query != "" {
		text = strings.Replace(text, g.query, " ", 1)
	}
	// Who signs in (reader@example.com) is no item the answer is about.
	g.literals, g.typ = taskLiterals(strings.Replace(text, placeholerRe.ReplaceAllString(signIn, " "), " ", 1)), AskedType(text)
	context := map[string]bool{}
	if u, err := url.Parse(startURL); err == nil {
		// Words of the site and the path are context; an IP address's or a
		// port's digits are not words (they must not eat a task's "8.1.0").
		for _, t := range stems(u.Hostname() + " " + strings.NewReplacer("/", " ", "-", " ", "_", " ").Replace(u.Path)) {
			if !isNumber(t) {
				context[t] = true
			}
		}
	}
	// Digits that are parts of a literal ("2.2.1") are matched whole, not
	// as words.
	litParts := map[string]bool{}
	for _, l := range g.literals {
		for _, t := range stems(l) {
			if isNumber(t) {
				litParts[t] = true
			}
		}
	}
	var all []string
	for _, t := range stems(text) {
		if litParts[t] {
			continue
		}
		g.words[t] = true
		if n, ok := ordinals[t]; ok {
			g.ordinals = append(g.ordinals, n)
			continue
		}
		if stopWords[t] || skip[t] || contains(all, t) {
			continue
		}
		all = append(all, t)
	}
	var content []string
	for _, t := range all {
		if !context[t] {
			content = append(content, t)
		}
	}
	if len(content) == 0 {
		content = all
	}
	// The attribute phrase, if the task has one.
	first := -1
	var phrase string
	for _, re := range attrRes {
		if m := re.FindStringSubmatchIndex(text); m != nil && (first < 0 || m[0] < first) {
			first, phrase = m[0], text[m[2]:m[3]]
		}
	}
	for _, t := range stems(phrase) {
		if contains(content, t) && !contains(g.attr, t) {
			g.attr = append(g.attr, t)
		}
	}
	if len(g.attr) == 0 {
		g.attr = content
	}
	for _, t := range content {
		if !contains(g.attr, t) {
			g.entity = append(g.entity, t)
		}
	}
	g.targets = append(append([]string{}, g.attr...), g.entity...)
	g.kind, g.apiWords = apiWords(text, g)
	if g.kind != "" {
		g.verb = apiVerb(text)
	}
	for _, n := range taskNames(text) {
		if !context[n] && !skip[n] && !litParts[n] && !contains(g.names, n) {
			g.names = append(g.names, n)
		}
	}
	return g
}

// named reports whether every proper name of the task is in one of the
// sets of stems (a block's own words, its headings and the page's title).
func (g goal) named(sets ...map[string]bool) bool {
	for _, n := range g.names {
		found := false
		for _, s := range sets {
			found = found || s[n]
		}
		if !found {
			return false
		}
	}
	return true
}

// nameRe finds capitalised words; taskNames keeps those that do not start
// a sentence.
var nameRe = engine.LazyRE(`\p{Lu}\p{Ll}+`)

// taskNames returns the stems of the task's proper names: words written
// with a capital inside a sentence ("… called in Django?", "Which Python
// version …"). A block about the same thing under another name's heading
// (Jinja's loop variable, asked for Django's) must not answer the task:
// readPage requires each name in the block, its headings or the page's
// title. Literals (Environment.overlay) are matched whole elsewhere.
func taskNames(text string) []string {
	var out []string
	for _, m := range nameRe.FindAllStringIndex(text, -1) {
		i, j := m[0], m[1]
		opening := func(r rune) bool { return unicode.IsSpace(r) || strings.ContainsRune("(\"'“‘", r) }
		if r, _ := utf8.DecodeLastRuneInString(text[:i]); i > 0 && !opening(r) {
			continue // inside a word or a literal (maxTurns, Environment.overlay)
		}
		if r, _ := utf8.DecodeRuneInString(text[j:]); j < len(text) && (unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' ||
			r == '.' && j+1 < len(text) && !unicode.IsSpace(rune(text[j+1]))) {
			continue // an identifier or a literal (PyPI, SECRET_Key, Environment.overlay)
		}
		before := strings.TrimRightFunc(text[:i], opening)
		if r, _ := utf8.DecodeLastRuneInString(before); before == "" || strings.ContainsRune(".?!:", r) {
			continue // the first word of a sentence
		}
		t := stem(strings.ToLower(text[i:j]))
		if !stopWords[t] && !contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// stems splits s into lower-case words and strips common English endings,
// so "matching issues" meets "matches", "installs" meets "Installation".
func stems(s string) []string {
	words := strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	for i, w := range words {
		words[i] = stem(w)
	}
	return words
}

func stem(w string) string {
	n := len(w)
	switch {
	case n > 4 && strings.HasSuffix(w, "ies"):
		w = w[:n-3] + "y"
	case n > 4 && (strings.HasSuffix(w, "ches") || strings.HasSuffix(w, "shes") || strings.HasSuffix(w, "sses") || strings.HasSuffix(w, "xes")):
		w = w[:n-2]
	case n > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") && !strings.HasSuffix(w, "us"):
		w = w[:n-1]
	}
	n = len(w)
	cut := false
	switch {
	case n > 7 && strings.HasSuffix(w, "ation"):
		w = w[:n-5]
	case n > 5 && strings.HasSuffix(w, "ing"):
		w, cut = w[:n-3], true
	case n > 4 && strings.HasSuffix(w, "ed") && !strings.HasSuffix(w, "eed"):
		w, cut = w[:n-2], true
	}
	n = len(w)
	switch {
	case cut && n > 3 && w[n-1] == w[n-2] && strings.IndexByte("bdgmnprt", w[n-1]) >= 0:
		w = w[:n-1] // dropped → drop, running → run
	case n > 3 && w[n-1] == 'e' && !strings.HasSuffix(w, "ee"):
		w = w[:n-1] // release, released, releases → releas
	}
	return w
}

// seen is what the history says about the run so far.
type seen struct {
	start    string          // the run's first URL
	visited  map[string]bool // normalized URLs
	clicked  map[string]bool // url + " " + selector
	signedIn bool
	searched bool
	items    bool              // an item page (a URL with an id segment) was visited
	here     map[string]string // extraction key → value, on the current page
	order    []string          // extraction keys on the current page, in order
	typed    map[string]string // selector → value typed on the current page
	failed   map[string]bool   // selectors whose action failed
}

func readHistory(s *State, g goal) seen {
	h := seen{visited: map[string]bool{}, clicked: map[string]bool{}, here: map[string]string{},
		typed: map[string]string{}, failed: map[string]bool{}, start: s.URL}
	if len(s.History) > 0 {
		if a := s.History[0].Action; a.Tool == "navigate" && a.Value != "" {
			h.start = a.Value
		}
	}
	cur := normURL(s.URL)
	h.visited[cur] = true
	prev := ""
	covered := map[string]string{} // selector → page where a click on it was covered
	for _, t := range s.History {
		u := normURL(t.URL)
		h.visited[u] = true
		if u != normURL(h.start) && isItemURL(u) {
			h.items = true
		}
		a := t.Action
		ok := t.Result.Error == ""
		if !ok && a.Selector != "" && !t.Replayed {
			if a.Tool == "click" && isCovered(t.Result.Error) {
				covered[a.Selector] = prev // fails until something on that page is dismissed
			} else {
				h.failed[a.Selector] = true // a replayed miss may be a slow page: the elements say
			}
		}
		switch a.Tool {
		case "click":
			if ok {
				h.clicked[prev+" "+a.Selector] = true
				for sel, page := range covered {
					if page == prev && sel != a.Selector {
						delete(covered, sel) // a click on the same page (a dismissal) uncovered it
					}
				}
			}
		case "type":
			if ok && len(SecretNamesIn(a.Value)) > 0 && a.Submit {
				h.signedIn = true
			}
			if ok && g.query != "" && a.Value == g.query && a.Submit {
				h.searched = true
			}
		}
		prev = u
	}
	for sel := range covered {
		h.failed[sel] = true
	}
	// What was done on the current page: the trailing turns that ended here.
	start := len(s.History)
	for start > 0 && normURL(s.History[start-1].URL) == cur {
		start--
	}
	for _, t := range s.History[start:] {
		a := t.Action
		if t.Result.Error != "" {
			continue
		}
		switch a.Tool {
		case "wait":
			// Values read before a wait may have changed since.
			h.here, h.order = map[string]string{}, nil
		case "extract":
			// What a whole document holds (a source file in one pre) is
			// no answer: read elsewhere.
			if len(t.Result.ExtractedContent) > maxAnswerBlock {
				if a.Selector != "" {
					h.failed[a.Selector] = true
				}
				continue
			}
			key := a.Value
			if a.Selector != "" {
				key = "css:" + a.Selector
			}
			if _, dup := h.here[key]; !dup {
				h.order = append(h.order, key)
			}
			h.here[key] = strings.TrimSpace(t.Result.ExtractedContent)
		case "type":
			h.typed[a.Selector] = a.Value
		}
	}
	if cur != normURL(h.start) && isItemURL(cur) {
		h.items = true
	}
	return h
}

// Next picks the next action.
func (x *Explore) Next(ctx context.Context, s *State) (Action, error) {
	if err := ctx.Err(); err != nil {
		return Action{}, err
	}
	start := s.URL
	if len(s.History) > 0 && s.History[0].Action.Tool == "navigate" {
		start = s.History[0].Action.Value
	}
	g := parseGoal(s.Task, start)
	h := readHistory(s, g)
	last := s.MaxTurns > 0 && s.Turn >= s.MaxTurns
	signing := g.user != "" && !h.signedIn

	// 1. Sign in.
	if signing {
		if pw := findPassword(s.Elements); pw != nil && !h.failed[pw.Selector] {
			if uf := findUser(s.Elements, pw); uf != nil && h.typed[uf.Selector] != g.user && !h.failed[uf.Selector] {
				return Action{Tool: "type", Selector: uf.Selector, Value: g.user}, nil
			}
			name := pickSecret(s.SecretNames, g)
			if name == "" {
				return Action{Tool: "done"}, nil // no password declared: give up cleanly
			}
			return Action{Tool: "type", Selector: pw.Selector, Value: engine.SecretPlaceholder(name), Submit: true}, nil
		}
	}
	// An overlay covered the last click: dismiss it (the click is retried
	// on the next turn).
	if _, ok := coveredFailure(s); ok && !last {
		if d := dismissControl(s, h); d != nil {
			return Action{Tool: "click", Selector: d.Selector}, nil
		}
	}
	// Memory's route: its next step from this page, while it fits the page
	// (a missing control or a failure hands back to exploring).
	if !signing && !last && !replayed(s) {
		if v, ok := routeDone(s, h); ok {
			return Action{Tool: "done", Value: v}, nil
		}
		if a, ok := routeStep(s, h); ok {
			return withRecovery(s, h, a), nil
		}
	}
	// 2. Search, in the search field meant for what the task searches
	// (its label or placeholder names it); a field for something else only
	// when no link leads to what the task names.
	if g.query != "" && !h.searched && !signing {
		if f, fits := searchFieldFor(s.Elements, g); f != nil && !h.failed[f.Selector] {
			if link, _ := bestLink(s, g, h, nil); fits || link == nil {
				return Action{Tool: "type", Selector: f.Selector, Value: g.query, Submit: true}, nil
			}
		}
	}
	// 3. Items of a list: their texts when the task asks for titles or
	// names of the n-th items, else open the n-th item.
	if len(g.ordinals) > 0 && !signing {
		if items := itemList(s, g); len(items) > 0 {
			if wantsText(g) {
				var vals []string
				for _, n := range g.ordinals {
					if n > len(items) {
						break
					}
					key := "css:" + items[n-1].Selector
					v, ok := h.here[key]
					if !ok {
						return Action{Tool: "extract", Selector: items[n-1].Selector}, nil
					}
					vals = append(vals, v)
				}
				if len(vals) > 0 {
					return Action{Tool: "done", Value: strings.Join(vals, AnswerSep)}, nil
				}
			} else if !h.items && g.ordinals[0] <= len(items) && !last {
				return Action{Tool: "click", Selector: items[g.ordinals[0]-1].Selector}, nil
			}
		}
	}
	// 4. A dead end (an error page) goes back to where it came from.
	if errorPage(s.URL, s.Status, "") != "" && !signing {
		if p := parent(s); p != "" && !last {
			return Action{Tool: "navigate", Value: p}, nil
		}
		return Action{Tool: "done"}, nil
	}
	// 5. A labelled value that carries every asked-for word, and is the
	// only value of that label on the page, answers; else the page is read
	// (the block under the heading that matches the task); else follow the
	// best link; else go back and try the next-best link; else the best
	// partial value.
	best, full, asked := bestValue(s.Labels, g, s.Title)
	answer := func(lv LabelValue) Action {
		v, ok := h.here[lv.Label]
		if (!ok && placeholder(lv.Value) || ok && placeholder(v)) && waitedHere(s) < 3 && !last {
			return Action{Tool: "wait", Amount: DefaultWait} // still loading: wait, then read again
		}
		if ok {
			return Action{Tool: "done", Value: v}
		}
		return Action{Tool: "extract", Value: lv.Label}
	}
	if best != nil && full && !signing && (len(s.Blocks) == 0 || uniqueLabel(s.Labels, best.Label)) {
		return answer(*best), nil
	}
	if !signing {
		if pick, ok := readPage(s, g); ok {
			var vals []string
			for _, sel := range pick.sels {
				v, ok := h.here["css:"+sel]
				if !ok {
					return Action{Tool: "extract", Selector: sel}, nil
				}
				if v != "" {
					vals = append(vals, v)
				}
			}
			if len(vals) > 0 {
				return Action{Tool: "done", Value: strings.Join(vals, AnswerSep)}, nil
			}
		}
	}
	if best != nil && full && !signing && len(s.Blocks) == 0 {
		return answer(*best), nil
	}
	if !last {
		have := best
		if !asked {
			have = nil // a value of the other words only does not stop the search
		}
		// The item the task names (a version, an id) is not on this page
		// of a paginated list: the next page.
		if len(g.literals) > 0 && !literalOnPage(s, g) && !(best != nil && full) {
			if next := nextPage(s, h); next != nil {
				return Action{Tool: "click", Selector: next.Selector}, nil
			}
		}
		if link, _ := bestLink(s, g, h, have); link != nil {
			return withRecovery(s, h, Action{Tool: "click", Selector: link.Selector}), nil
		}
		if weak := g.weakGoal(); len(weak.targets) > 0 && len(s.Blocks) > 0 {
			// No link carries the task's words: one carrying its general
			// words ("value", "number") is a better bet than giving up.
			if link, _ := bestLink(s, weak, h, nil); link != nil {
				return Action{Tool: "click", Selector: link.Selector}, nil
			}
		}
	}
	// A value of only some of the asked words; where the page can be read,
	// only when the task asks for no particular kind of value.
	// A label that carries at least half of the asked words, or names the
	// task's item (every one of its other words: "Saturday" for the opening
	// hours on Saturday) on a page that left nothing else to try: "command"
	// alone is no answer to which class invokes commands as command line
	// scripts, nor "response", read on the last turn, to which parameter
	// tells Requests to stop waiting for a response.
	partial := best != nil && !signing && (len(s.Blocks) == 0 || g.typ == AnyAnswer)
	if partial {
		if n := askedIn(best, g); n == 0 && (last || !namesItem(best, g)) || n > 0 && 2*n < len(g.attr) {
			partial = false
		}
		// "Which function returns the fields": a label without the kind's
		// word names what the function is about (a parameter "fields" of
		// type attrs.Attribute), not the function.
		if g.kind != "" && !setOfStems(best.Label)[stem(g.kind)] {
			partial = false
		}
		// A label several values share on the page ("Parameters" of every
		// function, "Default") answers no more as a partial value than as a
		// full one: which of its values is the task's, the label cannot say.
		if len(s.Blocks) > 0 && !uniqueLabel(s.Labels, best.Label) {
			partial = false
		}
	}
	// No link carries the task's words: the site's search, once per run,
	// with the task's literal or its content words.
	if !last && !partial && !signing && len(s.Blocks) > 0 && g.query == "" && !searchedOnce(s) {
		if f := findSearch(s.Elements); f != nil && !h.failed[f.Selector] {
			if q := searchWords(s.Task, g); q != "" {
				return Action{Tool: "type", Selector: f.Selector, Value: q, Submit: true}, nil
			}
		}
	}
	if !last && !partial && !signing && len(s.Blocks) > 0 {
		if p := parent(s); p != "" {
			return Action{Tool: "navigate", Value: p}, nil // a dead end: back, and the next-best link
		}
	}
	if partial {
		return answer(*best), nil
	}
	// 6. Text blocks: list headings, paragraphs and code, then read the best
	// (pages that cannot list their blocks themselves only: where they can,
	// reading the page above has already said no block answers).
	if !signing && !last && len(s.Blocks) == 0 {
		if a, ok := textAnswer(s, g, h); ok {
			return a, nil
		}
	}
	return Action{Tool: "done"}, nil
}

// searchedOnce reports whether the run already submitted a search.
func searchedOnce(s *State) bool {
	for _, t := range s.History {
		if t.Action.Tool == "type" && t.Action.Submit && len(SecretNamesIn(t.Action.Value)) == 0 {
			return true
		}
	}
	return false
}

// searchWords is what to search a site for: the task's literals, else its
// content words as the task writes them.
func searchWords(task string, g goal) string {
	if len(g.literals) > 0 {
		return strings.Join(g.literals, " ")
	}
	var out []string
	for _, w := range strings.FieldsFunc(task, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		if st := stem(strings.ToLower(w)); contains(g.targets, st) && !contains(out, w) {
			out = append(out, w)
		}
	}
	return strings.Join(out, " ")
}

// weakWords are stop words for matching that still say where an answer
// may be ("the default value" → a page of values).
var weakWords = setOf("value", "values", "number", "count", "list")

// weakGoal is a goal of the task's weak words only.
func (g goal) weakGoal() goal {
	w := goal{words: g.words, user: g.user, weak: true}
	for t := range g.words {
		if weakWords[t] {
			w.attr = append(w.attr, t)
		}
	}
	sortStrings(w.attr)
	w.targets = w.attr
	return w
}

// uniqueLabel reports whether the page holds one value under the label.
func uniqueLabel(labels []LabelValue, label string) bool {
	n := 0
	for _, lv := range labels {
		if lv.Label == label {
			n++
		}
	}
	return n <= 1
}

func wantsText(g goal) bool {
	for _, t := range g.attr {
		if textWords[t] {
			return true
		}
	}
	return false
}

// bestValue picks the labelled value whose label best carries the asked-for
// words (then the other task words, then the shortest label; a label made
// only of other task words, such as "Saturday" for "opening hours on
// Saturday", is a partial answer); full is true when it carries all the
// asked-for words, asked when it carries at least one.
//
// A task's proper names (g.names) must be in the label, its value or the
// page's title: "loop.index" on Jinja's page does not answer what Django
// calls its loop variable.
func bestValue(labels []LabelValue, g goal, title string) (best *LabelValue, full, asked bool) {
	var bA, bE int
	var bP float64
	seenLabel := map[string]bool{}
	titled := setOfStems(title)
	for i := range labels {
		lv := &labels[i]
		// A task that names its item (fs.createReadStream, version 8.1.0)
		// asks for the value in that item's place: "highWaterMark …
		// Default: 16384" under fs.createWriteStream is another item's.
		if !placed(lv, g, title) {
			continue
		}
		if seenLabel[lv.Label] {
			continue // the first of several same-named values
		}
		seenLabel[lv.Label] = true
		lt := contentStems(lv.Label)
		if len(lt) == 0 {
			continue
		}
		if identLabel(lv.Label) && !namesLiteral(lv.Label, g.literals) {
			// A term that is an API name (click.shell_completion.CompletionItem:
			// a definition list's entry, not a "label: value" pair) answers
			// only a task that names it.
			continue
		}
		if len(g.names) > 0 && !g.named(setOfStems(lv.Label+" "+lv.Value), titled) {
			continue
		}
		a, e := 0, 0
		for _, t := range dedupe(lt) {
			switch {
			case contains(g.attr, t):
				a++
			case contains(g.entity, t):
				e++
			}
		}
		if a+e == 0 {
			continue
		}
		p := float64(a+e) / float64(len(dedupe(lt)))
		if p < 0.5 || a == 0 && p < 1 {
			continue // a label of other words, or only partly about the task
		}
		if best == nil || a > bA || a == bA && (p > bP || p == bP && e > bE) {
			best, bA, bE, bP = lv, a, e, p
		}
	}
	return best, best != nil && bA == len(g.attr), bA > 0
}

// placed reports whether each of the task's literals is in a labelled
// value's label, its value, its place (the headings it sits under) or the
// page's title.
func placed(lv *LabelValue, g goal, title string) bool {
	for _, l := range g.literals {
		if !hasLiteral(lv.Label, l) && !hasLiteral(lv.Value, l) && !hasLiteral(lv.Under, l) && !hasLiteral(title, l) {
			return false
		}
	}
	return true
}

// askedIn counts the asked-for words of g in a value's label.
func askedIn(lv *LabelValue, g goal) int {
	if lv == nil {
		return 0
	}
	n := 0
	for _, t := range dedupe(contentStems(lv.Label)) {
		if contains(g.attr, t) {
			n++
		}
	}
	return n
}

// namesItem reports whether a value's label carries every word of the
// task's item (g.entity).
func namesItem(lv *LabelValue, g goal) bool {
	words := setOfStems(lv.Label)
	for _, t := range g.entity {
		if !words[t] {
			return false
		}
	}
	return len(g.entity) > 0
}

// identRe is a dotted or underscored identifier, the whole of a label,
// with its signature if it has one (attrs.fields(cls)).
var identRe = engine.LazyRE(`^[A-Za-z_][A-Za-z0-9_]*(?:[._][A-Za-z0-9_]+)+(?:\([^()]*\))?$`)

// identLabel reports whether a label is an API name rather than words. The
// glyph of a heading's permalink that ends a label (¶, Sphinx's U+F0C1
// icon) is not part of the name.
func identLabel(label string) bool {
	return identRe.MatchString(strings.TrimRightFunc(strings.TrimSpace(label), func(r rune) bool {
		return r == '¶' || unicode.Is(unicode.Co, r) || unicode.IsSpace(r)
	}))
}

// namesLiteral reports whether label holds one of the task's literals.
func namesLiteral(label string, literals []string) bool {
	for _, l := range literals {
		if hasLiteral(label, l) {
			return true
		}
	}
	return false
}

func dedupe(xs []string) []string {
	var out []string
	for _, x := range xs {
		if !contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

// bestLink scores the visible links and controls by the task words in their
// text and label (asked-for words count double) or, at half weight, in their
// URL path. Visited targets, controls already clicked on this page and
// links that add nothing to the best value already on the page are skipped.
func bestLink(s *State, g goal, h seen, have *LabelValue) (*Element, float64) {
	cur := normURL(s.URL)
	signing := g.user != "" && !h.signedIn
	if len(g.targets) == 0 && !signing {
		return nil, 0
	}
	covered := map[string]bool{}
	if have != nil {
		for _, t := range contentStems(have.Label) {
			covered[t] = true
		}
	}
	total := float64(2*len(g.attr) + len(g.entity))
	var best *Element
	bestScore := 0.0
	for i := range s.Elements {
		e := &s.Elements[i]
		if !e.Visible || !clickable(e) || h.failed[e.Selector] || h.clicked[cur+" "+e.Selector] || anti(s, e.Selector) {
			continue
		}
		if e.Href != "" {
			target := normURL(resolve(s.URL, e.Href))
			if target == "" || h.visited[target] || strings.HasPrefix(strings.ToLower(e.Href), "javascript:") {
				continue
			}
			if !strings.HasPrefix(e.Href, "#") && !sameSiteLink(s.URL, e.Href, s.Task) {
				continue // another site: not where the task's answer is
			}
		}
		weigh := func(toks []string) (float64, bool) {
			a, n, fresh := 0, 0, false
			for _, t := range dedupe(toks) {
				switch {
				case contains(g.attr, t):
					a++
				case contains(g.entity, t):
					n++
				default:
					continue
				}
				if !covered[t] {
					fresh = true
				}
			}
			return float64(2*a+n) / total, a > 0 || fresh
		}
		words := contentStems
		if g.weak {
			words = stems
		}
		score, useful := weigh(words(e.Text + " " + e.Label))
		if score == 0 {
			score, useful = weigh(hrefStems(e.Href))
			score /= 2
		}
		if !useful {
			score = 0
		}
		for _, l := range g.literals {
			if hasLiteral(e.Text+" "+e.Label, l) {
				score += 1 // the link names the item itself ("Version 8.1.0")
			}
		}
		switch {
		case score == 0:
		case e.Region == "main":
			score += 0.001 // main content first, navigation chrome last
		case e.Region == "nav":
			score -= 0.001
		}
		isSign := false
		for _, t := range stems(e.Text + " " + e.Label) {
			if signWords[t] {
				isSign = true
			}
		}
		switch {
		case signing && isSign:
			score += 1 // signing in comes first
		case isSign:
			score = 0 // never wander into sign-in or sign-out
		}
		if score > 0 && memoryUsed(s, e.Selector) {
			score += 0.25 // memory's hint: the route used this control
		}
		if score > bestScore {
			best, bestScore = e, score
		}
	}
	return best, bestScore
}

// itemList returns the page's list of similar item links (hrefs that differ
// only in an id segment, such as /orders/17, /orders/18) whose path words
// match the task, in page order; of several, the best matching, then the
// longest.
func itemList(s *State, g goal) []*Element {
	groups := map[string][]*Element{}
	var keys []string
	for i := range s.Elements {
		e := &s.Elements[i]
		if !e.Visible || e.Href == "" {
			continue
		}
		u, err := url.Parse(resolve(s.URL, e.Href))
		if err != nil || !sameSiteLink(s.URL, e.Href, s.Task) {
			continue // a link to another site is no item of this page's list
		}
		segs := strings.Split(strings.Trim(u.Path, "/"), "/")
		if len(segs) == 0 || !isIDSegment(segs[len(segs)-1]) {
			continue
		}
		key := u.Host + "/" + strings.Join(segs[:len(segs)-1], "/")
		if _, ok := groups[key]; !ok {
			keys = append(keys, key)
		}
		if !containsEl(groups[key], e.Href) {
			groups[key] = append(groups[key], e)
		}
	}
	var bestKey string
	bestHits, bestLen := -1, 0
	for _, k := range keys {
		hits := 0
		for _, t := range dedupe(hrefStems(k)) {
			if contains(g.targets, t) {
				hits++
			}
		}
		n := len(groups[k])
		if n < 2 {
			continue
		}
		if hits > bestHits || hits == bestHits && n > bestLen {
			bestKey, bestHits, bestLen = k, hits, n
		}
	}
	return groups[bestKey]
}

func containsEl(els []*Element, href string) bool {
	for _, e := range els {
		if e.Href == href {
			return true
		}
	}
	return false
}

// strconvQuote quotes s as engine.RenderMemory quotes stored strings.
func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// textBlocks are the elements textAnswer lists to read a block of text.
const textBlocks = "h1, h2, h3, p, pre, code, li, td, dd"

// textAnswer reads a block of text when no label answers: it first lists
// the page's text blocks (one get_elements step), then extracts the one
// whose words best match the task.
func textAnswer(s *State, g goal, h seen) (Action, bool) {
	if len(g.targets) == 0 {
		return Action{}, false
	}
	var listing string
	for i := len(s.History) - 1; i >= 0; i-- {
		t := s.History[i]
		if normURL(t.URL) != normURL(s.URL) {
			break
		}
		if t.Action.Tool == "get_elements" && t.Action.Selector == textBlocks {
			listing = t.Result.ExtractedContent
			if t.Result.Error != "" {
				return Action{}, false
			}
			break
		}
	}
	if listing == "" {
		for _, t := range s.History {
			if normURL(t.URL) == normURL(s.URL) && t.Action.Tool == "get_elements" && t.Action.Selector == textBlocks {
				return Action{}, false // listed once here already
			}
		}
		return Action{Tool: "get_elements", Selector: textBlocks, Amount: 200}, true
	}
	if len(h.order) > 0 {
		return Action{Tool: "done", Value: h.here[h.order[0]]}, true
	}
	bestSel, best := "", 0.0
	for _, line := range strings.Split(listing, "\n") {
		sel, text, ok := parseListing(line)
		if !ok || h.failed[sel] {
			continue
		}
		toks := dedupe(contentStems(text))
		if len(toks) == 0 {
			continue
		}
		a, n := 0, 0
		for _, t := range toks {
			switch {
			case contains(g.attr, t):
				a++
			case contains(g.entity, t):
				n++
			}
		}
		// Blocks that carry the asked-for words, then the others, then short ones.
		score := float64(2*a+n)/float64(2*len(g.attr)+len(g.entity)) + 0.1*float64(a+n)/float64(len(toks))
		if a > 0 && score > best {
			bestSel, best = sel, score
		}
	}
	if bestSel == "" {
		return Action{}, false
	}
	return Action{Tool: "extract", Selector: bestSel}, true
}

// parseListing reads one FormatElements line: `selector tag "text" …`.
func parseListing(line string) (sel, text string, ok bool) {
	i := strings.Index(line, ` "`)
	if i < 0 {
		return "", "", false
	}
	head := strings.Fields(line[:i])
	if len(head) < 2 {
		return "", "", false
	}
	sel = strings.Join(head[:len(head)-1], " ")
	rest := line[i+2:]
	j := strings.Index(rest, `"`)
	for j > 0 && rest[j-1] == '\\' {
		k := strings.Index(rest[j+1:], `"`)
		if k < 0 {
			break
		}
		j += k + 1
	}
	if j < 0 {
		return "", "", false
	}
	return sel, rest[:j], true
}

func clickable(e *Element) bool {
	switch e.Tag {
	case "a", "button":
		return true
	case "input":
		t := strings.ToLower(e.Type)
		return t == "submit" || t == "button"
	}
	return e.Role == "button" || e.Role == "tab" || e.Role == "link"
}

func findPassword(els []Element) *Element {
	for i := range els {
		if els[i].Visible && strings.EqualFold(els[i].Type, "password") {
			return &els[i]
		}
	}
	return nil
}

// findUser is the username field: a text or email input whose name, label,
// placeholder or selector says user/login/email, else the last text input
// before the password field.
func findUser(els []Element, pw *Element) *Element {
	var before *Element
	for i := range els {
		e := &els[i]
		if e == pw || e.Selector == pw.Selector {
			break
		}
		if !e.Visible || e.Tag != "input" {
			continue
		}
		t := strings.ToLower(e.Type)
		if t != "" && t != "text" && t != "email" && t != "tel" {
			continue
		}
		for _, w := range stems(e.Name + " " + e.Label + " " + e.Placeholder + " " + e.Selector) {
			if userWords[w] {
				return e
			}
		}
		before = e
	}
	return before
}

// pickSecret chooses the secret to type as the password: one whose name
// says password, else one whose name shares a word with the task, else the
// only one.
func pickSecret(names []string, g goal) string {
	for _, n := range names {
		for _, t := range stems(strings.NewReplacer("_", " ", "-", " ", ".", " ").Replace(n)) {
			if passWords[t] {
				return n
			}
		}
	}
	for _, n := range names {
		for _, t := range stems(strings.NewReplacer("_", " ", "-", " ", ".", " ").Replace(n)) {
			if g.words[t] {
				return n
			}
		}
	}
	if len(names) == 1 {
		return names[0]
	}
	return ""
}

// searchFieldFor is the search field to search for the task in: the first
// whose label, placeholder or name carries one of the task's target words
// or names nothing in particular ("Search", "Search or jump to…") — it
// fits; else the first search field, which searches something else ("Search
// issues" for a task about discussions) and does not fit; else nil.
func searchFieldFor(els []Element, g goal) (*Element, bool) {
	var first *Element
	for i := range els {
		e := &els[i]
		if !isSearchField(e) {
			continue
		}
		if first == nil {
			first = e
		}
		named := false
		for _, t := range contentStems(e.Label + " " + e.Placeholder) {
			if contains(g.targets, t) {
				return e, true
			}
			if !searchWordsSet[t] {
				named = true
			}
		}
		if !named {
			return e, true
		}
	}
	return first, false
}

// searchWordsSet are the words of a search field that name no content.
var searchWordsSet = setOf("search", "find", "query", "site", "jump", "type", "enter", "keyword", "keywords", "term", "terms", "here", "or", "everything", "…", "quick")

// findSearch is a search field: type=search, role=searchbox, name q/query/
// search, or a placeholder or label saying search.
func findSearch(els []Element) *Element {
	for i := range els {
		if isSearchField(&els[i]) {
			return &els[i]
		}
	}
	return nil
}

func isSearchField(e *Element) bool {
	if !e.Visible || (e.Tag != "input" && e.Tag != "textarea") {
		return false
	}
	t := strings.ToLower(e.Type)
	n := strings.ToLower(e.Name)
	return t == "search" || e.Role == "searchbox" || n == "q" || n == "query" || n == "search" || n == "s" ||
		strings.Contains(strings.ToLower(e.Placeholder+" "+e.Label), "search")
}

func contentStems(s string) []string {
	var out []string
	for _, t := range stems(s) {
		if !stopWords[t] {
			out = append(out, t)
		}
	}
	return out
}

func hrefStems(href string) []string {
	u, err := url.Parse(href)
	if err != nil {
		return nil
	}
	return contentStems(strings.NewReplacer("/", " ", "-", " ", "_", " ", ".", " ").Replace(u.Path))
}

func resolve(base, href string) string {
	u, err := ResolveURL(base, href)
	if err != nil {
		return ""
	}
	return u
}

func normURL(u string) string {
	if u == "" {
		return ""
	}
	n, err := engine.NormalizeURL(u)
	if err != nil {
		return u
	}
	return n.URL
}

// isItemURL reports whether a URL names one item: a path segment that is an
// id (a number, a hash, a code with digits).
func isItemURL(u string) bool {
	p, err := url.Parse(u)
	if err != nil {
		return false
	}
	for _, s := range strings.Split(p.Path, "/") {
		if isIDSegment(s) {
			return true
		}
	}
	return false
}

var idSegRe = engine.LazyRE(`^(\d+|[0-9a-f]{7,40})$`)

func isIDSegment(s string) bool {
	return idSegRe.MatchString(s) && strings.ContainsAny(s, "0123456789")
}

// setOf is a set of words, stemmed as task and page words are.
func setOf(xs ...string) map[string]bool {
	m := make(map[string]bool, len(xs))
	for _, x := range xs {
		m[x], m[stem(x)] = true, true
	}
	return m
}
