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
// committed: one small text file per domain,
//
//	.pem-cache/trace-index/<domain>
//
// (.pem-cache holds a .gitignore of "*", so git never sees it), with one
// section per day directory of traces/<domain>: a line "day <YYYY-MM-DD>
// <trusted> <identity>" — the directory's identity when it was listed
// (device, inode, size, mtime, ctime: the identity the caches use,
// cache.go) — then "<trace id> <intent key>" for every trace of that day.
// A new process reads this one file, whatever the number of days or
// traces (it used to be one file per day directory). The index is only a
// cache, so it is safe to lose, and it keeps format 1 of the tree:
//   - a section whose directory identity matches (and was old enough to
//     trust, see racyWindow) is used as it is: one lstat per day;
//   - otherwise the day is listed again and only the traces the index does
//     not name are read, for their intent key (traces are immutable: an id
//     keeps its key), and the file is rewritten;
//   - a missing or unreadable index is rebuilt the same way; deleted traces
//     and days drop out at the next listing.
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
	cacheDir          = ".pem-cache"
	traceIndexDir     = cacheDir + "/trace-index"
	traceIndexHeader  = "pem trace index 2\n"
	traceIndexDayLine = "day "
	unknownKey        = "-" // the trace could not be read
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
// first. Warm, it costs one lstat per day directory; a new process reads
// the domain's one index file; a trace file is read only the first time
// this tree's index meets it.
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
	var file map[string]*dayKeys
	loaded := false
	load := func() map[string]*dayKeys {
		if !loaded {
			file, loaded = s.readTraceIndex(domain), true
		}
		return file
	}
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
		if !ok { // a damaged section: rebuild it from the directory
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
				if file[day] == nil {
					write = true
				}
			}
		}
		write = write || len(file) != n
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
func (s *Store) dayKeys(ctx context.Context, domain, day string, load func() map[string]*dayKeys) (*dayKeys, bool, error) {
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
	var old *dayKeys
	if known == nil {
		old = load()[day]
		if old != nil && old.trusted && old.id == fmt.Sprint(idOf(fi)) {
			s.dayIdx.put(dir, idOf(fi), old, start)
			return old, false, nil
		}
		if old != nil {
			known, _ = parseLines(old.lines)
		}
	}
	return s.rebuildDayKeys(ctx, domain, day, known, old)
}

// rebuildDayKeys lists the day directory and learns the keys of the traces
// known does not hold; true when that is worth a rewrite of the index file:
// keys learned by reading files, traces gone, or the directory became old
// enough to trust (old: the index file's section, if it was read).
func (s *Store) rebuildDayKeys(ctx context.Context, domain, day string, known map[string]string, old *dayKeys) (*dayKeys, bool, error) {
	dir := tracesDir + "/" + domain + "/" + day
	start := s.now()
	fi, err := os.Lstat(s.abs(dir))
	if err != nil || !fi.IsDir() {
		return &dayKeys{}, false, nil
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
	dk := &dayKeys{id: fmt.Sprint(idOf(fi)), trusted: trusted(fi, start), lines: formatLines(keys), known: keys}
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

// readTraceIndex reads a domain's index file: its sections by day; nil
// when it is missing or not one (a bad header or day line: it is rebuilt).
// The lines of a section are checked when they are used (lookup).
func (s *Store) readTraceIndex(domain string) map[string]*dayKeys {
	data, _, err := s.readFile(traceIndexDir+"/"+domain, 256<<20)
	if err != nil {
		return nil
	}
	rest, ok := bytes.CutPrefix(data, []byte(traceIndexHeader))
	if !ok {
		return nil
	}
	days := map[string]*dayKeys{}
	for len(rest) > 0 {
		line, after, _ := bytes.Cut(rest, []byte("\n"))
		head, ok := bytes.CutPrefix(line, []byte(traceIndexDayLine))
		if !ok {
			return nil
		}
		day, state, ok := bytes.Cut(head, []byte(" "))
		if !ok || checkDay(string(day)) != nil || len(state) < 3 || state[1] != ' ' || days[string(day)] != nil {
			return nil
		}
		end := bytes.Index(after, []byte("\n"+traceIndexDayLine))
		if end < 0 {
			end = len(after)
		} else {
			end++ // keep the section's last newline
		}
		days[string(day)] = &dayKeys{trusted: state[0] == '1', id: string(state[2:]), lines: after[:end:end]}
		rest = after[end:]
	}
	return days
}

// writeTraceIndex replaces a domain's index file with dks, the index of
// each of days. A day listed too recently to trust is written too, marked
// so: the next process lists it again, but knows the keys of the traces it
// names (an id keeps its key) and reads only the others.
func (s *Store) writeTraceIndex(domain string, days []string, dks []*dayKeys) {
	n := len(traceIndexHeader)
	for _, dk := range dks {
		if dk != nil {
			n += 40 + len(dk.id) + len(dk.lines)
		}
	}
	var b bytes.Buffer
	b.Grow(n)
	b.WriteString(traceIndexHeader)
	for i, dk := range dks {
		if dk == nil || dk.id == "" {
			continue
		}
		flag := " 0 "
		if dk.trusted {
			flag = " 1 "
		}
		b.WriteString(traceIndexDayLine + days[i] + flag + dk.id + "\n")
		b.Write(dk.lines)
	}
	s.writeCacheFile(traceIndexDir+"/"+domain, b.Bytes())
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
