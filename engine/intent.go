package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// MaxIntentKey is the longest intent key, hash suffix included.
const MaxIntentKey = 48

// MaxIntent is the longest intent text accepted.
const MaxIntent = 1000

// IntentKey turns intent text into its file-name key: lower-case, [a-z0-9-],
// at most 48 characters, with an 8-character hash suffix whenever the mapping
// lost information (accents, punctuation, case, truncation), so two different
// texts never share a key by accident. An empty intent gets the key "default".
// The result is always one safe path segment.
func IntentKey(text string) string {
	text = strings.TrimSpace(text)
	if text == "" {
		return "default"
	}
	var b strings.Builder
	lossy := false
	dash := false
	for _, r := range norm.NFKD.String(text) {
		switch {
		case r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
			dash = false
		case r >= 'A' && r <= 'Z':
			b.WriteRune(unicode.ToLower(r))
			dash = false
		case unicode.Is(unicode.Mn, r):
			lossy = true // a combining accent dropped
		default:
			if r != ' ' && r != '-' {
				lossy = true
			}
			if !dash && b.Len() > 0 {
				b.WriteByte('-')
				dash = true
			}
		}
	}
	slug := strings.Trim(b.String(), "-")
	if slug == "" || slug == "default" {
		lossy = true
		slug = "intent"
	}
	// The mapping is exact only for lower-case words separated by single
	// spaces: then the text can be read back from the slug. Anything else
	// (case, dashes, repeated spaces) is lossy, so two different texts never
	// share a key without a hash.
	if slug != strings.ReplaceAll(text, " ", "-") || strings.Contains(text, "-") {
		lossy = true
	}
	if len(slug) > MaxIntentKey || reservedName(slug) {
		lossy = true
	}
	if !lossy {
		return slug
	}
	sum := sha256.Sum256([]byte(text))
	h := hex.EncodeToString(sum[:])[:8]
	if len(slug) > MaxIntentKey-9 {
		slug = strings.TrimRight(slug[:MaxIntentKey-9], "-")
	}
	return slug + "-" + h
}

// reservedName reports whether s is a name Windows reserves in every
// directory (con, nul, com1, …), which a key must never be.
func reservedName(s string) bool {
	switch strings.ToLower(s) {
	case "con", "prn", "aux", "nul":
		return true
	}
	if len(s) == 4 && (strings.HasPrefix(strings.ToLower(s), "com") || strings.HasPrefix(strings.ToLower(s), "lpt")) && s[3] >= '0' && s[3] <= '9' {
		return true
	}
	return false
}

// ValidKey reports whether k could have been made by IntentKey: a safe,
// non-reserved path segment of [a-z0-9-].
func ValidKey(k string) bool {
	if k == "" || len(k) > MaxIntentKey || k[0] == '-' || reservedName(k) {
		return false
	}
	for _, r := range k {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}

var stopWords = map[string]bool{
	"a": true, "an": true, "the": true, "of": true, "on": true, "in": true, "to": true, "for": true,
	"and": true, "or": true, "is": true, "are": true, "what": true, "how": true, "many": true,
	"with": true, "from": true, "at": true, "by": true, "me": true, "my": true, "this": true, "that": true,
	"does": true, "do": true, "it": true, "its": true, "be": true, "get": true, "find": true, "show": true,
}

// Tokens returns the significant lower-case words of s, for intent matching.
func Tokens(s string) []string {
	var out []string
	seen := map[string]bool{}
	for _, f := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	}) {
		if stopWords[f] { // before plural folding: "does", "this", "its"
			continue
		}
		f = strings.TrimSuffix(f, "s") // crude plural folding: "issues" ~ "issue"
		if len(f) < 2 || stopWords[f] || seen[f] {
			continue
		}
		seen[f] = true
		out = append(out, f)
	}
	return out
}

// IntentScore measures how well a known intent matches a query intent: 1 for
// the same key, otherwise the Jaccard overlap of their tokens (0 when none).
func IntentScore(query, known string) float64 {
	q, k := intentOf(query), intentOf(known) // memo.go: the same strings, query after query
	if q.key == k.key {
		return 1
	}
	a, b := q.tokens, k.tokens
	if len(a) == 0 || len(b) == 0 {
		return 0
	}
	inter := 0
	for _, t := range b {
		for _, u := range a { // a handful of words: no map
			if t == u {
				inter++
				break
			}
		}
	}
	return float64(inter) / float64(len(a)+len(b)-inter)
}

// MinIntentOverlap is the token overlap below which a different intent of the
// same domain is not offered as a match.
const MinIntentOverlap = 0.5
