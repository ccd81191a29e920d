package engine

import (
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// inertLine makes one rendered Memory line inert whatever the screen said:
// no raw line break of any kind inside it (CR, NEL, U+2028, U+2029, VT, FF
// become spaces), and when it would open a heading, a fence, a tag or a
// block quote once normalized (a full-width '＃' too), a backslash in front.
// quote() already keeps stored strings off the start of a line; this is the
// second wall.
func inertLine(line string) string {
	if strings.ContainsAny(line, "\r\v\f\u0085\u2028\u2029\n") {
		line = strings.Map(func(r rune) rune {
			switch r {
			case '\r', '\n', '\v', '\f', 0x85, 0x2028, 0x2029:
				return ' '
			}
			return r
		}, line)
	}
	if opensBlock(line) {
		return `\` + line
	}
	return line
}

// opensBlock reports whether a Markdown or prompt reader could take line as
// the start of a heading ("#"), a fence ("```", "~~~"), a tag ("<") or a
// quote (">"), ignoring leading spaces and invisible characters.
func opensBlock(line string) bool {
	rest := strings.TrimLeftFunc(line, func(r rune) bool {
		return unicode.IsSpace(r) || unicode.Is(unicode.Zs, r) || invisible(r)
	})
	if rest == "" {
		return false
	}
	head := rest
	if len(head) > 16 {
		head = head[:16]
	}
	head = norm.NFKC.String(head)
	switch head[0] {
	case '#', '`', '~', '<', '>':
		return true
	}
	return false
}
