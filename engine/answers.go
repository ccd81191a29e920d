package engine

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// Cached answers from consolidation (docs/data-model.md, "Observed answers").
//
// Every successful run that read an answer leaves a read of it in its
// entry's experience (Experience.Answers, folded with the trace); the
// answer a recall serves is derived from those reads at query time
// (CachedAnswer), never stored in the facts: observed answers are evidence,
// which moves with every run, while a verified entry's content is frozen
// (its revision hash covers facts.answers, which stay the reviewed answers
// of deep-learn and people).
//
// The record is a join: reads are a set keyed by trace id, capped to the
// newest MaxAnswerReads, so folding a trace twice, or merging two branches'
// files in any order, gives the same record. The newest reads decide: a
// value that changed once and has been read alike since, MaxAnswerReads
// times, is stable again.

// Caps of the observed answers of one entry.
const (
	MaxAnswerReads = 20  // the newest reads kept, all values together: they decide
	MaxAnswerChars = 200 // longer answers are page dumps, not answers: not observed
)

// Observed is one distinct answer value the entry's successful runs read.
type Observed struct {
	Value     string       `yaml:"value" json:"value"`
	SourceURL string       `yaml:"source_url,omitempty" json:"source_url,omitempty"` // the page of the newest read
	Reads     []AnswerRead `yaml:"reads" json:"reads"`                               // newest first
}

// AnswerRead is one run that read a value.
type AnswerRead struct {
	Trace   string    `yaml:"trace" json:"trace"`
	Session string    `yaml:"session,omitempty" json:"session,omitempty"`
	At      time.Time `yaml:"at" json:"at"`
}

// AnswerValue is the form an answer is compared and kept in: trimmed, inner
// white space collapsed. "" when the run's answer cannot be observed.
func AnswerValue(s string) string {
	v := strings.Join(strings.Fields(s), " ")
	if len([]rune(v)) > MaxAnswerChars {
		return ""
	}
	return v
}

// observable reports whether t's answer is one to observe: a successful run
// with an answer of a reasonable size, not parameterised (the answer of a
// route with a task parameter depends on the task's value), not flagged by
// the injection screen.
func observable(t *Trace) (string, bool) {
	if t == nil || t.Outcome != Success || len(t.Steps) == 0 || len(t.Params) > 0 {
		return "", false
	}
	for _, s := range t.Steps {
		if s.Param != "" {
			return "", false
		}
	}
	v := AnswerValue(t.Result.Answer)
	if v == "" || Injection(t) != "" {
		return "", false
	}
	if sv, _ := ScrubText(v); sv != v { // a secret is never an answer to keep
		return "", false
	}
	return v, true
}

// FoldAnswer adds t's answer to the observed answers obs and returns the
// result (obs is not changed). A trace already read, or one whose answer is
// not observable, changes nothing.
func FoldAnswer(obs []Observed, t *Trace) []Observed {
	v, ok := observable(t)
	if !ok {
		return obs
	}
	for _, o := range obs {
		for _, r := range o.Reads {
			if r.Trace == t.ID {
				return obs
			}
		}
	}
	read := AnswerRead{Trace: t.ID, Session: t.Session, At: t.StartedAt.UTC()}
	src := CleanURL(firstNonEmpty(t.Result.FinalURL, t.URL))
	one := []Observed{{Value: v, SourceURL: src, Reads: []AnswerRead{read}}}
	return MergeObserved(obs, one)
}

// MergeObserved is the union of two sets of observed answers: reads by
// trace id, the newest MaxAnswerReads of all kept (newest first), grouped by
// value, each value with the source of its newest read. Keeping the newest
// reads of a set is exact under union, so the merge is commutative,
// associative and idempotent: consolidation and the merge driver agree.
func MergeObserved(a, b []Observed) []Observed {
	type pair struct {
		value, src string
		newest     bool // the newest read of its value on its side: src is its page
		r          AnswerRead
	}
	var all []pair
	seen := map[string]int{}
	for _, side := range [][]Observed{a, b} {
		for _, o := range side {
			top := newestRead(o.Reads)
			for _, r := range o.Reads {
				p := pair{o.Value, o.SourceURL, top.ok && r.Trace == top.r.Trace, r}
				if i, dup := seen[r.Trace]; dup {
					if p.newest && !all[i].newest {
						all[i] = p
					}
					continue
				}
				seen[r.Trace] = len(all)
				all = append(all, p)
			}
		}
	}
	if len(all) == 0 {
		return nil
	}
	sort.Slice(all, func(i, j int) bool { return readAfter(all[i].r, all[j].r) })
	if len(all) > MaxAnswerReads {
		all = all[:MaxAnswerReads]
	}
	var out []Observed
	idx := map[string]int{}
	for _, p := range all {
		i, ok := idx[p.value]
		if !ok {
			i = len(out)
			idx[p.value] = i
			out = append(out, Observed{Value: p.value, SourceURL: p.src}) // its newest read comes first
		}
		out[i].Reads = append(out[i].Reads, p.r)
	}
	return out
}

// readAfter orders reads newest first, ties by trace id.
func readAfter(a, b AnswerRead) bool {
	if !a.At.Equal(b.At) {
		return a.At.After(b.At)
	}
	return a.Trace > b.Trace
}

type readKey struct {
	r  AnswerRead
	ok bool
}

func newestRead(rs []AnswerRead) readKey {
	var k readKey
	for _, r := range rs {
		if !k.ok || readAfter(r, k.r) {
			k = readKey{r, true}
		}
	}
	return k
}

var (
	numberRe   = LazyRE(`^[\s$€£+-]*[\d.,]+\s*(%|k|m|stars?|forks?|issues?|open|closed)?\s*$`)
	dateRe     = LazyRE(`\b(\d{4}-\d{2}-\d{2}|\d{1,2}:\d{2}|(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]* \d{1,2}|\d+ (seconds?|minutes?|hours?|days?|weeks?|months?|years?) ago|yesterday|today)\b`)
	volatileRe = LazyRE(`(?i)\b(latest|current|currently|now|today|count|how many|number of|status|recent|newest|last|price|open)\b`)
	statusRe   = LazyRE(`(?i)^(success|succeeded|passing|passed|failing|failed|queued|running|in progress|pending|cancelled|canceled|green|red|open|closed|merged)$`)
)

// AnswerFreshness classifies an answer by its kind: counts, numbers, dates,
// statuses and anything the task calls latest/current are volatile; names,
// paths and commands stable. (Values that disagree across runs are volatile
// whatever their kind: CachedAnswer and deep-learn decide that from the runs.)
func AnswerFreshness(intent, value string) Freshness {
	if valueMemo.get(value, volatileValue) || volatileIntentMemo.get(intent, volatileRe.MatchString) {
		return Volatile
	}
	return Stable
}

// The regular expressions' verdicts, remembered (memo.go): a warm query
// grades the same answers and intents again and again.
var (
	valueMemo          = memo[bool]{max: 1 << 14}
	volatileIntentMemo = memo[bool]{max: 1 << 14}
)

func volatileValue(value string) bool {
	v := strings.TrimSpace(strings.ToLower(value))
	return numberRe.MatchString(v) || dateRe.MatchString(v) || statusRe.MatchString(v)
}

// CachedAnswer derives the answer a recall serves from an entry's observed
// answers, under the trust rules: a read counts only while its run's
// evidence is a success (a run judged wrong, an unverified answer, a
// failure never count; a read whose evidence is gone counts no more). With
// ev the entry's evidence (folded and pending) and revision the facts
// revision whose route verifies it.
//
//   - One value, read in ≥ answer_sessions sessions, not volatile by kind
//     (AnswerFreshness): stable — served as "cached, verify at source".
//   - One value, volatile by kind: volatile — "read it live", no value.
//   - Values that differ: volatile, no value; when the older value had been
//     read alike in ≥ answer_sessions sessions before the newer one was
//     first read, the answer is demoted: it stopped matching when re-read.
//   - Anything else (one session's word): nothing.
//
// The second result says why, for the recall's reasons.
func CachedAnswer(intent string, obs []Observed, ev []Evidence, revision string, p Policy) (*Answer, string) {
	a, _, why := cachedAnswer(intent, obs, ev, revision, p)
	return a, why
}

// cachedAnswer is CachedAnswer, with the value of the newest counted read.
func cachedAnswer(intent string, obs []Observed, ev []Evidence, revision string, p Policy) (*Answer, string, string) {
	ok := map[string]bool{}
	for _, e := range ev {
		if e.IsRun() {
			ok[e.Trace] = e.Outcome == Success
		}
	}
	type value struct {
		v, src   string
		reads    []AnswerRead // counted reads, newest first
		sessions map[string]bool
	}
	var vals []value
	for _, o := range obs {
		val := value{v: o.Value, src: o.SourceURL, sessions: map[string]bool{}}
		for _, r := range o.Reads {
			if ok[r.Trace] {
				val.reads = append(val.reads, r)
				val.sessions[firstNonEmpty(r.Session, "trace:"+r.Trace)] = true
			}
		}
		if len(val.reads) > 0 {
			sort.Slice(val.reads, func(i, j int) bool { return readAfter(val.reads[i], val.reads[j]) })
			vals = append(vals, val)
		}
	}
	if len(vals) == 0 {
		return nil, "", ""
	}
	sort.SliceStable(vals, func(i, j int) bool { return readAfter(vals[i].reads[0], vals[j].reads[0]) })
	newest := vals[0]
	need := max(1, p.AnswerSessions)
	a := &Answer{Query: intent, SourceURL: newest.src, ObservedAt: newest.reads[0].At, Freshness: Volatile,
		Sessions: len(newest.sessions), Revision: revision, Origin: OriginConsolidate}
	if len(vals) > 1 {
		first := newest.reads[len(newest.reads)-1].At
		for _, old := range vals[1:] {
			before := map[string]bool{}
			for _, r := range old.reads {
				if r.At.Before(first) || r.At.Equal(first) {
					before[firstNonEmpty(r.Session, "trace:"+r.Trace)] = true
				}
			}
			if len(before) >= need && AnswerFreshness(intent, old.v) == Stable {
				a.Demoted = true
				return a, newest.v, fmt.Sprintf("answer demoted: read alike in %d sessions, then a run on %s read another value: read it live", len(before), first.Format("2006-01-02"))
			}
		}
		return a, newest.v, fmt.Sprintf("answer volatile: %d different values read across runs: read it live", len(vals))
	}
	if AnswerFreshness(intent, newest.v) == Volatile {
		return a, newest.v, "answer volatile: a count, date or status (or the task asks for the latest): read it live"
	}
	if len(newest.sessions) < need {
		return nil, newest.v, fmt.Sprintf("answer not cached: read in %d %s, %d needed", len(newest.sessions), plural(len(newest.sessions), "session", "sessions"), need)
	}
	a.Value, a.Freshness = newest.v, Stable
	return a, newest.v, fmt.Sprintf("answer stable: the same value read in %d sessions", len(newest.sessions))
}

// OriginConsolidate marks an answer derived from the runs' reads (CachedAnswer).
const OriginConsolidate = "consolidate"

// withObserved joins the reviewed answers of the facts (frozen with a
// verified entry) and what the runs read for query: derived (CachedAnswer;
// nil when not cached) and newest, the value of the newest counted read ("":
// none). A facts answer to the query that the newest read no longer matches,
// or that the reads demoted, is served as volatile and demoted, without its
// value (the facts file is not changed); a derived answer to a query the
// facts do not answer is added.
func withObserved(facts []Answer, query string, derived *Answer, newest string) []Answer {
	out := slices.Clone(facts)
	if newest == "" {
		return out
	}
	answered := false
	for i := range out {
		a := &out[i]
		if a.Query != query {
			continue
		}
		answered = true
		if a.Freshness != Volatile && (derived != nil && derived.Demoted || AnswerValue(a.Value) != newest) {
			a.Value, a.Freshness, a.Demoted = "", Volatile, true
		}
	}
	if !answered && derived != nil {
		out = append(out, *derived)
	}
	return out
}

// observedAnswers sets r.Answers from the entry's facts answers and what
// its runs read (folded and pending); a demoted answer adds a warning.
func (e *Engine) observedAnswers(en *entry, r *Recall, p Policy) {
	var obs []Observed
	if en.exp != nil {
		obs = en.exp.Answers
	}
	for _, t := range en.pending {
		obs = FoldAnswer(obs, t)
	}
	if len(obs) == 0 {
		return
	}
	a, newest, why := cachedAnswer(en.intent, obs, en.evidenceRead(), r.Revision, p)
	before := r.Answers
	r.Answers = withObserved(r.Answers, en.intent, a, newest)
	demoted := a != nil && a.Demoted
	for i := range before {
		demoted = demoted || !before[i].Demoted && r.Answers[i].Demoted
	}
	if demoted {
		if a == nil || !a.Demoted {
			why = "answer demoted: the newest run read another value than the one on record: read it live"
		}
		r.Warnings = append(r.Warnings, "answer_demoted: "+why)
	}
}
