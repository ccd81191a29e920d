package engine

import (
	"fmt"
	"math"
	"time"
)

// Evidence is one folded outcome: what confidence is computed from. Experience
// keeps one per folded trace, and keeps it after the trace itself expired, so
// the TTL loses no evidence.
type Evidence struct {
	Trace      string          `yaml:"trace" json:"trace"`
	At         time.Time       `yaml:"at" json:"at"`
	Outcome    Outcome         `yaml:"outcome" json:"outcome"`
	Category   FailureCategory `yaml:"category,omitempty" json:"category,omitempty"`
	Session    string          `yaml:"session,omitempty" json:"session,omitempty"`
	URLPattern string          `yaml:"url_pattern,omitempty" json:"url_pattern,omitempty"`
	Steps      int             `yaml:"steps,omitempty" json:"steps,omitempty"`
	DurationMs int64           `yaml:"duration_ms,omitempty" json:"duration_ms,omitempty"`
}

// EvidenceOf summarizes a trace as evidence.
func EvidenceOf(t *Trace) Evidence {
	e := Evidence{Trace: t.ID, At: t.StartedAt.UTC(), Outcome: t.Outcome, Session: t.Session,
		URLPattern: t.URLPattern, Steps: len(t.Steps), DurationMs: t.DurationMs}
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
	Successes  int     // raw counts
	Failures   int     // raw counts, gates included
	Gates      int     // failures that were gates (anti_bot, auth_required, permission_denied)
	S, F       float64 // decayed, weighted
	Confidence float64 // (1+S)/(2+S+F); 0 when there is no evidence
	Sessions   int     // distinct sessions with a success
	LastN      []Outcome
	OpenGate   FailureCategory // set when the newest outcome is a gate failure
}

// Confidence computes the score of evidence at time now under policy p.
// confidence = (1 + S) / (2 + S + F) over decayed successes S and decayed,
// category-weighted failures F. No evidence: confidence 0 (tier P5).
// Evidence with the same trace id counts once.
func Confidence(ev []Evidence, now time.Time, p Policy) Score {
	var sc Score
	if len(ev) == 0 {
		return sc
	}
	seen := make(map[string]bool, len(ev))
	sessions := map[string]bool{}
	var newest *Evidence
	for i, e := range ev {
		if e.Trace != "" {
			if seen[e.Trace] {
				continue
			}
			seen[e.Trace] = true
		}
		w := Decay(now.Sub(e.At), p.HalfLifeDays)
		if e.Outcome == Success {
			sc.Successes++
			sc.S += w
			s := e.Session
			if s == "" {
				s = "trace:" + e.Trace
			}
			sessions[s] = true
		} else {
			sc.Failures++
			if e.Category.IsGate() {
				sc.Gates++
			}
			sc.F += w * p.FailureWeight(e.Category)
		}
		if newest == nil || newer(e, *newest) { // ties broken by trace id, as in lastOutcomes
			newest = &ev[i]
			if e.Outcome == Failure && e.Category.IsGate() {
				sc.OpenGate = e.Category
			} else {
				sc.OpenGate = ""
			}
		}
	}
	sc.Sessions = len(sessions)
	sc.Confidence = (1 + sc.S) / (2 + sc.S + sc.F)
	sc.LastN = lastOutcomes(ev, p.VerifiedLastN)
	return sc
}

// lastOutcomes returns the n newest outcomes, newest first (gates skipped: they
// say nothing about the route).
func lastOutcomes(ev []Evidence, n int) []Outcome {
	idx := make([]int, 0, len(ev))
	for i := range ev {
		if ev[i].Outcome == Failure && ev[i].Category.IsGate() {
			continue
		}
		idx = append(idx, i)
	}
	// insertion sort by time descending, stable on trace id; n is small.
	for i := 1; i < len(idx); i++ {
		for j := i; j > 0 && newer(ev[idx[j]], ev[idx[j-1]]); j-- {
			idx[j], idx[j-1] = idx[j-1], idx[j]
		}
	}
	var out []Outcome
	for _, i := range idx {
		if len(out) == n {
			break
		}
		out = append(out, ev[i].Outcome)
	}
	return out
}

func newer(a, b Evidence) bool {
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

// ChooseTier maps a score and the entry's status to a tier. P1 requires status
// verified and no open blocker; otherwise the tier is at most P2.
func ChooseTier(sc Score, status Status, openBlocker bool, p Policy) Tier {
	if sc.Successes+sc.Failures == 0 {
		return P5
	}
	c := sc.Confidence
	switch {
	case c >= p.P1:
		if status == Verified && !openBlocker && sc.OpenGate == "" {
			return P1
		}
		return P2
	case c >= p.P2:
		return P2
	case c >= p.P3:
		return P3
	default:
		return P4
	}
}

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
		(!pageText || sc.Sessions >= p.AnswerSessions)
	candidateOK := sc.Confidence >= p.CandidateConfidence && sc.Successes >= p.CandidateSuccesses
	switch cur {
	case Verified:
		if sc.Confidence < p.ContestBelow {
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
