package bench

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/pemdev/pem/engine"
)

// Totals sums runs.
type Totals struct {
	Runs         int     `json:"runs"`
	Successes    int     `json:"successes"`
	Accuracy     float64 `json:"accuracy"`
	Steps        int     `json:"steps"`
	PlannerCalls int     `json:"planner_calls"`
	Clicks       int     `json:"clicks"`
	Extracts     int     `json:"extracts"`
	PromptChars  int     `json:"prompt_chars"`
	Stale        int     `json:"stale"`
	Seconds      float64 `json:"seconds"`
	InputTokens  int     `json:"input_tokens"`
	OutputTokens int     `json:"output_tokens"`
	Searches     int     `json:"searches"`
	Harm         int     `json:"harm"`
}

// Sum adds up runs.
func Sum(runs []Run) Totals {
	var t Totals
	for _, r := range runs {
		t.Runs++
		if r.Success {
			t.Successes++
		}
		if r.Stale {
			t.Stale++
		}
		if r.Harm {
			t.Harm++
		}
		t.Steps += r.Steps
		t.PlannerCalls += r.PlannerCalls
		t.Clicks += r.Clicks
		t.Extracts += r.Extracts
		t.Searches += r.Searches
		t.PromptChars += r.PromptChars
		t.InputTokens += r.InputTokens
		t.OutputTokens += r.OutputTokens
		t.Seconds += r.Seconds
	}
	if t.Runs > 0 {
		t.Accuracy = round3(float64(t.Successes) / float64(t.Runs))
	}
	t.Seconds = round3(t.Seconds)
	return t
}

func round3(f float64) float64 { return float64(int64(f*1000+0.5)) / 1000 }

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return round3(a / b)
}

// ColdWarm splits a demo's runs into round 1 (cold) and the later rounds (warm).
func ColdWarm(runs []Run) (cold, warm []Run) {
	for _, r := range runs {
		if r.Round == 1 {
			cold = append(cold, r)
		} else {
			warm = append(warm, r)
		}
	}
	return cold, warm
}

// perRun compares the warm runs' f per run with the cold runs'.
func perRun(cold, warm []Run, f func(Totals) float64) float64 {
	c, w := Sum(cold), Sum(warm)
	if c.Runs == 0 || w.Runs == 0 {
		return 0
	}
	return ratio(f(w)/float64(w.Runs), f(c)/float64(c.Runs))
}

// StepsRatio compares the warm runs' steps per run with the cold runs'.
func StepsRatio(cold, warm []Run) float64 {
	return perRun(cold, warm, func(t Totals) float64 { return float64(t.Steps) })
}

// TimeRatio compares the warm runs' seconds per run with the cold runs'.
func TimeRatio(cold, warm []Run) float64 {
	return perRun(cold, warm, func(t Totals) float64 { return t.Seconds })
}

// OneLine folds s onto one line of at most n characters (an ellipsis marks a cut).
func OneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// WriteTable writes pem demo's table: a row per run, then the cold and warm
// totals and how warm compares with cold per run — every figure measured in
// these runs.
func WriteTable(w io.Writer, runs []Run) {
	cold, warm := ColdWarm(runs)
	tc, tw := Sum(cold), Sum(warm)
	fmt.Fprintf(w, "%-22s %5s %4s %5s %8s %6s %7s %7s  %s\n", "task", "round", "tier", "steps", "planner", "clicks", "success", "seconds", "answer")
	for _, r := range runs {
		ok := "yes"
		if !r.Success {
			ok = "NO"
		}
		fmt.Fprintf(w, "%-22s %5d %4s %5d %8d %6d %7s %7.2f  %s\n", r.Task, r.Round, r.Tier, r.Steps, r.PlannerCalls, r.Clicks, ok, r.Seconds, OneLine(r.Answer, 50))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "%-5s %5s %9s %6s %8s %7s %8s\n", "", "runs", "succeeded", "steps", "planner", "clicks", "seconds")
	fmt.Fprintf(w, "%-5s %5d %9d %6d %8d %7d %8.2f\n", "cold", tc.Runs, tc.Successes, tc.Steps, tc.PlannerCalls, tc.Clicks, tc.Seconds)
	if tw.Runs > 0 {
		fmt.Fprintf(w, "%-5s %5d %9d %6d %8d %7d %8.2f\n", "warm", tw.Runs, tw.Successes, tw.Steps, tw.PlannerCalls, tw.Clicks, tw.Seconds)
		fmt.Fprintf(w, "warm vs cold, per run: %.2f× the steps, %.2f× the clicks, %.2f× the planner calls, %.2f× the time (%.1f vs %.1f planner calls per run)\n",
			StepsRatio(cold, warm), perRun(cold, warm, func(t Totals) float64 { return float64(t.Clicks) }),
			perRun(cold, warm, func(t Totals) float64 { return float64(t.PlannerCalls) }), TimeRatio(cold, warm),
			float64(tw.PlannerCalls)/float64(tw.Runs), float64(tc.PlannerCalls)/float64(max(1, tc.Runs)))
		fmt.Fprintln(w)
		WriteRounds(w, runs)
	}
}

// Info names what a summary measured.
type Info struct {
	Planner string // "explore", "openai (gpt-4o-mini)", …
	Site    string // "demo site" or the site's URL
	Rounds  int
}

// Ratios is memory-on against memory-off, in total (each on/off).
type Ratios struct {
	Steps, Clicks, ExtractSearch, PlannerCalls, PromptChars, InputTokens, OutputTokens, Seconds float64
}

// Compare is on's totals over off's.
func Compare(on, off Totals) Ratios {
	f := func(a, b int) float64 { return ratio(float64(a), float64(b)) }
	return Ratios{Steps: f(on.Steps, off.Steps), Clicks: f(on.Clicks, off.Clicks),
		ExtractSearch: f(on.Extracts+on.Searches, off.Extracts+off.Searches), PlannerCalls: f(on.PlannerCalls, off.PlannerCalls),
		PromptChars: f(on.PromptChars, off.PromptChars), InputTokens: f(on.InputTokens, off.InputTokens),
		OutputTokens: f(on.OutputTokens, off.OutputTokens), Seconds: ratio(on.Seconds, off.Seconds)}
}

var csvHeader = []string{"kind", "planner", "site", "memory", "round", "task", "volatile", "runs", "accuracy", "stale", "harm", "steps", "planner_calls",
	"input_tokens", "output_tokens", "prompt_chars", "clicks", "extract_calls", "search_calls", "seconds", "tier", "recall_tier", "recalled", "answer", "error"}

// Summary renders pem bench's summary.md and summary.csv. The CSV has one
// row per run (kind "run"), then per arm a row per round (kind "round") and
// one for the total (kind "total", round "total"); every row names the
// planner and the site. summary.md has the same totals as tables, the
// ratios memory-on vs memory-off, the harm rows and the runs.
func Summary(runs []Run, info Info) (md, csvData []byte) {
	type key struct {
		arm   string
		round int
	}
	groups := map[key][]Run{}
	for _, r := range runs {
		groups[key{r.Memory, r.Round}] = append(groups[key{r.Memory, r.Round}], r)
		groups[key{r.Memory, 0}] = append(groups[key{r.Memory, 0}], r)
	}
	var keys []key
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].arm != keys[j].arm {
			return keys[i].arm > keys[j].arm // "on" first
		}
		if (keys[i].round == 0) != (keys[j].round == 0) {
			return keys[j].round == 0
		}
		return keys[i].round < keys[j].round
	})
	var mb, cb bytes.Buffer
	cw := csv.NewWriter(&cb)
	cw.Write(csvHeader)
	b2i := func(b bool) int {
		if b {
			return 1
		}
		return 0
	}
	for _, r := range runs {
		cw.Write([]string{"run", info.Planner, info.Site, r.Memory, fmt.Sprint(r.Round), r.Task, fmt.Sprint(b2i(r.Volatile)), "1", fmt.Sprintf("%d", b2i(r.Success)),
			fmt.Sprint(b2i(r.Stale)), fmt.Sprint(b2i(r.Harm)), fmt.Sprint(r.Steps), fmt.Sprint(r.PlannerCalls), fmt.Sprint(r.InputTokens),
			fmt.Sprint(r.OutputTokens), fmt.Sprint(r.PromptChars), fmt.Sprint(r.Clicks), fmt.Sprint(r.Extracts), fmt.Sprint(r.Searches),
			fmt.Sprintf("%.3f", r.Seconds), string(r.Tier), string(r.RecallTier), strings.Join(r.Recalled, " "), OneLine(r.Answer, 200), OneLine(r.Error, 200)})
	}
	fmt.Fprintf(&mb, "# pem bench: memory on vs off\n\nPlanner: %s. Site: %s. %d rounds; each round runs every task with memory on (one tree, consolidated after the round) and off.\n"+
		"Graded live; on the demo site volatile values move every round and a stale answer (last round's value) counts as wrong.\n"+
		"Tokens are the model's usage fields; prompt characters are what a model planner is sent (task + memory + page observation per call).\n"+
		"Harm: a task memory-on got wrong where memory-off got it right in the same round.\n\n", info.Planner, info.Site, info.Rounds)
	mb.WriteString("| memory | round | runs | accuracy | stale | harm | steps | planner calls | input tokens | output tokens | prompt chars | clicks | extract calls | search calls | seconds |\n")
	mb.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, k := range keys {
		t := Sum(groups[k])
		round, kind := fmt.Sprint(k.round), "round"
		if k.round == 0 {
			round, kind = "total", "total"
		}
		fmt.Fprintf(&mb, "| %s | %s | %d | %.0f%% | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %.2f |\n", k.arm, round, t.Runs, 100*t.Accuracy, t.Stale, t.Harm,
			t.Steps, t.PlannerCalls, t.InputTokens, t.OutputTokens, t.PromptChars, t.Clicks, t.Extracts, t.Searches, t.Seconds)
		cw.Write([]string{kind, info.Planner, info.Site, k.arm, round, "", "", fmt.Sprint(t.Runs), fmt.Sprintf("%.3f", t.Accuracy), fmt.Sprint(t.Stale),
			fmt.Sprint(t.Harm), fmt.Sprint(t.Steps), fmt.Sprint(t.PlannerCalls), fmt.Sprint(t.InputTokens), fmt.Sprint(t.OutputTokens),
			fmt.Sprint(t.PromptChars), fmt.Sprint(t.Clicks), fmt.Sprint(t.Extracts), fmt.Sprint(t.Searches), fmt.Sprintf("%.3f", t.Seconds), "", "", "", "", ""})
	}
	cw.Flush()
	on, off := Sum(groups[key{"on", 0}]), Sum(groups[key{"off", 0}])
	q := Compare(on, off)
	tokens := fmt.Sprintf("%.2f× the input tokens, %.2f× the output tokens, ", q.InputTokens, q.OutputTokens)
	if on.InputTokens+off.InputTokens == 0 {
		tokens = "" // no model was called: a ratio of zeros would read as a saving
	}
	fmt.Fprintf(&mb, "\nTotal, memory on vs off: %.2f× the steps, %.2f× the clicks, %.2f× the extract/search calls, %.2f× the planner calls, "+
		"%.2f× the prompt characters, %s%.2f× the time; accuracy %.0f%% vs %.0f%%; %d stale on, %d off; %d harm.\n",
		q.Steps, q.Clicks, q.ExtractSearch, q.PlannerCalls, q.PromptChars, tokens, q.Seconds,
		100*on.Accuracy, 100*off.Accuracy, on.Stale, off.Stale, on.Harm)
	if tokens == "" {
		mb.WriteString("(No token counts: the planner reported none — explore calls no model; compare prompt characters.)\n")
	}
	var harm []Run
	for _, r := range runs {
		if r.Harm {
			harm = append(harm, r)
		}
	}
	writeTimeByRound(&mb, runs)
	fmt.Fprintf(&mb, "\n## Harm (%d)\n\n", len(harm))
	if len(harm) == 0 {
		mb.WriteString("None: memory-on got no task wrong that memory-off got right in the same round.\n")
	} else {
		mb.WriteString("| round | task | tier | answer | note |\n|---|---|---|---|---|\n")
		for _, r := range harm {
			fmt.Fprintf(&mb, "| %d | %s | %s | %s | %s |\n", r.Round, r.Task, r.Tier, cell(r.Answer, 60), cell(r.Error, 80))
		}
	}
	mb.WriteString("\n## Runs\n\n| memory | round | task | tier | recalled | steps | planner calls | clicks | tokens in/out | success | seconds | note |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range runs {
		fmt.Fprintf(&mb, "| %s | %d | %s | %s | %s | %d | %d | %d | %d/%d | %v | %.2f | %s |\n", r.Memory, r.Round, r.Task, r.Tier, strings.Join(r.Recalled, " "),
			r.Steps, r.PlannerCalls, r.Clicks, r.InputTokens, r.OutputTokens, r.Success, r.Seconds, cell(r.Error, 80))
	}
	return mb.Bytes(), cb.Bytes()
}

func cell(s string, n int) string { return strings.ReplaceAll(OneLine(s, n), "|", "/") }

// RoundTime is one round's wall time against the first round's, with the
// tiers its runs used and the time by phase.
type RoundTime struct {
	Round   int                 `json:"round"`
	Tiers   map[engine.Tier]int `json:"tiers"`
	Runs    int                 `json:"runs"`
	Seconds float64             `json:"seconds"`
	// Ratio is Seconds over the first round's (the cold round), same tasks.
	Ratio  float64 `json:"ratio_to_cold"`
	Phases Phases  `json:"phases"`
}

// Rounds sums runs of one arm (pass one arm's runs) per round, in order.
func Rounds(runs []Run) []RoundTime {
	by := map[int]*RoundTime{}
	var order []int
	for _, r := range runs {
		rt := by[r.Round]
		if rt == nil {
			rt = &RoundTime{Round: r.Round, Tiers: map[engine.Tier]int{}}
			by[r.Round] = rt
			order = append(order, r.Round)
		}
		rt.Runs++
		rt.Tiers[r.Tier]++
		rt.Seconds += r.Seconds
		rt.Phases = rt.Phases.add(r.Phases)
	}
	sort.Ints(order)
	out := make([]RoundTime, 0, len(order))
	for _, n := range order {
		rt := *by[n]
		rt.Seconds = round3(rt.Seconds)
		rt.Phases = rt.Phases.rounded()
		if len(out) > 0 {
			rt.Ratio = ratio(rt.Seconds, out[0].Seconds)
		} else {
			rt.Ratio = 1
		}
		out = append(out, rt)
	}
	return out
}

func (p Phases) rounded() Phases {
	r := round3
	return Phases{r(p.Query), r(p.Open), r(p.Checks), r(p.Actions), r(p.Landing), r(p.Observe), r(p.Plan), r(p.Answer), r(p.Finish), r(p.Other), r(p.Deposit)}
}

// tierMix writes a round's tiers as "P1 17" or "P2 15, P3 2".
func tierMix(m map[engine.Tier]int) string {
	var ts []string
	for t := range m {
		ts = append(ts, string(t))
	}
	sort.Strings(ts)
	var parts []string
	for _, t := range ts {
		parts = append(parts, fmt.Sprintf("%s %d", t, m[engine.Tier(t)]))
	}
	return strings.Join(parts, ", ")
}

// WriteRounds writes each round's time against the cold (first) round and
// where it went: the memory query, opening tabs, replay checks, the actions
// (load waits included), the landing status, observing the page and the
// planner, the answer checks, the end of the run, the rest; the trace
// deposit is shown beside (it comes after a run's time and is not in it).
func WriteRounds(w io.Writer, runs []Run) {
	rs := Rounds(runs)
	if len(rs) == 0 {
		return
	}
	fmt.Fprintf(w, "%-5s %-18s %8s %6s | %6s %5s %6s %7s %7s %7s %6s %6s %6s %6s | %7s\n", "round", "tiers", "seconds", "×cold",
		"query", "open", "checks", "actions", "landing", "observe", "plan", "answer", "finish", "other", "deposit")
	for _, r := range rs {
		p := r.Phases
		fmt.Fprintf(w, "%-5d %-18s %8.2f %6.2f | %6.2f %5.2f %6.2f %7.2f %7.2f %7.2f %6.2f %6.2f %6.2f %6.2f | %7.2f\n", r.Round, tierMix(r.Tiers), r.Seconds, r.Ratio,
			p.Query, p.Open, p.Checks, p.Actions, p.Landing, p.Observe, p.Plan, p.Answer, p.Finish, p.Other, p.Deposit)
	}
}

// writeTimeByRound writes summary.md's time table: each round of the
// memory-on arm against its cold first round and against the memory-off
// runs of the same round (cold every round, under the same machine load),
// with the tiers it used and where the time went.
func writeTimeByRound(w io.Writer, runs []Run) {
	var on, off []Run
	for _, r := range runs {
		if r.Memory == "off" {
			off = append(off, r)
		} else {
			on = append(on, r)
		}
	}
	offBy := map[int]float64{}
	for _, r := range Rounds(off) {
		offBy[r.Round] = r.Seconds
	}
	rs := Rounds(on)
	if len(rs) == 0 {
		return
	}
	fmt.Fprintf(w, "\n## Time by round (memory on)\n\n"+
		"Seconds are each run's wall time summed (the trace deposit and consolidation are not in it; deposit is shown beside). "+
		"× round 1 compares with the cold first round, × off with the memory-off runs of the same round.\n\n")
	fmt.Fprintf(w, "| round | tiers | seconds | × round 1 | × off | query | checks | actions | landing | observe | plan | answer | finish | other | deposit |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		p := r.Phases
		vsOff := "—"
		if o := offBy[r.Round]; o > 0 {
			vsOff = fmt.Sprintf("%.2f", ratio(r.Seconds, o))
		}
		fmt.Fprintf(w, "| %d | %s | %.2f | %.2f | %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n", r.Round, tierMix(r.Tiers), r.Seconds, r.Ratio, vsOff,
			p.Query, p.Checks, p.Actions, p.Landing, p.Observe, p.Plan, p.Answer, p.Finish, p.Other, p.Deposit)
	}
}
