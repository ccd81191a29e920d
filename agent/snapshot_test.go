package agent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pemdev/pem/engine"
)

// A planned run cancelled mid-task leaves a resumable snapshot; resuming it
// goes back to the page it stood on, keeps its steps and session, and
// archives the snapshot when it ends.
func TestSnapshotAndResumePlannedRun(t *testing.T) {
	e := newEnv()
	dir := t.TempDir()
	task := "how many open issues"
	ctx, cancel := context.WithCancel(context.Background())
	first := &scriptPlanner{acts: []Action{{Tool: "click", Selector: "#nav-issues"}}, onCall: func(n int) error {
		if n == 2 {
			cancel() // after the click: the user presses Ctrl-C
			return ctx.Err()
		}
		return nil
	}}
	cfg := e.cfg(task, first)
	cfg.SnapshotDir, cfg.RunID = dir, "run-a"
	res, err := Run(ctx, cfg)
	if !errors.Is(err, context.Canceled) || res.RunID != "run-a" {
		t.Fatalf("first run: %v %+v", err, res)
	}
	snap, err := LoadSnapshot(dir, "run-a")
	if err != nil {
		t.Fatal(err)
	}
	if snap.Status != SnapInterrupted || len(snap.Completed) != 2 || snap.Completed[1].Selector != "#nav-issues" ||
		snap.CurrentURL != fakeBase+"/issues" || !strings.Contains(snap.LastAction, "click #nav-issues") ||
		snap.Task != task || snap.Session != "run-a" || len(snap.Pending) != 1 || !strings.Contains(snap.Goal, task) ||
		!strings.Contains(snap.Blocking, "cancel") || snap.PlannerCalls != 2 {
		t.Fatalf("snapshot %+v", snap)
	}
	firstTrace := e.only(t)

	// Resume: a new process, a new planner.
	startNavs := func() int {
		e.site.mu.Lock()
		defer e.site.mu.Unlock()
		n := 0
		for _, c := range e.site.calls {
			if c == "navigate "+fakeBase+"/" {
				n++
			}
		}
		return n
	}
	navBefore := startNavs()
	second := &scriptPlanner{acts: []Action{{Tool: "extract", Value: "open issues"}, {Tool: "done", Value: "7"}}}
	rc := RunConfig{Engine: e.eng, Browser: e.br, Planner: second, Now: e.now, SnapshotDir: dir}
	snap.Configure(&rc)
	res, err = Run(context.Background(), rc)
	if err != nil || !res.Success || res.Answer != "7" || !res.Resumed || res.RunID != "run-a" {
		t.Fatalf("resumed: %v %+v\n%s", err, res, strings.Join(res.ActionLog, "\n"))
	}
	if got := startNavs(); got != navBefore {
		t.Errorf("the resumed run went back to the start page (%d navigations, were %d)", got, navBefore)
	}
	if st := second.states[0]; st.URL != fakeBase+"/issues" || len(st.History) != 3 || st.History[1].Action.Selector != "#nav-issues" {
		t.Fatalf("the resumed planner started at %s with %d turns of history", st.URL, len(st.History))
	}
	tr := e.only(t)
	if tr.ID == firstTrace.ID || tr.Session != firstTrace.Session || tr.Outcome != engine.Success || len(tr.Steps) != 4 ||
		tr.Steps[1].Selector != "#nav-issues" || tr.Steps[2].Action != "navigate" || tr.Steps[2].URL != fakeBase+"/issues" || tr.PlannerCalls != 4 {
		t.Fatalf("resumed trace: session %q (first %q) %s steps %+v planner calls %d", tr.Session, firstTrace.Session, tr.Outcome, tr.Steps, tr.PlannerCalls)
	}
	if _, err := os.Stat(filepath.Join(dir, "run-a.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the finished run's snapshot is still live: %v", err)
	}
	old, err := LoadSnapshot(dir, "run-a")
	if !errors.Is(err, ErrNoSnapshot) || !strings.Contains(err.Error(), "finished") || old == nil || old.Status != SnapDone || old.TraceID != tr.ID || old.Answer != "7" {
		t.Fatalf("archived snapshot: %+v, %v", old, err)
	}
}

// A replay interrupted mid-route resumes at the next route step: the steps
// it had done are not done again, and no planner is asked.
func TestResumeReplaySkipsCompletedSteps(t *testing.T) {
	e := newEnv()
	intent := "author of the first issue"
	e.verify(t, intent, []engine.Step{
		{Seq: 1, Action: "navigate", URL: fakeBase + "/", OK: true},
		{Seq: 2, Action: "click", Selector: "#nav-issues", OK: true},
		{Seq: 3, Action: "click", Selector: "#issue-1", OK: true},
		{Seq: 4, Action: "extract", Value: "author", OK: true},
	})
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	e.site.onNavigate = func(c context.Context, u string) error {
		if strings.HasSuffix(u, "/issues/1") {
			cancel() // killed while the third step loads
			return c.Err()
		}
		return nil
	}
	cfg := e.cfg(intent, noPlanner{t})
	cfg.SnapshotDir, cfg.RunID = dir, "run-b"
	if _, err := Run(ctx, cfg); !errors.Is(err, context.Canceled) {
		t.Fatalf("first run: %v", err)
	}
	e.site.onNavigate = nil
	snap, err := LoadSnapshot(dir, "run-b")
	if err != nil {
		t.Fatal(err)
	}
	if snap.Tier != engine.P1 || snap.ReplayDone != 2 || snap.CurrentURL != fakeBase+"/issues" || len(snap.Pending) == 0 || !strings.Contains(snap.Pending[0], "#issue-1") {
		t.Fatalf("snapshot tier %s replay_done %d at %s pending %q", snap.Tier, snap.ReplayDone, snap.CurrentURL, snap.Pending)
	}
	clicks := e.site.countCalls("click #nav-issues")
	rc := RunConfig{Engine: e.eng, Browser: e.br, Planner: noPlanner{t}, Now: e.now, SnapshotDir: dir}
	snap.Configure(&rc)
	res, err := Run(context.Background(), rc)
	if err != nil || !res.Success || res.Answer != "alice" || res.PlannerCalls != 0 || res.Tier != engine.P1 {
		t.Fatalf("resumed: %v %+v\n%s", err, res, strings.Join(res.ActionLog, "\n"))
	}
	if got := e.site.countCalls("click #nav-issues"); got != clicks {
		t.Errorf("the resumed replay clicked #nav-issues again (%d, was %d)", got, clicks)
	}
}

// Snapshots never hold a secret: declared ones, a password typed into an
// undeclared field, or a credential in the task.
func TestSnapshotHoldsNoSecrets(t *testing.T) {
	e := newEnv()
	dir := t.TempDir()
	token := "ghp_" + strings.Repeat("Z", 36)
	p := &scriptPlanner{acts: []Action{
		{Tool: "click", Selector: "#nav-login"},
		{Tool: "type", Selector: "#user", Value: "{{secret:user}}"},
		{Tool: "type", Selector: "#pw", Value: "hunter2-undeclared"},
	}, onCall: func(n int) error {
		if n == 4 {
			return errors.New("model down")
		}
		return nil
	}}
	cfg := e.cfg("sign in with token "+token+" and read notifications", p)
	cfg.SnapshotDir, cfg.RunID, cfg.Secrets = dir, "run-c", map[string]string{"user": "octo-secret-login"}
	cfg.Params = map[string]string{"api_key": "k-0123456789abcdef"}
	if _, err := Run(context.Background(), cfg); err == nil {
		t.Fatal("the planner error did not end the run")
	}
	data, err := os.ReadFile(filepath.Join(dir, "archive", "run-c.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"octo-secret-login", "hunter2-undeclared", token, "k-0123456789abcdef"} {
		if strings.Contains(string(data), secret) {
			t.Errorf("the snapshot holds %q:\n%s", secret, data)
		}
	}
	if !strings.Contains(string(data), "{{secret:user}}") {
		t.Errorf("the snapshot lost the placeholder:\n%s", data)
	}
	if info, err := os.Stat(filepath.Join(dir, "archive", "run-c.json")); err != nil || info.Mode().Perm()&0o077 != 0 {
		t.Errorf("snapshot mode %v, %v: want private to the user", info.Mode(), err)
	}
}

func TestSnapshotIsBounded(t *testing.T) {
	s := &Snapshot{Format: snapshotFormat, RunID: "big", Task: strings.Repeat("task ", 100)}
	for i := 0; i < 400; i++ {
		s.Completed = append(s.Completed, engine.Step{Seq: i + 1, Action: "type", Selector: "#x", Value: strings.Repeat("v", 300), Result: strings.Repeat("r", 1000), OK: true})
	}
	data, err := encodeSnapshot(s, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > MaxSnapshotBytes || s.Omitted == 0 || len(s.Completed)+s.Omitted != 400 {
		t.Fatalf("%d bytes, %d steps kept, %d omitted", len(data), len(s.Completed), s.Omitted)
	}
	if last := s.Completed[len(s.Completed)-1]; last.Seq != 400 {
		t.Errorf("the newest steps must be kept; last is %d", last.Seq)
	}
}

func TestLoadSnapshotErrors(t *testing.T) {
	dir := t.TempDir()
	for _, id := range []string{"../x", "", strings.Repeat("a", 65), "a b"} {
		if _, err := LoadSnapshot(dir, id); err == nil || errors.Is(err, ErrNoSnapshot) {
			t.Errorf("run id %q: %v, want a bad-id error", id, err)
		}
	}
	if _, err := LoadSnapshot(dir, "nosuch"); !errors.Is(err, ErrNoSnapshot) {
		t.Errorf("missing: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "bad.json"), []byte(`{"format":1,"run_id":"bad","extra":1}`), 0o600)
	if _, err := LoadSnapshot(dir, "bad"); err == nil || !strings.Contains(err.Error(), "delete it") {
		t.Errorf("unknown field: %v", err)
	}
}
