package agent

import (
	"strings"

	"github.com/pemdev/pem/engine"
)

// hintsOf is the structured advice a planner gets from a recall
// (State.Hints): the route without its detours, anti-patterns, and the
// recoveries (interaction hints, blockers' notes and actions).
func hintsOf(rc *engine.Recall) Hints {
	var h Hints
	if rc == nil {
		return h
	}
	// Another intent's route (an overlap match) is no route for this task.
	if rc.Match == "" || rc.Match == engine.MatchExact {
		h.Route = Route(rc.Steps)
	}
	h.AntiPatterns = append(h.AntiPatterns, rc.AntiPatterns...)
	for _, n := range rc.InteractionHints {
		h.Recoveries = append(h.Recoveries, Recovery{Note: n})
	}
	for _, b := range rc.KnownBlockers {
		if b.Selector != "" || b.Action != "" || b.Note != "" {
			h.Recoveries = append(h.Recoveries, Recovery{Selector: b.Selector, Note: strings.TrimSpace(b.Action + " " + b.Note)})
		}
	}
	// What holds for the whole site, learned under every intent.
	for _, n := range rc.SiteNotes {
		switch n.Kind {
		case engine.NoteAntiPattern:
			if n.Selector != "" {
				h.AntiPatterns = append(h.AntiPatterns, n.Selector)
			}
		case engine.NoteRecovery:
			h.Recoveries = append(h.Recoveries, Recovery{URLPattern: n.URLPattern, Selector: n.Selector, Action: n.Action})
		}
	}
	return h
}

// RecalledBlocks names the blocks of memory a recall gave a run, in the
// order the Memory section renders them: "route", "selectors", "blockers",
// "anti_patterns", "hints", "answers", "success_condition", then the
// site's "site_notes" and "related_routes". Nothing known gives none.
func RecalledBlocks(rc *engine.Recall) []string {
	if !Recalled(rc) {
		return nil
	}
	var out []string
	add := func(name string, ok bool) {
		if ok {
			out = append(out, name)
		}
	}
	add("route", len(rc.Steps) > 0)
	add("selectors", len(rc.PrimarySelectors) > 0)
	add("blockers", len(rc.KnownBlockers) > 0)
	add("anti_patterns", len(rc.AntiPatterns) > 0)
	add("hints", len(rc.InteractionHints) > 0)
	add("answers", len(rc.Answers) > 0)
	add("success_condition", !rc.SuccessCondition.Empty())
	add("site_notes", len(rc.SiteNotes) > 0)
	add("related_routes", len(rc.RelatedRoutes) > 0)
	return out
}

// Recalled reports whether a recall holds anything for the planner: an
// entry (P1–P4), or at P5 the site's notes or other tasks' routes.
func Recalled(rc *engine.Recall) bool {
	return rc != nil && (rc.Tier != engine.P5 && rc.Tier != "" || len(rc.SiteNotes) > 0 || len(rc.RelatedRoutes) > 0)
}

// withoutDetours drops the detours of a route: a navigation back to a page
// the route had already reached makes the steps in between (and the
// navigation itself) a detour, when those steps only moved between pages
// (clicks, navigations, scrolls, waits) or searched (typed a value that is
// no secret). A detour that signed in or read a value is kept: its cookie
// or its value may matter.
func withoutDetours(route []engine.Step) []engine.Step {
	out := append([]engine.Step(nil), route...)
	for changed := true; changed; {
		changed = false
		for i := len(out) - 1; i > 0 && !changed; i-- {
			if out[i].Action != "navigate" {
				continue
			}
			target := firstNonEmpty(out[i].URL, out[i].Value)
			for j := 0; j < i; j++ {
				if out[j].URL == "" || !sameURL(out[j].URL, target) {
					continue
				}
				if !onlyMoves(out[j+1 : i]) {
					break
				}
				out = append(out[:j+1], out[i+1:]...)
				changed = true
				break
			}
		}
	}
	for i := range out {
		out[i].Seq = i + 1
	}
	return out
}

func onlyMoves(steps []engine.Step) bool {
	for _, s := range steps {
		switch s.Action {
		case "click", "navigate", "scroll", "wait":
		case "type", "press":
			if len(SecretNamesIn(s.Value)) > 0 || s.Value == engine.Redacted {
				return false
			}
		default:
			return false
		}
	}
	return true
}
