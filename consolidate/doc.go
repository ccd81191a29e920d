// Package consolidate turns traces into knowledge: it folds new traces into
// experience, recomputes confidence, moves facts statuses, keeps the facts
// entry of every (domain, intent) up to date with its evidence, expires old
// traces, and commits all of it to git.
//
// There are three pieces, after restic's retention policy:
//
//   - Load reads what a consolidation needs from a store: the policy, the
//     experience and facts entries, every trace ref (names only) and the
//     traces no experience has folded yet (only those are decoded).
//   - Plan(now, Input) is pure: it decides every change and says why
//     (fold trace X into D/K, status hypothesis → candidate because …, verify
//     D/K r<rev>, contest, expire trace X because its age exceeds ttl_days, create
//     or update facts). Plans are golden-tested from trees in testdata/.
//   - Apply writes the plan under the tree lock and commits it as one
//     journaled gitrepo series (Repo.BeginStateSeries): the experience and
//     traces on gitrepo.StateRef (a snapshot when traces expire), the facts
//     on the branch, moving off it whatever it still tracks under traces/
//     and experience/; Run is Load + Plan +
//     Apply under one lock, over one git handle (Options.Repo, or opened
//     once per run), through which it also reaches its summary cache.
//     Schedule runs Run (and deep-learn) on cron specs for pem serve.
//
// The rules and the crash-safety argument are in docs/consolidation.md; every
// threshold comes from engine.Policy (pem.yaml).
//
// consolidate does consolidation only: the rules pem merge-driver, pem diff
// and pem check share (merging two records, the facts diff, the check rules)
// are pure functions in engine (merge.go, diff.go, check.go).
//
// consolidate imports engine, store, store/gitrepo and the standard library
// (plus robfig/cron for scheduling); never agent or deeplearn.
package consolidate
