package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/go-git/go-git/v5/plumbing"
)

// StateLog is Log over the state ref (state.go): the state commits, newest
// first, that changed any of paths (relative to the knowledge tree), with
// what they changed. The state's history is bounded: it starts at its last
// snapshot — a snapshot whose replaced commit is still in the repository
// (this clone made it, before a gc) is compared with that commit, else with
// nothing (its files are all "added") and the walk ends there. Experience
// changes from before the state ref are on the branch (Log). It stops after
// limit entries (0: no limit); no state ref: no entries. A commit seen
// before is read from the log cache (logcache.go), as in Log.
func (h *History) StateLog(ctx context.Context, paths []string, limit int) ([]LogEntry, error) {
	if len(paths) == 0 {
		paths = []string{""}
	}
	tip, err := h.st.refValue(StateRef)
	if err != nil || tip.IsZero() {
		return nil, err
	}
	roots := logCacheRoots(paths)
	cached := roots != nil
	if cached {
		if h.logs == nil {
			h.logs = loadLogCache(h.st.common, h.prefix)
		}
		defer h.logs.save(h.prefix)
	}
	var out []LogEntry
	for cur := tip; !cur.IsZero() && len(out) < maxStateWalk; {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		r, err := h.stateRecord(ctx, cur, roots, paths)
		if err != nil || r == nil {
			return out, err // nil: a shallow state (pem clone)
		}
		changes := r.selected
		if cached {
			changes = r.selectPaths(paths)
		}
		if len(changes) > 0 {
			out = append(out, r.entry(changes))
			if limit > 0 && len(out) >= limit {
				break
			}
		}
		cur = r.firstParent()
	}
	return out, nil
}

// stateRecord is what the state's walk needs of the commit hash: the commit
// it is compared with (in parents: none, or its stateParent when the
// repository still has it), its commit info and its changes — below the
// cached roots into the log cache when cached, else only below paths (in
// selected). nil: the commit is not in the repository.
func (h *History) stateRecord(ctx context.Context, hash plumbing.Hash, roots, paths []string) (*logRec, error) {
	key := logKey{hash, true}
	cached := roots != nil
	old, ok := h.logs.lookup(key, cached)
	if ok && old.covers(roots) && (len(old.parents) == 0 || h.hasObject(old.parents[0])) {
		return old, nil // compared with its parent only while that is there (a gc drops what a snapshot replaced)
	}
	if ok {
		roots = old.union(roots)
	}
	c, err := h.commitObject(hash)
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s commit %s: %w", StateRef, hash, err)
	}
	parent := stateParent(c)
	var ptree plumbing.Hash
	keep := cached
	if !parent.IsZero() {
		p, err := h.commitObject(parent)
		switch {
		case errors.Is(err, plumbing.ErrObjectNotFound):
			// Gone (gc, or shallow): the walk ends here. Not cached: were
			// the commit fetched again, the walk would compare with it.
			parent, keep = plumbing.ZeroHash, false
		case err != nil:
			return nil, fmt.Errorf("reading %s commit %s: %w", StateRef, parent, err)
		default:
			ptree = p.TreeHash
		}
	}
	ci := gitlogInfo(c)
	r := &logRec{info: &ci}
	if !parent.IsZero() {
		r.parents = []plumbing.Hash{parent}
	}
	if !cached {
		r.selected, err = h.pathChanges(ctx, ptree, c.TreeHash, paths)
		return r, err
	}
	r.roots = roots
	if r.changes, err = h.rootChanges(ctx, ptree, c.TreeHash, roots); err != nil {
		return nil, err
	}
	if keep {
		h.logs.add(key, r)
	}
	return r, nil
}

// hasObject reports whether the repository has the object: in a pack (the
// direct reader's indexes), else as go-git finds it (loose, alternates).
func (h *History) hasObject(hash plumbing.Hash) bool {
	if h.packs == nil {
		h.packs = gitlogOpenPacks(filepath.Join(h.st.common, "objects", "pack"))
	}
	for _, p := range h.packs.packs {
		if p.offset(hash) >= 0 {
			return true
		}
	}
	hex := hash.String()
	if _, err := os.Stat(filepath.Join(h.st.common, "objects", hex[:2], hex[2:])); err == nil {
		return true
	}
	return h.repo.Storer.HasEncodedObject(hash) == nil
}
