package main

import (
	"github.com/pemdev/pem/store/storetest/gitcli"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pemdev/pem/store/gitrepo"
)

// The merge driver pem registers is the running binary. In-process tests run
// inside the test binary, which would run the tests again if git called it:
// register the copy TestMain put on PATH as "pem" instead (that copy runs
// main()). Resolved when called, after TestMain set PATH.
func init() {
	executable = func() (string, error) { return exec.LookPath("pem") }
}

// TestMergeDriverRegistersThisBinary: init and merge-driver --install
// register the absolute path of the running pem, say so, and git runs it
// with no pem on PATH, where the bare command would leave a conflict.
func TestMergeDriverRegistersThisBinary(t *testing.T) {
	self, err := exec.LookPath("pem")
	if err != nil || !strings.Contains(self, "testscript-main") {
		t.Fatalf("pem on PATH is %q (%v), want the test binary set up by TestMain", self, err)
	}
	self, _ = filepath.EvalSymlinks(self)
	want := self + " merge-driver %O %A %B %P"

	k := filepath.Join(t.TempDir(), "k")
	code, out, errs := runPem(t, "init", k)
	if code != 0 {
		t.Fatalf("pem init: %d\n%s%s", code, out, errs)
	}
	if got := strings.TrimSpace(gitcli.Run(t, k, "config", "--get", "merge.pem.driver")); got != want {
		t.Fatalf("after pem init merge.pem.driver = %q, want %q", got, want)
	}
	if !strings.Contains(out, "git runs "+want) {
		t.Errorf("pem init does not say which driver it registered:\n%s", out)
	}

	origin, _ := shareSetup(t)
	root := filepath.Dir(origin)
	dir := filepath.Join(root, "nopath")
	gitcli.Run(t, root, "clone", "-q", origin, dir)
	code, out, errs = runPem(t, "merge-driver", "--install", dir)
	if code != 0 {
		t.Fatalf("merge-driver --install: %d %s %s", code, out, errs)
	}
	if !strings.Contains(out, "registered merge driver 'pem' as "+want) {
		t.Errorf("merge-driver --install says %q, want the registered line %q", out, want)
	}
	if got := strings.TrimSpace(gitcli.Run(t, dir, "config", "--get", "merge.pem.driver")); got != want {
		t.Fatalf("merge.pem.driver = %q, want %q", got, want)
	}

	// git with a PATH that holds git but no pem.
	gitPath, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "PATH="+filepath.Dir(gitPath))
	if _, err := exec.LookPath(filepath.Join(filepath.Dir(gitPath), "pem")); err == nil {
		t.Skipf("%s holds a pem: cannot build a PATH without one", filepath.Dir(gitPath))
	}
	merge := func(dir, branch string) (string, error) {
		cmd := exec.Command("git", "merge", "--no-edit", branch)
		cmd.Dir, cmd.Env = dir, env
		b, err := cmd.CombinedOutput()
		return string(b), err
	}
	for _, team := range []string{"team-a", "team-b", "team-c"} {
		if out, err := merge(dir, "origin/"+team); err != nil {
			t.Fatalf("merging %s with no pem on PATH: %v\n%s", team, err, out)
		}
	}

	// Control: the bare command, as before, conflicts with the same PATH.
	bare := filepath.Join(root, "bare")
	gitcli.Run(t, root, "clone", "-q", origin, bare)
	if code, out, errs := runPem(t, "merge-driver", "--install", bare); code != 0 {
		t.Fatalf("merge-driver --install: %d %s %s", code, out, errs)
	}
	gitcli.Run(t, bare, "config", "merge.pem.driver", gitrepo.MergeDriverCommand)
	if _, err := merge(bare, "origin/team-a"); err != nil {
		t.Fatalf("the first merge is a fast-forward and cannot fail: %v", err)
	}
	if out, err := merge(bare, "origin/team-b"); err == nil {
		t.Fatalf("with the bare command and no pem on PATH the merge succeeded, so the test proves nothing:\n%s", out)
	}
}

// TestCheckWarnsAboutTheMergeDriver: pem check warns (on stderr, exit 0)
// when the registered driver is missing, not executable, not on PATH, or
// not registered at all; a working driver gives no warning.
func TestCheckWarnsAboutTheMergeDriver(t *testing.T) {
	t.Setenv("HOME", t.TempDir()) // no user config with a driver of its own
	t.Setenv("XDG_CONFIG_HOME", "")
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	k := filepath.Join(t.TempDir(), "k")
	if code, out, errs := runPem(t, "init", k); code != 0 {
		t.Fatalf("pem init: %d\n%s%s", code, out, errs)
	}
	plain := filepath.Join(t.TempDir(), "plain")
	if err := os.WriteFile(plain, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	spaced := filepath.Join(t.TempDir(), "my tools", "pem")
	if err := os.MkdirAll(filepath.Dir(spaced), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(spaced, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		driver string // "" unsets it
		want   string // "" means no warning
	}{
		{"", ""}, // as pem init registered it
		{"/nonexistent/pem merge-driver %O %A %B %P", "runs /nonexistent/pem, which does not exist"},
		{plain + " merge-driver %O %A %B %P", "runs " + plain + ", which is not executable"},
		{"pem-nowhere-on-path merge-driver %O %A %B %P", "runs pem-nowhere-on-path, which is not on PATH"},
		{"'" + spaced + "' merge-driver %O %A %B %P", ""},
		{"-", "no merge driver 'pem' is registered"},
	} {
		switch tc.driver {
		case "":
		case "-":
			gitcli.Run(t, k, "config", "--unset", "merge.pem.driver")
		default:
			gitcli.Run(t, k, "config", "merge.pem.driver", tc.driver)
		}
		code, out, errs := runPem(t, "--knowledge", k, "check")
		if code != 0 {
			t.Fatalf("driver %q: pem check exits %d (a driver problem is a warning):\n%s%s", tc.driver, code, out, errs)
		}
		if tc.want == "" {
			if strings.Contains(errs, "warning") {
				t.Errorf("driver %q: unexpected warning %q", tc.driver, errs)
			}
			continue
		}
		if !strings.Contains(errs, "pem: check: warning: ") || !strings.Contains(errs, tc.want) || !strings.Contains(errs, "pem merge-driver --install") {
			t.Errorf("driver %q: stderr %q, want a warning with %q and the fix", tc.driver, errs, tc.want)
		}
	}
}

func TestDriverProgram(t *testing.T) {
	for in, want := range map[string]string{
		"pem merge-driver %O":          "pem",
		"  /usr/bin/pem merge-driver":  "/usr/bin/pem",
		"'/a b/pem' merge-driver %O":   "/a b/pem",
		`"/a b/p\"em" x`:               `/a b/p"em`,
		`/a\ b/pem x`:                  "/a b/pem",
		"'/it'\\''s/pem' merge-driver": "/it's/pem",
		"":                             "",
	} {
		if got := driverProgram(in); got != want {
			t.Errorf("driverProgram(%q) = %q, want %q", in, got, want)
		}
		if in != "" && shellQuote(want) != "" && driverProgram(shellQuote(want)+" x") != want {
			t.Errorf("shellQuote(%q) = %q does not read back", want, shellQuote(want))
		}
	}
}
