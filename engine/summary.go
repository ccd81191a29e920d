package engine

import (
	"context"
	"slices"
	"time"
)

// ExperienceSummary is what a related route needs of an experience
// (related.go) without its evidence: its URL patterns, and its score at
// the time of its newest evidence, from which its score at any later time
// follows (ScoreAt) — every weight decays by the same factor from then on.
// A store may keep summaries beside an entry's file (SummarizedExperience),
// so that a query below P2 in a new process reads four small summaries
// instead of decoding four entries' evidence (docs/performance.md).
type ExperienceSummary struct {
	Domain, IntentKey string
	Patterns          []string // Experience.URLPatterns
	// Policy is the policy the score was computed under: ScoreAt answers
	// under that policy only.
	Policy Policy
	// Ref is the start of the newest live evidence (zero: none); Score is
	// the live evidence's score at Ref, without Sessions and Confidence.
	Ref   time.Time
	Score Score
	// What merging the digest needs of the live evidence (liveFacts): the
	// sessions with a success when there is a digest (the two sets join),
	// else only their number.
	Sessions  []string
	NSessions int
	Route     int
	AnyRun    bool
	AnyJudged bool
	Digest    *Digest
	Format    int // SummaryFormat
	Evidence  int // live evidence items summarized
}

// SummaryFormat changes when ExperienceSummary's meaning does: a summary of
// another format is recomputed.
const SummaryFormat = 1

// SummarizedExperience is what a Store may also offer: the summary of an
// experience under policy p, computed by Summarize and kept while the file
// is unchanged. Returns ErrNotFound or ErrCorrupt as Experience does.
type SummarizedExperience interface {
	ExperienceSummary(ctx context.Context, domain, key string, p Policy) (*ExperienceSummary, error)
}

// Summarize is the summary of x under policy p.
func Summarize(x *Experience, p Policy) *ExperienceSummary {
	s := &ExperienceSummary{Domain: x.Domain, IntentKey: x.IntentKey, Patterns: x.URLPatterns(), Policy: p,
		Format: SummaryFormat, Evidence: len(x.Evidence), Digest: x.Digest.Clone()}
	for i := range x.Evidence {
		if at := x.Evidence[i].At; at.After(s.Ref) {
			s.Ref = at
		}
	}
	sc, lf := scoreLive(x.Evidence, s.Ref, p)
	s.Score = sc
	s.Route, s.AnyRun, s.AnyJudged, s.NSessions = lf.route, lf.anyRun, lf.judged, len(lf.sessions)
	if x.Digest != nil {
		for k := range lf.sessions {
			s.Sessions = append(s.Sessions, k)
		}
		slices.Sort(s.Sessions)
	}
	return s
}

// scoreBand: a confidence from a summary differs from the one summed over
// the evidence by rounding only (well under 1e-10 for 10^5 items); within
// scoreBand of a value where what is printed or decided changes, ScoreAt
// declines and the entry is scored from its evidence.
const scoreBand = 1e-8

// ScoreAt is the score of the summarized experience at now under p, as
// ScoreOf would compute it from the evidence; false when the summary cannot
// tell: another policy, evidence newer than now, or a confidence so near a
// tier threshold or a rounding boundary that rounding could decide.
func (s *ExperienceSummary) ScoreAt(now time.Time, p Policy) (Score, bool) {
	if s == nil || s.Format != SummaryFormat || s.Policy != p || now.Before(s.Ref) {
		return Score{}, false
	}
	if s.Evidence == 0 && s.Digest == nil {
		return Score{}, true
	}
	sc := s.Score
	sc.LastN = slices.Clone(s.Score.LastN)
	a := Decay(now.Sub(s.Ref), p.HalfLifeDays)
	sc.S *= a
	sc.F *= a
	lf := liveFacts{route: s.Route, anyRun: s.AnyRun, judged: s.AnyJudged}
	if s.Digest != nil {
		lf.sessions = make(map[string]struct{}, len(s.Sessions))
		for _, k := range s.Sessions {
			lf.sessions[k] = struct{}{}
		}
		sc.addDigest(s.Digest, &lf, now, p)
		sc.Sessions = len(lf.sessions)
	} else {
		sc.Sessions = s.NSessions
	}
	sc.Confidence = ConfidenceOf(sc.S, sc.F, p.FirstSuccessConfidence)
	if nearBoundary(sc.Confidence, p) {
		return Score{}, false
	}
	return sc, true
}

// nearBoundary reports whether c is within scoreBand of a value where a
// printed confidence (two decimals) or a tier threshold changes.
func nearBoundary(c float64, p Policy) bool {
	for _, t := range []float64{p.P1, p.P2, p.P3} {
		if c > t-scoreBand && c < t+scoreBand {
			return true
		}
	}
	half := float64(int64(c*100+0.5)) - 0.5 // the half-point at or below c·100
	return c*100-half < 100*scoreBand || half+1-c*100 < 100*scoreBand
}
