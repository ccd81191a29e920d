package main

import (
	"errors"
	"net"
	"os/exec"
	"strings"
	"syscall"

	"github.com/go-git/go-git/v5/plumbing/transport"

	"github.com/pemdev/pem/agent/rod"
	"github.com/pemdev/pem/store/gitrepo"
)

// The environment's errors, told apart from pem's own (exit.go's table
// maps them to their codes): a full disk, a tree pem may not write, git or
// Chromium missing, a remote that refuses. Each says what to do; none is a
// bug to report. Matched by errno first, by the operating system's words
// last (some libraries do not wrap the errno).

func isDiskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) ||
		errText(err, "no space left on device", "disk quota exceeded")
}

func isReadOnly(err error) bool {
	return errors.Is(err, syscall.EROFS) || errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM) ||
		errText(err, "read-only file system", "permission denied", "operation not permitted")
}

func isNoGit(err error) bool {
	var ee *exec.Error
	return errors.Is(err, gitrepo.ErrNoRepo) || errors.Is(err, gitrepo.ErrGitMissing) || errors.As(err, &ee) && strings.Contains(ee.Name, "git")
}

func isNoChromium(err error) bool {
	var ee *exec.Error
	return errors.Is(err, rod.ErrNoChromium) || errors.As(err, &ee) && strings.Contains(ee.Name, "chrom")
}

// isRemoteRefused: the remote said no (authentication, permission, no such
// repository, a rejected push) or could not be reached.
func isRemoteRefused(err error) bool {
	if errors.Is(err, gitrepo.ErrRemoteRefused) || errors.Is(err, transport.ErrAuthenticationRequired) || errors.Is(err, transport.ErrAuthorizationFailed) ||
		errors.Is(err, transport.ErrRepositoryNotFound) || errors.Is(err, transport.ErrInvalidAuthMethod) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH) {
		return true
	}
	var dns *net.DNSError
	var op *net.OpError
	if errors.As(err, &dns) || errors.As(err, &op) {
		return true
	}
	msg := strings.ToLower(err.Error())
	remote := strings.Contains(msg, "pushing") || strings.Contains(msg, "fetching") || strings.Contains(msg, "remote")
	return remote && errText(err, "rejected", "declined", "denied", "protected branch", "unauthorized", "forbidden",
		"connection refused", "could not read from remote", "repository not found")
}

func errText(err error, words ...string) bool {
	msg := strings.ToLower(err.Error())
	for _, w := range words {
		if strings.Contains(msg, w) {
			return true
		}
	}
	return false
}
