package deeplearn

import (
	"fmt"
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
	Evidence   []Evidence    `yaml:"evidence,omitempty" json:"evidence,omitempty"`     // provenance of each mined item
	Flagged    []string      `yaml:"flagged,omitempty" json:"flagged,omitempty"`       // traces that looked like injections, with why
	Successes  int           `yaml:"successes" json:"successes"`
	Failures   int           `yaml:"failures" json:"failures"`
	Sessions   int           `yaml:"sessions" json:"sessions"`
	// Data is Facts encoded by Options.Encode (Learn, changed proposals only).
	Data []byte `yaml:"-" json:"-"`
}

// Evidence is the provenance of one mined item: how many runs showed it, from
// which sessions, and the newest of their trace ids.
type Evidence struct {
	Item     string   `yaml:"item" json:"item"` // "route", "selector <name>", "anti_pattern <…>", "blocker <type>", "hint <…>", "answer", "extraction_query"
	Runs     int      `yaml:"runs" json:"runs"`
	Sessions []string `yaml:"sessions" json:"sessions"` // sorted; at most MaxProvenanceTraces
	Traces   []string `yaml:"traces" json:"traces"`     // the newest, sorted; at most MaxProvenanceTraces
}

// MaxProvenanceTraces caps the trace ids (and sessions) kept per item and in
// facts.provenance.traces: the newest are kept, the counts say how many there were.
const MaxProvenanceTraces = 20

// Source is the provenance source every proposal carries.
const Source = "deep-learn"

// Mine proposes facts for one entry. It is pure and deterministic: the same
// input in any trace order gives the same proposal, byte for byte once
// marshalled. Rules (docs/deep-learn.md):
//   - traces whose page-derived text looks like an injection are flagged and
//     contribute nothing (not their outcome, route, selectors or answer);
//   - the route is the most frequent aligned sequence of successful steps;
//     values that vary between its runs become named parameters;
//   - each selector role is filled by its most stable selector, the others
//     ordered as fallbacks; selectors that keep failing never are fallbacks;
//   - anti-patterns: a selector (or navigation) that failed ≥ 2 times with no
//     later success in the same role; environment failures (captcha, login,
//     network) do not count against it;
//   - blockers from failed runs of a gate or overlay category, with the
//     selector and URL pattern that showed them;
//   - hints from recoveries, as pem's own sentences around selectors: no page
//     text ever becomes a hint;
//   - answers: a value only when answer_sessions independent sessions read
//     it alike and it is not volatile; values that disagree are volatile.
//
// The current entry's content is the base: hand-written hints, blockers and
// anti-patterns are kept, mined items are added or replace what they speak
// to. A verified (or contested) entry is never changed: the proposal is a new
// candidate revision that supersedes it.
func Mine(in Input) Proposal {
	return finish(mineCore(in), in.Now, in.Policy)
}

// core is what Mine derives from an entry's traces, facts, experience and
// policy: everything but what depends on the clock (the status, through the
// confidence's decay, and the history's timestamps). Learn remembers it for
// entries whose files did not change, and finish completes it at any now.
type core struct {
	P          Proposal          // Facts, Changed and Supersedes unset
	F          *engine.Facts     // the proposal without its status and revision
	Cur        *engine.Facts     // the current entry; nil when there is none
	Ev         []engine.Evidence // the experience's evidence, then every live trace's
	Latest     time.Time         // the newest live trace's start
	Live, OK   int               // live traces (not flagged), successful ones
	VerifiedOn int               // verifiedOn(Cur, Experience)
	CurSum     string            // material(Cur)
	// F's content hash (its revision) and material(F), made once when mined:
	// neither sees the status or the history, all that finish changes.
	FRev, FSum string
}

func mineCore(in Input) core {
	p := Proposal{Domain: in.Domain, Intent: in.Intent, IntentKey: in.IntentKey}
	traces := make([]*engine.Trace, 0, len(in.Traces))
	for _, t := range in.Traces {
		if t == nil {
			continue
		}
		if why := Injection(t); why != "" {
			p.Flagged = append(p.Flagged, fmt.Sprintf("%s: %s", t.ID, why))
			continue
		}
		traces = append(traces, t)
	}
	sort.Strings(p.Flagged)
	sort.Slice(traces, func(i, j int) bool {
		if !traces[i].StartedAt.Equal(traces[j].StartedAt) {
			return traces[i].StartedAt.Before(traces[j].StartedAt)
		}
		return traces[i].ID < traces[j].ID
	})
	var ok, failed []*engine.Trace
	sessions := map[string]bool{}
	for _, t := range traces {
		sessions[sessionOf(t)] = true
		if t.Outcome == engine.Success {
			ok = append(ok, t)
		} else {
			failed = append(failed, t)
		}
	}
	p.Successes, p.Failures, p.Sessions = len(ok), len(failed), len(sessions)
	// The experience keeps the evidence of runs whose traces expired: the
	// counts are over both (a trace id counts once).
	if in.Experience != nil {
		live := map[string]bool{}
		for _, t := range in.Traces {
			if t != nil {
				live[t.ID] = true
			}
		}
		for _, e := range in.Experience.Evidence {
			if live[e.Trace] || !e.IsRun() {
				continue
			}
			live[e.Trace] = true
			if e.Outcome == engine.Success {
				p.Successes++
				if e.Session != "" {
					sessions[e.Session] = true
				} else {
					sessions["trace:"+e.Trace] = true
				}
			} else {
				p.Failures++
			}
		}
		if d := in.Experience.Digest; d != nil { // evidence compacted as it decayed
			p.Successes += d.Successes
			p.Failures += d.Failures
			for _, s := range d.Sessions {
				sessions[s] = true
			}
		}
		p.Sessions = len(sessions)
	}

	cur := in.Facts
	f := &engine.Facts{Format: engine.Format, Domain: in.Domain, Intent: in.Intent, IntentKey: in.IntentKey, Status: engine.Candidate}
	if cur != nil {
		c := cur.Clone()
		f.TaskType, f.URLPatterns, f.Selectors, f.Steps = c.TaskType, c.URLPatterns, c.Selectors, c.Steps
		f.ExtractionQuery, f.InteractionHints, f.KnownBlockers, f.AntiPatterns, f.Answers = c.ExtractionQuery, c.InteractionHints, c.KnownBlockers, c.AntiPatterns, c.Answers
		f.History = c.History
		f.Provenance.FirstSeen, f.Provenance.Sources = cur.Provenance.FirstSeen, c.Provenance.Sources
	}
	if f.TaskType == "" {
		for _, t := range traces {
			if t.TaskType != "" {
				f.TaskType = t.TaskType
				break
			}
		}
	}
	ev := func(item string, ts []*engine.Trace) { p.Evidence = append(p.Evidence, evidence(item, ts)) }
	stats := roleStats(traces)

	// The route and its selector roles. A route that drops a step every
	// successful run took (the runs on hand, and those the current route
	// was learned from) is not adopted.
	r := mineRoute(ok)
	if r != nil && cur != nil {
		if miss := droppedSteps(r.steps, ok, cur); len(miss) > 0 {
			p.Reasons = append(p.Reasons, fmt.Sprintf("the most common route drops %s, which every successful run took: the current route is kept", strings.Join(miss, ", ")))
			r = nil
		}
	}
	if r != nil {
		p.Reasons = append(p.Reasons, fmt.Sprintf("route of %d steps taken by %d of %d successful runs", len(r.steps), len(r.runs), len(ok)))
		if len(r.params) > 0 {
			p.Reasons = append(p.Reasons, fmt.Sprintf("values that vary between runs became parameters: %s", strings.Join(r.params, ", ")))
		}
		ev("route", r.runs)
		f.Selectors = rankSelectors(r, f.Selectors, stats, ev)
		f.Steps = r.steps
	}
	f.URLPatterns = mergeStrings(patterns(ok), f.URLPatterns)

	if q, runs := extraction(ok); q != "" {
		f.ExtractionQuery = q
		ev("extraction_query", runs)
	}
	anti := antiPatterns(stats, f.Selectors)
	for _, a := range anti {
		// A mined anti-pattern replaces its own older wording (its counts move).
		kept := f.AntiPatterns[:0:0]
		for _, x := range f.AntiPatterns {
			if !strings.HasPrefix(x, a.prefix) {
				kept = append(kept, x)
			}
		}
		f.AntiPatterns = append(kept, a.text)
		p.Reasons = append(p.Reasons, fmt.Sprintf("anti-pattern %s %s: %d failures, %d successes, none after the last failure", a.action, a.target, a.st.fail, a.st.ok))
		ev("anti_pattern "+a.action+" "+a.target, a.st.failed)
	}
	bl := blockers(failed)
	for _, b := range bl {
		f.KnownBlockers = engine.MergeBlocker(f.KnownBlockers, b.Blocker)
		ev("blocker "+b.Type+" "+firstNonEmpty(b.Selector, strings.Join(b.urls, " ")), b.runs)
	}
	if len(bl) > 0 {
		p.Reasons = append(p.Reasons, fmt.Sprintf("%d blocker(s) from %d failed runs", len(bl), len(failed)))
	}
	hs := hints(traces)
	for _, h := range hs {
		f.InteractionHints = mergeStrings(f.InteractionHints, []string{h.text})
		ev("hint "+h.text, h.runs)
	}
	if len(hs) > 0 {
		p.Reasons = append(p.Reasons, fmt.Sprintf("%d hint(s) from recoveries", len(hs)))
	}
	if a, runs := answer(in.Intent, ok, in.Policy); a != nil {
		f.Answers = replaceAnswer(f.Answers, *a)
		ev("answer", runs)
		if a.Value == "" {
			p.Reasons = append(p.Reasons, "the answer changes between runs or is a count, date or status: volatile, read live, value not cached")
		} else {
			p.Reasons = append(p.Reasons, fmt.Sprintf("answer %q read alike in %d sessions (%s)", a.Value, countSessions(runs), a.Freshness))
		}
	}

	// Provenance: the newest trace ids mined, and deep-learn as a source.
	ids := make([]string, 0, len(traces))
	for _, t := range traces {
		ids = append(ids, t.ID)
		if f.Provenance.FirstSeen.IsZero() || t.StartedAt.Before(f.Provenance.FirstSeen) {
			f.Provenance.FirstSeen = t.StartedAt.UTC()
		}
	}
	f.Provenance.Traces = newest(ids)
	f.Provenance.Sources = mergeStrings(f.Provenance.Sources, []string{Source})

	// The scrubber's rules (engine.ScrubFacts): secrets in traces written
	// before it, or in the current entry, never reach a proposal — nor the
	// state Learn keeps in the git directory.
	engine.ScrubFacts(f)
	c := core{P: p, F: f, Cur: cur, Live: len(traces), OK: len(ok), FRev: f.ContentHash(), FSum: material(f)}
	if in.Experience != nil {
		c.Ev = append(c.Ev, in.Experience.Evidence...)
	}
	for _, t := range traces {
		c.Ev = append(c.Ev, engine.EvidenceOf(t)) // Confidence counts a trace id once
		if c.Latest.IsZero() || t.StartedAt.After(c.Latest) {
			c.Latest = t.StartedAt
		}
	}
	if cur != nil {
		c.VerifiedOn = verifiedOn(cur, in.Experience, in.Policy)
		c.CurSum = material(cur)
	}
	return slim(c)
}

// slim drops from a core what finish will not use, which its inputs decide
// already (Learn's state keeps the cores: less to decode each run). An entry
// whose proposal is no change is finished into a copy of its current entry:
// the mined facts and the evidence (for their status) are not needed. One
// that changes is finished into the mined facts: of the current entry, only
// its status and revision are read.
func slim(c core) core {
	switch {
	case c.Cur == nil:
	case c.CurSum == c.FSum || frozen(c.Cur) && c.OK < c.VerifiedOn:
		c.F, c.Ev = nil, nil
	default:
		rev := c.Cur.Revision
		if rev == "" {
			rev = c.Cur.ContentHash()
		}
		c.Cur = &engine.Facts{Status: c.Cur.Status, Revision: rev}
	}
	return c
}

// finish completes a core as of now: the status, the revision,
// whether it is a change, and the history's transitions.
func finish(c core, now time.Time, pol engine.Policy) Proposal {
	p, f, cur := c.P, c.F, c.Cur
	if f != nil { // nil: the proposal is no change (slim)
		f.Status = status(c.Ev, c.Latest, now, pol, f.HasPageText())
		// F was scrubbed when mined (mineCore), and its hashes made then.
		f.Revision = c.FRev
	}

	if cur != nil {
		p.Changed = c.CurSum != c.FSum
		switch {
		case !p.Changed:
			// Nothing to propose: keep the current entry as it is.
			f = cur.Clone()
		case frozen(cur) && c.OK < c.VerifiedOn:
			// Never supersede verified knowledge on less evidence than it was
			// verified on (after the TTL only a few traces may be on hand).
			p.Reasons = append(p.Reasons, fmt.Sprintf("%s revision %s was verified on %d successful runs; %d on hand are not enough to supersede it: no proposal",
				cur.Status, cur.Revision, c.VerifiedOn, c.OK))
			p.Changed = false
			f = cur.Clone()
		case frozen(cur):
			f.Supersedes = cur.Revision
			if f.Supersedes == "" {
				f.Supersedes = cur.ContentHash()
			}
			p.Supersedes = f.Supersedes
			p.Reasons = append(p.Reasons, fmt.Sprintf("%s revision %s is frozen: this is a new revision that supersedes it", cur.Status, p.Supersedes))
			f.History = append(f.History, transition(cur.Status, f.Status, now, "deep-learn: revision "+f.Revision+" supersedes "+p.Supersedes))
		case cur.Status != f.Status:
			f.History = append(f.History, transition(cur.Status, f.Status, now, "deep-learn: "+statusReason(f.Status)))
		}
	} else {
		p.Changed = c.Live > 0
	}
	p.Facts = f
	return p
}

var countRe = engine.LazyRE(`(failed|seen in) \d+ `)

// material is the hash of what a reviewer must look at: the content without
// the numbers that move with every run (selector stability, counts in
// mined notes, when and where an answer was last read). A proposal that
// differs from the current entry only in those is no proposal: it would
// supersede verified entries every night for nothing.
func material(f *engine.Facts) string {
	c := f.Clone()
	for k, s := range c.Selectors {
		s.Stability = 0
		c.Selectors[k] = s
	}
	for i := range c.Steps {
		c.Steps[i].Seq, c.Steps[i].DurationMs = i+1, 0
	}
	for i := range c.KnownBlockers {
		c.KnownBlockers[i].Note = countRe.ReplaceAllString(c.KnownBlockers[i].Note, "$1 N ")
	}
	for i := range c.AntiPatterns {
		c.AntiPatterns[i] = countRe.ReplaceAllString(c.AntiPatterns[i], "$1 N ")
	}
	for i := range c.Answers {
		c.Answers[i].ObservedAt, c.Answers[i].SourceURL = time.Time{}, ""
	}
	return c.ContentHash()
}

func transition(from, to engine.Status, at time.Time, why string) engine.Transition {
	if from == "" {
		from = engine.Hypothesis
	}
	return engine.Transition{From: from, To: to, At: at.UTC(), Reason: why}
}

func statusReason(s engine.Status) string {
	if s == engine.Candidate {
		return "the mined evidence meets the candidate bar"
	}
	return "the mined evidence is below the candidate bar"
}

// verifiedOn is how many successful runs an entry was verified on: the
// successes in its evidence (kept after their traces expired) up to its
// latest promotion to verified. An entry with no evidence (verified by hand)
// counts 0.
func verifiedOn(cur *engine.Facts, x *engine.Experience, _ engine.Policy) int {
	var at time.Time
	for _, h := range cur.History {
		if h.To == engine.Verified && h.At.After(at) {
			at = h.At
		}
	}
	n := 0
	if x != nil {
		for _, e := range x.Evidence {
			if e.IsRun() && e.Outcome == engine.Success && (at.IsZero() || !e.At.After(at)) {
				n++
			}
		}
		if x.Digest != nil {
			n += x.Digest.Successes // all of them: when unsure, the stricter bar
		}
	}
	return n
}

// droppedSteps returns the step signatures that every successful run took —
// each of the runs on hand and, for the current route, the runs it was
// learned from (its own steps) — but the proposed route leaves out.
func droppedSteps(proposed []engine.Step, ok []*engine.Trace, cur *engine.Facts) []string {
	if len(ok) == 0 {
		return nil
	}
	common := map[string]bool{}
	for i, t := range ok {
		idx, _ := aligned(t)
		sigs := map[string]bool{}
		for _, k := range idx {
			sigs[signature(t.Steps[k])] = true
		}
		for sig := range common {
			if !sigs[sig] {
				delete(common, sig)
			}
		}
		if i == 0 {
			common = sigs
		}
	}
	if len(cur.Steps) > 0 {
		own := map[string]bool{}
		for _, s := range cur.Steps {
			if !observation(s.Action) {
				own[signature(s)] = true
			}
		}
		for sig := range common {
			if !own[sig] {
				delete(common, sig)
			}
		}
	}
	have := map[string]bool{}
	for _, s := range proposed {
		have[signature(s)] = true
	}
	var out []string
	for sig := range common {
		if !have[sig] {
			out = append(out, sig)
		}
	}
	sort.Strings(out)
	return out
}

// frozen reports whether an entry's content may only change through a
// superseding revision: verified, or contested (it was verified).
func frozen(f *engine.Facts) bool {
	return f.Status == engine.Verified || f.Status == engine.Contested
}

// status is the proposal's status: what the evidence supports under the
// promotion rules (engine.NextStatus from hypothesis), capped at candidate —
// only consolidation, after review, verifies.
// ev is the experience's evidence and the live traces'; the clock is now,
// or the newest trace's start when that is later.
func status(ev []engine.Evidence, latest, now time.Time, pol engine.Policy, pageText bool) engine.Status {
	if now.IsZero() || latest.After(now) {
		now = latest
	}
	s, _ := engine.NextStatus(engine.Hypothesis, engine.Confidence(ev, now, pol), pageText, pol)
	if s == engine.Verified {
		s = engine.Candidate
	}
	return s
}

// sessionOf is the identity a run counts under for independence: its
// session, else its writer (a machine repeating itself counts once), else the
// trace itself.
func sessionOf(t *engine.Trace) string {
	switch {
	case t.Session != "":
		return t.Session
	case t.Writer != "":
		return "writer:" + t.Writer
	}
	return "trace:" + t.ID
}

func countSessions(ts []*engine.Trace) int {
	m := map[string]bool{}
	for _, t := range ts {
		m[sessionOf(t)] = true
	}
	return len(m)
}

// evidence summarizes the runs behind one item (ts sorted oldest first).
func evidence(item string, ts []*engine.Trace) Evidence {
	e := Evidence{Item: item, Runs: len(ts), Sessions: []string{}, Traces: []string{}}
	seen := map[string]bool{}
	for _, t := range ts {
		if s := sessionOf(t); !seen[s] {
			seen[s] = true
			e.Sessions = append(e.Sessions, s)
		}
		e.Traces = append(e.Traces, t.ID)
	}
	sort.Strings(e.Sessions)
	if len(e.Sessions) > MaxProvenanceTraces {
		e.Sessions = e.Sessions[:MaxProvenanceTraces]
	}
	e.Traces = newest(e.Traces)
	return e
}

// newest keeps the newest MaxProvenanceTraces ids (ids sort by time), sorted.
func newest(ids []string) []string {
	ids = mergeStrings(ids, nil)
	sort.Strings(ids)
	if len(ids) > MaxProvenanceTraces {
		ids = ids[len(ids)-MaxProvenanceTraces:]
	}
	return ids
}

// ---- route ----

// observation steps say nothing about the route.
func observation(action string) bool {
	switch action {
	case "screenshot", "get_elements", "wait", "scroll", "done":
		return true
	}
	return false
}

// aligned returns the indexes of a run's steps that make its route: the
// steps that worked, minus observation-only steps and minus recovery steps
// (what a run did between a failed step and its successful retry, such as
// dismissing a banner — that becomes a hint). For each kept step it also
// returns the selectors of the failed attempts it replaced in the same role.
func aligned(t *engine.Trace) (idx []int, replaced [][]string) {
	skip := make([]bool, len(t.Steps))
	for i, s := range t.Steps {
		if s.OK || s.Selector == "" {
			continue
		}
		for j := i + 2; j < len(t.Steps) && j <= i+3; j++ {
			if r := t.Steps[j]; r.OK && r.Action == s.Action && r.Selector == s.Selector {
				for k := i + 1; k < j; k++ {
					skip[k] = true
				}
				break
			}
		}
	}
	var pending []string
	for i, s := range t.Steps {
		if !s.OK {
			if s.Selector != "" && s.Action != "navigate" {
				pending = append(pending, s.Action+"\x00"+s.Selector)
			}
			continue
		}
		if skip[i] || observation(s.Action) {
			continue
		}
		var rep []string
		for _, p := range pending {
			if a, sel, _ := strings.Cut(p, "\x00"); a == s.Action && sel != s.Selector {
				rep = append(rep, sel)
			}
		}
		pending = nil
		idx = append(idx, i)
		replaced = append(replaced, rep)
	}
	return idx, replaced
}

// signature is a step's identity for alignment: its action and, for
// navigation, the URL pattern (selectors may drift between runs, values vary).
func signature(s engine.Step) string {
	if s.Action == "navigate" {
		if p := urlPattern(firstNonEmpty(s.URL, s.Value)); p != "" {
			return "navigate " + p
		}
	}
	return s.Action
}

// route is the mined route: its steps, the runs that took it, and for each
// step the runs' own steps at that position (for selector roles).
type route struct {
	steps  []engine.Step
	runs   []*engine.Trace
	at     [][]engine.Step // at[k][r]: run r's step at position k
	rep    [][]string      // selectors of failed attempts replaced at position k
	params []string
}

// mineRoute returns the most frequent aligned step sequence of the
// successful runs (ties: the one taken most recently, then the signature).
// Values that differ between its runs become named parameters.
func mineRoute(ok []*engine.Trace) *route {
	type group struct {
		runs     []*engine.Trace
		steps    [][]engine.Step
		replaced [][][]string
	}
	groups := map[string]*group{}
	for _, t := range ok {
		idx, rep := aligned(t)
		if len(idx) == 0 {
			continue
		}
		sig := make([]string, len(idx))
		steps := make([]engine.Step, len(idx))
		for k, i := range idx {
			steps[k] = t.Steps[i]
			sig[k] = signature(t.Steps[i])
		}
		key := strings.Join(sig, " | ")
		g := groups[key]
		if g == nil {
			g = &group{}
			groups[key] = g
		}
		g.runs = append(g.runs, t)
		g.steps = append(g.steps, steps)
		g.replaced = append(g.replaced, rep)
	}
	if len(groups) == 0 {
		return nil
	}
	best := ""
	for k, g := range groups {
		if best == "" {
			best = k
			continue
		}
		b := groups[best]
		la, lb := g.runs[len(g.runs)-1].StartedAt, b.runs[len(b.runs)-1].StartedAt
		if len(g.runs) > len(b.runs) || len(g.runs) == len(b.runs) && (la.After(lb) || la.Equal(lb) && k < best) {
			best = k
		}
	}
	g := groups[best]
	n := len(g.steps[0])
	r := &route{runs: g.runs, at: make([][]engine.Step, n), rep: make([][]string, n)}
	taken := map[string]bool{}
	newestRun := g.steps[len(g.steps)-1]
	for k := 0; k < n; k++ {
		for ri := range g.runs {
			r.at[k] = append(r.at[k], g.steps[ri][k])
			r.rep[k] = append(r.rep[k], g.replaced[ri][k]...)
		}
		s := newestRun[k]
		st := engine.Step{Seq: k + 1, Action: s.Action, Selector: s.Selector, URL: s.URL, Value: s.Value, OK: true}
		param := ""
		values, urls := map[string]bool{}, map[string]bool{}
		for ri := len(r.at[k]) - 1; ri >= 0; ri-- {
			x := r.at[k][ri]
			if param == "" && x.Param != "" {
				param = x.Param // the recorder bound it: keep its name
			}
			values[x.Value] = true
			urls[normURL(firstNonEmpty(x.URL, x.Value))] = true
		}
		switch {
		case s.Action == "navigate":
			if len(urls) > 1 || param != "" {
				st.URL, st.Value = "", ""
				st.Param = uniqueParam(firstNonEmpty(param, "url"), taken)
			}
		case secretValue(st.Value):
			// a secret is bound by name at run time: keep its placeholder
		case (s.Action == "type" || s.Action == "select") && (len(values) > 1 || param != ""):
			st.Value = ""
			st.Param = uniqueParam(firstNonEmpty(param, paramName(s)), taken)
		}
		if st.Param != "" {
			r.params = append(r.params, st.Param)
		}
		r.steps = append(r.steps, st)
	}
	return r
}

func secretValue(v string) bool {
	return v != "" && (strings.Contains(v, engine.Redacted) || strings.Contains(v, "{{secret:"))
}

func normURL(u string) string {
	if n, err := engine.NormalizeURL(u); err == nil {
		return n.URL
	}
	return u
}

var (
	nonWord  = engine.LazyRE(`[^a-z0-9]+`)
	nameAttr = engine.LazyRE(`name=["']?([a-z0-9_-]+)`)
	idPart   = engine.LazyRE(`#([a-z0-9_-]+)`)
)

// paramName derives a parameter name from a step's selector:
// "input[name=q]" → "q", "#search-box" → "search_box"; else its action.
func paramName(s engine.Step) string {
	sel := strings.ToLower(s.Selector)
	if m := nameAttr.FindStringSubmatch(sel); m != nil {
		sel = m[1]
	} else if m := idPart.FindStringSubmatch(sel); m != nil {
		sel = m[1]
	} else {
		sel = ""
	}
	sel = strings.Trim(nonWord.ReplaceAllString(sel, "_"), "_")
	if sel == "" || len(sel) > 32 {
		return s.Action
	}
	return sel
}

func uniqueParam(name string, taken map[string]bool) string {
	n := name
	for i := 2; taken[n]; i++ {
		n = fmt.Sprintf("%s_%d", name, i)
	}
	taken[n] = true
	return n
}

// ---- selectors ----

// stat is the record of one role target (action + selector, or navigate +
// URL pattern) across the traces, in step order.
type stat struct {
	ok, fail        int
	lastOK, lastErr int // step ordinals; -1 = never
	failed          []*engine.Trace
}

// failing reports a target that failed at least twice with no success after
// its last failure: an anti-pattern, never a fallback.
func (s *stat) failing() bool { return s != nil && s.fail >= 2 && s.lastErr > s.lastOK }

// stability is the smoothed success rate (1 + ok) / (2 + ok + fail).
func (s *stat) stability() float64 {
	if s == nil {
		return 0.5
	}
	return float64(s.ok+1) / float64(s.ok+s.fail+2)
}

func roleKey(action, target string) string { return action + "\x00" + target }

// target is what a step acts on: its selector, or for navigation the URL pattern.
func target(s engine.Step) string {
	if s.Action == "navigate" {
		return urlPattern(firstNonEmpty(s.URL, s.Value))
	}
	return s.Selector
}

// roleStats counts each target's outcomes over the traces (sorted oldest
// first), skipping failures of the environment: a captcha, a login wall or
// the network say nothing about a selector.
func roleStats(ts []*engine.Trace) map[string]*stat {
	m := map[string]*stat{}
	ord := 0
	for _, t := range ts {
		for i, s := range t.Steps {
			ord++
			tg := target(s)
			if tg == "" || observation(s.Action) {
				continue
			}
			if !s.OK && environmental(t, i) {
				continue
			}
			k := roleKey(s.Action, tg)
			st := m[k]
			if st == nil {
				st = &stat{lastOK: -1, lastErr: -1}
				m[k] = st
			}
			if s.OK {
				st.ok++
				st.lastOK = ord
			} else {
				st.fail++
				st.lastErr = ord
				if n := len(st.failed); n == 0 || st.failed[n-1] != t {
					st.failed = append(st.failed, t)
				}
			}
		}
	}
	return m
}

// environmental reports a failed step that the environment caused.
func environmental(t *engine.Trace, i int) bool {
	s := t.Steps[i]
	switch s.ErrorKind {
	case engine.KindCaptcha, engine.KindLogin, engine.KindNetwork:
		return true
	}
	if c := s.HTTPStatus; c == 401 || c == 403 || c == 407 || c == 429 || c >= 500 {
		return true
	}
	if t.Outcome == engine.Failure {
		for j := range t.Steps {
			if !t.Steps[j].OK {
				if j == i {
					c := category(t)
					return c.IsGate() || c == engine.Network
				}
				break
			}
		}
	}
	return false
}

func category(t *engine.Trace) engine.FailureCategory {
	if t.FailureCategory.Valid() {
		return t.FailureCategory
	}
	return engine.Classify(t)
}

// rankSelectors fills each selector role of the route with its most stable
// selector and orders the others as fallbacks, and names the roles: a name
// the current entry already gives one of the role's selectors is kept (so
// reviewed names stay), else <action>_<what the selector names>. Names of the
// current entry whose selectors no role uses are kept as they are.
func rankSelectors(r *route, cur map[string]engine.Selector, stats map[string]*stat, ev func(string, []*engine.Trace)) map[string]engine.Selector {
	out := map[string]engine.Selector{}
	curNames := make([]string, 0, len(cur))
	for n := range cur {
		curNames = append(curNames, n)
	}
	sort.Strings(curNames)
	used := map[string]bool{}
	named := map[string]string{} // primary → name
	for k := range r.steps {
		s := &r.steps[k]
		if s.Selector == "" || s.Action == "navigate" {
			continue
		}
		members := map[string]bool{}
		for _, x := range r.at[k] {
			members[x.Selector] = true
			for _, fb := range x.Fallbacks {
				members[fb] = true
			}
		}
		for _, sel := range r.rep[k] {
			members[sel] = true
		}
		name := ""
		for _, n := range curNames {
			c := cur[n]
			if used[n] || !(members[c.Primary] || containsAny(c.Fallbacks, members)) {
				continue
			}
			name = n
			members[c.Primary] = true
			for _, fb := range c.Fallbacks {
				members[fb] = true
			}
			break
		}
		var list, bad []string
		for sel := range members {
			if sel == "" {
				continue
			}
			if stats[roleKey(s.Action, sel)].failing() {
				bad = append(bad, sel)
			} else {
				list = append(list, sel)
			}
		}
		if len(list) == 0 { // every candidate keeps failing: keep them, ranked
			list = bad
		}
		sort.Slice(list, func(a, b int) bool {
			sa, sb := stats[roleKey(s.Action, list[a])], stats[roleKey(s.Action, list[b])]
			if sa.stability() != sb.stability() {
				return sa.stability() > sb.stability()
			}
			la, lb := -1, -1
			if sa != nil {
				la = sa.lastOK
			}
			if sb != nil {
				lb = sb.lastOK
			}
			if la != lb {
				return la > lb
			}
			return list[a] < list[b]
		})
		sel := engine.Selector{Primary: list[0], Stability: round2(stats[roleKey(s.Action, list[0])].stability())}
		if len(list) > 1 {
			sel.Fallbacks = list[1:]
		}
		s.Selector, s.Fallbacks = sel.Primary, sel.Fallbacks
		if _, done := named[sel.Primary]; done {
			continue // one name per selector (type then press on the same input)
		}
		if name == "" {
			name = s.Action + "_" + engine.SelectorName(sel.Primary)
			for i := 2; used[name] || cur[name].Primary != "" && cur[name].Primary != sel.Primary; i++ {
				name = fmt.Sprintf("%s_%s_%d", s.Action, engine.SelectorName(sel.Primary), i)
			}
		}
		used[name] = true
		named[sel.Primary] = name
		out[name] = sel
		ev("selector "+name, r.runs)
	}
	for _, n := range curNames {
		if used[n] {
			continue
		}
		c := cur[n]
		if _, taken := named[c.Primary]; taken {
			continue // the role was renamed by a mined one
		}
		out[n] = c
	}
	return out
}

func containsAny(xs []string, set map[string]bool) bool {
	for _, x := range xs {
		if set[x] {
			return true
		}
	}
	return false
}

func round2(f float64) float64 { return float64(int64(f*100+0.5)) / 100 }

// ---- anti-patterns, blockers, hints, extraction, answers ----

type anti struct {
	action, target, text string
	prefix               string // the text up to its counts
	st                   *stat
}

// antiPatterns: targets that failed at least twice with no success after
// their last failure, and that no selector role uses as its primary.
func antiPatterns(stats map[string]*stat, sels map[string]engine.Selector) []anti {
	primary := map[string]bool{}
	for _, s := range sels {
		primary[s.Primary] = true
	}
	keys := make([]string, 0, len(stats))
	for k := range stats {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []anti
	for _, k := range keys {
		st := stats[k]
		action, tg, _ := strings.Cut(k, "\x00")
		if !st.failing() || primary[tg] || !safeSelector(tg) {
			continue
		}
		a := anti{action: action, target: strconv.Quote(tg), st: st}
		if action == "navigate" {
			a.target = tg
			a.prefix = fmt.Sprintf("navigate to %s failed ", tg)
		} else {
			a.prefix = fmt.Sprintf("%s %s failed ", action, a.target)
		}
		a.text = fmt.Sprintf("%s%d times with no later success", a.prefix, st.fail)
		out = append(out, a)
	}
	return out
}

// blockerTypes are the failure categories that become known blockers.
var blockerTypes = map[engine.FailureCategory]bool{
	engine.AntiBot: true, engine.AuthRequired: true, engine.PermissionDenied: true, engine.OverlayBlocked: true,
}

type blocker struct {
	engine.Blocker
	urls []string
	runs []*engine.Trace
}

// blockers are the gates and overlays failed runs met, one per (type,
// selector), with the URL patterns where they showed.
func blockers(failed []*engine.Trace) []blocker {
	byKey := map[string]*blocker{}
	var keys []string
	for _, t := range failed {
		c := category(t)
		if !blockerTypes[c] {
			continue
		}
		sel, u := "", ""
		for _, s := range t.Steps {
			if !s.OK {
				if s.Action != "navigate" && safeSelector(s.Selector) {
					sel = s.Selector
				}
				u = firstNonEmpty(s.URL, t.Result.FinalURL, t.URL)
				break
			}
		}
		if u == "" {
			u = firstNonEmpty(t.Result.FinalURL, t.URL)
		}
		k := string(c) + "\x00" + sel
		b := byKey[k]
		if b == nil {
			b = &blocker{Blocker: engine.Blocker{Type: string(c), Selector: sel}}
			byKey[k] = b
			keys = append(keys, k)
		}
		if p := urlPattern(u); p != "" {
			b.urls = mergeStrings(b.urls, []string{p})
		}
		b.runs = append(b.runs, t)
	}
	sort.Strings(keys)
	out := make([]blocker, 0, len(keys))
	for _, k := range keys {
		b := byKey[k]
		sort.Strings(b.urls)
		b.Note = fmt.Sprintf("seen in %d failed run(s)", len(b.runs))
		if len(b.urls) > 0 {
			b.Note += " at " + strings.Join(b.urls, ", ")
		}
		out = append(out, *b)
	}
	return out
}

func urlPattern(u string) string {
	if u == "" {
		return ""
	}
	if n, err := engine.NormalizeURL(u); err == nil {
		return engine.Pattern(n)
	}
	return ""
}

type hint struct {
	text string
	runs []*engine.Trace
}

// hints come from recoveries: a failed step, then a wait, a scroll or a
// dismissal (a click elsewhere, Escape), then the same step succeeding. They
// are pem's own sentences around selectors: nothing a page said is copied.
func hints(ts []*engine.Trace) []hint {
	byText := map[string]*hint{}
	add := func(h string, t *engine.Trace) {
		x := byText[h]
		if x == nil {
			x = &hint{text: h}
			byText[h] = x
		}
		if n := len(x.runs); n == 0 || x.runs[n-1] != t {
			x.runs = append(x.runs, t)
		}
	}
	for _, t := range ts {
		for i, s := range t.Steps {
			if s.OK || !safeSelector(s.Selector) || s.Action == "navigate" {
				continue
			}
			for j := i + 2; j < len(t.Steps) && j <= i+3; j++ {
				r := t.Steps[j]
				if !r.OK || r.Action != s.Action || r.Selector != s.Selector {
					continue
				}
				q := strconv.Quote(s.Selector)
				switch mid := t.Steps[i+1]; {
				case mid.Action == "wait":
					add(fmt.Sprintf("if %s is missing, wait for it and retry", q), t)
				case mid.Action == "scroll":
					add(fmt.Sprintf("scroll before using %s: it loads lazily", q), t)
				case mid.Action == "click" && mid.OK && mid.Selector != s.Selector && safeSelector(mid.Selector):
					add(fmt.Sprintf("click %s to dismiss what covers %s", strconv.Quote(mid.Selector), q), t)
				case mid.Action == "press" && mid.OK && strings.EqualFold(mid.Value, "Escape"):
					add(fmt.Sprintf("press Escape to dismiss what covers %s", q), t)
				}
				break
			}
		}
	}
	out := make([]hint, 0, len(byText))
	for _, h := range byText {
		out = append(out, *h)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].text < out[j].text })
	return out
}

// safeSelector accepts a selector for use inside pem's sentences: one short
// line that reads as no instruction.
func safeSelector(s string) bool {
	return s != "" && len(s) <= 200 && !strings.ContainsAny(s, "\n\r\t\x00`") && engine.InjectedText(s) == ""
}

// extraction returns the most common extract step of successful runs — its
// selector, or "label:<label>" — and the runs that used it.
func extraction(ok []*engine.Trace) (string, []*engine.Trace) {
	runs := map[string][]*engine.Trace{}
	for _, t := range ok {
		for _, s := range t.Steps {
			if s.Action != "extract" || !s.OK {
				continue
			}
			q := s.Selector
			if q == "" && s.Value != "" {
				q = "label:" + s.Value
			}
			if q != "" && safeSelector(q) {
				if n := len(runs[q]); n == 0 || runs[q][n-1] != t {
					runs[q] = append(runs[q], t)
				}
			}
		}
	}
	best := ""
	for q, rs := range runs {
		if best == "" || len(rs) > len(runs[best]) || len(rs) == len(runs[best]) && q < best {
			best = q
		}
	}
	return best, runs[best]
}

// Freshness classifies an answer by its kind (engine.AnswerFreshness, the
// one rule consolidation uses too). Values that disagree across sessions
// are volatile too; that needs several runs and is decided in Mine.
func Freshness(intent, value string) engine.Freshness {
	return engine.AnswerFreshness(intent, value)
}

// answer proposes the intent's answer. Values that disagree between runs are
// volatile: the answer says "read live" and caches no value, whatever the
// number of sessions. One value read alike is cached only when it is not
// volatile and answer_sessions independent sessions read it (one session
// repeating itself counts once): an answer is page text.
func answer(intent string, ok []*engine.Trace, p engine.Policy) (*engine.Answer, []*engine.Trace) {
	var runs []*engine.Trace
	values := map[string]bool{}
	for _, t := range ok {
		a := strings.TrimSpace(t.Result.Answer)
		if a == "" || len(a) > 500 {
			continue
		}
		runs = append(runs, t)
		values[a] = true
	}
	if len(runs) == 0 {
		return nil, nil
	}
	last := runs[len(runs)-1]
	a := &engine.Answer{Query: intent, SourceURL: firstNonEmpty(last.Result.FinalURL, last.URL), ObservedAt: last.StartedAt.UTC(), Freshness: engine.Volatile}
	if len(values) > 1 {
		return a, runs
	}
	v := strings.TrimSpace(last.Result.Answer)
	if Freshness(intent, v) == engine.Volatile {
		return a, runs
	}
	if countSessions(runs) < max(1, p.AnswerSessions) {
		return nil, nil // one session's word: not yet
	}
	a.Value, a.Freshness = v, engine.Stable
	return a, runs
}

func replaceAnswer(as []engine.Answer, a engine.Answer) []engine.Answer {
	for i := range as {
		if as[i].Query == a.Query {
			as[i] = a
			return as
		}
	}
	return append(as, a)
}

// patterns are the URL patterns of successful runs, most frequent first.
func patterns(ok []*engine.Trace) []string {
	count := map[string]int{}
	for _, t := range ok {
		if t.URLPattern != "" {
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

// ---- helpers ----

func firstNonEmpty(xs ...string) string {
	for _, x := range xs {
		if x != "" {
			return x
		}
	}
	return ""
}

// mergeStrings returns a then b without empty strings or repeats, in order.
func mergeStrings(a, b []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, xs := range [][]string{a, b} {
		for _, s := range xs {
			if s != "" && !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		}
	}
	return out
}

// Injection reports why a trace's page-derived text looks like a prompt
// injection ("" when it does not). The rule is engine.Injection, shared with
// the engine's answer from unconsolidated traces and with consolidation.
func Injection(t *engine.Trace) string { return engine.Injection(t) }
