package demosite

import "strings"

// The repository the site shows.
const (
	Owner         = "acme"
	Repo          = "widgets"
	DefaultBranch = "main"
	InstallCmd    = "go install example.com/acme/widgets/cmd/widgets@latest"
	ExampleFile   = "getting-started.go"
	DemoUser      = "demo"
	// DemoPassword is the demo's default sign-in password: the value of the
	// secret demo_password. It must never appear in any page.
	DemoPassword = "pem-demo-canary-8f07"
)

type issue struct {
	Number   int
	Title    string
	Author   string
	Labels   []string
	Open     bool
	Comments int
}

type check struct{ Name, Status string }

type pull struct {
	Number int
	Title  string
	Author string
	Branch string
	Checks []check
}

type run struct {
	Number   int
	Workflow string
	Branch   string
	Event    string
	Status   string
	Commit   string
}

type file struct{ Name, Message, FirstLine string }

// data is everything the templates render for one round. Volatile values
// (stars, open issues and PRs, check and workflow statuses, unread
// notifications) move with the round; the rest is fixed.
type data struct {
	Owner, Repo, Description string
	Stars, Forks, Watchers   int
	DefaultBranch            string
	Issues                   []issue // open and closed, by number
	Pulls                    []pull  // open, oldest first
	Runs                     []run   // newest first
	InstallCmd               string
	Examples                 []file
	Unread                   int
	// The harder tasks' volatile values (traps.go).
	LatestDownloads int
	Contributors    int
}

var issuePool = []struct{ title, author, labels string }{
	{"Widget renders blank in Safari", "alice", "bug,ui"},
	{"Add dark mode theme", "bob", "enhancement,ui"},
	{"Typo in README install section", "carol", "docs"},
	{"Memory leak in widget cache", "dave", "bug,performance"},
	{"Support Go 1.26 iterators", "erin", "enhancement"},
	{"Panic when a widget has no children", "frank", "bug"},
	{"CI fails on Windows runners", "grace", "ci"},
	{"Add keyboard navigation to menus", "heidi", "accessibility"},
	{"Flaky test TestRenderTable", "ivan", "tests"},
	{"Reduce memory usage of the table renderer", "judy", "performance"},
	{"Broken link to examples in docs", "mallory", "docs"},
	{"Expose theme tokens as CSS variables", "niaj", "enhancement"},
	{"Tooltip overlaps the sidebar", "olivia", "bug,ui"},
	{"Add a getting-started tutorial", "peggy", "docs"},
	{"Memory grows when streaming large tables", "rupert", "bug,performance"},
	{"Allow custom icons in buttons", "sybil", "enhancement"},
	{"Charts ignore the locale setting", "trent", "bug"},
	{"Deprecate the legacy Grid widget", "victor", "breaking"},
	{"Document memory limits for the cache", "walter", "docs"},
	{"Add RTL layout support", "xavier", "enhancement,ui"},
	{"Improve error messages for invalid props", "yvonne", "enhancement"},
	{"Speed up initial render", "zoe", "performance"},
	{"Add a playground page", "alice", "docs"},
	{"Memory profile shows duplicate fonts", "bob", "performance"},
	{"Dropdown closes on scroll", "carol", "bug,ui"},
	{"Add date picker widget", "dave", "enhancement"},
	{"Support server-side rendering", "erin", "enhancement"},
	{"Icons are blurry on HiDPI screens", "frank", "bug,ui"},
	{"Add tests for the Tabs widget", "grace", "tests"},
	{"Update dependencies", "heidi", "chore"},
}

var pullPool = []struct{ title, author, branch string }{
	{"Fix blank render in Safari", "alice", "fix-safari-render"},
	{"Add dark mode theme", "bob", "dark-mode"},
	{"Cache: evict entries under memory pressure", "dave", "cache-eviction"},
	{"Docs: getting-started tutorial", "peggy", "docs-getting-started"},
	{"Keyboard navigation for menus", "heidi", "menu-keyboard"},
	{"Bump golang.org/x/net to v0.62.0", "dependabot", "dependabot/go_modules/x-net"},
	{"RTL layout support", "xavier", "rtl"},
}

// Check statuses of the first pull request, cycling with the round.
var firstPullChecks = [][]check{
	{{"build", "success"}, {"test", "success"}, {"lint", "success"}},
	{{"build", "success"}, {"test", "failure"}, {"lint", "success"}},
	{{"build", "success"}, {"test", "success"}, {"lint", "pending"}},
}

// Workflow run conclusions; consecutive rounds always differ.
var runStatuses = []string{"success", "failure", "success", "cancelled"}

// Status words a status answer is checked against.
var statusWords = []string{"success", "failure", "pending", "cancelled"}

func snapshot(round int) data {
	if round < 0 {
		round = -round
	}
	r := round % 8 // the pools are finite; volatile values cycle
	d := data{
		Owner: Owner, Repo: Repo,
		Description:   "Composable UI widgets for Go web services",
		Stars:         1234 + 19*round,
		Forks:         56,
		Watchers:      31,
		DefaultBranch: DefaultBranch,
		InstallCmd:    InstallCmd,
		Unread:        3 + 2*r,
		// Consecutive rounds always differ.
		LatestDownloads: 512 + 37*round,
		Contributors:    40 + 3*r,
		Examples: []file{
			{"custom-theme.go", "Show how to override theme tokens", "// Custom theme: override the default colours and spacing."},
			{ExampleFile, "Add the getting-started example", "// Getting started: render your first widget in ten lines."},
			{"streaming-table.go", "Stream rows into a table", "// Streaming table: append rows as they arrive."},
		},
	}
	n := 14 + 2*r
	closed := map[int]bool{3: true, 7: true, 9: r%2 == 1, 11: r%4 >= 2, 10: r%4 == 2, 15: r == 4}
	for i := 1; i <= n; i++ {
		p := issuePool[i-1]
		d.Issues = append(d.Issues, issue{
			Number: i, Title: p.title, Author: p.author,
			Labels: strings.Split(p.labels, ","), Open: !closed[i], Comments: (i * 7) % 5,
		})
	}
	for i := 0; i < 3+r%4; i++ {
		p := pullPool[i]
		checks := []check{{"build", "success"}, {"test", "success"}, {"lint", "success"}}
		if i == 0 {
			checks = firstPullChecks[r%3]
		}
		d.Pulls = append(d.Pulls, pull{Number: 31 + i, Title: p.title, Author: p.author, Branch: p.branch, Checks: checks})
	}
	latest := 140 + 3*round
	for i := 0; i < 4; i++ {
		d.Runs = append(d.Runs, run{
			Number: latest - i, Workflow: "CI", Branch: DefaultBranch, Event: "push",
			Status: runStatuses[(r+4-i)%4], Commit: commitOf(latest - i),
		})
	}
	return d
}

func commitOf(n int) string {
	const hex = "0123456789abcdef"
	b := make([]byte, 7)
	x := uint32(n)*2654435761 + 12345
	for i := range b {
		b[i] = hex[x%16]
		x = x/16 + uint32(i)*7919
	}
	return string(b)
}

func (d data) OpenIssues() []issue {
	var out []issue
	for _, is := range d.Issues {
		if is.Open {
			out = append(out, is)
		}
	}
	return out
}

func (d data) ClosedCount() int { return len(d.Issues) - len(d.OpenIssues()) }

// search returns the open issues whose title contains every word of q.
func (d data) search(q string) []issue {
	words := strings.Fields(strings.ToLower(q))
	var out []issue
	for _, is := range d.OpenIssues() {
		t := strings.ToLower(is.Title)
		ok := true
		for _, w := range words {
			if !strings.Contains(t, w) {
				ok = false
			}
		}
		if ok {
			out = append(out, is)
		}
	}
	return out
}

func (d data) issue(n int) (issue, bool) {
	if n < 1 || n > len(d.Issues) {
		return issue{}, false
	}
	return d.Issues[n-1], true
}

func (d data) pull(n int) (pull, bool) {
	for _, p := range d.Pulls {
		if p.Number == n {
			return p, true
		}
	}
	return pull{}, false
}

// status sums up checks the way a code host does.
func status(checks []check) string {
	s := "success"
	for _, c := range checks {
		switch c.Status {
		case "failure":
			return "failure"
		case "pending":
			s = "pending"
		}
	}
	return s
}
