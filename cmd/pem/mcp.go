package main

import (
	"fmt"
	"os"
	"runtime/debug"

	"github.com/urfave/cli/v2"

	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/engine/mcp"
)

func init() { register(newMCPCmd) }

// mcpDeepLearn, when set (by the deep-learn command's file, from its init),
// backs the experience_deep_learn tool; nil leaves the tool unlisted, so MCP
// clients only see tools that work.
var mcpDeepLearn func(c *cli.Context, e *engine.Engine) mcp.DeepLearnFunc

func newMCPCmd() *cli.Command {
	return &cli.Command{
		Name:  "mcp",
		Usage: "serve the experience tools to MCP clients (Claude, Cursor, …) on stdio",
		Description: "Runs a Model Context Protocol server on stdin/stdout (newline-delimited JSON-RPC) over the knowledge\n" +
			"tree chosen by --knowledge or PEM_KNOWLEDGE_DIR. Tools: experience_query, experience_memory, experience_save,\n" +
			"experience_list (and experience_deep_learn when available). stdout carries protocol only; logs go to\n" +
			"stderr (--verbose for more). The server ends when the client closes stdin. See docs/mcp.md.",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "max-line-bytes", Value: mcp.DefaultMaxLineBytes, Usage: "the longest request line accepted, in `BYTES`; longer ones are answered with an error"},
		},
		Action: runMCP,
	}
}

func runMCP(c *cli.Context) error {
	if c.NArg() > 0 {
		return usagef("mcp takes no arguments, got %q: choose the tree with --knowledge DIR", c.Args().First())
	}
	if c.Int("max-line-bytes") < 1024 {
		return usagef("--max-line-bytes %d is too small: use at least 1024", c.Int("max-line-bytes"))
	}
	e, st, err := openEngine(c)
	if err != nil {
		return err
	}
	defer st.Close()
	dir := knowledgeDir(c)
	// A broken pem.yaml fails now, on stderr, not later inside every tool call.
	if _, err := e.Store.Config(c.Context); err != nil {
		return fmt.Errorf("knowledge tree %s: %w", dir, err)
	}
	if os.Getenv("GOGC") == "" {
		// The SDK allocates a 32 KiB buffer for every JSON value it decodes
		// (several per call) while the live heap stays a few MiB: collecting
		// less often cuts the server's CPU per call by about a quarter (see
		// docs/performance.md, MCP).
		debug.SetGCPercent(400)
	}
	log := logger(c)
	opts := &mcp.Options{Logger: log, MaxLineBytes: c.Int("max-line-bytes"), Version: readBuildVersion().String()}
	if mcpDeepLearn != nil {
		opts.DeepLearn = mcpDeepLearn(c, e)
	}
	log.Info("pem mcp: serving on stdio", "knowledge", dir)
	return mcp.Serve(c.Context, e, opts, c.App.Reader, c.App.Writer)
}
