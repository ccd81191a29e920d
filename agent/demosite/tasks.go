package demosite

import (
	"regexp"
	"strconv"
	"strings"
)

// Task is one benchmark task on the demo site.
type Task struct {
	ID       string // short and stable across rounds: "stars", "open-issues", …
	Text     string // the natural-language task given to the agent
	StartURL string
	Expected string // the correct answer for the round, as the site shows it
	// Parts must all appear in an answer (default: Expected alone).
	Parts []string
	// Reject are values whose presence makes an answer wrong (the other
	// statuses, for a status question).
	Reject   []string
	Volatile bool // the answer changes between rounds
	Login    bool // the task needs signing in
	// Secrets the caller resolves {{secret:NAME}} placeholders in Text with,
	// typed into the page only.
	Secrets map[string]string
}

// Tasks lists the demo's tasks for a round: the ten of DESIGN §9, a
// sign-in task, then the harder tasks with real sites' traps (traps.go). Expected values come from the data the pages render. The
// variant changes markup only, so the answers are the same for both.
func Tasks(baseURL string, round int, variant string) []Task {
	_ = variant
	d := snapshot(round)
	base := strings.TrimSuffix(baseURL, "/")
	repo := base + repoPath
	open := d.OpenIssues()
	pr := d.Pulls[0]
	latest := d.Runs[0]
	others := func(s string) []string {
		var out []string
		for _, w := range statusWords {
			if w != s {
				out = append(out, w)
			}
		}
		return out
	}
	return append([]Task{
		{ID: "stars", Text: "How many stars does the acme/widgets repository have?",
			StartURL: repo, Expected: formatNum(d.Stars), Volatile: true},
		{ID: "open-issues", Text: "How many open issues does acme/widgets have?",
			StartURL: repo, Expected: strconv.Itoa(len(open)), Volatile: true},
		{ID: "first-issues", Text: "What are the titles of the first and second issues in the acme/widgets issue list?",
			StartURL: repo, Expected: open[0].Title + "; " + open[1].Title, Parts: []string{open[0].Title, open[1].Title}},
		{ID: "search-memory", Text: `Search the acme/widgets issues for "memory": how many open issues match?`,
			StartURL: repo, Expected: strconv.Itoa(len(d.search("memory"))), Volatile: true},
		{ID: "open-pulls", Text: "How many open pull requests does acme/widgets have?",
			StartURL: repo, Expected: strconv.Itoa(len(d.Pulls)), Volatile: true},
		{ID: "first-pull-checks", Text: "What is the checks status of the first pull request in acme/widgets?",
			StartURL: repo, Expected: status(pr.Checks), Reject: others(status(pr.Checks)), Volatile: true},
		{ID: "latest-workflow", Text: "What is the status of the latest workflow run in acme/widgets Actions?",
			StartURL: repo, Expected: latest.Status, Reject: others(latest.Status), Volatile: true},
		{ID: "install-command", Text: "What command installs acme/widgets, according to its README?",
			StartURL: repo, Expected: d.InstallCmd},
		{ID: "getting-started", Text: "What is the file name of the getting-started example in the examples folder of acme/widgets?",
			StartURL: repo, Expected: ExampleFile},
		{ID: "default-branch", Text: "What is the default branch of acme/widgets?",
			StartURL: repo, Expected: d.DefaultBranch},
		{ID: "unread-notifications", Text: "Sign in as demo with the password {{secret:demo_password}} and report the unread notifications count.",
			StartURL: base + "/login?return_to=%2Fnotifications", Expected: strconv.Itoa(d.Unread),
			Volatile: true, Login: true, Secrets: map[string]string{"demo_password": DemoPassword}},
	}, trapTasks(repo, d)...)
}

var (
	thousands = regexp.MustCompile(`(\d),(\d{3})\b`)
	numberRE  = regexp.MustCompile(`^\d+(\.\d+)?$`)
	synonyms  = strings.NewReplacer(
		"succeeded", "success", "successful", "success", "passing", "success", "passed", "success",
		"failing", "failure", "failed", "failure", "canceled", "cancelled",
		"in progress", "pending", "queued", "pending",
	)
)

// normalize lower-cases s, folds whitespace, quotes and status synonyms, and
// drops thousands separators ("1,234" → "1234").
func normalize(s string) string {
	s = strings.ToLower(s)
	for thousands.MatchString(s) {
		s = thousands.ReplaceAllString(s, "$1$2")
	}
	s = strings.NewReplacer("`", " ", "“", " ", "”", " ", `"`, " ", "'", " ").Replace(s)
	s = strings.Join(strings.Fields(s), " ")
	return synonyms.Replace(s)
}

// Check reports whether answer is right for t: it contains every part
// (numbers as whole numbers; commas, case and quotes ignored; "passed" reads
// as success, "failed" as failure) and, when t has Reject values, names the
// expected one before any of them.
func Check(t Task, answer string) bool {
	a := normalize(answer)
	if a == "" {
		return false
	}
	parts := t.Parts
	if len(parts) == 0 {
		parts = []string{t.Expected}
	}
	for _, p := range parts {
		if !contains(a, normalize(p)) {
			return false
		}
	}
	// With alternatives (other statuses), the first one named must be right:
	// "failure: test failed, build success" is right when failure is expected.
	if len(t.Reject) > 0 {
		first, firstWord := -1, ""
		for _, w := range append([]string{t.Expected}, t.Reject...) {
			if i := index(a, normalize(w)); i >= 0 && (first < 0 || i < first) {
				first, firstWord = i, w
			}
		}
		if firstWord != t.Expected {
			return false
		}
	}
	return true
}

// contains matches want in a as a whole number when want is a number (so
// "12" is not found in "123"), else as a whole-word substring.
func contains(a, want string) bool { return index(a, want) >= 0 }

// index is where want starts in a under contains' rules, or -1.
func index(a, want string) int {
	if want == "" {
		return -1
	}
	var re *regexp.Regexp
	if numberRE.MatchString(want) {
		re = regexp.MustCompile(`(^|[^\d.])` + regexp.QuoteMeta(want) + `($|[^\d]|\.(\D|$))`)
	} else {
		re = regexp.MustCompile(`(^|\W)` + regexp.QuoteMeta(want) + `($|\W)`)
	}
	m := re.FindStringIndex(a)
	if m == nil {
		return -1
	}
	return m[0]
}
