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
