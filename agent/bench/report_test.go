package bench

import (
	"regexp"
	"strings"
	"testing"
)

func TestReport(t *testing.T) {
	runs := []Run{
		{Task: "a", Round: 1, Memory: "on", Steps: 4, PlannerCalls: 4, Success: true, Seconds: 1, PromptChars: 900},
		{Task: "b", Round: 1, Memory: "on", Steps: 3, PlannerCalls: 3, Success: true, Seconds: 1, PromptChars: 700},
		{Task: "a", Round: 1, Memory: "off", Steps: 4, PlannerCalls: 4, Success: true, Seconds: 1, PromptChars: 900},
		{Task: "b", Round: 1, Memory: "off", Steps: 3, PlannerCalls: 3, Success: true, Seconds: 1, PromptChars: 700},
		{Task: "a", Round: 2, Memory: "on", Steps: 1, Success: true, Seconds: 0.25},
		{Task: "b", Round: 2, Memory: "on", Steps: 2, Success: false, Seconds: 0.5, Error: "stale: answered <last> round's value"},
		{Task: "a", Round: 2, Memory: "off", Steps: 4, PlannerCalls: 4, Success: true, Seconds: 1, PromptChars: 800},
		{Task: "b", Round: 2, Memory: "off", Steps: 3, PlannerCalls: 3, Success: true, Seconds: 1, PromptChars: 650},
	}
	html := string(Report(runs, ReportOptions{Planner: "explore"}))
	for _, bad := range []string{"<script", "http://", "https://", "<link rel=\"stylesheet", "@import", "url(", "src=\"http"} {
		if strings.Contains(html, bad) {
			t.Errorf("report holds %q: it must be self-contained", bad)
		}
	}
	if !strings.Contains(html, "stale: answered &lt;last&gt; round") {
		t.Error("a run's note is not escaped")
	}
	point := func(metric, arm, round string) string {
		i := strings.Index(html, `data-metric="`+metric+`"`)
		if i < 0 {
			t.Fatalf("no chart %q", metric)
		}
		svg := html[i : i+strings.Index(html[i:], "</svg>")]
		m := regexp.MustCompile(`data-arm="` + arm + `" data-round="` + round + `" data-value="([^"]+)"`).FindStringSubmatch(svg)
		if m == nil {
			t.Fatalf("chart %s: no point for %s round %s", metric, arm, round)
		}
		return m[1]
	}
	for _, c := range []struct{ metric, arm, round, want string }{
		{"steps", "on", "1", "7"}, {"steps", "on", "2", "3"}, {"steps", "off", "2", "7"},
		{"accuracy", "on", "2", "0.5"}, {"accuracy", "off", "2", "1"},
		{"prompt chars", "off", "2", "1450"}, {"seconds", "on", "2", "0.75"}, {"planner calls", "on", "2", "0"},
	} {
		if got := point(c.metric, c.arm, c.round); got != c.want {
			t.Errorf("%s %s round %s: %s, want %s", c.metric, c.arm, c.round, got, c.want)
		}
	}
	harm := regexp.MustCompile(`<tr class="harm" data-task="([^"]+)" data-round="(\d)"`).FindAllStringSubmatch(html, -1)
	if len(harm) != 1 || harm[0][1] != "b" || harm[0][2] != "2" {
		t.Errorf("harm rows %v, want task b round 2 only", harm)
	}
	if !strings.Contains(html, "1 harm row:") {
		t.Error("the harm count is missing")
	}
}

func TestHarm(t *testing.T) {
	for _, c := range []struct {
		on, off Run
		want    bool
	}{
		{Run{Success: false}, Run{Success: true}, true},
		{Run{Success: true, Steps: 5}, Run{Success: true, Steps: 3}, false}, // slower is shown, not counted
		{Run{Success: true, Steps: 2}, Run{Success: true, Steps: 3}, false},
		{Run{Success: true, Steps: 9}, Run{Success: false, Steps: 3}, false},
		{Run{Success: false, Steps: 3}, Run{Success: false, Steps: 3}, false},
	} {
		if got, _ := Harm(c.on, c.off); got != c.want {
			t.Errorf("Harm(%+v, %+v) = %v", c.on, c.off, got)
		}
	}
}
