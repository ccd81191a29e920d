package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/pemdev/pem/engine"
)

var _ engine.TraceIndex = (*Store)(nil)

// The trace index says which intent each trace belongs to, so that a query,
// a memory or a save for one intent reads that intent's traces and no
// other's (a hot domain holds tens of thousands). It is local state, never
// committed: one file per domain,
//
//	.pem-cache/trace-index/<domain>
//
// (.pem-cache holds a .gitignore of "*", so git never sees it), laid out so
// that a query reads only the part its intent needs:
//
//	pem trace index 3 <head length> <body length> <head crc>
//	day <YYYY-MM-DD> <trusted> <identity>    one per day directory, sorted
//	key <intent key> <offset> <length> <crc> one per key, sorted
//	<body>
//
// The day lines hold each day directory's identity when it was listed
// (device, inode, size, mtime, ctime: the identity the caches use,
// cache.go) and whether it was old enough to trust (racyWindow). The body
// holds one block per key, at the offset and of the length its key line
// gives (the blocks in key order, end to end), of fixed-width lines
// "<day> <trace id>\n" sorted by day then id. The CRCs (CRC-32C) are of the
// head after its first line and of each block (its key's name and a
// newline, then its lines). A new process reads the head
// (a line per day and per key, whatever the number of traces) and, with one
// pread each, the blocks of the queried key and of unknownKey: a few KB
// where the whole file is MBs. The index is only a cache, so it is safe to
// lose, and it keeps format 1 of the tree:
//   - a day whose directory identity matches its day line (and was old
//     enough to trust) is used as it is: one lstat per day;
//   - otherwise the day is listed again and only the traces the index does
//     not name are read, for their intent key (traces are immutable: an id
//     keeps its key; this reads the whole body once, to learn the day's
//     lines), and the file is rewritten;
//   - a missing, older (format 2) or damaged file — a bad header, lengths
//     that do not add up to the file's size, a CRC that does not match, a
//     line out of order or naming a day the head does not list — is not
//     used: the days it would answer for are listed and their traces read
//     again, and the file is rewritten; deleted traces and days drop out at
//     the next listing.
//
// Writers in several processes race only on whole files (a temporary file
// renamed into place), so a lost update costs a re-read, never a wrong
// answer; a reader that meets a file replaced since it read the head (its
// identity changed) reads the new head and uses it for the days it holds
// unchanged. An intent key is learned from the trace's top-level
// "intent_key:" line when the file has exactly one (canonical YAML always
// does), else by decoding the trace; a trace that cannot be read is listed
// for every intent (under unknownKey), so each query still reports it. The
// engine decodes every trace it is handed and checks its key, so a wrong
// line can only hide the trace that carries it.
const (
	cacheDir        = ".pem-cache"
	traceIndexDir   = cacheDir + "/trace-index"
	traceIndexMagic = "pem trace index 3 "
	unknownKey      = "-" // the trace could not be read

	idxLineLen   = 10 + 1 + 26 + 1 // "<day> <trace id>\n"
	idxHeadChunk = 8 << 10         // the first read: the whole head of most domains
	maxIndexHead = 64 << 20
	maxIndexFile = 1 << 30
)

var idxCRC = crc32.MakeTable(crc32.Castagnoli)

// blockCRC is a block's CRC, its key's name included: a key table that
// gives one key another's block does not check.
func blockCRC(key string, data []byte) uint32 {
	return crc32.Update(crc32.Checksum([]byte(key+"\n"), idxCRC), idxCRC, data)
}

// dayState is a day line of the index file.
type dayState struct {
	trusted bool   // id was old enough when listed to show any later change
	id      string // the directory's identity (fmt of fileID)
}

// dayKeys is one day directory's index: the directory's identity and the
// intent keys of its traces — in full when this process listed the day,
// else in the index file (read a key at a time).
type dayKeys struct {
	id      string
	trusted bool
	day     string

	known map[string]string // id → key, when listed in this process

	mu    sync.Mutex
	file  *indexFile          // when known is nil
	byKey map[string][]string // from known, at the first lookup
}

// lookup returns the ids of the given keys in d, sorted by id per key;
// false when the index file cannot give them (damaged, or replaced by one
// that no longer holds this day as d knew it): the caller rebuilds d.
func (d *dayKeys) lookup(keys ...string) ([]string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var ids []string
	if d.file == nil {
		if d.byKey == nil {
			d.byKey = map[string][]string{}
			for id, k := range d.known {
				d.byKey[k] = append(d.byKey[k], id)
			}
			for _, ids := range d.byKey {
				slices.Sort(ids)
			}
		}
		for _, k := range keys {
			ids = append(ids, d.byKey[k]...)
		}
		return ids, true
	}
	st := dayState{d.trusted, d.id}
	for _, k := range keys {
		got, ok := d.file.ids(k, d.day)
		if !ok { // the file changed since (or is damaged): its current version
			nf := d.file.s.loadIndex(d.file.domain, keys...)
			if nf == nil || nf.days[d.day] != st {
				return nil, false
			}
			d.file = nf
			if got, ok = nf.ids(k, d.day); !ok {
				return nil, false
			}
		}
		ids = append(ids, got...)
	}
	return ids, true
}

// indexFile is what a process read of one version of a domain's index
// file: its head, and the blocks it needed.
type indexFile struct {
	s      *Store
	domain string
	fid    fileID // the version read
	days   map[string]dayState
	keys   []keyBlock // sorted by key
	body   int64      // where the body starts

	mu     sync.Mutex
	blocks map[string]map[string][]string // key → day → ids, the blocks read
	whole  []byte                         // the body, when it was read whole (release drops it)
}

// keyBlock is a key line: where its block lies in the body and its CRC.
type keyBlock struct {
	key    string
	off, n int64
	crc    uint32
}

// loadIndex reads the head of a domain's index file and the blocks of
// want; nil when the file is missing or not one (it is rebuilt).
func (s *Store) loadIndex(domain string, want ...string) *indexFile {
	fd, fi, err := s.openRegular(traceIndexDir + "/" + domain)
	if err != nil {
		return nil
	}
	defer fd.Close()
	f := parseIndexHead(fd, fi)
	if f == nil {
		return nil
	}
	f.s, f.domain = s, domain
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.readBlocks(fd, want...) {
		return nil
	}
	return f
}

// parseIndexHead reads and checks the head of the index file fd; nil when
// it is not a whole, undamaged index file of this format.
func parseIndexHead(fd *os.File, fi fs.FileInfo) *indexFile {
	size := fi.Size()
	if size > maxIndexFile {
		return nil
	}
	buf := make([]byte, min(size, idxHeadChunk))
	if _, err := fd.ReadAt(buf, 0); err != nil {
		return nil
	}
	first, _, ok := bytes.Cut(buf, []byte("\n"))
	if !ok {
		return nil
	}
	nums, ok := bytes.CutPrefix(first, []byte(traceIndexMagic))
	if !ok {
		return nil
	}
	fields := strings.Fields(string(nums))
	if len(fields) != 3 {
		return nil
	}
	headLen, err1 := strconv.ParseInt(fields[0], 10, 64)
	bodyLen, err2 := strconv.ParseInt(fields[1], 10, 64)
	crc, err3 := strconv.ParseUint(fields[2], 10, 32)
	if err1 != nil || err2 != nil || err3 != nil || headLen <= int64(len(first)) || headLen > maxIndexHead ||
		bodyLen < 0 || headLen+bodyLen != size {
		return nil
	}
	head := buf
	if headLen > int64(len(buf)) {
		head = make([]byte, headLen)
		copy(head, buf)
		if _, err := fd.ReadAt(head[len(buf):], int64(len(buf))); err != nil {
			return nil
		}
	}
	head = head[len(first)+1 : headLen]
	if crc32.Checksum(head, idxCRC) != uint32(crc) {
		return nil
	}
	f := &indexFile{fid: idOf(fi), days: map[string]dayState{}, body: headLen,
		blocks: map[string]map[string][]string{}}
	text := string(head) // one string: the days, keys and identities are its substrings
	lastDay, next := "", int64(0)
	for rest := text; len(rest) > 0; {
		line, after, ok := strings.Cut(rest, "\n")
		if !ok {
			return nil
		}
		rest = after
		if day, ok := strings.CutPrefix(line, "day "); ok && len(f.keys) == 0 {
			day, state, ok := strings.Cut(day, " ")
			if !ok || day <= lastDay || checkDay(day) != nil || len(state) < 3 || state[1] != ' ' ||
				state[0] != '0' && state[0] != '1' {
				return nil
			}
			f.days[day], lastDay = dayState{trusted: state[0] == '1', id: state[2:]}, day
			continue
		}
		kl, ok := strings.CutPrefix(line, "key ")
		if !ok {
			return nil
		}
		k, kl, ok1 := strings.Cut(kl, " ")
		o, kl, ok2 := strings.Cut(kl, " ")
		l, c, ok3 := strings.Cut(kl, " ")
		if !ok1 || !ok2 || !ok3 || !engine.ValidKey(k) && k != unknownKey ||
			len(f.keys) > 0 && k <= f.keys[len(f.keys)-1].key {
			return nil
		}
		off, err1 := strconv.ParseInt(o, 10, 64)
		n, err2 := strconv.ParseInt(l, 10, 64)
		bc, err3 := strconv.ParseUint(c, 10, 32)
		if err1 != nil || err2 != nil || err3 != nil || off != next || n <= 0 || n%idxLineLen != 0 {
			return nil
		}
		next = off + n
		f.keys = append(f.keys, keyBlock{key: k, off: off, n: n, crc: uint32(bc)})
	}
	if next != bodyLen {
		return nil
	}
	return f
}

// ids returns the ids of key in day (the block read on first use); false
// when it cannot be read from the version of the file f was read from.
func (f *indexFile) ids(key, day string) ([]string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.find(key); !ok {
		return nil, true // no trace has this key
	}
	if f.blocks[key] == nil && !f.readBlocks(nil, key) {
		return nil, false
	}
	return f.blocks[key][day], true
}

// readBlocks reads the blocks of keys not read yet, one pread each, from
// fd (nil: the file is opened again and must still be the version f was
// read from); false when one cannot be read or is damaged. f.mu is held.
func (f *indexFile) readBlocks(fd *os.File, keys ...string) bool {
	for _, k := range keys {
		i, ok := f.find(k)
		if !ok || f.blocks[k] != nil {
			continue
		}
		if fd == nil {
			var ok bool
			if fd, ok = f.reopen(); !ok {
				return false
			}
			defer fd.Close()
		}
		b := f.keys[i]
		data := make([]byte, b.n)
		if _, err := fd.ReadAt(data, f.body+b.off); err != nil {
			return false
		}
		m, ok := f.parseBlock(b.key, data, b.crc)
		if !ok {
			return false
		}
		f.blocks[k] = m
	}
	return true
}

// find returns the index of key's block in f.keys.
func (f *indexFile) find(key string) (int, bool) {
	return slices.BinarySearchFunc(f.keys, key, func(b keyBlock, k string) int { return strings.Compare(b.key, k) })
}

// reopen opens the index file again; false when it is no longer the
// version f was read from.
func (f *indexFile) reopen() (*os.File, bool) {
	fd, fi, err := f.s.openRegular(traceIndexDir + "/" + f.domain)
	if err != nil {
		return nil, false
	}
	if idOf(fi) != f.fid {
		fd.Close()
		return nil, false
	}
	return fd, true
}

// parseBlock checks a block (its CRC, its lines in order, each of a day
// the head lists) and returns its ids by day.
func (f *indexFile) parseBlock(key string, data []byte, crc uint32) (map[string][]string, bool) {
	if blockCRC(key, data) != crc {
		return nil, false
	}
	m := map[string][]string{}
	text := string(data) // one string: the ids are its substrings
	ids := make([]string, 0, len(data)/idxLineLen)
	run, day := 0, ""
	for off := 0; off < len(text); off += idxLineLen {
		line := text[off : off+idxLineLen]
		if line[10] != ' ' || line[idxLineLen-1] != '\n' || off > 0 && text[off-idxLineLen:off] >= line {
			return nil, false
		}
		if line[:10] != day {
			if day != "" {
				m[day] = ids[run:len(ids):len(ids)]
			}
			run, day = len(ids), line[:10]
			if _, ok := f.days[day]; !ok {
				return nil, false
			}
		}
		id := line[11 : idxLineLen-1]
		if !engine.ValidTraceID(id) {
			return nil, false
		}
		ids = append(ids, id)
	}
	if day != "" {
		m[day] = ids[run:len(ids):len(ids)]
	}
	return m, true
}

// bodyBytes returns the whole body, each block's CRC and line layout
// checked (read once, until release); nil when it cannot be read from the
// version of the file f was read from. Its ids are not handed out as
// traces (dayKnown's are only looked up by listed names; the writer copies
// lines, checked again by the next reader's parseBlock).
func (f *indexFile) bodyBytes() []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.whole != nil {
		return f.whole
	}
	fd, ok := f.reopen()
	if !ok {
		return nil
	}
	defer fd.Close()
	data := make([]byte, f.fid.size-f.body)
	if _, err := fd.ReadAt(data, f.body); err != nil {
		return nil
	}
	for _, b := range f.keys {
		blk := data[b.off : b.off+b.n]
		if blockCRC(b.key, blk) != b.crc {
			return nil
		}
		for off := 0; off < len(blk); off += idxLineLen {
			if blk[off+10] != ' ' || blk[off+idxLineLen-1] != '\n' {
				return nil
			}
		}
	}
	f.whole = data
	return data
}

// release drops the body read whole (the blocks' ids stay).
func (f *indexFile) release() {
	f.mu.Lock()
	f.whole = nil
	f.mu.Unlock()
}

// dayKnown returns the keys of a day's traces as the file holds them
// (reading the body whole: a binary search for the day's run in each
// block); nil when it cannot be read.
func (f *indexFile) dayKnown(day string) map[string]string {
	whole := f.bodyBytes()
	if whole == nil {
		return nil
	}
	known := map[string]string{}
	for _, b := range f.keys {
		blk := whole[b.off : b.off+b.n]
		dayOf := func(i int) string { return string(blk[i*idxLineLen : i*idxLineLen+10]) }
		n := len(blk) / idxLineLen
		for i := sort.Search(n, func(i int) bool { return dayOf(i) >= day }); i < n && dayOf(i) == day; i++ {
			known[string(blk[i*idxLineLen+11:(i+1)*idxLineLen-1])] = b.key
		}
	}
	return known
}

// openRegular opens a regular file inside the tree, refusing links on the
// way (readFile's checks), with its FileInfo.
func (s *Store) openRegular(rel string) (*os.File, fs.FileInfo, error) {
	f, err := s.openChecked(rel, false)
	if errors.Is(err, errNoOpenat2) {
		if err := s.noSymlinks(rel); err != nil {
			return nil, nil, err
		}
		lfi, err := s.root.Lstat(rel)
		if err != nil {
			return nil, nil, err
		}
		if f, err = s.root.Open(rel); err != nil {
			return nil, nil, err
		}
		if fi, err := f.Stat(); err != nil || !os.SameFile(fi, lfi) {
			f.Close()
			return nil, nil, fmt.Errorf("%w: %s changed while it was opened (a link swapped in?)", engine.ErrUnsafePath, rel)
		}
	} else if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("%w: %s is not a regular file", engine.ErrUnsafePath, rel)
	}
	return f, fi, nil
}

// IntentTraceRefs lists the traces of domain whose intent key is key, and
// those whose key could not be read (the caller reports them), oldest
// first. Warm, it costs one lstat per day directory; a new process reads
// the head of the domain's index file and the blocks of two keys; a trace
// file is read only the first time this tree's index meets it.
func (s *Store) IntentTraceRefs(ctx context.Context, domain, key string) ([]engine.TraceRef, error) {
	if err := checkDomain(domain); err != nil {
		return nil, err
	}
	if err := checkKey(key); err != nil {
		return nil, err
	}
	days, err := s.subdirsIn(ctx, tracesDir+"/"+domain, checkDay, true)
	if err != nil {
		return nil, err
	}
	// The index file, read on the first day this process knows nothing of.
	var file *indexFile
	loaded := false
	load := func() *indexFile {
		if !loaded {
			file, loaded = s.loadIndex(domain, key, unknownKey), true
		}
		return file
	}
	defer func() {
		if file != nil {
			file.release()
		}
	}()
	dks := make([]*dayKeys, len(days))
	write := false // the file is worth rewriting
	for i, day := range days {
		dk, worth, err := s.dayKeys(ctx, domain, day, load)
		if err != nil {
			return nil, err
		}
		dks[i], write = dk, write || worth
	}
	var refs []engine.TraceRef
	for i, day := range days {
		dk := dks[i]
		if dk == nil {
			continue
		}
		ids, ok := dk.lookup(key, unknownKey)
		if !ok { // a damaged or vanished index: rebuild the day from the directory
			if dk, _, err = s.rebuildDayKeys(ctx, domain, day, nil, nil); err != nil {
				return nil, err
			}
			if ids, ok = dk.lookup(key, unknownKey); !ok {
				return nil, fmt.Errorf("indexing the traces of %s/%s: the rebuilt index does not read back", domain, day)
			}
			dks[i], write = dk, true
		}
		for _, id := range ids {
			refs = append(refs, engine.TraceRef{Domain: domain, Day: day, ID: id})
		}
	}
	if loaded && !write { // days gone, or days the file does not hold yet
		n := 0
		for i, day := range days {
			if dk := dks[i]; dk != nil && dk.id != "" {
				n++
				if file == nil {
					write = true
				} else if _, ok := file.days[day]; !ok {
					write = true
				}
			}
		}
		write = write || file != nil && len(file.days) != n
	}
	if write {
		s.writeTraceIndex(domain, days, dks) // best effort: it is a cache
	}
	slices.SortFunc(refs, func(a, b engine.TraceRef) int { return strings.Compare(a.ID, b.ID) })
	return refs, nil
}

// dayKeys returns the index of traces/<domain>/<day>, brought up to date
// (nil when the directory is gone), and whether the domain's index file is
// worth rewriting for it. load reads the index file (nil: none).
func (s *Store) dayKeys(ctx context.Context, domain, day string, load func() *indexFile) (*dayKeys, bool, error) {
	dir := tracesDir + "/" + domain + "/" + day
	s.watched(dir, true) // before its identity is confirmed (watch.go)
	start := s.now()
	fi, err := os.Lstat(s.abs(dir))
	if err != nil || !fi.IsDir() {
		return nil, false, nil // gone since the listing (or not a directory: the listing reports it)
	}
	if v, ok := s.dayIdx.get(dir, idOf(fi), start); ok {
		return v.(*dayKeys), false, nil
	}
	// What this process last knew of the day (a directory that changed
	// too recently to trust is listed again, but its keys are known), else
	// the index file.
	var known map[string]string
	s.idxMu.Lock()
	if dk := s.dayLast[dir]; dk != nil {
		known = dk.known
	}
	s.idxMu.Unlock()
	var old *dayState
	if known == nil {
		if f := load(); f != nil {
			if st, ok := f.days[day]; ok {
				if st.trusted && st.id == fmt.Sprint(idOf(fi)) {
					dk := &dayKeys{id: st.id, trusted: true, day: day, file: f}
					s.dayIdx.put(dir, idOf(fi), dk, start)
					return dk, false, nil
				}
				old, known = &st, f.dayKnown(day)
			}
		}
	}
	return s.rebuildDayKeys(ctx, domain, day, known, old)
}

// rebuildDayKeys lists the day directory and learns the keys of the traces
// known does not hold; true when that is worth a rewrite of the index file:
// keys learned by reading files, traces gone, or the directory became old
// enough to trust (old: the index file's day line, if it was read).
func (s *Store) rebuildDayKeys(ctx context.Context, domain, day string, known map[string]string, old *dayState) (*dayKeys, bool, error) {
	dir := tracesDir + "/" + domain + "/" + day
	start := s.now()
	fi, err := os.Lstat(s.abs(dir))
	if err != nil || !fi.IsDir() {
		return &dayKeys{day: day}, false, nil
	}
	ents, err := s.listDirIn(ctx, dir, false)
	if err != nil {
		return nil, false, err
	}
	keys := make(map[string]string, len(ents))
	kept := 0 // keys taken from known
	var learn []string
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.name, yamlExt)
		if !ok || !e.typ.IsRegular() || checkTraceID(id) != nil {
			continue
		}
		if k, ok := known[id]; ok && k != unknownKey && engine.ValidKey(k) {
			keys[id] = k
			kept++
			continue
		}
		if k, ok := s.savedKey(id); ok {
			keys[id] = k
			continue
		}
		learn = append(learn, id)
	}
	found := make([]string, len(learn))
	_ = forEach(len(learn), runtime.GOMAXPROCS(0), func(i int) error {
		found[i] = s.traceKeyOf(ctx, engine.TraceRef{Domain: domain, Day: day, ID: learn[i]})
		return nil
	})
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	for i, id := range learn {
		keys[id] = found[i]
	}
	dk := &dayKeys{id: fmt.Sprint(idOf(fi)), trusted: trusted(fi, start), day: day, known: keys}
	// Keys of this process's own saves alone are not worth a write per
	// save (a later process learns them from one line of each file).
	gone := old != nil && kept < len(known)
	worth := len(learn) > 0 || gone || dk.trusted && (old == nil || !old.trusted || old.id != dk.id)
	s.idxMu.Lock()
	if s.dayLast == nil || len(s.dayLast) >= maxDirEntries {
		s.dayLast = map[string]*dayKeys{}
	}
	s.dayLast[dir] = dk
	s.idxMu.Unlock()
	if dk.trusted {
		s.dayIdx.put(dir, idOf(fi), dk, start)
	}
	return dk, worth, nil
}

// noteSaved remembers the intent key of a trace this store just wrote, so
// the index learns it without reading the file back.
func (s *Store) noteSaved(id, key string) {
	if !engine.ValidKey(key) {
		return
	}
	s.idxMu.Lock()
	defer s.idxMu.Unlock()
	if s.saved == nil || len(s.saved) >= maxTraceEntries {
		s.saved = map[string]string{}
	}
	s.saved[id] = key
}

func (s *Store) savedKey(id string) (string, bool) {
	s.idxMu.Lock()
	defer s.idxMu.Unlock()
	k, ok := s.saved[id]
	return k, ok
}

// traceKeyOf learns one trace's intent key: from its single top-level
// "intent_key:" line, else by decoding it; unknownKey when it cannot be read.
func (s *Store) traceKeyOf(ctx context.Context, ref engine.TraceRef) string {
	data, _, err := s.readFile(TracePath(ref), MaxTraceBytes)
	if err != nil {
		return unknownKey
	}
	if k, ok := intentKeyLine(data); ok {
		return k
	}
	t, err := s.Trace(ctx, ref)
	if err != nil || !engine.ValidKey(t.IntentKey) {
		return unknownKey
	}
	return t.IntentKey
}

// intentKeyLine finds the value of the one line that starts with
// "intent_key: " in a YAML document; false when there is none or more than
// one, or the value is not a plain valid key.
func intentKeyLine(data []byte) (string, bool) {
	const field = "intent_key: "
	var val []byte
	n := 0
	for off := 0; ; {
		i := bytes.Index(data[off:], []byte(field))
		if i < 0 {
			break
		}
		at := off + i
		off = at + len(field)
		if at > 0 && data[at-1] != '\n' {
			continue
		}
		n++
		val = data[off:]
		if j := bytes.IndexByte(val, '\n'); j >= 0 {
			val = val[:j]
		}
	}
	if n != 1 || !engine.ValidKey(string(val)) {
		return "", false
	}
	return string(val), true
}

// writeTraceIndex replaces a domain's index file with dks, the index of
// each of days. A day listed too recently to trust is written too, marked
// so: the next process lists it again, but knows the keys of the traces it
// names (an id keeps its key) and reads only the others. The lines of a day
// taken from an index file as it was are copied from that file's body;
// when that body cannot be read again, nothing is written.
func (s *Store) writeTraceIndex(domain string, days []string, dks []*dayKeys) {
	var head bytes.Buffer
	perKey := map[string][][]byte{}
	keep := map[*indexFile]map[string]bool{}
	for i, dk := range dks {
		if dk == nil || dk.id == "" {
			continue
		}
		flag := " 0 "
		if dk.trusted {
			flag = " 1 "
		}
		head.WriteString("day " + days[i] + flag + dk.id + "\n")
		dk.mu.Lock()
		f, known := dk.file, dk.known
		dk.mu.Unlock()
		if f != nil {
			if keep[f] == nil {
				keep[f] = map[string]bool{}
			}
			keep[f][days[i]] = true
			continue
		}
		arena := make([]byte, 0, len(known)*idxLineLen)
		for id, k := range known {
			at := len(arena)
			arena = append(append(append(append(arena, days[i]...), ' '), id...), '\n')
			perKey[k] = append(perKey[k], arena[at:len(arena):len(arena)])
		}
	}
	// The lines kept from index files, as runs of consecutive lines of
	// their blocks (sorted by day, then id; a day's run is found by its
	// first ten bytes, one map lookup a run).
	kept := map[string][][]byte{}
	defer func() { // the bodies read whole are not kept past the write
		for f := range keep {
			f.release()
		}
	}()
	for f, ds := range keep {
		whole := f.bodyBytes()
		if whole == nil {
			return
		}
		for _, b := range f.keys {
			blk := whole[b.off : b.off+b.n]
			start, in, day := 0, false, ""
			for off := 0; off <= len(blk); off += idxLineLen {
				if off < len(blk) && string(blk[off:off+10]) == day {
					continue
				}
				if in && off > start {
					kept[b.key] = append(kept[b.key], blk[start:off:off])
				}
				if off < len(blk) {
					day = string(blk[off : off+10])
					start, in = off, ds[day]
				}
			}
		}
	}
	if len(keep) > 1 { // days from several versions of the file: their runs in order
		for _, runs := range kept {
			slices.SortFunc(runs, bytes.Compare)
		}
	}
	keys := make([]string, 0, len(perKey)+len(kept))
	n := 0
	for k, lines := range perKey {
		keys = append(keys, k)
		n += len(lines) * idxLineLen
		slices.SortFunc(lines, bytes.Compare)
	}
	for k, runs := range kept {
		if perKey[k] == nil {
			keys = append(keys, k)
		}
		for _, r := range runs {
			n += len(r)
		}
	}
	slices.Sort(keys)
	body := make([]byte, 0, n)
	for _, k := range keys {
		at := len(body)
		body = mergeLines(body, kept[k], perKey[k])
		blk := body[at:]
		fmt.Fprintf(&head, "key %s %d %d %d\n", k, at, len(blk), blockCRC(k, blk))
	}
	crc := crc32.Checksum(head.Bytes(), idxCRC)
	first := ""
	for hl := head.Len(); ; { // the first line holds its own length
		first = fmt.Sprintf("%s%d %d %d\n", traceIndexMagic, hl, len(body), crc)
		if len(first)+head.Len() == hl {
			break
		}
		hl = len(first) + head.Len()
	}
	out := make([]byte, 0, len(first)+head.Len()+len(body))
	out = append(append(append(out, first...), head.Bytes()...), body...)
	s.writeCacheFile(traceIndexDir+"/"+domain, out)
}

// mergeLines appends to body the lines of runs (each a run of sorted
// index lines, the runs in order) and of lines (sorted), merged in order.
func mergeLines(body []byte, runs, lines [][]byte) []byte {
	for _, r := range runs {
		for len(r) > 0 {
			if len(lines) == 0 {
				body = append(body, r...)
				break
			}
			// The lines of r before the next new line go in at once.
			j := sort.Search(len(r)/idxLineLen, func(i int) bool {
				return bytes.Compare(r[i*idxLineLen:(i+1)*idxLineLen], lines[0]) >= 0
			})
			body, r = append(body, r[:j*idxLineLen]...), r[j*idxLineLen:]
			if len(r) > 0 {
				body, lines = append(body, lines[0]...), lines[1:]
			}
		}
	}
	for _, l := range lines {
		body = append(body, l...)
	}
	return body
}

// cacheDirs creates dir under .pem-cache (and .pem-cache's .gitignore),
// refusing symlinks on the way: the cache never writes outside its folder.
func (s *Store) cacheDirs(dir string) error {
	if err := s.noSymlinks(cacheDir); errors.Is(err, fs.ErrNotExist) {
		if err := s.root.Mkdir(cacheDir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		if f, err := s.root.OpenFile(cacheDir+"/.gitignore", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644); err == nil {
			_, _ = f.WriteString("# pem's local caches: never committed (store/traceindex.go)\n*\n")
			f.Close()
		}
	} else if err != nil {
		return err
	}
	for i := len(cacheDir) + 1; i <= len(dir); i++ {
		if i < len(dir) && dir[i] != '/' {
			continue
		}
		p := dir[:i]
		fi, err := s.root.Lstat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := s.root.Mkdir(p, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
		case err != nil:
			return err
		case !fi.IsDir():
			return unsafeSymlink(p)
		}
	}
	return nil
}
