package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/urfave/cli/v2"

	"github.com/pemdev/pem/agent"
	"github.com/pemdev/pem/agent/mcpbrowser"
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
		Usage: "serve the experience tools (and, with --browser, pem's browser) to MCP clients (Claude, Cursor, …) on stdio",
		Description: "Runs a Model Context Protocol server on stdin/stdout (newline-delimited JSON-RPC) over the knowledge\n" +
			"tree chosen by --knowledge or PEM_KNOWLEDGE_DIR. Tools: experience_query, experience_memory, experience_save,\n" +
			"experience_list, experience_feedback (and experience_deep_learn when available).\n" +
			"With --browser, pem is the client's browser too: browser_navigate, browser_click, browser_type,\n" +
			"browser_get_text, browser_get_elements, browser_evaluate, browser_scroll, browser_wait, browser_screenshot,\n" +
			"browser_extract and browser_done, on one headless Chromium (system Chromium or PEM_CHROME, launched at the\n" +
			"first browser call). Every browser call is recorded; the first navigation to a site returns its ## Memory;\n" +
			"browser_done — or the session's end, or --idle-timeout without a call — saves the run as a trace.\n" +
			"The delegation tools browser_agent_run, browser_agent_continue and browser_agents_run run pem's own agent\n" +
			"on that browser (memory first, then the --planner).\n" +
			"stdout carries protocol only; logs go to stderr (--verbose for more). The server ends when the client\n" +
			"closes stdin. See docs/mcp.md.",
		Flags: append([]cli.Flag{
			&cli.IntFlag{Name: "max-line-bytes", Value: mcp.DefaultMaxLineBytes, Usage: "the longest request line accepted, in `BYTES`; longer ones are answered with an error"},
			&cli.BoolFlag{Name: "browser", Usage: "also serve the browser tools (browser_navigate, browser_click, …, browser_done): pem as the client's browser, every run remembered"},
			&cli.DurationFlag{Name: "idle-timeout", Value: mcpbrowser.DefaultIdleTimeout, Usage: "with --browser: save a session's unfinished task (as aborted) after this long without a browser call; 0 never"},
			&cli.BoolFlag{Name: "headful", Usage: "with --browser: show the browser window (needs a display)"},
		}, delegationFlags()...),
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
	if !c.Bool("browser") && (c.IsSet("idle-timeout") || c.IsSet("headful")) {
		return usagef("--idle-timeout and --headful apply to the browser tools: add --browser")
	}
	if f := delegationSet(c); f != "" && !c.Bool("browser") {
		return usagef("%s configures the delegation tools of pem mcp --browser: add --browser", f)
	}
	if c.Duration("idle-timeout") < 0 {
		return usagef("--idle-timeout %s is negative: give a duration such as 5m, or 0 for never", c.Duration("idle-timeout"))
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
	var browser *mcpbrowser.Server
	if c.Bool("browser") {
		idle := c.Duration("idle-timeout")
		if idle == 0 {
			idle = -1 // never
		}
		headful := c.Bool("headful")
		browser = mcpbrowser.New(mcpbrowser.Options{Engine: e, IdleTimeout: idle, Logger: log,
			Launch: func(ctx context.Context) (agent.Browser, error) { return launch(ctx, headful) }})
		deleg, err := delegation(c, browser)
		if err != nil {
			return err
		}
		opts.Register = func(srv *sdk.Server) { browser.Register(srv); deleg.Register(srv) }
		opts.Instructions = mcpbrowser.Instructions + "\n" + mcpbrowser.DelegationInstructions
		// Every unfinished task is saved, and Chromium closed, however the
		// server ends.
		defer func() {
			cctx, cancel := context.WithTimeout(context.Background(), mcpCloseTimeout)
			defer cancel()
			if err := browser.Close(cctx); err != nil {
				log.Error("pem mcp: closing the browser tools", "err", err)
			}
		}()
		// The delegated runs stop (each deposits its trace) before the
		// browser closes: deferred last, this runs first.
		defer func() {
			cctx, cancel := context.WithTimeout(context.Background(), mcpCloseTimeout)
			defer cancel()
			if err := deleg.Close(cctx); err != nil {
				log.Debug("pem mcp: closing the delegated pages", "err", err)
			}
		}()
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

// mcpCloseTimeout bounds saving the unfinished browser tasks and closing
// Chromium when the server ends.
const mcpCloseTimeout = 15 * time.Second
