package main

import (
	"os"
	"testing"
)

// Hints name pem as it was run: ./bin/pem after make build, pem from PATH.
func TestSelfName(t *testing.T) {
	defer func(a string) { os.Args[0] = a }(os.Args[0])
	for arg0, want := range map[string]string{
		"pem":                  "pem",
		"./bin/pem":            "./bin/pem",
		"bin/pem":              "bin/pem",
		"/usr/local/bin/pem":   "/usr/local/bin/pem",
		"/tmp/go-build/x.test": "pem",
	} {
		os.Args[0] = arg0
		if got := selfName(); got != want {
			t.Errorf("os.Args[0] %q: selfName() = %q, want %q", arg0, got, want)
		}
	}
}
