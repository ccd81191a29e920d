package mcpbrowser_test

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pemdev/pem/agent/demosite"
	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store"
)

var (
	buildOnce sync.Once
	buildDir  string
	buildPath string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// pemBinary builds cmd/pem once per test binary and returns its path.
func pemBinary(tb testing.TB) string {
	tb.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "pem-mcpbrowser-test-")
		if buildErr != nil {
			return
		}
		buildPath = filepath.Join(buildDir, "pem")
		out, err := exec.Command("go", "build", "-o", buildPath, "github.com/pemdev/pem/cmd/pem").CombinedOutput()
		if err != nil {
			buildErr = &buildError{err: err, out: string(out)}
		}
	})
	if buildErr != nil {
		tb.Fatalf("building pem: %v", buildErr)
	}
	return buildPath
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + e.out }

// needChromium fails the test, saying what to install, when pem cannot find
// a browser.
func needChromium(tb testing.TB) {
	tb.Helper()
	if os.Getenv("PEM_CHROME") != "" {
		return
	}
	for _, p := range []string{"/usr/lib/chromium/chromium", "/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"} {
		if _, err := os.Stat(p); err == nil {
			return
		}
	}
	tb.Fatal("Chromium is missing: these tests drive pem mcp --browser, which runs headless Chromium; install it (Debian: apt-get install chromium) or set PEM_CHROME")
}

// demoSite serves the demo site on 127.0.0.1 for the test.
func demoSite(tb testing.TB) string {
	tb.Helper()
	base, stop, err := demosite.New(demosite.Options{}).Start(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(stop)
	return base
}

// newTree makes a knowledge tree in a temp dir as a new user does (pem
// init: a git repository, so that pem consolidate commits).
func newTree(tb testing.TB) string {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), "knowledge")
	if out, err := exec.Command(pemBinary(tb), "init", dir).CombinedOutput(); err != nil {
		tb.Fatalf("pem init: %v\n%s", err, out)
	}
	return dir
}

// traces reads every trace of the tree, through the store.
func traces(tb testing.TB, dir string) []engine.Trace {
	tb.Helper()
	ctx := context.Background()
	st, err := store.Open(dir, nil)
	if err != nil {
		tb.Fatalf("store.Open: %v", err)
	}
	defer st.Close()
	domains, err := st.Domains(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	var out []engine.Trace
	for _, d := range domains {
		refs, err := st.TraceRefs(ctx, d)
		if err != nil {
			tb.Fatal(err)
		}
		for _, ref := range refs {
			t, err := st.Trace(ctx, ref)
			if err != nil {
				tb.Fatal(err)
			}
			out = append(out, *t)
		}
	}
	return out
}

// waitTraces polls until the tree holds n traces or d passes.
func waitTraces(tb testing.TB, dir string, n int, d time.Duration) []engine.Trace {
	tb.Helper()
	for end := time.Now().Add(d); ; time.Sleep(100 * time.Millisecond) {
		ts := traces(tb, dir)
		if len(ts) >= n || time.Now().After(end) {
			return ts
		}
	}
}

// addApproval appends an approval: section to the tree's pem.yaml.
func addApproval(tb testing.TB, dir, rules string) {
	tb.Helper()
	f, err := os.OpenFile(filepath.Join(dir, "pem.yaml"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("approval:\n" + rules); err != nil {
		tb.Fatal(err)
	}
}

// consolidate runs `pem consolidate` on the tree.
func consolidate(tb testing.TB, dir string) {
	tb.Helper()
	out, err := exec.Command(pemBinary(tb), "consolidate", "--knowledge", dir).CombinedOutput()
	if err != nil {
		tb.Fatalf("pem consolidate: %v\n%s", err, out)
	}
}

// connect starts `pem mcp --browser` and connects the Go SDK client to it
// over its stdin/stdout. The returned stop closes stdin and waits for pem
// to exit.
func connect(tb testing.TB, dir string, args ...string) (*sdk.ClientSession, *strings.Builder, func()) {
	tb.Helper()
	return connectWith(tb, dir, nil, args...)
}

// connectWith is connect with client options (an elicitation handler).
func connectWith(tb testing.TB, dir string, copts *sdk.ClientOptions, args ...string) (*sdk.ClientSession, *strings.Builder, func()) {
	tb.Helper()
	cmd := exec.Command(pemBinary(tb), append([]string{"mcp", "--knowledge", dir, "--browser"}, args...)...)
	stderr := &strings.Builder{}
	cmd.Stderr = &lockedWriter{w: stderr}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "pem-browser-test", Version: "1"}, copts).
		Connect(context.Background(), &sdk.CommandTransport{Command: cmd, TerminateDuration: 20 * time.Second}, nil)
	if err != nil {
		tb.Fatalf("connecting to pem mcp --browser: %v (stderr: %s)", err, stderr)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			t0 := time.Now()
			defer func() { tb.Logf("closing the session took %s", time.Since(t0)) }()
			if err := cs.Close(); err != nil {
				tb.Errorf("closing the session: %v (stderr: %s)", err, stderr)
			}
		})
	}
	tb.Cleanup(stop)
	return cs, stderr, stop
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func call(tb testing.TB, cs *sdk.ClientSession, name string, args any) *sdk.CallToolResult {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	t0 := time.Now()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if d := time.Since(t0); d > time.Second {
		tb.Logf("%s took %s", name, d)
	}
	if err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	return res
}

// browserResult is the structured content of a browser tool's answer.
type browserResult struct {
	ExtractedContent string      `json:"extracted_content"`
	LongTermMemory   string      `json:"long_term_memory"`
	IsDone           bool        `json:"is_done"`
	Success          *bool       `json:"success"`
	URL              string      `json:"url"`
	Step             int         `json:"step"`
	Memory           string      `json:"memory"`
	Tier             engine.Tier `json:"tier"`
	Intent           string      `json:"intent"`
	Deposited        []struct {
		Domain    string `json:"domain"`
		Steps     int    `json:"steps"`
		TraceID   string `json:"trace_id"`
		TracePath string `json:"trace_path"`
		Outcome   string `json:"outcome"`
	} `json:"deposited"`
	// isError results
	Error string `json:"error"`
	Kind  string `json:"kind"`
	Hint  string `json:"hint"`
}

func decode(tb testing.TB, res *sdk.CallToolResult) browserResult {
	tb.Helper()
	var r browserResult
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		tb.Fatal(err)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		tb.Fatalf("decoding %s: %v", b, err)
	}
	return r
}

// okCall calls a tool and fails the test on an isError result.
func okCall(tb testing.TB, cs *sdk.ClientSession, name string, args any) (browserResult, *sdk.CallToolResult) {
	tb.Helper()
	res := call(tb, cs, name, args)
	if res.IsError {
		tb.Fatalf("%s %v: isError: %s", name, args, text(res))
	}
	return decode(tb, res), res
}

func text(res *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(*sdk.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}
