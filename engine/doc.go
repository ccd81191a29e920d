// Package engine is pem's domain: the records (Trace, Experience, Facts, Recall),
// the rules as pure functions (URL normalization and patterns, intent keys,
// failure classification, confidence and tiers, facts patches, the Memory
// section), the Store interface with its error contract, and the Engine service
// (Save, Query, List, Memory) on top of that interface.
//
// engine is the centre: every other package (store, consolidate, deeplearn,
// agent) imports it and none of them is imported here. It does no I/O of its
// own: no files, no git, no browser, no CLI. Its only dependencies are the
// standard library, golang.org/x/net/idna for host names, golang.org/x/text
// (NFKC for the injection screen), and yaml tags.
package engine
