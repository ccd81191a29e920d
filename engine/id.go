package engine

import (
	"crypto/rand"
	"io"
	"time"
)

const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// NewTraceID returns a ULID: 48 bits of milliseconds and 80 random bits, in
// Crockford base32 (26 characters). Ids sort by time, and two machines never
// collide. r nil means crypto/rand.
func NewTraceID(now time.Time, r io.Reader) (string, error) {
	if r == nil {
		r = rand.Reader
	}
	var b [16]byte
	ms := uint64(now.UnixMilli())
	for i := 5; i >= 0; i-- {
		b[i] = byte(ms)
		ms >>= 8
	}
	if _, err := io.ReadFull(r, b[6:]); err != nil {
		return "", err
	}
	// 128 bits → 26 base32 characters, the first carrying 3 bits.
	var out [26]byte
	var acc uint64
	bits := 0
	j := 25
	for i := 15; i >= 0; i-- {
		acc |= uint64(b[i]) << bits
		bits += 8
		for bits >= 5 && j >= 0 {
			out[j] = crockford[acc&31]
			acc >>= 5
			bits -= 5
			j--
		}
	}
	if j >= 0 {
		out[j] = crockford[acc&31]
	}
	return string(out[:]), nil
}

// ValidTraceID reports whether id has the form NewTraceID makes.
func ValidTraceID(id string) bool {
	if len(id) != 26 || id[0] > '7' {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= '0' && c <= '9' || c >= 'A' && c <= 'Z') || c == 'I' || c == 'L' || c == 'O' || c == 'U' {
			return false
		}
	}
	return true
}
