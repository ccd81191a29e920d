package store

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/pemdev/pem/engine"
	"golang.org/x/sys/unix"
)

// TestWatchLimitIsLogged: a directory the change watch cannot watch (the
// user's inotify limit, ENOSPC) turns kept answers off for its domain only —
// the answers stay those of a store that reads every file — and says so
// once in the log, with what to do; it used to be silent.
func TestWatchLimitIsLogged(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if _, err := Init(ctx, dir); err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	st, err := Open(dir, &Options{Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	defer func(old func(int, string) (int32, error)) { watchDir = old }(watchDir)
	watchDir = func(fd int, abs string) (int32, error) {
		if strings.Contains(abs, "/full.example") {
			return 0, unix.ENOSPC
		}
		return addWatch(fd, abs)
	}
	now := time.Now().UTC()
	for _, d := range []string{"full.example", "fine.example"} {
		f := &engine.Facts{Format: 1, Domain: d, Intent: "count issues", IntentKey: "count-issues", Status: engine.Candidate,
			URLPatterns: []string{"/issues"}, Steps: []engine.Step{{Seq: 1, Action: "get_text", Selector: "#n"}},
			Provenance: engine.Provenance{LastVerified: now.Add(-time.Hour)}}
		if _, err := st.PutFacts(ctx, f); err != nil {
			t.Fatal(err)
		}
	}
	e := engine.New(st)
	for range 3 {
		for _, d := range []string{"full.example", "fine.example"} {
			r, err := e.Query(ctx, "https://"+d+"/issues", "count issues")
			if err != nil || r.IntentKey != "count-issues" {
				t.Fatalf("query of %s: %+v, %v", d, r, err)
			}
		}
	}
	if _, ok := st.Generation(ctx, "full.example"); ok {
		t.Error("the domain whose directory could not be watched still has a generation: its answers would be kept unwatched")
	}
	if _, ok := st.Generation(ctx, "fine.example"); !ok {
		t.Error("the other domain lost its change watch too")
	}
	out := logged.String()
	if n := strings.Count(out, "the change watch could not watch a directory"); n != 1 {
		t.Errorf("the lost watch was logged %d times, want once:\n%s", n, out)
	}
	for _, want := range []string{"domain=full.example", "max_user_watches", "computed anew"} {
		if !strings.Contains(out, want) {
			t.Errorf("the log line lacks %q:\n%s", want, out)
		}
	}
}
