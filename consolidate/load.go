package consolidate

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store"
	"github.com/pemdev/pem/store/gitrepo"

	"golang.org/x/sync/errgroup"
)

// Progress is told how far a long stage is: "read" (new traces decoded) and
// "write" (experience and facts files written or found unchanged). total may be 0 when unknown.
type Progress func(stage string, done, total int)

// LoadOptions configure Load.
type LoadOptions struct {
	Now      time.Time // the plan's time: decides which entries may change status
	Progress Progress  // nil: none
	All      bool      // load every entry, not only those the plan can change
	NoCache  bool      // neither read nor write the summary cache
	// Repo is the tree's git repository, whose git directory holds the
	// summary cache; nil: no cache.
	Repo *gitrepo.Repo

	tl *timeline // Run's: each phase's time (nil: none)
}

// Load reads what Plan needs from st at time opts.Now, and no more:
//   - every trace ref (directory names only; with the cache, only the
//     directories changed since it was written are listed again), and the
//     traces no experience has folded yet — only those are decoded;
//   - in full, the experience and facts of the entries a plan can change:
//     those with new traces, and those whose status moves at opts.Now;
//   - for every other entry only a summary (folded ids and evidence, status),
//     which comes from a cache in the git directory validated by each file's
//     size and modification time, so unchanged files are not decoded again.
//
// A file that cannot be read is reported in Input.Warnings and its entry is
// marked broken, so that no plan overwrites what could not be read. A plan
// made from this Input equals the plan made from every entry (All).
func Load(ctx context.Context, st engine.Store, opts LoadOptions) (Input, error) {
	in, saved, err := load(ctx, st, opts)
	saved()
	return in, err
}

// load is Load, except that the summary cache may still be being written
// when it returns: saved waits for that (Run calls it before it releases
// the tree lock, so two runs never write the cache at once). The cache's
// content is fixed when load returns; writing it overlaps the plan and
// the writes.
//
// What does not depend on each other runs at once: the summary cache is
// read while the entry files are listed (a directory listing per domain,
// on GOMAXPROCS workers), and the trace directories are listed while the
// entry files are checked against the cache and the changed ones read.
// The results are the same as one after the other: each goes to its own
// slot and is put in order afterwards.
func load(ctx context.Context, st engine.Store, opts LoadOptions) (in Input, saved func(), err error) {
	saved = func() {}
	in = Input{Experience: map[Key]*engine.Experience{}, Facts: map[Key]*engine.Facts{}, Folded: map[string]Key{}}
	cfg, err := st.Config(ctx)
	if err != nil {
		return in, saved, err
	}
	in.Policy = cfg.Policy
	cacheCh := make(chan *cache, 1)
	go func() { cacheCh <- openCache(opts.Repo, opts.NoCache || opts.All) }()
	var c *cache
	openedCache := func() *cache {
		if c == nil {
			c = <-cacheCh
		}
		return c
	}
	defer openedCache() // never return with the cache's reader running
	domains, err := st.Domains(ctx)
	if err != nil {
		return in, saved, fmt.Errorf("listing domains: %w", err)
	}
	perDomain := make([][]*entryFile, len(domains))
	err = parallel(ctx, len(domains), func(i int) error {
		d := domains[i]
		xk, err := st.ExperienceKeys(ctx, d)
		if err != nil && !errors.Is(err, engine.ErrNotFound) {
			return fmt.Errorf("listing experience of %s: %w", d, err)
		}
		fk, err := st.FactsKeys(ctx, d)
		if err != nil && !errors.Is(err, engine.ErrNotFound) {
			return fmt.Errorf("listing facts of %s: %w", d, err)
		}
		fs := make([]*entryFile, 0, len(xk)+len(fk))
		for _, k := range xk {
			fs = append(fs, &entryFile{key: Key{d, k}, rel: store.ExperiencePath(d, k)})
		}
		for _, k := range fk {
			fs = append(fs, &entryFile{key: Key{d, k}, rel: store.FactsPath(d, k), facts: true})
		}
		perDomain[i] = fs
		return nil
	})
	if err != nil {
		return in, saved, err
	}
	var files []*entryFile
	for _, fs := range perDomain {
		files = append(files, fs...)
	}
	perDomain = nil
	tl := opts.tl
	tl.mark("list entries")
	openedCache()
	tl.mark("open summary cache")

	// Every trace name; with the cache, the directories unchanged since
	// the last run are not listed again (store.TraceListing). Listed while
	// the entry files are checked and read below.
	type listed struct {
		refs    []engine.TraceRef
		listing *store.TraceListing
		err     error
	}
	listCh := make(chan listed, 1)
	ls, isStore := st.(*store.Store)
	useListing, prev := isStore && c.enabled(), c.traces()
	go func() {
		var l listed
		if useListing {
			l.refs, l.listing, l.err = ls.TraceRefsListing(ctx, prev)
		} else {
			l.refs, l.err = st.TraceRefs(ctx, "")
		}
		listCh <- l
	}()
	var traceList *listed
	tracesListed := func() *listed {
		if traceList == nil {
			l := <-listCh
			traceList = &l
		}
		return traceList
	}
	defer tracesListed() // never return with the listing running

	c.stat(files)
	tl.mark("stat entries")
	var mu sync.Mutex
	read := func(f *entryFile) error {
		if f.facts {
			v, err := st.Facts(ctx, f.key.Domain, f.key.IntentKey)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				return in.broken(f.key, err)
			}
			f.full, f.sum = v, factsSummary(v)
			return nil
		}
		v, err := st.Experience(ctx, f.key.Domain, f.key.IntentKey)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			return in.broken(f.key, err)
		}
		f.full, f.sum = v, experienceSummary(v)
		return nil
	}
	var miss []*entryFile
	for _, f := range files {
		if !c.lookup(f) {
			miss = append(miss, f)
		}
	}
	c.dropFiles()
	if err := parallel(ctx, len(miss), func(i int) error { return read(miss[i]) }); err != nil {
		return in, saved, err
	}
	tl.mark("read changed entries")
	byKey := make(map[Key][2]*entryFile, len(files)/2+1)
	n := 0
	for _, f := range files {
		if f.sum != nil && !f.facts {
			n += len(f.sum.Evidence)
		}
	}
	in.Folded = make(map[string]Key, n) // ~100,000 ids at 100k traces: grown, it rehashes many times
	for _, f := range files {
		if f.sum == nil {
			continue // broken
		}
		pair := byKey[f.key]
		if f.facts {
			pair[1] = f
		} else {
			pair[0] = f
			for _, ev := range f.sum.Evidence {
				in.Folded[ev.Trace] = f.key
			}
		}
		byKey[f.key] = pair
	}

	l := tracesListed()
	listing := l.listing
	in.Refs, err = l.refs, l.err
	c.dropTraces(listing)
	if err != nil {
		return in, saved, fmt.Errorf("listing traces: %w", err)
	}
	tl.mark("list traces")
	var todo []engine.TraceRef
	for _, r := range in.Refs {
		if _, ok := in.Folded[r.ID]; !ok {
			todo = append(todo, r)
		}
	}
	traces := make([]*engine.Trace, len(todo))
	done := 0
	err = parallel(ctx, len(todo), func(i int) error {
		t, err := st.Trace(ctx, todo[i])
		mu.Lock()
		defer mu.Unlock()
		done++
		if opts.Progress != nil && (done%250 == 0 || done == len(todo)) {
			opts.Progress("read", done, len(todo))
		}
		switch {
		case errors.Is(err, engine.ErrNotFound):
			return nil // deleted meanwhile
		case errors.Is(err, engine.ErrCorrupt):
			in.Warnings = append(in.Warnings, fmt.Sprintf("%v: it is not folded; fix or delete it", err))
			return nil
		case err != nil:
			return err
		}
		traces[i] = t
		return nil
	})
	if err != nil {
		return in, saved, err
	}
	tl.mark("decode new traces")
	touched := map[Key]bool{}
	for _, t := range traces {
		if t != nil {
			in.Traces = append(in.Traces, t)
			touched[Key{t.Domain, t.IntentKey}] = true
		}
	}
	// The site entries of the domains with new runs, which they feed.
	if ss, ok := st.(engine.SiteStore); ok {
		seen := map[string]bool{}
		for k := range touched {
			if seen[k.Domain] {
				continue
			}
			seen[k.Domain] = true
			s, err := ss.Site(ctx, k.Domain)
			switch {
			case err == nil:
				if in.Sites == nil {
					in.Sites = map[string]*engine.Site{}
				}
				in.Sites[k.Domain] = s
			case errors.Is(err, engine.ErrNotFound):
			case errors.Is(err, engine.ErrCorrupt):
				if in.BrokenSites == nil {
					in.BrokenSites = map[string]string{}
				}
				in.BrokenSites[k.Domain] = err.Error()
			default:
				return in, saved, fmt.Errorf("reading the site entry of %s: %w", k.Domain, err)
			}
		}
	}
	tl.mark("read sites")
	// Verdicts: every one is read (they are small); an entry is loaded in
	// full when one of its verdicts is not folded yet.
	if vs, ok := st.(engine.VerdictStore); ok {
		all, err := vs.Verdicts(ctx, "")
		if err != nil {
			return in, saved, fmt.Errorf("listing verdicts: %w", err)
		}
		in.Verdicts = all
		// The evidence of the judged traces only (not a copy of every
		// item: megabytes at 100k traces, at the run's peak of memory).
		judged := make(map[string]bool, len(all))
		for _, v := range all {
			judged[v.Trace] = true
		}
		applied := map[string]engine.Evidence{}
		for _, pair := range byKey {
			if pair[0] != nil && len(judged) > 0 {
				for _, ev := range pair[0].sum.Evidence {
					if judged[ev.Trace] {
						applied[ev.Trace] = ev
					}
				}
			}
		}
		for _, v := range all {
			ev, ok := applied[v.Trace]
			if !ok {
				touched[Key{v.Domain, v.IntentKey}] = true // its trace is not folded yet
				continue
			}
			if e := ev; engine.ApplyVerdict(&e, v) {
				touched[Key{v.Domain, v.IntentKey}] = true
			}
		}
	}

	tl.mark("verdicts")
	// Load in full what the plan can change.
	var need []*entryFile
	for k, pair := range byKey {
		if !opts.All && !touched[k] && !mayMove(pair[0], pair[1], opts.Now, in.Policy) {
			continue
		}
		for _, f := range pair {
			if f != nil && f.full == nil {
				need = append(need, f)
			}
		}
	}
	if err := parallel(ctx, len(need), func(i int) error { return read(need[i]) }); err != nil {
		return in, saved, err
	}
	for k, pair := range byKey {
		if !opts.All && !touched[k] && !mayMove(pair[0], pair[1], opts.Now, in.Policy) {
			continue
		}
		if f := pair[0]; f != nil && f.full != nil {
			in.Experience[k] = f.full.(*engine.Experience)
		}
		if f := pair[1]; f != nil && f.full != nil {
			in.Facts[k] = f.full.(*engine.Facts)
		}
	}
	tl.mark("read entries to change")
	// Links the listings met are reported, never silently skipped.
	if l, ok := st.(interface{ SkippedLinks() []string }); ok {
		in.Warnings = append(in.Warnings, l.SkippedLinks()...)
	}
	// The cache is written from what was read here, which nothing changes
	// after (the plan works on in's own values, not on the summaries).
	savedCh := make(chan struct{})
	go func() {
		defer close(savedCh)
		c.save(files, listing)
	}()
	return in, func() { <-savedCh }, nil
}

// mayMove reports whether an entry with no new traces changes at now: its
// status moves (decay) or its revision was never set. It mirrors planEntry.
func mayMove(x, f *entryFile, now time.Time, p engine.Policy) bool {
	if x != nil && (&engine.Experience{Evidence: x.sum.Evidence}).Compactable(now, p) > 0 {
		return true // evidence to compact (Plan compacts every entry it loads)
	}
	if f == nil || x == nil || len(x.sum.Evidence) == 0 && x.sum.Digest == nil {
		return false
	}
	if f.sum.Revision == "" && f.sum.Status != engine.Retired {
		return true
	}
	sc := engine.ScoreOf(x.sum.Evidence, x.sum.Digest, now, p)
	next, _ := engine.NextStatus(f.sum.Status, sc, f.sum.PageText, p)
	cur := f.sum.Status
	return next != cur
}

// broken records an entry that could not be read: a corrupt file is a
// warning and keeps the entry out of the plan; any other error is returned.
func (in *Input) broken(k Key, err error) error {
	if !errors.Is(err, engine.ErrCorrupt) {
		return err
	}
	if in.Broken == nil {
		in.Broken = map[Key]string{}
	}
	in.Broken[k] = err.Error()
	in.Warnings = append(in.Warnings, fmt.Sprintf("%v: %s is left alone until the file is fixed", err, k))
	return nil
}

// parallel runs fn(0..n-1) on GOMAXPROCS workers and returns the first error.
func parallel(ctx context.Context, n int, fn func(i int) error) error {
	return parallelN(ctx, n, runtime.GOMAXPROCS(0), fn)
}

// parallelN runs fn(0..n-1) on the given number of workers and returns the
// first error; after an error (or ctx's end) no new call starts.
func parallelN(ctx context.Context, n, workers int, fn func(i int) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(1, min(workers, n)))
	for i := 0; i < n; i++ {
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err
			}
			return fn(i)
		})
	}
	return g.Wait()
}
