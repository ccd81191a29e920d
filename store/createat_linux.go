//go:build linux

package store

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/pemdev/pem/engine"
	"golang.org/x/sys/unix"
)

// createAt is createFile's fast path on Linux: the directory is opened once
// with openat2 (no symlink on the way, nothing outside the tree) and every
// step is one call relative to it — create the temporary file, write,
// fsync, link it to its name (fails if the name is taken), unlink the
// temporary name, fsync the directory. That is the two fsyncs a durable
// new file needs and nothing else: no walk from the tree's root per call
// as os.Root does. handled false: the caller takes the portable path
// (openat2 unavailable, the directory missing or a file system without
// hard links).
func (s *Store) createAt(rel string, data []byte) (handled bool, err error) {
	dir, base := path.Split(rel)
	dir = strings.TrimSuffix(dir, "/")
	d, err := s.openChecked(dir, true)
	if errors.Is(err, fs.ErrNotExist) {
		var parentSynced func() error
		d, parentSynced, err = s.mkdirAt(dir)
		if parentSynced != nil {
			// Whatever the outcome, the new directory's entry is durable
			// before this returns (the portable path, if taken, finds
			// the directory and does not sync its parent again).
			defer func() {
				if serr := parentSynced(); serr != nil && err == nil {
					handled, err = true, serr
				}
			}()
		}
	}
	switch {
	case errors.Is(err, errNoOpenat2), errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return true, err
	}
	defer d.Close()
	dfd := int(d.Fd())
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return true, err
	}
	tmp := "." + strings.TrimSuffix(base, yamlExt) + "." + hex.EncodeToString(rnd[:]) + ".tmp"
	fd, err := unix.Openat(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if errors.Is(err, unix.ENOENT) {
		return false, nil // a concurrent DeleteTrace removed the empty directory
	}
	if err != nil {
		return true, &fs.PathError{Op: "create", Path: dir + "/" + tmp, Err: err}
	}
	err = writeAll(fd, data)
	if err == nil {
		err = unix.Fsync(fd)
	}
	if cerr := unix.Close(fd); err == nil {
		err = cerr
	}
	if err != nil {
		_ = unix.Unlinkat(dfd, tmp, 0)
		return true, &fs.PathError{Op: "write", Path: dir + "/" + tmp, Err: err}
	}
	err = unix.Linkat(dfd, tmp, dfd, base, 0)
	_ = unix.Unlinkat(dfd, tmp, 0)
	switch {
	case errors.Is(err, unix.EEXIST):
		return true, fs.ErrExist
	case err != nil && (linkUnsupported(err) || errors.Is(err, unix.ENOENT)):
		return false, nil
	case err != nil:
		return true, &fs.PathError{Op: "link", Path: rel, Err: err}
	}
	if err := unix.Fsync(dfd); err != nil {
		return true, &fs.PathError{Op: "fsync", Path: dir, Err: err}
	}
	return true, nil
}

// mkdirAt creates dir (the first trace of a domain's day) when its parent
// exists, as mkdirs does — mkdir, and an fsync of the parent so that the
// new entry survives a crash — but relative to the parent opened once with
// openat2, and returns the new directory open. The parent's fsync runs
// while the caller writes and fsyncs the file (a journaling file system
// can commit both at once); parentSynced waits for it and must be called
// whenever it is not nil. fs.ErrNotExist: the parent is missing too (the
// caller takes the portable path, which creates it).
func (s *Store) mkdirAt(dir string) (d *os.File, parentSynced func() error, err error) {
	parent, name := path.Split(dir)
	parent = strings.TrimSuffix(parent, "/")
	if parent == "" || name == "" {
		return nil, nil, fs.ErrNotExist
	}
	p, err := s.openChecked(parent, true)
	if err != nil {
		return nil, nil, err
	}
	pfd := int(p.Fd())
	if err := unix.Mkdirat(pfd, name, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
		p.Close()
		return nil, nil, &fs.PathError{Op: "mkdir", Path: dir, Err: err}
	}
	// The new directory is opened before the fsync starts: the goroutine
	// closes the parent when it is done.
	fd, err := unix.Openat(pfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	synced := make(chan error, 1)
	go func() {
		err := unix.Fsync(pfd)
		if cerr := p.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			err = &fs.PathError{Op: "fsync", Path: parent, Err: err}
		}
		synced <- err
	}()
	parentSynced = func() error { return <-synced }
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil, parentSynced, fs.ErrNotExist // removed again by a concurrent DeleteTrace
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR):
		return nil, parentSynced, fmt.Errorf("%w: %s is not a plain directory: pem refuses links inside the tree", engine.ErrUnsafePath, dir)
	case err != nil:
		return nil, parentSynced, &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	return os.NewFile(uintptr(fd), dir), parentSynced, nil
}

func writeAll(fd int, data []byte) error {
	for len(data) > 0 {
		n, err := unix.Write(fd, data)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}
