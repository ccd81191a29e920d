package gitrepo

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"

	"github.com/go-git/go-billy/v5/osfs"
	git "github.com/go-git/go-git/v5"
)

// Repo is the git repository holding a knowledge tree, opened once per
// command: commits (exact paths, series with their journal, a review
// branch), the history, sync and the merge driver's configuration all go
// through it, over one object storage that keeps its pack files open.
// A Repo is not safe for concurrent use. Close it when done.
type Repo struct {
	r    *repo
	git  *git.Repository // go-git's view of the same storage, opened on first use
	hist *History        // the history reader, made on first use
}

// opens counts the repositories Open found in this process.
var opens atomic.Int64

// Opens reports how many times this process opened a repository (Open,
// Init and OpenHistory each count one): tests use it to hold commands to
// one handle each.
func Opens() int64 { return opens.Load() }

// Open opens the git repository that holds the knowledge tree dir, walking
// up like git does (also from a linked worktree). Returns ErrNoRepo when
// there is none.
func Open(ctx context.Context, dir string) (*Repo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r, err := openRepo(dir)
	if err != nil {
		return nil, err
	}
	opens.Add(1)
	return &Repo{r: r}, nil
}

// Close releases the repository's open files (pack files, the commit-graph).
func (R *Repo) Close() error {
	if R.hist != nil {
		R.hist.release()
	}
	R.r.close()
	return nil
}

// Root is the repository's worktree root (absolute, symlinks resolved).
func (R *Repo) Root() string { return R.r.root }

// TreeDir is the knowledge tree the repository was opened for (absolute,
// symlinks resolved): Root, or a directory inside it.
func (R *Repo) TreeDir() string { return filepath.Join(R.r.root, filepath.FromSlash(R.r.prefix)) }

// GitDir is the repository's git directory: where git keeps its index, and
// where pem keeps state that must never be committed (see StatePath).
func (R *Repo) GitDir() string { return R.r.gitDir }

// StatePath is the path of a file of pem's private state (a cache, a
// journal) in the git directory: never committed, never seen by git.
func (R *Repo) StatePath(name string) string { return filepath.Join(R.r.gitDir, name) }

// goGit returns go-git's repository over the handle's storage.
func (R *Repo) goGit() (*git.Repository, error) {
	if R.git != nil {
		return R.git, nil
	}
	g, err := git.Open(R.r.st, osfs.New(R.r.root))
	if err != nil {
		return nil, fmt.Errorf("opening git repository of %s: %w", R.r.root, err)
	}
	R.git = g
	return g, nil
}

// invalidate forgets what the storage and the history reader know of the
// pack files after a commit, which may have written a new pack.
func (R *Repo) invalidate() {
	R.r.st.Reindex()
	if R.hist != nil && R.hist.packs != nil {
		R.hist.packs.close()
		R.hist.packs = nil
	}
}
