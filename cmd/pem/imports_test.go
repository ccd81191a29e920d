package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// The import rules of docs/architecture.md: every package points to engine;
// siblings do not import each other except for the edges below (the same
// table is in docs/architecture.md); engine does no I/O and depends on no
// module outside the standard library but the few below. cmd/pem is the
// wiring and may import anything.
const module = "github.com/pemdev/pem/"

var allowedImports = map[string][]string{
	"consolidate":              {"store", "store/gitrepo", "deeplearn"}, // the only writer of derived files; deep-learn's pure rules
	"engine/mcp":               {"deeplearn"},                           // experience_deep_learn
	"engine/web":               nil,                                     // engine only: history, bench reports and exit codes are handed in by cmd/pem
	"agent/rod":                {"agent"},                               // implements agent.Browser
	"agent/llm":                {"agent"},                               // implements agent.Planner
	"agent/bench":              {"agent", "agent/demosite"},             // the demo and bench harness
	"agent/mcpbrowser":         {"agent", "engine/mcp"},                 // pem mcp --browser: browser and delegation tools
	"store/gitrepo":            {"store"},
	"store/storetest":          {"store"}, // MemStore refuses the store's names
	"store/treegen":            {"store"},
	"store/treegen/benchscale": {"store", "store/treegen"}, // make bench-scale: generates trees, times pem against baselines

	"store/treegen/simulate": {"store", "store/treegen"}, // the fleet simulation (make simulate) writes traces as saves leave them; treegen.LoadAverage

	"engine/clonetest": nil, // imports no pem package: the reflection behind engine's and store's deep-clone tests (only test files import it)
}

var (
	engineIO   = []string{"os", "os/exec", "os/signal", "net", "net/http", "io/fs", "io/ioutil", "path/filepath", "syscall"}
	engineDeps = []string{"golang.org/x/net/idna", "golang.org/x/text/", "go.yaml.in/yaml/"}
)

type listed struct {
	ImportPath    string
	Imports, Deps []string
}

// importViolations names every edge of pkgs that breaks the rules.
func importViolations(pkgs []listed) []string {
	var bad []string
	for _, p := range pkgs {
		name := strings.TrimPrefix(p.ImportPath, module)
		if name == "cmd/pem" {
			continue
		}
		for _, imp := range p.Imports {
			switch to, ok := strings.CutPrefix(imp, module); {
			case name == "engine" && (ok || slices.Contains(engineIO, imp)):
				bad = append(bad, "engine imports "+imp+": engine is pure (no I/O, no other pem package)")
			case ok && to != "engine" && !slices.Contains(allowedImports[name], to):
				bad = append(bad, name+" imports "+to+": packages import only engine, save the edges in allowedImports")
			}
		}
		for _, d := range p.Deps {
			if name == "engine" && strings.Contains(strings.Split(d, "/")[0], ".") && !strings.HasPrefix(d, module) && !hasAnyPrefix(d, engineDeps) {
				bad = append(bad, "engine depends on "+d+": engine depends on the standard library and "+strings.Join(engineDeps, ", ")+" only")
			}
		}
	}
	return bad
}

func hasAnyPrefix(s string, ps []string) bool {
	for _, p := range ps {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

func TestImportRules(t *testing.T) {
	out, err := exec.Command("go", "list", "-json=ImportPath,Imports,Deps", module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []listed
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages", len(pkgs))
	}
	for _, v := range importViolations(pkgs) {
		t.Error("import rule broken: " + v)
	}
}

func TestImportViolations(t *testing.T) {
	got := importViolations([]listed{
		{ImportPath: module + "cmd/pem", Imports: []string{module + "agent/rod", "os"}},
		{ImportPath: module + "agent/rod", Imports: []string{module + "agent", module + "engine", "github.com/go-rod/rod"}},
		{ImportPath: module + "consolidate", Imports: []string{module + "store", module + "agent"}},
		{ImportPath: module + "engine", Imports: []string{"fmt", "os", module + "store"}, Deps: []string{"fmt", "golang.org/x/text/unicode/norm", "github.com/go-git/go-git/v5"}},
	})
	want := []string{
		"consolidate imports agent: packages import only engine, save the edges in allowedImports",
		"engine imports os: engine is pure (no I/O, no other pem package)",
		"engine imports " + module + "store: engine is pure (no I/O, no other pem package)",
		"engine depends on github.com/go-git/go-git/v5: engine depends on the standard library and " + strings.Join(engineDeps, ", ") + " only",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
