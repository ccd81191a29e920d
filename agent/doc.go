// Package agent is pem's browser agent: the narrow Browser/Page interface,
// the tools a planner calls on top of it (Exec), the run loop, the planners,
// tier-driven replay and trace recording.
//
// It imports engine and the standard library only. The go-rod adapter lives in
// agent/rod and the embedded demo site in agent/demosite; agent never imports
// them, cmd/pem wires them in.
package agent
