package main

import (
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/pemdev/pem/engine"
)

func init() { register(newExperienceCmd, newMemoryCmd) }

func newExperienceCmd() *cli.Command {
	return &cli.Command{
		Name:  "experience",
		Usage: "save runs and ask what is known (JSON answers)",
		Description: "save stores one run as an immutable trace; query answers what memory holds for a URL and intent,\n" +
			"with the reasons for its tier; list pages through everything known; feedback records a verdict on a run.",
		Subcommands: []*cli.Command{newSaveCmd(), newQueryCmd(), newListCmd(), newFeedbackCmd()},
	}
}

func newSaveCmd() *cli.Command {
	return &cli.Command{
		Name:      "save",
		Usage:     "store one run as an immutable trace; print the result as JSON",
		ArgsUsage: "URL TRACE_JSON",
		Description: "TRACE_JSON is the run in JSON (snake_case or camelCase), '' for none, - to read stdin, or @FILE.\n" +
			"Fields: task_type, intent, task, url, steps[{action, selector, value, result, ok, error, duration_ms}],\n" +
			"outcome, timestamp, extraction_results, final_page_url, final_page_title, error_message, duration_ms, session.\n" +
			"Browser4's ActionStep shape is read too (sequence, timestamp, result; final_state{url,title}): a step\n" +
			"whose result reports an error (\"error: …\", \"failed …\", an exception name), or whose selector the\n" +
			"trace's error_message names, failed. A trace with at least one step is a run (evidence); with no steps\n" +
			"but --facts it is a lesson (the patch is applied, the save recorded, no evidence); with neither, or a\n" +
			"URL with no host, the save is refused (exit 2) and nothing is written.\n" +
			"Values typed into password fields are redacted. The trace is written, not committed: pem consolidate commits.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "outcome", Usage: "the run's `OUTCOME`, success or failure (overrides the trace's; default success)"},
			&cli.StringFlag{Name: "task-type", Usage: "a label `T` for the kind of task, e.g. extract"},
			&cli.StringFlag{Name: "intent", Usage: "what the run was for, in words (`TEXT`); keys the knowledge"},
			&cli.StringFlag{Name: "session", Usage: "the session `ID` the run belongs to (default: the trace id)"},
			&cli.StringFlag{Name: "facts", Usage: "a facts patch: `JSON` or @FILE, keys selectors, interaction_hints, known_blockers, anti_patterns, extraction_query"},
		},
		Action: runSave,
	}
}

func runSave(c *cli.Context) error {
	if c.NArg() != 2 {
		return usagef("experience save needs URL and TRACE_JSON (use '' for an empty trace), got %d arguments", c.NArg())
	}
	url, traceArg := c.Args().Get(0), c.Args().Get(1)
	data, err := readArg(c, "TRACE_JSON", traceArg, engine.MaxTraceBytes)
	if err != nil {
		return err
	}
	in, err := engine.ParseTraceInput(data)
	if err != nil {
		return err
	}
	req := engine.SaveRequest{URL: url, Trace: in, Outcome: c.String("outcome"), TaskType: c.String("task-type"),
		Intent: c.String("intent"), Session: c.String("session")}
	if arg := c.String("facts"); arg != "" {
		if arg == "-" && traceArg == "-" {
			return usagef("TRACE_JSON and --facts cannot both read stdin: give one of them as @FILE")
		}
		data, err := readArg(c, "--facts", arg, engine.MaxPatchBytes)
		if err != nil {
			return err
		}
		if req.Facts, err = engine.ParsePatch(data); err != nil {
			return err
		}
	}
	e, s, err := openEngine(c)
	if err != nil {
		return err
	}
	defer s.Close()
	res, err := e.Save(c.Context, req)
	if err != nil {
		if res != nil && res.Saved {
			return fmt.Errorf("trace %s was saved at %s, but: %w", res.ID, res.TracePath, err)
		}
		return err
	}
	return writeJSON(c.App.Writer, res)
}

func newQueryCmd() *cli.Command {
	return &cli.Command{
		Name:      "query",
		Usage:     "print what memory holds for a task at URL, as JSON (tier P5 when nothing is known)",
		ArgsUsage: "URL",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "intent", Usage: "what the task is for, in words (`TEXT`)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usagef("experience query needs exactly one URL, got %d arguments", c.NArg())
			}
			e, s, err := openEngine(c)
			if err != nil {
				return err
			}
			defer s.Close()
			r, err := e.Query(c.Context, c.Args().First(), c.String("intent"))
			if err != nil {
				return err
			}
			return writeJSON(c.App.Writer, r)
		},
	}
}

func newListCmd() *cli.Command {
	return &cli.Command{
		Name:  "list",
		Usage: "list the known (domain, intent) entries, one page at a time, as JSON",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "filter", Usage: "only domains containing `DOMAIN`"},
			&cli.StringFlag{Name: "intent-filter", Usage: "only intents containing `TEXT`"},
			&cli.IntFlag{Name: "page", Value: 1, Usage: "page `N`, from 1"},
			&cli.IntFlag{Name: "page-size", Value: 20, Usage: fmt.Sprintf("`N` entries per page, 1 to %d", engine.MaxPageSize)},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 0 {
				return usagef("experience list takes no arguments (got %q): use --filter DOMAIN", c.Args().First())
			}
			page, size := c.Int("page"), c.Int("page-size")
			if page < 1 {
				return usagef("--page %d: pages start at 1", page)
			}
			if size < 1 || size > engine.MaxPageSize {
				return usagef("--page-size %d: use 1 to %d", size, engine.MaxPageSize)
			}
			e, s, err := openEngine(c)
			if err != nil {
				return err
			}
			defer s.Close()
			res, err := e.List(c.Context, engine.ListRequest{Filter: c.String("filter"), IntentFilter: c.String("intent-filter"),
				Page: page, PageSize: size})
			if err != nil {
				return err
			}
			return writeJSON(c.App.Writer, res)
		},
	}
}

// maxMemoryChars bounds --max-chars; a Memory section is for a prompt.
const maxMemoryChars = 100_000

func newMemoryCmd() *cli.Command {
	return &cli.Command{
		Name:      "memory",
		Usage:     "print the ## Memory section for a task at URL (nothing when nothing is known)",
		ArgsUsage: "URL",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "intent", Usage: "what the task is for, in words (`TEXT`)"},
			&cli.IntFlag{Name: "max-chars", Usage: "cap the section at `N` characters (0: memory_max_chars of pem.yaml, 2000 by default)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usagef("memory needs exactly one URL, got %d arguments", c.NArg())
			}
			max := c.Int("max-chars")
			if max < 0 || max > maxMemoryChars {
				return usagef("--max-chars %d: use 0 (the tree's default) to %d", max, maxMemoryChars)
			}
			e, s, err := openEngine(c)
			if err != nil {
				return err
			}
			defer s.Close()
			section, err := e.Memory(c.Context, c.Args().First(), c.String("intent"), max)
			if err != nil {
				return err
			}
			_, err = io.WriteString(c.App.Writer, section)
			return err
		},
	}
}
