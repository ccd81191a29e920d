package main

// share.go: reviewing and sharing the knowledge through git — merge-driver,
// sync, diff, log and check. The rules live in engine (merge.go, diff.go,
// check.go) and the git plumbing in store (gitlog.go); this file reads flags,
// files and blobs and wires them together.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
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
	out, err := shareMerge(c.Context, args[0], args[1], args[2], strings.Join(args[3:], ""))
	if err != nil {
		// Non-zero tells git the file conflicts; OURS is left as it was.
		return cli.Exit(fmt.Sprintf("merge-driver: %s: %v: left our version in place; resolve it by hand", where, err), 1)
	}
	if err := os.WriteFile(args[1], out, 0o644); err != nil {
		return cli.Exit(fmt.Sprintf("merge-driver: writing %s: %v", args[1], err), 1)
	}
	return nil
}

// shareMerge merges the three versions and returns the merged file's bytes.
// where is the file's path in the tree (git's %P), "" when unknown.
func shareMerge(ctx context.Context, baseFile, oursFile, theirsFile, where string) ([]byte, error) {
	read := func(name string) ([]byte, error) {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		data, err := io.ReadAll(io.LimitReader(f, store.MaxExperienceBytes+1))
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", name, err)
		}
		return data, nil
	}
	var data [3][]byte
	for i, name := range []string{baseFile, oursFile, theirsFile} {
		b, err := read(name)
		if err != nil {
			return nil, err
		}
		data[i] = b
	}
	kind := shareKindOf(where, data[1])
	decode := func(b []byte, v any, side string) (bool, error) {
		if len(bytes.TrimSpace(b)) == 0 {
			return false, nil // no common ancestor: git passes an empty file
		}
		if err := store.Unmarshal(b, v, kind); err != nil {
			return false, fmt.Errorf("%s version: %w", side, err)
		}
		return true, nil
	}
	lookup, closeTree := shareTraceLookup(ctx, where)
	defer closeTree()
	opt := &engine.MergeOptions{Trace: lookup}
	switch kind {
	case store.KindExperience:
		return shareMergeKind(data, decode, opt, engine.MergeExperience)
	case store.KindFacts:
		return shareMergeKind(data, decode, opt, engine.MergeFacts)
	}
	return nil, fmt.Errorf("not an experience/ or facts/ file: pem merges only those")
}

// shareKindOf tells an experience file from a facts file by its path, or by
// its content when git gave no path.
func shareKindOf(where string, data []byte) string {
	p := "/" + filepath.ToSlash(where)
	switch {
	case strings.Contains(p, "/experience/"):
		return store.KindExperience
	case strings.Contains(p, "/facts/"):
		return store.KindFacts
	}
	var x engine.Experience
	if store.Unmarshal(data, &x, store.KindExperience) == nil {
		return store.KindExperience
	}
	var f engine.Facts
	if store.Unmarshal(data, &f, store.KindFacts) == nil {
		return store.KindFacts
	}
	return ""
}

// shareTraceLookup reads the trace behind a piece of evidence from the
// working tree, which git's merge runs in, through the store (its caps,
// strict decoding and confinement): the knowledge tree is the part of where
// before experience/. The lookup is nil when where names no experience file
// or no tree is there; done releases the store.
func shareTraceLookup(ctx context.Context, where string) (lookup func(engine.Evidence) (*engine.Trace, bool), done func()) {
	p := filepath.ToSlash(where)
	i := strings.LastIndex("/"+p, "/experience/")
	if where == "" || i < 0 {
		return nil, func() {}
	}
	root := strings.TrimSuffix(p[:i], "/")
	if root == "" {
		root = "."
	}
	s, err := store.Open(filepath.FromSlash(root), nil)
	if err != nil {
		return nil, func() {}
	}
	dom, _, _ := strings.Cut(strings.TrimPrefix(p[i:], "experience/"), "/")
	return func(e engine.Evidence) (*engine.Trace, bool) {
		t, err := s.Trace(ctx, engine.TraceRef{Domain: dom, Day: e.At.UTC().Format("2006-01-02"), ID: e.Trace})
		if err != nil || t.ID != e.Trace {
			return nil, false
		}
		return t, true
	}, func() { s.Close() }
}

// ---- sync ------------------------------------------------------------

func newSyncCmd() *cli.Command {
	return &cli.Command{
		Name:      "sync",
		Usage:     "commit pending traces, take the remote's commits, replay yours on top, push",
		ArgsUsage: "[REMOTE]",
		Description: "REMOTE defaults to origin; the branch is the current one. Local commits that only add traces are\n" +
			"re-applied onto the remote head (they cannot conflict), so sync never merges. Commits that change\n" +
			"more (a local consolidation, a hand edit) are refused with what to do: open a pull request, or\n" +
			"'git pull' (pem's merge driver merges experience/ and facts/) and 'git push'.",
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
		TracesDir: store.TracesDir, TraceExt: store.TraceExt})
	if errors.Is(err, gitrepo.ErrNotAddOnly) {
		return cli.Exit(err.Error(), exitInternal)
	}
	if err != nil {
		return fmt.Errorf("sync of %s: %w", dir, err)
	}
	w := c.App.Writer
	remote := c.Args().First()
	if remote == "" {
		remote = "origin"
	}
	fmt.Fprintf(w, "synced %s with %s/%s: %d trace(s) committed, %d local commit(s) replayed", dir, remote, res.Branch, res.Committed, res.Replayed)
	if res.FastForwarded {
		fmt.Fprint(w, ", remote commits taken")
	}
	if res.Pushed {
		fmt.Fprint(w, ", pushed")
	} else {
		fmt.Fprint(w, ", nothing to push")
	}
	fmt.Fprintf(w, "; now at %s\n", shareShort(res.Head))
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
			"and new and expired traces per domain. --format markdown writes a pull request body.",
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
	rev1, rev2 := "HEAD~1", "HEAD"
	if c.NArg() >= 1 {
		rev1 = c.Args().Get(0)
	}
	if c.NArg() == 2 {
		rev2 = c.Args().Get(1)
	}
	to, err := h.Resolve(ctx, rev2)
	if err != nil {
		return usagef("diff: %v", err)
	}
	from, err := h.Resolve(ctx, rev1)
	if err != nil {
		if c.NArg() >= 1 {
			return usagef("diff: %v", err)
		}
		from = "" // HEAD is the first commit: compare with the empty tree
	}
	rep, err := shareDiff(c, h, from, to)
	if err != nil {
		return err
	}
	switch format {
	case "markdown":
		return rep.WriteMarkdown(c.App.Writer)
	case "json":
		return writeJSON(c.App.Writer, rep)
	}
	return rep.WriteText(c.App.Writer)
}

// shareDiff builds the report between two commits ("" = the empty tree).
func shareDiff(c *cli.Context, h *gitrepo.History, from, to string) (*engine.DiffReport, error) {
	ctx := c.Context
	changes, err := h.Diff(ctx, from, to, "")
	if err != nil {
		return nil, err
	}
	rep := &engine.DiffReport{From: shareShort(from), To: shareShort(to), Entries: []engine.EntryDiff{}, Traces: []engine.TraceDelta{}}
	if from == "" {
		rep.From = "(empty)"
	}
	type pair struct{ factsFrom, factsTo, expFrom, expTo string }
	entries := map[string]*pair{}
	traces := map[string]*engine.TraceDelta{}
	for _, ch := range changes {
		parts := strings.Split(ch.Path, "/")
		switch {
		case parts[0] == "traces" && len(parts) == 4:
			td := traces[parts[1]]
			if td == nil {
				td = &engine.TraceDelta{Domain: parts[1]}
				traces[parts[1]] = td
			}
			if ch.Added() {
				td.Added++
			} else if ch.Deleted() {
				td.Removed++
			}
		case (parts[0] == "facts" || parts[0] == "experience") && len(parts) == 3 && strings.HasSuffix(parts[2], ".yaml"):
			k := parts[1] + "/" + strings.TrimSuffix(parts[2], ".yaml")
			p := entries[k]
			if p == nil {
				p = &pair{}
				entries[k] = p
			}
			if parts[0] == "facts" {
				p.factsFrom, p.factsTo = ch.From, ch.To
			} else {
				p.expFrom, p.expTo = ch.From, ch.To
			}
		}
	}
	readFacts := func(key, hash string) *engine.Facts {
		if hash == "" {
			return nil
		}
		var f engine.Facts
		if err := shareDecodeBlob(c, h, hash, &f, store.KindFacts); err != nil {
			rep.Problems = append(rep.Problems, fmt.Sprintf("facts/%s.yaml at %s: %v", key, hash[:10], err))
			return nil
		}
		return &f
	}
	readExp := func(key, hash string) *engine.Experience {
		if hash == "" {
			return nil
		}
		var x engine.Experience
		if err := shareDecodeBlob(c, h, hash, &x, store.KindExperience); err != nil {
			rep.Problems = append(rep.Problems, fmt.Sprintf("experience/%s.yaml at %s: %v", key, hash[:10], err))
			return nil
		}
		return &x
	}
	for key, p := range entries {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var oldF, newF *engine.Facts
		if p.factsFrom != "" || p.factsTo != "" {
			oldF, newF = readFacts(key, p.factsFrom), readFacts(key, p.factsTo)
		} else {
			// Only experience moved: the facts are the same on both sides.
			dom, k, _ := strings.Cut(key, "/")
			if hash, err := h.FileAt(ctx, to, store.FactsPath(dom, k)); err == nil && hash != "" {
				oldF = readFacts(key, hash)
				newF = oldF
			}
		}
		d := engine.DiffEntry(oldF, newF, readExp(key, p.expFrom), readExp(key, p.expTo))
		if d.Domain == "" {
			d.Domain, d.IntentKey, _ = strings.Cut(key, "/")
		}
		if !d.Empty() {
			rep.Entries = append(rep.Entries, d)
		}
	}
	for _, td := range traces {
		rep.Traces = append(rep.Traces, *td)
	}
	rep.Sort()
	return rep, nil
}

func shareDecodeBlob(c *cli.Context, h *gitrepo.History, hash string, v any, kind string) error {
	data, err := h.Blob(c.Context, hash, store.MaxBytes(kind))
	if err != nil {
		return err
	}
	return store.Unmarshal(data, v, kind)
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
			"INTENT is an intent key or the intent's text. Without an argument: every commit that changed facts/.",
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
	paths := []string{"facts"}
	if arg := c.Args().First(); arg != "" {
		domPart, intent, hasIntent := strings.Cut(arg, "/")
		dom, err := engine.NormalizeDomain(domPart)
		if err != nil {
			return usagef("log: %q is not a domain: %v", domPart, err)
		}
		if hasIntent && intent != "" {
			key := intent
			if !engine.ValidKey(key) {
				key = engine.IntentKey(intent)
			}
			paths = []string{store.FactsPath(dom, key), store.ExperiencePath(dom, key)}
		} else {
			paths = []string{"facts/" + dom, "experience/" + dom}
		}
	}
	h, err := gitrepo.OpenHistory(knowledgeDir(c))
	if err != nil {
		return err
	}
	defer h.Close()
	entries, err := h.Log(c.Context, paths, c.Int("limit"))
	if err != nil {
		return err
	}
	w := c.App.Writer
	if len(entries) == 0 {
		fmt.Fprintf(w, "no commit changed %s\n", strings.Join(paths, " or "))
		return nil
	}
	const maxLines = 20
	for _, e := range entries {
		fmt.Fprintf(w, "%s %s %s\n", shareShort(e.Hash), e.When.Format(time.RFC3339), e.Subject)
		for i, ch := range e.Changes {
			if i == maxLines {
				fmt.Fprintf(w, "    … and %d more file(s)\n", len(e.Changes)-maxLines)
				break
			}
			fmt.Fprintf(w, "    %s: %s\n", ch.Path, shareLogState(c, h, ch))
		}
	}
	return nil
}

// shareLogState describes a file at a commit: a facts entry's status and
// revision, an experience file's evidence counts.
func shareLogState(c *cli.Context, h *gitrepo.History, ch gitrepo.FileChange) string {
	if ch.Deleted() {
		return "deleted"
	}
	verb := "changed"
	if ch.Added() {
		verb = "added"
	}
	switch {
	case strings.HasPrefix(ch.Path, "facts/"):
		var f engine.Facts
		if err := shareDecodeBlob(c, h, ch.To, &f, store.KindFacts); err != nil {
			return verb + ", unreadable: " + err.Error()
		}
		rev := f.Revision
		if rev == "" {
			rev = f.ContentHash()
		}
		s := fmt.Sprintf("%s, status %s, revision r%s", verb, f.Status, rev)
		if f.Supersedes != "" {
			s += ", supersedes r" + f.Supersedes
		}
		return s
	case strings.HasPrefix(ch.Path, "experience/"):
		var x engine.Experience
		if err := shareDecodeBlob(c, h, ch.To, &x, store.KindExperience); err != nil {
			return verb + ", unreadable: " + err.Error()
		}
		return fmt.Sprintf("%s, %d run(s): %d succeeded, %d failed", verb, x.Attempts, x.Successes, x.Failures)
	}
	return verb
}

// ---- check -------------------------------------------------------------

func newCheckCmd() *cli.Command {
	return &cli.Command{
		Name:      "check",
		Usage:     "check the tree: schema, path safety, secrets, frozen verified content (and a pull request's changes)",
		ArgsUsage: " ",
		Description: "Prints one line per problem and exits 1 when there is any:\n" +
			"  schema/path  every file parses and sits where pem would write it; no symlinks, no odd names\n" +
			"  secret       no private keys, cloud or GitHub tokens, password= values, nor the values of the\n" +
			"               environment variables named in " + EnvSecretEnv + " (comma-separated)\n" +
			"  frozen       no commit in the history altered a verified entry's content without superseding it\n" +
			"With --pr BASE (e.g. origin/main), also that the change from BASE to HEAD adds traces without\n" +
			"editing any and touches no derived file (experience/).",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "pr", Usage: "check the change from the merge base with `BASE` to HEAD as a pull request"},
		},
		Action: runCheck,
	}
}

func runCheck(c *cli.Context) error {
	if c.NArg() > 0 {
		return usagef("check takes no arguments (got %q): use --pr BASE to check a pull request", c.Args().First())
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
	err = s.Files(ctx, store.MaxExperienceBytes, func(rel string, data []byte) error {
		files++
		problems = append(problems, engine.CheckSecrets(rel, data, secrets)...)
		return nil
	})
	if err != nil {
		return fmt.Errorf("check: scanning %s: %w", dir, err)
	}

	// History: verified content never altered; and the pull request's change.
	commits := 0
	h, err := gitrepo.OpenHistory(dir)
	switch {
	case errors.Is(err, gitrepo.ErrNoRepo):
		fmt.Fprintf(c.App.ErrWriter, "pem: check: %s is in no git repository: history not checked\n", dir)
	case err != nil:
		return err
	default:
		defer h.Close()
		if w := mergeDriverWarning(h, dir); w != "" {
			fmt.Fprintf(c.App.ErrWriter, "pem: check: warning: %s\n", w)
		}
		if _, herr := h.Resolve(ctx, "HEAD"); herr == nil {
			n, ps, err := shareCheckHistory(c, h)
			if err != nil {
				return err
			}
			commits = n
			problems = append(problems, ps...)
		}
		if base := c.String("pr"); base != "" {
			ps, err := shareCheckPR(c, h, base)
			if err != nil {
				return err
			}
			problems = append(problems, ps...)
		}
	}

	for _, p := range problems {
		fmt.Fprintln(c.App.Writer, p.String())
	}
	if len(problems) > 0 {
		return cli.Exit(fmt.Sprintf("check: %d problem(s) in %s: fix each line above and run pem check again", len(problems), dir), exitInternal)
	}
	fmt.Fprintf(c.App.Writer, "ok: %d file(s) and %d commit(s) checked in %s\n", files, commits, dir)
	return nil
}

// shareCheckHistory walks every commit from HEAD and reports each change of a
// facts file that altered a verified version's content. A merge commit's
// change is only new when it matches none of the other parents' versions
// (those were checked on their own branch).
func shareCheckHistory(c *cli.Context, h *gitrepo.History) (int, []engine.CheckProblem, error) {
	ctx := c.Context
	var problems []engine.CheckProblem
	commits := 0
	err := h.Walk(ctx, "HEAD", "facts", func(ci gitrepo.CommitInfo, changes []gitrepo.FileChange) error {
		commits++
		for _, ch := range changes {
			if ch.Added() || !strings.HasSuffix(ch.Path, ".yaml") {
				continue
			}
			old, err := h.Blob(ctx, ch.From, store.MaxFactsBytes)
			if err != nil {
				return err
			}
			if !store.MayHoldScalar(old, string(engine.Verified)) {
				continue // cannot decode to a verified entry: skip the decode
			}
			var of engine.Facts
			if store.Unmarshal(old, &of, store.KindFacts) != nil {
				continue // an unreadable old version is the schema check's business
			}
			if of.Status != engine.Verified {
				continue // only verified versions are frozen (decided on the parsed status, not on the bytes)
			}
			var nf *engine.Facts
			if !ch.Deleted() {
				var f engine.Facts
				if err := shareDecodeBlob(c, h, ch.To, &f, store.KindFacts); err != nil {
					continue
				}
				nf = &f
			}
			p := engine.CheckFrozenChange(ch.Path, shareShort(ci.Hash), &of, nf)
			if p == nil {
				continue
			}
			fromOther := false
			for _, parent := range ci.Parents[min(1, len(ci.Parents)):] {
				if hash, err := h.FileAt(ctx, parent, ch.Path); err == nil && hash == ch.To {
					fromOther = true
				}
			}
			if !fromOther {
				problems = append(problems, *p)
			}
		}
		return nil
	})
	return commits, problems, err
}

// shareCheckPR checks the change from the merge base of base and HEAD to HEAD.
func shareCheckPR(c *cli.Context, h *gitrepo.History, base string) ([]engine.CheckProblem, error) {
	ctx := c.Context
	if _, err := h.Resolve(ctx, base); err != nil {
		return nil, usagef("check --pr: %v (in a CI checkout, fetch the base branch first: git fetch origin BASE)", err)
	}
	mb, err := h.MergeBase(ctx, base, "HEAD")
	if err != nil {
		return nil, err
	}
	changes, err := h.Diff(ctx, mb, "HEAD", "")
	if err != nil {
		return nil, err
	}
	var problems []engine.CheckProblem
	for _, ch := range changes {
		if p := engine.CheckPRChange(ch.Path, ch.Added(), ch.Deleted()); p != nil {
			problems = append(problems, *p)
		}
	}
	sort.SliceStable(problems, func(i, j int) bool { return problems[i].Path < problems[j].Path })
	return problems, nil
}

// shareMergeKind decodes ancestor, ours and theirs (an empty ancestor means none),
// merges them with merge and encodes the result canonically.
func shareMergeKind[T any](data [3][]byte, decode func([]byte, any, string) (bool, error), opt *engine.MergeOptions,
	merge func(base, ours, theirs *T, opt *engine.MergeOptions) (*T, error)) ([]byte, error) {
	var b, o, t T
	hasBase, err := decode(data[0], &b, "ancestor")
	if err != nil {
		return nil, err
	}
	for _, x := range []struct {
		data []byte
		v    *T
		side string
	}{{data[1], &o, "our"}, {data[2], &t, "their"}} {
		if ok, err := decode(x.data, x.v, x.side); err != nil {
			return nil, err
		} else if !ok {
			return nil, fmt.Errorf("%s version is empty", x.side)
		}
	}
	base := &b
	if !hasBase {
		base = nil
	}
	m, err := merge(base, &o, &t, opt)
	if err != nil {
		return nil, err
	}
	return store.Marshal(m)
}
