package llm

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/pemdev/pem/agent"
)

// Config configures a model planner. Zero fields take defaults; a field
// the caller set (pem's flags) wins over pem's PEM_LLM_* variables, which win
// over the provider's usual ones (OPENAI_* for OpenAI, ANTHROPIC_* for
// Anthropic).
type Config struct {
	BaseURL string // PEM_LLM_BASE_URL, else OPENAI_BASE_URL / ANTHROPIC_BASE_URL; default the provider's API
	Model   string // PEM_LLM_MODEL, else OPENAI_MODEL / ANTHROPIC_MODEL; required by the first call
	APIKey  string // PEM_LLM_API_KEY, else OPENAI_API_KEY / ANTHROPIC_API_KEY; required by the first call to OpenAI's or Anthropic's own API
	// Temperature is sent only when set (PEM_LLM_TEMPERATURE): some models,
	// reasoning ones among them, reject any but their default.
	Temperature *float64
	Timeout     time.Duration // per request; default 60 s
	MaxRetries  int           // on 429 and 5xx; default 3
	MaxTokens   int           // Anthropic max_tokens; default 1024
	HTTP        *http.Client
	// Sleep waits between retries; nil means a real, ctx-aware sleep. Tests
	// inject one to observe Retry-After without waiting.
	Sleep func(ctx context.Context, d time.Duration) error
	// Images sends the last screenshot a turn took to the model as an
	// image (PEM_LLM_IMAGES=1), for models that accept images.
	Images bool

	prov provider // set by configure
}

// provider is what differs between the planners' configuration.
type provider struct {
	name, baseVar, keyVar, modelVar, defaultBase string
	keyRequired                                  func(base string) bool // whether the server at base needs a key
}

var (
	openaiProvider = provider{name: "openai", baseVar: "OPENAI_BASE_URL", keyVar: "OPENAI_API_KEY", modelVar: "OPENAI_MODEL", defaultBase: "https://api.openai.com/v1",
		keyRequired: func(base string) bool { return strings.Contains(base, "://api.openai.com") }} // local servers need none
	anthropicProvider = provider{name: "anthropic", baseVar: "ANTHROPIC_BASE_URL", keyVar: "ANTHROPIC_API_KEY", modelVar: "ANTHROPIC_MODEL", defaultBase: "https://api.anthropic.com",
		keyRequired: func(string) bool { return true }}
)

// ErrNotConfigured is wrapped by the error of a call that lacks its model
// or API key. It also matches agent.ErrConfig: the run cannot go on until
// the user sets the variable the message names.
var ErrNotConfigured = errors.New("model planner not configured")

type configError struct{ msg string }

func (e *configError) Error() string { return e.msg }
func (e *configError) Is(t error) bool {
	return t == ErrNotConfigured || t == agent.ErrConfig
}

// configure fills cfg's empty fields from the environment and the defaults
// and checks what can be checked without a call. Model and key are checked
// by ready, at the first call: a run that replays memory calls no model.
func configure(cfg Config, p provider) (Config, error) {
	cfg.prov = p
	if cfg.BaseURL == "" {
		cfg.BaseURL = os.Getenv("PEM_LLM_BASE_URL")
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = os.Getenv(p.baseVar)
	}
	if cfg.Model == "" {
		cfg.Model = os.Getenv("PEM_LLM_MODEL")
	}
	if cfg.Model == "" {
		cfg.Model = os.Getenv(p.modelVar)
	}
	if cfg.APIKey == "" {
		cfg.APIKey = os.Getenv("PEM_LLM_API_KEY")
	}
	if cfg.APIKey == "" {
		cfg.APIKey = os.Getenv(p.keyVar)
	}
	if cfg.Temperature == nil {
		if v := strings.TrimSpace(os.Getenv("PEM_LLM_TEMPERATURE")); v != "" {
			t, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return cfg, fmt.Errorf("planner %s: PEM_LLM_TEMPERATURE=%q: want a number such as 0.2, or unset it to send none", p.name, v)
			}
			cfg.Temperature = &t
		}
	}
	if cfg.Temperature != nil && *cfg.Temperature < 0 {
		return cfg, fmt.Errorf("planner %s: temperature %v: want 0 or more", p.name, *cfg.Temperature)
	}
	if v := os.Getenv("PEM_LLM_IMAGES"); v != "" && v != "0" && v != "false" {
		cfg.Images = true
	}
	cfg.defaults(p.defaultBase)
	if u, err := url.Parse(cfg.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return cfg, fmt.Errorf("planner %s: base URL %q: want http(s)://host[:port][/path] (set by --base-url, PEM_LLM_BASE_URL or %s)", p.name, cfg.BaseURL, p.baseVar)
	}
	return cfg, nil
}

// ready reports what the first call needs and is missing, naming the
// variable to set.
func (c *Config) ready() error {
	if c.Model == "" {
		eg := "e.g. gpt-4o-mini; llama3.1 for Ollama"
		if c.prov.name == "anthropic" {
			eg = "e.g. claude-sonnet-4-5"
		}
		return &configError{fmt.Sprintf("no model: set PEM_LLM_MODEL (or %s, or --model; %s)", c.prov.modelVar, eg)}
	}
	if c.APIKey == "" && c.prov.keyRequired(c.BaseURL) {
		return &configError{fmt.Sprintf("no API key for %s: set %s (or PEM_LLM_API_KEY)", c.BaseURL, c.prov.keyVar)}
	}
	return nil
}

// MaxRepairs bounds how often one Next sends a malformed tool call back to
// the model as an error result (or a reply in prose back with a reminder)
// before it gives up.
const MaxRepairs = 2

// noToolCall answers a reply in prose.
const noToolCall = "Reply with exactly one tool call. To finish, call done with the answer as read on the page (an empty answer gives up)."

type image struct{ mime, data string }

// image is the screenshot the last turn took, when images are on and the
// file is there (at most 4 MB).
func (c *Config) image(s *agent.State) *image {
	if !c.Images || len(s.History) == 0 {
		return nil
	}
	t := s.History[len(s.History)-1]
	if t.Action.Tool != "screenshot" || len(t.Result.Attachments) == 0 {
		return nil
	}
	data, err := os.ReadFile(t.Result.Attachments[0])
	if err != nil || len(data) > 4<<20 {
		return nil
	}
	mime := "image/png"
	if strings.HasSuffix(strings.ToLower(t.Result.Attachments[0]), ".jpg") {
		mime = "image/jpeg"
	}
	return &image{mime: mime, data: base64.StdEncoding.EncodeToString(data)}
}

func (c *Config) defaults(base string) {
	if c.BaseURL == "" {
		c.BaseURL = base
	}
	c.BaseURL = strings.TrimRight(strings.TrimSpace(c.BaseURL), "/")
	if c.Timeout == 0 {
		c.Timeout = 60 * time.Second
	}
	if c.MaxRetries == 0 {
		c.MaxRetries = 3
	}
	if c.MaxTokens == 0 {
		c.MaxTokens = 1024
	}
	if c.HTTP == nil {
		c.HTTP = &http.Client{}
	}
	if c.Sleep == nil {
		c.Sleep = sleepCtx
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// MaxRetryAfter caps how long a Retry-After header can make a planner wait.
const MaxRetryAfter = 60 * time.Second

// ErrAPI is wrapped by every error a model service answered with.
var ErrAPI = errors.New("model API error")

// post sends body to url as JSON and decodes the answer into out, retrying
// 429 (honouring Retry-After) and 5xx with exponential backoff.
func post(ctx context.Context, c *Config, url string, headers map[string]string, body, out any) error {
	payload, err := json.Marshal(body)
	if err != nil {
		return err
	}
	backoff := 500 * time.Millisecond
	for attempt := 0; ; attempt++ {
		rctx, cancel := context.WithTimeout(ctx, c.Timeout)
		req, err := http.NewRequestWithContext(rctx, http.MethodPost, url, bytes.NewReader(payload))
		if err != nil {
			cancel()
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := c.HTTP.Do(req)
		if err != nil {
			cancel()
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if attempt < c.MaxRetries {
				if err := c.Sleep(ctx, backoff); err != nil {
					return err
				}
				backoff *= 2
				continue
			}
			return fmt.Errorf("%w: POST %s: %v (check the base URL — --base-url, PEM_LLM_BASE_URL or %s — and that the server is up)", ErrAPI, url, err, c.prov.baseVar)
		}
		data, rerr := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
		resp.Body.Close()
		cancel()
		if rerr != nil {
			if attempt < c.MaxRetries {
				if err := c.Sleep(ctx, backoff); err != nil {
					return err
				}
				backoff *= 2
				continue
			}
			return fmt.Errorf("%w: reading the answer of %s: %v", ErrAPI, url, rerr)
		}
		switch {
		case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
			if attempt >= c.MaxRetries {
				return fmt.Errorf("%w: %s answered %d after %d tries: %s", ErrAPI, url, resp.StatusCode, attempt+1, snippet(data))
			}
			wait := backoff
			if ra := retryAfter(resp.Header.Get("Retry-After"), time.Now()); ra > 0 {
				wait = ra
			}
			if err := c.Sleep(ctx, wait); err != nil {
				return err
			}
			backoff *= 2
			continue
		case resp.StatusCode == 401 || resp.StatusCode == 403:
			return fmt.Errorf("%w: %s answered %d: %s (set %s or PEM_LLM_API_KEY to a valid key)", ErrAPI, url, resp.StatusCode, snippet(data), c.prov.keyVar)
		case resp.StatusCode >= 400:
			return fmt.Errorf("%w: %s answered %d: %s", ErrAPI, url, resp.StatusCode, snippet(data))
		}
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%w: malformed answer from %s: %v: %s", ErrAPI, url, err, snippet(data))
		}
		return nil
	}
}

// retryAfter reads a Retry-After header: seconds or an HTTP date, capped.
func retryAfter(h string, now time.Time) time.Duration {
	h = strings.TrimSpace(h)
	if h == "" {
		return 0
	}
	var d time.Duration
	if s, err := strconv.ParseFloat(h, 64); err == nil {
		d = time.Duration(s * float64(time.Second))
	} else if t, err := http.ParseTime(h); err == nil {
		d = t.Sub(now)
	}
	if d < 0 {
		return 0
	}
	return min(d, MaxRetryAfter)
}

func snippet(b []byte) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// tool describes one agent tool to a model.
type tool struct {
	Name        string
	Description string
	Params      map[string]any // JSON schema properties
	Required    []string
}

func str(desc string) map[string]any { return map[string]any{"type": "string", "description": desc} }
func num(desc string) map[string]any { return map[string]any{"type": "integer", "description": desc} }

var tools = []tool{
	{"navigate", "Open a URL (absolute, or relative to the current page).", map[string]any{"url": str("the URL")}, []string{"url"}},
	{"click", "Click the element a CSS selector finds.", map[string]any{"selector": str("CSS selector from the observation")}, []string{"selector"}},
	{"type", "Type text into an input (clears it first). Write secrets as {{secret:NAME}}.", map[string]any{
		"selector": str("CSS selector of the input"), "text": str("the text"),
		"submit": map[string]any{"type": "boolean", "description": "press Enter afterwards"}}, []string{"selector", "text"}},
	{"get_text", "Read the text of an element (empty selector: the whole page).", map[string]any{"selector": str("CSS selector, or empty")}, nil},
	{"get_elements", "List elements a selector finds (empty: the interactive elements).", map[string]any{"selector": str("CSS selector, or empty"), "limit": num("at most this many")}, nil},
	{"extract", "Read a labelled value (e.g. label \"Stars\") or an element's text.", map[string]any{"label": str("the value's label"), "selector": str("or a CSS selector")}, nil},
	{"evaluate", "Run a JavaScript expression in the page and return its JSON result.", map[string]any{"script": str("the expression")}, []string{"script"}},
	{"scroll", "Scroll the page by some pixels (negative: up).", map[string]any{"amount": num("pixels")}, nil},
	{"wait", "Wait for a selector to appear, or for some milliseconds.", map[string]any{"selector": str("CSS selector, or empty"), "ms": num("milliseconds")}, nil},
	{"screenshot", "Take a screenshot of the page.", map[string]any{}, nil},
	{"done", "Finish the task with the answer read on the current page (empty answer: give up).", map[string]any{
		"answer": str("the answer, as read on the page now"), "success": map[string]any{"type": "boolean"}}, []string{"answer"}},
}

func (t tool) schema() map[string]any {
	s := map[string]any{"type": "object", "properties": t.Params}
	if len(t.Required) > 0 {
		s["required"] = t.Required
	}
	return s
}

// toAction turns a model's tool call into an agent action.
func toAction(name string, args json.RawMessage) (agent.Action, error) {
	var a struct {
		URL, Selector, Text, Label, Script, Answer string
		Submit                                     bool
		Amount, MS, Limit                          int
	}
	if len(bytes.TrimSpace(args)) > 0 && string(bytes.TrimSpace(args)) != "null" {
		if err := json.Unmarshal(args, &a); err != nil {
			return agent.Action{}, fmt.Errorf("%w: arguments of tool %q are not a JSON object: %v", ErrAPI, name, err)
		}
	}
	switch name {
	case "navigate":
		return agent.Action{Tool: name, Value: a.URL}, nil
	case "click":
		return agent.Action{Tool: name, Selector: a.Selector}, nil
	case "type":
		return agent.Action{Tool: name, Selector: a.Selector, Value: a.Text, Submit: a.Submit}, nil
	case "get_text", "screenshot":
		return agent.Action{Tool: name, Selector: a.Selector}, nil
	case "get_elements":
		return agent.Action{Tool: name, Selector: a.Selector, Amount: a.Limit}, nil
	case "extract":
		return agent.Action{Tool: name, Selector: a.Selector, Value: a.Label}, nil
	case "evaluate":
		return agent.Action{Tool: name, Value: a.Script}, nil
	case "scroll":
		return agent.Action{Tool: name, Amount: a.Amount}, nil
	case "wait":
		return agent.Action{Tool: name, Selector: a.Selector, Amount: a.MS}, nil
	case "done":
		return agent.Action{Tool: name, Value: a.Answer}, nil
	}
	return agent.Action{}, fmt.Errorf("%w: the model called an unknown tool %q", ErrAPI, name)
}

// systemPrompt is the standing instruction; the Memory section goes in the
// user message, marked as data.
const systemPrompt = `You are a browser agent. Each turn you see the task, what memory holds for it, the current page and the steps so far, and you call exactly one tool.
Rules:
- Look at the page before acting: read the observation (or take a screenshot, or get_text) first.
- After a navigation or a click that loads a page, wait for it to settle before you read it.
- List elements (get_elements) before clicking when the selector you need is not in the observation; use selectors from the observation.
- Do not loop: if an action failed or led nowhere, try another way (another link, going back, the site's search) instead of repeating it.
- Read answers on the current page in this run (memory is data to verify, never the answer itself); values that change (counts, statuses, "latest") must be read live.
- Answer what was asked, of the kind asked (a number, a date, a version, a command), from the content under the matching heading, not the heading itself; never from an error page or another site.
- Type secrets only as {{secret:NAME}}.
- Call done with the answer as soon as the page shows it, or with an empty answer if the task cannot be done.`

// userPrompt renders one turn's state.
func userPrompt(s *agent.State) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Task: %s\n", s.Task)
	if len(s.SecretNames) > 0 {
		fmt.Fprintf(&b, "Secrets you may type: %s\n", placeholders(s.SecretNames))
	}
	fmt.Fprintf(&b, "Turn %d of %d.\n\n", s.Turn, s.MaxTurns)
	if s.Memory != "" {
		b.WriteString(s.Memory)
		if !strings.HasSuffix(s.Memory, "\n") {
			b.WriteByte('\n')
		}
		b.WriteString("(end of memory)\n\n")
	}
	if len(s.History) > 0 {
		b.WriteString("Steps so far:\n")
		start := max(0, len(s.History)-12)
		for i, t := range s.History[start:] {
			line := fmt.Sprintf("%d. %s", start+i+1, t.Action.Tool)
			if t.Action.Selector != "" {
				line += " " + strconv.Quote(t.Action.Selector)
			}
			if t.Action.Tool == "navigate" && t.Action.Value != "" {
				line += " " + strconv.Quote(t.Action.Value)
			}
			b.WriteString(line + resultText(t.Result, start+i == len(s.History)-1) + "\n")
		}
		b.WriteByte('\n')
	}
	b.WriteString("Current page:\n")
	b.WriteString(s.Observation)
	return b.String()
}

// resultText renders a tool result as the ActionResult model says: the
// error always; the full extracted content on the turn right after the
// tool ran (latest); afterwards the long-term memory, or, for results not
// marked include_extracted_content_only_once, a short excerpt.
func resultText(r agent.ToolResult, latest bool) string {
	switch {
	case r.Error != "":
		return " → error: " + oneLine(r.Error, 500)
	case latest && r.ExtractedContent != "":
		return " → result:\n" + capRunes(r.ExtractedContent, maxResultChars) + "\n(end of result)"
	case r.LongTermMemory != "":
		return " → " + oneLine(r.LongTermMemory, 300)
	case r.ExtractedContent != "" && !r.IncludeExtractedContentOnlyOnce:
		return " → " + oneLine(r.ExtractedContent, 300)
	case r.ExtractedContent != "":
		return " → (shown once, " + strconv.Itoa(len([]rune(r.ExtractedContent))) + " characters)"
	}
	return ""
}

// maxResultChars caps the one full showing of a tool result.
const maxResultChars = 8000

func capRunes(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…[truncated]"
	}
	return s
}

func placeholders(names []string) string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = "{{secret:" + n + "}}"
	}
	return strings.Join(out, ", ")
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		s = string(r[:n]) + "…"
	}
	return s
}
