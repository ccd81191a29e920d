//go:build linux

package store

import (
	"errors"
	"os"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// noOpenat2 is set once the kernel (or a seccomp filter) refused openat2.
var noOpenat2 atomic.Bool

// openNoLinks opens rel (a file, or a directory when dir) under the tree in
// one system call: openat2 with RESOLVE_BENEATH and RESOLVE_NO_SYMLINKS
// refuses a symlink in any component and any escape from the tree, which
// the portable path checks with an lstat per parent. It returns
// errNoOpenat2 when openat2 is unavailable (the caller falls back), a
// *os.PathError wrapping the errno otherwise (ELOOP: a symlink on the way).
func (s *Store) openNoLinks(rel string, dir bool) (*os.File, error) {
	if noOpenat2.Load() {
		return nil, errNoOpenat2
	}
	rootFD, err := s.rootFD()
	if err != nil {
		return nil, errNoOpenat2
	}
	flags := uint64(unix.O_RDONLY | unix.O_CLOEXEC) // RESOLVE_NO_SYMLINKS covers the last component too
	if dir {
		flags |= unix.O_DIRECTORY
	} else {
		flags |= unix.O_NONBLOCK // a FIFO planted in the tree must not block the open
	}
	how := &unix.OpenHow{Flags: flags, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	var fd int
	for {
		fd, err = unix.Openat2(rootFD, rel, how)
		if !errors.Is(err, unix.EINTR) && !errors.Is(err, unix.EAGAIN) {
			break
		}
	}
	switch {
	case errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EPERM), errors.Is(err, unix.E2BIG):
		noOpenat2.Store(true)
		return nil, errNoOpenat2
	case err != nil:
		return nil, &os.PathError{Op: "openat2", Path: rel, Err: err}
	}
	return os.NewFile(uintptr(fd), rel), nil
}

// isLinkErr reports the error openNoLinks gives for a symlink on the way.
func isLinkErr(err error) bool { return errors.Is(err, unix.ELOOP) }

// isEscapeErr reports the error openNoLinks gives for a name that leaves the tree.
func isEscapeErr(err error) bool { return errors.Is(err, unix.EXDEV) }

// useOpenat2 turns the openat2 path on or off (tests of the portable path).
func useOpenat2(on bool) { noOpenat2.Store(!on) }
