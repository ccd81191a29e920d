package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"go.yaml.in/yaml/v3"

	"github.com/pemdev/pem/agent"
	"github.com/pemdev/pem/agent/demosite"
	"github.com/pemdev/pem/agent/llm"
	"github.com/pemdev/pem/agent/rod"
	"github.com/pemdev/pem/consolidate"
	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store"
)

// pem agent run, pem demo and pem bench: wiring of agent (run loop and
// planners), agent/rod (the browser), agent/demosite, store and consolidate.

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
			"YAML list of {task, url, intent, params}) runs several tasks, --parallel N at once, in one browser.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "url", Usage: "start `URL` (required unless --tasks)"},
			&cli.StringFlag{Name: "intent", Usage: "the intent memory is keyed on (default: the task text)"},
			&cli.StringFlag{Name: "planner", Value: "explore", Usage: "explore, openai or anthropic"},
			&cli.IntFlag{Name: "max-turns", Value: agent.DefaultMaxTurns, Usage: "cap on actions per run"},
			&cli.BoolFlag{Name: "headful", Usage: "show the browser window"},
			&cli.BoolFlag{Name: "json", Usage: "print the result as JSON"},
			&cli.StringSliceFlag{Name: "param", Usage: "bind a route parameter `NAME=VALUE` (repeatable)"},
			&cli.StringSliceFlag{Name: "secret", Usage: "declare a secret `NAME=ENV_VAR` (repeatable)"},
			&cli.StringFlag{Name: "secrets-file", Usage: "read secrets from `FILE` (NAME=value lines; keep it mode 0600)"},
			&cli.StringFlag{Name: "tasks", Usage: "run the tasks in `FILE` (JSON lines or YAML list)"},
			&cli.IntFlag{Name: "parallel", Value: 1, Usage: "with --tasks: how many tasks run at once"},
			&cli.StringFlag{Name: "shots", Usage: "directory for the final screenshots (default: the temp dir)"},
		},
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
	var out []taskSpec
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
			var t taskSpec
			dec := json.NewDecoder(bytes.NewReader(line))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&t); err != nil {
				return nil, fmt.Errorf("line %d: %v (fields: task, url, intent, params)", n, err)
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
			return nil, fmt.Errorf("want JSON lines or a YAML list of {task, url, intent, params}: %v", err)
		}
	}
	for i, t := range out {
		if strings.TrimSpace(t.Task) == "" || strings.TrimSpace(t.URL) == "" {
			return nil, fmt.Errorf("task %d: task and url are required", i+1)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no tasks in the file")
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

// plannerFor builds the named planner.
func plannerFor(name string) (agent.Planner, error) {
	switch name {
	case "", "explore":
		return agent.NewExplore(), nil
	case "openai":
		p, err := llm.NewOpenAI(llm.Config{})
		if err != nil {
			return nil, usagef("%v", err)
		}
		return p, nil
	case "anthropic":
		p, err := llm.NewAnthropic(llm.Config{})
		if err != nil {
			return nil, usagef("%v", err)
		}
		return p, nil
	}
	return nil, usagef("--planner %q: use explore, openai or anthropic", name)
}

func launch(ctx context.Context, headful bool) (*rod.Browser, error) {
	lctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	b, err := rod.Launch(lctx, rod.Options{Headful: headful})
	if err != nil {
		return nil, fmt.Errorf("starting the browser: %w (install chromium: apt-get install chromium, or set PEM_CHROME)", err)
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
	ActionLog      []string               `json:"action_log"`
}

func toJSON(task, url string, r *agent.RunResult, err error) runJSON {
	j := runJSON{Task: task, URL: url, ActionLog: []string{}}
	if r != nil {
		j.Answer, j.Success, j.Tier, j.RecallTier = r.Answer, r.Success, r.Tier, r.RecallTier
		j.Steps, j.PlannerCalls, j.TracePath, j.ScreenshotPath = r.Steps, r.PlannerCalls, r.TracePath, r.ScreenshotPath
		j.FailureCat, j.Error, j.Seconds, j.ActionLog = r.FailureCategory, r.Error, r.Duration.Seconds(), r.ActionLog
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
	switch {
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
			return usagef("task %q: %v", oneLineOf(s.Task, 60), err)
		}
	}
	planner, err := plannerFor(c.String("planner"))
	if err != nil {
		return err
	}
	eng, st, err := openEngine(c)
	if err != nil {
		return err
	}
	defer st.Close()
	eng.Secrets = secrets
	log := logger(c)
	br, err := launch(ctx, c.Bool("headful"))
	if err != nil {
		return err
	}
	defer br.Close()
	shots := c.String("shots")
	if shots == "" {
		shots = filepath.Join(os.TempDir(), "pem-shots")
	}
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
		jobs = append(jobs, &agent.Job{Config: agent.RunConfig{
			Engine: eng, Browser: br, Planner: planner, Task: s.Task, StartURL: s.URL, Intent: s.Intent,
			MaxTurns: c.Int("max-turns"), Params: p, Secrets: secrets, ShotDir: shots, Session: session, Logger: log,
		}})
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
			"5 successful runs from at least 2 sessions, so --rounds 6 shows P1.\n" +
			"Uses --knowledge when given, else a temporary tree it names at the end. Exit 0 only when every\n" +
			"run succeeded.",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print the runs and totals as JSON"},
			&cli.IntFlag{Name: "rounds", Value: 2, Usage: "rounds: 1 cold, then warm"},
			&cli.StringFlag{Name: "variant", Value: demosite.Stable, Usage: "markup of the warm rounds: stable or drift (ids and classes renamed)"},
			&cli.StringFlag{Name: "only", Usage: "run only these task `IDS` (comma-separated)"},
			&cli.BoolFlag{Name: "headful", Usage: "show the browser window"},
		},
		Action: runDemo,
	}
}

// demoRun is one row of the demo table.
type demoRun struct {
	Task         string      `json:"task"`
	Round        int         `json:"round"`
	Memory       string      `json:"memory"`
	Tier         engine.Tier `json:"tier"`
	Steps        int         `json:"steps"`
	PlannerCalls int         `json:"planner_calls"`
	Success      bool        `json:"success"`
	Seconds      float64     `json:"seconds"`
	Answer       string      `json:"answer"`
	Expected     string      `json:"expected"`
	Stale        bool        `json:"stale,omitempty"`
	Clicks       int         `json:"clicks"`
	Extracts     int         `json:"extracts"`
	PromptChars  int         `json:"prompt_chars"`
	Trace        string      `json:"trace,omitempty"`
	Error        string      `json:"error,omitempty"`
}

// totals sums runs.
type totals struct {
	Runs         int     `json:"runs"`
	Successes    int     `json:"successes"`
	Accuracy     float64 `json:"accuracy"`
	Steps        int     `json:"steps"`
	PlannerCalls int     `json:"planner_calls"`
	Clicks       int     `json:"clicks"`
	Extracts     int     `json:"extracts"`
	PromptChars  int     `json:"prompt_chars"`
	Stale        int     `json:"stale"`
	Seconds      float64 `json:"seconds"`
}

func sum(runs []demoRun) totals {
	var t totals
	for _, r := range runs {
		t.Runs++
		if r.Success {
			t.Successes++
		}
		if r.Stale {
			t.Stale++
		}
		t.Steps += r.Steps
		t.PlannerCalls += r.PlannerCalls
		t.Clicks += r.Clicks
		t.Extracts += r.Extracts
		t.PromptChars += r.PromptChars
		t.Seconds += r.Seconds
	}
	if t.Runs > 0 {
		t.Accuracy = round3(float64(t.Successes) / float64(t.Runs))
	}
	t.Seconds = round3(t.Seconds)
	return t
}

func round3(f float64) float64 { return float64(int64(f*1000+0.5)) / 1000 }

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return round3(a / b)
}

// demoEnv is a served demo site, a tree and a browser tab.
type demoEnv struct {
	site    *demosite.Site
	base    string
	stop    func()
	dir     string
	temp    bool
	st      *store.Store
	eng     *engine.Engine
	br      *rod.Browser
	page    agent.Page
	log     *slog.Logger
	commit  bool
	planner agent.Planner
}

func (d *demoEnv) close() {
	if d.page != nil {
		d.page.Close()
	}
	if d.br != nil {
		d.br.Close()
	}
	if d.st != nil {
		d.st.Close()
	}
	if d.stop != nil {
		d.stop()
	}
}

// openTree opens dir as a tree, creating it (with its git repository) when
// it does not exist yet.
func openTree(ctx context.Context, dir string) (*store.Store, bool, error) {
	if _, err := store.Init(ctx, dir); err != nil {
		return nil, false, fmt.Errorf("creating knowledge tree %s: %w", dir, err)
	}
	commit := true
	if _, err := store.GitDir(dir); err != nil {
		if err := store.InitRepo(ctx, dir); err != nil {
			return nil, false, fmt.Errorf("creating git repository in %s: %w", dir, err)
		}
	}
	st, err := store.Open(dir, nil)
	if err != nil {
		return nil, false, fmt.Errorf("opening knowledge tree %s: %w", dir, err)
	}
	return st, commit, nil
}

func newDemoEnv(c *cli.Context, variant string, dir string) (*demoEnv, error) {
	ctx := c.Context
	d := &demoEnv{log: logger(c), planner: agent.NewExplore()}
	d.site = demosite.New(demosite.Options{Variant: demosite.Stable, Round: 1})
	base, stop, err := d.site.Start(ctx)
	if err != nil {
		return nil, err
	}
	d.base, d.stop = base, stop
	if dir == "" {
		tmp, err := os.MkdirTemp("", "pem-demo-")
		if err != nil {
			d.close()
			return nil, err
		}
		dir, d.temp = filepath.Join(tmp, "knowledge"), true
	}
	d.dir = dir
	if d.st, d.commit, err = openTree(ctx, dir); err != nil {
		d.close()
		return nil, err
	}
	d.eng = &engine.Engine{Store: d.st, Writer: hostname(), Secrets: map[string]string{"demo_password": demosite.DemoPassword}}
	if d.br, err = launch(ctx, c.Bool("headful")); err != nil {
		d.close()
		return nil, err
	}
	// One tab for the sequential runs, warmed up once so that the first
	// cold run does not pay for the browser's start.
	if d.page, err = d.br.NewPage(ctx); err != nil {
		d.close()
		return nil, fmt.Errorf("opening a browser tab: %w", err)
	}
	if err := d.page.Navigate(ctx, d.base+"/"); err != nil {
		d.close()
		return nil, fmt.Errorf("loading the demo site: %w", err)
	}
	_ = variant
	return d, nil
}

// runTask runs one demo task and judges it against the site's expected
// answer; a volatile answer that matches the previous round's value and
// not this round's is stale, and wrong.
func (d *demoEnv) runTask(ctx context.Context, k demosite.Task, round int, session string, noRecall bool, prev *demosite.Task) demoRun {
	res, err := agent.Run(ctx, agent.RunConfig{
		Engine: d.eng, Page: d.page, Planner: d.planner, Task: k.Text, StartURL: k.StartURL,
		Intent: k.Text, Secrets: k.Secrets, Session: session, Logger: d.log, NoRecall: noRecall,
	})
	row := demoRun{Task: k.ID, Round: round, Memory: "on", Expected: k.Expected}
	if noRecall {
		row.Memory = "off"
	}
	if res != nil {
		right := demosite.Check(k, res.Answer)
		row.Tier, row.Steps, row.PlannerCalls = res.Tier, res.Steps, res.PlannerCalls
		row.Success = res.Success && right
		row.Seconds = round3(res.Duration.Seconds())
		row.Answer, row.Clicks, row.Extracts, row.PromptChars = res.Answer, res.Clicks, res.Extracts, res.PromptChars
		row.Trace, row.Error = res.TracePath, res.Error
		if res.Success && !right && prev != nil && prev.Expected != k.Expected && demosite.Check(*prev, res.Answer) {
			row.Stale = true
			row.Error = "stale: answered last round's value"
		} else if res.Success && !right {
			row.Error = fmt.Sprintf("wrong answer: want %q", k.Expected)
		}
		d.judge(ctx, res, right, k.Expected)
	}
	if err != nil {
		row.Error = err.Error()
	}
	return row
}

// judge feeds the grader's verdict on a run that claimed success into the
// tree (engine.Feedback), as a person would with pem experience feedback:
// self-reported success is never the last word. A failed run needs none.
func (d *demoEnv) judge(ctx context.Context, res *agent.RunResult, right bool, expected string) {
	if res.TraceID == "" || !res.Success {
		return
	}
	v, note := engine.Right, ""
	if !right {
		v, note = engine.Wrong, fmt.Sprintf("the grader expected %q", expected)
	}
	if _, err := d.eng.Feedback(ctx, engine.FeedbackRequest{Trace: res.TraceID, Verdict: string(v), Note: note, Judge: "pem-grader"}); err != nil {
		d.log.Warn("recording the grader's verdict", "trace", res.TraceID, "err", err)
	}
}

func (d *demoEnv) consolidate(ctx context.Context) error {
	_, err := consolidate.Run(ctx, d.st, consolidate.Options{Logger: d.log, NoCommit: !d.commit})
	if err != nil {
		return fmt.Errorf("consolidating %s: %w", d.dir, err)
	}
	return nil
}

func demoTasks(base string, round int, variant, only string) ([]demosite.Task, error) {
	all := demosite.Tasks(base, round, variant)
	if only == "" {
		return all, nil
	}
	var out []demosite.Task
	for _, id := range strings.Split(only, ",") {
		id = strings.TrimSpace(id)
		found := false
		for _, k := range all {
			if k.ID == id {
				out, found = append(out, k), true
			}
		}
		if !found {
			var ids []string
			for _, k := range all {
				ids = append(ids, k.ID)
			}
			return nil, usagef("--only: no demo task %q (tasks: %s)", id, strings.Join(ids, ", "))
		}
	}
	return out, nil
}

func runDemo(c *cli.Context) error {
	ctx := c.Context
	rounds := c.Int("rounds")
	variant := c.String("variant")
	if rounds < 1 {
		return usagef("--rounds must be at least 1")
	}
	if variant != demosite.Stable && variant != demosite.Drift {
		return usagef("--variant %q: use stable or drift", variant)
	}
	if _, err := demoTasks("http://x", 1, variant, c.String("only")); err != nil {
		return err
	}
	dir := ""
	if c.IsSet(flagKnowledge) {
		dir = knowledgeDir(c)
	}
	d, err := newDemoEnv(c, variant, dir)
	if err != nil {
		return err
	}
	defer d.close()
	stamp := time.Now().UTC().Format("20060102T150405")
	var runs []demoRun
	prev := map[string]demosite.Task{}
	for round := 1; round <= rounds; round++ {
		d.site.SetRound(round)
		if round > 1 {
			d.site.SetVariant(variant)
		}
		tasks, _ := demoTasks(d.base, round, variant, c.String("only"))
		session := fmt.Sprintf("demo-%s-round-%d", stamp, round)
		for _, k := range tasks {
			var p *demosite.Task
			if t, ok := prev[k.ID]; ok {
				p = &t
			}
			row := d.runTask(ctx, k, round, session, false, p)
			runs = append(runs, row)
			prev[k.ID] = k
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if !c.Bool("json") {
				fmt.Fprintf(c.App.ErrWriter, "round %d %-22s %s %-5v %s\n", round, k.ID, row.Tier, row.Success, oneLineOf(row.Answer, 60))
			}
		}
		if round < rounds {
			if err := d.consolidate(ctx); err != nil {
				return err
			}
		}
	}
	if err := d.consolidate(ctx); err != nil {
		return err
	}
	var cold, warm []demoRun
	for _, r := range runs {
		if r.Round == 1 {
			cold = append(cold, r)
		} else {
			warm = append(warm, r)
		}
	}
	tc, tw := sum(cold), sum(warm)
	out := c.App.Writer
	ok := tc.Successes == tc.Runs && tw.Successes == tw.Runs
	if c.Bool("json") {
		type tot struct {
			Cold       totals  `json:"cold"`
			Warm       totals  `json:"warm"`
			StepsRatio float64 `json:"steps_ratio"`
			TimeRatio  float64 `json:"time_ratio"`
			Tree       string  `json:"tree"`
			AllOK      bool    `json:"all_succeeded"`
		}
		v := struct {
			Runs   []demoRun `json:"runs"`
			Totals tot       `json:"totals"`
		}{runs, tot{tc, tw, stepsRatio(cold, warm), timeRatio(cold, warm), d.dir, ok}}
		if err := writeJSON(out, v); err != nil {
			return err
		}
	} else {
		printDemoTable(out, runs, tc, tw, cold, warm)
		if d.temp {
			fmt.Fprintf(out, "knowledge tree: %s (temporary; inspect it with: pem --knowledge %s log)\n", d.dir, d.dir)
		} else {
			fmt.Fprintf(out, "knowledge tree: %s\n", d.dir)
		}
	}
	if !ok {
		return cli.Exit(fmt.Sprintf("demo: %d of %d runs did not succeed (see the table)", tc.Runs+tw.Runs-tc.Successes-tw.Successes, tc.Runs+tw.Runs), exitInternal)
	}
	return nil
}

// stepsRatio compares the warm runs' steps per run with the cold runs'.
func stepsRatio(cold, warm []demoRun) float64 {
	c, w := sum(cold), sum(warm)
	if c.Runs == 0 || w.Runs == 0 {
		return 0
	}
	return ratio(float64(w.Steps)/float64(w.Runs), float64(c.Steps)/float64(c.Runs))
}

func timeRatio(cold, warm []demoRun) float64 {
	c, w := sum(cold), sum(warm)
	if c.Runs == 0 || w.Runs == 0 {
		return 0
	}
	return ratio(w.Seconds/float64(w.Runs), c.Seconds/float64(c.Runs))
}

func oneLineOf(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

func printDemoTable(w io.Writer, runs []demoRun, tc, tw totals, cold, warm []demoRun) {
	fmt.Fprintf(w, "%-22s %5s %4s %5s %8s %7s %7s  %s\n", "task", "round", "tier", "steps", "planner", "success", "seconds", "answer")
	for _, r := range runs {
		ok := "yes"
		if !r.Success {
			ok = "NO"
		}
		fmt.Fprintf(w, "%-22s %5d %4s %5d %8d %7s %7.2f  %s\n", r.Task, r.Round, r.Tier, r.Steps, r.PlannerCalls, ok, r.Seconds, oneLineOf(r.Answer, 50))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "%-5s %5s %9s %6s %8s %8s\n", "", "runs", "succeeded", "steps", "planner", "seconds")
	fmt.Fprintf(w, "%-5s %5d %9d %6d %8d %8.2f\n", "cold", tc.Runs, tc.Successes, tc.Steps, tc.PlannerCalls, tc.Seconds)
	if tw.Runs > 0 {
		fmt.Fprintf(w, "%-5s %5d %9d %6d %8d %8.2f\n", "warm", tw.Runs, tw.Successes, tw.Steps, tw.PlannerCalls, tw.Seconds)
		fmt.Fprintf(w, "warm vs cold, per run: %.2f× the steps, %.2f× the time, %d planner calls instead of %d\n",
			stepsRatio(cold, warm), timeRatio(cold, warm), tw.PlannerCalls, tc.PlannerCalls*tw.Runs/max(1, tc.Runs))
	}
}

// ---- pem bench ---------------------------------------------------------

func newBenchCmd() *cli.Command {
	return &cli.Command{
		Name:  "bench",
		Usage: "measure memory-on against memory-off on the demo site",
		Description: "Runs the demo tasks for --rounds rounds twice: memory-on (one shared tree, consolidated between\n" +
			"rounds) and memory-off (the same runs with memory not consulted). Volatile values move every\n" +
			"round; an answer that repeats last round's value is stale and counts as wrong. Writes\n" +
			"summary.md and summary.csv to --out: accuracy, steps, planner calls, clicks, extract calls,\n" +
			"prompt characters (what a model would have been sent: task + memory + page observation) and\n" +
			"duration, per round and in total.",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "rounds", Value: 3, Usage: "rounds per arm"},
			&cli.StringFlag{Name: "out", Value: "bench", Usage: "`DIR` for summary.md and summary.csv"},
			&cli.StringFlag{Name: "only", Usage: "run only these task `IDS` (comma-separated)"},
			&cli.BoolFlag{Name: "headful", Usage: "show the browser window"},
		},
		Action: runBench,
	}
}

func runBench(c *cli.Context) error {
	ctx := c.Context
	rounds := c.Int("rounds")
	if rounds < 1 {
		return usagef("--rounds must be at least 1")
	}
	if _, err := demoTasks("http://x", 1, "", c.String("only")); err != nil {
		return err
	}
	outDir := c.String("out")
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", outDir, err)
	}
	d, err := newDemoEnv(c, demosite.Stable, "")
	if err != nil {
		return err
	}
	defer d.close()
	// memory-off deposits into its own tree, so that memory-on's tree only
	// holds its own evidence.
	offDir := filepath.Join(filepath.Dir(d.dir), "knowledge-off")
	offStore, _, err := openTree(ctx, offDir)
	if err != nil {
		return err
	}
	defer offStore.Close()
	onEng := d.eng
	offEng := &engine.Engine{Store: offStore, Writer: hostname(), Secrets: d.eng.Secrets}
	stamp := time.Now().UTC().Format("20060102T150405")
	var runs []demoRun
	prev := map[string]demosite.Task{}
	for round := 1; round <= rounds; round++ {
		d.site.SetRound(round)
		tasks, _ := demoTasks(d.base, round, "", c.String("only"))
		for _, arm := range []string{"on", "off"} {
			session := fmt.Sprintf("bench-%s-%s-round-%d", stamp, arm, round)
			if arm == "on" {
				d.eng = onEng
			} else {
				d.eng = offEng
			}
			for _, k := range tasks {
				var p *demosite.Task
				if t, ok := prev[k.ID]; ok {
					p = &t
				}
				row := d.runTask(ctx, k, round, session, arm == "off", p)
				runs = append(runs, row)
				if ctx.Err() != nil {
					return ctx.Err()
				}
				fmt.Fprintf(c.App.ErrWriter, "round %d memory %-3s %-22s %s %-5v\n", round, arm, k.ID, row.Tier, row.Success)
			}
		}
		for _, k := range tasks {
			prev[k.ID] = k
		}
		d.eng = onEng
		if err := d.consolidate(ctx); err != nil {
			return err
		}
	}
	md, csvData := benchSummary(runs, rounds)
	if err := os.WriteFile(filepath.Join(outDir, "summary.md"), md, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(outDir, "summary.csv"), csvData, 0o644); err != nil {
		return err
	}
	c.App.Writer.Write(md)
	fmt.Fprintf(c.App.Writer, "\nwrote %s and %s\n", filepath.Join(outDir, "summary.md"), filepath.Join(outDir, "summary.csv"))
	return nil
}

// benchSummary renders the per-round and total rows of each arm.
func benchSummary(runs []demoRun, rounds int) ([]byte, []byte) {
	type key struct {
		arm   string
		round int
	}
	groups := map[key][]demoRun{}
	for _, r := range runs {
		groups[key{r.Memory, r.Round}] = append(groups[key{r.Memory, r.Round}], r)
		groups[key{r.Memory, 0}] = append(groups[key{r.Memory, 0}], r)
	}
	var keys []key
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].arm != keys[j].arm {
			return keys[i].arm > keys[j].arm // "on" first
		}
		if (keys[i].round == 0) != (keys[j].round == 0) {
			return keys[j].round == 0
		}
		return keys[i].round < keys[j].round
	})
	var md bytes.Buffer
	var cb bytes.Buffer
	cw := csv.NewWriter(&cb)
	cw.Write([]string{"memory", "round", "runs", "accuracy", "stale", "steps", "planner_calls", "clicks", "extract_calls", "prompt_chars", "seconds"})
	fmt.Fprintf(&md, "# pem bench: memory on vs off\n\n%d rounds of the demo tasks; volatile values move every round; stale answers count as wrong.\n"+
		"Prompt characters are what a model planner would have been sent (task + memory + page observation per planner call).\n\n", rounds)
	md.WriteString("| memory | round | runs | accuracy | stale | steps | planner calls | clicks | extract calls | prompt chars | seconds |\n")
	md.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, k := range keys {
		t := sum(groups[k])
		round := fmt.Sprint(k.round)
		if k.round == 0 {
			round = "total"
		}
		fmt.Fprintf(&md, "| %s | %s | %d | %.0f%% | %d | %d | %d | %d | %d | %d | %.2f |\n", k.arm, round, t.Runs, 100*t.Accuracy, t.Stale,
			t.Steps, t.PlannerCalls, t.Clicks, t.Extracts, t.PromptChars, t.Seconds)
		cw.Write([]string{k.arm, round, fmt.Sprint(t.Runs), fmt.Sprintf("%.3f", t.Accuracy), fmt.Sprint(t.Stale), fmt.Sprint(t.Steps),
			fmt.Sprint(t.PlannerCalls), fmt.Sprint(t.Clicks), fmt.Sprint(t.Extracts), fmt.Sprint(t.PromptChars), fmt.Sprintf("%.3f", t.Seconds)})
	}
	cw.Flush()
	on, off := sum(groups[key{"on", 0}]), sum(groups[key{"off", 0}])
	fmt.Fprintf(&md, "\nTotal, memory on vs off: %.2f× the steps, %.2f× the planner calls, %.2f× the prompt characters, %.2f× the time; accuracy %.0f%% vs %.0f%%.\n",
		ratio(float64(on.Steps), float64(off.Steps)), ratio(float64(on.PlannerCalls), float64(off.PlannerCalls)),
		ratio(float64(on.PromptChars), float64(off.PromptChars)), ratio(on.Seconds, off.Seconds), 100*on.Accuracy, 100*off.Accuracy)
	md.WriteString("\n## Runs\n\n| memory | round | task | tier | steps | planner calls | success | seconds | note |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range runs {
		fmt.Fprintf(&md, "| %s | %d | %s | %s | %d | %d | %v | %.2f | %s |\n", r.Memory, r.Round, r.Task, r.Tier, r.Steps, r.PlannerCalls, r.Success, r.Seconds, strings.ReplaceAll(oneLineOf(r.Error, 80), "|", "/"))
	}
	return md.Bytes(), cb.Bytes()
}
