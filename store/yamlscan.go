package store

import "bytes"

// MayHoldScalar reports whether a YAML document could decode to a value
// holding the string s (s non-empty, plain ASCII letters): false only when
// no scalar of data can equal s. It is a sound pre-filter that saves a
// decode, never a decision: a scalar spells s literally unless it is written
// with an escape (\x76, a line break escaped with \), a tag (!!binary takes
// base64), or the document is not UTF-8 (UTF-16 and UTF-32 put NUL bytes
// between ASCII letters); any of those makes the answer true. The caller
// decodes when it is true and decides on the parsed value.
func MayHoldScalar(data []byte, s string) bool {
	return bytes.Contains(data, []byte(s)) || bytes.ContainsAny(data, "\\!\x00")
}
