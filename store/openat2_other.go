//go:build !linux

package store

import "os"

// openNoLinks is Linux-only (openat2); elsewhere the portable path is used.
func (s *Store) openNoLinks(rel string, dir bool) (*os.File, error) { return nil, errNoOpenat2 }

func isLinkErr(err error) bool   { return false }
func isEscapeErr(err error) bool { return false }

func useOpenat2(on bool) {}
