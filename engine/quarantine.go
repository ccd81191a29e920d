package engine

import "fmt"

// screenPatch scrubs a facts patch of secrets (on a copy: the caller's patch
// is left as it was) and refuses it whole when it carries text the injection
// screen flags, saying why in res. It reports whether the patch was refused.
func screenPatch(p **Patch, res *SaveResult) (bool, error) {
	c := **p
	c.Selectors = cloneSelectors(c.Selectors)
	c.InteractionHints = append([]string(nil), c.InteractionHints...)
	c.AntiPatterns = append([]string(nil), c.AntiPatterns...)
	c.KnownBlockers = append([]Blocker(nil), c.KnownBlockers...)
	ScrubPatch(&c)
	*p = &c
	if why := PatchInjection(&c); why != "" {
		res.FactsRejected = true
		res.FactsMessage = fmt.Sprintf("facts patch refused: its %s, which reads as an instruction to the agent, not knowledge of the site; nothing of the patch was applied", why)
		return true, nil
	}
	return false, nil
}

func cloneSelectors(m map[string]Selector) map[string]Selector {
	if m == nil {
		return nil
	}
	out := make(map[string]Selector, len(m))
	for k, v := range m {
		v.Fallbacks = append([]string(nil), v.Fallbacks...)
		out[k] = v
	}
	return out
}
