package demosite

import (
	"context"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
)

var pagePaths = []string{
	"/acme/widgets",
	"/acme/widgets/issues",
	"/acme/widgets/issues?q=memory",
	"/acme/widgets/issues?state=closed",
	"/acme/widgets/issues/1",
	"/acme/widgets/issues/3",
	"/acme/widgets/pulls",
	"/acme/widgets/pull/31",
	"/acme/widgets/pull/31/checks",
	"/acme/widgets/actions",
	"/acme/widgets/blob/main/README.md",
	"/acme/widgets/tree/main/examples",
	"/acme/widgets/blob/main/examples/getting-started.go",
	"/login",
	"/no/such/page",
	"/acme/widgets/releases",
	"/acme/widgets/releases?page=3",
	"/acme/widgets/releases/109",
	"/acme/widgets/releases/109/assets",
	"/acme/widgets/security",
	"/acme/widgets/security/policy",
	"/acme/widgets/security/advisories/new",
	"/acme/widgets/wiki",
	"/acme/widgets/wiki/Requirements",
	"/acme/widgets/graphs/contributors",
	"/acme/widgets/discussions",
	"/acme/widgets/discussions?q=theme",
	"/acme/widgets/discussions/1",
	"/acme/widgets/archive",
}

func get(t *testing.T, h http.Handler, path string, cookies ...*http.Cookie) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest("GET", path, nil)
	for _, c := range cookies {
		r.AddCookie(c)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

var (
	styleRE = regexp.MustCompile(`(?s)<(style|script)[^>]*>.*?</(style|script)>`)
	tagRE   = regexp.MustCompile(`(?s)<[^>]*>`)
	attrRE  = regexp.MustCompile(`\s(id|class)="([^"]*)"`)
)

// text is the visible text of an HTML page, whitespace folded.
func text(page string) string {
	s := styleRE.ReplaceAllString(page, " ")
	s = tagRE.ReplaceAllString(s, " ")
	return strings.Join(strings.Fields(html.UnescapeString(s)), " ")
}

// names are the ids and class names used in a page.
func names(page string) map[string]bool {
	out := map[string]bool{}
	for _, m := range attrRE.FindAllStringSubmatch(page, -1) {
		for _, n := range strings.Fields(m[2]) {
			out[n] = true
		}
	}
	return out
}

func TestPagesRender(t *testing.T) {
	for _, variant := range []string{Stable, Drift} {
		s := New(Options{Variant: variant, Round: 1})
		for _, p := range pagePaths {
			w := get(t, s, p)
			want := http.StatusOK
			if p == "/no/such/page" {
				want = http.StatusNotFound
			}
			body := w.Body.String()
			if w.Code != want || !strings.Contains(body, "</html>") || !strings.Contains(body, "<title>") {
				t.Errorf("%s %s: %d, %d bytes", variant, p, w.Code, len(body))
			}
			if len(names(body)) < 5 {
				t.Errorf("%s %s: only %d ids/classes", variant, p, len(names(body)))
			}
		}
	}
	s := New(Options{})
	if w := get(t, s, "/"); w.Code != http.StatusFound || w.Header().Get("Location") != "/acme/widgets" {
		t.Errorf("/: %d to %q", w.Code, w.Header().Get("Location"))
	}
}

func TestDriftRenamesMarkupOnly(t *testing.T) {
	stable, drift := New(Options{Variant: Stable}), New(Options{Variant: Drift})
	for _, p := range pagePaths {
		a, b := get(t, stable, p).Body.String(), get(t, drift, p).Body.String()
		if text(a) != text(b) {
			t.Errorf("%s: text differs\nstable: %s\n drift: %s", p, text(a), text(b))
		}
		sn, dn := names(a), names(b)
		for n := range sn {
			if dn[n] {
				t.Errorf("%s: %q is an id or class in both variants", p, n)
			}
			if !dn[Rename(n, true)] {
				t.Errorf("%s: %q renamed to %q, not found in drift", p, n, Rename(n, true))
			}
		}
		if len(sn) != len(dn) {
			t.Errorf("%s: %d names stable, %d drift", p, len(sn), len(dn))
		}
	}
	// SetVariant switches a running site.
	s := New(Options{})
	s.SetVariant(Drift)
	if !strings.Contains(get(t, s, "/acme/widgets").Body.String(), `id="`+Rename("repo-sidebar", true)+`"`) {
		t.Error("SetVariant(Drift) did not switch the markup")
	}
}

func TestRoundsChangeVolatileValuesOnly(t *testing.T) {
	const base = "http://127.0.0.1:1"
	for r := 0; r < 6; r++ {
		now, next := Tasks(base, r, Stable), Tasks(base, r+1, Stable)
		if len(now) != 17 {
			t.Fatalf("%d tasks", len(now))
		}
		for i := range now {
			changed := now[i].Expected != next[i].Expected
			if changed != now[i].Volatile {
				t.Errorf("round %d→%d, task %s (volatile %v): %q → %q", r, r+1, now[i].ID, now[i].Volatile, now[i].Expected, next[i].Expected)
			}
		}
	}
	// Stable values are on the pages of every round.
	for r := 0; r < 4; r++ {
		s := New(Options{Round: r})
		all := ""
		for _, p := range pagePaths {
			all += text(get(t, s, p).Body.String()) + "\n"
		}
		for _, v := range []string{"Widget renders blank in Safari", "Add dark mode theme", "Default branch main", InstallCmd, ExampleFile, "56 forks"} {
			if !strings.Contains(all, v) {
				t.Errorf("round %d: %q missing", r, v)
			}
		}
	}
}

// answerPages says where each task's answer is shown.
var answerPages = map[string]string{
	"stars":                "/acme/widgets",
	"open-issues":          "/acme/widgets/issues",
	"first-issues":         "/acme/widgets/issues",
	"search-memory":        "/acme/widgets/issues?q=memory",
	"open-pulls":           "/acme/widgets/pulls",
	"first-pull-checks":    "/acme/widgets/pull/31/checks",
	"latest-workflow":      "/acme/widgets/actions",
	"install-command":      "/acme/widgets/blob/main/README.md",
	"getting-started":      "/acme/widgets/tree/main/examples",
	"default-branch":       "/acme/widgets",
	"unread-notifications": "/notifications",
	"security-contact":     "/acme/widgets/security/policy",
	"release-downloads":    "/acme/widgets/releases/109/assets",
	"release-date":         "/acme/widgets/releases/100",
	"wiki-go-version":      "/acme/widgets/wiki/Requirements",
	"contributors":         "/acme/widgets/graphs/contributors",
	"discussion-author":    "/acme/widgets/discussions/1",
}

// answerLabels is the labelled text each answer appears in.
var answerLabels = map[string]string{
	"stars":                "%s stars",
	"open-issues":          "Open issues: %s",
	"search-memory":        "Matching issues: %s",
	"open-pulls":           "Open pull requests: %s",
	"first-pull-checks":    "Checks status: %s",
	"latest-workflow":      "Status %s",
	"default-branch":       "Default branch %s",
	"unread-notifications": "Unread notifications: %s",
	"security-contact":     "Security contact email %s",
	"release-downloads":    "widgets-linux-amd64.tar.gz downloads %s",
	"release-date":         "Release date %s",
	"wiki-go-version":      "Minimum Go version %s",
	"discussion-author":    "Started by %s",
}

func TestTasksMatchPages(t *testing.T) {
	for _, variant := range []string{Stable, Drift} {
		for r := 0; r < 4; r++ {
			s := New(Options{Round: r, Variant: variant})
			session := signIn(t, s, DemoPassword)
			for _, task := range Tasks("http://127.0.0.1:9", r, variant) {
				p, ok := answerPages[task.ID]
				if !ok {
					t.Fatalf("no answer page for %s", task.ID)
				}
				body := get(t, s, p, session).Body.String()
				page := text(body)
				if task.ID == "contributors" {
					// The count appears late: the script that fills it holds it.
					if !strings.Contains(page, "Contributors Loading…") || !strings.Contains(body, "textContent =  "+task.Expected+" ;") {
						t.Errorf("%s round %d contributors: %q not in the late script", variant, r, task.Expected)
					}
					continue
				}
				want := []string{task.Expected}
				if f, ok := answerLabels[task.ID]; ok {
					want = []string{strings.ReplaceAll(f, "%s", task.Expected)}
				} else if len(task.Parts) > 0 {
					want = task.Parts
				}
				for _, w := range want {
					if !strings.Contains(page, w) {
						t.Errorf("%s round %d %s: %q not on %s: %s", variant, r, task.ID, w, p, page)
					}
				}
				if !Check(task, task.Expected) {
					t.Errorf("%s: Check(Expected %q) = false", task.ID, task.Expected)
				}
				if !strings.HasPrefix(task.StartURL, "http://127.0.0.1:9/") || task.Text == "" {
					t.Errorf("%s: %+v", task.ID, task)
				}
			}
		}
	}
	last := Tasks("http://h", 0, Stable)[10]
	// The old tasks stay first and unchanged; the harder ones follow.
	if ids := Tasks("http://h", 0, Stable); ids[0].ID != "stars" || ids[11].ID != "security-contact" {
		t.Errorf("task order: %s … %s", ids[0].ID, ids[11].ID)
	}
	if !last.Login || last.Secrets["demo_password"] != DemoPassword || !strings.Contains(last.Text, "{{secret:demo_password}}") || strings.Contains(last.Text, DemoPassword) {
		t.Errorf("login task %+v", last)
	}
}

func signIn(t *testing.T, h http.Handler, password string) *http.Cookie {
	t.Helper()
	form := url.Values{"login": {DemoUser}, "password": {password}, "return_to": {"/notifications"}}
	r := httptest.NewRequest("POST", "/session", strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusFound || w.Header().Get("Location") != "/notifications" {
		return nil
	}
	for _, c := range w.Result().Cookies() {
		if c.Name == sessionCookie {
			return c
		}
	}
	return nil
}

func TestLoginAndSecret(t *testing.T) {
	const custom = "another-secret-pw-42"
	for _, pw := range []string{"", custom} {
		s := New(Options{Password: pw, Round: 2})
		want := pw
		if want == "" {
			want = DemoPassword
		}
		w := get(t, s, "/notifications")
		if w.Code != http.StatusFound || w.Header().Get("Location") != "/login?return_to=%2Fnotifications" {
			t.Errorf("anonymous /notifications: %d to %q", w.Code, w.Header().Get("Location"))
		}
		if c := signIn(t, s, "wrong"); c != nil {
			t.Error("signed in with a wrong password")
		}
		bad := url.Values{"login": {DemoUser}, "password": {want + "x"}}
		r := httptest.NewRequest("POST", "/session", strings.NewReader(bad.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, r)
		outputs := []string{rec.Body.String()}
		if !strings.Contains(rec.Body.String(), "Incorrect username or password.") {
			t.Errorf("wrong password page: %s", text(rec.Body.String()))
		}
		c := signIn(t, s, want)
		if c == nil {
			t.Fatal("sign-in failed")
		}
		n := get(t, s, "/notifications", c)
		if n.Code != http.StatusOK || !strings.Contains(text(n.Body.String()), "Unread notifications: 7") {
			t.Errorf("notifications: %d %s", n.Code, text(n.Body.String()))
		}
		if strings.Count(n.Body.String(), `<li class=`) != 7 {
			t.Errorf("want 7 notification items")
		}
		for _, p := range append(pagePaths, "/notifications", "/") {
			for _, ck := range []*http.Cookie{nil, c} {
				var cks []*http.Cookie
				if ck != nil {
					cks = append(cks, ck)
				}
				res := get(t, s, p, cks...)
				outputs = append(outputs, res.Body.String(), res.Header().Get("Location"), res.Header().Get("Set-Cookie"))
			}
		}
		for _, o := range outputs {
			if strings.Contains(o, want) {
				t.Fatalf("password found in output: %s", o)
			}
		}
		if w := get(t, s, "/logout", c); w.Code != http.StatusFound {
			t.Errorf("logout: %d", w.Code)
		}
	}
}

func TestCheck(t *testing.T) {
	stars := Task{Expected: "1,253"}
	status := Task{Expected: "failure", Reject: []string{"success", "pending", "cancelled"}}
	two := Task{Expected: "A; B", Parts: []string{"Widget renders blank in Safari", "Add dark mode theme"}}
	cmd := Task{Expected: InstallCmd}
	for _, tc := range []struct {
		t      Task
		answer string
		want   bool
	}{
		{stars, "1,253", true},
		{stars, "1253", true},
		{stars, "The repository has 1,253 stars.", true},
		{stars, "1,234", false},
		{stars, "11253", false},
		{stars, "1,2530", false},
		{stars, "", false},
		{status, "failure", true},
		{status, "Failed", true},
		{status, "Checks status: failure (test failed; build success)", true},
		{status, "success", false},
		{status, "all checks passed", false},
		{status, "success, then failure", false},
		{two, "Widget renders blank in Safari; add dark mode theme", true},
		{two, `"Widget renders blank in Safari" and "Add dark mode theme"`, true},
		{two, "Widget renders blank in Safari", false},
		{cmd, "`go install example.com/acme/widgets/cmd/widgets@latest`", true},
		{cmd, "go install example.com/acme/widgets@latest", false},
		{Task{Expected: "13"}, "There are 13 open issues.", true},
		{Task{Expected: "13"}, "There are 130 open issues.", false},
		{Task{Expected: "main"}, "The default branch is main.", true},
		{Task{Expected: "main"}, "mainline", false},
	} {
		if got := Check(tc.t, tc.answer); got != tc.want {
			t.Errorf("Check(%q, %q) = %v, want %v", tc.t.Expected, tc.answer, got, tc.want)
		}
	}
}

func TestStart(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	s := New(Options{})
	base, stop, err := s.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if !strings.HasPrefix(base, "http://127.0.0.1:") {
		t.Errorf("base %q", base)
	}
	res, err := http.Get(base + "/acme/widgets")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(string(b), "1,234") {
		t.Errorf("GET: %d %s", res.StatusCode, text(string(b)))
	}
	s.SetRound(1)
	res, err = http.Get(base + "/acme/widgets")
	if err == nil {
		b, _ = io.ReadAll(res.Body)
		res.Body.Close()
	}
	if err != nil || !strings.Contains(string(b), "1,253") {
		t.Errorf("after SetRound(1): %v %s", err, text(string(b)))
	}
	stop()
	stop() // idempotent
	if _, err := http.Get(base + "/"); err == nil {
		t.Error("server still answers after stop")
	}
	// Cancelling ctx stops a running site.
	base2, stop2, err := New(Options{}).Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stop2()
	cancel()
	for i := 0; i < 100; i++ {
		if _, err = http.Get(base2 + "/"); err != nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err == nil {
		t.Error("server still answers after ctx was cancelled")
	}
}
