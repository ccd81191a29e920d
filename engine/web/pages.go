package web

import (
	"bytes"
	"context"
	"embed"
	"fmt"
	"html/template"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pemdev/pem/engine"
)

//go:embed assets/pages.html assets/style.css
var assets embed.FS

// pages are parsed on the first page rendered, not at start-up: every pem
// command links this package, and parsing the templates cost ~0.6 ms of
// each process's start (GODEBUG=inittrace=1; docs/performance.md).
var pages = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("pages").Funcs(template.FuncMap{
		"pct":    func(f float64) string { return fmt.Sprintf("%.0f%%", 100*f) },
		"conf":   func(f float64) string { return fmt.Sprintf("%.2f", f) },
		"when":   when,
		"lower":  strings.ToLower,
		"join":   strings.Join,
		"sel":    func(s engine.Step) string { return s.Selector },
		"add":    func(a, b int) int { return a + b },
		"style":  func() template.CSS { b, _ := assets.ReadFile("assets/style.css"); return template.CSS(b) },
		"status": func(s engine.Status) string { return orDash(string(s)) },
	}).ParseFS(assets, "assets/pages.html"))
})

func when(t any) string {
	switch v := t.(type) {
	case time.Time:
		if v.IsZero() {
			return "–"
		}
		return v.UTC().Format("2006-01-02 15:04 UTC")
	case *time.Time:
		if v == nil || v.IsZero() {
			return "–"
		}
		return v.UTC().Format("2006-01-02 15:04 UTC")
	}
	return "–"
}

// maxIndexEntries bounds the index page; the API pages through any number.
const maxIndexEntries = 2000

// row is one entry on the index.
type row struct {
	V     *engine.EntryView
	Flags []flag
	Href  string
	Runs  int
}

// domainRows are one domain's entries, flagged ones first.
type domainRows struct {
	Domain  string
	Rows    []row
	Flagged int
}

type indexData struct {
	Domains  []domainRows
	Flagged  []row
	Entries  int
	Cut      int // entries left off the page
	Reports  []reportRow
	Warnings []string
}

type reportRow struct {
	Name, Dir, Href string
	Modified        time.Time
}

// index gathers every domain's entries: flagged first (most flags first),
// then by intent key.
func (s *Server) index(ctx context.Context) (*indexData, error) {
	domains, err := s.eng.Store.Domains(ctx)
	if err != nil {
		return nil, err
	}
	d := &indexData{}
	for _, dom := range domains {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		views, warnings, err := s.eng.Entries(ctx, dom)
		if err != nil {
			return nil, err
		}
		d.Warnings = append(d.Warnings, warnings...)
		dr := domainRows{Domain: dom}
		for _, v := range views {
			if d.Entries >= maxIndexEntries {
				d.Cut++
				continue
			}
			d.Entries++
			rw := row{V: v, Flags: flagsOf(v), Href: entryHref(dom, v.IntentKey)}
			for _, ev := range v.Evidence {
				if ev.IsRun() {
					rw.Runs++
				}
			}
			if len(rw.Flags) > 0 {
				dr.Flagged++
				d.Flagged = append(d.Flagged, rw)
			}
			dr.Rows = append(dr.Rows, rw)
		}
		sort.SliceStable(dr.Rows, func(i, j int) bool { return weight(dr.Rows[i].Flags) > weight(dr.Rows[j].Flags) })
		if len(dr.Rows) > 0 {
			d.Domains = append(d.Domains, dr)
		}
	}
	sort.SliceStable(d.Flagged, func(i, j int) bool { return weight(d.Flagged[i].Flags) > weight(d.Flagged[j].Flags) })
	if s.o.Reports != nil {
		rs, err := s.o.Reports(ctx)
		if err != nil {
			d.Warnings = append(d.Warnings, "bench reports: "+err.Error())
		}
		for _, r := range rs {
			d.Reports = append(d.Reports, reportRow{Name: r.Name, Dir: r.Dir, Href: "reports/" + r.Name + ".html", Modified: r.Modified})
		}
	}
	return d, nil
}

// entryHref is an entry's page, relative to the index.
func entryHref(domain, key string) string { return "entry/" + domain + "/" + key + ".html" }

func (s *Server) indexPage(r *http.Request) ([]byte, error) {
	d, err := s.index(r.Context())
	if err != nil {
		return nil, err
	}
	return render("index", d)
}

func render(name string, data any) ([]byte, error) {
	var buf bytes.Buffer
	if err := pages().ExecuteTemplate(&buf, name, data); err != nil {
		return nil, fmt.Errorf("rendering the %s page: %w", name, err)
	}
	return buf.Bytes(), nil
}

// selectorRow is a selector of the facts with its own record.
type selectorRow struct {
	Name      string
	Primary   string
	Fallbacks []string
	Stability float64
	HasStab   bool
	OK, Fail  int
	LastOK    time.Time
	LastFail  time.Time
}

type entryData struct {
	V         *engine.EntryView
	Flags     []flag
	Selectors []selectorRow
	Chart     template.HTML
	Runs      int
	Sessions  int
	Lessons   int
	History   []Commit
	HistErr   string
	Home      string
}

func (s *Server) entryPage(ctx context.Context, domain, key string) ([]byte, error) {
	v, err := s.eng.Entry(ctx, domain, key)
	if err != nil {
		return nil, err
	}
	cfg, err := s.eng.Store.Config(ctx)
	if err != nil {
		return nil, err
	}
	d := &entryData{V: v, Flags: flagsOf(v), Home: "../../index.html"}
	ms := marks(v.Evidence, cfg.Policy)
	d.Chart = evidenceChart(ms, cfg.Policy)
	sessions := map[string]bool{}
	for _, ev := range v.Evidence {
		if ev.IsRun() {
			d.Runs++
			sessions[ev.Session] = true
		} else {
			d.Lessons++
		}
	}
	d.Sessions = len(sessions)
	d.Selectors = selectorRows(v)
	if s.o.History != nil {
		if d.History, err = s.o.History(ctx, domain, key); err != nil {
			d.HistErr = err.Error()
		}
	}
	return render("entry", d)
}

// selectorRows joins the facts' selectors (primary, fallbacks, stability)
// with the experience's record of each (by the selector's text); without
// facts, the recall's selectors with their record.
func selectorRows(v *engine.EntryView) []selectorRow {
	var stats map[string]*engine.SelectorStats
	if v.Experience != nil {
		stats = v.Experience.Selectors
	}
	var out []selectorRow
	add := func(name, primary string, fallbacks []string, stab float64, has bool) {
		r := selectorRow{Name: name, Primary: primary, Fallbacks: fallbacks, Stability: stab, HasStab: has}
		if st := stats[primary]; st != nil {
			r.OK, r.Fail, r.LastOK, r.LastFail = st.OK, st.Fail, st.LastOK, st.LastFail
		}
		out = append(out, r)
	}
	if v.Facts != nil && len(v.Facts.Selectors) > 0 {
		for _, name := range sortedNames(v.Facts.Selectors) {
			sel := v.Facts.Selectors[name]
			add(name, sel.Primary, sel.Fallbacks, sel.Stability, true)
		}
		return out
	}
	if v.Recall != nil {
		for _, name := range sortedNames(v.Recall.PrimarySelectors) {
			add(name, v.Recall.PrimarySelectors[name], v.Recall.Fallbacks[name], 0, false)
		}
	}
	return out
}

func sortedNames[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// reportName is the one shape a report's name may have.
var reportName = engine.LazyRE(`^[A-Za-z0-9._-]{1,128}$`)

func (s *Server) reportPage(ctx context.Context, file string) ([]byte, error) {
	name, ok := strings.CutSuffix(file, ".html")
	if !ok || !reportName.MatchString(name) || s.o.Reports == nil {
		return nil, fmt.Errorf("%w: no bench report %s", engine.ErrNotFound, file)
	}
	rs, err := s.o.Reports(ctx)
	if err != nil {
		return nil, err
	}
	for _, r := range rs {
		if r.Name == name {
			return r.Read()
		}
	}
	return nil, fmt.Errorf("%w: no bench report %s: the index lists them", engine.ErrNotFound, file)
}
