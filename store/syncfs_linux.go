//go:build linux

package store

import (
	"errors"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// syncFS flushes the whole file system holding f with one syncfs(2): every
// dirty inode and page written back, one journal commit, one cache flush.
// Since Linux 5.8 it also reports a writeback error of any file on that file
// system since f was opened (so a batch opens f before it writes). ENOSYS
// (an old kernel, a sandbox without the call) and EPERM (a seccomp filter)
// are errSyncFSUnavailable: the batch then takes the per-file fsync path.
func syncFS(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return &fs.PathError{Op: "syncfs", Path: f.Name(), Err: err}
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			if serr = unix.Syncfs(int(fd)); serr != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return &fs.PathError{Op: "syncfs", Path: f.Name(), Err: err}
	}
	if errors.Is(serr, unix.ENOSYS) || errors.Is(serr, unix.EPERM) {
		return &fs.PathError{Op: "syncfs", Path: f.Name(), Err: errors.Join(errSyncFSUnavailable, serr)}
	}
	if serr != nil {
		return &fs.PathError{Op: "syncfs", Path: f.Name(), Err: serr}
	}
	return nil
}
