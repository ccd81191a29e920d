//go:build unix

package mcp_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pemdev/pem/engine"
)

// BenchmarkQueryStdio measures tools/call experience_query against the built
// binary over stdio (the SDK client on pipes, a warm server), and the same
// query through engine.Query in-process in the same run, so the two numbers
// compare on one machine at one moment. Run with -benchtime=2000x for stable
// percentiles.
func BenchmarkQueryStdio(b *testing.B) {
	dir := newTree(b)
	eng := openEngine(b, dir)
	ctx := context.Background()
	u := "https://github.com/pemdev/pem/issues"
	// A tree with some history: 5 intents × 8 runs, facts on one of them.
	for i := range 40 {
		req := engine.SaveRequest{URL: u, Intent: fmt.Sprintf("task number %d", i%5), Session: fmt.Sprintf("s%d", i%3),
			Trace: &engine.TraceInput{Steps: []engine.StepInput{{Action: "navigate", URL: u}, {Action: "click", Selector: "#issues-tab"}, {Action: "get_text", Selector: ".Counter", Result: "42"}}}}
		if i%4 == 3 {
			req.Outcome = "failure"
		}
		if i == 0 {
			req.Facts = &engine.Patch{Selectors: map[string]engine.Selector{"count": {Primary: ".Counter"}}, AntiPatterns: []string{"search"}}
		}
		if _, err := eng.Save(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
	intent := "task number 0"
	cs, _ := connectBinary(b, dir)
	pid := serverPID(b, dir)
	params := &sdk.CallToolParams{Name: "experience_query", Arguments: map[string]any{"url": u, "intent": intent}}
	query := func() {
		res, err := cs.CallTool(ctx, params)
		if err != nil || res.IsError {
			b.Fatalf("query: %v %v", err, res)
		}
	}
	for range 200 { // warm: caches, connection, JIT of nothing but the page cache
		query()
	}
	for range 200 {
		if _, err := eng.Query(ctx, u, intent); err != nil {
			b.Fatal(err)
		}
	}

	stdio := make([]time.Duration, 0, b.N)
	srv0, cli0 := procCPU(pid), selfCPU()
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		query()
		stdio = append(stdio, time.Since(t0))
	}
	b.StopTimer()
	srvCPU, cliCPU := procCPU(pid)-srv0, selfCPU()-cli0
	inproc := make([]time.Duration, 0, b.N)
	eng0 := selfCPU()
	for range b.N {
		t0 := time.Now()
		if _, err := eng.Query(ctx, u, intent); err != nil {
			b.Fatal(err)
		}
		inproc = append(inproc, time.Since(t0))
	}
	engCPU := selfCPU() - eng0
	// The same call from a minimal client (write a line, read a line), so the
	// SDK client's own decoding does not compete with the server for the CPU.
	raw := rawQuery(b, dir, fmt.Sprintf(`{"jsonrpc":"2.0","id":%%d,"method":"tools/call","params":{"name":"experience_query","arguments":{"url":%q,"intent":%q}}}`, u, intent), b.N)
	rp50, rp99 := percentiles(raw)
	b.ReportMetric(float64(rp50.Microseconds()), "raw-p50-µs")
	b.ReportMetric(float64(rp99.Microseconds()), "raw-p99-µs")
	sp50, sp99 := percentiles(stdio)
	ip50, ip99 := percentiles(inproc)
	b.ReportMetric(float64(sp50.Microseconds()), "sdk-p50-µs")
	b.ReportMetric(float64(sp99.Microseconds()), "sdk-p99-µs")
	b.ReportMetric(float64(ip50.Microseconds()), "engine-p50-µs")
	b.ReportMetric(float64(ip99.Microseconds()), "engine-p99-µs")
	// CPU time per call does not depend on how busy the machine is, unlike
	// the wall-clock percentiles: it shows what the protocol itself costs.
	if srvCPU > 0 {
		b.ReportMetric(float64(srvCPU.Microseconds())/float64(b.N), "server-cpu-µs/call")
	}
	b.ReportMetric(float64(cliCPU.Microseconds())/float64(b.N), "client-cpu-µs/call")
	b.ReportMetric(float64(engCPU.Microseconds())/float64(b.N), "engine-cpu-µs/call")
	if ip50 > 0 {
		b.ReportMetric(float64(rp50)/float64(ip50), "raw/engine-p50")
		b.ReportMetric(float64(sp50)/float64(ip50), "sdk/engine-p50")
	}
}

func percentiles(d []time.Duration) (p50, p99 time.Duration) {
	if len(d) == 0 {
		return 0, 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)*50/100], s[min(len(s)-1, len(s)*99/100)]
}

// serverPID finds the `pem mcp` process serving dir (a child of this test).
func serverPID(b *testing.B, dir string) int {
	b.Helper()
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(os.Getpid()) && bytes.Contains(cmdline, []byte(dir)) {
			return pid
		}
	}
	return 0 // not Linux: no server CPU metric
}

// procCPU is a process's user+system CPU time from /proc (0 when unknown).
func procCPU(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)        // utime, field 14
	st, _ := strconv.ParseInt(f[12], 10, 64)        // stime, field 15
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ is 100 on Linux
}

// selfCPU is this process's user+system CPU time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rawQuery starts another `pem mcp` on dir, initializes it by hand and times n
// calls of the request template (%d is the id), each written as one line and
// answered by one line.
func rawQuery(b *testing.B, dir, tmpl string, n int) []time.Duration {
	b.Helper()
	cmd := exec.Command(pemBinary(b), "mcp", "--knowledge", dir)
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { in.Close(); _ = cmd.Wait() }()
	out := bufio.NewReaderSize(outPipe, 1<<16)
	roundTrip := func(line string) []byte {
		if _, err := io.WriteString(in, line+"\n"); err != nil {
			b.Fatal(err)
		}
		resp, err := out.ReadBytes('\n')
		if err != nil {
			b.Fatalf("reading the answer: %v", err)
		}
		return resp
	}
	roundTrip(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`)
	if _, err := io.WriteString(in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"); err != nil {
		b.Fatal(err)
	}
	for i := range 200 {
		roundTrip(fmt.Sprintf(tmpl, i+1))
	}
	lat := make([]time.Duration, 0, n)
	for i := range n {
		line := fmt.Sprintf(tmpl, 1000+i)
		t0 := time.Now()
		resp := roundTrip(line)
		lat = append(lat, time.Since(t0))
		if !bytes.Contains(resp, []byte(`"tier"`)) || bytes.Contains(resp, []byte(`"isError":true`)) {
			b.Fatalf("unexpected answer: %.300s", resp)
		}
	}
	return lat
}
