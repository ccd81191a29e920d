package gitrepo

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// CommitToBranch commits files given as bytes (paths relative to the
// knowledge tree; a nil value deletes the path) as one commit whose
// parent is HEAD, and points refs/heads/<branch> at it. The worktree, the
// index and the current branch are untouched: it is how pem proposes changes
// for review (deep-learn's review branch). An existing branch of that name is
// replaced: a proposal branch always starts from the current HEAD.
//
// It returns the commit hash, or "" when the files hold nothing that differs
// from HEAD, or when the branch already holds exactly this change on top of
// HEAD (then the branch is not created or moved).
func (R *Repo) CommitToBranch(ctx context.Context, branch string, files map[string][]byte, msg string, sig Signature) (string, error) {
	name := plumbing.NewBranchReferenceName(branch)
	if err := name.Validate(); err != nil || branch == "" || strings.HasPrefix(branch, "-") {
		return "", fmt.Errorf("branch name %q is not valid: use letters, digits, '/', '-' and '.'", branch)
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	r := R.r.session()
	defer R.invalidate()
	sig = sig.orDefault()
	headRef, parent, err := r.head()
	if err != nil {
		return "", err
	}
	if headRef == name {
		return "", fmt.Errorf("branch %s is checked out: switch to your working branch first, or apply the proposals with --apply", branch)
	}
	var baseTree plumbing.Hash
	if !parent.IsZero() {
		c, err := object.GetCommit(r.st, parent)
		if err != nil {
			return "", fmt.Errorf("reading HEAD commit %s in %s: %w", parent, r.gitDir, err)
		}
		baseTree = c.TreeHash
	}
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	changes := map[string]*fileState{}
	for _, p := range paths {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		rp, err := r.repoPath(p)
		if err != nil {
			return "", err
		}
		data := files[p]
		if data == nil {
			changes[rp] = &fileState{name: rp, deleted: true}
			continue
		}
		changes[rp] = &fileState{name: rp, hash: plumbing.ComputeHash(plumbing.BlobObject, data), mode: filemode.Regular, data: data}
	}
	// The objects are queued and written together below: as one pack when
	// there are many (a deep-learn run proposes thousands of files), not as
	// thousands of loose objects that the next maintenance must repack.
	r.deferWrites = true
	newTree, err := r.applyTree(baseTree, changes)
	if err != nil {
		return "", err
	}
	if newTree == baseTree {
		return "", nil
	}
	old, err := r.refValue(name)
	if err != nil {
		return "", err
	}
	if !old.IsZero() {
		// The same proposal on the same base is there already: leave it.
		if oc, err := object.GetCommit(r.st, old); err == nil && oc.TreeHash == newTree &&
			len(oc.ParentHashes) == 1 && oc.ParentHashes[0] == parent {
			return "", nil
		}
	}
	c := &object.Commit{
		Author:    object.Signature{Name: sig.Name, Email: sig.Email, When: sig.When},
		Committer: object.Signature{Name: sig.Name, Email: sig.Email, When: sig.When},
		Message:   strings.TrimRight(msg, "\n") + "\n",
		TreeHash:  newTree,
	}
	if !parent.IsZero() {
		c.ParentHashes = []plumbing.Hash{parent}
	}
	h, err := r.writeEncoded(c)
	if err != nil {
		return "", fmt.Errorf("writing commit object in %s: %w", r.gitDir, err)
	}
	// A proposal unchanged since the last run is the same blob, and mostly
	// the same trees, as the last review commit's: objects the store holds
	// already (in a pack, where a loose-object check does not see them)
	// are not written again.
	kept := r.pending[:0]
	for _, o := range r.pending {
		if r.st.HasEncodedObject(o.hash) != nil {
			kept = append(kept, o)
		}
	}
	r.pending = kept
	if err := r.flush(); err != nil {
		return "", err
	}
	if err := r.moveRef(name, old, h); err != nil {
		return "", err
	}
	return h.String(), nil
}

// PruneReviewBranches deletes the dated review branches under prefix (e.g.
// "pem/deep-learn/": refs/heads/<prefix><YYYY-MM-DD>) beyond the newest
// keep, and returns the names it deleted. A branch is deleted only when its
// tip is the single commit a proposal run writes — author sig (pem's by
// default), message starting with msgPrefix, one parent — so a branch someone
// committed onto, or one of another name, is never touched; nor is a branch
// checked out in this or a linked worktree, or spare (the one just written).
// keep <= 0 deletes nothing. Deleting a branch removes its ref only: the
// objects go at the next repack or git gc, when nothing else holds them.
func (R *Repo) PruneReviewBranches(ctx context.Context, prefix, msgPrefix, spare string, keep int, sig Signature) ([]string, error) {
	if keep <= 0 {
		return nil, nil
	}
	r := R.r.session()
	defer R.invalidate()
	sig = sig.orDefault()
	refs, err := r.st.IterReferences()
	if err != nil {
		return nil, fmt.Errorf("listing branches in %s: %w", r.common, err)
	}
	var dated []plumbing.ReferenceName
	_ = refs.ForEach(func(ref *plumbing.Reference) error {
		name := ref.Name()
		if !name.IsBranch() {
			return nil
		}
		date, ok := strings.CutPrefix(name.Short(), prefix)
		if ok && len(date) == len("2006-01-02") {
			if _, err := time.Parse("2006-01-02", date); err == nil {
				dated = append(dated, name)
			}
		}
		return nil
	})
	if len(dated) <= keep {
		return nil, nil
	}
	sort.Slice(dated, func(i, j int) bool { return dated[i] > dated[j] }) // newest first
	out := r.checkedOut()
	var pruned []string
	for _, name := range dated[keep:] {
		if err := ctx.Err(); err != nil {
			return pruned, err
		}
		if out[name] || name.Short() == spare {
			continue
		}
		h, err := r.refValue(name)
		if err != nil || h.IsZero() {
			continue
		}
		c, err := object.GetCommit(r.st, h)
		if err != nil || len(c.ParentHashes) != 1 || c.Author.Email != sig.Email || c.Author.Name != sig.Name ||
			!strings.HasPrefix(c.Message, msgPrefix) {
			continue
		}
		if cur, err := r.refValue(name); err != nil || cur != h {
			continue // moved meanwhile
		}
		if err := r.st.RemoveReference(name); err != nil {
			return pruned, fmt.Errorf("deleting branch %s in %s: %w", name.Short(), r.common, err)
		}
		pruned = append(pruned, name.Short())
	}
	return pruned, nil
}

// checkedOut is the set of branches HEAD, or a linked worktree's HEAD, is on.
func (r *repo) checkedOut() map[plumbing.ReferenceName]bool {
	out := map[plumbing.ReferenceName]bool{}
	heads := []string{filepath.Join(r.gitDir, "HEAD"), filepath.Join(r.common, "HEAD")}
	if more, err := filepath.Glob(filepath.Join(r.common, "worktrees", "*", "HEAD")); err == nil {
		heads = append(heads, more...)
	}
	for _, f := range heads {
		if b, err := os.ReadFile(f); err == nil {
			if target, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "ref:"); ok {
				out[plumbing.ReferenceName(strings.TrimSpace(target))] = true
			}
		}
	}
	return out
}
