// Package gitcli runs the real git CLI for tests: the one helper behind every
// test that checks pem's repositories against git itself. git runs with a
// fixed identity, no system or user configuration (HOME is the repository)
// and no merge editor. It imports the standard library only, so that any
// test, store's internal ones too, can use it.
package gitcli

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Output runs git with args in dir and returns its combined output, trimmed.
func Output(dir string, args ...string) (string, error) {
	return OutputEnv(dir, nil, args...)
}

// OutputEnv is Output with env (NAME=value) added to git's environment,
// e.g. GIT_INDEX_FILE.
func OutputEnv(dir string, env []string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(),
		"GIT_AUTHOR_NAME=tester", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=tester", "GIT_COMMITTER_EMAIL=t@example.com",
		"GIT_CONFIG_NOSYSTEM=1", "HOME="+dir, "XDG_CONFIG_HOME="+dir, "GIT_MERGE_AUTOEDIT=no"), env...)
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// Run runs git with args in dir and returns its trimmed output; a failure
// ends the test with git's output.
func Run(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := Output(dir, args...)
	if err != nil {
		t.Fatalf("git %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return out
}
