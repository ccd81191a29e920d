package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/pemdev/pem/agent"
	"github.com/pemdev/pem/agent/llm"
	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/engine/web"
	"github.com/pemdev/pem/store/gitrepo"
)

// Exit codes. This table is the one place errors become exit codes; scripts
// and cron jobs may rely on it (docs/cli.md repeats it).
//
//	0   ok
//	1   internal or unknown error (I/O, a bug)
//	2   usage or bad input: bad flags or arguments, invalid JSON, unknown
//	    fields, a URL without a host, input over a cap
//	3   no knowledge tree: run pem init
//	4   not found
//	5   the tree is locked by another writer
//	6   a corrupt file in the tree
//	7   an unsafe path: a name that would leave the tree, a symlink
//	8   frozen: the change would alter a verified facts entry
//	9   disk full (ENOSPC, quota): free space, then run the command again
//	10  read-only: the tree or a file in it may not be written (EROFS, EACCES, EPERM)
//	11  git unavailable: no git repository for the tree, or the git program missing
//	12  Chromium missing: install it or set PEM_CHROME
//	13  the remote refused or could not be reached (authentication, permission, a rejected push, the network),
//	    the tree has no such remote, or the model server refused or could not be reached
//	14  approval required: pem agent run stopped before a step pem.yaml's approval rules mark,
//	    because nobody approved it (refused, --no-input, stdin not a terminal)
//	75  contended: pem sync lost the push to another writer on every try;
//	    nothing is lost, run it again (75 is sysexits' EX_TEMPFAIL)
//	130 cancelled (SIGINT or SIGTERM)
//
// 9 to 13 are the environment's, not pem's: their messages say what to do,
// never "report it".
const (
	exitOK        = 0
	exitInternal  = 1
	exitUsage     = 2
	exitNoTree    = 3
	exitNotFound  = 4
	exitLocked    = 5
	exitCorrupt   = 6
	exitUnsafe    = 7
	exitFrozen    = 8
	exitDiskFull  = 9
	exitReadOnly  = 10
	exitNoGit     = 11
	exitNoBrowser = 12
	exitRemote    = 13
	exitApproval  = 14
	exitContended = 75 // pem sync (gitrepo.ErrContended)
	exitCancelled = 130
)

// exitCodes maps error classes to codes, first match wins: a cancelled
// command is cancelled whatever else went wrong, and a store condition is
// more specific than the argument error that may wrap it.
var exitCodes = []struct {
	is   func(error) bool
	code int
	hint string // what to do, appended to the message unless it says so already
}{
	{isAny(context.Canceled, context.DeadlineExceeded), exitCancelled, "stopped by a signal; every file pem writes is written whole or not at all"},
	{isAny(gitrepo.ErrNotATree), exitNoTree, "clone the repository that holds the tree (or name its directory with --tree)"},
	{isAny(engine.ErrNoTree), exitNoTree, "run 'pem init' to create it, or point --knowledge (or PEM_KNOWLEDGE_DIR) at an existing tree"},
	{isAny(engine.ErrLocked), exitLocked, "another pem process is writing this tree; run the command again when it has finished"},
	{isAny(engine.ErrUnsafePath), exitUnsafe, "use names that stay inside the tree (no '..', no symlinks, no reserved names)"},
	{isAny(engine.ErrCorrupt), exitCorrupt, "fix or remove the file named above; the rest of the tree is unaffected"},
	{isAny(engine.ErrFrozen), exitFrozen, "verified entries change only through a new revision proposed by 'pem deep-learn'"},
	{isAny(engine.ErrContradicts), exitFrozen, "a verdict is immutable: judge a newer run instead"},
	{isAny(engine.ErrUnknownTrace), exitNotFound, "give the id that pem experience save printed (\"id\"), or a trace file's name"},
	{isAny(gitrepo.ErrUnknownRevision), exitNotFound, "name a commit, branch or tag (git log shows them)"},
	{isAny(agent.ErrNoSnapshot), exitNotFound, "resume only a run that did not finish, by the id pem agent run printed when it started"},
	{isAny(engine.ErrNotFound), exitNotFound, "check the name with 'pem experience list'"},
	{isAny(agent.ErrApprovalRequired), exitApproval, "the step was not taken; to approve it, resume the run in a terminal ('pem agent run --resume RUN_ID') and answer y, or change pem.yaml's approval rules"},
	{isAny(gitrepo.ErrContended), exitContended, "run 'pem sync' again, now or later"},
	{isAny(gitrepo.ErrNoRemote), exitRemote, "'git remote -v' lists the remotes the tree has"},
	{isAny(llm.ErrAPI), exitRemote, "the model server refused or could not be reached: check the planner's base URL, model and API key ('pem agent run --help') and that the server is up"},
	{isAny(web.ErrUnauthorized), exitUsage, ""},     // web's message says what to send
	{isAny(web.ErrWriteDisabled), exitReadOnly, ""}, // web's message names --write
	{isAny(engine.ErrBadTrace), exitUsage, "fix the trace JSON: its fields are listed by 'pem experience save --help'"},
	{isAny(engine.ErrBadPatch), exitUsage, "fix the facts patch: its keys are listed by 'pem experience save --help'"},
	{isUsage, exitUsage, "run the command with --help for usage"},
	{isDiskFull, exitDiskFull, "the disk is full: free space (or raise the quota) and run the command again; nothing half-written was left in the tree"},
	{isRemoteRefused, exitRemote, "the remote refused or could not be reached: check its URL (git remote -v), your credentials and access to it, and the network; nothing local was lost"},
	{isReadOnly, exitReadOnly, "the knowledge tree (or a file in it) may not be written: check its owner and permissions, or that its file system is not mounted read-only"},
	{isAny(gitrepo.ErrUnsupportedRepo), exitNoGit, "keep the tree in a SHA-1 repository (plain 'git init'), or outside this one"},
	{isNoGit, exitNoGit, "the tree needs a git repository: run 'pem init' in it (or 'git init'), and install git if it is missing"},
	{isNoChromium, exitNoBrowser, "install Chromium (apt-get install chromium) or point PEM_CHROME at a Chromium binary"},
}

func isAny(targets ...error) func(error) bool {
	return func(err error) bool {
		for _, t := range targets {
			if errors.Is(err, t) {
				return true
			}
		}
		return false
	}
}

// isUsage reports bad input: pem's own usage errors, the engine's argument and
// parse errors, and over-cap records.
func isUsage(err error) bool {
	var u *usageError
	return errors.As(err, &u) || isAny(engine.ErrInvalid, engine.ErrBadTrace, engine.ErrBadPatch, engine.ErrBadURL, engine.ErrTooLarge)(err)
}

// exitCode returns the exit code for err (0 for nil). Commands that decide
// their own code return cli.Exit(msg, code), which is honoured as is.
func exitCode(err error) int {
	code, _ := classify(err)
	return code
}

func classify(err error) (int, string) {
	if err == nil {
		return exitOK, ""
	}
	for _, e := range exitCodes {
		if e.is(err) {
			return e.code, e.hint
		}
	}
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		return ec.ExitCode(), ""
	}
	return exitInternal, "if this persists, run with --verbose and report it"
}

// report prints err on stderr as "pem: <what happened>: <what to do>" and
// returns its exit code. It adds the one "pem: " prefix: error messages,
// cli.Exit's included, never start with one of their own.
func report(stderr io.Writer, err error) int {
	code, msg := explain(err)
	if msg != "" {
		fmt.Fprintf(stderr, "pem: %s\n", msg)
	}
	return code
}

// explain returns err's exit code and its message with the hint of what to
// do; "" when there is nothing to say (no error, or cli.Exit("", n)).
func explain(err error) (int, string) {
	code, hint := classify(err)
	if err == nil {
		return code, ""
	}
	msg := err.Error()
	var ec cli.ExitCoder
	if errors.As(err, &ec) && strings.TrimSpace(msg) == "" {
		return code, "" // cli.Exit("", n): the command already said everything
	}
	if hint != "" && !strings.Contains(msg, ": run ") && !strings.Contains(msg, hint) {
		msg += ": " + hint
	}
	return code, msg
}

// httpStatuses give pem serve --http's API answers the HTTP status of each
// exit code (the body carries the exit code itself); a code not listed is 500.
var httpStatuses = map[int]int{
	exitUsage:     http.StatusBadRequest,
	exitNoTree:    http.StatusServiceUnavailable,
	exitNotFound:  http.StatusNotFound,
	exitLocked:    http.StatusConflict,
	exitUnsafe:    http.StatusBadRequest,
	exitFrozen:    http.StatusConflict,
	exitDiskFull:  http.StatusInsufficientStorage,
	exitReadOnly:  http.StatusForbidden,
	exitRemote:    http.StatusBadGateway,
	exitContended: http.StatusServiceUnavailable,
	exitCancelled: http.StatusServiceUnavailable,
}

// httpError is an API error's HTTP status, exit code and message: the exit
// code of the CLI for the same error; a missing or wrong token is 401 and a
// body over the cap 413, both exit code 2.
func httpError(err error) (status, code int, msg string) {
	code, msg = explain(err)
	status, ok := httpStatuses[code]
	if !ok {
		status = http.StatusInternalServerError
	}
	switch {
	case errors.Is(err, web.ErrUnauthorized):
		status = http.StatusUnauthorized
	case errors.Is(err, engine.ErrTooLarge):
		status = http.StatusRequestEntityTooLarge
	}
	return status, code, msg
}

// usageError is bad input found by the CLI itself (flags, arguments).
type usageError struct{ err error }

func (u *usageError) Error() string { return u.err.Error() }
func (u *usageError) Unwrap() error { return u.err }

// usagef returns a usage error (exit code 2). Say what was wrong and what to do.
func usagef(format string, args ...any) error {
	return &usageError{err: fmt.Errorf(format, args...)}
}

// interrupted is an error that happened because the command was cancelled.
type interrupted struct{ err error }

func (i *interrupted) Error() string   { return "interrupted: " + i.err.Error() }
func (i *interrupted) Unwrap() []error { return []error{context.Canceled, i.err} }
