package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/pemdev/pem/store"
	"github.com/pemdev/pem/store/gitrepo"
)

func init() { register(newInitCmd) }

// selfName is pem as the user ran it, for hints to copy: "./bin/pem" when run
// by a path, "pem" when found on PATH (or run in-process by a test binary).
func selfName() string {
	name := os.Args[0]
	if filepath.Base(name) != "pem" && filepath.Base(name) != "pem.exe" || !strings.ContainsRune(name, filepath.Separator) && !strings.ContainsRune(name, '/') {
		return "pem"
	}
	return name
}

func newInitCmd() *cli.Command {
	return &cli.Command{
		Name:      "init",
		Usage:     "create a knowledge tree and its git repository",
		ArgsUsage: "[DIR]",
		Description: "Creates DIR (default: --knowledge) with " + strings.Join(store.InitFiles, ", ") + ",\n" +
			"a git repository with a first commit, and the 'pem' merge driver. Running it again changes nothing.",
		Action: runInit,
	}
}

func runInit(c *cli.Context) error {
	if c.NArg() > 1 {
		return usagef("init takes at most one directory, got %d arguments", c.NArg())
	}
	dir := knowledgeDir(c)
	if c.NArg() == 1 {
		if c.Args().First() == "" {
			return usagef("init: the directory is empty: give a path or leave it out to use --knowledge")
		}
		dir = filepath.Clean(c.Args().First())
	}
	if err := gitrepo.CheckSupported(dir); err != nil { // before writing anything
		return fmt.Errorf("init: %w", err)
	}
	created, err := store.Init(c.Context, dir)
	if err != nil {
		return fmt.Errorf("creating knowledge tree %s: %w", dir, err)
	}
	repoRoot, atTree := "", false // the enclosing repository, before Init makes one
	if r, err := gitrepo.Open(c.Context, dir); err == nil {
		repoRoot, atTree = r.Root(), r.Root() == r.TreeDir()
		r.Close()
	}
	if err := gitrepo.Init(c.Context, dir); err != nil {
		return fmt.Errorf("creating git repository in %s: %w", dir, err)
	}
	driver, err := installMergeDriver(c.Context, dir)
	if err != nil {
		return fmt.Errorf("registering the merge driver for %s: %w", dir, err)
	}
	w := c.App.Writer
	if created {
		fmt.Fprintf(w, "created knowledge tree %s: %s\n", dir, strings.Join(store.InitFiles, ", "))
	} else {
		fmt.Fprintf(w, "knowledge tree %s already exists: left as it was\n", dir)
	}
	switch {
	case repoRoot == "":
		fmt.Fprintf(w, "created git repository %s with a first commit and the 'pem' merge driver\n", filepath.Join(dir, ".git"))
	case atTree:
		fmt.Fprintf(w, "git repository %s already exists: the 'pem' merge driver is registered\n", filepath.Join(dir, ".git"))
	default:
		fmt.Fprintf(w, "the tree is inside the git repository %s: the 'pem' merge driver is registered there; commit the new files with git\n", repoRoot)
	}
	fmt.Fprintf(w, "git runs %s for merges of facts/ and experience/ (after moving pem, run 'pem merge-driver --install')\n", driver)
	if created {
		fmt.Fprintf(w, "next: %s --knowledge %s experience save URL TRACE_JSON\n", selfName(), dir)
	}
	return nil
}
