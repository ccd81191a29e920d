package engine

import (
	"fmt"
	"strings"
)

// TierBasis is everything a tier is decided from: the entry's score and
// state, how it was found, and the facts of the run at hand. DecideTier is
// the one place these become a tier; Query fills the basis, and the agent
// adds runtime facts (Recall.Apply).
type TierBasis struct {
	Score       Score
	Status      Status
	Revision    string // the facts revision served
	OpenBlocker bool   // a gate nothing is known to get past

	Match         string   // MatchExact (or ""), MatchOverlap, MatchURL
	MatchedIntent string   // for an overlap: the intent that matched
	Patterns      []string // the entry's URL patterns
	QueryPattern  string   // the queried URL's pattern; "" when no URL was given
	PatternOK     bool     // the queried URL matches one of Patterns (or nothing to compare)

	Unbound string // runtime: a route parameter this run cannot bind
}

// DecideTier maps a basis to a tier under p, with the reasons: one line per
// condition that decided it and one per unmet condition of the next tier up.
// A tier holds when every condition of it holds:
//
//	P4: at least one run.
//	P3: confidence ≥ p3.
//	P2: confidence ≥ p2; successes from ≥ p2_sessions sessions; no open wrong
//	    verdict; an exact intent match; the URL on one of the entry's patterns.
//	P1: all of P2; confidence ≥ p1; status verified; no open blocker; every
//	    route parameter bound.
func DecideTier(b TierBasis, p Policy) (Tier, []string) {
	sc := b.Score
	if sc.Runs() == 0 {
		why := "P5: no runs recorded, nothing to trust"
		if sc.Lessons > 0 {
			why = fmt.Sprintf("P5: %d %s recorded but no runs: lessons are hints, not evidence", sc.Lessons, plural(sc.Lessons, "lesson", "lessons"))
		}
		return P5, []string{why, "P4 needs at least one run; none so far"}
	}
	type cond tierCond
	c := sc.Confidence
	// Each condition's reason lines are formatted only when a tier's
	// reasons use them (a query decides a tier for every related route).
	conf := func(t Tier, min float64) tierCond {
		return tierCond{c >= min,
			func() string {
				return fmt.Sprintf("confidence %.2f ≥ %.2f (%d %s, %d %s)", c, min, sc.Successes, plural(sc.Successes, "success", "successes"), sc.Failures, plural(sc.Failures, "failure", "failures"))
			},
			func() string {
				return fmt.Sprintf("%s needs confidence ≥ %.2f; %.2f so far (%d %s, %d %s)", t, min, c, sc.Successes, plural(sc.Successes, "success", "successes"), sc.Failures, plural(sc.Failures, "failure", "failures"))
			}}
	}
	p2 := []tierCond{
		conf(P2, p.P2),
		{sc.Sessions >= p.P2Sessions,
			func() string {
				return fmt.Sprintf("successes from %d %s (P2 needs %d)", sc.Sessions, plural(sc.Sessions, "session", "sessions"), p.P2Sessions)
			},
			func() string {
				return fmt.Sprintf("P2 needs successes from %d sessions; %d so far", p.P2Sessions, sc.Sessions)
			}},
		{!sc.WrongHolds(b.Revision), text("no open wrong verdict"),
			func() string {
				return fmt.Sprintf("P2 needs no open wrong verdict; run %s was judged wrong (a newer run judged right, or a new route, lifts it)", sc.OpenWrong)
			}},
		matchCond(b),
		patternCond(b),
	}
	p1 := []tierCond{
		conf(P1, p.P1),
		{b.Status == Verified, text("status verified"), func() string { return fmt.Sprintf("P1 needs status verified; status is %s", orDash(string(b.Status))) }},
		{!b.OpenBlocker && sc.OpenGate == "", text("no open blocker"), func() string { return openBlockerLack(b) }},
		{b.Unbound == "", text("every route parameter bound"), func() string {
			return fmt.Sprintf("P1 needs every route parameter bound; this run cannot bind %s", b.Unbound)
		}},
	}
	all := func(cs []tierCond) bool {
		for _, x := range cs {
			if !x.ok {
				return false
			}
		}
		return true
	}
	lacks := func(cs []tierCond) []string {
		var out []string
		for _, x := range cs {
			if !x.ok {
				out = append(out, x.lack())
			}
		}
		return out
	}
	held := func(t Tier, cs []tierCond) string {
		var hs []string
		for _, x := range cs {
			hs = append(hs, x.held())
		}
		return string(t) + ": " + strings.Join(hs, "; ")
	}
	p3 := conf(P3, p.P3)
	switch {
	case all(p2) && all(p1):
		return P1, []string{held(P1, append(p1, p2[1:]...))}
	case all(p2):
		return P2, append([]string{held(P2, p2)}, lacks(p1)...)
	case p3.ok:
		return P3, append([]string{"P3: " + p3.held()}, lacks(p2)...)
	default:
		return P4, []string{fmt.Sprintf("P4: confidence %.2f below %.2f: advisory only", c, p.P3), p3.lack()}
	}
}

// tierCond is one condition of a tier: whether it holds, and its reason line
// when it does (held) and when it does not (lack).
type tierCond struct {
	ok         bool
	held, lack func() string
}

// text is a reason line that needs no formatting.
func text(s string) func() string { return func() string { return s } }

func matchCond(b TierBasis) tierCond {
	switch b.Match {
	case MatchOverlap:
		return tierCond{false, text(""), func() string {
			return fmt.Sprintf("P2 needs the exact intent; matched %q by word overlap (another task's route is a hint, never replayed)", b.MatchedIntent)
		}}
	case MatchURL:
		return tierCond{false, text(""), text("P2 needs an intent; none given, matched by URL pattern only")}
	}
	return tierCond{true, text("exact intent"), text("")}
}

func patternCond(b TierBasis) tierCond {
	if b.PatternOK {
		held := "URL on a learned page type"
		if b.QueryPattern == "" {
			held = "no URL to check the page type against"
		}
		return tierCond{true, text(held), text("")}
	}
	return tierCond{false, text(""), func() string {
		return fmt.Sprintf("P2 needs the URL on a page type the entry was learned on; %s matches none of %s", b.QueryPattern, strings.Join(b.Patterns, " "))
	}}
}

func openBlockerLack(b TierBasis) string {
	if b.Score.OpenGate != "" {
		return fmt.Sprintf("P1 needs no open blocker; the latest run was stopped by %s", b.Score.OpenGate)
	}
	return "P1 needs no open blocker; a known gate has no way past it recorded"
}

// Apply re-decides the recall's tier with a runtime fact of the run at hand
// (a route parameter it cannot bind) and returns the new tier. The reasons
// follow. A recall decoded from JSON (no basis) only loses P1.
func (r *Recall) Apply(unbound string, p Policy) Tier {
	if unbound == "" {
		return r.Tier
	}
	if r.basis == nil {
		if r.Tier == P1 {
			r.Tier = P2
			r.Reasons = append(r.Reasons, fmt.Sprintf("P1 needs every route parameter bound; this run cannot bind %s", unbound))
		}
		return r.Tier
	}
	b := *r.basis
	b.Unbound = unbound
	r.Tier, r.Reasons = DecideTier(b, p)
	r.basis = &b
	return r.Tier
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
