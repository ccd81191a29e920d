package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/pemdev/pem/engine"
)

var _ engine.Store = (*Store)(nil)

// Options tune Open. A nil *Options or zero fields mean the defaults.
type Options struct {
	// Now is the clock, used to tell whether a file changed too recently to be
	// cached (see racyWindow) and for lock waits. Default time.Now.
	Now func() time.Time
	// Logger receives warnings about bad files. Default: discard.
	Logger *slog.Logger
	// Revalidate, when > 0, serves a cached record or listing confirmed less
	// than Revalidate ago without a new stat. Changes made through this Store
	// are always seen at once; changes by other processes or editors are seen
	// within Revalidate. 0 (the default) stats on every read: exact, and
	// about one lstat per file a query touches. Long-running servers (pem
	// serve, pem mcp) may set ~1s; see docs/performance.md.
	Revalidate time.Duration
	// NoWatch turns the change watch off (watch.go): the engine then
	// computes every query anew instead of serving a kept answer while
	// nothing it read changed. The watch is off anyway where inotify could
	// miss a change (network file systems) and with Revalidate.
	NoWatch bool
}

// Store is the knowledge tree on disk. It is safe for concurrent use; writers
// in several processes coordinate with Lock.
//
// Records returned by Trace, Facts, Experience and Config are the caller's own
// copies: mutating them never changes what the store returns next.
type Store struct {
	dir  string // absolute
	root *os.Root
	now  func() time.Time
	log  *slog.Logger
	// revalidate: see Options.Revalidate.
	revalidate time.Duration

	records   *lru // facts, experience, pem.yaml
	traces    *lru
	dirs      *lru
	dayIdx    *lru // trace index of each day directory (traceindex.go)
	summaries *lru // experience summaries (summary.go)

	idxMu   sync.Mutex
	dayLast map[string]*dayKeys // the latest index of each day, trusted or not
	saved   map[string]string   // trace id → intent key of traces this store wrote

	closeOnce sync.Once

	// The change watch (watch.go), started by the first Generation.
	noWatch   bool
	watchOnce sync.Once
	watch     atomic.Pointer[watch]

	// dirFile is the tree's directory, opened on first use by openNoLinks.
	dirOnce sync.Once
	dirFile *os.File
	dirErr  error

	// links: symlinks that listings passed over (links are never followed:
	// they could leave the tree); reported by SkippedLinks, never silent.
	linksMu sync.Mutex
	links   map[string]bool
}

// noteLink records a symlink a listing passed over.
func (s *Store) noteLink(rel string) {
	s.linksMu.Lock()
	defer s.linksMu.Unlock()
	if s.links == nil {
		s.links = map[string]bool{}
	}
	if len(s.links) < 10000 {
		s.links[rel] = true
	}
}

// SkippedLinks returns, sorted, the symbolic links (folders or files) that
// listings of the tree met and did not follow since the store was opened,
// each as a sentence saying what to do. Consolidation reports them; pem
// check reports every link as an unsafe path.
func (s *Store) SkippedLinks() []string {
	s.linksMu.Lock()
	defer s.linksMu.Unlock()
	out := make([]string, 0, len(s.links))
	for rel := range s.links {
		out = append(out, rel+" is a symbolic link: pem does not follow links inside the tree (they could lead out of it), so what it points to was not read; replace it with the real folder or file")
	}
	slices.Sort(out)
	return out
}

// Open opens the tree at dir. Returns engine.ErrNoTree (with the hint to run
// pem init) when dir holds no pem.yaml. Close releases it.
func Open(dir string, opts *Options) (*Store, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("opening knowledge tree %s: %w", dir, err)
	}
	if fi, err := os.Stat(filepath.Join(abs, configFile)); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s has no %s: run \"pem init %s\" to create one", engine.ErrNoTree, dir, configFile, dir)
	}
	root, err := os.OpenRoot(abs)
	if err != nil {
		return nil, fmt.Errorf("opening knowledge tree %s: %w", dir, err)
	}
	s := &Store{dir: abs, root: root, now: time.Now, log: slog.New(slog.DiscardHandler),
		records: newLRU(maxRecordEntries), traces: newLRU(maxTraceEntries), dirs: newLRU(maxDirEntries),
		dayIdx: newLRU(maxDirEntries), summaries: newLRU(maxRecordEntries)}
	if opts != nil {
		if opts.Now != nil {
			s.now = opts.Now
		}
		if opts.Logger != nil {
			s.log = opts.Logger
		}
		s.revalidate = max(opts.Revalidate, 0)
		s.noWatch = opts.NoWatch
	}
	return s, nil
}

// Root returns the tree's absolute directory.
func (s *Store) Root() string { return s.dir }

// Close releases the tree's directory handle. The Store is unusable after.
func (s *Store) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.closeWatch()
		err = s.root.Close()
		s.dirOnce.Do(func() { s.dirErr = os.ErrClosed })
		if s.dirFile != nil {
			s.dirFile.Close()
		}
	})
	return err
}

func (s *Store) abs(rel string) string { return filepath.Join(s.dir, filepath.FromSlash(rel)) }

// corrupt wraps a decode error with the path and what to do.
func corrupt(rel string, err error) error {
	if !errors.Is(err, engine.ErrCorrupt) {
		err = fmt.Errorf("%w: %v", engine.ErrCorrupt, err)
	}
	return fmt.Errorf("%s: %w (fix or delete the file; pem check lists all bad files)", rel, err)
}

// load returns the decoded record at rel from the cache when the file is
// unchanged, else reads, decodes and caches it. Decode errors are cached too,
// so a bad file costs one decode until it changes. The value returned is the
// cached one: callers copy it before handing it out.
func (s *Store) load(ctx context.Context, c *lru, rel, kind string, immutable bool, decode func([]byte) (any, error)) (any, error) {
	return s.loadFill(ctx, c, rel, kind, immutable, false, decode)
}

// loadFill is load; with fill, a YAML decode of a kind the decoded cache
// keeps also writes it (decoded.go). Experience fills only on the query
// path: a consolidation or a deep-learn reads every entry once and then
// rewrites many of them, so its cache files would cost writes and be stale
// at once. Facts and pem.yaml fill on every read (Facts, Config).
func (s *Store) loadFill(ctx context.Context, c *lru, rel, kind string, immutable, fill bool, decode func([]byte) (any, error)) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.watched(rel, false) // before the file is confirmed or read (watch.go)
	if s.revalidate > 0 {
		if v, ok := c.fresh(rel, s.now(), s.revalidate); ok {
			if err, isErr := v.(error); isErr {
				return nil, err
			}
			return v, nil
		}
	}
	// Fast path: one lstat. A hit returns only what was decoded from this very
	// file (same device and inode), so the unconfined lstat reads nothing new.
	fi, err := os.Lstat(s.abs(rel))
	if err != nil {
		fi = nil
	}
	if fi != nil && fi.Mode().IsRegular() {
		if v, ok := c.get(rel, idOf(fi), s.now()); ok {
			if err, isErr := v.(error); isErr {
				return nil, err
			}
			return v, nil
		}
	}
	start := s.now()
	// A new process: the decoded cache of a file old enough to trust
	// (decoded.go) saves its YAML decode.
	if fi != nil && fi.Mode().IsRegular() && decodable[kind] != nil && trusted(fi, start) {
		if v, ok := s.readDecoded(rel, kind, idOf(fi)); ok {
			if checkDecoded(rel, kind, v) == nil {
				c.put(rel, idOf(fi), v, start)
				return v, nil
			}
		}
	}
	data, fi, err := s.readFile(rel, int64(MaxBytes(kind)))
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		return nil, fmt.Errorf("%s: %w", rel, engine.ErrNotFound)
	case errors.Is(err, errTooBig):
		err = corrupt(rel, err)
		s.log.Warn("bad file in the knowledge tree", "path", rel, "err", err)
		return nil, err
	case err != nil:
		if errors.Is(err, engine.ErrUnsafePath) {
			return nil, err
		}
		return nil, fmt.Errorf("reading %s: %w", rel, err)
	}
	v, err := decode(data)
	if err != nil {
		err = corrupt(rel, err)
		s.log.Warn("bad file in the knowledge tree", "path", rel, "err", err)
		if immutable || trusted(fi, start) {
			c.put(rel, idOf(fi), err, start)
		}
		return nil, err
	}
	if immutable || trusted(fi, start) {
		c.put(rel, idOf(fi), v, start)
		if fill && decodable[kind] != nil {
			s.writeDecoded(rel, kind, idOf(fi), v)
		}
	}
	return v, nil
}

// checkFormat accepts formats this code can read.
func checkFormat(f int) error {
	switch {
	case f == 0:
		return fmt.Errorf("%w: no format field", engine.ErrCorrupt)
	case f > engine.Format:
		return fmt.Errorf("%w: format %d was written by a newer pem (this one reads format %d): upgrade pem", engine.ErrCorrupt, f, engine.Format)
	case f < 0:
		return fmt.Errorf("%w: format %d", engine.ErrCorrupt, f)
	}
	return nil
}

// Config reads pem.yaml; fields it leaves out keep engine.DefaultConfig's
// values. Its reads fill the decoded cache (configcodec.go).
func (s *Store) Config(ctx context.Context) (engine.Config, error) {
	v, err := s.loadFill(ctx, s.records, configFile, KindConfig, false, true, decodeConfig)
	if errors.Is(err, engine.ErrNotFound) {
		return engine.Config{}, fmt.Errorf("%w: %s has no %s: run \"pem init %s\" to create one", engine.ErrNoTree, s.dir, configFile, s.dir)
	}
	if err != nil {
		return engine.Config{}, err
	}
	return v.(engine.Config), nil
}

func decodeConfig(data []byte) (any, error) {
	cfg := engine.DefaultConfig()
	if err := Unmarshal(data, &cfg, KindConfig); err != nil {
		return nil, err
	}
	return checkConfig(cfg)
}

// checkConfig checks a decoded pem.yaml (decodeConfig; the decoded cache's
// value again).
func checkConfig(cfg engine.Config) (any, error) {
	if err := checkFormat(cfg.Format); err != nil {
		return nil, err
	}
	if err := cfg.Policy.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", engine.ErrCorrupt, err)
	}
	if err := cfg.Approval.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", engine.ErrCorrupt, err)
	}
	return cfg, nil
}

// PutTrace writes a new trace at traces/<domain>/<day>/<id>.yaml (day: UTC of
// StartedAt). The file is linked into place, so an existing id is never
// overwritten (engine.ErrExists). Ids are unique per domain and day by the
// file system; a ULID makes a collision across days practically impossible.
func (s *Store) PutTrace(ctx context.Context, t *engine.Trace) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if t == nil {
		return "", errors.New("PutTrace: nil trace")
	}
	ref := RefOf(t)
	if err := checkRef(ref); err != nil {
		return "", fmt.Errorf("saving trace: %w", err)
	}
	if t.Format < 1 || t.Format > engine.Format {
		return "", fmt.Errorf("saving trace %s: format %d: set it to %d", t.ID, t.Format, engine.Format)
	}
	data, err := Marshal(t)
	if err != nil {
		return "", fmt.Errorf("saving trace %s: %w", t.ID, err)
	}
	rel := TracePath(ref)
	if len(data) > MaxTraceBytes {
		return "", fmt.Errorf("%w: trace %s is %d bytes encoded, over the cap of %d: record fewer or shorter steps", engine.ErrTooLarge, t.ID, len(data), MaxTraceBytes)
	}
	// The index learns t's key before t is linked into place: a listing
	// that runs meanwhile (the engine answers for the entry while the
	// fsyncs run) then does not read t back. A save that fails leaves a
	// key for an id no listing will show.
	s.noteSaved(t.ID, t.IntentKey)
	err = s.createFile(rel, data)
	s.forgetDirs(rel)
	if errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("%s: %w: traces are immutable; save the run with a new id", rel, engine.ErrExists)
	}
	if err != nil {
		return "", fmt.Errorf("saving trace %s: %w", rel, err)
	}
	return rel, nil
}

// forgetDirs drops the cached listings of rel's parents.
func (s *Store) forgetDirs(rel string) {
	for d := path.Dir(rel); d != "." && d != "/"; d = path.Dir(d) {
		s.dirs.del(d)
	}
}

// Trace reads one trace. Returns engine.ErrNotFound, or engine.ErrCorrupt
// naming the path (also when the file's id, domain or day disagree with its place).
func (s *Store) Trace(ctx context.Context, ref engine.TraceRef) (*engine.Trace, error) {
	if err := checkRef(ref); err != nil {
		return nil, err
	}
	rel := TracePath(ref)
	v, err := s.load(ctx, s.traces, rel, KindTrace, true, traceDecoder(ref))
	if err != nil {
		return nil, err
	}
	return v.(*engine.Trace).Clone(), nil
}

// DeleteTrace removes a trace, and its day and domain directories when they
// become empty. A missing trace is not an error.
func (s *Store) DeleteTrace(ctx context.Context, ref engine.TraceRef) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkRef(ref); err != nil {
		return err
	}
	rel := TracePath(ref)
	defer s.traces.del(rel)
	defer s.forgetDirs(rel)
	if err := s.noSymlinks(path.Dir(rel)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("deleting trace %s: %w", rel, err)
	}
	if err := s.root.Remove(rel); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("deleting trace %s: %w", rel, err)
	}
	// Removing a directory that is not empty fails: that is the check.
	day := path.Dir(rel)
	if s.root.Remove(day) == nil {
		_ = s.root.Remove(path.Dir(day))
	}
	return nil
}

// TraceRefs lists the traces of domain ("" for every domain), oldest first
// (by id, which is time-sortable). It reads directory names only; names that
// are not a valid domain, day or trace id are skipped (Check reports them).
func (s *Store) TraceRefs(ctx context.Context, domain string) ([]engine.TraceRef, error) {
	var domains []string
	if domain == "" {
		ds, err := s.subdirs(ctx, tracesDir, checkDomain)
		if err != nil {
			return nil, err
		}
		domains = ds
	} else {
		if err := checkDomain(domain); err != nil {
			return nil, err
		}
		domains = []string{domain}
	}
	var refs []engine.TraceRef
	for _, d := range domains {
		// The domain and day directories come from listings of their
		// parents (directories, not links), so only each one's own name
		// needs the symlink check.
		days, err := s.subdirsIn(ctx, tracesDir+"/"+d, checkDay, domain != "")
		if err != nil {
			return nil, err
		}
		for _, day := range days {
			if refs, err = s.dayRefs(ctx, d, day, false, refs); err != nil {
				return nil, err
			}
		}
	}
	sortTraceRefs(refs)
	return refs, nil
}

// dayRefs appends the traces of traces/<d>/<day> to refs (checkParents as
// for listDirIn).
func (s *Store) dayRefs(ctx context.Context, d, day string, checkParents bool, refs []engine.TraceRef) ([]engine.TraceRef, error) {
	_, err := s.traceIDsIn(ctx, tracesDir+"/"+d+"/"+day, checkParents, func(id string) {
		refs = append(refs, engine.TraceRef{Domain: d, Day: day, ID: id})
	})
	if err != nil {
		return nil, err
	}
	return refs, nil
}

// traceIDsIn calls add with the id of each trace file in dir (a day
// directory), noting the links it finds (checkParents as for listDirIn). It
// reports whether dir holds nothing else (no link, no foreign name): only
// such a listing may be remembered (TraceRefsListing).
func (s *Store) traceIDsIn(ctx context.Context, dir string, checkParents bool, add func(id string)) (clean bool, err error) {
	ents, err := s.listDirIn(ctx, dir, checkParents)
	if err != nil {
		return false, err
	}
	clean = true
	for _, e := range ents {
		if e.typ&fs.ModeSymlink != 0 {
			s.noteLink(dir + "/" + e.name)
		}
		id, ok := strings.CutSuffix(e.name, yamlExt)
		if ok && e.typ.IsRegular() && checkTraceID(id) == nil {
			add(id)
		} else {
			clean = false
		}
	}
	return clean, nil
}

// sortTraceRefs sorts refs in TraceRefs' order: by id, then domain, then
// day (slices.SortFunc: sort.Slice's reflection cost a consolidation of
// 100,000 refs 0.1 s).
func sortTraceRefs(refs []engine.TraceRef) {
	slices.SortFunc(refs, func(a, b engine.TraceRef) int {
		if c := strings.Compare(a.ID, b.ID); c != 0 {
			return c
		}
		return cmp.Or(strings.Compare(a.Domain, b.Domain), strings.Compare(a.Day, b.Day))
	})
}

// Facts reads facts/<domain>/<key>.yaml. Every read fills the decoded
// cache (decoded.go), not only the query path's as for experience: a facts
// file is seldom rewritten by whoever reads it (a consolidation rewrites
// the facts of few of the entries it reads, deep-learn none), so the cache
// file it writes serves the next process.
func (s *Store) Facts(ctx context.Context, domain, key string) (*engine.Facts, error) {
	if err := checkDomain(domain); err != nil {
		return nil, err
	}
	if err := checkKey(key); err != nil {
		return nil, err
	}
	v, err := s.loadFill(ctx, s.records, FactsPath(domain, key), KindFacts, false, true, factsDecoder(domain, key))
	if err != nil {
		return nil, err
	}
	return v.(*engine.Facts).Clone(), nil
}

// PutFacts writes facts/<domain>/<key>.yaml atomically in canonical form;
// identical content leaves the file (bytes and mtime) as it was.
func (s *Store) PutFacts(ctx context.Context, f *engine.Facts) (string, error) {
	if f == nil {
		return "", errors.New("PutFacts: nil facts")
	}
	return s.putRecord(ctx, f.Domain, f.IntentKey, f.Format, KindFacts, FactsPath, f)
}

// FactsKeys lists the intent keys with a facts file in domain, sorted.
func (s *Store) FactsKeys(ctx context.Context, domain string) ([]string, error) {
	return s.keys(ctx, factsDir, domain)
}

// Experience reads experience/<domain>/<key>.yaml.
func (s *Store) Experience(ctx context.Context, domain, key string) (*engine.Experience, error) {
	x, err := s.experience(ctx, domain, key, false)
	if err != nil {
		return nil, err
	}
	return x.Clone(), nil
}

// ExperienceShared is Experience without the copy (engine.SharedExperience):
// the value is the cache's own, never modified by the store (a change on
// disk decodes a new one), and must never be modified by the caller.
func (s *Store) ExperienceShared(ctx context.Context, domain, key string) (*engine.Experience, error) {
	return s.experience(ctx, domain, key, true)
}

// experience reads an experience record; fill: see loadFill (the query
// path, ExperienceShared, fills the decoded cache; Experience only reads it).
func (s *Store) experience(ctx context.Context, domain, key string, fill bool) (*engine.Experience, error) {
	if err := checkDomain(domain); err != nil {
		return nil, err
	}
	if err := checkKey(key); err != nil {
		return nil, err
	}
	v, err := s.loadFill(ctx, s.records, ExperiencePath(domain, key), KindExperience, false, fill, experienceDecoder(domain, key))
	if err != nil {
		return nil, err
	}
	return v.(*engine.Experience), nil
}

// PutExperience writes experience/<domain>/<key>.yaml atomically in
// canonical form; identical content leaves the file as it was.
func (s *Store) PutExperience(ctx context.Context, x *engine.Experience) (string, error) {
	if x == nil {
		return "", errors.New("PutExperience: nil experience")
	}
	return s.putRecord(ctx, x.Domain, x.IntentKey, x.Format, KindExperience, ExperiencePath, x)
}

// ExperienceKeys lists the intent keys with an experience file in domain, sorted.
func (s *Store) ExperienceKeys(ctx context.Context, domain string) ([]string, error) {
	return s.keys(ctx, experienceDir, domain)
}

func (s *Store) putRecord(ctx context.Context, domain, key string, format int, kind string, pathOf func(string, string) string, v any) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if err := checkDomain(domain); err != nil {
		return "", fmt.Errorf("saving %s: %w", kind, err)
	}
	if err := checkKey(key); err != nil {
		return "", fmt.Errorf("saving %s: %w", kind, err)
	}
	return s.writeRecord(pathOf(domain, key), format, kind, v)
}

// writeRecord writes v at rel in canonical form, atomically, within kind's
// size cap; identical content leaves the file as it was (putRecord, PutSite).
func (s *Store) writeRecord(rel string, format int, kind string, v any) (string, error) {
	data, err := recordBytes(rel, format, kind, v)
	if err != nil {
		return "", err
	}
	wrote, err := s.replaceFile(rel, data, int64(MaxBytes(kind)))
	if wrote {
		s.records.del(rel)
		s.forgetDirs(rel)
	}
	if err != nil {
		return "", fmt.Errorf("saving %s: %w", rel, err)
	}
	return rel, nil
}

// PutRecords writes many facts and experience records, each as PutFacts and
// PutExperience would (canonical form, atomic, unchanged files left alone,
// durable when it returns), but as one batch that costs far fewer system
// calls and syncs: every changed file is written to an fsynced temporary
// file first (many at once, so the file system commits the syncs
// together); then all facts are renamed into place and their directories
// fsynced, once per directory; then the same for all experience. So every
// facts file is in place, durably, before any experience file changes —
// the order consolidation relies on (docs/consolidation.md). placed, if not
// nil, is called after each file is renamed into place. It returns the
// paths of all records, written or unchanged. After an error the facts may
// be in place and the experience not; temporary files not renamed are
// removed (a killed process leaves them: dot-named, ignored by git and
// listings).
func (s *Store) PutRecords(ctx context.Context, facts []*engine.Facts, experience []*engine.Experience, placed func(rel string)) ([]string, error) {
	rels, cached, err := s.PutRecordsCaching(ctx, facts, experience, placed)
	cached()
	return rels, err
}

// PutRecordsCaching is PutRecords, except that the decoded cache of the
// experience placed (decodedwrite.go: best effort, never what a reader
// trusts without checking) may still be being written when it returns;
// cached waits for that. The records must not change until cached returns.
func (s *Store) PutRecordsCaching(ctx context.Context, facts []*engine.Facts, experience []*engine.Experience, placed func(rel string)) (rels []string, cached func(), err error) {
	return s.PutBatch(ctx, nil, facts, experience, placed)
}

// PutBatch is PutSites and then PutRecordsCaching as one batch, the way a
// consolidation writes: the temporary files of all three kinds are written
// and fsynced at once, then the site entries are renamed into place and
// their directories fsynced, then the facts, then the experience — so
// every site entry is durable before any facts file changes, and every
// facts file before any experience file, as with the calls one after the
// other, and no file is placed when any temporary file fails. It returns
// the paths of the sites, then of the records, written or unchanged.
func (s *Store) PutBatch(ctx context.Context, sites []*engine.Site, facts []*engine.Facts, experience []*engine.Experience, placed func(rel string)) (rels []string, cached func(), err error) {
	cached = func() {}
	if err := ctx.Err(); err != nil {
		return nil, cached, err
	}
	type rec struct {
		domain, key, kind string
		format            int
		pathOf            func(string, string) string
		v                 any
	}
	recs := make([]rec, 0, len(sites)+len(facts)+len(experience))
	for _, site := range sites {
		if site == nil {
			return nil, cached, errors.New("PutSites: nil site")
		}
		recs = append(recs, rec{site.Domain, "", KindSite, site.Format, func(d, _ string) string { return SitePath(d) }, site})
	}
	for _, f := range facts {
		if f == nil {
			return nil, cached, errors.New("PutRecords: nil facts")
		}
		recs = append(recs, rec{f.Domain, f.IntentKey, KindFacts, f.Format, FactsPath, f})
	}
	for _, x := range experience {
		if x == nil {
			return nil, cached, errors.New("PutRecords: nil experience")
		}
		recs = append(recs, rec{x.Domain, x.IntentKey, KindExperience, x.Format, ExperiencePath, x})
	}
	writes := make([]*fileWrite, len(recs))
	err = forEach(len(recs), runtime.GOMAXPROCS(0), func(i int) error {
		r := recs[i]
		if err := checkDomain(r.domain); err != nil {
			return fmt.Errorf("saving %s: %w", r.kind, err)
		}
		if err := checkKey(r.key); err != nil && r.kind != KindSite {
			return fmt.Errorf("saving %s: %w", r.kind, err)
		}
		rel := r.pathOf(r.domain, r.key)
		data, err := recordBytes(rel, r.format, r.kind, r.v)
		if err != nil {
			return err
		}
		writes[i] = &fileWrite{rel: rel, data: data, max: int64(MaxBytes(r.kind))}
		return nil
	})
	if err != nil {
		return nil, cached, err
	}
	ns, nf := len(sites), len(sites)+len(facts)
	groups := [][]*fileWrite{writes[:ns], writes[ns:nf], writes[nf:]}
	if err := s.writeGroups(ctx, groups, s.onPlaced(placed)); err != nil {
		return nil, cached, fmt.Errorf("saving records: %w", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		cacheWritten(s, KindFacts, writes[ns:nf], facts)
		cacheWritten(s, KindExperience, writes[nf:], experience)
	}()
	return relsOf(writes), func() { <-done }, nil
}

// recordBytes is v's canonical bytes for rel, checked as every write of a
// record is: a format this pem writes, and the kind's size cap.
func recordBytes(rel string, format int, kind string, v any) ([]byte, error) {
	if format < 1 || format > engine.Format {
		return nil, fmt.Errorf("saving %s: format %d: set it to %d", rel, format, engine.Format)
	}
	data, err := Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("saving %s: %w", rel, err)
	}
	if max := MaxBytes(kind); len(data) > max {
		return nil, fmt.Errorf("%w: %s would be %d bytes, over the %s cap of %d", engine.ErrTooLarge, rel, len(data), kind, max)
	}
	return data, nil
}

// onPlaced is what a batch does after each file is renamed into place:
// forget what was read of it, then call placed (nil: nothing).
func (s *Store) onPlaced(placed func(rel string)) func(rel string) {
	return func(rel string) {
		s.records.del(rel)
		s.forgetDirs(rel)
		if placed != nil {
			placed(rel)
		}
	}
}

// relsOf is the paths of a batch's files, in its order.
func relsOf(writes []*fileWrite) []string {
	out := make([]string, len(writes))
	for i, w := range writes {
		out[i] = w.rel
	}
	return out
}

func (s *Store) keys(ctx context.Context, top, domain string) ([]string, error) {
	if err := checkDomain(domain); err != nil {
		return nil, err
	}
	ents, err := s.listDir(ctx, top+"/"+domain)
	if err != nil {
		return nil, err
	}
	keys := []string{}
	for _, e := range ents {
		if e.typ&fs.ModeSymlink != 0 {
			s.noteLink(top + "/" + domain + "/" + e.name)
		}
		k, ok := strings.CutSuffix(e.name, yamlExt)
		if ok && e.typ.IsRegular() && checkKey(k) == nil {
			keys = append(keys, k)
		}
	}
	return keys, nil
}

// Domains lists every domain with traces, experience or facts, sorted.
func (s *Store) Domains(ctx context.Context) ([]string, error) {
	var all []string
	for _, top := range []string{tracesDir, experienceDir, factsDir} {
		ds, err := s.subdirs(ctx, top, checkDomain)
		if err != nil {
			return nil, err
		}
		all = append(all, ds...)
	}
	slices.Sort(all)
	return slices.Compact(all), nil
}

// dirent is one cached directory entry.
type dirent struct {
	name string
	typ  fs.FileMode // type bits only
}

// listDir lists dir sorted by name, skipping hidden names (temporary files,
// .gitkeep). A missing directory is empty. The listing is cached until the
// directory changes.
func (s *Store) listDir(ctx context.Context, dir string) ([]dirent, error) {
	return s.listDirIn(ctx, dir, true)
}

// listDirIn is listDir; checkParents false skips checking dir's parents for
// symlinks, for a dir found as a directory entry (not a link) in a listing
// of its parent made by this call's caller.
func (s *Store) listDirIn(ctx context.Context, dir string, checkParents bool) ([]dirent, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.watched(dir, true) // before it is confirmed or listed (watch.go)
	if s.revalidate > 0 {
		if v, ok := s.dirs.fresh(dir, s.now(), s.revalidate); ok {
			return v.([]dirent), nil
		}
	}
	fi, err := os.Lstat(s.abs(dir))
	if err == nil && fi.IsDir() {
		if v, ok := s.dirs.get(dir, idOf(fi), s.now()); ok {
			return v.([]dirent), nil
		}
	}
	start := s.now()
	// One system call where the kernel can refuse links itself (openat2).
	if f, err := s.openChecked(dir, true); !errors.Is(err, errNoOpenat2) {
		switch {
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
			return nil, nil
		case err != nil:
			return nil, fmt.Errorf("listing %s: %w", dir, err)
		}
		defer f.Close()
		// The identity to cache under is taken before reading, so a change
		// during the read shows as a different identity next time.
		fi, err := f.Stat()
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", dir, err)
		}
		ents, err := listOpen(f, dir)
		if err != nil {
			return nil, err
		}
		if trusted(fi, start) {
			s.dirs.put(dir, idOf(fi), ents, start)
		}
		return ents, nil
	}
	// The identity to cache under is taken before reading, so a change
	// during the read shows as a different identity next time.
	fi, err = s.root.Lstat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("listing %s: %w", dir, err)
	case fi.Mode()&fs.ModeSymlink != 0:
		return nil, unsafeSymlink(dir)
	case !fi.IsDir():
		return nil, fmt.Errorf("%w: %s is not a directory: move it away", engine.ErrUnsafePath, dir)
	}
	ents, err := s.readDir(dir, fi, checkParents)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", dir, err)
	}
	if trusted(fi, start) {
		s.dirs.put(dir, idOf(fi), ents, start)
	}
	return ents, nil
}

// subdirs lists the directories in dir whose names pass valid.
func (s *Store) subdirs(ctx context.Context, dir string, valid func(string) error) ([]string, error) {
	return s.subdirsIn(ctx, dir, valid, true)
}

func (s *Store) subdirsIn(ctx context.Context, dir string, valid func(string) error, checkParents bool) ([]string, error) {
	out, _, err := s.subdirsClean(ctx, dir, valid, checkParents)
	return out, err
}

// subdirsClean is subdirsIn, and reports whether dir holds nothing but
// valid directories (no link, no foreign name): only such a listing may be
// remembered (TraceRefsListing).
func (s *Store) subdirsClean(ctx context.Context, dir string, valid func(string) error, checkParents bool) ([]string, bool, error) {
	ents, err := s.listDirIn(ctx, dir, checkParents)
	if err != nil {
		return nil, false, err
	}
	var out []string
	clean := true
	for _, e := range ents {
		if e.typ&fs.ModeSymlink != 0 {
			s.noteLink(dir + "/" + e.name)
		}
		if e.typ.IsDir() && valid(e.name) == nil {
			out = append(out, e.name)
		} else {
			clean = false
		}
	}
	return out, clean, nil
}

// Lock takes the tree's writer lock: an exclusive flock on .pem.lock in the
// tree root (ignored by git through the .gitignore Init writes). It waits
// until ctx ends, then returns engine.ErrLocked. The kernel releases the lock
// when the process dies, so it is never stale. release is idempotent.
func (s *Store) Lock(ctx context.Context) (func() error, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: %v", engine.ErrLocked, err)
	}
	if fi, err := s.root.Lstat(lockFile); err == nil && !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file: delete it", engine.ErrUnsafePath, lockFile)
	}
	f, err := s.root.OpenFile(lockFile, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the lock %s: %w", s.abs(lockFile), err)
	}
	wait := time.Millisecond
	for {
		ok, err := tryLock(f)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", s.abs(lockFile), err)
		}
		if ok {
			break
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			f.Close()
			return nil, fmt.Errorf("%w: another pem process is writing to %s (lock %s): %v; wait for it to finish and retry", engine.ErrLocked, s.dir, lockFile, ctx.Err())
		case <-t.C:
		}
		wait = min(wait*2, 20*time.Millisecond)
	}
	var once sync.Once
	return func() error {
		var err error
		once.Do(func() {
			err = unlock(f)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		})
		return err
	}, nil
}

// Decoders check a record against the place it is stored.

func traceDecoder(ref engine.TraceRef) func([]byte) (any, error) {
	return func(data []byte) (any, error) {
		t := new(engine.Trace)
		if err := Unmarshal(data, t, KindTrace); err != nil {
			return nil, err
		}
		if err := checkFormat(t.Format); err != nil {
			return nil, err
		}
		if got := RefOf(t); got != ref {
			return nil, fmt.Errorf("%w: the file holds trace %s/%s/%s, not the one its path names", engine.ErrCorrupt, got.Domain, got.Day, got.ID)
		}
		return t, nil
	}
}

func factsDecoder(domain, key string) func([]byte) (any, error) {
	return func(data []byte) (any, error) {
		f := new(engine.Facts)
		if err := Unmarshal(data, f, KindFacts); err != nil {
			return nil, err
		}
		if err := checkFormat(f.Format); err != nil {
			return nil, err
		}
		if f.Domain != domain || f.IntentKey != key {
			return nil, fmt.Errorf("%w: the file names %s/%s, not the entry its path names", engine.ErrCorrupt, f.Domain, f.IntentKey)
		}
		return f, nil
	}
}

func experienceDecoder(domain, key string) func([]byte) (any, error) {
	return func(data []byte) (any, error) {
		x := new(engine.Experience)
		if err := Unmarshal(data, x, KindExperience); err != nil {
			return nil, err
		}
		if err := checkFormat(x.Format); err != nil {
			return nil, err
		}
		if x.Domain != domain || x.IntentKey != key {
			return nil, fmt.Errorf("%w: the file names %s/%s, not the entry its path names", engine.ErrCorrupt, x.Domain, x.IntentKey)
		}
		return x, nil
	}
}
