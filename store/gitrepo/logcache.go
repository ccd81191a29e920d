package gitrepo

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
)

// The log cache: what Log and StateLog learned of each commit they walked —
// its parents, the files it changed against its first parent (for the
// state, against its stateParent) below the directories the walks asked
// for (facts/DOMAIN and experience/DOMAIN for pem log D/I), and, once a walk listed
// it, its author, date and message — kept in the git directory (never
// committed, never seen by git) so that the next walk reads no commit, tree
// or commit-graph for a commit it has seen. git itself skips commits with
// the commit-graph's changed-path Bloom filters; this is pem's equivalent,
// exact rather than probabilistic. A walk of the whole tree ("" — its
// records would list every trace) is not cached.
//
// Everything in it is a function of a commit's hash (a commit names its
// parents and its tree, and a tree its contents), so it is never stale —
// but for a state snapshot, compared with the commit it replaced only while
// the repository has it (checked at every use):
// a moved tip only adds commits, which the next walk appends; a rewritten
// history (a reset, an amended commit, a state snapshot) has new hashes,
// computed the same way, and the old records are merely unused. It is
// rewritten whole (temporary file, rename) when a walk added records,
// checked by a CRC-32C of its bytes, and dropped — rebuilt by the next
// walk — when it is damaged, of another format or for another knowledge
// tree of the repository, or larger than logCacheMax.
//
//	pem-log-cache (in the common git directory):
//	"pem-log-cache 1\n", the knowledge tree's prefix, the path table,
//	then per commit: kind (0 the branch's walk, 1 the state's), hash,
//	parents (for the state's walk: the commit it was compared with), the
//	directories it covers, changes (path index, from, to, mode),
//	and author, time, message and parents once a Log has listed it;
//	CRC-32C of all before.
const (
	logCacheFile  = "pem-log-cache"
	logCacheMagic = "pem-log-cache 1\n"
	logCacheMax   = 256 << 20
)

// logCacheOff makes every walk read the trees (tests compare the two).
var logCacheOff bool

// logCacheRoots returns the directories that paths lie in, two levels deep
// at most (facts/DOMAIN and experience/DOMAIN for pem log D/I, facts for
// pem log) — what a record must cover to answer the walk, and what a walk
// that finds no such record computes: the changes below those directories
// only, as a walk without the cache reads them. nil when a path is the
// whole tree (its records would list every trace), which is not cached.
func logCacheRoots(paths []string) []string {
	if logCacheOff || len(paths) == 0 {
		return nil
	}
	var roots []string
	for _, p := range paths {
		parts := strings.SplitN(strings.Trim(p, "/"), "/", 3)
		if parts[0] == "" {
			return nil
		}
		roots = append(roots, strings.Join(parts[:min(len(parts), 2)], "/"))
	}
	return normalRoots(roots)
}

// below reports whether p is root or lies below it.
func below(p, root string) bool { return p == root || strings.HasPrefix(p, root+"/") }

// normalRoots drops duplicates and the roots below another one (whose
// changes that one lists already).
func normalRoots(roots []string) []string {
	var out []string
	for i, r := range roots {
		covered := false
		for j, o := range roots {
			if j != i && below(r, o) && (r != o || j < i) {
				covered = true
			}
		}
		if !covered {
			out = append(out, r)
		}
	}
	return out
}

type logRec struct {
	parents []plumbing.Hash
	roots   []string // the top-level directories whose changes it lists
	changes []logChange
	info    *CommitInfo // nil until a Log listed the commit

	selected []FileChange // the state's walk without the cache: the changes below its paths
}

// entry is the log entry of r's commit (r.info set) listing changes. Its
// Parents are a copy: r may be the log cache's, which outlives the entry.
func (r *logRec) entry(changes []FileChange) LogEntry {
	ci := *r.info
	ci.Parents = slices.Clone(ci.Parents)
	return LogEntry{CommitInfo: ci, Changes: changes}
}

// firstParent is the commit a walk goes to after r's (zero: none).
func (r *logRec) firstParent() plumbing.Hash {
	if len(r.parents) > 0 {
		return r.parents[0]
	}
	return plumbing.ZeroHash
}

// lookup returns the record of k when the walk uses the cache (c is nil otherwise).
func (c *logCache) lookup(k logKey, use bool) (*logRec, bool) {
	if !use || c == nil {
		return nil, false
	}
	r, ok := c.recs[k]
	return r, ok
}

// covers reports whether the record lists the changes below every root.
func (r *logRec) covers(roots []string) bool {
	for _, root := range roots {
		if !slices.ContainsFunc(r.roots, func(have string) bool { return below(root, have) }) {
			return false
		}
	}
	return true
}

// union is the record's roots and roots, normalized.
func (r *logRec) union(roots []string) []string {
	return normalRoots(append(slices.Clone(r.roots), roots...))
}

type logChange struct {
	path     string
	from, to plumbing.Hash // zero: absent
	mode     filemode.FileMode
}

type logCache struct {
	file  string
	recs  map[logKey]*logRec
	order []logKey // records in file order, then the new ones
	dirty bool
}

// logKey names a record: a commit as the branch's walk sees it (against its
// first parent), or as the state's walk does (against its stateParent: for
// a snapshot, the commit it replaced).
type logKey struct {
	hash  plumbing.Hash
	state bool
}

var logCRC = crc32.MakeTable(crc32.Castagnoli)

// loadLogCache reads the cache of the repository whose common git directory
// is common for the knowledge tree at prefix; anything unreadable gives an
// empty cache (rebuilt as Log walks).
func loadLogCache(common, prefix string) *logCache {
	c := &logCache{file: filepath.Join(common, logCacheFile), recs: map[logKey]*logRec{}}
	data, err := readCapped(c.file, logCacheMax)
	if err != nil {
		return c
	}
	if !c.decode(data, prefix) {
		clear(c.recs)
		c.order = nil
	}
	return c
}

func readCapped(name string, max int64) ([]byte, error) {
	fi, err := os.Stat(name)
	if err != nil {
		return nil, err
	}
	if fi.Size() > max {
		return nil, errors.New("too large")
	}
	return os.ReadFile(name)
}

func (c *logCache) decode(data []byte, prefix string) bool {
	if len(data) < len(logCacheMagic)+4 || string(data[:len(logCacheMagic)]) != logCacheMagic {
		return false
	}
	body := data[:len(data)-4]
	if crc32.Checksum(body, logCRC) != binary.LittleEndian.Uint32(data[len(data)-4:]) {
		return false
	}
	d := logDecoder{b: body[len(logCacheMagic):]}
	if d.str() != prefix {
		return false
	}
	paths := make([]string, d.uint(1<<24))
	for i := range paths {
		paths[i] = d.str()
	}
	for !d.bad && len(d.b) > 0 {
		kind := d.byte()
		if kind > 1 {
			d.bad = true
		}
		h := d.hash()
		r := &logRec{parents: make([]plumbing.Hash, d.uint(1<<16))}
		for i := range r.parents {
			r.parents[i] = d.hash()
		}
		for n := d.uint(1 << 16); n > 0 && !d.bad; n-- {
			if k := d.uint(uint64(len(paths))); k < len(paths) {
				r.roots = append(r.roots, paths[k])
			} else {
				d.bad = true
			}
		}
		if n := d.uint(1 << 24); n > 0 {
			r.changes = make([]logChange, n)
			for i := range r.changes {
				ch := &r.changes[i]
				if k := d.uint(uint64(len(paths))); k < len(paths) {
					ch.path = paths[k]
				} else {
					d.bad = true
				}
				flags := d.byte()
				if flags&1 != 0 {
					ch.from = d.hash()
				}
				if flags&2 != 0 {
					ch.to = d.hash()
				}
				ch.mode = filemode.FileMode(d.uint(1 << 32))
			}
		}
		switch d.byte() {
		case 0: // not listed yet
		case 1:
			ci := &CommitInfo{Hash: h.String(), Author: d.str()}
			ci.When = time.Unix(d.int(), 0).UTC()
			ci.Message = d.str()
			ci.Subject, _, _ = strings.Cut(strings.TrimSpace(ci.Message), "\n")
			for n := d.uint(1 << 16); n > 0 && !d.bad; n-- {
				ci.Parents = append(ci.Parents, d.hash().String())
			}
			r.info = ci
		default:
			d.bad = true
		}
		if d.bad {
			break
		}
		k := logKey{h, kind == 1}
		if _, dup := c.recs[k]; !dup {
			c.order = append(c.order, k)
		}
		c.recs[k] = r
	}
	return !d.bad
}

// add records what a walk computed for commit k.
func (c *logCache) add(k logKey, r *logRec) {
	if _, ok := c.recs[k]; !ok {
		c.order = append(c.order, k)
	}
	c.recs[k] = r
	c.dirty = true
}

// save rewrites the file when records were added. A cache that cannot be
// written is no error: the next walk computes the same again.
func (c *logCache) save(prefix string) {
	if !c.dirty {
		return
	}
	c.dirty = false
	var b bytes.Buffer
	b.WriteString(logCacheMagic)
	e := logEncoder{b: &b}
	e.str(prefix)
	index := map[string]int{}
	var paths []string
	intern := func(p string) {
		if _, ok := index[p]; !ok {
			index[p] = len(paths)
			paths = append(paths, p)
		}
	}
	for _, k := range c.order {
		r := c.recs[k]
		for _, root := range r.roots {
			intern(root)
		}
		for _, ch := range r.changes {
			intern(ch.path)
		}
	}
	e.uint(uint64(len(paths)))
	for _, p := range paths {
		e.str(p)
	}
	for _, k := range c.order {
		r := c.recs[k]
		if k.state {
			b.WriteByte(1)
		} else {
			b.WriteByte(0)
		}
		b.Write(k.hash[:])
		e.uint(uint64(len(r.parents)))
		for _, p := range r.parents {
			b.Write(p[:])
		}
		e.uint(uint64(len(r.roots)))
		for _, root := range r.roots {
			e.uint(uint64(index[root]))
		}
		e.uint(uint64(len(r.changes)))
		for _, ch := range r.changes {
			e.uint(uint64(index[ch.path]))
			var flags byte
			if !ch.from.IsZero() {
				flags |= 1
			}
			if !ch.to.IsZero() {
				flags |= 2
			}
			b.WriteByte(flags)
			if flags&1 != 0 {
				b.Write(ch.from[:])
			}
			if flags&2 != 0 {
				b.Write(ch.to[:])
			}
			e.uint(uint64(ch.mode))
		}
		if r.info == nil {
			b.WriteByte(0)
		} else {
			b.WriteByte(1)
			e.str(r.info.Author)
			e.int(r.info.When.Unix())
			e.str(r.info.Message)
			e.uint(uint64(len(r.info.Parents))) // the commit's own: a snapshot's differ from the commit it is compared with
			for _, p := range r.info.Parents {
				h := plumbing.NewHash(p)
				b.Write(h[:])
			}
		}
	}
	if b.Len() > logCacheMax {
		os.Remove(c.file) // history too large to keep: the walks go on uncached
		return
	}
	b.Write(binary.LittleEndian.AppendUint32(nil, crc32.Checksum(b.Bytes(), logCRC)))
	writeCacheFile(c.file, b.Bytes())
}

// select returns the record's changes below paths, as pathChanges would
// list them from the trees: a path naming a file whose entry kept its hash
// (a mode change only) lists nothing, and a path that turned from a file
// into a directory or back lists the files below it, not itself.
func (r *logRec) selectPaths(paths []string) []FileChange {
	var out []FileChange
	for _, p := range paths {
		p = strings.Trim(p, "/")
		var under, self []FileChange
		for _, ch := range r.changes {
			switch {
			case strings.HasPrefix(ch.path, p+"/"):
				under = append(under, ch.fileChange())
			case ch.path == p && ch.from != ch.to:
				self = append(self, ch.fileChange())
			}
		}
		if len(under) > 0 {
			out = append(out, under...)
		} else {
			out = append(out, self...)
		}
	}
	return out
}

func (ch logChange) fileChange() FileChange {
	fc := FileChange{Path: ch.path}
	if !ch.from.IsZero() {
		fc.From = ch.from.String()
	}
	if !ch.to.IsZero() {
		fc.To, fc.ToMode = ch.to.String(), ch.mode
	}
	return fc
}

func toLogChange(fc FileChange) logChange {
	ch := logChange{path: fc.Path, mode: fc.ToMode}
	if fc.From != "" {
		ch.from = plumbing.NewHash(fc.From)
	}
	if fc.To != "" {
		ch.to = plumbing.NewHash(fc.To)
	}
	return ch
}

type logEncoder struct{ b *bytes.Buffer }

func (e logEncoder) uint(v uint64) { e.b.Write(binary.AppendUvarint(nil, v)) }
func (e logEncoder) int(v int64)   { e.b.Write(binary.AppendVarint(nil, v)) }
func (e logEncoder) str(s string)  { e.uint(uint64(len(s))); e.b.WriteString(s) }

// logDecoder reads what logEncoder wrote; any short or out-of-range read
// sets bad (and returns zero values), so a damaged file is dropped whole.
type logDecoder struct {
	b   []byte
	bad bool
}

func (d *logDecoder) uint(max uint64) int {
	v, n := binary.Uvarint(d.b)
	if n <= 0 || v > max {
		d.bad = true
		d.b = nil
		return 0
	}
	d.b = d.b[n:]
	return int(v)
}

func (d *logDecoder) int() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.bad = true
		d.b = nil
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *logDecoder) str() string {
	n := d.uint(1 << 30)
	if n > len(d.b) {
		d.bad = true
		d.b = nil
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *logDecoder) byte() byte {
	if len(d.b) == 0 {
		d.bad = true
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *logDecoder) hash() plumbing.Hash {
	var h plumbing.Hash
	if len(d.b) < len(h) {
		d.bad = true
		d.b = nil
		return h
	}
	copy(h[:], d.b)
	d.b = d.b[len(h):]
	return h
}

// The description cache: what the caller's describe function said of a
// version of a file (pem log's "status candidate, revision 3"), keyed by
// its path and blob hash — a function of the blob's bytes and of the pem
// that described it. It is kept beside the log cache and dropped whenever
// the running executable is another one (its path, size or modification
// time differ), so a pem whose descriptions changed never prints an older
// pem's. Damaged or unreadable: dropped, rebuilt.
const (
	describeCacheFile  = "pem-log-describe"
	describeCacheMagic = "pem-log-describe 1\n"
)

type describeKey struct {
	path string
	blob plumbing.Hash
}

type describeCache struct {
	file  string
	exe   string
	m     map[describeKey]string
	dirty bool
}

// executableIdentity names the running binary by path, size and
// modification time ("" when it cannot tell: nothing is cached then).
func executableIdentity() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	fi, err := os.Stat(exe)
	if err != nil {
		return ""
	}
	return exe + "\x00" + strconv.FormatInt(fi.Size(), 10) + "\x00" + strconv.FormatInt(fi.ModTime().UnixNano(), 10)
}

func loadDescribeCache(common string) *describeCache {
	c := &describeCache{file: filepath.Join(common, describeCacheFile), exe: executableIdentity(), m: map[describeKey]string{}}
	if c.exe == "" {
		return c
	}
	data, err := readCapped(c.file, logCacheMax)
	if err != nil || len(data) < len(describeCacheMagic)+4 || string(data[:len(describeCacheMagic)]) != describeCacheMagic {
		return c
	}
	body := data[:len(data)-4]
	if crc32.Checksum(body, logCRC) != binary.LittleEndian.Uint32(data[len(data)-4:]) {
		return c
	}
	d := logDecoder{b: body[len(describeCacheMagic):]}
	if d.str() != c.exe {
		return c
	}
	m := map[describeKey]string{}
	for !d.bad && len(d.b) > 0 {
		k := describeKey{path: d.str()}
		k.blob = d.hash()
		m[k] = d.str()
	}
	if !d.bad {
		c.m = m
	}
	return c
}

func (c *describeCache) save() {
	if !c.dirty || c.exe == "" {
		return
	}
	c.dirty = false
	var b bytes.Buffer
	b.WriteString(describeCacheMagic)
	e := logEncoder{b: &b}
	e.str(c.exe)
	for k, v := range c.m {
		e.str(k.path)
		b.Write(k.blob[:])
		e.str(v)
	}
	if b.Len() > logCacheMax {
		os.Remove(c.file)
		return
	}
	b.Write(binary.LittleEndian.AppendUint32(nil, crc32.Checksum(b.Bytes(), logCRC)))
	writeCacheFile(c.file, b.Bytes())
}

// writeCacheFile replaces a cache file (a temporary file renamed over it);
// a cache that cannot be written is no error: it is computed again.
// A pem killed between the two leaves its temporary file behind; the next
// write removes those older than staleCacheTemp (a fresh one may be another
// pem's, still being written).
func writeCacheFile(name string, data []byte) {
	prefix := "." + filepath.Base(name) + "-"
	removeStaleTemps(filepath.Dir(name), prefix, time.Now().Add(-staleCacheTemp))
	_ = replaceFile(name, prefix+"*", data, 0o600)
}

const staleCacheTemp = time.Hour

// removeStaleTemps removes the regular files of dir whose name starts with
// prefix and that were last written before cutoff.
func removeStaleTemps(dir, prefix string, cutoff time.Time) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !e.Type().IsRegular() || !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		if fi, err := e.Info(); err == nil && fi.ModTime().Before(cutoff) {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// Described returns describe's text for the version blob (a FileChange's To)
// of the file at path, from the description cache when this pem described
// it before. describe reports whether its text may be kept: not when reading
// the blob failed (a cancelled context, an I/O error), which says nothing of
// the version. The cache is written when the History is closed.
func (h *History) Described(path, blob string, describe func() (string, bool)) string {
	if !plumbing.IsHash(blob) {
		v, _ := describe()
		return v
	}
	if h.described == nil {
		h.described = loadDescribeCache(h.st.common)
	}
	k := describeKey{path: path, blob: plumbing.NewHash(blob)}
	if v, ok := h.described.m[k]; ok {
		return v
	}
	v, keep := describe()
	if keep {
		h.described.m[k] = v
		h.described.dirty = true
	}
	return v
}
