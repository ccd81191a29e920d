package rod

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeExe writes an executable file (mode 0755) at dir/name.
func fakeExe(t *testing.T, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// finderIn is the system finder (the real exec.LookPath) with PATH set to
// path and the install locations looked up under root: a location /x/y is
// stat'ed as root/x/y, so the real ones on this machine never count.
func finderIn(t *testing.T, path, root, goos string, env map[string]string) Finder {
	t.Helper()
	t.Setenv("PATH", path)
	return Finder{
		Getenv: func(k string) string {
			if k == "PATH" {
				return path
			}
			return env[k]
		},
		LookPath: exec.LookPath,
		Stat: func(p string) (fs.FileInfo, error) {
			if !strings.HasPrefix(p, root) {
				p = filepath.Join(root, filepath.FromSlash(strings.ReplaceAll(p, `\`, "/")))
			}
			return os.Stat(p)
		},
		GOOS: goos,
	}
}

func TestFindOnPath(t *testing.T) {
	root := t.TempDir()
	bin1, bin2 := filepath.Join(root, "bin1"), filepath.Join(root, "bin2")
	// google-chrome in the first PATH dir, chromium in the second: the
	// name order (chromium first) wins over the PATH order.
	fakeExe(t, bin1, "google-chrome")
	chromium := fakeExe(t, bin2, "chromium")
	f := finderIn(t, bin1+string(os.PathListSeparator)+bin2, root, "linux", nil)
	if got, err := f.Find("", false); err != nil || got != chromium {
		t.Fatalf("Find = %q, %v; want %s", got, err, chromium)
	}
	// Each of the names is found on its own, in order.
	for i, name := range PathNames {
		dir := filepath.Join(root, "only", name)
		want := fakeExe(t, dir, name)
		// A later name next to it does not win.
		if i+1 < len(PathNames) {
			fakeExe(t, dir, PathNames[i+1])
		}
		f := finderIn(t, dir, root, "linux", nil)
		if got, err := f.Find("", false); err != nil || got != want {
			t.Errorf("%s: Find = %q, %v; want %s", name, got, err, want)
		}
	}
	// A file named chromium without the exec bit is no browser.
	noexec := filepath.Join(root, "noexec")
	if err := os.MkdirAll(noexec, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(noexec, "chromium"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := finderIn(t, noexec, root, "linux", nil).Find("", false); !errors.Is(err, ErrNoChromium) {
		t.Errorf("a non-executable chromium on PATH was taken: %q, %v", got, err)
	}
}

func TestFindPemChrome(t *testing.T) {
	root := t.TempDir()
	onPath := fakeExe(t, filepath.Join(root, "bin"), "chromium")
	mine := fakeExe(t, filepath.Join(root, "opt"), "my-chrome")
	path := filepath.Join(root, "bin")

	f := finderIn(t, path, root, "linux", map[string]string{"PEM_CHROME": mine})
	if got, err := f.Find("", false); err != nil || got != mine {
		t.Fatalf("PEM_CHROME: Find = %q, %v; want %s", got, err, mine)
	}
	// Options.Bin wins over PEM_CHROME.
	if got, err := f.Find(onPath, false); err != nil || got != onPath {
		t.Errorf("Options.Bin: Find = %q, %v; want %s", got, err, onPath)
	}
	// A bare name in PEM_CHROME is looked up on PATH.
	f = finderIn(t, path, root, "linux", map[string]string{"PEM_CHROME": "chromium"})
	if got, err := f.Find("", false); err != nil || got != onPath {
		t.Errorf("PEM_CHROME=chromium: Find = %q, %v; want %s", got, err, onPath)
	}
	// A PEM_CHROME that is wrong is an error, one message, even though a
	// chromium is on PATH: pem does not run another browser than the one
	// asked for.
	for _, c := range []struct{ val, why string }{
		{"/nonexistent", "does not exist"},
		{filepath.Join(root, "opt"), "is a directory"},
		{"no-such-browser", "is not on PATH"},
	} {
		f = finderIn(t, path, root, "linux", map[string]string{"PEM_CHROME": c.val})
		got, err := f.Find("", false)
		if !errors.Is(err, ErrNoChromium) || got != "" {
			t.Fatalf("PEM_CHROME=%s: Find = %q, %v; want ErrNoChromium", c.val, got, err)
		}
		msg := err.Error()
		if !strings.Contains(msg, "PEM_CHROME="+c.val+" "+c.why) || strings.Count(msg, "apt-get install chromium") != 1 ||
			!strings.HasSuffix(msg, InstallHint) {
			t.Errorf("PEM_CHROME=%s: message %q", c.val, msg)
		}
	}
}

func TestFindInstallLocations(t *testing.T) {
	root := t.TempDir()
	empty := filepath.Join(root, "empty")
	if err := os.MkdirAll(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		goos string
		env  map[string]string
		file string // created under root
	}{
		{"linux", nil, "/usr/lib/chromium/chromium"},
		{"linux", nil, "/usr/bin/chromium"},
		{"linux", nil, "/snap/bin/chromium"},
		{"linux", nil, "/opt/google/chrome/chrome"},
		{"darwin", nil, "/Applications/Google Chrome.app/Contents/MacOS/Google Chrome"},
		{"darwin", nil, "/Applications/Chromium.app/Contents/MacOS/Chromium"},
		{"darwin", map[string]string{"HOME": "/Users/ann"}, "/Users/ann/Applications/Chromium.app/Contents/MacOS/Chromium"},
		{"windows", map[string]string{"ProgramFiles": `C:\Program Files`}, `C:\Program Files\Google\Chrome\Application\chrome.exe`},
		{"windows", map[string]string{"ProgramFiles(x86)": `C:\Program Files (x86)`}, `C:\Program Files (x86)\Google\Chrome\Application\chrome.exe`},
		{"windows", map[string]string{"LocalAppData": `C:\Users\ann\AppData\Local`}, `C:\Users\ann\AppData\Local\Chromium\Application\chrome.exe`},
	}
	for _, c := range cases {
		t.Run(c.goos+c.file, func(t *testing.T) {
			sub := t.TempDir()
			fakeExe(t, sub, filepath.FromSlash(strings.ReplaceAll(c.file, `\`, "/")))
			f := finderIn(t, empty, sub, c.goos, c.env)
			if got, err := f.Find("", false); err != nil || got != c.file {
				t.Fatalf("Find = %q, %v; want %s", got, err, c.file)
			}
		})
	}
	// Debian's /usr/bin/chromium is a launcher script: the binary it runs
	// is preferred, found on PATH or not.
	sub := t.TempDir()
	fakeExe(t, sub, "usr/bin/chromium")
	fakeExe(t, sub, "usr/lib/chromium/chromium")
	f := finderIn(t, empty, sub, "linux", nil)
	f.LookPath = func(name string) (string, error) {
		if name == "chromium" {
			return "/usr/bin/chromium", nil
		}
		return "", exec.ErrNotFound
	}
	if got, err := f.Find("", false); err != nil || got != debianBinary {
		t.Errorf("Debian's launcher on PATH: Find = %q, %v; want %s", got, err, debianBinary)
	}
}

// Nothing found: one error that lists what was tried and how to install.
func TestFindNothing(t *testing.T) {
	root := t.TempDir()
	empty := filepath.Join(root, "empty")
	if err := os.MkdirAll(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, goos := range []string{"linux", "darwin", "windows"} {
		env := map[string]string{"ProgramFiles": `C:\Program Files`}
		got, err := finderIn(t, empty, root, goos, env).Find("", false)
		if !errors.Is(err, ErrNoChromium) || got != "" {
			t.Fatalf("%s: Find = %q, %v", goos, got, err)
		}
		msg := err.Error()
		for _, want := range append(append([]string{"PEM_CHROME is not set", empty}, PathNames...), Locations(goos, func(k string) string { return env[k] })...) {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: the error does not say it tried %q: %s", goos, want, msg)
			}
		}
		if strings.Count(msg, InstallHint) != 1 || !strings.HasSuffix(msg, InstallHint) {
			t.Errorf("%s: the install hint is not there once, at the end: %s", goos, msg)
		}
	}
}

// For a headless run the headless shell comes first, on PATH or installed;
// a headful run never takes it; PEM_CHROME and Options.Bin win over both.
func TestFindShell(t *testing.T) {
	root := t.TempDir()
	bin := filepath.Join(root, "bin")
	chromium := fakeExe(t, bin, "chromium")
	shell := fakeExe(t, bin, "chromium-headless-shell")
	f := finderIn(t, bin, root, "linux", nil)
	if got, err := f.Find("", false); err != nil || got != shell {
		t.Errorf("headless: Find = %q, %v; want %s", got, err, shell)
	}
	if got, err := f.Find("", true); err != nil || got != chromium {
		t.Errorf("headful: Find = %q, %v; want %s", got, err, chromium)
	}

	// Google's shell (Chrome for Testing) beside google-chrome, in a PATH dir
	// that comes after it: the shell still wins a headless run.
	g1, g2 := filepath.Join(root, "g1"), filepath.Join(root, "g2")
	chrome := fakeExe(t, g1, "google-chrome")
	gshell := fakeExe(t, g2, "chrome-headless-shell")
	f = finderIn(t, g1+string(os.PathListSeparator)+g2, root, "linux", nil)
	if got, err := f.Find("", false); err != nil || got != gshell {
		t.Errorf("chrome-headless-shell: Find = %q, %v; want %s", got, err, gshell)
	}
	if got, err := f.Find("", true); err != nil || got != chrome {
		t.Errorf("headful beside chrome-headless-shell: Find = %q, %v; want %s", got, err, chrome)
	}

	// Debian's installed shell (not on PATH) before a chromium on PATH.
	sub := t.TempDir()
	fakeExe(t, sub, "usr/lib/chromium/chromium-headless-shell")
	f = finderIn(t, filepath.Join(root, "only-chromium"), sub, "linux", nil)
	onlyChromium := fakeExe(t, filepath.Join(root, "only-chromium"), "chromium")
	if got, err := f.Find("", false); err != nil || got != debianShell {
		t.Errorf("installed shell: Find = %q, %v; want %s", got, err, debianShell)
	}
	if got, err := f.Find("", true); err != nil || got != onlyChromium {
		t.Errorf("headful beside the installed shell: Find = %q, %v; want %s", got, err, onlyChromium)
	}

	// Debian's /usr/bin/chromium-headless-shell on PATH is a launcher
	// script: the binary it execs is taken.
	sub = t.TempDir()
	fakeExe(t, sub, "usr/bin/chromium-headless-shell")
	fakeExe(t, sub, "usr/lib/chromium/chromium-headless-shell")
	f = finderIn(t, filepath.Join(root, "empty"), sub, "linux", nil)
	f.LookPath = func(name string) (string, error) {
		if name == "chromium-headless-shell" {
			return debianShellLauncher, nil
		}
		return "", exec.ErrNotFound
	}
	if got, err := f.Find("", false); err != nil || got != debianShell {
		t.Errorf("Debian's shell launcher on PATH: Find = %q, %v; want %s", got, err, debianShell)
	}

	// PEM_CHROME wins over the shell in a headless run.
	f = finderIn(t, bin, root, "linux", map[string]string{"PEM_CHROME": chromium})
	if got, err := f.Find("", false); err != nil || got != chromium {
		t.Errorf("PEM_CHROME=%s, headless: Find = %q, %v", chromium, got, err)
	}
	// A shell asked for by name or path serves a headless run and is an
	// error, not another browser, for a headful one.
	for _, explicit := range []string{shell, "chromium-headless-shell"} {
		f = finderIn(t, bin, root, "linux", map[string]string{"PEM_CHROME": explicit})
		if got, err := f.Find("", false); err != nil || got != shell {
			t.Errorf("PEM_CHROME=%s, headless: Find = %q, %v; want %s", explicit, got, err, shell)
		}
		got, err := f.Find("", true)
		if !errors.Is(err, ErrNoChromium) || got != "" {
			t.Fatalf("PEM_CHROME=%s, headful: Find = %q, %v; want ErrNoChromium", explicit, got, err)
		}
		if msg := err.Error(); !strings.Contains(msg, "PEM_CHROME="+explicit+" is a headless shell") || !strings.HasSuffix(msg, ShellHint) {
			t.Errorf("PEM_CHROME=%s, headful: message %q", explicit, msg)
		}
	}
	f = finderIn(t, bin, root, "linux", nil)
	if _, err := f.Find(gshell, true); err == nil || !strings.Contains(err.Error(), "Options.Bin="+gshell+" is a headless shell") {
		t.Errorf("Options.Bin=%s, headful: %v", gshell, err)
	}
}

// Nothing found for a headless run on Linux: the shell is in what was tried
// and in how to install.
func TestFindNothingShell(t *testing.T) {
	root := t.TempDir()
	empty := filepath.Join(root, "empty")
	if err := os.MkdirAll(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := finderIn(t, empty, root, "linux", nil).Find("", false)
	if !errors.Is(err, ErrNoChromium) {
		t.Fatalf("Find = %v", err)
	}
	msg := err.Error()
	for _, want := range append(append(append([]string{}, ShellNames...), ShellLocations("linux")...), "apt-get install chromium-headless-shell", "apt-get install chromium)") {
		if !strings.Contains(msg, want) {
			t.Errorf("headless: the error does not name %q: %s", want, msg)
		}
	}
	_, err = finderIn(t, empty, root, "linux", nil).Find("", true)
	if err == nil || strings.Contains(err.Error(), "headless-shell") {
		t.Errorf("headful: the error names the shell, which a headful run cannot use: %v", err)
	}
}

func TestIsShell(t *testing.T) {
	for bin, want := range map[string]bool{
		"/usr/lib/chromium/chromium-headless-shell":                true,
		"/usr/bin/chromium-headless-shell":                         true,
		"/opt/chrome-headless-shell-linux64/chrome-headless-shell": true,
		`C:\cft\chrome-headless-shell.exe`:                         true,
		"/usr/lib/chromium/chromium":                               false,
		"/opt/headless-shell/chrome":                               false,
	} {
		if got := IsShell(bin); got != want {
			t.Errorf("IsShell(%s) = %v, want %v", bin, got, want)
		}
	}
}
