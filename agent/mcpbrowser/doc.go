// Package mcpbrowser makes pem the browser of any MCP agent (pem mcp
// --browser): the execution tools (browser_navigate, browser_click, …) on
// one shared Chromium, each MCP session in its own page, every call recorded
// as a step of the session's trace and the site's Memory given at the first
// navigation; and the delegation tools (browser_agent_run,
// browser_agent_continue, browser_agents_run) that run pem's own agent with
// memory for a main agent.
//
// It registers its tools on the server of engine/mcp (Options.Register) and
// imports agent for the Browser interface and the run loop, and engine/mcp
// for its result conventions. It does not launch browsers itself: cmd/pem
// injects the agent.Browser (the go-rod adapter).
package mcpbrowser
