package engine

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Facts is the reviewed knowledge of one (domain, intent): what humans read in
// pull requests and what Query serves.
type Facts struct {
	Format          int                 `yaml:"format" json:"format"`
	Domain          string              `yaml:"domain" json:"domain"`
	Intent          string              `yaml:"intent" json:"intent"`
	IntentKey       string              `yaml:"intent_key" json:"intent_key"`
	TaskType        string              `yaml:"task_type,omitempty" json:"task_type,omitempty"`
	URLPatterns     []string            `yaml:"url_patterns,omitempty" json:"url_patterns,omitempty"`
	Status          Status              `yaml:"status" json:"status"`
	Revision        string              `yaml:"revision,omitempty" json:"revision,omitempty"`
	Supersedes      string              `yaml:"supersedes,omitempty" json:"supersedes,omitempty"`
	Selectors       map[string]Selector `yaml:"selectors,omitempty" json:"selectors,omitempty"`
	Steps           []Step              `yaml:"steps,omitempty" json:"steps,omitempty"`
	ExtractionQuery string              `yaml:"extraction_query,omitempty" json:"extraction_query,omitempty"`
	// SuccessCondition is what the route's successful runs had in common at
	// the end (success.go); a replay checks it live.
	SuccessCondition *SuccessCondition `yaml:"success_condition,omitempty" json:"success_condition,omitempty"`
	InteractionHints []string          `yaml:"interaction_hints,omitempty" json:"interaction_hints,omitempty"`
	KnownBlockers    []Blocker         `yaml:"known_blockers,omitempty" json:"known_blockers,omitempty"`
	AntiPatterns     []string          `yaml:"anti_patterns,omitempty" json:"anti_patterns,omitempty"`
	Answers          []Answer          `yaml:"answers,omitempty" json:"answers,omitempty"`
	Provenance       Provenance        `yaml:"provenance,omitempty" json:"provenance,omitempty"`
	History          []Transition      `yaml:"history,omitempty" json:"history,omitempty"`
}

// Selector is a named element of the route with its fallbacks.
type Selector struct {
	Primary   string   `yaml:"primary" json:"primary"`
	Fallbacks []string `yaml:"fallbacks,omitempty" json:"fallbacks,omitempty"`
	Stability float64  `yaml:"stability,omitempty" json:"stability,omitempty"`
}

// Blocker is something that stands in a run's way, and what gets past it.
type Blocker struct {
	Type     string `yaml:"type" json:"type"`
	Selector string `yaml:"selector,omitempty" json:"selector,omitempty"`
	Action   string `yaml:"action,omitempty" json:"action,omitempty"`
	Note     string `yaml:"note,omitempty" json:"note,omitempty"`
}

// Freshness says how long a cached answer stays true.
type Freshness string

const (
	Stable   Freshness = "stable"   // names, paths, commands
	Slow     Freshness = "slow"     // changes over weeks
	Volatile Freshness = "volatile" // counts, statuses, "latest": always read live
)

// Answer is a value a run read from a page.
type Answer struct {
	Query      string    `yaml:"query" json:"query"`
	Value      string    `yaml:"value" json:"value"`
	SourceURL  string    `yaml:"source_url,omitempty" json:"source_url,omitempty"`
	ObservedAt time.Time `yaml:"observed_at,omitempty" json:"observed_at,omitempty"`
	Freshness  Freshness `yaml:"freshness" json:"freshness"`
	// Set on answers derived from the runs' reads (CachedAnswer), in a
	// recall only: how many sessions read the value, the facts revision
	// whose route verifies it, and whether it was demoted (read alike, then
	// read differently: served as volatile, without a value).
	Sessions int    `yaml:"sessions,omitempty" json:"sessions,omitempty"`
	Revision string `yaml:"revision,omitempty" json:"revision,omitempty"`
	Demoted  bool   `yaml:"demoted,omitempty" json:"demoted,omitempty"`
	Origin   string `yaml:"origin,omitempty" json:"origin,omitempty"`
}

// Provenance says where the facts came from.
type Provenance struct {
	Traces       []string  `yaml:"traces,omitempty" json:"traces,omitempty"`
	Sources      []string  `yaml:"sources,omitempty" json:"sources,omitempty"`
	FirstSeen    time.Time `yaml:"first_seen,omitempty" json:"first_seen,omitempty"`
	LastVerified time.Time `yaml:"last_verified,omitempty" json:"last_verified,omitempty"`
}

// Transition is one status change.
type Transition struct {
	From   Status    `yaml:"from" json:"from"`
	To     Status    `yaml:"to" json:"to"`
	At     time.Time `yaml:"at" json:"at"`
	Reason string    `yaml:"reason,omitempty" json:"reason,omitempty"`
}

// ContentHash is the revision of the entry's content: a hash of everything a
// verified entry freezes (selectors, steps, extraction query, hints, blockers,
// anti-patterns, answers, url patterns), not of its lifecycle fields.
func (f *Facts) ContentHash() string {
	c := struct {
		URLPatterns []string
		Selectors   map[string]Selector
		Steps       []Step
		Extraction  string
		Hints       []string
		Blockers    []Blocker
		Anti        []string
		Answers     []Answer
		Success     *SuccessCondition `json:",omitempty"` // absent: the hashes of entries without one are unchanged
	}{f.URLPatterns, f.Selectors, f.Steps, f.ExtractionQuery, f.InteractionHints, f.KnownBlockers, f.AntiPatterns, f.Answers, f.SuccessCondition}
	b, _ := json.Marshal(c) // maps marshal with sorted keys: deterministic
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:12]
}

// HasPageText reports whether the entry carries text taken from a page, which
// keeps it at most candidate until enough sessions agree.
func (f *Facts) HasPageText() bool { return len(f.Answers) > 0 }

// Patch is a retrospective knowledge patch (the --facts argument): lessons a
// run's author records explicitly.
type Patch struct {
	Selectors        map[string]Selector `json:"selectors,omitempty"`
	InteractionHints []string            `json:"interaction_hints,omitempty"`
	KnownBlockers    []Blocker           `json:"known_blockers,omitempty"`
	AntiPatterns     []string            `json:"anti_patterns,omitempty"`
	ExtractionQuery  string              `json:"extraction_query,omitempty"`
}

// ErrBadPatch is returned for a facts patch that cannot be read.
var ErrBadPatch = errors.New("bad facts patch")

// patchKeys maps every accepted spelling to its field.
var patchKeys = map[string]string{
	"selectors":         "selectors",
	"interaction_hints": "interaction_hints", "interactionHints": "interaction_hints", "hints": "interaction_hints",
	"known_blockers": "known_blockers", "knownBlockers": "known_blockers", "blockers": "known_blockers",
	"anti_patterns": "anti_patterns", "antiPatterns": "anti_patterns",
	"extraction_query": "extraction_query", "extractionQuery": "extraction_query",
}

// ParsePatch reads a facts patch from JSON. snake_case and camelCase keys are
// both accepted; an unknown key is an error naming it. A selector may be given
// as a string (its primary) or as {primary, fallbacks}.
func ParsePatch(data []byte) (*Patch, error) {
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("%w: not a JSON object: %v", ErrBadPatch, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: more than one JSON value", ErrBadPatch)
	}
	p := &Patch{}
	seen := map[string]string{}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := raw[k]
		field, ok := patchKeys[k]
		if !ok {
			return nil, fmt.Errorf("%w: unknown key %q: use selectors, interaction_hints, known_blockers, anti_patterns or extraction_query", ErrBadPatch, k)
		}
		if prev, dup := seen[field]; dup {
			return nil, fmt.Errorf("%w: keys %q and %q both set %s", ErrBadPatch, prev, k, field)
		}
		seen[field] = k
		var err error
		switch field {
		case "selectors":
			err = parseSelectors(v, p)
		case "interaction_hints":
			err = strictJSON(v, &p.InteractionHints)
		case "known_blockers":
			err = parseBlockers(v, p)
		case "anti_patterns":
			err = strictJSON(v, &p.AntiPatterns)
		case "extraction_query":
			err = strictJSON(v, &p.ExtractionQuery)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrBadPatch, k, err)
		}
	}
	return p, nil
}

func strictJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

func parseSelectors(b []byte, p *Patch) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("want an object of name → selector: %v", err)
	}
	p.Selectors = map[string]Selector{}
	for name, v := range raw {
		var s string
		if err := json.Unmarshal(v, &s); err == nil {
			if strings.TrimSpace(s) == "" { // also null
				return fmt.Errorf("selector %q is empty: give a CSS selector", name)
			}
			p.Selectors[name] = Selector{Primary: s}
			continue
		}
		var sel Selector
		if err := strictJSON(v, &sel); err != nil {
			return fmt.Errorf("selector %q: want a string or {primary, fallbacks}: %v", name, err)
		}
		if sel.Primary == "" {
			return fmt.Errorf("selector %q has no primary", name)
		}
		p.Selectors[name] = sel
	}
	return nil
}

// parseBlockers reads known_blockers: a list of {type, selector, action,
// note}, where a plain string stands for {type: <string>}.
func parseBlockers(b []byte, p *Patch) error {
	var items []json.RawMessage
	if err := json.Unmarshal(b, &items); err != nil {
		return fmt.Errorf("want a list of {type, selector, action, note} (or strings): %v", err)
	}
	for i, item := range items {
		var bl Blocker
		var str string
		if len(item) > 0 && item[0] == '"' && json.Unmarshal(item, &str) == nil {
			if strings.TrimSpace(str) == "" {
				return fmt.Errorf("blocker %d is an empty string", i)
			}
			p.KnownBlockers = append(p.KnownBlockers, Blocker{Type: str})
			continue
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(item, &m); err != nil || m == nil {
			return fmt.Errorf("blocker %d: want a string or {type, selector, action, note}", i)
		}
		for k, v := range m {
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				return fmt.Errorf("blocker %d: %s must be a string", i, k)
			}
			switch k {
			case "type":
				bl.Type = s
			case "selector":
				bl.Selector = s
			case "action":
				bl.Action = s
			case "note", "description":
				bl.Note = s
			default:
				return fmt.Errorf("blocker %d: unknown key %q (type, selector, action, note)", i, k)
			}
		}
		if bl.Type == "" {
			return fmt.Errorf("blocker %d has no type", i)
		}
		p.KnownBlockers = append(p.KnownBlockers, bl)
	}
	return nil
}

// ErrFrozen is returned when a change would alter a verified entry's content.
var ErrFrozen = errors.New("facts entry is verified and frozen")

// Apply merges a patch into f: selectors by name (the patch wins), hints and
// anti-patterns appended without duplicates, blockers deduplicated on (type,
// selector, action) keeping the newest note. A verified entry is refused
// whole with ErrFrozen and left unchanged.
func (f *Facts) Apply(p *Patch) error {
	if f.Status == Verified {
		return fmt.Errorf("%w: %s/%s is verified (revision %s); its content can only change through a new revision proposed by deep-learn", ErrFrozen, f.Domain, f.IntentKey, f.Revision)
	}
	for name, s := range p.Selectors {
		if f.Selectors == nil {
			f.Selectors = map[string]Selector{}
		}
		f.Selectors[name] = s
	}
	f.InteractionHints = appendUnique(f.InteractionHints, p.InteractionHints...)
	f.AntiPatterns = appendUnique(f.AntiPatterns, p.AntiPatterns...)
	for _, b := range p.KnownBlockers {
		f.KnownBlockers = MergeBlocker(f.KnownBlockers, b)
	}
	if p.ExtractionQuery != "" {
		f.ExtractionQuery = p.ExtractionQuery
	}
	f.Revision = f.ContentHash()
	return nil
}

// MergeBlocker adds b to bs, replacing the note of an existing blocker with the
// same (type, selector, action).
func MergeBlocker(bs []Blocker, b Blocker) []Blocker {
	for i := range bs {
		if bs[i].Type == b.Type && bs[i].Selector == b.Selector && bs[i].Action == b.Action {
			if b.Note != "" {
				bs[i].Note = b.Note
			}
			return bs
		}
	}
	return append(bs, b)
}

func appendUnique(xs []string, add ...string) []string {
	for _, a := range add {
		a = strings.TrimSpace(a)
		if a != "" && !contains(xs, a) {
			xs = append(xs, a)
		}
	}
	return xs
}

// Empty reports whether a patch carries nothing.
func (p *Patch) Empty() bool {
	return p == nil || len(p.Selectors) == 0 && len(p.InteractionHints) == 0 && len(p.KnownBlockers) == 0 &&
		len(p.AntiPatterns) == 0 && p.ExtractionQuery == ""
}
