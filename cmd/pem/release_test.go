package main

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestRelease runs the release script (what `make release` and
// release.yml run) for this platform only, checks the checksum file against
// the archive, unpacks it and runs `pem --version` from it; then installs the
// archive the way the workflows do (pem-install.sh: checksum verified,
// cached, a tampered archive refused).
func TestRelease(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the release scripts are bash")
	}
	for _, tool := range []string{"bash", "tar", "gzip", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is missing: the release scripts need it", tool)
		}
	}
	const version = "v0.0.0-test.1"
	v := strings.TrimPrefix(version, "v")
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	rel := filepath.Join(tmp, "releases", version) // laid out as GitHub serves releases
	script := func(env []string, name string, args ...string) (string, error) {
		cmd := exec.Command("bash", append([]string{filepath.Join(root, ".github", "scripts", name)}, args...)...)
		cmd.Dir, cmd.Env = tmp, append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	platform := runtime.GOOS + "/" + runtime.GOARCH
	if out, err := script([]string{"DIST=" + rel}, "release.sh", version, platform); err != nil {
		t.Fatalf("release.sh %s %s: %v\n%s", version, platform, err, out)
	}

	name := fmt.Sprintf("pem_%s_%s_%s", v, runtime.GOOS, runtime.GOARCH)
	archive := filepath.Join(rel, name+".tar.gz")
	data, err := os.ReadFile(archive)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	sums, err := os.ReadFile(filepath.Join(rel, "pem_"+v+"_checksums.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if want := hex.EncodeToString(sum[:]) + "  " + name + ".tar.gz\n"; string(sums) != want {
		t.Fatalf("checksum file:\n%s\nwant exactly\n%s", sums, want)
	}

	// Unpack: one directory with pem and the README.
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	unpacked := filepath.Join(tmp, "unpacked")
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s is owned by %d:%d, want 0:0", h.Name, h.Uid, h.Gid)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		dst := filepath.Join(unpacked, filepath.FromSlash(h.Name))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		w, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, os.FileMode(h.Mode)&0o777)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(w, tr); err != nil {
			t.Fatal(err)
		}
		w.Close()
	}
	if got, want := strings.Join(names, " "), name+"/ "+name+"/README.md "+name+"/pem"; got != want {
		t.Errorf("archive holds %q, want %q", got, want)
	}
	pemBin := filepath.Join(unpacked, name, "pem")
	out, err := exec.Command(pemBin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("pem --version from the archive: %v\n%s", err, out)
	}
	line := strings.TrimSpace(string(out))
	wantPrefix := "pem " + version + " (revision "
	if head, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output(); err == nil {
		wantPrefix += strings.TrimSpace(string(head))
	}
	if !strings.HasPrefix(line, wantPrefix) || !strings.HasSuffix(line, ") "+runtime.Version()+" "+platform) {
		t.Fatalf("pem --version says %q, want %q… %s %s", line, wantPrefix, runtime.Version(), platform)
	}
	// Built with make build's tags (the Makefile's PEM_TAGS): the release
	// starts as fast as the binary docs/performance.md measured.
	if bi, err := exec.Command("go", "version", "-m", pemBin).CombinedOutput(); err != nil {
		t.Errorf("go version -m %s: %v\n%s", pemBin, err, bi)
	} else if !strings.Contains(string(bi), "-tags=urfave_cli_no_docs") {
		t.Errorf("the release binary was not built with -tags urfave_cli_no_docs (make build's PEM_TAGS); its build info:\n%s", bi)
	}
	// A static binary: no interpreter, no shared libraries.
	if runtime.GOOS == "linux" {
		if b, err := os.ReadFile(pemBin); err == nil && strings.Contains(string(b[:min(len(b), 4096)]), "ld-linux") {
			t.Errorf("%s names a dynamic loader: not a static build", pemBin)
		}
	}

	// The workflows' install: from the release, checksum verified, cached.
	env := []string{"PEM_RELEASES=file://" + filepath.Join(tmp, "releases")}
	bin := filepath.Join(tmp, "bin")
	out2, err := script(env, "pem-install.sh", version, bin)
	if err != nil || !strings.Contains(out2, "verified") {
		t.Fatalf("pem-install.sh: %v\n%s", err, out2)
	}
	if got, _ := exec.Command(filepath.Join(bin, "pem"), "--version").Output(); strings.TrimSpace(string(got)) != line {
		t.Errorf("installed pem says %q, want %q", got, line)
	}
	if out2, err := script(env, "pem-install.sh", version, bin); err != nil || !strings.Contains(out2, "cached") {
		t.Errorf("second pem-install.sh did not use the installed pem: %v\n%s", err, out2)
	}
	if err := os.WriteFile(archive, append(data[:len(data):len(data)], 0), 0o644); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(tmp, "bin2")
	if out2, err := script(env, "pem-install.sh", version, other); err == nil || !strings.Contains(out2, "refusing") {
		t.Errorf("pem-install.sh installed a tampered archive: %v\n%s", err, out2)
	}
	if _, err := os.Stat(filepath.Join(other, "pem")); err == nil {
		t.Errorf("a tampered archive left %s/pem", other)
	}
	if out2, err := script(env, "pem-install.sh", "latest", other); err == nil || !strings.Contains(out2, "pin one") {
		t.Errorf("pem-install.sh latest: %v\n%s", err, out2)
	}
}

// TestModuleZipable: `go install github.com/pemdev/pem/cmd/pem@v…` needs the
// module zip the proxy makes from the tag, and the go command refuses a zip
// with two paths equal but for case or with a name Windows reserves
// (golang.org/x/mod/module.CheckFilePath): either would break every
// install. It also needs a go.mod without replace directives. Checked over
// the files git tracks.
func TestModuleZipable(t *testing.T) {
	root := filepath.Join("..", "..")
	out, err := exec.Command("git", "-C", root, "ls-files", "-z").Output()
	if err != nil {
		t.Skipf("git ls-files: %v (not a git checkout)", err)
	}
	reserved := map[string]bool{"con": true, "prn": true, "aux": true, "nul": true}
	for i := 1; i <= 9; i++ {
		reserved[fmt.Sprintf("com%d", i)], reserved[fmt.Sprintf("lpt%d", i)] = true, true
	}
	seen := map[string]string{}
	for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		if other, ok := seen[strings.ToLower(f)]; ok {
			t.Errorf("%s and %s differ only in case: the module zip would be refused", other, f)
		}
		seen[strings.ToLower(f)] = f
		for _, e := range strings.Split(f, "/") {
			short, _, _ := strings.Cut(e, ".")
			if reserved[strings.ToLower(short)] || strings.HasSuffix(e, ".") {
				t.Errorf("%s: %q is a name Windows reserves: the module zip would be refused", f, e)
			}
			for _, r := range e {
				if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("!#$%&()+,-.=@[]^_{}~ ", r)) {
					t.Errorf("%s: %q is not allowed in a module path", f, r)
				}
			}
		}
	}
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(mod), "module github.com/pemdev/pem\n") {
		t.Errorf("go.mod does not start with the module path github.com/pemdev/pem")
	}
	for _, l := range strings.Split(string(mod), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "replace") {
			t.Errorf("go.mod has %q: go install …@version refuses modules with replace directives", l)
		}
	}
}
