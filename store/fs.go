package store

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"

	"github.com/pemdev/pem/engine"
)

// File primitives. Every access goes through s.root (an os.Root on the tree),
// so no name can leave the tree; on top of that any symlink inside the tree
// is refused, and every write is atomic: a temporary file in the same
// directory, written, fsynced, then renamed (or linked, for files that must
// not exist yet) into place, and the directory fsynced.

// errTooBig marks a file over its cap on read.
var errTooBig = errors.New("over the size cap")

func unsafeSymlink(rel string) error {
	return fmt.Errorf("%w: %s is a symbolic link; pem refuses links inside the tree: replace it with a plain file or directory", engine.ErrUnsafePath, rel)
}

// noSymlinks checks rel and each of its parents with Lstat.
func (s *Store) noSymlinks(rel string) error {
	for i := 0; i <= len(rel); i++ {
		if i < len(rel) && rel[i] != '/' {
			continue
		}
		p := rel[:i]
		fi, err := s.root.Lstat(p)
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return unsafeSymlink(p)
		}
	}
	return nil
}

// readFile reads a regular file of at most max bytes inside the tree.
func (s *Store) readFile(rel string, max int64) ([]byte, fs.FileInfo, error) {
	if err := s.noSymlinks(rel); err != nil {
		return nil, nil, err
	}
	lfi, err := s.root.Lstat(rel)
	if err != nil {
		return nil, nil, err
	}
	f, err := s.root.Open(rel)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("%w: %s is not a regular file", engine.ErrUnsafePath, rel)
	}
	if !os.SameFile(fi, lfi) {
		return nil, nil, fmt.Errorf("%w: %s changed while it was opened (a link swapped in?)", engine.ErrUnsafePath, rel)
	}
	if fi.Size() > max {
		return nil, fi, fmt.Errorf("%w: %d bytes, the cap is %d", errTooBig, fi.Size(), max)
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, nil, err
	}
	if int64(len(data)) > max {
		return nil, fi, fmt.Errorf("%w: more than %d bytes", errTooBig, max)
	}
	return data, fi, nil
}

// mkdirs creates dir and its parents, refusing symlinks and fsyncing each
// parent that gained an entry.
func (s *Store) mkdirs(dir string) error {
	for i := 0; i <= len(dir); i++ {
		if i < len(dir) && dir[i] != '/' {
			continue
		}
		p := dir[:i]
		fi, err := s.root.Lstat(p)
		switch {
		case err == nil:
			if fi.Mode()&fs.ModeSymlink != 0 {
				return unsafeSymlink(p)
			}
			if !fi.IsDir() {
				return fmt.Errorf("%s is in the way: pem needs a directory there; move the file away", p)
			}
		case errors.Is(err, fs.ErrNotExist):
			if err := s.root.Mkdir(p, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("creating %s: %w", p, err)
			}
			if err := s.syncDir(path.Dir(p)); err != nil {
				return err
			}
		default:
			return err
		}
	}
	return nil
}

func (s *Store) syncDir(dir string) error {
	d, err := s.root.Open(dir)
	if err != nil {
		return fmt.Errorf("syncing directory %s: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("syncing directory %s: %w", dir, err)
	}
	return nil
}

// writeTemp writes data to a new temporary file next to rel and fsyncs it.
// The name starts with a dot and ends in .tmp: listings skip it and
// .gitignore ignores it.
func (s *Store) writeTemp(rel string, data []byte) (string, error) {
	dir, base := path.Split(rel)
	for attempt := 0; ; attempt++ {
		var rnd [6]byte
		if _, err := rand.Read(rnd[:]); err != nil {
			return "", err
		}
		tmp := dir + "." + strings.TrimSuffix(base, yamlExt) + "." + hex.EncodeToString(rnd[:]) + ".tmp"
		f, err := s.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, fs.ErrExist) && attempt < 3 {
			continue
		}
		if err != nil {
			return "", err
		}
		_, err = f.Write(data)
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			_ = s.root.Remove(tmp)
			return "", fmt.Errorf("writing %s: %w", tmp, err)
		}
		return tmp, nil
	}
}

// createFile writes a file that must not exist yet: it is linked into place
// from a fsynced temporary file, which fails if the name is taken, so two
// writers never overwrite each other. Returns fs.ErrExist if it is.
func (s *Store) createFile(rel string, data []byte) error {
	dir := path.Dir(rel)
	var err error
	// A concurrent DeleteTrace may remove an empty day directory between
	// mkdirs and the write: create it again.
	for attempt := 0; attempt < 3; attempt++ {
		if err = s.mkdirs(dir); err != nil {
			return err
		}
		var tmp string
		tmp, err = s.writeTemp(rel, data)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		err = s.root.Link(tmp, rel)
		if err != nil && linkUnsupported(err) {
			err = s.renameNoReplace(tmp, rel)
		}
		_ = s.root.Remove(tmp)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		break
	}
	if err != nil {
		return err
	}
	return s.syncDir(dir)
}

// linkUnsupported reports a file system without hard links.
func linkUnsupported(err error) bool {
	return errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.ENOTSUP) || errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.EMLINK)
}

// renameNoReplace is createFile's fallback without hard links: a check, then
// a rename. Two writers racing on one name could both pass the check; trace
// ids are unique, so only a replayed save can race with itself.
func (s *Store) renameNoReplace(tmp, rel string) error {
	if _, err := s.root.Lstat(rel); err == nil {
		return fs.ErrExist
	}
	return s.root.Rename(tmp, rel)
}

// replaceFile writes rel atomically, leaving it untouched (bytes and mtime)
// when it already holds data. It reports whether it wrote.
func (s *Store) replaceFile(rel string, data []byte, max int64) (bool, error) {
	old, _, err := s.readFile(rel, max)
	switch {
	case err == nil && bytes.Equal(old, data):
		return false, nil
	case err == nil, errors.Is(err, fs.ErrNotExist), errors.Is(err, errTooBig):
	case errors.Is(err, engine.ErrUnsafePath):
		return false, err
	}
	dir := path.Dir(rel)
	if err := s.mkdirs(dir); err != nil {
		return false, err
	}
	tmp, err := s.writeTemp(rel, data)
	if err != nil {
		return false, err
	}
	if err := s.root.Rename(tmp, rel); err != nil {
		_ = s.root.Remove(tmp)
		return false, fmt.Errorf("renaming %s into place: %w", rel, err)
	}
	return true, s.syncDir(dir)
}
