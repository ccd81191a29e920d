package bench

import (
	"encoding/csv"
	"strings"
	"testing"
)

func TestTasksOnly(t *testing.T) {
	all, err := Tasks("http://x", 1, "", "")
	if err != nil || len(all) < 3 {
		t.Fatalf("%d tasks, %v", len(all), err)
	}
	got, err := Tasks("http://x", 1, "", all[1].ID+", "+all[0].ID)
	if err != nil || len(got) != 2 || got[0].ID != all[1].ID || got[1].ID != all[0].ID {
		t.Fatalf("%+v %v", got, err)
	}
	if _, err := Tasks("http://x", 1, "", "nope"); err == nil || !strings.Contains(err.Error(), all[0].ID) {
		t.Fatalf("unknown id: %v", err)
	}
}

func TestSumAndRatios(t *testing.T) {
	runs := []Run{
		{Task: "a", Round: 1, Memory: "on", Steps: 6, PlannerCalls: 6, Success: true, Seconds: 2},
		{Task: "b", Round: 1, Memory: "on", Steps: 4, PlannerCalls: 4, Success: false, Seconds: 2},
		{Task: "a", Round: 2, Memory: "on", Steps: 2, Success: true, Seconds: 0.5},
		{Task: "b", Round: 2, Memory: "on", Steps: 3, Success: true, Stale: true, Seconds: 0.5},
	}
	cold, warm := ColdWarm(runs)
	tc := Sum(cold)
	if tc.Runs != 2 || tc.Successes != 1 || tc.Accuracy != 0.5 || tc.Steps != 10 || tc.Seconds != 4 {
		t.Fatalf("cold %+v", tc)
	}
	if tw := Sum(warm); tw.Stale != 1 || tw.PlannerCalls != 0 {
		t.Fatalf("warm %+v", tw)
	}
	if r := StepsRatio(cold, warm); r != 0.5 {
		t.Errorf("steps ratio %v, want 0.5", r)
	}
	if r := TimeRatio(cold, warm); r != 0.25 {
		t.Errorf("time ratio %v, want 0.25", r)
	}
	if r := StepsRatio(nil, warm); r != 0 {
		t.Errorf("no cold runs: ratio %v", r)
	}
	var b strings.Builder
	WriteTable(&b, runs)
	if !strings.Contains(b.String(), "warm vs cold, per run: 0.50× the steps, 0.00× the clicks, 0.00× the planner calls, 0.25× the time (0.0 vs 5.0 planner calls per run)") ||
		strings.Contains(b.String(), "instead of") {
		t.Errorf("table:\n%s", b.String())
	}
}

func TestSummary(t *testing.T) {
	runs := []Run{
		{Task: "a", Round: 1, Memory: "on", Steps: 4, PlannerCalls: 4, Success: true, Seconds: 1, Clicks: 2, InputTokens: 100, OutputTokens: 10},
		{Task: "b", Round: 1, Memory: "on", Steps: 2, PlannerCalls: 2, Success: false, Seconds: 1},
		{Task: "a", Round: 1, Memory: "off", Steps: 4, PlannerCalls: 4, Success: true, Seconds: 1, Clicks: 2, InputTokens: 100, OutputTokens: 10},
		{Task: "b", Round: 1, Memory: "off", Steps: 2, PlannerCalls: 2, Success: true, Seconds: 1, Searches: 1},
		{Task: "a", Round: 2, Memory: "on", Steps: 1, Success: true, Seconds: 0.25, Recalled: []string{"route", "selectors"}, Tier: "P2", Volatile: true},
		{Task: "b", Round: 2, Memory: "on", Steps: 2, PlannerCalls: 2, Success: true, Seconds: 1},
		{Task: "a", Round: 2, Memory: "off", Steps: 4, PlannerCalls: 4, Success: false, Seconds: 1, Error: "wrong | answer", InputTokens: 100, OutputTokens: 10},
		{Task: "b", Round: 2, Memory: "off", Steps: 2, PlannerCalls: 2, Success: true, Seconds: 1},
	}
	MarkHarm(runs)
	if !runs[1].Harm || runs[3].Harm || runs[4].Harm || runs[6].Harm {
		t.Fatalf("harm: want only round 1 b on: %+v", runs)
	}
	md, csvData := Summary(runs, Info{Planner: "explore", Site: "demo site", Rounds: 2})
	rows, err := csv.NewReader(strings.NewReader(string(csvData))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1+8+6 || strings.Join(rows[0][:6], ",") != "kind,planner,site,memory,round,task" {
		t.Fatalf("csv rows %d:\n%s", len(rows), csvData)
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	get := func(kind, arm, round, task, field string) string {
		for _, r := range rows[1:] {
			if r[0] == kind && r[col["memory"]] == arm && r[col["round"]] == round && r[col["task"]] == task {
				return r[col[field]]
			}
		}
		t.Fatalf("no row %s %s %s %s", kind, arm, round, task)
		return ""
	}
	for _, c := range []struct{ kind, arm, round, task, field, want string }{
		{"run", "on", "1", "b", "harm", "1"},
		{"run", "on", "2", "a", "recalled", "route selectors"},
		{"run", "on", "2", "a", "tier", "P2"},
		{"run", "on", "2", "a", "volatile", "1"},
		{"run", "on", "2", "b", "volatile", "0"},
		{"run", "off", "2", "a", "error", "wrong | answer"},
		{"round", "on", "1", "", "accuracy", "0.500"},
		{"round", "on", "1", "", "harm", "1"},
		{"total", "on", "total", "", "steps", "9"},
		{"total", "off", "total", "", "steps", "12"},
		{"total", "off", "total", "", "input_tokens", "200"},
		{"total", "off", "total", "", "search_calls", "1"},
		{"total", "on", "total", "", "planner", "explore"},
		{"total", "on", "total", "", "site", "demo site"},
	} {
		if got := get(c.kind, c.arm, c.round, c.task, c.field); got != c.want {
			t.Errorf("%s %s %s %s %s = %q, want %q", c.kind, c.arm, c.round, c.task, c.field, got, c.want)
		}
	}
	for _, want := range []string{"Planner: explore. Site: demo site.", "Total, memory on vs off: 0.75× the steps, 1.00× the clicks, 0.00× the extract/search calls, 0.67× the planner calls",
		"0.50× the input tokens", "accuracy 75% vs 75%; 0 stale on, 0 off; 1 harm.", "## Harm (1)", "| 1 | b |", "wrong / answer", "| on | 2 | a | P2 | route selectors |"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("summary.md lacks %q:\n%s", want, md)
		}
	}
}

func TestPrepareTasksAndGrade(t *testing.T) {
	ts := []Task{
		{Text: "t1", StartURL: "http://127.0.0.1:1/a", Expected: "1,234"},
		{ID: "v", Text: "t2", StartURL: "http://127.0.0.1:1/b", Pattern: `^v\d+\.\d+`, Volatile: true},
	}
	if err := PrepareTasks(ts); err != nil {
		t.Fatal(err)
	}
	if ts[0].ID != "task-1" || ts[1].ID != "v" {
		t.Errorf("ids %q %q", ts[0].ID, ts[1].ID)
	}
	for _, c := range []struct {
		k      int
		answer string
		want   bool
	}{{0, "1234", true}, {0, "There are 1,234 stars", true}, {0, "11234", false}, {0, "", false},
		{1, "v2.3 is out", true}, {1, "version 2.3", false}, {1, "", false}} {
		if got := ts[c.k].Grade(c.answer); got != c.want {
			t.Errorf("task %d Grade(%q) = %v, want %v", c.k, c.answer, got, c.want)
		}
	}
	for _, bad := range []struct {
		k    Task
		want string
	}{
		{Task{Text: "x", StartURL: "http://h/"}, "no grading"},
		{Task{Text: "x", StartURL: "http://h/", Expected: "a", Pattern: "b"}, "not both"},
		{Task{Text: "x", StartURL: "http://h/", Pattern: "("}, "regex"},
		{Task{Text: "x", StartURL: "ftp://h/", Expected: "a"}, "http(s)"},
		{Task{Text: " ", StartURL: "http://h/", Expected: "a"}, "empty"},
	} {
		if err := PrepareTasks([]Task{bad.k}); err == nil || !strings.Contains(err.Error(), bad.want) || !strings.Contains(err.Error(), "task 1") {
			t.Errorf("PrepareTasks(%+v) = %v, want %q", bad.k, err, bad.want)
		}
	}
	if err := PrepareTasks([]Task{{ID: "a", Text: "x", StartURL: "http://h/", Expected: "1"}, {ID: "a", Text: "y", StartURL: "http://h/", Expected: "2"}}); err == nil || !strings.Contains(err.Error(), "task 2") {
		t.Errorf("duplicate ids: %v", err)
	}
	if got, err := PickTasks(ts, "v"); err != nil || len(got) != 1 || got[0].ID != "v" {
		t.Errorf("PickTasks: %+v %v", got, err)
	}
}

func TestRoundsTimeAgainstColdAndOff(t *testing.T) {
	runs := []Run{
		{Task: "a", Round: 1, Memory: "on", Tier: "P5", Seconds: 3, Phases: Phases{Actions: 2, Observe: 0.5, Deposit: 0.1}},
		{Task: "b", Round: 1, Memory: "on", Tier: "P3", Seconds: 1, Phases: Phases{Actions: 1}},
		{Task: "a", Round: 1, Memory: "off", Tier: "P5", Seconds: 2},
		{Task: "b", Round: 1, Memory: "off", Tier: "P5", Seconds: 2},
		{Task: "a", Round: 2, Memory: "on", Tier: "P1", Seconds: 0.5, Phases: Phases{Actions: 0.4, Checks: 0.05}},
		{Task: "b", Round: 2, Memory: "on", Tier: "P1", Seconds: 0.7, Phases: Phases{Actions: 0.6}},
		{Task: "a", Round: 2, Memory: "off", Tier: "P5", Seconds: 3},
		{Task: "b", Round: 2, Memory: "off", Tier: "P5", Seconds: 3},
	}
	var on []Run
	for _, r := range runs {
		if r.Memory == "on" {
			on = append(on, r)
		}
	}
	rs := Rounds(on)
	if len(rs) != 2 || rs[0].Seconds != 4 || rs[0].Ratio != 1 || rs[1].Seconds != 1.2 || rs[1].Ratio != 0.3 {
		t.Fatalf("rounds %+v", rs)
	}
	if rs[1].Tiers["P1"] != 2 || rs[0].Tiers["P5"] != 1 || rs[0].Tiers["P3"] != 1 || rs[1].Phases.Actions != 1 || rs[0].Phases.Deposit != 0.1 {
		t.Fatalf("tiers or phases %+v", rs)
	}
	md, _ := Summary(runs, Info{Planner: "explore", Site: "demo site", Rounds: 2})
	if !strings.Contains(string(md), "| 2 | P1 2 | 1.20 | 0.30 | 0.20 | 0.00 | 0.05 | 1.00 |") {
		t.Errorf("summary.md time table:\n%s", md)
	}
	var b strings.Builder
	WriteTable(&b, on)
	if !strings.Contains(b.String(), "2     P1 2                   1.20   0.30 |") {
		t.Errorf("demo table:\n%s", b.String())
	}
}
