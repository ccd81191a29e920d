// Package mcp is pem's Model Context Protocol server: a thin adapter that
// exposes the engine's Save, Query, List and Memory (and deep-learn, when the
// caller provides it) as the experience_* tools, on the official Go SDK.
//
// It is not a second engine: every rule lives in package engine; here are only
// argument normalization (snake_case or camelCase keys, trace and facts as
// objects or JSON strings), error results a model can act on, and a stdio
// transport that survives malformed and oversized input lines.
//
// It imports engine and the SDK only; cmd/pem wires it to a store.
package mcp
