package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pemdev/pem/agent"
	"github.com/pemdev/pem/agent/demosite"
	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store"
)

const checksTask = "What is the checks status of the first pull request in acme/widgets?"

// treeTraces reads every trace of the tree at dir.
func treeTraces(t *testing.T, dir string) []*engine.Trace {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	doms, err := st.Domains(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []*engine.Trace
	for _, d := range doms {
		refs, err := st.TraceRefs(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range refs {
			tr, err := st.Trace(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, tr)
		}
	}
	return out
}

func addApprovalRule(t *testing.T, dir, rule string) {
	t.Helper()
	p := filepath.Join(dir, "pem.yaml")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, append(b, []byte("approval:\n"+rule)...), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A step pem.yaml's approval rules mark is never taken unasked: under
// --no-input, and when stdin is not a terminal, the run stops before it with
// approval_required (exit 14), the trace records the decision, and the run
// stays resumable.
func TestAgentRunApproval(t *testing.T) {
	needChromium(t)
	base, stop, err := demosite.New(demosite.Options{}).Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	dir := filepath.Join(t.TempDir(), "k")
	if code, _, errs := runPem(t, "init", dir); code != 0 {
		t.Fatalf("init: %s", errs)
	}
	addApprovalRule(t, dir, "  - name: checks tab\n    actions: [click]\n    selector: [checks-tab]\n")

	code, out, errs := runPem(t, "--knowledge", dir, "agent", "run", checksTask, "--url", base+"/acme/widgets", "--no-input", "--json")
	var res runJSON
	if code != exitApproval || json.Unmarshal([]byte(out), &res) != nil {
		t.Fatalf("--no-input: exit %d, want %d\n%s\n%s", code, exitApproval, out, errs)
	}
	if res.FailureCat != engine.ApprovalRequired || res.Blocked == nil || res.Blocked.Selector != "#checks-tab" || res.Blocked.Rule != "checks tab" ||
		len(res.Approvals) != 1 || res.Approvals[0].Decision != engine.Unanswered || res.RunID == "" {
		t.Fatalf("--no-input result: %+v", res)
	}
	if !strings.Contains(errs, "approval required (run "+res.RunID+")") || !strings.Contains(errs, "#checks-tab") || !strings.Contains(errs, "--no-input") ||
		!strings.Contains(errs, "pem agent run --resume") {
		t.Errorf("stderr does not say what stopped the run and what to do:\n%s", errs)
	}
	trs := treeTraces(t, dir)
	if len(trs) != 1 || trs[0].FailureCategory != engine.ApprovalRequired || len(trs[0].Approvals) != 1 || trs[0].Approvals[0].Selector != "#checks-tab" {
		t.Fatalf("traces: %+v", trs)
	}
	for _, st := range trs[0].Steps {
		if st.Selector == "#checks-tab" {
			t.Fatalf("the unapproved click is in the trace: %+v", trs[0].Steps)
		}
	}
	snaps, err := snapshotDir(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := agent.LoadSnapshot(snaps, res.RunID); err != nil || s.Status != agent.SnapBlocked || s.Approval == nil {
		t.Fatalf("the stopped run's snapshot: %+v, %v", s, err)
	}

	// stdin is a reader, not a terminal: nobody is asked, even with "y" on it.
	var o, e bytes.Buffer
	code = run(context.Background(), []string{"pem", "--knowledge", dir, "agent", "run", checksTask, "--url", base + "/acme/widgets"}, strings.NewReader("y\n"), &o, &e)
	if code != exitApproval || !strings.Contains(e.String(), "stdin is not a terminal") {
		t.Fatalf("non-terminal stdin: exit %d\n%s\n%s", code, o.String(), e.String())
	}
	if n := len(treeTraces(t, dir)); n != 2 {
		t.Fatalf("%d traces, want 2", n)
	}
}

func TestTermApprover(t *testing.T) {
	req := agent.ApprovalRequest{RunID: "r1", Task: "buy it", Step: 3, Action: "click", Selector: "#buy", Text: "Buy now", Rule: "payment", Why: `text "Buy now" has "buy"`}
	for _, tt := range []struct {
		in   string
		want bool
		err  bool
	}{{"y\n", true, false}, {"YES\n", true, false}, {"n\n", false, false}, {"\n", false, false}, {"", false, true}} {
		var out bytes.Buffer
		a := &termApprover{in: bufio.NewReader(strings.NewReader(tt.in)), out: &out, tty: true}
		ok, err := a.Approve(context.Background(), req)
		if ok != tt.want || (err != nil) != tt.err {
			t.Errorf("answer %q: %v, %v", tt.in, ok, err)
		}
		if !strings.Contains(out.String(), "[y/N]") || !strings.Contains(out.String(), `click #buy ("Buy now")`) || !strings.Contains(out.String(), `rule "payment"`) {
			t.Errorf("prompt:\n%s", out.String())
		}
	}
	if ok, err := (&termApprover{noInput: true, tty: true}).Approve(context.Background(), req); ok || err == nil || !strings.Contains(err.Error(), "--no-input") {
		t.Errorf("--no-input: %v %v", ok, err)
	}
	// A cancelled run stops waiting for the answer.
	pr, pw := io.Pipe()
	defer pw.Close()
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	if ok, err := (&termApprover{in: bufio.NewReader(pr), out: &bytes.Buffer{}, tty: true}).Approve(ctx, req); ok || err == nil {
		t.Errorf("cancelled: %v %v", ok, err)
	}
}

// gate serves the demo site and holds the first request for a path ending
// in suffix until released, so that a run can be killed mid-step.
type gate struct {
	site    http.Handler
	suffix  string
	reached chan struct{}
	release chan struct{}
	once    sync.Once
	mu      sync.Mutex
	paths   []string
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	g.paths = append(g.paths, r.URL.Path)
	g.mu.Unlock()
	if strings.HasSuffix(r.URL.Path, g.suffix) {
		first := false
		g.once.Do(func() { first = true; close(g.reached) })
		if first {
			select {
			case <-g.release:
			case <-r.Context().Done():
				return
			}
		}
	}
	g.site.ServeHTTP(w, r)
}

func (g *gate) since(n int) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.paths[n:]...)
}

// A pem agent run killed with SIGKILL mid-task (no trace deposited, no
// cleanup) is continued by pem agent run --resume from its snapshot: back at
// the page it stood on, the steps done kept, the same session.
func TestAgentRunResumeAfterSIGKILL(t *testing.T) {
	needChromium(t)
	pem, err := exec.LookPath("pem")
	if err != nil {
		t.Fatalf("pem is not on PATH (testscript.Main puts it there): %v", err)
	}
	g := &gate{site: demosite.New(demosite.Options{}), suffix: "/checks", reached: make(chan struct{}), release: make(chan struct{})}
	srv := httptest.NewServer(g)
	defer srv.Close()
	defer func() {
		select {
		case <-g.release:
		default:
			close(g.release)
		}
	}()
	dir := filepath.Join(t.TempDir(), "k")
	if code, _, errs := runPem(t, "init", dir); code != 0 {
		t.Fatalf("init: %s", errs)
	}
	cmd := exec.Command(pem, "--knowledge", dir, "agent", "run", checksTask, "--url", srv.URL+"/acme/widgets", "--no-input")
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	stderr := &lockedBuffer{b: &bytes.Buffer{}}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-g.reached:
	case <-time.After(90 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the run never reached the checks tab\n%s", stderr.String())
	}
	m := regexp.MustCompile(`pem: run (\S+): `).FindStringSubmatch(stderr.String())
	if m == nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("pem agent run did not print its run id at start:\n%s", stderr.String())
	}
	id := m[1]
	if err := cmd.Process.Kill(); err != nil { // SIGKILL: no deposit, no cleanup
		t.Fatal(err)
	}
	cmd.Wait()
	close(g.release)
	if n := len(treeTraces(t, dir)); n != 0 {
		t.Fatalf("a SIGKILLed run deposited %d traces", n)
	}
	snaps, err := snapshotDir(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := agent.LoadSnapshot(snaps, id)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Status != agent.SnapRunning || len(snap.Completed) != 3 || !strings.HasSuffix(snap.CurrentURL, "/acme/widgets/pull/31") ||
		!strings.Contains(snap.LastAction, "click") || snap.Session == "" {
		t.Fatalf("snapshot after the kill: status %s, %d steps, at %s, last %q", snap.Status, len(snap.Completed), snap.CurrentURL, snap.LastAction)
	}

	mark := len(g.since(0))
	code, out, errs := runPem(t, "--knowledge", dir, "agent", "run", "--resume", id, "--json")
	var res runJSON
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil {
		t.Fatalf("--resume: exit %d\n%s\n%s", code, out, errs)
	}
	if !res.Success || res.Answer != "success" || !res.Resumed || res.RunID != id {
		t.Fatalf("resumed run: %+v", res)
	}
	if paths := g.since(mark); len(paths) == 0 || paths[0] != "/acme/widgets/pull/31" {
		t.Fatalf("the resumed run's first request was %v, want the snapshot's page /acme/widgets/pull/31", paths)
	}
	trs := treeTraces(t, dir)
	if len(trs) != 1 {
		t.Fatalf("%d traces after the resume, want 1", len(trs))
	}
	tr := trs[0]
	if tr.Outcome != engine.Success || tr.Session != snap.Session || len(tr.Steps) < 5 || tr.Steps[2].Selector != snap.Completed[2].Selector {
		t.Fatalf("resumed trace: %s session %q (snapshot %q), steps %+v", tr.Outcome, tr.Session, snap.Session, tr.Steps)
	}
	if _, err := agent.LoadSnapshot(snaps, id); err == nil || !strings.Contains(err.Error(), "finished") {
		t.Errorf("after the resumed run finished: %v", err)
	}
	// Resuming a finished run: not found, with what to do.
	if code, _, errs := runPem(t, "--knowledge", dir, "agent", "run", "--resume", id); code != exitNotFound || !strings.Contains(errs, "nothing to resume") {
		t.Errorf("resuming a finished run: exit %d\n%s", code, errs)
	}
	if code, _, errs := runPem(t, "--knowledge", dir, "agent", "run", "--resume", id, "--url", srv.URL); code != exitUsage {
		t.Errorf("--resume with --url: exit %d\n%s", code, errs)
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  *bytes.Buffer
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
