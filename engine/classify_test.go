package engine_test

import (
	"testing"

	"github.com/pemdev/pem/engine"
)

func TestClassify(t *testing.T) {
	failStep := func(action, sel, kind, errText string, status int) []engine.Step {
		return []engine.Step{
			{Seq: 1, Action: "navigate", URL: "https://example.com/", OK: true},
			{Seq: 2, Action: action, Selector: sel, OK: false, ErrorKind: kind, Error: errText, HTTPStatus: status},
			{Seq: 3, Action: "click", Selector: "#later", OK: false, Error: "captcha"}, // only the first failure counts
		}
	}
	tests := []struct {
		name  string
		trace engine.Trace
		want  engine.FailureCategory
	}{
		// The traps.
		{"id containing 403 is not a 403", engine.Trace{Error: "no element matches #item-4031"}, engine.SelectorDrift},
		{"403 inside an id, no other words", engine.Trace{Error: "failed on #row-403"}, engine.Unknown},
		{"403 in a URL path", engine.Trace{Error: "timed out loading https://example.com/items/403"}, engine.Timing},
		{"Timeout waiting for login", engine.Trace{Error: "Timeout waiting for login"}, engine.Timing},
		{"timeout waiting for login as a step", engine.Trace{Steps: failStep("wait", "", engine.KindTimeout, "Timeout waiting for login", 0)}, engine.Timing},
		{"code 4031 is no 403", engine.Trace{Error: "error code 4031 while reading"}, engine.Unknown},
		{"403 in an attribute selector", engine.Trace{Error: "no element matches [data-code=403]"}, engine.SelectorDrift},
		{"status in an attribute selector", engine.Trace{Error: "no element matches div[status=401]"}, engine.SelectorDrift},
		{"500 in a data attribute", engine.Trace{Error: "no element matches #row[data-http=500]"}, engine.SelectorDrift},
		{"status at the start", engine.Trace{Error: "status 403"}, engine.PermissionDenied},

		// Structured signals first.
		{"trace status 401", engine.Trace{HTTPStatus: 401, Error: "no element matches #x"}, engine.AuthRequired},
		{"proxy auth 407", engine.Trace{HTTPStatus: 407}, engine.AuthRequired},
		{"trace status 403", engine.Trace{HTTPStatus: 403}, engine.PermissionDenied},
		{"trace status 429", engine.Trace{HTTPStatus: 429}, engine.AntiBot},
		{"trace status 500", engine.Trace{HTTPStatus: 500, Error: "captcha"}, engine.Network},
		{"trace status 503", engine.Trace{HTTPStatus: 503}, engine.Network},
		{"step status overrides trace status", engine.Trace{HTTPStatus: 500, Steps: failStep("navigate", "", "", "", 401)}, engine.AuthRequired},
		{"status beats error kind", engine.Trace{Steps: failStep("click", "#buy", engine.KindNoElement, "", 403)}, engine.PermissionDenied},
		{"kind captcha", engine.Trace{Steps: failStep("click", "#x", engine.KindCaptcha, "", 0)}, engine.AntiBot},
		{"kind login", engine.Trace{Steps: failStep("click", "#x", engine.KindLogin, "", 0)}, engine.AuthRequired},
		{"kind network", engine.Trace{Steps: failStep("navigate", "", engine.KindNetwork, "", 0)}, engine.Network},
		{"kind redirect", engine.Trace{Steps: failStep("navigate", "", engine.KindRedirect, "", 0)}, engine.UnexpectedRedirect},
		{"kind not visible", engine.Trace{Steps: failStep("click", "#buy", engine.KindNotVisible, "", 0)}, engine.OverlayBlocked},
		{"kind no element on click", engine.Trace{Steps: failStep("click", "#buy", engine.KindNoElement, "captcha", 0)}, engine.SelectorDrift},
		{"kind no element on navigate", engine.Trace{Steps: failStep("navigate", "", engine.KindNoElement, "", 0)}, engine.Network},
		{"kind timeout on element", engine.Trace{Steps: failStep("get_text", "#stars", engine.KindTimeout, "", 0)}, engine.Timing},
		{"kind timeout on navigate", engine.Trace{Steps: failStep("navigate", "", engine.KindTimeout, "", 0)}, engine.Network},
		{"kind beats text", engine.Trace{Error: "access denied", Steps: failStep("click", "#x", engine.KindNoElement, "", 0)}, engine.SelectorDrift},
		{"declared category wins", engine.Trace{FailureCategory: engine.LazyLoading, HTTPStatus: 403}, engine.LazyLoading},
		{"invalid declared category ignored", engine.Trace{FailureCategory: "bogus", HTTPStatus: 403}, engine.PermissionDenied},

		// Text last.
		{"captcha text", engine.Trace{Error: "Blocked by reCAPTCHA challenge"}, engine.AntiBot},
		{"are you a robot", engine.Trace{Error: "Page says: Are you a robot?"}, engine.AntiBot},
		{"too many requests", engine.Trace{Error: "429 Too Many Requests"}, engine.AntiBot},
		{"HTTP 401 text", engine.Trace{Error: "server answered HTTP 401"}, engine.AuthRequired},
		{"unauthorized", engine.Trace{Error: "Unauthorized"}, engine.AuthRequired},
		{"login required", engine.Trace{Error: "login required to view this page"}, engine.AuthRequired},
		{"redirected to login", engine.Trace{Error: "redirected to the login page"}, engine.AuthRequired},
		{"status 403 text", engine.Trace{Error: "status: 403"}, engine.PermissionDenied},
		{"forbidden", engine.Trace{Error: "403 Forbidden"}, engine.PermissionDenied},
		{"access denied", engine.Trace{Error: "Access Denied"}, engine.PermissionDenied},
		{"intercepted click", engine.Trace{Error: "element click intercepted: other element would receive the click"}, engine.OverlayBlocked},
		{"cookie banner", engine.Trace{Error: "a cookie banner covered the button"}, engine.OverlayBlocked},
		{"dns", engine.Trace{Error: "net::ERR_NAME_NOT_RESOLVED"}, engine.Network},
		{"connection refused", engine.Trace{Error: "dial tcp 127.0.0.1:1: connection refused"}, engine.Network},
		{"http 502 text", engine.Trace{Error: "HTTP 502 from upstream"}, engine.Network},
		{"lazy", engine.Trace{Error: "list is lazy loaded; items appear on scroll"}, engine.LazyLoading},
		{"redirect", engine.Trace{Error: "was redirected to /home"}, engine.UnexpectedRedirect},
		{"selector", engine.Trace{Error: "No element found for selector #stars"}, engine.SelectorDrift},
		{"timed out", engine.Trace{Error: "context deadline exceeded"}, engine.Timing},
		{"visual", engine.Trace{Error: "layout changed"}, engine.VisualDrift},
		{"experiment", engine.Trace{Error: "saw variant B of the page"}, engine.ABExperiment},
		{"nothing known", engine.Trace{Error: "something odd"}, engine.Unknown},
		{"no signal at all", engine.Trace{}, engine.Unknown},
		{"step text used", engine.Trace{Steps: failStep("click", "#x", "", "Forbidden", 0)}, engine.PermissionDenied},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := tt.trace
			tr.Outcome = engine.Failure
			if got := engine.Classify(&tr); got != tt.want {
				t.Errorf("Classify = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestClassifySuccessHasNoCategory(t *testing.T) {
	tr := engine.Trace{Outcome: engine.Success, HTTPStatus: 403, Error: "captcha"}
	if got := engine.Classify(&tr); got != "" {
		t.Errorf("Classify(success) = %q, want empty", got)
	}
}

func TestFailureCategories(t *testing.T) {
	seen := map[engine.FailureCategory]bool{}
	for _, c := range engine.FailureCategories {
		if !c.Valid() || seen[c] {
			t.Errorf("category %q invalid or listed twice", c)
		}
		seen[c] = true
	}
	if len(seen) != 18 || !seen[engine.UnverifiedAnswer] || !seen[engine.SuccessConditionFailed] || !seen[engine.ApprovalRequired] {
		t.Errorf("%d categories, want the 12 of DESIGN §3, unverified_answer and success_condition_failed, and aborted, planner_error, approval_required, judged_wrong", len(seen))
	}
	for _, c := range []engine.FailureCategory{engine.UnverifiedAnswer, engine.SuccessConditionFailed} {
		if w := engine.DefaultPolicy().FailureWeight(c); w != 1 {
			t.Errorf("%s weighs %v, want 1 (the route's fault)", c, w)
		}
	}
	for _, c := range []engine.FailureCategory{engine.Aborted, engine.PlannerError} {
		if !c.IsNoFault() || engine.DefaultPolicy().FailureWeight(c) != 0 {
			t.Errorf("%s: not a no-fault category of weight 0", c)
		}
	}
	if w := engine.DefaultPolicy().FailureWeight(engine.JudgedWrong); w != 3 {
		t.Errorf("judged_wrong weighs %v, want 3", w)
	}
	for _, c := range []engine.FailureCategory{"", "bogus", "Anti_Bot"} {
		if c.Valid() {
			t.Errorf("%q.Valid() = true", c)
		}
	}
	gates := map[engine.FailureCategory]bool{engine.AntiBot: true, engine.AuthRequired: true, engine.PermissionDenied: true}
	for _, c := range engine.FailureCategories {
		if c.IsGate() != gates[c] {
			t.Errorf("%q.IsGate() = %v", c, c.IsGate())
		}
	}
}
