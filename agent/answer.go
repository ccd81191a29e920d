package agent

import (
	"context"
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/pemdev/pem/engine"
)

// The answer checks: a run counts as a success only with an answer it can
// stand behind (DESIGN §7). They live here, in one place; Run applies them
// to every answer (planned or replayed) and records a failure with the
// category unverified_answer and the reason.

// AnswerType is the kind of value a question asks for.
type AnswerType string

const (
	AnyAnswer     AnswerType = ""        // the question does not say
	NumberAnswer  AnswerType = "number"  // how many, how much
	DateAnswer    AnswerType = "date"    // when, which date
	VersionAnswer AnswerType = "version" // which version, which release
	CommandAnswer AnswerType = "command" // what command: code-like text
	NameAnswer    AnswerType = "name"    // who
	ExplainAnswer AnswerType = "explain" // why, how to: free text
	EmailAnswer   AnswerType = "email"   // what email address
)

var (
	howManyRe = engine.LazyRE(`(?i)\bhow\s+(?:many|much|long|big|large|old|far|fast)\b|\bnumber\s+of\b|\bcount\s+of\b`)
	whenRe    = engine.LazyRE(`(?i)\bwhen\b|\b(?:what|which)\s+(?:date|day|year|month)\b|\brelease\s+date\b`)
	versionRe = engine.LazyRE(`(?i)\b(?:what|which)\s+(?:[\p{L}\p{N}.+-]+\s+){0,3}(?:version|release)s?\b|\bversion\s+number\b`)
	commandRe = engine.LazyRE(`(?i)\b(?:what|which)\s+(?:[\p{L}\p{N}-]+\s+){0,2}command\b|\bcommand\s+(?:to|that|for)\b`)
	whoRe     = engine.LazyRE(`(?i)^\s*who\b|\bwho\s+(?:is|are|was|were|wrote|created|made|maintains|owns)\b`)
	whyRe     = engine.LazyRE(`(?i)^\s*(?:why|how\s+(?:do|does|can|should|to))\b`)
	emailRe   = engine.LazyRE(`(?i)\b(?:what|which)\s+(?:[\p{L}\p{N}-]+\s+){0,5}e-?mail\b|\be-?mail\s+address\b`)
)

// AskedType reads the answer type a task asks for; AnyAnswer when unclear.
// The first cue in the task wins ("When was version 2.2.1 released?" asks
// for a date, "Which version dropped …" for a version); "which exception
// (argument, …)" asks for a name, not for the date or number a later
// "when …" or "number of" would ("Which exception is raised when …").
func AskedType(task string) AnswerType {
	best, at := AnyAnswer, len(task)+1
	for _, c := range []struct {
		re *engine.LazyRegexp
		t  AnswerType
	}{{howManyRe, NumberAnswer}, {whenRe, DateAnswer}, {versionRe, VersionAnswer}, {commandRe, CommandAnswer}, {whoRe, NameAnswer}, {whyRe, ExplainAnswer}, {emailRe, EmailAnswer},
		{apiKindRe, AnyAnswer}} {
		if loc := c.re.FindStringIndex(task); loc != nil && loc[0] < at {
			best, at = c.t, loc[0]
		}
	}
	return best
}

var (
	versionTok = engine.LazyRE(`\b[vV]?\d+(?:\.\d+)+(?:[a-z]+\d*)?\b`)
	dateTok    = engine.LazyRE(`(?i)\b\d{4}-\d{2}-\d{2}\b|\b\d{4}/\d{1,2}/\d{1,2}\b|\b\d{1,2}\s+(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?,?\s+\d{4}\b|\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+\d{1,2}(?:st|nd|rd|th)?,?\s+\d{4}\b`)
	numberTok  = engine.LazyRE(`\d[\d,.]*`)
	promptRe   = engine.LazyRE(`^(?:\$|>|#|%|PS>|C:\\>)\s+`)
	cmdHeadRe  = engine.LazyRE(`^[a-z0-9][a-z0-9._/-]*$`)
	emailTok   = engine.LazyRE(`[\p{L}\p{N}._%+-]+@[\p{L}\p{N}-]+(?:\.[\p{L}\p{N}-]+)+`)
	urlTok     = engine.LazyRE(`(?i)\b(?:https?|ftp)://\S+`)
	releaseNum = engine.LazyRE(`^\d+(?:\.\d+){2,}\.?$`)
)

// within reports whether the span loc lies inside one of spans.
func within(loc []int, spans [][]int) bool {
	for _, sp := range spans {
		if loc[0] >= sp[0] && loc[1] <= sp[1] {
			return true
		}
	}
	return false
}

// ValuesOf returns the values of type t in s (versions, dates, numbers,
// names), in order; nil for types without a token form.
func ValuesOf(t AnswerType, s string) []string {
	switch t {
	case VersionAnswer:
		var out []string
		for _, loc := range versionLocs(s) {
			out = append(out, s[loc[0]:loc[1]])
		}
		return out
	case DateAnswer:
		return dateTok.FindAllString(s, -1)
	case NumberAnswer:
		// A program's numbers are its arguments (max_length=50), not a
		// count; digits written onto a word are part of a name (MP3,
		// ID3v2.4, H264), not a number of anything.
		if program(s) {
			return nil
		}
		// Nor is an address's number (…/pull/377 of a link), an issue's
		// reference (#272) or a release (2.1.0: two dots or more) a count.
		urls := urlTok.FindAllStringIndex(s, -1)
		var out []string
		for _, loc := range numberTok.FindAllStringIndex(s, -1) {
			if r, _ := utf8.DecodeLastRuneInString(s[:loc[0]]); loc[0] > 0 && (unicode.IsLetter(r) || r == '_' || r == '#') {
				continue
			}
			if within(loc, urls) || releaseNum.MatchString(s[loc[0]:loc[1]]) {
				continue
			}
			out = append(out, s[loc[0]:loc[1]])
		}
		return out
	case EmailAnswer:
		return emailTok.FindAllString(s, -1)
	case NameAnswer:
		// A name-like value: a short phrase (a person, a handle, a user
		// name), never a sentence.
		if f := strings.Fields(s); len(f) > 0 && len(f) <= 6 && !strings.HasSuffix(strings.TrimSpace(s), ".") {
			return f
		}
		return nil
	}
	return nil
}

// HasValueOf reports whether s holds a value of type t that the task does
// not already hold (the task's own "3.6" does not answer "which version
// dropped 3.6"). Any and explain answers always do. A version that dates
// a change ("as of version 19.2.0", "New in version 2.0") answers only a
// task that asks when something changed, not "what is the current
// release".
func HasValueOf(t AnswerType, s, task string) bool {
	switch t {
	case AnyAnswer, ExplainAnswer:
		return true
	case CommandAnswer:
		return CodeLike(s)
	}
	own := map[string]bool{}
	for _, v := range ValuesOf(t, task) {
		own[strings.ToLower(v)] = true
	}
	if t == VersionAnswer {
		change := changeRe.MatchString(task)
		others := versionOwners(task)
		for _, loc := range versionLocs(s) {
			v := s[loc[0]:loc[1]]
			if own[strings.ToLower(v)] || !change && datesChange(s[:loc[0]]) || others[versionOwner(s[:loc[0]])] {
				continue
			}
			return true
		}
		return false
	}
	for _, v := range ValuesOf(t, s) {
		if !own[strings.ToLower(v)] {
			return true
		}
	}
	return false
}

var (
	// changeRe: the task asks when something changed, where a version
	// that dates a change is the answer.
	changeRe = engine.LazyRE(`(?i)\b(?:add|added|adds|introduc\w*|new|drop\w*|remov\w*|deprecat\w*|chang\w*|renam\w*|fix\w*|first|since|start\w*|began|begin\w*|became|appear\w*|support\w*|requir\w*|releas(?:ed|es)?)\b`)
	// changeMarkRe: the words before a version that date a change.
	changeMarkRe = engine.LazyRE(`(?i)\b(?:as\s+of|since|(?:new|added|changed|deprecated|removed|introduced)(?:\s+(?:since|in))?|until|prior\s+to|before|after)\s+(?:(?:version|release|v)\s*)?$`)
)

// datesChange reports whether the text before a version ends in words that
// date a change ("… an attribute as of version").
func datesChange(before string) bool {
	if len(before) > 60 {
		before = before[len(before)-60:]
	}
	return changeMarkRe.MatchString(before)
}

// versionLocs are the places of the version values in s (a date's digits
// are not a version, nor a series: the 0.2 of "0.2.x" is every 0.2 release,
// not one).
func versionLocs(s string) [][]int {
	var out [][]int
	dates := dateTok.FindAllStringIndex(s, -1)
	for _, loc := range versionTok.FindAllStringIndex(s, -1) {
		if !within(loc, dates) && !seriesRe.MatchString(s[loc[1]:]) {
			out = append(out, loc)
		}
	}
	return out
}

var (
	// seriesRe: what follows a version that makes it a series (0.2.x, 3.*).
	seriesRe = engine.LazyRE(`^\.[xX*](?:$|[^\p{L}\p{N}_])`)
	// ownerRe: the word a version belongs to, right before it, with a
	// comparison, "version" or its earlier versions between ("Python >=
	// 3.3", "Python 2.7", "Python version 3.7", "Python 2.7 and 3.4").
	ownerRe = engine.LazyRE(`(?i)([\p{L}][\p{L}\p{N}_.-]*)\s*(?:(?:[<>=≥≤~^!]=?|version|v)\s*)*(?:\d+(?:\.\d+)*\+?\s*(?:,|and|or|to|-|–)\s*)*$`)
	// subjectRe: the thing whose version a task asks for ("Which version of
	// sqlparse …", "Which Python version …").
	subjectRe = engine.LazyRE(`(?i)\b(?:versions?|releases?)\s+of\s+([\p{L}][\p{L}\p{N}_.-]*)|\b(?:which|what)\s+([\p{L}][\p{L}\p{N}_.-]*)\s+(?:versions?|releases?)\b`)
)

// versionOwner is the lower-cased word a version belongs to, read from the
// text before it ("Python >= " → "python"), or "".
func versionOwner(before string) string {
	if len(before) > 40 {
		before = before[len(before)-40:]
	}
	m := ownerRe.FindStringSubmatch(before)
	if m == nil {
		return ""
	}
	return strings.ToLower(strings.TrimRight(m[1], ".-"))
}

// versionOwners are the things whose versions the task itself gives, other
// than the one it asks about: "Which version of sqlparse removed support
// for Python 2.7?" asks for a sqlparse release, so "Python >= 3.3" is no
// answer — a version of Python, as the task's own 2.7 is.
func versionOwners(task string) map[string]bool {
	out := map[string]bool{}
	for _, loc := range versionLocs(task) {
		if w := versionOwner(task[:loc[0]]); w != "" && !stopWords[w] && w != "version" && w != "release" {
			out[w] = true
		}
	}
	for _, m := range subjectRe.FindAllStringSubmatch(task, -1) {
		delete(out, strings.ToLower(strings.TrimRight(m[1]+m[2], ".-")))
	}
	return out
}

// CodeLike reports whether s reads as a command or code: a first line that
// starts with a lower-case program name (after an optional shell prompt)
// and is not a sentence.
func CodeLike(s string) bool {
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(promptRe.ReplaceAllString(strings.TrimSpace(line), ""))
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) > 16 || strings.HasSuffix(line, ":") || strings.HasSuffix(line, ".") && len(f) > 4 {
			return false
		}
		if sourceLineRe.MatchString(line) {
			return false // a program's first line, not what is typed at a prompt
		}
		return cmdHeadRe.MatchString(f[0]) && (len(f) > 1 || strings.ContainsAny(f[0], "._/-"))
	}
	return false
}

// program reports whether s is a program or an interactive session: its
// first line an import, a declaration, an assignment or a prompt's
// (">>> ", "$ ").
func program(s string) bool {
	s = strings.TrimSpace(s)
	first, _, _ := strings.Cut(s, "\n")
	return strings.HasPrefix(s, ">>>") || strings.HasPrefix(s, "$ ") || sourceLineRe.MatchString(strings.TrimSpace(first))
}

// sourceLineRe matches a line that opens a program rather than a command:
// an import, a package clause, a declaration, an assignment with spaces
// around its '=' (a shell's VAR=value has none).
var sourceLineRe = engine.LazyRE(`^(?:from\s+[\w.]+\s+import\s|import\s+[\w.]+(?:\s+as\s+\w+)?(?:\s*,\s*[\w.]+)*\s*;?$|package\s+\w+\s*;?$|(?:const|let|var)\s+\w+\s*=|[A-Za-z_][\w.\[\]]*\s+=\s)`)

// AnswerSource is where an answer was read.
type AnswerSource struct {
	URL    string // the page's URL
	Status int    // its HTTP status (0 unknown)
	// Headings are the page's headings (and definition terms), to tell a
	// heading read alone from an answer.
	Headings []string
}

// CheckAnswer returns why an answer cannot be stood behind, or "" when it
// passes: it must not echo the task or be a heading alone, must not come
// from an error page or (unless the task names it) another site, and must
// be of the type the task asks for; an answer to "which function …" must
// name one of that kind (apiAnswer).
func CheckAnswer(task, startURL, answer string, src AnswerSource) string {
	a := strings.TrimSpace(answer)
	if a == "" {
		return "no answer"
	}
	if why := errorPage(src.URL, src.Status, a); why != "" {
		return "read from an error page (" + why + ")"
	}
	if !sameSite(startURL, src.URL) && !namesSite(task, src.URL) {
		return "read on another site (" + hostOf(src.URL) + ") than the task's"
	}
	t := AskedType(task)
	if echoes(task, a) {
		return "it repeats the task's own words"
	}
	na := normText(a)
	// A heading alone is no answer unless it holds the asked value itself
	// ("Version 3.1.0"); a heading never names the person a "who" asks for,
	// and an API signature's numbers are its parameters' defaults.
	for _, h := range src.Headings {
		if normText(h) == na && (t == AnyAnswer || t == ExplainAnswer || t == NameAnswer || !HasValueOf(t, a, task) || signature(h)) {
			return "it is a heading alone, not the content under it"
		}
	}
	// A heading's numbering ("4.3.2." of "4.3.2. The locale Module …") is
	// the heading's place in the document, whatever the task asks.
	if sectionNumRe.MatchString(a) {
		for _, h := range src.Headings {
			if strings.HasPrefix(strings.TrimSpace(h), a+" ") {
				return "it is a heading's section number, not the content under it"
			}
		}
	}
	if !HasValueOf(t, a, task) {
		return "it is not a " + string(t) + ", which the task asks for"
	}
	if t == CommandAnswer && actsOnOther(a, parseGoal(task, startURL)) {
		return "it is a command for something else than the task names"
	}
	if t == CommandAnswer && !holdsNumbers(a, task) {
		return "it is a command without the number the task gives (" + strings.Join(taskNumbers(task), ", ") + ")"
	}
	if t == CommandAnswer && commandLines(a) > 1 && !commandsRe.MatchString(task) {
		return "it is a script of several commands, not the command the task asks for"
	}
	if t == ExplainAnswer {
		for _, part := range strings.Split(a, AnswerSep) {
			if eventDesc(part) {
				return "it says when something is sent (called, raised), not how or why"
			}
		}
	}
	if leadIn(a) && !namesIdent(a, task) {
		return "it introduces what follows (it ends in a colon), it does not say it"
	}
	if defaultAskedRe.MatchString(task) && len(strings.Fields(a)) > 2 && !defaultSaidRe.MatchString(a) {
		return "it says no default, which the task asks for"
	}
	if why := declaredKind(task, a); why != "" {
		return why
	}
	g := parseGoal(task, startURL)
	if g.kind == "" && t == AnyAnswer && whichRe.MatchString(task) {
		// An answer read with its term ("chardet; Used in …") names it.
		term, _, _ := strings.Cut(a, AnswerSep)
		if !namesOne(a, g) && !namesOne(term, g) {
			return "it names nothing, and the task asks which one"
		}
		if noun := whichNoun(task); paramEntryRe.MatchString(a) && !valueKinds[stem(noun)] {
			return "it is a parameter's entry, not the " + noun + " the task asks for"
		}
	}
	return apiAnswer("", a, false, g)
}

// bareNumRe is a number written alone: digits not joined to a word, a
// dotted literal (3.11, 2.1.0) or another number by a dot, comma or dash.
var bareNumRe = engine.LazyRE(`(?:^|[^\p{L}\p{N}_.,#-])(\d+)(?:$|[^\p{L}\p{N}_.,-]|[.,](?:$|\s))`)

// taskNumbers are the numbers a task gives ("on port 8041", "with 4
// threads"): what a command it asks for must be run with.
func taskNumbers(task string) []string { return firstGroups(bareNumRe, task) }

// firstGroups returns the first submatch of each match of re in s, each
// once, in order of first match.
func firstGroups(re *engine.LazyRegexp, s string) []string {
	var out []string
	for _, m := range re.FindAllStringSubmatch(s, -1) {
		if !contains(out, m[1]) {
			out = append(out, m[1])
		}
	}
	return out
}

// holdsNumbers reports whether a command holds every number the task gives,
// each as a number of its own (8041 in --port=8041 or *:8041, not in
// 80410): "waitress-serve --call myapp.mymodule.app.wsgi_factory" does not
// serve an app on port 8041, whatever else it shares with the task.
func holdsNumbers(cmd, task string) bool {
	for _, n := range taskNumbers(task) {
		found := false
		for i := 0; !found; {
			j := strings.Index(cmd[i:], n)
			if j < 0 {
				break
			}
			j += i
			end := j + len(n)
			found = (j == 0 || !isDigit(cmd[j-1])) && (end == len(cmd) || !isDigit(cmd[end]))
			i = j + 1
		}
		if !found {
			return false
		}
	}
	return true
}

// commandsRe: the task asks for several commands ("which commands …",
// "the steps to …").
var commandsRe = engine.LazyRE(`(?i)\bcommands\b|\bsteps\b`)

// eventRe opens an event's description: a signal's, a hook's, an
// exception's ("Sent when a user is logged out", "Raised if …").
var eventRe = engine.LazyRE(`(?i)^\s*(?:(?:it\s+)?is\s+)?(?:sent|called|raised|emitted|fired|triggered|invoked|dispatched|signall?ed|thrown)\s+(?:when|whenever|after|before|once|if|on)\b`)

// eventDesc reports whether text describes an event: what happens when the
// task's action is done (a signal "Sent when a user is logged out"), which
// says neither how to do it nor why.
func eventDesc(text string) bool {
	return eventRe.MatchString(text)
}

// sectionNumRe matches a section number as documents number their headings:
// numbers joined by dots, ending in a dot.
var sectionNumRe = engine.LazyRE(`^[0-9]+(\.[0-9]+)*\.$`)

// errorPage says why a page is an error page, or "".
func errorPage(u string, status int, text string) string {
	switch {
	case strings.HasPrefix(u, "chrome-error:"):
		return "the browser's error page"
	case status >= 400:
		return "HTTP " + strconv.Itoa(status)
	}
	l := strings.ToLower(text)
	for _, m := range []string{"err_name_not_resolved", "err_connection_refused", "err_internet_disconnected", "err_address_unreachable",
		"this site can’t be reached", "this site can't be reached", "server ip address could not be found"} {
		if strings.Contains(l, m) {
			return "a network error page"
		}
	}
	return ""
}

// echoes reports whether every word of the answer is a word of the task.
// Words that the task holds only inside a literal identifier do not count:
// 'session' answers "the default of SESSION_COOKIE_NAME".
func echoes(task, answer string) bool {
	tw := map[string]bool{}
	for _, w := range stems(literalRe.ReplaceAllStringFunc(task, func(m string) string {
		if strings.Contains(m, "_") || hasInnerUpper(m) {
			return " "
		}
		return m
	})) {
		tw[w] = true
	}
	// The name of the item the task asks about, alone ("TimeStamper" for
	// "the default key of structlog.processors.TimeStamper"), answers
	// nothing: the whole literal or its last dotted part.
	own := taskLiterals(task)
	bare := strings.ToLower(strings.TrimSuffix(strings.Trim(answer, " \t\n`'\"“”‘’."), "()"))
	for _, l := range own {
		if bare == l || bare == l[strings.LastIndexByte(l, '.')+1:] {
			return true
		}
	}
	// A literal the task does not hold is new ("getting-started.go" for
	// "the getting-started example").
	for _, l := range taskLiterals(answer) {
		if !contains(own, l) {
			return false
		}
	}
	n := 0
	for _, w := range stems(answer) {
		if !tw[w] && !stopWords[w] {
			return false
		}
		n++
	}
	return n > 0
}

func normText(s string) string {
	return strings.ToLower(strings.Join(strings.Fields(strings.ReplaceAll(s, "¶", "")), " "))
}

func hostOf(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return ""
	}
	return p.Hostname()
}

// sameSite compares registrable-ish domains (www. stripped, the port ignored).
func sameSite(a, b string) bool {
	if b == "" || a == "" {
		return true
	}
	da, err1 := engine.NormalizeDomain(hostOf(a))
	db, err2 := engine.NormalizeDomain(hostOf(b))
	if err1 != nil || err2 != nil {
		return true // not a web page (about:, data:): nothing to compare
	}
	return da == db || strings.HasSuffix(da, "."+db) || strings.HasSuffix(db, "."+da)
}

// namesSite reports whether the task names the page's site (its host, or
// the host's main label: "on readthedocs" for docs.readthedocs.io).
func namesSite(task, u string) bool {
	h := strings.ToLower(strings.TrimPrefix(hostOf(u), "www."))
	if h == "" {
		return false
	}
	t := strings.ToLower(task)
	if strings.Contains(t, h) {
		return true
	}
	labels := strings.Split(h, ".")
	if len(labels) >= 2 {
		main := labels[len(labels)-2]
		for _, w := range stems(t) {
			if len(main) > 3 && w == main {
				return true
			}
		}
	}
	return false
}

// sourceOf describes the page p shows now, for CheckAnswer, and returns
// the page's blocks it listed (nil when it could not); cached are the
// blocks already listed on this page since its last step (nil: list them).
func sourceOf(ctx context.Context, p Page, cached []Block) (AnswerSource, []Block) {
	src := AnswerSource{URL: p.URL()}
	var blocks []Block
	if rd, ok := p.(Reader); ok {
		src.Status = rd.StatusCode(ctx)
		bs, err := cached, error(nil)
		if bs == nil {
			bs, err = rd.Blocks(ctx)
		}
		if err == nil {
			blocks = bs
			for _, b := range bs {
				if b.Level > 0 || b.Tag == "dt" {
					src.Headings = append(src.Headings, b.Text)
				}
			}
		}
	}
	return src, blocks
}

// landedOnError says why the page an action led to is an error page, or "".
func landedOnError(ctx context.Context, p Page) (string, int) {
	status := 0
	if rd, ok := p.(Reader); ok {
		status = rd.StatusCode(ctx)
	}
	return errorPage(p.URL(), status, ""), status
}

// leadIn reports whether an answer is a lead-in: its last part ends in a
// colon ("You can use the Factory class as a shortcut for the default
// build strategy:"), introducing the code or list that follows rather
// than saying anything, when it is one sentence read alone: a paragraph
// that says something first and then "Here are some examples:" is not,
// nor an answer of two blocks (a definition read with its term, which
// names the answer; an explanation's blocks, which said theirs first).
func leadIn(a string) bool {
	if strings.Contains(a, AnswerSep) {
		return false
	}
	a = strings.TrimSpace(a)
	return strings.HasSuffix(a, ":") && !sentenceBreakRe.MatchString(a)
}

// namesIdent reports whether an answer holds an identifier the task does
// not ("… can be decorated with the login_required decorator:" names the
// decorator before the example that follows it).
func namesIdent(a, task string) bool {
	for _, f := range strings.Fields(a) {
		w := strings.Trim(f, ",;:.!?\"'`“”‘’«»")
		if w != "" && apiIdent(w) && !hasLiteral(task, w) {
			return true
		}
	}
	return false
}

// sentenceBreakRe: a paragraph of several sentences ("There are two
// functions …: gettext() and ngettext(). The first … Here some
// examples:") says something before its closing lead-in.
var sentenceBreakRe = engine.LazyRE(`[.!?]\s+\p{Lu}`)

// defaultAskedRe: the task asks what some item's default is ("What is the
// default length of …"); defaultSaidRe: the answer says a default ("This
// defaults to 'UTC'", "Default: remember_token", "(the default value)",
// length=12). "What does X default to?" is not asked so: its bare value
// ("UTF-8") is the default. A bare value is not held to it either: read
// from a field ("Default branch: main"), "main" is the answer; a
// description of more than two words is what must say a default.
var (
	defaultAskedRe = engine.LazyRE(`(?i)^\s*what(?:'s|\s+is|\s+are)\s+the\s+default\s+[\p{L}_-]+`)
	defaultSaidRe  = engine.LazyRE(`(?i)\bdefault(?:s|ed)?\b|[\p{L}\p{N}_]=\S`)
)

// declaredTermRe: an API term that declares its kind, as Sphinx writes it
// ("property default_locale", "class tally.Counter(…)",
// "exception tally.Overflow").
var declaredTermRe = engine.LazyRE(`^\s*(class|exception|property|attribute|data|method|classmethod|staticmethod|function|decorator|module|async)\s+[\p{L}_][\p{L}\p{N}_.]*`)

// askedHeadRe: the kind words of a "which …" task ("Which configuration
// value …", "Which method …"): up to three words after which or what.
var askedHeadRe = engine.LazyRE(`(?i)^\s*(?:which|what)\s+((?:[\p{L}_-]+\s+){0,2}[\p{L}_-]+)`)

// kindAllows: for the kind words a task asks by, the declared kinds that
// can be one ("which setting" is data or an attribute, not a class's
// property; "which function" is no class).
var kindAllows = []struct {
	asked   map[string]bool
	allowed map[string]bool
}{
	{setOf("configuration", "config", "setting", "settings", "option", "options", "variable", "variables", "constant", "constants"), setOf("data", "attribute")},
	{setOf("function", "functions", "method", "methods", "decorator", "decorators", "hook", "hooks", "callback", "callbacks", "filter", "filters"), setOf("method", "classmethod", "staticmethod", "function", "decorator", "async")},
	{setOf("class", "classes", "exception", "exceptions", "error", "errors"), setOf("class", "exception")},
	{setOf("attribute", "attributes", "property", "properties"), setOf("attribute", "property", "data")},
}

// declaredKind says why an answer read with a term that declares its kind
// cannot answer a "which <kind> …" task of another kind, or "": Flask-Babel's
// "property default_locale" (a class's property) is not the configuration
// value that sets the default locale.
func declaredKind(task, a string) string {
	term, _, _ := strings.Cut(a, AnswerSep)
	m := declaredTermRe.FindStringSubmatch(term)
	h := askedHeadRe.FindStringSubmatch(task)
	if m == nil || h == nil {
		return ""
	}
	decl := strings.ToLower(m[1])
	for _, w := range strings.Fields(strings.ToLower(h[1])) {
		for _, k := range kindAllows {
			if k.asked[w] && !k.allowed[decl] {
				return "it is a " + decl + ", not the " + w + " the task asks for"
			}
		}
	}
	return ""
}
