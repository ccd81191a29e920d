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

// PathNames are the names looked up on PATH, in order, after PEM_CHROME.
var PathNames = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome"}

// debianLauncher is Debian's /usr/bin/chromium: a shell script that adds the
// desktop's flags, extensions and API keys before it execs debianBinary. pem
// runs the binary itself, as it always has.
const (
	debianLauncher = "/usr/bin/chromium"
	debianBinary   = "/usr/lib/chromium/chromium"
)

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

// Find returns the browser binary: explicit (Options.Bin) if given, else
// $PEM_CHROME, else the first of PathNames found on PATH, else the first of
// Locations that is an executable file. An explicit path or PEM_CHROME that
// is not one is an error of its own: pem does not silently run another
// browser than the one asked for. The error wraps ErrNoChromium and says
// what was tried and how to install one.
func (f Finder) Find(explicit string) (string, error) {
	src := "Options.Bin"
	if explicit == "" {
		explicit, src = f.Getenv("PEM_CHROME"), "PEM_CHROME"
	}
	if explicit != "" {
		p, err := f.check(explicit)
		if err != nil {
			return "", fmt.Errorf("%w: %s=%s %v; %s", ErrNoChromium, src, explicit, err, InstallHint)
		}
		return p, nil
	}
	for _, name := range PathNames {
		if p, err := f.LookPath(name); err == nil {
			if p == debianLauncher || p == "/bin/chromium" { // merged /usr: /bin is /usr/bin
				if b, err := f.check(debianBinary); err == nil {
					return b, nil
				}
			}
			return p, nil
		}
	}
	locs := Locations(f.GOOS, f.Getenv)
	for _, l := range locs {
		if p, err := f.check(l); err == nil {
			return p, nil
		}
	}
	how := InstallHint
	switch f.GOOS {
	case "darwin":
		how = "install Google Chrome (https://www.google.com/chrome/) or Chromium (brew install --cask chromium); or " + InstallHint
	case "windows":
		how = "install Google Chrome (https://www.google.com/chrome/); or " + InstallHint
	}
	return "", fmt.Errorf("%w: PEM_CHROME is not set, none of %s is on PATH (%s), and none of these exists: %s; %s",
		ErrNoChromium, strings.Join(PathNames, ", "), orNone(f.Getenv("PATH")), strings.Join(locs, ", "), how)
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
