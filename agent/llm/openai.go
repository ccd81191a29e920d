package llm

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/pemdev/pem/agent"
)

// OpenAI plans with an OpenAI-compatible chat completions endpoint
// (POST {base}/chat/completions with tools): OpenAI, vLLM, Ollama, LM Studio.
type OpenAI struct{ cfg Config }

var _ agent.Planner = (*OpenAI)(nil)

// NewOpenAI returns an OpenAI-compatible planner. Model and key are only
// needed by the first call (Next says which variable to set); the key may
// stay empty for local servers.
func NewOpenAI(cfg Config) (*OpenAI, error) {
	cfg, err := configure(cfg, openaiProvider)
	if err != nil {
		return nil, err
	}
	return &OpenAI{cfg: cfg}, nil
}

// Name implements agent.Planner.
func (p *OpenAI) Name() string { return "openai" }

type oaMessage struct {
	Role string `json:"role"`
	// Content is a string, or content parts (text and images) in requests.
	Content    any          `json:"content"`
	ToolCalls  []oaToolCall `json:"tool_calls,omitempty"`
	ToolCallID string       `json:"tool_call_id,omitempty"`
}

type oaToolCall struct {
	ID       string `json:"id,omitempty"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type oaResponse struct {
	Choices []struct {
		Message      oaMessage `json:"message"`
		FinishReason string    `json:"finish_reason"`
	} `json:"choices"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
	// Usage is what the server says the call cost (absent on some local
	// servers: then nothing is counted).
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

// Next implements agent.Planner: one chat completion, one tool call; the
// usage fields of every reply (prompt_tokens, completion_tokens) are added
// to s.Usage. A
// reply with malformed tool arguments or an unknown tool goes back to the
// model as an error result, and a reply in prose with a reminder to call a
// tool, at most MaxRepairs times; prose is never taken as the answer.
func (p *OpenAI) Next(ctx context.Context, s *agent.State) (agent.Action, error) {
	if err := p.cfg.ready(); err != nil {
		return agent.Action{}, err
	}
	var defs []map[string]any
	for _, t := range tools {
		defs = append(defs, map[string]any{"type": "function", "function": map[string]any{
			"name": t.Name, "description": t.Description, "parameters": t.schema()}})
	}
	var user any = userPrompt(s)
	if img := p.cfg.image(s); img != nil {
		user = []map[string]any{{"type": "text", "text": userPrompt(s)},
			{"type": "image_url", "image_url": map[string]any{"url": "data:" + img.mime + ";base64," + img.data}}}
	}
	msgs := []oaMessage{{Role: "system", Content: systemPrompt}, {Role: "user", Content: user}}
	headers := map[string]string{}
	if p.cfg.APIKey != "" {
		headers["Authorization"] = "Bearer " + p.cfg.APIKey
	}
	url := p.cfg.BaseURL + "/chat/completions"
	for attempt := 0; ; attempt++ {
		body := map[string]any{"model": p.cfg.Model, "messages": msgs, "tools": defs, "tool_choice": "required"}
		if p.cfg.Temperature != nil {
			body["temperature"] = *p.cfg.Temperature
		}
		var resp oaResponse
		if err := post(ctx, &p.cfg, url, headers, body, &resp); err != nil {
			return agent.Action{}, err
		}
		s.Usage.InputTokens += resp.Usage.PromptTokens
		s.Usage.OutputTokens += resp.Usage.CompletionTokens
		if resp.Error != nil {
			return agent.Action{}, fmt.Errorf("%w: %s: %s", ErrAPI, url, resp.Error.Message)
		}
		if len(resp.Choices) == 0 {
			return agent.Action{}, fmt.Errorf("%w: malformed answer from %s: no choices", ErrAPI, url)
		}
		msg := resp.Choices[0].Message
		if len(msg.ToolCalls) == 0 {
			// Some servers ignore tool_choice and answer in prose: remind,
			// then give up. Prose is no answer read on the page.
			if attempt < MaxRepairs {
				prose, _ := msg.Content.(string)
				msgs = append(msgs, oaMessage{Role: "assistant", Content: prose}, oaMessage{Role: "user", Content: noToolCall})
				continue
			}
			return agent.Action{Tool: "done"}, nil
		}
		tc := msg.ToolCalls[0]
		a, err := toAction(tc.Function.Name, json.RawMessage(tc.Function.Arguments))
		if err != nil && attempt < MaxRepairs {
			id := tc.ID
			if id == "" {
				id = fmt.Sprintf("call_%d", attempt)
			}
			tc.ID = id
			msgs = append(msgs, oaMessage{Role: "assistant", Content: "", ToolCalls: []oaToolCall{tc}},
				oaMessage{Role: "tool", ToolCallID: id, Content: "error: " + err.Error() + " — call the tool again with valid arguments"})
			continue
		}
		return a, err
	}
}
