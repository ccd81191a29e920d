// Package engine is pem's domain: the records (Trace, Experience, Facts, Recall),
// the rules as pure functions (URL normalization and patterns, intent keys,
// failure classification, confidence and tiers, facts patches, the Memory
// section), the Store interface with its error contract, and the Engine service
// (Save, Query, List, Memory) on top of that interface.
//
// The review rules that several commands share are here too, as pure
// functions over the records: the three-way merge of two experience or facts
// records (merge.go, pem merge-driver), what moved in an entry between two
// versions (diff.go, pem diff), and the check rules — secrets, frozen verified
// content compared on parsed entries, what a pull request may touch
// (check.go, pem check). The callers read files and git history; these
// functions take the decoded values (or a file's bytes) and return values.
//
// engine is the centre: every other package (store, consolidate, deeplearn,
// agent) imports it and none of them is imported here. It does no I/O of its
// own: no files, no git, no browser, no CLI. Its only dependencies are the
// standard library, golang.org/x/net/idna for host names, golang.org/x/text
// (NFKC for the injection screen), and yaml tags.
package engine
