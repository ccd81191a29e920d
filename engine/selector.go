package engine

import (
	"strings"
)

var (
	selectorAttrValue = LazyRE(`\[\s*([a-zA-Z_:-]+)\s*[~|^$*]?=\s*["']?([^"'\]]+)["']?\s*\]`)
	nonSlugChars      = LazyRE(`[^a-z0-9]+`)
)

// SelectorName is the short name a selector gets in a facts entry's
// selectors map (consolidation and deep-learn both name selectors with it):
// what identifies the element in the selector's last compound — the id,
// else a name/label/test-id attribute value, else the first class, else the
// tag — as lower-case [a-z0-9_], at most 24 characters, "element" when
// nothing is left. `#a span[title="b c"]` is "b_c": combinators inside
// brackets and quotes do not split the selector.
func SelectorName(sel string) string {
	last := lastCompound(sel)
	cut := func(s string) string {
		if j := strings.IndexAny(s, ".[:#"); j >= 0 {
			return s[:j]
		}
		return s
	}
	pick := ""
	if i := strings.IndexByte(last, '#'); i >= 0 {
		pick = cut(last[i+1:])
	}
	if pick == "" {
		if m := selectorAttrValue.FindStringSubmatch(last); m != nil {
			pick = m[2]
		}
	}
	if pick == "" {
		if i := strings.IndexByte(last, '.'); i >= 0 {
			pick = cut(last[i+1:])
		}
	}
	if pick == "" {
		pick = cut(last)
	}
	s := strings.Trim(nonSlugChars.ReplaceAllString(strings.ToLower(pick), "_"), "_")
	if len(s) > 24 {
		s = strings.TrimRight(s[:24], "_")
	}
	if s == "" {
		s = "element"
	}
	return s
}

// lastCompound returns the part of a CSS selector after its last combinator
// (space, >, +, ~) outside brackets, parentheses and quotes.
func lastCompound(sel string) string {
	depth, quote, start := 0, byte(0), 0
	for i := 0; i < len(sel); i++ {
		c := sel[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '[' || c == '(':
			depth++
		case c == ']' || c == ')':
			depth--
		case depth == 0 && (c == ' ' || c == '>' || c == '+' || c == '~'):
			if i+1 < len(sel) {
				start = i + 1
			}
		}
	}
	last := strings.TrimSpace(sel[start:])
	if last == "" {
		return strings.TrimSpace(sel)
	}
	return last
}
