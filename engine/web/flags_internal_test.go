package web

import (
	"reflect"
	"testing"
	"time"

	"github.com/pemdev/pem/engine"
)

func TestFlagsOf(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ok := func(i int, pattern string) engine.Evidence {
		return engine.Evidence{Trace: string(rune('a' + i)), At: t0.Add(time.Duration(i) * time.Hour), Outcome: engine.Success, Steps: 2, URLPattern: pattern}
	}
	fail := func(i int, cat engine.FailureCategory) engine.Evidence {
		e := ok(i, "/p")
		e.Outcome, e.Category = engine.Failure, cat
		return e
	}
	names := func(fs []flag) []string {
		out := []string{}
		for _, f := range fs {
			out = append(out, f.Name)
		}
		return out
	}
	facts := &engine.Facts{URLPatterns: []string{"/p"}}
	for _, c := range []struct {
		name string
		v    engine.EntryView
		want []string
	}{
		{"healthy", engine.EntryView{Recall: &engine.Recall{Status: engine.Verified}, Facts: facts, Evidence: []engine.Evidence{ok(0, "/p"), ok(1, "/p")}}, []string{}},
		{"contested and failing", engine.EntryView{Recall: &engine.Recall{Status: engine.Contested}, Evidence: []engine.Evidence{ok(0, "/p"), fail(1, engine.Timing)}}, []string{"contested", "failing"}},
		{"drift, then recovered", engine.EntryView{Recall: &engine.Recall{}, Evidence: []engine.Evidence{fail(0, engine.SelectorDrift), ok(1, "/p")}}, []string{"drifting"}},
		{"drift long ago", engine.EntryView{Recall: &engine.Recall{}, Evidence: []engine.Evidence{fail(0, engine.SelectorDrift), ok(1, "/p"), ok(2, "/p"), ok(3, "/p"), ok(4, "/p"), ok(5, "/p")}}, []string{}},
		{"run off the facts' patterns", engine.EntryView{Recall: &engine.Recall{}, Facts: facts, Evidence: []engine.Evidence{ok(0, "/p"), ok(1, "/q/*")}}, []string{"pattern-mismatch"}},
		{"the recall's mismatch warning", engine.EntryView{Recall: &engine.Recall{Warnings: []string{"pattern_mismatch: learned on /p"}}}, []string{"pattern-mismatch"}},
		{"judged wrong", engine.EntryView{Recall: &engine.Recall{Warnings: []string{"judged_wrong: run x was judged wrong"}}, Evidence: []engine.Evidence{fail(0, engine.JudgedWrong)}}, []string{"judged-wrong", "failing"}},
		{"aborted is no one's fault", engine.EntryView{Recall: &engine.Recall{}, Evidence: []engine.Evidence{ok(0, "/p"), fail(1, engine.Aborted)}}, []string{}},
		{"a lesson is not a run", engine.EntryView{Recall: &engine.Recall{}, Evidence: []engine.Evidence{fail(0, engine.Timing), {Trace: "z", At: t0.Add(9 * time.Hour), Outcome: engine.Success}}}, []string{"failing"}},
	} {
		if got := names(flagsOf(&c.v)); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: flags %v, want %v", c.name, got, c.want)
		}
	}
	if weight([]flag{{Name: "contested"}}) <= weight([]flag{{Name: "drifting"}, {Name: "pattern-mismatch"}, {Name: "judged-wrong"}, {Name: "failing"}}) {
		t.Error("contested must outweigh every other flag together")
	}
}
