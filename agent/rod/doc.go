// Package rod is the go-rod adapter behind agent.Browser and agent.Page.
//
// Launch starts the system's Chromium or Google Chrome, found by Finder.Find:
// $PEM_CHROME, else the usual names on PATH, else the usual install locations
// of the OS (Debian's /usr/lib/chromium/chromium first on Linux); it never
// downloads a browser. Chromium runs headless with
// the closed-network flags, a fresh user-data-dir removed on Close, and leakless
// on, so a killed pem leaves no Chromium behind. Every element lookup is
// bounded by Options.Timeout (or the caller's deadline, if sooner) and every
// settle wait after navigate/click/press by settleMax.
//
// Settling is one evaluation in the page: wait for the load event (at most
// settleMax; a slow subresource does not fail a navigation), then for
// settleQuiet (50 ms) without DOM mutations, at most quietMax. A
// MutationObserver installed at the start of every document records the last
// change, so on a new document the quiet time that has already passed counts;
// after an action in the same document the window opens at the action.
// Exists is a single document.querySelector (one round trip, no polling)
// bounded by existsTimeout; a page that does not answer in time is an error,
// never reported as a missing element.
//
// pem's own reads of the page (settle, Exists, the element, label and block
// listings, the status) are each one Runtime.evaluate with no execution
// context, so they run in the document the frame holds when they arrive;
// rod's cached window, which a navigation leaves stale, is re-resolved in
// the background while the page settles (its element lookups start there).
//
// go-rod registers a global "-rod" flag on flag.CommandLine in an init unless
// DISABLE_ROD_FLAG is set in the environment. It is harmless for pem (the CLI
// does not parse flag.CommandLine, and tests accept the extra flag), but the
// Makefile exports DISABLE_ROD_FLAG=1 for go test and builds so that no
// argument named -rod is ever read from os.Args.
//
// This package imports agent, go-rod and the standard library only.
package rod
