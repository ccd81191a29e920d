package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/rogpeppe/go-internal/testscript"
	"github.com/urfave/cli/v2"

	"github.com/pemdev/pem/agent"
	"github.com/pemdev/pem/agent/llm"
	"github.com/pemdev/pem/agent/rod"
	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store"
	"github.com/pemdev/pem/store/gitrepo"
)

// TestMain lets the test binary act as the real pem (main, signal handling,
// os.Exit and all) when a script runs "pem".
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){"pem": main})
}

// TestScripts runs testdata/script/*.txtar against the real pem binary.
// Extra script commands:
//
//	exits CODE prog args...   run prog and require exactly that exit code
//	tree DIR                  print the files under DIR (not .git) with sizes, sorted
//	catall DIR                print every file under DIR (not .git), sorted, with headers
//	genfile FILE BYTES        write a syntactically valid trace JSON of BYTES bytes
//	maxsize FILE N            fail unless FILE holds at most N bytes
//	holdlock DIR              take the writer lock of the tree DIR until the script ends
//	interrupt CODE prog args  run prog, send it SIGINT once it opened the tree's lock, require exit CODE
//
// The condition [root] holds when the tests run as root (permissions do not bind).
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			env.Setenv(EnvKnowledgeDir, "") // the default ./knowledge unless a script sets it
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exits":     cmdExits,
			"tree":      cmdTree,
			"catall":    cmdCatall,
			"genfile":   cmdGenfile,
			"maxsize":   cmdMaxsize,
			"jsonenv":   cmdJSONEnv,
			"holdlock":  cmdHoldLock,
			"interrupt": cmdInterrupt,
		},
		Condition: func(cond string) (bool, error) {
			if cond == "root" {
				return os.Geteuid() == 0, nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
	})
}

func cmdHoldLock(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: holdlock DIR")
	}
	s, err := store.Open(ts.MkAbs(args[0]), nil)
	ts.Check(err)
	release, err := s.Lock(context.Background())
	ts.Check(err)
	ts.Defer(func() { release(); s.Close() })
}

// cmdInterrupt runs prog with the script's directory and knowledge tree and
// interrupts it, as Ctrl-C would.
func cmdInterrupt(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: interrupt CODE prog args...")
	}
	want, err := strconv.Atoi(args[0])
	ts.Check(err)
	path := args[1]
	for _, dir := range filepath.SplitList(ts.Getenv("PATH")) {
		if p := filepath.Join(dir, args[1]); fileExists(p) {
			path = p
			break
		}
	}
	cmd := exec.Command(path, args[2:]...)
	cmd.Dir = ts.MkAbs(".")
	cmd.Env = append(os.Environ(), "PATH="+ts.Getenv("PATH"), EnvKnowledgeDir+"="+ts.Getenv(EnvKnowledgeDir))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	ts.Check(cmd.Start())
	waitOpened(cmd.Process.Pid, ".pem.lock", 10*time.Second)
	time.Sleep(100 * time.Millisecond) // into the wait, past the open
	ts.Check(cmd.Process.Signal(os.Interrupt))
	err = cmd.Wait()
	got := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		got = ee.ExitCode()
	} else if err != nil {
		ts.Fatalf("running %s: %v", args[1], err)
	}
	fmt.Fprint(ts.Stdout(), out.String())
	fmt.Fprint(ts.Stderr(), errb.String())
	if got != want {
		ts.Fatalf("%s exited with %d after SIGINT, want %d; stderr %q", strings.Join(args[1:], " "), got, want, errb.String())
	}
}

// waitOpened waits until process pid has a file named name open (read from
// /proc; where there is none, it waits one second), or until limit.
func waitOpened(pid int, name string, limit time.Duration) {
	fds := fmt.Sprintf("/proc/%d/fd", pid)
	if _, err := os.Stat(fds); err != nil {
		time.Sleep(time.Second)
		return
	}
	for end := time.Now().Add(limit); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		ents, _ := os.ReadDir(fds)
		for _, e := range ents {
			if target, err := os.Readlink(filepath.Join(fds, e.Name())); err == nil && filepath.Base(target) == name {
				return
			}
		}
	}
}

func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir()
}

func cmdExits(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exits CODE prog args...")
	}
	want, err := strconv.Atoi(args[0])
	ts.Check(err)
	got := 0
	if err := ts.Exec(args[1], args[2:]...); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			ts.Fatalf("running %s: %v", args[1], err)
		}
		got = ee.ExitCode()
	}
	if got != want {
		ts.Fatalf("%s exited with %d, want %d", strings.Join(args[1:], " "), got, want)
	}
}

func walkFiles(ts *testscript.TestScript, dir string, f func(rel string, data []byte)) {
	root := ts.MkAbs(dir)
	var rels []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(root, p)
			rels = append(rels, filepath.ToSlash(rel))
		}
		return nil
	})
	ts.Check(err)
	sort.Strings(rels)
	for _, rel := range rels {
		data, err := os.ReadFile(filepath.Join(root, rel))
		ts.Check(err)
		f(rel, data)
	}
}

func cmdTree(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: tree DIR")
	}
	walkFiles(ts, args[0], func(rel string, data []byte) {
		fmt.Fprintf(ts.Stdout(), "%s %d\n", rel, len(data))
	})
}

// cmdJSONEnv sets an environment variable to a string field of the JSON on
// the last command's stdout: jsonenv VAR FIELD (e.g. the id a save printed).
func cmdJSONEnv(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: jsonenv VAR FIELD")
	}
	var m map[string]any
	ts.Check(json.Unmarshal([]byte(ts.ReadFile("stdout")), &m))
	v, ok := m[args[1]].(string)
	if !ok {
		ts.Fatalf("stdout has no string field %q", args[1])
	}
	ts.Setenv(args[0], v)
}

func cmdCatall(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: catall DIR")
	}
	walkFiles(ts, args[0], func(rel string, data []byte) {
		fmt.Fprintf(ts.Stdout(), "==> %s\n%s", rel, data)
	})
}

func cmdGenfile(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: genfile FILE BYTES")
	}
	n, err := strconv.Atoi(args[1])
	ts.Check(err)
	head, tail := `{"intent":"read stars","task":"`, `"}`
	if n < len(head)+len(tail) {
		ts.Fatalf("genfile: %d bytes is too small", n)
	}
	data := head + strings.Repeat("x", n-len(head)-len(tail)) + tail
	ts.Check(os.WriteFile(ts.MkAbs(args[0]), []byte(data), 0o644))
}

func cmdMaxsize(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: maxsize FILE N")
	}
	n, err := strconv.Atoi(args[1])
	ts.Check(err)
	fi, err := os.Stat(ts.MkAbs(args[0]))
	ts.Check(err)
	if fi.Size() > int64(n) {
		ts.Fatalf("%s holds %d bytes, more than %d", args[0], fi.Size(), n)
	}
	if fi.Size() == 0 {
		ts.Fatalf("%s is empty", args[0])
	}
}

// testApp is a pem app with the real commands and no I/O.
func testApp(t *testing.T) *cli.App {
	t.Helper()
	app, _ := newApp(strings.NewReader(""), &bytes.Buffer{}, &bytes.Buffer{})
	return app
}

func TestPermute(t *testing.T) {
	app := testApp(t)
	cases := []struct {
		in, want []string
	}{
		{[]string{"pem"}, []string{"pem"}},
		{[]string{"pem", "experience", "save", "https://x.com", "", "--outcome", "failure", "--intent", "read stars"},
			[]string{"pem", "experience", "save", "--outcome", "failure", "--intent", "read stars", "https://x.com", ""}},
		{[]string{"pem", "experience", "save", "https://x.com", "-", "--facts={}"},
			[]string{"pem", "experience", "save", "--facts={}", "https://x.com", "-"}},
		// A global flag after the command moves to the front, with its value.
		{[]string{"pem", "memory", "https://x.com", "--knowledge", "/tmp/k", "--max-chars", "300"},
			[]string{"pem", "--knowledge", "/tmp/k", "memory", "--max-chars", "300", "https://x.com"}},
		{[]string{"pem", "--knowledge", "k", "experience", "list", "--page", "2"},
			[]string{"pem", "--knowledge", "k", "experience", "list", "--page", "2"}},
		// After "--" everything is positional.
		{[]string{"pem", "memory", "--", "--intent", "x"},
			[]string{"pem", "memory", "--", "--intent", "x"}},
		// Unknown flags stay where the parser will report them.
		{[]string{"pem", "experience", "list", "x", "--bogus"},
			[]string{"pem", "experience", "list", "--bogus", "x"}},
		// A bool flag takes no value.
		{[]string{"pem", "init", "dir", "--verbose"},
			[]string{"pem", "--verbose", "init", "dir"}},
		{[]string{"pem", "experience", "query", "u", "-h"},
			[]string{"pem", "experience", "query", "-h", "u"}},
	}
	for _, c := range cases {
		if got := permute(app, c.in); !reflect.DeepEqual(got, c.want) {
			t.Errorf("permute(%q)\n got %q\nwant %q", c.in, got, c.want)
		}
	}
}

func TestExitCode(t *testing.T) {
	cases := []struct {
		err  error
		want int
	}{
		{nil, 0},
		{errors.New("disk on fire"), 1},
		{usagef("bad"), 2},
		{fmt.Errorf("x: %w", engine.ErrInvalid), 2},
		{fmt.Errorf("x: %w", engine.ErrBadTrace), 2},
		{fmt.Errorf("x: %w", engine.ErrBadPatch), 2},
		{fmt.Errorf("x: %w", engine.ErrBadURL), 2},
		{fmt.Errorf("x: %w", engine.ErrTooLarge), 2},
		{fmt.Errorf("opening: %w", engine.ErrNoTree), 3},
		{fmt.Errorf("x: %w", engine.ErrNotFound), 4},
		{fmt.Errorf("diff: %w: %q", gitrepo.ErrUnknownRevision, "nosuchrev"), 4},
		{fmt.Errorf("x: %w", engine.ErrLocked), 5},
		{fmt.Errorf("x: %w", engine.ErrCorrupt), 6},
		{fmt.Errorf("x: %w", engine.ErrUnsafePath), 7},
		{fmt.Errorf("x: %w", engine.ErrFrozen), 8},
		{fmt.Errorf("x: %w", context.Canceled), 130},
		// Cancellation wins over whatever it interrupted.
		{fmt.Errorf("%w: %w", context.Canceled, engine.ErrLocked), 130},
		{&interrupted{fmt.Errorf("x: %w", engine.ErrLocked)}, 130},
		{cli.Exit("custom", 42), 42},
		// The environment's errors, each its own code.
		{&os.PathError{Op: "write", Path: "k/traces/x", Err: syscall.ENOSPC}, 9},
		{fmt.Errorf("saving: %w", &os.PathError{Op: "open", Path: "k", Err: syscall.EROFS}), 10},
		{fmt.Errorf("saving: %w", &os.PathError{Op: "open", Path: "k", Err: syscall.EACCES}), 10},
		{fmt.Errorf("x: %w", gitrepo.ErrNoRepo), 11},
		{fmt.Errorf("init: %w", gitrepo.ErrUnsupportedRepo), 11},
		{&exec.Error{Name: "git", Err: exec.ErrNotFound}, 11},
		{fmt.Errorf("clone: %w: install git", gitrepo.ErrGitMissing), 11},
		{fmt.Errorf("clone: %s has %w at %q", "u", gitrepo.ErrNotATree, "/"), 3},
		{fmt.Errorf("clone: %w: %w", gitrepo.ErrRemoteRefused, errors.New("git clone: fatal: repository 'x' does not exist")), 13},
		{fmt.Errorf("launch: %w at /usr/bin/chromium", rod.ErrNoChromium), 12},
		{fmt.Errorf("sync: pushing main to origin: %w", transport.ErrAuthorizationFailed), 13},
		{errors.New("sync: pushing main to origin: command error on refs/heads/main: pre-receive hook declined"), 13},
		{fmt.Errorf("sync: fetching: %w", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}), 13},
		{fmt.Errorf("sync: %w %q", gitrepo.ErrNoRemote, "origin"), 13},
		{fmt.Errorf("agent run: planner openai: %w: POST http://127.0.0.1:1/v1/chat/completions: connection refused", llm.ErrAPI), 13},
		{fmt.Errorf("agent run: %w", &agent.ApprovalError{Decision: engine.Refused}), 14},
		{fmt.Errorf("%w: %w", context.Canceled, agent.ErrApprovalRequired), 130},
		{fmt.Errorf("resume: %w 01K", agent.ErrNoSnapshot), 4},
	}
	for _, c := range cases {
		if got := exitCode(c.err); got != c.want {
			t.Errorf("exitCode(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}

func TestReportSaysWhatToDo(t *testing.T) {
	var buf bytes.Buffer
	code := report(&buf, fmt.Errorf("opening knowledge tree k: %w", engine.ErrNoTree))
	if code != 3 {
		t.Fatalf("code %d, want 3", code)
	}
	got := buf.String()
	if !strings.HasPrefix(got, "pem: opening knowledge tree k: no knowledge tree") || !strings.Contains(got, "pem init") {
		t.Fatalf("message %q: want what happened and the hint to run pem init", got)
	}
}

// run itself: flags and arguments that are wrong never reach the store.
func TestRunUsage(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"pem", "--knowledge", dir, "experience", "list", "--page-size", "abc"}, 2, "invalid value"},
		{[]string{"pem", "--knowledge", dir, "experience", "list", "--page-size", "0"}, 2, "--page-size 0"},
		{[]string{"pem", "--knowledge", dir, "experience", "list", "--page-size", "101"}, 2, "use 1 to 100"},
		{[]string{"pem", "--knowledge", dir, "experience", "list", "--page", "0"}, 2, "pages start at 1"},
		{[]string{"pem", "--knowledge", dir, "experience", "save", "https://x.com"}, 2, "needs URL and TRACE_JSON"},
		{[]string{"pem", "--knowledge", dir, "experience", "query"}, 2, "exactly one URL"},
		{[]string{"pem", "--knowledge", dir, "memory", "https://x.com", "--max-chars", "-1"}, 2, "--max-chars -1"},
		{[]string{"pem", "--knowledge", dir, "nosuchcommand"}, 2, "unknown command"},
		{[]string{"pem", "--knowledge", dir, "experience", "nosuch"}, 2, "unknown subcommand"},
		{[]string{"pem", "--knowledge", dir, "experience"}, 2, "missing subcommand"},
		{[]string{"pem", "help", "nosuch"}, 2, "unknown command"},
		{[]string{"pem", "--knowledge", dir, "experience", "save", "--bogus", "u", ""}, 2, "flag provided but not defined"},
		{[]string{"pem", "--knowledge", dir, "experience", "save", "u", "{", "--intent", "x"}, 2, "not a JSON object"},
		{[]string{"pem", "--knowledge", dir, "experience", "save", "u", "", "--facts", `{"colour":1}`}, 2, `unknown key "colour"`},
		{[]string{"pem", "--knowledge", dir, "experience", "save", "u", "-", "--facts", "-"}, 2, "both read stdin"},
	}
	for _, c := range cases {
		var out, errb bytes.Buffer
		code := run(context.Background(), c.args, strings.NewReader(""), &out, &errb)
		if code != c.code || !strings.Contains(errb.String(), c.msg) || !strings.HasPrefix(errb.String(), "pem: ") {
			t.Errorf("%q: exit %d, stderr %q; want exit %d and %q", c.args[1:], code, errb.String(), c.code, c.msg)
		}
		if out.Len() != 0 {
			t.Errorf("%q: printed %q on stdout, want nothing", c.args[1:], out.String())
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 0 {
		t.Fatalf("the tree directory holds %d entries after only bad commands (err %v), want none", len(entries), err)
	}
}

func TestHelp(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"pem", "--help"}, strings.NewReader(""), &out, &errb); code != 0 {
		t.Fatalf("pem --help: exit %d, stderr %q", code, errb.String())
	}
	help := out.String()
	for _, want := range []string{"Progressive Experience Memory", "--knowledge", EnvKnowledgeDir, "init", "experience", "memory"} {
		if !strings.Contains(help, want) {
			t.Errorf("pem --help lacks %q:\n%s", want, help)
		}
	}
	// Commands are listed in name order, whoever registered them.
	var names []string
	for _, c := range testApp(t).Commands {
		names = append(names, c.Name)
	}
	if !sort.StringsAreSorted(names) {
		t.Errorf("commands not sorted: %v", names)
	}
}

// docs/cli.md documents every command and flag that --help shows.
func TestDocsCoverCommands(t *testing.T) {
	doc, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatalf("reading docs/cli.md: %v", err)
	}
	var walk func(prefix string, cmds []*cli.Command)
	walk = func(prefix string, cmds []*cli.Command) {
		for _, c := range cmds {
			if c.Hidden {
				continue
			}
			name := strings.TrimSpace(prefix + " " + c.Name)
			if !bytes.Contains(doc, []byte("pem "+name)) {
				t.Errorf("docs/cli.md does not mention %q: add it to its section (--help and docs/cli.md must agree)", "pem "+name)
			}
			for _, f := range c.Flags {
				flag := "--" + f.Names()[0]
				if !bytes.Contains(doc, []byte(flag)) {
					t.Errorf("docs/cli.md does not document %s of %q: add it to the command's section (--help and docs/cli.md must agree)", flag, "pem "+name)
				}
			}
			walk(name, c.Subcommands)
		}
	}
	walk("", testApp(t).Commands)
}

// The knowledge/ tree shipped in the repository is exactly what pem init
// writes, is sound, and holds no traces — not even traces/.gitkeep: the
// repository keeps knowledge/traces/ empty, so any file committed there (a
// test or a demo writing into the repo's tree) stands out.
func TestShippedKnowledgeTree(t *testing.T) {
	const shipped = "../../knowledge"
	fresh := filepath.Join(t.TempDir(), "k")
	if _, err := store.Init(context.Background(), fresh); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(shipped, "traces")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("knowledge/traces exists (%v): the repository ships no traces directory", err)
	}
	for _, name := range []string{"pem.yaml", ".gitattributes", ".gitignore", "experience/.gitkeep", "facts/.gitkeep"} {
		want, err := os.ReadFile(filepath.Join(fresh, name))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(shipped, name))
		if err != nil {
			t.Errorf("knowledge/%s: %v (copy it from a fresh pem init)", name, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("knowledge/%s differs from what pem init writes: copy it from a fresh pem init", name)
		}
	}
	s, err := store.Open(shipped, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if errs := s.Check(context.Background()); len(errs) != 0 {
		t.Errorf("knowledge/ is not sound: %v", errs)
	}
	refs, err := s.TraceRefs(context.Background(), "")
	if err != nil || len(refs) != 0 {
		t.Errorf("knowledge/ ships %d traces (err %v), want none", len(refs), err)
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"pem", "--knowledge", shipped, "experience", "list"}, strings.NewReader(""), &out, &errb); code != 0 || !strings.Contains(out.String(), `"total": 0`) {
		t.Errorf("pem experience list on knowledge/: exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
}

// The YAML examples of docs/data-model.md are read by the store's strict
// reader as what they claim to be: pem.yaml, a trace, an experience, a
// verdict, facts, a site entry.
func TestDataModelExamples(t *testing.T) {
	doc, err := os.ReadFile("../../docs/data-model.md")
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	for _, part := range strings.Split(string(doc), "```yaml\n")[1:] {
		blocks = append(blocks, part[:strings.Index(part, "```")])
	}
	if len(blocks) != 6 {
		t.Fatalf("docs/data-model.md has %d yaml examples, want 6 (pem.yaml, trace, experience, verdict, facts, site entry)", len(blocks))
	}
	var cfg engine.Config
	var tr engine.Trace
	var x engine.Experience
	var v engine.Verdict
	var f engine.Facts
	var site engine.Site
	targets := []struct {
		v    any
		kind string
	}{{&cfg, store.KindConfig}, {&tr, store.KindTrace}, {&x, store.KindExperience}, {&v, store.KindVerdict}, {&f, store.KindFacts}, {&site, store.KindSite}}
	for i, tg := range targets {
		if err := store.Unmarshal([]byte(blocks[i]), tg.v, tg.kind); err != nil {
			t.Errorf("example %d (%s): %v", i+1, tg.kind, err)
		}
	}
	if cfg.Policy != engine.DefaultPolicy() {
		t.Errorf("the pem.yaml example differs from engine.DefaultPolicy: %+v", cfg.Policy)
	}
	if !engine.ValidTraceID(tr.ID) || tr.IntentKey != engine.IntentKey(tr.Intent) || tr.Steps[1].Value != engine.Redacted {
		t.Errorf("the trace example is not one pem would write: id %q, key %q", tr.ID, tr.IntentKey)
	}
	re := x
	re.Recount()
	if re.Attempts != x.Attempts || re.Successes != x.Successes || re.Failures != x.Failures ||
		re.AvgSteps != x.AvgSteps || re.AvgDurationMs != x.AvgDurationMs ||
		!re.LastSuccessAt.Equal(x.LastSuccessAt) || !re.LastFailureAt.Equal(x.LastFailureAt) ||
		!reflect.DeepEqual(re.ByCategory, x.ByCategory) || !reflect.DeepEqual(re.Patterns, x.Patterns) {
		t.Errorf("the experience example's counts do not match its evidence: recounted %+v", re)
	}
	for _, ev := range x.Evidence {
		if !engine.ValidTraceID(ev.Trace) {
			t.Errorf("experience example: bad trace id %q", ev.Trace)
		}
	}
	for _, n := range site.Notes {
		for _, id := range n.Traces {
			if !engine.ValidTraceID(id) {
				t.Errorf("site example: bad trace id %q", id)
			}
		}
		if !n.Served(engine.DefaultPolicy()) {
			t.Errorf("site example: note %+v is not served under the default policy", n)
		}
	}
	if again := engine.FoldSite(&site, site.Domain, nil); !again.Equal(&site) {
		t.Errorf("the site example is not in the canonical order consolidation writes")
	}
	if !engine.ValidTraceID(v.Trace) || !v.Verdict.Valid() || v.Judge != engine.JudgeKey(v.Judge) {
		t.Errorf("the verdict example is not one pem would write: %+v", v)
	}
	if f.Status != engine.Candidate || f.IntentKey != engine.IntentKey(f.Intent) {
		t.Errorf("the facts example: status %q, key %q", f.Status, f.IntentKey)
	}
}

// A command waiting for the tree's writer lock ends with exit code 130 when it
// is cancelled (what SIGINT and SIGTERM do through main's context), and
// writes nothing: a save with a facts patch takes the lock before any write.
func TestCancelWhileWaitingForLock(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "k")
	if _, err := store.Init(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	release, err := s.Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer release()

	parent, cancel := context.WithCancel(context.Background())
	defer cancel()
	ctx := &doneWatch{Context: parent, asked: make(chan struct{})}
	var out, errb bytes.Buffer
	done := make(chan int)
	go func() {
		done <- run(ctx, []string{"pem", "--knowledge", dir, "experience", "save", "https://github.com/pemdev/pem", "",
			"--intent", "read the star count", "--facts", `{"hints":["accept the cookie banner"]}`}, strings.NewReader(""), &out, &errb)
	}()
	select {
	case <-ctx.asked: // someone waits on ctx: the lock wait
	case code := <-done:
		t.Fatalf("pem returned %d without waiting for the lock; stderr %q", code, errb.String())
	}
	cancel()
	if code := <-done; code != exitCancelled {
		t.Fatalf("exit %d, want %d; stderr %q", code, exitCancelled, errb.String())
	}
	if msg := errb.String(); !strings.HasPrefix(msg, "pem: interrupted: ") || !strings.Contains(msg, "locked") {
		t.Errorf("stderr %q: want the interruption of the lock wait", msg)
	}
	if out.Len() != 0 {
		t.Errorf("stdout %q, want nothing", out.String())
	}
	for _, sub := range []string{"traces/github.com", "facts/github.com"} {
		if _, err := os.Stat(filepath.Join(dir, sub)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s exists after a cancelled save (stat: %v), want nothing written", sub, err)
		}
	}
}

// doneWatch closes asked the first time Done is called.
type doneWatch struct {
	context.Context
	once  sync.Once
	asked chan struct{}
}

func (d *doneWatch) Done() <-chan struct{} {
	d.once.Do(func() { close(d.asked) })
	return d.Context.Done()
}
