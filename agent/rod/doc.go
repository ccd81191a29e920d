// Package rod is the go-rod adapter behind agent.Browser and agent.Page.
//
// Launch starts the system Chromium ($PEM_CHROME, /usr/lib/chromium/chromium or
// /usr/bin/chromium); it never downloads a browser. Chromium runs headless with
// the closed-network flags, a fresh user-data-dir removed on Close, and leakless
// on, so a killed pem leaves no Chromium behind. Every element lookup is
// bounded by Options.Timeout (or the caller's deadline, if sooner) and every
// settle wait after navigate/click/press by settleMax.
//
// go-rod registers a global "-rod" flag on flag.CommandLine in an init unless
// DISABLE_ROD_FLAG is set in the environment. It is harmless for pem (the CLI
// does not parse flag.CommandLine, and tests accept the extra flag), but the
// Makefile exports DISABLE_ROD_FLAG=1 for go test and builds so that no
// argument named -rod is ever read from os.Args.
//
// This package imports agent, go-rod and the standard library only.
package rod
