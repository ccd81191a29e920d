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

// NewAnthropic returns an Anthropic planner. Model and API key are required.
func NewAnthropic(cfg Config) (*Anthropic, error) {
	cfg = FromEnv(cfg, "ANTHROPIC_API_KEY")
	cfg.defaults("https://api.anthropic.com")
	if cfg.Model == "" {
		return nil, fmt.Errorf("planner anthropic: no model: set PEM_LLM_MODEL (e.g. claude-sonnet-4-5)")
	}
	if cfg.APIKey == "" {
		return nil, fmt.Errorf("planner anthropic: no API key: set PEM_LLM_API_KEY or ANTHROPIC_API_KEY")
	}
	return &Anthropic{cfg: cfg}, nil
}

// Name implements agent.Planner.
func (p *Anthropic) Name() string { return "anthropic" }

type anResponse struct {
	Type    string `json:"type"`
	Content []struct {
		Type  string          `json:"type"`
		Text  string          `json:"text"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	} `json:"content"`
	StopReason string `json:"stop_reason"`
	Error      *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// Next implements agent.Planner: one Messages call, one tool_use block.
func (p *Anthropic) Next(ctx context.Context, s *agent.State) (agent.Action, error) {
	var defs []map[string]any
	for _, t := range tools {
		defs = append(defs, map[string]any{"name": t.Name, "description": t.Description, "input_schema": t.schema()})
	}
	body := map[string]any{
		"model":       p.cfg.Model,
		"max_tokens":  p.cfg.MaxTokens,
		"system":      systemPrompt,
		"messages":    []map[string]any{{"role": "user", "content": userPrompt(s)}},
		"tools":       defs,
		"tool_choice": map[string]any{"type": "any"},
		"temperature": 0,
	}
	headers := map[string]string{"x-api-key": p.cfg.APIKey, "anthropic-version": AnthropicVersion}
	url := p.cfg.BaseURL + "/v1/messages"
	var resp anResponse
	if err := post(ctx, &p.cfg, url, headers, body, &resp); err != nil {
		return agent.Action{}, err
	}
	if resp.Error != nil {
		return agent.Action{}, fmt.Errorf("%w: %s: %s: %s", ErrAPI, url, resp.Error.Type, resp.Error.Message)
	}
	var text []string
	for _, c := range resp.Content {
		switch c.Type {
		case "tool_use":
			return toAction(c.Name, c.Input)
		case "text":
			text = append(text, c.Text)
		}
	}
	if t := strings.TrimSpace(strings.Join(text, "\n")); t != "" {
		return agent.Action{Tool: "done", Value: t}, nil
	}
	return agent.Action{}, fmt.Errorf("%w: malformed answer from %s: no tool_use or text block", ErrAPI, url)
}
