package engine_test

import (
	"errors"
	"testing"

	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store/storetest"
)

func TestEntryView(t *testing.T) {
	e := tickingEngine(storetest.NewMemStore())
	save(t, e, engine.SaveRequest{URL: "https://github.com/pemdev/pem", Trace: starTrace(t), Session: "s1"})
	save(t, e, engine.SaveRequest{URL: "https://github.com/pemdev/pem", Trace: starTrace(t), Session: "s2"})
	fail := starTrace(t)
	fail.Outcome = "failure"
	save(t, e, engine.SaveRequest{URL: "https://github.com/pemdev/pem", Trace: fail, Session: "s3", Outcome: "failure"})

	v, err := e.Entry(ctx, "github.com", "star-count")
	if err != nil {
		t.Fatal(err)
	}
	if v.URL != "https://github.com/pemdev/pem" || v.Intent != "star count" || v.Pending != 3 || len(v.Evidence) != 3 {
		t.Fatalf("view: url %q intent %q pending %d evidence %d", v.URL, v.Intent, v.Pending, len(v.Evidence))
	}
	if v.Evidence[0].Session != "s1" || v.Evidence[2].Outcome != engine.Failure {
		t.Errorf("evidence not oldest first: %+v", v.Evidence)
	}
	// The Memory section and the recall are what an agent on that page gets.
	want, err := e.Memory(ctx, "https://github.com/pemdev/pem", "star count", 0)
	if err != nil {
		t.Fatal(err)
	}
	if v.Memory != want || v.Memory == "" {
		t.Errorf("memory:\n%s\nwant:\n%s", v.Memory, want)
	}
	r := query(t, e, "https://github.com/pemdev/pem", "star count")
	if v.Recall.Tier != r.Tier || v.Recall.Confidence != r.Confidence || len(v.Recall.Reasons) == 0 {
		t.Errorf("recall %s %.2f, query %s %.2f", v.Recall.Tier, v.Recall.Confidence, r.Tier, r.Confidence)
	}
	if _, err := e.Entry(ctx, "github.com", "no-such-thing"); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("unknown key: %v, want ErrNotFound", err)
	}
	if _, err := e.Entry(ctx, "github.com", "../x"); !errors.Is(err, engine.ErrInvalid) {
		t.Errorf("bad key: %v, want ErrInvalid", err)
	}
}

func TestPageOf(t *testing.T) {
	for pattern, want := range map[string]string{
		"/":                      "https://example.com/",
		"/acme/widgets/issues/*": "https://example.com/acme/widgets/issues/1",
		"/search?q=*&type=*":     "https://example.com/search?q=x&type=x",
	} {
		if got := engine.PageOf("example.com", pattern); got != want {
			t.Errorf("PageOf(%q) = %q, want %q", pattern, got, want)
		}
	}
}
