package mcpbrowser

import (
	"context"
	"errors"
	"fmt"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pemdev/pem/agent"
	"github.com/pemdev/pem/engine"
)

// Approval of sensitive steps over MCP: the tree's policy decides which
// (engine/approval.go), the client's user is asked by elicitation.

// approvalFailed is the answer to a step the approval policy stopped.
func approvalFailed(tool string, ae *agent.ApprovalError, url string) *stepError {
	se := &stepError{kind: "approval_required", msg: tool + ": " + ae.Error(), url: url, step: ae.Request.Step}
	if ae.Decision == engine.Refused {
		se.hint = "The person asked said no: the step was not taken. Do not retry it; tell the user, or finish the task another way (or with browser_done, success false)."
	} else {
		se.hint = "pem's approval policy (approval: in pem.yaml) needs a person's yes for this step, and this client cannot ask one (no MCP elicitation). The step was not taken: ask the user to do it themselves, or to change the policy; do not retry it."
	}
	return se
}

// approvalInput is the id of the approval's input request.
const approvalInput = "approve"

// askApproval stops a call before a sensitive step: the answer asks the
// client to elicit its user's yes and call again.
type askApproval struct {
	params *sdk.ElicitParams
	state  string
}

func (*askApproval) Error() string { return "approval needed" }

// decide settles the approver's answer for req before the step is taken:
// the user's answer when this call brings it back, else a request to ask
// (when the client can elicit), else none (nobody could be asked: the
// step is recorded unanswered and not taken).
func (st *session) decide(req *agent.ApprovalRequest) error {
	state := fmt.Sprintf("pem-approval:%s:%d:%s:%s", st.id, req.Step, req.Action, req.Selector)
	if resp, ok := st.inputs[approvalInput].(*sdk.ElicitResult); ok && st.state == state {
		yes := false
		if resp.Action == "accept" {
			yes, _ = resp.Content["approve"].(bool)
		}
		st.decision = &yes
		return nil
	}
	if !elicits(st.ss) {
		return nil
	}
	return &askApproval{state: state, params: &sdk.ElicitParams{
		Message: "pem needs your approval before this browser step: " + req.Describe() + ". Take it?",
		RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{
			"approve": map[string]any{"type": "boolean", "title": "Take this step", "default": false},
		}, "required": []string{"approve"}},
	}}
}

func elicits(ss *sdk.ServerSession) bool {
	if ss == nil {
		return false
	}
	p := ss.InitializeParams()
	return p != nil && p.Capabilities != nil && p.Capabilities.Elicitation != nil
}

// approver gives the decision settled for the call in progress.
type approver struct{ st *session }

var errNoElicitation = errors.New("the MCP client cannot ask its user (it does not support elicitation)")

func (a approver) Approve(_ context.Context, _ agent.ApprovalRequest) (bool, error) {
	if a.st.decision == nil {
		return false, errNoElicitation
	}
	return *a.st.decision, nil
}

// Name is recorded with the decision in the trace.
func (approver) Name() string { return "mcp elicitation" }
