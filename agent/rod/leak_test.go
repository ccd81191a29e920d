package rod

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestKilledProcessLeavesNoChromium runs a child that launches Chromium,
// kills the child with SIGKILL, and expects leakless to take Chromium down.
func TestKilledProcessLeavesNoChromium(t *testing.T) {
	if os.Getenv("PEM_LEAK_CHILD") == "1" {
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestLeakChild$")
	cmd.Env = append(os.Environ(), "PEM_LEAK_CHILD=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	pid := 0
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "chromium pid "); ok {
			pid, _ = strconv.Atoi(v)
			break
		}
	}
	if pid == 0 {
		t.Fatal("child did not report a chromium pid")
	}
	if !alive(pid) {
		t.Fatalf("chromium %d not running before the kill", pid)
	}
	cmd.Process.Kill()
	cmd.Wait()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if !alive(pid) {
			return
		}
	}
	t.Errorf("chromium %d still running after its parent was killed", pid)
}

func TestLeakChild(t *testing.T) {
	if os.Getenv("PEM_LEAK_CHILD") != "1" {
		t.Skip("helper for TestKilledProcessLeavesNoChromium")
	}
	b, err := Launch(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("chromium pid %d\n", b.PID())
	time.Sleep(time.Minute) // killed by the parent
}

// alive reports whether pid runs (a zombie counts as gone).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

func TestSweepTempDirs(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	mk := func(name, owner string, age time.Duration) string {
		d := os.TempDir() + "/" + name
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if owner != "" {
			os.WriteFile(d+"/"+ownerFile, []byte(owner), 0o600)
		}
		old := time.Now().Add(-age)
		os.Chtimes(d, old, old)
		return d
	}
	dead := mk(tempPrefix+"dead", "999999999", time.Hour)
	live := mk(tempPrefix+"live", strconv.Itoa(os.Getpid()), time.Hour)
	young := mk(tempPrefix+"young", "999999999", 0)
	unmarked := mk(tempPrefix+"unmarked", "", time.Hour)
	other := mk("other-dead", "999999999", time.Hour)
	sweepTempDirs()
	for d, want := range map[string]bool{dead: false, live: true, young: true, unmarked: true, other: true} {
		if _, err := os.Stat(d); (err == nil) != want {
			t.Errorf("%s: exists=%v, want %v", d, err == nil, want)
		}
	}
}
