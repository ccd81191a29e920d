package engine

// CheckInjection is the kind of problem for text the injection screen flags.
const CheckInjection = "injection"

// CheckInjectedTrace reports a trace the injection screen flags
// (Injection): consolidation quarantines it (no evidence, never the
// route), and pem check lists it so that a person looks at it.
func CheckInjectedTrace(path string, t *Trace) *CheckProblem {
	why := Injection(t)
	if why == "" {
		return nil
	}
	return &CheckProblem{Kind: CheckInjection, Path: path,
		Msg: "quarantined run: its " + why + ", which reads as an instruction to the agent; it counts as no evidence. Review it, then delete it (git rm) or let it expire"}
}

// CheckInjectedFacts reports a facts entry holding text the screen flags
// (FactsInjection): a hand edit or a file from before the screen.
func CheckInjectedFacts(path string, f *Facts) *CheckProblem {
	why := FactsInjection(f)
	if why == "" {
		return nil
	}
	return &CheckProblem{Kind: CheckInjection, Path: path,
		Msg: "its " + why + ", which reads as an instruction to the agent: edit it out (the Memory section quotes it, but it is no knowledge of the site)"}
}
