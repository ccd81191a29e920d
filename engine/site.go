package engine

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// Site-wide memory (docs/data-model.md, "Site entry"): what holds for a
// whole domain, or for one URL pattern of it, whatever the task — blockers,
// selectors that keep failing, recoveries — learned from the runs of every
// intent of the domain and served with every recall of it.
//
// The site entry is derived: consolidation folds each new run into it
// (FoldSite) and is its only writer. Every field is a join (sets of intent
// keys and trace ids capped by a fixed order, the newest time), so folding a
// run twice, or merging two branches' files, gives the same entry.

// SiteKey is the name of a domain's site entry in its facts directory
// (facts/<domain>/_site.yaml). It can never be an intent key: those are
// [a-z0-9-] (ValidKey).
const SiteKey = "_site"

// The kinds of site notes.
const (
	NoteBlocker     = "blocker"      // a gate or an overlay stopped runs of several intents
	NoteAntiPattern = "anti_pattern" // a selector failed under several intents and never worked
	NoteRecovery    = "recovery"     // on a URL pattern, a failed step worked after a wait, scroll or dismissal
)

// Caps of a site entry.
const (
	MaxSiteIntents = 20  // intent keys kept per note (the first in order)
	MaxSiteTraces  = 10  // trace ids kept per note (the newest)
	MaxSiteNotes   = 100 // notes kept per site (served ones first, then the newest)
)

// Site is the site entry of one domain.
type Site struct {
	Format int        `yaml:"format" json:"format"`
	Domain string     `yaml:"domain" json:"domain"`
	Notes  []SiteNote `yaml:"notes,omitempty" json:"notes,omitempty"`
}

// SiteNote is one thing learned about a site. Kind, URLPattern, Type,
// Selector and Action identify it; the rest is its evidence.
type SiteNote struct {
	Kind       string `yaml:"kind" json:"kind"`
	URLPattern string `yaml:"url_pattern,omitempty" json:"url_pattern,omitempty"` // "": the whole site
	Type       string `yaml:"type,omitempty" json:"type,omitempty"`               // blocker: the failure category; recovery: the failed step's error kind
	Selector   string `yaml:"selector,omitempty" json:"selector,omitempty"`       // anti_pattern, recovery: the element
	Action     string `yaml:"action,omitempty" json:"action,omitempty"`           // recovery: what got past it
	// Intents the note was seen under (intent keys, sorted), Traces the
	// newest runs that showed it, Worked the intents under which an
	// anti-pattern's selector worked (which keeps it from being served).
	Intents  []string  `yaml:"intents" json:"intents"`
	Traces   []string  `yaml:"traces" json:"traces"`
	Worked   []string  `yaml:"worked,omitempty" json:"worked,omitempty"`
	LastSeen time.Time `yaml:"last_seen" json:"last_seen"`
}

func (n SiteNote) key() string {
	return n.Kind + "\x00" + n.URLPattern + "\x00" + n.Type + "\x00" + n.Selector + "\x00" + n.Action
}

// Served reports whether a note holds for the site under p: a blocker seen
// under ≥ site_min_intents intents; an anti-pattern whose selector failed
// under ≥ site_min_intents intents and never worked; a recovery seen in ≥
// site_recovery_runs runs.
func (n SiteNote) Served(p Policy) bool {
	switch n.Kind {
	case NoteBlocker:
		return len(n.Intents) >= p.SiteMinIntents
	case NoteAntiPattern:
		return len(n.Intents) >= p.SiteMinIntents && len(n.Worked) == 0
	case NoteRecovery:
		return len(n.Traces) >= p.SiteRecoveryRuns
	}
	return false
}

// siteGates are the failure categories that become site blockers.
var siteGates = []FailureCategory{AntiBot, AuthRequired, PermissionDenied, OverlayBlocked}

// SiteNotesOf returns what one run teaches about its site (notes with this
// run as their only evidence), and the selectors that worked in it. A run
// the injection screen flags teaches nothing.
func SiteNotesOf(t *Trace) (notes []SiteNote, worked []string) {
	if t == nil || len(t.Steps) == 0 || Injection(t) != "" {
		return nil, nil
	}
	one := func(n SiteNote) SiteNote {
		n.Intents, n.Traces, n.LastSeen = []string{t.IntentKey}, []string{t.ID}, t.StartedAt.UTC()
		return n
	}
	if t.Outcome == Failure {
		c := t.FailureCategory
		if c == "" {
			c = Classify(t)
		}
		if slices.Contains(siteGates, c) {
			notes = append(notes, one(SiteNote{Kind: NoteBlocker, Type: string(c)}))
		}
	}
	page := t.URL
	okLater := func(i int, sel string) int {
		for k := i + 1; k < len(t.Steps); k++ {
			if s := t.Steps[k]; s.OK && s.Selector == sel && s.Action == t.Steps[i].Action {
				return k
			}
		}
		return -1
	}
	for i, s := range t.Steps {
		if s.Action == "navigate" {
			if s.OK && s.URL != "" {
				page = s.URL
			}
			continue
		}
		if s.OK && s.Selector != "" && !slices.Contains(worked, s.Selector) {
			worked = append(worked, s.Selector)
		}
		if s.OK || s.Selector == "" {
			continue
		}
		k := okLater(i, s.Selector)
		if k < 0 {
			anyOK := false
			for _, x := range t.Steps[i+1:] {
				anyOK = anyOK || x.OK && x.Selector == s.Selector
			}
			if !anyOK {
				notes = append(notes, one(SiteNote{Kind: NoteAntiPattern, Selector: s.Selector}))
			}
			continue
		}
		if fix, ok := recoveryOf(t.Steps[i+1 : k]); ok {
			notes = append(notes, one(SiteNote{Kind: NoteRecovery, URLPattern: patternOf(page, t.URLPattern),
				Type: firstNonEmpty(s.ErrorKind, "failed"), Selector: s.Selector, Action: fix}))
		}
	}
	return notes, worked
}

// recoveryOf describes the steps between a failed step and its successful
// retry when they are a recovery (waits, scrolls, key presses, a click on
// another element: a dismissal); a retry with nothing between is "retry".
func recoveryOf(between []Step) (string, bool) {
	if len(between) == 0 {
		return "retry", true
	}
	if len(between) > 3 {
		return "", false
	}
	var parts []string
	for _, s := range between {
		switch s.Action {
		case "wait", "scroll":
			parts = append(parts, s.Action)
		case "press":
			parts = append(parts, "press "+s.Value)
		case "click":
			if s.Selector == "" {
				return "", false
			}
			parts = append(parts, "click "+s.Selector)
		default:
			return "", false
		}
	}
	return strings.Join(parts, ", then "), true
}

func patternOf(raw, fallback string) string {
	if n, err := NormalizeURL(raw); err == nil {
		return Pattern(n)
	}
	return fallback
}

// FoldSite adds runs to a domain's site entry and returns it (s is not
// changed; nil s starts one). A run of another domain is ignored. Folding
// the same runs again changes nothing.
func FoldSite(s *Site, domain string, runs []*Trace) *Site {
	out := s.Clone()
	if out == nil {
		out = &Site{Format: Format, Domain: domain}
	}
	var add []SiteNote
	var worked [][2]string // intent key, selector
	for _, t := range runs {
		if t == nil || t.Domain != domain {
			continue
		}
		ns, ws := SiteNotesOf(t)
		add = append(add, ns...)
		for _, w := range ws {
			worked = append(worked, [2]string{t.IntentKey, w})
		}
	}
	out.Notes = mergeNotes(out.Notes, add)
	for _, w := range worked {
		out.markWorked(w[0], w[1:])
	}
	return out
}

// MarkWorked records that the selectors worked under an intent (from its
// experience's selector record): an anti-pattern on one of them is no longer
// served. It returns the result (s is not changed).
func MarkWorked(s *Site, intentKey string, selectors []string) *Site {
	out := s.Clone()
	if out != nil {
		out.markWorked(intentKey, selectors)
	}
	return out
}

func (s *Site) markWorked(intentKey string, selectors []string) {
	for i := range s.Notes {
		n := &s.Notes[i]
		if n.Kind == NoteAntiPattern && slices.Contains(selectors, n.Selector) && !slices.Contains(n.Worked, intentKey) {
			n.Worked = capSet(append(n.Worked, intentKey), MaxSiteIntents, false)
		}
	}
}

// MergeSite is the union of two site entries of one domain (the merge driver's rule).
func MergeSite(a, b *Site) (*Site, error) {
	if a == nil || b == nil {
		return nil, fmt.Errorf("merge site: both sides are needed")
	}
	if a.Domain != b.Domain {
		return nil, fmt.Errorf("merge site: sides describe different domains (%s and %s)", a.Domain, b.Domain)
	}
	return &Site{Format: max(a.Format, b.Format), Domain: a.Domain, Notes: mergeNotes(a.Notes, b.Notes)}, nil
}

// mergeNotes is the union of two note lists, keyed, in canonical order:
// by kind, pattern, type, selector, action; capped at MaxSiteNotes (served
// notes under the default policy first, then the most recently seen).
func mergeNotes(a, b []SiteNote) []SiteNote {
	by := map[string]*SiteNote{}
	var keys []string
	for _, side := range [][]SiteNote{a, b} {
		for _, n := range side {
			k := n.key()
			m := by[k]
			if m == nil {
				c := n
				c.Intents, c.Traces, c.Worked = nil, nil, nil
				m = &c
				by[k] = m
				keys = append(keys, k)
			}
			m.Intents = append(m.Intents, n.Intents...)
			m.Traces = append(m.Traces, n.Traces...)
			m.Worked = append(m.Worked, n.Worked...)
			if n.LastSeen.After(m.LastSeen) {
				m.LastSeen = n.LastSeen.UTC()
			}
		}
	}
	out := make([]SiteNote, 0, len(keys))
	for _, k := range keys {
		m := by[k]
		m.Intents = capSet(m.Intents, MaxSiteIntents, false)
		m.Traces = capSet(m.Traces, MaxSiteTraces, true)
		m.Worked = capSet(m.Worked, MaxSiteIntents, false)
		out = append(out, *m)
	}
	if len(out) > MaxSiteNotes {
		p := DefaultPolicy()
		sort.SliceStable(out, func(i, j int) bool {
			si, sj := out[i].Served(p), out[j].Served(p)
			if si != sj {
				return si
			}
			if !out[i].LastSeen.Equal(out[j].LastSeen) {
				return out[i].LastSeen.After(out[j].LastSeen)
			}
			return out[i].key() < out[j].key()
		})
		out = out[:MaxSiteNotes]
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key() < out[j].key() })
	if len(out) == 0 {
		return nil
	}
	return out
}

// Equal reports whether two site entries hold the same (empty and absent
// lists are the same thing on disk).
func (s *Site) Equal(o *Site) bool {
	if s == nil || o == nil {
		return s == o
	}
	if s.Format != o.Format || s.Domain != o.Domain || len(s.Notes) != len(o.Notes) {
		return false
	}
	for i, a := range s.Notes {
		b := o.Notes[i]
		if a.key() != b.key() || !a.LastSeen.Equal(b.LastSeen) || !slices.Equal(a.Intents, b.Intents) ||
			!slices.Equal(a.Traces, b.Traces) || !slices.Equal(a.Worked, b.Worked) {
			return false
		}
	}
	return true
}

// capSet sorts and deduplicates xs and keeps n of them: the first n, or with
// newest the last n (trace ids sort by time), newest first.
func capSet(xs []string, n int, newest bool) []string {
	out := dedupe(xs)
	sort.Strings(out)
	if newest {
		slices.Reverse(out)
	}
	if len(out) > n {
		out = out[:n]
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// Clone returns a deep copy of s (nil for nil).
func (s *Site) Clone() *Site {
	if s == nil {
		return nil
	}
	c := *s
	c.Notes = slices.Clone(s.Notes)
	for i := range c.Notes {
		n := &c.Notes[i]
		n.Intents, n.Traces, n.Worked = slices.Clone(n.Intents), slices.Clone(n.Traces), slices.Clone(n.Worked)
	}
	return &c
}

// ServedNotes returns the notes of s that hold under p and apply at the
// queried page pattern (a note on a pattern applies on that pattern; a
// site-wide one everywhere; with no pattern given, all), most useful first:
// notes on this very page, then blockers, recoveries, anti-patterns; among
// equals the one seen under the most intents, then the newest. Anti-patterns
// whose selector the exact entry's route uses are left out (route: the
// selectors of the route served).
func ServedNotes(s *Site, pattern string, route []string, p Policy) []SiteNote {
	if s == nil {
		return nil
	}
	var out []SiteNote
	for _, n := range s.Notes {
		if !n.Served(p) || n.URLPattern != "" && pattern != "" && n.URLPattern != pattern {
			continue
		}
		if n.Kind == NoteAntiPattern && slices.Contains(route, n.Selector) || noteInjection(n) != "" {
			continue
		}
		out = append(out, n)
	}
	rank := map[string]int{NoteBlocker: 0, NoteRecovery: 1, NoteAntiPattern: 2}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if pa, pb := a.URLPattern != "", b.URLPattern != ""; pa != pb {
			return pa
		}
		if rank[a.Kind] != rank[b.Kind] {
			return rank[a.Kind] < rank[b.Kind]
		}
		if len(a.Intents) != len(b.Intents) {
			return len(a.Intents) > len(b.Intents)
		}
		return a.LastSeen.After(b.LastSeen)
	})
	return out
}

// noteInjection reports why a site note's text reads as an instruction ("":
// it does not). Notes come from runs the screen passed; a hand edit may not.
func noteInjection(n SiteNote) string {
	sc := &screener{}
	sc.text("site note", withoutPlaceholders(strings.Join([]string{n.Kind, n.Type, n.Selector, n.Action}, "\n")))
	sc.text("site note pattern", n.URLPattern)
	return sc.why
}

// SiteInjection reports why a site entry holds injected text ("" when it
// does not), for pem check.
func SiteInjection(s *Site) string {
	if s == nil {
		return ""
	}
	for _, n := range s.Notes {
		if why := noteInjection(n); why != "" {
			return why
		}
	}
	return ""
}

// CheckInjectedSite reports a site entry holding text the screen flags
// (SiteInjection): such notes are never served.
func CheckInjectedSite(path string, s *Site) *CheckProblem {
	why := SiteInjection(s)
	if why == "" {
		return nil
	}
	return &CheckProblem{Kind: CheckInjection, Path: path,
		Msg: "its " + why + ", which reads as an instruction to the agent: edit it out (such a note is never served)"}
}
