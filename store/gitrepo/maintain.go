package gitrepo

// maintain.go keeps the object store healthy. Every consolidation writes its
// new objects as one pack (pack.go) and small commits write loose objects, so
// without maintenance a repository consolidated twice an hour gathers ~8,760
// packs a year, and every reader opens each one's index. Maintain repacks
// once a pack-count or loose-object threshold is passed.
//
// It runs the git CLI: `git repack -d --geometric=2`. Measured on the same
// repository (28 packs, 1,243 loose objects, 23 MiB; docs/scale.md): go-git's
// Repository.RepackObjects took 28.4 s and 168 MB for a pack 30% larger than
// git's, and its Prune then failed on the pack it had just replaced; git
// repack -a -d took 8.7 s and 38 MB, --geometric=2 9.8 s the first time and
// then only what the newest packs hold. Geometric repacking merges the small
// packs into bigger ones so that each pack is at least twice the size of all
// smaller ones together: the pack count stays logarithmic in the store's
// size and the bytes rewritten amortize, instead of `repack -a` rewriting
// the whole history each time. Loose objects are rolled into the new pack
// and deleted (-d runs prune-packed).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// ErrGitMissing is returned when a command needs the git program and it is
// not on PATH.
var ErrGitMissing = errors.New("the git program is not installed (or not on PATH)")

// ObjectCounts are the pack files and loose objects of a repository.
type ObjectCounts struct {
	Packs int // pack files (counted by their .idx)
	Loose int // loose objects
}

// MaintainOptions are Maintain's thresholds (engine.Policy's repack_packs and
// repack_loose): a repack runs when the store has more packs than MaxPacks or
// more loose objects than MaxLoose. Zero or less disables a threshold.
type MaintainOptions struct {
	MaxPacks int
	MaxLoose int
	// PruneGrowth drops the objects no ref reaches any more (what the state
	// ref's snapshots leave behind: state.go) once the packs' bytes have
	// grown this many times since the last such repack; 0 never. It runs
	// `git repack -d --cruft --cruft-expiration=PruneExpire`: every
	// reachable object into one pack, the unreachable ones newer than
	// PruneExpire into a cruft pack (a writer in another process may not
	// have moved its ref yet), the older ones gone. The first call only
	// remembers the bytes (<git dir>/pem-maintain-pruned).
	PruneGrowth float64
	PruneExpire string // git approxidate; "" is DefaultPruneExpire
}

// DefaultPruneExpire keeps the unreachable objects of the last day: far
// longer than any pem command takes between writing objects and moving the
// ref that names them.
const DefaultPruneExpire = "1.day.ago"

// MaintainResult says what Maintain found and did.
type MaintainResult struct {
	Before, After ObjectCounts
	Repacked      bool
	Pruned        bool  // the repack dropped unreachable objects (PruneGrowth)
	PackBytes     int64 // the packs' bytes before
	Took          time.Duration
}

// packBytes sums the sizes of the pack files (one directory read).
func (R *Repo) packBytes() (int64, error) {
	packs, err := filepath.Glob(filepath.Join(R.r.common, "objects", "pack", "pack-*.pack"))
	if err != nil {
		return 0, err
	}
	var n int64
	for _, p := range packs {
		if fi, err := os.Stat(p); err == nil {
			n += fi.Size()
		}
	}
	return n, nil
}

// Objects counts the repository's pack files and loose objects: 257
// directory reads, no object is opened.
func (R *Repo) Objects() (ObjectCounts, error) {
	var c ObjectCounts
	objects := filepath.Join(R.r.common, "objects")
	idx, err := filepath.Glob(filepath.Join(objects, "pack", "pack-*.idx"))
	if err != nil {
		return c, err
	}
	c.Packs = len(idx)
	for i := 0; i < 256; i++ {
		es, err := os.ReadDir(filepath.Join(objects, fmt.Sprintf("%02x", i)))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return c, fmt.Errorf("counting the loose objects of %s: %w", R.r.gitDir, err)
		}
		for _, e := range es {
			if len(e.Name()) == 38 && !e.IsDir() {
				c.Loose++
			}
		}
	}
	return c, nil
}

// Maintain repacks the object store when it has passed a threshold of opt
// (see the file comment): `git repack -d --geometric=2`, which keeps every
// object and deletes only what is now in the new pack. Below the thresholds
// it does nothing and reads no object. The caller holds the tree lock (pem's
// writers do not run at once); git readers of the repository are safe
// throughout, as with any git repack. ErrGitMissing when the git program is
// missing.
func (R *Repo) Maintain(ctx context.Context, opt MaintainOptions) (*MaintainResult, error) {
	before, err := R.Objects()
	if err != nil {
		return nil, err
	}
	res := &MaintainResult{Before: before, After: before}
	if opt.PruneGrowth > 0 {
		if res.PackBytes, err = R.packBytes(); err != nil {
			return res, err
		}
		mark := R.StatePath("pem-maintain-pruned")
		var last int64
		if b, err := os.ReadFile(mark); err == nil {
			fmt.Sscan(string(b), &last)
		}
		switch {
		case last <= 0:
			_ = os.WriteFile(mark, []byte(fmt.Sprintf("%d\n", res.PackBytes)), 0o644)
		case float64(res.PackBytes) > opt.PruneGrowth*float64(last):
			expire := opt.PruneExpire
			if expire == "" {
				expire = DefaultPruneExpire
			}
			start := time.Now()
			if _, err := R.git_(ctx, "repack", "-d", "-q", "--cruft", "--cruft-expiration="+expire); err != nil {
				return res, fmt.Errorf("repacking %s to drop unreachable objects (%d bytes of packs): %w", R.r.gitDir, res.PackBytes, err)
			}
			res.Repacked, res.Pruned, res.Took = true, true, time.Since(start)
			R.invalidate()
			if after, err := R.packBytes(); err == nil {
				_ = os.WriteFile(mark, []byte(fmt.Sprintf("%d\n", after)), 0o644)
			}
			res.After, err = R.Objects()
			return res, err
		}
	}
	if !(opt.MaxPacks > 0 && before.Packs > opt.MaxPacks || opt.MaxLoose > 0 && before.Loose > opt.MaxLoose) {
		return res, nil
	}
	start := time.Now()
	if _, err := R.git_(ctx, "repack", "-d", "-q", "--geometric=2"); err != nil {
		return res, fmt.Errorf("repacking %s (%d packs, %d loose objects): %w", R.r.gitDir, before.Packs, before.Loose, err)
	}
	res.Repacked, res.Took = true, time.Since(start)
	R.invalidate()
	if res.After, err = R.Objects(); err != nil {
		return res, err
	}
	return res, nil
}

// git_ runs the git program in the repository's worktree root and returns
// its output. A missing program is ErrGitMissing; a failure carries git's
// message.
func (R *Repo) git_(ctx context.Context, args ...string) (string, error) {
	return runGit(ctx, R.r.root, args...)
}

// runGit runs git with args in dir (dir "" is the current directory).
func runGit(ctx context.Context, dir string, args ...string) (string, error) {
	bin, err := exec.LookPath("git")
	if err != nil {
		return "", fmt.Errorf("%w: install git (apt-get install git) and run the command again", ErrGitMissing)
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	// No pager, no prompt for credentials on a terminal pem does not own, no
	// advice lines mixed into the output pem reports.
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "GIT_PAGER=cat", "GIT_ADVICE=0")
	out, err := dieWithParent(cmd)()
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		msg := strings.TrimSpace(string(out))
		if msg == "" {
			msg = err.Error()
		}
		return string(out), fmt.Errorf("git %s: %s", strings.Join(args, " "), msg)
	}
	return string(out), nil
}
