package llm

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pemdev/pem/agent"
	"github.com/pemdev/pem/engine"
)

// server is a fake model service: it answers each request with the next
// scripted reply and records what it was sent.
type server struct {
	t       *testing.T
	mu      sync.Mutex
	replies []reply
	bodies  []map[string]any
	headers []http.Header
	paths   []string
}

type reply struct {
	status int
	header map[string]string
	body   string
	stall  time.Duration
}

func newServer(t *testing.T, replies ...reply) (*server, *httptest.Server) {
	s := &server{t: t, replies: replies}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		var body map[string]any
		if err := json.Unmarshal(data, &body); err != nil {
			t.Errorf("request body is not JSON: %v", err)
		}
		s.mu.Lock()
		s.bodies = append(s.bodies, body)
		s.headers = append(s.headers, r.Header.Clone())
		s.paths = append(s.paths, r.URL.Path)
		if len(s.replies) == 0 {
			s.mu.Unlock()
			t.Errorf("unexpected request %d to %s", len(s.bodies), r.URL.Path)
			w.WriteHeader(500)
			return
		}
		rp := s.replies[0]
		s.replies = s.replies[1:]
		s.mu.Unlock()
		if rp.stall > 0 {
			select {
			case <-time.After(rp.stall):
			case <-r.Context().Done():
				return
			}
		}
		for k, v := range rp.header {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rp.status)
		io.WriteString(w, rp.body)
	}))
	t.Cleanup(hs.Close)
	return s, hs
}

func (s *server) requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.bodies)
}

func state() *agent.State {
	return &agent.State{
		Task:        "sign in as demo with {{secret:demo_password}} and read the stars",
		Memory:      "## Memory\n- P3, confidence 0.50\n",
		Tier:        engine.P3,
		URL:         "http://127.0.0.1/acme/widgets",
		Observation: "URL: http://127.0.0.1/acme/widgets\nElements:\n  a#issues \"Issues 12\"\n",
		Turn:        1, MaxTurns: 25,
		SecretNames: []string{"demo_password"},
		History: []agent.Turn{{Action: agent.Action{Tool: "navigate", Value: "http://127.0.0.1/"},
			Result: agent.ToolResult{LongTermMemory: "opened the home page"}}},
	}
}

// recordSleep replaces real waiting, recording each wait.
type recordSleep struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (r *recordSleep) sleep(ctx context.Context, d time.Duration) error {
	r.mu.Lock()
	r.waits = append(r.waits, d)
	r.mu.Unlock()
	return ctx.Err()
}

const oaToolCallBody = `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"click","arguments":"{\"selector\":\"a#issues\"}"}}]}}]}`

const anToolUseBody = `{"id":"msg_1","type":"message","role":"assistant","model":"m","stop_reason":"tool_use","content":[{"type":"text","text":"I will open the issues."},{"type":"tool_use","id":"toolu_1","name":"type","input":{"selector":"#password","text":"{{secret:demo_password}}","submit":true}}]}`

func TestOpenAIToolCall(t *testing.T) {
	srv, hs := newServer(t, reply{status: 200, body: oaToolCallBody})
	p, err := NewOpenAI(Config{BaseURL: hs.URL + "/v1", Model: "m", APIKey: "k-123"})
	if err != nil {
		t.Fatal(err)
	}
	a, err := p.Next(context.Background(), state())
	if err != nil {
		t.Fatal(err)
	}
	if a.Tool != "click" || a.Selector != "a#issues" {
		t.Fatalf("action = %+v, want click a#issues", a)
	}
	body, h := srv.bodies[0], srv.headers[0]
	if got := h.Get("Authorization"); got != "Bearer k-123" {
		t.Errorf("Authorization = %q", got)
	}
	if body["model"] != "m" || body["tool_choice"] != "required" {
		t.Errorf("model/tool_choice = %v/%v", body["model"], body["tool_choice"])
	}
	tools := body["tools"].([]any)
	if len(tools) != len(agent.ToolNames) {
		t.Errorf("sent %d tools, want one per agent tool (%d)", len(tools), len(agent.ToolNames))
	}
	msgs := body["messages"].([]any)
	user := msgs[1].(map[string]any)["content"].(string)
	for _, want := range []string{"Task: sign in", "## Memory", "(end of memory)", "a#issues", "{{secret:demo_password}}", "opened the home page"} {
		if !strings.Contains(user, want) {
			t.Errorf("user message lacks %q:\n%s", want, user)
		}
	}
}

func TestAnthropicToolUse(t *testing.T) {
	srv, hs := newServer(t, reply{status: 200, body: anToolUseBody})
	p, err := NewAnthropic(Config{BaseURL: hs.URL, Model: "claude-x", APIKey: "sk-ant"})
	if err != nil {
		t.Fatal(err)
	}
	a, err := p.Next(context.Background(), state())
	if err != nil {
		t.Fatal(err)
	}
	if a.Tool != "type" || a.Selector != "#password" || a.Value != "{{secret:demo_password}}" || !a.Submit {
		t.Fatalf("action = %+v", a)
	}
	h := srv.headers[0]
	if h.Get("x-api-key") != "sk-ant" || h.Get("anthropic-version") != AnthropicVersion {
		t.Errorf("headers = %v", h)
	}
	body := srv.bodies[0]
	if body["system"] == nil || body["max_tokens"] == nil {
		t.Errorf("body lacks system/max_tokens: %v", body)
	}
	if tc := body["tool_choice"].(map[string]any); tc["type"] != "any" {
		t.Errorf("tool_choice = %v", tc)
	}
	first := body["tools"].([]any)[0].(map[string]any)
	if first["input_schema"] == nil {
		t.Errorf("tool without input_schema: %v", first)
	}
}

func TestRetryAfter429ThenSuccess(t *testing.T) {
	for _, kind := range []string{"openai", "anthropic"} {
		t.Run(kind, func(t *testing.T) {
			ok := oaToolCallBody
			if kind == "anthropic" {
				ok = anToolUseBody
			}
			srv, hs := newServer(t,
				reply{status: 429, header: map[string]string{"Retry-After": "7"}, body: `{"error":{"message":"rate limited"}}`},
				reply{status: 503, body: `upstream down`},
				reply{status: 200, body: ok})
			rs := &recordSleep{}
			p := newPlanner(t, kind, Config{BaseURL: hs.URL, Model: "m", APIKey: "k", Sleep: rs.sleep})
			if _, err := p.Next(context.Background(), state()); err != nil {
				t.Fatal(err)
			}
			if srv.requests() != 3 {
				t.Fatalf("requests = %d, want 3", srv.requests())
			}
			if len(rs.waits) != 2 || rs.waits[0] != 7*time.Second {
				t.Fatalf("waits = %v, want [7s backoff]", rs.waits)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	cases := []struct {
		name    string
		replies []reply
		want    string
	}{
		{"malformed JSON", []reply{{status: 200, body: `{"choices": [`}}, "malformed answer"},
		{"no choices", []reply{{status: 200, body: `{"choices": []}`}}, "no choices"},
		// Malformed calls go back to the model MaxRepairs times, then fail.
		{"bad tool args", repeat(reply{status: 200, body: badArgsBody}, MaxRepairs+1), "not a JSON object"},
		{"unknown tool", repeat(reply{status: 200, body: `{"choices":[{"message":{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"rm_rf","arguments":"{}"}}]}}]}`}, MaxRepairs+1), "unknown tool"},
		{"401", []reply{{status: 401, body: `{"error":{"message":"bad key"}}`}}, "PEM_LLM_API_KEY"},
		{"400", []reply{{status: 400, body: `{"error":{"message":"bad request"}}`}}, "answered 400"},
		{"500 forever", []reply{{status: 500, body: "x"}, {status: 500, body: "x"}, {status: 500, body: "x"}, {status: 500, body: "x"}}, "after 4 tries"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, hs := newServer(t, c.replies...)
			rs := &recordSleep{}
			p := newPlanner(t, "openai", Config{BaseURL: hs.URL, Model: "m", Sleep: rs.sleep})
			_, err := p.Next(context.Background(), state())
			if err == nil || !errors.Is(err, ErrAPI) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want ErrAPI containing %q", err, c.want)
			}
		})
	}
}

func TestTimeout(t *testing.T) {
	_, hs := newServer(t, reply{status: 200, body: oaToolCallBody, stall: 5 * time.Second}, reply{status: 200, body: oaToolCallBody, stall: 5 * time.Second})
	rs := &recordSleep{}
	p := newPlanner(t, "openai", Config{BaseURL: hs.URL, Model: "m", Timeout: 50 * time.Millisecond, MaxRetries: 1, Sleep: rs.sleep})
	_, err := p.Next(context.Background(), state())
	if err == nil || !errors.Is(err, ErrAPI) {
		t.Fatalf("err = %v, want a timeout error", err)
	}
}

func TestCancelStopsRetries(t *testing.T) {
	_, hs := newServer(t, reply{status: 429, header: map[string]string{"Retry-After": "30"}, body: "{}"})
	p := newPlanner(t, "openai", Config{BaseURL: hs.URL, Model: "m"}) // real sleep
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := p.Next(ctx, state())
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the context's deadline", err)
	}
}

// A reply in prose is not an answer read on the page: the model is
// reminded to call a tool, and after MaxRepairs reminders the planner gives
// up (done with no answer), so the prose is never printed as an answer.
func TestProseIsNoAnswer(t *testing.T) {
	prose := reply{status: 200, body: `{"type":"message","content":[{"type":"text","text":"1,234 stars"}]}`}
	srv, hs := newServer(t, repeat(prose, MaxRepairs+1)...)
	p := newPlanner(t, "anthropic", Config{BaseURL: hs.URL, Model: "m", APIKey: "k"})
	a, err := p.Next(context.Background(), state())
	if err != nil || a.Tool != "done" || a.Value != "" {
		t.Fatalf("got %+v, %v; want done with no answer", a, err)
	}
	msgs := srv.bodies[1]["messages"].([]any)
	if last := msgs[len(msgs)-1].(map[string]any)["content"].(string); last != noToolCall {
		t.Errorf("the reminder is %q", last)
	}
	// Then a tool call: taken.
	srv, hs = newServer(t, prose, reply{status: 200, body: anToolUseBody})
	p = newPlanner(t, "anthropic", Config{BaseURL: hs.URL, Model: "m", APIKey: "k"})
	if a, err := p.Next(context.Background(), state()); err != nil || a.Tool != "type" || srv.requests() != 2 {
		t.Fatalf("got %+v, %v after %d requests", a, err, srv.requests())
	}
}

const badArgsBody = `{"choices":[{"message":{"role":"assistant","tool_calls":[{"id":"call_9","type":"function","function":{"name":"click","arguments":"{not json"}}]}}]}`

func repeat(r reply, n int) []reply {
	out := make([]reply, n)
	for i := range out {
		out[i] = r
	}
	return out
}

// A malformed tool call comes back to the model as an error result for the
// same call id; the corrected call is taken.
func TestMalformedArgumentsAreRepaired(t *testing.T) {
	srv, hs := newServer(t, reply{status: 200, body: badArgsBody}, reply{status: 200, body: oaToolCallBody})
	p := newPlanner(t, "openai", Config{BaseURL: hs.URL, Model: "m"})
	a, err := p.Next(context.Background(), state())
	if err != nil || a.Tool != "click" || a.Selector != "a#issues" {
		t.Fatalf("got %+v, %v", a, err)
	}
	msgs := srv.bodies[1]["messages"].([]any)
	last := msgs[len(msgs)-1].(map[string]any)
	if last["role"] != "tool" || last["tool_call_id"] != "call_9" || !strings.Contains(last["content"].(string), "not a JSON object") {
		t.Fatalf("the repair message is %v", last)
	}
}

// Tool results follow the ActionResult model: the full text right after
// the tool ran, then only its long-term memory (or nothing, for content
// shown once); errors always.
func TestResultsShownOnceThenRemembered(t *testing.T) {
	page := strings.Repeat("word ", 600) + "THE-END"
	s := state()
	s.History = append(s.History, agent.Turn{Action: agent.Action{Tool: "get_text"},
		Result: agent.ToolResult{ExtractedContent: page, IncludeExtractedContentOnlyOnce: true}})
	if u := userPrompt(s); !strings.Contains(u, "THE-END") {
		t.Fatalf("the latest result is not shown in full:\n%s", u)
	}
	s.History = append(s.History, agent.Turn{Action: agent.Action{Tool: "extract", Selector: "#x"},
		Result: agent.ToolResult{ExtractedContent: "42", LongTermMemory: "extracted #x: 42"}})
	u := userPrompt(s)
	if strings.Contains(u, "THE-END") || !strings.Contains(u, "shown once") || !strings.Contains(u, "42") {
		t.Fatalf("an older shown-once result is repeated, or the latest is missing:\n%s", u)
	}
	if !strings.Contains(systemPrompt, "Do not loop") || !strings.Contains(systemPrompt, "List elements") {
		t.Errorf("the system prompt lacks the browser-agent rules")
	}
}

// clearEnv unsets every variable the planners read.
func clearEnv(t *testing.T) {
	for _, v := range []string{"PEM_LLM_BASE_URL", "PEM_LLM_MODEL", "PEM_LLM_API_KEY", "PEM_LLM_TEMPERATURE", "PEM_LLM_IMAGES",
		"OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL", "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_MODEL"} {
		t.Setenv(v, "")
	}
}

func TestConfigErrors(t *testing.T) {
	clearEnv(t)
	t.Setenv("PEM_LLM_TEMPERATURE", "warm")
	if _, err := NewOpenAI(Config{}); err == nil || !strings.Contains(err.Error(), "PEM_LLM_TEMPERATURE") {
		t.Errorf("openai with a bad temperature: %v", err)
	}
	t.Setenv("PEM_LLM_TEMPERATURE", "")
	if _, err := NewAnthropic(Config{BaseURL: "localhost:8000"}); err == nil || !strings.Contains(err.Error(), "ANTHROPIC_BASE_URL") {
		t.Errorf("anthropic with a base URL without scheme: %v", err)
	}
	t.Setenv("PEM_LLM_MODEL", "env-model")
	t.Setenv("PEM_LLM_BASE_URL", "http://127.0.0.1:9/v1/")
	p, err := NewOpenAI(Config{})
	if err != nil || p.cfg.Model != "env-model" || p.cfg.BaseURL != "http://127.0.0.1:9/v1" {
		t.Errorf("env config: %+v, %v", p, err)
	}
}

// Configured only with the provider's usual variables, each planner posts
// to its server with its headers, and sends no temperature unless one is set.
func TestProviderEnvOnly(t *testing.T) {
	t.Run("openai", func(t *testing.T) {
		clearEnv(t)
		srv, hs := newServer(t, reply{status: 200, body: oaToolCallBody})
		_, other := newServer(t) // any request to it fails the test
		t.Setenv("OPENAI_BASE_URL", hs.URL+"/v1")
		t.Setenv("OPENAI_API_KEY", "sk-openai")
		t.Setenv("OPENAI_MODEL", "gpt-x")
		t.Setenv("ANTHROPIC_BASE_URL", other.URL)
		t.Setenv("ANTHROPIC_API_KEY", "sk-ant")
		p, err := NewOpenAI(Config{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Next(context.Background(), state()); err != nil {
			t.Fatal(err)
		}
		if srv.paths[0] != "/v1/chat/completions" || srv.headers[0].Get("Authorization") != "Bearer sk-openai" || srv.bodies[0]["model"] != "gpt-x" {
			t.Errorf("path %s, headers %v, model %v", srv.paths[0], srv.headers[0], srv.bodies[0]["model"])
		}
		if _, ok := srv.bodies[0]["temperature"]; ok {
			t.Errorf("a temperature was sent though none is set: %v", srv.bodies[0]["temperature"])
		}
	})
	t.Run("anthropic", func(t *testing.T) {
		clearEnv(t)
		srv, hs := newServer(t, reply{status: 200, body: anToolUseBody})
		_, other := newServer(t)
		t.Setenv("ANTHROPIC_BASE_URL", hs.URL)
		t.Setenv("ANTHROPIC_API_KEY", "sk-ant")
		t.Setenv("ANTHROPIC_MODEL", "claude-x")
		t.Setenv("OPENAI_BASE_URL", other.URL+"/v1")
		t.Setenv("OPENAI_API_KEY", "sk-openai")
		p, err := NewAnthropic(Config{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Next(context.Background(), state()); err != nil {
			t.Fatal(err)
		}
		h := srv.headers[0]
		if srv.paths[0] != "/v1/messages" || h.Get("x-api-key") != "sk-ant" || h.Get("anthropic-version") != AnthropicVersion ||
			h.Get("Authorization") != "" || srv.bodies[0]["model"] != "claude-x" {
			t.Errorf("path %s, headers %v, model %v", srv.paths[0], h, srv.bodies[0]["model"])
		}
		if _, ok := srv.bodies[0]["temperature"]; ok {
			t.Errorf("a temperature was sent though none is set: %v", srv.bodies[0]["temperature"])
		}
	})
}

// pem's variables win over the provider's, the Config's fields (pem's
// flags) over both; one PEM_LLM_BASE_URL ending in /v1 serves both planners.
func TestConfigPrecedence(t *testing.T) {
	clearEnv(t)
	srv, hs := newServer(t, reply{status: 200, body: oaToolCallBody}, reply{status: 200, body: anToolUseBody})
	_, other := newServer(t)
	t.Setenv("OPENAI_BASE_URL", other.URL+"/v1")
	t.Setenv("ANTHROPIC_BASE_URL", other.URL)
	t.Setenv("OPENAI_API_KEY", "provider-key")
	t.Setenv("ANTHROPIC_API_KEY", "provider-key")
	t.Setenv("OPENAI_MODEL", "provider-model")
	t.Setenv("PEM_LLM_BASE_URL", hs.URL+"/v1")
	t.Setenv("PEM_LLM_API_KEY", "pem-key")
	t.Setenv("PEM_LLM_MODEL", "pem-model")
	t.Setenv("PEM_LLM_TEMPERATURE", "0.7")
	oa, err := NewOpenAI(Config{})
	if err != nil {
		t.Fatal(err)
	}
	zero := 0.0
	an, err := NewAnthropic(Config{Model: "flag-model", Temperature: &zero})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []agent.Planner{oa, an} {
		if _, err := p.Next(context.Background(), state()); err != nil {
			t.Fatal(err)
		}
	}
	if srv.paths[0] != "/v1/chat/completions" || srv.headers[0].Get("Authorization") != "Bearer pem-key" ||
		srv.bodies[0]["model"] != "pem-model" || srv.bodies[0]["temperature"] != 0.7 {
		t.Errorf("openai: path %s, auth %q, body model %v temperature %v", srv.paths[0], srv.headers[0].Get("Authorization"), srv.bodies[0]["model"], srv.bodies[0]["temperature"])
	}
	if srv.paths[1] != "/v1/messages" || srv.headers[1].Get("x-api-key") != "pem-key" ||
		srv.bodies[1]["model"] != "flag-model" || srv.bodies[1]["temperature"] != 0.0 {
		t.Errorf("anthropic: path %s (want /v1/messages, not /v1/v1/messages), key %q, model %v, temperature %v",
			srv.paths[1], srv.headers[1].Get("x-api-key"), srv.bodies[1]["model"], srv.bodies[1]["temperature"])
	}
}

// No key (or model) is needed until a model is called; the call that needs
// one says which variable to set, and nothing is sent.
func TestKeyIsLazy(t *testing.T) {
	clearEnv(t)
	srv, hs := newServer(t)
	an, err := NewAnthropic(Config{BaseURL: hs.URL, Model: "claude-x"})
	if err != nil {
		t.Fatalf("NewAnthropic without a key: %v", err)
	}
	_, err = an.Next(context.Background(), state())
	if !errors.Is(err, ErrNotConfigured) || !errors.Is(err, agent.ErrConfig) || !strings.Contains(err.Error(), "set ANTHROPIC_API_KEY") {
		t.Errorf("anthropic without a key: %v", err)
	}
	oa, err := NewOpenAI(Config{Model: "gpt-x"}) // OpenAI's own API
	if err != nil {
		t.Fatal(err)
	}
	if _, err = oa.Next(context.Background(), state()); !errors.Is(err, ErrNotConfigured) || !strings.Contains(err.Error(), "set OPENAI_API_KEY") {
		t.Errorf("openai without a key: %v", err)
	}
	oa, err = NewOpenAI(Config{BaseURL: hs.URL + "/v1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err = oa.Next(context.Background(), state()); !errors.Is(err, ErrNotConfigured) || !strings.Contains(err.Error(), "PEM_LLM_MODEL") {
		t.Errorf("openai without a model: %v", err)
	}
	if srv.requests() != 0 {
		t.Errorf("%d requests sent with the configuration incomplete", srv.requests())
	}
	// A local server needs no key: none is sent.
	srv, hs = newServer(t, reply{status: 200, body: oaToolCallBody})
	oa, _ = NewOpenAI(Config{BaseURL: hs.URL + "/v1", Model: "llama3.1"})
	if _, err := oa.Next(context.Background(), state()); err != nil || srv.headers[0].Get("Authorization") != "" {
		t.Errorf("local server without a key: %v, Authorization %q", err, srv.headers[0].Get("Authorization"))
	}
}

func TestRetryAfterParse(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	cases := map[string]time.Duration{
		"":                              0,
		"3":                             3 * time.Second,
		"0.5":                           500 * time.Millisecond,
		"999":                           MaxRetryAfter,
		"Mon, 30 Nov 2026 12:00:10 GMT": 10 * time.Second,
		"Mon, 30 Nov 2026 11:00:00 GMT": 0,
		"soon":                          0,
	}
	for h, want := range cases {
		if got := retryAfter(h, now); got != want {
			t.Errorf("retryAfter(%q) = %v, want %v", h, got, want)
		}
	}
}

func newPlanner(t *testing.T, kind string, cfg Config) agent.Planner {
	t.Helper()
	var p agent.Planner
	var err error
	if kind == "anthropic" {
		p, err = NewAnthropic(cfg)
	} else {
		cfg.BaseURL += "/v1"
		p, err = NewOpenAI(cfg)
	}
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// With Images on, the screenshot the last turn took goes to the model as
// an image; off, only its text.
func TestScreenshotSentAsImage(t *testing.T) {
	shot := t.TempDir() + "/screenshot-1.png"
	if err := os.WriteFile(shot, []byte("\x89PNG fake"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := state()
	s.History = append(s.History, agent.Turn{Action: agent.Action{Tool: "screenshot"},
		Result: agent.ToolResult{ExtractedContent: "screenshot saved", Attachments: []string{shot}}})
	for _, images := range []bool{false, true} {
		srv, hs := newServer(t, reply{status: 200, body: oaToolCallBody})
		p := newPlanner(t, "openai", Config{BaseURL: hs.URL, Model: "m", Images: images})
		if _, err := p.Next(context.Background(), s); err != nil {
			t.Fatal(err)
		}
		user := srv.bodies[0]["messages"].([]any)[1].(map[string]any)["content"]
		parts, isParts := user.([]any)
		if isParts != images {
			t.Fatalf("images %v: content %T", images, user)
		}
		if images {
			img := parts[1].(map[string]any)["image_url"].(map[string]any)["url"].(string)
			if !strings.HasPrefix(img, "data:image/png;base64,") {
				t.Fatalf("image part %q", img)
			}
		}
	}
}

// TestUsageCounted: the usage fields of every reply — a repaired call
// included — are added to State.Usage; a reply without them adds nothing.
func TestUsageCounted(t *testing.T) {
	withUsage := func(body, usage string) string {
		return strings.TrimSuffix(strings.TrimSpace(body), "}") + `, "usage": ` + usage + `}`
	}
	_, hs := newServer(t, reply{status: 200, body: withUsage(badArgsBody, `{"prompt_tokens": 120, "completion_tokens": 9}`)},
		reply{status: 200, body: withUsage(oaToolCallBody, `{"prompt_tokens": 150, "completion_tokens": 11, "total_tokens": 161}`)})
	p := newPlanner(t, "openai", Config{BaseURL: hs.URL, Model: "m"})
	s := state()
	if _, err := p.Next(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if s.Usage != (agent.Usage{InputTokens: 270, OutputTokens: 20}) {
		t.Errorf("openai usage %+v, want 270 in, 20 out", s.Usage)
	}
	_, hs = newServer(t, reply{status: 200, body: withUsage(anToolUseBody, `{"input_tokens": 800, "output_tokens": 42}`)}, reply{status: 200, body: oaToolCallBody})
	a := newPlanner(t, "anthropic", Config{BaseURL: hs.URL, Model: "claude-x", APIKey: "k"})
	s = state()
	if _, err := a.Next(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if s.Usage != (agent.Usage{InputTokens: 800, OutputTokens: 42}) {
		t.Errorf("anthropic usage %+v, want 800 in, 42 out", s.Usage)
	}
	o := newPlanner(t, "openai", Config{BaseURL: hs.URL, Model: "m"})
	s = state()
	if _, err := o.Next(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if s.Usage != (agent.Usage{}) {
		t.Errorf("no usage fields, counted %+v", s.Usage)
	}
}
