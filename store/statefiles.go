package store

import (
	"context"
	"fmt"
)

// StateDirs are the tree's directories kept off the main branch, on the
// state ref (gitrepo.StateRef, docs/scale.md): the traces and the experience,
// derived and ephemeral. Main tracks facts/, pem.yaml and the other top-level
// files.
var StateDirs = []string{tracesDir, experienceDir}

// StateIgnore are the .gitignore lines that keep the state's directories out
// of `git status` on main: anchored, so that a domain called "traces" under
// facts/ is not ignored. A trace-only pull request adds its trace with
// `git add -f` (docs/sharing.md).
const StateIgnore = "/" + tracesDir + "/\n/" + experienceDir + "/\n"

// IgnoreState adds StateIgnore to the tree's .gitignore (creating it) and
// returns its path relative to the tree; a .gitignore that has the lines is
// left as it is.
func (s *Store) IgnoreState(ctx context.Context) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if err := s.ensureLines(".gitignore", StateIgnore); err != nil {
		return "", fmt.Errorf("adding the state's directories to %s/.gitignore: %w", s.dir, err)
	}
	return ".gitignore", nil
}
