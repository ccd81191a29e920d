package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"go.yaml.in/yaml/v3"

	"github.com/pemdev/pem/agent"
	"github.com/pemdev/pem/agent/bench"
	"github.com/pemdev/pem/agent/demosite"
	"github.com/pemdev/pem/agent/llm"
	"github.com/pemdev/pem/agent/rod"
	"github.com/pemdev/pem/consolidate"
	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store"
	"github.com/pemdev/pem/store/gitrepo"
)

// pem agent run, pem demo and pem bench: wiring of agent (run loop and
// planners), agent/rod (the browser), agent/bench (the demo and bench
// harness over agent/demosite), store and consolidate.

func init() { register(newAgentCmd, newDemoCmd, newBenchCmd) }

func newAgentCmd() *cli.Command {
	return &cli.Command{
		Name:        "agent",
		Usage:       "run the browser agent",
		Subcommands: []*cli.Command{newAgentRunCmd()},
	}
}

func newAgentRunCmd() *cli.Command {
	return &cli.Command{
		Name:      "run",
		Usage:     "perform a task in the browser, with memory",
		ArgsUsage: "TASK",
		Description: "Asks memory for the task (URL + intent), replays trusted routes (P1/P2) with no planner call,\n" +
			"plans the rest, prints the answer and one line: tier, steps, planner calls, trace path. The trace\n" +
			"is deposited in every case. Secrets: --secret NAME=ENV_VAR puts the value of $ENV_VAR behind\n" +
			"{{secret:NAME}}; tasks and planners only ever see the placeholder. --tasks FILE (JSON lines or a\n" +
			"YAML list of {task, url, intent, params}) runs several tasks, --parallel N at once, in one browser.\n" +
			"Each run prints its run id on stderr and snapshots its progress after every step; --resume RUN_ID\n" +
			"continues an interrupted run (killed, Ctrl-C, or stopped before an unapproved step) from the page\n" +
			"it stood on. Steps that pem.yaml's approval rules mark (buy, delete, send, ...) are asked on the\n" +
			"terminal (y/N), planned or replayed; with --no-input, or when stdin is not a terminal, such a step\n" +
			"stops the run: failure approval_required, exit 14.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "url", Usage: "start `URL` (required unless --tasks)"},
			&cli.StringFlag{Name: "intent", Usage: "the intent memory is keyed on (default: the task text)"},
			&cli.IntFlag{Name: "max-turns", Value: agent.DefaultMaxTurns, Usage: "cap on actions per run"},
			&cli.BoolFlag{Name: "headful", Usage: "show the browser window"},
			&cli.BoolFlag{Name: "json", Usage: "print the result as JSON"},
			&cli.StringSliceFlag{Name: "param", Usage: "bind a route parameter `NAME=VALUE` (repeatable)"},
			&cli.StringSliceFlag{Name: "secret", Usage: "declare a secret `NAME=ENV_VAR` (repeatable)"},
			&cli.StringFlag{Name: "secrets-file", Usage: "read secrets from `FILE` (NAME=value lines; keep it mode 0600)"},
			&cli.StringFlag{Name: "tasks", Usage: "run the tasks in `FILE` (JSON lines or YAML list)"},
			&cli.IntFlag{Name: "parallel", Value: 1, Usage: "with --tasks: how many tasks run at once"},
			&cli.StringFlag{Name: "shots", Usage: "keep each run's final screenshot in `DIR` (default: none is taken)"},
			&cli.StringFlag{Name: "resume", Usage: "continue the interrupted run `RUN_ID` from its snapshot (no TASK, --url or --tasks)"},
			&cli.BoolFlag{Name: "no-input", Usage: "never ask on the terminal: a step that needs approval stops the run (approval_required)"},
		}, plannerFlags()...),
		Action: runAgentRun,
	}
}

// taskSpec is one line of a --tasks file.
type taskSpec struct {
	Task   string            `json:"task" yaml:"task"`
	URL    string            `json:"url" yaml:"url"`
	Intent string            `json:"intent" yaml:"intent"`
	Params map[string]string `json:"params" yaml:"params"`
}

// parseTasks reads JSON lines or a YAML list of tasks.
func parseTasks(data []byte) ([]taskSpec, error) {
	out, err := parseTaskFile[taskSpec](data, "task, url, intent, params")
	if err != nil {
		return nil, err
	}
	for i, t := range out {
		if strings.TrimSpace(t.Task) == "" || strings.TrimSpace(t.URL) == "" {
			return nil, fmt.Errorf("task %d: task and url are required", i+1)
		}
	}
	return out, nil
}

// parseTaskFile reads JSON lines or a YAML list of T, unknown fields refused
// (fields names them for the message).
func parseTaskFile[T any](data []byte, fields string) ([]T, error) {
	var out []T
	trimmed := bytes.TrimSpace(data)
	if bytes.HasPrefix(trimmed, []byte("{")) {
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		n := 0
		for sc.Scan() {
			n++
			line := bytes.TrimSpace(sc.Bytes())
			if len(line) == 0 || line[0] == '#' {
				continue
			}
			var t T
			dec := json.NewDecoder(bytes.NewReader(line))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&t); err != nil {
				return nil, fmt.Errorf("line %d: %v (fields: %s)", n, err, fields)
			}
			out = append(out, t)
		}
		if err := sc.Err(); err != nil {
			return nil, err
		}
	} else {
		dec := yaml.NewDecoder(bytes.NewReader(data))
		dec.KnownFields(true)
		if err := dec.Decode(&out); err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("want JSON lines or a YAML list of {%s}: %v", fields, err)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no tasks in the file")
	}
	return out, nil
}

// benchTaskSpec is one task of a pem bench --tasks file: pem agent run's
// fields plus the grading ones.
type benchTaskSpec struct {
	ID       string            `json:"id" yaml:"id"`
	Task     string            `json:"task" yaml:"task"`
	URL      string            `json:"url" yaml:"url"`
	Intent   string            `json:"intent" yaml:"intent"`
	Params   map[string]string `json:"params" yaml:"params"`
	Expected string            `json:"expected" yaml:"expected"`
	Regex    string            `json:"regex" yaml:"regex"`
	Volatile bool              `json:"volatile" yaml:"volatile"`
}

// parseBenchTasks reads a pem bench --tasks file; a task's url defaults to
// site, and every task must be gradable (bench.PrepareTasks).
func parseBenchTasks(data []byte, site string) ([]bench.Task, error) {
	specs, err := parseTaskFile[benchTaskSpec](data, "id, task, url, intent, params, expected, regex, volatile")
	if err != nil {
		return nil, err
	}
	out := make([]bench.Task, len(specs))
	for i, s := range specs {
		u := s.URL
		if u == "" && site == "" {
			return nil, fmt.Errorf("task %d: no url: give the task a url, or give --site URL", i+1)
		}
		if u == "" {
			u = site
		} else if site != "" && !strings.Contains(u, "://") {
			u = strings.TrimSuffix(site, "/") + "/" + strings.TrimPrefix(u, "/")
		}
		out[i] = bench.Task{ID: s.ID, Text: s.Task, StartURL: u, Intent: s.Intent, Params: s.Params,
			Expected: s.Expected, Pattern: s.Regex, Volatile: s.Volatile}
	}
	if err := bench.PrepareTasks(out); err != nil {
		return nil, err
	}
	return out, nil
}

func parseParams(specs []string) (map[string]string, error) {
	out := map[string]string{}
	for _, s := range specs {
		k, v, ok := strings.Cut(s, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("--param %q: want NAME=VALUE", s)
		}
		out[strings.TrimSpace(k)] = v
	}
	return out, nil
}

// secretsOf collects --secret and --secrets-file; the warning is printed by
// the caller.
func secretsOf(c *cli.Context) (map[string]string, error) {
	sec, err := agent.SecretsFromEnv(c.StringSlice("secret"), os.Getenv)
	if err != nil {
		return nil, usagef("%v", err)
	}
	if f := c.String("secrets-file"); f != "" {
		more, warn, err := agent.ReadSecretsFile(f)
		if warn != "" {
			fmt.Fprintln(c.App.ErrWriter, "pem: warning:", warn)
		}
		if err != nil {
			return nil, usagef("%v", err)
		}
		for k, v := range more {
			sec[k] = v
		}
	}
	return sec, nil
}

// plannerFlags are --planner and the model planners' settings (pem agent
// run, pem bench). Each wins over PEM_LLM_* and the provider's variables.
func plannerFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "planner", Value: "explore", Usage: "explore, openai or anthropic"},
		&cli.StringFlag{Name: "model", Usage: "the openai or anthropic planner's `MODEL` (default: PEM_LLM_MODEL, OPENAI_MODEL / ANTHROPIC_MODEL)"},
		&cli.StringFlag{Name: "base-url", Usage: "the model server's `URL`, e.g. http://localhost:11434/v1 (default: PEM_LLM_BASE_URL, OPENAI_BASE_URL / ANTHROPIC_BASE_URL, the provider's API)"},
		&cli.Float64Flag{Name: "temperature", Usage: "sampling temperature sent to the model (default: PEM_LLM_TEMPERATURE, else none is sent)"},
	}
}

// plannerFor builds the planner --planner names, configured by the flags.
func plannerFor(c *cli.Context) (agent.Planner, error) {
	cfg := llm.Config{Model: c.String("model"), BaseURL: c.String("base-url")}
	if c.IsSet("temperature") {
		t := c.Float64("temperature")
		cfg.Temperature = &t
	}
	var p agent.Planner
	var err error
	switch name := c.String("planner"); name {
	case "", "explore":
		if cfg.Model != "" || cfg.BaseURL != "" || cfg.Temperature != nil {
			return nil, usagef("--model, --base-url and --temperature configure a model planner: add --planner openai or --planner anthropic")
		}
		return agent.NewExplore(), nil
	case "openai":
		p, err = llm.NewOpenAI(cfg)
	case "anthropic":
		p, err = llm.NewAnthropic(cfg)
	default:
		return nil, usagef("--planner %q: use explore, openai or anthropic", name)
	}
	if err != nil {
		return nil, usagef("%v", err)
	}
	return p, nil
}

func launch(ctx context.Context, headful bool) (*rod.Browser, error) {
	lctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	b, err := rod.Launch(lctx, rod.Options{Headful: headful})
	if err != nil {
		return nil, fmt.Errorf("starting the browser: %w", err) // a missing one says what was tried and how to install
	}
	return b, nil
}

// runJSON is a run as pem agent run --json prints it.
type runJSON struct {
	Task           string                 `json:"task"`
	URL            string                 `json:"url"`
	Answer         string                 `json:"answer"`
	Success        bool                   `json:"success"`
	Tier           engine.Tier            `json:"tier"`
	RecallTier     engine.Tier            `json:"recall_tier"`
	Steps          int                    `json:"steps"`
	PlannerCalls   int                    `json:"planner_calls"`
	TracePath      string                 `json:"trace_path"`
	ScreenshotPath string                 `json:"screenshot_path,omitempty"`
	FailureCat     engine.FailureCategory `json:"failure_category,omitempty"`
	Error          string                 `json:"error,omitempty"`
	Seconds        float64                `json:"seconds"`
	RunID          string                 `json:"run_id,omitempty"`
	Resumed        bool                   `json:"resumed,omitempty"`
	Approvals      []engine.Approval      `json:"approvals,omitempty"`
	Blocked        *agent.ApprovalRequest `json:"approval_required,omitempty"`
	ActionLog      []string               `json:"action_log"`
}

func toJSON(task, url string, r *agent.RunResult, err error) runJSON {
	j := runJSON{Task: task, URL: url, ActionLog: []string{}}
	if r != nil {
		j.Answer, j.Success, j.Tier, j.RecallTier = r.Answer, r.Success, r.Tier, r.RecallTier
		j.Steps, j.PlannerCalls, j.TracePath, j.ScreenshotPath = r.Steps, r.PlannerCalls, r.TracePath, r.ScreenshotPath
		j.FailureCat, j.Error, j.Seconds, j.ActionLog = r.FailureCategory, r.Error, r.Duration.Seconds(), r.ActionLog
		j.RunID, j.Resumed, j.Approvals, j.Blocked = r.RunID, r.Resumed, r.Approvals, r.Blocked
	}
	if err != nil && j.Error == "" {
		j.Error = err.Error()
	}
	return j
}

// summaryLine is the one line pem agent run prints under the answer.
func summaryLine(r *agent.RunResult) string {
	trace := r.TracePath
	if trace == "" {
		trace = "(not deposited)"
	}
	return fmt.Sprintf("tier %s · %d steps · %d planner calls · trace %s", r.Tier, r.Steps, r.PlannerCalls, trace)
}

func runAgentRun(c *cli.Context) error {
	ctx := c.Context
	var specs []taskSpec
	var resume *agent.Snapshot
	switch {
	case c.String("resume") != "":
		if c.NArg() > 0 || c.String("tasks") != "" || c.String("url") != "" || c.String("intent") != "" {
			return usagef("--resume RUN_ID continues a run with its own task, URL and intent: give no TASK, --url, --intent or --tasks")
		}
	case c.String("tasks") != "":
		if c.NArg() > 0 {
			return usagef("give either TASK or --tasks FILE, not both")
		}
		data, err := os.ReadFile(c.String("tasks"))
		if err != nil {
			return usagef("--tasks: %v", err)
		}
		if specs, err = parseTasks(data); err != nil {
			return usagef("--tasks %s: %v", c.String("tasks"), err)
		}
	case c.NArg() == 1:
		if c.String("url") == "" {
			return usagef("agent run: --url is required: the page the task starts on")
		}
		specs = []taskSpec{{Task: c.Args().First(), URL: c.String("url"), Intent: c.String("intent")}}
	default:
		return usagef("agent run takes one TASK (quote it), or --tasks FILE")
	}
	if c.Int("parallel") < 1 {
		return usagef("--parallel must be at least 1")
	}
	params, err := parseParams(c.StringSlice("param"))
	if err != nil {
		return usagef("%v", err)
	}
	secrets, err := secretsOf(c)
	if err != nil {
		return err
	}
	for _, s := range specs {
		if _, err := agent.ResolveSecrets(s.Task, secrets); err != nil {
			return usagef("task %q: %v", bench.OneLine(s.Task, 60), err)
		}
	}
	planner, err := plannerFor(c)
	if err != nil {
		return err
	}
	eng, st, err := openEngine(c)
	if err != nil {
		return err
	}
	defer st.Close()
	snaps, err := snapshotDir(ctx, knowledgeDir(c))
	if err != nil {
		return err
	}
	if id := c.String("resume"); id != "" {
		if resume, err = agent.LoadSnapshot(snaps, id); err != nil {
			return err
		}
		specs = []taskSpec{{Task: resume.Task, URL: resume.StartURL, Intent: resume.Intent}}
	}
	eng.Secrets = secrets
	log := logger(c)
	approver := newTermApprover(c.App.Reader, c.App.ErrWriter, c.Bool("no-input"))
	br, err := launch(ctx, c.Bool("headful"))
	if err != nil {
		return err
	}
	defer br.Close()
	shots := c.String("shots") // "": no screenshot, nothing left behind
	session := fmt.Sprintf("%s-%d", hostname(), time.Now().UnixNano())
	var jobs []*agent.Job
	for _, s := range specs {
		p := map[string]string{}
		for k, v := range s.Params {
			p[k] = v
		}
		for k, v := range params {
			p[k] = v
		}
		cfg := agent.RunConfig{
			Engine: eng, Browser: br, Planner: planner, Task: s.Task, StartURL: s.URL, Intent: s.Intent,
			MaxTurns: c.Int("max-turns"), Params: p, Secrets: secrets, ShotDir: shots, Session: session, Logger: log,
			Approver: approver, SnapshotDir: snaps, RunID: agent.NewRunID(time.Now()),
		}
		if resume != nil {
			if !c.IsSet("max-turns") {
				cfg.MaxTurns = 0 // the interrupted run's cap
			}
			resume.Configure(&cfg)
		}
		fmt.Fprintf(c.App.ErrWriter, "pem: run %s: %s (resume it with: %s agent run --resume %s)\n", cfg.RunID, bench.OneLine(agent.Scrub(cfg.Task, secrets), 60), selfName(), cfg.RunID)
		jobs = append(jobs, &agent.Job{Config: cfg})
	}
	agent.RunAll(ctx, jobs, c.Int("parallel"))

	w := c.App.Writer
	failed := 0
	var out []runJSON
	for _, j := range jobs {
		if j.Err != nil || j.Result == nil || !j.Result.Success {
			failed++
		}
		out = append(out, toJSON(j.Config.Task, j.Config.StartURL, j.Result, j.Err))
		if c.Bool(flagVerbose) && j.Result != nil {
			for _, l := range j.Result.ActionLog {
				fmt.Fprintln(c.App.ErrWriter, "  "+l)
			}
		}
	}
	if c.Bool("json") {
		var v any = out
		if len(out) == 1 && c.String("tasks") == "" {
			v = out[0]
		}
		if err := writeJSON(w, v); err != nil {
			return err
		}
	} else {
		for _, j := range jobs {
			if len(jobs) > 1 {
				fmt.Fprintf(w, "%s\n  ", j.Config.Task)
			}
			switch {
			case j.Result == nil:
				fmt.Fprintf(w, "(no result)\n")
			default:
				ans := j.Result.Answer
				if ans == "" {
					ans = "(no answer)"
				}
				fmt.Fprintln(w, ans)
				if len(jobs) > 1 {
					fmt.Fprint(w, "  ")
				}
				fmt.Fprintln(w, summaryLine(j.Result))
			}
		}
	}
	for _, j := range jobs {
		if j.Err != nil {
			if errors.Is(j.Err, context.Canceled) {
				return j.Err
			}
			if errors.Is(j.Err, agent.ErrConfig) {
				return usagef("agent run: %v", j.Err)
			}
			if len(jobs) == 1 {
				return fmt.Errorf("agent run: %w", j.Err)
			}
		}
	}
	if failed > 0 {
		msg := fmt.Sprintf("%d of %d tasks not achieved", failed, len(jobs))
		if len(jobs) == 1 && jobs[0].Result != nil && jobs[0].Result.Error != "" {
			msg = "the task was not achieved: " + jobs[0].Result.Error
		}
		return cli.Exit(msg+" (the trace records why)", exitInternal)
	}
	return nil
}

// ---- pem demo ----------------------------------------------------------

func newDemoCmd() *cli.Command {
	return &cli.Command{
		Name:  "demo",
		Usage: "show memory at work on the built-in demo site",
		Description: "Serves the embedded demo site on 127.0.0.1, runs every demo task cold with the explore planner\n" +
			"(round 1), consolidates, then runs them warm (rounds 2..N, volatile values moved) and prints\n" +
			"a table and the totals cold vs warm. Each round is its own session and the grader's verdict on each\n" +
			"run is recorded (pem experience feedback). A first success gives hints (P3); successes from 2\n" +
			"sessions give P2 (verify, then replay, round 3); an entry becomes verified (P1, straight replay) after\n" +
			"5 successful runs from at least 2 sessions, so --rounds 6 shows P1. Every figure printed is measured\n" +
			"in these runs.\n" +
			"Uses --knowledge when given, else a temporary tree it names at the end. Exit 0 only when every\n" +
			"run succeeded.\n" +
			"--serve ADDR serves the demo site (--round, --variant) for your own runs until interrupted and\n" +
			"prints its URL; the tasks and their answers for that round are listed by pem demo --serve --json.",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print the runs and totals as JSON"},
			&cli.IntFlag{Name: "rounds", Value: 2, Usage: "rounds: 1 cold, then warm"},
			&cli.StringFlag{Name: "variant", Value: demosite.Stable, Usage: "markup of the warm rounds (with --serve: of the site): stable or drift (ids and classes renamed)"},
			&cli.StringFlag{Name: "only", Usage: "run only these task `IDS` (comma-separated)"},
			&cli.BoolFlag{Name: "headful", Usage: "show the browser window"},
			&cli.StringFlag{Name: "serve", Usage: "only serve the demo site on `ADDR` (host:port, e.g. 127.0.0.1:8080) until interrupted; runs nothing"},
			&cli.IntFlag{Name: "round", Value: 1, Usage: "with --serve: the round whose volatile values the site shows"},
		},
		Action: runDemo,
	}
}

// openTree opens dir as a tree, creating it (with its git repository) when
// it does not exist yet.
func openTree(ctx context.Context, dir string) (*store.Store, error) {
	if _, err := store.Init(ctx, dir); err != nil {
		return nil, fmt.Errorf("creating knowledge tree %s: %w", dir, err)
	}
	if r, err := gitrepo.Open(ctx, dir); err == nil {
		r.Close()
	} else {
		if err := gitrepo.Init(ctx, dir); err != nil {
			return nil, fmt.Errorf("creating git repository in %s: %w", dir, err)
		}
	}
	st, err := store.Open(dir, nil)
	if err != nil {
		return nil, fmt.Errorf("opening knowledge tree %s: %w", dir, err)
	}
	return st, nil
}

// demoArm opens (creating it if need be) the tree in dir as a
// bench arm whose runs may type the demo password.
func demoArm(c *cli.Context, dir string) (bench.Arm, *store.Store, error) {
	st, err := openTree(c.Context, dir)
	if err != nil {
		return bench.Arm{}, nil, err
	}
	log := logger(c)
	eng := &engine.Engine{Store: st, Writer: hostname(), Secrets: map[string]string{"demo_password": demosite.DemoPassword}}
	return bench.Arm{Engine: eng, Consolidate: func(ctx context.Context) error {
		if _, err := consolidate.Run(ctx, st, consolidate.Options{Logger: log}); err != nil {
			return fmt.Errorf("consolidating %s: %w", dir, err)
		}
		return nil
	}}, st, nil
}

// startHarness launches the browser and serves the demo site; close stops both.
func startHarness(c *cli.Context) (h *bench.Harness, close func(), err error) {
	br, err := launch(c.Context, c.Bool("headful"))
	if err != nil {
		return nil, nil, err
	}
	if h, err = bench.Start(c.Context, br, logger(c)); err != nil {
		br.Close()
		return nil, nil, err
	}
	return h, func() { h.Close(); br.Close() }, nil
}

func runDemo(c *cli.Context) error {
	rounds, variant := c.Int("rounds"), c.String("variant")
	if rounds < 1 {
		return usagef("--rounds must be at least 1")
	}
	if variant != demosite.Stable && variant != demosite.Drift {
		return usagef("--variant %q: use stable or drift", variant)
	}
	if c.IsSet("round") && !c.IsSet("serve") {
		return usagef("--round sets the round --serve shows: add --serve ADDR (pem demo itself runs rounds 1..--rounds)")
	}
	if c.IsSet("serve") {
		return serveDemo(c)
	}
	if _, err := bench.Tasks("http://x", 1, variant, c.String("only")); err != nil {
		return usagef("--only: %v", err)
	}
	dir, temp := "", false
	if c.IsSet(flagKnowledge) {
		dir = knowledgeDir(c)
	} else {
		tmp, err := os.MkdirTemp("", "pem-demo-")
		if err != nil {
			return err
		}
		dir, temp = filepath.Join(tmp, "knowledge"), true
	}
	on, st, err := demoArm(c, dir)
	if err != nil {
		return err
	}
	defer st.Close()
	h, stop, err := startHarness(c)
	if err != nil {
		return err
	}
	defer stop()
	progress := func(r bench.Run) {
		fmt.Fprintf(c.App.ErrWriter, "round %d %-22s %s %-5v %s\n", r.Round, r.Task, r.Tier, r.Success, bench.OneLine(r.Answer, 60))
	}
	if c.Bool("json") {
		progress = nil
	}
	runs, err := h.Demo(c.Context, on, bench.DemoOptions{Rounds: rounds, Variant: variant, Only: c.String("only"), Progress: progress})
	if err != nil {
		return err
	}
	cold, warm := bench.ColdWarm(runs)
	tc, tw := bench.Sum(cold), bench.Sum(warm)
	out := c.App.Writer
	ok := tc.Successes == tc.Runs && tw.Successes == tw.Runs
	if c.Bool("json") {
		type tot struct {
			Cold       bench.Totals `json:"cold"`
			Warm       bench.Totals `json:"warm"`
			StepsRatio float64      `json:"steps_ratio"`
			TimeRatio  float64      `json:"time_ratio"`
			Tree       string       `json:"tree"`
			AllOK      bool         `json:"all_succeeded"`
			// Rounds: each round's time against the cold round, by phase.
			Rounds []bench.RoundTime `json:"rounds"`
		}
		v := struct {
			Runs   []bench.Run `json:"runs"`
			Totals tot         `json:"totals"`
		}{runs, tot{tc, tw, bench.StepsRatio(cold, warm), bench.TimeRatio(cold, warm), dir, ok, bench.Rounds(runs)}}
		if err := writeJSON(out, v); err != nil {
			return err
		}
	} else {
		bench.WriteTable(out, runs)
		if temp {
			fmt.Fprintf(out, "knowledge tree: %s (temporary; inspect it with: %s --knowledge %s log)\n", dir, selfName(), dir)
		} else {
			fmt.Fprintf(out, "knowledge tree: %s\n", dir)
		}
		fmt.Fprintf(out, "browse it: %s --knowledge %s serve --http 127.0.0.1:8080, then open http://127.0.0.1:8080/\n", selfName(), dir)
	}
	if !ok {
		return cli.Exit(fmt.Sprintf("demo: %d of %d runs did not succeed (see the table)", tc.Runs+tw.Runs-tc.Successes-tw.Successes, tc.Runs+tw.Runs), exitInternal)
	}
	return nil
}

// serveDemo serves the demo site on --serve until interrupted.
func serveDemo(c *cli.Context) error {
	addr, round := c.String("serve"), c.Int("round")
	if round < 0 {
		return usagef("--round must be 0 or more")
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return usagef("--serve %q: want host:port, e.g. 127.0.0.1:8080 (%v)", addr, err)
	}
	site := demosite.New(demosite.Options{Variant: c.String("variant"), Round: round})
	base, stop, err := site.StartOn(c.Context, addr)
	if err != nil {
		return fmt.Errorf("%w: is the port in use? pick another with --serve", err)
	}
	defer stop()
	out := c.App.Writer
	if c.Bool("json") {
		type task struct {
			ID       string `json:"id"`
			Task     string `json:"task"`
			URL      string `json:"url"`
			Expected string `json:"expected"`
			Volatile bool   `json:"volatile,omitempty"`
		}
		var ts []task
		for _, k := range demosite.Tasks(base, round, c.String("variant")) {
			ts = append(ts, task{k.ID, k.Text, k.StartURL, k.Expected, k.Volatile})
		}
		if err := writeJSON(out, map[string]any{"url": base + "/", "round": round, "variant": c.String("variant"), "tasks": ts}); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(out, "demo site (round %d, %s markup): %s/\n", round, c.String("variant"), base)
		fmt.Fprintln(out, "serving until interrupted (Ctrl-C)")
	}
	<-c.Context.Done()
	fmt.Fprintln(c.App.ErrWriter, "pem: demo site stopped")
	return nil
}

// ---- pem bench ---------------------------------------------------------

func newBenchCmd() *cli.Command {
	return &cli.Command{
		Name:  "bench",
		Usage: "measure memory-on against memory-off, on the demo site or your own site and tasks",
		Description: "Runs the tasks for --rounds rounds twice: memory-on (one shared tree, consolidated after each\n" +
			"round) and memory-off (the same runs with memory not consulted, in a tree of its own). Every answer\n" +
			"is graded live and the grader's verdict is recorded in the run's tree (as pem experience feedback\n" +
			"would). Writes summary.md, summary.csv and\n" +
			"report.html (charts, no network) to --out: per run, per round and in total, accuracy,\n" +
			"stale answers, paired harm (memory-on wrong where memory-off was right in the same round), steps,\n" +
			"planner calls, input and output tokens (the model's usage fields), prompt characters (task +\n" +
			"memory + page observation per planner call), clicks, extract and search calls, duration, the tier\n" +
			"served and the memory blocks recalled; both name the planner and the site.\n" +
			"Without --tasks: the demo site, served on 127.0.0.1; volatile values move every round, and an\n" +
			"answer that repeats last round's value is stale and counts as wrong.\n" +
			"--tasks FILE: your own tasks (JSON lines or a YAML list; pem agent run's fields task, url, intent,\n" +
			"params plus id, expected or regex, volatile), graded by expected (the answer must contain it;\n" +
			"case, commas and quotes ignored) or regex; url may be relative to --site URL.\n" +
			"--keep DIR keeps the two trees as DIR/knowledge-on and DIR/knowledge-off (else they are removed).",
		Flags: append([]cli.Flag{
			&cli.IntFlag{Name: "rounds", Value: 3, Usage: "rounds per arm"},
			&cli.StringFlag{Name: "out", Value: "bench", Usage: "`DIR` for summary.md, summary.csv and report.html"},
			&cli.StringFlag{Name: "only", Usage: "run only these task `IDS` (comma-separated)"},
			&cli.StringFlag{Name: "site", Usage: "your site's `URL` (with --tasks: where tasks without a url start, and the base of relative ones)"},
			&cli.StringFlag{Name: "tasks", Usage: "your graded tasks in `FILE` instead of the demo's (see the description)"},
			&cli.StringFlag{Name: "keep", Usage: "keep the memory-on and memory-off trees in `DIR` (must not hold them already)"},
			&cli.IntFlag{Name: "max-turns", Value: agent.DefaultMaxTurns, Usage: "cap on actions per run"},
			&cli.BoolFlag{Name: "headful", Usage: "show the browser window"},
		}, plannerFlags()...),
		Action: runBench,
	}
}

func runBench(c *cli.Context) error {
	rounds := c.Int("rounds")
	if rounds < 1 {
		return usagef("--rounds must be at least 1")
	}
	site := strings.TrimSpace(c.String("site"))
	if site != "" {
		if u, err := url.Parse(site); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return usagef("--site %q: want an http(s) URL such as https://docs.example.com/", site)
		}
	}
	var tasks []bench.Task
	if f := c.String("tasks"); f != "" {
		data, err := os.ReadFile(f)
		if err != nil {
			return usagef("--tasks: %v", err)
		}
		if tasks, err = parseBenchTasks(data, site); err != nil {
			return usagef("--tasks %s: %v", f, err)
		}
		if site == "" {
			site = tasks[0].StartURL
		}
		if _, err := bench.PickTasks(tasks, c.String("only")); err != nil {
			return usagef("--only: %v", err)
		}
	} else {
		if site != "" {
			return usagef("--site needs --tasks FILE: the tasks to run on your site, each with its expected answer or regex")
		}
		if _, err := bench.Tasks("http://x", 1, "", c.String("only")); err != nil {
			return usagef("--only: %v", err)
		}
	}
	planner, err := plannerFor(c)
	if err != nil {
		return err
	}
	keep := c.String("keep")
	if keep != "" {
		for _, d := range []string{"knowledge-on", "knowledge-off"} {
			if _, err := os.Stat(filepath.Join(keep, d)); err == nil {
				return usagef("--keep %s: %s already exists: give a directory that holds no bench trees, so that memory-on starts cold", keep, filepath.Join(keep, d))
			}
		}
	}
	outDir := c.String("out")
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", outDir, err)
	}
	treeDir := keep
	if treeDir == "" {
		tmp, err := os.MkdirTemp("", "pem-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		treeDir = tmp
	}
	// memory-off deposits into its own tree, so that memory-on's tree only
	// holds its own evidence.
	on, onStore, err := demoArm(c, filepath.Join(treeDir, "knowledge-on"))
	if err != nil {
		return err
	}
	defer onStore.Close()
	off, offStore, err := demoArm(c, filepath.Join(treeDir, "knowledge-off"))
	if err != nil {
		return err
	}
	defer offStore.Close()
	br, err := launch(c.Context, c.Bool("headful"))
	if err != nil {
		return err
	}
	defer br.Close()
	var h *bench.Harness
	siteName := "demo site"
	if len(tasks) > 0 {
		h, err = bench.Open(c.Context, br, site, logger(c))
		siteName = site
	} else {
		h, err = bench.Start(c.Context, br, logger(c))
	}
	if err != nil {
		return err
	}
	defer h.Close()
	h.Planner, h.MaxTurns = planner, c.Int("max-turns")
	progress := func(r bench.Run) {
		fmt.Fprintf(c.App.ErrWriter, "round %d memory %-3s %-22s %s %-5v %d steps\n", r.Round, r.Memory, r.Task, r.Tier, r.Success, r.Steps)
	}
	runs, err := h.Bench(c.Context, on, off, bench.BenchOptions{Rounds: rounds, Only: c.String("only"), Tasks: tasks, Progress: progress})
	if err != nil {
		return err
	}
	name := planner.Name()
	if m := c.String("model"); m != "" {
		name += " (" + m + ")"
	}
	md, csvData := bench.Summary(runs, bench.Info{Planner: name, Site: siteName, Rounds: rounds})
	if err := os.WriteFile(filepath.Join(outDir, "summary.md"), md, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(outDir, "summary.csv"), csvData, 0o644); err != nil {
		return err
	}
	report := bench.Report(runs, bench.ReportOptions{Planner: name, Site: siteName, Generated: time.Now().UTC().Format(time.RFC3339)})
	if err := os.WriteFile(filepath.Join(outDir, "report.html"), report, 0o644); err != nil {
		return err
	}
	c.App.Writer.Write(md)
	fmt.Fprintf(c.App.Writer, "\nwrote %s, %s and %s\n", filepath.Join(outDir, "summary.md"), filepath.Join(outDir, "summary.csv"), filepath.Join(outDir, "report.html"))
	if keep != "" {
		fmt.Fprintf(c.App.Writer, "kept the trees: %s and %s\n", filepath.Join(keep, "knowledge-on"), filepath.Join(keep, "knowledge-off"))
	}
	return nil
}
