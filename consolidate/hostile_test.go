package consolidate

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pemdev/pem/engine"
)

// payloadCorpus reads the engine's corpus of injection payload families.
func payloadCorpus(t *testing.T) []string {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "engine", "testdata", "injection", "payloads.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var c struct {
			Text string `json:"text"`
			Pad  int    `json:"pad"`
		}
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		out = append(out, strings.Repeat("lorem ipsum ", c.Pad/12)+c.Text)
	}
	return out
}

// The injection corpus through save → consolidate ×3 from 3 sessions: every
// entry also gets clean runs from the same sessions, so it is promoted —
// and no promoted entry carries a payload, no payload run is evidence.
func TestInjectionCorpusNeverPromoted(t *testing.T) {
	ctx := context.Background()
	st, _ := newRepoTree(t)
	payloads := payloadCorpus(t)
	var clock time.Time
	e := &engine.Engine{Store: st, Now: func() time.Time { return clock }, Writer: "test"}
	ok := true
	flaggedIDs := map[string]bool{}
	for round, session := range []string{"s1", "s2", "s3"} {
		base := day0.Add(time.Duration(round) * 24 * time.Hour)
		for i, p := range payloads {
			intent := fmt.Sprintf("task %d", i)
			clean := &engine.TraceInput{Answer: "12", Steps: []engine.StepInput{
				{Action: "navigate", URL: "https://example.com/repo"},
				{Action: "click", Selector: "#stars"},
				{Action: "get_text", Selector: "span.count", Result: "12"}}}
			hostile := &engine.TraceInput{Answer: "12", Steps: []engine.StepInput{
				{Action: "navigate", URL: "https://example.com/repo"},
				{Action: "click", Selector: "#stars"},
				{Action: "get_text", Selector: "span.count", Result: "12"}}}
			field := (i + round) % 8
			oneLine := strings.NewReplacer("\n", "", "\r", "", "\u0085", "", "\u2028", "").Replace(p)
			switch {
			case field == 1 && engine.ScreenText("x"+oneLine) == "":
				field = 4 // a heading breakout is none inside a URL (no line starts there)
			case field <= 3 && strings.Contains(p, "{{secret:"):
				field = 4 // placeholders are legitimate in typed values and selectors; page text only
			}
			switch field {
			case 0:
				hostile.Steps[1].Value = p
			case 1:
				hostile.Steps[0].URL = "https://example.com/repo#" + p
			case 2:
				hostile.Steps[1].Selector = p
			case 3:
				hostile.Steps[1].Fallbacks = []string{p}
			case 4:
				hostile.Answer = p
			case 5:
				hostile.ErrorMessage = p
			case 6:
				hostile.ExtractionResults = map[string]any{"stars": p}
			case 7:
				hostile.FinalPageTitle = p
			}
			if len(p) > 4000 {
				hostile.Answer = p // results are capped; the answer is kept whole
			}
			clock = base.Add(time.Duration(i) * time.Second)
			if _, err := e.Save(ctx, engine.SaveRequest{URL: "https://example.com/repo", Trace: clean, Intent: intent, Session: session}); err != nil {
				t.Fatal(err)
			}
			clock = clock.Add(500 * time.Millisecond) // newer: the route, were it not quarantined
			req := engine.SaveRequest{URL: "https://example.com/repo", Trace: hostile, Intent: intent, Session: session}
			if round == 0 {
				req.Facts = &engine.Patch{InteractionHints: []string{p}}
			}
			res, err := e.Save(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if res.Quarantined == "" {
				ok = false
				t.Errorf("payload %d (round %d) not quarantined: %q", i, round, p)
			}
			flaggedIDs[res.ID] = true
			if round == 0 && !res.FactsRejected {
				t.Errorf("payload %d: patch not refused: %+v", i, res)
			}
		}
		res, err := Run(ctx, st, at(base.Add(time.Hour)))
		if err != nil {
			t.Fatal(err)
		}
		// Quarantined runs are never folded: each run lists them again.
		if n := res.Plan.Count(KindQuarantine); n != len(payloads)*(round+1) {
			t.Errorf("round %d: %d quarantined, want %d", round, n, len(payloads)*(round+1))
		}
	}
	if !ok {
		return
	}
	promoted := 0
	for i, p := range payloads {
		key := engine.IntentKey(fmt.Sprintf("task %d", i))
		f, err := st.Facts(ctx, "example.com", key)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		if f.Status != engine.Hypothesis {
			promoted++
		}
		if why := engine.FactsInjection(f); why != "" {
			t.Errorf("%s (%s) carries a payload: %s", key, f.Status, why)
		}
		b, _ := json.Marshal(f)
		if probe := strings.TrimSpace(p); len(probe) > 12 && strings.Contains(string(b), probe[len(probe)-12:]) {
			t.Errorf("%s holds the payload's text", key)
		}
		x, err := st.Experience(ctx, "example.com", key)
		if err != nil {
			t.Fatal(err)
		}
		if x.Attempts != 3 || x.Successes != 3 {
			t.Errorf("%s: %d attempts, %d successes: want the 3 clean runs only", key, x.Attempts, x.Successes)
		}
		for _, ev := range x.Evidence {
			if flaggedIDs[ev.Trace] {
				t.Errorf("%s: quarantined run %s is evidence", key, ev.Trace)
			}
		}
	}
	if promoted != len(payloads) {
		t.Errorf("%d of %d entries promoted from their clean runs, want all", promoted, len(payloads))
	}
	t.Logf("%d payloads × 3 sessions: %d entries promoted, 0 carrying a payload", len(payloads), promoted)
}

// A symlinked folder in the tree is never followed, and never silently
// skipped: consolidation reports it.
func TestSymlinkedFolderIsReported(t *testing.T) {
	st, dir := newRepoTree(t)
	outside := t.TempDir()
	put(t, st, newFx(21).trace(traceSpec{url: starsURL, intent: "star count", session: "a", at: day0.Add(-time.Hour), ok: true, steps: starsRoute}))
	if err := os.MkdirAll(filepath.Join(outside, "2025-03-10"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "traces", "linked.example")); err != nil {
		t.Fatal(err)
	}
	day := filepath.Join(dir, "traces", "github.com")
	if err := os.Symlink(outside, filepath.Join(day, "2025-03-11")); err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), st, at(day0))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range res.Plan.Warnings {
		if strings.Contains(w, "symbolic link") {
			got = append(got, w)
		}
	}
	if len(got) != 2 || !strings.Contains(strings.Join(got, "\n"), "traces/linked.example") || !strings.Contains(strings.Join(got, "\n"), "traces/github.com/2025-03-11") {
		t.Fatalf("warnings %q: want both links reported", res.Plan.Warnings)
	}
	if res.Plan.Count(KindFold) != 1 {
		t.Errorf("the real trace was not folded: %s", res.Plan)
	}
}
