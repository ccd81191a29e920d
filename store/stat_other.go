//go:build !linux

package store

import "io/fs"

// fileID is what identifies one version of a file for the caches.
type fileID struct {
	size         int64
	mtime, ctime int64
	mode         fs.FileMode
}

func idOf(fi fs.FileInfo) fileID {
	t := fi.ModTime().UnixNano()
	return fileID{size: fi.Size(), mtime: t, ctime: t, mode: fi.Mode()}
}

// unique reports whether id names one file: not known here (no inode), so
// caches kept across processes (decoded.go) are not used.
func (id fileID) unique() bool { return false }
