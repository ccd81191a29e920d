// Package bench is the harness behind pem demo and pem bench: it serves the
// demo site (agent/demosite) on 127.0.0.1, runs its tasks through agent.Run
// in one browser tab, grades every answer against the site's expected value
// (a volatile value repeated from the previous round is stale, and wrong),
// and sums the runs into the demo's table and the benchmark's summary.md and
// summary.csv.
//
// It is not wiring: the browser, the knowledge trees and consolidation are
// handed in by the caller (cmd/pem) as an agent.Browser and Arms, so this
// package imports agent, agent/demosite, engine and the standard library
// only.
package bench
