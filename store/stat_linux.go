//go:build linux

package store

import (
	"io/fs"
	"strconv"
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

// stamp is the text of a file version's identity (every field of fileID):
// what TraceStamp and the others return. Made with strconv, not fmt
// (deep-learn takes one for each of 100,000 traces a run).
func (id fileID) stamp() string {
	b := make([]byte, 0, 96)
	b = strconv.AppendUint(b, id.dev, 10)
	b = append(b, ':')
	b = strconv.AppendUint(b, id.ino, 10)
	b = append(b, ':')
	return string(appendStamp(b, id.size, id.mtime, id.ctime, id.mode))
}

// dirID is the identity a listed directory was recorded with.
func dirID(d ListedDir) fileID {
	return fileID{dev: d.Dev, ino: d.Ino, size: d.Size, mtime: d.Mtime, ctime: d.Ctime, mode: fs.ModeDir | 0o755}
}

// listedDir records a directory's names with its identity id.
func listedDir(id fileID, names string) ListedDir {
	return ListedDir{Dev: id.dev, Ino: id.ino, Size: id.size, Mtime: id.mtime, Ctime: id.ctime, Names: names}
}

// sameDir reports whether two identities are one version of one directory
// (its mode aside).
func sameDir(a, b fileID) bool {
	return a.dev == b.dev && a.ino == b.ino && a.size == b.size && a.mtime == b.mtime && a.ctime == b.ctime
}
