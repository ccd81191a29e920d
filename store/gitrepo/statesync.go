package gitrepo

// statesync.go: pem sync's half for the state ref (state.go). Agents add
// traces to the state (add-only commits); a consolidator folds them and
// rewrites the experience, and its snapshots have no parent. Sync reconciles
// the local and the remote state without merges:
//
//   - the merge base is found through parents and, for a snapshot, the
//     commit it replaced (its "Replaces:" trailer), so a consolidator's
//     snapshot is a descendant of the state it was made from;
//   - whichever side has only add-only commits since the base (trace files
//     added, nothing else) is replayed onto the other side's tip — an
//     agent's traces onto a consolidator's snapshot, or the traces agents
//     pushed during a consolidation onto the consolidator's new snapshot;
//   - when both sides consolidated (two consolidators), the remote's state
//     is taken and the local add-only commits since the local consolidation
//     are replayed onto it: no trace is lost, and the next consolidation
//     folds again (folds are idempotent).
//
// The result is materialized on disk (files that changed written, traces the
// state no longer holds removed, pending traces kept) and pushed with a
// lease: only if the remote still has the state fetched; a lost race is
// retried from the fetch like main's push (syncretry.go).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// replacesTrailer names, in a snapshot's message, the state commit it
// replaced.
const replacesTrailer = "Replaces: "

// testHookBeforeStatePush runs between the fetch and the state's push: the
// lease test pushes from another clone there.
var testHookBeforeStatePush = func() {}

// stateTracking is where sync keeps the remote's state: go-git's lease
// (PushOptions.ForceWithLease) reads the remote-tracking ref of the pushed
// local ref at refs/remotes/<remote>/<local ref without refs/heads/>, so for
// refs/pem/state that is refs/remotes/<remote>/refs/pem/state.
func stateTracking(remote string) plumbing.ReferenceName {
	return plumbing.ReferenceName("refs/remotes/" + remote + "/" + StateRef.String())
}

// stateFetchSpec fetches the remote's refs/pem/* (a pattern: a remote that
// has no state yet is no error).
func stateFetchSpec(remote string) config.RefSpec {
	return config.RefSpec("+refs/pem/*:refs/remotes/" + remote + "/refs/pem/*")
}

// maxStateWalk bounds the walks of the state's history (it is bounded by
// snapshots: DefaultStateMaxChain commits plus the agents' since).
const maxStateWalk = 100000

// stateParent is c's parent in the state's history: its first parent, or
// for a snapshot the commit it replaced (zero for a root).
func stateParent(c *object.Commit) plumbing.Hash {
	if len(c.ParentHashes) > 0 {
		return c.ParentHashes[0]
	}
	for _, l := range strings.Split(c.Message, "\n") {
		if v, ok := strings.CutPrefix(l, replacesTrailer); ok && plumbing.IsHash(strings.TrimSpace(v)) {
			return plumbing.NewHash(strings.TrimSpace(v))
		}
	}
	return plumbing.ZeroHash
}

// stateChain lists the commits from tip back along stateParent, newest
// first, until stop (excluded) or a commit that is not here (a shallow
// state: depth 1 after pem clone).
func (h *History) stateChain(tip, stop plumbing.Hash) ([]*object.Commit, error) {
	var out []*object.Commit
	for c := tip; !c.IsZero() && c != stop && len(out) < maxStateWalk; {
		co, err := h.repo.CommitObject(c)
		if errors.Is(err, plumbing.ErrObjectNotFound) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("sync: reading state commit %s: %w", c, err)
		}
		out = append(out, co)
		c = stateParent(co)
	}
	return out, nil
}

// stateBase is the newest commit of b's state chain that is also in a's.
func (h *History) stateBase(a, b plumbing.Hash) (plumbing.Hash, error) {
	ca, err := h.stateChain(a, plumbing.ZeroHash)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	in := map[plumbing.Hash]bool{a: true}
	for _, c := range ca {
		in[c.Hash] = true
	}
	for c := b; !c.IsZero(); {
		if in[c] {
			return c, nil
		}
		co, err := h.repo.CommitObject(c)
		if errors.Is(err, plumbing.ErrObjectNotFound) {
			return plumbing.ZeroHash, nil
		}
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("sync: reading state commit %s: %w", c, err)
		}
		c = stateParent(co)
	}
	return plumbing.ZeroHash, nil
}

// addedTraces returns the files c adds, when c only adds trace files (ok);
// a snapshot is never add-only.
func (h *History) addedTraces(ctx context.Context, c *object.Commit, opt SyncOptions) (files []gitlogFile, ok bool, err error) {
	var parentTree plumbing.Hash
	switch {
	case len(c.ParentHashes) > 1:
		return nil, false, nil
	case len(c.ParentHashes) == 1:
		p, err := h.repo.CommitObject(c.ParentHashes[0])
		if err != nil {
			return nil, false, fmt.Errorf("sync: reading parent of state commit %s: %w", c.Hash, err)
		}
		parentTree = p.TreeHash
	case !stateParent(c).IsZero():
		return nil, false, nil // a snapshot
	}
	ok = true
	err = h.diffTrees(ctx, "", parentTree, c.TreeHash, func(ch FileChange) error {
		if !ch.Added() || !strings.HasPrefix(ch.Path, h.prefix+opt.TracesDir+"/") {
			ok = false
			return nil
		}
		files = append(files, gitlogFile{path: ch.Path, hash: plumbing.NewHash(ch.To), mode: ch.ToMode})
		return nil
	})
	return files, ok && err == nil, err
}

// replayState puts the add-only commits (newest first) onto tip, oldest
// first; a commit whose traces tip has already makes none.
func (h *History) replayState(ctx context.Context, tip plumbing.Hash, commits []*object.Commit, opt SyncOptions) (plumbing.Hash, int, error) {
	n := 0
	for i := len(commits) - 1; i >= 0; i-- {
		c := commits[i]
		files, ok, err := h.addedTraces(ctx, c, opt)
		if err != nil {
			return plumbing.ZeroHash, 0, err
		}
		if !ok {
			return plumbing.ZeroHash, 0, fmt.Errorf("sync: state commit %s %q is not add-only: report this (pem only replays commits that add traces)", c.Hash.String()[:10], gitlogInfo(c).Subject)
		}
		tc, err := h.repo.CommitObject(tip)
		if err != nil {
			return plumbing.ZeroHash, 0, fmt.Errorf("sync: reading state commit %s: %w", tip, err)
		}
		var add []gitlogFile
		for _, f := range files {
			e, have, err := h.lookup(tc.TreeHash, f.path)
			if err != nil {
				return plumbing.ZeroHash, 0, err
			}
			if have && e.Hash != f.hash {
				return plumbing.ZeroHash, 0, fmt.Errorf("sync: %s differs between state commit %s and the other side's state: traces are immutable; inspect both versions with git", f.path, c.Hash.String()[:10])
			}
			if !have {
				add = append(add, f)
			}
		}
		if len(add) == 0 {
			continue
		}
		tree, err := gitlogPutFiles(h.repo.Storer, tc.TreeHash, add)
		if err != nil {
			return plumbing.ZeroHash, 0, err
		}
		nc := &object.Commit{Author: c.Author, Committer: object.Signature{Name: opt.Name, Email: opt.Email, When: opt.Now()},
			Message: c.Message, TreeHash: tree, ParentHashes: []plumbing.Hash{tip}}
		if tip, err = gitlogStore(h.repo.Storer, nc); err != nil {
			return plumbing.ZeroHash, 0, err
		}
		n++
	}
	return tip, n, nil
}

// addOnlySuffix is the commits of chain (newest first) before its first
// commit that is not add-only.
func (h *History) addOnlySuffix(ctx context.Context, chain []*object.Commit, opt SyncOptions) ([]*object.Commit, bool, error) {
	for i, c := range chain {
		_, ok, err := h.addedTraces(ctx, c, opt)
		if err != nil {
			return nil, false, err
		}
		if !ok {
			return chain[:i], false, nil
		}
	}
	return chain, true, nil
}

// reconcileState returns the state to keep from the local tip l and the
// remote's r (either zero when absent), the commits replayed, and a note
// for the user when two consolidations diverged.
func (h *History) reconcileState(ctx context.Context, l, r plumbing.Hash, opt SyncOptions) (plumbing.Hash, int, string, error) {
	switch {
	case r.IsZero() || l == r:
		return l, 0, "", nil
	case l.IsZero():
		return r, 0, "", nil
	}
	base, err := h.stateBase(l, r)
	if err != nil {
		return plumbing.ZeroHash, 0, "", err
	}
	switch base {
	case r:
		return l, 0, "", nil // local is ahead (also a local snapshot of r)
	case l:
		return r, 0, "", nil
	}
	local, err := h.stateChain(l, base)
	if err != nil {
		return plumbing.ZeroHash, 0, "", err
	}
	remote, err := h.stateChain(r, base)
	if err != nil {
		return plumbing.ZeroHash, 0, "", err
	}
	// With no common commit (two clones that started the state apart) an
	// add-only side is replayed all the same: traces only add files.
	localAdds, localOnly, err := h.addOnlySuffix(ctx, local, opt)
	if err != nil {
		return plumbing.ZeroHash, 0, "", err
	}
	if localOnly {
		tip, n, err := h.replayState(ctx, r, local, opt)
		return tip, n, "", err
	}
	if remoteAdds, remoteOnly, err := h.addOnlySuffix(ctx, remote, opt); err != nil {
		return plumbing.ZeroHash, 0, "", err
	} else if remoteOnly {
		// Traces pushed while this clone consolidated: onto its snapshot.
		tip, n, err := h.replayState(ctx, l, remoteAdds, opt)
		return tip, n, "", err
	}
	// Both sides consolidated since they last met: the remote's state wins,
	// and the traces added here since the local consolidation go on top.
	tip, n, err := h.replayState(ctx, r, localAdds, opt)
	if err != nil {
		return plumbing.ZeroHash, 0, "", err
	}
	note := fmt.Sprintf("the local state and %s's were both consolidated since they last met: took %s's state and kept the %d local trace commit(s) on top; the next consolidation folds again (nothing is counted twice)", opt.Remote, opt.Remote, n)
	return tip, n, note, nil
}

// materializeState brings the state's files on disk from the tree of state
// commit from (zero: none) to to's: files that changed are written, files
// to no longer holds are removed; files on disk that are in neither (pending
// traces) are left alone. A file that differs on disk from both versions (and
// from main's, for a tree whose main still tracks it) stops it before
// anything is written.
func (h *History) materializeState(ctx context.Context, from, to plumbing.Hash, only ...string) (int, error) {
	if from == to {
		return 0, nil
	}
	treeOf := func(c plumbing.Hash) (plumbing.Hash, error) {
		if c.IsZero() {
			return plumbing.ZeroHash, nil
		}
		co, err := h.repo.CommitObject(c)
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("sync: reading state commit %s: %w", c, err)
		}
		return co.TreeHash, nil
	}
	ft, err := treeOf(from)
	if err != nil {
		return 0, err
	}
	tt, err := treeOf(to)
	if err != nil {
		return 0, err
	}
	var changes []FileChange
	if err := h.diffTrees(ctx, "", ft, tt, func(c FileChange) error {
		if len(only) > 0 && !under(c.Path, only) {
			return nil
		}
		changes = append(changes, c)
		return nil
	}); err != nil {
		return 0, err
	}
	var headTree plumbing.Hash
	if ref, err := h.repo.Head(); err == nil {
		if c, err := h.repo.CommitObject(ref.Hash()); err == nil {
			headTree = c.TreeHash
		}
	}
	for _, c := range changes {
		name := filepath.Join(h.root, filepath.FromSlash(c.Path))
		cur, err := gitlogHashFile(name)
		if err != nil {
			return 0, err
		}
		if cur == "" || cur == c.From || cur == c.To {
			continue
		}
		if e, ok, err := h.lookup(headTree, c.Path); err != nil {
			return 0, err
		} else if ok && e.Hash.String() == cur {
			continue // main's version: the state's is newer
		}
		if c.Deleted() {
			continue // not the state's file: left alone below
		}
		return 0, fmt.Errorf("sync: %s has local changes that the state from the remote would overwrite: move them aside, then sync again", c.Path)
	}
	n := 0
	for _, c := range changes {
		name := filepath.Join(h.root, filepath.FromSlash(c.Path))
		if c.Deleted() {
			cur, err := gitlogHashFile(name)
			if err != nil {
				return n, err
			}
			if cur == c.From {
				if err := os.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
					return n, fmt.Errorf("sync: removing %s: %w", c.Path, err)
				}
				n++
			}
			continue
		}
		if cur, err := gitlogHashFile(name); err != nil {
			return n, err
		} else if cur == c.To {
			continue // already there (a clone's experience, a trace saved here)
		}
		if c.ToMode != filemode.Regular && c.ToMode != filemode.Executable {
			return n, fmt.Errorf("sync: %s in the state is a %s; pem trees hold regular files only: inspect %s", c.Path, c.ToMode, StateRef)
		}
		data, err := h.Blob(ctx, c.To, 1<<30)
		if err != nil {
			return n, err
		}
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			return n, fmt.Errorf("sync: %w", err)
		}
		if err := gitlogWriteFile(name, data, 0o644); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// commitPendingState commits the trace files on disk that neither the local
// state nor main's HEAD has, as one add-only commit on the local state ref.
func (h *History) commitPendingState(ctx context.Context, opt SyncOptions) (int, error) {
	r := h.st
	var stateTree, headTree plumbing.Hash
	if tip, err := r.refValue(StateRef); err != nil {
		return 0, err
	} else if !tip.IsZero() {
		c, err := h.repo.CommitObject(tip)
		if err != nil {
			return 0, fmt.Errorf("sync: reading %s: %w", StateRef, err)
		}
		stateTree = c.TreeHash
	}
	if _, head, err := r.head(); err != nil {
		return 0, err
	} else if !head.IsZero() {
		c, err := h.repo.CommitObject(head)
		if err != nil {
			return 0, fmt.Errorf("sync: reading HEAD: %w", err)
		}
		headTree = c.TreeHash
	}
	tracesRoot := filepath.Join(h.root, filepath.FromSlash(h.prefix), opt.TracesDir)
	var paths []string
	type names map[string]bool
	dirs := map[string][2]names{}
	list := func(tree plumbing.Hash, dir string) (names, error) {
		have := names{}
		e, found, err := h.lookup(tree, dir)
		if err != nil || !found || e.Mode != filemode.Dir {
			return have, err
		}
		t, err := h.tree(e.Hash)
		if err != nil {
			return nil, err
		}
		for _, te := range t.Entries {
			have[te.Name] = true
		}
		return have, nil
	}
	err := filepath.WalkDir(tracesRoot, func(name string, d os.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, os.ErrNotExist) && name == tracesRoot {
				return filepath.SkipDir
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.IsDir() || !d.Type().IsRegular() || !strings.HasSuffix(d.Name(), opt.TraceExt) || strings.HasPrefix(d.Name(), ".") {
			return nil
		}
		rel, err := filepath.Rel(h.root, name)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		dir, base := path.Split(rel)
		dir = strings.TrimSuffix(dir, "/")
		have, ok := dirs[dir]
		if !ok {
			if have[0], err = list(stateTree, dir); err != nil {
				return err
			}
			if have[1], err = list(headTree, dir); err != nil {
				return err
			}
			dirs[dir] = have
		}
		if !have[0][base] && !have[1][base] {
			paths = append(paths, strings.TrimPrefix(rel, h.prefix))
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("sync: listing pending traces: %w", err)
	}
	if len(paths) == 0 {
		return 0, nil
	}
	req := &StateRequest{Dirs: []string{opt.TracesDir}, Paths: paths, KeepMain: true,
		Message: fmt.Sprintf("pem: add %d trace(s)", len(paths))}
	if _, _, err := h.r.commitStateRef(ctx, req, Signature{Name: opt.Name, Email: opt.Email, When: opt.Now()}); err != nil {
		return 0, fmt.Errorf("sync: committing pending traces on %s: %w", StateRef, err)
	}
	return len(paths), nil
}

// syncState reconciles the local state with the remote's (fetched into
// stateTracking), materializes it and pushes it with a lease.
func (h *History) syncState(ctx context.Context, opt SyncOptions, res *SyncResult) error {
	tracking := stateTracking(opt.Remote)
	l, err := h.st.refValue(StateRef)
	if err != nil {
		return err
	}
	r, err := h.st.refValue(tracking)
	if err != nil {
		return err
	}
	n, replayed, note, err := h.reconcileState(ctx, l, r, opt)
	if err != nil {
		return err
	}
	if note != "" {
		res.Notes = append(res.Notes, note)
	}
	res.StateReplayed += replayed
	if n != l {
		res.StateTaken = res.StateTaken || !r.IsZero()
		files, err := h.materializeState(ctx, l, n)
		if err != nil {
			return err
		}
		res.StateFiles += files
		if err := h.st.moveRef(StateRef, l, n); err != nil {
			return fmt.Errorf("sync: moving %s: %w", StateRef, err)
		}
		h.r.invalidate()
	}
	if !n.IsZero() {
		res.State = n.String()
	}
	if n.IsZero() || n == r {
		return nil
	}
	spec := config.RefSpec(StateRef.String() + ":" + StateRef.String())
	var lease *git.ForceWithLease
	if !r.IsZero() {
		// Forced (a snapshot is no descendant), but only over the state
		// fetched: the remote refuses when another writer moved it since.
		spec = "+" + spec
		lease = &git.ForceWithLease{RefName: StateRef, Hash: r}
	}
	testHookBeforeStatePush()
	err = h.repo.PushContext(ctx, &git.PushOptions{RemoteName: opt.Remote, RefSpecs: []config.RefSpec{spec}, Auth: opt.Auth, ForceWithLease: lease})
	if errors.Is(err, git.NoErrAlreadyUpToDate) {
		return nil
	}
	if lostRace(err) {
		return &lostPush{err}
	}
	if err != nil && refused(err) {
		return fmt.Errorf("sync: pushing %s to %s: %w: %w", StateRef, opt.Remote, ErrRemoteRefused, err)
	}
	if err != nil {
		return fmt.Errorf("sync: pushing %s to %s: %w", StateRef, opt.Remote, err)
	}
	res.StatePushed = true
	_ = h.repo.Storer.SetReference(plumbing.NewHashReference(tracking, n))
	return nil
}
