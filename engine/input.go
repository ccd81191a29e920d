package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"
	"unicode"
)

// ErrBadTrace is returned for trace JSON that cannot be read.
var ErrBadTrace = errors.New("bad trace")

// TraceInput is what a caller hands to Save: the seed's ExecutionTrace fields
// plus pem's own. Keys may be snake_case or camelCase; unknown keys are errors.
type TraceInput struct {
	TaskType          string            `json:"task_type"`
	Intent            string            `json:"intent"`
	Task              string            `json:"task"`
	URL               string            `json:"url"`
	Steps             []StepInput       `json:"steps"`
	Outcome           string            `json:"outcome"`
	Timestamp         *FlexTime         `json:"timestamp"`
	StartedAt         *FlexTime         `json:"started_at"`
	ExtractionResults map[string]any    `json:"extraction_results"`
	Answer            string            `json:"answer"`
	FinalPageURL      string            `json:"final_page_url"`
	FinalPageTitle    string            `json:"final_page_title"`
	FinalState        *FinalState       `json:"final_state"` // Browser4's {url, title}
	ErrorMessage      string            `json:"error_message"`
	DurationMs        int64             `json:"duration_ms"`
	Session           string            `json:"session"`
	FailureCategory   string            `json:"failure_category"`
	HTTPStatus        int               `json:"http_status"`
	PlannerCalls      int               `json:"planner_calls"`
	Tier              string            `json:"tier"`
	FactsRevision     string            `json:"facts_revision"`
	Params            []string          `json:"params"`
	Writer            string            `json:"writer"`
	Metadata          map[string]string `json:"metadata"`
	// SuccessCondition is where a successful run read its answer.
	SuccessCondition *SuccessCondition `json:"success_condition"`
}

// StepInput is one step as callers send it.
type StepInput struct {
	Seq        int       `json:"seq"`
	Sequence   int       `json:"sequence"`  // Browser4's name for seq
	Timestamp  *FlexTime `json:"timestamp"` // Browser4: when the step ran (not stored)
	Action     string    `json:"action"`
	Selector   string    `json:"selector"`
	Fallbacks  []string  `json:"fallbacks"`
	Value      string    `json:"value"`
	Param      string    `json:"param"`
	URL        string    `json:"url"`
	Result     any       `json:"result"`
	OK         *bool     `json:"ok"`
	Success    *bool     `json:"success"`
	Error      string    `json:"error"`
	ErrorKind  string    `json:"error_kind"`
	HTTPStatus int       `json:"http_status"`
	DurationMs int64     `json:"duration_ms"`
	Sensitive  bool      `json:"sensitive"` // the value is a secret: never stored
	// Target is the fingerprint of the control a click or type acted on.
	Target *Fingerprint `json:"target"`
}

// FinalState is Browser4's final page of a run.
type FinalState struct {
	URL   string `json:"url"`
	Title string `json:"title"`
}

// FlexTime is a time as callers send it: RFC 3339 text or Unix milliseconds
// (Browser4's timestamps).
type FlexTime struct{ time.Time }

// UnmarshalJSON reads RFC 3339 text or a number of Unix milliseconds.
func (f *FlexTime) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var t time.Time
		if err := json.Unmarshal(b, &t); err != nil {
			return fmt.Errorf("a time must be RFC 3339 text or Unix milliseconds: %v", err)
		}
		f.Time = t
		return nil
	}
	var ms int64
	if err := json.Unmarshal(b, &ms); err != nil {
		return fmt.Errorf("a time must be RFC 3339 text or Unix milliseconds: %v", err)
	}
	f.Time = time.UnixMilli(ms).UTC()
	return nil
}

// resultErrorRe matches a step result that reports a failure, as Browser4
// records it ("error: element not found", "failed to click", an exception name
// such as TimeoutException). A bare word read from a page ("Failed", a build
// status) is not an error.
var resultErrorRe = LazyRE(`(?i:^\s*(error|exception|failure)\s*[:!]|^\s*failed\s+(to|with|:|on)\b)|\b[A-Z][A-Za-z]*(Exception|Error)\b`)

// resultError returns the result text when it reports a failure, else "".
func resultError(v any) string {
	s, ok := v.(string)
	if !ok {
		return ""
	}
	if resultErrorRe.MatchString(s) {
		return strings.TrimSpace(s)
	}
	return ""
}

// Caps on input, checked before anything is written.
const (
	MaxTraceBytes = 2 << 20
	MaxSteps      = 500
	MaxValue      = 16 << 10
	MaxPatchBytes = 256 << 10 // a facts patch (pem experience save --facts, POST /api/traces), like a facts file on disk
)

// ParseTraceInput reads trace JSON. Empty input (or "null") is an empty trace.
func ParseTraceInput(data []byte) (*TraceInput, error) {
	data = bytes.TrimSpace(data)
	in := &TraceInput{}
	if len(data) == 0 || string(data) == "null" || string(data) == "{}" {
		return in, nil
	}
	if len(data) > MaxTraceBytes {
		return nil, fmt.Errorf("%w: %d bytes is over the %d-byte cap: save fewer steps or shorter values", ErrBadTrace, len(data), MaxTraceBytes)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("%w: not a JSON object: %v", ErrBadTrace, err)
	}
	norm, err := snakeKeys(raw, traceFields, "trace")
	if err != nil {
		return nil, err
	}
	if s, ok := norm["steps"]; ok {
		var steps []map[string]json.RawMessage
		if err := json.Unmarshal(s, &steps); err != nil {
			return nil, fmt.Errorf("%w: steps must be a list of objects: %v", ErrBadTrace, err)
		}
		if len(steps) > MaxSteps {
			return nil, fmt.Errorf("%w: %d steps is over the cap of %d", ErrBadTrace, len(steps), MaxSteps)
		}
		fixed := make([]map[string]json.RawMessage, len(steps))
		for i, st := range steps {
			if fixed[i], err = snakeKeys(st, stepFields, fmt.Sprintf("steps[%d]", i)); err != nil {
				return nil, err
			}
		}
		norm["steps"], _ = json.Marshal(fixed)
	}
	b, _ := json.Marshal(norm)
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(in); err != nil {
		return nil, fmt.Errorf("%w: %v (fields: task_type, intent, url, steps[{action, selector, value, result, duration_ms}], outcome, timestamp, extraction_results, final_page_url, final_page_title, error_message, duration_ms, session)", ErrBadTrace, err)
	}
	for i, s := range in.Steps {
		if s.Action == "" {
			return nil, fmt.Errorf("%w: steps[%d] has no action", ErrBadTrace, i)
		}
		if len(s.Value) > MaxValue || len(s.Selector) > MaxValue {
			return nil, fmt.Errorf("%w: steps[%d] value or selector is over %d bytes", ErrBadTrace, i, MaxValue)
		}
	}
	return in, nil
}

// Known JSON keys of TraceInput and StepInput, so an unknown key is reported
// as the caller spelled it.
var (
	traceFields = jsonFields(reflect.TypeOf(TraceInput{}))
	stepFields  = jsonFields(reflect.TypeOf(StepInput{}))
)

func jsonFields(t reflect.Type) map[string]bool {
	m := map[string]bool{}
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		m[name] = true
	}
	return m
}

// snakeKeys rewrites camelCase keys to snake_case, refusing two spellings of
// one key and, naming it as the caller spelled it, a key that is no field.
func snakeKeys(m map[string]json.RawMessage, fields map[string]bool, where string) (map[string]json.RawMessage, error) {
	out := make(map[string]json.RawMessage, len(m))
	from := map[string]string{}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys) // deterministic errors
	for _, k := range keys {
		v := m[k]
		s := SnakeCase(k)
		if !fields[s] {
			return nil, fmt.Errorf("%w: %s: unknown field %q: use one of %s (snake_case or camelCase)", ErrBadTrace, where, k, strings.Join(sortedKeys(fields), ", "))
		}
		if prev, dup := from[s]; dup {
			return nil, fmt.Errorf("%w: %s: keys %q and %q are the same field", ErrBadTrace, where, prev, k)
		}
		from[s] = k
		out[s] = v
	}
	return out, nil
}

// SnakeCase converts a camelCase key to snake_case ("finalPageURL" →
// "final_page_url", "pageSize" → "page_size", "step2Name" → "step2_name");
// snake_case keys come back unchanged. It is the one key rule of every input
// that accepts both spellings: trace JSON, facts patches and MCP arguments.
func SnakeCase(s string) string {
	var b strings.Builder
	rs := []rune(s)
	for i, r := range rs {
		if unicode.IsUpper(r) {
			if i > 0 && rs[i-1] != '_' && (unicode.IsLower(rs[i-1]) || unicode.IsDigit(rs[i-1]) || i+1 < len(rs) && unicode.IsLower(rs[i+1])) {
				b.WriteByte('_')
			}
			b.WriteRune(unicode.ToLower(r))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func resultString(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	default:
		b, _ := json.Marshal(x)
		return string(b)
	}
}
