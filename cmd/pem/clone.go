package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/pemdev/pem/store/gitrepo"
)

func init() { register(newCloneCmd) }

func newCloneCmd() *cli.Command {
	return &cli.Command{
		Name:      "clone",
		Usage:     "clone a shared knowledge tree with its facts and experience only, for a fleet agent's start",
		ArgsUsage: "URL DIR",
		Description: "Fetches what an agent needs at run start — facts/, pem.yaml and the other top-level files of the\n" +
			"last commit, and the experience of refs/pem/state's tip — and neither the history nor the traces: a\n" +
			"shallow (--depth=1), blobless (--filter=blob:none), sparse clone, the state's tip the same way and\n" +
			"its experience's blobs in one batch, whose cost follows the size of the knowledge, not the history's\n" +
			"length (docs/scale.md). pem experience query, memory, save and sync work in it as in a full clone;\n" +
			"pem consolidate and deep-learn first fetch and check out the traces the clone left out (the remote\n" +
			"must be reachable then); pem log and diff see only the history fetched since the clone.\n" +
			"Needs the git program (exit 11 without it). A plain path is cloned as file://PATH. The merge driver\n" +
			"is registered in the clone, as pem init does.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "branch", Usage: "clone `BRANCH` (default: the remote's default branch)"},
			&cli.StringFlag{Name: "tree", Usage: "the knowledge tree's `DIR` inside the repository (default: its top)"},
		},
		Action: runClone,
	}
}

func runClone(c *cli.Context) error {
	if c.NArg() != 2 {
		return usagef("clone needs a URL and a directory, got %d arguments", c.NArg())
	}
	url, dir := c.Args().Get(0), c.Args().Get(1)
	if url == "" || dir == "" {
		return usagef("clone: the URL and the directory must not be empty")
	}
	if es, err := os.ReadDir(dir); err == nil && len(es) > 0 {
		return usagef("clone: %s exists and is not empty: give a new directory", dir)
	}
	start := time.Now()
	err := gitrepo.Clone(c.Context, url, dir, gitrepo.CloneOptions{Branch: c.String("branch"), Tree: c.String("tree")})
	if err != nil {
		return err
	}
	tree := filepath.Join(dir, filepath.FromSlash(strings.Trim(c.String("tree"), "/")))
	driver := ""
	if _, err := installMergeDriver(c.Context, tree); err != nil {
		driver = fmt.Sprintf("; the merge driver is not registered (%v): run 'pem merge-driver --install' in it", err)
	}
	files := 0
	for _, d := range []string{"facts", "experience"} {
		_ = filepath.WalkDir(filepath.Join(tree, d), func(_ string, e os.DirEntry, err error) error {
			if err == nil && !e.IsDir() && strings.HasSuffix(e.Name(), ".yaml") {
				files++
			}
			return nil
		})
	}
	fmt.Fprintf(c.App.Writer, "cloned %s into %s: facts and experience (%d files) and pem.yaml of the last commit, in %s; traces are fetched when this clone consolidates%s\n",
		url, tree, files, time.Since(start).Round(time.Millisecond), driver)
	return nil
}
