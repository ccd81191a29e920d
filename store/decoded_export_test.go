package store

import (
	"bytes"
	"encoding/gob"
)

// GobForTest encodes v as the decoded cache does (decoded_test.go swaps a
// cache file's value to tell whether it was read).
func GobForTest(v any) ([]byte, error) {
	var b bytes.Buffer
	err := gob.NewEncoder(&b).Encode(v)
	return b.Bytes(), err
}
