//go:build !linux

package store

import (
	"io/fs"
	"os"
)

// syncFS: syncfs(2) is Linux's; elsewhere a batch takes the per-file fsync
// path (errSyncFSUnavailable).
func syncFS(f *os.File) error {
	return &fs.PathError{Op: "syncfs", Path: f.Name(), Err: errSyncFSUnavailable}
}

func dirtyBelow(int64) bool { return false }
