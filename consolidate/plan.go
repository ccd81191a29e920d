package consolidate

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/pemdev/pem/engine"
)

// Key names one (domain, intent) entry.
type Key struct {
	Domain    string
	IntentKey string
}

func (k Key) String() string { return k.Domain + "/" + k.IntentKey }

// Input is everything a plan is made from. Load fills it from a store; tests
// build it by hand.
type Input struct {
	Policy      engine.Policy
	Experience  map[Key]*engine.Experience // existing entries
	Facts       map[Key]*engine.Facts      // existing entries
	Traces      []*engine.Trace            // traces to fold (those no experience has folded yet)
	Refs        []engine.TraceRef          // every trace in the tree, for expiry
	Folded      map[string]Key             // every folded trace id, also of entries not loaded (nil: from Experience)
	Verdicts    []*engine.Verdict          // every verdict in the tree; those not folded yet are folded
	Sites       map[string]*engine.Site    // the site entries of the domains with traces to fold (absent: none yet)
	BrokenSites map[string]string          // domains whose site entry could not be read: left alone
	Broken      map[Key]string             // entries whose files could not be read: left alone
	Warnings    []string                   // what the loader could not read
}

// Kind is what a change does.
type Kind string

const (
	KindFold    Kind = "fold"    // a trace's outcome joins an entry's experience
	KindJudge   Kind = "judge"   // a verdict is folded into a run's evidence
	KindSkip    Kind = "skip"    // a trace is left alone (already folded, unusable)
	KindCreate  Kind = "create"  // a new facts entry
	KindUpdate  Kind = "update"  // a facts entry's content follows new evidence
	KindStatus  Kind = "status"  // hypothesis ↔ candidate
	KindVerify  Kind = "verify"  // promotion to verified (its own commit)
	KindContest Kind = "contest" // verified → contested
	KindExpire  Kind = "expire"  // a folded trace older than ttl_days is deleted
	KindSite    Kind = "site"    // a domain's site entry learns from the new runs
	// KindQuarantine: a trace the injection screen flags (engine.Injection)
	// is not folded: no evidence, never the route; it expires like any other.
	KindQuarantine Kind = "quarantine"
	// KindCompact: evidence whose weight decayed below compact_below_weight
	// moves into the entry's digest (engine.Digest): counts, no items.
	KindCompact Kind = "compact"
)

// Change is one decision of a plan, with its reason.
type Change struct {
	Kind     Kind
	Key      Key
	Trace    string        // fold, skip, expire
	From, To engine.Status // status, verify, contest
	Revision string        // create, update, verify, contest
	Reason   string
}

func (c Change) String() string {
	switch c.Kind {
	case KindFold:
		return fmt.Sprintf("fold trace %s into %s: %s", c.Trace, c.Key, c.Reason)
	case KindJudge:
		return fmt.Sprintf("judge trace %s in %s: %s", c.Trace, c.Key, c.Reason)
	case KindSkip:
		return fmt.Sprintf("skip trace %s: %s", c.Trace, c.Reason)
	case KindCreate:
		return fmt.Sprintf("create facts %s r%s: %s", c.Key, c.Revision, c.Reason)
	case KindUpdate:
		return fmt.Sprintf("update facts %s r%s: %s", c.Key, c.Revision, c.Reason)
	case KindStatus:
		return fmt.Sprintf("status %s %s → %s: %s", c.Key, c.From, c.To, c.Reason)
	case KindVerify:
		return fmt.Sprintf("verify %s r%s (%s → verified): %s", c.Key, c.Revision, c.From, c.Reason)
	case KindContest:
		return fmt.Sprintf("contest %s r%s: %s", c.Key, c.Revision, c.Reason)
	case KindExpire:
		return fmt.Sprintf("expire trace %s (%s): %s", c.Trace, c.Key.Domain, c.Reason)
	case KindQuarantine:
		return fmt.Sprintf("quarantine trace %s of %s: %s", c.Trace, c.Key, c.Reason)
	case KindSite:
		return fmt.Sprintf("site %s: %s", c.Key.Domain, c.Reason)
	case KindCompact:
		return fmt.Sprintf("compact %s: %s", c.Key, c.Reason)
	}
	return fmt.Sprintf("%s %s: %s", c.Kind, c.Key, c.Reason)
}

// Entry is what a plan writes for one (domain, intent).
type Entry struct {
	Key        Key
	Experience *engine.Experience // to write; nil: unchanged
	Facts      *engine.Facts      // to write; nil: unchanged
	Folded     []engine.TraceRef  // traces folded into it by this plan
	FoldedOK   int                // of them, the successes (counted before any compaction)
	Verdicts   []string           // paths of the verdict files folded into it by this plan (committed with it)
	Score      engine.Score       // at the plan's time, over all its evidence
	Verified   bool               // promoted to verified: committed on its own
	Reason     string             // why it was verified

	baseEvidence int           // evidence count the plan started from
	baseFacts    *engine.Facts // the facts the plan started from (nil: none)
}

// Changeset is the plan of one consolidation, what Plan returns: every
// change in order (folds, then per entry facts and status changes, then
// expiries) and what to write.
type Changeset struct {
	Now      time.Time
	Changes  []Change
	Entries  []*Entry          // entries with something to write, sorted by key
	Sites    []*engine.Site    // site entries to write, sorted by domain
	Expire   []engine.TraceRef // traces to delete
	Warnings []string
}

// Empty reports whether the plan writes nothing.
func (p *Changeset) Empty() bool {
	return len(p.Entries) == 0 && len(p.Expire) == 0 && len(p.Sites) == 0
}

// Count returns how many changes of kind k the plan holds.
func (p *Changeset) Count(k Kind) int {
	n := 0
	for _, c := range p.Changes {
		if c.Kind == k {
			n++
		}
	}
	return n
}

// String is the plan as text: one line per change, then the summary.
func (p *Changeset) String() string {
	var b strings.Builder
	for _, c := range p.Changes {
		b.WriteString(c.String())
		b.WriteByte('\n')
	}
	for _, w := range p.Warnings {
		b.WriteString("warning: " + w + "\n")
	}
	b.WriteString(p.Summary())
	b.WriteByte('\n')
	return b.String()
}

// Summary is one line saying what the plan does.
func (p *Changeset) Summary() string {
	if p.Empty() {
		return "nothing to consolidate"
	}
	var parts []string
	if n := p.Count(KindFold); n > 0 {
		parts = append(parts, fmt.Sprintf("folded %d %s into %d %s", n, plural(n, "trace", "traces"), p.foldedEntries(), plural(p.foldedEntries(), "entry", "entries")))
	}
	if n := p.Count(KindJudge); n > 0 {
		parts = append(parts, fmt.Sprintf("folded %d %s", n, plural(n, "verdict", "verdicts")))
	}
	if n := p.Count(KindCreate); n > 0 {
		parts = append(parts, fmt.Sprintf("created %d facts", n))
	}
	if n := p.Count(KindUpdate); n > 0 {
		parts = append(parts, fmt.Sprintf("updated %d facts", n))
	}
	if n := p.Count(KindVerify); n > 0 {
		parts = append(parts, fmt.Sprintf("verified %d", n))
	}
	if n := p.Count(KindContest); n > 0 {
		parts = append(parts, fmt.Sprintf("contested %d", n))
	}
	if n := p.Count(KindStatus); n > 0 {
		parts = append(parts, fmt.Sprintf("%d other status %s", n, plural(n, "change", "changes")))
	}
	if n := len(p.Sites); n > 0 {
		parts = append(parts, fmt.Sprintf("updated %d site %s", n, plural(n, "entry", "entries")))
	}
	if n := len(p.Expire); n > 0 {
		parts = append(parts, fmt.Sprintf("expired %d %s", n, plural(n, "trace", "traces")))
	}
	if n := p.Count(KindQuarantine); n > 0 {
		parts = append(parts, fmt.Sprintf("%d quarantined %s left out", n, plural(n, "trace", "traces")))
	}
	return strings.Join(parts, ", ")
}

func (p *Changeset) foldedEntries() int {
	n := 0
	for _, e := range p.Entries {
		if len(e.Folded) > 0 {
			n++
		}
	}
	return n
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// StabilityStep is how far a selector's stability (ok/(ok+fail) of its own
// record) must move from the value in the facts file before consolidation
// rewrites it: smaller moves are per-run noise, and the selector's full
// record is in experience.
const StabilityStep = 0.05

// MaxProvenanceTraces caps facts.provenance.traces: the newest ids are kept;
// the full evidence is in experience.
const MaxProvenanceTraces = 10

// Plan decides a consolidation at time now. It is pure: it reads in and
// returns values, and never changes in.
//
// Rules (docs/consolidation.md):
//   - a trace is folded into the experience of its (domain, intent) unless its
//     id was folded before — ever: evidence outlives the trace file;
//   - confidence is recomputed at now (engine.Confidence) for every entry
//     with evidence, and the facts status moves with engine.NextStatus;
//   - a facts entry is created for an entry once it has a successful run, and
//     its content (url patterns, the latest successful route as steps,
//     selectors ranked by their own record) follows new evidence until the
//     entry is verified; a verified or contested entry's content is frozen
//     and only its status and history move;
//   - a facts file is rewritten only when something a reviewer reads moves:
//     content (a selector's stability only by StabilityStep or more), status,
//     history; provenance.traces follow the content (they are the runs behind
//     the current revision), and provenance.last_verified is set when the
//     entry becomes verified — per-run freshness is the experience's
//     (last_success_at; the recall's last_verified is derived from it);
//   - a folded trace older than ttl_days is expired; its evidence stays.
func Plan(now time.Time, in Input) *Changeset {
	now = now.UTC()
	p := in.Policy
	plan := &Changeset{Now: now, Warnings: append([]string(nil), in.Warnings...)}

	// Every folded id: in.Folded (~100,000 at 100k traces, not copied: an
	// overlay holds what this plan adds to it), then the loaded entries'
	// evidence, then what this plan folds.
	folded := foldedSet{base: in.Folded, add: map[string]Key{}}
	for k, x := range in.Experience {
		if x == nil {
			continue
		}
		for _, ev := range x.Evidence {
			folded.set(ev.Trace, k)
		}
	}

	// Fold, oldest first, so the result does not depend on input order.
	traces := append([]*engine.Trace(nil), in.Traces...)
	sort.SliceStable(traces, func(i, j int) bool {
		a, b := traces[i], traces[j]
		if !a.StartedAt.Equal(b.StartedAt) {
			return a.StartedAt.Before(b.StartedAt)
		}
		return a.ID < b.ID
	})
	work := map[Key]*engine.Experience{}
	newTraces := map[Key][]*engine.Trace{}
	quarantined := map[string]Key{}
	compacted := map[string]Key{} // traces skipped because a digest holds their start
	for _, t := range traces {
		if t == nil {
			continue
		}
		if t.ID == "" || t.Domain == "" || t.IntentKey == "" {
			plan.Changes = append(plan.Changes, Change{Kind: KindSkip, Trace: t.ID, Key: Key{t.Domain, t.IntentKey},
				Reason: "it has no id, domain or intent key; fix or delete the file"})
			continue
		}
		if k, ok := folded.get(t.ID); ok {
			plan.Changes = append(plan.Changes, Change{Kind: KindSkip, Trace: t.ID, Key: k,
				Reason: fmt.Sprintf("already folded into %s; a trace counts once", k)})
			continue
		}
		k := Key{t.Domain, t.IntentKey}
		if why, ok := in.Broken[k]; ok {
			plan.Changes = append(plan.Changes, Change{Kind: KindSkip, Trace: t.ID, Key: k,
				Reason: "the files of " + k.String() + " cannot be read (" + why + "); fold after fixing them"})
			continue
		}
		if x0 := work[k]; x0 != nil && x0.Digest.Holds(t.StartedAt) || x0 == nil && in.Experience[k] != nil && in.Experience[k].Digest.Holds(t.StartedAt) {
			plan.Changes = append(plan.Changes, Change{Kind: KindSkip, Trace: t.ID, Key: k,
				Reason: "it started before the evidence " + k.String() + " has compacted (engine.Digest): it could be a run already counted, so it is not counted again"})
			compacted[t.ID] = k
			continue
		}
		if why := engine.Injection(t); why != "" {
			quarantined[t.ID] = k
			plan.Changes = append(plan.Changes, Change{Kind: KindQuarantine, Trace: t.ID, Key: k,
				Reason: "it looks like a prompt injection (" + why + "): it counts as no evidence and teaches memory nothing; review it, then delete it or let it expire"})
			continue
		}
		x := work[k]
		if x == nil {
			if x = in.Experience[k].Clone(); x == nil {
				x = &engine.Experience{}
			}
			work[k] = x
		}
		x.Fold(t)
		folded.set(t.ID, k)
		newTraces[k] = append(newTraces[k], t)
		reason := "success"
		if t.Outcome == engine.Failure {
			reason = "failure (" + string(engine.EvidenceOf(t).Category) + ")"
		}
		if t.Session != "" {
			reason += ", session " + t.Session
		}
		plan.Changes = append(plan.Changes, Change{Kind: KindFold, Trace: t.ID, Key: k, Reason: reason})
	}

	// Fold verdicts into the evidence of their runs, oldest first: the newest
	// verdict on a run decides (engine.ApplyVerdict), so a second fold changes nothing.
	judged := map[Key][]string{}
	verdicts := append([]*engine.Verdict(nil), in.Verdicts...)
	sort.SliceStable(verdicts, func(i, j int) bool { return verdicts[i].At.Before(verdicts[j].At) })
	byTrace := map[Key]map[string][]int{}
	recount := map[Key]bool{}
	for _, v := range verdicts {
		if v == nil {
			continue
		}
		k, ok := folded.get(v.Trace)
		if !ok {
			continue // its trace is not in the tree (yet): kept until it is
		}
		if _, bad := in.Broken[k]; bad {
			continue
		}
		x := work[k]
		if x == nil {
			x = in.Experience[k]
		}
		if x == nil {
			continue
		}
		// One index of each entry's evidence by trace id (Clone keeps the
		// order), so V verdicts cost V lookups, not V scans.
		pos := byTrace[k]
		if pos == nil {
			pos = make(map[string][]int, len(x.Evidence))
			for i := range x.Evidence {
				pos[x.Evidence[i].Trace] = append(pos[x.Evidence[i].Trace], i)
			}
			byTrace[k] = pos
		}
		for _, i := range pos[v.Trace] {
			if probe := x.Evidence[i]; !engine.ApplyVerdict(&probe, v) {
				continue // folded before: nothing changes
			}
			if work[k] == nil {
				x = x.Clone()
				work[k] = x
			}
			engine.ApplyVerdict(&x.Evidence[i], v)
			recount[k] = true
			judged[k] = append(judged[k], verdictPath(v))
			reason := fmt.Sprintf("%s judged it %s", v.Judge, v.Verdict)
			if v.Verdict == engine.Wrong {
				reason += ": a judged_wrong failure"
			} else {
				reason += ": a confirmed success"
			}
			if v.Note != "" {
				reason += " (" + v.Note + ")"
			}
			plan.Changes = append(plan.Changes, Change{Kind: KindJudge, Trace: v.Trace, Key: k, Reason: reason})
		}
	}
	for k := range recount {
		work[k].Recount()
	}

	keys := map[Key]bool{}
	for k := range in.Experience {
		keys[k] = true
	}
	for k := range in.Facts {
		keys[k] = true
	}
	for k := range work {
		keys[k] = true
	}
	sorted := make([]Key, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Slice(sorted, func(i, j int) bool {
		if sorted[i].Domain != sorted[j].Domain {
			return sorted[i].Domain < sorted[j].Domain
		}
		return sorted[i].IntentKey < sorted[j].IntentKey
	})
	// Compact what decayed below compact_below_weight (engine.Digest), so
	// the file and the work on it stay flat under steady load.
	for _, k := range sorted {
		if _, ok := in.Broken[k]; ok {
			continue
		}
		x := work[k]
		if x == nil {
			x = in.Experience[k]
		}
		if x == nil || x.Compactable(now, p) == 0 {
			continue
		}
		if work[k] == nil {
			x = x.Clone()
			work[k] = x
		}
		n := len(x.Evidence)
		x.Compact(now, p)
		plan.Changes = append(plan.Changes, Change{Kind: KindCompact, Key: k,
			Reason: fmt.Sprintf("%d %s started before %s, weighing below compact_below_weight %g: kept as counts in its digest (%d runs in all)",
				n-len(x.Evidence), plural(n-len(x.Evidence), "item", "items"), x.Digest.Before.Format(time.RFC3339), p.CompactBelowWeight,
				x.Digest.Successes+x.Digest.Failures)})
	}
	for _, k := range sorted {
		if _, ok := in.Broken[k]; ok {
			continue
		}
		if e := planEntry(now, p, k, in.Experience[k], work[k], in.Facts[k], newTraces[k], plan); e != nil {
			e.Verdicts = judged[k]
			plan.Entries = append(plan.Entries, e)
		}
	}

	planSites(in, work, newTraces, plan)

	// Expire folded traces older than ttl_days. A ref's day is the UTC day
	// its run started, so age counts whole days from that day's start.
	for _, ref := range in.Refs {
		day, err := time.Parse("2006-01-02", ref.Day)
		if err != nil {
			continue
		}
		age := int(now.Sub(day).Hours() / 24)
		if age <= p.TTLDays {
			continue
		}
		k, ok := folded.get(ref.ID)
		if qk, q := quarantined[ref.ID]; q && !ok {
			plan.Expire = append(plan.Expire, ref)
			plan.Changes = append(plan.Changes, Change{Kind: KindExpire, Trace: ref.ID, Key: qk,
				Reason: fmt.Sprintf("age %d days > ttl_days %d; quarantined, it was never evidence", age, p.TTLDays)})
			continue
		}
		if ck, c := compacted[ref.ID]; c && !ok {
			// It can never be folded (the digest may count it already):
			// keeping it would warn at every run, forever.
			plan.Expire = append(plan.Expire, ref)
			plan.Changes = append(plan.Changes, Change{Kind: KindExpire, Trace: ref.ID, Key: ck,
				Reason: fmt.Sprintf("age %d days > ttl_days %d; it started before the digest of %s, so it is never folded (if it was a run counted before, the digest holds it)", age, p.TTLDays, ck)})
			continue
		}
		if !ok {
			plan.Warnings = append(plan.Warnings, fmt.Sprintf("trace %s (%s, %s) is older than ttl_days but was never folded: it is kept until it can be read", ref.ID, ref.Domain, ref.Day))
			continue
		}
		plan.Expire = append(plan.Expire, ref)
		plan.Changes = append(plan.Changes, Change{Kind: KindExpire, Trace: ref.ID, Key: Key{ref.Domain, k.IntentKey},
			Reason: fmt.Sprintf("age %d days > ttl_days %d; its evidence stays in %s", age, p.TTLDays, k)})
	}
	return plan
}

// planEntry decides one entry: facts content, status. It returns nil when
// nothing of the entry is written.
func planEntry(now time.Time, p engine.Policy, k Key, base, x *engine.Experience, f0 *engine.Facts, fresh []*engine.Trace, plan *Changeset) *Entry {
	e := &Entry{Key: k, baseFacts: f0}
	if base != nil {
		e.baseEvidence = len(base.Evidence)
	}
	if x != nil {
		e.Experience = x
		for _, t := range fresh {
			e.Folded = append(e.Folded, engine.TraceRef{Domain: t.Domain, Day: t.StartedAt.UTC().Format("2006-01-02"), ID: t.ID})
			if engine.EvidenceOf(t).Outcome == engine.Success {
				e.FoldedOK++
			}
		}
	} else {
		x = base
	}
	if x == nil || len(x.Evidence) == 0 && x.Digest == nil {
		// Facts with no evidence (hand-written, or a patch before any run):
		// nothing to judge them by.
		if e.Experience == nil {
			return nil
		}
		return e
	}

	var f *engine.Facts
	dirty := false
	route := latestRoute(fresh, base, f0 == nil || len(f0.Steps) == 0)
	switch {
	case f0 == nil && route == nil:
		// No successful run yet: experience only.
	case f0 == nil:
		f = &engine.Facts{Format: engine.Format, Domain: k.Domain, Intent: x.Intent, IntentKey: k.IntentKey,
			Status: engine.Hypothesis}
		derive(f, x, route, fresh)
		dirty = true
		plan.Changes = append(plan.Changes, Change{Kind: KindCreate, Key: k, Revision: f.Revision,
			Reason: fmt.Sprintf("first successful run; route of %d steps from trace %s, %d selectors, url patterns %s",
				len(f.Steps), route.ID, len(f.Selectors), strings.Join(f.URLPatterns, " "))})
	default:
		f = f0.Clone()
		if !frozen(f0) && len(fresh) > 0 {
			derive(f, x, route, fresh)
			if f.Revision == f0.Revision {
				// Same content: its provenance stays that of the runs it came
				// from (a new run of the same route is evidence, in experience).
				f.Provenance = f0.Clone().Provenance
			}
			dirty = !sameFacts(f, f0)
			if f.Revision != f0.Revision {
				plan.Changes = append(plan.Changes, Change{Kind: KindUpdate, Key: k, Revision: f.Revision,
					Reason: describeUpdate(f0, f, route)})
			}
		} else if f.Revision == "" && f.Status != engine.Retired {
			f.Revision = f.ContentHash()
			dirty = true
		}
	}

	e.Score = engine.ScoreOf(x.Evidence, x.Digest, now, p)
	if f != nil {
		cur := f.Status
		next, why := engine.NextStatus(cur, e.Score, f.HasPageText(), p)
		if next != cur {
			if cur == "" {
				cur = engine.Hypothesis
			}
			f.Status = next
			f.History = append(f.History, engine.Transition{From: cur, To: next, At: now, Reason: why})
			c := Change{Kind: KindStatus, Key: k, From: cur, To: next, Revision: f.Revision, Reason: why}
			switch next {
			case engine.Verified:
				c.Kind = KindVerify
				e.Verified, e.Reason = true, why
				f.Provenance.LastVerified = x.LastSuccessAt
			case engine.Contested:
				c.Kind = KindContest
			}
			plan.Changes = append(plan.Changes, c)
			dirty = true
		}
		// A verified entry's later successes move no facts file: the recall's
		// last_verified is the experience's last success (engine.Recall).
		if dirty {
			e.Facts = f
		}
	}
	if e.Experience == nil && e.Facts == nil {
		return nil
	}
	return e
}

// frozen reports whether an entry's content may no longer change: it is (or
// was, while contested) verified, or retired.
func frozen(f *engine.Facts) bool {
	return f.Status == engine.Verified || f.Status == engine.Contested || f.Status == engine.Retired
}

// latestRoute is the newest successful, unflagged trace among the new ones when it is
// newer than every success already folded (base); else nil: the route on
// record is the latest.
// When none is on record (any), the newest new success is taken regardless.
func latestRoute(fresh []*engine.Trace, base *engine.Experience, any bool) *engine.Trace {
	var best *engine.Trace
	for _, t := range fresh {
		// A run whose page text looks like a prompt injection never
		// becomes the route (engine.Injection: the rule deep-learn applies too).
		if t.Outcome != engine.Success || !hasRoute(t) || engine.Injection(t) != "" {
			continue
		}
		if best == nil || t.StartedAt.After(best.StartedAt) || t.StartedAt.Equal(best.StartedAt) && t.ID > best.ID {
			best = t
		}
	}
	if best != nil && !any && base != nil && best.StartedAt.Before(base.LastSuccessAt) {
		return nil
	}
	return best
}

func hasRoute(t *engine.Trace) bool {
	for _, s := range t.Steps {
		if s.OK {
			return true
		}
	}
	return false
}

// derive sets f's evidence-derived content: url patterns, route, selectors,
// task type, provenance; then its revision.
func derive(f *engine.Facts, x *engine.Experience, route *engine.Trace, fresh []*engine.Trace) {
	f.URLPatterns = mergeStrings(x.URLPatterns(), f.URLPatterns)
	if f.TaskType == "" && len(x.TaskTypes) > 0 {
		f.TaskType = x.TaskTypes[0]
	}
	if f.Intent == "" {
		f.Intent = x.Intent
	}
	if route != nil {
		steps, sels := routeOf(route, x.Selectors)
		// A parameter the entry already has (deep-learn saw the value vary,
		// or a reviewer said so) stays a parameter: the latest run's value
		// is never baked back into the route.
		if len(f.Steps) == len(steps) {
			for i := range steps {
				if old := f.Steps[i]; old.Param != "" && old.Action == steps[i].Action && steps[i].Param == "" {
					steps[i].Param, steps[i].Value = old.Param, ""
					if steps[i].Action == "navigate" {
						steps[i].URL = old.URL
					}
				}
			}
		}
		// Fallbacks ranked earlier (by deep-learn or a reviewer) stay behind
		// the ones this run showed, when the primary is unchanged.
		for name, s := range sels {
			if old, ok := f.Selectors[name]; ok && old.Primary == s.Primary {
				s.Fallbacks = mergeStrings(s.Fallbacks, old.Fallbacks)
				// Stability is a running ratio: every run nudges it. It is
				// rewritten (a new revision) only when it moves by
				// StabilityStep or more from what the file says.
				if old.Stability > 0 && math.Abs(s.Stability-old.Stability) < StabilityStep-1e-9 {
					s.Stability = old.Stability
				}
				sels[name] = s
			}
		}
		f.Steps = steps
		f.SuccessCondition = routeCondition(route, fresh)
		// Selectors this tree observed in runs are managed here; names whose
		// selector no run used (a hand edit, a patch) are kept as they are.
		for name, s := range f.Selectors {
			if _, observed := x.Selectors[s.Primary]; observed {
				if _, still := sels[name]; !still {
					delete(f.Selectors, name)
				}
			}
		}
		for name, s := range sels {
			if f.Selectors == nil {
				f.Selectors = map[string]engine.Selector{}
			}
			f.Selectors[name] = s
		}
	}
	ids := append([]string(nil), f.Provenance.Traces...)
	for _, t := range fresh {
		ids = append(ids, t.ID)
	}
	ids = mergeStrings(ids, nil)
	sort.Strings(ids)
	if len(ids) > MaxProvenanceTraces {
		ids = ids[len(ids)-MaxProvenanceTraces:]
	}
	f.Provenance.Traces = ids
	if !contains(f.Provenance.Sources, "consolidate") {
		f.Provenance.Sources = append(f.Provenance.Sources, "consolidate")
	}
	if len(x.Evidence) > 0 {
		first := x.Evidence[0].At
		for _, ev := range x.Evidence {
			if ev.At.Before(first) {
				first = ev.At
			}
		}
		if f.Provenance.FirstSeen.IsZero() || first.Before(f.Provenance.FirstSeen) {
			f.Provenance.FirstSeen = first
		}
	}
	// Secrets the save did not remove (a trace written before the scrubber,
	// a hand edit) never reach a facts file.
	engine.ScrubFacts(f)
	f.Revision = f.ContentHash()
}

// routeCondition is the success condition stored with a route: what the
// route's run and the other fresh successful runs of the same route shape
// agree on at the end (engine.CommonCondition).
func routeCondition(route *engine.Trace, fresh []*engine.Trace) *engine.SuccessCondition {
	if route.SuccessCondition.Empty() {
		return nil
	}
	cs := []*engine.SuccessCondition{route.SuccessCondition}
	for _, t := range fresh {
		if t != route && t.Outcome == engine.Success && !t.SuccessCondition.Empty() && t.SuccessCondition.Selector == route.SuccessCondition.Selector {
			cs = append(cs, t.SuccessCondition)
		}
	}
	return engine.CommonCondition(cs)
}

// routeOf turns a successful trace into the route to store: its successful
// steps, each selector replaced by the best of it and its fallbacks by their
// own record, and the named selectors of the route.
func routeOf(t *engine.Trace, stats map[string]*engine.SelectorStats) ([]engine.Step, map[string]engine.Selector) {
	var steps []engine.Step
	sels := map[string]engine.Selector{}
	byPrimary := map[string]string{}
	for _, s := range t.Steps {
		if !s.OK || s.Action == "done" {
			continue
		}
		st := engine.Step{Seq: len(steps) + 1, Action: s.Action, Selector: s.Selector, Param: s.Param, URL: s.URL, OK: true, Target: s.Target}
		if s.Param == "" {
			st.Value = s.Value
		}
		if s.Selector != "" && s.Action != "navigate" {
			ranked := rankSelectors(append([]string{s.Selector}, s.Fallbacks...), stats)
			st.Selector = ranked[0]
			if len(ranked) > 1 {
				st.Fallbacks = ranked[1:]
			}
			if _, done := byPrimary[st.Selector]; !done {
				name := uniqueName(s.Action+"_"+engine.SelectorName(st.Selector), sels)
				byPrimary[st.Selector] = name
				sel := engine.Selector{Primary: st.Selector, Fallbacks: st.Fallbacks}
				if c := stats[st.Selector]; c != nil && c.OK+c.Fail > 0 {
					sel.Stability = float64(int(float64(c.OK)/float64(c.OK+c.Fail)*100+0.5)) / 100
				}
				sels[name] = sel
			}
		}
		steps = append(steps, st)
	}
	return steps, sels
}

// rankSelectors orders candidates by their own record: most successes first,
// then fewest failures, then as the run listed them.
func rankSelectors(cands []string, stats map[string]*engine.SelectorStats) []string {
	cands = mergeStrings(cands, nil)
	get := func(s string) engine.SelectorStats {
		if c := stats[s]; c != nil {
			return *c
		}
		return engine.SelectorStats{}
	}
	sort.SliceStable(cands, func(i, j int) bool {
		a, b := get(cands[i]), get(cands[j])
		if a.OK != b.OK {
			return a.OK > b.OK
		}
		return a.Fail < b.Fail
	})
	return cands
}

func uniqueName(name string, taken map[string]engine.Selector) string {
	if _, ok := taken[name]; !ok {
		return name
	}
	for i := 2; ; i++ {
		n := fmt.Sprintf("%s_%d", name, i)
		if _, ok := taken[n]; !ok {
			return n
		}
	}
}

func describeUpdate(old, f *engine.Facts, route *engine.Trace) string {
	var what []string
	if !reflect.DeepEqual(old.Steps, f.Steps) && route != nil {
		what = append(what, fmt.Sprintf("route of %d steps from trace %s", len(f.Steps), route.ID))
	}
	if !reflect.DeepEqual(old.Selectors, f.Selectors) {
		var added, removed, changed []string
		for n, s := range f.Selectors {
			o, ok := old.Selectors[n]
			switch {
			case !ok:
				added = append(added, n)
			case !reflect.DeepEqual(o, s):
				changed = append(changed, n)
			}
		}
		for n := range old.Selectors {
			if _, ok := f.Selectors[n]; !ok {
				removed = append(removed, n)
			}
		}
		for _, l := range []struct {
			verb  string
			names []string
		}{{"added", added}, {"re-ranked", changed}, {"removed", removed}} {
			if len(l.names) > 0 {
				sort.Strings(l.names)
				what = append(what, "selectors "+l.verb+" "+strings.Join(l.names, " "))
			}
		}
	}
	if !reflect.DeepEqual(old.URLPatterns, f.URLPatterns) {
		what = append(what, "url patterns "+strings.Join(f.URLPatterns, " "))
	}
	if len(what) == 0 {
		what = append(what, "content follows new evidence")
	}
	return "r" + old.Revision + " → r" + f.Revision + ": " + strings.Join(what, "; ")
}

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

// verdictPath is where a verdict is stored (store.VerdictPath's layout; plan
// is pure and does not import store).
func verdictPath(v *engine.Verdict) string {
	return "verdicts/" + v.Domain + "/" + v.Trace + "/" + v.Judge + ".yaml"
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

// sameFacts compares two entries as they would be stored (empty and absent
// lists are the same thing on disk).
func sameFacts(a, b *engine.Facts) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}

// planSites folds the new runs of each domain into its site entry: every
// intent's runs feed it (engine.FoldSite), and the selectors that worked
// under an intent with new runs (its experience's record) keep anti-patterns
// on them from being served. A site entry that cannot be read is left alone.
func planSites(in Input, work map[Key]*engine.Experience, fresh map[Key][]*engine.Trace, plan *Changeset) {
	byDomain := map[string][]Key{}
	for k := range fresh {
		byDomain[k.Domain] = append(byDomain[k.Domain], k)
	}
	domains := make([]string, 0, len(byDomain))
	for d := range byDomain {
		domains = append(domains, d)
	}
	sort.Strings(domains)
	for _, d := range domains {
		if why, bad := in.BrokenSites[d]; bad {
			plan.Warnings = append(plan.Warnings, fmt.Sprintf("the site entry of %s cannot be read (%s): it learns nothing until it is fixed", d, why))
			continue
		}
		keys := byDomain[d]
		sort.Slice(keys, func(i, j int) bool { return keys[i].IntentKey < keys[j].IntentKey })
		var runs []*engine.Trace
		for _, k := range keys {
			runs = append(runs, fresh[k]...)
		}
		sort.SliceStable(runs, func(i, j int) bool { return runs[i].ID < runs[j].ID })
		base := in.Sites[d]
		s := engine.FoldSite(base, d, runs)
		for _, k := range keys {
			x := work[k]
			if x == nil {
				continue
			}
			var ok []string
			for sel, st := range x.Selectors {
				if st != nil && st.OK > 0 {
					ok = append(ok, sel)
				}
			}
			sort.Strings(ok)
			s = engine.MarkWorked(s, k.IntentKey, ok)
		}
		if len(s.Notes) == 0 && base == nil || s.Equal(base) || !siteMoved(base, s) {
			continue
		}
		plan.Sites = append(plan.Sites, s)
		served, before := 0, 0
		for _, n := range s.Notes {
			if n.Served(in.Policy) {
				served++
			}
		}
		if base != nil {
			for _, n := range base.Notes {
				if n.Served(in.Policy) {
					before++
				}
			}
		}
		plan.Changes = append(plan.Changes, Change{Kind: KindSite, Key: Key{Domain: d},
			Reason: fmt.Sprintf("%d new %s of %d %s; %d %s, %d served (was %d)", len(runs), plural(len(runs), "run", "runs"),
				len(keys), plural(len(keys), "intent", "intents"), len(s.Notes), plural(len(s.Notes), "note", "notes"), served, before)})
	}
}

// siteMoved reports whether a domain's folded site entry s says something its
// file (base) does not: a note added or dropped, a note's intents or worked
// intents, or its number of runs. A note that was only seen again — at the
// cap of MaxSiteTraces its newest trace ids rotate, and its last_seen moves —
// leaves the file as it is: what is served is the same, and the runs are in
// the traces and the experience.
func siteMoved(base, s *engine.Site) bool {
	if base == nil || len(base.Notes) != len(s.Notes) {
		return true
	}
	for i, a := range s.Notes {
		b := base.Notes[i]
		if a.Kind != b.Kind || a.URLPattern != b.URLPattern || a.Type != b.Type || a.Selector != b.Selector || a.Action != b.Action ||
			!slices.Equal(a.Intents, b.Intents) || !slices.Equal(a.Worked, b.Worked) || len(a.Traces) != len(b.Traces) {
			return true
		}
	}
	return false
}

// foldedSet is a map of folded trace ids over a base that it never
// changes: a set id shadows the base's.
type foldedSet struct{ base, add map[string]Key }

func (f foldedSet) get(id string) (Key, bool) {
	if k, ok := f.add[id]; ok {
		return k, true
	}
	k, ok := f.base[id]
	return k, ok
}

func (f foldedSet) set(id string, k Key) { f.add[id] = k }
