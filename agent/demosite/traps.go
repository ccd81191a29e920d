package demosite

import (
	"fmt"
	"strings"
)

// The harder tasks' data (DESIGN §9): the areas whose pages carry the
// traps real sites set — releases behind pagination and a tab, a security
// section whose most tempting link is the wrong one, a wiki behind a
// consent overlay, a contributors count that loads late, and discussions
// with a search of their own that the header's issue search does not cover.

// SecurityEmail is where the security policy says to report vulnerabilities.
const SecurityEmail = "security@acme.example"

// MinGoVersion is the wiki's minimum supported Go version.
const MinGoVersion = "1.24"

// ReleasesPerPage is how many releases a page of the list shows.
const ReleasesPerPage = 4

// ContributorsDelayMs is how late the contributors count appears.
const ContributorsDelayMs = 700

type release struct {
	ID       int
	Tag      string
	Date     string
	Notes    string
	Assets   []asset
	Latest   bool
	Previous int // page of the list it is on (1-based)
}

type asset struct {
	Name      string
	Downloads int
}

type discussion struct {
	Number   int
	Title    string
	Author   string
	Category string
	Answered bool
}

var releaseTags = []struct{ tag, date, notes string }{
	{"v1.0.0", "2024-03-14", "First stable release."},
	{"v1.1.0", "2024-05-02", "Tables can stream rows."},
	{"v1.2.0", "2024-07-19", "Theme tokens."},
	{"v1.3.0", "2024-10-01", "Keyboard navigation in menus."},
	{"v1.4.0", "2025-01-22", "Date picker."},
	{"v2.0.0", "2025-04-10", "New widget tree; see the migration guide."},
	{"v2.1.0", "2025-06-30", "RTL layouts."},
	{"v2.2.0", "2025-09-15", "Server-side rendering."},
	{"v2.3.0", "2026-01-08", "Faster first render."},
	{"v2.4.0", "2026-04-21", "Dark mode."},
}

// releases lists the releases newest first; the latest one's asset
// downloads move with the round.
func (d data) releases() []release {
	var out []release
	n := len(releaseTags)
	for i := n - 1; i >= 0; i-- {
		t := releaseTags[i]
		rel := release{ID: 100 + i, Tag: t.tag, Date: t.date, Notes: t.notes, Latest: i == n-1}
		base := 40 * (i + 1)
		if rel.Latest {
			base = d.LatestDownloads
		}
		rel.Assets = []asset{
			{"widgets-darwin-arm64.tar.gz", base/2 + 7},
			{"widgets-linux-amd64.tar.gz", base},
			{"widgets-windows-amd64.zip", base/3 + 2},
		}
		rel.Previous = len(out)/ReleasesPerPage + 1
		out = append(out, rel)
	}
	return out
}

func (d data) release(id int) (release, bool) {
	for _, r := range d.releases() {
		if r.ID == id {
			return r, true
		}
	}
	return release{}, false
}

func (d data) releaseByTag(tag string) release {
	for _, r := range d.releases() {
		if r.Tag == tag {
			return r
		}
	}
	return release{}
}

var discussionPool = []discussion{
	{1, "How do I override the theme colours?", "carol", "Q&A", true},
	{2, "Roadmap for 3.0", "bob", "Announcements", false},
	{3, "Theme tokens naming conventions", "olivia", "Ideas", false},
	{4, "Show and tell: a dashboard built with widgets", "trent", "Show and tell", false},
	{5, "Dark theme flickers on load", "zoe", "Q&A", true},
	{6, "Using widgets with htmx", "peggy", "Q&A", false},
}

func (d data) discussions(q string) []discussion {
	words := strings.Fields(strings.ToLower(q))
	var out []discussion
	for _, x := range discussionPool {
		t := strings.ToLower(x.Title)
		ok := true
		for _, w := range words {
			if !strings.Contains(t, w) {
				ok = false
			}
		}
		if ok {
			out = append(out, x)
		}
	}
	return out
}

func (d data) discussion(n int) (discussion, bool) {
	for _, x := range discussionPool {
		if x.Number == n {
			return x, true
		}
	}
	return discussion{}, false
}

// trapTasks are the harder tasks (see Tasks).
func trapTasks(repo string, d data) []Task {
	latest := d.releases()[0]
	var linux int
	for _, a := range latest.Assets {
		if strings.Contains(a.Name, "linux-amd64") {
			linux = a.Downloads
		}
	}
	first := d.discussions("theme")[0]
	return []Task{
		{ID: "security-contact", Text: "What is the security contact email of acme/widgets?",
			StartURL: repo, Expected: SecurityEmail},
		{ID: "release-downloads", Text: "How many downloads does the linux-amd64 asset of the latest acme/widgets release have?",
			StartURL: repo, Expected: fmt.Sprint(linux), Volatile: true},
		{ID: "release-date", Text: "When was acme/widgets 1.0.0 released?",
			StartURL: repo, Expected: d.releaseByTag("v1.0.0").Date},
		{ID: "wiki-go-version", Text: "What is the minimum Go version of acme/widgets, according to its wiki?",
			StartURL: repo, Expected: MinGoVersion},
		{ID: "contributors", Text: "How many contributors does acme/widgets have?",
			StartURL: repo, Expected: fmt.Sprint(d.Contributors), Volatile: true},
		{ID: "discussion-author", Text: `Search the acme/widgets discussions for "theme" and open the first result: who started that discussion?`,
			StartURL: repo, Expected: first.Author},
	}
}
