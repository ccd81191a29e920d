package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/pemdev/pem/engine"
)

// Files calls fn with every regular file of the tree, hidden ones included,
// in lexical order, and with up to max bytes of its content (a longer file
// gives its first max bytes); a file the layout gives a kind (PlaceOf) is read
// at most up to its kind's cap, so a file Check refuses for its size is not
// read past the cap either. .git directories, the writer lock and the
// local caches (.pem-cache) are skipped, and so are symlinks and other
// irregular entries (Check reports them). Every read goes through the tree's confinement, like the store's own
// reads. It is how pem check scans the whole tree for secrets. An error from
// fn or from reading stops the walk and is returned.
func (s *Store) Files(ctx context.Context, max int64, fn func(rel string, data []byte) error) error {
	return fs.WalkDir(s.root.FS(), ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || rel == cacheDir) {
			return fs.SkipDir // git's, and pem's local caches (traceindex.go)
		}
		if !d.Type().IsRegular() || rel == lockFile {
			return nil
		}
		limit := max
		if k := PlaceOf(rel).Kind; k != "" {
			limit = min(limit, int64(MaxBytes(k)))
		}
		data, err := s.readPrefix(rel, limit)
		if err != nil {
			return fmt.Errorf("reading %s: %w", rel, err)
		}
		return fn(rel, data)
	})
}

// readPrefix reads up to max bytes of the regular file rel inside the tree,
// refusing links on the way as readFile does.
func (s *Store) readPrefix(rel string, max int64) ([]byte, error) {
	f, err := s.openChecked(rel, false)
	if errors.Is(err, errNoOpenat2) {
		f, err = s.openPortable(rel)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file", engine.ErrUnsafePath, rel)
	}
	// One read into a buffer of the right size (io.ReadAll would grow it,
	// copying, from 512 bytes up).
	data := make([]byte, min(fi.Size(), max))
	n, err := io.ReadFull(f, data)
	if errors.Is(err, io.ErrUnexpectedEOF) {
		err = nil // the file shrank meanwhile: what is there
	}
	return data[:n], err
}

// openPortable opens rel where openat2 is unavailable: no symlink on the way
// (Lstat of each parent), and the file opened is the one that was checked.
func (s *Store) openPortable(rel string) (*os.File, error) {
	if err := s.noSymlinks(rel); err != nil {
		return nil, err
	}
	lfi, err := s.root.Lstat(rel)
	if err != nil {
		return nil, err
	}
	f, err := s.root.Open(rel)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !os.SameFile(fi, lfi) {
		f.Close()
		return nil, fmt.Errorf("%w: %s changed while it was opened (a link swapped in?)", engine.ErrUnsafePath, rel)
	}
	return f, nil
}
