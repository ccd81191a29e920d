// Package deeplearn mines traces into facts proposals: the route most
// successful runs took (with the values that vary turned into parameters),
// selectors ranked by their own stability, anti-patterns, blockers, hints from
// recoveries, the extraction query, and answers with their freshness.
//
// Mining is pure (Mine takes values, returns values, deterministically); the
// proposals are reviewed like code: Propose writes them on a review branch with
// a Markdown report. Consolidation keeps score, deep-learn learns.
//
// Poisoning guard: no text copied from a page ever becomes a hint or any other
// instruction-like field (hints are pem's own templates around selectors); an
// answer read from a page needs answer_sessions independent sessions before it
// is proposed; a trace whose content looks like an injection is flagged and
// contributes nothing.
//
// deeplearn imports only engine: it never writes. cmd/pem marshals the
// proposals and has store commit them on the review branch.
package deeplearn
