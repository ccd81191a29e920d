package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Recall across a site: a recall carries, besides its exact entry, the
// site's own notes (site.go) and up to related_routes routes of other
// intents of the same domain, each with its own tier. Never another
// domain's: only the queried domain's files are read.

// RelatedRoute is another intent's route on the same site.
type RelatedRoute struct {
	Intent     string  `json:"intent"`
	IntentKey  string  `json:"intent_key"`
	Tier       Tier    `json:"tier"` // its own tier, for its own task at the queried URL (DecideTier)
	Confidence float64 `json:"confidence"`
	Status     Status  `json:"status,omitempty"`
	URLPattern string  `json:"url_pattern,omitempty"`
	Overlap    float64 `json:"overlap"` // token overlap of its intent with the queried one (IntentScore)
	OnPage     bool    `json:"on_page"` // learned on the queried URL's page type
	Steps      []Step  `json:"steps"`
	// Reasons are its tier's reasons (DecideTier).
	Reasons []string `json:"reasons"`
}

// maxRelatedCandidates bounds the other entries a query decodes to find its
// related routes: the best by the words of their intent keys.
const maxRelatedCandidates = 4

// addSite adds the site's notes and related routes to r, the recall of the
// query (n, intent). A site entry or a related entry that cannot be read is
// a warning, never a failure of the query.
// Each related route's window of stable confidence narrows r's (r.until).
func (e *Engine) addSite(ctx context.Context, r *Recall, n NormalizedURL, intent string, p Policy, now time.Time) error {
	if ss, ok := e.Store.(SiteStore); ok {
		s, err := ss.Site(ctx, n.Domain)
		switch {
		case err == nil:
			var route []string
			for _, st := range r.Steps {
				if st.Selector != "" {
					route = append(route, st.Selector)
				}
			}
			for _, sel := range r.PrimarySelectors {
				route = append(route, sel)
			}
			r.SiteNotes = ServedNotes(s, Pattern(n), route, p)
		case errors.Is(err, ErrNotFound):
		case errors.Is(err, ErrCorrupt):
			r.Warnings = append(r.Warnings, err.Error())
		default:
			return err
		}
	}
	// Related routes are for a task memory cannot replay: a recall at P1 or
	// P2 has its own route, and a query that reads other tasks' files on the
	// hot path would cost every replay (docs/performance.md, "Query").
	if p.RelatedRoutes <= 0 || r.Tier == P1 || r.Tier == P2 || strings.TrimSpace(intent) == "" {
		return nil
	}
	keys, err := e.Store.FactsKeys(ctx, n.Domain)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	type cand struct {
		key     string
		overlap float64
	}
	var cands []cand
	for _, k := range keys {
		if k == r.IntentKey {
			continue
		}
		// The key's words (the file tells the intent): a cheap first cut.
		if sc := IntentScore(intent, strings.ReplaceAll(k, "-", " ")); sc > 0 {
			cands = append(cands, cand{k, sc})
		}
	}
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].overlap > cands[j].overlap })
	if len(cands) > maxRelatedCandidates {
		cands = cands[:maxRelatedCandidates]
	}
	var routes []RelatedRoute
	for _, c := range cands {
		rr, until, err := e.related(ctx, n, c.key, intent, p, now)
		if until.Before(r.until) {
			r.until = until
		}
		switch {
		case err == nil:
		case errors.Is(err, ErrCorrupt):
			r.Warnings = append(r.Warnings, err.Error())
			continue
		case errors.Is(err, ErrNotFound):
			continue
		default:
			return err
		}
		if rr != nil && rr.Overlap > 0 {
			routes = append(routes, *rr)
		}
	}
	sort.SliceStable(routes, func(i, j int) bool {
		a, b := routes[i], routes[j]
		if a.Overlap != b.Overlap {
			return a.Overlap > b.Overlap
		}
		if a.OnPage != b.OnPage {
			return a.OnPage
		}
		if a.Tier != b.Tier {
			return a.Tier < b.Tier // P1 before P2 …
		}
		if a.Confidence != b.Confidence {
			return a.Confidence > b.Confidence
		}
		return a.IntentKey < b.IntentKey
	})
	if len(routes) > p.RelatedRoutes {
		routes = routes[:p.RelatedRoutes]
	}
	r.RelatedRoutes = routes
	return nil
}

// related is the route of the entry key at n, with its own tier: decided by
// DecideTier for its own intent (an exact match) on the queried page, from
// its facts and folded evidence. nil when it has no route or no runs, or is
// retired. until: the end of the window in which its tier and confidence
// hold (stableUntil; for nil, what does not decay: now + maxKeptLife).
func (e *Engine) related(ctx context.Context, n NormalizedURL, key, intent string, p Policy, now time.Time) (*RelatedRoute, time.Time, error) {
	keep := now.Add(maxKeptLife)
	f, err := e.Store.Facts(ctx, n.Domain, key)
	if err != nil {
		return nil, keep, err
	}
	if f.Status == Retired || len(f.Steps) == 0 {
		return nil, keep, nil
	}
	en := &entry{key: key, intent: f.Intent, facts: f, patterns: append([]string(nil), f.URLPatterns...)}
	// Its summary when the store keeps one and it can tell the score at
	// now (summary.go): a related route needs no more of its evidence.
	summarized := false
	if ss, ok := e.Store.(SummarizedExperience); ok {
		sum, err := ss.ExperienceSummary(ctx, n.Domain, key, p)
		switch {
		case err == nil:
			if sc, ok := sum.ScoreAt(now, p); ok {
				en.score, en.scoreDigest, summarized = &sc, sum.Digest, true
				en.patterns = append(en.patterns, sum.Patterns...)
			}
		case errors.Is(err, ErrNotFound):
			summarized = true
		case errors.Is(err, ErrCorrupt):
		default:
			return nil, keep, err
		}
	}
	if !summarized {
		x, err := e.readExperience(ctx, n.Domain, key)
		switch {
		case err == nil:
			en.exp = x
			en.patterns = append(en.patterns, x.URLPatterns()...)
		case errors.Is(err, ErrNotFound):
		default:
			return nil, keep, err
		}
	}
	rec := e.recallAt(en, n, MatchExact, p, now)
	if rec.Tier == P5 {
		return nil, rec.until, nil
	}
	rr := &RelatedRoute{Intent: f.Intent, IntentKey: key, Tier: rec.Tier, Confidence: rec.Confidence, Status: rec.Status,
		URLPattern: rec.URLPattern, OnPage: rec.basis != nil && rec.basis.PatternOK && rec.basis.QueryPattern != "" && len(rec.basis.Patterns) > 0,
		Steps: append([]Step(nil), f.Steps...), Reasons: rec.Reasons}
	rr.Overlap = round2(IntentScore(intent, f.Intent))
	return rr, rec.until, nil
}

// siteLines renders the site notes for the Memory section: one line each,
// every stored string quoted.
func siteLines(notes []SiteNote) []string {
	var out []string
	for _, n := range notes {
		where := "site note, whole site:"
		if n.URLPattern != "" {
			where = "site note on " + quote(n.URLPattern) + ":"
		}
		seen := fmt.Sprintf("seen under %d %s", len(n.Intents), plural(len(n.Intents), "task", "tasks"))
		switch n.Kind {
		case NoteBlocker:
			out = append(out, fmt.Sprintf("- %s blocker %s (%s)", where, quote(n.Type), seen))
		case NoteRecovery:
			out = append(out, fmt.Sprintf("- %s when %s fails (%s), %s, then retry (%d runs)", where, quote(n.Selector), quote(n.Type), quote(n.Action), len(n.Traces)))
		case NoteAntiPattern:
			out = append(out, fmt.Sprintf("- %s avoid %s (failed, never worked; %s)", where, quote(n.Selector), seen))
		}
	}
	return out
}

// relatedLines renders related routes: its intent, its own tier, and its
// first steps; every stored string quoted.
func relatedLines(routes []RelatedRoute) []string {
	var out []string
	for _, rr := range routes {
		line := fmt.Sprintf("- related route (another task: a hint here) for %s: %s for that task, confidence %.2f", quote(rr.Intent), rr.Tier, rr.Confidence)
		if !rr.OnPage {
			line += ", learned on " + quote(rr.URLPattern)
		}
		out = append(out, line)
		for i, s := range rr.Steps {
			if i == 4 {
				out = append(out, fmt.Sprintf("    (%d more steps)", len(rr.Steps)-4))
				break
			}
			out = append(out, "    "+stepLine(i, s))
		}
	}
	return out
}
