package store_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/pemdev/pem/engine"
)

// The first save of a domain's day creates the day directory (on Linux,
// relative to the domain directory opened once): the trace is there, a
// later process's index lists it, a domain seen for the first time gets
// its directory the same way, and a day directory or domain directory that is a
// symbolic link is refused with nothing written through it.
func TestSaveCreatesTheDayDirectory(t *testing.T) {
	ctx := context.Background()
	s := newTree(t)
	root := s.Root()
	day0 := time.Date(2025, 5, 1, 12, 0, 0, 0, time.UTC)
	e := engine.New(s)
	e.Now = func() time.Time { return day0.Add(48 * time.Hour) }
	var saved []string
	for i := range 6 {
		// example.com's traces directory exists after the first save;
		// every save is on a new day.
		res, err := e.Save(ctx, engine.SaveRequest{URL: "https://example.com/p", Intent: "find the price",
			Trace: &engine.TraceInput{StartedAt: &engine.FlexTime{Time: day0.Add(time.Duration(i) * -24 * time.Hour)},
				Steps: []engine.StepInput{{Action: "navigate", URL: "https://example.com/p"}}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(res.TracePath))); err != nil {
			t.Fatalf("save %d: %v", i, err)
		}
		q := engine.New(openLater(t, root))
		q.Now = e.Now
		ans, err := q.Query(ctx, "https://example.com/p", "find the price")
		if err != nil {
			t.Fatal(err)
		}
		if ans.SuccessCount != i+1 || res.Confidence != ans.Confidence || res.RetrievalTier != ans.Tier {
			t.Errorf("save %d reports %.2f %s; a later process counts %d successes, %.2f %s", i, res.Confidence, res.RetrievalTier, ans.SuccessCount, ans.Confidence, ans.Tier)
		}
		saved = append(saved, res.ID)
	}
	refs, err := openLater(t, root).IntentTraceRefs(ctx, "example.com", engine.IntentKey("find the price"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(saved)
	if got := ids(refs); !slices.Equal(got, saved) {
		t.Errorf("a later process lists %v, want %v", got, saved)
	}
	days, _ := os.ReadDir(filepath.Join(root, "traces", "example.com"))
	if len(days) != 6 {
		t.Errorf("%d day directories, want 6", len(days))
	}

	// A day directory that is a symlink (to another day of the tree).
	tr := func(domain string, at time.Time) *engine.Trace {
		id, err := engine.NewTraceID(at, nil)
		if err != nil {
			t.Fatal(err)
		}
		return &engine.Trace{Format: 1, ID: id, Domain: domain, URL: "https://" + domain + "/", Intent: "x", IntentKey: "x",
			StartedAt: at, Outcome: engine.Success, Steps: []engine.Step{{Seq: 1, Action: "navigate", URL: "https://" + domain + "/"}}}
	}
	target := filepath.Join(root, "traces", "example.com", day0.Format("2006-01-02"))
	link := filepath.Join(root, "traces", "example.com", "2024-01-01")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadDir(target)
	if _, err := s.PutTrace(ctx, tr("example.com", time.Date(2024, 1, 1, 9, 0, 0, 0, time.UTC))); !errors.Is(err, engine.ErrUnsafePath) {
		t.Errorf("PutTrace into a symlinked day directory: err = %v, want ErrUnsafePath", err)
	}
	// A domain directory that is a symlink, the day missing under it.
	if err := os.MkdirAll(filepath.Join(root, "traces", "real.example"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "traces", "real.example"), filepath.Join(root, "traces", "link.example")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutTrace(ctx, tr("link.example", day0)); !errors.Is(err, engine.ErrUnsafePath) {
		t.Errorf("PutTrace under a symlinked domain directory: err = %v, want ErrUnsafePath", err)
	}
	if after, _ := os.ReadDir(target); len(after) != len(before) {
		t.Errorf("a trace was written through the day symlink: %d files, had %d", len(after), len(before))
	}
	if ents, _ := os.ReadDir(filepath.Join(root, "traces", "real.example")); len(ents) != 0 {
		t.Errorf("a write went through the domain symlink: %v", ents)
	}
	for _, p := range []string{link, filepath.Join(root, "traces", "link.example"), filepath.Join(root, "traces", "real.example")} {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	// A new domain: its traces directory is missing too.
	got, err := s.PutTrace(ctx, tr("new.example", day0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(got))); err != nil {
		t.Error(err)
	}
}
