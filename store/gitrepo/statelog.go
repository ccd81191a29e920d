package gitrepo

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-git/go-git/v5/plumbing"
)

// StateLog is Log over the state ref (state.go): the state commits, newest
// first, that changed any of paths (relative to the knowledge tree), with
// what they changed. The state's history is bounded: it starts at its last
// snapshot — a snapshot whose replaced commit is still in the repository
// (this clone made it, before a gc) is compared with that commit, else with
// nothing (its files are all "added") and the walk ends there. Experience
// changes from before the state ref are on the branch (Log). It stops after
// limit entries (0: no limit); no state ref: no entries.
func (h *History) StateLog(ctx context.Context, paths []string, limit int) ([]LogEntry, error) {
	if len(paths) == 0 {
		paths = []string{""}
	}
	tip, err := h.st.refValue(StateRef)
	if err != nil || tip.IsZero() {
		return nil, err
	}
	var out []LogEntry
	for cur := tip; !cur.IsZero() && len(out) < maxStateWalk; {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		c, err := h.commitObject(cur)
		if errors.Is(err, plumbing.ErrObjectNotFound) {
			break // a shallow state (pem clone)
		}
		if err != nil {
			return out, fmt.Errorf("reading %s commit %s: %w", StateRef, cur, err)
		}
		parent := stateParent(c)
		var ptree plumbing.Hash
		if !parent.IsZero() {
			p, err := h.commitObject(parent)
			switch {
			case errors.Is(err, plumbing.ErrObjectNotFound):
				parent = plumbing.ZeroHash // gone (gc, or shallow): the walk ends here
			case err != nil:
				return out, fmt.Errorf("reading %s commit %s: %w", StateRef, parent, err)
			default:
				ptree = p.TreeHash
			}
		}
		changes, err := h.pathChanges(ctx, ptree, c.TreeHash, paths)
		if err != nil {
			return out, err
		}
		if len(changes) > 0 {
			out = append(out, LogEntry{CommitInfo: gitlogInfo(c), Changes: changes})
			if limit > 0 && len(out) >= limit {
				break
			}
		}
		cur = parent
	}
	return out, nil
}
