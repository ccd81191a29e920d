package rod

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// InstallHint is what the error of a failed discovery ends with. cmd/pem's
// exit table appends the same words to exit code 12 unless the message holds
// them already, so they are said once.
const InstallHint = "install Chromium (apt-get install chromium) or point PEM_CHROME at a Chromium binary"

// PathNames are the names looked up on PATH, in order, after PEM_CHROME
// (and, for a headless run, after the headless shell).
var PathNames = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome"}

// ShellNames are the headless shells looked up on PATH for a headless run,
// before PathNames: Debian's chromium-headless-shell and Google's
// chrome-headless-shell (Chrome for Testing). The shell is Chromium's old
// headless mode, Blink without the browser UI: a page load costs it about
// half the CPU of the full browser in new headless mode (docs/performance.md,
// "P1 round time, fourth round"). It cannot show a window, so a headful run
// never takes it.
var ShellNames = []string{"chromium-headless-shell", "chrome-headless-shell"}

// ShellHint is what the error of a headful run given a headless shell ends
// with; it holds InstallHint, so cmd/pem's exit table adds nothing.
const ShellHint = "unset PEM_CHROME (pem then takes the system Chromium, which has a window), or " + InstallHint

// debianLauncher is Debian's /usr/bin/chromium: a shell script that adds the
// desktop's flags, extensions and API keys before it execs debianBinary. pem
// runs the binary itself, as it always has. Debian's
// /usr/bin/chromium-headless-shell is a two-line script that execs
// debianShell; pem runs that binary too.
const (
	debianLauncher      = "/usr/bin/chromium"
	debianBinary        = "/usr/lib/chromium/chromium"
	debianShellLauncher = "/usr/bin/chromium-headless-shell"
	debianShell         = "/usr/lib/chromium/chromium-headless-shell"
)

// launchers maps a launcher script found on PATH (or its merged-/usr twin
// under /bin) to the binary it runs.
var launchers = map[string]string{
	debianLauncher: debianBinary, "/bin/chromium": debianBinary,
	debianShellLauncher: debianShell, "/bin/chromium-headless-shell": debianShell,
}

// Finder looks for a Chromium (or Google Chrome) binary. Its fields are the
// environment it looks in, so that tests can fake every part of it;
// SystemFinder is the real one.
type Finder struct {
	Getenv   func(string) string
	LookPath func(string) (string, error) // exec.LookPath: searches Getenv's PATH
	Stat     func(string) (fs.FileInfo, error)
	GOOS     string
}

// SystemFinder looks in this process's environment and file system.
func SystemFinder() Finder {
	return Finder{Getenv: os.Getenv, LookPath: exec.LookPath, Stat: os.Stat, GOOS: runtime.GOOS}
}

// Locations are the usual install locations on goos, tried in order after
// the names on PATH. getenv expands the per-user and Windows locations.
func Locations(goos string, getenv func(string) string) []string {
	switch goos {
	case "linux":
		return []string{
			debianBinary, debianLauncher, // Debian's chromium
			"/usr/lib/chromium-browser/chromium-browser", "/usr/bin/chromium-browser", // older Ubuntu
			"/snap/bin/chromium",                                                                   // Ubuntu's snap
			"/usr/bin/google-chrome-stable", "/usr/bin/google-chrome", "/opt/google/chrome/chrome", // Google's package
		}
	case "darwin":
		apps := []string{"/Applications"}
		if home := getenv("HOME"); home != "" {
			apps = append(apps, home+"/Applications")
		}
		var out []string
		for _, a := range apps {
			out = append(out, a+"/Google Chrome.app/Contents/MacOS/Google Chrome", a+"/Chromium.app/Contents/MacOS/Chromium")
		}
		return out
	case "windows":
		var out []string
		for _, v := range []string{"ProgramFiles", "ProgramFiles(x86)", "LocalAppData"} {
			dir := strings.TrimRight(getenv(v), `\/`)
			if dir == "" {
				continue
			}
			out = append(out, dir+`\Google\Chrome\Application\chrome.exe`, dir+`\Chromium\Application\chrome.exe`)
		}
		return out
	}
	return []string{"/usr/local/bin/chromium", "/usr/local/bin/chrome", "/usr/pkg/bin/chromium"} // the BSDs
}

// ShellLocations are the install locations of a headless shell on goos,
// tried for a headless run after ShellNames on PATH. Only Debian packages
// one; elsewhere a shell is found through PATH or PEM_CHROME.
func ShellLocations(goos string) []string {
	if goos == "linux" {
		return []string{debianShell, debianShellLauncher}
	}
	return nil
}

// IsShell reports whether bin is a headless shell (by its file name), which
// cannot show a window.
func IsShell(bin string) bool {
	base := strings.TrimSuffix(strings.ToLower(filepath.Base(strings.ReplaceAll(bin, `\`, "/"))), ".exe")
	for _, n := range ShellNames {
		if base == n {
			return true
		}
	}
	return false
}

// Find returns the browser binary for a headless run (headful false) or a
// run that shows its window: explicit (Options.Bin) if given, else
// $PEM_CHROME, else — headless only — the first of ShellNames on PATH, else
// of ShellLocations that is an executable file, else the first of PathNames
// on PATH, else the first of Locations that is an executable file. An
// explicit path or PEM_CHROME that is not one is an error of its own: pem
// does not silently run another browser than the one asked for; so is a
// headless shell asked for a headful run. The error wraps ErrNoChromium and
// says what was tried and how to install one.
func (f Finder) Find(explicit string, headful bool) (string, error) {
	src := "Options.Bin"
	if explicit == "" {
		explicit, src = f.Getenv("PEM_CHROME"), "PEM_CHROME"
	}
	if explicit != "" {
		p, err := f.check(explicit)
		if err != nil {
			return "", fmt.Errorf("%w: %s=%s %v; %s", ErrNoChromium, src, explicit, err, InstallHint)
		}
		if headful && IsShell(p) {
			return "", fmt.Errorf("%w: %s=%s is a headless shell, which cannot show the window a headful run asks for; %s",
				ErrNoChromium, src, explicit, ShellHint)
		}
		return p, nil
	}
	var tried []string
	if !headful {
		if p, ok := f.onPath(ShellNames); ok {
			return p, nil
		}
		if p, ok := f.firstFile(ShellLocations(f.GOOS)); ok {
			return p, nil
		}
		tried = append(tried, ShellNames...)
	}
	if p, ok := f.onPath(PathNames); ok {
		return p, nil
	}
	locs := Locations(f.GOOS, f.Getenv)
	if p, ok := f.firstFile(locs); ok {
		return p, nil
	}
	if !headful {
		locs = append(ShellLocations(f.GOOS), locs...)
	}
	how := InstallHint
	switch f.GOOS {
	case "linux":
		if !headful {
			how = "install Chromium's headless shell (apt-get install chromium-headless-shell, headless runs only) or " + InstallHint
		}
	case "darwin":
		how = "install Google Chrome (https://www.google.com/chrome/) or Chromium (brew install --cask chromium); or " + InstallHint
	case "windows":
		how = "install Google Chrome (https://www.google.com/chrome/); or " + InstallHint
	}
	return "", fmt.Errorf("%w: PEM_CHROME is not set, none of %s is on PATH (%s), and none of these exists: %s; %s",
		ErrNoChromium, strings.Join(append(tried, PathNames...), ", "), orNone(f.Getenv("PATH")), strings.Join(locs, ", "), how)
}

// onPath returns the first of names on PATH; a launcher script of
// Debian's resolves to the binary it runs, when that is there.
func (f Finder) onPath(names []string) (string, bool) {
	for _, name := range names {
		p, err := f.LookPath(name)
		if err != nil {
			continue
		}
		if b, ok := launchers[p]; ok {
			if b, err := f.check(b); err == nil {
				return b, true
			}
		}
		return p, true
	}
	return "", false
}

// firstFile returns the first of paths that is an executable file.
func (f Finder) firstFile(paths []string) (string, bool) {
	for _, l := range paths {
		if p, err := f.check(l); err == nil {
			return p, true
		}
	}
	return "", false
}

// check accepts an executable file: a bare name is looked up on PATH, a
// path must exist, be no directory and (but on Windows) be executable.
func (f Finder) check(p string) (string, error) {
	if !strings.ContainsAny(p, `/\`) {
		found, err := f.LookPath(p)
		if err != nil {
			return "", errors.New("is not on PATH")
		}
		return found, nil
	}
	st, err := f.Stat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", errors.New("does not exist")
	case err != nil:
		return "", fmt.Errorf("cannot be read (%v)", err)
	case st.IsDir():
		return "", errors.New("is a directory, not the browser's binary")
	case f.GOOS != "windows" && st.Mode().Perm()&0o111 == 0:
		return "", errors.New("is not executable")
	}
	return filepath.Clean(p), nil
}

func orNone(s string) string {
	if s == "" {
		return "PATH is empty"
	}
	return s
}
