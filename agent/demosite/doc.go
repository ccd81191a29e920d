// Package demosite is the small GitHub-like site the demo and the benchmark
// run against (DESIGN §9): one repository, acme/widgets, with its repository
// page, issues (list, search, issue pages), pull requests (list, PR page,
// checks tab), actions, README, an examples folder and a sign-in form
// guarding a notifications page. Pages are plain server-rendered HTML from
// embedded templates (site/).
//
// The harder tasks (traps.go) carry real sites' traps: a "Download source
// code" button that matches a downloads question better than the Releases
// link it needs; a security overview whose "Contact security: report a
// vulnerability" link is a form, not the policy with the contact; releases
// behind pagination (the item named by a version on page 3) and behind an
// Assets tab (a 5-step route); a wiki behind a consent overlay that covers
// its links until dismissed; a contributors count that appears after
// ContributorsDelayMs; and discussions with a search field of their own,
// while the header's search only searches issues.
//
// Two knobs change the site the way real sites change: Round moves the
// volatile values (stars, open issue and PR counts, check and workflow
// statuses, unread notifications, the latest release's downloads, the
// contributors count) while titles, the default branch, the
// install command and the example stay; the Drift variant renames every id
// and class (Rename) and keeps the text identical. Tasks lists the
// benchmark's tasks with their expected answers for a round, computed from
// the same data the pages render, and Check grades an answer.
//
// The demo password (DemoPassword, the secret demo_password) is never
// written into any page.
//
// This package imports the standard library only.
package demosite
