package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rhysd/actionlint"
)

// TestWorkflowsLint runs actionlint (as a library) over .github/workflows:
// syntax, expressions, action inputs, untrusted inputs in scripts, and the
// shell scripts themselves through shellcheck (Debian: apt-get install
// shellcheck; make test installs it).
func TestWorkflowsLint(t *testing.T) {
	dir := filepath.Join("..", "..", ".github", "workflows")
	files, err := filepath.Glob(filepath.Join(dir, "*.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ci.yml", "pem-consolidate.yml", "pem-check.yml", "pem-deep-learn.yml"} {
		found := false
		for _, f := range files {
			found = found || filepath.Base(f) == want
		}
		if !found {
			t.Errorf("%s is missing from %s", want, dir)
		}
	}
	opts := &actionlint.LinterOptions{Oneline: true}
	sc, err := exec.LookPath("shellcheck")
	if err != nil {
		t.Fatal("shellcheck is missing, so the scripts inside the workflows cannot be checked: install it with 'apt-get install shellcheck' (make test does)")
	}
	opts.Shellcheck = sc
	var out bytes.Buffer
	l, err := actionlint.NewLinter(&out, opts)
	if err != nil {
		t.Fatal(err)
	}
	errs, err := l.LintFiles(files, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range errs {
		t.Errorf("%s:%d:%d: %s [%s]", e.Filepath, e.Line, e.Column, e.Message, e.Kind)
	}
}

// TestWorkflowsRunPem: the workflows call pem the way its CLI accepts.
func TestWorkflowsRunPem(t *testing.T) {
	dir := filepath.Join("..", "..", ".github", "workflows")
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for name, wants := range map[string][]string{
		"ci.yml": {"make test", "make cross", "go-version: \"1.26\""},
		"pem-consolidate.yml": {"schedule:", "consolidate", "diff \"$BEFORE\" HEAD --format markdown", "gh pr create", "report --html \"$RUNNER_TEMP/pem-report\"", "name: pem-report",
			"sync --state-only", "fetch-depth: 1"},
		"pem-check.yml":      {"pull_request:", "check --pr \"origin/$BASE_REF\"", "report --html \"$RUNNER_TEMP/pem-report\"", "name: pem-report"},
		"pem-deep-learn.yml": {"schedule:", "deep-learn --branch", "gh pr create", "sync --state-only", "fetch-depth: 1"},
	} {
		text := read(name)
		for _, w := range wants {
			if !strings.Contains(text, w) {
				t.Errorf("%s does not contain %q", name, w)
			}
		}
	}
	// The flags they use exist.
	app, _ := newApp(nil, &bytes.Buffer{}, &bytes.Buffer{})
	flags := map[string][]string{"diff": {"format"}, "check": {"pr"}, "deep-learn": {"branch"}, "report": {"html"}, "sync": {"state-only"}}
	for cmd, names := range flags {
		var c = app.Command(cmd)
		if c == nil {
			t.Fatalf("no command %s", cmd)
		}
		for _, n := range names {
			ok := false
			for _, f := range c.Flags {
				for _, fn := range f.Names() {
					ok = ok || fn == n
				}
			}
			if !ok {
				t.Errorf("pem %s has no --%s, which the workflows use", cmd, n)
			}
		}
	}
}
