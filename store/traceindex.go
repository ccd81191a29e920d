package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/pemdev/pem/engine"
)

var _ engine.TraceIndex = (*Store)(nil)

// The trace index says which intent each trace belongs to, so that a query,
// a memory or a save for one intent reads that intent's traces and no
// other's (a hot domain holds tens of thousands). It is local state, never
// committed: one small text file per domain and day,
//
//	.pem-cache/trace-keys/<domain>/<YYYY-MM-DD>
//
// (.pem-cache holds a .gitignore of "*", so git never sees it), listing
// "<trace id> <intent key>" for every trace of that day directory, and the
// directory's identity when it was listed (device, inode, size, mtime,
// ctime — the same identity the caches use, cache.go). The index is only a
// cache, so it is safe to lose, and it keeps format 1 of the tree:
//   - an index whose directory identity matches (and was old enough to
//     trust, see racyWindow) is used as it is: one lstat and one small read
//     per day;
//   - otherwise the day is listed again and only the traces the index does
//     not name are read, for their intent key (traces are immutable: an id
//     keeps its key), and the file is rewritten;
//   - a missing or unreadable index is rebuilt the same way; deleted traces
//     drop out at the next listing.
//
// Writers in several processes race only on whole files (a temporary file
// renamed into place), so a lost update costs a re-read, never a wrong
// answer. An intent key is learned from the trace's top-level
// "intent_key:" line when the file has exactly one (canonical YAML always
// does), else by decoding the trace; a trace that cannot be read is listed
// for every intent, so each query still reports it. The engine decodes
// every trace it is handed and checks its key, so a wrong line can only
// hide the trace that carries it.
const (
	cacheDir        = ".pem-cache"
	traceKeysDir    = cacheDir + "/trace-keys"
	traceKeysHeader = "pem trace keys 1\n"
	unknownKey      = "-" // the trace could not be read
)

// dayKeys is one day directory's index: the directory's identity and the
// "<id> <key>" lines, sorted by id. A lookup scans the lines for the key
// (a fresh process asks once); a day asked twice gets a map.
type dayKeys struct {
	id      string // the directory's identity (fmt of fileID)
	trusted bool   // id was old enough when listed to show any later change
	lines   []byte

	known map[string]string // id → key, when built in this process

	mu    sync.Mutex
	hits  int
	byKey map[string][]string
}

// lookup returns the ids of the given keys in d; false when d holds a
// line that is not an index line (the caller rebuilds it).
func (d *dayKeys) lookup(keys ...string) ([]string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.byKey == nil && d.hits > 0 {
		keys, ok := d.known, true
		if keys == nil {
			keys, ok = parseLines(d.lines)
		}
		if !ok {
			return nil, false
		}
		d.byKey = map[string][]string{}
		for id, k := range keys {
			d.byKey[k] = append(d.byKey[k], id)
		}
		for _, ids := range d.byKey {
			slices.Sort(ids)
		}
	}
	d.hits++
	var ids []string
	if d.byKey != nil {
		for _, k := range keys {
			ids = append(ids, d.byKey[k]...)
		}
		return ids, true
	}
	for _, key := range keys {
		var ok bool
		if ids, ok = scanLines(d.lines, key, ids); !ok {
			return nil, false
		}
	}
	return ids, true
}

// scanLines appends to ids the ids of the lines of key.
func scanLines(lines []byte, key string, ids []string) ([]string, bool) {
	pat := []byte(" " + key + "\n")
	for off := 0; ; {
		i := bytes.Index(lines[off:], pat)
		if i < 0 {
			break
		}
		at := off + i
		off = at + len(pat)
		start := at - 26 // a trace id is 26 characters
		if start < 0 || start > 0 && lines[start-1] != '\n' {
			continue // the key is the tail of a longer one
		}
		id := string(lines[start:at])
		if checkTraceID(id) != nil {
			return nil, false
		}
		ids = append(ids, id)
	}
	return ids, true
}

// parseLines reads "<id> <key>" lines; false at the first line that is not one.
func parseLines(lines []byte) (map[string]string, bool) {
	keys := make(map[string]string, bytes.Count(lines, []byte("\n")))
	for rest := lines; len(rest) > 0; {
		var line []byte
		line, rest, _ = bytes.Cut(rest, []byte("\n"))
		id, k, ok := bytes.Cut(line, []byte(" "))
		if !ok || len(id) != 26 || len(k) == 0 || bytes.IndexByte(k, ' ') >= 0 {
			return nil, false
		}
		keys[string(id)] = string(k)
	}
	return keys, true
}

// IntentTraceRefs lists the traces of domain whose intent key is key, and
// those whose key could not be read (the caller reports them), oldest
// first. Warm, it costs one lstat per day directory; it reads a trace
// file only the first time this tree's index meets it.
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
	var refs []engine.TraceRef
	for _, day := range days {
		dk, err := s.dayKeys(ctx, domain, day)
		if err != nil {
			return nil, err
		}
		if dk == nil {
			continue
		}
		ids, ok := dk.lookup(key, unknownKey)
		if !ok { // a damaged index file: rebuild it from the directory
			if dk, err = s.rebuildDayKeys(ctx, domain, day, nil, nil); err != nil {
				return nil, err
			}
			if ids, ok = dk.lookup(key, unknownKey); !ok {
				return nil, fmt.Errorf("indexing the traces of %s/%s: the rebuilt index does not read back", domain, day)
			}
		}
		for _, id := range ids {
			refs = append(refs, engine.TraceRef{Domain: domain, Day: day, ID: id})
		}
	}
	slices.SortFunc(refs, func(a, b engine.TraceRef) int { return strings.Compare(a.ID, b.ID) })
	return refs, nil
}

// dayKeys returns the index of traces/<domain>/<day>, brought up to date;
// nil when the directory is gone.
func (s *Store) dayKeys(ctx context.Context, domain, day string) (*dayKeys, error) {
	dir := tracesDir + "/" + domain + "/" + day
	start := s.now()
	fi, err := os.Lstat(s.abs(dir))
	if err != nil || !fi.IsDir() {
		return nil, nil // gone since the listing (or not a directory: the listing reports it)
	}
	if v, ok := s.dayIdx.get(dir, idOf(fi), start); ok {
		return v.(*dayKeys), nil
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
	var old *dayKeys
	if known == nil {
		old = s.readDayKeys(traceKeysDir + "/" + domain + "/" + day)
		if old != nil && old.trusted && old.id == fmt.Sprint(idOf(fi)) {
			s.dayIdx.put(dir, idOf(fi), old, start)
			return old, nil
		}
		if old != nil {
			known, _ = parseLines(old.lines)
		}
	}
	return s.rebuildDayKeys(ctx, domain, day, known, old)
}

// rebuildDayKeys lists the day directory, learns the keys of the traces
// known does not hold, and writes the index when it learned something by
// reading files or the directory became old enough to trust (old: the
// index file as read, if it was).
func (s *Store) rebuildDayKeys(ctx context.Context, domain, day string, known map[string]string, old *dayKeys) (*dayKeys, error) {
	dir := tracesDir + "/" + domain + "/" + day
	start := s.now()
	fi, err := os.Lstat(s.abs(dir))
	if err != nil || !fi.IsDir() {
		return &dayKeys{}, nil
	}
	ents, err := s.listDirIn(ctx, dir, false)
	if err != nil {
		return nil, err
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
		return nil, err
	}
	for i, id := range learn {
		keys[id] = found[i]
	}
	dk := &dayKeys{id: fmt.Sprint(idOf(fi)), trusted: trusted(fi, start), lines: formatLines(keys), known: keys}
	// Rewrite the file when that saves a later process work: keys learned
	// by reading traces, traces gone, or a listing it can now trust. Keys
	// of this process's own saves alone are not worth a write per save (a
	// later process learns them from one line of each file).
	gone := old != nil && kept < len(known)
	if len(learn) > 0 || gone || dk.trusted && (old == nil || !old.trusted || old.id != dk.id) {
		s.writeDayKeys(traceKeysDir+"/"+domain+"/"+day, dk) // best effort: it is a cache
	}
	s.idxMu.Lock()
	if s.dayLast == nil || len(s.dayLast) >= maxDirEntries {
		s.dayLast = map[string]*dayKeys{}
	}
	s.dayLast[dir] = dk
	s.idxMu.Unlock()
	if dk.trusted {
		s.dayIdx.put(dir, idOf(fi), dk, start)
	}
	return dk, nil
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

// readDayKeys reads an index file; nil when it is missing or not one.
// Its lines are checked when they are used (lookup).
func (s *Store) readDayKeys(rel string) *dayKeys {
	data, _, err := s.readFile(rel, 64<<20)
	if err != nil {
		return nil
	}
	rest, ok := bytes.CutPrefix(data, []byte(traceKeysHeader))
	if !ok {
		return nil
	}
	line, rest, _ := bytes.Cut(rest, []byte("\n"))
	head, ok := bytes.CutPrefix(line, []byte("dir "))
	if !ok || len(head) < 2 || head[1] != ' ' {
		return nil
	}
	return &dayKeys{trusted: head[0] == '1', id: string(head[2:]), lines: rest}
}

// formatLines writes the index lines of keys, sorted by id.
func formatLines(keys map[string]string) []byte {
	ids := make([]string, 0, len(keys))
	for id := range keys {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var b bytes.Buffer
	b.Grow(len(ids) * 64)
	for _, id := range ids {
		b.WriteString(id + " " + keys[id] + "\n")
	}
	return b.Bytes()
}

// writeDayKeys replaces an index file (temporary file renamed into place;
// no fsync: losing it costs a rebuild). Errors are ignored: a read-only
// tree still answers, it reads more.
func (s *Store) writeDayKeys(rel string, dk *dayKeys) {
	var b bytes.Buffer
	b.Grow(len(traceKeysHeader) + 80 + len(dk.lines))
	b.WriteString(traceKeysHeader)
	flag := "0"
	if dk.trusted {
		flag = "1"
	}
	b.WriteString("dir " + flag + " " + dk.id + "\n")
	b.Write(dk.lines)
	s.writeCacheFile(rel, b.Bytes())
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
