package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"sync"
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

// errNoOpenat2 means openNoLinks is unavailable here: use the portable path.
var errNoOpenat2 = errors.New("openat2 unavailable")

// rootFD is a descriptor of the tree's directory for openNoLinks.
func (s *Store) rootFD() (int, error) {
	s.dirOnce.Do(func() {
		s.dirFile, s.dirErr = os.Open(s.dir)
	})
	if s.dirErr != nil {
		return -1, s.dirErr
	}
	return int(s.dirFile.Fd()), nil
}

// openChecked opens rel with openNoLinks and maps its errors to the
// store's: a symlink on the way is ErrUnsafePath, as is an escape.
func (s *Store) openChecked(rel string, dir bool) (*os.File, error) {
	f, err := s.openNoLinks(rel, dir)
	switch {
	case err == nil, errors.Is(err, errNoOpenat2):
		return f, err
	case isLinkErr(err):
		return nil, fmt.Errorf("%w: %s or one of its parents is a symbolic link; pem refuses links inside the tree: replace it with a plain file or directory", engine.ErrUnsafePath, rel)
	case isEscapeErr(err):
		return nil, fmt.Errorf("%w: %s leaves the tree", engine.ErrUnsafePath, rel)
	}
	return nil, err
}

// readFile reads a regular file of at most max bytes inside the tree.
func (s *Store) readFile(rel string, max int64) ([]byte, fs.FileInfo, error) {
	if f, err := s.openChecked(rel, false); !errors.Is(err, errNoOpenat2) {
		if err != nil {
			return nil, nil, err
		}
		defer f.Close()
		return readOpen(f, rel, max)
	}
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
	return readOpen(f, rel, max)
}

// readOpen reads the open file f (rel) whole, refusing what is not a
// regular file or is over max bytes.
func readOpen(f *os.File, rel string, max int64) ([]byte, fs.FileInfo, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("%w: %s is not a regular file", engine.ErrUnsafePath, rel)
	}
	if fi.Size() > max {
		return nil, fi, fmt.Errorf("%w: %d bytes, the cap is %d", errTooBig, fi.Size(), max)
	}
	// One buffer of the size stat gave (plus one byte to see growth), not
	// ReadAll's doubling from 512 bytes.
	data := make([]byte, 0, min(fi.Size(), max)+1)
	lr := io.LimitReader(f, max+1)
	for {
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)] // the file grew since stat
		}
		n, err := lr.Read(data[len(data):cap(data)])
		data = data[:len(data)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, err
		}
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
	if handled, err := s.createAt(rel, data); handled {
		return err
	}
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

// readDir lists dir (whose Lstat, through the root, is lfi: a directory),
// sorted by name, skipping hidden names. It opens the directory by its
// absolute path and checks it is the very directory the confined Lstat
// found — a directory opened through an os.Root lstats every entry it
// lists (one system call per name), one opened plainly takes the types
// from the listing. With checkParents, dir's parents are checked for
// symlinks first, as rawList does.
func (s *Store) readDir(dir string, lfi fs.FileInfo, checkParents bool) ([]dirent, error) {
	if checkParents {
		if err := s.noSymlinks(dir); err != nil {
			return nil, err
		}
	}
	f, err := os.Open(s.abs(dir))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !os.SameFile(fi, lfi) {
		return nil, fmt.Errorf("%w: %s changed while it was opened (a link swapped in?)", engine.ErrUnsafePath, dir)
	}
	return listOpen(f, dir)
}

// listOpen lists the open directory f (dir) sorted by name, skipping hidden
// names (temporary files, .gitkeep).
func listOpen(f *os.File, dir string) ([]dirent, error) {
	des, err := f.ReadDir(-1)
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", dir, err)
	}
	out := make([]dirent, 0, len(des))
	for _, de := range des {
		if !strings.HasPrefix(de.Name(), ".") {
			out = append(out, dirent{name: de.Name(), typ: de.Type()})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

// fileWrite is one file of a batch: its place, bytes and, once written,
// its temporary file.
type fileWrite struct {
	rel, name string // name: base name in its directory
	data      []byte
	max       int64
	dir       *batchDir
	tmp       string // base name of the fsynced temporary file, "" if unchanged
	placed    bool   // renamed into place by this batch (it was not unchanged)
}

// batchDir is one directory of a batch, opened once as its own root so
// that every file operation in it is a single openat-family call instead
// of a walk from the tree's root.
type batchDir struct {
	rel  string
	root *os.Root
}

// openBatchDir creates dir (and parents) as mkdirs does, refuses symlinks
// on the way, and opens it as a root.
func (s *Store) openBatchDir(dir string) (*batchDir, error) {
	if err := s.mkdirs(dir); err != nil {
		return nil, err
	}
	if err := s.noSymlinks(dir); err != nil {
		return nil, err
	}
	lfi, err := s.root.Lstat(dir)
	if err != nil {
		return nil, err
	}
	r, err := s.root.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", dir, err)
	}
	fi, err := r.Stat(".")
	if err == nil && !os.SameFile(fi, lfi) {
		err = fmt.Errorf("%w: %s changed while it was opened (a link swapped in?)", engine.ErrUnsafePath, dir)
	}
	if err != nil {
		r.Close()
		return nil, err
	}
	return &batchDir{rel: dir, root: r}, nil
}

// unchanged reports whether w's file already holds w's bytes.
func (w *fileWrite) unchanged() (bool, error) {
	r := w.dir.root
	lfi, err := r.Lstat(w.name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, err
	case lfi.Mode()&fs.ModeSymlink != 0:
		return false, unsafeSymlink(w.rel)
	case !lfi.Mode().IsRegular() || lfi.Size() != int64(len(w.data)):
		return false, nil
	}
	f, err := r.Open(w.name)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return false, err
	}
	if !os.SameFile(fi, lfi) {
		return false, fmt.Errorf("%w: %s changed while it was opened (a link swapped in?)", engine.ErrUnsafePath, w.rel)
	}
	old, err := io.ReadAll(io.LimitReader(f, w.max+1))
	if err != nil {
		return false, err
	}
	return bytes.Equal(old, w.data), nil
}

// writeTemp writes w's bytes to a new temporary file in its directory and
// fsyncs it (same naming as Store.writeTemp).
func (w *fileWrite) writeTemp() error {
	r := w.dir.root
	for attempt := 0; ; attempt++ {
		var rnd [6]byte
		if _, err := rand.Read(rnd[:]); err != nil {
			return err
		}
		tmp := "." + strings.TrimSuffix(w.name, yamlExt) + "." + hex.EncodeToString(rnd[:]) + ".tmp"
		f, err := r.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, fs.ErrExist) && attempt < 3 {
			continue
		}
		if err != nil {
			return fmt.Errorf("writing %s: %w", w.dir.rel+"/"+tmp, err)
		}
		_, err = f.Write(w.data)
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			_ = r.Remove(tmp)
			return fmt.Errorf("writing %s: %w", w.dir.rel+"/"+tmp, err)
		}
		w.tmp = tmp
		return nil
	}
}

func (d *batchDir) sync() error {
	f, err := d.root.Open(".")
	if err != nil {
		return fmt.Errorf("syncing directory %s: %w", d.rel, err)
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("syncing directory %s: %w", d.rel, err)
	}
	return nil
}

// syncWorkers is how many fsyncs a batch keeps in flight: the file system
// commits concurrent syncs together (one journal commit for many files).
const syncWorkers = 32

// forEach runs fn(0..n-1) on up to workers goroutines and returns the
// first error; after an error no new call starts.
func forEach(n, workers int, fn func(i int) error) error {
	workers = min(workers, n)
	if workers <= 1 {
		for i := 0; i < n; i++ {
			if err := fn(i); err != nil {
				return err
			}
		}
		return nil
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		next  int
	)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				if first != nil || next >= n {
					mu.Unlock()
					return
				}
				i := next
				next++
				mu.Unlock()
				if err := fn(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// writeGroups writes files atomically in groups, each group in place
// (and durable) before the next one starts: every changed file of every
// group goes to an fsynced temporary file first, then the groups in order
// are renamed into place and their directories fsynced, once per
// directory. A file that already holds its bytes is left alone (bytes and
// mtime). placed is called after each rename. It returns whether each
// file was written, group by group. A failure leaves the groups before
// the failing one in place, and removes the temporary files not renamed.
func (s *Store) writeGroups(ctx context.Context, groups [][]*fileWrite, placed func(rel string)) error {
	dirs := map[string]*batchDir{}
	defer func() {
		for _, d := range dirs {
			d.root.Close()
		}
	}()
	var all []*fileWrite
	for _, g := range groups {
		for _, w := range g {
			dir, name := path.Split(w.rel)
			dir = strings.TrimSuffix(dir, "/")
			d := dirs[dir]
			if d == nil {
				var err error
				if d, err = s.openBatchDir(dir); err != nil {
					return err
				}
				dirs[dir] = d
			}
			w.dir, w.name = d, name
			all = append(all, w)
		}
	}
	defer func() {
		for _, w := range all {
			if w.tmp != "" {
				_ = w.dir.root.Remove(w.tmp)
			}
		}
	}()
	err := forEach(len(all), syncWorkers, func(i int) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		w := all[i]
		same, err := w.unchanged()
		if err != nil {
			return fmt.Errorf("reading %s: %w", w.rel, err)
		}
		if same {
			return nil
		}
		return w.writeTemp()
	})
	if err != nil {
		return err
	}
	for _, g := range groups {
		if err := ctx.Err(); err != nil {
			return err
		}
		synced := map[*batchDir]bool{}
		var toSync []*batchDir
		for _, w := range g {
			if w.tmp == "" {
				continue
			}
			if err := w.dir.root.Rename(w.tmp, w.name); err != nil {
				return fmt.Errorf("renaming %s into place: %w", w.rel, err)
			}
			w.tmp, w.placed = "", true
			if !synced[w.dir] {
				synced[w.dir] = true
				toSync = append(toSync, w.dir)
			}
			if placed != nil {
				placed(w.rel)
			}
		}
		if err := forEach(len(toSync), syncWorkers, func(i int) error { return toSync[i].sync() }); err != nil {
			return err
		}
	}
	return nil
}
