package engine

import (
	"math"
	"slices"
	"time"
)

// Digest is the evidence an entry has compacted: runs so old that their
// decayed weight fell below the policy's compact_below_weight, kept as
// counts instead of one item each, so that an experience file (and the work
// of every consolidation that reads it) stays flat under steady load while
// the trust rules see what they saw before (docs/data-model.md, "Compacted
// evidence"). It is a pure function of the items it absorbed; Compact makes
// it, MergeExperience merges two of them, ScoreOf reads it.
type Digest struct {
	// Before: every item the digest holds started before it. Consolidation
	// never folds a trace that started before it (it could be one already
	// counted), and neither does a query.
	Before time.Time `yaml:"before" json:"before"`
	// S and F are the digest's decayed, weighted successes and failures as
	// of Before, weighed with HalfLifeDays; at a later time t they weigh
	// 0.5^((t − Before)/half_life) as much (decay is exponential, so the sum
	// decays as each item would).
	HalfLifeDays float64 `yaml:"half_life_days" json:"half_life_days"`
	S            float64 `yaml:"s" json:"s"`
	F            float64 `yaml:"f" json:"f"`

	Traces     int                     `yaml:"traces" json:"traces"` // items absorbed (runs and lessons)
	Successes  int                     `yaml:"successes" json:"successes"`
	Failures   int                     `yaml:"failures" json:"failures"`
	Gates      int                     `yaml:"gates,omitempty" json:"gates,omitempty"`
	NoFault    int                     `yaml:"no_fault,omitempty" json:"no_fault,omitempty"`
	Confirmed  int                     `yaml:"confirmed,omitempty" json:"confirmed,omitempty"`
	Lessons    int                     `yaml:"lessons,omitempty" json:"lessons,omitempty"`
	ByCategory map[FailureCategory]int `yaml:"by_category,omitempty" json:"by_category,omitempty"`
	Patterns   map[string]*Counts      `yaml:"patterns,omitempty" json:"patterns,omitempty"`
	Steps      int64                   `yaml:"steps,omitempty" json:"steps,omitempty"`             // total, for avg_steps
	DurationMs int64                   `yaml:"duration_ms,omitempty" json:"duration_ms,omitempty"` // total, for avg_duration_ms
	// Sessions with a success, sorted, at most MaxDigestSessions: enough for
	// every "from ≥ N sessions" rule with N up to that bound.
	Sessions []string `yaml:"sessions,omitempty" json:"sessions,omitempty"`
	// The newest end of what it absorbed, for the rules that look at the
	// latest outcomes when the live evidence is short: route outcomes newest
	// first (at most MaxDigestRecent), route failures in a row at that end,
	// the gate that stopped its newest run, its newest verdict when wrong.
	Recent            []Outcome       `yaml:"recent,omitempty" json:"recent,omitempty"`
	Streak            int             `yaml:"streak,omitempty" json:"streak,omitempty"`
	Newest            time.Time       `yaml:"newest,omitempty" json:"newest,omitempty"`
	OpenGate          FailureCategory `yaml:"open_gate,omitempty" json:"open_gate,omitempty"`
	Judged            time.Time       `yaml:"judged,omitempty" json:"judged,omitempty"` // start of its newest judged run
	OpenWrong         string          `yaml:"open_wrong,omitempty" json:"open_wrong,omitempty"`
	OpenWrongRevision string          `yaml:"open_wrong_revision,omitempty" json:"open_wrong_revision,omitempty"`
	LastSuccessAt     time.Time       `yaml:"last_success_at,omitempty" json:"last_success_at,omitempty"`
	LastFailureAt     time.Time       `yaml:"last_failure_at,omitempty" json:"last_failure_at,omitempty"`
}

// Bounds of a digest's lists (see Digest).
const (
	MaxDigestSessions = 16
	MaxDigestRecent   = 16
)

// CompactBefore is the start time before which evidence is compacted at
// now under p: weight below p.CompactBelowWeight, and older than the
// traces' TTL by a day, so no trace file it came from is still in the
// tree. Zero when compaction is off.
func CompactBefore(now time.Time, p Policy) time.Time {
	if p.CompactBelowWeight <= 0 || p.CompactBelowWeight >= 1 || p.HalfLifeDays <= 0 {
		return time.Time{}
	}
	days := max(p.HalfLifeDays*math.Log2(1/p.CompactBelowWeight), float64(p.TTLDays+1))
	return now.UTC().Add(-time.Duration(days * 24 * float64(time.Hour))).Truncate(time.Second)
}

// Compactable reports how many items of x Compact would move at now.
func (x *Experience) Compactable(now time.Time, p Policy) int {
	before := CompactBefore(now, p)
	n := 0
	if !before.IsZero() {
		for i := range x.Evidence {
			if x.Evidence[i].At.Before(before) {
				n++
			}
		}
	}
	return n
}

// Compact moves the evidence of x that started before CompactBefore(now, p)
// into x's digest and recounts x. It is idempotent: with nothing that old
// left it changes nothing and returns false.
func (x *Experience) Compact(now time.Time, p Policy) bool {
	before := CompactBefore(now, p)
	if before.IsZero() {
		return false
	}
	var old, keep []Evidence
	seen := map[string]bool{}
	for _, e := range x.Evidence {
		if e.Trace != "" && seen[e.Trace] {
			continue // a duplicate counts once, as in ScoreOf
		}
		seen[e.Trace] = true
		if e.At.Before(before) {
			old = append(old, e)
		} else {
			keep = append(keep, e)
		}
	}
	if len(old) == 0 {
		return false
	}
	d := digestOf(old, before, p)
	if x.Digest != nil {
		d = sumDigests(before, p.HalfLifeDays, []*Digest{x.Digest, d}, []int{1, 1})
	}
	x.Digest = d
	if keep == nil {
		keep = []Evidence{}
	}
	x.Evidence = keep
	x.Recount()
	return true
}

// digestOf summarizes items (all started before `before`).
func digestOf(items []Evidence, before time.Time, p Policy) *Digest {
	d := &Digest{Before: before.UTC(), HalfLifeDays: p.HalfLifeDays}
	sessions := map[string]bool{}
	var route []int
	newest, judged := -1, -1
	for i := range items {
		e := &items[i]
		d.Traces++
		if !e.IsRun() {
			d.Lessons++
			continue
		}
		w := Decay(before.Sub(e.At), p.HalfLifeDays)
		d.Steps += int64(e.Steps)
		d.DurationMs += e.DurationMs
		if d.Patterns == nil {
			d.Patterns = map[string]*Counts{}
		}
		pc := d.Patterns[e.URLPattern]
		if pc == nil {
			pc = &Counts{}
			d.Patterns[e.URLPattern] = pc
		}
		if e.Outcome == Success {
			d.Successes++
			pc.OK++
			d.S += w
			s := e.Session
			if s == "" {
				s = "trace:" + e.Trace
			}
			sessions[s] = true
			if e.Verdict == Right {
				d.Confirmed++
			}
			if e.At.After(d.LastSuccessAt) {
				d.LastSuccessAt = e.At
			}
		} else {
			d.Failures++
			pc.Fail++
			if d.ByCategory == nil {
				d.ByCategory = map[FailureCategory]int{}
			}
			d.ByCategory[e.Category]++
			if e.Category.IsGate() {
				d.Gates++
			}
			if e.Category.IsNoFault() {
				d.NoFault++
			}
			d.F += w * p.FailureWeight(e.Category)
			if e.At.After(d.LastFailureAt) {
				d.LastFailureAt = e.At
			}
		}
		if e.Outcome == Success || !(e.Category.IsGate() || e.Category.IsNoFault()) {
			route = append(route, i)
		}
		if newest < 0 || newer(e, &items[newest]) {
			newest = i
		}
		if e.Verdict != "" && (judged < 0 || newer(e, &items[judged])) {
			judged = i
		}
	}
	d.Sessions = capSessions(sessions)
	newestFirst(items, route)
	for _, i := range route {
		if len(d.Recent) < MaxDigestRecent {
			d.Recent = append(d.Recent, items[i].Outcome)
		}
	}
	for _, i := range route {
		if items[i].Outcome != Failure {
			break
		}
		d.Streak++
	}
	if newest >= 0 {
		d.Newest = items[newest].At
		if e := items[newest]; e.Outcome == Failure && e.Category.IsGate() {
			d.OpenGate = e.Category
		}
	}
	if judged >= 0 {
		d.Judged = items[judged].At
		if items[judged].Verdict == Wrong {
			d.OpenWrong, d.OpenWrongRevision = items[judged].Trace, items[judged].Revision
		}
	}
	return d
}

func capSessions(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	slices.Sort(out)
	if len(out) > MaxDigestSessions {
		out = out[:MaxDigestSessions]
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// sumDigests adds (sign 1) and takes away (sign −1) digests, re-weighing
// each to a common Before (the latest of those added, or `before` when
// later). Counts never go below zero. Sessions are the union of those
// added; the newest end (recent, streak, gates, verdicts) is the one of the
// added digest with the newest run.
func sumDigests(before time.Time, halfLife float64, ds []*Digest, signs []int) *Digest {
	out := &Digest{Before: before.UTC(), HalfLifeDays: halfLife}
	for i, d := range ds {
		if d != nil && signs[i] > 0 && d.Before.After(out.Before) {
			out.Before = d.Before
		}
	}
	sessions := map[string]bool{}
	var head *Digest
	for i, d := range ds {
		if d == nil {
			continue
		}
		sg := signs[i]
		h := d.HalfLifeDays
		if h <= 0 {
			h = halfLife
		}
		scale := Decay(out.Before.Sub(d.Before), h)
		out.S += float64(sg) * d.S * scale
		out.F += float64(sg) * d.F * scale
		out.Traces += sg * d.Traces
		out.Successes += sg * d.Successes
		out.Failures += sg * d.Failures
		out.Gates += sg * d.Gates
		out.NoFault += sg * d.NoFault
		out.Confirmed += sg * d.Confirmed
		out.Lessons += sg * d.Lessons
		out.Steps += int64(sg) * d.Steps
		out.DurationMs += int64(sg) * d.DurationMs
		for c, n := range d.ByCategory {
			if out.ByCategory == nil {
				out.ByCategory = map[FailureCategory]int{}
			}
			out.ByCategory[c] += sg * n
		}
		for pt, c := range d.Patterns {
			if c == nil {
				continue
			}
			if out.Patterns == nil {
				out.Patterns = map[string]*Counts{}
			}
			pc := out.Patterns[pt]
			if pc == nil {
				pc = &Counts{}
				out.Patterns[pt] = pc
			}
			pc.OK += sg * c.OK
			pc.Fail += sg * c.Fail
		}
		if sg < 0 {
			continue
		}
		for _, s := range d.Sessions {
			sessions[s] = true
		}
		if head == nil || d.Newest.After(head.Newest) {
			head = d
		}
		if d.LastSuccessAt.After(out.LastSuccessAt) {
			out.LastSuccessAt = d.LastSuccessAt
		}
		if d.LastFailureAt.After(out.LastFailureAt) {
			out.LastFailureAt = d.LastFailureAt
		}
		if d.Judged.After(out.Judged) {
			out.Judged, out.OpenWrong, out.OpenWrongRevision = d.Judged, d.OpenWrong, d.OpenWrongRevision
		}
	}
	out.S, out.F = max(out.S, 0), max(out.F, 0)
	for _, p := range []*int{&out.Traces, &out.Successes, &out.Failures, &out.Gates, &out.NoFault, &out.Confirmed, &out.Lessons} {
		*p = max(*p, 0)
	}
	out.Steps, out.DurationMs = max(out.Steps, 0), max(out.DurationMs, 0)
	for c, n := range out.ByCategory {
		if n <= 0 {
			delete(out.ByCategory, c)
		}
	}
	for pt, c := range out.Patterns {
		c.OK, c.Fail = max(c.OK, 0), max(c.Fail, 0)
		if c.OK == 0 && c.Fail == 0 {
			delete(out.Patterns, pt)
		}
	}
	if len(out.ByCategory) == 0 {
		out.ByCategory = nil
	}
	if len(out.Patterns) == 0 {
		out.Patterns = nil
	}
	out.Sessions = capSessions(sessions)
	if head != nil {
		out.Recent = slices.Clone(head.Recent)
		out.Streak, out.Newest, out.OpenGate = head.Streak, head.Newest, head.OpenGate
	}
	if out.Traces == 0 {
		return nil
	}
	return out
}

// Clone returns a deep copy of d (nil for nil).
func (d *Digest) Clone() *Digest {
	if d == nil {
		return nil
	}
	c := *d
	c.Sessions = slices.Clone(d.Sessions)
	c.Recent = slices.Clone(d.Recent)
	if d.ByCategory != nil {
		c.ByCategory = make(map[FailureCategory]int, len(d.ByCategory))
		for k, v := range d.ByCategory {
			c.ByCategory[k] = v
		}
	}
	if d.Patterns != nil {
		c.Patterns = make(map[string]*Counts, len(d.Patterns))
		for k, p := range d.Patterns {
			if p != nil {
				cp := *p
				p = &cp
			}
			c.Patterns[k] = p
		}
	}
	return &c
}

// Holds reports whether a run that started at `at` falls in d's span: it
// may be one d already counts, so it is never folded again.
func (d *Digest) Holds(at time.Time) bool { return d != nil && at.Before(d.Before) }
