// Package deeplearn mines traces into facts proposals: the route most
// successful runs took (with the values that vary turned into parameters),
// selectors ranked by their own stability, anti-patterns, blockers, hints from
// recoveries, the extraction query, and answers with their freshness — each
// mined item with its evidence (runs, sessions, trace ids).
//
// Mine is pure and deterministic (values in, values out; the same input in
// any order gives the same bytes). Walk, Collect and MineTree read a tree
// through engine.Store, decoding on GOMAXPROCS workers; MineTree holds one
// domain's traces at a time. Learn (what pem deep-learn runs) gives MineTree's
// proposals while bounding time and memory: GOMAXPROCS domains at a time, and
// an incremental state — one file per domain in a directory the caller names
// (cmd/pem: in the git directory), the only files this package writes — so
// that entries whose files did not change are not read again (Mine is
// finish(mineCore(in)): the core is remembered, the clock applied after).
// Report renders the proposals as the Markdown of a
// pull request. Entry is the one-entry variant behind experience_deep_learn.
// Rephrase is the optional model pass: it may reword hints through a
// Rephraser, never add anything. The rules are in docs/deep-learn.md.
//
// Proposals, not edits: a proposal is at most candidate, with source
// deep-learn; a verified entry is never changed — the proposal is a new
// revision that supersedes it. cmd/pem commits the proposals on a review
// branch (gitrepo.(*Repo).CommitToBranch) or, with --apply, on the current branch.
//
// Poisoning guard: no text copied from a page ever becomes a hint or any other
// instruction-like field (hints are pem's own templates around selectors); an
// answer read from a page needs answer_sessions independent sessions before it
// is cached; a trace whose content looks like an injection is flagged and
// contributes nothing.
//
// deeplearn imports only engine (its tests also use store and treegen).
package deeplearn
