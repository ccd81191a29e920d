package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// PEM_CHROME pointing nowhere: exit 12 and one message that names the
// variable and says how to install, once; never "report it".
func TestNoChromiumOneMessage(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "k")
	if code, _, errs := runPem(t, "init", dir); code != 0 {
		t.Fatalf("init: %s", errs)
	}
	t.Setenv("PEM_CHROME", "/nonexistent")
	code, out, errs := runPem(t, "--knowledge", dir, "agent", "run", "How many stars?", "--url", "http://127.0.0.1:9/")
	if code != exitNoBrowser {
		t.Fatalf("exit %d, want %d\n%s\n%s", code, exitNoBrowser, out, errs)
	}
	if strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "PEM_CHROME=/nonexistent does not exist") ||
		strings.Count(errs, "apt-get install chromium") != 1 || strings.Contains(errs, "report it") {
		t.Errorf("stderr:\n%s", errs)
	}
}
