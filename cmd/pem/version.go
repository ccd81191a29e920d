package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Set by the release build (.github/scripts/release.sh, -ldflags "-X
// main.version=v0.x.y -X main.revision=…"); empty in every other build, where
// the build info is used instead: `go install …/cmd/pem@v0.x.y` stamps v0.x.y,
// and a build inside a git clone stamps the tag or a pseudo-version and the
// revision. The ldflags stand in where the go command records no revision (a
// git worktree, whose .git is a file, or -buildvcs=false in GOFLAGS).
var (
	version      string
	revision     string
	revisionTime string
	modified     string // "true" when built from uncommitted changes
)

// buildVersion is what `pem --version` and the MCP server report, from one
// place: the version, the VCS revision and its time when the build recorded
// them, the Go version and the platform.
type buildVersion struct {
	Version  string // v0.3.0, a pseudo-version, or (devel)
	Revision string // the full commit hash; "" when not recorded (go install from the proxy)
	Time     string // the commit time, RFC 3339; "" when not recorded
	Modified bool   // built from a work tree with uncommitted changes
	Go       string
	Platform string
}

// readBuildVersion reads the version from the ldflags and runtime/debug.ReadBuildInfo.
func readBuildVersion() buildVersion {
	v := buildVersion{Version: version, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v.Version == "" && bi.Main.Version != "" {
			v.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Revision = s.Value
			case "vcs.time":
				v.Time = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
	}
	if v.Revision == "" && revision != "" {
		v.Revision, v.Time, v.Modified = revision, revisionTime, modified == "true"
	}
	if v.Version == "" {
		v.Version = "(devel)"
	}
	return v
}

// String is the version for machines (the MCP server's implementation
// version): the module version, with the short revision appended when the
// version itself does not name the commit.
func (v buildVersion) String() string {
	s := v.Version
	if r := v.short(); r != "" && !strings.Contains(s, r) {
		s += "+" + r
		if v.Modified && !strings.HasSuffix(s, "dirty") {
			s += ".dirty"
		}
	}
	return s
}

func (v buildVersion) short() string {
	if len(v.Revision) > 12 {
		return v.Revision[:12]
	}
	return v.Revision
}

// Line is `pem --version`'s output, one line:
//
//	pem v0.3.0 (revision 1c8795a0c1d2…, 2026-12-01T11:25:54Z) go1.26.8 linux/amd64
func (v buildVersion) Line() string {
	rev := "revision unknown"
	if v.Revision != "" {
		rev = "revision " + v.Revision
		if v.Modified {
			rev += " with uncommitted changes"
		}
		if v.Time != "" {
			rev += ", " + v.Time
		}
	}
	return fmt.Sprintf("pem %s (%s) %s %s", v.Version, rev, v.Go, v.Platform)
}
