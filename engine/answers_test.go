package engine_test

import (
	"context"
	"fmt"
	"math/rand"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store/storetest"
)

var answerDay = time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)

// answerRun is a successful run of intent that read answer, in session, at hour h.
func answerRun(t *testing.T, rng *rand.Rand, intent, session, answer string, h int) *engine.Trace {
	t.Helper()
	at := answerDay.Add(time.Duration(h) * time.Hour)
	id, err := engine.NewTraceID(at, rng)
	if err != nil {
		t.Fatal(err)
	}
	return &engine.Trace{Format: engine.Format, ID: id, Session: session, Intent: intent, IntentKey: engine.IntentKey(intent),
		URL: "https://shop.example/p/1", Domain: "shop.example", URLPattern: "/p/*", Outcome: engine.Success, StartedAt: at,
		Steps:  []engine.Step{{Seq: 1, Action: "navigate", URL: "https://shop.example/p/1", OK: true}, {Seq: 2, Action: "get_text", Selector: "#name", OK: true}},
		Result: engine.Result{Answer: answer, FinalURL: "https://shop.example/p/1"}}
}

func TestCachedAnswer(t *testing.T) {
	p := engine.DefaultPolicy()
	type run struct {
		session, answer string
		wrong           bool // a verdict judged the run wrong
		failed          bool // the run failed (e.g. unverified_answer)
	}
	cases := []struct {
		name      string
		intent    string
		runs      []run
		freshness engine.Freshness // "" : no answer
		value     string
		demoted   bool
	}{
		{"one session is not enough", "install command", []run{{"a", "pip install pem", false, false}, {"a", "pip install pem", false, false}}, "", "", false},
		{"two sessions agree: stable", "install command", []run{{"a", "pip install pem", false, false}, {"b", "pip  install pem ", false, false}}, engine.Stable, "pip install pem", false},
		{"values differ from the start: volatile", "install command", []run{{"a", "pip install pem", false, false}, {"b", "pipx install pem", false, false}}, engine.Volatile, "", false},
		{"a stable answer read differently: demoted", "install command", []run{{"a", "pip install pem", false, false}, {"b", "pip install pem", false, false}, {"c", "uv add pem", false, false}}, engine.Volatile, "", true},
		{"a count is volatile by kind even when unchanged", "star count", []run{{"a", "1,204", false, false}, {"b", "1,204", false, false}}, engine.Volatile, "", false},
		{"a judged-wrong read never counts", "install command", []run{{"a", "pip install pem", false, false}, {"b", "pip install pem", true, false}}, "", "", false},
		{"a judged-wrong different value is no change", "install command", []run{{"a", "pip install pem", false, false}, {"b", "pip install pem", false, false}, {"c", "uv add pem", true, false}}, engine.Stable, "pip install pem", false},
		{"a failed run's answer never counts", "install command", []run{{"a", "pip install pem", false, false}, {"b", "pip install pem", false, true}}, "", "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewSource(1))
			x := &engine.Experience{}
			for i, r := range c.runs {
				tr := answerRun(t, rng, c.intent, r.session, r.answer, i)
				if r.failed {
					// Folded as a failure: its answer is no read.
					tr.Outcome, tr.FailureCategory = engine.Failure, engine.UnverifiedAnswer
				}
				x.Fold(tr)
				if r.wrong {
					engine.ApplyVerdict(&x.Evidence[len(x.Evidence)-1], &engine.Verdict{Trace: tr.ID, Verdict: engine.Wrong, Judge: "qa", At: tr.StartedAt.Add(time.Minute)})
				}
			}
			a, why := engine.CachedAnswer(c.intent, x.Answers, x.Evidence, "r1", p)
			if c.freshness == "" {
				if a != nil {
					t.Fatalf("want no answer, got %+v (%s)", a, why)
				}
				return
			}
			if a == nil {
				t.Fatalf("want a %s answer, got none (%s)", c.freshness, why)
			}
			if a.Freshness != c.freshness || a.Value != c.value || a.Demoted != c.demoted {
				t.Fatalf("got %s %q demoted=%v, want %s %q demoted=%v (%s)", a.Freshness, a.Value, a.Demoted, c.freshness, c.value, c.demoted, why)
			}
			if a.SourceURL != "https://shop.example/p/1" || a.ObservedAt.IsZero() || a.Revision != "r1" || a.Query != c.intent {
				t.Errorf("answer lacks its source, time, route revision or query: %+v", a)
			}
			if a.Freshness == engine.Volatile && a.Value != "" {
				t.Errorf("a volatile answer carries a value: %+v", a)
			}
		})
	}
}

func TestObservedAnswersAreAJoin(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	var ts []*engine.Trace
	for i := 0; i < 3*engine.MaxAnswerReads; i++ {
		ts = append(ts, answerRun(t, rng, "read the motto", fmt.Sprint("s", i%4), fmt.Sprint("motto ", i%7), i))
	}
	var all []engine.Observed
	for _, tr := range ts {
		all = engine.FoldAnswer(all, tr)
	}
	// Folding again, in another order, or merging halves gives the same record.
	var rev, a, b []engine.Observed
	for i := len(ts) - 1; i >= 0; i-- {
		rev = engine.FoldAnswer(rev, ts[i])
		rev = engine.FoldAnswer(rev, ts[i])
	}
	for i, tr := range ts {
		if i%2 == 0 {
			a = engine.FoldAnswer(a, tr)
		} else {
			b = engine.FoldAnswer(b, tr)
		}
	}
	if !reflect.DeepEqual(all, rev) {
		t.Fatalf("fold order or repetition changed the record:\n%+v\n%+v", all, rev)
	}
	if m := engine.MergeObserved(a, b); !reflect.DeepEqual(all, m) {
		t.Fatalf("merge of halves differs from folding all:\n%+v\n%+v", all, m)
	}
	if m := engine.MergeObserved(b, a); !reflect.DeepEqual(all, m) {
		t.Fatal("merge is not commutative")
	}
	n := 0
	for _, o := range all {
		n += len(o.Reads)
	}
	if n != engine.MaxAnswerReads || len(all) != 7 {
		t.Errorf("%d reads of %d values kept, want the cap %d over 7 values", n, len(all), engine.MaxAnswerReads)
	}
	if newest := ts[len(ts)-1]; all[0].Reads[0].Trace != newest.ID {
		t.Errorf("the newest read is not first: %+v", all[0])
	}
}

// TestQueryServesObservedAnswers: the answers of runs saved through the engine
// (pending, then folded) reach the recall and the Memory section: a stable one
// as a value to verify, a changed one demoted and never as a value, and a
// reviewed facts answer the runs no longer read is demoted too.
func TestQueryServesObservedAnswers(t *testing.T) {
	ctx := context.Background()
	st := storetest.NewMemStore()
	e := &engine.Engine{Store: st, Now: func() time.Time { return answerDay.Add(48 * time.Hour) }}
	rng := rand.New(rand.NewSource(3))
	save := func(session, answer string, h int) {
		t.Helper()
		tr := answerRun(t, rng, "install command", session, answer, h)
		tr.ID = "" // the engine gives the id
		if _, err := e.SaveTrace(ctx, tr, nil); err != nil {
			t.Fatal(err)
		}
	}
	save("a", "pip install pem", 0)
	save("b", "pip install pem", 1)
	r, err := e.Query(ctx, "https://shop.example/p/1", "install command")
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Answers) != 1 || r.Answers[0].Freshness != engine.Stable || r.Answers[0].Value != "pip install pem" || r.Answers[0].Sessions != 2 {
		t.Fatalf("after two sessions agree, want the stable answer, got %+v", r.Answers)
	}
	mem := engine.RenderMemory(r, 2000)
	if !strings.Contains(mem, `"pip install pem" — cached, verify at "https://shop.example/p/1"`) {
		t.Fatalf("Memory lacks the stable answer:\n%s", mem)
	}

	save("c", "uv add pem", 2)
	r, err = e.Query(ctx, "https://shop.example/p/1", "install command")
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Answers) != 1 || !r.Answers[0].Demoted || r.Answers[0].Freshness != engine.Volatile || r.Answers[0].Value != "" {
		t.Fatalf("after a re-read differs, want the answer demoted with no value, got %+v", r.Answers)
	}
	mem = engine.RenderMemory(r, 2000)
	if strings.Contains(mem, "pip install pem") || strings.Contains(mem, "uv add pem") || !strings.Contains(mem, `"install command" changed when re-read: read it live`) {
		t.Fatalf("Memory must not serve a demoted answer's value:\n%s", mem)
	}
	if !hasPrefix(r.Warnings, "answer_demoted: ") {
		t.Errorf("no answer_demoted warning: %v", r.Warnings)
	}
}

// TestReviewedAnswerDemotedByANewRead: a facts answer (reviewed, frozen with
// a verified entry) that a newer run reads differently is served demoted; the
// facts file is not changed.
func TestReviewedAnswerDemotedByANewRead(t *testing.T) {
	ctx := context.Background()
	st := storetest.NewMemStore()
	e := &engine.Engine{Store: st, Now: func() time.Time { return answerDay.Add(48 * time.Hour) }}
	f := &engine.Facts{Format: engine.Format, Domain: "shop.example", Intent: "install command", IntentKey: engine.IntentKey("install command"),
		URLPatterns: []string{"/p/*"}, Status: engine.Verified,
		Answers: []engine.Answer{{Query: "install command", Value: "pip install pem", SourceURL: "https://shop.example/p/1", Freshness: engine.Stable}}}
	f.Revision = f.ContentHash()
	if _, err := st.PutFacts(ctx, f); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(4))
	tr := answerRun(t, rng, "install command", "z", "uv add pem", 0)
	tr.ID = ""
	if _, err := e.SaveTrace(ctx, tr, nil); err != nil {
		t.Fatal(err)
	}
	r, err := e.Query(ctx, "https://shop.example/p/1", "install command")
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Answers) != 1 || !r.Answers[0].Demoted || r.Answers[0].Value != "" {
		t.Fatalf("want the reviewed answer demoted, got %+v", r.Answers)
	}
	got, err := st.Facts(ctx, f.Domain, f.IntentKey)
	if err != nil {
		t.Fatal(err)
	}
	if got.Answers[0].Value != "pip install pem" || got.ContentHash() != f.Revision {
		t.Fatalf("the verified facts changed: %+v", got.Answers)
	}
}

func hasPrefix(xs []string, p string) bool {
	for _, x := range xs {
		if strings.HasPrefix(x, p) {
			return true
		}
	}
	return false
}
