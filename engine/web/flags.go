package web

import (
	"fmt"
	"slices"
	"strings"

	"github.com/pemdev/pem/engine"
)

// flag is a reason to look at an entry first.
type flag struct {
	Name string // contested, drifting, pattern-mismatch, judged-wrong, failing
	Why  string
}

// flagWeight orders the entries on the index: the sum of their flags'
// weights, most serious flag heaviest.
var flagWeight = map[string]int{"contested": 16, "drifting": 8, "pattern-mismatch": 4, "judged-wrong": 2, "failing": 1}

func weight(fs []flag) int {
	n := 0
	for _, f := range fs {
		n += flagWeight[f.Name]
	}
	return n
}

// recentRuns is how many of an entry's newest runs the flags look at.
const recentRuns = 5

// flagsOf says what makes an entry worth a look, most serious first:
// contested; drifting (a recent run failed on a selector or the page's
// look); pattern-mismatch (a recent run was on a page type its facts do not
// cover, or the recall says so); judged wrong (an open wrong verdict); and
// recently failing (its newest run failed, by the route's fault).
func flagsOf(v *engine.EntryView) []flag {
	var out []flag
	r := v.Recall
	if r != nil && r.Status == engine.Contested {
		out = append(out, flag{"contested", "recent runs failed with this knowledge"})
	}
	var runs []engine.Evidence
	for _, ev := range v.Evidence {
		if ev.IsRun() {
			runs = append(runs, ev)
		}
	}
	recent := runs[max(0, len(runs)-recentRuns):]
	for _, ev := range slices.Backward(recent) {
		if ev.Outcome == engine.Failure && (ev.Category == engine.SelectorDrift || ev.Category == engine.VisualDrift) {
			out = append(out, flag{"drifting", fmt.Sprintf("run %s failed with %s", ev.Trace, ev.Category)})
			break
		}
	}
	mismatch := ""
	if r != nil {
		for _, w := range r.Warnings {
			if strings.HasPrefix(w, "pattern_mismatch") {
				mismatch = w
			}
		}
	}
	if f := v.Facts; mismatch == "" && f != nil && len(f.URLPatterns) > 0 {
		for _, ev := range slices.Backward(recent) {
			if ev.URLPattern != "" && !slices.Contains(f.URLPatterns, ev.URLPattern) {
				mismatch = fmt.Sprintf("run %s was on %s, which the facts' patterns (%s) do not cover", ev.Trace, ev.URLPattern, strings.Join(f.URLPatterns, " "))
				break
			}
		}
	}
	if mismatch != "" {
		out = append(out, flag{"pattern-mismatch", mismatch})
	}
	if r != nil {
		for _, w := range r.Warnings {
			if strings.HasPrefix(w, "judged_wrong") {
				out = append(out, flag{"judged-wrong", w})
			}
		}
	}
	for _, ev := range slices.Backward(runs) {
		if ev.Category.IsNoFault() {
			continue // not the site's fault
		}
		if ev.Outcome == engine.Failure {
			why := "the newest run failed"
			if ev.Category != "" {
				why += " (" + string(ev.Category) + ")"
			}
			out = append(out, flag{"failing", why})
		}
		break
	}
	return out
}
