package bench

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"io"
	"sort"
	"strings"
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
		t.Steps += r.Steps
		t.PlannerCalls += r.PlannerCalls
		t.Clicks += r.Clicks
		t.Extracts += r.Extracts
		t.PromptChars += r.PromptChars
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

// StepsRatio compares the warm runs' steps per run with the cold runs'.
func StepsRatio(cold, warm []Run) float64 {
	c, w := Sum(cold), Sum(warm)
	if c.Runs == 0 || w.Runs == 0 {
		return 0
	}
	return ratio(float64(w.Steps)/float64(w.Runs), float64(c.Steps)/float64(c.Runs))
}

// TimeRatio compares the warm runs' seconds per run with the cold runs'.
func TimeRatio(cold, warm []Run) float64 {
	c, w := Sum(cold), Sum(warm)
	if c.Runs == 0 || w.Runs == 0 {
		return 0
	}
	return ratio(w.Seconds/float64(w.Runs), c.Seconds/float64(c.Runs))
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
// totals and how warm compares with cold per run.
func WriteTable(w io.Writer, runs []Run) {
	cold, warm := ColdWarm(runs)
	tc, tw := Sum(cold), Sum(warm)
	fmt.Fprintf(w, "%-22s %5s %4s %5s %8s %7s %7s  %s\n", "task", "round", "tier", "steps", "planner", "success", "seconds", "answer")
	for _, r := range runs {
		ok := "yes"
		if !r.Success {
			ok = "NO"
		}
		fmt.Fprintf(w, "%-22s %5d %4s %5d %8d %7s %7.2f  %s\n", r.Task, r.Round, r.Tier, r.Steps, r.PlannerCalls, ok, r.Seconds, OneLine(r.Answer, 50))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "%-5s %5s %9s %6s %8s %8s\n", "", "runs", "succeeded", "steps", "planner", "seconds")
	fmt.Fprintf(w, "%-5s %5d %9d %6d %8d %8.2f\n", "cold", tc.Runs, tc.Successes, tc.Steps, tc.PlannerCalls, tc.Seconds)
	if tw.Runs > 0 {
		fmt.Fprintf(w, "%-5s %5d %9d %6d %8d %8.2f\n", "warm", tw.Runs, tw.Successes, tw.Steps, tw.PlannerCalls, tw.Seconds)
		fmt.Fprintf(w, "warm vs cold, per run: %.2f× the steps, %.2f× the time, %d planner calls instead of %d\n",
			StepsRatio(cold, warm), TimeRatio(cold, warm), tw.PlannerCalls, tc.PlannerCalls*tw.Runs/max(1, tc.Runs))
	}
}

// Summary renders pem bench's summary.md and summary.csv: per arm, a row per
// round and one for the total, then the runs.
func Summary(runs []Run, rounds int) (md, csvData []byte) {
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
	cw.Write([]string{"memory", "round", "runs", "accuracy", "stale", "steps", "planner_calls", "clicks", "extract_calls", "prompt_chars", "seconds"})
	fmt.Fprintf(&mb, "# pem bench: memory on vs off\n\n%d rounds of the demo tasks; volatile values move every round; stale answers count as wrong.\n"+
		"Prompt characters are what a model planner would have been sent (task + memory + page observation per planner call).\n\n", rounds)
	mb.WriteString("| memory | round | runs | accuracy | stale | steps | planner calls | clicks | extract calls | prompt chars | seconds |\n")
	mb.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, k := range keys {
		t := Sum(groups[k])
		round := fmt.Sprint(k.round)
		if k.round == 0 {
			round = "total"
		}
		fmt.Fprintf(&mb, "| %s | %s | %d | %.0f%% | %d | %d | %d | %d | %d | %d | %.2f |\n", k.arm, round, t.Runs, 100*t.Accuracy, t.Stale,
			t.Steps, t.PlannerCalls, t.Clicks, t.Extracts, t.PromptChars, t.Seconds)
		cw.Write([]string{k.arm, round, fmt.Sprint(t.Runs), fmt.Sprintf("%.3f", t.Accuracy), fmt.Sprint(t.Stale), fmt.Sprint(t.Steps),
			fmt.Sprint(t.PlannerCalls), fmt.Sprint(t.Clicks), fmt.Sprint(t.Extracts), fmt.Sprint(t.PromptChars), fmt.Sprintf("%.3f", t.Seconds)})
	}
	cw.Flush()
	on, off := Sum(groups[key{"on", 0}]), Sum(groups[key{"off", 0}])
	fmt.Fprintf(&mb, "\nTotal, memory on vs off: %.2f× the steps, %.2f× the planner calls, %.2f× the prompt characters, %.2f× the time; accuracy %.0f%% vs %.0f%%.\n",
		ratio(float64(on.Steps), float64(off.Steps)), ratio(float64(on.PlannerCalls), float64(off.PlannerCalls)),
		ratio(float64(on.PromptChars), float64(off.PromptChars)), ratio(on.Seconds, off.Seconds), 100*on.Accuracy, 100*off.Accuracy)
	mb.WriteString("\n## Runs\n\n| memory | round | task | tier | steps | planner calls | success | seconds | note |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range runs {
		fmt.Fprintf(&mb, "| %s | %d | %s | %s | %d | %d | %v | %.2f | %s |\n", r.Memory, r.Round, r.Task, r.Tier, r.Steps, r.PlannerCalls, r.Success, r.Seconds, strings.ReplaceAll(OneLine(r.Error, 80), "|", "/"))
	}
	return mb.Bytes(), cb.Bytes()
}
