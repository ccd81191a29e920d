package main

import (
	"github.com/urfave/cli/v2"

	"github.com/pemdev/pem/agent/mcpbrowser"
)

// The delegation tools of pem mcp --browser (browser_agent_run,
// browser_agent_continue, browser_agents_run): pem's own agent, with the
// planner chosen as for pem agent run, its snapshots kept where pem agent
// run keeps them (so either can resume the other's runs).

// delegationFlags are pem mcp's flags for the delegation tools.
func delegationFlags() []cli.Flag {
	fs := []cli.Flag{
		&cli.IntFlag{Name: "max-parallel", Value: mcpbrowser.DefaultMaxParallel, Usage: "with --browser: browser_agents_run runs at most `N` tasks at once"},
	}
	for _, f := range plannerFlags() {
		if sf, ok := f.(*cli.StringFlag); ok && sf.Name == "planner" {
			sf.Usage = "with --browser: the planner of the delegated runs (browser_agent_run, …): explore, openai or anthropic"
		}
		fs = append(fs, f)
	}
	return fs
}

// delegationSet reports which delegation flag was given (for "add --browser").
func delegationSet(c *cli.Context) string {
	for _, n := range []string{"max-parallel", "planner", "model", "base-url", "temperature"} {
		if c.IsSet(n) {
			return "--" + n
		}
	}
	return ""
}

// delegation builds the delegation tools over the browser tools' server.
func delegation(c *cli.Context, browser *mcpbrowser.Server) (*mcpbrowser.Delegation, error) {
	if n := c.Int("max-parallel"); n < 1 || n > mcpbrowser.MaxAgentTasks {
		return nil, usagef("--max-parallel %d: use 1 to %d", n, mcpbrowser.MaxAgentTasks)
	}
	planner, err := plannerFor(c)
	if err != nil {
		return nil, err
	}
	snaps, err := snapshotDir(c.Context, knowledgeDir(c))
	if err != nil {
		return nil, err
	}
	return browser.Delegation(mcpbrowser.DelegateOptions{Planner: planner, SnapshotDir: snaps, MaxParallel: c.Int("max-parallel")}), nil
}
