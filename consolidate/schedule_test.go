package consolidate

import (
	"bufio"
	"context"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pemdev/pem/store"
	"github.com/pemdev/pem/store/storetest/gitcli"
)

// childServe is pem serve in a child process: consolidate every second until
// SIGTERM.
func childServe() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	st, err := store.Open(os.Getenv("PEM_TEST_DIR"), nil)
	if err != nil {
		log.Error("open", "error", err)
		return 1
	}
	defer st.Close()
	opts := Options{Logger: log, Signature: testSig}
	if err := Serve(ctx, []Job{ConsolidateJob("@every 1s", st, opts)}, log); err != nil {
		log.Error("serve", "error", err)
		return 1
	}
	return 0
}

func TestServeRunsJobsAndStopsOnSIGTERM(t *testing.T) {
	st, dir := newRepoTree(t)
	put(t, st, newFx(21).trace(traceSpec{url: starsURL, intent: "star count", session: "a", at: time.Now().Add(-time.Hour), ok: true, steps: starsRoute}))
	head := gitcli.Run(t, dir, "rev-parse", "HEAD")

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "PEM_TEST_CHILD=serve", "PEM_TEST_DIR="+dir, "GIT_CONFIG_NOSYSTEM=1")
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
		timeout := time.After(20 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("serve exited before %q:\n%s", what, strings.Join(log, "\n"))
				}
				log = append(log, l)
				if strings.Contains(l, what) {
					return
				}
			case <-timeout:
				cmd.Process.Kill()
				t.Fatalf("no %q within 20s:\n%s", what, strings.Join(log, "\n"))
			}
		}
	}
	wait(`"msg":"job finished"`)
	if h := gitcli.Run(t, dir, "rev-parse", "HEAD"); h == head {
		t.Fatal("the scheduled job made no commit")
	}
	wait(`"msg":"job finished"`) // a second tick: nothing new, still fine
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	wait(`"msg":"stopped"`)
	for range lines {
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("serve did not exit cleanly on SIGTERM: %v\n%s", err, strings.Join(log, "\n"))
	}
	if n := gitcli.Run(t, dir, "rev-list", "--count", "HEAD"); n != "2" {
		t.Fatalf("%s commits, want 2 (init + one consolidation): a tick with nothing new must not commit", n)
	}
	assertGitClean(t, dir)
	if strings.Contains(strings.Join(log, "\n"), `"level":"ERROR"`) {
		t.Fatalf("errors logged:\n%s", strings.Join(log, "\n"))
	}
}

func TestParseSpec(t *testing.T) {
	for _, ok := range []string{"@hourly", "0 3 * * *", "@every 10m", "*/5 * * * *"} {
		if err := ParseSpec(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "hourly", "61 * * * *", "@every"} {
		if err := ParseSpec(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
