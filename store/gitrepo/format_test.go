package gitrepo

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

func TestObjectFormat(t *testing.T) {
	for config, want := range map[string]string{
		"":                         "",
		"[core]\n\tbare = false\n": "",
		"[core]\n\trepositoryformatversion = 1\n[extensions]\n\tobjectformat = sha256\n": "sha256",
		"[Extensions]\n\tObjectFormat=SHA1\n":                                            "sha1",
		"[remote \"origin\"]\n\tobjectformat = sha256\n":                                 "",
		"; comment\n[extensions]\n# objectformat = sha256\n":                             "",
	} {
		if got := objectFormat([]byte(config)); got != want {
			t.Errorf("objectFormat(%q) = %q, want %q", config, got, want)
		}
	}
}

func TestCheckSupported(t *testing.T) {
	dir := t.TempDir()
	if err := CheckSupported(filepath.Join(dir, "not", "yet")); err != nil {
		t.Fatalf("no repository: %v", err)
	}
	sha1 := filepath.Join(dir, "sha1")
	if err := os.Mkdir(sha1, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Init(t.Context(), sha1); err != nil {
		t.Fatal(err)
	}
	if err := CheckSupported(filepath.Join(sha1, "k")); err != nil {
		t.Fatalf("a SHA-1 repository: %v", err)
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed: cannot make a SHA-256 repository")
	}
	sha256 := filepath.Join(dir, "sha256")
	if out, err := exec.Command("git", "init", "-q", "--object-format=sha256", sha256).CombinedOutput(); err != nil {
		t.Skipf("this git cannot make SHA-256 repositories: %v %s", err, out)
	}
	for _, d := range []string{sha256, filepath.Join(sha256, "k"), filepath.Join(sha256, "a", "b")} {
		if err := CheckSupported(d); !errors.Is(err, ErrUnsupportedRepo) {
			t.Errorf("CheckSupported(%s) = %v, want ErrUnsupportedRepo", d, err)
		}
	}
	if _, err := Open(t.Context(), sha256); !errors.Is(err, ErrUnsupportedRepo) {
		t.Errorf("Open of a SHA-256 repository = %v, want ErrUnsupportedRepo", err)
	}
}
