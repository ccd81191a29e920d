package gitrepo

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// The history walks of the review commands (pem diff, pem check), returning
// values: which files changed, with their versions' bytes when asked. What
// the files mean (the layout, the YAML, the rules) is the caller's.

// Version is a changed file with the bytes of both its versions: nil when
// the version is absent, or was not asked for.
type Version struct {
	FileChange
	Old, New []byte
}

// DiffVersions is Diff with the blobs: for every changed file whose path
// limit gives a positive cap, the old and new versions are read (each at most
// cap bytes plus one, as Blob does); other files come with their hashes only.
func (h *History) DiffVersions(ctx context.Context, rev1, rev2, under string, limit func(path string) int) ([]Version, error) {
	changes, err := h.Diff(ctx, rev1, rev2, under)
	if err != nil {
		return nil, err
	}
	out := make([]Version, len(changes))
	for i, ch := range changes {
		out[i].FileChange = ch
		n := limit(ch.Path)
		if n <= 0 {
			continue
		}
		if out[i].Old, err = h.blobOrNil(ctx, ch.From, n); err != nil {
			return nil, fmt.Errorf("%s: %w", ch.Path, err)
		}
		if out[i].New, err = h.blobOrNil(ctx, ch.To, n); err != nil {
			return nil, fmt.Errorf("%s: %w", ch.Path, err)
		}
	}
	return out, nil
}

func (h *History) blobOrNil(ctx context.Context, hash string, limit int) ([]byte, error) {
	if hash == "" {
		return nil, nil
	}
	return h.Blob(ctx, hash, limit)
}

// ReadAt returns the file p (relative to the knowledge tree) as it is in the
// commit rev, at most limit bytes plus one, and its blob hash; nil and ""
// when the commit has no such file.
func (h *History) ReadAt(ctx context.Context, rev, p string, limit int) (data []byte, hash string, err error) {
	hash, err = h.FileAt(ctx, rev, p)
	if err != nil || hash == "" {
		return nil, "", err
	}
	data, err = h.Blob(ctx, hash, limit)
	return data, hash, err
}

// BranchChanges lists the files that differ between the merge base of base
// and head, and head: what a pull request from head into base changes.
func (h *History) BranchChanges(ctx context.Context, base, head string) ([]FileChange, error) {
	mb, err := h.MergeBase(ctx, base, head)
	if err != nil {
		return nil, err
	}
	return h.Diff(ctx, mb, head, "")
}

// WalkOptions bound WalkIntroduced.
type WalkOptions struct {
	Rev   string // where the walk starts ("" is HEAD)
	Under string // the part of the knowledge tree followed ("" for all)
	// Exclude names commits whose history is left out: the walk visits the
	// commits reachable from Rev and from none of these (git log Rev ^X …).
	Exclude []string
}

// WalkIntroduced calls fn with every file change a commit introduced, for
// every commit the options select, newest first by commit time, and returns
// how many commits it visited. A commit's changes are taken against its first
// parent (all files for a root commit); for a merge, a change that brings a
// version one of the other parents already had is not new (it was made, and
// is visited, on that parent's side) and is left out.
func (h *History) WalkIntroduced(ctx context.Context, opt WalkOptions, fn func(CommitInfo, FileChange) error) (int, error) {
	if opt.Rev == "" {
		opt.Rev = "HEAD"
	}
	hidden := map[plumbing.Hash]bool{}
	for _, rev := range opt.Exclude {
		c, err := h.commit(ctx, rev)
		if err != nil {
			return 0, err
		}
		if err := h.ancestors(ctx, c.Hash, hidden); err != nil {
			return 0, err
		}
	}
	start, err := h.commit(ctx, opt.Rev)
	if err != nil {
		return 0, err
	}
	commits := 0
	iter := object.NewCommitIterCTime(start, hidden, nil)
	defer iter.Close()
	err = iter.ForEach(func(c *object.Commit) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		commits++
		var ptree plumbing.Hash
		if len(c.ParentHashes) > 0 {
			p, err := h.node(c.ParentHashes[0])
			if err != nil {
				return err
			}
			ptree = p.tree
		}
		changes, err := h.changes(ctx, ptree, c.TreeHash, opt.Under)
		if err != nil {
			return err
		}
		if len(changes) == 0 {
			return nil
		}
		ci := gitlogInfo(c)
		for _, ch := range changes {
			fromOther := false
			for _, parent := range c.ParentHashes[min(1, len(c.ParentHashes)):] {
				if hash, err := h.FileAt(ctx, parent.String(), ch.Path); err == nil && hash == ch.To {
					fromOther = true
				}
			}
			if fromOther {
				continue
			}
			if err := fn(ci, ch); err != nil {
				return err
			}
		}
		return nil
	})
	return commits, err
}

// ancestors adds the commit hash and every commit reachable from it to seen.
func (h *History) ancestors(ctx context.Context, hash plumbing.Hash, seen map[plumbing.Hash]bool) error {
	stack := []plumbing.Hash{hash}
	for len(stack) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		cur := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[cur] {
			continue
		}
		seen[cur] = true
		n, err := h.node(cur)
		if err != nil {
			return err
		}
		stack = append(stack, n.parents...)
	}
	return nil
}

// DiffRange resolves pem diff's revisions: revs holds up to two (REV1
// [REV2]); REV1 defaults to HEAD~1 and REV2 to HEAD. When REV1 was not
// given and HEAD is the first commit, from is "" (the empty tree).
func (h *History) DiffRange(ctx context.Context, revs []string) (from, to string, err error) {
	rev1, rev2 := "HEAD~1", "HEAD"
	if len(revs) >= 1 {
		rev1 = revs[0]
	}
	if len(revs) >= 2 {
		rev2 = revs[1]
	}
	if to, err = h.Resolve(ctx, rev2); err != nil {
		return "", "", err
	}
	if from, err = h.Resolve(ctx, rev1); err != nil && len(revs) == 0 {
		return "", to, nil // HEAD is the first commit: compare with the empty tree
	}
	return from, to, err
}

// Remembered returns the commit Remember last stored under name for key
// (e.g. the knowledge tree it is about), when the repository still has it: a
// rewritten or garbage-collected history forgets it.
func (R *Repo) Remembered(ctx context.Context, name, key string) (string, bool) {
	data, err := os.ReadFile(R.StatePath(name))
	if err != nil {
		return "", false
	}
	hash, ok := strings.CutPrefix(strings.TrimSpace(string(data)), key+" ")
	if !ok || !plumbing.IsHash(hash) {
		return "", false
	}
	h, err := R.History()
	if err != nil {
		return "", false
	}
	if _, err := h.Resolve(ctx, hash); err != nil {
		return "", false
	}
	return hash, true
}

// Remember stores the commit hash under name for key, in the git directory
// (StatePath: never committed), replacing what was there.
func (R *Repo) Remember(name, key, hash string) error {
	tmp := R.StatePath(name + ".tmp")
	if err := os.WriteFile(tmp, []byte(key+" "+hash+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, R.StatePath(name))
}
