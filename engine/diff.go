package engine

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strings"
)

// This file is `pem diff`: what moved in the knowledge between two versions of
// the tree, per (domain, intent), as text for a terminal and as Markdown for a
// pull request body. It is pure: the caller reads both versions (from git
// trees) and passes the decoded records.

// EntryDiff is what moved in one (domain, intent) between two versions.
type EntryDiff struct {
	Domain    string `json:"domain"`
	IntentKey string `json:"intent_key"`
	Intent    string `json:"intent,omitempty"`

	Added   bool `json:"added,omitempty"`   // the facts entry is new
	Removed bool `json:"removed,omitempty"` // the facts entry went away

	StatusFrom   Status `json:"status_from,omitempty"`
	StatusTo     Status `json:"status_to,omitempty"`
	RevisionFrom string `json:"revision_from,omitempty"`
	RevisionTo   string `json:"revision_to,omitempty"`

	URLPatternsAdded    []string `json:"url_patterns_added,omitempty"`
	URLPatternsRemoved  []string `json:"url_patterns_removed,omitempty"`
	SelectorsAdded      []string `json:"selectors_added,omitempty"` // "name: primary"
	SelectorsRemoved    []string `json:"selectors_removed,omitempty"`
	SelectorsChanged    []string `json:"selectors_changed,omitempty"` // "name: old → new"
	RouteFrom           []string `json:"route_from,omitempty"`        // set only when the route changed
	RouteTo             []string `json:"route_to,omitempty"`
	ExtractionFrom      string   `json:"extraction_from,omitempty"` // set only when it changed
	ExtractionTo        string   `json:"extraction_to,omitempty"`
	HintsAdded          []string `json:"hints_added,omitempty"`
	HintsRemoved        []string `json:"hints_removed,omitempty"`
	BlockersAdded       []string `json:"blockers_added,omitempty"`
	BlockersRemoved     []string `json:"blockers_removed,omitempty"`
	AntiPatternsAdded   []string `json:"anti_patterns_added,omitempty"`
	AntiPatternsRemoved []string `json:"anti_patterns_removed,omitempty"`
	AnswersAdded        []string `json:"answers_added,omitempty"` // "query = value"
	AnswersRemoved      []string `json:"answers_removed,omitempty"`
	AnswersChanged      []string `json:"answers_changed,omitempty"` // "query: old → new"

	// Evidence counts from experience/, before and after.
	AttemptsFrom  int `json:"attempts_from"`
	AttemptsTo    int `json:"attempts_to"`
	SuccessesFrom int `json:"successes_from"`
	SuccessesTo   int `json:"successes_to"`
	FailuresFrom  int `json:"failures_from"`
	FailuresTo    int `json:"failures_to"`
}

// DiffEntry compares two versions of one entry. Any of the records may be nil
// (absent in that version).
func DiffEntry(oldF, newF *Facts, oldX, newX *Experience) EntryDiff {
	var d EntryDiff
	for _, f := range []*Facts{newF, oldF} {
		if f != nil && d.Domain == "" {
			d.Domain, d.IntentKey, d.Intent = f.Domain, f.IntentKey, f.Intent
		}
	}
	for _, x := range []*Experience{newX, oldX} {
		if x != nil && d.Domain == "" {
			d.Domain, d.IntentKey, d.Intent = x.Domain, x.IntentKey, x.Intent
		}
	}
	if oldX != nil {
		d.AttemptsFrom, d.SuccessesFrom, d.FailuresFrom = oldX.Attempts, oldX.Successes, oldX.Failures
	}
	if newX != nil {
		d.AttemptsTo, d.SuccessesTo, d.FailuresTo = newX.Attempts, newX.Successes, newX.Failures
	}
	d.Added = oldF == nil && newF != nil
	d.Removed = oldF != nil && newF == nil
	o, n := oldF, newF
	if o == nil {
		o = &Facts{}
	}
	if n == nil {
		n = &Facts{}
	}
	if o.Status != n.Status {
		d.StatusFrom, d.StatusTo = o.Status, n.Status
	}
	if diffRev(o) != diffRev(n) {
		d.RevisionFrom, d.RevisionTo = o.Revision, n.Revision
	}
	d.URLPatternsAdded, d.URLPatternsRemoved = diffStrings(o.URLPatterns, n.URLPatterns)
	for _, name := range diffSortedKeys(n.Selectors) {
		s := n.Selectors[name]
		old, ok := o.Selectors[name]
		switch {
		case !ok:
			d.SelectorsAdded = append(d.SelectorsAdded, name+": "+diffSelector(s))
		case mergeJSON(old) != mergeJSON(s):
			d.SelectorsChanged = append(d.SelectorsChanged, name+": "+diffSelector(old)+" → "+diffSelector(s))
		}
	}
	for _, name := range diffSortedKeys(o.Selectors) {
		if _, ok := n.Selectors[name]; !ok {
			d.SelectorsRemoved = append(d.SelectorsRemoved, name+": "+diffSelector(o.Selectors[name]))
		}
	}
	if from, to := diffRoute(o.Steps), diffRoute(n.Steps); strings.Join(from, "\x00") != strings.Join(to, "\x00") {
		d.RouteFrom, d.RouteTo = from, to
		if d.RouteFrom == nil {
			d.RouteFrom = []string{}
		}
		if d.RouteTo == nil {
			d.RouteTo = []string{}
		}
	}
	if o.ExtractionQuery != n.ExtractionQuery {
		d.ExtractionFrom, d.ExtractionTo = o.ExtractionQuery, n.ExtractionQuery
	}
	d.HintsAdded, d.HintsRemoved = diffStrings(o.InteractionHints, n.InteractionHints)
	d.AntiPatternsAdded, d.AntiPatternsRemoved = diffStrings(o.AntiPatterns, n.AntiPatterns)
	d.BlockersAdded, d.BlockersRemoved = diffStrings(diffBlockers(o.KnownBlockers), diffBlockers(n.KnownBlockers))
	oa, na := map[string]Answer{}, map[string]Answer{}
	for _, a := range o.Answers {
		oa[a.Query] = a
	}
	for _, a := range n.Answers {
		na[a.Query] = a
		old, ok := oa[a.Query]
		switch {
		case !ok:
			d.AnswersAdded = append(d.AnswersAdded, diffAnswer(a))
		case old.Value != a.Value || old.Freshness != a.Freshness:
			d.AnswersChanged = append(d.AnswersChanged, fmt.Sprintf("%s: %s → %s", a.Query, diffAnswerValue(old), diffAnswerValue(a)))
		}
	}
	for _, a := range o.Answers {
		if _, ok := na[a.Query]; !ok {
			d.AnswersRemoved = append(d.AnswersRemoved, diffAnswer(a))
		}
	}
	return d
}

func diffRev(f *Facts) string {
	if f.Revision != "" {
		return f.Revision
	}
	if f.Domain == "" && f.Status == "" {
		return ""
	}
	return f.ContentHash()
}

// Empty reports whether nothing moved.
func (d EntryDiff) Empty() bool { return len(diffLines(d)) == 0 }

// TraceDelta counts the traces of one domain that appeared (runs recorded),
// went away (expired after they were folded), and left the branch for
// refs/pem/state (moved: a consolidation folded a trace a trace-only pull
// request merged, or moved an old-style tree; the trace is kept) between two
// versions.
type TraceDelta struct {
	Domain  string `json:"domain"`
	Added   int    `json:"added"`
	Removed int    `json:"removed"`
	Moved   int    `json:"moved,omitempty"`
}

// StateRefName is the ref traces and experience live on (gitrepo.StateRef),
// as reports name it.
const StateRefName = "refs/pem/state"

// DiffReport is the whole of `pem diff`.
type DiffReport struct {
	From    string       `json:"from"` // labels of the two versions (short hashes)
	To      string       `json:"to"`
	Entries []EntryDiff  `json:"entries"`
	Traces  []TraceDelta `json:"traces"`
	// MovedExperience counts the experience files the branch stopped
	// tracking because they moved to refs/pem/state (kept there, not lost).
	MovedExperience int      `json:"moved_experience,omitempty"`
	Problems        []string `json:"problems,omitempty"` // files that could not be read, with why
}

// Sort orders entries and trace counts by domain and intent key.
func (r *DiffReport) Sort() {
	sort.Slice(r.Entries, func(i, j int) bool {
		a, b := r.Entries[i], r.Entries[j]
		if a.Domain != b.Domain {
			return a.Domain < b.Domain
		}
		return a.IntentKey < b.IntentKey
	})
	sort.Slice(r.Traces, func(i, j int) bool { return r.Traces[i].Domain < r.Traces[j].Domain })
	sort.Strings(r.Problems)
}

func (r *DiffReport) traceTotals() (added, removed, moved int) {
	for _, t := range r.Traces {
		added += t.Added
		removed += t.Removed
		moved += t.Moved
	}
	return
}

// WriteText writes the report for a terminal.
func (r *DiffReport) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	added, removed, moved := r.traceTotals()
	fmt.Fprintf(bw, "pem diff %s..%s: %d entr%s changed, %d new trace(s), %d expired",
		r.From, r.To, len(r.Entries), diffPlural(len(r.Entries), "y", "ies"), added, removed)
	if moved > 0 || r.MovedExperience > 0 {
		fmt.Fprintf(bw, ", moved to %s: %d trace(s), %d experience file(s)", StateRefName, moved, r.MovedExperience)
	}
	bw.WriteString("\n")
	for _, e := range r.Entries {
		fmt.Fprintf(bw, "\n%s/%s", e.Domain, e.IntentKey)
		if e.Intent != "" && e.Intent != e.IntentKey {
			fmt.Fprintf(bw, " (%s)", diffOneLine(e.Intent))
		}
		bw.WriteString("\n")
		for _, l := range diffLines(e) {
			fmt.Fprintf(bw, "  %s\n", l.text(false))
		}
	}
	if len(r.Traces) > 0 {
		bw.WriteString("\ntraces:\n")
		for _, t := range r.Traces {
			fmt.Fprintf(bw, "  %s: +%d -%d", t.Domain, t.Added, t.Removed)
			if t.Moved > 0 {
				fmt.Fprintf(bw, ", %d moved to %s", t.Moved, StateRefName)
			}
			bw.WriteString("\n")
		}
	}
	for _, p := range r.Problems {
		fmt.Fprintf(bw, "warning: %s\n", diffOneLine(p))
	}
	return bw.Flush()
}

// WriteMarkdown writes the report as a pull request body. Every stored string
// is rendered inside a code span, so text that came from a page cannot format,
// link or mention anything.
func (r *DiffReport) WriteMarkdown(w io.Writer) error {
	bw := bufio.NewWriter(w)
	added, removed, moved := r.traceTotals()
	fmt.Fprintf(bw, "## pem: knowledge changes %s..%s\n\n", diffCode(r.From), diffCode(r.To))
	fmt.Fprintf(bw, "%d entr%s changed · %d new trace(s) · %d expired trace(s)",
		len(r.Entries), diffPlural(len(r.Entries), "y", "ies"), added, removed)
	if moved > 0 || r.MovedExperience > 0 {
		// Not lost: off the branch, on the state ref (docs/scale.md).
		fmt.Fprintf(bw, " · moved to `%s` (kept, off the branch): %d trace(s), %d experience file(s)", StateRefName, moved, r.MovedExperience)
	}
	bw.WriteString("\n")
	for _, e := range r.Entries {
		fmt.Fprintf(bw, "\n### %s / %s\n\n", diffCode(e.Domain), diffCode(e.IntentKey))
		if e.Intent != "" && e.Intent != e.IntentKey {
			fmt.Fprintf(bw, "Intent: %s\n\n", diffCode(e.Intent))
		}
		for _, l := range diffLines(e) {
			fmt.Fprintf(bw, "- %s\n", l.text(true))
		}
	}
	if len(r.Traces) > 0 {
		if moved > 0 {
			bw.WriteString("\n### Traces\n\n| domain | new | expired | moved to `" + StateRefName + "` |\n| --- | ---: | ---: | ---: |\n")
		} else {
			bw.WriteString("\n### Traces\n\n| domain | new | expired |\n| --- | ---: | ---: |\n")
		}
		for _, t := range r.Traces {
			// A pipe would split a table cell even inside a code span.
			fmt.Fprintf(bw, "| %s | %d | %d |", strings.ReplaceAll(diffCode(t.Domain), "|", "\\|"), t.Added, t.Removed)
			if moved > 0 {
				fmt.Fprintf(bw, " %d |", t.Moved)
			}
			bw.WriteString("\n")
		}
	}
	if len(r.Problems) > 0 {
		bw.WriteString("\n### Warnings\n\n")
		for _, p := range r.Problems {
			fmt.Fprintf(bw, "- %s\n", diffCode(p))
		}
	}
	bw.WriteString("\n<sub>Generated by `pem diff --format markdown`. Verified entries are frozen: review content changes to them as new revisions.</sub>\n")
	return bw.Flush()
}

// diffLine is one rendered fact: a label and values (stored strings).
type diffLine struct {
	label  string
	values []string
	arrow  bool // values[0] → values[1]
	plain  string
}

func (l diffLine) text(md bool) string {
	q := func(s string) string {
		if md {
			return diffCode(s)
		}
		return diffOneLine(s)
	}
	if l.plain != "" {
		if md {
			return strings.ReplaceAll(l.plain, "*", "\\*")
		}
		return l.plain
	}
	if l.arrow {
		return l.label + ": " + q(l.values[0]) + " → " + q(l.values[1])
	}
	parts := make([]string, len(l.values))
	for i, v := range l.values {
		parts[i] = q(v)
	}
	return l.label + ": " + strings.Join(parts, ", ")
}

func diffLines(e EntryDiff) []diffLine {
	var out []diffLine
	switch {
	case e.Added:
		out = append(out, diffLine{plain: "new entry"})
	case e.Removed:
		out = append(out, diffLine{plain: "entry removed"})
	}
	if e.StatusFrom != e.StatusTo {
		from, to := string(e.StatusFrom), string(e.StatusTo)
		if from == "" {
			from = "none"
		}
		if to == "" {
			to = "none"
		}
		out = append(out, diffLine{label: "status", values: []string{from, to}, arrow: true})
	}
	if e.RevisionFrom != e.RevisionTo {
		out = append(out, diffLine{label: "revision", values: []string{diffNone(e.RevisionFrom), diffNone(e.RevisionTo)}, arrow: true})
	}
	if e.AttemptsFrom != e.AttemptsTo || e.SuccessesFrom != e.SuccessesTo || e.FailuresFrom != e.FailuresTo {
		out = append(out, diffLine{plain: fmt.Sprintf("evidence: %d → %d runs (successes %d → %d, failures %d → %d)",
			e.AttemptsFrom, e.AttemptsTo, e.SuccessesFrom, e.SuccessesTo, e.FailuresFrom, e.FailuresTo)})
	}
	add := func(label string, vs []string) {
		if len(vs) > 0 {
			out = append(out, diffLine{label: label, values: vs})
		}
	}
	add("url patterns added", e.URLPatternsAdded)
	add("url patterns removed", e.URLPatternsRemoved)
	add("selectors added", e.SelectorsAdded)
	add("selectors removed", e.SelectorsRemoved)
	add("selectors changed", e.SelectorsChanged)
	if e.RouteFrom != nil || e.RouteTo != nil {
		out = append(out, diffLine{label: "route", values: []string{diffNone(strings.Join(e.RouteFrom, " › ")), diffNone(strings.Join(e.RouteTo, " › "))}, arrow: true})
	}
	if e.ExtractionFrom != e.ExtractionTo {
		out = append(out, diffLine{label: "extraction query", values: []string{diffNone(e.ExtractionFrom), diffNone(e.ExtractionTo)}, arrow: true})
	}
	add("hints added", e.HintsAdded)
	add("hints removed", e.HintsRemoved)
	add("blockers added", e.BlockersAdded)
	add("blockers removed", e.BlockersRemoved)
	add("anti-patterns added", e.AntiPatternsAdded)
	add("anti-patterns removed", e.AntiPatternsRemoved)
	add("answers added", e.AnswersAdded)
	add("answers removed", e.AnswersRemoved)
	add("answers changed", e.AnswersChanged)
	return out
}

func diffNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func diffPlural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// diffOneLine keeps a stored string on one line, bounded.
func diffOneLine(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r == '\t' || r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if r := []rune(s); len(r) > 200 {
		s = string(r[:199]) + "…"
	}
	return s
}

// diffCode renders s as a Markdown code span that s cannot close.
func diffCode(s string) string {
	s = diffOneLine(s)
	if s == "" {
		return "` `"
	}
	fence := "`"
	for strings.Contains(s, fence) {
		fence += "`"
	}
	pad := ""
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") || strings.HasPrefix(s, " ") {
		pad = " "
	}
	return fence + pad + s + pad + fence
}

func diffStrings(old, new []string) (added, removed []string) {
	o, n := mergeSet(old), mergeSet(new)
	for _, s := range new {
		if !o[s] {
			added = append(added, s)
			o[s] = true
		}
	}
	for _, s := range old {
		if !n[s] {
			removed = append(removed, s)
			n[s] = true
		}
	}
	return
}

func diffSortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func diffSelector(s Selector) string {
	if len(s.Fallbacks) == 0 {
		return s.Primary
	}
	return s.Primary + " (fallbacks " + strings.Join(s.Fallbacks, ", ") + ")"
}

func diffRoute(steps []Step) []string {
	var out []string
	for _, s := range steps {
		t := s.Action
		switch {
		case s.Selector != "":
			t += " " + s.Selector
		case s.URL != "":
			t += " " + s.URL
		}
		if s.Param != "" {
			t += " {" + s.Param + "}"
		}
		out = append(out, t)
	}
	return out
}

func diffBlockers(bs []Blocker) []string {
	var out []string
	for _, b := range bs {
		t := b.Type
		if b.Selector != "" {
			t += " " + b.Selector
		}
		if b.Action != "" {
			t += " → " + b.Action
		}
		if b.Note != "" {
			t += " (" + b.Note + ")"
		}
		out = append(out, t)
	}
	return out
}

func diffAnswer(a Answer) string { return a.Query + " = " + diffAnswerValue(a) }

func diffAnswerValue(a Answer) string {
	if a.Freshness != "" {
		return a.Value + " [" + string(a.Freshness) + "]"
	}
	return a.Value
}
