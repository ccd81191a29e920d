package gitrepo

// state.go: the tree's derived state on its own ref (docs/scale.md).
//
// Traces and experience are derived and ephemeral: consolidation folds a
// trace into an entry's experience and deletes the trace after ttl_days, and
// rewrites an entry's experience at every fold. Kept on the main branch,
// every version of them stays in the history every full clone fetches
// (docs/scale.md: 7 GiB a year at 10,000 runs a day). So they live on
// StateRef, a ref outside refs/heads (a plain `git clone` does not fetch it),
// whose commits hold only the state's directories; main keeps facts/,
// pem.yaml and the other top-level files, and every `pem: verify` commit.
//
// The state's history is bounded: a state commit is written with no parent
// (a snapshot of the live traces and experience: squashed) when the caller
// asks (consolidation does when it expires traces) or when the chain since
// the last snapshot holds StateRequest.MaxChain commits. The objects of what
// a snapshot no longer holds (expired traces, old experience versions) are
// then reachable from nothing and leave with the next gc.
//
// A state commit is built like CommitSeries's: the blobs of exactly the given
// paths, read from disk, onto the state tip's tree, no status scan. Files that
// main still tracks under the state's directories (an old-style tree, or
// traces a trace-only pull request merged) are moved: the state commit takes
// the ones it lacks (their blobs are in the repository already) and a commit
// on main untracks them all — the files stay on disk, ignored by the tree's
// .gitignore. The state commit is made first: a run killed between the two
// finds on main what it has not untracked yet and moves it again.

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// StateRef holds the tree's traces and experience (see state.go).
const StateRef = plumbing.ReferenceName("refs/pem/state")

// DefaultStateMaxChain is how many commits the state's chain holds before
// the next state commit is a snapshot, when consolidation asks for none
// sooner (it does whenever it expires traces).
const DefaultStateMaxChain = 64

// StateRequest is the state commit of a series (BeginStateSeries).
type StateRequest struct {
	// Dirs are the tree's directories the state holds (store.TracesDir,
	// store.ExperienceDir), relative to the tree. Main tracks none of them
	// after the series.
	Dirs []string `json:"dirs"`
	// Paths are files under Dirs, relative to the tree, set from disk: added
	// or updated, or removed when the file is missing.
	Paths   []string `json:"paths"`
	Message string   `json:"message"`
	// Squash writes the commit with no parent (a snapshot).
	Squash bool `json:"squash,omitempty"`
	// MaxChain squashes when the chain since the last snapshot holds this
	// many commits; 0: never for that reason.
	MaxChain int `json:"max_chain,omitempty"`
	// MainPaths are files committed on main with the commit that untracks
	// the moved files (the .gitignore that ignores Dirs).
	MainPaths []string `json:"main_paths,omitempty"`
	// MoveMessage is that commit's message.
	MoveMessage string `json:"move_message,omitempty"`
	// KeepMain leaves main alone: nothing is moved (sync's commit of
	// pending traces, which must stay add-only).
	KeepMain bool `json:"keep_main,omitempty"`
}

// StateCommit is what a state commit did.
type StateCommit struct {
	Hash     string // the new state commit, "" when nothing changed
	Squashed bool   // it has no parent, and the state had a tip before
	Moved    int    // files main tracked under the state's directories, now untracked there
	Move     string // the main commit that untracked them (and MainPaths), or ""
}

// StateTip returns the state ref's commit, or "" when there is none.
func (R *Repo) StateTip() (string, error) {
	h, err := R.r.refValue(StateRef)
	if err != nil || h.IsZero() {
		return "", err
	}
	return h.String(), nil
}

// TracksState reports whether main's HEAD still tracks files under any of
// dirs (relative to the tree): an old-style tree, or traces a pull request
// merged. Two tree lookups.
func (R *Repo) TracksState(dirs []string) (bool, error) {
	r := R.r.session()
	_, head, err := r.head()
	if err != nil || head.IsZero() {
		return false, err
	}
	c, err := object.GetCommit(r.st, head)
	if err != nil {
		return false, fmt.Errorf("reading HEAD commit %s in %s: %w", head, r.gitDir, err)
	}
	for _, d := range dirs {
		rp, err := r.repoPath(d)
		if err != nil {
			return false, err
		}
		e, ok, err := r.lookupTree(c.TreeHash, rp)
		if err != nil {
			return false, err
		}
		if ok && e.Mode == filemode.Dir {
			return true, nil
		}
	}
	return false, nil
}

// CommitState makes the state commit req and then, when main tracks files
// under req.Dirs, the main commit that untracks them (see state.go).
func (R *Repo) CommitState(ctx context.Context, req *StateRequest, sig Signature) (*StateCommit, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sig = sig.orDefault()
	res, moved, err := R.commitStateRef(ctx, req, sig)
	if err != nil {
		return nil, err
	}
	if len(moved) == 0 {
		return res, nil
	}
	msg := req.MoveMessage
	if msg == "" {
		msg = fmt.Sprintf("pem: move %s to %s (%d files; they stay on disk)", strings.Join(req.Dirs, "/ and ")+"/", StateRef, len(moved))
	}
	hs, err := R.commitSeries(ctx, []CommitRequest{{Paths: req.MainPaths, Message: msg}}, sig, moved)
	if err != nil {
		return res, fmt.Errorf("untracking %d files now on %s from the branch: %w", len(moved), StateRef, err)
	}
	res.Moved, res.Move = len(moved), hs[0]
	return res, nil
}

// commitStateRef writes the state commit and moves StateRef; it returns the
// repository paths main tracks under req.Dirs (to untrack).
func (R *Repo) commitStateRef(ctx context.Context, req *StateRequest, sig Signature) (*StateCommit, []string, error) {
	r := R.r.session()
	defer R.invalidate()
	if err := r.cleanStale(); err != nil {
		return nil, nil, err
	}
	release, err := r.markOwner()
	if err != nil {
		return nil, nil, err
	}
	defer release()

	var dirs []string
	for _, d := range req.Dirs {
		rp, err := r.repoPath(d)
		if err != nil {
			return nil, nil, err
		}
		dirs = append(dirs, rp)
	}
	tip, err := r.refValue(StateRef)
	if err != nil {
		return nil, nil, err
	}
	var base plumbing.Hash
	if !tip.IsZero() {
		c, err := object.GetCommit(r.st, tip)
		if err != nil {
			return nil, nil, fmt.Errorf("reading %s commit %s in %s: %w", StateRef, tip, r.gitDir, err)
		}
		base = c.TreeHash
	}

	// What main still tracks under the state's directories moves over.
	changes := map[string]*fileState{}
	var moved []string
	_, head, err := r.head()
	if err != nil {
		return nil, nil, err
	}
	if !head.IsZero() && !req.KeepMain {
		hc, err := object.GetCommit(r.st, head)
		if err != nil {
			return nil, nil, fmt.Errorf("reading HEAD commit %s in %s: %w", head, r.gitDir, err)
		}
		for _, d := range dirs {
			e, ok, err := r.lookupTree(hc.TreeHash, d)
			if err != nil {
				return nil, nil, err
			}
			if !ok || e.Mode != filemode.Dir {
				continue
			}
			if err := r.walkFiles(ctx, e.Hash, d, func(p string, fe object.TreeEntry) error {
				moved = append(moved, p)
				if _, have, err := r.lookupTree(base, p); err != nil || have {
					return err // the state's version wins (it is newer)
				}
				changes[p] = &fileState{name: p, hash: fe.Hash, mode: fe.Mode, stored: true}
				return nil
			}); err != nil {
				return nil, nil, err
			}
		}
	}

	// The request's files, from disk.
	var paths []string
	for _, p := range req.Paths {
		rp, err := r.repoPath(p)
		if err != nil {
			return nil, nil, err
		}
		if !under(rp, dirs) {
			return nil, nil, fmt.Errorf("state path %q: %w: not under %s", p, ErrUnsafePathGit, strings.Join(req.Dirs, ", "))
		}
		paths = append(paths, rp)
	}
	states, err := r.readFiles(ctx, base, paths)
	if err != nil {
		return nil, nil, err
	}
	for _, st := range states {
		changes[st.name] = st
	}

	r.deferWrites = true
	newTree, err := r.applyTree(base, changes)
	if err != nil {
		return nil, nil, err
	}
	res := &StateCommit{}
	if newTree == base {
		return res, moved, nil // nothing new (a recovered run, or nothing to fold)
	}
	squash := req.Squash
	if !squash && req.MaxChain > 0 && !tip.IsZero() {
		n, err := r.chainLength(tip, req.MaxChain)
		if err != nil {
			return nil, nil, err
		}
		squash = n >= req.MaxChain
	}
	c := &object.Commit{
		Author:    object.Signature{Name: sig.Name, Email: sig.Email, When: sig.When},
		Committer: object.Signature{Name: sig.Name, Email: sig.Email, When: sig.When},
		Message:   strings.TrimRight(req.Message, "\n") + "\n",
		TreeHash:  newTree,
	}
	switch {
	case !tip.IsZero() && !squash:
		c.ParentHashes = []plumbing.Hash{tip}
	case !tip.IsZero():
		// The snapshot names the state it replaced, so that sync can tell
		// what other clones added since (statesync.go).
		c.Message += "\n" + replacesTrailer + tip.String() + "\n"
	}
	h, err := r.writeEncoded(c)
	if err != nil {
		return nil, nil, fmt.Errorf("writing commit object in %s: %w", r.gitDir, err)
	}
	if err := r.flush(); err != nil {
		return nil, nil, err
	}
	if err := r.moveRef(StateRef, tip, h); err != nil {
		return nil, nil, err
	}
	res.Hash, res.Squashed = h.String(), squash && !tip.IsZero()
	return res, moved, nil
}

func under(p string, dirs []string) bool {
	for _, d := range dirs {
		if strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// chainLength counts the commits from tip along first parents, up to max.
func (r *repo) chainLength(tip plumbing.Hash, max int) (int, error) {
	n := 0
	for h := tip; !h.IsZero() && n < max; n++ {
		c, err := object.GetCommit(r.st, h)
		if errors.Is(err, plumbing.ErrObjectNotFound) {
			return n + 1, nil // a shallow or partial copy: count what is here
		}
		if err != nil {
			return 0, fmt.Errorf("reading %s commit %s in %s: %w", StateRef, h, r.gitDir, err)
		}
		if len(c.ParentHashes) == 0 {
			return n + 1, nil
		}
		h = c.ParentHashes[0]
	}
	return n, nil
}

// lookupTree finds the entry at the repository path p under the tree root
// (zero: none).
func (r *repo) lookupTree(root plumbing.Hash, p string) (object.TreeEntry, bool, error) {
	cur := root
	parts := strings.Split(p, "/")
	for i, name := range parts {
		if cur.IsZero() {
			return object.TreeEntry{}, false, nil
		}
		t, err := r.tree(cur)
		if err != nil {
			return object.TreeEntry{}, false, err
		}
		var found *object.TreeEntry
		for j := range t.Entries {
			if t.Entries[j].Name == name {
				found = &t.Entries[j]
				break
			}
		}
		if found == nil {
			return object.TreeEntry{}, false, nil
		}
		if i == len(parts)-1 {
			return *found, true, nil
		}
		if found.Mode != filemode.Dir {
			return object.TreeEntry{}, false, nil
		}
		cur = found.Hash
	}
	return object.TreeEntry{}, false, nil
}

// walkFiles calls fn for every file under the tree h (at repository path
// dir), depth first.
func (r *repo) walkFiles(ctx context.Context, h plumbing.Hash, dir string, fn func(p string, e object.TreeEntry) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	t, err := r.tree(h)
	if err != nil {
		return err
	}
	for _, e := range t.Entries {
		p := dir + "/" + e.Name
		if e.Mode == filemode.Dir {
			if err := r.walkFiles(ctx, e.Hash, p, fn); err != nil {
				return err
			}
			continue
		}
		if err := fn(p, e); err != nil {
			return err
		}
	}
	return nil
}
