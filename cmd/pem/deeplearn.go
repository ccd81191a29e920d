package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/pemdev/pem/deeplearn"
	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/engine/mcp"
	"github.com/pemdev/pem/store"
)

func init() {
	register(newDeepLearnCmd)
	registerSub("experience", newExperienceDeepLearnCmd)
	// pem serve --deep-learn: propose on the day's review branch.
	deepLearnJob = func(ctx context.Context, st *store.Store) error {
		_, err := deepLearn(ctx, st, deeplearn.Filter{}, "", false, false, time.Now().UTC(), os.Stderr)
		return err
	}
	mcpDeepLearn = func(_ *cli.Context, e *engine.Engine) mcp.DeepLearnFunc {
		return func(ctx context.Context, url, intent string, force bool) (any, error) {
			return deeplearn.Entry(ctx, e, url, intent, force)
		}
	}
}

func newDeepLearnCmd() *cli.Command {
	return &cli.Command{
		Name:  "deep-learn",
		Usage: "mine traces into facts proposals, committed on a review branch with a Markdown report",
		Description: "Mines every (domain, intent) with traces: the route most successful runs took (values that vary\n" +
			"become parameters), selectors ranked by stability, anti-patterns, blockers, hints from recoveries,\n" +
			"the extraction query and answers with freshness. Proposals are at most candidate; a verified entry\n" +
			"is never edited — a change is a new revision that supersedes it. The proposals are committed on the\n" +
			"branch pem/deep-learn/<date> (or --branch) without touching your branch, index or files; the report\n" +
			"(the pull request body) is printed on stdout. --apply writes and commits them on the current branch.\n" +
			"Of the dated branches pem/deep-learn/<date> the newest policy.review_branches_kept (7) are kept; an\n" +
			"older one that holds only deep-learn's own commit is deleted (its proposals are on every newer one).\n\n" +
			"Domains are mined in parallel, one domain's traces in memory per worker. The run remembers, in the git\n" +
			"directory (pem-deeplearn/, never committed), the listing of each domain's trace directories, which\n" +
			"entry each trace belongs to, each entry's traces as decoded and what each entry mined to: the next run\n" +
			"lists only directories that changed, reads only new or changed files and re-mines only the entries\n" +
			"they touch, with the same proposals and report a full run gives. --full reads and mines everything again.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "domain", Usage: "mine only this `DOMAIN`"},
			&cli.StringFlag{Name: "intent", Usage: "mine only this intent (`TEXT` or key)"},
			&cli.StringFlag{Name: "branch", Usage: "the review branch `NAME` (default pem/deep-learn/<date>)"},
			&cli.BoolFlag{Name: "apply", Usage: "write the proposals onto the current branch and commit them"},
			&cli.BoolFlag{Name: "full", Usage: "read every file and mine every entry again, ignoring what the last run remembered"},
			&cli.StringFlag{Name: "now", Usage: "mine as of `TIME` (RFC 3339, YYYY-MM-DDTHH:MM or YYYY-MM-DD) instead of the clock"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("deep-learn takes no arguments (got %q): use --domain and --intent", c.Args().First())
			}
			now := time.Now().UTC()
			if s := c.String("now"); s != "" {
				t, err := parseNow(s)
				if err != nil {
					return err
				}
				now = t
			}
			st, err := openStore(c)
			if err != nil {
				return err
			}
			defer st.Close()
			out, err := deepLearn(c.Context, st, deeplearn.Filter{Domain: c.String("domain"), Intent: c.String("intent")},
				c.String("branch"), c.Bool("apply"), c.Bool("full"), now, c.App.ErrWriter)
			if err != nil {
				return err
			}
			_, err = io.WriteString(c.App.Writer, out)
			return err
		},
	}
}

// deepLearn mines and proposes; it returns the Markdown report. Progress and
// the summary go to log.
func deepLearn(ctx context.Context, st *store.Store, f deeplearn.Filter, branch string, apply, full bool, now time.Time, log io.Writer) (string, error) {
	// A full run over a large tree makes garbage faster than the collector's
	// default pace returns it: a soft limit keeps the process near its live
	// heap (the goal is ≤ 512 MB at 100,000 traces). GOMEMLIMIT, when set, wins.
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set { // a value, or "off"
		defer limitMemoryTo(deepLearnMemoryLimit)()
		// Under that limit the collector need not run at the default pace:
		// an incremental run's live heap is small, and collecting it every
		// time it doubled was a sixth of the run's CPU. GOGC, when set, wins.
		if os.Getenv("GOGC") == "" {
			defer debug.SetGCPercent(debug.SetGCPercent(deepLearnGCPercent))
		}
	}
	if err := materializeTree(ctx, st); err != nil {
		return "", err
	}
	opt := deeplearn.Options{StateDir: deepLearnState(ctx, st.Root()), Full: full}
	if !apply {
		// The review commit's bytes, made on every core while mining (with
		// thousands of proposals they are most of the commit's cost) and
		// remembered: a proposal unchanged since the last run is not encoded again.
		opt.Encode = func(f *engine.Facts) ([]byte, error) { return store.Marshal(f) }
	}
	ps, warnings, stats, err := deeplearn.Learn(ctx, st, f, now, opt)
	if err != nil {
		return "", err
	}
	fmt.Fprintf(log, "pem: deep-learn: %d %s, %d %s: %d mined, %d unchanged since the last run; %d %s read, %d taken as the last run decoded them; %d of the domains' trace directories listed\n",
		stats.Domains, plural(stats.Domains, "domain", "domains"), stats.Entries, plural(stats.Entries, "entry", "entries"),
		stats.Mined, stats.Reused, stats.TracesRead, plural(stats.TracesRead, "trace file", "trace files"), stats.TracesCached, stats.Listed)
	for _, w := range warnings {
		fmt.Fprintf(log, "pem: skipped: %s\n", w)
	}
	report := deeplearn.Report(ps, now)
	var changed []deeplearn.Proposal
	for _, p := range ps {
		if p.Changed {
			changed = append(changed, p)
		}
	}
	if len(changed) == 0 {
		fmt.Fprintf(log, "pem: deep-learn mined %d entries: nothing new to propose\n", len(ps))
		return report, nil
	}
	title := fmt.Sprintf(reviewTitle+" for %d entries", len(changed))
	if apply {
		release, err := st.Lock(ctx)
		if err != nil {
			return "", err
		}
		defer release()
		var paths []string
		for _, p := range changed {
			rel, err := st.PutFacts(ctx, p.Facts)
			if err != nil {
				return "", err
			}
			paths = append(paths, rel)
		}
		h, err := commitTree(ctx, st.Root(), paths, title+"\n\n"+report)
		if err != nil {
			return "", fmt.Errorf("the proposals were written but not committed: %w (commit them with git)", err)
		}
		fmt.Fprintf(log, "pem: deep-learn wrote %d proposals onto the current branch (commit %s)\n", len(changed), shortHash(h))
		maintainTree(ctx, st, log, false) // under the lock taken above
		return report, nil
	}
	files := make(map[string][]byte, len(changed))
	for _, p := range changed {
		files[store.FactsPath(p.Domain, p.IntentKey)] = p.Data
	}
	if branch == "" {
		branch = reviewPrefix + now.Format("2006-01-02")
	}
	h, err := commitToBranch(ctx, st, branch, files, title+"\n\n"+report, log)
	if err != nil {
		return "", err
	}
	if h == "" {
		fmt.Fprintf(log, "pem: deep-learn: nothing to propose beyond what HEAD or branch %s holds already; branch not moved\n", branch)
		return report, nil
	}
	fmt.Fprintf(log, "pem: deep-learn proposed %d entries on branch %s (commit %s); review with: git diff HEAD %s\n", len(changed), branch, shortHash(h), branch)
	maintainTree(ctx, st, log, true)
	return report, nil
}

// deepLearnMemoryLimit is deep-learn's soft memory limit (runtime/debug.SetMemoryLimit).
const deepLearnMemoryLimit = 400 << 20

// deepLearnGCPercent is deep-learn's GOGC (runtime/debug.SetGCPercent)
// below the memory limit.
const deepLearnGCPercent = 400

func newExperienceDeepLearnCmd() *cli.Command {
	return &cli.Command{
		Name:      "deep-learn",
		Usage:     "mine the traces of one entry and write the proposal into the tree; print JSON",
		ArgsUsage: "URL",
		Description: "Mines the entry that experience query would pick for URL and --intent and writes the proposal\n" +
			"(at most candidate) into facts/. A verified entry is frozen: nothing is written unless --force,\n" +
			"which writes a candidate revision that supersedes it. Prints completed, domain, intent,\n" +
			"status_before, status_after, promoted, new_confidence, selectors_found, message. An entry nothing is\n" +
			"known about yet (no run saved for it) exits 4, not found.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "intent", Usage: "what the task is for, in words (`TEXT`)"},
			&cli.BoolFlag{Name: "force", Usage: "write a superseding revision even over a verified entry"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usagef("experience deep-learn needs exactly one URL, got %d arguments", c.NArg())
			}
			e, s, err := openEngine(c)
			if err != nil {
				return err
			}
			defer s.Close()
			res, err := deeplearn.Entry(c.Context, e, c.Args().First(), c.String("intent"), c.Bool("force"))
			if err != nil {
				return err
			}
			return writeJSON(c.App.Writer, res)
		},
	}
}
