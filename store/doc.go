// Package store keeps pem's knowledge tree on disk (format 1, DESIGN §2):
//
//	pem.yaml                                    the tree's format and policy
//	traces/<domain>/<YYYY-MM-DD>/<trace-id>.yaml  immutable run records
//	experience/<domain>/<intent-key>.yaml       derived evidence (consolidate writes it)
//	facts/<domain>/<intent-key>.yaml            the reviewed knowledge
//
// There are only a few things here: Init creates a tree, Open opens one, and
// *Store implements engine.Store on it; Marshal and Unmarshal are the
// canonical YAML codec every package that touches tree files uses; Check
// lists every bad file, and Files hands every file of the tree to a callback
// (pem check's secret scan) through the same confinement. PlaceOf, MergeFiles,
// Diff, CheckFrozen, Describe and EntryPaths are the file half of the review
// commands (review.go): versions of tree files handed in as bytes, decoded,
// then judged by engine's rules. The git side of the tree (commits, the
// journal, the history walks, sync, the merge driver's registration) is
// package store/gitrepo, which store does not import.
//
// Guarantees:
//   - Canonical YAML: the same value always encodes to the same bytes, and
//     re-saving unchanged facts or experience does not touch the file.
//   - Strict bounded reads: one document, known fields only, size caps per
//     kind, a depth cap, no anchors or aliases, decoder panics recovered. A bad
//     file is an error naming its path (engine.ErrCorrupt), never silently
//     reset, and listing never reads file contents, so the rest still loads.
//   - Atomic, crash-safe writes: temporary file, fsync, rename (link for
//     traces, so an id is never overwritten), fsync of the directory.
//   - Confinement: every access goes through one os.Root; names are
//     validated, reserved names (.git, CON, …) and symlinks refused.
//   - One writer lock per tree across processes: flock on .pem.lock.
//   - Warm reads are cheap: decoded records and directory listings are cached
//     and revalidated with one lstat (see cache.go); on Linux a change watch
//     (inotify, watch.go) tells the engine when nothing a query read has
//     changed, so that it can serve the answer it kept (engine.ChangeWatch).
//
// store imports engine and the standard library (plus go.yaml.in/yaml/v3);
// never store/gitrepo, consolidate, deeplearn or agent.
package store
