package engine

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"time"
)

// Evidence is one folded outcome: what confidence is computed from. Experience
// keeps one per folded trace, and keeps it after the trace itself expired, so
// the TTL loses no evidence. Evidence with no steps is a lesson (a save that
// only patched facts): kept for provenance, never counted as a run.
type Evidence struct {
	Trace      string          `yaml:"trace" json:"trace"`
	At         time.Time       `yaml:"at" json:"at"`
	Outcome    Outcome         `yaml:"outcome" json:"outcome"`
	Category   FailureCategory `yaml:"category,omitempty" json:"category,omitempty"`
	Session    string          `yaml:"session,omitempty" json:"session,omitempty"`
	URLPattern string          `yaml:"url_pattern,omitempty" json:"url_pattern,omitempty"`
	Steps      int             `yaml:"steps,omitempty" json:"steps,omitempty"`
	DurationMs int64           `yaml:"duration_ms,omitempty" json:"duration_ms,omitempty"`
	Revision   string          `yaml:"revision,omitempty" json:"revision,omitempty"` // the facts revision the run used
	// The newest verdict on the run (see Verdict): right or wrong, by whom, when.
	Verdict   VerdictValue `yaml:"verdict,omitempty" json:"verdict,omitempty"`
	VerdictBy string       `yaml:"verdict_by,omitempty" json:"verdict_by,omitempty"`
	VerdictAt time.Time    `yaml:"verdict_at,omitempty" json:"verdict_at,omitempty"`
}

// IsRun reports whether the evidence is a run (at least one step) rather
// than a lesson.
func (e Evidence) IsRun() bool { return e.Steps > 0 }

// EvidenceOf summarizes a trace as evidence.
func EvidenceOf(t *Trace) Evidence {
	e := Evidence{Trace: t.ID, At: t.StartedAt.UTC(), Outcome: t.Outcome, Session: t.Session,
		URLPattern: t.URLPattern, Steps: len(t.Steps), DurationMs: t.DurationMs, Revision: t.FactsRevision}
	if t.Outcome == Failure {
		e.Category = Classify(t)
	}
	return e
}

// Decay is the weight of evidence of the given age: 0.5^(age/halfLife). Evidence
// from the future (clock skew) weighs 1.
func Decay(age time.Duration, halfLifeDays float64) float64 {
	if age <= 0 {
		return 1
	}
	days := age.Hours() / 24
	return math.Pow(0.5, days/halfLifeDays)
}

// Score is the weighted evidence behind a confidence.
type Score struct {
	Successes  int     // raw counts of runs
	Failures   int     // raw counts, gates and no-fault runs included
	Gates      int     // failures that were gates (anti_bot, auth_required, permission_denied)
	NoFault    int     // failures the site is not to blame for (aborted, planner_error)
	Lessons    int     // saves with no steps: no evidence
	S, F       float64 // decayed, weighted
	Confidence float64 // see ConfidenceOf; 0 when there is no evidence
	Sessions   int     // distinct sessions with a success
	Confirmed  int     // successes a verdict judged right
	LastN      []Outcome
	Streak     int             // route failures in a row, newest first (gates and no-fault runs skipped)
	OpenGate   FailureCategory // set when the newest outcome is a gate failure
	// OpenWrong is the newest run judged wrong when no newer run was judged
	// right; OpenWrongRevision the facts revision that run used.
	OpenWrong         string
	OpenWrongRevision string
}

// Runs is how many runs the score counts.
func (sc Score) Runs() int { return sc.Successes + sc.Failures }

// WrongHolds reports whether an open wrong verdict caps an entry served at
// revision: it does until a newer run is judged right or the route changes
// (the wrong run used another revision).
func (sc Score) WrongHolds(revision string) bool {
	return sc.OpenWrong != "" && (sc.OpenWrongRevision == "" || revision == "" || sc.OpenWrongRevision == revision)
}

// ConfidenceOf is the trust ladder over decayed, weighted successes S and
// failures F, with c1 the confidence of a first success:
//
//	confidence = (1 − (1 − c1)^S) · S / (S + F)
//
// No success gives 0. It rises with S and falls with F; with c1 = 0.5 one
// success gives 0.50, two 0.75, three 0.875 (docs/data-model.md has the table).
func ConfidenceOf(S, F, c1 float64) float64 {
	if S <= 0 {
		return 0
	}
	return (1 - math.Pow(1-c1, S)) * S / (S + F)
}

// Confidence computes the score of evidence at time now under policy p (see
// ConfidenceOf). No runs: confidence 0 (tier P5). Evidence with the same trace
// id counts once; lessons (no steps) count as no run at all.
func Confidence(ev []Evidence, now time.Time, p Policy) Score {
	return ScoreOf(ev, nil, now, p)
}

// ScoreOf is Confidence over live evidence ev and an entry's compacted
// evidence d (nil: none; see Digest): counts and weights add up, sessions
// join, and the rules on the latest outcomes read the live evidence first,
// then the newest end of the digest.
func ScoreOf(ev []Evidence, d *Digest, now time.Time, p Policy) Score {
	if len(ev) == 0 && d == nil {
		return Score{}
	}
	sc, lf := scoreLive(ev, now, p)
	sc.addDigest(d, &lf, now, p)
	sc.Sessions = len(lf.sessions)
	sc.Confidence = ConfidenceOf(sc.S, sc.F, p.FirstSuccessConfidence)
	return sc
}

// liveFacts is what merging a digest into a score needs to know of the
// live evidence besides the score itself (ScoreOf, ExperienceSummary).
type liveFacts struct {
	sessions map[string]struct{} // sessions with a success
	route    int                 // runs that say something about the route
	anyRun   bool                // at least one run
	judged   bool                // at least one run with a verdict
}

// scoreLive is ScoreOf over the live evidence alone, without Sessions and
// Confidence (the digest may add to both).
func scoreLive(ev []Evidence, now time.Time, p Policy) (Score, liveFacts) {
	var sc Score
	seen := make(map[string]struct{}, len(ev))
	sessions := map[string]struct{}{}
	newest, judged := -1, -1
	route := make([]int, 0, len(ev)) // runs that say something about the route
	for i := range ev {
		e := &ev[i]
		if e.Trace != "" {
			if _, dup := seen[e.Trace]; dup {
				continue
			}
			seen[e.Trace] = struct{}{}
		}
		if !e.IsRun() {
			sc.Lessons++
			continue
		}
		w := Decay(now.Sub(e.At), p.HalfLifeDays)
		if e.Outcome == Success {
			sc.Successes++
			sc.S += w
			if e.Session != "" {
				sessions[e.Session] = struct{}{}
			} else {
				sessions["trace:"+e.Trace] = struct{}{}
			}
			if e.Verdict == Right {
				sc.Confirmed++
			}
		} else {
			sc.Failures++
			if e.Category.IsGate() {
				sc.Gates++
			}
			if e.Category.IsNoFault() {
				sc.NoFault++
			}
			sc.F += w * p.FailureWeight(e.Category)
		}
		if e.Outcome == Success || !(e.Category.IsGate() || e.Category.IsNoFault()) {
			route = append(route, i)
		}
		if newest < 0 || newer(e, &ev[newest]) { // ties broken by trace id, as in newestFirst
			newest = i
			if e.Outcome == Failure && e.Category.IsGate() {
				sc.OpenGate = e.Category
			} else {
				sc.OpenGate = ""
			}
		}
		// The newest verdict decides: wrong stays open until a newer run is judged right.
		if e.Verdict != "" && (judged < 0 || newer(e, &ev[judged])) {
			judged = i
		}
	}
	newestFirst(ev, route)
	for _, i := range route[:min(len(route), p.VerifiedLastN)] {
		sc.LastN = append(sc.LastN, ev[i].Outcome)
	}
	for _, i := range route {
		if ev[i].Outcome != Failure {
			break
		}
		sc.Streak++
	}
	if judged >= 0 && ev[judged].Verdict == Wrong {
		sc.OpenWrong, sc.OpenWrongRevision = ev[judged].Trace, ev[judged].Revision
	}
	return sc, liveFacts{sessions: sessions, route: len(route), anyRun: newest >= 0, judged: judged >= 0}
}

// addDigest merges the compacted evidence d (nil: none) into sc, the live
// evidence's score (lf): counts and weights add up, sessions join (into
// lf.sessions), and the rules on the latest outcomes read the live
// evidence first, then the newest end of the digest.
func (sc *Score) addDigest(d *Digest, lf *liveFacts, now time.Time, p Policy) {
	if d == nil {
		return
	}
	h := d.HalfLifeDays
	if h <= 0 {
		h = p.HalfLifeDays
	}
	scale := Decay(now.Sub(d.Before), h)
	sc.S += d.S * scale
	sc.F += d.F * scale
	sc.Successes += d.Successes
	sc.Failures += d.Failures
	sc.Gates += d.Gates
	sc.NoFault += d.NoFault
	sc.Lessons += d.Lessons
	sc.Confirmed += d.Confirmed
	for _, s := range d.Sessions {
		lf.sessions[s] = struct{}{}
	}
	for _, o := range d.Recent {
		if len(sc.LastN) >= p.VerifiedLastN {
			break
		}
		sc.LastN = append(sc.LastN, o)
	}
	if sc.Streak == lf.route { // every live route run failed (or none)
		sc.Streak += d.Streak
	}
	if !lf.anyRun {
		sc.OpenGate = d.OpenGate
	}
	if !lf.judged {
		sc.OpenWrong, sc.OpenWrongRevision = d.OpenWrong, d.OpenWrongRevision
	}
}

// newestFirst orders idx (indexes into ev) newest first, ties broken by
// trace id (see newer). Stored evidence is oldest first, so the common case
// is one linear check and a reversal; anything else is one n log n sort.
func newestFirst(ev []Evidence, idx []int) {
	oldestFirst := true
	for k := 1; k < len(idx); k++ {
		if newer(&ev[idx[k-1]], &ev[idx[k]]) {
			oldestFirst = false
			break
		}
	}
	if oldestFirst {
		slices.Reverse(idx)
		return
	}
	sort.Slice(idx, func(a, b int) bool { return newer(&ev[idx[a]], &ev[idx[b]]) })
}

func newer(a, b *Evidence) bool {
	if !a.At.Equal(b.At) {
		return a.At.After(b.At)
	}
	return a.Trace > b.Trace
}

// Tier is the retrieval tier: the contract with agents on how far to trust memory.
type Tier string

const (
	P1 Tier = "P1" // replay directly, existence check only
	P2 Tier = "P2" // verify each selector, then replay
	P3 Tier = "P3" // hints; full discovery for what fails
	P4 Tier = "P4" // advisory
	P5 Tier = "P5" // nothing known: cold start
)

// Status is a facts entry's lifecycle state.
type Status string

const (
	Hypothesis Status = "hypothesis"
	Candidate  Status = "candidate"
	Verified   Status = "verified"
	Contested  Status = "contested"
	Retired    Status = "retired"
)

// Valid reports whether s is a known status.
func (s Status) Valid() bool {
	switch s {
	case Hypothesis, Candidate, Verified, Contested, Retired:
		return true
	}
	return false
}

// NextStatus moves an entry's status given its score: hypothesis → candidate →
// verified, verified → contested below ContestBelow, contested → verified when
// it meets the verified bar again. Retired stays retired. pageText says the
// entry carries text taken from a page (answers): it stays at most candidate
// until AnswerSessions independent sessions agree. The second result is the
// reason, for plans and history.
func NextStatus(cur Status, sc Score, pageText bool, p Policy) (Status, string) {
	if cur == "" {
		cur = Hypothesis
	}
	if cur == Retired {
		return Retired, ""
	}
	verifiedOK := sc.Confidence >= p.VerifiedConfidence && sc.Successes >= p.VerifiedSuccesses &&
		allSuccess(sc.LastN, p.VerifiedLastN) && sc.Sessions >= p.VerifiedSessions &&
		(!pageText || sc.Sessions >= p.AnswerSessions) && sc.OpenWrong == "" &&
		(!p.VerifiedNeedsVerdict || sc.Confirmed > 0)
	candidateOK := sc.Confidence >= p.CandidateConfidence && sc.Successes >= p.CandidateSuccesses
	switch cur {
	case Verified:
		switch {
		case sc.OpenWrong != "":
			return Contested, fmt.Sprintf("run %s was judged wrong", sc.OpenWrong)
		case p.ContestLastN > 0 && sc.Streak >= p.ContestLastN:
			return Contested, fmt.Sprintf("the last %d outcomes failed", sc.Streak)
		case sc.Confidence < p.ContestBelow:
			return Contested, fmt.Sprintf("confidence %.2f fell below %.2f", sc.Confidence, p.ContestBelow)
		}
		return Verified, ""
	case Contested:
		if verifiedOK {
			return Verified, fmt.Sprintf("recovered: confidence %.2f, %d successes, last %d successful, %d sessions", sc.Confidence, sc.Successes, p.VerifiedLastN, sc.Sessions)
		}
		return Contested, ""
	}
	if verifiedOK {
		return Verified, fmt.Sprintf("confidence %.2f ≥ %.2f, %d successes, last %d successful, %d sessions", sc.Confidence, p.VerifiedConfidence, sc.Successes, p.VerifiedLastN, sc.Sessions)
	}
	if candidateOK && cur == Hypothesis {
		return Candidate, fmt.Sprintf("confidence %.2f ≥ %.2f with %d successes", sc.Confidence, p.CandidateConfidence, sc.Successes)
	}
	if cur == Candidate && !candidateOK {
		return Hypothesis, fmt.Sprintf("confidence %.2f below %.2f", sc.Confidence, p.CandidateConfidence)
	}
	return cur, ""
}

func allSuccess(last []Outcome, n int) bool {
	if len(last) < n {
		return false
	}
	for _, o := range last {
		if o != Success {
			return false
		}
	}
	return true
}
