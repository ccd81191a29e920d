//go:build linux

package store

import (
	"io/fs"
	"syscall"
)

// fileID is what identifies one version of a file for the caches.
type fileID struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64
	mode         fs.FileMode
}

func idOf(fi fs.FileInfo) fileID {
	id := fileID{size: fi.Size(), mtime: fi.ModTime().UnixNano(), mode: fi.Mode()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		id.dev, id.ino = uint64(st.Dev), uint64(st.Ino)
		id.ctime = st.Ctim.Sec*1e9 + st.Ctim.Nsec
	}
	return id
}

// unique reports whether id names one file (its device and inode are
// known): only then may a cache kept across processes trust it.
func (id fileID) unique() bool { return id.ino != 0 }
