package main

import (
	"strings"

	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store"
)

// checkInjected lists a trace or facts file whose text the injection screen
// flags; a file that does not decode is the schema check's business.
func checkInjected(rel string, data []byte) []engine.CheckProblem {
	if !strings.HasSuffix(rel, ".yaml") {
		return nil
	}
	var p *engine.CheckProblem
	switch {
	case strings.HasPrefix(rel, "traces/"):
		var t engine.Trace
		if store.Unmarshal(data, &t, store.KindTrace) != nil {
			return nil
		}
		p = engine.CheckInjectedTrace(rel, &t)
	case strings.HasPrefix(rel, "facts/"):
		var f engine.Facts
		if store.Unmarshal(data, &f, store.KindFacts) != nil {
			return nil
		}
		p = engine.CheckInjectedFacts(rel, &f)
	}
	if p == nil {
		return nil
	}
	return []engine.CheckProblem{*p}
}
