package gitrepo

// clone.go is pem clone: the clone a fleet agent starts from. An agent at run
// start needs the facts, the experience and pem.yaml — not the traces, and
// not the history, which grows with every run the fleet ever made. A full
// clone fetches all of it (at 10,000 runs a day the history passes 1 GB
// within weeks, docs/scale.md); this one fetches the last commit's trees
// (--depth=1, --filter=blob:none) and then only the blobs of the directories
// checked out (a cone-mode sparse checkout of facts/ and experience/ plus the
// top-level files): its cost follows the size of the live knowledge, not the
// history's length. Traces come later, when the clone consolidates
// (Materialize): git fetches the missing blobs from the remote then.
//
// It runs the git CLI: go-git can make a shallow clone but has no partial
// clone (no --filter), no promisor remote to fetch missing blobs from later,
// and no sparse checkout. go-git still opens the result: the sparse checkout
// is configured in the repository's config (core.sparseCheckout), not through
// `git sparse-checkout`, which would set extensions.worktreeConfig, an
// extension go-git refuses.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	format "github.com/go-git/go-git/v5/plumbing/format/config"
)

// CloneOptions configure Clone.
type CloneOptions struct {
	Branch string   // the branch to clone; "" is the remote's default
	Tree   string   // the knowledge tree's directory in the repository ("" its top), slash-separated
	Dirs   []string // the tree's directories to check out besides its top-level files (default: facts, experience)
}

// ErrNotATree is returned by Clone when the cloned branch holds no pem.yaml
// where the knowledge tree should be.
var ErrNotATree = errors.New("no pem knowledge tree")

// Clone makes dir a shallow, blobless, sparse clone of url (see the file
// comment). dir must not exist or be empty. A plain local path is cloned
// through file:// (git ignores --depth and --filter for a local path); for
// a file:// remote the local git upload-pack is told to serve filters and
// single objects, which a hosting service does by itself. On failure what
// Clone created is removed. ErrGitMissing when git is not installed.
func Clone(ctx context.Context, url, dir string, opt CloneOptions) error {
	if len(opt.Dirs) == 0 {
		opt.Dirs = []string{"facts", "experience"}
	}
	tree := strings.Trim(path.Clean("/"+filepath.ToSlash(opt.Tree)), "/")
	if strings.HasPrefix(tree, "..") {
		return fmt.Errorf("clone: the tree directory %q leaves the repository", opt.Tree)
	}
	existed := false
	if es, err := os.ReadDir(dir); err == nil {
		if len(es) > 0 {
			return fmt.Errorf("clone: %s exists and is not empty: give a new directory", dir)
		}
		existed = true
	}
	if fi, err := os.Stat(url); err == nil && fi.IsDir() {
		abs, err := filepath.Abs(url)
		if err != nil {
			return err
		}
		url = "file://" + filepath.ToSlash(abs)
	}
	args := []string{"clone", "-q", "--depth=1", "--filter=blob:none", "--no-checkout", "--no-tags"}
	if opt.Branch != "" {
		args = append(args, "--branch", opt.Branch)
	}
	if strings.HasPrefix(url, "file://") {
		const up = "git -c uploadpack.allowFilter=true -c uploadpack.allowAnySHA1InWant=true upload-pack"
		args = append(args, "--upload-pack", up, "--config", "remote.origin.uploadpack="+up)
	}
	args = append(args, "--", url, dir)
	cleanup := func() {
		if existed {
			es, _ := os.ReadDir(dir)
			for _, e := range es {
				_ = os.RemoveAll(filepath.Join(dir, e.Name()))
			}
			return
		}
		_ = os.RemoveAll(dir)
	}
	if _, err := runGit(ctx, "", args...); err != nil {
		if errors.Is(err, ErrGitMissing) {
			return fmt.Errorf("clone: %w", err)
		}
		cleanup()
		if unreachable(err) {
			return fmt.Errorf("clone: %w: %w", ErrRemoteRefused, err)
		}
		return fmt.Errorf("clone: %w", err)
	}
	fail := func(err error) error {
		cleanup()
		return fmt.Errorf("clone: %w", err)
	}
	if _, err := runGit(ctx, dir, "cat-file", "-e", "HEAD:"+path.Join(tree, "pem.yaml")); err != nil {
		return fail(fmt.Errorf("%s has %w at %q (no pem.yaml there): give the tree's directory with --tree, or run pem init in the repository", url, ErrNotATree, "/"+tree))
	}
	// Cone mode: the top-level files of each directory on the way to the
	// tree, then the tree's directories whole.
	patterns := []string{"/*", "!/*/"}
	if tree != "" {
		p := ""
		for _, seg := range strings.Split(tree, "/") {
			p += "/" + seg
			patterns = append(patterns, p+"/", "!"+p+"/*/")
		}
	}
	for _, d := range opt.Dirs {
		d = strings.Trim(path.Clean("/"+d), "/")
		if d == "" || strings.HasPrefix(d, "..") || strings.Contains(d, "/") {
			return fail(fmt.Errorf("the directory %q is not one of the tree's top-level directories", d))
		}
		patterns = append(patterns, "/"+path.Join(tree, d)+"/")
	}
	gitDir := filepath.Join(dir, ".git")
	if err := os.MkdirAll(filepath.Join(gitDir, "info"), 0o755); err != nil {
		return fail(err)
	}
	if err := os.WriteFile(filepath.Join(gitDir, "info", "sparse-checkout"), []byte(strings.Join(patterns, "\n")+"\n"), 0o644); err != nil {
		return fail(err)
	}
	for _, kv := range [][2]string{{"core.sparseCheckout", "true"}, {"core.sparseCheckoutCone", "true"}} {
		if _, err := runGit(ctx, dir, "config", kv[0], kv[1]); err != nil {
			return fail(err)
		}
	}
	// Fill the index from HEAD and check out what the cone holds: git
	// fetches those blobs in one batch.
	if _, err := runGit(ctx, dir, "read-tree", "-mu", "HEAD"); err != nil {
		return fail(err)
	}
	if err := cloneState(ctx, dir, tree); err != nil {
		return fail(err)
	}
	return nil
}

// cloneState fetches the remote's state ref (state.go) at depth 1 without
// blobs, then the blobs of its experience/ in one batch, and writes the
// experience files: what a run needs; the traces' blobs stay on the remote
// until the clone consolidates (Materialize). A remote without a state (a
// tree from before it, whose main still holds the experience) is fine.
func cloneState(ctx context.Context, dir, tree string) error {
	tracking := stateTracking("origin")
	_, err := runGit(ctx, dir, "fetch", "-q", "--depth=1", "--filter=blob:none", "--no-tags", "origin", "+"+StateRef.String()+":"+tracking.String())
	if err != nil {
		if strings.Contains(strings.ToLower(err.Error()), "couldn't find remote ref") {
			return nil
		}
		return fmt.Errorf("fetching the remote's %s: %w", StateRef, err)
	}
	if _, err := runGit(ctx, dir, "update-ref", StateRef.String(), tracking.String()); err != nil {
		return err
	}
	R, err := Open(ctx, filepath.Join(dir, filepath.FromSlash(tree)))
	if err != nil {
		return err
	}
	defer R.Close()
	_, err = R.materializeStateDirs(ctx, path.Join(tree, "experience"))
	return err
}

// fetchMissing fetches the given objects from origin in one batch, as git
// does for a partial clone's checkout (the promisor remote's lazy fetch).
func (R *Repo) fetchMissing(ctx context.Context, oids []string) error {
	if len(oids) == 0 {
		return nil
	}
	bin, err := exec.LookPath("git")
	if err != nil {
		return fmt.Errorf("%w: install git (apt-get install git) and run the command again", ErrGitMissing)
	}
	cmd := exec.CommandContext(ctx, bin, "-c", "fetch.negotiationAlgorithm=noop", "fetch", "-q", "origin",
		"--no-tags", "--no-write-fetch-head", "--recurse-submodules=no", "--filter=blob:none", "--stdin")
	cmd.Dir = R.r.root
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0")
	cmd.Stdin = strings.NewReader(strings.Join(oids, "\n") + "\n")
	if out, err := dieWithParent(cmd)(); err != nil {
		return fmt.Errorf("fetching %d objects of %s from origin (the remote must be reachable): %v: %s", len(oids), StateRef, err, strings.TrimSpace(string(out)))
	}
	R.invalidate()
	return nil
}

// materializeStateDirs writes the state's files under the repository paths
// dirs (all of them when none) that the disk lacks, fetching the blobs this
// partial clone does not have first. It reports the files written.
func (R *Repo) materializeStateDirs(ctx context.Context, dirs ...string) (int, error) {
	tip, err := R.r.refValue(StateRef)
	if err != nil || tip.IsZero() {
		return 0, err
	}
	h, err := R.History()
	if err != nil {
		return 0, err
	}
	c, err := h.repo.CommitObject(tip)
	if err != nil {
		return 0, fmt.Errorf("reading %s: %w", StateRef, err)
	}
	var missing []string
	if err := h.diffTrees(ctx, "", plumbing.ZeroHash, c.TreeHash, func(ch FileChange) error {
		if len(dirs) > 0 && !under(ch.Path, dirs) {
			return nil
		}
		if _, err := R.r.st.EncodedObject(plumbing.BlobObject, plumbing.NewHash(ch.To)); err != nil {
			missing = append(missing, ch.To)
		}
		return nil
	}); err != nil {
		return 0, err
	}
	if err := R.fetchMissing(ctx, missing); err != nil {
		return 0, err
	}
	if len(missing) > 0 {
		R.hist.release() // its storage view predates the fetched pack
		R.hist = nil
		if h, err = R.History(); err != nil {
			return 0, err
		}
	}
	return h.materializeState(ctx, plumbing.ZeroHash, tip, dirs...)
}

// unreachable reports git's messages for a remote that does not exist,
// refuses, or cannot be reached.
func unreachable(err error) bool {
	msg := strings.ToLower(err.Error())
	for _, s := range []string{"does not exist", "not found", "does not appear to be a git repository", "could not read from remote",
		"authentication failed", "unable to access", "could not resolve host", "connection refused", "permission denied"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// Sparse reports whether the repository is a sparse checkout (pem clone's):
// some of the tree's files are not in the worktree.
func (R *Repo) Sparse() (bool, error) {
	g, err := R.goGit()
	if err != nil {
		return false, err
	}
	cfg, err := g.Config()
	if err != nil {
		return false, fmt.Errorf("reading the git config of %s: %w", R.r.root, err)
	}
	return strings.EqualFold(cfg.Raw.Section("core").Option("sparseCheckout"), "true"), nil
}

// Materialize turns a sparse checkout (pem clone's) into a full one before a
// command that reads every trace (consolidation, deep-learn): git fetches the
// blobs the clone left out from the remote, in batches, and checks them out.
// Files the clone wrote meanwhile (saved traces not synced yet) stay as they
// are. It reports whether there was anything to do; a full checkout is left
// alone without running git.
func (R *Repo) Materialize(ctx context.Context) (bool, error) {
	sparse, err := R.Sparse()
	if err != nil || !sparse {
		return false, err
	}
	if err := os.WriteFile(filepath.Join(R.r.gitDir, "info", "sparse-checkout"), []byte("/*\n"), 0o644); err != nil {
		return false, fmt.Errorf("widening the sparse checkout of %s: %w", R.r.root, err)
	}
	if _, err := R.git_(ctx, "config", "core.sparseCheckoutCone", "false"); err != nil {
		return false, err
	}
	if _, err := R.git_(ctx, "read-tree", "-mu", "HEAD"); err != nil {
		return false, fmt.Errorf("checking out the traces a pem clone left out (the remote must be reachable): %w", err)
	}
	if _, err := R.git_(ctx, "config", "core.sparseCheckout", "false"); err != nil {
		return false, err
	}
	_ = os.Remove(filepath.Join(R.r.gitDir, "info", "sparse-checkout"))
	R.git = nil // its config changed
	if R.hist != nil {
		R.hist.release()
		R.hist = nil
	}
	R.invalidate()
	// The traces on the state ref: their blobs, then the files.
	if _, err := R.materializeStateDirs(ctx); err != nil {
		return false, fmt.Errorf("checking out the traces of %s a pem clone left out: %w", StateRef, err)
	}
	return true, nil
}

// setConfig writes cfg as go-git does, except that in a repository of format
// version 1 without extensions (a partial clone's, pem clone's) it does not
// add an empty extensions.objectformat: go-git writes that option for every
// version-1 config, and then git refuses the whole config ("invalid value
// for 'extensions.objectformat'") and go-git the repository ("unknown
// extension: objectformat").
func setConfig(g *git.Repository, cfg *config.Config, gitDir string) error {
	strip := cfg.Core.RepositoryFormatVersion == format.Version_1 && cfg.Extensions.ObjectFormat == "" && !cfg.Raw.HasSection("extensions")
	if err := g.SetConfig(cfg); err != nil || !strip {
		return err
	}
	name := filepath.Join(gitDir, "config")
	data, err := os.ReadFile(name)
	if err != nil {
		return err
	}
	fixed := emptyExtensions().ReplaceAll(data, nil)
	if len(fixed) == len(data) {
		return nil
	}
	return os.WriteFile(name, fixed, 0o644)
}

// emptyExtensions is the section go-git adds to a version-1 config that has
// no extensions.
// Compiled on first use, not at every pem command's start-up.
var emptyExtensions = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?m)^\[extensions\]\n\s*objectformat = *\n?`)
})
