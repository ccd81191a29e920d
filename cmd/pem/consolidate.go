package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"time"

	"github.com/urfave/cli/v2"

	"golang.org/x/sync/errgroup"

	"github.com/pemdev/pem/consolidate"
	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/engine/web"
	"github.com/pemdev/pem/store"
	"github.com/pemdev/pem/store/gitrepo"
)

func init() { register(newConsolidateCmd, newServeCmd) }

// deepLearnJob is pem serve's deep-learn job; the deep-learn command sets it.
// It must take the tree lock itself if it writes to the tree.
var deepLearnJob func(ctx context.Context, st *store.Store) error

func newConsolidateCmd() *cli.Command {
	return &cli.Command{
		Name:  "consolidate",
		Usage: "fold new traces into experience and facts, move statuses, expire old traces, commit",
		Description: "Takes the tree lock, folds every trace not folded yet into experience (a trace counts once, ever),\n" +
			"recomputes confidence, moves facts statuses (hypothesis → candidate → verified, verified → contested),\n" +
			"creates and updates facts from the evidence (verified content is frozen), deletes folded traces older\n" +
			"than ttl_days, and commits exactly what it wrote: facts on the branch (each promotion to verified in\n" +
			"its own commit), traces and experience on refs/pem/state, off the main history — a snapshot with no\n" +
			"parent when traces expire or after 64 state commits (docs/scale.md). Traces or experience the branch\n" +
			"still tracks (a tree made before, a merged trace-only pull request) are moved there in one commit.\n" +
			"Nothing new: no write, no commit. --dry-run prints every planned change with its reason.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "now", Usage: "consolidate as of `TIME` (RFC 3339, YYYY-MM-DDTHH:MM or YYYY-MM-DD) instead of the clock"},
			&cli.BoolFlag{Name: "dry-run", Usage: "print the plan and write nothing"},
			&cli.BoolFlag{Name: "no-commit", Usage: "write the tree but make no git commit"},
		},
		Action: runConsolidate,
	}
}

// parseNow reads every command's --now: an RFC 3339 time, a UTC minute
// (2025-03-10T12:00) or a UTC day (2025-03-10, midnight).
func parseNow(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, usagef("--now %q: give an RFC 3339 time (2025-03-10T12:00:00Z), a UTC minute (2025-03-10T12:00) or a UTC day (2025-03-10)", s)
}

func consolidateOptions(c *cli.Context) (consolidate.Options, error) {
	opts := consolidate.Options{
		DryRun:   c.Bool("dry-run"),
		NoCommit: c.Bool("no-commit"),
		Logger:   logger(c),
	}
	if s := c.String("now"); s != "" {
		now, err := parseNow(s)
		if err != nil {
			return opts, err
		}
		opts.Now = func() time.Time { return now }
	}
	return opts, nil
}

func runConsolidate(c *cli.Context) error {
	if c.NArg() > 0 {
		return usagef("consolidate takes no arguments, got %q", c.Args().First())
	}
	opts, err := consolidateOptions(c)
	if err != nil {
		return err
	}
	st, err := openStore(c)
	if err != nil {
		return err
	}
	defer st.Close()
	limitMemory()
	stderr := c.App.ErrWriter
	opts.Progress = progressPrinter(stderr)
	res, err := consolidate.Run(c.Context, st, opts)
	if err != nil {
		return fmt.Errorf("consolidating %s: %w", st.Root(), err)
	}
	out := c.App.Writer
	if opts.DryRun {
		fmt.Fprint(out, res.Plan.String())
		return nil
	}
	for _, w := range res.Plan.Warnings {
		fmt.Fprintf(stderr, "warning: %s\n", w)
	}
	summary := res.Plan.Summary()
	switch {
	case res.Recovered > 0:
		summary += fmt.Sprintf("; completed %d commits of an interrupted run", res.Recovered)
	}
	switch {
	case opts.NoCommit && !res.Plan.Empty():
		summary += " (not committed)"
	case len(res.Commits) > 0:
		summary += fmt.Sprintf("; %d %s, HEAD %s", len(res.Commits), plural(len(res.Commits), "commit", "commits"), shortHash(res.Commits[len(res.Commits)-1]))
	}
	if res.State != "" {
		// Traces and experience: on refs/pem/state, off the main history.
		summary += "; state " + shortHash(res.State)
		if res.Squashed {
			summary += " (a snapshot: the state's older commits are dropped)"
		}
	}
	if res.Moved > 0 {
		summary += fmt.Sprintf("; moved %d files of traces/ and experience/ from the branch to %s (they stay on disk)", res.Moved, gitrepo.StateRef)
	}
	fmt.Fprintln(out, summary)
	return nil
}

// consolidateMemoryLimit is the Go heap's soft limit for pem consolidate
// (runtime/debug.SetMemoryLimit) unless GOMEMLIMIT sets one. Consolidating
// 1,000 new traces into 100,000 holds ~110 MiB live at its peak (the
// summary cache and the trace listing, docs/performance.md,
// "Consolidation"), and the collector's default pacing lets the heap grow
// to twice that (peak RSS 250 MiB); near this limit it collects sooner
// instead, for a few percent more CPU. A tree whose live heap passes the
// limit is not refused: the runtime caps the collector at half the CPU, so
// it runs slower, and GOMEMLIMIT (or GOMEMLIMIT=off) lifts it.
const consolidateMemoryLimit = 160 << 20

func limitMemory() {
	limitMemoryTo(consolidateMemoryLimit)
}

// limitMemoryTo sets Go's soft heap limit to limit unless GOMEMLIMIT is in
// the environment (a value, or "off"), and returns what undoes it: pem
// serve's jobs share one process with the knowledge browser, so the limit
// holds only while a job runs.
func limitMemoryTo(limit int64) (restore func()) {
	if _, set := os.LookupEnv("GOMEMLIMIT"); set {
		return func() {}
	}
	old := debug.SetMemoryLimit(limit)
	return func() { debug.SetMemoryLimit(old) }
}

// progressPrinter reports long stages on stderr, at most every 250 items.
func progressPrinter(w io.Writer) consolidate.Progress {
	return func(stage string, done, total int) {
		if total < 500 {
			return // short runs stay quiet
		}
		switch stage {
		case "read":
			fmt.Fprintf(w, "folded %d/%d traces\n", done, total)
		case "write":
			fmt.Fprintf(w, "wrote %d/%d files\n", done, total)
		default:
			fmt.Fprintf(w, "%s %d/%d\n", stage, done, total)
		}
	}
}

func newServeCmd() *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "run consolidation (and deep-learn) on cron schedules, and/or the knowledge browser (--http), until SIGINT or SIGTERM",
		Description: "Schedules use cron syntax: five fields (\"0 3 * * *\") or descriptors (\"@hourly\", \"@every 10m\").\n" +
			"Defaults come from pem.yaml (schedules.consolidate, schedules.deep_learn).\n" +
			"One job runs at a time, under the tree lock, so a manual pem consolidate never overlaps one.\n" +
			"--http ADDR serves the knowledge browser (read-only pages over the tree) and the HTTP API (docs/cli.md);\n" +
			"with --http, pem.yaml's schedules do not run, only those given as flags. A non-loopback ADDR needs\n" +
			"--token (or PEM_SERVE_TOKEN); --write accepts saves and verdicts through the API.\n" +
			"Logs are structured (slog) on stderr. A signal stops the scheduler after the running job and the\n" +
			"web server after the requests in flight.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "consolidate", Usage: "consolidation schedule `SPEC` (default: pem.yaml schedules.consolidate)"},
			&cli.StringFlag{Name: "deep-learn", Usage: "deep-learn schedule `SPEC` (default: pem.yaml schedules.deep_learn)"},
			&cli.BoolFlag{Name: "json", Usage: "log JSON lines instead of text"},
		}, webFlags()...),
		Action: runServe,
	}
}

func runServe(c *cli.Context) error {
	if c.NArg() > 0 {
		return usagef("serve takes no arguments, got %q", c.Args().First())
	}
	st, err := openStore(c)
	if err != nil {
		return err
	}
	defer st.Close()
	cfg, err := st.Config(c.Context)
	if err != nil {
		return err
	}
	opts := &slog.HandlerOptions{Level: slog.LevelInfo}
	if c.Bool(flagVerbose) {
		opts.Level = slog.LevelDebug
	}
	var h slog.Handler = slog.NewTextHandler(c.App.ErrWriter, opts)
	if c.Bool("json") {
		h = slog.NewJSONHandler(c.App.ErrWriter, opts)
	}
	log := slog.New(h).With("tree", st.Root())

	// With --http, only the schedules given as flags run: serving the
	// knowledge browser does not start pem.yaml's jobs unasked.
	addr := c.String("http")
	spec := c.String("consolidate")
	if spec == "" && addr == "" {
		spec = cfg.Schedules.Consolidate
	}
	var jobs []consolidate.Job
	if spec != "" {
		if err := consolidate.ParseSpec(spec); err != nil {
			return usagef("--consolidate: %v", err)
		}
		job := consolidate.ConsolidateJob(spec, st, consolidate.Options{Logger: log})
		run := job.Run
		job.Run = func(ctx context.Context) error {
			defer limitMemoryTo(consolidateMemoryLimit)()
			return run(ctx)
		}
		jobs = append(jobs, job)
	}
	dl := c.String("deep-learn")
	if dl == "" && deepLearnJob != nil && addr == "" {
		dl = cfg.Schedules.DeepLearn
	}
	if dl != "" {
		if err := consolidate.ParseSpec(dl); err != nil {
			return usagef("--deep-learn: %v", err)
		}
		if deepLearnJob == nil {
			return errors.New("--deep-learn: this pem has no deep-learn job built in: leave --deep-learn out or use a build with deep-learn")
		}
		jobs = append(jobs, consolidate.Job{Name: "deep-learn", Spec: dl, Run: func(ctx context.Context) error {
			return deepLearnJob(ctx, st)
		}})
	}
	if addr == "" && c.Bool("write") {
		return usagef("serve: --write needs --http ADDR: it enables the HTTP API's writes")
	}
	if len(jobs) == 0 && addr == "" {
		return usagef("serve: nothing to schedule: give --consolidate SPEC (pem.yaml has no schedules.consolidate), or --http ADDR to serve the knowledge browser")
	}
	g, ctx := errgroup.WithContext(c.Context)
	if addr != "" {
		token := c.String("token")
		if err := web.CheckAddr(addr, token); err != nil {
			return &usageError{err: err}
		}
		eng := &engine.Engine{Store: st, Writer: hostname()}
		srv := webServer(c, eng, st.Root(), c.Bool("write"), token)
		g.Go(func() error {
			return web.Serve(ctx, addr, srv, log, func(at string) {
				log.Info("knowledge browser", "url", "http://"+at+"/", "write", c.Bool("write"))
				fmt.Fprintf(c.App.Writer, "knowledge browser: http://%s/\n", at)
			})
		})
	}
	if len(jobs) > 0 {
		g.Go(func() error { return consolidate.Serve(ctx, jobs, log) })
	}
	return g.Wait()
}

func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
