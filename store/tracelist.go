package store

import (
	"context"
	"os"
	"runtime"
	"strings"

	"github.com/pemdev/pem/engine"
)

// A listing of every trace, remembered between processes.
//
// A consolidation needs the name of every trace (to find the unfolded
// ones, and those past ttl_days), and listing 100,000 names in ~30,000 day
// directories cost it ~1.7 s of CPU (docs/performance.md,
// "Consolidation"). Between two runs almost every day directory is
// unchanged, and a directory that gains or loses a name gets a new mtime and
// ctime. So TraceRefsListing keeps each domain's and each day's names with
// the directory's identity (device, inode, size, mtime, ctime: the caches'
// fileID), and the next call reuses the names of a directory whose lstat
// shows that very identity instead of listing it again. Like every cache
// here it believes only an identity older than racyWindow at the time it
// was listed (a change within the file system's clock tick could keep it),
// and only clean listings: a directory holding a link or a name that is
// not a valid domain, day or trace file is listed every time, so that what
// the listing reports (SkippedLinks) is the same as TraceRefs'.

// TraceListing is what TraceRefsListing remembers; a caller keeps it (as
// gob) and hands it back at the next call. The zero value remembers nothing.
type TraceListing struct {
	Dirs map[string]ListedDir // "traces/<domain>" and "traces/<domain>/<day>"
}

// ListedDir is one directory's listing: the valid day names (a domain) or
// trace ids (a day), each followed by a newline, and the directory's
// identity when it was listed. (One string per directory, not one per
// name: 100,000 trace ids cost one allocation per day to keep and decode,
// and the refs share its bytes.)
type ListedDir struct {
	Dev, Ino           uint64
	Size, Mtime, Ctime int64
	Names              string
}

func joinNames(ns []string) string {
	n := 0
	for _, s := range ns {
		n += len(s) + 1
	}
	var b strings.Builder
	b.Grow(n)
	for _, s := range ns {
		b.WriteString(s)
		b.WriteByte('\n')
	}
	return b.String()
}

func splitNames(s string) []string {
	out := make([]string, 0, strings.Count(s, "\n"))
	for s != "" {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			break
		}
		out = append(out, s[:i])
		s = s[i+1:]
	}
	return out
}

// id is the directory identity d was listed at (dirID, in stat_*.go).
func (d ListedDir) id() fileID { return dirID(d) }

// TraceRefsListing lists every trace as TraceRefs(ctx, "") does (the same
// refs in the same order), reusing from prev (nil: nothing) the names of
// the directories that did not change; it returns the listing to keep for
// the next call.
func (s *Store) TraceRefsListing(ctx context.Context, prev *TraceListing) ([]engine.TraceRef, *TraceListing, error) {
	start := s.now()
	next := &TraceListing{Dirs: map[string]ListedDir{}}
	var old map[string]ListedDir
	if prev != nil {
		old = prev.Dirs
	}
	type kept struct {
		dir string
		d   ListedDir
	}
	// names returns the valid names in dir (a directory found in a listing
	// of its parent), from old when its identity is unchanged; what to keep
	// of dir goes to *keep.
	names := func(dir string, keep *[]kept, list func() ([]string, bool, error)) ([]string, error) {
		fi, err := os.Lstat(s.abs(dir))
		var id fileID
		if err == nil && fi.IsDir() {
			id = idOf(fi)
			if d, ok := old[dir]; ok && id.unique() && sameDir(d.id(), id) {
				*keep = append(*keep, kept{dir, d})
				return splitNames(d.Names), nil
			}
		}
		ns, clean, err := list()
		if err != nil {
			return nil, err
		}
		if clean && fi != nil && fi.IsDir() && id.unique() && trusted(fi, start) {
			*keep = append(*keep, kept{dir, listedDir(id, joinNames(ns))})
		}
		return ns, nil
	}
	domains, err := s.subdirs(ctx, tracesDir, checkDomain)
	if err != nil {
		return nil, nil, err
	}
	// One domain a task on GOMAXPROCS workers (~31,000 lstats at 100,000
	// traces, most of them in the kernel): each domain's refs, kept
	// directories and error go to its own slot, put together in domain order
	// afterwards, so the result (and the error reported: the first domain's)
	// is the one a serial walk gives.
	type domainList struct {
		refs []engine.TraceRef
		keep []kept
		err  error
	}
	per := make([]domainList, len(domains))
	_ = forEach(len(domains), runtime.GOMAXPROCS(0), func(i int) error {
		d, out := domains[i], &per[i]
		ddir := tracesDir + "/" + d
		days, err := names(ddir, &out.keep, func() ([]string, bool, error) {
			return s.subdirsClean(ctx, ddir, checkDay, false)
		})
		if err != nil {
			out.err = err
			return nil
		}
		for _, day := range days {
			dir := ddir + "/" + day
			ids, err := names(dir, &out.keep, func() ([]string, bool, error) {
				var ids []string
				clean, err := s.traceIDsIn(ctx, dir, false, func(id string) { ids = append(ids, id) })
				return ids, clean, err
			})
			if err != nil {
				out.err = err
				return nil
			}
			for _, id := range ids {
				out.refs = append(out.refs, engine.TraceRef{Domain: d, Day: day, ID: id})
			}
		}
		return nil
	})
	n := 0
	for i := range per {
		if per[i].err != nil {
			return nil, nil, per[i].err
		}
		n += len(per[i].refs)
	}
	refs := make([]engine.TraceRef, 0, n)
	for i := range per {
		refs = append(refs, per[i].refs...)
		for _, k := range per[i].keep {
			next.Dirs[k.dir] = k.d
		}
		per[i] = domainList{}
	}
	sortTraceRefs(refs)
	return refs, next, nil
}
