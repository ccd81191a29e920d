package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store/storetest"
)

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestParseTraceInputSpellings: the seed's ExecutionTrace in snake_case and in
// camelCase read to the same input.
func TestParseTraceInputSpellings(t *testing.T) {
	snake, err := engine.ParseTraceInput(readTestdata(t, "trace_snake.json"))
	if err != nil {
		t.Fatalf("snake_case: %v", err)
	}
	camel, err := engine.ParseTraceInput(readTestdata(t, "trace_camel.json"))
	if err != nil {
		t.Fatalf("camelCase: %v", err)
	}
	if !reflect.DeepEqual(snake, camel) {
		a, _ := json.MarshalIndent(snake, "", " ")
		b, _ := json.MarshalIndent(camel, "", " ")
		t.Errorf("snake and camel differ:\n%s\n%s", a, b)
	}
	want := time.Date(2025, 5, 30, 10, 0, 0, 0, time.UTC)
	if snake.TaskType != "repo_info" || snake.Intent != "star count" || len(snake.Steps) != 3 ||
		snake.Timestamp == nil || !snake.Timestamp.Equal(want) || snake.FinalPageURL != "https://github.com/pemdev/pem" ||
		snake.FinalPageTitle != "pemdev/pem" || snake.DurationMs != 5400 || snake.ExtractionResults["stars"] != "1.2k" {
		t.Errorf("parsed %+v", snake)
	}
	st := snake.Steps[2]
	if st.Action != "get_text" || st.Selector != "#repo-stars-counter-star" || st.DurationMs != 120 || st.Result != "1.2k" ||
		st.ErrorKind != "" || st.HTTPStatus != 0 || st.OK == nil || !*st.OK {
		t.Errorf("step 3 = %+v", st)
	}
}

func TestParseTraceInputEmpty(t *testing.T) {
	for _, in := range []string{"", "  ", "null", "{}", " {} \n"} {
		got, err := engine.ParseTraceInput([]byte(in))
		if err != nil || !reflect.DeepEqual(got, &engine.TraceInput{}) {
			t.Errorf("ParseTraceInput(%q) = %+v, %v; want an empty trace", in, got, err)
		}
	}
	got, err := engine.ParseTraceInput([]byte(`{"steps":null,"intent":"x"}`))
	if err != nil || len(got.Steps) != 0 || got.Intent != "x" {
		t.Errorf("steps null: %+v, %v", got, err)
	}
}

func TestParseTraceInputErrors(t *testing.T) {
	step := `{"action":"click","selector":"#a"}`
	many := "[" + strings.TrimSuffix(strings.Repeat(step+",", engine.MaxSteps+1), ",") + "]"
	tests := []struct{ name, in, mention string }{
		{"unknown field named as spelled", `{"intent":"x","taskTipe":"y"}`, `"taskTipe"`},
		{"unknown snake field", `{"extraction_result":{}}`, `"extraction_result"`},
		{"unknown step field", `{"steps":[{"action":"click","colour":"red"}]}`, `steps[0]: unknown field "colour"`},
		{"two spellings", `{"task_type":"a","taskType":"b"}`, `"taskType" and "task_type"`},
		{"two spellings in a step", `{"steps":[{"action":"click","duration_ms":1,"durationMs":2}]}`, "steps[0]"},
		{"not an object", `[1,2,3]`, "JSON object"},
		{"a string", `"hello"`, "JSON object"},
		{"broken JSON", `{"intent":`, "JSON"},
		{"steps not a list", `{"steps":{"action":"click"}}`, "steps must be a list"},
		{"step without action", `{"steps":[{"selector":"#a"}]}`, "steps[0] has no action"},
		{"too many steps", `{"steps":` + many + `}`, fmt.Sprint(engine.MaxSteps)},
		{"value too long", `{"steps":[{"action":"type","value":"` + strings.Repeat("x", engine.MaxValue+1) + `"}]}`, "steps[0]"},
		{"wrong type", `{"duration_ms":"fast"}`, "duration_ms"},
		{"too large", `{"intent":"` + strings.Repeat("x", engine.MaxTraceBytes) + `"}`, "cap"},
	}
	for _, tt := range tests {
		_, err := engine.ParseTraceInput([]byte(tt.in))
		if !errors.Is(err, engine.ErrBadTrace) {
			t.Errorf("%s: err = %.300v, want ErrBadTrace", tt.name, err)
			continue
		}
		if !strings.Contains(err.Error(), tt.mention) {
			t.Errorf("%s: error %.300q does not mention %s", tt.name, err, tt.mention)
		}
	}
	// Exactly at the cap is fine.
	ok := `{"steps":[` + strings.TrimSuffix(strings.Repeat(step+",", engine.MaxSteps), ",") + `]}`
	if in, err := engine.ParseTraceInput([]byte(ok)); err != nil || len(in.Steps) != engine.MaxSteps {
		t.Errorf("%d steps: %v", engine.MaxSteps, err)
	}
}

// testEngine is an Engine at a fixed time with seeded ids (not safe for
// concurrent Saves: use Rand nil there).
func testEngine(store engine.Store, now time.Time) *engine.Engine {
	var seed [32]byte
	return &engine.Engine{Store: store, Now: func() time.Time { return now }, Rand: rand.NewChaCha8(seed), Writer: "test"}
}

func TestBuildTraceOutcomes(t *testing.T) {
	e := testEngine(nil, t0)
	tests := []struct {
		req     string
		trace   string
		want    engine.Outcome
		wantErr bool
	}{
		{"", "", engine.Success, false},
		{"success", "", engine.Success, false},
		{"SUCCESS", "", engine.Success, false},
		{"completed", "", engine.Success, false},
		{"ok", "", engine.Success, false},
		{"failure", "", engine.Failure, false},
		{"failed", "", engine.Failure, false},
		{"error", "", engine.Failure, false},
		{"", "failure", engine.Failure, false},
		{"success", "failure", engine.Success, false}, // the flag overrides the trace
		{"maybe", "", "", true},
	}
	for _, tt := range tests {
		tr, err := e.BuildTrace(engine.SaveRequest{URL: "https://example.com/", Outcome: tt.req, Trace: &engine.TraceInput{Outcome: tt.trace, Steps: oneStep}})
		if tt.wantErr {
			if !errors.Is(err, engine.ErrInvalid) {
				t.Errorf("outcome %q: err = %v, want ErrInvalid", tt.req, err)
			}
			continue
		}
		if err != nil || tr.Outcome != tt.want {
			t.Errorf("outcome %q/%q: %v, %v; want %s", tt.req, tt.trace, tr, err, tt.want)
		}
	}
}

func TestBuildTrace(t *testing.T) {
	e := testEngine(nil, t0)
	in, err := engine.ParseTraceInput(readTestdata(t, "trace_camel.json"))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := e.BuildTrace(engine.SaveRequest{URL: "https://www.GitHub.com/pemdev/pem?utm_source=x#readme", Trace: in, Session: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Domain != "github.com" || tr.URL != "https://github.com/pemdev/pem" || tr.URLPattern != "/pemdev/pem" ||
		tr.Intent != "star count" || tr.IntentKey != "star-count" || tr.Session != "s1" || tr.Writer != "test" ||
		tr.Outcome != engine.Success || tr.FailureCategory != "" || !engine.ValidTraceID(tr.ID) || tr.Format != engine.Format {
		t.Errorf("trace = %+v", tr)
	}
	if !tr.StartedAt.Equal(time.Date(2025, 5, 30, 10, 0, 0, 0, time.UTC)) {
		t.Errorf("StartedAt = %v, want the trace's timestamp", tr.StartedAt)
	}
	if len(tr.Steps) != 3 || tr.Steps[0].Action != "navigate" || tr.Steps[0].URL != "https://github.com/pemdev/pem" || tr.Steps[0].Value != "" ||
		tr.Steps[1].Seq != 2 || tr.Steps[2].Result != "1.2k" || !tr.Steps[2].OK {
		t.Errorf("steps = %+v", tr.Steps)
	}
	if tr.Result.Extracted["stars"] != "1.2k" || tr.Result.FinalURL != "https://github.com/pemdev/pem" {
		t.Errorf("result = %+v", tr.Result)
	}
}

// oneStep makes a trace a run.
var oneStep = []engine.StepInput{{Action: "wait"}}

func TestBuildTraceFailure(t *testing.T) {
	e := testEngine(nil, t0)
	f := false
	tr, err := e.BuildTrace(engine.SaveRequest{URL: "https://example.com/item/4031", Outcome: "failure", Trace: &engine.TraceInput{
		ErrorMessage: "no element matches #item-4031",
		Steps:        []engine.StepInput{{Action: "navigate", URL: "https://example.com/"}, {Action: "click", Selector: "#item-4031", OK: &f}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if tr.FailureCategory != engine.SelectorDrift {
		t.Errorf("category = %q, want selector_drift", tr.FailureCategory)
	}
	// A step with an error and no ok flag failed.
	tr, err = e.BuildTrace(engine.SaveRequest{URL: "https://example.com/", Outcome: "failure", Trace: &engine.TraceInput{
		Steps: []engine.StepInput{{Action: "wait", Error: "Timeout waiting for login"}},
	}})
	if err != nil || tr.Steps[0].OK || tr.FailureCategory != engine.Timing {
		t.Errorf("step with error: ok=%v category=%q err=%v; want failed, timing", tr.Steps[0].OK, tr.FailureCategory, err)
	}
	// A declared category is checked.
	_, err = e.BuildTrace(engine.SaveRequest{URL: "https://example.com/", Outcome: "failure", Trace: &engine.TraceInput{FailureCategory: "gremlins", Steps: oneStep}})
	if !errors.Is(err, engine.ErrInvalid) {
		t.Errorf("bogus category: %v, want ErrInvalid", err)
	}
	// A success carries no category even if one was sent.
	tr, err = e.BuildTrace(engine.SaveRequest{URL: "https://example.com/", Trace: &engine.TraceInput{FailureCategory: "timing", Steps: oneStep}})
	if err != nil || tr.FailureCategory != "" {
		t.Errorf("success with category: %q, %v", tr.FailureCategory, err)
	}
}

func TestBuildTraceRefuses(t *testing.T) {
	e := testEngine(nil, t0)
	future := t0.Add(48 * time.Hour)
	for name, req := range map[string]engine.SaveRequest{
		"no host":         {URL: "https:///x"},
		"no URL":          {},
		"ftp":             {URL: "ftp://example.com/"},
		"unknown action":  {URL: "https://example.com/", Trace: &engine.TraceInput{Steps: []engine.StepInput{{Action: "teleport"}}}},
		"long intent":     {URL: "https://example.com/", Intent: strings.Repeat("x", engine.MaxIntent+1)},
		"two-line intent": {URL: "https://example.com/", Intent: "a\nb"},
		"future":          {URL: "https://example.com/", Trace: &engine.TraceInput{Timestamp: &engine.FlexTime{Time: future}, Steps: []engine.StepInput{{Action: "click"}}}},
		"nothing to save": {URL: "https://example.com/", Trace: &engine.TraceInput{}},
		"notaurl":         {URL: "notaurl", Trace: &engine.TraceInput{Steps: []engine.StepInput{{Action: "click"}}}},
	} {
		if _, err := e.BuildTrace(req); !errors.Is(err, engine.ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
	// The URL may come from the trace.
	if tr, err := e.BuildTrace(engine.SaveRequest{Trace: &engine.TraceInput{URL: "https://example.com/a", Steps: oneStep}}); err != nil || tr.Domain != "example.com" {
		t.Errorf("URL from the trace: %v, %v", tr, err)
	}
}

// TestRedactPasswordField: a value typed into a password field is never
// stored, even with nothing declared secret.
func TestRedactPasswordField(t *testing.T) {
	e := testEngine(nil, t0)
	for _, sel := range []string{"input[type=password]", "input[type='password']", "#password", "#user_passwd", "[name=pin]", "#otp-code",
		"#login-pass", "#userPin", "#cvv", "#card-cvc", "input[autocomplete=cc-csc]", "#cc-number", "[name=cardnumber]", "#card_number",
		"#ssn", "#mfa", "#security-code", "#api-token-field", "#apiKey", "[name=verification_code]", "#recovery-code"} {
		tr, err := e.BuildTrace(engine.SaveRequest{URL: "https://example.com/login", Trace: &engine.TraceInput{
			Task:  "log in; the password is hunter2-xyz",
			Steps: []engine.StepInput{{Action: "type", Selector: "#user", Value: "alice"}, {Action: "type", Selector: sel, Value: "hunter2-xyz"}, {Action: "click", Selector: "#go", Result: "welcome hunter2-xyz"}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		if tr.Steps[1].Value != engine.Redacted {
			t.Errorf("%s: value %q, want %s", sel, tr.Steps[1].Value, engine.Redacted)
		}
		if tr.Steps[0].Value != "alice" {
			t.Errorf("%s: the user name was redacted too: %q", sel, tr.Steps[0].Value)
		}
		if tr.Steps[1].Selector != sel {
			t.Errorf("selector changed: %q → %q", sel, tr.Steps[1].Selector)
		}
		b, _ := json.Marshal(tr)
		if strings.Contains(string(b), "hunter2-xyz") {
			t.Errorf("%s: the password is in the trace: %s", sel, b)
		}
		if len(tr.Redactions) == 0 {
			t.Errorf("%s: no redaction recorded", sel)
		}
	}
	// Fields whose names only contain such a word are typed as they are.
	for _, sel := range []string{"#passenger-name", "#spin-speed", "#search", "#email", "#compass", "#company", "#pinterest-url", "#cardholder-name", "#discount-code"} {
		tr, err := e.BuildTrace(engine.SaveRequest{URL: "https://example.com/", Trace: &engine.TraceInput{
			Steps: []engine.StepInput{{Action: "type", Selector: sel, Value: "ordinary text"}},
		}})
		if err != nil || tr.Steps[0].Value != "ordinary text" {
			t.Errorf("%s: the value was redacted: %+v, %v", sel, tr.Steps, err)
		}
	}
	// Marked sensitive, any field.
	tr, err := e.BuildTrace(engine.SaveRequest{URL: "https://example.com/", Trace: &engine.TraceInput{
		Steps: []engine.StepInput{{Action: "type", Selector: "#answer", Value: "mother's maiden name", Sensitive: true}},
	}})
	if err != nil || tr.Steps[0].Value != engine.Redacted {
		t.Errorf("sensitive step: %+v, %v", tr.Steps, err)
	}
	// A short password value is redacted in its field, and "pass" in a
	// selector is not shredded.
	tr, err = e.BuildTrace(engine.SaveRequest{URL: "https://example.com/", Trace: &engine.TraceInput{
		Steps: []engine.StepInput{{Action: "type", Selector: "#password", Value: "pass"}, {Action: "click", Selector: "#password-submit"}},
	}})
	if err != nil || tr.Steps[0].Value != engine.Redacted || tr.Steps[1].Selector != "#password-submit" || tr.Steps[0].Selector != "#password" {
		t.Errorf("short password: %+v, %v", tr.Steps, err)
	}
	// A placeholder typed into a password field stays (it is no secret).
	tr, _ = e.BuildTrace(engine.SaveRequest{URL: "https://example.com/", Trace: &engine.TraceInput{
		Steps: []engine.StepInput{{Action: "type", Selector: "#password", Value: "{{secret:PW}}"}},
	}})
	if tr.Steps[0].Value != "{{secret:PW}}" {
		t.Errorf("placeholder: %q", tr.Steps[0].Value)
	}
}

// TestRedactDeclaredSecrets: a declared secret appears nowhere in the stored
// trace, in any form, but as its placeholder.
func TestRedactDeclaredSecrets(t *testing.T) {
	const token = "tok_9f8e7d6c5b4a"
	const pw = "p@ss w0rd!"
	e := testEngine(nil, t0)
	e.Secrets = map[string]string{"API_TOKEN": token, "PW": pw, "PIN": "42"}
	in := &engine.TraceInput{
		Task:   "call the API with " + token + " and log in with " + pw,
		Intent: "use " + token,
		URL:    "https://example.com/reset/" + token + "?key=" + url.QueryEscape(pw) + "&k2=" + token,
		Steps: []engine.StepInput{
			{Action: "navigate", URL: "https://example.com/?t=" + token},
			{Action: "type", Selector: "#token", Value: token},
			{Action: "type", Selector: "#pw-field-" + token, Fallbacks: []string{"[data-t=" + token + "]"}, Value: pw},
			{Action: "click", Selector: "#go", Error: "rejected " + token, Result: map[string]any{"echo": pw}},
		},
		ExtractionResults: map[string]any{"token": token, token: "key"},
		Answer:            "the token is " + token,
		FinalPageURL:      "https://example.com/done?t=" + token,
		FinalPageTitle:    "Hello " + pw,
		ErrorMessage:      "server said " + pw,
		Session:           "session-" + token,
		TaskType:          "type-" + token,
		Params:            []string{token},
		Writer:            "me-" + token,
	}
	tr, err := e.BuildTrace(engine.SaveRequest{Trace: in})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(tr)
	if err != nil {
		t.Fatal(err)
	}
	out := string(b)
	for _, form := range []string{token, pw, url.QueryEscape(pw), url.PathEscape(pw), engine.IntentKey("use " + token), "9f8e7d6c5b4a"} {
		if strings.Contains(out, form) {
			t.Errorf("the secret appears as %q in the trace:\n%s", form, out)
		}
	}
	if !strings.Contains(out, engine.SecretPlaceholder("API_TOKEN")) || !strings.Contains(tr.Task, engine.SecretPlaceholder("PW")) {
		t.Errorf("placeholders missing: %s", out)
	}
	if tr.IntentKey != engine.IntentKey(tr.Intent) {
		t.Errorf("intent key %q not made from the redacted intent %q", tr.IntentKey, tr.Intent)
	}
	if !strings.Contains(tr.Intent, "{{secret:API_TOKEN}}") {
		t.Errorf("intent = %q", tr.Intent)
	}
	// A two-character "secret" would shred ordinary text: left alone.
	if !strings.Contains(tr.Task, "with") || strings.Contains(out, "{{secret:PIN}}") {
		t.Errorf("short secret applied: %q", tr.Task)
	}
	if len(tr.Redactions) == 0 {
		t.Error("no redactions recorded")
	}
	for _, r := range tr.Redactions {
		if strings.Contains(r, token) || strings.Contains(r, pw) {
			t.Errorf("redaction note holds the secret: %q", r)
		}
	}
}

// TestRedactOverlappingSecrets: the longer secret is replaced whole.
func TestRedactOverlappingSecrets(t *testing.T) {
	tr := &engine.Trace{Task: "abcd and abcdefgh"}
	engine.Redact(tr, nil, map[string]string{"SHORT": "abcd", "LONG": "abcdefgh"})
	if tr.Task != "{{secret:SHORT}} and {{secret:LONG}}" {
		t.Errorf("Task = %q", tr.Task)
	}
}

func FuzzParseTraceInput(f *testing.F) {
	for _, name := range []string{"trace_snake.json", "trace_camel.json"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{"", "null", "{}", "[]", `{"steps":[null]}`, `{"taskType":"a","task_type":"b"}`, `{"steps":[{"action":"type","selector":"#password","value":"x"}]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		in, err := engine.ParseTraceInput(data)
		if err != nil {
			if !errors.Is(err, engine.ErrBadTrace) {
				t.Fatalf("error %v is not ErrBadTrace", err)
			}
			return
		}
		if len(in.Steps) > engine.MaxSteps {
			t.Fatalf("%d steps accepted", len(in.Steps))
		}
		for i, s := range in.Steps {
			if s.Action == "" || len(s.Value) > engine.MaxValue {
				t.Fatalf("steps[%d] = %+v accepted", i, s)
			}
		}
		// Whatever parsed builds a trace or is refused as invalid; never a panic.
		e := testEngine(nil, t0)
		if _, err := e.BuildTrace(engine.SaveRequest{URL: "https://example.com/", Trace: in}); err != nil && !errors.Is(err, engine.ErrInvalid) {
			t.Fatalf("BuildTrace: %v is not ErrInvalid", err)
		}
	})
}

// SaveTrace takes a typed trace through BuildTrace's checks: the same
// trace as its JSON twin, the same refusals.
func TestSaveTraceMatchesBuildTrace(t *testing.T) {
	ctx := context.Background()
	in, err := engine.ParseTraceInput(readTestdata(t, "trace_camel.json"))
	if err != nil {
		t.Fatal(err)
	}
	built, err := testEngine(nil, t0).BuildTrace(engine.SaveRequest{URL: "https://www.GitHub.com/pemdev/pem?utm_source=x#readme", Trace: in, Session: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	typed := built.Clone()
	typed.Format, typed.ID, typed.Domain, typed.URLPattern, typed.IntentKey = 0, "", "", "", ""
	typed.URL, typed.Writer = "https://www.GitHub.com/pemdev/pem?utm_source=x#readme", ""
	for i := range typed.Steps {
		typed.Steps[i].Seq = 0
	}
	typed.Steps[0].URL, typed.Steps[0].Value = "", "https://github.com/pemdev/pem" // a navigate's target in Value, as BuildTrace accepts it
	st := storetest.NewMemStore()
	res, err := testEngine(st, t0).SaveTrace(ctx, typed, nil)
	if err != nil {
		t.Fatal(err)
	}
	twin, err := testEngine(storetest.NewMemStore(), t0).Save(ctx, engine.SaveRequest{URL: "https://www.GitHub.com/pemdev/pem?utm_source=x#readme", Trace: in, Session: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	twin.ID, twin.TracePath = res.ID, res.TracePath
	if !res.Saved || res.ID != typed.ID || *res != *twin {
		t.Errorf("SaveResult = %+v\nwant Save's %+v", res, twin)
	}
	built.ID = typed.ID
	if !reflect.DeepEqual(typed, built) {
		t.Errorf("typed trace\n%+v\nwant BuildTrace's\n%+v", typed, built)
	}
	got, err := st.Trace(ctx, engine.TraceRef{Domain: typed.Domain, Day: typed.StartedAt.Format("2006-01-02"), ID: typed.ID})
	if err != nil || got.Intent != "star count" {
		t.Fatalf("stored: %+v %v", got, err)
	}

	// A typed value marked sensitive is redacted, here and wherever it recurs.
	pw := &engine.Trace{URL: "https://example.com/login", Outcome: engine.Failure, Result: engine.Result{Answer: "hunter22 rejected"},
		Steps: []engine.Step{{Action: "type", Selector: "#secret-box", Value: "hunter22", OK: true}, {Action: "click", Selector: "#go", OK: false, Error: "no element"}}}
	if _, err := testEngine(storetest.NewMemStore(), t0).SaveTrace(ctx, pw, map[int]bool{0: true}); err != nil {
		t.Fatal(err)
	}
	if pw.Steps[0].Value != engine.Redacted || strings.Contains(pw.Result.Answer, "hunter22") || pw.FailureCategory == "" {
		t.Errorf("sensitive step: %+v, answer %q, category %q", pw.Steps[0], pw.Result.Answer, pw.FailureCategory)
	}

	for name, bad := range map[string]*engine.Trace{
		"no url":          {Outcome: engine.Success},
		"outcome":         {URL: "https://example.com/", Outcome: "maybe"},
		"action":          {URL: "https://example.com/", Outcome: engine.Success, Steps: []engine.Step{{Action: "teleport"}}},
		"category":        {URL: "https://example.com/", Outcome: engine.Failure, FailureCategory: "gremlins"},
		"two-line intent": {URL: "https://example.com/", Outcome: engine.Success, Intent: "a\nb"},
	} {
		if _, err := testEngine(st, t0).SaveTrace(ctx, bad, nil); !errors.Is(err, engine.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

func TestSnakeCase(t *testing.T) {
	for in, want := range map[string]string{
		"url": "url", "taskType": "task_type", "task_type": "task_type", "finalPageURL": "final_page_url",
		"URL": "url", "HTTPStatus": "http_status", "TaskType": "task_type", "step2Name": "step2_name", "already_Snake": "already_snake",
	} {
		if got := engine.SnakeCase(in); got != want {
			t.Errorf("SnakeCase(%q) = %q, want %q", in, got, want)
		}
	}
}
