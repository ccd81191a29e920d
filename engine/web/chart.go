package web

import (
	"fmt"
	"html/template"
	"strings"
	"time"

	"github.com/pemdev/pem/engine"
)

// mark is one run on the evidence chart.
type mark struct {
	Ev         engine.Evidence
	Confidence float64 // after this run, as of its time
}

// marks computes the confidence after each run of ev (oldest first), as of
// that run's time, with the tree's policy; lessons are left out.
func marks(ev []engine.Evidence, p engine.Policy) []mark {
	var out []mark
	for i, e := range ev {
		if !e.IsRun() {
			continue
		}
		sc := engine.Confidence(ev[:i+1], e.At, p)
		out = append(out, mark{e, sc.Confidence})
	}
	return out
}

// evidenceChart draws an entry's runs in time order: the confidence after
// each run as a line (0 to 1, the tier bounds dashed), each run as a mark —
// a circle for a success, a square for a failure, a ring for a verdict of
// right, a cross for wrong — and the sessions as alternating bands. Every
// mark carries data-outcome, data-session, data-verdict and
// data-confidence; the text in it is escaped.
func evidenceChart(ms []mark, p engine.Policy) template.HTML {
	const w, h, left, right, top, bottom = 720.0, 220.0, 40.0, 16.0, 16.0, 36.0
	var b strings.Builder
	fmt.Fprintf(&b, `<svg id="evidence-chart" class="chart" viewBox="0 0 %g %g" width="%g" height="%g" role="img" aria-label="evidence over time: %d runs">`, w, h, w, h, len(ms))
	if len(ms) == 0 {
		fmt.Fprintf(&b, `<text x="%g" y="%g" class="tick">no runs yet</text></svg>`, left, h/2)
		return template.HTML(b.String())
	}
	n := len(ms)
	step := (w - left - right) / float64(max(n, 1))
	x := func(i int) float64 { return left + step*(float64(i)+0.5) }
	y := func(c float64) float64 { return top + (h-top-bottom)*(1-c) }
	// Session bands: a run of the same session shares a band.
	band, start := 0, 0
	for i := 1; i <= n; i++ {
		if i == n || ms[i].Ev.Session != ms[start].Ev.Session {
			fmt.Fprintf(&b, `<rect class="band b%d" x="%.1f" y="%g" width="%.1f" height="%g"><title>session %s</title></rect>`,
				band%2, left+step*float64(start), top, step*float64(i-start), h-top-bottom, esc(orDash(ms[start].Ev.Session)))
			band++
			start = i
		}
	}
	fmt.Fprintf(&b, `<line class="axis" x1="%g" y1="%g" x2="%g" y2="%g"/>`, left, h-bottom, w-right, h-bottom)
	fmt.Fprintf(&b, `<line class="axis" x1="%g" y1="%g" x2="%g" y2="%g"/>`, left, top, left, h-bottom)
	for _, t := range []struct {
		v    float64
		name string
	}{{p.P1, "P1"}, {p.P2, "P2"}, {p.P3, "P3"}} {
		fmt.Fprintf(&b, `<line class="bound" x1="%g" y1="%.1f" x2="%g" y2="%.1f"/><text class="tick" x="%g" y="%.1f" text-anchor="end">%s %.2f</text>`,
			left, y(t.v), w-right, y(t.v), left-3, y(t.v)+3, t.name, t.v)
	}
	fmt.Fprintf(&b, `<text class="tick" x="%g" y="%g" text-anchor="end">0</text>`, left-3, h-bottom+3)
	var pts []string
	for i, m := range ms {
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(i), y(m.Confidence)))
	}
	fmt.Fprintf(&b, `<polyline class="conf" points="%s"/>`, strings.Join(pts, " "))
	for i, m := range ms {
		cx, cy := x(i), y(m.Confidence)
		e := m.Ev
		cls := "ok"
		if e.Outcome == engine.Failure {
			cls = "fail"
		}
		title := fmt.Sprintf("%s: %s%s, session %s, %d steps, confidence %.2f after it%s", e.At.UTC().Format(time.RFC3339), e.Outcome,
			catText(e.Category), orDash(e.Session), e.Steps, m.Confidence, verdictText(e))
		fmt.Fprintf(&b, `<g class="run %s" data-trace="%s" data-outcome="%s" data-session="%s" data-verdict="%s" data-confidence="%.2f"><title>%s</title>`,
			cls, esc(e.Trace), esc(string(e.Outcome)), esc(e.Session), esc(string(e.Verdict)), m.Confidence, esc(title))
		if e.Outcome == engine.Failure {
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="8" height="8"/>`, cx-4, cy-4)
		} else {
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="4.5"/>`, cx, cy)
		}
		switch e.Verdict {
		case engine.Right:
			fmt.Fprintf(&b, `<circle class="right" cx="%.1f" cy="%.1f" r="8"/>`, cx, cy)
		case engine.Wrong:
			fmt.Fprintf(&b, `<path class="wrong" d="M%.1f %.1fl12 12M%.1f %.1fl-12 12"/>`, cx-6, cy-6, cx+6, cy-6)
		}
		b.WriteString(`</g>`)
	}
	first, last := ms[0].Ev.At.UTC(), ms[n-1].Ev.At.UTC()
	fmt.Fprintf(&b, `<text class="tick" x="%g" y="%g">%s</text>`, left, h-bottom+16, first.Format("2006-01-02 15:04"))
	fmt.Fprintf(&b, `<text class="tick" x="%g" y="%g" text-anchor="end">%s</text>`, w-right, h-bottom+16, last.Format("2006-01-02 15:04"))
	fmt.Fprintf(&b, `<text class="tick" x="%g" y="%g" text-anchor="middle">%d runs, oldest first</text>`, (left+w-right)/2, h-bottom+30, n)
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // every text in it went through esc
}

func esc(s string) string { return template.HTMLEscapeString(s) }

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

func catText(c engine.FailureCategory) string {
	if c == "" {
		return ""
	}
	return " (" + string(c) + ")"
}

func verdictText(e engine.Evidence) string {
	if e.Verdict == "" {
		return ""
	}
	s := ", judged " + string(e.Verdict)
	if e.VerdictBy != "" {
		s += " by " + e.VerdictBy
	}
	return s
}
