// Package gitrepo is the git side of a knowledge tree: the one handle a pem
// command opens on the repository holding the tree (Open, once per
// command), and everything pem does in git through it.
//
// There are few types: Repo (the handle), History (reading the history),
// CommitRequest and Series (commit series and their crash journal),
// Signature, SyncOptions and SyncResult. A Repo owns:
//
//   - commits of exact paths (Commit, CommitSeries) by plumbing: only the
//     given paths are hashed, only the trees on them rebuilt, new objects
//     written loose or as one pack (pack.go), the index updated as bytes
//     (index.go) — never a worktree-wide status scan (commit.go);
//   - commit series with a crash journal in the git directory
//     (BeginSeries, Series.Commit, RecoverSeries; fsynced file and
//     directory), which is how consolidation survives a kill (journal.go);
//   - the state ref, refs/pem/state: the traces and experience off the
//     branch's history, committed the same way, squashed into snapshots,
//     moved off the branch from old trees (CommitState, BeginStateSeries,
//     state.go), shared by Sync (statesync.go), logged by StateLog
//     (statelog.go);
//   - commits onto a review branch that leave the worktree, the index and
//     the current branch alone (CommitToBranch, branch.go);
//   - the history: diffs, the log of an entry, the walks of the review
//     commands returning values (changed files with both versions' bytes,
//     every change a commit introduced within REV ^X bounds: review.go),
//     read level by level by tree hash and straight from the pack files,
//     delta chains included (History, history.go);
//   - pem sync (Sync: add-only commits replayed onto the remote head, the
//     state's around snapshots and pushed with a lease, a lost push retried
//     with backoff, syncretry.go) and the merge driver's
//     registration (InstallMergeDriver; History.MergeDriver reads it back),
//     and Init, which makes a tree a repository;
//   - the object store's health (Maintain: git repack -d --geometric=2 past
//     pem.yaml's thresholds, maintain.go) and pem clone (Clone: a shallow,
//     blobless, sparse clone with the state's tip and its experience, and
//     Materialize, which fetches and writes the traces it left out, clone.go) — the two things done with the git CLI, which
//     go-git cannot do (measured and explained in docs/scale.md); a missing
//     git program is ErrGitMissing;
//   - StatePath: where pem keeps state that git must never see (the
//     consolidation cache, the journal, the commit owner's pid, the commit
//     pem check last passed: Remember, Remembered); and, in the common git
//     directory, the log cache and the description cache that make a
//     repeated pem log read no tree (logcache.go).
//
// It is not the knowledge tree: the layout, the YAML, the lock and
// engine.Store are package store; which paths a command commits, and why,
// is the caller's (consolidate, cmd/pem). The parsers of bytes that git or
// anyone else wrote — pack index, pack, delta, index — are fuzzed, and the
// writers are checked against the git CLI (differential_test.go).
//
// gitrepo imports engine, the standard library and go-git; never store,
// consolidate, deeplearn or agent (store's layout comes in as arguments:
// SyncOptions.TracesDir, StateRequest.Dirs, InstallMergeDriver's attributes).
package gitrepo
