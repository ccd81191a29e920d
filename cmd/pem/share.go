package main

// share.go: the commands that review and share the knowledge through git —
// merge-driver, sync, diff, log and check: flags, calls and printing. The
// rules are engine's (merge.go, diff.go, check.go), the layout and the
// decoding of versions store's (review.go), the walks of the history
// store/gitrepo's (history.go, review.go).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store"
	"github.com/pemdev/pem/store/gitrepo"
)

func init() {
	register(newMergeDriverCmd, newSyncCmd, newDiffCmd, newLogCmd, newCheckCmd)
}

// EnvSecretEnv names environment variables (comma-separated) whose values
// pem check must not find anywhere in the tree.
const EnvSecretEnv = "PEM_SECRET_ENV"

// ---- merge-driver ------------------------------------------------------

func newMergeDriverCmd() *cli.Command {
	return &cli.Command{
		Name:      "merge-driver",
		Usage:     "git merge driver for experience/ and facts/ files (or --install it)",
		ArgsUsage: "ANCESTOR OURS THEIRS [PATH]   |   --install [DIR]",
		Description: "git calls it as 'pem merge-driver %O %A %B %P' for files marked merge=pem in .gitattributes.\n" +
			"It writes the merged file into OURS and exits 0; it exits 1 (leaving OURS as it was) only when a\n" +
			"side cannot be read. Experience: evidence is the union by trace id, counts recounted. Facts: field\n" +
			"by field; a verified side's frozen content wins. See docs/sharing.md.\n" +
			"--install registers the driver in the repository's git config — as the absolute path of this pem\n" +
			"binary, so it runs whether or not pem is on PATH — and writes .gitattributes in DIR (default\n" +
			"--knowledge): needed once per clone, since git never takes drivers from a clone.",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "install", Usage: "register the driver for the clone holding the tree and write .gitattributes"},
		},
		Action: runMergeDriver,
	}
}

func runMergeDriver(c *cli.Context) error {
	if c.Bool("install") {
		if c.NArg() > 1 {
			return usagef("merge-driver --install takes at most one directory, got %d arguments", c.NArg())
		}
		dir := knowledgeDir(c)
		if c.NArg() == 1 {
			dir = filepath.Clean(c.Args().First())
		}
		cmd, err := installMergeDriver(c.Context, dir)
		if err != nil {
			return fmt.Errorf("installing the merge driver for %s: %w", dir, err)
		}
		fmt.Fprintf(c.App.Writer, "registered merge driver 'pem' as %s (this binary: run --install again after moving it) and wrote %s\n", cmd, filepath.Join(dir, ".gitattributes"))
		return nil
	}
	if c.NArg() < 3 || c.NArg() > 4 {
		return usagef("merge-driver needs ANCESTOR OURS THEIRS [PATH] (git passes %%O %%A %%B %%P), got %d arguments", c.NArg())
	}
	args := c.Args().Slice()
	where := args[1]
	if len(args) == 4 {
		where = args[3]
	}
	out, err := store.MergeFiles(c.Context, args[0], args[1], args[2], strings.Join(args[3:], ""))
	if err != nil {
		// Non-zero tells git the file conflicts; OURS is left as it was.
		return cli.Exit(fmt.Sprintf("merge-driver: %s: %v: left our version in place; resolve it by hand", where, err), 1)
	}
	if err := os.WriteFile(args[1], out, 0o644); err != nil {
		return cli.Exit(fmt.Sprintf("merge-driver: writing %s: %v", args[1], err), 1)
	}
	return nil
}

// ---- sync ------------------------------------------------------------

func newSyncCmd() *cli.Command {
	return &cli.Command{
		Name:      "sync",
		Usage:     "commit pending traces, take the remote's commits and state, replay yours on top, push",
		ArgsUsage: "[REMOTE]",
		Description: "REMOTE defaults to origin; the branch is the current one. Local commits that only add traces are\n" +
			"re-applied onto the remote head (they cannot conflict), so sync never merges. Commits that change\n" +
			"more (a local consolidation, a hand edit) are refused with what to do: open a pull request, or\n" +
			"'git pull' (pem's merge driver merges experience/ and facts/) and 'git push'.\n\n" +
			"A push that another writer won (the branch moved, a ref lock, 'failed to update ref') is retried: fetch,\n" +
			"replay, push again, up to 16 tries, with random pauses whose cap starts at 50 ms (or the lost try's\n" +
			"duration) and doubles up to 8 s. If every try loses, sync exits 75 (contended): nothing is lost, your\n" +
			"commits stay on the branch; run it again. A remote that refuses the push (credentials, permissions, a\n" +
			"hook) is not retried and exits 13 with the remote's reason; an unknown REMOTE exits 13 and says how to add it.\n\n" +
			"Traces travel on refs/pem/state, not on the branch (docs/sharing.md): pending traces are committed\n" +
			"there, the remote's state is fetched, whichever side only added traces since the two last met is\n" +
			"replayed onto the other (also around a consolidator's snapshot), the result is written to disk (new\n" +
			"traces and experience, expired traces removed, pending ones kept) and pushed only if the remote still\n" +
			"has the state fetched (a lease; a lost race is retried as above). --state-only does that alone and\n" +
			"leaves the branch as it is (the consolidation workflow: its branch changes go to a pull request).",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "state-only", Usage: "sync refs/pem/state (traces and experience) only; leave the branch alone"},
		},
		Action: runSync,
	}
}

func runSync(c *cli.Context) error {
	if c.NArg() > 1 {
		return usagef("sync takes at most one remote, got %d arguments", c.NArg())
	}
	dir := knowledgeDir(c)
	sig := gitrepo.DefaultSignature()
	res, err := syncTree(c.Context, dir, gitrepo.SyncOptions{Remote: c.Args().First(), Name: sig.Name, Email: sig.Email,
		TracesDir: store.TracesDir, TraceExt: store.TraceExt, StateOnly: c.Bool("state-only")})
	switch {
	case errors.Is(err, gitrepo.ErrNotAddOnly):
		return cli.Exit(err.Error(), exitInternal)
	case errors.Is(err, gitrepo.ErrNoRemote):
		return err // exit 13: the message says how to add it
	}
	if err != nil {
		return fmt.Errorf("sync of %s: %w", dir, err)
	}
	w := c.App.Writer
	remote := c.Args().First()
	if remote == "" {
		remote = "origin"
	}
	// Traces travel on the state ref: the counts are main's and the state's
	// together, and the line ends with both tips.
	fmt.Fprintf(w, "synced %s with %s/%s: %d trace(s) committed, %d local commit(s) replayed", dir, remote, res.Branch, res.Committed, res.Replayed+res.StateReplayed)
	if res.FastForwarded || res.StateTaken {
		fmt.Fprint(w, ", remote commits taken")
	}
	if res.Pushed || res.StatePushed {
		fmt.Fprint(w, ", pushed")
		if res.Retries > 0 {
			fmt.Fprintf(w, " (after %d push(es) lost to another writer)", res.Retries)
		}
	} else {
		fmt.Fprint(w, ", nothing to push")
	}
	fmt.Fprintf(w, "; now at %s", shareShort(res.Head))
	if res.State != "" {
		fmt.Fprintf(w, ", state %s", shareShort(res.State))
		if res.StateFiles > 0 {
			fmt.Fprintf(w, " (%d file(s) of traces and experience updated on disk)", res.StateFiles)
		}
	}
	fmt.Fprintln(w)
	for _, n := range res.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	return nil
}

// ---- diff ------------------------------------------------------------

func newDiffCmd() *cli.Command {
	return &cli.Command{
		Name:      "diff",
		Usage:     "what moved in the knowledge between two commits, per domain and intent",
		ArgsUsage: "[REV1 [REV2]]",
		Description: "REV1 defaults to HEAD~1 (the empty tree when HEAD is the first commit) and REV2 to HEAD.\n" +
			"Shows status changes, selectors, route, hints, blockers, anti-patterns, answers and evidence counts,\n" +
			"and new, expired and moved traces per domain (moved: taken off the branch to refs/pem/state by a\n" +
			"consolidation, kept there). --format markdown writes a pull request body. A revision\n" +
			"that names no commit exits 4 (not found).",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "format", Value: "text", Usage: "`text`, markdown or json"},
		},
		Action: runDiff,
	}
}

func runDiff(c *cli.Context) error {
	if c.NArg() > 2 {
		return usagef("diff takes at most two revisions, got %d arguments", c.NArg())
	}
	format := c.String("format")
	if format != "text" && format != "markdown" && format != "json" {
		return usagef("diff: --format %q: use text, markdown or json", format)
	}
	dir := knowledgeDir(c)
	h, err := gitrepo.OpenHistory(dir)
	if err != nil {
		return err
	}
	defer h.Close()
	ctx := c.Context
	from, to, err := h.DiffRange(ctx, c.Args().Slice())
	if err != nil {
		return fmt.Errorf("diff: %w", err) // an unknown revision exits 4 (not found)
	}
	vs, err := h.DiffVersions(ctx, from, to, "", store.DiffLimit)
	if err != nil {
		return err
	}
	changes := make([]store.Change, len(vs))
	for i, v := range vs {
		changes[i] = store.Change{Path: v.Path, From: v.From, To: v.To, Old: v.Old, New: v.New}
	}
	label := shareShort(from)
	if from == "" {
		label = "(empty)"
	}
	rep := store.Diff(label, shareShort(to), changes, func(rel string) ([]byte, string, error) {
		return h.ReadAt(ctx, to, rel, store.MaxFactsBytes)
	})
	out := newLineScrubber(c.App.Writer) // a tree from before the scrubber prints no credential
	defer out.Flush()
	switch format {
	case "markdown":
		return rep.WriteMarkdown(out)
	case "json":
		return writeJSON(c.App.Writer, rep)
	}
	return rep.WriteText(out)
}

func shareShort(hash string) string {
	if len(hash) > 10 {
		return hash[:10]
	}
	return hash
}

// ---- log ---------------------------------------------------------------

func newLogCmd() *cli.Command {
	return &cli.Command{
		Name:      "log",
		Usage:     "the history of an entry (or a domain, or all facts): commit, date, subject, status and revision",
		ArgsUsage: "[DOMAIN[/INTENT]]",
		Description: "Walks the first-parent history from HEAD and lists the commits that changed the entry's facts or\n" +
			"experience file, newest first, with the entry's status and revision (or evidence counts) at each.\n" +
			"The facts' history is the branch's, whole. The experience lives on refs/pem/state since the tree\n" +
			"moved it there (docs/scale.md): its commits are listed too, marked [state], and that history is\n" +
			"bounded — it starts at the state's last snapshot (each expiry of traces makes one); older experience\n" +
			"versions are on the branch from before the move, or gone. INTENT is an intent key or the intent's\n" +
			"text. Without an argument: every commit that changed facts/.\n" +
			"An entry neither in the tree nor in its history exits 4 (not found).",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "limit", Aliases: []string{"n"}, Usage: "show at most `N` commits (0: all)"},
		},
		Action: runLog,
	}
}

func runLog(c *cli.Context) error {
	if c.NArg() > 1 {
		return usagef("log takes at most one DOMAIN[/INTENT], got %d arguments", c.NArg())
	}
	paths, err := store.EntryPaths(c.Args().First())
	if err != nil {
		return usagef("log: %v", err)
	}
	dir := knowledgeDir(c)
	h, err := gitrepo.OpenHistory(dir)
	if err != nil {
		return err
	}
	defer h.Close()
	entries, state, err := entryLog(c.Context, h, paths, c.Int("limit"))
	if err != nil {
		return err
	}
	w := c.App.Writer
	if len(entries) == 0 && c.Args().First() != "" && !anyExists(dir, paths) {
		return fmt.Errorf("log: %w: no entry %s in the tree or its history", engine.ErrNotFound, c.Args().First())
	}
	if len(entries) == 0 {
		fmt.Fprintf(w, "no commit changed %s\n", strings.Join(paths, " or "))
		return nil
	}
	const maxLines = 20
	for _, e := range entries {
		mark := ""
		if state[e.Hash] {
			mark = " [state]"
		}
		fmt.Fprintf(w, "%s %s %s%s\n", shareShort(e.Hash), e.When.Format(time.RFC3339), e.Subject, mark)
		for i, ch := range e.Changes {
			if i == maxLines {
				fmt.Fprintf(w, "    … and %d more file(s)\n", len(e.Changes)-maxLines)
				break
			}
			fmt.Fprintf(w, "    %s: %s\n", ch.Path, logState(c.Context, h, ch))
		}
	}
	return nil
}

// entryLog is pem log's list: the branch's commits that changed paths and
// the state ref's (gitrepo.StateLog: the experience since it moved there),
// newest first, at most limit (0: all); state names the state's commits.
func entryLog(ctx context.Context, h *gitrepo.History, paths []string, limit int) ([]gitrepo.LogEntry, map[string]bool, error) {
	entries, err := h.Log(ctx, paths, limit)
	if err != nil {
		return nil, nil, err
	}
	stateLog, err := h.StateLog(ctx, paths, limit)
	if err != nil {
		return nil, nil, err
	}
	state := map[string]bool{}
	if len(stateLog) > 0 {
		for _, e := range stateLog {
			state[e.Hash] = true
		}
		entries = append(entries, stateLog...)
		sort.SliceStable(entries, func(i, j int) bool { return entries[i].When.After(entries[j].When) })
		if limit > 0 && len(entries) > limit {
			entries = entries[:limit]
		}
	}
	return entries, state, nil
}

// logState describes a file at a commit (store.Describe): pem log's lines
// and the knowledge browser's history.
func logState(ctx context.Context, h *gitrepo.History, ch gitrepo.FileChange) string {
	if ch.Deleted() {
		return "deleted"
	}
	verb := "changed"
	if ch.Added() {
		verb = "added"
	}
	d := h.Described(ch.Path, ch.To, func() (string, bool) {
		var readErr error
		d := store.Describe(ch.Path, func(limit int) ([]byte, error) {
			data, err := h.Blob(ctx, ch.To, limit)
			readErr = err
			return data, err
		})
		return d, readErr == nil
	})
	if d != "" {
		return verb + ", " + d
	}
	return verb
}

// ---- check -------------------------------------------------------------

func newCheckCmd() *cli.Command {
	return &cli.Command{
		Name:      "check",
		Usage:     "check the tree: schema, path safety, secrets, injections, frozen verified content (and a pull request's changes)",
		ArgsUsage: " ",
		Description: "Prints one line per problem and exits 1 when there is any:\n" +
			"  schema/path  every file parses and sits where pem would write it; no symlinks, no odd names\n" +
			"  secret       no private keys, cloud or GitHub tokens, password= values, nor the values of the\n" +
			"               environment variables named in " + EnvSecretEnv + " (comma-separated)\n" +
			"  injection    lists traces and facts whose text reads as an instruction to the agent (quarantined:\n" +
			"               no evidence, never promoted); listed, they fail nothing\n" +
			"  frozen       no commit in the history altered a verified entry's content without superseding it\n" +
			"The history is checked incrementally: a clean check remembers HEAD in the git directory (never\n" +
			"committed), and the next one walks only the commits it has not seen. --since REV walks only the\n" +
			"commits after REV (git log REV..HEAD); --full walks the whole history again.\n" +
			"With --pr BASE (e.g. origin/main), also that the change from BASE to HEAD adds traces without\n" +
			"editing any and touches no derived file (experience/).",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "pr", Usage: "check the change from the merge base with `BASE` to HEAD as a pull request"},
			&cli.StringFlag{Name: "since", Usage: "check only the commits after `REV` for frozen content (REV..HEAD)"},
			&cli.BoolFlag{Name: "full", Usage: "check the whole history, also the commits an earlier clean check remembered"},
		},
		Action: runCheck,
	}
}

func runCheck(c *cli.Context) error {
	if c.NArg() > 0 {
		return usagef("check takes no arguments (got %q): use --pr BASE to check a pull request", c.Args().First())
	}
	if c.IsSet("since") && c.Bool("full") {
		return usagef("check: --since and --full exclude each other: --since bounds the history walk, --full walks all of it")
	}
	ctx := c.Context
	dir := knowledgeDir(c)
	s, err := openStore(c)
	if err != nil {
		return err
	}
	defer s.Close()
	var problems []engine.CheckProblem
	for _, err := range s.Check(ctx) {
		kind := engine.CheckSchema
		if errors.Is(err, engine.ErrUnsafePath) {
			kind = engine.CheckPath
		}
		problems = append(problems, engine.CheckProblem{Kind: kind, Msg: err.Error()})
	}
	if err := ctx.Err(); err != nil {
		return err
	}

	// Secrets, in every file of the tree (hidden ones too, .git excepted).
	secrets := map[string]string{}
	for _, name := range strings.Split(os.Getenv(EnvSecretEnv), ",") {
		if name = strings.TrimSpace(name); name != "" {
			secrets[name] = os.Getenv(name)
		}
	}
	files := 0
	var quarantined []engine.CheckProblem // listed; they fail nothing (consolidation keeps them out)
	err = s.Files(ctx, store.MaxExperienceBytes, func(rel string, data []byte) error {
		files++
		problems = append(problems, engine.CheckSecrets(rel, data, secrets)...)
		quarantined = append(quarantined, store.CheckInjected(rel, data)...)
		return nil
	})
	if err != nil {
		return fmt.Errorf("check: scanning %s: %w", dir, err)
	}

	hist, err := checkHistory(c, dir)
	if err != nil {
		return err
	}
	problems = append(problems, hist.problems...)

	for _, p := range quarantined {
		fmt.Fprintln(c.App.Writer, p.String())
	}
	for _, p := range problems {
		fmt.Fprintln(c.App.Writer, p.String())
	}
	if len(problems) > 0 {
		return cli.Exit(fmt.Sprintf("check: %d problem(s) in %s: fix each line above and run pem check again", len(problems), dir), exitInternal)
	}
	fmt.Fprintf(c.App.Writer, "ok: %d file(s) and %d commit(s) checked in %s%s", files, hist.commits, dir, hist.note)
	if len(quarantined) > 0 {
		fmt.Fprintf(c.App.Writer, "; %d quarantined (listed above)", len(quarantined))
	}
	fmt.Fprintln(c.App.Writer)
	return nil
}

// checkState names the commit a clean history check reached (Repo.Remember),
// and the version of its key changes when the frozen rule does, so that no
// remembered result outlives the rule that made it.
const (
	checkState        = "pem-check-history"
	checkStateVersion = "pem-check 1"
)

type checkResult struct {
	commits  int
	problems []engine.CheckProblem
	note     string // what the ok line adds about the walk's bounds
}

// checkHistory audits the history (verified content never altered without
// superseding it) from HEAD back to --since, or to the commit an earlier
// clean check remembered, and the pull request's change with --pr.
func checkHistory(c *cli.Context, dir string) (checkResult, error) {
	ctx := c.Context
	var res checkResult
	r, err := gitrepo.Open(ctx, dir)
	if errors.Is(err, gitrepo.ErrNoRepo) {
		fmt.Fprintf(c.App.ErrWriter, "pem: check: %s is in no git repository: history not checked\n", dir)
		return res, nil
	}
	if err != nil {
		return res, err
	}
	defer r.Close()
	h, err := r.History()
	if err != nil {
		return res, err
	}
	if w := mergeDriverWarning(h, dir); w != "" {
		fmt.Fprintf(c.App.ErrWriter, "pem: check: warning: %s\n", w)
	}
	if head, herr := h.Resolve(ctx, "HEAD"); herr == nil {
		opt := gitrepo.WalkOptions{Rev: head, Under: store.FactsDir}
		key := checkStateVersion + " " + h.Prefix()
		since := c.String("since")
		if since != "" {
			if _, err := h.Resolve(ctx, since); err != nil {
				return res, usagef("check --since: %v", err)
			}
			opt.Exclude, res.note = []string{since}, " (those after "+since+")"
		} else if last, ok := r.Remembered(ctx, checkState, key); ok && !c.Bool("full") {
			opt.Exclude, res.note = []string{last}, " (new since "+shareShort(last)+", which an earlier check passed; --full rechecks all)"
		}
		res.commits, err = h.WalkIntroduced(ctx, opt, func(ci gitrepo.CommitInfo, ch gitrepo.FileChange) error {
			if ch.Added() {
				return nil
			}
			old, err := h.Blob(ctx, ch.From, store.MaxFactsBytes)
			if err != nil {
				return err
			}
			p, err := store.CheckFrozen(ch.Path, shareShort(ci.Hash), old, func() ([]byte, error) {
				if ch.Deleted() {
					return nil, nil
				}
				return h.Blob(ctx, ch.To, store.MaxFactsBytes)
			})
			if p != nil {
				res.problems = append(res.problems, *p)
			}
			return err
		})
		if err != nil {
			return res, err
		}
		if len(res.problems) == 0 && since == "" {
			// A cache: a failed write only costs the next check a longer walk.
			_ = r.Remember(checkState, key, head)
		}
	}
	if base := c.String("pr"); base != "" {
		if _, err := h.Resolve(ctx, base); err != nil {
			return res, usagef("check --pr: %v (in a CI checkout, fetch the base branch first: git fetch origin BASE)", err)
		}
		changes, err := h.BranchChanges(ctx, base, "HEAD")
		if err != nil {
			return res, err
		}
		var prs []engine.CheckProblem
		for _, ch := range changes {
			pl := store.PlaceOf(ch.Path)
			top := pl.Top
			pc := engine.PRChange{Path: ch.Path, Derived: top == store.ExperienceDir, Site: pl.Kind == store.KindSite, Trace: top == store.TracesDir,
				Verdict: top == store.VerdictsDir, Added: ch.Added(), Deleted: ch.Deleted()}
			if p := engine.CheckPRChange(pc); p != nil {
				prs = append(prs, *p)
			}
		}
		sort.SliceStable(prs, func(i, j int) bool { return prs[i].Path < prs[j].Path })
		res.problems = append(res.problems, prs...)
	}
	return res, nil
}

// anyExists reports whether one of the tree-relative paths exists in dir.
func anyExists(dir string, paths []string) bool {
	for _, p := range paths {
		if _, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(p))); err == nil {
			return true
		}
	}
	return false
}
