package gitrepo

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	commitgraph "github.com/go-git/go-git/v5/plumbing/format/commitgraph/v2"
	"github.com/go-git/go-git/v5/plumbing/format/index"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
)

// This file is the knowledge tree's history: reading it (diffs between
// commits, the log of one entry, every commit's changes for pem check) and
// sharing it (pem sync, the merge driver's git configuration). Everything goes
// through go-git's object API and compares tree entry hashes level by level,
// so an unchanged subtree is never read: the cost follows what changed, not
// the size of the tree (go-git's LogOptions.FileName reads every tree and is
// ~200× slower on a 50,000-file tree).

// History reads the git history of a knowledge tree. The tree may be the
// repository's root or a directory inside it; paths given to and returned by
// History are relative to the knowledge tree, with forward slashes.
type History struct {
	repo   *git.Repository
	st     *repo  // commit.go's view of the same repository (storage, paths)
	r      *Repo  // the handle it reads through
	owned  bool   // OpenHistory made the handle: Close closes it
	root   string // the worktree root
	prefix string // the knowledge tree inside the repository: "" or "dir/"
	cache  map[plumbing.Hash]*object.Tree
	raw    map[plumbing.Hash][]byte // raw trees read lately (rawTree), and the generation before
	rawOld map[plumbing.Hash][]byte

	graph      commitgraph.Index // git's commit-graph file, when there is one
	graphTried bool
	packs      *gitlogPacks // nil until first used
	logs       *logCache    // Log's cache of what commits changed (logcache.go), read on first use
	described  *describeCache
}

// History returns the handle's history reader (one per Repo, sharing its
// storage; closing the Repo closes it).
func (R *Repo) History() (*History, error) {
	if R.hist != nil {
		return R.hist, nil
	}
	repo, err := R.goGit()
	if err != nil {
		return nil, err
	}
	h := &History{repo: repo, st: R.r, r: R, root: R.r.root, cache: map[plumbing.Hash]*object.Tree{}, raw: map[plumbing.Hash][]byte{}}
	if R.r.prefix != "" {
		h.prefix = R.r.prefix + "/"
	}
	R.hist = h
	return h, nil
}

// OpenHistory opens the repository holding the knowledge tree dir and
// returns its history, for commands that only read it. Returns ErrNoRepo
// when there is none. Close it when done: it keeps the pack files open.
func OpenHistory(dir string) (*History, error) {
	R, err := Open(context.Background(), dir)
	if err != nil {
		return nil, err
	}
	h, err := R.History()
	if err != nil {
		R.Close()
		return nil, err
	}
	h.owned = true
	return h, nil
}

// Close releases the files the History keeps open, and the repository when
// OpenHistory opened it.
func (h *History) Close() error {
	if h.owned {
		return h.r.Close()
	}
	h.release()
	return nil
}

func (h *History) release() {
	if h.described != nil {
		h.described.save()
	}
	if h.graph != nil {
		h.graph.Close()
		h.graph, h.graphTried = nil, false
	}
	if h.packs != nil {
		h.packs.close()
		h.packs = nil
	}
}

// Repository returns the go-git repository.
func (h *History) Repository() *git.Repository { return h.repo }

// Prefix is the knowledge tree's directory inside the repository ("" at the root, else ending in "/").
func (h *History) Prefix() string { return h.prefix }

// FileChange is one file that differs between two trees. From and To are the
// blob hashes (hex) before and after; "" means absent.
type FileChange struct {
	Path     string // relative to the knowledge tree
	From, To string
	ToMode   filemode.FileMode // mode after the change (0 when deleted)
}

// Added reports a new file; Deleted a removed one; otherwise it was modified.
func (c FileChange) Added() bool { return c.From == "" }

// Deleted reports a removed file.
func (c FileChange) Deleted() bool { return c.To == "" }

// CommitInfo describes one commit.
type CommitInfo struct {
	Hash    string
	Parents []string
	Author  string
	When    time.Time // author time, UTC
	Subject string    // first line of the message
	Message string
}

func gitlogInfo(c *object.Commit) CommitInfo {
	ci := CommitInfo{Hash: c.Hash.String(), Author: c.Author.Name, When: c.Author.When.UTC(), Message: c.Message}
	ci.Subject, _, _ = strings.Cut(strings.TrimSpace(c.Message), "\n")
	for _, p := range c.ParentHashes {
		ci.Parents = append(ci.Parents, p.String())
	}
	return ci
}

// LogEntry is one commit that changed what a Log call follows.
type LogEntry struct {
	CommitInfo
	Changes []FileChange
}

// Resolve returns the commit a revision names (HEAD, a branch, a tag, a hash,
// HEAD~1, origin/main …).
func (h *History) Resolve(ctx context.Context, rev string) (string, error) {
	c, err := h.commit(ctx, rev)
	if err != nil {
		return "", err
	}
	return c.Hash.String(), nil
}

// ErrUnknownRevision: a revision that names no commit (it also matches
// os.ErrNotExist).
var ErrUnknownRevision = errors.New("unknown revision")

// notExist makes an error match os.ErrNotExist without saying so twice.
type notExist struct{}

func (notExist) Error() string { return "" }
func (notExist) Unwrap() error { return os.ErrNotExist }

func (h *History) commit(ctx context.Context, rev string) (*object.Commit, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	hash, err := h.repo.ResolveRevision(plumbing.Revision(rev))
	if err != nil {
		return nil, fmt.Errorf("%w %q (%v)%w: name a commit, branch or tag (git log shows them)", ErrUnknownRevision, rev, err, notExist{})
	}
	c, err := h.repo.CommitObject(*hash)
	if err != nil {
		return nil, fmt.Errorf("reading commit %s (%s): %w", rev, hash, err)
	}
	return c, nil
}

func (h *History) tree(hash plumbing.Hash) (*object.Tree, error) {
	if t, ok := h.cache[hash]; ok {
		return t, nil
	}
	t, err := object.GetTree(h.repo.Storer, hash)
	if err != nil {
		return nil, fmt.Errorf("reading tree %s: %w", hash, err)
	}
	if len(h.cache) > 4096 {
		clear(h.cache)
	}
	h.cache[hash] = t
	return t, nil
}

// lookup finds the entry at p (repository path, no leading or trailing
// slash; "" is the root itself) under the tree root.
func (h *History) lookup(root plumbing.Hash, p string) (object.TreeEntry, bool, error) {
	if p == "" {
		return object.TreeEntry{Hash: root, Mode: filemode.Dir}, !root.IsZero(), nil
	}
	cur := root
	parts := strings.Split(p, "/")
	for i, name := range parts {
		if cur.IsZero() {
			return object.TreeEntry{}, false, nil
		}
		raw, err := h.rawTree(cur)
		if err != nil {
			return object.TreeEntry{}, false, err
		}
		e, ok := gitlogScan(raw, name)
		if !ok {
			return object.TreeEntry{}, false, nil
		}
		if i == len(parts)-1 {
			return e, true, nil
		}
		if e.Mode != filemode.Dir {
			return object.TreeEntry{}, false, nil
		}
		cur = e.Hash
	}
	return object.TreeEntry{}, false, nil
}

// rawTree returns a tree object's bytes. Looking one name up in them is far
// cheaper than object.Tree's decoding of every entry (a facts/ tree holds one
// entry per domain, and Log looks up one name in each commit's version).
func (h *History) rawTree(hash plumbing.Hash) ([]byte, error) {
	if b, ok := h.raw[hash]; ok {
		return b, nil
	}
	if b, ok := h.rawOld[hash]; ok {
		h.raw[hash] = b
		return b, nil
	}
	if h.packs == nil {
		h.packs = gitlogOpenPacks(filepath.Join(h.st.common, "objects", "pack"))
	}
	b, typ, err := h.packs.read(hash)
	if err != nil {
		return nil, fmt.Errorf("reading tree %s: %w", hash, err)
	}
	if b == nil { // not in a pack (a loose object): ask go-git's storage
		obj, err := h.repo.Storer.EncodedObject(plumbing.TreeObject, hash)
		if err != nil {
			return nil, fmt.Errorf("reading tree %s: %w", hash, err)
		}
		r, err := obj.Reader()
		if err != nil {
			return nil, fmt.Errorf("reading tree %s: %w", hash, err)
		}
		defer r.Close()
		b = make([]byte, obj.Size())
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, fmt.Errorf("reading tree %s: %w", hash, err)
		}
	} else if typ != plumbing.TreeObject {
		return nil, fmt.Errorf("reading tree %s: the object is a %s", hash, typ)
	}
	if len(h.raw) > 64 { // a walk needs the trees of a commit and its parent: keep the last generation
		h.rawOld, h.raw = h.raw, make(map[plumbing.Hash][]byte, 64)
	}
	h.raw[hash] = b
	return b, nil
}

// gitlogScan finds name in a raw tree object: entries are
// "<octal mode> <name>\x00<20-byte hash>".
func gitlogScan(raw []byte, name string) (object.TreeEntry, bool) {
	for len(raw) > 0 {
		e, rest, ok := gitlogNextEntry(raw)
		if !ok {
			break
		}
		if string(e.name) == name {
			te, err := e.entry()
			return te, err == nil
		}
		raw = rest
	}
	return object.TreeEntry{}, false
}

// diffTrees calls fn for every file that differs between the trees a and b
// (either may be the zero hash: an empty tree), below the repository path
// dir. Subtrees with equal hashes are skipped without being read.
func (h *History) diffTrees(ctx context.Context, dir string, a, b plumbing.Hash, fn func(FileChange) error) error {
	if a == b {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	raw := func(hash plumbing.Hash) ([]byte, error) {
		if hash.IsZero() {
			return nil, nil
		}
		return h.rawTree(hash)
	}
	ra, err := raw(a)
	if err != nil {
		return err
	}
	rb, err := raw(b)
	if err != nil {
		return err
	}
	// Both trees are sorted in git's order (a directory's name compares as
	// if it ended in "/"): walk them side by side, decoding only the
	// entries that differ.
	type pair struct {
		name     string
		x, y     object.TreeEntry
		inA, inB bool
	}
	var diffs []pair
	var ea, eb gitlogRawEntry
	okA, okB := false, false
	for {
		if !okA && len(ra) > 0 {
			if ea, ra, okA = gitlogNextEntry(ra); !okA {
				return fmt.Errorf("reading tree %s: malformed entry", a)
			}
		}
		if !okB && len(rb) > 0 {
			if eb, rb, okB = gitlogNextEntry(rb); !okB {
				return fmt.Errorf("reading tree %s: malformed entry", b)
			}
		}
		if !okA && !okB {
			break
		}
		c := 0
		switch {
		case !okA:
			c = 1
		case !okB:
			c = -1
		default:
			c = ea.compare(eb)
		}
		switch {
		case c == 0:
			okA, okB = false, false
			if bytes.Equal(ea.hash, eb.hash) && bytes.Equal(ea.mode, eb.mode) {
				continue
			}
			x, err := ea.entry()
			if err != nil {
				return fmt.Errorf("reading tree %s: %w", a, err)
			}
			y, err := eb.entry()
			if err != nil {
				return fmt.Errorf("reading tree %s: %w", b, err)
			}
			if x.Hash == y.Hash && x.Mode == y.Mode {
				continue
			}
			diffs = append(diffs, pair{name: x.Name, x: x, y: y, inA: true, inB: true})
		case c < 0:
			okA = false
			x, err := ea.entry()
			if err != nil {
				return fmt.Errorf("reading tree %s: %w", a, err)
			}
			diffs = append(diffs, pair{name: x.Name, x: x, inA: true})
		default:
			okB = false
			y, err := eb.entry()
			if err != nil {
				return fmt.Errorf("reading tree %s: %w", b, err)
			}
			diffs = append(diffs, pair{name: y.Name, y: y, inB: true})
		}
	}
	// In name order, a file and a directory of the same name as one change.
	sort.SliceStable(diffs, func(i, j int) bool { return diffs[i].name < diffs[j].name })
	for i := 0; i < len(diffs); i++ {
		d := diffs[i]
		if i+1 < len(diffs) && diffs[i+1].name == d.name {
			n := diffs[i+1]
			if n.inA {
				d.x, d.inA = n.x, true
			}
			if n.inB {
				d.y, d.inB = n.y, true
			}
			i++
		}
		x, inA, y, inB := d.x, d.inA, d.y, d.inB
		p := d.name
		if dir != "" {
			p = dir + "/" + d.name
		}
		var subA, subB plumbing.Hash
		var fileA, fileB *object.TreeEntry
		if inA {
			if x.Mode == filemode.Dir {
				subA = x.Hash
			} else {
				fileA = &x
			}
		}
		if inB {
			if y.Mode == filemode.Dir {
				subB = y.Hash
			} else {
				fileB = &y
			}
		}
		if !subA.IsZero() || !subB.IsZero() {
			if err := h.diffTrees(ctx, p, subA, subB, fn); err != nil {
				return err
			}
		}
		if fileA != nil || fileB != nil {
			c := FileChange{Path: p}
			if fileA != nil {
				c.From = fileA.Hash.String()
			}
			if fileB != nil {
				c.To, c.ToMode = fileB.Hash.String(), fileB.Mode
			}
			if err := fn(c); err != nil {
				return err
			}
		}
	}
	return nil
}

// gitlogRawEntry is one entry of a raw tree object, undecoded.
type gitlogRawEntry struct{ mode, name, hash []byte }

// gitlogNextEntry splits the first entry off a raw tree
// ("<octal mode> <name>\x00<20-byte hash>").
func gitlogNextEntry(raw []byte) (gitlogRawEntry, []byte, bool) {
	sp := bytes.IndexByte(raw, ' ')
	if sp < 0 {
		return gitlogRawEntry{}, nil, false
	}
	nul := bytes.IndexByte(raw[sp+1:], 0)
	if nul < 0 || sp+1+nul+1+20 > len(raw) {
		return gitlogRawEntry{}, nil, false
	}
	end := sp + 1 + nul + 1 + 20
	return gitlogRawEntry{mode: raw[:sp], name: raw[sp+1 : sp+1+nul], hash: raw[sp+1+nul+1 : end]}, raw[end:], true
}

func (e gitlogRawEntry) isDir() bool {
	return string(e.mode) == "40000" || string(e.mode) == "040000"
}

// compare orders entries as git sorts a tree: by name, a directory's name
// compared as if it ended in "/".
func (e gitlogRawEntry) compare(o gitlogRawEntry) int {
	n := min(len(e.name), len(o.name))
	if c := bytes.Compare(e.name[:n], o.name[:n]); c != 0 {
		return c
	}
	next := func(r gitlogRawEntry) int {
		if len(r.name) > n {
			return int(r.name[n])
		}
		if r.isDir() {
			return '/'
		}
		return 0
	}
	return next(e) - next(o)
}

func (e gitlogRawEntry) entry() (object.TreeEntry, error) {
	mode, err := filemode.New(string(e.mode))
	if err != nil {
		return object.TreeEntry{}, fmt.Errorf("entry %q: %w", e.name, err)
	}
	te := object.TreeEntry{Name: string(e.name), Mode: mode}
	copy(te.Hash[:], e.hash)
	return te, nil
}

// changes lists what differs between the trees a and b under the knowledge
// tree's path under (relative; "" for the whole tree), with paths relative to
// the knowledge tree.
func (h *History) changes(ctx context.Context, a, b plumbing.Hash, under string) ([]FileChange, error) {
	full := strings.TrimSuffix(h.prefix+strings.Trim(under, "/"), "/")
	ea, _, err := h.lookup(a, full)
	if err != nil {
		return nil, err
	}
	eb, _, err := h.lookup(b, full)
	if err != nil {
		return nil, err
	}
	var out []FileChange
	add := func(c FileChange) error {
		c.Path = strings.TrimPrefix(c.Path, h.prefix)
		out = append(out, c)
		return nil
	}
	if ea.Mode != filemode.Dir && eb.Mode != filemode.Dir && (!ea.Hash.IsZero() || !eb.Hash.IsZero()) {
		// under names a file.
		if ea.Hash != eb.Hash {
			c := FileChange{Path: full}
			if !ea.Hash.IsZero() {
				c.From = ea.Hash.String()
			}
			if !eb.Hash.IsZero() {
				c.To, c.ToMode = eb.Hash.String(), eb.Mode
			}
			_ = add(c)
		}
		return out, nil
	}
	var da, db plumbing.Hash
	if ea.Mode == filemode.Dir {
		da = ea.Hash
	}
	if eb.Mode == filemode.Dir {
		db = eb.Hash
	}
	err = h.diffTrees(ctx, full, da, db, add)
	return out, err
}

// Diff lists the files under the knowledge tree's path under ("" for all)
// that differ between the commits rev1 and rev2; "" as a revision is the
// empty tree (before the first commit).
func (h *History) Diff(ctx context.Context, rev1, rev2, under string) ([]FileChange, error) {
	var trees [2]plumbing.Hash
	for i, rev := range []string{rev1, rev2} {
		if rev == "" {
			continue
		}
		c, err := h.commit(ctx, rev)
		if err != nil {
			return nil, err
		}
		trees[i] = c.TreeHash
	}
	return h.changes(ctx, trees[0], trees[1], under)
}

// Blob reads a blob by its hash (as in FileChange). Returns at most limit
// bytes plus one, so a caller can tell an over-cap file.
func (h *History) Blob(ctx context.Context, hash string, limit int) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if h.packs == nil {
		h.packs = gitlogOpenPacks(filepath.Join(h.st.common, "objects", "pack"))
	}
	if data, typ, err := h.packs.read(plumbing.NewHash(hash)); err == nil && data != nil && typ == plumbing.BlobObject {
		if len(data) > limit+1 {
			data = data[:limit+1]
		}
		return data, nil
	}
	b, err := h.repo.BlobObject(plumbing.NewHash(hash))
	if err != nil {
		return nil, fmt.Errorf("reading blob %s: %w", hash, err)
	}
	r, err := b.Reader()
	if err != nil {
		return nil, fmt.Errorf("reading blob %s: %w", hash, err)
	}
	defer r.Close()
	data, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("reading blob %s: %w", hash, err)
	}
	return data, nil
}

// FileAt returns the blob hash of the file p (relative to the knowledge tree)
// in commit rev, or "" when the commit has no such file.
func (h *History) FileAt(ctx context.Context, rev, p string) (string, error) {
	c, err := h.commit(ctx, rev)
	if err != nil {
		return "", err
	}
	e, ok, err := h.lookup(c.TreeHash, h.prefix+strings.Trim(p, "/"))
	if err != nil || !ok || e.Mode == filemode.Dir {
		return "", err
	}
	return e.Hash.String(), nil
}

// Log walks the first-parent history from HEAD, newest first, and returns the
// commits that changed any of paths (files or directories relative to the
// knowledge tree; none means the whole tree), with what they changed below
// those paths. It stops after limit entries (0: no limit). Per commit it
// compares the paths' tree entries with the parent's, level by level, so
// commits that did not touch them cost one root-tree read; a commit an
// earlier Log saw costs nothing (the log cache, logcache.go), unless paths is
// the whole tree.
func (h *History) Log(ctx context.Context, paths []string, limit int) ([]LogEntry, error) {
	if len(paths) == 0 {
		paths = []string{""}
	}
	head, err := h.repo.Head()
	if errors.Is(err, plumbing.ErrReferenceNotFound) {
		return nil, nil // no commit yet
	}
	if err != nil {
		return nil, fmt.Errorf("reading HEAD: %w", err)
	}
	if roots := logCacheRoots(paths); roots != nil {
		return h.cachedLog(ctx, head.Hash(), paths, roots, limit)
	}
	return h.walkLog(ctx, head.Hash(), paths, limit)
}

// walkLog is Log's walk from cur over the trees, for paths the log cache
// does not cover.
func (h *History) walkLog(ctx context.Context, cur plumbing.Hash, paths []string, limit int) ([]LogEntry, error) {
	var out []LogEntry
	for !cur.IsZero() {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		c, err := h.node(cur)
		if err != nil {
			return out, err
		}
		var ptree, parent plumbing.Hash
		if len(c.parents) > 0 {
			parent = c.parents[0]
			p, err := h.node(parent)
			if err != nil {
				return out, err
			}
			ptree = p.tree
		}
		changes, err := h.pathChanges(ctx, ptree, c.tree, paths)
		if err != nil {
			return out, err
		}
		if len(changes) > 0 {
			co, err := h.commitObject(cur)
			if err != nil {
				return out, err
			}
			out = append(out, LogEntry{CommitInfo: gitlogInfo(co), Changes: changes})
			if limit > 0 && len(out) >= limit {
				break
			}
		}
		cur = parent
	}
	return out, nil
}

// cachedLog is Log's walk through the log cache (logcache.go): a commit seen
// before by a walk below the same top-level directories costs a map lookup.
func (h *History) cachedLog(ctx context.Context, cur plumbing.Hash, paths, roots []string, limit int) ([]LogEntry, error) {
	if h.logs == nil {
		h.logs = loadLogCache(h.st.common, h.prefix)
	}
	defer h.logs.save(h.prefix)
	var out []LogEntry
	for !cur.IsZero() {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		r, err := h.logRecord(ctx, cur, roots)
		if err != nil {
			return out, err
		}
		if changes := r.selectPaths(paths); len(changes) > 0 {
			if r.info == nil {
				co, err := h.commitObject(cur)
				if err != nil {
					return out, err
				}
				ci := gitlogInfo(co)
				r.info = &ci
				h.logs.dirty = true
			}
			out = append(out, r.entry(changes))
			if limit > 0 && len(out) >= limit {
				break
			}
		}
		cur = r.firstParent()
	}
	return out, nil
}

// logRecord returns the log cache's record of a commit, computing it (and
// adding it to the cache) when the cache has none that covers roots.
func (h *History) logRecord(ctx context.Context, hash plumbing.Hash, roots []string) (*logRec, error) {
	old, ok := h.logs.recs[logKey{hash, false}]
	if ok && old.covers(roots) {
		return old, nil
	}
	if ok {
		roots = old.union(roots)
	}
	c, err := h.node(hash)
	if err != nil {
		return nil, err
	}
	var ptree plumbing.Hash
	if len(c.parents) > 0 {
		p, err := h.node(c.parents[0])
		if err != nil {
			return nil, err
		}
		ptree = p.tree
	}
	r := &logRec{parents: c.parents, roots: roots}
	if ok {
		r.info = old.info
	}
	if r.changes, err = h.rootChanges(ctx, ptree, c.tree, roots); err != nil {
		return nil, err
	}
	h.logs.add(logKey{hash, false}, r)
	return r, nil
}

// rootChanges is a log record's changes: what changed from ptree to tree
// below each of roots (the top-level directories it covers).
func (h *History) rootChanges(ctx context.Context, ptree, tree plumbing.Hash, roots []string) ([]logChange, error) {
	var out []logChange
	for _, root := range roots {
		changes, err := h.changes(ctx, ptree, tree, root)
		if err != nil {
			return nil, err
		}
		for _, fc := range changes {
			out = append(out, toLogChange(fc))
		}
	}
	return out, nil
}

// commitObject reads a commit through the direct pack reader when it can
// (go-git's storage builds an offset map of every object on its first read).
func (h *History) commitObject(hash plumbing.Hash) (*object.Commit, error) {
	if h.packs == nil {
		h.packs = gitlogOpenPacks(filepath.Join(h.st.common, "objects", "pack"))
	}
	if data, typ, err := h.packs.read(hash); err == nil && data != nil && typ == plumbing.CommitObject {
		mo := &plumbing.MemoryObject{}
		mo.SetType(plumbing.CommitObject)
		mo.Write(data)
		c := &object.Commit{}
		if err := c.Decode(mo); err == nil {
			return c, nil
		}
	}
	c, err := h.repo.CommitObject(hash)
	if err != nil {
		return nil, fmt.Errorf("reading commit %s: %w", hash, err)
	}
	return c, nil
}

// gitlogMem is a commit-graph file held in memory.
type gitlogMem struct{ *bytes.Reader }

func (gitlogMem) Close() error { return nil }

// gitlogNode is what a history walk needs of a commit.
type gitlogNode struct {
	tree    plumbing.Hash
	parents []plumbing.Hash
}

// node returns a commit's tree and parents: from git's commit-graph file
// when it has the commit (no object to inflate), else from the commit object.
func (h *History) node(hash plumbing.Hash) (gitlogNode, error) {
	if h.graph == nil && !h.graphTried {
		h.graphTried = true
		// A single commit-graph file is read whole (it is ~40 bytes a commit):
		// go-git's file index reads it with a system call per lookup.
		name := filepath.Join(h.st.common, "objects", "info", "commit-graph")
		if fi, err := os.Stat(name); err == nil && fi.Size() <= 64<<20 {
			if data, err := os.ReadFile(name); err == nil {
				if g, err := commitgraph.OpenFileIndex(gitlogMem{bytes.NewReader(data)}); err == nil {
					h.graph = g
				}
			}
		}
		if h.graph == nil {
			if g, err := commitgraph.OpenChainOrFileIndex(osfs.New(h.st.common)); err == nil {
				h.graph = g
			}
		}
	}
	if h.graph != nil {
		if i, err := h.graph.GetIndexByHash(hash); err == nil {
			if cd, err := h.graph.GetCommitDataByIndex(i); err == nil {
				return gitlogNode{tree: cd.TreeHash, parents: cd.ParentHashes}, nil
			}
		}
	}
	c, err := h.commitObject(hash)
	if err != nil {
		return gitlogNode{}, err
	}
	return gitlogNode{tree: c.TreeHash, parents: c.ParentHashes}, nil
}

// MergeBase returns the best common ancestor of the commits a and b.
func (h *History) MergeBase(ctx context.Context, a, b string) (string, error) {
	ca, err := h.commit(ctx, a)
	if err != nil {
		return "", err
	}
	cb, err := h.commit(ctx, b)
	if err != nil {
		return "", err
	}
	bases, err := ca.MergeBase(cb)
	if err != nil {
		return "", fmt.Errorf("merge base of %s and %s: %w", a, b, err)
	}
	if len(bases) == 0 {
		return "", fmt.Errorf("%s and %s have no common history: compare branches of the same repository", a, b)
	}
	return bases[0].Hash.String(), nil
}

// ---- sharing: merge driver configuration ----------------------------------

// InstallMergeDriver registers pem's merge driver in the repository's git
// config (`[merge "pem"]`, a local setting every clone must make, since git
// never takes drivers from a clone) and adds the lines of attributes (the
// tree's .gitattributes, store.GitAttributes) to the knowledge tree's
// .gitattributes, keeping what is there. command is the driver line; ""
// means MergeDriverCommand. Running it again changes nothing.
func (R *Repo) InstallMergeDriver(ctx context.Context, command, attributes string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if command == "" {
		command = MergeDriverCommand
	}
	h, err := R.History()
	if err != nil {
		return err
	}
	dir := filepath.Join(R.r.root, filepath.FromSlash(R.r.prefix))
	cfg, err := h.repo.Config()
	if err != nil {
		return fmt.Errorf("reading git config of %s: %w", h.root, err)
	}
	sub := cfg.Raw.Section("merge").Subsection("pem")
	if sub.Option("driver") != command || sub.Option("name") == "" {
		sub.SetOption("name", MergeDriverName)
		sub.SetOption("driver", command)
		if err := setConfig(h.repo, cfg, h.st.common); err != nil {
			return fmt.Errorf("writing git config of %s: %w", h.root, err)
		}
	}
	name := filepath.Join(dir, ".gitattributes")
	old, err := os.ReadFile(name)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("reading %s: %w", name, err)
	}
	have := map[string]bool{}
	for _, l := range strings.Split(string(old), "\n") {
		have[strings.TrimSpace(l)] = true
	}
	var buf bytes.Buffer
	buf.Write(old)
	if len(old) > 0 && !bytes.HasSuffix(old, []byte("\n")) {
		buf.WriteByte('\n')
	}
	added := false
	for _, l := range strings.Split(strings.TrimSpace(attributes), "\n") {
		if !have[l] {
			buf.WriteString(l + "\n")
			added = true
		}
	}
	if !added {
		return nil
	}
	if err := os.WriteFile(name, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	return nil
}

// ---- sharing: pem sync -----------------------------------------------------

// SyncOptions configure Sync. Zero values mean defaults.
type SyncOptions struct {
	Remote string           // default "origin"
	Name   string           // committer name, default "pem"
	Email  string           // committer email, default "pem@localhost"
	Now    func() time.Time // the clock, default time.Now
	// Auth for the transport; nil for local paths and ambient credentials.
	Auth transport.AuthMethod
	// TracesDir and TraceExt name the tree's trace files (store.TracesDir,
	// store.TraceExt): the only files Sync commits and replays. Required.
	TracesDir, TraceExt string
	// StateOnly syncs the state ref alone and leaves the branch as it is:
	// a consolidation's job, whose branch changes go to a pull request.
	StateOnly bool

	// A push lost to another writer is retried (syncretry.go): Tries in all
	// (default SyncTries), pausing before each retry a random duration up to
	// a cap that starts at Backoff (or the lost try's duration, if longer)
	// and doubles up to MaxBackoff (defaults SyncBackoff, SyncMaxBackoff).
	// Rand returns a uniform int64 in [0, n) (default math/rand/v2.Int64N)
	// and Sleep waits or returns ctx's error (default a timer): injected so
	// tests are deterministic.
	Tries               int
	Backoff, MaxBackoff time.Duration
	Rand                func(n int64) int64
	Sleep               func(ctx context.Context, d time.Duration) error
}

// SyncResult says what Sync did.
type SyncResult struct {
	Branch        string
	Committed     int    // pending trace files committed first
	Replayed      int    // local commits re-applied onto the remote head
	FastForwarded bool   // the remote had commits the local branch took
	Pushed        bool   // the remote branch moved
	Retries       int    // pushes lost to another writer, then replayed and retried
	Head          string // the branch's commit afterwards

	// The state ref (statesync.go): State is its commit afterwards ("" when
	// neither side has one), StateReplayed the add-only commits replayed
	// onto the other side's state, StateFiles the files written or removed
	// on disk to match it, StatePushed whether the remote's moved. Notes say
	// what the user should know (two consolidations that diverged).
	State         string
	StateTaken    bool // the remote's state had commits the local one took
	StateReplayed int
	StateFiles    int
	StatePushed   bool
	Notes         []string
}

// ErrNotAddOnly is returned by Sync when local commits do more than add
// traces, so they cannot be replayed onto the remote head without a merge.
var ErrNotAddOnly = errors.New("local commits change more than traces")

// Sync shares the knowledge tree dir with a remote without merges: it commits
// pending trace files (under traces/, in neither the state nor HEAD) on the
// state ref (StateRef), fetches the remote's branch of the same name and its
// state, re-applies the local commits that only add traces onto the remote
// head (they only add files with unique names, so this cannot conflict),
// updates the working tree with what the remote brought, pushes, and then
// does the same for the state (statesync.go: replayed either way around a
// consolidator's snapshot, materialized on disk, pushed with a lease). A push that loses a race (see lostRace) is retried
// from the fetch with backoff; when every try lost, Sync returns ErrContended
// and the local commits stay. A remote that refuses (authentication, a hook,
// permissions) returns ErrRemoteRefused, not retried.
// Local commits that change anything else (a local consolidation, an edit)
// return ErrNotAddOnly naming them: push a branch and open a pull request, or
// merge with git, where pem's merge driver resolves experience/ and facts/.
func (R *Repo) Sync(ctx context.Context, opt SyncOptions) (*SyncResult, error) {
	if opt.TracesDir == "" || opt.TraceExt == "" {
		return nil, errors.New("sync: SyncOptions.TracesDir and TraceExt are required")
	}
	if opt.Remote == "" {
		opt.Remote = "origin"
	}
	if opt.Name == "" {
		opt.Name = "pem"
	}
	if opt.Email == "" {
		opt.Email = "pem@localhost"
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	h, err := R.History()
	if err != nil {
		return nil, err
	}
	if _, err := h.repo.Remote(opt.Remote); err != nil {
		return nil, fmt.Errorf("sync: %w %q in %s: add one with 'git remote add %s URL'", ErrNoRemote, opt.Remote, h.root, opt.Remote)
	}
	head, err := h.repo.Storer.Reference(plumbing.HEAD)
	if err != nil {
		return nil, fmt.Errorf("sync: reading HEAD: %w", err)
	}
	if head.Type() != plumbing.SymbolicReference || !head.Target().IsBranch() {
		return nil, fmt.Errorf("sync: HEAD of %s is detached: check out a branch first", h.root)
	}
	branch := head.Target()
	res := &SyncResult{Branch: branch.Short()}

	// Pending traces go on the state ref (statesync.go), never on main.
	n, err := h.commitPendingState(ctx, opt)
	if err != nil {
		return nil, err
	}
	res.Committed = n

	retry := newSyncRetry(opt)
	lastPush := R.StatePath(lastPushFile)
	// Durations are measured on the machine's clock, not opt.Now (commit times).
	lastEnd, lastTook := readLastPush(lastPush)
	if d := retry.yield(time.Now(), lastEnd, lastTook); d > 0 {
		if err := retry.sleep(ctx, d); err != nil {
			return res, fmt.Errorf("sync: waiting to push %s to %s: %w", branch.Short(), opt.Remote, err)
		}
	}
	for try := 1; ; try++ {
		t0 := time.Now()
		err := h.syncOnce(ctx, branch, opt, res)
		if err == nil {
			if res.Pushed {
				writeLastPush(lastPush, time.Now(), time.Since(t0))
			}
			return res, nil
		}
		var lost *lostPush
		if !errors.As(err, &lost) {
			return res, err
		}
		if try == retry.tries {
			return res, fmt.Errorf("sync: pushing %s to %s: %w %d times in a row (last: %v); nothing is lost: your commits stay on %s, replayed onto the remote's head",
				branch.Short(), opt.Remote, ErrContended, try, lost.err, branch.Short())
		}
		res.Retries++
		if err := retry.sleep(ctx, retry.delay(try, time.Since(t0))); err != nil {
			return res, fmt.Errorf("sync: waiting to push %s to %s again: %w", branch.Short(), opt.Remote, err)
		}
	}
}

// lostPush is a push another writer won: syncOnce's signal to try again.
type lostPush struct{ err error }

func (l *lostPush) Error() string { return "lost the push race: " + l.err.Error() }
func (l *lostPush) Unwrap() error { return l.err }

func (h *History) syncOnce(ctx context.Context, branch plumbing.ReferenceName, opt SyncOptions, res *SyncResult) error {
	if opt.StateOnly {
		err := h.repo.FetchContext(ctx, &git.FetchOptions{RemoteName: opt.Remote, RefSpecs: []config.RefSpec{stateFetchSpec(opt.Remote)}, Auth: opt.Auth})
		if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) && !errors.Is(err, transport.ErrEmptyRemoteRepository) {
			if refused(err) {
				return fmt.Errorf("sync: fetching %s from %s: %w: %w", StateRef, opt.Remote, ErrRemoteRefused, err)
			}
			return fmt.Errorf("sync: fetching %s from %s: %w", StateRef, opt.Remote, err)
		}
		if ref, err := h.repo.Head(); err == nil {
			res.Head = ref.Hash().String()
		}
		return h.syncState(ctx, opt, res)
	}
	remoteRef := plumbing.NewRemoteReferenceName(opt.Remote, branch.Short())
	err := h.repo.FetchContext(ctx, &git.FetchOptions{
		RemoteName: opt.Remote,
		RefSpecs:   []config.RefSpec{config.RefSpec(fmt.Sprintf("+%s:%s", branch, remoteRef)), stateFetchSpec(opt.Remote)},
		Auth:       opt.Auth,
	})
	empty := errors.Is(err, transport.ErrEmptyRemoteRepository)
	if err != nil && !empty && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		if strings.Contains(err.Error(), "couldn't find remote ref") {
			empty = true
		} else {
			if refused(err) {
				return fmt.Errorf("sync: fetching %s from %s: %w: %w", branch.Short(), opt.Remote, ErrRemoteRefused, err)
			}
			return fmt.Errorf("sync: fetching %s from %s: %w", branch.Short(), opt.Remote, err)
		}
	}
	local, err := h.repo.Reference(branch, true)
	if err != nil {
		if errors.Is(err, plumbing.ErrReferenceNotFound) {
			return fmt.Errorf("sync: branch %s has no commit yet: save a trace first", branch.Short())
		}
		return fmt.Errorf("sync: reading %s: %w", branch, err)
	}
	var remote *plumbing.Reference
	if !empty {
		remote, err = h.repo.Reference(remoteRef, true)
		if err != nil && !errors.Is(err, plumbing.ErrReferenceNotFound) {
			return fmt.Errorf("sync: reading %s: %w", remoteRef, err)
		}
	}
	if remote != nil && remote.Hash() != local.Hash() {
		newHead, ff, replayed, err := h.rebaseAdds(ctx, local.Hash(), remote.Hash(), opt)
		if err != nil {
			return err
		}
		if err := h.checkoutChange(ctx, local.Hash(), newHead); err != nil {
			return err
		}
		if err := h.repo.Storer.SetReference(plumbing.NewHashReference(branch, newHead)); err != nil {
			return fmt.Errorf("sync: moving %s: %w", branch, err)
		}
		res.FastForwarded = res.FastForwarded || ff || replayed > 0
		res.Replayed += replayed
		local = plumbing.NewHashReference(branch, newHead)
	}
	res.Head = local.Hash().String()
	if remote != nil && remote.Hash() == local.Hash() {
		return h.syncState(ctx, opt, res)
	}
	err = h.repo.PushContext(ctx, &git.PushOptions{
		RemoteName: opt.Remote,
		RefSpecs:   []config.RefSpec{config.RefSpec(fmt.Sprintf("%s:%s", branch, branch))},
		Auth:       opt.Auth,
	})
	if errors.Is(err, git.NoErrAlreadyUpToDate) {
		return h.syncState(ctx, opt, res)
	}
	if lostRace(err) {
		return &lostPush{err}
	}
	if err != nil && refused(err) {
		return fmt.Errorf("sync: pushing %s to %s: %w: %w", branch.Short(), opt.Remote, ErrRemoteRefused, err)
	}
	if err != nil {
		return fmt.Errorf("sync: pushing %s to %s: %w", branch.Short(), opt.Remote, err)
	}
	res.Pushed = true
	_ = h.repo.Storer.SetReference(plumbing.NewHashReference(remoteRef, local.Hash()))
	return h.syncState(ctx, opt, res)
}

// rebaseAdds returns the commit that puts the local commits since the merge
// base on top of remote: remote itself when local is behind (a fast-forward),
// local when remote is behind.
func (h *History) rebaseAdds(ctx context.Context, local, remote plumbing.Hash, opt SyncOptions) (plumbing.Hash, bool, int, error) {
	lc, err := h.repo.CommitObject(local)
	if err != nil {
		return plumbing.ZeroHash, false, 0, fmt.Errorf("sync: reading %s: %w", local, err)
	}
	rc, err := h.repo.CommitObject(remote)
	if err != nil {
		return plumbing.ZeroHash, false, 0, fmt.Errorf("sync: reading %s: %w", remote, err)
	}
	bases, err := lc.MergeBase(rc)
	if errors.Is(err, plumbing.ErrObjectNotFound) && h.shallow() {
		// A shallow clone (pem clone): go-git walks past the boundary.
		bases, err = h.shallowMergeBase(ctx, lc, rc)
	}
	if err != nil {
		return plumbing.ZeroHash, false, 0, fmt.Errorf("sync: merge base: %w", err)
	}
	if len(bases) == 0 {
		return plumbing.ZeroHash, false, 0, fmt.Errorf("sync: the local branch and %s have no common history: clone the remote and copy your traces into it", opt.Remote)
	}
	base := bases[0].Hash
	switch base {
	case local:
		return remote, true, 0, nil
	case remote:
		return local, false, 0, nil
	}
	// Collect the local commits since base, oldest first.
	var todo []*object.Commit
	for c := lc; c.Hash != base; {
		if c.NumParents() != 1 {
			return plumbing.ZeroHash, false, 0, fmt.Errorf("sync: %w: local commit %s %q is a merge: push your branch with git instead ('git pull && git push')", ErrNotAddOnly, c.Hash.String()[:10], gitlogInfo(c).Subject)
		}
		todo = append(todo, c)
		p, err := c.Parent(0)
		if err != nil {
			return plumbing.ZeroHash, false, 0, fmt.Errorf("sync: reading parent of %s: %w", c.Hash, err)
		}
		c = p
	}
	tip := rc
	for i := len(todo) - 1; i >= 0; i-- {
		c := todo[i]
		p, _ := c.Parent(0)
		var files []gitlogFile
		var bad []string
		err := h.diffTrees(ctx, "", p.TreeHash, c.TreeHash, func(ch FileChange) error {
			if !ch.Added() || !strings.HasPrefix(ch.Path, h.prefix+opt.TracesDir+"/") {
				bad = append(bad, ch.Path)
				return nil
			}
			files = append(files, gitlogFile{path: ch.Path, hash: plumbing.NewHash(ch.To), mode: ch.ToMode})
			return nil
		})
		if err != nil {
			return plumbing.ZeroHash, false, 0, err
		}
		if len(bad) > 0 {
			if len(bad) > 3 {
				bad = append(bad[:3], fmt.Sprintf("and %d more", len(bad)-3))
			}
			return plumbing.ZeroHash, false, 0, fmt.Errorf("sync: %w: local commit %s %q changes %s; sync only replays commits that add traces: push a branch and open a pull request, or run 'git pull' (pem's merge driver merges experience/ and facts/) and 'git push'",
				ErrNotAddOnly, c.Hash.String()[:10], gitlogInfo(c).Subject, strings.Join(bad, ", "))
		}
		// A trace the remote already has (same unique name) must be the same file.
		for _, f := range files {
			e, ok, err := h.lookup(tip.TreeHash, f.path)
			if err != nil {
				return plumbing.ZeroHash, false, 0, err
			}
			if ok && e.Hash != f.hash {
				return plumbing.ZeroHash, false, 0, fmt.Errorf("sync: %s differs between your commit %s and %s: traces are immutable; inspect both versions with git", f.path, c.Hash.String()[:10], opt.Remote)
			}
		}
		tree, err := gitlogPutFiles(h.repo.Storer, tip.TreeHash, files)
		if err != nil {
			return plumbing.ZeroHash, false, 0, err
		}
		if tree == tip.TreeHash {
			continue // everything was there already
		}
		nc := &object.Commit{
			Author:       c.Author,
			Committer:    object.Signature{Name: opt.Name, Email: opt.Email, When: opt.Now()},
			Message:      c.Message,
			TreeHash:     tree,
			ParentHashes: []plumbing.Hash{tip.Hash},
		}
		hash, err := gitlogStore(h.repo.Storer, nc)
		if err != nil {
			return plumbing.ZeroHash, false, 0, err
		}
		if tip, err = h.repo.CommitObject(hash); err != nil {
			return plumbing.ZeroHash, false, 0, fmt.Errorf("sync: reading new commit %s: %w", hash, err)
		}
	}
	return tip.Hash, false, len(todo), nil
}

// shallow reports whether the repository is a shallow clone (git keeps the
// boundary commits in the shallow file).
func (h *History) shallow() bool {
	_, err := os.Stat(filepath.Join(h.st.common, "shallow"))
	return err == nil
}

// shallowMergeBase is a merge base of a and b in a shallow clone: the first
// of b's ancestors, breadth first, that is also a's ancestor, where a commit
// whose parents were cut off by the shallow boundary is a root. The clone's
// history is short (its depth plus what it fetched since), so both walks are.
func (h *History) shallowMergeBase(ctx context.Context, a, b *object.Commit) ([]*object.Commit, error) {
	walk := func(c *object.Commit, visit func(*object.Commit) bool) error {
		seen := map[plumbing.Hash]bool{c.Hash: true}
		queue := []*object.Commit{c}
		for len(queue) > 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
			c := queue[0]
			queue = queue[1:]
			if !visit(c) {
				return nil
			}
			for _, p := range c.ParentHashes {
				if seen[p] {
					continue
				}
				seen[p] = true
				pc, err := h.repo.CommitObject(p)
				if errors.Is(err, plumbing.ErrObjectNotFound) {
					continue // beyond the shallow boundary
				}
				if err != nil {
					return err
				}
				queue = append(queue, pc)
			}
		}
		return nil
	}
	inA := map[plumbing.Hash]bool{}
	if err := walk(a, func(c *object.Commit) bool { inA[c.Hash] = true; return true }); err != nil {
		return nil, err
	}
	var base []*object.Commit
	err := walk(b, func(c *object.Commit) bool {
		if inA[c.Hash] {
			base = append(base, c)
			return false
		}
		return true
	})
	return base, err
}

// checkoutChange brings the working tree and the index from commit from to
// commit to, touching only the files that differ. A file the user changed
// locally that the update would overwrite stops it before anything is written.
func (h *History) checkoutChange(ctx context.Context, from, to plumbing.Hash) error {
	if from == to {
		return nil
	}
	fc, err := h.repo.CommitObject(from)
	if err != nil {
		return fmt.Errorf("sync: reading %s: %w", from, err)
	}
	tc, err := h.repo.CommitObject(to)
	if err != nil {
		return fmt.Errorf("sync: reading %s: %w", to, err)
	}
	var changes []FileChange
	if err := h.diffTrees(ctx, "", fc.TreeHash, tc.TreeHash, func(c FileChange) error {
		changes = append(changes, c)
		return nil
	}); err != nil {
		return err
	}
	// Check first: never overwrite local work.
	for _, c := range changes {
		name := filepath.Join(h.root, filepath.FromSlash(c.Path))
		cur, err := gitlogHashFile(name)
		if err != nil {
			return err
		}
		if cur != c.From && cur != c.To {
			return fmt.Errorf("sync: %s has local changes that the update would overwrite: commit or discard them, then sync again", c.Path)
		}
	}
	idx, err := h.repo.Storer.Index()
	if err != nil {
		return fmt.Errorf("sync: reading the index: %w", err)
	}
	// A file the branch stops tracking because it moved to the state ref
	// (the consolidation's move commit) stays on disk when the local state
	// holds it.
	var stateTree plumbing.Hash
	if tip, err := h.st.refValue(StateRef); err == nil && !tip.IsZero() {
		if c, err := h.repo.CommitObject(tip); err == nil {
			stateTree = c.TreeHash
		}
	}
	for _, c := range changes {
		name := filepath.Join(h.root, filepath.FromSlash(c.Path))
		if c.Deleted() {
			if e, ok, err := h.lookup(stateTree, c.Path); err != nil {
				return err
			} else if !ok || e.Hash.String() != c.From {
				if err := os.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
					return fmt.Errorf("sync: removing %s: %w", c.Path, err)
				}
			}
			_, _ = idx.Remove(c.Path)
			continue
		}
		if c.ToMode == filemode.Symlink || c.ToMode == filemode.Submodule {
			return fmt.Errorf("sync: %s from the remote is a %s; pem trees hold regular files only: inspect the remote", c.Path, c.ToMode)
		}
		data, err := h.Blob(ctx, c.To, 1<<30)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			return fmt.Errorf("sync: %w", err)
		}
		perm := os.FileMode(0o644)
		if c.ToMode == filemode.Executable {
			perm = 0o755
		}
		if err := gitlogWriteFile(name, data, perm); err != nil {
			return err
		}
		if err := gitlogIndexEntry(idx, name, c.Path, plumbing.NewHash(c.To), c.ToMode); err != nil {
			return err
		}
	}
	idx.Cache = nil // the cached-tree extension no longer matches
	if err := h.repo.Storer.SetIndex(idx); err != nil {
		return fmt.Errorf("sync: writing the index: %w", err)
	}
	return nil
}

// ---- object plumbing -------------------------------------------------------

type gitlogFile struct {
	path string // repository path
	hash plumbing.Hash
	mode filemode.FileMode
}

func gitlogStore(s storer.EncodedObjectStorer, c *object.Commit) (plumbing.Hash, error) {
	obj := s.NewEncodedObject()
	if err := c.Encode(obj); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("encoding commit: %w", err)
	}
	h, err := s.SetEncodedObject(obj)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("writing commit: %w", err)
	}
	return h, nil
}

// gitlogPutFiles returns the tree base (zero: empty) with files added or
// replaced, writing only the trees on the files' paths.
func gitlogPutFiles(s storer.EncodedObjectStorer, base plumbing.Hash, files []gitlogFile) (plumbing.Hash, error) {
	var entries []object.TreeEntry
	if !base.IsZero() {
		t, err := object.GetTree(s, base)
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("reading tree %s: %w", base, err)
		}
		entries = append(entries, t.Entries...)
	}
	groups := map[string][]gitlogFile{}
	var order []string
	for _, f := range files {
		first, rest, nested := strings.Cut(f.path, "/")
		if !nested {
			entries = gitlogSetEntry(entries, object.TreeEntry{Name: first, Mode: f.mode, Hash: f.hash})
			continue
		}
		if _, ok := groups[first]; !ok {
			order = append(order, first)
		}
		groups[first] = append(groups[first], gitlogFile{path: rest, hash: f.hash, mode: f.mode})
	}
	for _, name := range order {
		var sub plumbing.Hash
		for _, e := range entries {
			if e.Name == name && e.Mode == filemode.Dir {
				sub = e.Hash
			}
		}
		h, err := gitlogPutFiles(s, sub, groups[name])
		if err != nil {
			return plumbing.ZeroHash, err
		}
		entries = gitlogSetEntry(entries, object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: h})
	}
	sort.Sort(object.TreeEntrySorter(entries))
	obj := s.NewEncodedObject()
	if err := (&object.Tree{Entries: entries}).Encode(obj); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("encoding tree: %w", err)
	}
	h, err := s.SetEncodedObject(obj)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("writing tree: %w", err)
	}
	return h, nil
}

func gitlogSetEntry(entries []object.TreeEntry, e object.TreeEntry) []object.TreeEntry {
	for i := range entries {
		if entries[i].Name == e.Name {
			entries[i] = e
			return entries
		}
	}
	return append(entries, e)
}

// gitlogHashFile returns the git blob hash of a file on disk, "" when absent.
func gitlogHashFile(name string) (string, error) {
	data, err := os.ReadFile(name)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("sync: reading %s: %w", name, err)
	}
	return plumbing.ComputeHash(plumbing.BlobObject, data).String(), nil
}

func gitlogWriteFile(name string, data []byte, perm os.FileMode) error {
	if err := replaceFile(name, ".pem-sync-*", data, perm); err != nil {
		return fmt.Errorf("sync: writing %s: %w", name, err)
	}
	return nil
}

// replaceFile replaces name with data and mode perm: a temporary file
// (named by pattern, as for os.CreateTemp) in name's directory, renamed over
// it, and removed when anything fails.
func replaceFile(name, pattern string, data []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(name), pattern)
	if err != nil {
		return err
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Chmod(tmp.Name(), perm)
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), name)
	}
	if werr != nil {
		os.Remove(tmp.Name())
	}
	return werr
}

// gitlogIndexEntry records a file in the index with its stat data, so that
// git status sees it clean without re-reading it.
func gitlogIndexEntry(idx *index.Index, name, p string, hash plumbing.Hash, mode filemode.FileMode) error {
	fi, err := os.Lstat(name)
	if err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	e, err := idx.Entry(p)
	if err != nil {
		e = idx.Add(p)
	}
	e.Hash = hash
	e.Mode = mode
	e.Size = uint32(fi.Size())
	e.ModifiedAt = fi.ModTime()
	fillStat(e, fi) // from git.go: ctime, device, inode, uid, gid
	return nil
}

// ---- direct pack reads -----------------------------------------------------

// gitlogPacks reads objects straight from the repository's pack files (index
// version 2) with a delta-base cache keyed by offset. It exists for speed
// only: go-git's storage reopens the pack and re-resolves delta chains on
// every read of a large object, copies each object several times and builds
// an offset map of every object on first use, which made `pem log` cost
// about 5× the CPU of `git log -- path` (see docs/performance.md, "Log").
// Anything it cannot read (loose objects, other index versions) is left to
// go-git: read returns nil data then.
type gitlogPacks struct {
	packs []*gitlogPackFile
	cache map[gitlogKey]gitlogObj
	size  int // bytes held in cache
	// Readers are reused across objects (a zlib reader alone is ~40 KiB, and
	// a delta chain nests one read per link): a free list, not one slot.
	free    []*gitlogReader
	scratch []byte // a delta's own bytes, needed only until it is applied
}

type gitlogReader struct {
	br *bufio.Reader
	zr io.ReadCloser
}

type gitlogKey struct {
	pack int
	off  int64
}

type gitlogObj struct {
	typ  plumbing.ObjectType
	data []byte
}

type gitlogPackFile struct {
	idx   []byte // the whole .idx file
	n     int    // objects
	large int    // entries of the 64-bit offset table
	f     io.ReaderAt
	c     io.Closer // nil when the pack is not a file
	size  int64
}

const gitlogCacheMax = 64 << 20

func gitlogOpenPacks(dir string) *gitlogPacks {
	ps := &gitlogPacks{cache: map[gitlogKey]gitlogObj{}}
	idxs, _ := filepath.Glob(filepath.Join(dir, "pack-*.idx"))
	for _, name := range idxs {
		idx, err := os.ReadFile(name)
		if err != nil {
			continue
		}
		f, err := os.Open(strings.TrimSuffix(name, ".idx") + ".pack")
		if err != nil {
			continue
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			continue
		}
		p, ok := gitlogNewPackFile(idx, f, fi.Size())
		if !ok {
			f.Close()
			continue // not an index we read: go-git will
		}
		p.c = f
		ps.packs = append(ps.packs, p)
	}
	return ps
}

// gitlogNewPackFile checks a version 2 pack index (header, a fan-out table
// that never decreases and ends at the object count, and room for the
// names, CRCs, offsets and trailer) and pairs it with its pack's bytes.
// ok is false for anything else.
func gitlogNewPackFile(idx []byte, pack io.ReaderAt, size int64) (*gitlogPackFile, bool) {
	const fan = 8
	if len(idx) < fan+256*4 || !bytes.Equal(idx[:4], []byte{0xff, 't', 'O', 'c'}) || gitlogBE32(idx[4:]) != 2 {
		return nil, false
	}
	prev := uint32(0)
	for k := 0; k < 256; k++ {
		v := gitlogBE32(idx[fan+k*4:])
		if v < prev {
			return nil, false
		}
		prev = v
	}
	n := int(prev)
	fixed := fan + 256*4 + n*(20+4+4)
	if n < 0 || fixed+2*20 > len(idx) || (len(idx)-fixed-2*20)%8 != 0 {
		return nil, false
	}
	return &gitlogPackFile{idx: idx, n: n, large: (len(idx) - fixed - 2*20) / 8, f: pack, size: size}, true
}

func (ps *gitlogPacks) close() {
	for _, p := range ps.packs {
		if p.c != nil {
			p.c.Close()
		}
	}
}

func gitlogBE32(b []byte) uint32 {
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

// offset finds hash in the pack's index: -1 when absent (or when the index
// points outside its 64-bit offset table).
func (p *gitlogPackFile) offset(hash plumbing.Hash) int64 {
	const fan = 8
	lo := 0
	if hash[0] > 0 {
		lo = int(gitlogBE32(p.idx[fan+(int(hash[0])-1)*4:]))
	}
	hi := int(gitlogBE32(p.idx[fan+int(hash[0])*4:]))
	names := p.idx[fan+256*4:]
	i := lo + sort.Search(hi-lo, func(i int) bool { return bytes.Compare(names[(lo+i)*20:(lo+i)*20+20], hash[:]) >= 0 })
	if i >= hi || !bytes.Equal(names[i*20:i*20+20], hash[:]) {
		return -1
	}
	offs := p.idx[fan+256*4+p.n*24:]
	o := gitlogBE32(offs[i*4:])
	if o&0x80000000 == 0 {
		return int64(o)
	}
	k := int(o & 0x7fffffff)
	if k >= p.large {
		return -1
	}
	large := offs[p.n*4+k*8:]
	v := int64(gitlogBE32(large))<<32 | int64(gitlogBE32(large[4:]))
	if v < 0 {
		return -1
	}
	return v
}

// read returns the object's type and content, or nil data when no pack has it.
func (ps *gitlogPacks) read(hash plumbing.Hash) ([]byte, plumbing.ObjectType, error) {
	for i, p := range ps.packs {
		if off := p.offset(hash); off >= 0 {
			o, err := ps.at(i, off, 0)
			return o.data, o.typ, err
		}
	}
	return nil, plumbing.InvalidObject, nil
}

// at resolves the object at off in pack i, following delta chains.
func (ps *gitlogPacks) at(i int, off int64, depth int) (gitlogObj, error) {
	key := gitlogKey{i, off}
	if o, ok := ps.cache[key]; ok {
		return o, nil
	}
	if depth > 10000 {
		return gitlogObj{}, fmt.Errorf("pack delta chain too deep at offset %d", off)
	}
	p := ps.packs[i]
	if off < 0 || off >= p.size {
		return gitlogObj{}, fmt.Errorf("pack offset %d outside the pack (%d bytes)", off, p.size)
	}
	// A reader from the free list; a nested call for a delta base takes another.
	var rd *gitlogReader
	if n := len(ps.free); n > 0 {
		rd, ps.free = ps.free[n-1], ps.free[:n-1]
	} else {
		rd = &gitlogReader{br: bufio.NewReaderSize(nil, 4096)}
	}
	defer func() { ps.free = append(ps.free, rd) }()
	r := rd.br
	r.Reset(io.NewSectionReader(p.f, off, p.size-off))
	c, err := r.ReadByte()
	if err != nil {
		return gitlogObj{}, err
	}
	typ := plumbing.ObjectType((c >> 4) & 7)
	size := int64(c & 15)
	for shift := 4; c&0x80 != 0; shift += 7 {
		if c, err = r.ReadByte(); err != nil {
			return gitlogObj{}, err
		}
		if shift > 56 {
			return gitlogObj{}, fmt.Errorf("pack object at offset %d: size header too long", off)
		}
		size |= int64(c&0x7f) << shift
	}
	// zlib inflates at most ~1032:1: a larger size is a corrupt header, not
	// an allocation to make.
	if size < 0 || size > (p.size-off)*1032+64 {
		return gitlogObj{}, fmt.Errorf("pack object at offset %d: size %d does not fit the pack", off, size)
	}
	var base gitlogObj
	switch typ {
	case plumbing.OFSDeltaObject:
		c, err := r.ReadByte()
		if err != nil {
			return gitlogObj{}, err
		}
		rel := int64(c & 0x7f)
		for c&0x80 != 0 {
			if c, err = r.ReadByte(); err != nil {
				return gitlogObj{}, err
			}
			if rel > p.size {
				return gitlogObj{}, fmt.Errorf("pack object at offset %d: delta base offset out of range", off)
			}
			rel = ((rel + 1) << 7) | int64(c&0x7f)
		}
		if rel <= 0 || rel > off {
			return gitlogObj{}, fmt.Errorf("pack object at offset %d: delta base offset %d out of range", off, rel)
		}
		if base, err = ps.at(i, off-rel, depth+1); err != nil {
			return gitlogObj{}, err
		}
	case plumbing.REFDeltaObject:
		var bh plumbing.Hash
		if _, err := io.ReadFull(r, bh[:]); err != nil {
			return gitlogObj{}, err
		}
		data, btyp, err := ps.read(bh)
		if err != nil || data == nil {
			return gitlogObj{}, fmt.Errorf("pack delta base %s not found: %v", bh, err)
		}
		base = gitlogObj{typ: btyp, data: data}
	case plumbing.CommitObject, plumbing.TreeObject, plumbing.BlobObject, plumbing.TagObject:
	default:
		return gitlogObj{}, fmt.Errorf("pack object at offset %d has unknown type %d", off, typ)
	}
	if rd.zr == nil {
		if rd.zr, err = zlib.NewReader(r); err != nil {
			return gitlogObj{}, err
		}
	} else if err := rd.zr.(zlib.Resetter).Reset(r, nil); err != nil {
		return gitlogObj{}, err
	}
	var raw []byte
	if base.data != nil && size <= 1<<20 {
		// A delta's bytes are dropped once applied: inflate them into the
		// scratch buffer (its base was resolved before, so no nested read
		// is using it).
		if int64(cap(ps.scratch)) < size {
			ps.scratch = make([]byte, size)
		}
		raw = ps.scratch[:size]
		if _, err = io.ReadFull(rd.zr, raw); err != nil {
			return gitlogObj{}, fmt.Errorf("inflating pack object at offset %d: %w", off, err)
		}
	} else if raw, err = gitlogInflate(rd.zr, size); err != nil {
		return gitlogObj{}, fmt.Errorf("inflating pack object at offset %d: %w", off, err)
	}
	o := gitlogObj{typ: typ, data: raw}
	if base.data != nil {
		data, err := gitlogPatch(base.data, raw)
		if err != nil {
			return gitlogObj{}, fmt.Errorf("pack object at offset %d: %w", off, err)
		}
		o = gitlogObj{typ: base.typ, data: data}
	}
	if depth == 0 && o.typ != plumbing.TreeObject {
		// Only delta bases and trees are kept: a history walk reads each
		// commit's trees, whose older versions are deltas against them.
		return o, nil
	}
	if ps.size+len(o.data) > gitlogCacheMax {
		clear(ps.cache)
		ps.size = 0
	}
	ps.cache[key] = o
	ps.size += len(o.data)
	return o, nil
}

// gitlogInflate reads exactly n bytes of an object from zr. A large object
// is read into a growing buffer, so that a size the stream does not hold
// costs no allocation of that size.
func gitlogInflate(zr io.Reader, n int64) ([]byte, error) {
	if n <= 1<<20 {
		b := make([]byte, n)
		_, err := io.ReadFull(zr, b)
		return b, err
	}
	var buf bytes.Buffer
	buf.Grow(1 << 20)
	if m, err := io.CopyN(&buf, zr, n); err != nil {
		return nil, fmt.Errorf("%d of %d bytes: %w", m, n, err)
	}
	return buf.Bytes(), nil
}

// gitlogPatch applies a git delta to base.
func gitlogPatch(base, delta []byte) ([]byte, error) {
	bad := errors.New("corrupt delta")
	varint := func() (int, bool) {
		n, shift := 0, 0
		for len(delta) > 0 {
			c := delta[0]
			delta = delta[1:]
			if shift > 56 {
				return 0, false
			}
			n |= int(c&0x7f) << shift
			shift += 7
			if c&0x80 == 0 {
				return n, true
			}
		}
		return 0, false
	}
	srcSize, ok1 := varint()
	dstSize, ok2 := varint()
	if !ok1 || !ok2 || srcSize != len(base) || dstSize < 0 {
		return nil, bad
	}
	// A copy op of 4 bytes yields at most 16 MiB, an insert op no more than
	// its own length: a larger target is a corrupt delta. The buffer starts
	// at what the base and the delta can justify and grows as ops fill it.
	if dstSize > (len(delta)+3)/4*0xffffff+len(delta) {
		return nil, bad
	}
	out := make([]byte, 0, min(dstSize, len(base)+len(delta)))
	for len(delta) > 0 {
		op := delta[0]
		delta = delta[1:]
		switch {
		case op&0x80 != 0:
			var off, n int
			for k := 0; k < 4; k++ {
				if op&(1<<k) != 0 {
					if len(delta) == 0 {
						return nil, bad
					}
					off |= int(delta[0]) << (8 * k)
					delta = delta[1:]
				}
			}
			for k := 0; k < 3; k++ {
				if op&(0x10<<k) != 0 {
					if len(delta) == 0 {
						return nil, bad
					}
					n |= int(delta[0]) << (8 * k)
					delta = delta[1:]
				}
			}
			if n == 0 {
				n = 0x10000
			}
			if off+n > len(base) || off < 0 || len(out)+n > dstSize {
				return nil, bad
			}
			out = append(out, base[off:off+n]...)
		case op != 0:
			if int(op) > len(delta) || len(out)+int(op) > dstSize {
				return nil, bad
			}
			out = append(out, delta[:op]...)
			delta = delta[op:]
		default:
			return nil, bad
		}
	}
	if len(out) != dstSize {
		return nil, bad
	}
	return out, nil
}

// pathChanges lists what changed under each of paths (relative to the
// tree) from the tree ptree to tree: nothing for a path whose entry is the
// same object in both.
func (h *History) pathChanges(ctx context.Context, ptree, tree plumbing.Hash, paths []string) ([]FileChange, error) {
	var changes []FileChange
	for _, p := range paths {
		full := strings.TrimSuffix(h.prefix+strings.Trim(p, "/"), "/")
		ea, _, err := h.lookup(tree, full)
		if err != nil {
			return nil, err
		}
		eb, _, err := h.lookup(ptree, full)
		if err != nil {
			return nil, err
		}
		if ea.Hash == eb.Hash {
			continue
		}
		ch, err := h.changes(ctx, ptree, tree, strings.Trim(p, "/"))
		if err != nil {
			return nil, err
		}
		changes = append(changes, ch...)
	}
	return changes, nil
}
