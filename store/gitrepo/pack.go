package gitrepo

// gitpack.go writes a commit's new objects as one packfile with its index
// (pack format 2, index format 2) instead of one loose file per object: a
// consolidation of 1,000 traces makes ~3,000 objects, and each loose object
// costs six system calls and a directory entry. Git's own order is kept:
// the pack and its index are written to temporary files (tmp_pack_*,
// tmp_idx_*, which git gc knows), then the pack is renamed into place and
// the index last — a pack becomes visible only with its index, so a process
// killed midway leaves no half object store. Small commits stay loose.

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/go-git/go-git/v5/plumbing"
)

// packMinObjects is the number of new objects from which a commit writes a
// pack instead of loose objects.
const packMinObjects = 16

// errPackTooLarge asks for loose objects (the index writer handles 31-bit
// offsets only).
var errPackTooLarge = errors.New("pack over 2 GiB")

// packed is one object as written in the pack.
type packed struct {
	hash   [20]byte
	offset uint32
	crc    uint32
}

// writePack writes objs as one pack and index in the repository.
func (r *repo) writePack(objs []pendingObject) error {
	// Compress in parallel: each object's pack entry is its type and size
	// header followed by its zlib stream (made already for the blobs that
	// readFiles compressed).
	entries := make([][]byte, len(objs))
	err := forEach(len(objs), commitWorkers, func(i int) error {
		o := objs[i]
		if o.packed != nil {
			entries[i] = o.packed
			return nil
		}
		var err error
		entries[i], err = packEntry(o.typ, o.data)
		return err
	})
	if err != nil {
		return err
	}
	dir := filepath.Join(r.common, "objects", "pack")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	pf, err := os.CreateTemp(dir, "tmp_pack_")
	if err != nil {
		return err
	}
	tmpPack := pf.Name()
	tmpIdx := ""
	done := false
	defer func() {
		if !done {
			pf.Close()
			_ = os.Remove(tmpPack)
			if tmpIdx != "" {
				_ = os.Remove(tmpIdx)
			}
		}
	}()
	sum := sha1.New()
	w := bufio.NewWriterSize(io.MultiWriter(pf, sum), 1<<20)
	var hdr [12]byte
	copy(hdr[:], "PACK")
	binary.BigEndian.PutUint32(hdr[4:], 2)
	binary.BigEndian.PutUint32(hdr[8:], uint32(len(objs)))
	w.Write(hdr[:])
	idx := make([]packed, len(objs))
	off := int64(len(hdr))
	for i, e := range entries {
		if off >= 1<<31 {
			return errPackTooLarge
		}
		idx[i] = packed{hash: objs[i].hash, offset: uint32(off), crc: crc32.ChecksumIEEE(e)}
		if _, err := w.Write(e); err != nil {
			return err
		}
		off += int64(len(e))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	packSum := sum.Sum(nil)
	if _, err := pf.Write(packSum); err != nil {
		return err
	}
	if err := pf.Close(); err != nil {
		return err
	}

	sort.Slice(idx, func(i, j int) bool { return bytes.Compare(idx[i].hash[:], idx[j].hash[:]) < 0 })
	var ib bytes.Buffer
	ib.WriteString("\xfftOc")
	binary.Write(&ib, binary.BigEndian, uint32(2))
	var fanout [256]uint32
	for _, p := range idx {
		fanout[p.hash[0]]++
	}
	var n uint32
	for i := range fanout {
		n += fanout[i]
		binary.Write(&ib, binary.BigEndian, n)
	}
	for i := 1; i < len(idx); i++ {
		if idx[i].hash == idx[i-1].hash {
			return fmt.Errorf("object %x twice in one pack", idx[i].hash)
		}
	}
	for _, p := range idx {
		ib.Write(p.hash[:])
	}
	for _, p := range idx {
		binary.Write(&ib, binary.BigEndian, p.crc)
	}
	for _, p := range idx {
		binary.Write(&ib, binary.BigEndian, p.offset)
	}
	ib.Write(packSum)
	idxSum := sha1.Sum(ib.Bytes())
	ib.Write(idxSum[:])
	xf, err := os.CreateTemp(dir, "tmp_idx_")
	if err != nil {
		return err
	}
	tmpIdx = xf.Name()
	_, err = xf.Write(ib.Bytes())
	if cerr := xf.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	base := filepath.Join(dir, "pack-"+hex.EncodeToString(packSum))
	if err := os.Chmod(tmpPack, 0o444); err != nil {
		return err
	}
	if err := os.Chmod(tmpIdx, 0o444); err != nil {
		return err
	}
	if err := os.Rename(tmpPack, base+".pack"); err != nil {
		return err
	}
	if err := os.Rename(tmpIdx, base+".idx"); err != nil {
		_ = os.Remove(base + ".pack")
		return err
	}
	done = true
	return nil
}

// packEntry is an object's entry in a pack: its type and size header
// followed by its zlib stream.
func packEntry(typ plumbing.ObjectType, data []byte) ([]byte, error) {
	var b bytes.Buffer
	b.Grow(len(data)/2 + 64)
	b.Write(packHeader(int(typ), len(data)))
	zw := zlibPool.Get().(*zlib.Writer)
	zw.Reset(&b)
	_, err := zw.Write(data)
	if err == nil {
		err = zw.Close()
	}
	zlibPool.Put(zw)
	return b.Bytes(), err
}

// packHeader is an entry's type and size: the type in bits 4-6 of the
// first byte with the size's low 4 bits, then the size 7 bits a byte.
func packHeader(typ, size int) []byte {
	b := []byte{byte(typ<<4) | byte(size&0x0f)}
	size >>= 4
	for size > 0 {
		b[len(b)-1] |= 0x80
		b = append(b, byte(size&0x7f))
		size >>= 7
	}
	return b
}
