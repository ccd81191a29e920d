package engine

import (
	"fmt"
	"net/url"
	"sort"
	"strings"
)

// Redacted replaces a value that must never be stored.
const Redacted = "{{redacted}}"

// passwordSelector: a field whose selector names a credential or a card's
// secrets — a password, PIN, one-time or verification code, API key or
// token, a card's number or security code, a social security number. The
// short words count only as a word of the name (`#login-pass`, `[name=pin]`,
// `#userPin`; not `#passenger`, `#spin`).
var passwordSelector = LazyRE(`(?i)(type\s*=\s*["']?password|passw(or)?d|passwd|secret|otp|one-time|` +
	`(?:^|[^a-z])(?:pass|pin|cvv|cvc|csc|cvn|ssn|mfa|2fa)(?:[^a-z]|$)|(?-i:[a-z0-9](?:Pass|Pin|PIN|Cvv|CVV|Cvc|CVC|Ssn|SSN|Mfa|MFA)(?:[^a-z]|$))|` +
	`security[-_ ]?code|card[-_ ]?(?:num|number|no)(?:[^a-z]|$)|cc[-_]?(?:num|number|csc|cvv|cvc)|` +
	`api[-_]?(?:key|token)|(?:access|auth|bearer|refresh)[-_]?token|(?:verification|auth|recovery|backup)[-_]?code)`)

// SecretPlaceholder is how a declared secret appears to tasks, planners, traces
// and memory.
func SecretPlaceholder(name string) string { return "{{secret:" + name + "}}" }

// Redact removes secrets from a trace before it is stored: every declared
// secret value (name → value) is replaced by its placeholder in every string
// field, and any value typed into what looks like a password field, or marked
// sensitive, is replaced by Redacted even when nothing was declared (and so is
// any copy of it elsewhere in the trace, selectors apart). URL-escaped forms of
// a value count as the value, and the derived intent key and URL pattern are
// redacted too. Last it applies ScrubTrace: credentials nobody declared
// (headers, cookies, URL userinfo, credential parameters, token formats).
// It records what it did in t.Redactions, never the value.
func Redact(t *Trace, sensitive map[int]bool, secrets map[string]string) {
	type replacement struct{ old, new, what string }
	var reps []replacement
	add := func(v, with, what string) {
		if len(v) < 4 { // a shorter "secret" would shred ordinary text
			return
		}
		for _, form := range []string{v, url.QueryEscape(v), url.PathEscape(v)} {
			dup := false
			for _, r := range reps {
				dup = dup || r.old == form
			}
			if !dup {
				reps = append(reps, replacement{form, with, what})
			}
		}
	}
	for n, v := range secrets {
		add(v, SecretPlaceholder(n), "secret "+n)
	}
	var typed []string
	for i := range t.Steps {
		s := &t.Steps[i]
		if s.Action == "type" && s.Value != "" && !isPlaceholder(s.Value) &&
			(sensitive[i] || passwordSelector.MatchString(s.Selector)) {
			typed = append(typed, s.Value)
			s.Value = Redacted
			t.addRedaction(fmt.Sprintf("steps[%d]: value typed into a password field", i))
		}
	}
	nSecret := len(reps)
	for _, v := range typed {
		add(v, Redacted, "a password value")
	}
	// Longest values first so a secret containing another is replaced whole.
	sort.SliceStable(reps, func(i, j int) bool {
		if len(reps[i].old) != len(reps[j].old) {
			return len(reps[i].old) > len(reps[j].old)
		}
		return reps[i].old < reps[j].old
	})
	scrubWith := func(reps []replacement, where string, s *string) {
		for _, r := range reps {
			if strings.Contains(*s, r.old) {
				*s = strings.ReplaceAll(*s, r.old, r.new)
				t.addRedaction(fmt.Sprintf("%s: %s", where, r.what))
			}
		}
	}
	// Password values are scrubbed from free text but not from selectors, where
	// a short value ("pass") could match a name ("#password").
	secretOnly := make([]replacement, 0, nSecret)
	for _, r := range reps {
		if r.new != Redacted {
			secretOnly = append(secretOnly, r)
		}
	}
	eachText(t, func(where string, s *string) {
		if strings.HasSuffix(where, "selector") || strings.Contains(where, ".fallbacks[") {
			scrubWith(secretOnly, where, s)
			return
		}
		scrubWith(reps, where, s)
	})
	// Then the secrets nobody declared (secrets.go), in every field.
	ScrubTrace(t)
}

func isPlaceholder(v string) bool {
	return v == Redacted || strings.HasPrefix(v, "{{secret:") && strings.HasSuffix(v, "}}")
}

func (t *Trace) addRedaction(r string) {
	if !contains(t.Redactions, r) {
		t.Redactions = append(t.Redactions, r)
	}
}
