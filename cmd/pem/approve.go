package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/pemdev/pem/agent"
	"github.com/pemdev/pem/store/gitrepo"
)

// termApprover asks on the terminal before a sensitive step (pem.yaml's
// approval rules): the question on stderr, y/N on stdin. With --no-input,
// or when stdin is not a terminal, nobody is asked and the run stops with
// approval_required. Parallel runs ask one at a time.
type termApprover struct {
	mu      sync.Mutex
	in      *bufio.Reader
	out     io.Writer
	tty     bool
	noInput bool
}

func newTermApprover(stdin io.Reader, stderr io.Writer, noInput bool) *termApprover {
	f, ok := stdin.(*os.File)
	return &termApprover{in: bufio.NewReader(stdin), out: stderr, tty: ok && isTerminal(f), noInput: noInput}
}

func (a *termApprover) Name() string { return "terminal" }

func (a *termApprover) Approve(ctx context.Context, req agent.ApprovalRequest) (bool, error) {
	switch {
	case a.noInput:
		return false, errors.New("--no-input: nobody is asked; run without --no-input in a terminal to answer")
	case !a.tty:
		return false, errors.New("stdin is not a terminal, so nobody can answer; run pem agent run in a terminal")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	fmt.Fprintf(a.out, "pem: approval needed for run %s\n  %s\n  task: %s\nTake this step? [y/N] ", req.RunID, req.Describe(), oneLine(req.Task, 160))
	type answer struct {
		line string
		err  error
	}
	ch := make(chan answer, 1)
	go func() {
		l, err := a.in.ReadString('\n')
		ch <- answer{l, err}
	}()
	select {
	case <-ctx.Done():
		fmt.Fprintln(a.out)
		return false, ctx.Err()
	case ans := <-ch:
		if ans.err != nil && ans.line == "" {
			return false, fmt.Errorf("no answer on the terminal: %v", ans.err)
		}
		switch strings.ToLower(strings.TrimSpace(ans.line)) {
		case "y", "yes":
			return true, nil
		}
		return false, nil
	}
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// snapshotDir is where pem agent run keeps its runs' snapshots: in the
// tree's git directory (never committed, never seen by git), else in the
// user's cache directory.
func snapshotDir(ctx context.Context, tree string) (string, error) {
	if r, err := gitrepo.Open(ctx, tree); err == nil {
		defer r.Close()
		return r.StatePath("pem-runs"), nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no place for run snapshots: the tree %s has no git repository and there is no user cache directory (%v): run pem init %s", tree, err, tree)
	}
	abs, err := filepath.Abs(tree)
	if err != nil {
		abs = tree
	}
	return filepath.Join(cache, "pem", "runs", strings.NewReplacer("/", "_", "\\", "_", ":", "_").Replace(strings.TrimPrefix(abs, "/"))), nil
}
