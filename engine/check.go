package engine

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// This file holds the rules of `pem check` that are not the store's own
// (schema and path safety are store.(*Store).Check): secrets in files,
// commits that altered verified content, and what a pull request may touch.
// They are pure; the command walks the tree and the history and calls them.

// Kinds of problem pem check reports.
const (
	CheckSchema    = "schema"     // a file that does not parse or sits in the wrong place
	CheckPath      = "path"       // a symlink, a name pem would not write
	CheckSecret    = "secret"     // something that looks like a credential
	CheckFrozen    = "frozen"     // a commit altered a verified entry's content
	CheckDerived   = "derived"    // a pull request changes experience/
	CheckTraceEdit = "trace-edit" // a pull request edits or deletes a trace
)

// CheckProblem is one problem found by pem check.
type CheckProblem struct {
	Kind   string `json:"kind"`
	Path   string `json:"path,omitempty"`   // relative to the knowledge tree
	Commit string `json:"commit,omitempty"` // for history problems: the commit that did it
	Msg    string `json:"message"`          // what is wrong and what to do
}

// String is the one line pem check prints.
func (p CheckProblem) String() string {
	var b strings.Builder
	b.WriteString(p.Kind)
	b.WriteString(": ")
	if p.Path != "" {
		b.WriteString(p.Path)
		b.WriteString(": ")
	}
	if p.Commit != "" {
		b.WriteString("commit ")
		b.WriteString(p.Commit)
		b.WriteString(": ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// checkRule is one shape of secret.
type checkRule struct {
	name string
	re   *regexp.Regexp
	// group is the submatch holding the value (0: the whole match), checked
	// against placeholders.
	group int
}

var checkRules = []checkRule{
	{name: "a private key", re: regexp.MustCompile(`-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----`)},
	{name: "an AWS access key id", re: regexp.MustCompile(`\b(?:AKIA|ASIA)[0-9A-Z]{16}\b`)},
	{name: "an AWS secret access key", re: regexp.MustCompile(`(?i)aws_?secret_?access_?key["']?\s*[:=]\s*["']?([A-Za-z0-9/+=]{40})`), group: 1},
	{name: "a GitHub token", re: regexp.MustCompile(`\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})\b`)},
	{name: "a Slack token", re: regexp.MustCompile(`\bxox[abposr]-[A-Za-z0-9-]{10,}`)},
	{name: "a Google API key", re: regexp.MustCompile(`\bAIza[0-9A-Za-z_\-]{35}\b`)},
	{name: "an API secret key (sk-…)", re: regexp.MustCompile(`\bsk-(?:ant-|proj-|live-)?[A-Za-z0-9_\-]{24,}`)},
	{name: "a JSON web token", re: regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}`)},
	{name: "a bearer token", re: regexp.MustCompile(`(?i)\bbearer\s+([A-Za-z0-9\-._~+/]{20,}=*)`), group: 1},
	{name: "a password in a URL", re: regexp.MustCompile(`[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@"']+:([^/\s:@"']+)@`), group: 1},
	{name: "a password assignment", re: regexp.MustCompile(`(?i)\b(?:password|passwd|pwd|passphrase|secret|client_secret|api_?key|access_?token|auth_?token)\b["']?\s*[=:]\s*["']?([^\s"'&,;{}\[\]]{4,}|\{\{[^}]*\}\})`), group: 1},
}

// checkHarmless are values that are not secrets: pem's placeholders and the
// usual empties.
func checkHarmless(v string) bool {
	l := strings.ToLower(strings.Trim(v, `"' `))
	switch l {
	case "null", "none", "nil", "true", "false", "redacted", "xxxx", "****", "changeme", "example", "<redacted>", "[redacted]":
		return true
	}
	return strings.HasPrefix(v, "{{") || strings.Trim(l, "*x•.") == ""
}

// CheckSecrets scans one file's bytes for common secret shapes (private keys,
// AWS keys, GitHub and Slack tokens, API keys, JWTs, bearer tokens, passwords
// in URLs and password= assignments) and for the literal values given (name →
// value, e.g. the environment variables listed in PEM_SECRET_ENV; values
// shorter than 4 characters are ignored, as in Redact). pem's
// placeholders ({{secret:NAME}}, {{redacted}}) are not secrets. A problem
// names the line and the kind, never the value.
func CheckSecrets(path string, data []byte, values map[string]string) []CheckProblem {
	var out []CheckProblem
	text := string(data)
	lines := lineIndex{text: text}
	seen := map[string]bool{}
	add := func(off int, what string) {
		msg := fmt.Sprintf("line %d holds %s: remove it (and rotate it), then keep it out with {{secret:NAME}} placeholders", lines.of(off), what)
		if !seen[msg] {
			seen[msg] = true
			out = append(out, CheckProblem{Kind: CheckSecret, Path: path, Msg: msg})
		}
	}
	for _, r := range checkRules {
		for _, m := range r.re.FindAllStringSubmatchIndex(text, -1) {
			v := text[m[0]:m[1]]
			if r.group > 0 && len(m) > 2*r.group+1 && m[2*r.group] >= 0 {
				v = text[m[2*r.group]:m[2*r.group+1]]
			}
			if checkHarmless(v) || strings.HasSuffix(text[:m[0]], "{{") { // {{secret:NAME}} itself
				continue
			}
			add(m[0], r.name)
		}
	}
	names := make([]string, 0, len(values))
	for n := range values {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		v := values[n]
		if len(v) < 4 {
			continue
		}
		for off := 0; ; {
			i := strings.Index(text[off:], v)
			if i < 0 {
				break
			}
			add(off+i, "the value of $"+n)
			off += i + len(v)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Msg < out[j].Msg })
	return out
}

// lineIndex tells the line of a byte offset: the offsets of the line breaks
// are found in one pass over the text, on the first question, and each
// question is then a binary search (a file with a match on every line costs
// one pass, not one recount from the start per match).
type lineIndex struct {
	text   string
	breaks []int // offsets of every '\n', found on the first question
	built  bool
}

// of returns the 1-based line that holds the byte at off.
func (x *lineIndex) of(off int) int {
	if !x.built {
		x.built = true
		for i := 0; ; {
			j := strings.IndexByte(x.text[i:], '\n')
			if j < 0 {
				break
			}
			x.breaks = append(x.breaks, i+j)
			i += j + 1
		}
	}
	return sort.SearchInts(x.breaks, off) + 1
}

// CheckFrozenChange reports a change of a facts entry that altered verified
// content: the old version was verified and the new one has different
// content without superseding the old revision (or the entry was deleted).
// Lifecycle fields (status, history, last_verified, provenance) may move.
// commit names the commit that made the change.
func CheckFrozenChange(path, commit string, old, new *Facts) *CheckProblem {
	if old == nil || old.Status != Verified {
		return nil
	}
	rev := old.Revision
	if rev == "" {
		rev = old.ContentHash()
	}
	if new == nil {
		return &CheckProblem{Kind: CheckFrozen, Path: path, Commit: commit,
			Msg: fmt.Sprintf("deleted verified entry r%s: verified knowledge is retired (status retired) or superseded by a new revision, never deleted; restore it", rev)}
	}
	if new.ContentHash() == old.ContentHash() {
		return nil
	}
	if new.Supersedes != "" && (new.Supersedes == rev || new.Supersedes == old.ContentHash()) {
		return nil
	}
	return &CheckProblem{Kind: CheckFrozen, Path: path, Commit: commit,
		Msg: fmt.Sprintf("changed the content of verified revision r%s (now r%s) without superseding it: revert the edit, or propose a new revision with 'supersedes: %s' (pem deep-learn does)", rev, new.ContentHash(), rev)}
}

// PRChange is one file a pull request changes, placed by the tree's layout
// (the store's, handed in: engine spells no path).
type PRChange struct {
	Path           string // relative to the knowledge tree
	Derived        bool   // a derived file (experience/)
	Trace          bool   // a trace file
	Added, Deleted bool
}

// CheckPRChange reports a file change a contributor's pull request must not
// make: any change of a derived file (only the consolidator on the shared
// branch writes experience/) and any edit or deletion of a trace (traces are
// immutable; contributions only add them).
func CheckPRChange(c PRChange) *CheckProblem {
	switch {
	case c.Derived:
		return &CheckProblem{Kind: CheckDerived, Path: c.Path,
			Msg: "experience/ is derived and written only by the scheduled consolidation: drop this change from the pull request (git checkout <base> -- " + c.Path + ", or git rm it if it is new) and contribute traces instead"}
	case c.Trace && c.Deleted:
		return &CheckProblem{Kind: CheckTraceEdit, Path: c.Path,
			Msg: "deletes a trace: traces are immutable and expire only through consolidation; restore it (git checkout <base> -- " + c.Path + ")"}
	case c.Trace && !c.Added:
		return &CheckProblem{Kind: CheckTraceEdit, Path: c.Path,
			Msg: "edits a trace: traces are immutable records of a run; restore it (git checkout <base> -- " + c.Path + ") and record a new run instead"}
	}
	return nil
}
