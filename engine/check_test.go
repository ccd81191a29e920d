package engine

import (
	"fmt"
	"strings"
	"testing"
)

func TestCheckSecrets(t *testing.T) {
	// Built from pieces so that this file itself holds no scannable secret.
	gh := "ghp_" + strings.Repeat("a1B2", 9)
	aws := "AKIA" + "ABCDEFGHIJKLMNOP"
	key := "-----BEGIN " + "OPENSSH PRIVATE KEY-----"
	cases := []struct {
		name   string
		text   string
		values map[string]string
		want   string // substring of the one problem, "" for none
	}{
		{"github token", "steps:\n  - value: " + gh + "\n", nil, "line 2 (field value) holds a GitHub token"},
		{"aws key", "note: " + aws, nil, "an AWS access key id"},
		{"private key", "x: |\n  " + key + "\n", nil, "line 2 holds a private key"},
		{"password assignment", "url: https://e.com/login?user=bob&password=hunter22\n", nil, "a credential parameter"},
		{"password yaml key", "password: s3cretvalue\n", nil, "line 1 (field password) holds a credential parameter"},
		{"password in url", "url: https://bob:hunter22@example.com/x\n", nil, "a credential in a URL"},
		{"bearer", "error: 'Authorization: Bearer abcdefghijklmnopqrstuvwxyz012345'\n", nil, "line 1 (field error) holds an Authorization header"},
		{"cookie", "result: 'Set-Cookie: sessionid=abcd1234efgh; Path=/'\n", nil, "a cookie"},
		{"slack", "hint: xoxb-1234567890-abcdef\n", nil, "a Slack token"},
		{"jwt", "value: eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U\n", nil, "a JSON web token"},
		{"env value", "value: tr0ub4dor&3\n", map[string]string{"SITE_PASSWORD": "tr0ub4dor&3"}, "the value of $SITE_PASSWORD"},
		{"placeholder is fine", "value: '{{secret:SITE_PASSWORD}}'\npassword: {{redacted}}\n", nil, ""},
		{"redacted value is fine", "password={{secret:PW}} and password: null\n", nil, ""},
		{"password selector is fine", "selector: input[type=password]\nprimary: '#password'\n", nil, ""},
		{"short env value ignored", "value: abc\n", map[string]string{"X": "abc"}, ""},
		{"ordinary trace", "id: 01J00000000000000000000001\nurl: https://github.com/pemdev/pem\nsteps:\n  - action: click\n    selector: '#stars'\n", nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := CheckSecrets("traces/x.yaml", []byte(c.text), c.values)
			if c.want == "" {
				if len(got) != 0 {
					t.Fatalf("false positive: %v", got)
				}
				return
			}
			if len(got) != 1 || !strings.Contains(got[0].String(), c.want) {
				t.Fatalf("got %v, want one problem containing %q", got, c.want)
			}
			if got[0].Kind != CheckSecret || got[0].Path != "traces/x.yaml" {
				t.Errorf("problem = %+v", got[0])
			}
			for _, v := range c.values {
				if strings.Contains(got[0].String(), v) {
					t.Errorf("the report repeats the secret: %s", got[0])
				}
			}
			if strings.Contains(got[0].String(), gh) || strings.Contains(got[0].String(), "hunter22") {
				t.Errorf("the report repeats the secret: %s", got[0])
			}
		})
	}
}

func TestCheckFrozenChange(t *testing.T) {
	verified := mergeFacts(Verified, nil)
	lifecycle := mergeFacts(Contested, func(f *Facts) {
		f.History = []Transition{{From: Verified, To: Contested}}
		f.Provenance.LastVerified = mergeT0
	})
	edited := mergeFacts(Verified, func(f *Facts) { f.InteractionHints = []string{"sneaky"} })
	superseding := mergeFacts(Candidate, func(f *Facts) {
		f.Selectors["stars"] = Selector{Primary: "[data-stars]"}
		f.Supersedes = verified.Revision
	})
	candidate := mergeFacts(Candidate, nil)
	unnamed := mergeFacts(Verified, nil)
	unnamed.Revision = "" // a hand-written entry: the content hash names it
	supersedingHash := mergeFacts(Candidate, func(f *Facts) {
		f.Selectors["stars"] = Selector{Primary: "[data-stars]"}
		f.Supersedes = unnamed.ContentHash()
	})
	reordered := mergeFacts(Verified, func(f *Facts) {
		f.Provenance.Traces = []string{"a", "b"} // provenance is lifecycle, not content
	})
	cases := []struct {
		name     string
		old, new *Facts
		want     bool
	}{
		{"lifecycle fields move", verified, lifecycle, false},
		{"content edited", verified, edited, true},
		{"new revision supersedes", verified, superseding, false},
		{"deleted", verified, nil, true},
		{"unverified may change", candidate, edited, false},
		{"new file", nil, edited, false},
		{"new revision supersedes the content hash", unnamed, supersedingHash, false},
		{"unnamed verified revision edited", unnamed, edited, true},
		{"status quoted or not, same content", verified, reordered, false},
	}
	for _, c := range cases {
		p := CheckFrozenChange("facts/example.com/find-stars.yaml", "abc", c.old, c.new)
		if (p != nil) != c.want {
			t.Errorf("%s: got %v, want problem %v", c.name, p, c.want)
		}
		if p != nil && (p.Kind != CheckFrozen || p.Commit != "abc" || !strings.Contains(p.Msg, "r"+c.old.ContentHash())) {
			t.Errorf("%s: problem %+v does not name the commit and revision", c.name, p)
		}
	}
}

func TestCheckPRChange(t *testing.T) {
	cases := []struct {
		path                                    string
		derived, trace, verdict, added, deleted bool
		want                                    string
	}{
		{"traces/example.com/2026-03-01/01J00000000000000000000001.yaml", false, true, false, true, false, ""},
		{"traces/example.com/2026-03-01/01J00000000000000000000001.yaml", false, true, false, false, false, CheckTraceEdit},
		{"traces/example.com/2026-03-01/01J00000000000000000000001.yaml", false, true, false, false, true, CheckTraceEdit},
		{"verdicts/example.com/01J00000000000000000000001/qa.yaml", false, false, true, true, false, ""},
		{"verdicts/example.com/01J00000000000000000000001/qa.yaml", false, false, true, false, false, CheckTraceEdit},
		{"verdicts/example.com/01J00000000000000000000001/qa.yaml", false, false, true, false, true, CheckTraceEdit},
		{"experience/example.com/find-stars.yaml", true, false, false, true, false, CheckDerived},
		{"experience/example.com/find-stars.yaml", true, false, false, false, false, CheckDerived},
		{"facts/example.com/find-stars.yaml", false, false, false, false, false, ""},
		{"pem.yaml", false, false, false, false, false, ""},
		{"facts/example.com/_site.yaml", false, false, false, false, false, CheckDerived}, // site: set below
		{"facts/example.com/_site.yaml", false, false, false, true, false, CheckDerived},
	}
	for _, c := range cases {
		site := strings.HasSuffix(c.path, "/_site.yaml")
		p := CheckPRChange(PRChange{Path: c.path, Derived: c.derived, Site: site, Trace: c.trace, Verdict: c.verdict, Added: c.added, Deleted: c.deleted})
		got := ""
		if p != nil {
			got = p.Kind
		}
		if got != c.want {
			t.Errorf("%s (added %v deleted %v): got %q, want %q", c.path, c.added, c.deleted, got, c.want)
		}
	}
}

// TestCheckSecretsEveryLine: a 4 MB file with a password= assignment on every
// line reports each line once, with its right number (the line index).
func TestCheckSecretsEveryLine(t *testing.T) {
	var b strings.Builder
	n := 0
	for b.Len() < 4<<20 {
		n++
		fmt.Fprintf(&b, "password=hunter2secret%07d\n", n)
	}
	got := CheckSecrets("notes.txt", []byte(b.String()), nil)
	if len(got) != n {
		t.Fatalf("%d problems for %d lines", len(got), n)
	}
	seen := make([]bool, n+1)
	for _, p := range got {
		var line int
		if _, err := fmt.Sscanf(p.Msg, "line %d holds a credential parameter:", &line); err != nil || line < 1 || line > n || seen[line] {
			t.Fatalf("bad or repeated problem: %q (%v)", p.Msg, err)
		}
		seen[line] = true
		if p.Path != "notes.txt" || strings.Contains(p.Msg, "hunter2") {
			t.Fatalf("problem %+v", p)
		}
	}
	// No final line break, a match on the last byte's line, and CRLF lines.
	if got := CheckSecrets("x", []byte("a\r\nb\r\npassword=abcd1234"), nil); len(got) != 1 || !strings.HasPrefix(got[0].Msg, "line 3 ") {
		t.Errorf("last line without a break: %+v", got)
	}
}
