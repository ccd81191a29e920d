package store

import (
	"context"
	"path"
	"strings"
	"sync"

	"github.com/pemdev/pem/engine"
)

var _ engine.ChangeWatch = (*Store)(nil)

// The change watch (engine.ChangeWatch) lets the engine keep a query's
// answer until something it read changes (engine/querymemo.go). On Linux it
// is an inotify instance (watch_linux.go) watching the tree's directory,
// its three top directories, and every domain and day directory a read
// went through — each watched before it is read, so that a change after
// the read is an event. Every event in a domain's directories moves that
// domain's generation; one in the tree's own directory (pem.yaml, a top
// directory renamed) or a lost event (the kernel's queue overflowed) moves
// every domain's. Names that start with a dot (temporary files, the lock,
// .pem-cache) move nothing. Generation reads the pending events first (one
// system call when there are none), so a change finished before it is
// called is seen.
//
// It is off (Generation says so, and the engine keeps nothing) with
// Options.NoWatch or Options.Revalidate (whose reads may be a second old),
// on a file system where inotify may miss changes (network and FUSE file
// systems: only local ones are watched), and for a domain with a directory
// that could not be watched (the user's watch limit,
// /proc/sys/fs/inotify/max_user_watches; logged once per store, with the
// domain and the sysctl to raise). Changes made through a shared
// memory mapping of a file raise no inotify event; pem and git never write
// that way.

// watch is the state of the change watch; the platform part is in
// watch_linux.go (newWatchFD, addWatch, removeWatch, readEvents).
type watch struct {
	mu      sync.Mutex
	fd      int
	wds     map[string]int32  // watched directory (relative) → descriptor
	dirs    map[int32]string  // descriptor → directory
	tick    uint64            // counts changes
	changed map[string]uint64 // domain ("" every domain) → tick of its last change
	lost    map[string]bool   // domains with a directory that could not be watched
	broken  bool              // reading events failed: nothing is kept any more
	warned  bool              // a lost directory was logged (once per store)
	buf     []byte            // for readEvents
}

// Generation implements engine.ChangeWatch (see above).
func (s *Store) Generation(ctx context.Context, domain string) (uint64, bool) {
	if s.noWatch || s.revalidate > 0 || ctx.Err() != nil || checkDomain(domain) != nil {
		return 0, false
	}
	w := s.startWatch()
	if w == nil {
		return 0, false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.broken {
		return 0, false
	}
	if err := readEvents(w.fd, w.buf, w.event); err != nil {
		w.broken = true
		return 0, false
	}
	if w.broken || w.lost[domain] || w.lost[""] {
		return 0, false
	}
	return max(w.changed[domain], w.changed[""]), true
}

// startWatch starts the watch once (nil: none here).
func (s *Store) startWatch() *watch {
	s.watchOnce.Do(func() {
		fd, err := newWatchFD(s.dir)
		if err != nil {
			return
		}
		w := &watch{fd: fd, buf: make([]byte, 16<<10), wds: map[string]int32{}, dirs: map[int32]string{}, changed: map[string]uint64{}, lost: map[string]bool{}}
		for _, dir := range []string{".", tracesDir, experienceDir, factsDir} {
			if !w.add(s, dir) && dir == "." {
				closeWatchFD(fd)
				return
			}
		}
		s.watch.Store(w)
	})
	return s.watch.Load()
}

// watched makes sure rel's directory (rel itself when dir) and its parents
// are watched, before the caller reads it; a no-op until the watch starts.
func (s *Store) watched(rel string, dir bool) {
	w := s.watch.Load()
	if w == nil {
		return
	}
	if !dir {
		rel = path.Dir(rel)
	}
	if rel == "." || rel == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.wds[rel]; ok || w.broken {
		return
	}
	for i := 0; i <= len(rel); i++ {
		if i < len(rel) && rel[i] != '/' {
			continue
		}
		if _, ok := w.wds[rel[:i]]; !ok && !w.add(s, rel[:i]) {
			return // missing (its watched parent reports its creation) or lost
		}
	}
}

// add watches the directory rel; false when it is missing or could not be
// watched (then its domain is lost). The caller holds w.mu (or owns w).
func (w *watch) add(s *Store, rel string) bool {
	wd, err := watchDir(w.fd, s.abs(rel))
	switch {
	case err == nil:
	case isNotExist(err):
		return false
	default:
		w.lost[domainOf(rel)] = true
		if !w.warned {
			// Answers are still right (computed anew each time), only
			// slower: say so once, with what to do.
			w.warned = true
			s.log.Warn("the change watch could not watch a directory: queries of its domain are computed anew every time "+
				"(correct, but not kept); if the error is ENOSPC, raise the inotify watch limit: sysctl fs.inotify.max_user_watches=524288",
				"dir", rel, "domain", domainOf(rel), "err", err)
		}
		return false
	}
	if old, ok := w.dirs[wd]; ok && old != rel {
		delete(w.wds, old) // the same directory under a new name
	}
	w.wds[rel], w.dirs[wd] = wd, rel
	return true
}

// watchDir is addWatch; a test replaces it to fail as a full watch limit does.
var watchDir = addWatch

// domainOf is the domain a directory (or a name in it) belongs to; "" for
// the tree's directory and the top directories (every domain).
func domainOf(rel string) string {
	parts := strings.SplitN(rel, "/", 3)
	if len(parts) < 2 {
		return ""
	}
	return parts[1]
}

// event applies one inotify event (watch_linux.go decodes them): wd -1 is a
// lost event (every domain changes); self is an event on the watched
// directory itself (deleted, moved, its watch gone); sub that name is a
// directory.
func (w *watch) event(wd int32, name string, self, sub, overflow bool) {
	if overflow {
		w.bump("")
		return
	}
	dir, ok := w.dirs[wd]
	if !ok {
		return // a watch dropped earlier
	}
	if self {
		if dir == "." {
			w.broken = true // the tree's own directory went: keep nothing
			return
		}
		w.drop(dir)
		w.bump(domainOf(dir))
		return
	}
	if name == "" || name[0] == '.' {
		return
	}
	child := name
	if dir != "." {
		child = dir + "/" + name
	}
	if sub {
		if _, ok := w.wds[child]; ok {
			w.drop(child) // renamed, removed or replaced: watched again when read
		}
	}
	switch {
	case dir == ".":
		if name == configFile || name == tracesDir || name == experienceDir || name == factsDir {
			w.bump("")
		}
	default:
		w.bump(domainOf(child))
	}
}

func (w *watch) bump(domain string) {
	w.tick++
	w.changed[domain] = w.tick
}

// drop forgets the watches of dir and of every directory under it.
func (w *watch) drop(dir string) {
	for rel, wd := range w.wds {
		if rel == dir || strings.HasPrefix(rel, dir+"/") {
			removeWatch(w.fd, wd)
			delete(w.wds, rel)
			delete(w.dirs, wd)
		}
	}
}

// closeWatch releases the watch (Close).
func (s *Store) closeWatch() {
	s.watchOnce.Do(func() {}) // never started after Close
	if w := s.watch.Load(); w != nil {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.broken = true
		closeWatchFD(w.fd)
	}
}
