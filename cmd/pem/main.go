// Command pem is Progressive Experience Memory for browser agents: it records
// every run as a trace in a git-backed YAML tree and serves what earlier runs
// learned back to the next one.
//
// This package is wiring only: flags → calls into engine, store, consolidate,
// deeplearn and agent. Every command lives in its own file and adds itself
// with register (or registerSub for a subcommand of an existing group) from
// an init function; errors become exit codes in exit.go and nowhere else.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // a second signal kills at once
	}()
	code := run(ctx, os.Args, os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Global flag names, read by every command through the helpers below.
const (
	flagKnowledge = "knowledge"
	flagVerbose   = "verbose"

	// EnvKnowledgeDir selects the knowledge tree when --knowledge is not given.
	EnvKnowledgeDir     = "PEM_KNOWLEDGE_DIR"
	defaultKnowledgeDir = "knowledge"
)

func init() {
	// pem --version: the line of version.go, no -v (pem has --verbose).
	cli.VersionFlag = &cli.BoolFlag{Name: "version", Usage: "print the version, the revision and the platform"}
	cli.VersionPrinter = func(c *cli.Context) { fmt.Fprintln(c.App.Writer, c.App.Version) }
}

// commandMakers and subcommandMakers are filled by the init functions of the
// command files. They hold constructors, not commands, so every run builds
// fresh *cli.Command values (urfave/cli mutates them while running).
var (
	commandMakers    []func() *cli.Command
	subcommandMakers = map[string][]func() *cli.Command{}
)

// register adds top-level commands. Call it from an init function:
//
//	func init() { register(newConsolidateCmd) }
func register(makers ...func() *cli.Command) {
	commandMakers = append(commandMakers, makers...)
}

// registerSub adds subcommands to the top-level command named parent (for
// example registerSub("experience", newExperienceDeepLearnCmd)).
func registerSub(parent string, makers ...func() *cli.Command) {
	subcommandMakers[parent] = append(subcommandMakers[parent], makers...)
}

// run is pem's main: it parses args (args[0] is the program name), runs the
// command, reports any error on stderr and returns the exit code (see exit.go).
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	errs := newLineScrubber(stderr) // stderr is text: no credential reaches it
	defer errs.Flush()
	stderr = errs
	app, unknown := newApp(stdin, stdout, stderr)
	if len(args) == 0 {
		args = []string{"pem"}
	}
	err := app.RunContext(ctx, permute(app, args))
	if err == nil && *unknown != "" {
		err = usagef("unknown command %q: run 'pem --help' for the list of commands", *unknown)
	}
	if err != nil && ctx.Err() != nil && !errors.Is(err, context.Canceled) {
		err = &interrupted{err} // a lock wait or I/O cut short by the signal
	}
	return report(stderr, err)
}

// newApp builds the command tree. unknown receives the name of a help topic
// that does not exist (urfave/cli reports that through a callback, not an error).
func newApp(stdin io.Reader, stdout, stderr io.Writer) (*cli.App, *string) {
	unknown := new(string)
	app := &cli.App{
		Name:  "pem",
		Usage: "Progressive Experience Memory for browser agents",
		Description: "pem records every browser run as a trace in a git-backed YAML knowledge tree, consolidates traces into\n" +
			"confidence-scored facts, and serves them to the next run as a ## Memory section or a route to replay.",
		UsageText: "pem [--knowledge DIR] command [options] [arguments...]",
		Flags: []cli.Flag{
			&cli.StringFlag{
				Name:    flagKnowledge,
				Usage:   "the knowledge tree `DIR`",
				EnvVars: []string{EnvKnowledgeDir},
				Value:   "./" + defaultKnowledgeDir,
			},
			&cli.BoolFlag{Name: flagVerbose, Usage: "log what pem does on stderr"},
		},
		Version:        readBuildVersion().Line(),
		Reader:         stdin,
		Writer:         stdout,
		ErrWriter:      stderr,
		ExitErrHandler: func(*cli.Context, error) {}, // exit codes are decided in run, not by os.Exit inside cli
		OnUsageError:   onUsageError,
		CommandNotFound: func(_ *cli.Context, name string) {
			*unknown = name
		},
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				return usagef("unknown command %q: run 'pem --help' for the list of commands", c.Args().First())
			}
			return cli.ShowAppHelp(c)
		},
	}
	for _, mk := range commandMakers {
		app.Commands = append(app.Commands, mk())
	}
	for parent, makers := range subcommandMakers {
		var p *cli.Command
		for _, c := range app.Commands {
			if c.Name == parent {
				p = c
			}
		}
		if p == nil {
			panic("pem: registerSub: no top-level command " + parent)
		}
		for _, mk := range makers {
			p.Subcommands = append(p.Subcommands, mk())
		}
	}
	sortCommands(app.Commands)
	return app, unknown
}

// sortCommands orders commands by name at every level, and gives every
// command pem's usage-error handling, and every group a clear error for a
// missing or unknown subcommand.
func sortCommands(cmds []*cli.Command) {
	sort.Slice(cmds, func(i, j int) bool { return cmds[i].Name < cmds[j].Name })
	for _, c := range cmds {
		if c.OnUsageError == nil {
			c.OnUsageError = onUsageError
		}
		if len(c.Subcommands) > 0 {
			sortCommands(c.Subcommands)
			if c.Action == nil {
				c.Action = groupAction
			}
		}
	}
}

func groupAction(c *cli.Context) error {
	if c.Args().Present() {
		return usagef("%s: unknown subcommand %q: run '%s --help' for the list", c.Command.FullName(), c.Args().First(), helpName(c))
	}
	return usagef("%s: missing subcommand: run '%s --help' for the list", c.Command.FullName(), helpName(c))
}

func onUsageError(c *cli.Context, err error, _ bool) error {
	return &usageError{err: fmt.Errorf("%w: run '%s --help' for usage", err, helpName(c))}
}

func helpName(c *cli.Context) string {
	if c.Command != nil && c.Command.HelpName != "" {
		return c.Command.HelpName
	}
	return "pem"
}

// permute moves the flags that follow positional arguments in front of them,
// so `pem experience save URL TRACE_JSON --outcome failure` works as documented:
// urfave/cli v2 stops reading flags at the first positional argument. A global
// flag given after the command (`pem memory URL --knowledge DIR`) moves to the
// front. After "--" everything is positional.
func permute(app *cli.App, args []string) []string {
	if len(args) < 2 {
		return args
	}
	isHelp := func(name string) bool { return name == "help" || name == "h" }
	find := func(flags []cli.Flag, name string) (cli.Flag, bool) {
		for _, f := range flags {
			for _, n := range f.Names() {
				if n == name {
					return f, true
				}
			}
		}
		return nil, false
	}
	takesValue := func(f cli.Flag) bool {
		if d, ok := f.(cli.DocGenerationFlag); ok {
			return d.TakesValue()
		}
		return false
	}
	// flagName returns the name of a flag token and whether it carries its value.
	flagName := func(tok string) (string, bool, bool) {
		if len(tok) < 2 || tok[0] != '-' || tok == "--" {
			return "", false, false
		}
		name := strings.TrimLeft(tok, "-")
		if i := strings.IndexByte(name, '='); i >= 0 {
			return name[:i], true, true
		}
		return name, false, true
	}

	globals := []string{}
	var path []string     // command names
	var levels [][]string // flags of each command in path
	var positional []string
	cmds := app.Commands
	var cur *cli.Command
	rest := args[1:]
	for i := 0; i < len(rest); i++ {
		tok := rest[i]
		if tok == "--" {
			positional = append(positional, rest[i:]...)
			break
		}
		if cur != nil && cur.SkipFlagParsing {
			positional = append(positional, rest[i:]...)
			break
		}
		name, inline, isFlag := flagName(tok)
		if !isFlag {
			if len(positional) == 0 {
				var next *cli.Command
				for _, c := range cmds {
					if c.HasName(tok) {
						next = c
					}
				}
				if next != nil {
					cur, cmds = next, next.Subcommands
					path = append(path, tok)
					levels = append(levels, nil)
					continue
				}
			}
			positional = append(positional, tok)
			continue
		}
		take := func(dst *[]string, f cli.Flag) {
			*dst = append(*dst, tok)
			if !inline && f != nil && takesValue(f) && i+1 < len(rest) {
				i++
				*dst = append(*dst, rest[i])
			}
		}
		if cur == nil {
			f, _ := find(app.Flags, name)
			take(&globals, f)
			continue
		}
		if f, ok := find(cur.Flags, name); ok || isHelp(name) {
			take(&levels[len(levels)-1], f)
			continue
		}
		if f, ok := find(app.Flags, name); ok {
			take(&globals, f)
			continue
		}
		take(&levels[len(levels)-1], nil) // unknown: the parser will say so
	}
	out := append([]string{args[0]}, globals...)
	for i, name := range path {
		out = append(out, name)
		out = append(out, levels[i]...)
	}
	return append(out, positional...)
}

// knowledgeDir is the tree the command works on (--knowledge, PEM_KNOWLEDGE_DIR
// or ./knowledge).
func knowledgeDir(c *cli.Context) string {
	d := c.String(flagKnowledge)
	if d == "" {
		d = defaultKnowledgeDir
	}
	return filepath.Clean(d)
}

// logger logs to stderr: warnings only, or everything with --verbose.
func logger(c *cli.Context) *slog.Logger {
	level := slog.LevelWarn
	if c.Bool(flagVerbose) {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(c.App.ErrWriter, &slog.HandlerOptions{Level: level}))
}

// openStore opens the knowledge tree. A missing tree is engine.ErrNoTree
// (exit code 3, with the hint to run pem init).
func openStore(c *cli.Context) (*store.Store, error) {
	dir := knowledgeDir(c)
	return store.Open(dir, &store.Options{Logger: logger(c)}) // its errors name dir
}

// openEngine opens the tree and returns the engine over it, writing traces as
// this host. Close the store when done.
func openEngine(c *cli.Context) (*engine.Engine, *store.Store, error) {
	s, err := openStore(c)
	if err != nil {
		return nil, nil, err
	}
	e := engine.New(s)
	e.Writer = hostname()
	return e, s, nil
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "unknown"
	}
	return h
}

// writeJSON prints v as indented JSON with a trailing newline; <, > and & are
// printed as they are.
// Every string in it is scrubbed of credentials (engine.ScrubJSON).
func writeJSON(w io.Writer, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := w.Write(engine.ScrubJSON(buf.Bytes()))
	return err
}

// readArg reads an argument that may be given inline, as "-" (stdin) or as
// "@file", refusing more than limit bytes. what names it in errors.
func readArg(c *cli.Context, what, arg string, limit int) ([]byte, error) {
	var r io.Reader
	var from string
	switch {
	case arg == "-":
		r, from = c.App.Reader, "stdin"
	case strings.HasPrefix(arg, "@"):
		name := arg[1:]
		f, err := os.Open(name)
		if err != nil {
			return nil, usagef("%s: cannot read %s: %v: give a readable file after @", what, name, err)
		}
		defer f.Close()
		r, from = f, name
	default:
		if len(arg) > limit {
			return nil, usagef("%s is %d bytes, over the cap of %d: save less", what, len(arg), limit)
		}
		return []byte(arg), nil
	}
	if r == nil {
		return nil, nil
	}
	data, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("%s: reading %s: %w", what, from, err)
	}
	if len(data) > limit {
		return nil, usagef("%s from %s is over the cap of %d bytes: save less", what, from, limit)
	}
	return data, nil
}
