package mcp_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pemdev/pem/engine/mcp"
)

// A client that floods bad lines and never reads stderr does not stall the
// server: a valid request after 10,000 bad lines is answered, and SIGTERM
// stops the process. Over real pipes, with the built binary.
func TestBinaryStderrNeverReadCannotStall(t *testing.T) {
	dir := newTree(t)
	cmd := exec.Command(pemBinary(t), "mcp", "--knowledge", dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	// stderr: a pipe nobody reads (its buffer fills after ~64 KiB).
	er, ew, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer er.Close()
	cmd.Stderr = ew
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ew.Close()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() { _ = cmd.Process.Kill() }()

	// stdout is read (it is the protocol); answers are sorted by id.
	answers := make(chan string, 16)
	var parseErrors int
	var mu sync.Mutex
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var r struct {
				ID json.RawMessage `json:"id"`
			}
			_ = json.Unmarshal(sc.Bytes(), &r)
			if string(r.ID) == "null" {
				mu.Lock()
				parseErrors++
				mu.Unlock()
				continue
			}
			answers <- sc.Text()
		}
		close(answers)
	}()
	wait := func(what string) string {
		t.Helper()
		select {
		case a, ok := <-answers:
			if !ok {
				t.Fatalf("%s: stdout closed", what)
			}
			return a
		case err := <-exited:
			t.Fatalf("%s: the server exited: %v", what, err)
		case <-time.After(60 * time.Second):
			t.Fatalf("%s: no answer: the server is stalled", what)
		}
		return ""
	}
	send := func(s string) {
		t.Helper()
		if _, err := io.WriteString(stdin, s+"\n"); err != nil {
			t.Fatalf("writing: %v", err)
		}
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"flood","version":"1"}}}`)
	wait("initialize")
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	var flood bytes.Buffer
	for i := 0; i < 10000; i++ {
		flood.WriteString("{not json at all, line of garbage\n")
	}
	// Written from a goroutine: a stalled server would block the writer.
	go func() {
		flood.WriteString(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"experience_list","arguments":{}}}` + "\n")
		_, _ = stdin.Write(flood.Bytes())
	}()
	if a := wait("the request after the flood"); !strings.Contains(a, `"id":2`) || !strings.Contains(a, "total") {
		t.Fatalf("answer: %s", a)
	}
	mu.Lock()
	n := parseErrors
	mu.Unlock()
	if n != 10000 {
		t.Errorf("%d parse errors answered, want 10000", n)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if err != nil && !errorsAs(err, &ee) {
			t.Fatalf("wait: %v", err)
		}
		if !cmd.ProcessState.Exited() || cmd.ProcessState.ExitCode() != 130 {
			t.Errorf("after SIGTERM: %v, want exit status 130 (stopped by the server, not killed)", cmd.ProcessState)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("SIGTERM did not stop pem mcp")
	}
}

func errorsAs(err error, ee **exec.ExitError) bool {
	e, ok := err.(*exec.ExitError)
	*ee = e
	return ok
}

// blocked is a writer that never returns until released.
type blocked struct{ release chan struct{} }

func (b *blocked) Write(p []byte) (int, error) { <-b.release; return len(p), nil }

func TestAsyncWriterNeverBlocks(t *testing.T) {
	b := &blocked{release: make(chan struct{})}
	aw := mcp.NewAsyncWriter(b, 4096)
	done := make(chan struct{})
	go func() {
		for i := 0; i < 100000; i++ {
			aw.Write([]byte("a warning line of about forty bytes....\n"))
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("AsyncWriter.Write blocked on a stalled writer")
	}
	if aw.Dropped() < 99000 {
		t.Errorf("dropped %d, want nearly all", aw.Dropped())
	}
	close(b.release)
	aw.Close(time.Second)
}

func TestRateLimitSummarises(t *testing.T) {
	var buf bytes.Buffer
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rl := mcp.NewRateLimit(slog.NewTextHandler(&buf, nil), 3, 10*time.Second, func() time.Time { return now })
	log := slog.New(rl)
	for i := 0; i < 1000; i++ {
		log.Warn("input line is not JSON", "bytes", 12)
	}
	if n := strings.Count(buf.String(), "\n"); n != 3 {
		t.Fatalf("%d lines for 1000 warnings in one interval, want 3:\n%s", n, buf.String())
	}
	now = now.Add(11 * time.Second)
	log.Warn("input line is not JSON", "bytes", 12)
	if !strings.Contains(buf.String(), "suppressed=997") {
		t.Errorf("no summary of the 997 suppressed: %s", buf.String())
	}
	for i := 0; i < 10; i++ {
		log.Warn("input line is not JSON")
	}
	rl.Flush(context.Background())
	if !strings.Contains(buf.String(), "(repeats summarised)") || !strings.Contains(buf.String(), "suppressed=8") {
		t.Errorf("Flush: %s", buf.String())
	}
}

// SIGINT stops the server too, while a client holds stdin open.
func TestBinarySIGINTStops(t *testing.T) {
	dir := newTree(t)
	cmd := exec.Command(pemBinary(t), "mcp", "--knowledge", dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"int","version":"1"}}}`+"\n")
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.Contains(line, `"id":1`) {
		t.Fatalf("initialize: %q, %v", line, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		if !cmd.ProcessState.Exited() {
			t.Errorf("not exited: %v", cmd.ProcessState)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("SIGINT did not stop pem mcp")
	}
}
