package engine

import (
	"slices"
	"sort"
	"strings"
	"time"
)

// Experience is the derived evidence of one (domain, intent): every folded
// outcome (kept after its trace expires) and per-pattern and per-selector
// counts. Only consolidation writes it; it is a pure function of the traces it
// folded, so two copies merge by union of Evidence.
type Experience struct {
	Format        int                       `yaml:"format" json:"format"`
	Domain        string                    `yaml:"domain" json:"domain"`
	Intent        string                    `yaml:"intent" json:"intent"`
	IntentKey     string                    `yaml:"intent_key" json:"intent_key"`
	TaskTypes     []string                  `yaml:"task_types,omitempty" json:"task_types,omitempty"`
	Attempts      int                       `yaml:"attempts" json:"attempts"`
	Successes     int                       `yaml:"successes" json:"successes"`
	Failures      int                       `yaml:"failures" json:"failures"`
	Lessons       int                       `yaml:"lessons,omitempty" json:"lessons,omitempty"` // saves with no steps: provenance, no evidence
	ByCategory    map[FailureCategory]int   `yaml:"by_category,omitempty" json:"by_category,omitempty"`
	Patterns      map[string]*Counts        `yaml:"patterns,omitempty" json:"patterns,omitempty"`
	Selectors     map[string]*SelectorStats `yaml:"selectors,omitempty" json:"selectors,omitempty"`
	AvgSteps      float64                   `yaml:"avg_steps" json:"avg_steps"`
	AvgDurationMs float64                   `yaml:"avg_duration_ms" json:"avg_duration_ms"`
	LastSuccessAt time.Time                 `yaml:"last_success_at,omitempty" json:"last_success_at,omitempty"`
	LastFailureAt time.Time                 `yaml:"last_failure_at,omitempty" json:"last_failure_at,omitempty"`
	Evidence      []Evidence                `yaml:"evidence" json:"evidence"`
	// Answers are the answers its successful runs read (answers.go): a
	// join of reads by trace id, from which a recall derives the cached
	// answer and its freshness.
	Answers []Observed `yaml:"answers,omitempty" json:"answers,omitempty"`
	// Digest holds the evidence compacted away as it decayed (see Digest);
	// the totals above count it too.
	Digest *Digest `yaml:"digest,omitempty" json:"digest,omitempty"`
}

// Counts are successes and failures.
type Counts struct {
	OK   int `yaml:"ok" json:"ok"`
	Fail int `yaml:"fail" json:"fail"`
}

// SelectorStats is one selector's own record.
type SelectorStats struct {
	OK       int       `yaml:"ok" json:"ok"`
	Fail     int       `yaml:"fail" json:"fail"`
	LastOK   time.Time `yaml:"last_ok,omitempty" json:"last_ok,omitempty"`
	LastFail time.Time `yaml:"last_fail,omitempty" json:"last_fail,omitempty"`
}

// Folded reports whether the trace id is already part of x.
func (x *Experience) Folded(id string) bool {
	for i := range x.Evidence {
		if x.Evidence[i].Trace == id {
			return true
		}
	}
	return false
}

// FoldedSet returns the trace ids folded into x.
func (x *Experience) FoldedSet() map[string]bool {
	m := make(map[string]bool, len(x.Evidence))
	for _, e := range x.Evidence {
		m[e.Trace] = true
	}
	return m
}

// Fold adds a trace to the experience. It is idempotent: a trace already
// folded changes nothing and Fold returns false.
func (x *Experience) Fold(t *Trace) bool {
	if x.Folded(t.ID) {
		return false
	}
	if x.Format == 0 {
		x.Format = Format
	}
	if x.Domain == "" {
		x.Domain, x.Intent, x.IntentKey = t.Domain, t.Intent, t.IntentKey
	}
	x.Evidence = insertEvidence(x.Evidence, EvidenceOf(t))
	x.Answers = FoldAnswer(x.Answers, t)
	if t.TaskType != "" && !contains(x.TaskTypes, t.TaskType) {
		x.TaskTypes = append(x.TaskTypes, t.TaskType)
		sort.Strings(x.TaskTypes)
	}
	if x.Selectors == nil {
		x.Selectors = map[string]*SelectorStats{}
	}
	for _, s := range t.Steps {
		if s.Selector == "" || s.Action == "navigate" {
			continue
		}
		st := x.Selectors[s.Selector]
		if st == nil {
			st = &SelectorStats{}
			x.Selectors[s.Selector] = st
		}
		if s.OK {
			st.OK++
			if t.StartedAt.After(st.LastOK) {
				st.LastOK = t.StartedAt.UTC()
			}
		} else {
			st.Fail++
			if t.StartedAt.After(st.LastFail) {
				st.LastFail = t.StartedAt.UTC()
			}
		}
	}
	x.Recount()
	return true
}

// Recount derives the totals from Evidence (and leaves Selectors, which only
// Fold and Merge move).
func (x *Experience) Recount() {
	x.Attempts, x.Successes, x.Failures, x.Lessons = 0, 0, 0, 0
	x.ByCategory = nil
	x.Patterns = nil
	x.LastSuccessAt, x.LastFailureAt = time.Time{}, time.Time{}
	var steps, dur float64
	for _, e := range x.Evidence {
		if !e.IsRun() {
			x.Lessons++
			continue
		}
		x.Attempts++
		steps += float64(e.Steps)
		dur += float64(e.DurationMs)
		if x.Patterns == nil {
			x.Patterns = map[string]*Counts{}
		}
		pc := x.Patterns[e.URLPattern]
		if pc == nil {
			pc = &Counts{}
			x.Patterns[e.URLPattern] = pc
		}
		if e.Outcome == Success {
			x.Successes++
			pc.OK++
			if e.At.After(x.LastSuccessAt) {
				x.LastSuccessAt = e.At
			}
		} else {
			x.Failures++
			pc.Fail++
			if x.ByCategory == nil {
				x.ByCategory = map[FailureCategory]int{}
			}
			x.ByCategory[e.Category]++
			if e.At.After(x.LastFailureAt) {
				x.LastFailureAt = e.At
			}
		}
	}
	if d := x.Digest; d != nil {
		x.Attempts += d.Successes + d.Failures
		x.Successes += d.Successes
		x.Failures += d.Failures
		x.Lessons += d.Lessons
		steps += float64(d.Steps)
		dur += float64(d.DurationMs)
		for c, n := range d.ByCategory {
			if x.ByCategory == nil {
				x.ByCategory = map[FailureCategory]int{}
			}
			x.ByCategory[c] += n
		}
		for pt, c := range d.Patterns {
			if c == nil {
				continue
			}
			if x.Patterns == nil {
				x.Patterns = map[string]*Counts{}
			}
			pc := x.Patterns[pt]
			if pc == nil {
				pc = &Counts{}
				x.Patterns[pt] = pc
			}
			pc.OK += c.OK
			pc.Fail += c.Fail
		}
		if d.LastSuccessAt.After(x.LastSuccessAt) {
			x.LastSuccessAt = d.LastSuccessAt
		}
		if d.LastFailureAt.After(x.LastFailureAt) {
			x.LastFailureAt = d.LastFailureAt
		}
	}
	if x.Attempts > 0 {
		x.AvgSteps = round2(steps / float64(x.Attempts))
		x.AvgDurationMs = round2(dur / float64(x.Attempts))
	}
}

// URLPatterns returns the patterns seen, most successful first.
func (x *Experience) URLPatterns() []string {
	ps := make([]string, 0, len(x.Patterns))
	for p := range x.Patterns {
		if p != "" {
			ps = append(ps, p)
		}
	}
	sort.Slice(ps, func(i, j int) bool {
		a, b := x.Patterns[ps[i]], x.Patterns[ps[j]]
		if a.OK != b.OK {
			return a.OK > b.OK
		}
		return ps[i] < ps[j]
	})
	return ps
}

// insertEvidence adds e to ev in stored order (time, then trace id) in one
// linear pass: a new run is usually the newest, so it is found from the end.
// Evidence out of order (a hand edit) is sorted whole.
func insertEvidence(ev []Evidence, e Evidence) []Evidence {
	if !slices.IsSortedFunc(ev, cmpEvidence) {
		ev = append(ev, e)
		sortEvidence(ev)
		return ev
	}
	i := len(ev)
	for i > 0 && cmpEvidence(ev[i-1], e) > 0 {
		i--
	}
	return slices.Insert(ev, i, e)
}

// cmpEvidence orders evidence as stored: by time, then trace id.
func cmpEvidence(a, b Evidence) int {
	if c := a.At.Compare(b.At); c != 0 {
		return c
	}
	return strings.Compare(a.Trace, b.Trace)
}

func sortEvidence(ev []Evidence) { slices.SortStableFunc(ev, cmpEvidence) }

func round2(f float64) float64 { return float64(int64(f*100+0.5)) / 100 }

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}
