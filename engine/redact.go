package engine

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// Redacted replaces a value that must never be stored.
const Redacted = "{{redacted}}"

var passwordSelector = regexp.MustCompile(`(?i)(type\s*=\s*["']?password|passw(or)?d|passwd|\bpin\b|secret|otp|one-time)`)

// SecretPlaceholder is how a declared secret appears to tasks, planners, traces
// and memory.
func SecretPlaceholder(name string) string { return "{{secret:" + name + "}}" }

// Redact removes secrets from a trace before it is stored: every declared
// secret value (name → value) is replaced by its placeholder in every string
// field, and any value typed into what looks like a password field, or marked
// sensitive, is replaced by Redacted even when nothing was declared. It records
// what it did in t.Redactions, never the value.
func Redact(t *Trace, sensitive map[int]bool, secrets map[string]string) {
	names := make([]string, 0, len(secrets))
	for n, v := range secrets {
		if len(v) >= 4 { // a shorter "secret" would shred ordinary text
			names = append(names, n)
		}
	}
	// Longest values first so a secret containing another is replaced whole.
	sort.Slice(names, func(i, j int) bool { return len(secrets[names[i]]) > len(secrets[names[j]]) })
	scrub := func(where string, s *string) {
		for _, n := range names {
			if strings.Contains(*s, secrets[n]) {
				*s = strings.ReplaceAll(*s, secrets[n], SecretPlaceholder(n))
				t.addRedaction(fmt.Sprintf("%s: secret %s", where, n))
			}
		}
	}
	for i := range t.Steps {
		s := &t.Steps[i]
		if s.Action == "type" && s.Value != "" && !isPlaceholder(s.Value) &&
			(sensitive[i] || passwordSelector.MatchString(s.Selector)) {
			s.Value = Redacted
			t.addRedaction(fmt.Sprintf("steps[%d]: value typed into a password field", i))
		}
		scrub(fmt.Sprintf("steps[%d].value", i), &s.Value)
		scrub(fmt.Sprintf("steps[%d].selector", i), &s.Selector)
		scrub(fmt.Sprintf("steps[%d].url", i), &s.URL)
		scrub(fmt.Sprintf("steps[%d].error", i), &s.Error)
		scrub(fmt.Sprintf("steps[%d].result", i), &s.Result)
	}
	scrub("task", &t.Task)
	scrub("intent", &t.Intent)
	scrub("url", &t.URL)
	scrub("error", &t.Error)
	scrub("result.answer", &t.Result.Answer)
	scrub("result.final_url", &t.Result.FinalURL)
	scrub("result.final_title", &t.Result.FinalTitle)
	for k, v := range t.Result.Extracted {
		scrub("result.extracted."+k, &v)
		t.Result.Extracted[k] = v
	}
}

func isPlaceholder(v string) bool {
	return v == Redacted || strings.HasPrefix(v, "{{secret:") && strings.HasSuffix(v, "}}")
}

func (t *Trace) addRedaction(r string) {
	if !contains(t.Redactions, r) {
		t.Redactions = append(t.Redactions, r)
	}
}
