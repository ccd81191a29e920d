package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/pemdev/pem/engine"
)

// Approval of sensitive actions (DESIGN §7; the rule is engine/approval.go).
// Before every step it takes — planned or replayed (P1/P2 alike) — the run
// asks the tree's approval policy whether the step needs a person's yes; if
// it does, the run asks RunConfig.Approver and takes the step only on a yes.
// A refusal, an approver that cannot ask, or no approver at all stops the
// run before the step: the run fails with approval_required (weight 0: the
// site is not to blame) and returns an *ApprovalError. Every decision is
// recorded in the trace (Trace.Approvals).

// Approver asks a person whether a sensitive step may be taken.
//
// Approve returns true to take the step and false to refuse it. An error
// means nobody could be asked (no terminal, --no-input, an MCP client
// without elicitation): the step is not taken, and the error's text is
// recorded as why. Approve must honour ctx; a cancelled ctx cancels the run.
// One Approver may serve several runs at once.
type Approver interface {
	Approve(ctx context.Context, req ApprovalRequest) (bool, error)
}

// ApproverFunc adapts a function to Approver.
type ApproverFunc func(ctx context.Context, req ApprovalRequest) (bool, error)

// Approve calls f.
func (f ApproverFunc) Approve(ctx context.Context, req ApprovalRequest) (bool, error) {
	return f(ctx, req)
}

// ApprovalRequest is a sensitive step a run is about to take. Its texts are
// scrubbed of the run's secrets; a typed value is shown as its placeholder.
type ApprovalRequest struct {
	RunID string `json:"run_id,omitempty"`
	Task  string `json:"task"`
	// Step is the seq the step will have in the trace.
	Step     int    `json:"step"`
	Action   string `json:"action"`
	Selector string `json:"selector,omitempty"`
	// Text is the target's visible text; Value what a type step types
	// (secrets as {{secret:NAME}}, a password field's value redacted).
	Text  string `json:"text,omitempty"`
	Value string `json:"value,omitempty"`
	// URL is the page the step acts on (for navigate: the target).
	URL string `json:"url,omitempty"`
	// Rule is the approval rule that matched, Why the matching part.
	Rule     string      `json:"rule"`
	Why      string      `json:"why"`
	Replayed bool        `json:"replayed,omitempty"`
	Tier     engine.Tier `json:"tier,omitempty"`
}

// Describe is the request in one line, for a prompt or an error message.
func (q ApprovalRequest) Describe() string {
	s := q.Action
	if q.Selector != "" {
		s += " " + q.Selector
	}
	if q.Text != "" {
		s += fmt.Sprintf(" (%q)", oneLine(q.Text, 80))
	}
	if q.Value != "" {
		s += fmt.Sprintf(" typing %q", oneLine(q.Value, 80))
	}
	if q.URL != "" {
		if q.Action == "navigate" {
			s += " to " + q.URL
		} else {
			s += " on " + q.URL
		}
	}
	mode := "planned"
	if q.Replayed {
		mode = "replayed from memory"
	}
	return fmt.Sprintf("step %d, %s: %s — rule %q: %s", q.Step, mode, s, q.Rule, q.Why)
}

// ErrApprovalRequired is wrapped by every *ApprovalError.
var ErrApprovalRequired = errors.New("approval required")

// ApprovalError is how a run that stopped before an unapproved step ends.
type ApprovalError struct {
	Request ApprovalRequest
	// Decision is engine.Refused or engine.Unanswered; Reason says who
	// refused or why nobody could be asked.
	Decision string
	Reason   string
}

func (e *ApprovalError) Error() string {
	what := "refused"
	if e.Decision == engine.Unanswered {
		what = "nobody could approve it"
	}
	run := ""
	if e.Request.RunID != "" {
		run = " (run " + e.Request.RunID + ")"
	}
	msg := fmt.Sprintf("approval required%s: %s: %s", run, e.Request.Describe(), what)
	if e.Reason != "" {
		msg += " (" + e.Reason + ")"
	}
	return msg
}

func (e *ApprovalError) Unwrap() error { return ErrApprovalRequired }

// loadApproval reads the tree's approval policy. A store without a tree
// has none; a pem.yaml that cannot be read stops the run (a safety policy
// is never skipped silently).
func (r *run) loadApproval(ctx context.Context) error {
	cfg, err := r.cfg.Engine.Store.Config(ctx)
	switch {
	case errors.Is(err, engine.ErrNoTree):
		return nil
	case err != nil:
		return fmt.Errorf("%w: reading the approval policy: %w", ErrConfig, err)
	}
	r.approval = cfg.Approval
	return nil
}

// approve asks the policy, then the approver, whether the step a may be
// taken. It returns nil to go ahead, or the *ApprovalError (or the
// cancellation) that stops the run.
func (r *run) approve(ctx context.Context, a Action, resolvedURL string, replayed bool) error {
	req, ok := r.approvalRequest(ctx, a, resolvedURL, replayed)
	if !ok {
		return nil
	}
	sec := r.cfg.Secrets
	rec := engine.Approval{Step: req.Step, Action: req.Action, Selector: req.Selector, URL: req.URL,
		Rule: req.Rule, Why: req.Why, Replayed: replayed}
	var granted bool
	var err error
	if r.cfg.Approver == nil {
		err = errors.New("no approver: nobody to ask in this run")
	} else {
		granted, err = r.cfg.Approver.Approve(ctx, req)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("run cancelled while asking for approval: %w", ctx.Err())
	}
	switch {
	case err != nil:
		rec.Decision, rec.Note = engine.Unanswered, Scrub(err.Error(), sec)
	case granted:
		rec.Decision = engine.Approved
	default:
		rec.Decision = engine.Refused
	}
	if rec.Note == "" && r.cfg.Approver != nil {
		if n, ok := r.cfg.Approver.(interface{ Name() string }); ok {
			rec.Note = n.Name()
		}
	}
	r.approvals = append(r.approvals, rec)
	r.logf("[%s] approval %s: %s", r.res.Tier, rec.Decision, req.Describe())
	if rec.Decision == engine.Approved {
		return nil
	}
	r.blocked = &req
	return &ApprovalError{Request: req, Decision: rec.Decision, Reason: rec.Note}
}

// approvalRequest is the request for a step the policy marks (ok true),
// without asking anyone.
func (r *run) approvalRequest(ctx context.Context, a Action, resolvedURL string, replayed bool) (ApprovalRequest, bool) {
	if len(r.approval) == 0 {
		return ApprovalRequest{}, false
	}
	st := engine.ApprovalStep{Action: a.Tool, Selector: a.Selector}
	if a.Tool == "navigate" {
		st.URL = resolvedURL
	} else if r.page != nil {
		st.URL = r.page.URL()
	}
	if a.Selector != "" && (a.Tool == "click" || a.Tool == "type" || a.Tool == "press") {
		st.Text = r.targetText(ctx, a.Selector, replayed)
	}
	m, ok := r.approval.Match(st)
	if !ok && a.Tool == "type" && a.Submit {
		// Typing then Enter is a press too.
		st.Action = "press"
		m, ok = r.approval.Match(st)
		st.Action = "type"
	}
	if !ok {
		return ApprovalRequest{}, false
	}
	sec := r.cfg.Secrets
	req := ApprovalRequest{
		RunID: r.cfg.RunID, Task: Scrub(r.cfg.Task, sec), Step: len(r.steps) + 1, Action: a.Tool,
		Selector: Scrub(a.Selector, sec), Text: Scrub(st.Text, sec), URL: Scrub(st.URL, sec),
		Rule: m.Rule, Why: Scrub(m.Why, sec), Replayed: replayed, Tier: r.res.Tier,
	}
	if a.Tool == "type" {
		req.Value = Scrub(a.Value, sec)
		if r.isPasswordField(a.Selector) && len(SecretNamesIn(a.Value)) == 0 {
			req.Value = engine.Redacted
		}
	}
	return req, true
}

// targetText is the visible text of the control selector finds: from the
// last observation (planned steps), else described live (replays), else
// the first element the selector lists.
func (r *run) targetText(ctx context.Context, selector string, replayed bool) string {
	if fp := r.target(ctx, selector, !replayed); fp != nil && fp.Name != "" {
		return fp.Name
	}
	els, err := r.page.Elements(ctx, selector, 1)
	if err != nil || len(els) == 0 {
		return ""
	}
	e := els[0]
	return strings.TrimSpace(firstNonEmpty(e.Label, e.Text, e.Placeholder, e.Name))
}
