package main

import (
	"bufio"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeSchedulesAndStopsOnSIGTERM runs the real pem (this test binary,
// through testscript's PATH entry) as `pem serve --consolidate "@every 1s"`,
// waits for a job to commit, sends SIGTERM and expects a clean exit.
func TestServeSchedulesAndStopsOnSIGTERM(t *testing.T) {
	pem, err := exec.LookPath("pem")
	if err != nil {
		t.Fatalf("pem is not on PATH (testscript.Main puts it there): %v", err)
	}
	dir := filepath.Join(t.TempDir(), "k")
	env := append(os.Environ(), "HOME="+t.TempDir(), "GIT_CONFIG_NOSYSTEM=1")
	runPem := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(pem, append([]string{"--knowledge", dir}, args...)...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("pem %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	runPem("init")
	runPem("experience", "save", "https://github.com/pemdev/pem", `{"steps":[{"action":"get_text","selector":"#stars"}]}`, "--intent", "star count")

	cmd := exec.Command(pem, "--knowledge", dir, "serve", "--consolidate", "@every 1s", "--json")
	cmd.Env = env
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var log []string
	wait := func(what string) {
		t.Helper()
		timeout := time.After(30 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("pem serve exited before logging %q:\n%s", what, strings.Join(log, "\n"))
				}
				log = append(log, l)
				if strings.Contains(l, what) {
					return
				}
			case <-timeout:
				cmd.Process.Kill()
				t.Fatalf("pem serve logged no %q within 30s:\n%s", what, strings.Join(log, "\n"))
			}
		}
	}
	wait(`"msg":"job finished"`)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	wait(`"msg":"stopped"`)
	for range lines {
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("pem serve did not exit 0 on SIGTERM: %v\n%s", err, strings.Join(log, "\n"))
	}
	all := strings.Join(log, "\n")
	if !strings.Contains(all, `"summary":"folded 1 trace into 1 entry, created 1 facts"`) {
		t.Fatalf("the scheduled consolidation did not fold the saved trace:\n%s", all)
	}
	git := exec.Command("git", "log", "--format=%s")
	git.Dir = dir
	out, err := git.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "pem: consolidate 1 trace (1 entry)") {
		t.Fatalf("git log: %v\n%s", err, out)
	}
}

func TestServeRefusesMissingDeepLearnAndBadSpecs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "k")
	if code := run(t.Context(), []string{"pem", "init", dir}, strings.NewReader(""), new(strings.Builder), new(strings.Builder)); code != 0 {
		t.Fatalf("init: exit %d", code)
	}
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"serve", "--consolidate", "every hour"}, exitUsage, "cron spec"},
		{[]string{"consolidate", "--now", "yesterday"}, exitUsage, "--now"},
	} {
		var stderr strings.Builder
		code := run(t.Context(), append([]string{"pem", "--knowledge", dir}, c.args...), strings.NewReader(""), new(strings.Builder), &stderr)
		if code != c.code || !strings.Contains(stderr.String(), c.msg) {
			t.Errorf("pem %v: exit %d, stderr %q; want exit %d mentioning %q", c.args, code, stderr.String(), c.code, c.msg)
		}
	}
	saved := deepLearnJob
	deepLearnJob = nil
	defer func() { deepLearnJob = saved }()
	var stderr strings.Builder
	code := run(t.Context(), []string{"pem", "--knowledge", dir, "serve", "--deep-learn", "@daily"}, strings.NewReader(""), new(strings.Builder), &stderr)
	if code == 0 || !strings.Contains(stderr.String(), "no deep-learn job") {
		t.Fatalf("serve --deep-learn without a job: exit %d, %q", code, stderr.String())
	}
}

// TestConsolidateLimitsMemory: pem consolidate sets the Go heap's soft
// limit, unless GOMEMLIMIT chose one.
func TestConsolidateLimitsMemory(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	dir := filepath.Join(t.TempDir(), "k")
	if code, _, errOut := runPem(t, "init", dir); code != 0 {
		t.Fatalf("init: %d %s", code, errOut)
	}
	for _, env := range []string{"", "1GiB"} {
		debug.SetMemoryLimit(math.MaxInt64)
		if env != "" {
			t.Setenv("GOMEMLIMIT", env)
		}
		if code, _, errOut := runPem(t, "--knowledge", dir, "consolidate"); code != 0 {
			t.Fatalf("consolidate: %d %s", code, errOut)
		}
		want := int64(consolidateMemoryLimit)
		if env != "" {
			want = math.MaxInt64 // left alone
		}
		if got := debug.SetMemoryLimit(-1); got != want {
			t.Fatalf("GOMEMLIMIT=%q: the memory limit is %d, want %d", env, got, want)
		}
	}
}

// TestLimitMemoryTo: the soft heap limit pem consolidate and pem serve's
// consolidation job set holds while the job runs and is undone after; a
// GOMEMLIMIT in the environment (a value or "off") wins.
func TestLimitMemoryTo(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	os.Unsetenv("GOMEMLIMIT")
	before := debug.SetMemoryLimit(-1)
	restore := limitMemoryTo(123 << 20)
	if got := debug.SetMemoryLimit(-1); got != 123<<20 {
		restore()
		t.Fatalf("during the job the limit is %d, want %d", got, 123<<20)
	}
	restore()
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Fatalf("after the job the limit is %d, want it back at %d", got, before)
	}
	for _, v := range []string{"off", "300MiB"} {
		t.Setenv("GOMEMLIMIT", v)
		restore := limitMemoryTo(123 << 20)
		got := debug.SetMemoryLimit(-1)
		restore()
		if got != before {
			t.Fatalf("GOMEMLIMIT=%s: the limit is %d, want it left at %d", v, got, before)
		}
	}
}
