//go:build linux

package store

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"path"
	"strings"

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
