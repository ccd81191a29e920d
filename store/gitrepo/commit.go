package gitrepo

// commit.go is the commit plumbing: Init, Commit and CommitSeries.
//
// Commit does not use go-git's Worktree: Worktree.Status and AddGlob scan the
// whole worktree (measured: Status 1.9 s, ten Adds 12 s on 50,000 files).
// Instead it works like `git commit -- <paths>` done by hand, touching only
// what the given paths need:
//
//  1. hash each path's file and write the blobs HEAD does not have yet
//     (loose objects, written to a temporary file and renamed);
//  2. rebuild only the trees on those paths, starting from HEAD's tree;
//  3. update the index entries of those paths (with stat data, so
//     `git status` stays clean and fast) and write the index through
//     index.lock, as git does;
//  4. write the commit object and move the branch through <ref>.lock.
//
// The index is written before the branch moves: a process killed in between
// leaves the changes staged but not committed, and the same paths are still
// different from HEAD, so the next Commit of them completes the work.

import (
	"bufio"
	"compress/zlib"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	ignore "github.com/go-git/go-git/v5/plumbing/format/gitignore"
	"github.com/go-git/go-git/v5/plumbing/format/index"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// ErrNoRepo is returned when a directory is not inside a git repository.
var ErrNoRepo = errors.New("not inside a git repository")

// ErrGitLocked is returned when another git process holds index.lock or a
// branch's lock file.
var ErrGitLocked = errors.New("git lock file exists")

// Signature is the author and committer of a commit. The zero value means
// DefaultSignature; a zero When means the time of the commit.
type Signature struct {
	Name  string
	Email string
	When  time.Time
}

// DefaultSignature is pem <pem@localhost>, or PEM_GIT_AUTHOR_NAME and
// PEM_GIT_AUTHOR_EMAIL when set.
func DefaultSignature() Signature {
	s := Signature{Name: "pem", Email: "pem@localhost"}
	if v := strings.TrimSpace(os.Getenv("PEM_GIT_AUTHOR_NAME")); v != "" {
		s.Name = v
	}
	if v := strings.TrimSpace(os.Getenv("PEM_GIT_AUTHOR_EMAIL")); v != "" {
		s.Email = v
	}
	return s
}

// MergeDriver is the git config of pem's merge driver ([merge "pem"]).
const (
	MergeDriverName    = "pem knowledge merge driver"
	MergeDriverCommand = "pem merge-driver %O %A %B %P"
)

// Init makes dir's knowledge tree a git repository: it runs `git init`
// (branch main) unless dir already is inside a repository (a knowledge
// directory inside a project repository is fine), registers pem's merge
// driver in the repository's config, and when the branch has no commit yet
// commits the files under dir (what store.Init wrote). It is idempotent.
func Init(ctx context.Context, dir string) error {
	abs, err := canonicalDir(dir)
	if err != nil {
		return err
	}
	r, err := Open(ctx, abs)
	if errors.Is(err, ErrNoRepo) {
		if _, err := git.PlainInitWithOptions(abs, &git.PlainInitOptions{
			InitOptions: git.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName("main")},
		}); err != nil {
			return fmt.Errorf("git init %s: %w", abs, err)
		}
		r, err = Open(ctx, abs)
	}
	if err != nil {
		return fmt.Errorf("opening the git repository of %s: %w", abs, err)
	}
	defer r.Close()
	repo, err := r.goGit()
	if err != nil {
		return err
	}
	cfg, err := repo.Config()
	if err != nil {
		return fmt.Errorf("reading the git config of %s: %w", abs, err)
	}
	sub := cfg.Raw.Section("merge").Subsection("pem")
	if sub.Option("name") != MergeDriverName || sub.Option("driver") != MergeDriverCommand {
		sub.SetOption("name", MergeDriverName)
		sub.SetOption("driver", MergeDriverCommand)
		if err := setConfig(repo, cfg, r.r.common); err != nil {
			return fmt.Errorf("registering the pem merge driver in the git config of %s: %w", abs, err)
		}
	}
	if _, h, err := r.r.head(); err != nil {
		return err
	} else if !h.IsZero() {
		return nil
	}
	paths, err := r.unignoredFiles(abs)
	if err != nil {
		return err
	}
	if len(paths) == 0 {
		return nil
	}
	_, err = r.Commit(ctx, paths, "pem: init knowledge tree", Signature{})
	return err
}

// unignoredFiles lists the regular files under dir (relative, slash-separated)
// that the repository's .gitignore files do not exclude.
func (R *Repo) unignoredFiles(dir string) ([]string, error) {
	r := R.r
	patterns, err := ignore.ReadPatterns(osfs.New(r.root), nil)
	if err != nil {
		return nil, fmt.Errorf("reading .gitignore files under %s: %w", r.root, err)
	}
	m := ignore.NewMatcher(patterns)
	var paths []string
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(r.root, p)
		if err != nil {
			return err
		}
		segs := strings.Split(filepath.ToSlash(rel), "/")
		if d.IsDir() {
			if d.Name() == ".git" || (p != dir && m.Match(segs, true)) {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() && !m.Match(segs, false) {
			krel, err := filepath.Rel(dir, p)
			if err != nil {
				return err
			}
			paths = append(paths, filepath.ToSlash(krel))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing %s for the first commit: %w", dir, err)
	}
	return paths, nil
}

// Commit commits exactly the given paths of the knowledge tree (paths
// relative to the tree, slash-separated, as the Store returns them): a path
// whose file exists is added or updated, a missing one is deleted. Other
// staged changes stay staged and out of the commit, and nothing else in the
// worktree is read. Afterwards the index matches the files of those paths, so
// `git status` shows them clean. The knowledge tree may be a subdirectory of
// the repository.
//
// It returns the new commit's hash, or "" when the paths hold nothing that
// differs from HEAD (no commit is made). Returns ErrGitLocked when another
// git process holds a lock file.
func (R *Repo) Commit(ctx context.Context, paths []string, msg string, sig Signature) (string, error) {
	hs, err := R.CommitSeries(ctx, []CommitRequest{{Paths: paths, Message: msg}}, sig)
	if err != nil {
		return "", err
	}
	return hs[0], nil
}

// CommitRequest is one commit of a series: its paths and message.
type CommitRequest struct {
	Paths   []string
	Message string
}

func (sig Signature) orDefault() Signature {
	if sig.Name == "" && sig.Email == "" {
		d := DefaultSignature()
		d.When = sig.When
		sig = d
	}
	if sig.When.IsZero() {
		sig.When = time.Now()
	}
	return sig
}

// CommitSeries makes one commit per request, each on top of the previous one,
// as Commit does; the branch moves once, to the last commit made, so the
// series lands whole or not at all. A request whose paths hold no change makes
// no commit and gets "" in the result.
func (R *Repo) CommitSeries(ctx context.Context, reqs []CommitRequest, sig Signature) ([]string, error) {
	return R.commitSeries(ctx, reqs, sig, nil)
}

// commitSeries is CommitSeries; the first commit also removes the repository
// paths untrack from the tree and the index, leaving their files on disk
// (CommitState moving them to StateRef).
func (R *Repo) commitSeries(ctx context.Context, reqs []CommitRequest, sig Signature, untrack []string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r := R.r.session()
	defer R.invalidate()
	sig = sig.orDefault()
	if err := r.cleanStale(); err != nil {
		return nil, err
	}
	release, err := r.markOwner()
	if err != nil {
		return nil, err
	}
	defer release()

	headRef, parent, err := r.head()
	if err != nil {
		return nil, err
	}
	var baseTree plumbing.Hash
	if !parent.IsZero() {
		c, err := object.GetCommit(r.st, parent)
		if err != nil {
			return nil, fmt.Errorf("reading HEAD commit %s in %s: %w", parent, r.gitDir, err)
		}
		baseTree = c.TreeHash
	}

	// Read and hash every path once, several at a time (I/O and SHA-1).
	staged := map[string]*fileState{} // repo path → state, for the index
	reqPaths := make([][]string, len(reqs))
	var all []string
	for i, req := range reqs {
		for _, p := range req.Paths {
			rp, err := r.repoPath(p)
			if err != nil {
				return nil, err
			}
			reqPaths[i] = append(reqPaths[i], rp)
			if _, ok := staged[rp]; !ok {
				staged[rp] = nil
				all = append(all, rp)
			}
		}
	}
	states, err := r.readFiles(ctx, baseTree, all)
	if err != nil {
		return nil, err
	}
	for i, rp := range all {
		staged[rp] = states[i]
	}
	if len(untrack) > 0 && len(reqs) > 0 {
		for _, rp := range untrack {
			if _, ok := staged[rp]; !ok {
				reqPaths[0] = append(reqPaths[0], rp)
			}
			staged[rp] = &fileState{name: rp, deleted: true}
		}
	}

	// Build the trees and commits in memory; the objects are written
	// together below, blobs before the trees and commits that name them.
	r.deferWrites = true
	out := make([]string, len(reqs))
	tip := parent
	for i := range reqs {
		req := reqs[i]
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		changes := map[string]*fileState{}
		for _, rp := range reqPaths[i] {
			changes[rp] = staged[rp]
		}
		newTree, err := r.applyTree(baseTree, changes)
		if err != nil {
			return nil, err
		}
		if newTree == baseTree {
			continue
		}
		c := &object.Commit{
			Author:    object.Signature{Name: sig.Name, Email: sig.Email, When: sig.When},
			Committer: object.Signature{Name: sig.Name, Email: sig.Email, When: sig.When},
			Message:   strings.TrimRight(req.Message, "\n") + "\n",
			TreeHash:  newTree,
		}
		if !tip.IsZero() {
			c.ParentHashes = []plumbing.Hash{tip}
		}
		h, err := r.writeEncoded(c)
		if err != nil {
			return nil, fmt.Errorf("writing commit object in %s: %w", r.gitDir, err)
		}
		tip, baseTree, out[i] = h, newTree, h.String()
	}
	if err := r.flush(); err != nil {
		return nil, err
	}
	if len(staged) > 0 {
		if err := r.updateIndex(staged); err != nil {
			return nil, err
		}
	}
	if tip != parent {
		if err := r.moveRef(headRef, parent, tip); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Head returns the hash of the repository's HEAD commit, or "" when the
// branch has no commit yet.
func (R *Repo) Head(ctx context.Context) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	_, h, err := R.r.head()
	if err != nil || h.IsZero() {
		return "", err
	}
	return h.String(), nil
}

// repo is the plumbing view of an open repository; session gives each
// commit series its own object caches over the shared storage.
type repo struct {
	root    string // worktree root, absolute, symlinks resolved
	prefix  string // the knowledge dir relative to root, slash-separated, "" at the root
	gitDir  string // .git (or a linked worktree's private git dir)
	common  string // where objects and refs live (== gitDir unless a linked worktree)
	st      *filesystem.Storage
	trees   map[plumbing.Hash]*object.Tree
	written map[plumbing.Hash]bool // written, or queued in pending
	// deferWrites queues objects in pending until flush (CommitSeries).
	deferWrites bool
	pending     []pendingObject
}

func canonicalDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("resolving %s: %w", dir, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("resolving %s: %w", dir, err)
	}
	return real, nil
}

// openRepo finds the repository that holds dir, walking up like git does.
func openRepo(dir string) (*repo, error) {
	abs, err := canonicalDir(dir)
	if err != nil {
		return nil, err
	}
	root := abs
	var gitDir string
	for {
		fi, err := os.Stat(filepath.Join(root, ".git"))
		if err == nil {
			gitDir = filepath.Join(root, ".git")
			if !fi.IsDir() {
				b, err := os.ReadFile(gitDir)
				if err != nil {
					return nil, fmt.Errorf("reading %s: %w", gitDir, err)
				}
				line := strings.TrimSpace(string(b))
				if !strings.HasPrefix(line, "gitdir:") {
					return nil, fmt.Errorf("%s is not a gitdir file: %w", gitDir, ErrNoRepo)
				}
				gitDir = strings.TrimSpace(strings.TrimPrefix(line, "gitdir:"))
				if !filepath.IsAbs(gitDir) {
					gitDir = filepath.Join(root, gitDir)
				}
			}
			break
		}
		up := filepath.Dir(root)
		if up == root {
			return nil, fmt.Errorf("%s: %w: run pem init, or git init in the directory that should hold the history", abs, ErrNoRepo)
		}
		root = up
	}
	common := gitDir
	if b, err := os.ReadFile(filepath.Join(gitDir, "commondir")); err == nil {
		c := strings.TrimSpace(string(b))
		if !filepath.IsAbs(c) {
			c = filepath.Join(gitDir, c)
		}
		common = filepath.Clean(c)
	}
	if err := checkFormat(root, common); err != nil {
		return nil, err
	}
	prefix, err := filepath.Rel(root, abs)
	if err != nil {
		return nil, err
	}
	prefix = filepath.ToSlash(prefix)
	if prefix == "." {
		prefix = ""
	}
	st := filesystem.NewStorageWithOptions(osfs.New(common), cache.NewObjectLRUDefault(), filesystem.Options{KeepDescriptors: true})
	return &repo{root: root, prefix: prefix, gitDir: gitDir, common: common, st: st,
		trees: map[plumbing.Hash]*object.Tree{}, written: map[plumbing.Hash]bool{}}, nil
}

func (r *repo) close() { _ = r.st.Close() }

// session is a copy of r with empty caches for one commit series: an object
// queued by a series that failed is never taken for written by the next one.
func (r *repo) session() *repo {
	return &repo{root: r.root, prefix: r.prefix, gitDir: r.gitDir, common: r.common, st: r.st,
		trees: map[plumbing.Hash]*object.Tree{}, written: map[plumbing.Hash]bool{}}
}

// repoPath turns a path relative to the knowledge dir into one relative to
// the repository root, refusing anything that would leave the knowledge dir.
func (r *repo) repoPath(p string) (string, error) {
	p = filepath.ToSlash(p)
	clean := path.Clean(p)
	if p == "" || path.IsAbs(p) || clean == "." || clean == ".." || strings.HasPrefix(clean, "../") || clean != p {
		return "", fmt.Errorf("commit path %q: %w: want a clean path relative to the knowledge tree", p, ErrUnsafePathGit)
	}
	for _, seg := range strings.Split(clean, "/") {
		if strings.EqualFold(seg, ".git") {
			return "", fmt.Errorf("commit path %q: %w: .git is reserved", p, ErrUnsafePathGit)
		}
	}
	if r.prefix == "" {
		return clean, nil
	}
	return r.prefix + "/" + clean, nil
}

// ErrUnsafePathGit is returned for a commit path that is not a clean relative path.
var ErrUnsafePathGit = errors.New("unsafe commit path")

// fileState is a path's content in the worktree: deleted, or a blob.
type fileState struct {
	name    string // repo path
	deleted bool
	hash    plumbing.Hash
	mode    filemode.FileMode
	info    os.FileInfo
	data    []byte // kept until the blob is written
	packed  []byte // the blob's pack entry (packEntry), when readFiles made it
	stored  bool   // the blob is in the repository already (no data)
}

// readFiles reads the files at the repository paths rps, in parallel
// (commitWorkers), in their order. When they are enough for a pack
// (packMinObjects), each worker also compresses its blob's pack entry
// (packEntry), so that the compression overlaps the reads; and while the
// workers run, the caller's goroutine reads the trees of base (zero: none)
// that hold the paths' directories into the commit's tree cache, which the
// tree walk after it would otherwise read one by one. (go-git's object
// storage is read by this goroutine only.)
func (r *repo) readFiles(ctx context.Context, base plumbing.Hash, rps []string) ([]*fileState, error) {
	states := make([]*fileState, len(rps))
	pack := len(rps) >= packMinObjects
	done := make(chan error, 1)
	go func() {
		done <- forEach(len(rps), commitWorkers, func(i int) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			st, err := r.readFile(rps[i])
			if err == nil && pack && !st.deleted {
				st.packed, err = packEntry(plumbing.BlobObject, st.data)
			}
			states[i] = st
			return err
		})
	}()
	if !base.IsZero() {
		seen := map[string]bool{}
		for _, rp := range rps {
			dir := path.Dir(rp)
			if dir == "." || seen[dir] {
				continue
			}
			seen[dir] = true
			if _, _, err := r.lookupTree(base, dir); err != nil {
				break // the tree walk reports it
			}
		}
	}
	return states, <-done
}

func (r *repo) readFile(rp string) (*fileState, error) {
	full := filepath.Join(r.root, filepath.FromSlash(rp))
	fi, err := os.Lstat(full)
	if errors.Is(err, fs.ErrNotExist) {
		return &fileState{name: rp, deleted: true}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s to commit it: %w", full, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("committing %s: %w: not a regular file", full, ErrUnsafePathGit)
	}
	data, err := os.ReadFile(full)
	if err != nil {
		return nil, fmt.Errorf("reading %s to commit it: %w", full, err)
	}
	mode := filemode.Regular
	if fi.Mode()&0o111 != 0 {
		mode = filemode.Executable
	}
	return &fileState{name: rp, hash: plumbing.ComputeHash(plumbing.BlobObject, data), mode: mode, info: fi, data: data}, nil
}

// tree reads a tree object, cached for the commit.
func (r *repo) tree(h plumbing.Hash) (*object.Tree, error) {
	if t, ok := r.trees[h]; ok {
		return t, nil
	}
	t, err := object.GetTree(r.st, h)
	if err != nil {
		return nil, fmt.Errorf("reading tree %s in %s: %w (run git fsck)", h, r.gitDir, err)
	}
	r.trees[h] = t
	return t, nil
}

// dirEdit is the changes under one directory.
type dirEdit struct {
	files map[string]*fileState
	dirs  map[string]*dirEdit
}

func (r *repo) applyTree(base plumbing.Hash, changes map[string]*fileState) (plumbing.Hash, error) {
	top := &dirEdit{}
	for rp, st := range changes {
		segs := strings.Split(rp, "/")
		d := top
		for _, s := range segs[:len(segs)-1] {
			if d.dirs == nil {
				d.dirs = map[string]*dirEdit{}
			}
			nd := d.dirs[s]
			if nd == nil {
				nd = &dirEdit{}
				d.dirs[s] = nd
			}
			d = nd
		}
		if d.files == nil {
			d.files = map[string]*fileState{}
		}
		d.files[segs[len(segs)-1]] = st
	}
	h, _, err := r.buildTree(base, top, true)
	return h, err
}

// buildTree applies ed to the tree base (zero: none) and writes the trees
// that changed. It reports empty when nothing is left (a directory to drop).
func (r *repo) buildTree(base plumbing.Hash, ed *dirEdit, isRoot bool) (plumbing.Hash, bool, error) {
	var entries []object.TreeEntry
	if !base.IsZero() {
		t, err := r.tree(base)
		if err != nil {
			return plumbing.ZeroHash, false, err
		}
		entries = append(entries, t.Entries...)
	}
	pos := make(map[string]int, len(entries))
	for i, e := range entries {
		pos[e.Name] = i
	}
	removed := map[string]bool{}
	set := func(e object.TreeEntry) {
		if i, ok := pos[e.Name]; ok {
			entries[i] = e
			delete(removed, e.Name)
			return
		}
		pos[e.Name] = len(entries)
		entries = append(entries, e)
	}
	changed := false
	for name, st := range ed.files {
		i, had := pos[name]
		if st.deleted {
			if had && entries[i].Mode != filemode.Dir {
				removed[name], changed = true, true
			}
			continue
		}
		if had && entries[i].Hash == st.hash && entries[i].Mode == st.mode {
			continue
		}
		if !st.stored {
			if err := r.writeBlob(st); err != nil {
				return plumbing.ZeroHash, false, err
			}
		}
		set(object.TreeEntry{Name: name, Mode: st.mode, Hash: st.hash})
		changed = true
	}
	for name, sub := range ed.dirs {
		var subBase plumbing.Hash
		if i, ok := pos[name]; ok && entries[i].Mode == filemode.Dir && !removed[name] {
			subBase = entries[i].Hash
		}
		h, empty, err := r.buildTree(subBase, sub, false)
		if err != nil {
			return plumbing.ZeroHash, false, err
		}
		if empty {
			if _, ok := pos[name]; ok && !subBase.IsZero() {
				removed[name], changed = true, true
			}
			continue
		}
		if h != subBase {
			set(object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: h})
			changed = true
		}
	}
	if !changed {
		return base, base.IsZero(), nil
	}
	kept := entries[:0]
	for _, e := range entries {
		if !removed[e.Name] {
			kept = append(kept, e)
		}
	}
	if len(kept) == 0 && !isRoot {
		return plumbing.ZeroHash, true, nil
	}
	return r.writeTree(kept)
}

func (r *repo) writeTree(entries []object.TreeEntry) (plumbing.Hash, bool, error) {
	sort.Slice(entries, func(i, j int) bool { return gitTreeLess(entries[i], entries[j]) })
	t := &object.Tree{Entries: entries}
	h, err := r.writeEncoded(t)
	if err != nil {
		return plumbing.ZeroHash, false, fmt.Errorf("writing tree in %s: %w", r.gitDir, err)
	}
	r.trees[h] = t // a later commit of a series builds on it, maybe before it is written
	return h, len(entries) == 0, nil
}

// gitTreeLess is git's tree order: names compared as bytes, directories as if
// they ended in "/".
func gitTreeLess(a, b object.TreeEntry) bool {
	an, bn := a.Name, b.Name
	if a.Mode == filemode.Dir {
		an += "/"
	}
	if b.Mode == filemode.Dir {
		bn += "/"
	}
	return an < bn
}

type encoder interface {
	Encode(plumbing.EncodedObject) error
}

func (r *repo) writeEncoded(o encoder) (plumbing.Hash, error) {
	mo := &plumbing.MemoryObject{}
	if err := o.Encode(mo); err != nil {
		return plumbing.ZeroHash, err
	}
	rd, err := mo.Reader()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	data, err := io.ReadAll(rd)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	return r.writeObject(mo.Type(), data)
}

// writeBlob writes st's blob: its hash is known (readFile) and, when
// readFiles compressed it, its pack entry too.
func (r *repo) writeBlob(st *fileState) error {
	if err := r.writeHashed(plumbing.BlobObject, st.hash, st.data, st.packed); err != nil {
		return fmt.Errorf("writing blob of %s in %s: %w", st.name, r.gitDir, err)
	}
	return nil
}

// commitWorkers is how many files a commit reads, and objects it writes, at
// once: the work is system calls and zlib, which overlap.
const commitWorkers = 8

// pendingObject is an object to write when the repo defers writes.
type pendingObject struct {
	typ    plumbing.ObjectType
	hash   plumbing.Hash
	data   []byte
	packed []byte // its pack entry when made already (nil: writePack makes it)
}

// writeObject writes a loose object unless it exists (see storeObject), or,
// when writes are deferred, queues it for flush.
func (r *repo) writeObject(typ plumbing.ObjectType, data []byte) (plumbing.Hash, error) {
	h := plumbing.ComputeHash(typ, data)
	return h, r.writeHashed(typ, h, data, nil)
}

// writeHashed is writeObject for an object whose hash h is known, with its
// pack entry when made already (nil: none).
func (r *repo) writeHashed(typ plumbing.ObjectType, h plumbing.Hash, data, packed []byte) error {
	if r.written[h] {
		return nil
	}
	if r.deferWrites {
		r.written[h] = true
		r.pending = append(r.pending, pendingObject{typ, h, data, packed})
		return nil
	}
	if err := r.storeObject(typ, h, data); err != nil {
		return err
	}
	r.written[h] = true
	return nil
}

// flush writes the queued objects: as one pack when there are many
// (gitpack.go), else as loose objects, several at a time, all blobs first,
// then the trees and commits, so no object names one that is not written yet.
func (r *repo) flush() error {
	if len(r.pending) >= packMinObjects {
		err := r.writePack(r.pending)
		if err == nil {
			r.pending = nil
			return nil
		}
		if !errors.Is(err, errPackTooLarge) {
			return fmt.Errorf("writing a pack of %d objects in %s: %w", len(r.pending), r.gitDir, err)
		}
	}
	var blobs, rest []pendingObject
	for _, o := range r.pending {
		if o.typ == plumbing.BlobObject {
			blobs = append(blobs, o)
		} else {
			rest = append(rest, o)
		}
	}
	r.pending = nil
	for _, batch := range [][]pendingObject{blobs, rest} {
		err := forEach(len(batch), commitWorkers, func(i int) error {
			o := batch[i]
			if err := r.storeObject(o.typ, o.hash, o.data); err != nil {
				return fmt.Errorf("writing %s %s in %s: %w", o.typ, o.hash, r.gitDir, err)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// storeObject writes a loose object unless it exists: compressed into a
// tmp_obj_ file (which git's fsck and gc know as temporary) and renamed, so a
// killed process never leaves a torn object. Safe for concurrent use.
func (r *repo) storeObject(typ plumbing.ObjectType, h plumbing.Hash, data []byte) error {
	hex := h.String()
	dir := filepath.Join(r.common, "objects", hex[:2])
	final := filepath.Join(dir, hex[2:])
	if _, err := os.Stat(final); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "tmp_obj_")
	if err != nil {
		return err
	}
	tmp := f.Name()
	zw := zlibPool.Get().(*zlib.Writer)
	zw.Reset(f)
	_, err = fmt.Fprintf(zw, "%s %d\x00", typ, len(data))
	if err == nil {
		_, err = zw.Write(data)
	}
	if err == nil {
		err = zw.Close()
	}
	zlibPool.Put(zw)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, final)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

var zlibPool = sync.Pool{New: func() any {
	w, _ := zlib.NewWriterLevel(io.Discard, zlib.BestSpeed)
	return w
}}

// head returns the ref HEAD points to (HEAD itself when detached) and its
// commit (zero when the branch has no commit yet).
func (r *repo) head() (plumbing.ReferenceName, plumbing.Hash, error) {
	b, err := os.ReadFile(filepath.Join(r.gitDir, "HEAD"))
	if err != nil {
		return "", plumbing.ZeroHash, fmt.Errorf("reading HEAD in %s: %w", r.gitDir, err)
	}
	line := strings.TrimSpace(string(b))
	if !strings.HasPrefix(line, "ref:") {
		if !plumbing.IsHash(line) {
			return "", plumbing.ZeroHash, fmt.Errorf("HEAD in %s holds %q, not a ref or a commit: repair it with git", r.gitDir, line)
		}
		return plumbing.HEAD, plumbing.NewHash(line), nil
	}
	name := plumbing.ReferenceName(strings.TrimSpace(strings.TrimPrefix(line, "ref:")))
	h, err := r.refValue(name)
	return name, h, err
}

func (r *repo) refValue(name plumbing.ReferenceName) (plumbing.Hash, error) {
	if name == plumbing.HEAD {
		b, err := os.ReadFile(filepath.Join(r.gitDir, "HEAD"))
		if err != nil {
			return plumbing.ZeroHash, err
		}
		return plumbing.NewHash(strings.TrimSpace(string(b))), nil
	}
	ref, err := r.st.Reference(name)
	if errors.Is(err, plumbing.ErrReferenceNotFound) {
		return plumbing.ZeroHash, nil
	}
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("reading %s in %s: %w", name, r.common, err)
	}
	if ref.Type() != plumbing.HashReference {
		return plumbing.ZeroHash, fmt.Errorf("%s in %s is a symbolic ref to %s: pem commits only to a branch", name, r.common, ref.Target())
	}
	return ref.Hash(), nil
}

func (r *repo) refFile(name plumbing.ReferenceName) string {
	if name == plumbing.HEAD {
		return filepath.Join(r.gitDir, "HEAD")
	}
	return filepath.Join(r.common, filepath.FromSlash(string(name)))
}

// moveRef sets the branch to new if it still is old, through <ref>.lock as
// git does.
func (r *repo) moveRef(name plumbing.ReferenceName, old, new plumbing.Hash) error {
	file := r.refFile(name)
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	return r.withLock(file, func(f *os.File) error {
		cur, err := r.refValue(name)
		if err != nil {
			return err
		}
		if cur != old {
			return fmt.Errorf("%s moved from %s to %s while pem was committing: run the command again", name, old, cur)
		}
		_, err = f.WriteString(new.String() + "\n")
		return err
	})
}

// withLock runs write on path.lock (created exclusively) and renames it over
// path when write succeeds.
func (r *repo) withLock(file string, write func(*os.File) error) error {
	lock := file + ".lock"
	f, err := os.OpenFile(lock, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%w: %s: another git process seems to be running; if none is, remove the file", ErrGitLocked, lock)
	}
	if err != nil {
		return fmt.Errorf("creating %s: %w", lock, err)
	}
	err = write(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(lock, file)
	}
	if err != nil {
		_ = os.Remove(lock)
		return fmt.Errorf("writing %s: %w", file, err)
	}
	return nil
}

// updateIndex sets the index entries of the given paths to their files (or
// removes them) and writes the index through index.lock: as bytes
// (gitindex.go) when it can, else with go-git's index codec.
func (r *repo) updateIndex(files map[string]*fileState) error {
	file := filepath.Join(r.gitDir, "index")
	if rawIndex {
		if err := r.writeIndexRaw(file, files); !errors.Is(err, errIndexFallback) {
			return err
		}
	}
	idx := &index.Index{Version: 2}
	if f, err := os.Open(file); err == nil {
		err = index.NewDecoder(bufio.NewReaderSize(f, 1<<16)).Decode(idx)
		f.Close()
		if err != nil {
			return fmt.Errorf("reading %s: %w (git may use a format go-git cannot read, such as a split index)", file, err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("reading %s: %w", file, err)
	}
	byName := make(map[string]*index.Entry, len(idx.Entries))
	drop := map[string]bool{}
	for _, e := range idx.Entries {
		if e.Stage != index.Merged {
			if _, ok := files[e.Name]; ok {
				drop[e.Name] = true // committing a path resolves its conflict
			}
			continue
		}
		byName[e.Name] = e
	}
	var add []*index.Entry
	for name, st := range files {
		if st.deleted {
			if _, ok := byName[name]; ok {
				drop[name] = true
			}
			continue
		}
		e := byName[name]
		if e == nil {
			e = &index.Entry{Name: name}
			add = append(add, e)
		}
		e.Hash, e.Mode, e.Size = st.hash, st.mode, uint32(st.info.Size())
		e.ModifiedAt = st.info.ModTime()
		e.IntentToAdd, e.SkipWorktree = false, false
		fillStat(e, st.info)
	}
	if len(drop) > 0 {
		kept := idx.Entries[:0]
		for _, e := range idx.Entries {
			if !drop[e.Name] || (e.Stage == index.Merged && !files[e.Name].deleted) {
				kept = append(kept, e)
			}
		}
		idx.Entries = kept
	}
	idx.Entries = append(idx.Entries, add...)
	// go-git writes no extensions: the cache-tree (TREE) is dropped, which
	// invalidates it correctly for git, which rebuilds it on its next write.
	idx.Cache, idx.ResolveUndo, idx.EndOfIndexEntry = nil, nil, nil
	if idx.Version < 2 {
		idx.Version = 2
	}
	return r.withLock(file, func(f *os.File) error {
		w := bufio.NewWriterSize(f, 1<<16)
		if err := index.NewEncoder(w).Encode(idx); err != nil {
			return err
		}
		return w.Flush()
	})
}

// fillStat copies ctime, device, inode, uid and gid into the index entry when
// the platform's stat gives them (Unix), so git trusts the entry without
// re-reading the file.
func fillStat(e *index.Entry, fi os.FileInfo) {
	v := reflect.ValueOf(fi.Sys())
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return
	}
	v = v.Elem()
	if v.Kind() != reflect.Struct {
		return
	}
	u := func(name string) uint32 {
		f := v.FieldByName(name)
		switch f.Kind() {
		case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uint:
			return uint32(f.Uint())
		case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Int:
			return uint32(f.Int())
		}
		return 0
	}
	e.Dev, e.Inode, e.UID, e.GID = u("Dev"), u("Ino"), u("Uid"), u("Gid")
	for _, name := range []string{"Ctim", "Ctimespec"} {
		ts := v.FieldByName(name)
		if ts.IsValid() && ts.Kind() == reflect.Struct {
			sec, nsec := ts.FieldByName("Sec"), ts.FieldByName("Nsec")
			if sec.IsValid() && nsec.IsValid() {
				e.CreatedAt = time.Unix(sec.Int(), nsec.Int())
				return
			}
		}
	}
	e.CreatedAt = fi.ModTime()
}

// ownerFile names the pem process that may hold index.lock or a ref lock, so
// that a pem killed while holding one does not block the next run forever.
func (r *repo) ownerFile() string { return filepath.Join(r.gitDir, "pem-commit.pid") }

func (r *repo) markOwner() (func(), error) {
	if err := os.WriteFile(r.ownerFile(), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return nil, fmt.Errorf("writing %s: %w", r.ownerFile(), err)
	}
	return func() { _ = os.Remove(r.ownerFile()) }, nil
}

// cleanStale removes lock files left by a pem process that died while
// committing (its pid is recorded and no longer runs). Lock files of other
// git processes are left alone.
func (r *repo) cleanStale() error {
	b, err := os.ReadFile(r.ownerFile())
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if pid > 0 && pid != os.Getpid() && processAlive(pid) {
		return fmt.Errorf("%w: pem process %d is committing in %s: wait for it to finish", ErrGitLocked, pid, r.gitDir)
	}
	locks := []string{filepath.Join(r.gitDir, "index.lock"), filepath.Join(r.gitDir, "HEAD.lock"), r.refFile(StateRef) + ".lock"}
	if b, err := os.ReadFile(filepath.Join(r.gitDir, "HEAD")); err == nil {
		if line := strings.TrimSpace(string(b)); strings.HasPrefix(line, "ref:") {
			locks = append(locks, r.refFile(plumbing.ReferenceName(strings.TrimSpace(strings.TrimPrefix(line, "ref:"))))+".lock")
		}
	}
	for _, l := range locks {
		if err := os.Remove(l); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("removing stale %s: %w", l, err)
		}
	}
	return os.Remove(r.ownerFile())
}

func processAlive(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	err = p.Signal(syscall.Signal(0))
	return err == nil || errors.Is(err, syscall.EPERM)
}
