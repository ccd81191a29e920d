package engine

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"
)

// This file holds the three-way merges behind `pem merge-driver`: what git
// calls for experience/ and facts/ files when two branches changed the same
// entry. They are pure: values in, values out. The rules are documented in
// docs/sharing.md; the short form:
//
//   - Experience: evidence is a three-way set merge by trace id (in practice a
//     union: every folded trace counted once, never the sum of both sides) and
//     the totals are recounted from it. Selector stats cannot be recomputed
//     from evidence, so they merge as ours + theirs − ancestor per field, which
//     is exact for disjoint additions since the common ancestor; a trace folded
//     on both sides after the ancestor is subtracted once more when its trace
//     file can still be read (MergeOptions.Trace).
//   - Facts: field by field. A verified side's frozen content wins over an
//     unverified one; of two different verified revisions one is kept
//     deterministically and the other is recorded in history; otherwise
//     selectors, hints, blockers, anti-patterns, answers and URL patterns are
//     merged as sets (an item the ancestor had and one side removed stays
//     removed). The status is the lower of the two (verified wins); the next
//     consolidation re-evaluates it from the merged evidence.

// MergeOptions are the impure inputs of a merge.
type MergeOptions struct {
	// Now stamps the history note written when two verified revisions meet;
	// nil means time.Now.
	Now func() time.Time
	// Trace returns the trace behind a piece of evidence, if its file can
	// still be read; nil or false means unknown. Used to avoid counting the
	// selector stats of a trace folded on both sides twice.
	Trace func(e Evidence) (*Trace, bool)
	// Policy weighs the evidence both sides compacted (see Digest); nil:
	// DefaultPolicy with the digests' half-life.
	Policy *Policy
}

func (o *MergeOptions) mergeNow() time.Time {
	if o != nil && o.Now != nil {
		return o.Now().UTC()
	}
	return time.Now().UTC()
}

// MergeExperience merges two sides of an experience file changed since their
// common ancestor base (nil when the file was added on both sides). ours and
// theirs are not modified. See the file comment for the rules.
func MergeExperience(base, ours, theirs *Experience, opt *MergeOptions) (*Experience, error) {
	if ours == nil || theirs == nil {
		return nil, fmt.Errorf("merge experience: both sides are needed")
	}
	if base == nil {
		base = &Experience{}
	}
	if ours.Domain != "" && theirs.Domain != "" && (ours.Domain != theirs.Domain || ours.IntentKey != theirs.IntentKey) {
		return nil, fmt.Errorf("merge experience: sides describe different entries (%s/%s and %s/%s)", ours.Domain, ours.IntentKey, theirs.Domain, theirs.IntentKey)
	}
	out := &Experience{
		Format:    max(ours.Format, theirs.Format),
		Domain:    mergeFirst(ours.Domain, theirs.Domain),
		Intent:    mergeFirst(ours.Intent, theirs.Intent),
		IntentKey: mergeFirst(ours.IntentKey, theirs.IntentKey),
		TaskTypes: mergeStringSet(base.TaskTypes, ours.TaskTypes, theirs.TaskTypes),
	}
	sort.Strings(out.TaskTypes)

	// Evidence: three-way set merge keyed by trace id.
	bIDs, oIDs, tIDs := base.FoldedSet(), ours.FoldedSet(), theirs.FoldedSet()
	seen := map[string]bool{}
	for _, side := range [][]Evidence{ours.Evidence, theirs.Evidence} {
		for _, e := range side {
			if seen[e.Trace] {
				continue
			}
			seen[e.Trace] = true
			if bIDs[e.Trace] && (!oIDs[e.Trace] || !tIDs[e.Trace]) {
				continue // the ancestor had it and one side dropped it
			}
			out.Evidence = append(out.Evidence, e)
		}
	}
	sort.SliceStable(out.Evidence, func(i, j int) bool {
		a, b := out.Evidence[i], out.Evidence[j]
		if !a.At.Equal(b.At) {
			return a.At.Before(b.At)
		}
		return a.Trace < b.Trace
	})
	out.Digest = mergeDigests(base, ours, theirs, oIDs, tIDs, opt)
	out.Recount()
	// Observed answers: a join of reads by trace id (base not needed).
	out.Answers = MergeObserved(ours.Answers, theirs.Answers)

	// Selector stats: ours + theirs − base per field, minus the traces both
	// sides folded after the ancestor (when they can be read), never below
	// what either side saw.
	overlap := map[string]*SelectorStats{}
	for _, e := range ours.Evidence {
		if !tIDs[e.Trace] || bIDs[e.Trace] || opt == nil || opt.Trace == nil {
			continue
		}
		t, ok := opt.Trace(e)
		if !ok || t == nil || t.ID != e.Trace {
			continue
		}
		one := &Experience{}
		one.Fold(t) // the engine's own rule for what a trace adds
		for name, st := range one.Selectors {
			acc := overlap[name]
			if acc == nil {
				acc = &SelectorStats{}
				overlap[name] = acc
			}
			acc.OK += st.OK
			acc.Fail += st.Fail
		}
	}
	names := map[string]bool{}
	for _, m := range []map[string]*SelectorStats{ours.Selectors, theirs.Selectors} {
		for n := range m {
			names[n] = true
		}
	}
	for n := range names {
		b, o, t, x := mergeStats(base.Selectors[n]), mergeStats(ours.Selectors[n]), mergeStats(theirs.Selectors[n]), mergeStats(overlap[n])
		st := &SelectorStats{
			OK:       mergeCount(b.OK, o.OK, t.OK, x.OK),
			Fail:     mergeCount(b.Fail, o.Fail, t.Fail, x.Fail),
			LastOK:   mergeLatest(o.LastOK, t.LastOK),
			LastFail: mergeLatest(o.LastFail, t.LastFail),
		}
		if out.Selectors == nil {
			out.Selectors = map[string]*SelectorStats{}
		}
		out.Selectors[n] = st
	}
	return out, nil
}

// mergeDigests merges the compacted evidence of two sides: ours + theirs −
// base, less what both sides compacted of the ancestor's items (counted
// once). Items one side compacted and the other still lists are dropped
// from the list by the three-way rule (the ancestor had them, one side
// dropped them), so nothing is lost or counted twice.
func mergeDigests(base, ours, theirs *Experience, oIDs, tIDs map[string]bool, opt *MergeOptions) *Digest {
	if base.Digest == nil && ours.Digest == nil && theirs.Digest == nil {
		return nil
	}
	p := DefaultPolicy()
	if opt != nil && opt.Policy != nil {
		p = *opt.Policy
	} else {
		for _, d := range []*Digest{ours.Digest, theirs.Digest, base.Digest} {
			if d != nil && d.HalfLifeDays > 0 {
				p.HalfLifeDays = d.HalfLifeDays
				break
			}
		}
	}
	var both []Evidence
	for _, e := range base.Evidence {
		if !oIDs[e.Trace] && !tIDs[e.Trace] && ours.Digest.Holds(e.At) && theirs.Digest.Holds(e.At) {
			both = append(both, e)
		}
	}
	var bothD *Digest
	if len(both) > 0 {
		bothD = digestOf(both, ours.Digest.Before, p)
	}
	var before time.Time
	for _, d := range []*Digest{ours.Digest, theirs.Digest} {
		if d != nil && d.Before.After(before) {
			before = d.Before
		}
	}
	return sumDigests(before, p.HalfLifeDays, []*Digest{ours.Digest, theirs.Digest, base.Digest, bothD}, []int{1, 1, -1, -1})
}

func mergeStats(s *SelectorStats) SelectorStats {
	if s == nil {
		return SelectorStats{}
	}
	return *s
}

// mergeCount is ours + theirs − base − overlap, kept within the bounds the
// two sides prove: at least the larger side, at most their sum.
func mergeCount(base, ours, theirs, overlap int) int {
	n := ours + theirs - base - overlap
	n = max(n, ours, theirs)
	return min(n, ours+theirs)
}

func mergeLatest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func mergeFirst(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// mergeStringSet is a three-way set merge keeping ours' order, then theirs'
// additions: an item of base that either side removed stays removed.
func mergeStringSet(base, ours, theirs []string) []string {
	inBase, inOurs, inTheirs := mergeSet(base), mergeSet(ours), mergeSet(theirs)
	var out []string
	seen := map[string]bool{}
	for _, side := range [][]string{ours, theirs} {
		for _, s := range side {
			if seen[s] {
				continue
			}
			seen[s] = true
			if inBase[s] && (!inOurs[s] || !inTheirs[s]) {
				continue
			}
			out = append(out, s)
		}
	}
	return out
}

func mergeSet(xs []string) map[string]bool {
	m := make(map[string]bool, len(xs))
	for _, x := range xs {
		m[x] = true
	}
	return m
}

// statusRank orders statuses for "the lower of the two". Contested ranks
// below candidate: it is a verified entry the evidence no longer supports.
var statusRank = map[Status]int{Hypothesis: 0, Contested: 1, Candidate: 2, Verified: 3}

// MergeFacts merges two sides of a facts file changed since their common
// ancestor base (nil when the file was added on both sides). ours and theirs
// are not modified. See the file comment for the rules.
func MergeFacts(base, ours, theirs *Facts, opt *MergeOptions) (*Facts, error) {
	if ours == nil || theirs == nil {
		return nil, fmt.Errorf("merge facts: both sides are needed")
	}
	if ours.Domain != "" && theirs.Domain != "" && (ours.Domain != theirs.Domain || ours.IntentKey != theirs.IntentKey) {
		return nil, fmt.Errorf("merge facts: sides describe different entries (%s/%s and %s/%s)", ours.Domain, ours.IntentKey, theirs.Domain, theirs.IntentKey)
	}
	if base == nil {
		base = &Facts{}
	}
	out := &Facts{
		Format:    max(ours.Format, theirs.Format),
		Domain:    mergeFirst(ours.Domain, theirs.Domain),
		Intent:    mergeFirst(ours.Intent, theirs.Intent),
		IntentKey: mergeFirst(ours.IntentKey, theirs.IntentKey),
	}
	oVer, tVer := ours.Status == Verified, theirs.Status == Verified
	var note *Transition
	switch {
	case oVer && tVer && ours.ContentHash() != theirs.ContentHash():
		keep, drop, why := mergePickVerified(ours, theirs)
		mergeCopyContent(out, keep)
		note = &Transition{From: Verified, To: Verified, At: opt.mergeNow(),
			Reason: fmt.Sprintf("merge: kept verified revision %s over verified revision %s (%s); the other revision is in git history", mergeRev(keep), mergeRev(drop), why)}
	case oVer:
		mergeCopyContent(out, ours)
	case tVer:
		mergeCopyContent(out, theirs)
	default:
		mergeContent(out, base, ours, theirs)
	}

	out.Status = mergeStatus(ours.Status, theirs.Status)
	out.Provenance = Provenance{
		Traces:       mergeSorted(ours.Provenance.Traces, theirs.Provenance.Traces),
		Sources:      mergeSorted(ours.Provenance.Sources, theirs.Provenance.Sources),
		FirstSeen:    mergeEarliest(ours.Provenance.FirstSeen, theirs.Provenance.FirstSeen),
		LastVerified: mergeLatest(ours.Provenance.LastVerified, theirs.Provenance.LastVerified),
	}
	out.History = mergeHistory(ours.History, theirs.History)
	if note != nil {
		out.History = append(out.History, *note)
	}
	return out, nil
}

// mergeStatus is the lower of the two, except that verified wins (its content
// was kept) and retired is final.
func mergeStatus(a, b Status) Status {
	switch {
	case a == Verified || b == Verified:
		return Verified
	case a == Retired || b == Retired:
		return Retired
	case a == "":
		return b
	case b == "":
		return a
	}
	ra, oka := statusRank[a]
	rb, okb := statusRank[b]
	if !oka {
		return b
	}
	if !okb || ra <= rb {
		return a
	}
	return b
}

// mergePickVerified chooses between two different verified revisions: the one
// that supersedes the other; else the one with more evidence; else the one
// verified first; else the lower revision hash. The order of the sides never
// matters.
func mergePickVerified(a, b *Facts) (keep, drop *Facts, why string) {
	ra, rb := mergeRev(a), mergeRev(b)
	switch {
	case a.Supersedes != "" && a.Supersedes == rb:
		return a, b, "it supersedes the other"
	case b.Supersedes != "" && b.Supersedes == ra:
		return b, a, "it supersedes the other"
	case len(a.Provenance.Traces) != len(b.Provenance.Traces):
		if len(a.Provenance.Traces) > len(b.Provenance.Traces) {
			return a, b, "more evidence"
		}
		return b, a, "more evidence"
	case !a.Provenance.LastVerified.Equal(b.Provenance.LastVerified) && !a.Provenance.LastVerified.IsZero() && !b.Provenance.LastVerified.IsZero():
		if a.Provenance.LastVerified.Before(b.Provenance.LastVerified) {
			return a, b, "verified earlier"
		}
		return b, a, "verified earlier"
	case ra <= rb:
		return a, b, "lower revision hash"
	default:
		return b, a, "lower revision hash"
	}
}

func mergeRev(f *Facts) string {
	if f.Revision != "" {
		return f.Revision
	}
	return f.ContentHash()
}

// mergeCopyContent takes every frozen field (and the revision naming them) from src.
func mergeCopyContent(dst, src *Facts) {
	dst.TaskType = src.TaskType
	dst.URLPatterns = append([]string(nil), src.URLPatterns...)
	dst.Revision = src.Revision
	dst.Supersedes = src.Supersedes
	if src.Selectors != nil {
		dst.Selectors = make(map[string]Selector, len(src.Selectors))
		for k, v := range src.Selectors {
			dst.Selectors[k] = v
		}
	}
	dst.Steps = append([]Step(nil), src.Steps...)
	dst.ExtractionQuery = src.ExtractionQuery
	dst.InteractionHints = append([]string(nil), src.InteractionHints...)
	dst.KnownBlockers = append([]Blocker(nil), src.KnownBlockers...)
	dst.AntiPatterns = append([]string(nil), src.AntiPatterns...)
	dst.Answers = append([]Answer(nil), src.Answers...)
	if src.SuccessCondition != nil {
		c := *src.SuccessCondition
		dst.SuccessCondition = &c
	}
	if len(dst.Steps) == 0 {
		dst.Steps = nil
	}
	mergeNilEmpty(dst)
}

// mergeContent merges the content of two unverified sides field by field.
func mergeContent(out, base, ours, theirs *Facts) {
	out.TaskType = merge3(base.TaskType, ours.TaskType, theirs.TaskType)
	out.URLPatterns = mergeStringSet(base.URLPatterns, ours.URLPatterns, theirs.URLPatterns)
	out.ExtractionQuery = merge3(base.ExtractionQuery, ours.ExtractionQuery, theirs.ExtractionQuery)
	out.Supersedes = merge3(base.Supersedes, ours.Supersedes, theirs.Supersedes)
	out.InteractionHints = mergeStringSet(base.InteractionHints, ours.InteractionHints, theirs.InteractionHints)
	out.AntiPatterns = mergeStringSet(base.AntiPatterns, ours.AntiPatterns, theirs.AntiPatterns)
	out.Steps = merge3(base.Steps, ours.Steps, theirs.Steps)
	out.SuccessCondition = merge3(base.SuccessCondition, ours.SuccessCondition, theirs.SuccessCondition)

	// Selectors by name, each a three-way value merge.
	names := map[string]bool{}
	for _, m := range []map[string]Selector{ours.Selectors, theirs.Selectors} {
		for n := range m {
			names[n] = true
		}
	}
	for n := range names {
		b, inB := base.Selectors[n]
		o, inO := ours.Selectors[n]
		t, inT := theirs.Selectors[n]
		if inB && (!inO || !inT) {
			// Removed on one side: stays removed unless the other side changed it.
			if inO && mergeJSON(o) != mergeJSON(b) {
				mergePutSelector(out, n, o)
			} else if inT && mergeJSON(t) != mergeJSON(b) {
				mergePutSelector(out, n, t)
			}
			continue
		}
		var v Selector
		switch {
		case !inO:
			v = t
		case !inT:
			v = o
		default:
			v = merge3(b, o, t)
		}
		mergePutSelector(out, n, v)
	}

	// Blockers keyed by (type, selector, action); a changed note wins.
	bKey := func(b Blocker) string { return b.Type + "\x00" + b.Selector + "\x00" + b.Action }
	out.KnownBlockers = mergeKeyed(base.KnownBlockers, ours.KnownBlockers, theirs.KnownBlockers, bKey)
	// Answers keyed by query; when both changed, the newer observation wins.
	out.Answers = mergeKeyed(base.Answers, ours.Answers, theirs.Answers, func(a Answer) string { return a.Query })
	for i, a := range out.Answers {
		o, t := mergeFind(ours.Answers, a.Query), mergeFind(theirs.Answers, a.Query)
		if o == nil || t == nil || o.ObservedAt.Equal(t.ObservedAt) {
			continue
		}
		b := mergeFind(base.Answers, a.Query)
		if b == nil || (mergeJSON(*o) != mergeJSON(*b) && mergeJSON(*t) != mergeJSON(*b)) {
			if t.ObservedAt.After(o.ObservedAt) {
				out.Answers[i] = *t
			} else {
				out.Answers[i] = *o
			}
		}
	}
	mergeNilEmpty(out)
	// The revision names the content: unchanged content keeps its name.
	switch h := out.ContentHash(); h {
	case ours.ContentHash():
		out.Revision = ours.Revision
	case theirs.ContentHash():
		out.Revision = theirs.Revision
	default:
		out.Revision = h
	}
}

func mergeFind(as []Answer, q string) *Answer {
	for i := range as {
		if as[i].Query == q {
			return &as[i]
		}
	}
	return nil
}

func mergePutSelector(f *Facts, name string, s Selector) {
	if f.Selectors == nil {
		f.Selectors = map[string]Selector{}
	}
	f.Selectors[name] = s
}

// merge3 is a three-way merge of one value: the side that changed wins; when
// both changed differently, the one with the smaller JSON encoding (an
// arbitrary but symmetric choice, so merge order never matters).
func merge3[T any](base, ours, theirs T) T {
	b, o, t := mergeJSON(base), mergeJSON(ours), mergeJSON(theirs)
	switch {
	case o == t || t == b:
		return ours
	case o == b:
		return theirs
	case o <= t:
		return ours
	default:
		return theirs
	}
}

// mergeKeyed is a three-way merge of a list of items with a key: items are
// kept in ours' order then theirs' additions; an item of base removed on one
// side stays removed unless the other side changed it; an item on both sides
// merges with merge3.
func mergeKeyed[T any](base, ours, theirs []T, key func(T) string) []T {
	index := func(xs []T) map[string]T {
		m := make(map[string]T, len(xs))
		for _, x := range xs {
			if _, dup := m[key(x)]; !dup {
				m[key(x)] = x
			}
		}
		return m
	}
	bm, om, tm := index(base), index(ours), index(theirs)
	var out []T
	seen := map[string]bool{}
	for _, side := range [][]T{ours, theirs} {
		for _, x := range side {
			k := key(x)
			if seen[k] {
				continue
			}
			seen[k] = true
			b, inB := bm[k]
			o, inO := om[k]
			t, inT := tm[k]
			switch {
			case inB && !inO:
				if mergeJSON(t) != mergeJSON(b) {
					out = append(out, t)
				}
			case inB && !inT:
				if mergeJSON(o) != mergeJSON(b) {
					out = append(out, o)
				}
			case inO && inT:
				out = append(out, merge3(b, o, t))
			case inO:
				out = append(out, o)
			default:
				out = append(out, t)
			}
		}
	}
	return out
}

func mergeJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func mergeSorted(a, b []string) []string {
	out := mergeStringSet(nil, a, b)
	sort.Strings(out)
	return out
}

func mergeEarliest(a, b time.Time) time.Time {
	switch {
	case a.IsZero():
		return b
	case b.IsZero() || a.Before(b):
		return a
	default:
		return b
	}
}

// mergeHistory is the union of both histories in time order.
func mergeHistory(a, b []Transition) []Transition {
	var out []Transition
	seen := map[string]bool{}
	for _, side := range [][]Transition{a, b} {
		for _, t := range side {
			k := mergeJSON(t)
			if !seen[k] {
				seen[k] = true
				out = append(out, t)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out
}

// mergeNilEmpty normalizes empty collections to nil so that a merge of equal
// sides encodes exactly like the sides.
func mergeNilEmpty(f *Facts) {
	if len(f.URLPatterns) == 0 {
		f.URLPatterns = nil
	}
	if len(f.Selectors) == 0 {
		f.Selectors = nil
	}
	if len(f.Steps) == 0 {
		f.Steps = nil
	}
	if len(f.InteractionHints) == 0 {
		f.InteractionHints = nil
	}
	if len(f.KnownBlockers) == 0 {
		f.KnownBlockers = nil
	}
	if len(f.AntiPatterns) == 0 {
		f.AntiPatterns = nil
	}
	if len(f.Answers) == 0 {
		f.Answers = nil
	}
}
