package consolidate

import (
	"bufio"
	"context"
	"encoding/gob"
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
const (
	cacheName   = "pem-consolidate.cache"
	cacheFormat = 3 // 2: evidence keeps steps, revision and verdicts; 3: the digest (Traces, added later, is optional: gob leaves it nil in an older cache, and an older pem skips it)
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

func experienceSummary(x *engine.Experience) *summary {
	s := &summary{Evidence: make([]engine.Evidence, len(x.Evidence)), Digest: x.Digest.Clone()}
	for i, e := range x.Evidence {
		s.Evidence[i] = engine.Evidence{Trace: e.Trace, At: e.At, Outcome: e.Outcome, Category: e.Category, Session: e.Session,
			Steps: e.Steps, Revision: e.Revision, Verdict: e.Verdict, VerdictBy: e.VerdictBy, VerdictAt: e.VerdictAt}
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
	if f, err := os.Open(c.path); err == nil {
		var cf cacheFile
		if gob.NewDecoder(bufio.NewReaderSize(f, 1<<16)).Decode(&cf) == nil && cf.Format == cacheFormat {
			c.old = &cf
		}
		f.Close()
	}
	return c
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
	w := bufio.NewWriterSize(f, 1<<16)
	err = gob.NewEncoder(w).Encode(&cf)
	if err == nil {
		err = w.Flush()
	}
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
