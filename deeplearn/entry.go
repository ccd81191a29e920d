package deeplearn

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/pemdev/pem/engine"
)

// EntryResult is the answer of experience_deep_learn (the seed's contract).
type EntryResult struct {
	Completed      bool          `json:"completed"`
	Domain         string        `json:"domain"`
	Intent         string        `json:"intent"`
	IntentKey      string        `json:"intent_key"`
	StatusBefore   engine.Status `json:"status_before"`
	StatusAfter    engine.Status `json:"status_after"`
	Promoted       bool          `json:"promoted"`
	NewConfidence  float64       `json:"new_confidence"`
	SelectorsFound int           `json:"selectors_found"`
	FactsPath      string        `json:"facts_path,omitempty"`
	Message        string        `json:"message"`
}

var rank = map[engine.Status]int{"": 0, engine.Retired: 0, engine.Contested: 1, engine.Hypothesis: 1, engine.Candidate: 2, engine.Verified: 3}

// Entry mines one (domain, intent) — the entry Query would pick for url and
// intent — and writes the proposal into the working tree's facts, under the
// store's lock. A verified entry is frozen: without force nothing is written;
// with force the proposal is written as a new candidate revision that
// supersedes it (review it with git diff before committing).
func Entry(ctx context.Context, eng *engine.Engine, url, intent string, force bool) (*EntryResult, error) {
	r, err := eng.Query(ctx, url, intent)
	if err != nil {
		return nil, err
	}
	res := &EntryResult{Domain: r.Domain, Intent: r.Intent, IntentKey: r.IntentKey, StatusBefore: r.Status, StatusAfter: r.Status, NewConfidence: r.Confidence}
	if r.Tier == engine.P5 || r.IntentKey == "" {
		return nil, fmt.Errorf("%w: no entry for %s and intent %q: save runs first (experience_save), then deep-learn", engine.ErrNotFound, r.Domain, intent)
	}
	now := time.Now().UTC()
	if eng.Now != nil {
		now = eng.Now().UTC()
	}
	ins, warnings, err := Collect(ctx, eng.Store, Filter{Domain: r.Domain, Intent: r.IntentKey}, now)
	if err != nil {
		return nil, err
	}
	if len(ins) == 0 {
		res.Completed = true
		res.Message = "no traces on hand for this entry (they may have expired after consolidation): nothing to mine"
		return res, nil
	}
	release, err := eng.Store.Lock(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	in := ins[0]
	// Re-read the entry under the lock: it may have moved since Collect.
	if f, err := eng.Store.Facts(ctx, in.Domain, in.IntentKey); err == nil {
		in.Facts = f
	} else if !errors.Is(err, engine.ErrNotFound) {
		return nil, err
	}
	p := Mine(in)
	res.SelectorsFound = len(p.Facts.Selectors)
	res.Completed = true
	switch {
	case !p.Changed:
		res.Message = "mined " + plural(p.Successes+p.Failures, "trace") + ": nothing new to propose"
	case p.Supersedes != "" && !force:
		res.Message = fmt.Sprintf("the entry is verified (revision %s) and frozen: the proposal was not written; run with force to write it as a candidate revision that supersedes it, or use pem deep-learn to propose it on a review branch", p.Supersedes)
	default:
		path, err := eng.Store.PutFacts(ctx, p.Facts)
		if err != nil {
			return nil, err
		}
		res.FactsPath = path
		res.StatusAfter = p.Facts.Status
		res.Promoted = rank[res.StatusAfter] > rank[res.StatusBefore]
		res.Message = fmt.Sprintf("wrote revision %s (%s) from %s; review it with git diff and commit it (pem deep-learn proposes on a review branch instead)", p.Facts.Revision, p.Facts.Status, plural(p.Successes+p.Failures, "trace"))
	}
	if n := len(p.Flagged); n > 0 {
		// Ids only: the matched text is not echoed back to an agent.
		ids := make([]string, 0, n)
		for _, fl := range p.Flagged {
			id, _, _ := strings.Cut(fl, ":")
			ids = append(ids, id)
		}
		res.Message += fmt.Sprintf(" (%s looked like prompt injections and were ignored: %s; pem deep-learn's report says why)", plural(n, "trace"), strings.Join(ids, ", "))
	}
	if len(warnings) > 0 {
		res.Message += fmt.Sprintf(" (%d unreadable files skipped; pem check lists them)", len(warnings))
	}
	if r2, err := eng.Query(ctx, url, r.Intent); err == nil {
		res.NewConfidence = r2.Confidence
	}
	return res, nil
}

func plural(n int, what string) string {
	switch {
	case n == 1:
		return "1 " + what
	case what == "entry":
		return fmt.Sprintf("%d entries", n)
	}
	return fmt.Sprintf("%d %ss", n, what)
}
