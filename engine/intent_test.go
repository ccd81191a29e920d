package engine_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/pemdev/pem/engine"
)

var hashSuffix = regexp.MustCompile(`-[0-9a-f]{8}$`)

func TestIntentKeyExact(t *testing.T) {
	// Lower-case words separated by single spaces map exactly: no hash.
	tests := []struct{ in, want string }{
		{"find stars", "find-stars"},
		{"open issues count", "open-issues-count"},
		{"  find stars  ", "find-stars"}, // surrounding space is not part of the text
		{"star count 2024", "star-count-2024"},
		{"intent", "intent"},
		{"x", "x"},
		{strings.Repeat("a", 48), strings.Repeat("a", 48)},
	}
	for _, tt := range tests {
		if got := engine.IntentKey(tt.in); got != tt.want {
			t.Errorf("IntentKey(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestIntentKeyLossy(t *testing.T) {
	// Anything the slug cannot give back gets an 8-hex hash suffix.
	tests := []struct{ in, slug string }{
		{"Find Stars", "find-stars"},
		{"find  stars", "find-stars"},
		{"find-stars", "find-stars"},
		{"Café menu", "cafe-menu"},
		{"What's the star count?", "what-s-the-star-count"},
		{"issues/4819", "issues-4819"},
		{"../../etc/passwd", "etc-passwd"},
		{"日本語のページ", "intent"},
		{"!!!", "intent"},
		{"default", "intent"},
		{"con", "con"},
		{"nul", "nul"},
		{"aux", "aux"},
		{"prn", "prn"},
		{"com1", "com1"},
		{"lpt9", "lpt9"},
		{"CON", "con"},
		{".git", "git"},
		{strings.Repeat("a", 49), strings.Repeat("a", 39)},
		{strings.Repeat("word ", 20), strings.Repeat("word-", 7) + "word"},
	}
	for _, tt := range tests {
		got := engine.IntentKey(tt.in)
		if !hashSuffix.MatchString(got) {
			t.Errorf("IntentKey(%q) = %q, want a hash suffix", tt.in, got)
			continue
		}
		if slug := hashSuffix.ReplaceAllString(got, ""); slug != tt.slug {
			t.Errorf("IntentKey(%q) = %q, want slug %q", tt.in, got, tt.slug)
		}
		if len(got) > engine.MaxIntentKey {
			t.Errorf("IntentKey(%q) = %q is %d chars, over %d", tt.in, got, len(got), engine.MaxIntentKey)
		}
	}
}

func TestIntentKeyEmpty(t *testing.T) {
	for _, in := range []string{"", "   ", "\t\n"} {
		if got := engine.IntentKey(in); got != "default" {
			t.Errorf("IntentKey(%q) = %q, want default", in, got)
		}
	}
}

func TestIntentKeyDistinct(t *testing.T) {
	texts := []string{
		"find stars", "Find stars", "find Stars", "find  stars", "find-stars", "find_stars", "find stars!",
		"cafe", "café", "Café", "CAFE", "default", "", "intent", "Intent", "con", "CON", "Con",
		strings.Repeat("a", 48), strings.Repeat("a", 49), strings.Repeat("a", 50),
		strings.Repeat("long intent text ", 5) + "one", strings.Repeat("long intent text ", 5) + "two",
	}
	seen := map[string]string{}
	for _, s := range texts {
		k := engine.IntentKey(s)
		if prev, dup := seen[k]; dup {
			t.Errorf("IntentKey(%q) = IntentKey(%q) = %q", s, prev, k)
		}
		seen[k] = s
		if !engine.ValidKey(k) {
			t.Errorf("IntentKey(%q) = %q is not a ValidKey", s, k)
		}
	}
	// Deterministic.
	for _, s := range texts {
		if engine.IntentKey(s) != engine.IntentKey(s) {
			t.Errorf("IntentKey(%q) is not deterministic", s)
		}
	}
}

func TestValidKey(t *testing.T) {
	for _, k := range []string{"default", "find-stars", "a", "x1-2b", strings.Repeat("a", 48)} {
		if !engine.ValidKey(k) {
			t.Errorf("ValidKey(%q) = false, want true", k)
		}
	}
	for _, k := range []string{"", "-a", "A", "a b", "a/b", `a\b`, "..", ".git", "a.b", "con", "nul", "com1", "lpt3",
		strings.Repeat("a", 49), "a\x00", "é"} {
		if engine.ValidKey(k) {
			t.Errorf("ValidKey(%q) = true, want false", k)
		}
	}
}

func TestTokens(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"How many open issues are there?", []string{"open", "issue", "there"}},
		{"what does this show", nil},
		{"Issues issue ISSUES", []string{"issue"}},
		{"star count of pemdev/pem", []string{"star", "count", "pemdev", "pem"}},
		{"a b c", nil},
		{"", nil},
	}
	for _, tt := range tests {
		if got := engine.Tokens(tt.in); fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("Tokens(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestIntentScore(t *testing.T) {
	tests := []struct {
		q, known string
		want     float64
	}{
		{"find stars", "find stars", 1},
		{"Find Stars", "Find Stars", 1},                // same key
		{"star count", "Star Count", 1},                // tokens identical
		{"open issues count", "count open issues", 1},  // order does not matter
		{"open issues", "open pull requests", 1.0 / 4}, // {open} of {open, issue, pull, request}
		{"latest workflow run", "latest workflow status", 2.0 / 4},
		{"install command", "star count", 0},
		{"the", "star count", 0}, // no significant words
		{"", "", 1},              // both "default"
	}
	for _, tt := range tests {
		if got := engine.IntentScore(tt.q, tt.known); got != tt.want {
			t.Errorf("IntentScore(%q, %q) = %v, want %v", tt.q, tt.known, got, tt.want)
		}
		if got, back := engine.IntentScore(tt.q, tt.known), engine.IntentScore(tt.known, tt.q); got != back {
			t.Errorf("IntentScore is not symmetric on %q, %q: %v vs %v", tt.q, tt.known, got, back)
		}
	}
}

func FuzzIntentKey(f *testing.F) {
	for _, s := range []string{"find stars", "Café", "", "con", "CON", ".git", "..", "a/b", `a\b`, "x\x00y",
		strings.Repeat("ü", 60), "default", "com1", "lpt1", "nul", "-", "a--b", "日本"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		k := engine.IntentKey(text)
		if k == "" || len(k) > engine.MaxIntentKey {
			t.Fatalf("IntentKey(%.100q) = %q: empty or over %d", text, k, engine.MaxIntentKey)
		}
		if strings.ContainsAny(k, "/\\\x00.") || k == "." || k == ".." || strings.Contains(k, "..") {
			t.Fatalf("IntentKey(%.100q) = %q is not one safe path segment", text, k)
		}
		if !engine.ValidKey(k) {
			t.Fatalf("IntentKey(%.100q) = %q does not pass ValidKey", text, k)
		}
		switch strings.ToLower(k) {
		case "con", "prn", "aux", "nul", ".git", "com1", "com2", "com3", "com4", "com5", "com6", "com7", "com8", "com9",
			"lpt1", "lpt2", "lpt3", "lpt4", "lpt5", "lpt6", "lpt7", "lpt8", "lpt9":
			t.Fatalf("IntentKey(%.100q) = %q is a reserved name", text, k)
		}
		if strings.HasPrefix(k, "-") || strings.HasSuffix(k, "-") || strings.Contains(k, "--") {
			t.Fatalf("IntentKey(%.100q) = %q has stray dashes", text, k)
		}
		if engine.IntentKey(text) != k {
			t.Fatalf("IntentKey(%.100q) is not deterministic", text)
		}
		// Exact (hash-free) keys read back as the text they came from.
		if strings.TrimSpace(text) != "" && !hashSuffix.MatchString(k) && k != "default" {
			if back := strings.ReplaceAll(k, "-", " "); back != strings.TrimSpace(text) {
				t.Fatalf("IntentKey(%.100q) = %q has no hash but lost information (%q)", text, k, back)
			}
		}
	})
}
