package bench

import (
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
	if !strings.Contains(b.String(), "warm vs cold, per run: 0.50× the steps, 0.25× the time, 0 planner calls instead of 10") {
		t.Errorf("table:\n%s", b.String())
	}
}

func TestSummary(t *testing.T) {
	runs := []Run{
		{Task: "a", Round: 1, Memory: "on", Steps: 4, PlannerCalls: 4, Success: true, Seconds: 1},
		{Task: "a", Round: 1, Memory: "off", Steps: 4, PlannerCalls: 4, Success: true, Seconds: 1},
		{Task: "a", Round: 2, Memory: "on", Steps: 1, Success: true, Seconds: 0.25},
		{Task: "a", Round: 2, Memory: "off", Steps: 4, PlannerCalls: 4, Success: false, Seconds: 1, Error: "wrong | answer"},
	}
	md, csv := Summary(runs, 2)
	wantCSV := "memory,round,runs,accuracy,stale,steps,planner_calls,clicks,extract_calls,prompt_chars,seconds\n" +
		"on,1,1,1.000,0,4,4,0,0,0,1.000\non,2,1,1.000,0,1,0,0,0,0,0.250\non,total,2,1.000,0,5,4,0,0,0,1.250\n" +
		"off,1,1,1.000,0,4,4,0,0,0,1.000\noff,2,1,0.000,0,4,4,0,0,0,1.000\noff,total,2,0.500,0,8,8,0,0,0,2.000\n"
	if string(csv) != wantCSV {
		t.Errorf("csv:\n%s\nwant:\n%s", csv, wantCSV)
	}
	for _, want := range []string{"Total, memory on vs off: 0.62× the steps, 0.50× the planner calls", "accuracy 100% vs 50%", "wrong / answer"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("summary.md lacks %q:\n%s", want, md)
		}
	}
}
