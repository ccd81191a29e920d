package engine

import (
	"fmt"
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

// CheckSecrets scans one file's bytes for the secrets engine.FindSecrets
// detects (the scrubber's rules: private keys, cloud, GitHub, GitLab, Slack
// and Stripe tokens, JWTs, Authorization headers, Bearer and Basic
// credentials, cookies, URL userinfo, credential parameters) and for the literal values given (name →
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
		where := fmt.Sprintf("line %d", lines.of(off))
		if f := yamlFieldAt(text, off); f != "" {
			where += " (field " + f + ")"
		}
		msg := fmt.Sprintf("%s holds %s: remove it (and rotate it), then keep it out with {{secret:NAME}} placeholders", where, what)
		if !seen[msg] {
			seen[msg] = true
			out = append(out, CheckProblem{Kind: CheckSecret, Path: path, Msg: msg})
		}
	}
	// The scrubber's own detection: what pem check forbids is exactly what
	// a save would have removed.
	for _, h := range FindSecrets(text) {
		add(h.Offset, article(string(h.Kind)))
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
	Site           bool   // a site entry (derived too: written only by consolidation)
	Trace          bool   // a trace file
	Verdict        bool   // a verdict file
	Added, Deleted bool
}

// CheckPRChange reports a file change a contributor's pull request must not
// make: any change of a derived file (only the consolidator on the shared
// branch writes experience/ and the site entries) and any edit or deletion of a trace (traces are
// immutable; contributions only add them).
func CheckPRChange(c PRChange) *CheckProblem {
	// Verdicts, like traces, are immutable and only ever added.
	switch {
	case c.Site:
		return &CheckProblem{Kind: CheckDerived, Path: c.Path,
			Msg: "a site entry is derived from every intent's runs and written only by the scheduled consolidation: drop this change from the pull request (git checkout <base> -- " + c.Path + ", or git rm it if it is new) and contribute traces instead"}
	case c.Derived:
		return &CheckProblem{Kind: CheckDerived, Path: c.Path,
			Msg: "experience/ is derived and written only by the scheduled consolidation: drop this change from the pull request (git checkout <base> -- " + c.Path + ", or git rm it if it is new) and contribute traces instead"}
	case c.Trace && c.Deleted:
		return &CheckProblem{Kind: CheckTraceEdit, Path: c.Path,
			Msg: "deletes a trace: traces are immutable and expire only through consolidation; restore it (git checkout <base> -- " + c.Path + ")"}
	case c.Trace && !c.Added:
		return &CheckProblem{Kind: CheckTraceEdit, Path: c.Path,
			Msg: "edits a trace: traces are immutable records of a run; restore it (git checkout <base> -- " + c.Path + ") and record a new run instead"}
	case c.Verdict && c.Deleted:
		return &CheckProblem{Kind: CheckTraceEdit, Path: c.Path,
			Msg: "deletes a verdict: verdicts are immutable judgements of a run; restore it (git checkout <base> -- " + c.Path + ")"}
	case c.Verdict && !c.Added:
		return &CheckProblem{Kind: CheckTraceEdit, Path: c.Path,
			Msg: "edits a verdict: verdicts are immutable; restore it (git checkout <base> -- " + c.Path + ") and judge a newer run instead"}
	}
	return nil
}

// yamlFieldAt names the YAML key of the line holding off ("answer",
// "result"), or "" when the line has none.
func yamlFieldAt(text string, off int) string {
	start := strings.LastIndexByte(text[:off], '\n') + 1
	line := strings.TrimLeft(text[start:off], " ")
	line = strings.TrimPrefix(line, "- ")
	k, _, ok := strings.Cut(line, ":")
	if !ok || k == "" || strings.ContainsAny(k, " \"'{[") {
		return ""
	}
	return k
}

// article prefixes "a" or "an".
func article(s string) string {
	if s != "" && strings.ContainsRune("AEIOaeio", rune(s[0])) {
		return "an " + s
	}
	return "a " + s
}
