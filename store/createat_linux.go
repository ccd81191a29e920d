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
// step is one call relative to it, with one journal commit instead of two:
//
//  1. create a temporary file and write the data;
//  2. sync_file_range: write the data to the device and wait for it, but
//     commit nothing (on ext4 and XFS the blocks are allocated in the
//     journal's running transaction, not committed);
//  3. link the temporary file to its name (fails if the name is taken) and
//     unlink the temporary name: the same running transaction;
//  4. fsync the file: one journal commit holds its blocks, its size and
//     its new name together (ext4 without a journal writes the new name's
//     directory in this fsync too);
//  5. fsync the directory: the name is written already, so this is a
//     cache flush, not a second commit (the old order — fsync the file,
//     link, fsync the directory — paid two, one for the link alone).
//
// On a journaling file system the name is durable only together with the
// data: the data's writes had completed before the link was made, and a
// commit flushes the device's cache before it writes its commit block. So
// a crash at any point leaves either no name or the whole file under it,
// as before. Without a journal (ext4 made without one) nothing orders the
// device's writes before the fsync's flush: a power loss inside the save
// could leave the name on data that did not reach the disk (a trace that
// does not parse, which check reports and consolidation does not fold).
// The save reports success only after both fsyncs, on every file system.
// If sync_file_range fails (a file system that does not support it), step
// 2 is an fsync, before the link, as in the old order. docs/data-model.md
// ("How a save is made durable") has the account.
//
// A new day directory (the first trace of a domain's day), and a new
// domain directory above it (the first trace of a domain), are created by
// mkdirAt relative to their parent; the parents' fsyncs come last, after
// the file's commit has made the new entries durable (cache flushes too).
// handled false: the caller takes the portable path (openat2 unavailable,
// traces/ missing or a file system without hard links).
func (s *Store) createAt(rel string, data []byte) (handled bool, err error) {
	dir, base := path.Split(rel)
	dir = strings.TrimSuffix(dir, "/")
	d, err := s.openChecked(dir, true)
	if errors.Is(err, fs.ErrNotExist) {
		var parents []*os.File
		d, parents, err = s.mkdirAt(dir, 1)
		if len(parents) > 0 {
			// Whatever the outcome, the new directories' entries are
			// durable before this returns (the portable path, if taken,
			// finds the directories and does not sync their parents
			// again). The deepest first.
			defer func() {
				for _, p := range parents {
					serr := step("fsync parent", func() error { return unix.Fsync(int(p.Fd())) })
					if cerr := p.Close(); serr == nil {
						serr = cerr
					}
					if serr != nil && err == nil {
						handled, err = true, &fs.PathError{Op: "fsync", Path: p.Name(), Err: serr}
					}
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
	defer unix.Close(fd)
	synced := false // fsynced before the link: the old order
	err = step("write", func() error { return writeAll(fd, data) })
	if err == nil {
		if step("sync_file_range", func() error { return syncData(fd) }) != nil {
			err, synced = step("fsync", func() error { return unix.Fsync(fd) }), true
		}
	}
	if err != nil {
		_ = unix.Unlinkat(dfd, tmp, 0)
		return true, &fs.PathError{Op: "write", Path: dir + "/" + tmp, Err: err}
	}
	err = step("link", func() error { return unix.Linkat(dfd, tmp, dfd, base, 0) })
	_ = unix.Unlinkat(dfd, tmp, 0)
	switch {
	case errors.Is(err, unix.EEXIST):
		return true, fs.ErrExist
	case err != nil && (linkUnsupported(err) || errors.Is(err, unix.ENOENT)):
		return false, nil
	case err != nil:
		return true, &fs.PathError{Op: "link", Path: rel, Err: err}
	}
	if !synced {
		if err := step("fsync", func() error { return unix.Fsync(fd) }); err != nil {
			// Not durable: take the name away again, so that what the
			// save reports (an error) is what the tree holds.
			_ = unix.Unlinkat(dfd, base, 0)
			return true, &fs.PathError{Op: "fsync", Path: rel, Err: err}
		}
	}
	if err := step("fsync dir", func() error { return unix.Fsync(dfd) }); err != nil {
		return true, &fs.PathError{Op: "fsync", Path: dir, Err: err}
	}
	return true, nil
}

// syncData writes fd's data to the device and waits for the writes to
// complete, without a journal commit or a cache flush (the fsync after the
// link does both).
func syncData(fd int) error {
	for {
		err := unix.SyncFileRange(fd, 0, 0, unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// createAtFault, when set (by tests only), is asked before each step of
// createAt and may fail it instead (the step is then not taken): a way to
// see what a failure at each step leaves behind on a real file system.
var createAtFault func(step string) error

func step(name string, do func() error) error {
	if createAtFault != nil {
		if err := createAtFault(name); err != nil {
			return err
		}
	}
	return do()
}

// mkdirAt creates dir (the first trace of a domain's day) when its parent
// exists, as mkdirs does, but relative to the parent opened once with
// openat2 — and, up to up levels, the parent too when it is missing (the
// first trace of a new domain) — and returns the new directory open and
// the parents whose entries changed, open, the deepest first: the caller
// fsyncs them after the file's fsync (whose commit holds the mkdirs too),
// whenever parents is not empty, and closes them. fs.ErrNotExist: a
// directory above is missing too (the caller takes the portable path,
// which creates it).
func (s *Store) mkdirAt(dir string, up int) (d *os.File, parents []*os.File, err error) {
	parentRel, name := path.Split(dir)
	parentRel = strings.TrimSuffix(parentRel, "/")
	if parentRel == "" || name == "" {
		return nil, nil, fs.ErrNotExist
	}
	p, err := s.openChecked(parentRel, true)
	if errors.Is(err, fs.ErrNotExist) && up > 0 {
		p, parents, err = s.mkdirAt(parentRel, up-1)
	}
	if err != nil {
		return nil, parents, err
	}
	pfd := int(p.Fd())
	if err := unix.Mkdirat(pfd, name, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
		p.Close()
		return nil, parents, &fs.PathError{Op: "mkdir", Path: dir, Err: err}
	}
	parents = append([]*os.File{p}, parents...)
	fd, err := unix.Openat(pfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil, parents, fs.ErrNotExist // removed again by a concurrent DeleteTrace
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR):
		return nil, parents, fmt.Errorf("%w: %s is not a plain directory: pem refuses links inside the tree", engine.ErrUnsafePath, dir)
	case err != nil:
		return nil, parents, &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	return os.NewFile(uintptr(fd), dir), parents, nil
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
