package store

import (
	"fmt"
	"strings"
	"time"

	"github.com/pemdev/pem/engine"
)

// Name rules. Every name that becomes a path segment is checked here before
// any file is touched; a bad name is engine.ErrUnsafePath.

// reservedName reports whether a segment is a name Windows reserves for a
// device (any case, with or without an extension), or .git.
func reservedName(seg string) bool {
	base := strings.ToUpper(seg)
	if strings.HasPrefix(base, ".GIT") && (len(base) == 4 || base[4] == '.') {
		return true
	}
	if i := strings.IndexByte(base, '.'); i >= 0 {
		base = base[:i]
	}
	switch base {
	case "CON", "PRN", "AUX", "NUL":
		return true
	}
	if len(base) == 4 && (strings.HasPrefix(base, "COM") || strings.HasPrefix(base, "LPT")) && base[3] >= '1' && base[3] <= '9' {
		return true
	}
	return false
}

// checkDomain accepts what engine.NormalizeDomain produces: a lower-case
// host name or IPv4 address in ASCII (punycode), one path segment.
func checkDomain(d string) error {
	if d == "" || len(d) > 253 {
		return fmt.Errorf("%w: domain %q must be 1 to 253 characters", engine.ErrUnsafePath, d)
	}
	if d[0] == '.' || d[0] == '-' || strings.Contains(d, "..") {
		return fmt.Errorf("%w: domain %q: a leading dot or dash, or \"..\", is not allowed", engine.ErrUnsafePath, d)
	}
	for i := 0; i < len(d); i++ {
		c := d[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			return fmt.Errorf("%w: domain %q: only lower-case a-z, 0-9, '.', '-' and '_' are allowed (normalize it with the URL rules first)", engine.ErrUnsafePath, d)
		}
	}
	if reservedName(d) {
		return fmt.Errorf("%w: domain %q is a reserved file name", engine.ErrUnsafePath, d)
	}
	return nil
}

func checkKey(k string) error {
	if !engine.ValidKey(k) {
		return fmt.Errorf("%w: intent key %q: use a-z, 0-9 and '-', at most %d characters", engine.ErrUnsafePath, k, engine.MaxIntentKey)
	}
	if reservedName(k) {
		return fmt.Errorf("%w: intent key %q is a reserved file name", engine.ErrUnsafePath, k)
	}
	return nil
}

func checkTraceID(id string) error {
	if !engine.ValidTraceID(id) {
		return fmt.Errorf("%w: trace id %q is not a 26-character ULID", engine.ErrUnsafePath, id)
	}
	return nil
}

const dayLayout = "2006-01-02"

func checkDay(day string) error {
	if len(day) != len(dayLayout) {
		return fmt.Errorf("%w: day %q is not YYYY-MM-DD", engine.ErrUnsafePath, day)
	}
	if _, err := time.Parse(dayLayout, day); err != nil {
		return fmt.Errorf("%w: day %q is not YYYY-MM-DD", engine.ErrUnsafePath, day)
	}
	return nil
}

func checkRef(ref engine.TraceRef) error {
	if err := checkDomain(ref.Domain); err != nil {
		return err
	}
	if err := checkDay(ref.Day); err != nil {
		return err
	}
	return checkTraceID(ref.ID)
}

// Tree layout (DESIGN §2). Paths are relative to the root, with forward slashes.
const (
	configFile    = "pem.yaml"
	tracesDir     = "traces"
	experienceDir = "experience"
	factsDir      = "facts"
	verdictsDir   = "verdicts"
	lockFile      = ".pem.lock"
	yamlExt       = ".yaml"
)

// The layout's names, for callers that spell no path by hand (the git side
// takes them as arguments: pem sync shares exactly TracesDir/…TraceExt).
const (
	ConfigFile    = configFile
	TracesDir     = tracesDir
	ExperienceDir = experienceDir
	FactsDir      = factsDir
	VerdictsDir   = verdictsDir
	TraceExt      = yamlExt
)

// TracePath returns traces/<domain>/<day>/<id>.yaml.
func TracePath(ref engine.TraceRef) string {
	return tracesDir + "/" + ref.Domain + "/" + ref.Day + "/" + ref.ID + yamlExt
}

// FactsPath returns facts/<domain>/<key>.yaml.
func FactsPath(domain, key string) string { return factsDir + "/" + domain + "/" + key + yamlExt }

// SitePath returns facts/<domain>/_site.yaml, the domain's site entry
// (engine.SiteKey: never an intent key, whose names are [a-z0-9-]).
func SitePath(domain string) string { return factsDir + "/" + domain + "/" + engine.SiteKey + yamlExt }

// siteFile is the file name of a site entry in a domain's facts directory.
const siteFile = engine.SiteKey + yamlExt

// ExperiencePath returns experience/<domain>/<key>.yaml.
func ExperiencePath(domain, key string) string {
	return experienceDir + "/" + domain + "/" + key + yamlExt
}

// VerdictPath returns verdicts/<domain>/<trace-id>/<judge>.yaml: one file per
// judge and run, so a judge judges a run once and two judges never collide.
func VerdictPath(domain, trace, judge string) string {
	return verdictsDir + "/" + domain + "/" + trace + "/" + judge + yamlExt
}

// RefOf returns where a trace is stored: its domain, the UTC day it started, its id.
func RefOf(t *engine.Trace) engine.TraceRef {
	return engine.TraceRef{Domain: t.Domain, Day: t.StartedAt.UTC().Format(dayLayout), ID: t.ID}
}

// CheckDomain, CheckKey and CheckRef apply the tree's name rules above; an
// error wraps engine.ErrUnsafePath. Other engine.Store implementations
// (storetest.MemStore) call them, so that every store refuses the same names.
func CheckDomain(d string) error { return checkDomain(d) }

// CheckKey checks an intent key (see CheckDomain).
func CheckKey(k string) error { return checkKey(k) }

// CheckRef checks a trace's domain, day and id (see CheckDomain).
func CheckRef(ref engine.TraceRef) error { return checkRef(ref) }
