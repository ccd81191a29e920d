package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store/storetest"
)

const fakeBase = "http://fake.test:8080"

func testSite() *fakeSite {
	return &fakeSite{pages: map[string]*sitePage{
		"/": {title: "Acme widgets", search: "/search",
			els: []siteEl{
				{Element: Element{Selector: "#nav-issues", Tag: "a", Text: "Issues"}, to: "/issues"},
				{Element: Element{Selector: "#nav-pulls", Tag: "a", Text: "Pull requests"}, to: "/pulls"},
				{Element: Element{Selector: "#nav-login", Tag: "a", Text: "Sign in"}, to: "/login"},
				{Element: Element{Selector: "#q", Tag: "input", Type: "search", Name: "q", Placeholder: "Search"}},
			},
			labels: []LabelValue{{Label: "Stars", Value: "42", Selector: "#stars"}},
		},
		"/issues": {title: "Issues",
			els: []siteEl{
				{Element: Element{Selector: "#issue-1", Tag: "a", Text: "Fix crash"}, to: "/issues/1"},
				{Element: Element{Selector: "#issue-2", Tag: "a", Text: "Add docs"}, to: "/issues/2"},
			},
			labels: []LabelValue{{Label: "Open issues", Value: "7", Selector: "#open-count"}},
		},
		"/issues/1": {title: "Fix crash", labels: []LabelValue{{Label: "Author", Value: "alice", Selector: "#author"}}},
		"/pulls":    {title: "Pull requests", labels: []LabelValue{{Label: "Open pull requests", Value: "3", Selector: "#pr-count"}}},
		"/search":   {title: "Search", labels: []LabelValue{{Label: "Results for", Value: "{q}", Selector: "#results-for"}, {Label: "Matches", Value: "5", Selector: "#matches"}}},
		"/issues/2": {title: "Add docs", labels: []LabelValue{{Label: "Author", Value: "bob", Selector: "#author"}}},
		"/inbox":    {title: "Inbox", labels: []LabelValue{{Label: "Unread notifications", Value: "4", Selector: "#unread"}}},
		"/login": {title: "Sign in", search: "/inbox",
			els: []siteEl{
				{Element: Element{Selector: "#user", Tag: "input", Type: "text", Name: "login"}},
				{Element: Element{Selector: "#pw", Tag: "input", Type: "password", Name: "password"}},
			},
		},
	}}
}

// scriptPlanner returns its actions in order, then gives up.
type scriptPlanner struct {
	mu     sync.Mutex
	acts   []Action
	calls  int
	states []*State
	onCall func(n int) error
}

func (p *scriptPlanner) Name() string { return "script" }

func (p *scriptPlanner) Next(ctx context.Context, s *State) (Action, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	p.states = append(p.states, s)
	if p.onCall != nil {
		if err := p.onCall(p.calls); err != nil {
			return Action{}, err
		}
	}
	if len(p.acts) == 0 {
		return Action{Tool: "done"}, nil
	}
	a := p.acts[0]
	p.acts = p.acts[1:]
	return a, nil
}

// noPlanner fails the test when called.
type noPlanner struct{ t *testing.T }

func (p noPlanner) Name() string { return "none" }
func (p noPlanner) Next(ctx context.Context, s *State) (Action, error) {
	p.t.Errorf("planner called at turn %d (tier %s); want zero planner calls", s.Turn, s.Tier)
	return Action{Tool: "done"}, nil
}

type env struct {
	site  *fakeSite
	br    *fakeBrowser
	store *storetest.MemStore
	eng   *engine.Engine
	clock time.Time
	mu    sync.Mutex
}

func newEnv() *env {
	s := testSite()
	e := &env{site: s, br: &fakeBrowser{site: s, base: fakeBase}, store: storetest.NewMemStore(),
		clock: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)}
	// The default policy except a ladder that trusts one run
	// (first_success_confidence 0.65, p2_sessions 1), so that one cold run
	// earns the replay these unit tests exercise; the ladder itself is
	// engine's, and the e2e tests climb it with the default policy.
	c := engine.DefaultConfig()
	c.Policy.FirstSuccessConfidence, c.Policy.P2Sessions = 0.65, 1
	e.store.SetConfig(c)
	e.eng = &engine.Engine{Store: e.store, Now: e.now, Writer: "test"}
	return e
}

// now advances 10 ms per call so durations and trace ids are distinct.
func (e *env) now() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.clock = e.clock.Add(10 * time.Millisecond)
	return e.clock
}

func (e *env) cfg(task string, p Planner) RunConfig {
	return RunConfig{Engine: e.eng, Browser: e.br, Planner: p, Task: task, StartURL: fakeBase + "/", Now: e.now}
}

func (e *env) only(t *testing.T) *engine.Trace {
	t.Helper()
	all := e.store.Traces()
	if len(all) == 0 {
		t.Fatal("no trace deposited")
	}
	return all[len(all)-1]
}

// verify stores a verified facts entry with the given route and enough
// successful evidence (pending traces from several sessions) for P1.
func (e *env) verify(t *testing.T, intent string, steps []engine.Step) {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < 6; i++ {
		in := &engine.TraceInput{Steps: []engine.StepInput{{Action: "navigate", URL: fakeBase + "/"}}}
		if _, err := e.eng.Save(ctx, engine.SaveRequest{URL: fakeBase + "/", Trace: in, Intent: intent, Session: fmt.Sprintf("s%d", i%2)}); err != nil {
			t.Fatal(err)
		}
	}
	f := &engine.Facts{Format: engine.Format, Domain: "fake.test", Intent: intent, IntentKey: engine.IntentKey(intent),
		Status: engine.Verified, URLPatterns: []string{"/"}, Steps: steps}
	if _, err := e.store.PutFacts(ctx, f); err != nil {
		t.Fatal(err)
	}
}

func TestColdRunDepositsAndWarmRunReplaysAtP2(t *testing.T) {
	e := newEnv()
	ctx := context.Background()
	task := "how many open issues"
	cold := &scriptPlanner{acts: []Action{
		{Tool: "click", Selector: "#nav-issues"},
		{Tool: "extract", Value: "open issues"},
		{Tool: "done", Value: "7"},
	}}
	res, err := Run(ctx, e.cfg(task, cold))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Success || res.Answer != "7" || res.Tier != engine.P5 || res.PlannerCalls != 3 || res.Steps != 3 {
		t.Fatalf("cold run: %+v", res)
	}
	tr := e.only(t)
	if tr.Outcome != engine.Success || len(tr.Steps) != 3 || tr.Steps[1].Selector != "#nav-issues" || tr.Tier != engine.P5 || tr.PlannerCalls != 3 {
		t.Fatalf("cold trace: %+v", tr)
	}
	if cold.states[0].Memory != "" || cold.states[0].Tier != engine.P5 {
		t.Fatalf("cold planner saw memory %q tier %s", cold.states[0].Memory, cold.states[0].Tier)
	}
	if !strings.Contains(cold.states[0].Observation, "#nav-issues") || !strings.Contains(cold.states[0].Observation, "Stars: 42") {
		t.Fatalf("observation lacks elements or values:\n%s", cold.states[0].Observation)
	}

	// The site moves the count: the warm run must read it live.
	e.site.pages["/issues"].labels[0].Value = "9"
	warm, err := Run(ctx, e.cfg(task, noPlanner{t}))
	if err != nil {
		t.Fatal(err)
	}
	if warm.Tier != engine.P2 || warm.PlannerCalls != 0 || !warm.Success || warm.Answer != "9" {
		t.Fatalf("warm run: %+v\n%s", warm, strings.Join(warm.ActionLog, "\n"))
	}
	if warm.Steps != 3 || warm.Replayed != 3 {
		t.Fatalf("warm steps %d replayed %d, want 3 and 3", warm.Steps, warm.Replayed)
	}
	if n := e.site.countCalls("exists #nav-issues"); n != 1 {
		t.Fatalf("P2 verified #nav-issues %d times, want 1", n)
	}
}

func TestP1ReplaysWithZeroPlannerCalls(t *testing.T) {
	e := newEnv()
	intent := "author of the first issue"
	e.verify(t, intent, []engine.Step{
		{Seq: 1, Action: "navigate", URL: "http://fake.test:9999/", OK: true}, // another port: same site
		{Seq: 2, Action: "click", Selector: "#nav-issues", OK: true},
		{Seq: 3, Action: "click", Selector: "#gone", OK: false}, // a failed step is not part of the route
		{Seq: 4, Action: "click", Selector: "#issue-1", OK: true},
		{Seq: 5, Action: "extract", Value: "author", OK: true, Result: "bob"}, // last run's value: never the answer
		{Seq: 6, Action: "done", Value: "bob", OK: true},
	})
	res, err := Run(context.Background(), e.cfg(intent, noPlanner{t}))
	if err != nil {
		t.Fatal(err)
	}
	if res.Tier != engine.P1 || res.PlannerCalls != 0 || !res.Success || res.Answer != "alice" {
		t.Fatalf("P1 run: %+v\n%s", res, strings.Join(res.ActionLog, "\n"))
	}
	if res.Steps != 4 || res.Clicks != 2 || res.Extracts != 1 {
		t.Fatalf("P1 steps %d clicks %d extracts %d, want 4 2 1", res.Steps, res.Clicks, res.Extracts)
	}
	if e.site.countCalls("elements") != 0 {
		t.Fatal("P1 observed the page for a planner; it must not")
	}
	tr := e.only(t)
	if tr.Tier != engine.P1 || tr.Outcome != engine.Success || tr.PlannerCalls != 0 {
		t.Fatalf("P1 trace: tier %s outcome %s planner calls %d", tr.Tier, tr.Outcome, tr.PlannerCalls)
	}
}

func TestP1GoesStraightToTheAnswerPage(t *testing.T) {
	e := newEnv()
	intent := "how many open issues"
	e.verify(t, intent, []engine.Step{
		{Seq: 1, Action: "navigate", URL: fakeBase + "/", OK: true},
		{Seq: 2, Action: "click", Selector: "#nav-issues", URL: fakeBase + "/issues", OK: true},
		{Seq: 3, Action: "extract", Value: "open issues", URL: fakeBase + "/issues", OK: true},
	})
	res, err := Run(context.Background(), e.cfg(intent, noPlanner{t}))
	if err != nil {
		t.Fatal(err)
	}
	if res.Tier != engine.P1 || !res.Success || res.Answer != "7" || res.Steps != 2 || res.Clicks != 0 {
		t.Fatalf("%+v\n%s", res, strings.Join(res.ActionLog, "\n"))
	}
	if n := e.site.countCalls("navigate " + fakeBase + "/issues"); n != 1 {
		t.Fatalf("navigated to the answer page %d times", n)
	}
}

func TestP2HandsOverAtFirstMissAndRecordsDrift(t *testing.T) {
	e := newEnv()
	intent := "how many open pull requests"
	e.verify(t, intent, []engine.Step{
		{Seq: 1, Action: "navigate", URL: fakeBase + "/", OK: true},
		{Seq: 2, Action: "click", Selector: "#old-pulls-link", OK: true}, // renamed on the site
		{Seq: 3, Action: "extract", Value: "open pull requests", OK: true},
	})
	// Not verified: confidence alone gives P2.
	f, _ := e.store.Facts(context.Background(), "fake.test", engine.IntentKey(intent))
	f.Status = engine.Candidate
	e.store.PutFacts(context.Background(), f)

	p := &scriptPlanner{acts: []Action{
		{Tool: "click", Selector: "#nav-pulls"},
		{Tool: "extract", Value: "open pull requests"},
		{Tool: "done", Value: "3"},
	}}
	res, err := Run(context.Background(), e.cfg(intent, p))
	if err != nil {
		t.Fatal(err)
	}
	if res.Tier != engine.P2 || !res.Success || res.Answer != "3" || !res.HandedOver || res.PlannerCalls != 3 {
		t.Fatalf("P2 run: %+v\n%s", res, strings.Join(res.ActionLog, "\n"))
	}
	if e.site.countCalls("click #old-pulls-link") != 0 {
		t.Fatal("P2 clicked a selector that failed verification")
	}
	if len(res.Recovered) != 1 || res.Recovered[0].Category != engine.SelectorDrift || res.Recovered[0].Selector != "#old-pulls-link" {
		t.Fatalf("recovered: %+v", res.Recovered)
	}
	if p.states[0].Memory == "" || !strings.Contains(p.states[0].Memory, "## Memory") {
		t.Fatal("the planner taking over from a replay got no Memory section")
	}
	if h := p.states[0].History; len(h) != 2 || h[1].Result.Error == "" || !h[1].Replayed {
		t.Fatalf("the planner's history does not show the miss: %+v", h)
	}
	tr := e.only(t)
	var miss *engine.Step
	for i := range tr.Steps {
		if !tr.Steps[i].OK {
			miss = &tr.Steps[i]
			break
		}
	}
	if miss == nil || miss.ErrorKind != engine.KindNoElement || miss.Selector != "#old-pulls-link" {
		t.Fatalf("trace steps: %+v", tr.Steps)
	}
	// Were the run a failure, the drift is what it would be classified as.
	failed := *tr
	failed.Outcome = engine.Failure
	if c := engine.Classify(&failed); c != engine.SelectorDrift {
		t.Fatalf("classified %s, want selector_drift", c)
	}
}

func TestRouteParametersBindFromTheTaskNeverFromLastRun(t *testing.T) {
	e := newEnv()
	ctx := context.Background()
	intent := "search the site"
	cold := &scriptPlanner{acts: []Action{
		{Tool: "type", Selector: "#q", Value: "memory", Submit: true},
		{Tool: "extract", Value: "matches"},
		{Tool: "done", Value: "5"},
	}}
	cfg := e.cfg(`search for "memory"`, cold)
	cfg.Intent = intent
	if res, err := Run(ctx, cfg); err != nil || !res.Success {
		t.Fatalf("cold: %v %+v", err, res)
	}
	tr := e.only(t)
	if tr.Steps[1].Action != "type" || tr.Steps[1].Param != "quote1" || tr.Steps[2].Action != "press" {
		t.Fatalf("typed step not recorded as a parameter: %+v", tr.Steps)
	}
	cfg = e.cfg(`search for "drift"`, noPlanner{t})
	cfg.Intent = intent
	res, err := Run(ctx, cfg)
	if err != nil || !res.Success || res.PlannerCalls != 0 {
		t.Fatalf("warm: %v %+v", err, res)
	}
	e.site.mu.Lock()
	last := e.site.typed[len(e.site.typed)-1]
	e.site.mu.Unlock()
	if last != "drift" {
		t.Fatalf("warm run typed %q, want this run's %q", last, "drift")
	}

	// Verified, but the parameter cannot be bound: not P1.
	e2 := newEnv()
	e2.verify(t, intent, []engine.Step{
		{Action: "type", Selector: "#q", Param: "quote1", Value: "memory", OK: true},
		{Action: "press", Selector: "#q", Value: "Enter", OK: true},
		{Action: "extract", Value: "matches", OK: true},
	})
	p := &scriptPlanner{acts: []Action{{Tool: "type", Selector: "#q", Value: "x y", Submit: true}, {Tool: "extract", Value: "matches"}, {Tool: "done", Value: "5"}}}
	cfg = e2.cfg("search the site for anything", p)
	cfg.Intent = intent
	res, err = Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.RecallTier != engine.P1 || res.Tier != engine.P2 || p.calls == 0 || !res.Success {
		t.Fatalf("unbound P1: %+v\n%s", res, strings.Join(res.ActionLog, "\n"))
	}
	for _, v := range e2.site.typed {
		if v == "memory" {
			t.Fatal("typed last run's parameter value")
		}
	}
}

func TestDepositOnPlannerError(t *testing.T) {
	e := newEnv()
	p := &scriptPlanner{onCall: func(n int) error { return errors.New("model unavailable") }}
	res, err := Run(context.Background(), e.cfg("count stars", p))
	if err == nil || !strings.Contains(err.Error(), "model unavailable") {
		t.Fatalf("err = %v", err)
	}
	if res == nil || res.Success || res.TracePath == "" {
		t.Fatalf("result: %+v", res)
	}
	tr := e.only(t)
	// The model failing is not the site's fault: planner_error, weight 0.
	if tr.Outcome != engine.Failure || !strings.Contains(tr.Error, "model unavailable") || tr.FailureCategory != engine.PlannerError {
		t.Fatalf("trace: outcome %s error %q category %s", tr.Outcome, tr.Error, tr.FailureCategory)
	}
	if e.br.opened != 1 || e.br.closed != 1 {
		t.Fatalf("pages opened %d closed %d", e.br.opened, e.br.closed)
	}
}

func TestDepositOnCancel(t *testing.T) {
	e := newEnv()
	ctx, cancel := context.WithCancel(context.Background())
	p := &scriptPlanner{acts: []Action{{Tool: "click", Selector: "#nav-issues"}, {Tool: "click", Selector: "#issue-1"}}}
	p.onCall = func(n int) error {
		if n == 2 {
			cancel() // Ctrl-C while the planner thinks
			return ctx.Err()
		}
		return nil
	}
	res, err := Run(ctx, e.cfg("author of the first issue", p))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if res == nil || res.TracePath == "" {
		t.Fatalf("no trace deposited after cancel: %+v", res)
	}
	tr := e.only(t)
	// Cancelled by the user: aborted, weight 0.
	if tr.Outcome != engine.Failure || len(tr.Steps) != 2 || !strings.Contains(tr.Error, "cancel") || tr.FailureCategory != engine.Aborted {
		t.Fatalf("trace after cancel: outcome %s steps %d error %q category %s", tr.Outcome, len(tr.Steps), tr.Error, tr.FailureCategory)
	}
}

// The turn limit reached with no failing step is aborted too; a run served
// memory records the facts revision it used.
func TestTurnLimitAbortedAndFactsRevision(t *testing.T) {
	e := newEnv()
	ctx := context.Background()
	p := &scriptPlanner{acts: []Action{{Tool: "click", Selector: "#nav-issues"}, {Tool: "click", Selector: "#nav-issues"}, {Tool: "click", Selector: "#nav-issues"}}}
	cfg := e.cfg("how many open issues", p)
	cfg.MaxTurns = 2
	res, err := Run(ctx, cfg)
	if err != nil || res.Success {
		t.Fatalf("%v %+v", err, res)
	}
	if tr := e.only(t); tr.FailureCategory != engine.Aborted {
		t.Fatalf("turn limit: category %s", tr.FailureCategory)
	}
	// A facts entry (a lesson) gives the recall a revision; the next run
	// writes it into its trace.
	save, err := e.eng.Save(ctx, engine.SaveRequest{URL: fakeBase + "/", Intent: "how many open issues",
		Facts: &engine.Patch{InteractionHints: []string{"the count is in the header"}}})
	if err != nil || !save.Lesson {
		t.Fatalf("lesson: %+v %v", save, err)
	}
	f, _ := e.store.Facts(ctx, "fake.test", engine.IntentKey("how many open issues"))
	run := &scriptPlanner{acts: []Action{{Tool: "click", Selector: "#nav-issues"}, {Tool: "extract", Value: "open issues"}, {Tool: "done", Value: "7"}}}
	if _, err := Run(ctx, e.cfg("how many open issues", run)); err != nil {
		t.Fatal(err)
	}
	if tr := e.only(t); f == nil || f.Revision == "" || tr.FactsRevision != f.Revision {
		t.Fatalf("facts_revision %q, want the served revision %q", tr.FactsRevision, f.Revision)
	}
}

func TestDepositOnStartPageError(t *testing.T) {
	e := newEnv()
	cfg := e.cfg("anything", noPlanner{t})
	cfg.StartURL = "http://fake.test:8080/nowhere"
	res, err := Run(context.Background(), cfg)
	if err == nil || res == nil || res.TracePath == "" {
		t.Fatalf("err %v res %+v", err, res)
	}
	tr := e.only(t)
	if tr.Outcome != engine.Failure || tr.FailureCategory != engine.Network {
		t.Fatalf("outcome %s category %s, want failure network", tr.Outcome, tr.FailureCategory)
	}
}

func TestAnswerNotReadOnThePageIsNoSuccess(t *testing.T) {
	e := newEnv()
	p := &scriptPlanner{acts: []Action{{Tool: "done", Value: "1234"}}} // e.g. last round's number
	res, err := Run(context.Background(), e.cfg("how many stars", p))
	if err != nil {
		t.Fatal(err)
	}
	if res.Success || res.Answer != "1234" {
		t.Fatalf("%+v", res)
	}
	if tr := e.only(t); tr.Outcome != engine.Failure {
		t.Fatalf("outcome %s", tr.Outcome)
	}
	p = &scriptPlanner{acts: []Action{{Tool: "done", Value: "42 stars"}}}
	if res, _ := Run(context.Background(), e.cfg("how many stars", p)); !res.Success {
		t.Fatalf("an answer read in the observation must count: %+v", res)
	}
}

// A password nobody declared, typed into a password field and submitted with
// Enter: the action log redacts it as the trace does (the Enter step that
// follows is not what decides).
func TestUndeclaredPasswordRedactedInActionLog(t *testing.T) {
	e := newEnv()
	const value = "undeclared-canary-8086"
	p := &scriptPlanner{acts: []Action{
		{Tool: "click", Selector: "#nav-login"},
		{Tool: "type", Selector: "#pw", Value: value, Submit: true},
		{Tool: "done"},
	}}
	res, err := Run(context.Background(), e.cfg("sign in as demo", p))
	if err != nil {
		t.Fatal(err)
	}
	log := strings.Join(res.ActionLog, "\n")
	if strings.Contains(log, value) {
		t.Fatalf("the action log holds the undeclared password:\n%s", log)
	}
	if !strings.Contains(log, "type #pw "+engine.Redacted+" +Enter") {
		t.Fatalf("the action log does not show the redacted typing:\n%s", log)
	}
	if tr := e.only(t); strings.Contains(fmt.Sprintf("%+v", *tr), value) {
		t.Fatalf("the trace holds the password: %+v", tr.Steps)
	}
}

func TestSecretsAreTypedAndNowhereElse(t *testing.T) {
	e := newEnv()
	const value = "hunter2-canary-5150"
	p := &scriptPlanner{acts: []Action{
		{Tool: "click", Selector: "#nav-login"},
		{Tool: "type", Selector: "#user", Value: "demo"},
		{Tool: "type", Selector: "#pw", Value: "{{secret:pw}}", Submit: true},
		{Tool: "type", Selector: "#user", Value: value}, // a planner misbehaving: typed as a literal
		{Tool: "done"},
	}}
	cfg := e.cfg("sign in as demo with {{secret:pw}}", p)
	cfg.Secrets = map[string]string{"pw": value}
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.site.mu.Lock()
	typed := strings.Join(e.site.typed, "|")
	e.site.mu.Unlock()
	if !strings.Contains(typed, value) {
		t.Fatalf("the secret was not typed into the page: %q", typed)
	}
	for _, s := range p.states {
		if strings.Contains(fmt.Sprintf("%+v", *s), value) {
			t.Fatal("the planner saw the secret's value")
		}
		if len(s.SecretNames) != 1 || s.SecretNames[0] != "pw" {
			t.Fatalf("secret names %v", s.SecretNames)
		}
	}
	if strings.Contains(fmt.Sprintf("%+v", *res), value) {
		t.Fatal("the run result holds the secret's value")
	}
	tr := e.only(t)
	if strings.Contains(fmt.Sprintf("%+v", *tr), value) {
		t.Fatalf("the trace holds the secret's value: %+v", tr.Steps)
	}
	if tr.Steps[3].Value != "{{secret:pw}}" || tr.Steps[5].Value != "{{secret:pw}}" {
		t.Fatalf("typed secrets not recorded as placeholders: %+v", tr.Steps)
	}
	if e.eng.Secrets != nil {
		t.Fatal("Run mutated the shared engine's secrets")
	}
}

func TestUndeclaredSecretIsRefused(t *testing.T) {
	e := newEnv()
	_, err := Run(context.Background(), e.cfg("log in with {{secret:missing}}", noPlanner{t}))
	if !errors.Is(err, ErrSecret) || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("err = %v", err)
	}
}

func TestRunAllParallel(t *testing.T) {
	e := newEnv()
	var jobs []*Job
	for i := 0; i < 6; i++ {
		p := &scriptPlanner{acts: []Action{{Tool: "extract", Value: "stars"}, {Tool: "done", Value: "42"}}}
		cfg := e.cfg(fmt.Sprintf("how many stars, variant %d", i), p)
		jobs = append(jobs, &Job{Config: cfg})
	}
	RunAll(context.Background(), jobs, 3)
	ids := map[string]bool{}
	for i, j := range jobs {
		if j.Err != nil || !j.Result.Success {
			t.Fatalf("job %d: %v %+v", i, j.Err, j.Result)
		}
		ids[j.Result.TraceID] = true
	}
	// At most one tab per parallel run, each reused by the next job, and
	// all closed at the end.
	if len(ids) != 6 || len(e.store.Traces()) != 6 || e.br.opened < 1 || e.br.opened > 3 || e.br.closed != e.br.opened {
		t.Fatalf("ids %d traces %d opened %d closed %d", len(ids), len(e.store.Traces()), e.br.opened, e.br.closed)
	}
}

func TestTurnLimit(t *testing.T) {
	e := newEnv()
	var acts []Action
	for i := 0; i < 20; i++ {
		acts = append(acts, Action{Tool: "scroll"})
	}
	p := &scriptPlanner{acts: acts}
	cfg := e.cfg("scroll forever", p)
	cfg.MaxTurns = 5
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Success || res.Steps != 5 || !strings.Contains(res.Error, "5 turns") {
		t.Fatalf("%+v", res)
	}
}

func TestSecretsParsing(t *testing.T) {
	env := map[string]string{"PW_ENV": "s3cret-value"}
	got, err := SecretsFromEnv([]string{"pw=PW_ENV"}, func(k string) string { return env[k] })
	if err != nil || got["pw"] != "s3cret-value" {
		t.Fatalf("%v %v", got, err)
	}
	if _, err := SecretsFromEnv([]string{"pw=NOPE"}, func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "NOPE") {
		t.Fatalf("missing env: %v", err)
	}
	if _, err := SecretsFromEnv([]string{"pw"}, func(string) string { return "" }); err == nil {
		t.Fatal("a spec without = must fail")
	}
	m, err := ParseSecrets([]byte("# comment\n\na=one-value\nb = two=with=equals\n"))
	if err != nil || m["a"] != "one-value" || m["b"] != " two=with=equals" {
		t.Fatalf("%q %v", m, err)
	}
	if _, err := ParseSecrets([]byte("novalue\n")); err == nil || strings.Contains(err.Error(), "novalue") {
		t.Fatalf("bad line must fail without echoing it: %v", err)
	}
	s, err := ResolveSecrets("x {{secret:a}} y", map[string]string{"a": "v"})
	if err != nil || s != "x v y" {
		t.Fatal(s, err)
	}
	if got := Scrub("the v4lue and v4lue-long", map[string]string{"a": "v4lue", "b": "v4lue-long"}); got != "the {{secret:a}} and {{secret:b}}" {
		t.Fatal(got)
	}
	if got := TaskParams(`search issues for "memory" then 'drift now'`); got["quote1"] != "memory" || got["quote2"] != "drift now" {
		t.Fatal(got)
	}
}
