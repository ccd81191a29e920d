package consolidate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store"
	"github.com/pemdev/pem/store/gitrepo"
)

// Options configure Run and Apply. The zero value consolidates at the real
// time and commits as DefaultSignature.
type Options struct {
	Now       func() time.Time  // the clock; nil means time.Now
	DryRun    bool              // Run plans and returns without writing or locking
	NoCommit  bool              // write the tree but make no commit
	Signature gitrepo.Signature // zero: gitrepo.DefaultSignature
	Logger    *slog.Logger      // nil: discard
	Progress  Progress          // nil: none
	// Repo is the tree's git repository, opened by the caller for the whole
	// command; nil: Run and Apply open it once (a tree outside git is fine
	// with NoCommit or DryRun: no cache, no commits).
	Repo *gitrepo.Repo
}

// Result is what a consolidation did.
type Result struct {
	Plan      *Changeset
	Commits   []string // hashes of the commits made, oldest first
	Recovered int      // commits an interrupted earlier run left to make
	Written   []string // files written, relative to the tree
	Deleted   []string // traces deleted, relative to the tree
	// State is the commit made on gitrepo.StateRef (the traces and
	// experience, off the main branch), "" when none; Squashed says it is a
	// snapshot with no parent. Moved counts the files main tracked under
	// traces/ and experience/ that this run moved there (an old-style tree,
	// or a merged trace-only pull request): the commit that untracked them
	// is in Commits.
	State    string
	Squashed bool
	Moved    int
	// Maintenance is what keeping the object store healthy did after the
	// commits (a repack past pem.yaml's repack_packs or repack_loose); nil
	// when nothing was committed.
	Maintenance *gitrepo.MaintainResult
}

// ErrStalePlan is returned by Apply when the tree changed between Plan and
// Apply (another consolidation ran): make a new plan.
var ErrStalePlan = errors.New("the tree changed since the plan was made")

func (o Options) now() time.Time {
	if o.Now != nil {
		return o.Now().UTC()
	}
	return time.Now().UTC()
}

func (o Options) log() *slog.Logger {
	if o.Logger != nil {
		return o.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// Run consolidates st: under the tree lock it finishes what an interrupted
// run left (see Apply), loads, plans at opts.Now and applies. With DryRun it
// only loads and plans, takes no lock and writes nothing.
func Run(ctx context.Context, st *store.Store, opts Options) (*Result, error) {
	tl := newTimeline(opts.Logger)
	repo, done, err := openRepo(ctx, st, opts)
	if err != nil {
		return nil, err
	}
	defer done()
	if opts.DryRun {
		now := opts.now()
		in, err := Load(ctx, st, LoadOptions{Now: now, Progress: opts.Progress, Repo: repo})
		if err != nil {
			return nil, err
		}
		plan := Plan(now, in)
		if repo != nil {
			if sparse, _ := repo.Sparse(); sparse {
				// A dry run writes nothing, so it does not check the traces out.
				plan.Warnings = append(plan.Warnings, "this pem clone has not checked out the traces other clones saved: the plan folds only the traces saved here; pem consolidate (without --dry-run) fetches them first")
			}
		}
		return &Result{Plan: plan}, nil
	}
	release, err := st.Lock(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	if err := materialize(ctx, repo); err != nil { // under the lock: one checkout at a time
		return nil, err
	}
	res := &Result{}
	if err := recoverJournal(ctx, repo, opts, res); err != nil {
		return res, err
	}
	tl.mark("open, lock, recover")
	now := opts.now()
	in, saved, err := load(ctx, st, LoadOptions{Now: now, Progress: opts.Progress, Repo: repo, tl: tl})
	// The summary cache is written while the plan is made and applied;
	// waited for before the lock is released (deferred after it).
	defer func() {
		saved()
		tl.mark("summary cache saved")
	}()
	if err != nil {
		return res, err
	}
	res.Plan = Plan(now, in)
	tl.mark("plan")
	return res, apply(ctx, st, repo, res.Plan, opts, res, tl)
}

// Apply writes a plan made by Plan and commits it. It takes the tree lock
// (waiting until ctx ends, then engine.ErrLocked), so a manual pem
// consolidate and pem serve never run at once, and refuses a plan whose
// entries changed since it was made (ErrStalePlan).
//
// Order, for crash safety: the commits to make are journaled in the git
// directory first; then each entry's facts, then its experience (folding a
// trace is final once its experience is written); then expired traces are
// deleted; then everything is committed by exact path and the journal
// removed. A run killed at any point leaves either nothing or a journal,
// and the next Run or Apply first makes the journaled commits — the paths are
// still different from HEAD — and then plans again: folds are idempotent, so
// nothing is lost or counted twice.
func Apply(ctx context.Context, st *store.Store, plan *Changeset, opts Options) (*Result, error) {
	opts.DryRun = false
	repo, done, err := openRepo(ctx, st, opts)
	if err != nil {
		return nil, err
	}
	defer done()
	release, err := st.Lock(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	if err := materialize(ctx, repo); err != nil {
		return nil, err
	}
	res := &Result{Plan: plan}
	if err := recoverJournal(ctx, repo, opts, res); err != nil {
		return res, err
	}
	for _, e := range plan.Entries {
		if err := e.checkBase(ctx, st); err != nil {
			return res, err
		}
	}
	return res, apply(ctx, st, repo, plan, opts, res, nil)
}

// materialize checks out the traces a pem clone left out (gitrepo.Clone):
// consolidation reads every trace. A full checkout costs one config read.
func materialize(ctx context.Context, repo *gitrepo.Repo) error {
	if repo == nil {
		return nil
	}
	if _, err := repo.Materialize(ctx); err != nil {
		return fmt.Errorf("consolidation reads every trace, and this clone has only facts and experience: %w", err)
	}
	return nil
}

// openRepo returns opts.Repo, or opens st's repository for one Run or Apply
// (done closes what it opened). When nothing is to be committed, a tree
// outside git (or a repository that does not open) gives a nil Repo.
func openRepo(ctx context.Context, st *store.Store, opts Options) (repo *gitrepo.Repo, done func(), err error) {
	if opts.Repo != nil {
		return opts.Repo, func() {}, nil
	}
	repo, err = gitrepo.Open(ctx, st.Root())
	switch {
	case err == nil:
		return repo, func() { repo.Close() }, nil
	case opts.NoCommit || opts.DryRun:
		return nil, func() {}, nil // no commits, and no cache: it is only a cache
	}
	return nil, nil, fmt.Errorf("%w; or run with --no-commit to write without committing", err)
}

func (e *Entry) checkBase(ctx context.Context, st engine.Store) error {
	x, err := st.Experience(ctx, e.Key.Domain, e.Key.IntentKey)
	n := 0
	switch {
	case err == nil:
		n = len(x.Evidence)
	case !errors.Is(err, engine.ErrNotFound):
		return err
	}
	if n != e.baseEvidence {
		return fmt.Errorf("%w: %s has %d folded traces, the plan expected %d: plan again", ErrStalePlan, e.Key, n, e.baseEvidence)
	}
	f, err := st.Facts(ctx, e.Key.Domain, e.Key.IntentKey)
	switch {
	case errors.Is(err, engine.ErrNotFound):
		f = nil
	case err != nil:
		return err
	}
	if (f == nil) != (e.baseFacts == nil) || f != nil && !sameFacts(f, e.baseFacts) {
		return fmt.Errorf("%w: facts %s changed: plan again", ErrStalePlan, e.Key)
	}
	return nil
}

// testHookWrite runs after each file apply writes or deletes; the kill test
// slows writes with it to widen the window it kills in.
var testHookWrite = func() {}

func apply(ctx context.Context, st *store.Store, repo *gitrepo.Repo, plan *Changeset, opts Options, res *Result, tl *timeline) error {
	log := opts.log()
	if plan.Empty() {
		log.Info("nothing to consolidate")
		return moveState(ctx, st, repo, opts, res)
	}
	var series *gitrepo.Series
	if !opts.NoCommit {
		ignore, err := st.IgnoreState(ctx)
		if err != nil {
			return err
		}
		state, reqs := commitRequests(plan)
		state.MainPaths = []string{ignore}
		if series, err = repo.BeginStateSeries(journalName, state, reqs); err != nil {
			return err
		}
		tl.mark("journal the commits")
	}
	// One batch (store.PutBatch): every file goes to an fsynced temporary
	// file first, all at once; then the site entries are renamed into place
	// (their directories fsynced), then all facts, then all experience — so
	// every site entry is durable before any facts file changes (a site is
	// a join: a run killed after writing one folds the same runs into it
	// again with the same result), and each entry's facts before its
	// experience.
	var facts []*engine.Facts
	var exps []*engine.Experience
	for _, e := range plan.Entries {
		if e.Facts != nil {
			facts = append(facts, e.Facts)
		}
		if e.Experience != nil {
			exps = append(exps, e.Experience)
		}
	}
	total, done := len(plan.Sites)+len(facts)+len(exps), 0
	written, cached, err := st.PutBatch(ctx, plan.Sites, facts, exps, func(string) {
		done++
		if opts.Progress != nil && done%250 == 0 && done < total {
			opts.Progress("write", done, total)
		}
		testHookWrite()
	})
	// The decoded cache of the experience written is written while the
	// expired traces are deleted (the plan's records do not change after
	// this), and waited for before the commits: overlapping the commit it
	// took ~1 s of CPU more in all and made the commit step 0.62–0.72× git
	// instead of 0.45–0.53× (docs/performance.md, the third round).
	waited := false
	waitCached := func() {
		if !waited {
			waited = true
			cached()
			tl.mark("decoded cache written")
		}
	}
	defer waitCached()
	if err != nil {
		return fmt.Errorf("writing the consolidation (the next run completes it): %w", err)
	}
	if opts.Progress != nil && total > 0 {
		opts.Progress("write", total, total) // unchanged files are not placed
	}
	res.Written = append(res.Written, written...)
	sort.Strings(res.Written)
	tl.mark("write sites, facts and experience")
	for _, ref := range plan.Expire {
		if err := st.DeleteTrace(ctx, ref); err != nil {
			return fmt.Errorf("expiring trace %s: %w", ref.ID, err)
		}
		res.Deleted = append(res.Deleted, store.TracePath(ref))
		testHookWrite()
	}
	tl.mark("expire traces")
	log.Info("consolidated", "summary", plan.Summary(), "written", len(res.Written), "deleted", len(res.Deleted))
	waitCached()
	if opts.NoCommit {
		return nil
	}
	start := time.Now()
	hashes, err := series.Commit(ctx, opts.Signature)
	res.addState(series.State)
	if err != nil {
		return fmt.Errorf("committing the consolidation (the next run commits it): %w", err)
	}
	for _, h := range hashes {
		if h != "" {
			res.Commits = append(res.Commits, h)
			log.Info("committed", "commit", h)
		}
	}
	// The commit step alone (make bench-scale compares it with git add -A && git commit).
	log.Info("commit step", "commits", len(res.Commits), "state", res.State != "", "took", time.Since(start))
	tl.mark("commit")
	if len(res.Commits) > 0 || res.State != "" {
		res.Maintenance = Maintain(ctx, st, repo, log, plan)
		tl.mark("maintain")
	}
	return nil
}

// Maintain keeps st's object store healthy after a commit: it repacks once
// the store passes pem.yaml's repack_packs or repack_loose (gitrepo.Maintain).
// A repack that cannot run (git missing, a failure) loses nothing — every
// object is still there — so it is a warning in plan (when not nil) and the
// log, not an error; the next run tries again.
func Maintain(ctx context.Context, st *store.Store, repo *gitrepo.Repo, log *slog.Logger, plan *Changeset) *gitrepo.MaintainResult {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg, err := st.Config(ctx)
	if err != nil {
		return nil
	}
	// The objects the state's snapshots drop are pruned once the packs have
	// doubled since the last prune (amortized like the geometric repack);
	// repack_packs 0 turns that off with the rest.
	prune := 0.0
	if cfg.Policy.RepackPacks > 0 {
		prune = 2
	}
	// PEM_PRUNE_EXPIRE (a git approxidate) replaces the day of grace the
	// prune keeps unreachable objects: make simulate's days pass in minutes
	// of real time, so it sets "now".
	m, err := repo.Maintain(ctx, gitrepo.MaintainOptions{MaxPacks: cfg.Policy.RepackPacks, MaxLoose: cfg.Policy.RepackLoose, PruneGrowth: prune,
		PruneExpire: os.Getenv("PEM_PRUNE_EXPIRE")})
	if err != nil {
		w := fmt.Sprintf("the git object store was not repacked (nothing is lost; the next consolidation tries again): %v", err)
		log.Warn("repack", "error", err)
		if plan != nil {
			plan.Warnings = append(plan.Warnings, w)
		}
		return m
	}
	if m.Repacked {
		log.Info("repacked", "packs", m.Before.Packs, "loose", m.Before.Loose, "packs_after", m.After.Packs, "loose_after", m.After.Loose, "pruned", m.Pruned, "took", m.Took)
	}
	return m
}

// commitRequests are the commits of a plan: the state commit (on
// gitrepo.StateRef: the experience written and the traces folded or
// expired; a snapshot when traces expire), then on main one commit for
// everything else but the promotions to verified, then one per promotion.
func commitRequests(plan *Changeset) (*gitrepo.StateRequest, []gitrepo.CommitRequest) {
	msg := commitMessage(plan)
	state := &gitrepo.StateRequest{Dirs: store.StateDirs, Message: msg, Squash: len(plan.Expire) > 0, MaxChain: gitrepo.DefaultStateMaxChain}
	main := gitrepo.CommitRequest{Message: msg}
	var verify []gitrepo.CommitRequest
	for _, e := range plan.Entries {
		if e.Experience != nil {
			state.Paths = append(state.Paths, store.ExperiencePath(e.Key.Domain, e.Key.IntentKey))
		}
		for _, r := range e.Folded {
			state.Paths = append(state.Paths, store.TracePath(r))
		}
		main.Paths = append(main.Paths, e.Verdicts...) // reviewed with the facts
		if e.Facts == nil {
			continue
		}
		fp := store.FactsPath(e.Key.Domain, e.Key.IntentKey)
		if !e.Verified {
			main.Paths = append(main.Paths, fp)
			continue
		}
		verify = append(verify, gitrepo.CommitRequest{Paths: []string{fp}, Message: verifyMessage(plan, e)})
	}
	for _, s := range plan.Sites {
		main.Paths = append(main.Paths, store.SitePath(s.Domain))
	}
	for _, r := range plan.Expire {
		state.Paths = append(state.Paths, store.TracePath(r))
	}
	return state, append([]gitrepo.CommitRequest{main}, verify...)
}

// addState records a state commit in res: its hash with the commits, and
// the main commit that untracked what main held under the state's
// directories.
func (res *Result) addState(s *gitrepo.StateCommit) {
	if s == nil {
		return
	}
	if s.Hash != "" {
		res.State = s.Hash
		res.Squashed = s.Squashed
	}
	if s.Move != "" {
		res.Commits = append(res.Commits, s.Move)
		res.Moved += s.Moved
	}
}

// moveState moves to the state ref what main still tracks under the state's
// directories when there is nothing to consolidate: an old-style tree whose
// traces are all folded (its first run with this pem), or nothing else.
func moveState(ctx context.Context, st *store.Store, repo *gitrepo.Repo, opts Options, res *Result) error {
	if opts.NoCommit || repo == nil {
		return nil
	}
	tracks, err := repo.TracksState(store.StateDirs)
	if err != nil || !tracks {
		return err
	}
	ignore, err := st.IgnoreState(ctx)
	if err != nil {
		return err
	}
	state := &gitrepo.StateRequest{Dirs: store.StateDirs, MainPaths: []string{ignore}, MaxChain: gitrepo.DefaultStateMaxChain,
		Message: "pem: state of the tree (traces and experience) moved off the main branch"}
	series, err := repo.BeginStateSeries(journalName, state, nil)
	if err != nil {
		return err
	}
	if _, err := series.Commit(ctx, opts.Signature); err != nil {
		res.addState(series.State)
		return fmt.Errorf("moving traces and experience to %s (the next run completes it): %w", gitrepo.StateRef, err)
	}
	res.addState(series.State)
	opts.log().Info("moved the state off the main branch", "files", res.Moved, "state", res.State)
	if len(res.Commits) > 0 {
		res.Maintenance = Maintain(ctx, st, repo, opts.log(), nil)
	}
	return nil
}

// maxBodyLines caps a commit message's body; the plan has the rest.
const maxBodyLines = 200

func commitMessage(plan *Changeset) string {
	var subject string
	folds := plan.Count(KindFold)
	entries := 0
	for _, e := range plan.Entries {
		if e.Experience != nil || e.Facts != nil && !e.Verified {
			entries++
		}
	}
	if folds > 0 {
		subject = fmt.Sprintf("pem: consolidate %d %s (%d %s)", folds, plural(folds, "trace", "traces"), entries, plural(entries, "entry", "entries"))
		if n := len(plan.Expire); n > 0 {
			subject += fmt.Sprintf(", expire %d", n)
		}
	} else {
		subject = "pem: consolidate: " + plan.Summary()
	}
	var body []string
	for _, e := range plan.Entries {
		if len(e.Folded) == 0 {
			continue
		}
		// Counted when folded: a trace older than the compaction cutoff is
		// folded and compacted in the same run, so it is no evidence item.
		ok, fail := e.FoldedOK, len(e.Folded)-e.FoldedOK
		body = append(body, fmt.Sprintf("%s: +%d %s (%d ok, %d failed), confidence %.2f", e.Key, len(e.Folded),
			plural(len(e.Folded), "trace", "traces"), ok, fail, e.Score.Confidence))
	}
	verified := map[Key]bool{}
	for _, e := range plan.Entries {
		verified[e.Key] = e.Verified
	}
	for _, c := range plan.Changes {
		if c.Kind != KindFold && c.Kind != KindSkip && c.Kind != KindQuarantine && !verified[c.Key] {
			body = append(body, c.String())
		}
	}
	if len(body) > maxBodyLines {
		n := len(body) - maxBodyLines
		body = append(body[:maxBodyLines], fmt.Sprintf("… and %d more (pem consolidate --dry-run lists every change)", n))
	}
	if len(body) == 0 {
		return subject
	}
	return subject + "\n\n" + strings.Join(body, "\n")
}

// verifyMessage is the commit of one promotion: the audit trail of
// `git log -- facts`, with the entry's changes in the body and the evidence
// in trailers.
func verifyMessage(plan *Changeset, e *Entry) string {
	var body []string
	for _, c := range plan.Changes {
		if c.Key == e.Key && c.Kind != KindFold && c.Kind != KindSkip && c.Kind != KindExpire && c.Kind != KindQuarantine {
			body = append(body, c.String())
		}
	}
	return fmt.Sprintf("pem: verify %s r%s\n\n%s\n\nConfidence: %.2f\nSuccesses: %d\nFailures: %d\nSessions: %d",
		e.Key, e.Facts.Revision, strings.Join(body, "\n"), e.Score.Confidence, e.Score.Successes, e.Score.Failures, e.Score.Sessions)
}

// journalName names consolidation's commit journal (gitrepo.BeginSeries):
// .git/pem-consolidate.journal.
const journalName = "consolidate"

// recoverJournal makes the commits an interrupted run journaled. Paths that
// hold no change (the run died before writing them, or they were committed)
// make no commit.
func recoverJournal(ctx context.Context, repo *gitrepo.Repo, opts Options, res *Result) error {
	if opts.NoCommit {
		return nil
	}
	hashes, state, found, err := repo.RecoverStateSeries(ctx, journalName, opts.Signature)
	res.addState(state)
	if errors.Is(err, gitrepo.ErrBadJournal) {
		opts.log().Warn("unreadable consolidation journal set aside", "error", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("completing the commits of an interrupted consolidation: %w", err)
	}
	if !found {
		return nil
	}
	for _, h := range hashes {
		if h != "" {
			res.Commits = append(res.Commits, h)
			res.Recovered++
		}
	}
	opts.log().Info("completed an interrupted consolidation", "commits", res.Recovered)
	return nil
}
