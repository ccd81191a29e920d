package agent

import (
	"net/url"
	"sort"
	"strings"

	"github.com/pemdev/pem/engine"
)

// How the explore planner reads a page before it leaves it: it scores the
// page's blocks (State.Blocks) by the task's words found in the block and
// in the heading it sits under, keeps only blocks that hold a value of the
// asked type (AskedType), every literal of the task (a version such as
// 8.1.0, an identifier such as MAX_SIZE) and every proper name of it (in
// the block, its headings or the page's title: "… in Django?"), and reads
// the best one. Nothing
// here knows a site: only the page's structure and the task's words.

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
	headingOf := map[string]int{} // heading text → index of its block
	best, bestI := 0.0, -1
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
		near := setOfStems(nearest)
		hit, ownHit, inHead, nearHit := 0.0, 0.0, 0.0, 0.0
		for t, w := range weight {
			switch {
			case own[t]:
				hit += w
				ownHit += w
			case ctx[t]:
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
			if b.Tag != "pre" && b.Tag != "code" || !CodeLike(b.Text) {
				continue
			}
		case HasValueOf(g.typ, b.Text, s.Task):
		case g.typ != AnyAnswer && g.typ != ExplainAnswer && HasValueOf(g.typ, nearest, s.Task):
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
		case litHead || g.typ == CommandAnswer:
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
		if len(b.Text) > 600 && g.typ != ExplainAnswer {
			score -= 0.1 // a value sits in a short block
		}
		if score > best {
			best, bestI, bestHead = score, i, head
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
