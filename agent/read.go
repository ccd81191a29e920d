package agent

import (
	"net/url"
	"slices"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/pemdev/pem/engine"
)

// How the explore planner reads a page before it leaves it: it scores the
// page's blocks (State.Blocks) by the task's words found in the block and
// in the heading it sits under, keeps only blocks that hold a value of the
// asked type (AskedType), every literal of the task (a version such as
// 8.1.0, an identifier such as MAX_SIZE) and every proper name of it (in
// the block, its headings or the page's title: "… in Django?") and, for
// "which function (class, …)", that name one of that kind (apiAnswer), and
// reads the best one — with the API term it sits under for a "which …"
// task. Nothing here knows a site: only the page's structure and the
// task's words.

// literalRe finds the task's literal tokens, kept whole: ISO dates,
// versions and dotted names (8.1.0, Environment.overlay) and identifiers with an
// underscore or inner capitals (SECRET_KEY, maxTurns).
var literalRe = engine.LazyRE(`\b\d{4}-\d{2}-\d{2}\b|\b[vV]?\d+(?:\.\d+)+\b|\b[A-Za-z][A-Za-z0-9]*(?:[._][A-Za-z0-9]+)+\b|\b[a-z]+[A-Z][A-Za-z0-9]*\b`)

// taskLiterals returns the literal tokens of a task (lower-cased, in order).
func taskLiterals(task string) []string {
	var out []string
	for _, m := range literalRe.FindAllString(task, -1) {
		if !strings.ContainsAny(m, "._-") && !hasInnerUpper(m) {
			continue
		}
		m = strings.ToLower(strings.TrimRight(m, "."))
		if !contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

func hasInnerUpper(s string) bool {
	for i, r := range s {
		if i > 0 && r >= 'A' && r <= 'Z' {
			return true
		}
	}
	return false
}

// hasLiteral reports whether text holds the literal as a whole token.
func hasLiteral(text, lit string) bool {
	t := strings.ToLower(text)
	for i := 0; ; {
		j := strings.Index(t[i:], lit)
		if j < 0 {
			return false
		}
		j += i
		end := j + len(lit)
		before := j == 0 || !wordByte(t[j-1]) ||
			// a version tag: "v1.0.0" names version 1.0.0
			t[j-1] == 'v' && len(lit) > 0 && isDigit(lit[0]) && (j == 1 || !wordByte(t[j-2]))
		after := end == len(t) || !wordByte(t[end]) && !(t[end] == '.' && end+1 < len(t) && isDigit(t[end+1]))
		if before && after {
			return true
		}
		i = j + 1
	}
}

func wordByte(b byte) bool { return b == '_' || b >= 'a' && b <= 'z' || b >= '0' && b <= '9' }
func isDigit(b byte) bool  { return b >= '0' && b <= '9' }

// apiKindRe finds a task asking which function (class, parameter, …) does
// something: its answer is an API name.
var apiKindRe = engine.LazyRE(`(?i)\b(?:what|which)\s+(?:[\p{L}\p{N}_-]+\s+){0,2}?(` + apiKinds + `)s?\b`)

// apiKinds are the API kinds a "which …" task may ask for.
const apiKinds = `function|method|class|exception|error|parameter|argument|attribute|decorator|module|option|property|setting|variable|filter|hook`

// apiVerbRe finds what the asked one does in "which <kind> [of X] <verb>s
// …": the word after the kind, in the third person ("exempts", "returns").
var apiVerbRe = engine.LazyRE(`(?i)\b(?:what|which)\s+(?:[\p{L}\p{N}_-]+\s+){0,2}?(?:` + apiKinds + `)s?(?:\s+of\s+[\p{L}\p{N}_.()-]+)?\s+([a-z]{3,}s)\b`)

// notVerbs are words ending in s that may follow the kind without saying
// what it does: auxiliaries and other parts of speech.
var notVerbs = setOf("does", "has", "was", "is", "its", "this", "thus", "as", "us", "plus", "versus", "always", "sometimes", "perhaps", "across", "yes", "less", "unless", "process", "access", "class", "pass", "alias", "status", "bytes", "keys", "values", "options", "settings")

// apiVerb is the stem of the verb that says what the asked API does, or
// "" when the task says none that way.
func apiVerb(task string) string {
	m := apiVerbRe.FindStringSubmatch(task)
	if m == nil || notVerbs[strings.ToLower(m[1])] {
		return ""
	}
	return stem(strings.ToLower(m[1]))
}

// saysVerb reports whether a definition says it does the task's verb:
// a word of text, or a part of the term's name (Limiter.exempt), that
// starts with the verb's stem (exempt: exempts, exemption). A term's
// parameters (exempt_when) are not what it does.
func saysVerb(verb, termText, text string) bool {
	name, _, _ := strings.Cut(termText, "(")
	for _, w := range append(identParts(strings.TrimSpace(name)), strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) })...) {
		if strings.HasPrefix(w, verb) {
			return true
		}
	}
	return false
}

// codeIdentRe finds identifiers in code (dotted names kept whole).
var codeIdentRe = engine.LazyRE(`[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*`)

// apiWords returns the API kind a task asks for and the words a name that
// answers it should carry: the asked-for words as the task writes them
// ("fields" in "which function returns the fields …"; not stemmed: an API
// name is a literal, and field is not fields), else its other content
// words; the kind's own word and the task's literals aside.
func apiWords(task string, g goal) (string, []string) {
	m := apiKindRe.FindStringSubmatch(task)
	if m == nil {
		return "", nil
	}
	kind := strings.ToLower(m[1])
	var asked, other []string
	for _, w := range strings.FieldsFunc(strings.ToLower(task), func(r rune) bool {
		return !(r == '_' || r == '.' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9')
	}) {
		w = strings.Trim(w, ".")
		if w == "" || w == kind || stem(w) == stem(kind) || contains(g.literals, w) {
			continue
		}
		switch st := stem(w); {
		case contains(g.attr, st):
			asked = append(asked, w)
		case contains(g.entity, st):
			other = append(other, w)
		}
	}
	if len(asked) == 0 {
		asked = other
	}
	return kind, dedupe(asked)
}

// codeNamesAsked reports whether code names an identifier, none of the
// task's literals, one of whose parts (split at dots, underscores and inner
// capitals) is a word a name answering the task should carry. A code
// example answers "which function …" only so: one that merely uses
// attrs.field does not say which function returns the fields.
func codeNamesAsked(code string, g goal) bool {
	for _, id := range codeIdentRe.FindAllString(code, -1) {
		if contains(g.literals, strings.ToLower(id)) {
			continue
		}
		for _, part := range identParts(id) {
			if contains(g.apiWords, part) {
				return true
			}
		}
	}
	return false
}

// identParts splits an identifier at dots, underscores and inner capitals,
// lower-cased: FrozenInstanceError → frozen, instance, error.
func identParts(id string) []string {
	var out []string
	for _, p := range strings.FieldsFunc(id, func(r rune) bool { return r == '.' || r == '_' }) {
		start := 0
		for i := 1; i < len(p); i++ {
			if p[i] >= 'A' && p[i] <= 'Z' && p[i-1] >= 'a' && p[i-1] <= 'z' {
				out = append(out, strings.ToLower(p[start:i]))
				start = i
			}
		}
		out = append(out, strings.ToLower(p[start:]))
	}
	return out
}

// paramEntryRe is a parameter's entry in a Sphinx field list:
// "name (type) – what it is".
var paramEntryRe = engine.LazyRE(`^\s*\*{0,2}[A-Za-z_][A-Za-z0-9_]*\s*\([^)]*\)\s*[–—-]\s`)

// valueKinds are the API kinds a parameter's entry can answer.
var valueKinds = setOf("parameter", "argument", "option", "attribute", "setting", "variable", "property")

// apiAnswer says why text (read with the API term it sits under, if any)
// cannot answer a task asking which function (class, parameter, …) does
// something, or "": it must name one (namesAPI; the term does); a code
// example must name one with the asked words (codeNamesAsked); a
// parameter's entry (field_transformer (callable) – a function that …)
// answers only a task asking for a parameter, not for the function.
func apiAnswer(term, text string, code bool, g goal) string {
	switch {
	case g.kind == "":
		return ""
	case !(term != "" && namesAPI(term, g)) && !namesAPI(text, g):
		return "it names no " + g.kind + ", which the task asks for"
	case (code || codeExample(text)) && !codeNamesAsked(text, g):
		return "it is a code example that names no " + g.kind + " with the task's words"
	case paramEntryRe.MatchString(text) && !valueKinds[stem(g.kind)]:
		return "it is a parameter's entry, not the " + g.kind + " the task asks for"
	}
	return ""
}

// namesAPI reports whether an answer to "which function (class, …)" names
// one: a bare name, an identifier (dotted, underscored, called, or in
// camel case: tally.counters, text_error_template, diagnose(),
// TemplateLookup) that is none of the task's own (its literals, a class it
// names), or the word next to the kind's own ("the limit argument"). "the
// API reference" names none, and a function written as a call
// (namedbidict()) or a class's name (BidictBase) names no attribute,
// parameter or other value.
func namesAPI(a string, g goal) bool {
	f := strings.Fields(a)
	if len(f) == 1 {
		return true
	}
	for i, w := range f {
		w = strings.Trim(w, ",;:!?\"'“”‘’«»")
		lw := strings.ToLower(strings.TrimSuffix(strings.TrimRight(w, "."), "()"))
		// The task's own identifiers (its literals, a class it names:
		// "… put a TaggableManager in …") are what it asks about, not the
		// name it asks for.
		own := contains(g.literals, lw) || !strings.ContainsAny(lw, "._") && g.words[stem(lw)]
		if apiIdent(strings.TrimRight(w, ".")) && !own {
			if valueKinds[stem(g.kind)] && (strings.HasSuffix(strings.TrimRight(w, "."), "()") || className(strings.TrimRight(w, "."))) {
				continue // a function (namedbidict()) or a class (BidictBase), not the attribute (parameter, …) asked for
			}
			return true
		}
		if stem(lw) != stem(g.kind) {
			continue
		}
		for _, j := range []int{i - 1, i + 1} {
			if j < 0 || j >= len(f) {
				continue
			}
			n := strings.ToLower(strings.Trim(f[j], ",;:.!?\"'“”‘’«»()"))
			// The word after the kind's names it only when written as a
			// name ("the method `lock`" is rare prose; "this method only
			// works" names none), the word before only when it is no
			// determiner or adverb ("the limit argument", not "each
			// method", "another method").
			if j == i+1 && !apiIdent(strings.Trim(f[j], ",;:.!?\"'“”‘’«»()")) && !strings.ContainsAny(f[j], "`'\"“‘") {
				continue
			}
			if n != "" && !stopWords[stem(n)] && !g.words[stem(n)] && !kindDeterminers[n] {
				return true
			}
		}
	}
	return false
}

// kindDeterminers are words before a kind's own that say which one in
// prose ("each method", "another function"), not by name.
var kindDeterminers = setOf("each", "every", "another", "other", "such", "same", "one", "some", "these", "those", "both", "either", "neither", "only", "new", "given", "following", "above", "below", "previous", "next", "last", "first", "second", "own", "simple", "special", "single", "helper", "better", "whole", "builtin", "built-in")

// namesOne reports whether an answer to "which <thing> …" that asks for
// no API kind ("Which library …", "Which shells …") names one: a short
// answer (a name or a list of a few), an identifier that is none of the
// task's own, or a proper name — a capitalised word inside a sentence
// that the task does not hold. A paragraph about the task's words that
// names nothing ("Some … third party libraries will automatically attempt
// to convert …") does not say which.
func namesOne(a string, g goal) bool {
	f := strings.Fields(a)
	if len(f) <= 3 {
		return true
	}
	for i, raw := range f {
		w := strings.Trim(raw, ",;:!?\"'“”‘’«»()[]")
		lw := strings.ToLower(strings.TrimSuffix(strings.TrimRight(w, "."), "()"))
		if w == "" || contains(g.literals, lw) || g.words[stem(lw)] {
			continue
		}
		if apiIdent(strings.TrimRight(w, ".")) {
			// An identifier made of the task's own words ("event_dict"
			// for "… to the event dict") is what the task is about, not
			// the name it asks for.
			if !taskWordsOnly(strings.TrimRight(w, "."), g) {
				return true
			}
			continue
		}
		r := []rune(w)
		prev := ""
		if i > 0 {
			prev = f[i-1]
		}
		// A capitalised word inside a sentence is a name; an acronym
		// ("UNIX timestamps", "JSON output") is a common noun's spelling.
		if i > 0 && unicode.IsUpper(r[0]) && strings.ToUpper(w) != w && !strings.HasPrefix(raw, "(") && !strings.ContainsAny(lastRune(prev), ".!?:–—-") && !stopWords[stem(lw)] {
			return true
		}
	}
	return false
}

// lastRune is s's last character, as a string ("" for "").
func lastRune(s string) string {
	_, n := utf8.DecodeLastRuneInString(s)
	return s[len(s)-n:]
}

// taskWordsOnly reports whether every part of an identifier is a word of
// the task (event_dict, eventDict for "… the event dict").
func taskWordsOnly(ident string, g goal) bool {
	parts := identParts(ident[strings.LastIndexByte(ident, '.')+1:])
	for _, p := range parts {
		if !g.words[stem(strings.ToLower(p))] {
			return false
		}
	}
	return len(parts) > 0
}

// whichRe: the task asks which thing (a name), "Which validator …".
var whichRe = engine.LazyRE(`(?i)^\s*which\s+([\p{L}_-]+)`)

// whichNoun is the thing a "which …" task asks for ("processor"), or "".
func whichNoun(task string) string {
	if m := whichRe.FindStringSubmatch(task); m != nil {
		return strings.ToLower(m[1])
	}
	return ""
}

// apiTerm reports whether a definition list's term is an API name
// (attr.s(these=None, …), class attrs.Attribute(…)), not a field list's
// "Parameters" or a glossary's word.
func apiTerm(dt string) bool {
	for _, w := range strings.Fields(dt) {
		if apiIdent(strings.Trim(w, ",;:")) {
			return true
		}
	}
	return false
}

// signature reports whether a heading or term is an API signature
// (class logbook.StreamHandler(stream, level=0, …)): the numbers in it are
// parameters' defaults, never the count, date or version a task asks for.
func signature(h string) bool {
	return strings.Contains(h, "(") && apiTerm(h)
}

// apiIdent reports whether a word is written as an API name (or as a
// command-line option, which names one too: "which option …").
func apiIdent(w string) bool {
	if strings.Contains(w, "(") || strings.Contains(w, "_") || optionRe.MatchString(w) {
		return true
	}
	for i := 1; i < len(w); i++ {
		prev, c := w[i-1], w[i]
		if c >= 'A' && c <= 'Z' && prev >= 'a' && prev <= 'z' {
			return true // camelCase, CamelCase
		}
		if prev == '.' && i >= 2 && (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') && w[i-2] != '.' {
			return true // a dotted name, not an ellipsis
		}
	}
	return false
}

// className reports whether an identifier is written as a class's name:
// its last dotted part in CapWords (BidictBase, attrs.Attribute), not a
// constant's capitals (SESSION_COOKIE_NAME) nor a lower-case name.
func className(id string) bool {
	last := id[strings.LastIndex(id, ".")+1:]
	if last == "" || last[0] < 'A' || last[0] > 'Z' {
		return false
	}
	return strings.ContainsFunc(last, func(r rune) bool { return r >= 'a' && r <= 'z' })
}

// optionRe matches a command-line option's name: -F, --format-table,
// --number-type=TYPE.
var optionRe = engine.LazyRE(`^--?[A-Za-z][A-Za-z0-9-]*(?:=\S*)?$`)

// codeExample reports whether an answer reads as code: an interactive
// session or a shell line (">>> …", "$ …"), a program's first line (an
// import, a declaration, an assignment: sourceLineRe, which CodeLike
// refuses as a command), or a command-like first line with code's
// punctuation (a call).
func codeExample(s string) bool {
	return program(s) || CodeLike(s) && strings.ContainsAny(s, "()=[]{}")
}

// actsOnOther reports whether a command does the task's action to
// something the task does not name: "pip install sphinx" for "what command
// installs django-taggit" — the page is about the project, the command
// installs another. The word after the task's verb (options aside) must
// hold one of the task's words, its site's too ("Jinja2" holds "jinja").
func actsOnOther(cmd string, g goal) bool {
	for _, line := range strings.Split(cmd, "\n") {
		f := strings.Fields(promptRe.ReplaceAllString(strings.TrimSpace(line), ""))
		for i := 1; i < len(f); i++ {
			if !contains(g.targets, stem(strings.ToLower(f[i]))) {
				continue
			}
			for _, w := range f[i+1:] {
				if strings.HasPrefix(w, "-") {
					continue
				}
				lw := strings.ToLower(w)
				for t := range g.words {
					if len(t) >= 3 && !stopWords[t] && strings.Contains(lw, t) {
						return false
					}
				}
				return true
			}
			break
		}
	}
	return false
}

// siteName is the site's part of a page's title: what follows its last
// separator ("Contributing — django-taggit 1.3.0 documentation",
// "Installation | Acme Docs"); "" when the title has none.
func siteName(title string) string {
	best := -1
	sepLen := 0
	for _, sep := range []string{" — ", " – ", " | ", " - ", " · "} {
		if i := strings.LastIndex(title, sep); i > best {
			best, sepLen = i, len(sep)
		}
	}
	if best < 0 {
		return ""
	}
	return title[best+sepLen:]
}

// commandLines counts the commands of a block: its prompted lines ("$ …"),
// or, with no prompt, its lines that read as commands. "What command …"
// asks for one; a script of several (git clone …, cd …, python setup.py
// develop) is a procedure, whose one line does not answer by itself. A
// command's printed output is not a command.
func commandLines(s string) int {
	prompted, plain := 0, 0
	for _, line := range strings.Split(s, "\n") {
		l := strings.TrimSpace(line)
		switch {
		case l == "":
		case promptRe.MatchString(l):
			prompted++
		case CodeLike(l):
			plain++
		}
	}
	if prompted > 0 {
		return prompted
	}
	return plain
}

// typeNouns are the words that name an answer type.
var typeNouns = map[AnswerType][]string{
	CommandAnswer: {"command"},
	DateAnswer:    {"date", "day"},
	NumberAnswer:  {"number"},
}

// readPick is what to read on the page: the blocks' selectors, in order.
type readPick struct {
	sels  []string
	score float64
}

// readPage picks the block(s) of the current page that answer the task, or
// nothing when no block is good enough (then the planner moves on).
func readPage(s *State, g goal) (readPick, bool) {
	if len(s.Blocks) == 0 || len(g.targets) == 0 && len(g.literals) == 0 {
		return readPick{}, false
	}
	weight := map[string]float64{}
	total := 0.0
	for _, t := range g.attr {
		weight[t] = 2
	}
	for _, t := range g.entity {
		if _, ok := weight[t]; !ok {
			weight[t] = 1
		}
	}
	// The word that names the asked type is the block's kind, not its
	// words: a command block rarely says "command".
	for _, t := range typeNouns[g.typ] {
		delete(weight, t)
	}
	for _, w := range weight {
		total += w
	}
	// "Which decorator exempts …": whether one of the page's API terms
	// says the verb, in its name or its definition (see below).
	verbSaid := false
	if g.verb != "" {
		terms := map[string]bool{}
		for _, b := range s.Blocks {
			if b.Tag == "dt" && apiTerm(b.Text) {
				terms[b.Text] = true
				verbSaid = verbSaid || saysVerb(g.verb, b.Text, "")
			}
		}
		for _, b := range s.Blocks {
			verbSaid = verbSaid || b.Tag != "dt" && terms[Nearest(b.Under)] && saysVerb(g.verb, "", b.Text)
		}
	}
	// "How do I convert a byte string to unicode?": whether one of the
	// page's API terms is the one the task names (to_unicode, see below).
	taskWords := stems(s.Task)
	termOnPage := false
	for _, b := range s.Blocks {
		termOnPage = termOnPage || b.Tag == "dt" && apiTerm(b.Text) && termNamed(b.Text, taskWords)
	}
	// "Which processor …" (no API kind): the answer must name one, and a
	// parameter's entry answers only a value-like thing (parameter, option, …).
	whichThing := g.kind == "" && g.typ == AnyAnswer && whichRe.MatchString(s.Task)
	valueNoun := valueKinds[stem(whichNoun(s.Task))]
	headingOf := map[string]int{} // heading text → index of its block
	best, bestI, bestTerm := 0.0, -1, -1
	var bestHead string
	for i, b := range s.Blocks {
		isHead := b.Level > 0 || b.Tag == "dt"
		if isHead {
			headingOf[b.Text] = i
			continue
		}
		if b.Region == "nav" || b.Link {
			continue
		}
		// A block of thousands of characters is a whole document (a page's
		// source, a text file in one pre), not an answer to stand behind.
		if len(b.Text) > maxAnswerBlock {
			continue
		}
		nearest := Nearest(b.Under)
		litOK, litHead := true, false
		for _, l := range g.literals {
			switch {
			case hasLiteral(b.Under, l):
				litHead = true
			case !hasLiteral(b.Text, l):
				litOK = false
			}
		}
		if !litOK || echoes(s.Task, b.Text) || echoesSearch(s, b.Text) {
			continue
		}
		own := setOfStems(b.Text)
		// The page's title heads every block: a task word there (the
		// project's name) is the block's context too.
		ctx := setOfStems(b.Under + " " + s.Title)
		// A proper name of the task (Django) that neither the block nor
		// its place names: the block is about something else.
		if !g.named(own, ctx) {
			continue
		}
		// "Which function …": a block that names one of the asked kind.
		// Under an API page's term (a definition list's dt: attr.s(…)),
		// the term is the name the block describes: for "which …" (a
		// validator, a decorator) read with it — "A validator that raises
		// a TypeError if …" says what, not which — and for "how do I …":
		// "Logs a user out." says what the API does, its term what to call.
		term, termText := -1, ""
		if hi, ok := headingOf[nearest]; ok && (g.kind != "" || whichRe.MatchString(s.Task) && g.typ == AnyAnswer || g.typ == ExplainAnswer) && s.Blocks[hi].Tag == "dt" && apiTerm(s.Blocks[hi].Text) {
			term, termText = hi, s.Blocks[hi].Text
		}
		if apiAnswer(termText, b.Text, b.Tag == "pre" || b.Tag == "code", g) != "" {
			continue
		}
		// "Which decorator exempts a route …": when one of the page's API
		// terms says it exempts (Limiter.exempt), a definition that does
		// not ("Decorator to be used for rate limiting individual routes",
		// under Limiter.limit) describes another one. (With none that says
		// the verb, the task may use another word for it: "builds a
		// version string" for "Convert a version tuple ….")
		if verbSaid && !saysVerb(g.verb, termText, b.Text) {
			continue
		}
		// Beside the term the task names, one whose name says something
		// the task does not (xml_to_unicode) is about another thing, however
		// many of the task's words its signature carries (byte_string).
		if termOnPage && termText != "" && termOther(termText, g) {
			continue
		}
		if whichThing && (termText == "" && !namesOne(b.Text, g) || paramEntryRe.MatchString(b.Text) && !valueNoun) {
			continue
		}
		// "How do I log a user out?": a signal's description ("Sent when a
		// user is logged out") says when, not how; a number's block is no
		// program (max_length=50 counts nothing).
		if g.typ == ExplainAnswer && eventDesc(b.Text) || g.typ == NumberAnswer && (b.Tag == "pre" || b.Tag == "code") {
			continue
		}
		// Under an API term, the definition's first sentence says what the
		// term is ("Decorator to mark a view …"); the kind a "which …" task
		// asks for, said only later, is another thing's ("Raised if a
		// payload is invalid. … The original exception that occurred …",
		// "… the backlog argument controls that").
		if k := stem(g.kind); termText != "" && own[k] && !setOfStems(firstSentence(b.Text))[k] {
			own = setOfStems(b.Text)
			delete(own, k)
		}
		// The term the task names ("… to unicode": to_unicode) is the
		// section it asks about, as a heading naming its literal is.
		named := termText != "" && termNamed(termText, taskWords)
		near := setOfStems(nearest)
		// A command is about what it names or its section says; the site's
		// name (django-taggit of "… — django-taggit 1.3.0 documentation",
		// on every page and often its first heading) does not make "tox -e
		// black,flake8,isort" install the project.
		place := ctx
		if g.typ == CommandAnswer {
			place = map[string]bool{}
			site := setOfStems(siteName(s.Title))
			for t := range ctx {
				if !site[t] {
					place[t] = true
				}
			}
		}
		hit, ownHit, inHead, nearHit := 0.0, 0.0, 0.0, 0.0
		for t, w := range weight {
			switch {
			case own[t]:
				hit += w
				ownHit += w
			case place[t]:
				hit += w
				inHead += w
			}
			if near[t] {
				nearHit += w
			}
		}
		cover, ownCover := 1.0, 1.0
		if total > 0 {
			cover, ownCover = hit/total, ownHit/total
		}
		head := ""
		switch {
		case g.typ == CommandAnswer:
			if b.Tag != "pre" && b.Tag != "code" || !CodeLike(b.Text) || actsOnOther(b.Text, g) || commandLines(b.Text) > 1 && !commandsRe.MatchString(s.Task) || !holdsNumbers(b.Text, s.Task) {
				continue
			}
		case HasValueOf(g.typ, b.Text, s.Task):
			// A count sits with what it counts: "How many threads …" is
			// not answered by a paragraph whose numbers (Python 3,
			// 2012-ish) are in other sentences than its "single-threaded".
			if g.typ == NumberAnswer && !countPlaced(b.Text, nearest, s.Task, g) {
				continue
			}
		case g.typ != AnyAnswer && g.typ != ExplainAnswer && HasValueOf(g.typ, nearest, s.Task) && !signature(nearest):
			head = nearest // the value is the heading the matching block sits under
		default:
			continue
		}
		// The task's words must be in the block itself, except where the
		// heading is part of the answer's place: a heading that names the
		// task's item (its literal), a command's or an explanation's
		// section, a value read from the heading.
		need := ownCover
		switch {
		case head != "":
			if total-nearHit > 0 {
				need = ownHit / (total - nearHit)
			}
		case litHead || named || g.typ == CommandAnswer:
			need = cover
		case g.typ == ExplainAnswer:
			need = 0
			if total > 0 {
				need = nearHit / total
			}
		}
		min := 0.75
		if g.typ == CommandAnswer {
			min = 0.6 // a command carries none of the question's words
		}
		if cover < 0.5 || need < min {
			continue
		}
		// The block's own words, then its nearest heading's, then the rest
		// of its heading path.
		score := cover + 0.25*ownCover + 0.25*nearHit/maxF(total, 1)
		if litHead {
			score += 0.25 // the heading names the item the task is about
		}
		if named {
			score += 0.25 // the task says the name the term defines
		}
		if len(b.Text) > 600 && g.typ != ExplainAnswer {
			score -= 0.1 // a value sits in a short block
		}
		if score > best {
			best, bestI, bestHead, bestTerm = score, i, head, term
		}
	}
	if bestI < 0 {
		return readPick{}, false
	}
	if bestHead != "" {
		if hi, ok := headingOf[bestHead]; ok {
			return readPick{sels: []string{s.Blocks[hi].Selector}, score: best}, true
		}
		return readPick{}, false
	}
	pick := readPick{sels: []string{s.Blocks[bestI].Selector}, score: best}
	if bestTerm >= 0 {
		pick.sels = []string{s.Blocks[bestTerm].Selector, s.Blocks[bestI].Selector}
	}
	if g.typ == ExplainAnswer {
		// An explanation is the section: the blocks under the same heading.
		under := s.Blocks[bestI].Under
		for i := bestI - 1; i >= 0 && len(pick.sels) < 2; i-- {
			b := s.Blocks[i]
			if b.Level > 0 || b.Under != under || b.Region == "nav" || b.Link {
				break
			}
			pick.sels = append([]string{b.Selector}, pick.sels...)
		}
		for i := bestI + 1; i < len(s.Blocks) && len(pick.sels) < 2; i++ {
			b := s.Blocks[i]
			if b.Level > 0 || b.Under != under || b.Region == "nav" || b.Link {
				break
			}
			pick.sels = append(pick.sels, b.Selector)
		}
	}
	return pick, true
}

// sentenceEndRe ends a sentence: a stop and a space, or a line break.
var sentenceEndRe = engine.LazyRE(`[.!?;]\s+|\n+`)

// firstSentence is text up to its first sentence's end.
func firstSentence(text string) string {
	if loc := sentenceEndRe.FindStringIndex(text); loc != nil {
		return text[:loc[0]]
	}
	return text
}

// countPlaced reports whether a block's number is the count a "how many
// <X> …" task asks for by where it sits: under a heading (or term) that
// says an asked-for word, or in a sentence that says one ("a fixed pool of
// worker threads (by default, 4 threads)"). A number in another sentence
// than the asked word counts something else ("a default value 32768 is
// used" of a block size, for requests per second).
func countPlaced(text, heading, task string, g goal) bool {
	asked := func(s string) bool {
		for _, w := range stems(s) {
			if contains(g.attr, w) {
				return true
			}
		}
		return false
	}
	if asked(heading) {
		return true
	}
	for _, sent := range sentenceEndRe.Regexp().Split(text, -1) {
		if asked(sent) && HasValueOf(NumberAnswer, sent, task) {
			return true
		}
	}
	return false
}

// termName is the stems of the name an API term defines: its last
// dotted part, split at underscores and case changes, after the kind a
// term may declare first ("property default_locale", "class tally.Counter(…)").
func termName(term string) []string {
	name, _, _ := strings.Cut(term, "(")
	if f := strings.Fields(name); len(f) > 0 {
		name = f[len(f)-1]
	}
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		name = name[i+1:]
	}
	parts := identParts(name)
	for i, p := range parts {
		parts[i] = stem(p)
	}
	return parts
}

// termNamed says whether the task (its stems, in order) says, as words
// in a row, the name an API term defines (of two words or more, one a
// content word): "How do I convert a byte string to unicode?" says
// to_unicode. One word is too weak a sign (a function string()).
func termNamed(term string, words []string) bool {
	parts := termName(term)
	content := false
	for _, p := range parts {
		content = content || !stopWords[p]
	}
	if len(parts) < 2 || !content {
		return false
	}
	for i := 0; i+len(parts) <= len(words); i++ {
		if slices.Equal(words[i:i+len(parts)], parts) {
			return true
		}
	}
	return false
}

// termOther says whether an API term's name has a word the task does not
// say: beside a term the task names (to_unicode), xml_to_unicode converts
// something else.
func termOther(term string, g goal) bool {
	for _, p := range termName(term) {
		if !g.words[p] {
			return true
		}
	}
	return false
}

// maxAnswerBlock is the longest block the reader answers with.
const maxAnswerBlock = 1500

func setOfStems(s string) map[string]bool {
	m := map[string]bool{}
	for _, t := range stems(s) {
		m[t] = true
	}
	return m
}

func maxF(a, b float64) float64 {
	if a > b {
		return a
	}
	return b
}

// sameSiteLink reports whether a link stays on the page's site (or goes to
// a site the task names).
func sameSiteLink(pageURL, href, task string) bool {
	u, err := url.Parse(resolve(pageURL, href))
	if err != nil || u.Scheme != "http" && u.Scheme != "https" {
		return false
	}
	return sameSite(pageURL, u.String()) || namesSite(task, u.String())
}

// parent is the page the run first came to the current page from ("" at
// the start page): where a dead end goes back to.
func parent(s *State) string {
	cur := normURL(s.URL)
	prev := ""
	for _, t := range s.History {
		if normURL(t.URL) == cur {
			return prev // "" when the run started here
		}
		if t.Result.Error == "" || t.Action.Tool == "navigate" {
			prev = t.URL
		}
	}
	return ""
}

func sortStrings(xs []string) { sort.Strings(xs) }
