// Package rod is the go-rod adapter behind agent.Browser and agent.Page.
//
// Launch starts the system's Chromium or Google Chrome, found by Finder.Find:
// $PEM_CHROME, else for a headless run Chromium's headless shell (on PATH or
// Debian's /usr/lib/chromium/chromium-headless-shell), else the usual names on
// PATH, else the usual install locations of the OS (Debian's
// /usr/lib/chromium/chromium first on Linux); it never downloads a browser. Chromium runs headless with
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
// A new document loaded under agent.SettleAtLoad (a P1 replay whose next
// step clicks a link) is settled at its load event, with no quiet window.
// Exists is a single document.querySelector (one round trip, no polling)
// bounded by existsTimeout; a page that does not answer in time is an error,
// never reported as a missing element.
//
// Navigate returns nil only once the main frame has committed the new
// document (Page.frameNavigated with the navigation's loader id):
// Page.navigate answers before the renderer commits, and a renderer whose
// main thread is busy commits only when it is free, so a busy old page used
// to stay on screen behind a navigation reported ok. Before navigating, the
// old document's running script, if any, is stopped (Runtime.terminateExecution;
// an idle page is not affected, and after Page.navigate Chromium holds
// protocol messages to the renderer until the commit, so the stop cannot come
// later). A navigation that does not commit within Options.Timeout, a server
// that has not answered by then, and a response with nothing to show (a 204,
// a download) are errors naming the target and the page the tab still shows;
// a navigation given up is stopped, so it cannot commit behind the caller's
// back. A read of pem's (a listing, Text) or an Evaluate that times out is
// stopped the same way, so it does not keep the page busy after pem gave up.
//
// Click and Press confirm a navigation they start the same way: the tab's
// protocol events (frameRequestedNavigation and frameStartedNavigating,
// sent by the browser process even while the page's main thread is busy)
// or, when those have not come yet, the page's own note of a navigate event
// tell whether the action navigated; if it did, the action returns nil only
// once the main frame has committed a new document (frameNavigated) or done
// a same-document navigation (a hash link), then settles as Navigate does.
// A navigation that ends with no new document (a 204, a download; loading
// stopped and no commit within 100 ms) or that has not committed within
// Options.Timeout is an error naming its
// destination and the page the tab shows, so the agent records the step as
// failed rather than reading the old page as the new one. The latter is
// stopped; a navigation that is ready to commit in a renderer kept busy by
// the old page's own script cannot be (Chromium holds the stop, and a
// Runtime.terminateExecution, until the commit), and the error says the
// tab may still change — also when the frame reports it stopped but the
// page does not answer a trivial script (Chromium can report the stop and
// commit later, once the script lets go). An action that does not navigate (a button) waits
// for a quiet DOM only, as before; so does a link that opens another tab
// or a download.
//
// The listings' selectors (selectorFor in page.js) are each the first
// unique one of a fixed sequence; uniqueness is decided by testing only the
// elements a selector can match (an index per attribute, the memoized matches
// of a path's tail) with Element.matches, not by a querySelectorAll of the
// whole document per selector tried, which made listing a big page
// quadratic (BenchmarkListing: Flask's api.html).
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
