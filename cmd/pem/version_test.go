package main

import (
	"runtime"
	"strings"
	"testing"
)

// TestVersionFlag: pem --version prints one line and exits 0; the MCP
// server's version comes from the same reading.
func TestVersionFlag(t *testing.T) {
	code, out, errs := runPem(t, "--version")
	if code != 0 || errs != "" {
		t.Fatalf("pem --version: exit %d, stderr %q", code, errs)
	}
	v := readBuildVersion()
	if out != v.Line()+"\n" || !strings.HasPrefix(out, "pem ") || !strings.HasSuffix(out, runtime.GOOS+"/"+runtime.GOARCH+"\n") {
		t.Fatalf("pem --version printed %q, want %q", out, v.Line())
	}
}

func TestBuildVersionStrings(t *testing.T) {
	for _, tc := range []struct {
		v          buildVersion
		line, mach string
	}{
		{buildVersion{Version: "v0.3.0", Go: "go1.26.8", Platform: "linux/amd64"},
			"pem v0.3.0 (revision unknown) go1.26.8 linux/amd64", "v0.3.0"},
		{buildVersion{Version: "v0.3.0", Revision: "1c8795a0c1d2e3f4", Time: "2026-12-01T11:25:54Z", Go: "go1.26.8", Platform: "linux/arm64"},
			"pem v0.3.0 (revision 1c8795a0c1d2e3f4, 2026-12-01T11:25:54Z) go1.26.8 linux/arm64", "v0.3.0+1c8795a0c1d2"},
		{buildVersion{Version: "(devel)", Revision: "1c8795a0c1d2e3f4", Modified: true, Go: "go1.26.8", Platform: "darwin/arm64"},
			"pem (devel) (revision 1c8795a0c1d2e3f4 with uncommitted changes) go1.26.8 darwin/arm64", "(devel)+1c8795a0c1d2.dirty"},
		{buildVersion{Version: "v0.0.0-20261201112554-1c8795a0c1d2+dirty", Revision: "1c8795a0c1d2e3f4", Modified: true, Go: "go1.26.8", Platform: "linux/amd64"},
			"pem v0.0.0-20261201112554-1c8795a0c1d2+dirty (revision 1c8795a0c1d2e3f4 with uncommitted changes) go1.26.8 linux/amd64", "v0.0.0-20261201112554-1c8795a0c1d2+dirty"},
	} {
		if got := tc.v.Line(); got != tc.line {
			t.Errorf("Line() = %q, want %q", got, tc.line)
		}
		if got := tc.v.String(); got != tc.mach {
			t.Errorf("String() = %q, want %q", got, tc.mach)
		}
	}
}
