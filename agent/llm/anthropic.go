package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/pemdev/pem/agent"
)

// AnthropicVersion is the API version header sent with every request.
const AnthropicVersion = "2023-06-01"

// Anthropic plans with the Anthropic Messages API and tool use.
type Anthropic struct{ cfg Config }

var _ agent.Planner = (*Anthropic)(nil)

// NewAnthropic returns an Anthropic planner. Model and API key are only
// needed by the first call (Next says which variable to set). A base URL
// ending in /v1 (a PEM_LLM_BASE_URL shared with the OpenAI planner) is the
// same API: requests go to {base}/v1/messages either way.
func NewAnthropic(cfg Config) (*Anthropic, error) {
	cfg, err := configure(cfg, anthropicProvider)
	if err != nil {
		return nil, err
	}
	cfg.BaseURL = strings.TrimSuffix(cfg.BaseURL, "/v1")
	return &Anthropic{cfg: cfg}, nil
}

// Name implements agent.Planner.
func (p *Anthropic) Name() string { return "anthropic" }

type anResponse struct {
	Type    string `json:"type"`
	Content []struct {
		Type  string          `json:"type"`
		ID    string          `json:"id"`
		Text  string          `json:"text"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	} `json:"content"`
	StopReason string `json:"stop_reason"`
	Usage      struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
	} `json:"usage"`
	Error *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// Next implements agent.Planner: one Messages call, one tool_use block; the
// usage fields of every reply (input_tokens, output_tokens) are added to
// s.Usage.
// Malformed tool input or an unknown tool goes back to the model as an
// error tool_result, prose as a reminder, at most MaxRepairs times; prose is
// never taken as the answer.
func (p *Anthropic) Next(ctx context.Context, s *agent.State) (agent.Action, error) {
	if err := p.cfg.ready(); err != nil {
		return agent.Action{}, err
	}
	var defs []map[string]any
	for _, t := range tools {
		defs = append(defs, map[string]any{"name": t.Name, "description": t.Description, "input_schema": t.schema()})
	}
	var user any = userPrompt(s)
	if img := p.cfg.image(s); img != nil {
		user = []map[string]any{{"type": "text", "text": userPrompt(s)},
			{"type": "image", "source": map[string]any{"type": "base64", "media_type": img.mime, "data": img.data}}}
	}
	msgs := []map[string]any{{"role": "user", "content": user}}
	headers := map[string]string{"x-api-key": p.cfg.APIKey, "anthropic-version": AnthropicVersion}
	url := p.cfg.BaseURL + "/v1/messages"
turns:
	for attempt := 0; ; attempt++ {
		body := map[string]any{
			"model": p.cfg.Model, "max_tokens": p.cfg.MaxTokens, "system": systemPrompt, "messages": msgs,
			"tools": defs, "tool_choice": map[string]any{"type": "any"},
		}
		if p.cfg.Temperature != nil {
			body["temperature"] = *p.cfg.Temperature
		}
		var resp anResponse
		if err := post(ctx, &p.cfg, url, headers, body, &resp); err != nil {
			return agent.Action{}, err
		}
		s.Usage.InputTokens += resp.Usage.InputTokens
		s.Usage.OutputTokens += resp.Usage.OutputTokens
		if resp.Error != nil {
			return agent.Action{}, fmt.Errorf("%w: %s: %s: %s", ErrAPI, url, resp.Error.Type, resp.Error.Message)
		}
		var text []string
		for _, c := range resp.Content {
			switch c.Type {
			case "tool_use":
				a, err := toAction(c.Name, c.Input)
				if err != nil && attempt < MaxRepairs {
					id := c.ID
					if id == "" {
						id = fmt.Sprintf("toolu_%d", attempt)
					}
					input := c.Input
					if !json.Valid(input) {
						input = json.RawMessage("{}")
					}
					msgs = append(msgs,
						map[string]any{"role": "assistant", "content": []map[string]any{{"type": "tool_use", "id": id, "name": c.Name, "input": input}}},
						map[string]any{"role": "user", "content": []map[string]any{{"type": "tool_result", "tool_use_id": id, "is_error": true,
							"content": "error: " + err.Error() + " — call the tool again with valid arguments"}}})
					continue turns
				}
				return a, err
			case "text":
				text = append(text, c.Text)
			}
		}
		if len(resp.Content) == 0 && len(text) == 0 && attempt >= MaxRepairs {
			return agent.Action{}, fmt.Errorf("%w: malformed answer from %s: no tool_use or text block", ErrAPI, url)
		}
		if attempt < MaxRepairs {
			prose := strings.TrimSpace(strings.Join(text, "\n"))
			if prose == "" {
				prose = "(no content)"
			}
			msgs = append(msgs, map[string]any{"role": "assistant", "content": prose}, map[string]any{"role": "user", "content": noToolCall})
			continue
		}
		return agent.Action{Tool: "done"}, nil // prose is no answer read on the page
	}
}
