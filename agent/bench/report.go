package bench

import (
	"bytes"
	"fmt"
	"html/template"
	"math"
	"sort"
	"strings"
	"sync"
)

// A Metric is one number per run that the report draws per round: its name,
// whether less is better, and how to read it off a run. New Run fields
// become a chart and a column by adding a line to Metrics.
type Metric struct {
	Name  string
	Less  bool // less is better (steps, time); false: more is better (accuracy)
	Value func(Run) float64
	Mean  bool // per round: the mean per run (accuracy); false: the sum
}

// Metrics are the learning curve's charts, in order.
var Metrics = []Metric{
	{Name: "accuracy", Mean: true, Value: func(r Run) float64 { return b2f(r.Success) }},
	{Name: "steps", Less: true, Value: func(r Run) float64 { return float64(r.Steps) }},
	{Name: "planner calls", Less: true, Value: func(r Run) float64 { return float64(r.PlannerCalls) }},
	{Name: "prompt chars", Less: true, Value: func(r Run) float64 { return float64(r.PromptChars) }},
	{Name: "tokens", Less: true, Value: func(r Run) float64 { return float64(r.InputTokens + r.OutputTokens) }},
	{Name: "seconds", Less: true, Value: func(r Run) float64 { return r.Seconds }},
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Harm says whether memory-on did worse than memory-off on the same task in
// the same round: wrong where memory-off was right (paired harm, the one rule
// MarkHarm, summary.md, summary.csv and report.html count). A memory-on run
// that took more steps is shown in the per-task table, not counted as harm.
func Harm(on, off Run) (bool, string) {
	if !on.Success && off.Success {
		return true, "memory-on failed where memory-off succeeded"
	}
	return false, ""
}

// ReportOptions title the report.
type ReportOptions struct {
	Title     string // default "pem bench: memory on vs off"
	Generated string // when, as printed text; "" leaves it out
	Planner   string // which planner ran, as printed text
	Site      string // which site, as printed text
}

// point is one round's value of one metric for one arm.
type point struct {
	Round int
	Value float64
}

// curve sums (or averages) a metric per round for one arm.
func curve(runs []Run, arm string, m Metric) []point {
	sums, counts := map[int]float64{}, map[int]int{}
	for _, r := range runs {
		if r.Memory != arm {
			continue
		}
		sums[r.Round] += m.Value(r)
		counts[r.Round]++
	}
	var out []point
	for round, s := range sums {
		if m.Mean {
			s /= float64(counts[round])
		}
		out = append(out, point{round, round3(s)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Round < out[j].Round })
	return out
}

// pair is one task in one round, both arms.
type pair struct {
	Task    string
	Round   int
	On, Off *Run
	Harm    bool
	Why     string
}

func pairs(runs []Run) []pair {
	idx := map[[2]string]*pair{}
	var out []*pair
	for i := range runs {
		r := &runs[i]
		k := [2]string{r.Task, fmt.Sprint(r.Round)}
		p := idx[k]
		if p == nil {
			p = &pair{Task: r.Task, Round: r.Round}
			idx[k] = p
			out = append(out, p)
		}
		if r.Memory == "off" {
			p.Off = r
		} else {
			p.On = r
		}
	}
	res := make([]pair, 0, len(out))
	for _, p := range out {
		if p.On != nil && p.Off != nil {
			p.Harm, p.Why = Harm(*p.On, *p.Off)
		}
		res = append(res, *p)
	}
	sort.SliceStable(res, func(i, j int) bool {
		if res[i].Round != res[j].Round {
			return res[i].Round < res[j].Round
		}
		return false // the run order within a round
	})
	return res
}

// Chart draws one metric's learning curve, one line per arm, as inline SVG.
// Each point carries data-arm, data-round and data-value (the number drawn)
// so that a reader (or a test) can check the figure against the runs.
func Chart(title string, arms []string, series map[string][]point) template.HTML {
	const w, h, left, right, top, bottom = 320.0, 180.0, 48.0, 28.0, 24.0, 28.0
	var rounds []int
	seen := map[int]bool{}
	hi := 0.0
	for _, pts := range series {
		for _, p := range pts {
			if !seen[p.Round] {
				seen[p.Round] = true
				rounds = append(rounds, p.Round)
			}
			hi = math.Max(hi, p.Value)
		}
	}
	sort.Ints(rounds)
	if hi == 0 {
		hi = 1
	}
	x := func(round int) float64 {
		if len(rounds) < 2 {
			return left + (w-left-right)/2
		}
		i := sort.SearchInts(rounds, round)
		return left + float64(i)*(w-left-right)/float64(len(rounds)-1)
	}
	y := func(v float64) float64 { return top + (h-top-bottom)*(1-v/hi) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" data-metric="%s" viewBox="0 0 %g %g" width="%g" height="%g" role="img" aria-label="%s per round">`,
		template.HTMLEscapeString(title), w, h, w, h, template.HTMLEscapeString(title))
	fmt.Fprintf(&b, `<text x="%g" y="14" class="title">%s</text>`, left, template.HTMLEscapeString(title))
	fmt.Fprintf(&b, `<line x1="%g" y1="%g" x2="%g" y2="%g" class="axis"/>`, left, h-bottom, w-right, h-bottom)
	fmt.Fprintf(&b, `<line x1="%g" y1="%g" x2="%g" y2="%g" class="axis"/>`, left, top, left, h-bottom)
	fmt.Fprintf(&b, `<text x="%g" y="%g" class="tick" text-anchor="end">%s</text>`, left-4, top+4, num(hi))
	fmt.Fprintf(&b, `<text x="%g" y="%g" class="tick" text-anchor="end">0</text>`, left-4, h-bottom)
	for _, r := range rounds {
		fmt.Fprintf(&b, `<text x="%g" y="%g" class="tick" text-anchor="middle">round %d</text>`, x(r), h-bottom+16, r)
	}
	for _, arm := range arms {
		pts := series[arm]
		var path []string
		for _, p := range pts {
			path = append(path, fmt.Sprintf("%.1f,%.1f", x(p.Round), y(p.Value)))
		}
		if len(path) > 1 {
			fmt.Fprintf(&b, `<polyline class="line %s" points="%s"/>`, armClass(arm), strings.Join(path, " "))
		}
		for _, p := range pts {
			fmt.Fprintf(&b, `<circle class="pt %s" data-arm="%s" data-round="%d" data-value="%s" cx="%.1f" cy="%.1f" r="3.5"><title>memory %s, round %d: %s</title></circle>`,
				armClass(arm), template.HTMLEscapeString(arm), p.Round, num(p.Value), x(p.Round), y(p.Value), template.HTMLEscapeString(arm), p.Round, num(p.Value))
		}
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // every text in it was escaped above
}

func armClass(arm string) string {
	if arm == "off" {
		return "off"
	}
	return "on"
}

// num prints a figure as the report shows it: integers bare, others with up
// to 3 decimals.
func num(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return fmt.Sprintf("%d", int64(f))
	}
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.3f", f), "0"), ".")
}

// Report renders pem bench's report.html: one self-contained file (inline
// CSS and SVG, no script, no network) that opens from disk — the totals
// memory-on vs memory-off, the learning curve per round for every Metric,
// and the per-task table with the harm rows (Harm) highlighted.
func Report(runs []Run, o ReportOptions) []byte {
	if o.Title == "" {
		o.Title = "pem bench: memory on vs off"
	}
	arms := []string{}
	for _, a := range []string{"on", "off"} {
		for _, r := range runs {
			if r.Memory == a {
				arms = append(arms, a)
				break
			}
		}
	}
	type total struct {
		Arm string
		T   Totals
	}
	var totals []total
	for _, a := range arms {
		var rs []Run
		for _, r := range runs {
			if r.Memory == a {
				rs = append(rs, r)
			}
		}
		totals = append(totals, total{a, Sum(rs)})
	}
	var charts []template.HTML
	for _, m := range Metrics {
		series := map[string][]point{}
		for _, a := range arms {
			series[a] = curve(runs, a, m)
		}
		charts = append(charts, Chart(m.Name, arms, series))
	}
	ps := pairs(runs)
	harms := 0
	for _, p := range ps {
		if p.Harm {
			harms++
		}
	}
	rounds := map[int]bool{}
	for _, r := range runs {
		rounds[r.Round] = true
	}
	data := map[string]any{
		"O": o, "Totals": totals, "Charts": charts, "Pairs": ps, "Harms": harms,
		"Runs": len(runs), "Rounds": len(rounds), "Both": len(arms) == 2,
	}
	var buf bytes.Buffer
	if err := reportTmpl().Execute(&buf, data); err != nil {
		// The template is fixed and its data typed: an error is a bug.
		panic("bench: report template: " + err.Error())
	}
	return buf.Bytes()
}

// reportTmpl is parsed on first use, not at start-up (every pem command
// links this package; docs/performance.md, start-up).
var reportTmpl = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("report").Funcs(template.FuncMap{
		"pct": func(f float64) string { return fmt.Sprintf("%.0f%%", 100*f) },
		"num": num,
		"yes": func(b bool) string {
			if b {
				return "yes"
			}
			return "no"
		},
	}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'">
<link rel="icon" href="data:,">
<title>{{.O.Title}}</title>
<style>
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:2rem auto;max-width:72rem;padding:0 1rem;color:#1f2328}
h1{font-size:1.5rem}h2{font-size:1.15rem;margin-top:2rem}
table{border-collapse:collapse;margin:.5rem 0}th,td{border:1px solid #d0d7de;padding:.25rem .6rem;text-align:right}
th:first-child,td:first-child{text-align:left}thead th{background:#f6f8fa}
tr.harm td{background:#ffebe9}td.bad{color:#cf222e;font-weight:600}
.charts{display:flex;flex-wrap:wrap;gap:1rem}
svg.chart{border:1px solid #d0d7de;border-radius:6px;background:#fff}
svg .axis{stroke:#8c959f}svg .tick{font-size:10px;fill:#57606a}svg .title{font-size:12px;font-weight:600}
svg .line{fill:none;stroke-width:2}svg .line.on{stroke:#0969da}svg .line.off{stroke:#bf8700;stroke-dasharray:4 3}
svg .pt.on{fill:#0969da}svg .pt.off{fill:#bf8700}
.legend span{display:inline-block;margin-right:1rem}.sw{display:inline-block;width:1.5rem;height:3px;vertical-align:middle;margin-right:.3rem}
.muted{color:#57606a}
</style></head>
<body>
<h1>{{.O.Title}}</h1>
<p class="muted">{{.Runs}} runs in {{.Rounds}} rounds{{if .O.Planner}}, planner {{.O.Planner}}{{end}}{{if .O.Site}}, site {{.O.Site}}{{end}}{{if .O.Generated}}, {{.O.Generated}}{{end}}. Stale answers (last round's value served again) count as wrong.</p>

<h2>Memory on vs off</h2>
<table id="totals"><thead><tr><th>memory</th><th>runs</th><th>accuracy</th><th>stale</th><th>steps</th><th>planner calls</th><th>clicks</th><th>extract calls</th><th>prompt chars</th><th>seconds</th></tr></thead><tbody>
{{range .Totals}}<tr data-arm="{{.Arm}}"><td>{{.Arm}}</td><td>{{.T.Runs}}</td><td data-col="accuracy">{{pct .T.Accuracy}}</td><td>{{.T.Stale}}</td><td data-col="steps">{{.T.Steps}}</td><td>{{.T.PlannerCalls}}</td><td>{{.T.Clicks}}</td><td>{{.T.Extracts}}</td><td data-col="prompt_chars">{{.T.PromptChars}}</td><td>{{num .T.Seconds}}</td></tr>
{{end}}</tbody></table>

<h2>Learning curve per round</h2>
<p class="legend"><span><i class="sw" style="background:#0969da"></i>memory on</span><span><i class="sw" style="background:#bf8700"></i>memory off</span> <span class="muted">accuracy is per run; the others are totals of the round</span></p>
<div class="charts">{{range .Charts}}{{.}}{{end}}</div>

<h2>Per task</h2>
<p id="harm-count">{{if .Both}}{{.Harms}} harm {{if eq .Harms 1}}row{{else}}rows{{end}}: memory-on did worse than memory-off on the same task and round (highlighted).{{else}}One arm only: no memory-on vs memory-off pairs.{{end}}</p>
<table id="tasks"><thead><tr><th>task</th><th>round</th><th>tier (on)</th><th>success on / off</th><th>steps on / off</th><th>planner calls on / off</th><th>seconds on / off</th><th>note</th></tr></thead><tbody>
{{range .Pairs}}<tr class="{{if .Harm}}harm{{end}}" data-task="{{.Task}}" data-round="{{.Round}}"><td>{{.Task}}</td><td>{{.Round}}</td>
<td>{{with .On}}{{.Tier}}{{end}}</td>
<td>{{with .On}}<span class="{{if not .Success}}bad{{end}}">{{yes .Success}}</span>{{else}}–{{end}} / {{with .Off}}{{yes .Success}}{{else}}–{{end}}</td>
<td>{{with .On}}{{.Steps}}{{else}}–{{end}} / {{with .Off}}{{.Steps}}{{else}}–{{end}}</td>
<td>{{with .On}}{{.PlannerCalls}}{{else}}–{{end}} / {{with .Off}}{{.PlannerCalls}}{{else}}–{{end}}</td>
<td>{{with .On}}{{num .Seconds}}{{else}}–{{end}} / {{with .Off}}{{num .Seconds}}{{else}}–{{end}}</td>
<td>{{.Why}}{{with .On}}{{if .Error}} on: {{.Error}}{{end}}{{end}}{{with .Off}}{{if .Error}} off: {{.Error}}{{end}}{{end}}</td></tr>
{{end}}</tbody></table>
</body></html>
`))
})
