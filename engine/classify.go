package engine

import (
	"strings"
)

// FailureCategory says why a run failed. It decides how much a failure weighs
// against the route (see Policy.FailureWeight) and whether it is a gate that
// becomes a blocker instead.
type FailureCategory string

const (
	AntiBot            FailureCategory = "anti_bot"
	AuthRequired       FailureCategory = "auth_required"
	PermissionDenied   FailureCategory = "permission_denied"
	OverlayBlocked     FailureCategory = "overlay_blocked"
	Network            FailureCategory = "network"
	SelectorDrift      FailureCategory = "selector_drift"
	VisualDrift        FailureCategory = "visual_drift"
	Timing             FailureCategory = "timing"
	LazyLoading        FailureCategory = "lazy_loading"
	ABExperiment       FailureCategory = "ab_experiment"
	UnexpectedRedirect FailureCategory = "unexpected_redirect"
	// UnverifiedAnswer: the run ended with an answer that failed the answer
	// checks (an echo of the task, read from an error page or another site,
	// not of the asked type). Set by the agent, never guessed from text.
	UnverifiedAnswer FailureCategory = "unverified_answer"
	// SuccessConditionFailed: a replay's end did not meet the route's
	// success condition (final page, where the answer sits, its type).
	SuccessConditionFailed FailureCategory = "success_condition_failed"
	Unknown                FailureCategory = "unknown"

	// Outcomes the site is not to blame for: weight 0 against the route.
	Aborted      FailureCategory = "aborted"       // cancelled by the user (Ctrl-C, SIGTERM, the turn limit with no page failure)
	PlannerError FailureCategory = "planner_error" // the planner's model failed
	// ApprovalRequired: the run stopped before a step the tree's approval
	// policy marks, because nobody said yes (refused, or nobody to ask).
	ApprovalRequired FailureCategory = "approval_required"
	// A run a verdict judged wrong (pem experience feedback): a heavy failure.
	JudgedWrong FailureCategory = "judged_wrong"
)

// FailureCategories lists every category, in documentation order.
var FailureCategories = []FailureCategory{AntiBot, AuthRequired, PermissionDenied, OverlayBlocked,
	Network, SelectorDrift, VisualDrift, Timing, LazyLoading, ABExperiment, UnexpectedRedirect,
	UnverifiedAnswer, SuccessConditionFailed, Unknown,
	Aborted, PlannerError, ApprovalRequired, JudgedWrong}

// Valid reports whether c is a known category.
func (c FailureCategory) Valid() bool {
	for _, x := range FailureCategories {
		if x == c {
			return true
		}
	}
	return false
}

// IsGate reports whether the category is the environment refusing the run
// (a captcha, a login wall, a 403): recorded as a blocker that caps the tier,
// never counted against the route.
func (c FailureCategory) IsGate() bool {
	return c == AntiBot || c == AuthRequired || c == PermissionDenied
}

// IsNoFault reports whether the category is a run the site is not to blame
// for: cancelled by the user, the planner's model failed, or a sensitive
// step was not approved. It weighs 0.
func (c FailureCategory) IsNoFault() bool {
	return c == Aborted || c == PlannerError || c == ApprovalRequired
}

// Error kinds a recorder may put in Step.ErrorKind: structured signals that
// classification trusts before any text.
const (
	KindNoElement  = "no_element"  // the selector matched nothing
	KindNotVisible = "not_visible" // matched, but hidden or covered
	KindTimeout    = "timeout"     // waited and gave up
	KindNetwork    = "network"     // DNS, connection refused/reset, TLS
	KindRedirect   = "redirect"    // landed on another URL than expected
	KindCaptcha    = "captcha"
	KindLogin      = "login"
	KindErrorPage  = "error_page" // an action landed on an error page (HTTP ≥ 400, a browser error page)
	// KindSuccessCondition: a replay's end failed the route's success condition.
	KindSuccessCondition = "success_condition"
)

// Classify decides the failure category of a failed trace. Structured signals
// come first — HTTP status, the failing step's error kind and action — and the
// error text last, matched on whole words so that an id containing "403" or the
// words "Timeout waiting for login" are not misread.
func Classify(t *Trace) FailureCategory {
	if t.Outcome != Failure {
		return ""
	}
	if t.FailureCategory.Valid() {
		return t.FailureCategory
	}
	status := t.HTTPStatus
	var failed *Step
	for i := range t.Steps {
		if !t.Steps[i].OK {
			failed = &t.Steps[i]
			if failed.HTTPStatus != 0 {
				status = failed.HTTPStatus
			}
			break
		}
	}
	switch {
	case status == 401 || status == 407:
		return AuthRequired
	case status == 403:
		return PermissionDenied
	case status == 429:
		return AntiBot
	case status >= 500 && status <= 599:
		return Network
	}
	if failed != nil {
		switch failed.ErrorKind {
		case KindCaptcha:
			return AntiBot
		case KindLogin:
			return AuthRequired
		case KindNetwork:
			return Network
		case KindRedirect:
			return UnexpectedRedirect
		case KindSuccessCondition:
			return SuccessConditionFailed
		case KindNotVisible:
			return OverlayBlocked
		case KindNoElement:
			if failed.Action == "navigate" {
				return Network
			}
			return SelectorDrift
		case KindTimeout:
			// A page load that timed out is the network; a wait for an element
			// or a condition ("waiting for login") is timing.
			if failed.Action == "navigate" {
				return Network
			}
			return Timing
		}
	}
	text := t.Error
	if failed != nil && failed.Error != "" {
		text = failed.Error + " " + text
	}
	return classifyText(text)
}

type textRule struct {
	re  *LazyRegexp
	cat FailureCategory
}

// The text rules are ordered: the first that matches wins. Gates need the words
// of a gate (a captcha, "access denied", an HTTP status spelled as a status), not
// a number that happens to appear inside an id, a URL or an attribute selector
// ("[data-code=403]" is no status).
var textRules = []textRule{
	{LazyRE(`\b(captcha|recaptcha|hcaptcha|are you a robot|bot detection|cloudflare challenge|unusual traffic)\b`), AntiBot},
	{LazyRE(`(?:^|[^\w\-\[])(status|http|code)[ :=]*429\b|\btoo many requests\b|\brate.?limit`), AntiBot},
	{LazyRE(`(?:^|[^\w\-\[])(status|http|code)[ :=]*40[17]\b|\bunauthori[sz]ed\b|\b(sign|log)[ -]?in required\b|\bauthentication required\b|\bredirected to (the )?(login|sign.?in)\b`), AuthRequired},
	{LazyRE(`(?:^|[^\w\-\[])(status|http|code)[ :=]*403\b|\bforbidden\b|\baccess denied\b|\bpermission denied\b`), PermissionDenied},
	{LazyRE(`\b(intercept|obscur|overlay|covered by|modal|cookie banner|not clickable)`), OverlayBlocked},
	{LazyRE(`\b(err_name_not_resolved|err_connection|connection (refused|reset)|no such host|dns|net::|tls handshake|network error)|(?:^|[^\w\-\[])(status|http|code)[ :=]*5\d\d\b`), Network},
	{LazyRE(`\b(lazy|infinite scroll|load more)\b`), LazyLoading},
	{LazyRE(`\b(redirect(ed)?)\b`), UnexpectedRedirect},
	{LazyRE(`\b(no (such )?element|not found|no node|did not match|matches nothing|selector)\b`), SelectorDrift},
	{LazyRE(`\b(timeout|timed out|deadline exceeded)\b`), Timing},
	{LazyRE(`\b(layout|visual|screenshot differs)\b`), VisualDrift},
	{LazyRE(`\b(a/b|experiment|variant)\b`), ABExperiment},
}

func classifyText(s string) FailureCategory {
	s = strings.ToLower(s)
	for _, r := range textRules {
		if r.re.MatchString(s) {
			return r.cat
		}
	}
	return Unknown
}
