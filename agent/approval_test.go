package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/pemdev/pem/engine"
)

// recordingApprover answers with its decision and remembers what it was asked.
type recordingApprover struct {
	mu     sync.Mutex
	answer bool
	err    error
	asked  []ApprovalRequest
}

func (a *recordingApprover) Approve(ctx context.Context, req ApprovalRequest) (bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asked = append(a.asked, req)
	return a.answer, a.err
}

func (a *recordingApprover) Name() string { return "test approver" }

// shopEnv is the fake site with a shop page whose "Buy now" button a policy
// marks, and a tree whose pem.yaml asks before payments.
func shopEnv() *env {
	e := newEnv()
	e.site.pages["/shop"] = &sitePage{title: "Shop",
		els: []siteEl{
			{Element: Element{Selector: "#buy", Tag: "button", Text: "Buy now"}, to: "/bought"},
			{Element: Element{Selector: "#help", Tag: "a", Text: "Buyer help"}, to: "/issues"},
		},
		labels: []LabelValue{{Label: "Price", Value: "12 EUR", Selector: "#price"}},
	}
	e.site.pages["/bought"] = &sitePage{title: "Thanks", labels: []LabelValue{{Label: "Order number", Value: "A-77", Selector: "#order"}}}
	c, _ := e.store.Config(context.Background())
	c.Approval = engine.ApprovalPolicy{{Name: "payment", Actions: []string{"click", "press"}, Text: []string{"buy", "pay"}}}
	e.store.SetConfig(c)
	return e
}

// verifyAt is env.verify for a route that starts at path.
func (e *env) verifyAt(t *testing.T, path, intent string, steps []engine.Step) {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < 6; i++ {
		in := &engine.TraceInput{Steps: []engine.StepInput{{Action: "navigate", URL: fakeBase + path}}}
		if _, err := e.eng.Save(ctx, engine.SaveRequest{URL: fakeBase + path, Trace: in, Intent: intent, Session: fmt.Sprintf("s%d", i%2)}); err != nil {
			t.Fatal(err)
		}
	}
	f := &engine.Facts{Format: engine.Format, Domain: "fake.test", Intent: intent, IntentKey: engine.IntentKey(intent),
		Status: engine.Verified, URLPatterns: []string{path}, Steps: steps}
	if _, err := e.store.PutFacts(ctx, f); err != nil {
		t.Fatal(err)
	}
}

func buyPlanner() *scriptPlanner {
	return &scriptPlanner{acts: []Action{
		{Tool: "click", Selector: "#buy"},
		{Tool: "extract", Value: "order number"},
		{Tool: "done", Value: "A-77"},
	}}
}

func (e *env) shopCfg(task string, p Planner, a Approver) RunConfig {
	c := e.cfg(task, p)
	c.StartURL, c.Approver, c.RunID = fakeBase+"/shop", a, "run-1"
	return c
}

func TestApprovalStopsAPlannedClick(t *testing.T) {
	for _, tt := range []struct {
		name     string
		approver *recordingApprover // nil: no approver at all
		decision string
		note     string
	}{
		{"refused", &recordingApprover{answer: false}, engine.Refused, "test approver"},
		{"nobody to ask", nil, engine.Unanswered, "no approver"},
		{"approver cannot ask", &recordingApprover{err: errors.New("stdin is not a terminal")}, engine.Unanswered, "stdin is not a terminal"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := shopEnv()
			var a Approver
			if tt.approver != nil {
				a = tt.approver
			}
			res, err := Run(context.Background(), e.shopCfg("buy the widget", buyPlanner(), a))
			var ae *ApprovalError
			if !errors.As(err, &ae) || !errors.Is(err, ErrApprovalRequired) || ae.Decision != tt.decision {
				t.Fatalf("Run error %v, want an *ApprovalError (%s)", err, tt.decision)
			}
			if n := e.site.countCalls("click #buy"); n != 0 {
				t.Fatalf("the unapproved click was performed %d times", n)
			}
			if res.Success || res.FailureCategory != engine.ApprovalRequired || res.Blocked == nil || res.Blocked.Selector != "#buy" || res.Blocked.Rule != "payment" {
				t.Fatalf("result %+v", res)
			}
			if !strings.Contains(res.Error, "#buy") || !strings.Contains(res.Error, `"Buy now"`) || !strings.Contains(res.Error, `rule "payment"`) {
				t.Errorf("the error does not name the step: %s", res.Error)
			}
			tr := e.only(t)
			if tr.Outcome != engine.Failure || tr.FailureCategory != engine.ApprovalRequired || len(tr.Steps) != 1 {
				t.Fatalf("trace %s/%s with %d steps", tr.Outcome, tr.FailureCategory, len(tr.Steps))
			}
			if len(tr.Approvals) != 1 {
				t.Fatalf("trace approvals %+v", tr.Approvals)
			}
			ap := tr.Approvals[0]
			if ap.Decision != tt.decision || ap.Step != 2 || ap.Selector != "#buy" || ap.Rule != "payment" || ap.Replayed || !strings.Contains(ap.Note, tt.note) {
				t.Errorf("recorded approval %+v", ap)
			}
			if w := engine.DefaultPolicy().FailureWeight(tr.FailureCategory); w != 0 {
				t.Errorf("an unapproved run weighs %v against the route", w)
			}
		})
	}
}

func TestApprovalGrantedTakesTheStep(t *testing.T) {
	e := shopEnv()
	a := &recordingApprover{answer: true}
	res, err := Run(context.Background(), e.shopCfg("buy the widget", buyPlanner(), a))
	if err != nil || !res.Success || res.Answer != "A-77" {
		t.Fatalf("%+v, %v\n%s", res, err, strings.Join(res.ActionLog, "\n"))
	}
	if len(a.asked) != 1 {
		t.Fatalf("asked %d times, want once (only the buy click is sensitive): %+v", len(a.asked), a.asked)
	}
	q := a.asked[0]
	if q.Step != 2 || q.Action != "click" || q.Text != "Buy now" || q.URL != fakeBase+"/shop" || q.RunID != "run-1" || q.Replayed || !strings.Contains(q.Why, `"buy"`) {
		t.Errorf("request %+v", q)
	}
	if e.site.countCalls("click #buy") != 1 {
		t.Fatal("the approved click was not performed")
	}
	tr := e.only(t)
	if tr.Outcome != engine.Success || len(tr.Approvals) != 1 || tr.Approvals[0].Decision != engine.Approved || tr.Approvals[0].Step != 2 || tr.Steps[1].Selector != "#buy" {
		t.Fatalf("trace %s approvals %+v", tr.Outcome, tr.Approvals)
	}
}

// A remembered route never performs a sensitive step unapproved: P1 and
// P2 replays ask like the planner's steps do.
func TestApprovalStopsAReplayedClick(t *testing.T) {
	route := []engine.Step{
		{Seq: 1, Action: "navigate", URL: fakeBase + "/shop", OK: true},
		{Seq: 2, Action: "click", Selector: "#buy", OK: true, Target: &engine.Fingerprint{Tag: "button", Role: "button", Name: "Buy now"}},
		{Seq: 3, Action: "extract", Value: "order number", OK: true},
	}
	intent := "buy the widget"
	t.Run("P1 refused", func(t *testing.T) {
		e := shopEnv()
		e.verifyAt(t, "/shop", intent, route)
		a := &recordingApprover{answer: false}
		res, err := Run(context.Background(), e.shopCfg(intent, noPlanner{t}, a))
		if !errors.Is(err, ErrApprovalRequired) {
			t.Fatalf("err %v\n%s", err, strings.Join(res.ActionLog, "\n"))
		}
		if res.Tier != engine.P1 || res.PlannerCalls != 0 || e.site.countCalls("click #buy") != 0 {
			t.Fatalf("tier %s planner calls %d clicks %d", res.Tier, res.PlannerCalls, e.site.countCalls("click #buy"))
		}
		if len(a.asked) != 1 || !a.asked[0].Replayed || a.asked[0].Tier != engine.P1 || a.asked[0].Text != "Buy now" {
			t.Fatalf("asked %+v", a.asked)
		}
		tr := e.only(t)
		if tr.FailureCategory != engine.ApprovalRequired || len(tr.Approvals) != 1 || !tr.Approvals[0].Replayed || tr.Approvals[0].Decision != engine.Refused {
			t.Fatalf("trace %s approvals %+v", tr.FailureCategory, tr.Approvals)
		}
	})
	t.Run("P1 approved", func(t *testing.T) {
		e := shopEnv()
		e.verifyAt(t, "/shop", intent, route)
		a := &recordingApprover{answer: true}
		res, err := Run(context.Background(), e.shopCfg(intent, noPlanner{t}, a))
		if err != nil || !res.Success || res.Answer != "A-77" || res.PlannerCalls != 0 || res.Tier != engine.P1 {
			t.Fatalf("%+v, %v\n%s", res, err, strings.Join(res.ActionLog, "\n"))
		}
		if len(a.asked) != 1 || e.site.countCalls("click #buy") != 1 {
			t.Fatalf("asked %d, clicked %d", len(a.asked), e.site.countCalls("click #buy"))
		}
	})
	t.Run("P2 without approver", func(t *testing.T) {
		e := shopEnv()
		// One successful cold run (approved) earns P2 under newEnv's ladder.
		if _, err := Run(context.Background(), e.shopCfg(intent, buyPlanner(), &recordingApprover{answer: true})); err != nil {
			t.Fatal(err)
		}
		res, err := Run(context.Background(), e.shopCfg(intent, noPlanner{t}, nil))
		if !errors.Is(err, ErrApprovalRequired) || res.Tier != engine.P2 || res.PlannerCalls != 0 {
			t.Fatalf("tier %s planner calls %d err %v\n%s", res.Tier, res.PlannerCalls, err, strings.Join(res.ActionLog, "\n"))
		}
		if n := e.site.countCalls("click #buy"); n != 1 {
			t.Fatalf("click #buy performed %d times in all, want only the approved cold run's", n)
		}
	})
}

func TestApprovalCancelledWhileAskingIsAborted(t *testing.T) {
	e := shopEnv()
	ctx, cancel := context.WithCancel(context.Background())
	a := ApproverFunc(func(ctx context.Context, req ApprovalRequest) (bool, error) {
		cancel()
		<-ctx.Done()
		return false, ctx.Err()
	})
	res, err := Run(ctx, e.shopCfg("buy the widget", buyPlanner(), a))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	if tr := e.only(t); tr.FailureCategory != engine.Aborted || res.FailureCategory != engine.Aborted {
		t.Fatalf("trace %s result %s, want aborted", tr.FailureCategory, res.FailureCategory)
	}
	if e.site.countCalls("click #buy") != 0 {
		t.Fatal("clicked after a cancelled approval")
	}
}
