package engine_test

import (
	"testing"
	"time"

	"github.com/pemdev/pem/engine"
)

// Browser4's ActionStep (sequence, action, selector?, value?, result?,
// duration_ms?, timestamp) has no ok: a failed step says so in its result and
// in the trace's error_message. These fixtures are in its exact shape.
func TestBrowser4Shape(t *testing.T) {
	e := testEngine(nil, t0.AddDate(2, 0, 0))
	tests := []struct {
		file       string
		outcome    engine.Outcome
		category   engine.FailureCategory
		failed     []int // seq of the steps that failed
		finalURL   string
		pattern    string
		started    time.Time
		extracted  string
		stepErrors map[int]string
	}{
		{"browser4_failed_click.json", engine.Failure, engine.SelectorDrift, []int{3}, "https://shop.example.com/dp/B0012345", "/s?k=*",
			time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC), "", map[int]string{3: "error: element not found"}},
		// camelCase, Unix-millisecond timestamps; a timed-out step recovered by a
		// fallback: the run succeeded, the step failed.
		{"browser4_camel.json", engine.Success, "", []int{2}, "https://shop.example.com/dp/B0012345", "/dp/*",
			time.UnixMilli(1733050000000).UTC(), "$9.99", map[int]string{2: "TimeoutException: waiting for selector #priceblock"}},
	}
	for _, tt := range tests {
		in, err := engine.ParseTraceInput(readTestdata(t, tt.file))
		if err != nil {
			t.Fatalf("%s: %v", tt.file, err)
		}
		tr, err := e.BuildTrace(engine.SaveRequest{URL: in.Steps[0].Value, Trace: in})
		if err != nil {
			t.Fatalf("%s: %v", tt.file, err)
		}
		if tr.Outcome != tt.outcome || tr.FailureCategory != tt.category {
			t.Errorf("%s: %s/%s, want %s/%s", tt.file, tr.Outcome, tr.FailureCategory, tt.outcome, tt.category)
		}
		failed := map[int]bool{}
		for _, s := range tt.failed {
			failed[s] = true
		}
		for _, s := range tr.Steps {
			if s.OK == failed[s.Seq] {
				t.Errorf("%s: step %d ok=%v", tt.file, s.Seq, s.OK)
			}
			if want := tt.stepErrors[s.Seq]; s.Error != want {
				t.Errorf("%s: step %d error %q, want %q", tt.file, s.Seq, s.Error, want)
			}
		}
		if tr.Steps[0].URL == "" || tr.Result.FinalURL != tt.finalURL || tr.Result.FinalTitle != "Widget, blue" || tr.URLPattern != tt.pattern || !tr.StartedAt.Equal(tt.started) {
			t.Errorf("%s: url %q final %q %q pattern %q started %v", tt.file, tr.Steps[0].URL, tr.Result.FinalURL, tr.Result.FinalTitle, tr.URLPattern, tr.StartedAt)
		}
		if tt.extracted != "" && tr.Result.Extracted["price"] != tt.extracted {
			t.Errorf("%s: extracted %v", tt.file, tr.Result.Extracted)
		}
	}
}

// error_message naming a step's selector fails that step; a failure with no
// outcome given is a failure; a status word read from the page is no error.
func TestBrowser4ErrorMessageNamesTheStep(t *testing.T) {
	e := testEngine(nil, t0)
	in, err := engine.ParseTraceInput([]byte(`{"steps":[{"sequence":1,"action":"navigate","value":"https://example.com/"},{"sequence":2,"action":"get_text","selector":"#build","result":"Failed"},{"sequence":3,"action":"click","selector":"#confirm"}],"error_message":"Element #confirm is not clickable: covered by .modal"}`))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := e.BuildTrace(engine.SaveRequest{URL: "https://example.com/", Trace: in})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Outcome != engine.Failure || !tr.Steps[1].OK || tr.Steps[2].OK || tr.FailureCategory != engine.OverlayBlocked {
		t.Errorf("outcome %s steps %+v category %s", tr.Outcome, tr.Steps, tr.FailureCategory)
	}
}
