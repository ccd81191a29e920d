// Package web is the knowledge browser and the HTTP API of pem serve --http,
// and the static pages of pem report --html: an adapter over the engine's
// service, as engine/mcp is.
//
// The pages (an index of domains and entries with tier, status and
// confidence badges, flagged entries first; one page per entry with its
// route, selectors, blockers, anti-patterns, cached answers, the Memory
// section an agent gets, the reasons for its tier, its evidence as an
// inline SVG chart and the commits that moved it; the bench reports) are
// rendered from templates embedded in the binary, with inline CSS and SVG,
// no script and no external asset, so that the same files open from disk.
// The API answers JSON: the entries (as pem experience list), one entry, a
// recall, a Memory section, and — only when writes are enabled — saves and
// verdicts through the engine's own Save and Feedback.
//
// It is not wiring: the engine, the history of an entry, the bench reports
// and the mapping of errors to codes are handed in by the caller (cmd/pem)
// in Options. It imports engine and the standard library only.
package web
