package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/pemdev/pem/engine"
)

// Task snapshots (DESIGN §7): after each step a run with a RunID and a
// SnapshotDir writes where it stands — task, current goal, completed and
// pending items, current URL, last successful action, blocking issue — to
// <SnapshotDir>/<run-id>.json, so that a run killed at any point (even by
// SIGKILL, which deposits no trace) can be resumed (RunConfig.Resume, pem
// agent run --resume RUN_ID). A run that ends with an answer or a failure
// the site caused moves its snapshot to <SnapshotDir>/archive/; a run that
// was cancelled or stopped before an unapproved step keeps it, resumable.
//
// Snapshots are local state: the caller puts SnapshotDir where git never
// looks (pem: the tree's git directory). They are bounded (MaxSnapshotBytes)
// and scrubbed like a trace (declared secrets, password fields, undeclared
// credentials) before they are written.

// Snapshot statuses.
const (
	SnapRunning     = "running"     // steps are being taken (or the process died)
	SnapInterrupted = "interrupted" // cancelled (Ctrl-C, SIGTERM, an MCP cancel): resumable
	SnapBlocked     = "blocked"     // stopped before a step nobody approved: resumable
	SnapDone        = "done"        // ended with an answer: archived
	SnapFailed      = "failed"      // ended without one: archived
)

// MaxSnapshotBytes caps a snapshot file; MaxArchived the archived ones kept.
const (
	MaxSnapshotBytes = 64 << 10
	MaxArchived      = 200
	snapshotFormat   = 1
)

// ErrNoSnapshot is returned (wrapped, with the run id) by LoadSnapshot for
// a run id that has no resumable snapshot.
var ErrNoSnapshot = errors.New("no snapshot for that run")

// Snapshot is where a run stands.
type Snapshot struct {
	Format   int               `json:"format"`
	RunID    string            `json:"run_id"`
	Status   string            `json:"status"`
	Task     string            `json:"task"`
	StartURL string            `json:"start_url"`
	Intent   string            `json:"intent"`
	Params   map[string]string `json:"params,omitempty"`
	Session  string            `json:"session,omitempty"`
	MaxTurns int               `json:"max_turns,omitempty"`
	// Goal is what the run is doing now: the next step of a replayed route,
	// or the task while a planner decides.
	Goal string `json:"goal"`
	// Completed are the steps taken, in order (as the trace records them);
	// Omitted counts the oldest ones dropped to keep the file bounded.
	Completed []engine.Step `json:"completed"`
	Omitted   int           `json:"omitted,omitempty"`
	// Pending are the remaining steps of the route being replayed, or the
	// one item "answer the task" while planning.
	Pending    []string `json:"pending,omitempty"`
	CurrentURL string   `json:"current_url,omitempty"`
	LastAction string   `json:"last_action,omitempty"`
	// Blocking is what stopped the run: an unapproved step, a cancellation,
	// the last step's error.
	Blocking string `json:"blocking,omitempty"`
	// Approval is the step a blocked run stopped before; Approvals the
	// decisions so far (a resumed run's trace keeps them).
	Approval  *ApprovalRequest  `json:"approval,omitempty"`
	Approvals []engine.Approval `json:"approvals,omitempty"`
	Tier      engine.Tier       `json:"tier,omitempty"`
	// FactsRevision and ReplayDone say which route a replay followed and
	// how many of its steps were done, so a resume skips them (only while
	// the facts are unchanged).
	FactsRevision string    `json:"facts_revision,omitempty"`
	ReplayDone    int       `json:"replay_done,omitempty"`
	PlannerCalls  int       `json:"planner_calls,omitempty"`
	StartedAt     time.Time `json:"started_at"`
	UpdatedAt     time.Time `json:"updated_at"`
	// Answer and TraceID are set when the run ended.
	Answer  string `json:"answer,omitempty"`
	TraceID string `json:"trace_id,omitempty"`
}

// Resumable reports whether a run in this state can be continued.
func (s *Snapshot) Resumable() bool {
	return s.Status == SnapRunning || s.Status == SnapInterrupted || s.Status == SnapBlocked
}

// Configure fills cfg for resuming s: the task, start URL, intent, params,
// session, turn cap and run id of the interrupted run (params cfg already
// sets win), and Resume.
func (s *Snapshot) Configure(cfg *RunConfig) {
	cfg.Task, cfg.StartURL, cfg.Intent, cfg.Session, cfg.RunID = s.Task, s.StartURL, s.Intent, s.Session, s.RunID
	if cfg.MaxTurns == 0 {
		cfg.MaxTurns = s.MaxTurns
	}
	p := map[string]string{}
	for k, v := range s.Params {
		p[k] = v
	}
	for k, v := range cfg.Params {
		p[k] = v
	}
	cfg.Params, cfg.Resume = p, s
}

// ValidRunID reports whether id can name a snapshot file.
func ValidRunID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// NewRunID returns a fresh run id (a ULID, like trace ids).
func NewRunID(now time.Time) string {
	id, err := engine.NewTraceID(now, nil)
	if err != nil {
		return fmt.Sprintf("run-%d", now.UnixNano())
	}
	return id
}

// LoadSnapshot reads the resumable snapshot of run id from dir. A finished
// run's (archived) snapshot is reported as such, with its trace.
func LoadSnapshot(dir, id string) (*Snapshot, error) {
	if !ValidRunID(id) {
		return nil, fmt.Errorf("run id %q: use the id pem printed when the run started (letters, digits, '-', '_')", id)
	}
	s, err := readSnapshot(filepath.Join(dir, id+".json"))
	if errors.Is(err, fs.ErrNotExist) {
		if old, err2 := readSnapshot(filepath.Join(dir, "archive", id+".json")); err2 == nil {
			return old, fmt.Errorf("%w %s: it finished (%s, trace %s): nothing to resume", ErrNoSnapshot, id, old.Status, firstNonEmpty(old.TraceID, "not deposited"))
		}
		return nil, fmt.Errorf("%w %s in %s: check the id pem printed when the run started", ErrNoSnapshot, id, dir)
	}
	if err != nil {
		return nil, err
	}
	if !s.Resumable() {
		return s, fmt.Errorf("%w %s: its status is %s: nothing to resume", ErrNoSnapshot, id, s.Status)
	}
	return s, nil
}

func readSnapshot(path string) (*Snapshot, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := readCapped(f, MaxSnapshotBytes+1)
	if err != nil {
		return nil, fmt.Errorf("reading snapshot %s: %w", path, err)
	}
	if len(data) > MaxSnapshotBytes {
		return nil, fmt.Errorf("snapshot %s is over %d bytes: delete it", path, MaxSnapshotBytes)
	}
	var s Snapshot
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("snapshot %s does not parse (%v): delete it", path, err)
	}
	if s.Format != snapshotFormat || !ValidRunID(s.RunID) {
		return nil, fmt.Errorf("snapshot %s: format %d, run id %q: written by another pem; delete it", path, s.Format, s.RunID)
	}
	return &s, nil
}

func readCapped(f *os.File, n int) ([]byte, error) {
	var buf bytes.Buffer
	_, err := buf.ReadFrom(&limited{f: f, n: n})
	return buf.Bytes(), err
}

type limited struct {
	f *os.File
	n int
}

func (l *limited) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, errors.New("over the cap")
	}
	if len(p) > l.n {
		p = p[:l.n]
	}
	k, err := l.f.Read(p)
	l.n -= k
	if l.n <= 0 && err == nil {
		return k, nil
	}
	return k, err
}

// ListSnapshots returns the resumable snapshots in dir, newest first.
func ListSnapshots(dir string) ([]*Snapshot, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []*Snapshot
	for _, e := range ents {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		if s, err := readSnapshot(filepath.Join(dir, e.Name())); err == nil && s.Resumable() {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].UpdatedAt.After(out[j].UpdatedAt) })
	return out, nil
}

// snapshot writes where the run stands (best effort: a snapshot that cannot
// be written is logged, never a reason to stop the run).
func (r *run) snapshot(status, blocking string) {
	if r.cfg.SnapshotDir == "" || r.cfg.RunID == "" {
		return
	}
	s := r.snapshotValue(status, blocking)
	data, err := encodeSnapshot(s, r.sensitive, r.cfg.Secrets)
	if err == nil {
		err = writeSnapshot(r.cfg.SnapshotDir, r.cfg.RunID, data, status == SnapDone || status == SnapFailed)
	}
	if err != nil {
		r.log.Warn("writing the run's snapshot failed", "run", r.cfg.RunID, "err", err)
	}
}

func (r *run) snapshotValue(status, blocking string) *Snapshot {
	s := &Snapshot{Format: snapshotFormat, RunID: r.cfg.RunID, Status: status, Task: r.cfg.Task, StartURL: r.cfg.StartURL,
		Intent: r.cfg.Intent, Session: r.cfg.Session, MaxTurns: r.maxTurns, Completed: copySteps(r.steps),
		Blocking: blocking, Approval: r.blocked, Approvals: append([]engine.Approval(nil), r.approvals...), Tier: r.res.Tier, ReplayDone: r.replayDone, PlannerCalls: r.res.PlannerCalls,
		StartedAt: r.started.UTC(), UpdatedAt: r.now().UTC(), Answer: r.res.Answer, TraceID: r.res.TraceID}
	if len(r.cfg.Params) > 0 {
		s.Params = copyMap(r.cfg.Params)
	}
	if r.recall != nil {
		s.FactsRevision = r.recall.Revision
	}
	if r.page != nil {
		s.CurrentURL = r.page.URL()
	}
	if rs := r.cfg.Resume; rs != nil && (s.CurrentURL == "" || strings.HasPrefix(s.CurrentURL, "about:")) {
		s.CurrentURL = rs.CurrentURL // not back there yet
	}
	for i := len(r.steps) - 1; i >= 0; i-- {
		if st := r.steps[i]; st.OK {
			s.LastAction = describeStep(st)
			break
		}
	}
	if n := len(r.steps); n > 0 && !r.steps[n-1].OK && s.Blocking == "" {
		s.Blocking = "last step failed: " + r.steps[n-1].Error
	}
	s.Pending = append(s.Pending, r.pending...)
	s.Goal = "answer the task: " + oneLine(r.cfg.Task, 200)
	if len(r.pending) > 0 {
		s.Goal = r.pending[0]
	} else if status == SnapRunning || status == SnapInterrupted || status == SnapBlocked {
		s.Pending = []string{s.Goal}
	}
	if r.blocked != nil {
		s.Goal = "take " + r.blocked.Describe() + " once a person approves it"
	}
	return s
}

// describeStep is a step in a few words: "click #nav-issues on URL".
func describeStep(st engine.Step) string {
	s := st.Action
	if st.Selector != "" {
		s += " " + st.Selector
	}
	if st.Value != "" {
		s += fmt.Sprintf(" %q", oneLine(st.Value, 80))
	}
	if st.URL != "" {
		if st.Action == "navigate" {
			s += " " + st.URL
		} else {
			s += " on " + st.URL
		}
	}
	return s
}

// encodeSnapshot scrubs s as a trace is scrubbed and bounds it to
// MaxSnapshotBytes, dropping step results, then the oldest steps.
func encodeSnapshot(s *Snapshot, sensitive map[int]bool, secrets map[string]string) ([]byte, error) {
	// The trace scrubber, over a trace made of the snapshot's text fields.
	t := &engine.Trace{Task: s.Task, Intent: s.Intent, URL: s.StartURL, Session: s.Session, Steps: s.Completed,
		Error: s.Blocking, Approvals: s.Approvals, Result: engine.Result{Answer: s.Answer, FinalURL: s.CurrentURL, Extracted: map[string]string{}}}
	t.Result.Extracted["goal"], t.Result.Extracted["last_action"] = s.Goal, s.LastAction
	for i, p := range s.Pending {
		t.Result.Extracted[fmt.Sprintf("pending%03d", i)] = p
	}
	engine.Redact(t, sensitive, secrets)
	if len(s.Params) > 0 {
		// A trace of its own, so that a parameter named like a credential
		// ("api_key") is judged by its own name.
		pt := &engine.Trace{Result: engine.Result{Extracted: s.Params}}
		engine.Redact(pt, nil, secrets)
		s.Params = pt.Result.Extracted
	}
	s.Task, s.Intent, s.StartURL, s.Session, s.Completed, s.Approvals = t.Task, t.Intent, t.URL, t.Session, t.Steps, t.Approvals
	s.Blocking, s.Answer, s.CurrentURL = t.Error, t.Result.Answer, t.Result.FinalURL
	s.Goal, s.LastAction = t.Result.Extracted["goal"], t.Result.Extracted["last_action"]
	for i := range s.Pending {
		s.Pending[i] = t.Result.Extracted[fmt.Sprintf("pending%03d", i)]
	}
	if s.Approval != nil {
		q := *s.Approval
		for _, f := range []*string{&q.Task, &q.Selector, &q.Text, &q.Value, &q.URL, &q.Why} {
			*f, _ = engine.ScrubText(Scrub(*f, secrets))
		}
		s.Approval = &q
	}
	// Bound it: step results go first, then long errors, then the oldest steps.
	for pass := 0; ; pass++ {
		data, err := json.MarshalIndent(s, "", "  ")
		if err != nil {
			return nil, err
		}
		if len(data) <= MaxSnapshotBytes {
			return data, nil
		}
		switch {
		case pass == 0:
			for i := range s.Completed {
				s.Completed[i].Result = ""
			}
		case pass == 1:
			for i := range s.Completed {
				s.Completed[i].Error = capText(s.Completed[i].Error, 200)
			}
			s.Task, s.Goal, s.Blocking = capText(s.Task, 4000), capText(s.Goal, 500), capText(s.Blocking, 500)
			if len(s.Pending) > 20 {
				s.Pending = s.Pending[:20]
			}
		case len(s.Completed) > 0:
			n := max(1, len(s.Completed)/10) // the oldest tenth at a time
			s.Completed, s.Omitted = s.Completed[n:], s.Omitted+n
		default:
			return nil, fmt.Errorf("snapshot of %s is over %d bytes", s.RunID, MaxSnapshotBytes)
		}
	}
}

// writeSnapshot replaces <dir>/<id>.json atomically; archive moves it to
// <dir>/archive/ and keeps the newest MaxArchived there.
func writeSnapshot(dir, id string, data []byte, archive bool) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	live := filepath.Join(dir, id+".json")
	target := live
	if archive {
		ad := filepath.Join(dir, "archive")
		if err := os.MkdirAll(ad, 0o700); err != nil {
			return err
		}
		target = filepath.Join(ad, id+".json")
	}
	tmp, err := os.CreateTemp(filepath.Dir(target), "."+id+"-*.tmp")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), target); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if archive {
		if err := os.Remove(live); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		pruneArchive(filepath.Join(dir, "archive"))
	}
	return nil
}

func pruneArchive(dir string) {
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) <= MaxArchived {
		return
	}
	type f struct {
		name string
		mod  time.Time
	}
	var fs []f
	for _, e := range ents {
		if info, err := e.Info(); err == nil && !e.IsDir() {
			fs = append(fs, f{e.Name(), info.ModTime()})
		}
	}
	sort.Slice(fs, func(i, j int) bool { return fs[i].mod.After(fs[j].mod) })
	for _, x := range fs[min(len(fs), MaxArchived):] {
		os.Remove(filepath.Join(dir, x.name))
	}
}

// copySteps copies steps deeply enough for the scrubber to edit the copy.
func copySteps(steps []engine.Step) []engine.Step {
	out := make([]engine.Step, len(steps))
	for i, st := range steps {
		st.Fallbacks = append([]string(nil), st.Fallbacks...)
		if st.Target != nil {
			t := *st.Target
			st.Target = &t
		}
		out[i] = st
	}
	return out
}

// resumeFrom takes over the interrupted run's state: its steps (the trace
// of the whole task), what they read (grounding), its planner calls and
// start time.
func (r *run) resumeFrom(s *Snapshot) {
	r.res.Resumed = true
	r.steps = copySteps(s.Completed)
	for i := range r.steps {
		st := r.steps[i]
		r.history = append(r.history, Turn{Action: Action{Tool: st.Action, Selector: st.Selector, Value: st.Value},
			Result: ToolResult{ExtractedContent: st.Result, Error: st.Error}, URL: st.URL})
		if st.Result != "" {
			r.corpus = append(r.corpus, st.Result)
		}
	}
	r.res.PlannerCalls, r.replayDone = s.PlannerCalls, s.ReplayDone
	r.approvals = append([]engine.Approval(nil), s.Approvals...)
	if !s.StartedAt.IsZero() {
		r.started = s.StartedAt
	}
	r.logf("resuming run %s: %d steps done, at %s", s.RunID, len(s.Completed), firstNonEmpty(s.CurrentURL, s.StartURL))
}

// resumeAt goes back to where the interrupted run stood, and decides
// whether its replay goes on where it stopped: only along the same facts.
func (r *run) resumeAt(ctx context.Context, s *Snapshot) error {
	if u := s.CurrentURL; u != "" && !strings.HasPrefix(u, "about:") {
		tr := r.exec(ctx, Action{Tool: "navigate", Value: u}, "", false)
		if r.stop != nil {
			return r.stop
		}
		if tr.Error != "" {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("run cancelled: %w", err)
			}
			return fmt.Errorf("resuming run %s: the page it stood on, %s, did not load: %s", s.RunID, u, tr.Error)
		}
	}
	if r.recall != nil && s.ReplayDone > 0 && s.FactsRevision == r.recall.Revision {
		r.replayFrom = s.ReplayDone
	} else if s.ReplayDone > 0 {
		r.replayDone = 0
		r.logf("the facts changed since the run was interrupted: the planner goes on from %s", firstNonEmpty(s.CurrentURL, s.StartURL))
	}
	return nil
}
