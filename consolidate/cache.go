package consolidate

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store"
	"github.com/pemdev/pem/store/gitrepo"
)

// The summary cache lets a consolidation of a large tree skip decoding the
// experience and facts files it will not change, and listing the trace
// directories that did not change (store.TraceListing). It lives in the git
// directory (never committed), maps each file's path to its size,
// modification time and summary, and is only a cache: a file whose size or
// mtime differs, or that changed within racyWindow of the cache's writing,
// is read again; a missing or unreadable cache means reading everything.
//
// The file is a header line and then store's binary stream (store.BinEncoder:
// the decoded cache's form of evidence and digests, strings written once and
// referred back to): gob spent ~0.6 s a run at 10,000 entries decoding and
// encoding every evidence item by reflection (docs/performance.md,
// "Consolidation"). A file of an older format (gob, formats 1–3) is not
// read: the first run after an upgrade reads every file once.
const (
	cacheName   = "pem-consolidate.cache"
	cacheFormat = 5 // 2: evidence keeps steps, revision and verdicts; 3: the digest; 5: store's binary stream, not gob
	cacheHeader = "pem consolidate cache 5\n"
	racyWindow  = 2 * time.Second
)

// entryFile is one experience or facts file as Load sees it.
type entryFile struct {
	key   Key
	rel   string
	facts bool
	size  int64
	mod   int64 // mtime, ns
	ok    bool  // stat succeeded
	sum   *summary
	full  any // *engine.Experience or *engine.Facts once decoded
}

// summary is what Load needs of an entry it does not plan to change.
type summary struct {
	Evidence []engine.Evidence // experience: every folded outcome (trimmed)
	Digest   *engine.Digest    // experience: its compacted evidence
	Status   engine.Status     // facts
	Revision string
	PageText bool
}

// experienceSummary keeps what Load needs of an experience, its times in
// UTC (the same instants; the cache's binary form keeps only UTC).
func experienceSummary(x *engine.Experience) *summary {
	s := &summary{Evidence: make([]engine.Evidence, len(x.Evidence)), Digest: x.Digest.Clone()}
	for i, e := range x.Evidence {
		s.Evidence[i] = engine.Evidence{Trace: e.Trace, At: e.At.UTC(), Outcome: e.Outcome, Category: e.Category, Session: e.Session,
			Steps: e.Steps, Revision: e.Revision, Verdict: e.Verdict, VerdictBy: e.VerdictBy, VerdictAt: e.VerdictAt.UTC()}
	}
	if d := s.Digest; d != nil {
		d.Before, d.Newest, d.Judged = d.Before.UTC(), d.Newest.UTC(), d.Judged.UTC()
		d.LastSuccessAt, d.LastFailureAt = d.LastSuccessAt.UTC(), d.LastFailureAt.UTC()
	}
	return s
}

func factsSummary(f *engine.Facts) *summary {
	return &summary{Status: f.Status, Revision: f.Revision, PageText: f.HasPageText()}
}

type cacheFile struct {
	Format  int
	Written int64 // unix ns, taken before the files were examined
	Files   map[string]cachedFile
	Traces  *store.TraceListing // the trace directories as last listed
}

type cachedFile struct {
	Size, Mod int64
	Sum       summary
}

type cache struct {
	root, path string
	started    int64
	old        *cacheFile
	misses     int
	// oldFiles and sameTraces keep what save needs of old once Load has
	// dropped it (dropFiles, dropTraces): the old summaries map and
	// listing are megabytes that need not live through the rest of the run.
	oldFiles   int
	sameTraces bool
}

// openCache reads the cache of repo's tree; off, or no repository, gives a
// cache that never hits and never saves.
func openCache(repo *gitrepo.Repo, off bool) *cache {
	c := &cache{started: time.Now().UnixNano()}
	if off || repo == nil {
		return c
	}
	c.root, c.path = repo.TreeDir(), repo.StatePath(cacheName)
	if data, err := os.ReadFile(c.path); err == nil {
		c.old = decodeCache(data)
	}
	return c
}

// encodeCache writes cf to w as the cache file (streamed: no second copy
// of a cache of many megabytes); an error when a value would not round-trip
// (a time outside UTC; experienceSummary keeps none), and save then leaves
// the cache as it was. The decoded file's strings share one copy of it.
func encodeCache(w io.Writer, cf *cacheFile) error {
	if _, err := io.WriteString(w, cacheHeader); err != nil {
		return err
	}
	e := store.NewBinEncoder(make([]byte, 0, 1<<16))
	e.Int(cf.Written)
	e.Int(int64(len(cf.Files)))
	for rel, f := range cf.Files {
		e.String(rel)
		e.Int(f.Size)
		e.Int(f.Mod)
		if !e.Experience(&engine.Experience{Evidence: f.Sum.Evidence, Digest: f.Sum.Digest}) {
			return errors.New("a summary the binary form does not keep")
		}
		e.String(string(f.Sum.Status))
		e.String(f.Sum.Revision)
		page := int64(0)
		if f.Sum.PageText {
			page = 1
		}
		e.Int(page)
		if len(e.Bytes()) >= 1<<16 {
			if err := e.Flush(w); err != nil {
				return err
			}
		}
	}
	if t := cf.Traces; t == nil {
		e.Int(-1)
	} else {
		e.Int(int64(len(t.Dirs)))
		for k, d := range t.Dirs {
			e.String(k)
			e.Int(int64(d.Dev))
			e.Int(int64(d.Ino))
			e.Int(d.Size)
			e.Int(d.Mtime)
			e.Int(d.Ctime)
			e.RawString(d.Names)
			if len(e.Bytes()) >= 1<<16 {
				if err := e.Flush(w); err != nil {
					return err
				}
			}
		}
	}
	return e.Flush(w)
}

// decodeCache reads a cache file; nil when it is of another format or
// damaged (then nothing of it is believed).
func decodeCache(data []byte) *cacheFile {
	body, ok := bytes.CutPrefix(data, []byte(cacheHeader))
	if !ok {
		return nil
	}
	d := store.NewBinDecoder(body)
	cf := &cacheFile{Format: cacheFormat, Written: d.Int()}
	n := d.Int()
	if !d.OK() || n < 0 || n > int64(len(body)) {
		return nil
	}
	cf.Files = make(map[string]cachedFile, n)
	for i := int64(0); i < n && d.OK(); i++ {
		rel := d.String()
		f := cachedFile{Size: d.Int(), Mod: d.Int()}
		x := d.Experience()
		if x == nil {
			return nil
		}
		f.Sum = summary{Evidence: x.Evidence, Digest: x.Digest, Status: engine.Status(d.String()), Revision: d.String(), PageText: d.Int() == 1}
		cf.Files[rel] = f
	}
	switch dirs := d.Int(); {
	case !d.OK():
		return nil
	case dirs >= 0:
		if dirs > int64(len(body)) {
			return nil
		}
		cf.Traces = &store.TraceListing{Dirs: make(map[string]store.ListedDir, dirs)}
		for i := int64(0); i < dirs && d.OK(); i++ {
			k := d.String()
			cf.Traces.Dirs[k] = store.ListedDir{Dev: uint64(d.Int()), Ino: uint64(d.Int()), Size: d.Int(), Mtime: d.Int(), Ctime: d.Int(), Names: d.RawString()}
		}
	}
	if !d.Done() {
		return nil
	}
	return cf
}

func (c *cache) enabled() bool { return c.path != "" }

// stat records each file's size and mtime (lstat, no read).
func (c *cache) stat(files []*entryFile) {
	if !c.enabled() {
		return
	}
	_ = parallel(context.Background(), len(files), func(i int) error {
		f := files[i]
		fi, err := os.Lstat(filepath.Join(c.root, filepath.FromSlash(f.rel)))
		if err == nil && fi.Mode().IsRegular() {
			f.size, f.mod, f.ok = fi.Size(), fi.ModTime().UnixNano(), true
		}
		return nil
	})
}

// lookup fills f's summary from the cache when the file is unchanged.
func (c *cache) lookup(f *entryFile) bool {
	if c.old == nil || !f.ok {
		c.misses++
		return false
	}
	e, ok := c.old.Files[f.rel]
	if !ok || e.Size != f.size || e.Mod != f.mod || f.mod > c.old.Written-int64(racyWindow) {
		c.misses++
		return false
	}
	sum := e.Sum
	f.sum = &sum
	return true
}

// dropFiles forgets the old summaries map once every file was looked up
// (the summaries found stay with their files).
func (c *cache) dropFiles() {
	if c.old != nil {
		c.oldFiles, c.old.Files = len(c.old.Files), nil
	}
}

// dropTraces forgets the old trace listing once next replaced it.
func (c *cache) dropTraces(next *store.TraceListing) {
	if c.old != nil {
		c.sameTraces, c.old.Traces = sameListing(c.old.Traces, next), nil
	}
}

// traces returns the trace listing the cache holds (nil: none).
func (c *cache) traces() *store.TraceListing {
	if c.old == nil {
		return nil
	}
	return c.old.Traces
}

// save writes the cache when it missed anything, files went away or the
// trace listing changed.
func (c *cache) save(files []*entryFile, traces *store.TraceListing) {
	if !c.enabled() {
		return
	}
	cf := cacheFile{Format: cacheFormat, Written: c.started, Files: make(map[string]cachedFile, len(files)), Traces: traces}
	for _, f := range files {
		if f.ok && f.sum != nil {
			cf.Files[f.rel] = cachedFile{Size: f.size, Mod: f.mod, Sum: *f.sum}
		}
	}
	if c.misses == 0 && c.old != nil && c.oldFiles == len(cf.Files) && c.sameTraces {
		return
	}
	// Streamed to the file: no second copy of a cache of many megabytes.
	tmp := c.path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return
	}
	err = encodeCache(f, &cf)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(tmp)
		return
	}
	_ = os.Rename(tmp, c.path)
}

// sameListing reports whether two trace listings remember the same
// directories with the same identities.
func sameListing(a, b *store.TraceListing) bool {
	if a == nil || b == nil {
		return a == b
	}
	if len(a.Dirs) != len(b.Dirs) {
		return false
	}
	for k, d := range a.Dirs {
		e, ok := b.Dirs[k]
		if !ok || d.Dev != e.Dev || d.Ino != e.Ino || d.Size != e.Size || d.Mtime != e.Mtime || d.Ctime != e.Ctime {
			return false
		}
	}
	return true
}
