//go:build !linux

package store

import (
	"io/fs"
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
	return string(appendStamp(make([]byte, 0, 64), id.size, id.mtime, id.ctime, id.mode))
}

// dirID is the identity a listed directory was recorded with; without an
// inode (unique is false) TraceRefsListing never reuses a listing here.
func dirID(d ListedDir) fileID {
	return fileID{size: d.Size, mtime: d.Mtime, ctime: d.Ctime, mode: fs.ModeDir | 0o755}
}

// listedDir records a directory's names with its identity id.
func listedDir(id fileID, names string) ListedDir {
	return ListedDir{Size: id.size, Mtime: id.mtime, Ctime: id.ctime, Names: names}
}

// sameDir is false: without an inode two identities cannot be told to be
// one directory.
func sameDir(a, b fileID) bool { return false }
