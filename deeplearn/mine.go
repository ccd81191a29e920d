package deeplearn

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/pemdev/pem/engine"
)

// Input is everything known of one (domain, intent).
type Input struct {
	Domain, Intent, IntentKey string
	Traces                    []*engine.Trace    // the traces on hand (any order)
	Experience                *engine.Experience // may be nil
	Facts                     *engine.Facts      // the current entry; may be nil
	Policy                    engine.Policy
	Now                       time.Time
}

// Proposal is what deep-learn suggests for one entry.
type Proposal struct {
	Domain     string        `yaml:"domain" json:"domain"`
	Intent     string        `yaml:"intent" json:"intent"`
	IntentKey  string        `yaml:"intent_key" json:"intent_key"`
	Facts      *engine.Facts `yaml:"facts" json:"facts"`                               // the proposed entry (status at most candidate)
	Changed    bool          `yaml:"changed" json:"changed"`                           // differs in content from the current entry
	Supersedes string        `yaml:"supersedes,omitempty" json:"supersedes,omitempty"` // revision of a verified entry this replaces
	Reasons    []string      `yaml:"reasons" json:"reasons"`                           // why, with evidence counts — for the report
	Flagged    []string      `yaml:"flagged,omitempty" json:"flagged,omitempty"`       // traces that looked like injections, with why
	Successes  int           `yaml:"successes" json:"successes"`
	Failures   int           `yaml:"failures" json:"failures"`
	Sessions   int           `yaml:"sessions" json:"sessions"`
}

// MinRouteRuns is how many successful runs a route needs before it is proposed.
const MinRouteRuns = 1

// Mine proposes facts for one entry. It is deterministic: the same input gives
// the same proposal, byte for byte once marshalled.
func Mine(in Input) Proposal {
	p := Proposal{Domain: in.Domain, Intent: in.Intent, IntentKey: in.IntentKey}
	traces := make([]*engine.Trace, 0, len(in.Traces))
	for _, t := range in.Traces {
		if why := Injection(t); why != "" {
			p.Flagged = append(p.Flagged, fmt.Sprintf("%s: %s", t.ID, why))
			continue
		}
		traces = append(traces, t)
	}
	sort.Slice(traces, func(i, j int) bool {
		if !traces[i].StartedAt.Equal(traces[j].StartedAt) {
			return traces[i].StartedAt.Before(traces[j].StartedAt)
		}
		return traces[i].ID < traces[j].ID
	})
	var ok, failed []*engine.Trace
	sessions := map[string]bool{}
	for _, t := range traces {
		if t.Outcome == engine.Success {
			ok = append(ok, t)
			sessions[sessionOf(t)] = true
		} else {
			failed = append(failed, t)
		}
	}
	p.Successes, p.Failures, p.Sessions = len(ok), len(failed), len(sessions)

	f := &engine.Facts{Format: engine.Format, Domain: in.Domain, Intent: in.Intent, IntentKey: in.IntentKey, Status: engine.Candidate}
	if in.Facts != nil {
		f.TaskType = in.Facts.TaskType
		f.Provenance.FirstSeen = in.Facts.Provenance.FirstSeen
		f.History = append(f.History, in.Facts.History...)
	}
	stats := selectorStats(traces)

	// The route: the most common action signature among successful runs.
	route, runs, params := mineRoute(ok)
	if len(route) > 0 {
		f.Steps = route
		p.Reasons = append(p.Reasons, fmt.Sprintf("route of %d steps taken by %d of %d successful runs", len(route), runs, len(ok)))
		if len(params) > 0 {
			p.Reasons = append(p.Reasons, fmt.Sprintf("values that vary between runs became parameters: %s", strings.Join(params, ", ")))
		}
		f.Selectors = rankSelectors(route, runs, ok, stats)
	}
	f.URLPatterns = patterns(traces)
	f.AntiPatterns, p.Reasons = antiPatterns(stats, f.Selectors, p.Reasons)
	f.KnownBlockers = blockers(failed)
	f.InteractionHints = hints(ok)
	f.ExtractionQuery = extraction(ok)
	f.Answers = answers(in.Intent, ok, in.Policy)
	if n := len(f.KnownBlockers); n > 0 {
		p.Reasons = append(p.Reasons, fmt.Sprintf("%d blocker(s) from %d failed runs", n, len(failed)))
	}
	if n := len(f.InteractionHints); n > 0 {
		p.Reasons = append(p.Reasons, fmt.Sprintf("%d hint(s) from recoveries", n))
	}
	for _, a := range f.Answers {
		if a.Value == "" {
			p.Reasons = append(p.Reasons, "the answer changes between runs or is a count/status: volatile, read live, value not cached")
		} else {
			p.Reasons = append(p.Reasons, fmt.Sprintf("answer %q read alike by ≥ %d sessions (%s)", a.Value, max(1, in.Policy.AnswerSessions), a.Freshness))
		}
	}
	for _, t := range traces {
		f.Provenance.Traces = append(f.Provenance.Traces, t.ID)
		if f.Provenance.FirstSeen.IsZero() || t.StartedAt.Before(f.Provenance.FirstSeen) {
			f.Provenance.FirstSeen = t.StartedAt.UTC()
		}
	}
	f.Provenance.Sources = []string{"deep-learn"}
	if len(ok) < max(1, in.Policy.CandidateSuccesses) {
		f.Status = engine.Hypothesis
	}
	f.Revision = f.ContentHash()

	if cur := in.Facts; cur != nil {
		p.Changed = cur.ContentHash() != f.Revision
		if cur.Status == engine.Verified && p.Changed {
			f.Supersedes = cur.Revision
			if f.Supersedes == "" {
				f.Supersedes = cur.ContentHash()
			}
			p.Supersedes = f.Supersedes
			p.Reasons = append(p.Reasons, fmt.Sprintf("verified revision %s is frozen: this is a new revision that supersedes it", p.Supersedes))
		}
		if !p.Changed {
			// Keep the lifecycle of the current entry; nothing to propose.
			f.Status, f.History, f.Provenance = cur.Status, cur.History, cur.Provenance
		}
	} else {
		p.Changed = len(traces) > 0
	}
	p.Facts = f
	return p
}

func sessionOf(t *engine.Trace) string {
	if t.Session != "" {
		return t.Session
	}
	return "trace:" + t.ID
}

// signature is a step's identity for alignment: its action and, for
// navigation, the URL pattern (selectors may drift between runs).
func signature(s engine.Step) string {
	if s.Action == "navigate" {
		if n, err := engine.NormalizeURL(s.URL); err == nil {
			return "navigate " + engine.Pattern(n)
		}
		return "navigate"
	}
	return s.Action
}

// okSteps drops the steps that failed (a failed click that a retry followed
// is not part of the route) and observation-only steps.
func okSteps(t *engine.Trace) []engine.Step {
	var out []engine.Step
	for _, s := range t.Steps {
		if !s.OK || s.Action == "screenshot" || s.Action == "get_elements" || s.Action == "wait" || s.Action == "scroll" || s.Action == "done" {
			continue
		}
		out = append(out, s)
	}
	return out
}

// mineRoute returns the most frequent successful step sequence (ties: the most
// recent), the number of runs that took it, and the parameters it has.
func mineRoute(ok []*engine.Trace) ([]engine.Step, int, []string) {
	groups := map[string][]*engine.Trace{}
	var order []string
	for _, t := range ok {
		steps := okSteps(t)
		if len(steps) == 0 {
			continue
		}
		sig := make([]string, len(steps))
		for i, s := range steps {
			sig[i] = signature(s)
		}
		k := strings.Join(sig, " | ")
		if _, seen := groups[k]; !seen {
			order = append(order, k)
		}
		groups[k] = append(groups[k], t)
	}
	if len(groups) == 0 {
		return nil, 0, nil
	}
	best := ""
	for _, k := range order {
		if best == "" || len(groups[k]) > len(groups[best]) || len(groups[k]) == len(groups[best]) && latest(groups[k]).After(latest(groups[best])) {
			best = k
		}
	}
	runs := groups[best]
	newest := runs[len(runs)-1]
	route := okSteps(newest)
	out := make([]engine.Step, len(route))
	var params []string
	for i, s := range route {
		st := engine.Step{Seq: i + 1, Action: s.Action, Selector: s.Selector, URL: s.URL, OK: true, Value: s.Value, Param: s.Param}
		if s.Action == "type" {
			values := map[string]bool{}
			for _, t := range runs {
				values[okSteps(t)[i].Value] = true
			}
			if st.Value == engine.Redacted || strings.HasPrefix(st.Value, "{{secret:") {
				// keep the placeholder: a secret is bound by name at run time
			} else if len(values) > 1 || st.Param != "" {
				if st.Param == "" {
					st.Param = paramName(s.Selector, i)
				}
				st.Value = ""
				params = append(params, st.Param)
			}
		}
		if s.Action == "navigate" && i > 0 {
			// Later navigations to item pages vary by id: keep the pattern's
			// first URL only when all runs agree.
			same := true
			for _, t := range runs {
				if okSteps(t)[i].URL != s.URL {
					same = false
				}
			}
			if !same {
				st.Param = paramName("url", i)
				params = append(params, st.Param)
			}
		}
		out[i] = st
	}
	return out, len(runs), params
}

func latest(ts []*engine.Trace) time.Time { return ts[len(ts)-1].StartedAt }

var nonWord = regexp.MustCompile(`[^a-z0-9]+`)

// paramName derives a parameter name from a selector: "input[name=q]" → "q",
// "#search-box" → "search_box"; else "value<N>".
func paramName(sel string, i int) string {
	s := strings.ToLower(sel)
	if m := regexp.MustCompile(`name=["']?([a-z0-9_-]+)`).FindStringSubmatch(s); m != nil {
		s = m[1]
	} else if m := regexp.MustCompile(`#([a-z0-9_-]+)`).FindStringSubmatch(s); m != nil {
		s = m[1]
	}
	s = strings.Trim(nonWord.ReplaceAllString(s, "_"), "_")
	if s == "" || len(s) > 32 {
		return "value" + strconv.Itoa(i+1)
	}
	return s
}

// selStat is one selector's record across the traces.
type selStat struct {
	ok, fail        int
	lastOK, lastErr time.Time
	cats            map[engine.FailureCategory]int
}

func selectorStats(ts []*engine.Trace) map[string]*selStat {
	m := map[string]*selStat{}
	for _, t := range ts {
		for _, s := range t.Steps {
			if s.Selector == "" || s.Action == "navigate" {
				continue
			}
			st := m[s.Selector]
			if st == nil {
				st = &selStat{cats: map[engine.FailureCategory]int{}}
				m[s.Selector] = st
			}
			if s.OK {
				st.ok++
				if t.StartedAt.After(st.lastOK) {
					st.lastOK = t.StartedAt
				}
			} else {
				st.fail++
				if t.StartedAt.After(st.lastErr) {
					st.lastErr = t.StartedAt
				}
				if t.Outcome == engine.Failure {
					st.cats[t.FailureCategory]++
				}
			}
		}
	}
	return m
}

// failing reports a selector that failed at least twice and has not worked
// since its last failure: an anti-pattern, never a fallback.
func (s *selStat) failing() bool {
	return s.fail >= 2 && !s.lastErr.Before(s.lastOK)
}

// stability is a selector's smoothed success rate.
func (s *selStat) stability() float64 {
	return float64(s.ok+1) / float64(s.ok+s.fail+2)
}

// rankSelectors names each selector role of the route and ranks the selectors
// that filled it across the runs: primary = most stable, fallbacks ordered.
func rankSelectors(route []engine.Step, _ int, ok []*engine.Trace, stats map[string]*selStat) map[string]engine.Selector {
	out := map[string]engine.Selector{}
	for i, s := range route {
		if s.Selector == "" {
			continue
		}
		cands := map[string]bool{}
		for _, t := range ok {
			steps := okSteps(t)
			if i < len(steps) && steps[i].Action == s.Action && steps[i].Selector != "" {
				cands[steps[i].Selector] = true
			}
			// A step that failed and was replaced in the same position is a
			// fallback candidate too (drift): collect failed selectors of the
			// same action.
		}
		list := make([]string, 0, len(cands))
		for c := range cands {
			if !stats[c].failing() {
				list = append(list, c)
			}
		}
		if len(list) == 0 { // only failing candidates: keep them, ranked
			for c := range cands {
				list = append(list, c)
			}
		}
		sort.Slice(list, func(a, b int) bool {
			sa, sb := stats[list[a]], stats[list[b]]
			if sa.stability() != sb.stability() {
				return sa.stability() > sb.stability()
			}
			if !sa.lastOK.Equal(sb.lastOK) {
				return sa.lastOK.After(sb.lastOK)
			}
			return list[a] < list[b]
		})
		name := fmt.Sprintf("step%d_%s", i+1, s.Action)
		sel := engine.Selector{Primary: list[0], Stability: round2(stats[list[0]].stability())}
		if len(list) > 1 {
			sel.Fallbacks = list[1:]
		}
		out[name] = sel
		route[i].Selector = list[0]
		route[i].Fallbacks = sel.Fallbacks
	}
	return out
}

func round2(f float64) float64 { return float64(int64(f*100+0.5)) / 100 }

// antiPatterns: selectors that failed at least twice with no success after
// their last failure, and which are not the route's primary.
func antiPatterns(stats map[string]*selStat, sels map[string]engine.Selector, reasons []string) ([]string, []string) {
	primary := map[string]bool{}
	for _, s := range sels {
		primary[s.Primary] = true
	}
	var out []string
	keys := make([]string, 0, len(stats))
	for k := range stats {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, sel := range keys {
		st := stats[sel]
		if !st.failing() || primary[sel] {
			continue
		}
		out = append(out, fmt.Sprintf("selector %s failed %d times with no later success", strconv.Quote(sel), st.fail))
		reasons = append(reasons, fmt.Sprintf("anti-pattern %s: %d failures, %d successes", strconv.Quote(sel), st.fail, st.ok))
	}
	return out, reasons
}

// blockerTypes are the failure categories that become known blockers.
var blockerTypes = map[engine.FailureCategory]bool{
	engine.AntiBot: true, engine.AuthRequired: true, engine.PermissionDenied: true, engine.OverlayBlocked: true,
}

func blockers(failed []*engine.Trace) []engine.Blocker {
	var out []engine.Blocker
	count := map[string]int{}
	for _, t := range failed {
		c := t.FailureCategory
		if c == "" {
			c = engine.Classify(t)
		}
		if !blockerTypes[c] {
			continue
		}
		b := engine.Blocker{Type: string(c)}
		for _, s := range t.Steps {
			if !s.OK {
				b.Selector = s.Selector
				if b.Selector == "" {
					b.Selector = urlPattern(s.URL)
				}
				break
			}
		}
		if b.Selector == "" {
			b.Selector = t.URLPattern
		}
		k := b.Type + "\x00" + b.Selector
		count[k]++
		b.Note = fmt.Sprintf("seen in %d failed run(s)", count[k])
		out = engine.MergeBlocker(out, b)
	}
	return out
}

func urlPattern(u string) string {
	if n, err := engine.NormalizeURL(u); err == nil {
		return engine.Pattern(n)
	}
	return ""
}

// hints are pem's own templates, filled only with selectors: a failed step
// followed by a wait, scroll or another click, and then the same action
// succeeding.
func hints(ok []*engine.Trace) []string {
	var out []string
	add := func(h string) {
		for _, x := range out {
			if x == h {
				return
			}
		}
		out = append(out, h)
	}
	for _, t := range ok {
		for i, s := range t.Steps {
			if s.OK || s.Selector == "" {
				continue
			}
			for j := i + 1; j < len(t.Steps) && j <= i+3; j++ {
				r := t.Steps[j]
				if r.Selector == s.Selector && r.OK && j > i+1 {
					mid := t.Steps[i+1]
					switch mid.Action {
					case "wait":
						add(fmt.Sprintf("if %s is missing, wait for it and retry", strconv.Quote(s.Selector)))
					case "scroll":
						add(fmt.Sprintf("scroll before using %s: it loads lazily", strconv.Quote(s.Selector)))
					case "click":
						if mid.OK && mid.Selector != "" {
							add(fmt.Sprintf("click %s to dismiss what covers %s", strconv.Quote(mid.Selector), strconv.Quote(s.Selector)))
						}
					}
					break
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// extraction returns the most common extract step of successful runs: its
// selector, or "label:<label>".
func extraction(ok []*engine.Trace) string {
	count := map[string]int{}
	for _, t := range ok {
		for _, s := range t.Steps {
			if s.Action != "extract" || !s.OK {
				continue
			}
			q := s.Selector
			if q == "" && s.Value != "" {
				q = "label:" + s.Value
			}
			if q != "" {
				count[q]++
			}
		}
	}
	best := ""
	for q, n := range count {
		if best == "" || n > count[best] || n == count[best] && q < best {
			best = q
		}
	}
	return best
}

var (
	numberRe   = regexp.MustCompile(`^[\s$€£+-]*[\d.,]+\s*(%|k|m|stars?|forks?|issues?|open|closed)?\s*$`)
	dateRe     = regexp.MustCompile(`\b(\d{4}-\d{2}-\d{2}|\d{1,2}:\d{2}|(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]* \d{1,2})\b`)
	volatileRe = regexp.MustCompile(`(?i)\b(latest|current|now|today|count|how many|number of|status|recent|newest|price|open)\b`)
	statusRe   = regexp.MustCompile(`(?i)^(success|passing|failing|failed|queued|running|in progress|pending|cancelled|green|red)$`)
)

// Freshness classifies an answer: counts, numbers, dates, statuses and
// anything the task calls latest/current are volatile; names, paths and
// commands stable.
func Freshness(intent, value string) engine.Freshness {
	v := strings.TrimSpace(strings.ToLower(value))
	if numberRe.MatchString(v) || dateRe.MatchString(v) || statusRe.MatchString(v) || volatileRe.MatchString(intent) {
		return engine.Volatile
	}
	return engine.Stable
}

// answers proposes the answer of the intent when enough independent sessions
// read the same value; values that disagree across sessions are volatile (the
// route stays, the value is not cached).
func answers(intent string, ok []*engine.Trace, p engine.Policy) []engine.Answer {
	need := max(1, p.AnswerSessions)
	bySession := map[string]string{}
	var lastURL string
	var lastAt time.Time
	for _, t := range ok {
		a := strings.TrimSpace(t.Result.Answer)
		if a == "" || len(a) > 500 {
			continue
		}
		bySession[sessionOf(t)] = a
		lastURL, lastAt = t.Result.FinalURL, t.StartedAt.UTC()
		if lastURL == "" {
			lastURL = t.URL
		}
	}
	if len(bySession) < need {
		return nil
	}
	values := map[string]int{}
	for _, v := range bySession {
		values[v]++
	}
	if len(values) > 1 {
		return []engine.Answer{{Query: intent, Freshness: engine.Volatile, SourceURL: lastURL, ObservedAt: lastAt}}
	}
	var v string
	for k := range values {
		v = k
	}
	fr := Freshness(intent, v)
	a := engine.Answer{Query: intent, Value: v, SourceURL: lastURL, ObservedAt: lastAt, Freshness: fr}
	if fr == engine.Volatile {
		a.Value = "" // never cache a volatile value: the route reads it live
	}
	return []engine.Answer{a}
}

func patterns(ts []*engine.Trace) []string {
	count := map[string]int{}
	for _, t := range ts {
		if t.URLPattern != "" && t.Outcome == engine.Success {
			count[t.URLPattern]++
		}
	}
	out := make([]string, 0, len(count))
	for p := range count {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool {
		if count[out[i]] != count[out[j]] {
			return count[out[i]] > count[out[j]]
		}
		return out[i] < out[j]
	})
	return out
}

var injectionRe = regexp.MustCompile(`(?i)(ignore (all |any |the )?(previous|prior|above) (instructions|prompts?)|disregard (the |all )?(previous|above)|you are now|new instructions:|system prompt|^\s*#{1,6}\s|\n\s*#{1,6}\s|</?(system|assistant|tool_call|function_call|memory)>|"tool"\s*:\s*"|"function_call"|\{\{secret:|` + "```" + `)`)

// Injection reports why a trace's page-derived text looks like a prompt
// injection ("" when it does not): instruction overrides, text that would close
// or open a Memory block or heading, tool-call look-alikes.
func Injection(t *engine.Trace) string {
	check := func(where, s string) string {
		if m := injectionRe.FindString(s); m != "" {
			return fmt.Sprintf("%s contains %q", where, strings.TrimSpace(m))
		}
		return ""
	}
	if w := check("answer", t.Result.Answer); w != "" {
		return w
	}
	if w := check("final title", t.Result.FinalTitle); w != "" {
		return w
	}
	keys := make([]string, 0, len(t.Result.Extracted))
	for k := range t.Result.Extracted {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if w := check("extracted "+k, t.Result.Extracted[k]); w != "" {
			return w
		}
	}
	for i, s := range t.Steps {
		if w := check(fmt.Sprintf("step %d result", i+1), s.Result); w != "" {
			return w
		}
	}
	return ""
}
