package store

import (
	"maps"
	"slices"

	"github.com/pemdev/pem/engine"
)

// Deep copies of cached records, so callers own what they get (the engine
// patches Facts in place; consolidation folds into Experience). Cheaper than
// decoding again by two orders of magnitude. TestCloneIsDeep fills every
// field by reflection, so a field added to engine's types without a line
// here fails the tests.

func cloneSteps(ss []engine.Step) []engine.Step {
	out := slices.Clone(ss)
	for i := range out {
		out[i].Fallbacks = slices.Clone(out[i].Fallbacks)
	}
	return out
}

func cloneTrace(t *engine.Trace) *engine.Trace {
	c := *t
	c.Params = slices.Clone(t.Params)
	c.Steps = cloneSteps(t.Steps)
	c.Result.Extracted = maps.Clone(t.Result.Extracted)
	c.Redactions = slices.Clone(t.Redactions)
	return &c
}

func cloneFacts(f *engine.Facts) *engine.Facts {
	c := *f
	c.URLPatterns = slices.Clone(f.URLPatterns)
	if f.Selectors != nil {
		c.Selectors = make(map[string]engine.Selector, len(f.Selectors))
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
	return &c
}

func cloneExperience(x *engine.Experience) *engine.Experience {
	c := *x
	c.TaskTypes = slices.Clone(x.TaskTypes)
	c.ByCategory = maps.Clone(x.ByCategory)
	if x.Patterns != nil {
		c.Patterns = make(map[string]*engine.Counts, len(x.Patterns))
		for k, p := range x.Patterns {
			if p != nil {
				cp := *p
				p = &cp
			}
			c.Patterns[k] = p
		}
	}
	if x.Selectors != nil {
		c.Selectors = make(map[string]*engine.SelectorStats, len(x.Selectors))
		for k, s := range x.Selectors {
			if s != nil {
				cs := *s
				s = &cs
			}
			c.Selectors[k] = s
		}
	}
	c.Evidence = slices.Clone(x.Evidence)
	return &c
}
