package engine_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/pemdev/pem/engine"
)

func TestExperienceFold(t *testing.T) {
	tr := func(id string, at time.Time, o engine.Outcome, pattern string, steps ...engine.Step) *engine.Trace {
		return &engine.Trace{ID: id, Domain: "github.com", Intent: "star count", IntentKey: "star-count", TaskType: "repo",
			StartedAt: at, Outcome: o, URLPattern: pattern, Steps: steps, DurationMs: 1000}
	}
	okStep := engine.Step{Action: "get_text", Selector: "#stars", OK: true}
	badStep := engine.Step{Action: "click", Selector: "#old", OK: false, Error: "no element matches #old"}
	nav := engine.Step{Action: "navigate", URL: "https://github.com/", OK: true}

	var x engine.Experience
	if !x.Fold(tr("02", t0.Add(time.Hour), engine.Success, "/*/*", nav, okStep)) {
		t.Fatal("first fold refused")
	}
	x.Fold(tr("01", t0, engine.Failure, "/*/*", nav, badStep))
	x.Fold(tr("03", t0.Add(2*time.Hour), engine.Success, "/pemdev/pem", okStep))
	if x.Fold(tr("02", t0.Add(time.Hour), engine.Success, "/*/*", okStep)) {
		t.Error("folding a trace twice was accepted")
	}
	if x.Format != engine.Format || x.Domain != "github.com" || x.IntentKey != "star-count" || x.Attempts != 3 || x.Successes != 2 || x.Failures != 1 ||
		x.ByCategory[engine.SelectorDrift] != 1 || !reflect.DeepEqual(x.TaskTypes, []string{"repo"}) {
		t.Errorf("experience = %+v", x)
	}
	if x.Evidence[0].Trace != "01" || x.Evidence[2].Trace != "03" {
		t.Errorf("evidence not in time order: %+v", x.Evidence)
	}
	if !x.LastSuccessAt.Equal(t0.Add(2*time.Hour)) || !x.LastFailureAt.Equal(t0) || x.AvgSteps != 1.67 || x.AvgDurationMs != 1000 {
		t.Errorf("stats: %v %v %v %v", x.LastSuccessAt, x.LastFailureAt, x.AvgSteps, x.AvgDurationMs)
	}
	if s := x.Selectors["#stars"]; s == nil || s.OK != 2 || s.Fail != 0 || !s.LastOK.Equal(t0.Add(2*time.Hour)) {
		t.Errorf("#stars stats %+v", s)
	}
	if s := x.Selectors["#old"]; s == nil || s.Fail != 1 || !s.LastFail.Equal(t0) {
		t.Errorf("#old stats %+v", s)
	}
	if _, ok := x.Selectors[""]; ok {
		t.Error("navigate steps counted as a selector")
	}
	if got := x.URLPatterns(); !reflect.DeepEqual(got, []string{"/*/*", "/pemdev/pem"}) {
		t.Errorf("URLPatterns = %v", got)
	}
	if fs := x.FoldedSet(); len(fs) != 3 || !fs["01"] || !fs["03"] {
		t.Errorf("FoldedSet = %v", fs)
	}
	// Folding in another order gives the same experience.
	var y engine.Experience
	y.Fold(tr("03", t0.Add(2*time.Hour), engine.Success, "/pemdev/pem", okStep))
	y.Fold(tr("01", t0, engine.Failure, "/*/*", nav, badStep))
	y.Fold(tr("02", t0.Add(time.Hour), engine.Success, "/*/*", nav, okStep))
	if !reflect.DeepEqual(x, y) {
		t.Errorf("fold order matters:\n%+v\n%+v", x, y)
	}
}

func TestTraceSelectors(t *testing.T) {
	tr := engine.Trace{Steps: []engine.Step{{Action: "navigate"}, {Action: "click", Selector: "#a"}, {Action: "get_text", Selector: "#b"}, {Action: "click", Selector: "#a"}}}
	if got := tr.Selectors(); !reflect.DeepEqual(got, []string{"#a", "#b"}) {
		t.Errorf("Selectors = %v", got)
	}
	for _, a := range engine.Actions {
		if !engine.IsAction(a) {
			t.Errorf("IsAction(%q) = false", a)
		}
	}
	if engine.IsAction("teleport") || engine.IsAction("") {
		t.Error("IsAction accepts unknown actions")
	}
	if (&engine.Facts{}).HasPageText() || !(&engine.Facts{Answers: []engine.Answer{{Query: "q"}}}).HasPageText() {
		t.Error("HasPageText")
	}
}
