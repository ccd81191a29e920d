package gitrepo

// gitindex.go updates git's index file as bytes: the entries of the paths a
// commit touches are re-encoded, every other entry is copied unchanged. On a
// tree of 120,000 files this avoids decoding and re-encoding every entry
// (go-git's index codec allocates per entry). It handles index versions 2
// and 3 without required extensions — what git writes by default; anything
// else (version 4, a split or sparse index) goes through go-git's codec.

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/index"
)

// rawIndex enables the byte-level writer (tests turn it off to compare).
var rawIndex = true

// errIndexFallback means the raw updater does not handle this index.
var errIndexFallback = errors.New("index needs the full codec")

const (
	idxHeader      = 12
	idxFixed       = 62 // stat data, hash and flags of an entry
	idxFlagExt     = 0x4000
	idxFlagValid   = 0x8000
	idxStageShift  = 12
	idxNameMask    = 0x0fff
	idxChecksumLen = sha1.Size
)

// rawEntry is one entry of the index: its name, stage and bytes.
type rawEntry struct {
	name  []byte // a slice of the file: no copy per entry
	stage int
	data  []byte // the whole entry, padding included (a slice of the file, or new)
}

// parseIndex splits an index file into its version and entries; it
// refuses (errIndexFallback) what it does not handle and reports a corrupt
// file as an error.
func parseIndex(b []byte) (uint32, []rawEntry, error) {
	if len(b) < idxHeader+idxChecksumLen || string(b[:4]) != "DIRC" {
		return 0, nil, fmt.Errorf("not a git index (bad header)")
	}
	sum := sha1.Sum(b[:len(b)-idxChecksumLen])
	if !bytes.Equal(sum[:], b[len(b)-idxChecksumLen:]) {
		return 0, nil, fmt.Errorf("index checksum mismatch")
	}
	version := binary.BigEndian.Uint32(b[4:8])
	if version != 2 && version != 3 {
		return version, nil, errIndexFallback
	}
	n := int(binary.BigEndian.Uint32(b[8:12]))
	end := len(b) - idxChecksumLen
	// An entry takes at least 64 bytes: a count the file cannot hold is
	// not an allocation to make.
	entries := make([]rawEntry, 0, min(n, (end-idxHeader)/64))
	off := idxHeader
	for i := 0; i < n; i++ {
		if off+idxFixed > end {
			return version, nil, fmt.Errorf("index truncated at entry %d", i)
		}
		flags := binary.BigEndian.Uint16(b[off+60 : off+62])
		nameOff := off + idxFixed
		if flags&idxFlagExt != 0 {
			if version < 3 {
				return version, nil, fmt.Errorf("extended flags in a version 2 index (entry %d)", i)
			}
			nameOff += 2
		}
		// The name's length is in the flags, as git reads it (the NUL
		// after the name is only searched for a name of 0xfff bytes or
		// more); a name that holds a NUL, or does not end where the flags
		// say, is corrupt.
		nul := int(flags & idxNameMask)
		if nul == idxNameMask {
			nul = bytes.IndexByte(b[nameOff:end], 0)
			if nul < 0 {
				return version, nil, fmt.Errorf("index entry %d has no name end", i)
			}
		} else if nameOff+nul >= end || b[nameOff+nul] != 0 || bytes.IndexByte(b[nameOff:nameOff+nul], 0) >= 0 {
			return version, nil, fmt.Errorf("index entry %d: name length %d does not match its name", i, nul)
		}
		name := b[nameOff : nameOff+nul]
		// Entries are padded with 1 to 8 NULs to a multiple of 8 bytes.
		l := nameOff - off + nul
		size := (l + 8) &^ 7
		if off+size > end {
			return version, nil, fmt.Errorf("index truncated at entry %d", i)
		}
		entries = append(entries, rawEntry{name: name, stage: int(flags>>idxStageShift) & 3, data: b[off : off+size]})
		off += size
	}
	// Extensions: optional ones (upper-case signature) are dropped, as
	// go-git does — the cache-tree is then rebuilt by git on its next write;
	// a required one means a format this writer must not touch.
	for off < end {
		if off+8 > end {
			return version, nil, fmt.Errorf("index extension truncated")
		}
		sig := b[off : off+4]
		if sig[0] < 'A' || sig[0] > 'Z' {
			return version, nil, errIndexFallback
		}
		off += 8 + int(binary.BigEndian.Uint32(b[off+4:off+8]))
	}
	if off != end {
		return version, nil, fmt.Errorf("index extension overruns the file")
	}
	return version, entries, nil
}

// encodeEntry is a fresh stage-0 entry for st, keeping the assume-valid bit
// of the entry it replaces (old may be nil).
func encodeEntry(st *fileState, old []byte) []byte {
	l := idxFixed + len(st.name)
	b := make([]byte, (l+8)&^7)
	be := binary.BigEndian
	var stat index.Entry
	fillStat(&stat, st.info)
	mt, ct := st.info.ModTime(), stat.CreatedAt
	be.PutUint32(b[0:], uint32(ct.Unix()))
	be.PutUint32(b[4:], uint32(ct.Nanosecond()))
	be.PutUint32(b[8:], uint32(mt.Unix()))
	be.PutUint32(b[12:], uint32(mt.Nanosecond()))
	be.PutUint32(b[16:], stat.Dev)
	be.PutUint32(b[20:], stat.Inode)
	mode := uint32(filemode.Regular)
	if st.mode == filemode.Executable {
		mode = uint32(filemode.Executable)
	}
	be.PutUint32(b[24:], mode)
	be.PutUint32(b[28:], stat.UID)
	be.PutUint32(b[32:], stat.GID)
	be.PutUint32(b[36:], uint32(st.info.Size()))
	copy(b[40:60], st.hash[:])
	flags := uint16(min(len(st.name), idxNameMask))
	if old != nil {
		flags |= be.Uint16(old[60:62]) & idxFlagValid
	}
	be.PutUint16(b[60:], flags)
	copy(b[idxFixed:], st.name)
	return b
}

// updateIndexRaw writes to w the index (version, entries from parseIndex)
// with files applied: a path's
// stage-0 entry is replaced by its file's (or dropped when deleted), its
// conflict stages are dropped, new paths are inserted in order; all other
// entries are copied as they are.
func updateIndexRaw(w io.Writer, version uint32, entries []rawEntry, files map[string]*fileState) error {
	seen := make(map[string]bool, len(files))
	kept := entries[:0] // entries are filtered in place
	for _, e := range entries {
		st, ok := files[string(e.name)]
		if !ok {
			kept = append(kept, e)
			continue
		}
		if e.stage != 0 || seen[st.name] || st.deleted {
			continue // committing a path resolves its conflict
		}
		seen[st.name] = true
		kept = append(kept, rawEntry{name: e.name, data: encodeEntry(st, e.data)})
	}
	var add []rawEntry
	for name, st := range files {
		if !st.deleted && !seen[name] {
			add = append(add, rawEntry{name: []byte(name), data: encodeEntry(st, nil)})
		}
	}
	sort.Slice(add, func(i, j int) bool { return bytes.Compare(add[i].name, add[j].name) < 0 })

	h := sha1.New()
	bw := bufio.NewWriterSize(io.MultiWriter(w, h), 1<<20)
	var hdr [idxHeader]byte
	copy(hdr[:], "DIRC")
	binary.BigEndian.PutUint32(hdr[4:], version)
	binary.BigEndian.PutUint32(hdr[8:], uint32(len(kept)+len(add)))
	bw.Write(hdr[:])
	// Merge the new paths into the kept entries (sorted by name, then
	// stage; a new path has no entry there).
	i := 0
	for _, a := range add {
		for i < len(kept) && bytes.Compare(kept[i].name, a.name) < 0 {
			bw.Write(kept[i].data)
			i++
		}
		bw.Write(a.data)
	}
	for ; i < len(kept); i++ {
		bw.Write(kept[i].data)
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	_, err := w.Write(h.Sum(nil))
	return err
}

// writeIndexRaw updates the index at file through file.lock; it returns
// errIndexFallback when the index needs go-git's codec.
func (r *repo) writeIndexRaw(file string, files map[string]*fileState) error {
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		b = []byte("DIRC\x00\x00\x00\x02\x00\x00\x00\x00")
		s := sha1.Sum(b)
		b = append(b, s[:]...)
	} else if err != nil {
		return fmt.Errorf("reading %s: %w", file, err)
	}
	version, entries, err := parseIndex(b)
	if errors.Is(err, errIndexFallback) {
		return err
	} else if err != nil {
		return fmt.Errorf("reading %s: %w (run git status to let git repair it)", file, err)
	}
	return r.withLock(file, func(f *os.File) error {
		return updateIndexRaw(f, version, entries, files)
	})
}
