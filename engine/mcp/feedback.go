package mcp

import (
	"context"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pemdev/pem/engine"
)

// ToolFeedback records a verdict on a run.
const ToolFeedback = "experience_feedback"

func (s *server) feedbackTool() toolDef {
	return toolDef{
		tool: &sdk.Tool{
			Name:  ToolFeedback,
			Title: "Judge a saved run right or wrong",
			Description: `Records a human's or a grader's judgement of one saved run (the "id" experience_save returned): "right" (the answer was right: a confirmed success) or "wrong" (a judged_wrong failure that weighs 3 failures, contests a verified entry and caps it at P3 until a newer run is judged right or the route changes). The verdict is an immutable file beside the traces; consolidation folds it. The same verdict twice is recorded once; a judge contradicting its own earlier verdict, an unknown trace id, or a run that was only a lesson (no steps) is an error.

Returns: recorded (false when the same verdict was already there), trace, domain, intent_key, verdict, judge, path, message.`,
			InputSchema: objectSchema(map[string]any{
				"trace":   prop("string", "The trace id of the run, as experience_save returned it in \"id\"."),
				"verdict": map[string]any{"type": "string", "enum": []string{"right", "wrong"}, "description": "The judgement."},
				"note":    prop("string", "Why, in a few words."),
				"judge":   prop("string", "Who judges (default: the server's writer)."),
			}, "trace", "verdict"),
			Annotations: &sdk.ToolAnnotations{Title: "Judge a run", DestructiveHint: ptr(false), IdempotentHint: true, OpenWorldHint: ptr(false)},
		},
		args: []string{"trace", "verdict", "note", "judge"},
		run:  s.feedback,
	}
}

func (s *server) feedback(ctx context.Context, a *args) (any, error) {
	var req engine.FeedbackRequest
	var err error
	if req.Trace, err = a.str("trace"); err != nil {
		return nil, err
	}
	if req.Verdict, err = a.str("verdict"); err != nil {
		return nil, err
	}
	if req.Note, err = a.str("note"); err != nil {
		return nil, err
	}
	if req.Judge, err = a.str("judge"); err != nil {
		return nil, err
	}
	return s.eng.Feedback(ctx, req)
}
