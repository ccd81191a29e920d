package engine

import (
	"context"
	"fmt"
	"strings"
)

// EntryView is everything known of one (domain, intent key), for a reader
// (the knowledge browser): the recall and the Memory section exactly as an
// agent on the entry's page type gets them, the facts and experience records,
// and the evidence behind the confidence.
type EntryView struct {
	Domain    string `json:"domain"`
	IntentKey string `json:"intent_key"`
	Intent    string `json:"intent"`
	// URL is a page of the entry's first URL pattern ("*" segments read as
	// 1) that Recall and Memory were asked for, as an agent there would ask.
	URL    string  `json:"url"`
	Recall *Recall `json:"recall"`
	Memory string  `json:"memory"`
	Facts  *Facts  `json:"facts,omitempty"`
	// Experience is the consolidated record (nil before the first
	// consolidation); Evidence is it plus the runs not folded yet, oldest first.
	Experience  *Experience `json:"experience,omitempty"`
	Evidence    []Evidence  `json:"evidence"`
	Pending     int         `json:"pending"`
	Quarantined []string    `json:"quarantined,omitempty"`
}

// Entry returns the view of one entry. Returns ErrNotFound when the domain
// has no such key, ErrInvalid for a key IntentKey could not have made.
func (e *Engine) Entry(ctx context.Context, domain, key string) (*EntryView, error) {
	if !ValidKey(key) {
		return nil, fmt.Errorf("%w: %q is not an intent key", ErrInvalid, key)
	}
	entries, _, err := e.domainEntries(ctx, domain, key)
	if err != nil {
		return nil, err
	}
	en := entries[key]
	if en == nil {
		return nil, fmt.Errorf("%w: no entry %s/%s", ErrNotFound, domain, key)
	}
	cfg, err := e.Store.Config(ctx)
	if err != nil {
		return nil, err
	}
	v := &EntryView{Domain: domain, IntentKey: key, Intent: en.intent, Facts: en.facts, Experience: en.exp.Clone(), // the engine read a shared value (readExperience): the view is the caller's own

		Evidence: en.evidence(), Pending: len(en.pending), Quarantined: en.quarantined}
	sortEvidence(v.Evidence)
	if ps := dedupe(en.patterns); len(ps) > 0 {
		v.URL = PageOf(domain, ps[0])
	}
	if v.URL != "" && strings.TrimSpace(en.intent) != "" {
		if r, err := e.Query(ctx, v.URL, en.intent); err == nil && r.IntentKey == key {
			v.Recall = r
		}
	}
	if v.Recall != nil {
		if v.Memory, err = e.Memory(ctx, v.URL, en.intent, 0); err != nil {
			return nil, err
		}
		return v, nil
	}
	// No page to ask from: the entry's own recall, rendered as Memory does.
	v.URL = ""
	v.Recall = e.recall(en, NormalizedURL{Domain: domain}, MatchExact, cfg.Policy)
	v.Memory = RenderMemory(v.Recall, cfg.Policy.MemoryMaxChars)
	return v, nil
}

// PageOf is a URL on the page type pattern describes: https, the domain, the
// pattern's path with every "*" segment read as "1" and every query value as "x".
func PageOf(domain, pattern string) string {
	path, query, _ := strings.Cut(pattern, "?")
	segs := strings.Split(path, "/")
	for i, s := range segs {
		if s == "*" {
			segs[i] = "1"
		}
	}
	u := "https://" + domain + strings.Join(segs, "/")
	if query != "" {
		u += "?" + strings.ReplaceAll(query, "=*", "=x")
	}
	return u
}

// Entries returns the views of every entry of domain, sorted by intent key,
// from one read of the domain: each with its own recall (no page to ask from,
// so no URL and no Memory section; Entry gives those), its records and
// evidence. The warnings name files that could not be read.
func (e *Engine) Entries(ctx context.Context, domain string) ([]*EntryView, []string, error) {
	entries, warnings, err := e.domainEntries(ctx, domain, "")
	if err != nil {
		return nil, nil, err
	}
	cfg, err := e.Store.Config(ctx)
	if err != nil {
		return nil, nil, err
	}
	out := make([]*EntryView, 0, len(entries))
	for _, key := range sortedKeys(entries) {
		en := entries[key]
		v := &EntryView{Domain: domain, IntentKey: key, Intent: en.intent, Facts: en.facts, Experience: en.exp.Clone(), // the engine read a shared value (readExperience): the view is the caller's own

			Evidence: en.evidence(), Pending: len(en.pending), Quarantined: en.quarantined,
			Recall: e.recall(en, NormalizedURL{Domain: domain}, MatchExact, cfg.Policy)}
		sortEvidence(v.Evidence)
		out = append(out, v)
	}
	return out, warnings, nil
}
