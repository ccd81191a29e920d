package demosite

import (
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"html/template"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

//go:embed site/*.html
var siteFS embed.FS

// Variants of the markup.
const (
	Stable = "stable"
	Drift  = "drift" // every id and class renamed; text identical
)

// Options configure a Site; the zero value is the stable variant, round 0,
// password DemoPassword.
type Options struct {
	Variant  string // Stable or Drift
	Round    int    // volatile values change with it
	Password string // the demo user's password; default DemoPassword
}

// Site is the demo site; it is an http.Handler.
type Site struct {
	password string
	session  string // the signed-in cookie value, random per Site
	round    atomic.Int64
	drift    atomic.Bool
	pages    map[string]map[string]*template.Template // variant → page → template
}

const sessionCookie = "codehub_session"

var pageNames = []string{"repo", "issues", "issue", "pulls", "pull", "actions", "readme", "tree", "blob", "login", "notifications", "notfound",
	"releases", "release", "security", "wiki", "contributors", "discussions", "archive"}

// New builds a Site. It panics only if the embedded templates are broken,
// which the package tests rule out.
func New(o Options) *Site {
	s := &Site{password: o.Password, pages: map[string]map[string]*template.Template{}}
	if s.password == "" {
		s.password = DemoPassword
	}
	var tok [16]byte
	rand.Read(tok[:])
	s.session = hex.EncodeToString(tok[:])
	s.SetRound(o.Round)
	s.SetVariant(o.Variant)
	for _, v := range []string{Stable, Drift} {
		s.pages[v] = map[string]*template.Template{}
		for _, name := range pageNames {
			t := template.New("layout.html").Funcs(funcs(v == Drift))
			t = template.Must(t.ParseFS(siteFS, "site/layout.html", "site/"+name+".html"))
			s.pages[v][name] = t
		}
	}
	return s
}

// SetRound switches the volatile values (safe while serving).
func (s *Site) SetRound(n int) { s.round.Store(int64(n)) }

// SetVariant switches between Stable and Drift markup (safe while serving).
func (s *Site) SetVariant(v string) { s.drift.Store(v == Drift) }

// Round is the current round.
func (s *Site) Round() int { return int(s.round.Load()) }

// Rename is the name an id or class gets in the variant: unchanged when
// stable, an opaque deterministic name ("x" + 7 hex digits) under drift.
func Rename(name string, drift bool) string {
	if !drift {
		return name
	}
	h := fnv.New32a()
	h.Write([]byte("pem-drift:" + name))
	return fmt.Sprintf("x%07x", h.Sum32()&0xfffffff)
}

func funcs(drift bool) template.FuncMap {
	return template.FuncMap{
		"id": func(name string) string { return Rename(name, drift) },
		"cls": func(names ...string) string {
			out := make([]string, len(names))
			for i, n := range names {
				out[i] = Rename(n, drift)
			}
			return strings.Join(out, " ")
		},
		"num":  formatNum,
		"join": strings.Join,
		"add":  func(a, b int) int { return a + b },
		"sub":  func(a, b int) int { return a - b },
	}
}

// formatNum writes n with thousands separators: 1234 → "1,234".
func formatNum(n int) string {
	s := strconv.Itoa(n)
	if n < 0 {
		return "-" + formatNum(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// Start serves the site on 127.0.0.1 on a free port until stop is called or
// ctx ends.
func (s *Site) Start(ctx context.Context) (baseURL string, stop func(), err error) {
	return s.StartOn(ctx, "127.0.0.1:0")
}

// StartOn serves the site on addr (host:port; port 0 picks a free one)
// until stop is called or ctx ends.
func (s *Site) StartOn(ctx context.Context, addr string) (baseURL string, stop func(), err error) {
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("demo site: listen on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			slog.Error("demo site stopped", "err", err)
		}
	}()
	var stopped atomic.Bool
	stop = func() {
		if stopped.Swap(true) {
			return
		}
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
		<-done
	}
	go func() {
		select {
		case <-ctx.Done():
			stop()
		case <-done:
		}
	}()
	return "http://" + l.Addr().String(), stop, nil
}

// view is what a page template renders.
type view struct {
	Title    string
	D        data
	User     string
	RepoNav  bool
	Tab      string
	Query    string
	Searched bool
	Items    []issue
	Issue    issue
	Pull     pull
	Checks   bool
	File     file
	Error    string
	Login    string
	ReturnTo string
	Notes    []note

	// The harder tasks' pages (traps.go).
	Section     string
	Releases    []release
	Release     release
	Assets      bool
	Page, Pages int
	Email       string
	MinGo       string
	Delay       int
	Discussions []discussion
	Discussion  discussion
}

// PullStatus is the overall status of the pull request's checks.
func (v view) PullStatus() string { return status(v.Pull.Checks) }

type note struct{ Text, Href string }

var repoPath = "/" + Owner + "/" + Repo

func (s *Site) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d := snapshot(s.Round())
	v := view{D: d, User: s.user(r), RepoNav: true}
	p := r.URL.Path
	switch {
	case p == "/":
		http.Redirect(w, r, repoPath, http.StatusFound)
		return
	case p == repoPath || p == repoPath+"/":
		v.Title, v.Tab = fmt.Sprintf("%s/%s: %s", Owner, Repo, d.Description), "code"
		s.render(w, "repo", v, http.StatusOK)
		return
	case p == repoPath+"/issues":
		v.Tab = "issues"
		v.Query = strings.TrimSpace(r.URL.Query().Get("q"))
		switch {
		case v.Query != "":
			v.Searched, v.Items = true, d.search(v.Query)
			v.Title = fmt.Sprintf("Issues matching %q · %s/%s", v.Query, Owner, Repo)
		case r.URL.Query().Get("state") == "closed":
			for _, is := range d.Issues {
				if !is.Open {
					v.Items = append(v.Items, is)
				}
			}
			v.Title = fmt.Sprintf("Closed issues · %s/%s", Owner, Repo)
		default:
			v.Items = d.OpenIssues()
			v.Title = fmt.Sprintf("Issues · %s/%s", Owner, Repo)
		}
		s.render(w, "issues", v, http.StatusOK)
		return
	case strings.HasPrefix(p, repoPath+"/issues/"):
		n, err := strconv.Atoi(strings.TrimPrefix(p, repoPath+"/issues/"))
		if is, ok := d.issue(n); err == nil && ok {
			v.Tab, v.Issue = "issues", is
			v.Title = fmt.Sprintf("%s · Issue #%d · %s/%s", is.Title, is.Number, Owner, Repo)
			s.render(w, "issue", v, http.StatusOK)
			return
		}
	case p == repoPath+"/pulls":
		v.Tab, v.Title = "pulls", fmt.Sprintf("Pull requests · %s/%s", Owner, Repo)
		s.render(w, "pulls", v, http.StatusOK)
		return
	case strings.HasPrefix(p, repoPath+"/pull/"):
		rest := strings.TrimPrefix(p, repoPath+"/pull/")
		num, checks := rest, false
		if n, ok := strings.CutSuffix(rest, "/checks"); ok {
			num, checks = n, true
		}
		n, err := strconv.Atoi(num)
		if pr, ok := d.pull(n); err == nil && ok {
			v.Tab, v.Pull, v.Checks = "pulls", pr, checks
			v.Title = fmt.Sprintf("%s · Pull Request #%d · %s/%s", pr.Title, pr.Number, Owner, Repo)
			if checks {
				v.Title = "Checks · " + v.Title
			}
			s.render(w, "pull", v, http.StatusOK)
			return
		}
	case p == repoPath+"/actions":
		v.Tab, v.Title = "actions", fmt.Sprintf("Actions · %s/%s", Owner, Repo)
		s.render(w, "actions", v, http.StatusOK)
		return
	case p == repoPath+"/blob/"+DefaultBranch+"/README.md":
		v.Tab, v.Title = "code", fmt.Sprintf("README.md · %s/%s", Owner, Repo)
		s.render(w, "readme", v, http.StatusOK)
		return
	case p == repoPath+"/tree/"+DefaultBranch+"/examples":
		v.Tab, v.Title = "code", fmt.Sprintf("examples · %s/%s", Owner, Repo)
		s.render(w, "tree", v, http.StatusOK)
		return
	case strings.HasPrefix(p, repoPath+"/blob/"+DefaultBranch+"/examples/"):
		name := strings.TrimPrefix(p, repoPath+"/blob/"+DefaultBranch+"/examples/")
		for _, f := range d.Examples {
			if f.Name == name {
				v.Tab, v.File = "code", f
				v.Title = fmt.Sprintf("examples/%s · %s/%s", f.Name, Owner, Repo)
				s.render(w, "blob", v, http.StatusOK)
				return
			}
		}
	case p == repoPath+"/releases":
		all := d.releases()
		v.Pages = (len(all) + ReleasesPerPage - 1) / ReleasesPerPage
		v.Page, _ = strconv.Atoi(r.URL.Query().Get("page"))
		if v.Page < 1 {
			v.Page = 1
		}
		if v.Page <= v.Pages {
			lo := (v.Page - 1) * ReleasesPerPage
			v.Releases = all[lo:min(lo+ReleasesPerPage, len(all))]
			v.Tab, v.Title = "code", fmt.Sprintf("Releases · page %d · %s/%s", v.Page, Owner, Repo)
			s.render(w, "releases", v, http.StatusOK)
			return
		}
	case strings.HasPrefix(p, repoPath+"/releases/"):
		rest := strings.TrimPrefix(p, repoPath+"/releases/")
		num, assets := strings.CutSuffix(rest, "/assets")
		n, err := strconv.Atoi(num)
		if rel, ok := d.release(n); err == nil && ok {
			v.Tab, v.Release, v.Assets = "code", rel, assets
			v.Title = fmt.Sprintf("Release %s · %s/%s", rel.Tag, Owner, Repo)
			if assets {
				v.Title = "Assets · " + v.Title
			}
			s.render(w, "release", v, http.StatusOK)
			return
		}
	case p == repoPath+"/security" || p == repoPath+"/security/policy" || p == repoPath+"/security/advisories/new":
		v.Tab, v.Email = "code", SecurityEmail
		switch {
		case strings.HasSuffix(p, "/policy"):
			v.Section, v.Title = "policy", fmt.Sprintf("Security policy · %s/%s", Owner, Repo)
		case strings.HasSuffix(p, "/new"):
			v.Section, v.Title = "report", fmt.Sprintf("Report a vulnerability · %s/%s", Owner, Repo)
		default:
			v.Title = fmt.Sprintf("Security overview · %s/%s", Owner, Repo)
		}
		s.render(w, "security", v, http.StatusOK)
		return
	case p == repoPath+"/wiki" || p == repoPath+"/wiki/Requirements" || p == repoPath+"/wiki/FAQ":
		v.Tab, v.MinGo = "code", MinGoVersion
		v.Section = strings.TrimPrefix(strings.TrimPrefix(p, repoPath+"/wiki"), "/")
		page := v.Section
		if page == "" {
			page = "Home"
		}
		v.Title = fmt.Sprintf("%s · %s/%s Wiki", page, Owner, Repo)
		s.render(w, "wiki", v, http.StatusOK)
		return
	case p == repoPath+"/archive":
		v.Tab, v.Title = "code", fmt.Sprintf("Download source code · %s/%s", Owner, Repo)
		s.render(w, "archive", v, http.StatusOK)
		return
	case p == repoPath+"/graphs/contributors":
		v.Tab, v.Delay = "code", ContributorsDelayMs
		v.Title = fmt.Sprintf("Contributors · %s/%s", Owner, Repo)
		s.render(w, "contributors", v, http.StatusOK)
		return
	case p == repoPath+"/discussions":
		v.Tab = "code"
		v.Query = strings.TrimSpace(r.URL.Query().Get("q"))
		v.Searched, v.Discussions = v.Query != "", d.discussions(v.Query)
		v.Title = fmt.Sprintf("Discussions · %s/%s", Owner, Repo)
		if v.Searched {
			v.Title = fmt.Sprintf("Discussions matching %q · %s/%s", v.Query, Owner, Repo)
		}
		s.render(w, "discussions", v, http.StatusOK)
		return
	case strings.HasPrefix(p, repoPath+"/discussions/"):
		n, err := strconv.Atoi(strings.TrimPrefix(p, repoPath+"/discussions/"))
		if x, ok := d.discussion(n); err == nil && ok {
			v.Tab, v.Discussion = "code", x
			v.Title = fmt.Sprintf("%s · Discussion #%d · %s/%s", x.Title, x.Number, Owner, Repo)
			s.render(w, "discussions", v, http.StatusOK)
			return
		}
	case p == "/login":
		v.RepoNav, v.Title = false, "Sign in · Codehub"
		v.ReturnTo = safeReturn(r.URL.Query().Get("return_to"))
		s.render(w, "login", v, http.StatusOK)
		return
	case p == "/session" && r.Method == http.MethodPost:
		s.signIn(w, r, v)
		return
	case p == "/logout":
		http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1})
		http.Redirect(w, r, "/", http.StatusFound)
		return
	case p == "/notifications":
		if v.User == "" {
			http.Redirect(w, r, "/login?return_to="+url.QueryEscape("/notifications"), http.StatusFound)
			return
		}
		v.RepoNav, v.Title = false, fmt.Sprintf("Notifications (%d unread)", d.Unread)
		open := d.OpenIssues()
		for i := 0; i < d.Unread; i++ {
			is := open[i%len(open)]
			v.Notes = append(v.Notes, note{
				Text: fmt.Sprintf("%s/%s #%d: %s", Owner, Repo, is.Number, is.Title),
				Href: fmt.Sprintf("%s/issues/%d", repoPath, is.Number),
			})
		}
		s.render(w, "notifications", v, http.StatusOK)
		return
	}
	v.RepoNav, v.Title = false, "Page not found · Codehub"
	s.render(w, "notfound", v, http.StatusNotFound)
}

func (s *Site) signIn(w http.ResponseWriter, r *http.Request, v view) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	login, pw := strings.TrimSpace(r.PostForm.Get("login")), r.PostForm.Get("password")
	ret := safeReturn(r.PostForm.Get("return_to"))
	if login != DemoUser || pw != s.password {
		// Never echo the password back.
		v.RepoNav, v.Title = false, "Sign in · Codehub"
		v.Error, v.Login, v.ReturnTo = "Incorrect username or password.", login, ret
		s.render(w, "login", v, http.StatusOK)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: s.session, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode})
	if ret == "" {
		ret = "/notifications"
	}
	http.Redirect(w, r, ret, http.StatusFound)
}

// safeReturn keeps only local paths.
func safeReturn(p string) string {
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || strings.Contains(p, `\`) {
		return ""
	}
	return p
}

func (s *Site) user(r *http.Request) string {
	c, err := r.Cookie(sessionCookie)
	if err != nil || c.Value != s.session {
		return ""
	}
	return DemoUser
}

func (s *Site) render(w http.ResponseWriter, page string, v view, code int) {
	variant := Stable
	if s.drift.Load() {
		variant = Drift
	}
	var b strings.Builder
	if err := s.pages[variant][page].ExecuteTemplate(&b, "layout", v); err != nil {
		http.Error(w, "template "+page+": "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	fmt.Fprint(w, b.String())
}
