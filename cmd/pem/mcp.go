package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"time"

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
	// stderr never stalls the server: every log of it (the store's too) goes
	// through a bounded writer that drops rather than waits, rate-limited
	// per message (engine/mcp/stderr.go).
	aw := mcp.NewAsyncWriter(c.App.ErrWriter, 0)
	defer aw.Close(200 * time.Millisecond)
	c.App.ErrWriter = aw
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
	rl := mcp.NewRateLimit(logger(c).Handler(), 5, 10*time.Second, nil)
	log := slog.New(rl)
	opts := &mcp.Options{Logger: log, MaxLineBytes: c.Int("max-line-bytes"), Version: readBuildVersion().String()}
	if mcpDeepLearn != nil {
		opts.DeepLearn = mcpDeepLearn(c, e)
	}
	log.Info("pem mcp: serving on stdio", "knowledge", dir)
	ctx := c.Context
	done := make(chan error, 1)
	go func() { done <- mcp.Serve(ctx, e, opts, c.App.Reader, c.App.Writer) }()
	select {
	case err := <-done:
		rl.Flush(context.Background())
		if ctx.Err() == nil {
			return err
		}
	case <-ctx.Done():
		// SIGINT or SIGTERM: stop now. The server gets a moment to finish,
		// no more — a call stuck on a client that reads nothing must not
		// keep the process alive.
		select {
		case <-done:
		case <-time.After(mcpStopGrace):
		}
	}
	log.Warn("pem mcp: stopped by a signal")
	rl.Flush(context.Background())
	return cli.Exit("", exitCancelled) // said on the log; stderr may be full, so nothing more
}

// mcpStopGrace is how long a signalled server may take to finish a call.
const mcpStopGrace = 500 * time.Millisecond
