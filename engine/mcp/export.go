package mcp

import (
	"encoding/json"
	"errors"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The conventions of pem's tools, for the tools other packages add through
// Options.Register (agent/mcpbrowser): arguments in snake_case or camelCase
// with unknown keys refused, and errors as isError results whose text says
// what to do.

// Args are a tool call's arguments, keys normalized to snake_case.
type Args struct{ a *args }

// ParseArgs reads a call's arguments object; a key not in allowed (or two
// spellings of one key) is an argument error naming the accepted keys.
func ParseArgs(raw json.RawMessage, allowed []string) (*Args, error) {
	a, err := parseArgs(raw, allowed)
	if err != nil {
		return nil, err
	}
	return &Args{a: a}, nil
}

// Has reports whether the argument was given (and not null).
func (a *Args) Has(name string) bool { _, ok := a.a.m[name]; return ok }

// String returns a string argument ("" when absent).
func (a *Args) String(name string) (string, error) { return a.a.str(name) }

// Int returns an integer argument (0 when absent); a string of digits is accepted.
func (a *Args) Int(name string) (int, error) { return a.a.integer(name) }

// Bool returns a boolean argument (false when absent); "true"/"false" strings are accepted.
func (a *Args) Bool(name string) (bool, error) { return a.a.boolean(name) }

// ArgErrorf is an error in the caller's arguments; IsArgError recognizes it.
func ArgErrorf(format string, v ...any) error { return argErrorf(format, v...) }

// IsArgError reports whether err is (or wraps) an argument error.
func IsArgError(err error) bool { return errors.Is(err, errArgs) }

// ErrorResult is an isError result: msg (scrubbed of credentials) as its
// text, and {error, kind, tool} as its structured content.
func ErrorResult(tool, kind, msg string) *sdk.CallToolResult { return errorResult(tool, kind, msg) }

// ObjectSchema is a JSON Schema object with props and required keys.
func ObjectSchema(props map[string]any, required ...string) json.RawMessage {
	return objectSchema(props, required...)
}
