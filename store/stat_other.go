//go:build !linux

package store

import (
	"io/fs"
	"strconv"
)

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

// stamp is the text of a file version's identity (every field of fileID).
func (id fileID) stamp() string {
	b := make([]byte, 0, 64)
	b = strconv.AppendInt(b, id.size, 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, id.mtime, 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, id.ctime, 10)
	b = append(b, ':')
	b = strconv.AppendUint(b, uint64(id.mode), 8)
	return string(b)
}
