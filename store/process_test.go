package store_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store"
)

// Child processes: the test binary re-executed with -test.run=TestHelperSaver
// and PEM_HELPER_TREE set. Without it TestHelperSaver does nothing.

const (
	envTree  = "PEM_HELPER_TREE"
	envCount = "PEM_HELPER_COUNT" // saves to make; 0 = until killed
	envName  = "PEM_HELPER_NAME"
	envDays  = "PEM_HELPER_NEW_DAYS" // "1": every save on a new day, over 7 domains (new day and domain directories)
)

func TestHelperSaver(t *testing.T) {
	dir := os.Getenv(envTree)
	if dir == "" {
		return // not a child
	}
	n, _ := strconv.Atoi(os.Getenv(envCount))
	name := os.Getenv(envName)
	ctx := context.Background()
	s, err := store.Open(dir, nil)
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(2)
	}
	e := engine.New(s)
	round, _ := strconv.Atoi(name)
	newDays := os.Getenv(envDays) == "1"
	for i := 0; n == 0 || i < n; i++ {
		req := engine.SaveRequest{URL: "https://example.com/pemdev/pem/issues", Intent: "count open issues",
			Trace: &engine.TraceInput{Steps: []engine.StepInput{{Action: "get_text", Selector: "#issues-count"}}}}
		if newDays {
			// A day no save of any round used: its directory is created
			// by this save (and, the first time, its domain's).
			req.URL = fmt.Sprintf("https://site%d.example/p", i%7)
			req.Trace.StartedAt = &engine.FlexTime{Time: time.Date(2020, 1, 1, 12, 0, 0, 0, time.UTC).AddDate(0, 0, -(round*2000 + i))}
		}
		if i%3 == 0 || n > 0 {
			req.Facts = &engine.Patch{InteractionHints: []string{fmt.Sprintf("hint %s-%d", name, i)}}
		}
		res, err := e.Save(ctx, req)
		if err != nil {
			fmt.Println("ERR", err)
			os.Exit(2)
		}
		fmt.Println("ACK", res.TracePath)
	}
	os.Exit(0)
}

func helperCmd(t *testing.T, dir string, count int, name string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperSaver$", "-test.count=1")
	cmd.Env = append(os.Environ(), envTree+"="+dir, envCount+"="+strconv.Itoa(count), envName+"="+name)
	cmd.Stderr = os.Stderr
	return cmd
}

func initTree(t *testing.T) string {
	dir := filepath.Join(t.TempDir(), "knowledge")
	if _, err := store.Init(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestCrashSafety SIGKILLs a saving child at random moments, many times, then
// checks that every save the child acknowledged is on disk and that every
// file in the tree parses.
func TestCrashSafety(t *testing.T) { crashRounds(t, false) }

// TestCrashSafetyNewDays: the same, every save the first of its day, so
// kills land while a day directory (for a new domain, the domain's
// directory too) is created (createAt's mkdirAt) and its parents fsynced
// after the file.
func TestCrashSafetyNewDays(t *testing.T) { crashRounds(t, true) }

func crashRounds(t *testing.T, newDays bool) {
	if testing.Short() {
		t.Skip("re-executes the test binary 20 times; run without -short")
	}
	dir := initTree(t)
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	var acked []string
	for round := 0; round < 20; round++ {
		cmd := helperCmd(t, dir, 0, strconv.Itoa(round))
		if newDays {
			cmd.Env = append(cmd.Env, envDays+"=1")
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string)
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		// Kill after the first ack plus a random delay, so every round
		// dies in the middle of the save loop.
		first := true
		var kill <-chan time.Time
		for line := range lines {
			if p, ok := strings.CutPrefix(line, "ACK "); ok {
				acked = append(acked, p)
				if first {
					first = false
					kill = time.After(time.Duration(rng.Intn(40000)) * time.Microsecond)
					go func(k <-chan time.Time) { <-k; _ = cmd.Process.Signal(syscall.SIGKILL) }(kill)
				}
			} else {
				t.Errorf("round %d: child said %q", round, line)
			}
		}
		_ = cmd.Wait()
		if first {
			t.Fatalf("round %d: the child acknowledged nothing", round)
		}
	}
	s, err := store.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	for _, p := range acked {
		parts := strings.Split(strings.TrimSuffix(p, ".yaml"), "/")
		if len(parts) != 4 {
			t.Fatalf("odd trace path %q", p)
		}
		if _, err := s.Trace(ctx, engine.TraceRef{Domain: parts[1], Day: parts[2], ID: parts[3]}); err != nil {
			t.Errorf("acknowledged trace %s: %v", p, err)
		}
	}
	for _, err := range s.Check(ctx) {
		t.Errorf("Check after the crashes: %v", err)
	}
	refs, err := s.TraceRefs(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) < len(acked) {
		t.Errorf("%d traces in the tree, %d acknowledged", len(refs), len(acked))
	}
	t.Logf("%d saves acknowledged over 20 kills; %d traces on disk", len(acked), len(refs))
}

// TestConcurrentProcesses: 4 processes save at once, each with a facts patch
// on the same entry; nothing is lost (the tree lock serializes the
// read-modify-write of the facts file).
func TestConcurrentProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("re-executes the test binary; run without -short")
	}
	const procs, each = 4, 15
	dir := initTree(t)
	var wg sync.WaitGroup
	outs := make([]string, procs)
	for p := 0; p < procs; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := helperCmd(t, dir, each, "p"+strconv.Itoa(p)).Output()
			if err != nil {
				t.Errorf("process %d: %v\n%s", p, err, out)
			}
			outs[p] = string(out)
		}()
	}
	wg.Wait()
	s, err := store.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	refs, err := s.TraceRefs(ctx, "example.com")
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) != procs*each {
		t.Errorf("%d traces, want %d", len(refs), procs*each)
	}
	f, err := s.Facts(ctx, "example.com", engine.IntentKey("count open issues"))
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, h := range f.InteractionHints {
		have[h] = true
	}
	for p := 0; p < procs; p++ {
		for i := 0; i < each; i++ {
			if h := fmt.Sprintf("hint p%d-%d", p, i); !have[h] {
				t.Errorf("lost update: facts lack %q", h)
			}
		}
	}
	if len(f.Provenance.Traces) != procs*each {
		t.Errorf("facts provenance has %d traces, want %d", len(f.Provenance.Traces), procs*each)
	}
	for _, err := range s.Check(ctx) {
		t.Errorf("Check: %v", err)
	}
}

// TestLockNeverStale: a child holding the lock is killed; the lock is free
// at once (flock is released by the kernel with the process).
func TestLockNeverStale(t *testing.T) {
	dir := initTree(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperLocker$", "-test.count=1")
	cmd.Env = append(os.Environ(), envTree+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	if !sc.Scan() || sc.Text() != "LOCKED" {
		t.Fatalf("child did not take the lock: %q", sc.Text())
	}
	s, err := store.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	short, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := s.Lock(short); err == nil {
		t.Fatal("took the lock while the child held it")
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	ctx, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	release, err := s.Lock(ctx)
	if err != nil {
		t.Fatalf("lock after the holder was killed: %v", err)
	}
	release()
}

func TestHelperLocker(t *testing.T) {
	dir := os.Getenv(envTree)
	if dir == "" {
		return // not a child
	}
	s, err := store.Open(dir, nil)
	if err != nil {
		os.Exit(2)
	}
	if _, err := s.Lock(context.Background()); err != nil {
		os.Exit(2)
	}
	fmt.Println("LOCKED")
	time.Sleep(time.Minute)
	os.Exit(0)
}
