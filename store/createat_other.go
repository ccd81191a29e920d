//go:build !linux

package store

// createAt: no fast path here; createFile takes the portable one.
func (s *Store) createAt(rel string, data []byte) (bool, error) { return false, nil }
