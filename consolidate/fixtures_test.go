package consolidate

// The trees in testdata/<case>/tree were made by TestGenerateFixtures
// (go test ./consolidate -run GenerateFixtures -gen). They are plain knowledge
// trees: edit them by hand or change the generator and run it again.

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store"
)

var gen = flag.Bool("gen", false, "regenerate the trees in testdata/*/tree")

// day0 is the fixtures' "today": every case's now is relative to it.
var day0 = time.Date(2025, 3, 10, 12, 0, 0, 0, time.UTC)

// fx builds traces for the fixtures with deterministic ids.
type fx struct {
	rng *rand.Rand
}

func newFx(seed int64) *fx { return &fx{rng: rand.New(rand.NewSource(seed))} }

type traceSpec struct {
	url     string
	intent  string
	session string
	at      time.Time
	ok      bool
	cat     engine.FailureCategory
	steps   []engine.Step
}

func (f *fx) trace(s traceSpec) *engine.Trace {
	id, err := engine.NewTraceID(s.at, f.rng)
	if err != nil {
		panic(err)
	}
	n, err := engine.NormalizeURL(s.url)
	if err != nil {
		panic(err)
	}
	t := &engine.Trace{Format: engine.Format, ID: id, Writer: "fixture", Session: s.session, Task: s.intent,
		Intent: s.intent, IntentKey: engine.IntentKey(s.intent), URL: n.URL, Domain: n.Domain, URLPattern: engine.Pattern(n),
		Outcome: engine.Success, StartedAt: s.at.UTC(), DurationMs: 1200, Steps: s.steps}
	if !s.ok {
		t.Outcome, t.FailureCategory = engine.Failure, s.cat
	}
	return t
}

// Routes used by the fixtures.
var (
	starsRoute = []engine.Step{
		{Seq: 1, Action: "navigate", URL: "https://github.com/pemdev/pem", OK: true},
		{Seq: 2, Action: "click", Selector: "#repo-stars-counter-star", Fallbacks: []string{"a[href$='/stargazers']"}, OK: true},
		{Seq: 3, Action: "get_text", Selector: "span.Counter", OK: true, Result: "1.2k"},
	}
	starsRouteV2 = []engine.Step{
		{Seq: 1, Action: "navigate", URL: "https://github.com/pemdev/pem", OK: true},
		{Seq: 2, Action: "click", Selector: "#repo-stars-counter-star", OK: false, Error: "no element", ErrorKind: engine.KindNoElement},
		{Seq: 3, Action: "click", Selector: "a[href$='/stargazers']", Fallbacks: []string{"#repo-stars-counter-star"}, OK: true},
		{Seq: 4, Action: "get_text", Selector: "[data-testid=stars-count]", Fallbacks: []string{"span.Counter"}, OK: true, Result: "1.3k"},
	}
	starsBroken = []engine.Step{
		{Seq: 1, Action: "navigate", URL: "https://github.com/pemdev/pem", OK: true},
		{Seq: 2, Action: "click", Selector: "#repo-stars-counter-star", OK: false, Error: "no element", ErrorKind: engine.KindNoElement},
	}
	issuesRoute = []engine.Step{
		{Seq: 1, Action: "navigate", URL: "https://github.com/pemdev/pem/issues", OK: true},
		{Seq: 2, Action: "type", Selector: "input[name=q]", Value: "memory", OK: true},
		{Seq: 3, Action: "press", Value: "Enter", OK: true},
		{Seq: 4, Action: "get_elements", Selector: "div.js-issue-row a.Link--primary", OK: true},
	}
)

const starsURL = "https://github.com/pemdev/pem"

func days(n float64) time.Duration { return time.Duration(n * 24 * float64(time.Hour)) }

func fold(ts ...*engine.Trace) *engine.Experience {
	x := &engine.Experience{}
	for _, t := range ts {
		x.Fold(t)
	}
	return x
}

// caseTree is one fixture: what to put in the tree.
type caseTree struct {
	now        time.Time
	traces     []*engine.Trace // written as trace files
	experience []*engine.Experience
	facts      []*engine.Facts
}

func fixtureCases() map[string]caseTree {
	cases := map[string]caseTree{}

	// new-entry: an empty tree gets its first runs.
	{
		f := newFx(1)
		c := caseTree{now: day0}
		for i, s := range []string{"s1", "s1", "s2"} {
			c.traces = append(c.traces, f.trace(traceSpec{url: starsURL, intent: "star count", session: s, at: day0.Add(-days(2) + time.Duration(i)*time.Hour), ok: true, steps: starsRoute}))
		}
		c.traces = append(c.traces, f.trace(traceSpec{url: starsURL + "/issues?q=memory", intent: "search issues", session: "s2", at: day0.Add(-days(1)), ok: false, cat: "", steps: []engine.Step{
			{Seq: 1, Action: "navigate", URL: "https://github.com/pemdev/pem/issues", OK: true},
			{Seq: 2, Action: "type", Selector: "input#js-issues-search", OK: false, Error: "no element matches", ErrorKind: engine.KindNoElement},
		}}))
		c.traces = append(c.traces, f.trace(traceSpec{url: "https://www.example.org/", intent: "read title", session: "s3", at: day0.Add(-days(1)), ok: false, steps: []engine.Step{
			{Seq: 1, Action: "navigate", URL: "https://www.example.org/", OK: false, HTTPStatus: 403, Error: "forbidden"},
		}}))
		cases["new-entry"] = c
	}

	// promote: a candidate with 4 successes gets 2 more from a third
	// session, with a new route: content updated, then verified.
	{
		f := newFx(2)
		var old []*engine.Trace
		for i, s := range []string{"s1", "s1", "s2", "s2"} {
			old = append(old, f.trace(traceSpec{url: starsURL, intent: "star count", session: s, at: day0.Add(-days(6) + time.Duration(i)*time.Hour), ok: true, steps: starsRoute}))
		}
		x := fold(old...)
		fa := &engine.Facts{Format: engine.Format, Domain: "github.com", Intent: "star count", IntentKey: "star-count", Status: engine.Candidate}
		derive(fa, x, old[3], old)
		fa.History = []engine.Transition{{From: engine.Hypothesis, To: engine.Candidate, At: day0.Add(-days(6) + 4*time.Hour), Reason: "confidence 0.83 ≥ 0.60 with 4 successes"}}
		c := caseTree{now: day0, experience: []*engine.Experience{x}, facts: []*engine.Facts{fa}, traces: old}
		for i := 0; i < 2; i++ {
			c.traces = append(c.traces, f.trace(traceSpec{url: starsURL, intent: "star count", session: "s3", at: day0.Add(-days(1) + time.Duration(i)*time.Hour), ok: true, steps: starsRouteV2}))
		}
		cases["promote"] = c
	}

	// contest-frozen: a verified entry meets a failure streak (and one
	// success with another route): contested, content unchanged.
	{
		f := newFx(3)
		var old []*engine.Trace
		for i, s := range []string{"s1", "s1", "s2", "s2", "s3", "s3"} {
			old = append(old, f.trace(traceSpec{url: starsURL, intent: "star count", session: s, at: day0.Add(-days(5) + time.Duration(i)*time.Hour), ok: true, steps: starsRoute}))
		}
		x := fold(old...)
		fa := &engine.Facts{Format: engine.Format, Domain: "github.com", Intent: "star count", IntentKey: "star-count", Status: engine.Verified}
		derive(fa, x, old[5], old)
		fa.Provenance.LastVerified = x.LastSuccessAt
		fa.History = []engine.Transition{{From: engine.Candidate, To: engine.Verified, At: day0.Add(-days(4)), Reason: "confidence 0.88 ≥ 0.85, 6 successes, last 3 successful, 3 sessions"}}
		c := caseTree{now: day0, experience: []*engine.Experience{x}, facts: []*engine.Facts{fa}}
		c.traces = append(c.traces, f.trace(traceSpec{url: starsURL, intent: "star count", session: "s4", at: day0.Add(-days(2)), ok: true, steps: starsRouteV2}))
		for i := 0; i < 5; i++ {
			c.traces = append(c.traces, f.trace(traceSpec{url: starsURL, intent: "star count", session: "s4", at: day0.Add(-days(1) + time.Duration(i)*time.Hour), ok: false, steps: starsBroken}))
		}
		cases["contest-frozen"] = c
	}

	// recover: a contested entry whose failures are old gets a run of
	// successes: verified again, same revision.
	{
		f := newFx(4)
		var old []*engine.Trace
		for i, s := range []string{"s1", "s1", "s2", "s2", "s3", "s3"} {
			old = append(old, f.trace(traceSpec{url: starsURL, intent: "star count", session: s, at: day0.Add(-days(90) + time.Duration(i)*time.Hour), ok: true, steps: starsRoute}))
		}
		for i := 0; i < 5; i++ {
			old = append(old, f.trace(traceSpec{url: starsURL, intent: "star count", session: "s4", at: day0.Add(-days(60) + time.Duration(i)*time.Hour), ok: false, steps: starsBroken}))
		}
		x := fold(old...)
		fa := &engine.Facts{Format: engine.Format, Domain: "github.com", Intent: "star count", IntentKey: "star-count", Status: engine.Contested}
		derive(fa, x, old[5], old[:6])
		fa.Provenance.LastVerified = old[5].StartedAt
		fa.History = []engine.Transition{
			{From: engine.Candidate, To: engine.Verified, At: day0.Add(-days(89)), Reason: "confidence 0.88 ≥ 0.85, 6 successes, last 3 successful, 3 sessions"},
			{From: engine.Verified, To: engine.Contested, At: day0.Add(-days(59)), Reason: "confidence 0.54 fell below 0.60"},
		}
		c := caseTree{now: day0, experience: []*engine.Experience{x}, facts: []*engine.Facts{fa}}
		for i := 0; i < 12; i++ {
			c.traces = append(c.traces, f.trace(traceSpec{url: starsURL, intent: "star count", session: fmt.Sprintf("s%d", 5+i%3), at: day0.Add(-days(3) + time.Duration(i)*time.Hour), ok: true, steps: starsRoute}))
		}
		cases["recover"] = c
	}

	// expire: traces past ttl_days are deleted once folded — also one that
	// is folded and expired in the same run; recent ones stay.
	{
		f := newFx(5)
		var old []*engine.Trace
		for i := 0; i < 3; i++ {
			old = append(old, f.trace(traceSpec{url: starsURL + "/issues?q=memory", intent: "search issues", session: "s1", at: day0.Add(-days(45) + time.Duration(i)*time.Hour), ok: true, steps: issuesRoute}))
		}
		recent := f.trace(traceSpec{url: starsURL + "/issues?q=memory", intent: "search issues", session: "s2", at: day0.Add(-days(3)), ok: true, steps: issuesRoute})
		x := fold(append(old, recent)...)
		fa := &engine.Facts{Format: engine.Format, Domain: "github.com", Intent: "search issues", IntentKey: "search-issues", Status: engine.Candidate}
		derive(fa, x, recent, append(old, recent))
		fa.History = []engine.Transition{{From: engine.Hypothesis, To: engine.Candidate, At: day0.Add(-days(44)), Reason: "confidence 0.80 ≥ 0.60 with 3 successes"}}
		late := f.trace(traceSpec{url: starsURL + "/issues?q=memory", intent: "search issues", session: "s3", at: day0.Add(-days(40)), ok: false, steps: []engine.Step{
			{Seq: 1, Action: "navigate", URL: "https://github.com/pemdev/pem/issues", OK: false, Error: "net::ERR_CONNECTION_RESET", ErrorKind: engine.KindNetwork},
		}})
		c := caseTree{now: day0, experience: []*engine.Experience{x}, facts: []*engine.Facts{fa}, traces: append(append(old, recent), late)}
		cases["expire"] = c
	}

	// decay: a verified entry whose evidence is old, with no new runs:
	// confidence decays below contest_below and the entry is contested.
	{
		f := newFx(6)
		var old []*engine.Trace
		for i, s := range []string{"s1", "s1", "s2", "s2", "s3", "s3", "s3", "s3"} {
			old = append(old, f.trace(traceSpec{url: starsURL, intent: "star count", session: s, at: day0.Add(-days(200) + time.Duration(i)*time.Hour), ok: true, steps: starsRoute}))
		}
		x := fold(old...)
		fa := &engine.Facts{Format: engine.Format, Domain: "github.com", Intent: "star count", IntentKey: "star-count", Status: engine.Verified}
		derive(fa, x, old[7], old)
		fa.Provenance.LastVerified = x.LastSuccessAt
		fa.History = []engine.Transition{{From: engine.Candidate, To: engine.Verified, At: day0.Add(-days(199)), Reason: "confidence 0.90 ≥ 0.85, 8 successes, last 3 successful, 3 sessions"}}
		cases["decay"] = caseTree{now: day0, experience: []*engine.Experience{x}, facts: []*engine.Facts{fa}}
	}
	return cases
}

func TestGenerateFixtures(t *testing.T) {
	if !*gen {
		t.Skip("run with -gen to rewrite testdata/*/tree")
	}
	ctx := context.Background()
	for name, c := range fixtureCases() {
		dir := filepath.Join("testdata", name, "tree")
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		if _, err := store.Init(ctx, dir); err != nil {
			t.Fatal(err)
		}
		st, err := store.Open(dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tr := range c.traces {
			if _, err := st.PutTrace(ctx, tr); err != nil {
				t.Fatal(err)
			}
		}
		for _, x := range c.experience {
			if _, err := st.PutExperience(ctx, x); err != nil {
				t.Fatal(err)
			}
		}
		for _, f := range c.facts {
			if _, err := st.PutFacts(ctx, f); err != nil {
				t.Fatal(err)
			}
		}
		st.Close()
		var b bytes.Buffer
		fmt.Fprintf(&b, "# %s: the fixture's clock (see fixtures_test.go)\nnow: %s\n", name, c.now.Format(time.RFC3339))
		if err := os.WriteFile(filepath.Join("testdata", name, "case.yaml"), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
