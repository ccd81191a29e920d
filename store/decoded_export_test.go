package store

// DecodedBodyForTest encodes v as the decoded cache does (decoded_test.go
// swaps a cache file's value to tell whether it was read).
func DecodedBodyForTest(v any) ([]byte, bool) {
	return appendBody(nil, v)
}
