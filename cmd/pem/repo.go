package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/pemdev/pem/consolidate"
	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store"
	"github.com/pemdev/pem/store/gitrepo"
)

// The git side of the one-shot commands: each opens the tree's repository
// once (gitrepo.Open), does its one thing and closes it.

// installMergeDriver registers this very binary as the tree's merge driver
// and returns the driver line it registered. The bare command `pem
// merge-driver …` would only run where pem is on git's PATH; when it is not
// (./bin/pem, a downloaded archive) git silently falls back to a textual
// merge and every concurrent change of facts/ or experience/ conflicts.
func installMergeDriver(ctx context.Context, dir string) (string, error) {
	cmd, err := mergeDriverCommand()
	if err != nil {
		return "", err
	}
	r, err := gitrepo.Open(ctx, dir)
	if err != nil {
		return "", err
	}
	defer r.Close()
	return cmd, r.InstallMergeDriver(ctx, cmd, store.GitAttributes)
}

// executable finds the running binary; the tests point it at the pem that
// TestMain puts on PATH (the test binary itself would run the tests).
var executable = os.Executable

// mergeDriverCommand is gitrepo.MergeDriverCommand with the absolute,
// symlink-resolved path of the running binary, quoted for the shell git runs
// drivers with.
func mergeDriverCommand() (string, error) {
	exe, err := executable()
	if err == nil {
		exe, err = filepath.Abs(exe)
	}
	if err != nil {
		return "", fmt.Errorf("finding the running pem binary to register as the merge driver: %w", err)
	}
	if r, err := filepath.EvalSymlinks(exe); err == nil {
		exe = r
	}
	// git expands %O, %A, … in the line and reads "%%" as one "%".
	q := strings.ReplaceAll(shellQuote(filepath.ToSlash(exe)), "%", "%%")
	return q + strings.TrimPrefix(gitrepo.MergeDriverCommand, "pem"), nil
}

var shellSafe = engine.LazyRE(`^[A-Za-z0-9_./:@+=,-]+$`)

// shellQuote quotes s for sh (git runs drivers with sh, also on Windows).
func shellQuote(s string) string {
	if shellSafe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// mergeDriverWarning says what is wrong with the merge driver git would run
// for the tree at dir (read through h), or "" when it runs or the tree does
// not ask for it (no merge=pem in its .gitattributes).
func mergeDriverWarning(h *gitrepo.History, dir string) string {
	attrs, err := os.ReadFile(filepath.Join(dir, ".gitattributes"))
	if err != nil || !strings.Contains(string(attrs), "merge=pem") {
		return ""
	}
	const fix = "run 'pem merge-driver --install' with the pem you use (see docs/sharing.md)"
	cmd, err := h.MergeDriver()
	if err != nil {
		return err.Error()
	}
	if cmd == "" {
		return "no merge driver 'pem' is registered in this clone's git config, so git merges facts/ and experience/ as text and concurrent changes conflict: " + fix
	}
	prog := strings.ReplaceAll(driverProgram(cmd), "%%", "%")
	if prog == "" {
		return fmt.Sprintf("the registered merge driver %q names no program: %s", cmd, fix)
	}
	if !strings.ContainsAny(prog, `/\`) {
		if _, err := exec.LookPath(prog); err != nil {
			return fmt.Sprintf("the registered merge driver %q runs %s, which is not on PATH, so git merges facts/ and experience/ as text: %s", cmd, prog, fix)
		}
		return ""
	}
	fi, err := os.Stat(prog)
	switch {
	case err != nil:
		return fmt.Sprintf("the registered merge driver %q runs %s, which does not exist, so git merges facts/ and experience/ as text: %s", cmd, prog, fix)
	case fi.IsDir() || (runtime.GOOS != "windows" && fi.Mode().Perm()&0o111 == 0):
		return fmt.Sprintf("the registered merge driver %q runs %s, which is not executable, so git merges facts/ and experience/ as text: %s", cmd, prog, fix)
	}
	return ""
}

// driverProgram is the first word of a driver line as sh reads it (quotes
// and backslashes; no expansions).
func driverProgram(cmd string) string {
	var b strings.Builder
	cmd = strings.TrimLeft(cmd, " \t")
	for i := 0; i < len(cmd); i++ {
		switch c := cmd[i]; c {
		case ' ', '\t', '\n':
			return b.String()
		case '\'':
			j := strings.IndexByte(cmd[i+1:], '\'')
			if j < 0 {
				return b.String() + cmd[i+1:]
			}
			b.WriteString(cmd[i+1 : i+1+j])
			i += j + 1
		case '"':
			for i++; i < len(cmd) && cmd[i] != '"'; i++ {
				if cmd[i] == '\\' && i+1 < len(cmd) {
					i++
				}
				b.WriteByte(cmd[i])
			}
		case '\\':
			if i+1 < len(cmd) {
				i++
				b.WriteByte(cmd[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func syncTree(ctx context.Context, dir string, opt gitrepo.SyncOptions) (*gitrepo.SyncResult, error) {
	r, err := gitrepo.Open(ctx, dir)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return r.Sync(ctx, opt)
}

// commitTree commits exactly paths of the tree at dir as DefaultSignature.
func commitTree(ctx context.Context, dir string, paths []string, msg string) (string, error) {
	r, err := gitrepo.Open(ctx, dir)
	if err != nil {
		return "", err
	}
	defer r.Close()
	return r.Commit(ctx, paths, msg, gitrepo.Signature{})
}

// commitToBranch commits files onto a review branch (HEAD's child) as
// DefaultSignature, then prunes deep-learn's old review branches
// (pruneReviewBranches) through the same repository handle.
func commitToBranch(ctx context.Context, st *store.Store, branch string, files map[string][]byte, msg string, log io.Writer) (string, error) {
	r, err := gitrepo.Open(ctx, st.Root())
	if err != nil {
		return "", err
	}
	defer r.Close()
	h, err := r.CommitToBranch(ctx, branch, files, msg, gitrepo.Signature{})
	if err == nil {
		pruneReviewBranches(ctx, st, r, branch, log)
	}
	return h, err
}

// reviewPrefix and reviewTitle name deep-learn's dated review branches
// (reviewPrefix + YYYY-MM-DD) and begin its review commits' messages.
const (
	reviewPrefix = "pem/deep-learn/"
	reviewTitle  = "pem: deep-learn proposals"
)

// pruneReviewBranches deletes deep-learn's dated review branches beyond the
// newest policy.review_branches_kept (never spare, the one just written,
// nor one anybody committed onto: gitrepo.PruneReviewBranches). Each night's
// branch re-proposes what is still pending, so an older one holds nothing
// a newer lacks, only ~10,000 blobs of its own. A failure loses nothing: a
// warning on log.
func pruneReviewBranches(ctx context.Context, st *store.Store, r *gitrepo.Repo, spare string, log io.Writer) {
	cfg, err := st.Config(ctx)
	if err != nil {
		return
	}
	keep := cfg.Policy.ReviewBranchesKept
	pruned, err := r.PruneReviewBranches(ctx, reviewPrefix, reviewTitle, spare, keep, gitrepo.Signature{})
	if err != nil {
		fmt.Fprintf(log, "pem: warning: %v; nothing else is affected (delete old review branches with git branch -D)\n", err)
	}
	if len(pruned) > 0 {
		fmt.Fprintf(log, "pem: deep-learn deleted %d review %s older than the newest %d (policy.review_branches_kept): %s\n",
			len(pruned), plural(len(pruned), "branch", "branches"), keep, strings.Join(pruned, ", "))
	}
}

// maintainTree keeps the object store of st's repository healthy after a
// commit outside consolidation (deep-learn's): under the tree lock (taken
// here when lock, else held by the caller), so two repacks never run at once,
// it repacks past pem.yaml's repack_packs or repack_loose. A tree locked by
// another writer for more than 2 s is left to that writer; a repack that
// cannot run loses nothing: it is a warning on log.
func maintainTree(ctx context.Context, st *store.Store, log io.Writer, lock bool) {
	if lock {
		// A writer holding the lock (a consolidation) repacks when it
		// commits: do not wait long for it.
		lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		release, err := st.Lock(lctx)
		cancel()
		if err != nil {
			return
		}
		defer release()
	}
	r, err := gitrepo.Open(ctx, st.Root())
	if err != nil {
		return
	}
	defer r.Close()
	var plan consolidate.Changeset
	if m := consolidate.Maintain(ctx, st, r, nil, &plan); m != nil && m.Repacked {
		fmt.Fprintf(log, "pem: repacked the git object store: %d packs and %d loose objects -> %d packs, %d loose (%s)\n",
			m.Before.Packs, m.Before.Loose, m.After.Packs, m.After.Loose, m.Took.Round(time.Millisecond))
	}
	for _, w := range plan.Warnings {
		fmt.Fprintf(log, "pem: warning: %s\n", w)
	}
}

// materializeTree checks out the traces a pem clone left out before a command
// that reads every trace (deep-learn); a full checkout costs a config read,
// and a tree outside git is left alone.
func materializeTree(ctx context.Context, st *store.Store) error {
	r, err := gitrepo.Open(ctx, st.Root())
	if err != nil {
		return nil
	}
	defer r.Close()
	if sparse, err := r.Sparse(); err != nil || !sparse {
		return err
	}
	release, err := st.Lock(ctx) // one checkout at a time (consolidation's is under the lock too)
	if err != nil {
		return err
	}
	defer release()
	if _, err := r.Materialize(ctx); err != nil {
		return fmt.Errorf("deep-learn reads every trace, and this clone has only facts and experience: %w", err)
	}
	return nil
}

// deepLearnState is where deep-learn remembers its last run: a directory in
// the git directory (never committed); "" when the tree is not in a git
// repository (then every run reads everything).
func deepLearnState(ctx context.Context, dir string) string {
	r, err := gitrepo.Open(ctx, dir)
	if err != nil {
		return ""
	}
	defer r.Close()
	return r.StatePath("pem-deeplearn")
}
