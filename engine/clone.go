package engine

import (
	"maps"
	"slices"
)

// Deep copies, so that whoever holds a record can change it without touching
// a cache or a caller's value (the store hands out cached records; Plan and
// Mine must not change their input). The store's TestCloneIsDeep fills every
// field by reflection, so a field added here without a line in Clone fails.

func cloneSteps(ss []Step) []Step {
	out := slices.Clone(ss)
	for i := range out {
		out[i].Fallbacks = slices.Clone(out[i].Fallbacks)
		if t := out[i].Target; t != nil {
			cp := *t
			out[i].Target = &cp
		}
	}
	return out
}

func cloneCondition(c *SuccessCondition) *SuccessCondition {
	if c == nil {
		return nil
	}
	cp := *c
	return &cp
}

// Clone returns a deep copy of t (nil for nil).
func (t *Trace) Clone() *Trace {
	if t == nil {
		return nil
	}
	c := *t
	c.Params = slices.Clone(t.Params)
	c.Steps = cloneSteps(t.Steps)
	c.Result.Extracted = maps.Clone(t.Result.Extracted)
	c.Redactions = slices.Clone(t.Redactions)
	c.SuccessCondition = cloneCondition(t.SuccessCondition)
	c.Approvals = slices.Clone(t.Approvals) // no pointers inside
	return &c
}

// Clone returns a deep copy of f (nil for nil).
func (f *Facts) Clone() *Facts {
	if f == nil {
		return nil
	}
	c := *f
	c.URLPatterns = slices.Clone(f.URLPatterns)
	if f.Selectors != nil {
		c.Selectors = make(map[string]Selector, len(f.Selectors))
		for k, s := range f.Selectors {
			s.Fallbacks = slices.Clone(s.Fallbacks)
			c.Selectors[k] = s
		}
	}
	c.Steps = cloneSteps(f.Steps)
	c.InteractionHints = slices.Clone(f.InteractionHints)
	c.KnownBlockers = slices.Clone(f.KnownBlockers)
	c.AntiPatterns = slices.Clone(f.AntiPatterns)
	c.Answers = slices.Clone(f.Answers)
	c.Provenance.Traces = slices.Clone(f.Provenance.Traces)
	c.Provenance.Sources = slices.Clone(f.Provenance.Sources)
	c.History = slices.Clone(f.History)
	c.SuccessCondition = cloneCondition(f.SuccessCondition)
	return &c
}

// Clone returns a deep copy of x (nil for nil).
func (x *Experience) Clone() *Experience {
	if x == nil {
		return nil
	}
	c := *x
	c.TaskTypes = slices.Clone(x.TaskTypes)
	c.ByCategory = maps.Clone(x.ByCategory)
	if x.Patterns != nil {
		c.Patterns = make(map[string]*Counts, len(x.Patterns))
		for k, p := range x.Patterns {
			if p != nil {
				cp := *p
				p = &cp
			}
			c.Patterns[k] = p
		}
	}
	if x.Selectors != nil {
		c.Selectors = make(map[string]*SelectorStats, len(x.Selectors))
		for k, s := range x.Selectors {
			if s != nil {
				cs := *s
				s = &cs
			}
			c.Selectors[k] = s
		}
	}
	c.Evidence = slices.Clone(x.Evidence)
	if x.Answers != nil {
		c.Answers = make([]Observed, len(x.Answers))
		for i, o := range x.Answers {
			o.Reads = slices.Clone(o.Reads)
			c.Answers[i] = o
		}
	}
	c.Digest = x.Digest.Clone()
	return &c
}

// clone returns a deep copy of r (querymemo.go hands out copies of a kept
// answer: callers change what they get, Apply among them).
func (r *Recall) clone() *Recall {
	if r == nil {
		return nil
	}
	c := *r
	c.PrimarySelectors = maps.Clone(r.PrimarySelectors)
	if r.Fallbacks != nil {
		c.Fallbacks = make(map[string][]string, len(r.Fallbacks))
		for k, v := range r.Fallbacks {
			c.Fallbacks[k] = slices.Clone(v)
		}
	}
	c.Steps = cloneSteps(r.Steps)
	c.SuccessCondition = cloneCondition(r.SuccessCondition)
	c.KnownBlockers = slices.Clone(r.KnownBlockers)
	c.AntiPatterns = slices.Clone(r.AntiPatterns)
	c.InteractionHints = slices.Clone(r.InteractionHints)
	c.Answers = slices.Clone(r.Answers)
	c.Warnings = slices.Clone(r.Warnings)
	if r.LastVerified != nil {
		lv := *r.LastVerified
		c.LastVerified = &lv
	}
	c.Reasons = slices.Clone(r.Reasons)
	if r.SiteNotes != nil {
		c.SiteNotes = (&Site{Notes: r.SiteNotes}).Clone().Notes
	}
	if r.RelatedRoutes != nil {
		c.RelatedRoutes = slices.Clone(r.RelatedRoutes)
		for i := range c.RelatedRoutes {
			rr := &c.RelatedRoutes[i]
			rr.Steps, rr.Reasons = cloneSteps(rr.Steps), slices.Clone(rr.Reasons)
		}
	}
	if r.basis != nil {
		b := *r.basis
		b.Score.LastN = slices.Clone(b.Score.LastN)
		b.Patterns = slices.Clone(b.Patterns)
		c.basis = &b
	}
	return &c
}
