package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestExamples runs docs/examples/*.py, as a user plugging pem into an agent
// would: against a pem built from this source and a fresh knowledge tree.
// Each script exits non-zero when pem does not answer as the script expects.
func TestExamples(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3 is not on PATH: the examples in docs/examples are Python scripts; install python3 (stdlib only) to run them")
	}
	pem := filepath.Join(t.TempDir(), "pem")
	if out, err := exec.Command("go", "build", "-o", pem, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	examples, err := filepath.Glob(filepath.Join("..", "..", "docs", "examples", "*.py"))
	if err != nil || len(examples) < 2 {
		t.Fatalf("docs/examples holds %d Python scripts (%v), want the MCP and the CLI example", len(examples), err)
	}
	for _, script := range examples {
		script, _ = filepath.Abs(script)
		t.Run(filepath.Base(script), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "knowledge")
			if out, err := exec.Command(pem, "init", dir).CombinedOutput(); err != nil {
				t.Fatalf("pem init: %v\n%s", err, out)
			}
			cmd := exec.Command(python, script, pem)
			cmd.Dir = t.TempDir()
			cmd.Env = append(os.Environ(), EnvKnowledgeDir+"="+dir)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("python3 %s: %v\n%s", script, err, out)
			}
			// Both save the sample trace; the tree holds it.
			if !strings.Contains(string(out), "saved trace") {
				t.Errorf("python3 %s printed no saved trace:\n%s", script, out)
			}
			traces, _ := filepath.Glob(filepath.Join(dir, "traces", "github.com", "*", "*.yaml"))
			if len(traces) != 1 {
				t.Errorf("%s left %d traces under traces/github.com, want 1", script, len(traces))
			}
		})
	}
}
