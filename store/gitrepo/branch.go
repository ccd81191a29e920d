package gitrepo

import (
	"context"
	"fmt"
	"sort"
	"strings"

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
