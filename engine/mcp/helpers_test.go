package mcp_test

import (
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/engine/mcp"
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
		buildDir, buildErr = os.MkdirTemp("", "pem-mcp-test-")
		if buildErr != nil {
			return
		}
		buildPath = filepath.Join(buildDir, "pem")
		cmd := exec.Command("go", "build", "-o", buildPath, "github.com/pemdev/pem/cmd/pem")
		out, err := cmd.CombinedOutput()
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

// newTree makes an initialized knowledge tree in a temp dir.
func newTree(tb testing.TB) string {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), "knowledge")
	if _, err := store.Init(context.Background(), dir); err != nil {
		tb.Fatalf("store.Init: %v", err)
	}
	return dir
}

func openEngine(tb testing.TB, dir string) *engine.Engine {
	tb.Helper()
	st, err := store.Open(dir, nil)
	if err != nil {
		tb.Fatalf("store.Open: %v", err)
	}
	tb.Cleanup(func() { st.Close() })
	return engine.New(st)
}

// treeFiles lists the record files (traces, facts, experience) under dir.
func treeFiles(tb testing.TB, dir string) []string {
	tb.Helper()
	var out []string
	for _, top := range []string{"traces", "facts", "experience"} {
		root := filepath.Join(dir, top)
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && !strings.HasPrefix(d.Name(), ".") {
				rel, _ := filepath.Rel(dir, p)
				out = append(out, rel)
			}
			return nil
		})
		if err != nil && !os.IsNotExist(err) {
			tb.Fatalf("walking %s: %v", root, err)
		}
	}
	return out
}

// connectInProcess serves eng over the package's own Transport on pipes and
// returns a connected SDK client session.
func connectInProcess(tb testing.TB, eng *engine.Engine, opts *mcp.Options) *sdk.ClientSession {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cr, cw := io.Pipe() // client → server
	sr, sw := io.Pipe() // server → client
	srv := mcp.NewServer(eng, opts)
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, &mcp.Transport{Reader: cr, Writer: sw}) }()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "pem-test", Version: "1"}, nil).
		Connect(ctx, &sdk.IOTransport{Reader: sr, Writer: cw}, nil)
	if err != nil {
		cancel()
		tb.Fatalf("connecting: %v", err)
	}
	tb.Cleanup(func() {
		cs.Close()
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			tb.Errorf("server did not stop")
		}
	})
	return cs
}

// connectBinary starts `pem mcp --knowledge dir` and connects the SDK client
// to it over its stdin/stdout.
func connectBinary(tb testing.TB, dir string, extraEnv ...string) (*sdk.ClientSession, *strings.Builder) {
	tb.Helper()
	cmd := exec.Command(pemBinary(tb), "mcp", "--knowledge", dir)
	cmd.Env = append(os.Environ(), extraEnv...)
	stderr := &strings.Builder{}
	cmd.Stderr = &lockedWriter{w: stderr}
	ctx := context.Background()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "pem-test", Version: "1"}, nil).
		Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		tb.Fatalf("connecting to pem mcp: %v (stderr: %s)", err, stderr)
	}
	tb.Cleanup(func() {
		if err := cs.Close(); err != nil {
			tb.Errorf("closing the session: %v (stderr: %s)", err, stderr)
		}
	})
	return cs, stderr
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
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	return res
}

// ok asserts a successful result whose text is the structured content's JSON,
// and decodes it into v.
func ok(tb testing.TB, res *sdk.CallToolResult, v any) {
	tb.Helper()
	text := resultText(tb, res)
	if res.IsError {
		tb.Fatalf("isError result: %s", text)
	}
	sc, err := json.Marshal(res.StructuredContent)
	if err != nil {
		tb.Fatalf("structured content: %v", err)
	}
	if !jsonEqual(tb, sc, []byte(text)) {
		tb.Fatalf("text content is not the structured content:\ntext: %s\nstructured: %s", text, sc)
	}
	if err := json.Unmarshal([]byte(text), v); err != nil {
		tb.Fatalf("decoding %s: %v", text, err)
	}
}

func resultText(tb testing.TB, res *sdk.CallToolResult) string {
	tb.Helper()
	if len(res.Content) != 1 {
		tb.Fatalf("want one content item, got %d", len(res.Content))
	}
	tc, isText := res.Content[0].(*sdk.TextContent)
	if !isText {
		tb.Fatalf("content is %T, want text", res.Content[0])
	}
	return tc.Text
}

func jsonEqual(tb testing.TB, a, b []byte) bool {
	tb.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		tb.Fatalf("not JSON: %s", a)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		tb.Fatalf("not JSON: %s", b)
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}
