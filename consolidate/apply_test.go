package consolidate

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store"
	"github.com/pemdev/pem/store/gitrepo"
	"github.com/pemdev/pem/store/storetest/gitcli"
)

// TestMain doubles as the child consolidator of the kill and serve tests.
func TestMain(m *testing.M) {
	switch os.Getenv("PEM_TEST_CHILD") {
	case "consolidate":
		os.Exit(childConsolidate())
	case "serve":
		os.Exit(childServe())
	case "bench":
		os.Exit(childBench())
	}
	os.Exit(m.Run())
}

func childConsolidate() int {
	dir := os.Getenv("PEM_TEST_DIR")
	now, err := time.Parse(time.RFC3339, os.Getenv("PEM_TEST_NOW"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	testHookWrite = func() { time.Sleep(2 * time.Millisecond) }
	st, err := store.Open(dir, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer st.Close()
	if _, err := Run(context.Background(), st, Options{Now: func() time.Time { return now }, Signature: testSig}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

var testSig = gitrepo.Signature{Name: "pem", Email: "pem@localhost", When: time.Date(2025, 3, 10, 13, 0, 0, 0, time.UTC)}

// newRepoTree makes an initialized tree with a git repository and its first
// commit, and opens it.
func newRepoTree(t testing.TB) (*store.Store, string) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	if _, err := store.Init(ctx, dir); err != nil {
		t.Fatal(err)
	}
	if err := gitrepo.Init(ctx, dir); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, dir
}

func put(t testing.TB, st *store.Store, ts ...*engine.Trace) {
	t.Helper()
	for _, tr := range ts {
		if _, err := st.PutTrace(context.Background(), tr); err != nil {
			t.Fatal(err)
		}
	}
}

// treeDigest hashes every file under dir except .git and the lock file:
// equal digests mean equal trees, byte for byte.
func treeDigest(t testing.TB, dir string, under ...string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() && (d.Name() == ".git" || rel == ".pem-cache") {
			// .pem-cache holds caches (ignored by git), written when a
			// file they serve has aged past the racy window: on a loaded
			// machine, between two runs that change nothing.
			return filepath.SkipDir
		}
		if d.IsDir() || rel == ".pem.lock" {
			return nil
		}
		if strings.HasPrefix(d.Name(), ".") && strings.HasSuffix(d.Name(), ".tmp") {
			// The store's temporary file of a write killed before its
			// rename: ignored by git and by listings, never read.
			return nil
		}
		if len(under) > 0 {
			keep := false
			for _, u := range under {
				keep = keep || strings.HasPrefix(rel, u)
			}
			if !keep {
				return nil
			}
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		lines = append(lines, rel+" "+hex.EncodeToString(sum[:8]))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func assertGitClean(t *testing.T, dir string) {
	t.Helper()
	if st := gitcli.Run(t, dir, "status", "--porcelain", "--untracked-files=all"); st != "" {
		t.Fatalf("git status not clean after consolidation:\n%s", st)
	}
	gitcli.Run(t, dir, "fsck", "--strict", "--no-dangling")
	assertStateMatchesDisk(t, dir)
}

// assertStateMatchesDisk checks the state ref against the tree after a
// consolidation that left no trace pending: it holds exactly the traces and
// experience files on disk, byte for byte, and main tracks none of them.
func assertStateMatchesDisk(t *testing.T, dir string) {
	t.Helper()
	var disk []string
	for _, d := range store.StateDirs {
		filepath.WalkDir(filepath.Join(dir, d), func(p string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() || strings.HasPrefix(e.Name(), ".") {
				return nil
			}
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			rel, _ := filepath.Rel(dir, p)
			disk = append(disk, fmt.Sprintf("%s %s", plumbing.ComputeHash(plumbing.BlobObject, data), filepath.ToSlash(rel)))
			return nil
		})
	}
	sort.Strings(disk)
	var state []string
	if gitcli.Run(t, dir, "for-each-ref", gitrepo.StateRef.String()) != "" {
		if out := gitcli.Run(t, dir, "ls-tree", "-r", "--format=%(objectname) %(path)", gitrepo.StateRef.String()); out != "" {
			for _, l := range strings.Split(out, "\n") {
				if !strings.HasPrefix(path.Base(l), ".") { // an old layout's .gitkeep
					state = append(state, l)
				}
			}
		}
	}
	sort.Strings(state)
	if got, want := strings.Join(state, "\n"), strings.Join(disk, "\n"); got != want {
		t.Fatalf("%s does not hold the traces and experience on disk:\n%s", gitrepo.StateRef, lineDiff(got, want))
	}
	for _, d := range store.StateDirs {
		if out := gitcli.Run(t, dir, "ls-tree", "HEAD", d+"/"); out != "" {
			t.Fatalf("main still tracks %s/:\n%s", d, out)
		}
	}
}

func at(now time.Time) Options {
	return Options{Now: func() time.Time { return now }, Signature: testSig}
}

func TestRunCommitsNewTracesAndIsIdempotent(t *testing.T) {
	ctx := context.Background()
	st, dir := newRepoTree(t)
	f := newFx(11)
	var ts []*engine.Trace
	for i, s := range []string{"a", "a", "b"} {
		ts = append(ts, f.trace(traceSpec{url: starsURL, intent: "star count", session: s, at: day0.Add(-days(1) + time.Duration(i)*time.Minute), ok: true, steps: starsRoute}))
	}
	put(t, st, ts...)
	first := gitcli.Run(t, dir, "rev-parse", "HEAD")

	res, err := Run(ctx, st, at(day0))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Commits) != 1 {
		t.Fatalf("commits %v, want 1", res.Commits)
	}
	// Main gets the facts; the state ref the experience and the traces.
	if got := gitcli.Run(t, dir, "show", "--name-status", "--format=%an <%ae>%n%s", "HEAD"); got != "pem <pem@localhost>\npem: consolidate 3 traces (1 entry)\n\nA\tfacts/github.com/star-count.yaml" {
		t.Errorf("main's commit:\n%s", got)
	}
	if res.State == "" || res.State != gitcli.Run(t, dir, "rev-parse", gitrepo.StateRef.String()) {
		t.Fatalf("Result.State %q, want the state ref's commit", res.State)
	}
	got := gitcli.Run(t, dir, "show", "--name-status", "--format=%an <%ae>%n%s%n%P", gitrepo.StateRef.String())
	want := []string{"pem <pem@localhost>\npem: consolidate 3 traces (1 entry)\n\n", "A\texperience/github.com/star-count.yaml"}
	for _, tr := range ts {
		want = append(want, "A\t"+store.TracePath(store.RefOf(tr)))
	}
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("state commit lacks %q:\n%s", w, got)
		}
	}
	if strings.Contains(got, "facts/") {
		t.Errorf("state commit holds facts:\n%s", got)
	}
	if p := gitcli.Run(t, dir, "rev-parse", "HEAD^"); p != first {
		t.Fatalf("parent %s, want %s", p, first)
	}
	assertGitClean(t, dir)
	stateTip := res.State

	// A second run at the same time or later finds nothing: no write, no commit.
	head, digest := gitcli.Run(t, dir, "rev-parse", "HEAD"), treeDigest(t, dir)
	for _, now := range []time.Time{day0, day0.Add(time.Hour)} {
		res, err := Run(ctx, st, at(now))
		if err != nil {
			t.Fatal(err)
		}
		if !res.Plan.Empty() || len(res.Commits) != 0 || len(res.Written) != 0 {
			t.Fatalf("second run did something: %s, commits %v, written %v", res.Plan, res.Commits, res.Written)
		}
	}
	if h := gitcli.Run(t, dir, "rev-parse", "HEAD"); h != head {
		t.Fatalf("second run committed %s", h)
	}
	if h := gitcli.Run(t, dir, "rev-parse", gitrepo.StateRef.String()); h != stateTip {
		t.Fatalf("second run committed %s on the state ref", h)
	}
	if d := treeDigest(t, dir); d != digest {
		t.Fatalf("second run changed the tree:\n%s\n---\n%s", d, digest)
	}
}

func TestDryRunWritesNothing(t *testing.T) {
	st, dir := newRepoTree(t)
	put(t, st, newFx(12).trace(traceSpec{url: starsURL, intent: "star count", session: "a", at: day0.Add(-time.Hour), ok: true, steps: starsRoute}))
	digest, head := treeDigest(t, dir), gitcli.Run(t, dir, "rev-parse", "HEAD")
	opts := at(day0)
	opts.DryRun = true
	res, err := Run(context.Background(), st, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Plan.Count(KindFold) != 1 || res.Plan.Count(KindCreate) != 1 {
		t.Fatalf("dry run plan:\n%s", res.Plan)
	}
	if treeDigest(t, dir) != digest || gitcli.Run(t, dir, "rev-parse", "HEAD") != head {
		t.Fatal("dry run wrote or committed")
	}
}

// lifecycle saves runs and consolidates at the given time.
func lifecycle(t *testing.T, st *store.Store, f *fx, now time.Time, n int, ok bool, sessions ...string) *Result {
	t.Helper()
	var ts []*engine.Trace
	for i := 0; i < n; i++ {
		steps := starsRoute
		if !ok {
			steps = starsBroken
		}
		ts = append(ts, f.trace(traceSpec{url: starsURL, intent: "star count", session: sessions[i%len(sessions)],
			at: now.Add(-time.Hour + time.Duration(i)*time.Minute), ok: ok, steps: steps}))
	}
	put(t, st, ts...)
	res, err := Run(context.Background(), st, at(now))
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func readFacts(t *testing.T, st *store.Store) *engine.Facts {
	t.Helper()
	fa, err := st.Facts(context.Background(), "github.com", "star-count")
	if err != nil {
		t.Fatal(err)
	}
	return fa
}

func TestVerifyContestRecoverLifecycle(t *testing.T) {
	st, dir := newRepoTree(t)
	f := newFx(13)

	// Five successes from two sessions: verified, in a commit of its own.
	lifecycle(t, st, f, day0, 5, true, "s1", "s2")
	fa := readFacts(t, st)
	if fa.Status != engine.Verified {
		t.Fatalf("status %s after 5 successes in 2 sessions, want verified", fa.Status)
	}
	rev := fa.Revision
	subj := gitcli.Run(t, dir, "log", "-1", "--format=%s")
	if subj != "pem: verify github.com/star-count r"+rev {
		t.Fatalf("last commit %q, want the verify commit", subj)
	}
	if files := gitcli.Run(t, dir, "show", "--name-only", "--format=", "HEAD"); files != "facts/github.com/star-count.yaml" {
		t.Fatalf("verify commit holds %q, want only the facts file", files)
	}
	trailers := gitcli.Run(t, dir, "log", "-1", "--format=%(trailers:only,unfold)")
	for _, want := range []string{"Confidence: 0.97", "Successes: 5", "Failures: 0", "Sessions: 2"} {
		if !strings.Contains(trailers, want) {
			t.Errorf("trailers lack %q:\n%s", want, trailers)
		}
	}
	// The fold itself changed only the state (the facts went into the
	// verify commit): on main the verify follows the first commit.
	if prev := gitcli.Run(t, dir, "log", "-1", "--skip=1", "--format=%s"); prev != "pem: init knowledge tree" {
		t.Fatalf("commit before the verify: %q", prev)
	}
	if s := gitcli.Run(t, dir, "log", "-1", "--format=%s", gitrepo.StateRef.String()); s != "pem: consolidate 5 traces (1 entry)" {
		t.Fatalf("state commit: %q", s)
	}
	assertGitClean(t, dir)
	content := fa.ContentHash()

	// New successes with another route do not change frozen content.
	f2 := f
	later := day0.Add(days(1))
	var v2 []*engine.Trace
	for i := 0; i < 2; i++ {
		v2 = append(v2, f2.trace(traceSpec{url: starsURL, intent: "star count", session: "s3", at: later.Add(time.Duration(i) * time.Minute), ok: true, steps: starsRouteV2}))
	}
	put(t, st, v2...)
	verifiedAt := fa.Provenance.LastVerified
	head := gitcli.Run(t, dir, "rev-parse", "HEAD")
	res, err := Run(context.Background(), st, at(later))
	if err != nil {
		t.Fatal(err)
	}
	fa = readFacts(t, st)
	if fa.ContentHash() != content || fa.Revision != rev || fa.Status != engine.Verified {
		t.Fatalf("verified content changed by a later fold: r%s → r%s (%s)", rev, fa.ContentHash(), fa.Status)
	}
	// The successes are evidence (the state ref); the facts file on main is
	// not rewritten: its last_verified is the verification's. (Route v2's
	// failed first click is a new site note: that file is new on main.)
	if moved := gitcli.Run(t, dir, "diff", "--name-only", head, "HEAD", "--", "facts/github.com/star-count.yaml"); moved != "" || res.State == "" {
		t.Fatalf("successes of a verified entry rewrote %q on main (state commit %q); want only a state commit for it", moved, res.State)
	}
	if verifiedAt.IsZero() || !fa.Provenance.LastVerified.Equal(verifiedAt) {
		t.Fatalf("facts last_verified %s, want the verification's %s", fa.Provenance.LastVerified, verifiedAt)
	}
	// The recall's last_verified is still the newest success: derived from
	// the experience.
	eng := engine.New(st)
	eng.Now = func() time.Time { return later }
	r, err := eng.Query(context.Background(), starsURL, "star count")
	if err != nil {
		t.Fatal(err)
	}
	if r.LastVerified == nil || !r.LastVerified.Equal(v2[1].StartedAt) {
		t.Fatalf("recall last_verified %v, want the newest success %s", r.LastVerified, v2[1].StartedAt)
	}

	// A failure streak contests it; content still frozen.
	later = later.Add(days(1))
	lifecycle(t, st, f, later, 6, false, "s4")
	fa = readFacts(t, st)
	if fa.Status != engine.Contested || fa.ContentHash() != content {
		t.Fatalf("after 6 failures: status %s, content r%s (want contested, r%s)", fa.Status, fa.ContentHash(), content)
	}

	// Recovery: enough successes re-verify the same revision, in a new verify commit.
	later = later.Add(days(1))
	lifecycle(t, st, f, later, 40, true, "s5", "s6", "s7")
	fa = readFacts(t, st)
	if fa.Status != engine.Verified || fa.Revision != rev {
		t.Fatalf("after recovery: status %s r%s, want verified r%s", fa.Status, fa.Revision, rev)
	}
	if n := gitcli.Run(t, dir, "log", "--format=%s", "--grep=^pem: verify github.com/star-count r"+rev); strings.Count(n, "\n")+1 != 2 {
		t.Fatalf("want two verify commits, have:\n%s", n)
	}
	var statuses []string
	for _, h := range fa.History {
		statuses = append(statuses, string(h.From)+"→"+string(h.To))
	}
	if got := strings.Join(statuses, " "); got != "hypothesis→verified verified→contested contested→verified" {
		t.Fatalf("history %s", got)
	}
	assertGitClean(t, dir)
}

// foldStarRuns saves four runs of the star count ten days before day0
// (three successes, two sessions), consolidates them at day0, and returns
// them with their trace files' bytes by path, to bring them back later.
func foldStarRuns(t *testing.T, st *store.Store, dir string, f *fx) ([]*engine.Trace, map[string][]byte) {
	t.Helper()
	var ts []*engine.Trace
	for i := 0; i < 4; i++ {
		ts = append(ts, f.trace(traceSpec{url: starsURL, intent: "star count", session: fmt.Sprintf("s%d", i%2), at: day0.Add(-days(10) + time.Duration(i)*time.Hour), ok: i != 3, steps: starsRoute}))
	}
	put(t, st, ts...)
	if _, err := Run(context.Background(), st, at(day0)); err != nil {
		t.Fatal(err)
	}
	keep := map[string][]byte{}
	for _, tr := range ts {
		p := filepath.Join(dir, store.TracePath(store.RefOf(tr)))
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		keep[p] = data
	}
	return ts, keep
}

// setPolicy changes the policy line "key: from" of the tree's pem.yaml
// (the default pem init wrote: the test fails when it is not there) to
// "key: to" and commits it.
func setPolicy(t *testing.T, dir, key, from, to string) {
	t.Helper()
	cfg := filepath.Join(dir, "pem.yaml")
	data, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	old, repl := key+": "+from+"\n", key+": "+to+"\n"
	if !strings.Contains(string(data), old) {
		t.Fatalf("pem.yaml lacks the default %s:\n%s", strings.TrimSpace(old), data)
	}
	if err := os.WriteFile(cfg, []byte(strings.Replace(string(data), old, repl, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	gitcli.Run(t, dir, "commit", "-q", "-am", "set "+key+" to "+to)
}

func TestExpiryKeepsEvidenceAndIgnoresReappearingTraces(t *testing.T) {
	ctx := context.Background()
	st, dir := newRepoTree(t)
	ts, keep := foldStarRuns(t, st, dir, newFx(14))

	// 40 days later (ttl 30) the traces expire; the recall is the same as
	// just before, decay aside: compare at the same clock.
	late := day0.Add(days(40))
	eng := engine.New(st)
	eng.Now = func() time.Time { return late }
	before, err := eng.Query(ctx, starsURL, "star count")
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(ctx, st, at(late))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Plan.Expire) != 4 || len(res.Deleted) != 4 {
		t.Fatalf("expired %d, deleted %d; want 4:\n%s", len(res.Plan.Expire), len(res.Deleted), res.Plan)
	}
	refs, _ := st.TraceRefs(ctx, "")
	if len(refs) != 0 {
		t.Fatalf("traces left: %v", refs)
	}
	after, err := eng.Query(ctx, starsURL, "star count")
	if err != nil {
		t.Fatal(err)
	}
	if before.Confidence != after.Confidence || before.SuccessCount != after.SuccessCount || before.FailureCount != after.FailureCount || after.SuccessCount != 3 {
		t.Fatalf("expiry changed the evidence: before %.2f %d/%d, after %.2f %d/%d", before.Confidence, before.SuccessCount, before.FailureCount, after.Confidence, after.SuccessCount, after.FailureCount)
	}
	// Expiring traces squashes the state: a snapshot with no parent and
	// none of the expired traces, whose objects nothing reaches any more.
	if !res.Squashed || gitcli.Run(t, dir, "log", "--format=%P", gitrepo.StateRef.String()) != "" {
		t.Fatalf("expiry's state commit is not a snapshot (squashed %v): parents %q", res.Squashed, gitcli.Run(t, dir, "log", "--format=%P", gitrepo.StateRef.String()))
	}
	if got := gitcli.Run(t, dir, "ls-tree", "-r", "--name-only", gitrepo.StateRef.String()); strings.Contains(got, "traces/") || !strings.Contains(got, "experience/github.com/star-count.yaml") {
		t.Fatalf("state after the expiry:\n%s", got)
	}
	reach := gitcli.Run(t, dir, "rev-list", "--objects", "--all")
	for _, tr := range ts {
		if p := store.TracePath(store.RefOf(tr)); strings.Contains(reach, p) {
			t.Fatalf("expired trace %s still reachable from a ref", p)
		}
	}
	assertGitClean(t, dir)

	// The expired traces come back (an old branch merged): not counted again.
	head, stateTip := gitcli.Run(t, dir, "rev-parse", "HEAD"), res.State
	for p, data := range keep {
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	res, err = Run(ctx, st, at(late))
	if err != nil {
		t.Fatal(err)
	}
	if res.Plan.Count(KindFold) != 0 || len(res.Plan.Expire) != 4 {
		t.Fatalf("reappearing traces: %s", res.Plan)
	}
	again, _ := eng.Query(ctx, starsURL, "star count")
	if again.SuccessCount != 3 || again.FailureCount != 1 {
		t.Fatalf("reappearing traces counted again: %d/%d", again.SuccessCount, again.FailureCount)
	}
	if h := gitcli.Run(t, dir, "rev-parse", "HEAD"); h != head {
		t.Fatalf("deleting untracked reappearing traces made commit %s", h)
	}
	if h := gitcli.Run(t, dir, "rev-parse", gitrepo.StateRef.String()); h != stateTip {
		t.Fatalf("deleting untracked reappearing traces made state commit %s", h)
	}
	assertGitClean(t, dir)
}

// TestReappearingCompactedTraceExpires: with compaction at the TTL (the
// default compact_below_weight 0.5: one half-life, never before ttl_days + 1), a
// trace that comes back after its evidence was compacted cannot be folded
// (the digest may count it already) and is expired, not kept with a warning
// at every run forever; the evidence is not counted twice.
func TestReappearingCompactedTraceExpires(t *testing.T) {
	ctx := context.Background()
	st, dir := newRepoTree(t)
	_, keep := foldStarRuns(t, st, dir, newFx(16))
	late := day0.Add(days(40)) // 50 days after the runs: expired and compacted
	res, err := Run(ctx, st, at(late))
	if err != nil {
		t.Fatal(err)
	}
	if res.Plan.Count(KindCompact) != 1 || len(res.Deleted) != 4 {
		t.Fatalf("want the traces expired and the evidence compacted:\n%s", res.Plan)
	}
	for p, b := range keep {
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	res, err = Run(ctx, st, at(late.Add(days(1))))
	if err != nil {
		t.Fatal(err)
	}
	if res.Plan.Count(KindFold) != 0 || len(res.Plan.Expire) != 4 || len(res.Plan.Warnings) != 0 {
		t.Fatalf("reappearing compacted traces: want 4 expired, none folded, no warning:\n%s\nwarnings: %q", res.Plan, res.Plan.Warnings)
	}
	if refs, _ := st.TraceRefs(ctx, ""); len(refs) != 0 {
		t.Fatalf("traces left: %v", refs)
	}
	eng := engine.New(st)
	eng.Now = func() time.Time { return late }
	r, err := eng.Query(ctx, starsURL, "star count")
	if err != nil {
		t.Fatal(err)
	}
	if r.SuccessCount != 3 || r.FailureCount != 1 {
		t.Fatalf("reappearing traces counted again: %d/%d", r.SuccessCount, r.FailureCount)
	}
	assertGitClean(t, dir)
}

func TestDecayWithInjectedClock(t *testing.T) {
	st, _ := newRepoTree(t)
	f := newFx(15)
	lifecycle(t, st, f, day0, 3, true, "s1")
	if s := readFacts(t, st).Status; s != engine.Candidate {
		t.Fatalf("status %s, want candidate", s)
	}
	// No new runs; a year later confidence has decayed below the bar.
	res, err := Run(context.Background(), st, at(day0.Add(days(365))))
	if err != nil {
		t.Fatal(err)
	}
	fa := readFacts(t, st)
	if fa.Status != engine.Hypothesis || res.Plan.Count(KindStatus) != 1 {
		t.Fatalf("after a year: %s\n%s", fa.Status, res.Plan)
	}
	if e := res.Plan.Entries[0]; e.Score.Confidence >= 0.6 || e.Score.Successes != 3 {
		t.Fatalf("score %+v", e.Score)
	}
}

func TestApplyRefusesStalePlanAndHonoursLock(t *testing.T) {
	ctx := context.Background()
	st, _ := newRepoTree(t)
	f := newFx(16)
	put(t, st, f.trace(traceSpec{url: starsURL, intent: "star count", session: "a", at: day0.Add(-time.Hour), ok: true, steps: starsRoute}))
	in, err := Load(ctx, st, LoadOptions{Now: day0})
	if err != nil {
		t.Fatal(err)
	}
	plan := Plan(day0, in)

	// Another writer holds the lock: Apply waits, then gives up with ErrLocked.
	release, err := st.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_, err = Apply(short, st, plan, at(day0))
	cancel()
	if !errors.Is(err, engine.ErrLocked) {
		t.Fatalf("Apply under a held lock: %v, want ErrLocked", err)
	}
	release()

	// Another consolidation ran in between: the plan is stale.
	if _, err := Run(ctx, st, at(day0)); err != nil {
		t.Fatal(err)
	}
	if _, err := Apply(ctx, st, plan, at(day0)); !errors.Is(err, ErrStalePlan) {
		t.Fatalf("stale plan applied: %v", err)
	}
}

func TestRunWithoutRepository(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if _, err := store.Init(ctx, dir); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	put(t, st, newFx(17).trace(traceSpec{url: starsURL, intent: "star count", session: "a", at: day0.Add(-time.Hour), ok: true, steps: starsRoute}))
	if _, err := Run(ctx, st, at(day0)); !errors.Is(err, gitrepo.ErrNoRepo) {
		t.Fatalf("Run outside a repository: %v, want ErrNoRepo", err)
	}
	opts := at(day0)
	opts.NoCommit = true
	res, err := Run(ctx, st, opts)
	if err != nil || len(res.Written) != 2 {
		t.Fatalf("Run --no-commit: %v, wrote %v", err, res.Written)
	}
}

// killTree builds the kill test's tree: many entries with new traces, some
// of them past ttl_days, committed as a repository with the traces untracked.
func killTree(t *testing.T) string {
	st, dir := newRepoTree(t)
	f := newFx(18)
	var ts []*engine.Trace
	for e := 0; e < 12; e++ {
		for i := 0; i < 5; i++ {
			at := day0.Add(-days(float64(1+e%3)) + time.Duration(i)*time.Minute)
			if e%6 == 0 {
				at = day0.Add(-days(35) + time.Duration(i)*time.Minute) // expires in the same run
			}
			ts = append(ts, f.trace(traceSpec{url: fmt.Sprintf("https://site%d.example/page", e%4), intent: fmt.Sprintf("task %d", e),
				session: fmt.Sprintf("s%d", i%3), at: at, ok: i != 2, steps: starsRoute}))
		}
	}
	put(t, st, ts...)
	return dir
}

func runChild(dir string, now time.Time) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "PEM_TEST_CHILD=consolidate", "PEM_TEST_DIR="+dir, "PEM_TEST_NOW="+now.Format(time.RFC3339),
		"GIT_CONFIG_NOSYSTEM=1")
	return cmd
}

// TestKillAtRandomPoints SIGKILLs child consolidators at random moments, again
// and again, and checks that the run that finally completes leaves the same
// experience and facts as an uninterrupted run, a consistent repository, no
// journal and no stale lock.
func TestKillAtRandomPoints(t *testing.T) {
	if testing.Short() {
		t.Skip("kill test spawns many processes")
	}
	base := killTree(t)
	// The kill window is a clean run's duration: the shorter of two (on a
	// loaded machine one slow run would put most kills after the end).
	var clean string
	var full time.Duration
	for i := 0; i < 2; i++ {
		clean = copyTree(t, base)
		start := time.Now()
		if out, err := runChild(clean, day0).CombinedOutput(); err != nil {
			t.Fatalf("clean run: %v\n%s", err, out)
		}
		if d := time.Since(start); i == 0 || d < full {
			full = d
		}
	}
	want := treeDigest(t, clean, "experience/", "facts/", "traces/")
	if !strings.Contains(want, "facts/") {
		t.Fatal("the clean run wrote no facts")
	}

	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	kills := 0
	for trial := 0; kills < 16 && trial < 24; trial++ {
		dir := copyTree(t, base)
		for i := 0; i < 8; i++ {
			cmd := runChild(dir, day0)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			delay := time.Duration(rng.Int63n(int64(full)))
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				t.Logf("trial %d: child finished before the kill at %v", trial, delay)
				if err != nil {
					t.Fatalf("child failed after %d kills: %v\n%s", kills, err, out.Bytes())
				}
			case <-time.After(delay):
				cmd.Process.Signal(syscall.SIGKILL)
				<-done
				kills++
				t.Logf("trial %d: killed at %v", trial, delay)
				continue
			}
			break // the child finished on its own
		}
		// Finish the job (the next run after a crash) and compare.
		if out, err := runChild(dir, day0).CombinedOutput(); err != nil {
			t.Fatalf("run after kills: %v\n%s", err, out)
		}
		if got := treeDigest(t, dir, "experience/", "facts/", "traces/"); got != want {
			t.Fatalf("trial %d: tree after kills differs from a clean run:\n%s", trial, lineDiff(got, want))
		}
		assertGitClean(t, dir)
		for _, f := range []string{".git/index.lock", ".git/refs/heads/main.lock", ".git/refs/pem/state.lock", ".git/pem-consolidate.journal", ".git/pem-commit.pid"} {
			if _, err := os.Stat(filepath.Join(dir, f)); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("trial %d: %s left behind (%v)", trial, f, err)
			}
		}
		st, err := store.Open(dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		release, err := st.Lock(ctx)
		cancel()
		if err != nil {
			t.Fatalf("trial %d: stale tree lock: %v", trial, err)
		}
		release()
		st.Close()
		// Nothing more to do: a further run plans nothing.
		st, _ = store.Open(dir, nil)
		in, err := Load(context.Background(), st, LoadOptions{Now: day0})
		st.Close()
		if err != nil {
			t.Fatal(err)
		}
		if p := Plan(day0, in); !p.Empty() {
			t.Fatalf("trial %d: work left after completion:\n%s", trial, p)
		}
	}
	if kills < 15 {
		t.Fatalf("only %d kills landed while a consolidator ran", kills)
	}
	t.Logf("%d kills; a full run takes %v", kills, full)
}

// lineDiff lists the lines only in a (-) or only in b (+).
func lineDiff(a, b string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	ma, mb := in(a), in(b)
	var out []string
	for l := range ma {
		if !mb[l] {
			out = append(out, "- "+l)
		}
	}
	for l := range mb {
		if !ma[l] {
			out = append(out, "+ "+l)
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// TestRunOpensTheRepositoryOnce holds a consolidation to one git handle:
// before store/gitrepo the repository was found five times per run (the
// repo check, the journal recovery, the cache, the journal, the commit).
func TestRunOpensTheRepositoryOnce(t *testing.T) {
	ctx := context.Background()
	st, dir := newRepoTree(t)
	f := newFx(13)
	put(t, st, f.trace(traceSpec{url: starsURL, intent: "star count", session: "a", at: day0.Add(-time.Hour), ok: true, steps: starsRoute}),
		f.trace(traceSpec{url: starsURL, intent: "star count", session: "b", at: day0.Add(-time.Hour), ok: true, steps: starsRoute}))
	before := gitrepo.Opens()
	res, err := Run(ctx, st, at(day0))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Commits) != 1 {
		t.Fatalf("commits %v, want 1", res.Commits)
	}
	if n := gitrepo.Opens() - before; n != 1 {
		t.Fatalf("one consolidation opened the repository %d times, want 1", n)
	}

	// A handle given in Options is used as is: no open at all, and the
	// handle sees the commit it made (a second run plans nothing).
	repo, err := gitrepo.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer repo.Close()
	put(t, st, f.trace(traceSpec{url: starsURL, intent: "star count", session: "c", at: day0.Add(-time.Minute), ok: true, steps: starsRoute}))
	before = gitrepo.Opens()
	opts := at(day0)
	opts.Repo = repo
	head := gitcli.Run(t, dir, "rev-parse", "HEAD")
	for i, want := range []int{1, 0} {
		res, err := Run(ctx, st, opts)
		if err != nil {
			t.Fatal(err)
		}
		// One more success of the same route: evidence, on the state ref;
		// the facts on main do not move (no main commit).
		if got := len(res.Commits); got != 0 || (res.State != "") != (want == 1) {
			t.Fatalf("run %d: main commits %v, state commit %q; want no main commit and %d state commit", i, res.Commits, res.State, want)
		}
	}
	if h := gitcli.Run(t, dir, "rev-parse", "HEAD"); h != head {
		t.Fatalf("a success of the same route moved main from %s to %s", head, h)
	}
	if n := gitrepo.Opens() - before; n != 0 {
		t.Fatalf("runs with Options.Repo opened the repository %d times, want 0", n)
	}
	if h, err := repo.Head(ctx); err != nil || h != gitcli.Run(t, dir, "rev-parse", "HEAD") {
		t.Fatalf("handle's HEAD %q, %v; git says %s", h, err, gitcli.Run(t, dir, "rev-parse", "HEAD"))
	}
	assertGitClean(t, dir)
}

// Evidence that decayed below compact_below_weight is compacted by the
// consolidation that meets it: one commit, the file shrinks, the entry's
// counts and status stay; a second run at the same time changes nothing and
// commits nothing; new runs still fold and count once.
func TestRunCompactsDecayedEvidence(t *testing.T) {
	ctx := context.Background()
	st, dir := newRepoTree(t)
	f := newFx(17)
	var ts []*engine.Trace
	for i := range 12 {
		ts = append(ts, f.trace(traceSpec{url: starsURL, intent: "star count", session: fmt.Sprintf("s%d", i%3), at: day0.Add(time.Duration(i) * time.Hour), ok: true, steps: starsRoute}))
	}
	put(t, st, ts...)
	if _, err := Run(ctx, st, at(day0.Add(days(1)))); err != nil {
		t.Fatal(err)
	}
	x0, err := st.Experience(ctx, "github.com", "star-count")
	if err != nil || len(x0.Evidence) != 12 || x0.Digest != nil {
		t.Fatalf("after the first run: %v, %+v", err, x0)
	}
	// A year later every run weighs 0.5^12: compacted (its traces expire too).
	later := day0.Add(days(365))
	res, err := Run(ctx, st, at(later))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Commits) == 0 || !strings.Contains(res.Plan.String(), "compact github.com/star-count") {
		t.Fatalf("no compaction a year later: %s, commits %v", res.Plan, res.Commits)
	}
	x1, err := st.Experience(ctx, "github.com", "star-count")
	if err != nil {
		t.Fatal(err)
	}
	if len(x1.Evidence) != 0 || x1.Digest == nil || x1.Digest.Successes != 12 || x1.Successes != 12 || x1.Attempts != 12 || len(x1.Digest.Sessions) != 3 {
		t.Fatalf("compacted experience: %d items, digest %+v, totals %d/%d", len(x1.Evidence), x1.Digest, x1.Attempts, x1.Successes)
	}
	assertGitClean(t, dir)
	head, digest := gitcli.Run(t, dir, "rev-parse", "HEAD"), treeDigest(t, dir)
	stateTip := gitcli.Run(t, dir, "rev-parse", gitrepo.StateRef.String())
	res, err = Run(ctx, st, at(later))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Plan.Empty() || len(res.Commits) != 0 || len(res.Written) != 0 {
		t.Fatalf("second run did something: %s, commits %v, written %v", res.Plan, res.Commits, res.Written)
	}
	if h := gitcli.Run(t, dir, "rev-parse", "HEAD"); h != head {
		t.Fatalf("second run committed %s", h)
	}
	if h := gitcli.Run(t, dir, "rev-parse", gitrepo.StateRef.String()); h != stateTip {
		t.Fatalf("second run committed %s on the state ref", h)
	}
	if d := treeDigest(t, dir); d != digest {
		t.Fatalf("second run changed the tree:\n%s\n---\n%s", d, digest)
	}
	// A new run folds and counts once on top of the digest.
	fresh := f.trace(traceSpec{url: starsURL, intent: "star count", session: "s9", at: later.Add(-time.Hour), ok: true, steps: starsRoute})
	put(t, st, fresh)
	if _, err := Run(ctx, st, at(later)); err != nil {
		t.Fatal(err)
	}
	x2, err := st.Experience(ctx, "github.com", "star-count")
	if err != nil || len(x2.Evidence) != 1 || x2.Successes != 13 || x2.Digest.Successes != 12 {
		t.Fatalf("after a new run: %v, %d items, %d successes", err, len(x2.Evidence), x2.Successes)
	}
}

// A tree made the old way (traces and experience committed on main, as pem
// did before the state ref) is moved by the first consolidation of this pem:
// the traces on main and the ones it folds go into the state, main untracks
// them in one commit, and a run with nothing to fold moves them too.
func TestRunMovesAnOldStyleTree(t *testing.T) {
	ctx := context.Background()
	st, dir := newRepoTree(t)
	f := newFx(21)
	// Old style: an ignore file without the state's lines, everything on main.
	if err := os.WriteFile(filepath.Join(dir, ".gitignore"), []byte(".pem.lock\n*.tmp\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := []*engine.Trace{
		f.trace(traceSpec{url: starsURL, intent: "star count", session: "a", at: day0.Add(-days(2)), ok: true, steps: starsRoute}),
		f.trace(traceSpec{url: starsURL, intent: "star count", session: "b", at: day0.Add(-days(2) + time.Minute), ok: true, steps: starsRoute}),
	}
	put(t, st, old...)
	gitcli.Run(t, dir, "add", "-A")
	gitcli.Run(t, dir, "commit", "-qm", "traces committed on main, the old way")
	oldHead := gitcli.Run(t, dir, "rev-parse", "HEAD")

	fresh := f.trace(traceSpec{url: starsURL, intent: "star count", session: "c", at: day0.Add(-time.Hour), ok: true, steps: starsRoute})
	put(t, st, fresh)
	res, err := Run(ctx, st, at(day0))
	if err != nil {
		t.Fatal(err)
	}
	if res.Moved != 4 || res.State == "" { // 2 traces and the two .gitkeep files of the old layout
		t.Fatalf("moved %d files, state %q; want the 4 files main tracked", res.Moved, res.State)
	}
	if got := gitcli.Run(t, dir, "log", "--format=%s", oldHead+"..HEAD"); !strings.Contains(got, "pem: move traces/ and experience/ to refs/pem/state") {
		t.Fatalf("main since the old head:\n%s", got)
	}
	state := gitcli.Run(t, dir, "ls-tree", "-r", "--name-only", gitrepo.StateRef.String())
	for _, tr := range append(old, fresh) {
		if !strings.Contains(state, store.TracePath(store.RefOf(tr))) {
			t.Fatalf("state lacks %s:\n%s", store.TracePath(store.RefOf(tr)), state)
		}
	}
	if ign, _ := os.ReadFile(filepath.Join(dir, ".gitignore")); !strings.Contains(string(ign), store.StateIgnore) {
		t.Fatalf(".gitignore %q lacks the state's lines", ign)
	}
	if got := gitcli.Run(t, dir, "show", "HEAD:.gitignore"); !strings.Contains(got, "/traces/") {
		t.Fatalf(".gitignore on main: %q", got)
	}
	assertGitClean(t, dir)
	x, err := st.Experience(ctx, "github.com", "star-count")
	if err != nil || x.Attempts != 3 {
		t.Fatalf("experience after the move: %v, %v; want 3 attempts", x, err)
	}
	if out := gitcli.Run(t, dir, "status", "--porcelain", "--untracked-files=all"); out != "" {
		t.Fatalf("git status after the move:\n%s", out)
	}

	// An old pem committed everything again (a clone not updated yet): the
	// next run has nothing to fold and still moves it.
	gitcli.Run(t, dir, "add", "-f", "traces", "experience")
	gitcli.Run(t, dir, "commit", "-qm", "an old pem committed the state on main")
	res, err = Run(ctx, st, at(day0))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Plan.Empty() || res.Moved == 0 || len(res.Commits) != 1 {
		t.Fatalf("a run with nothing to fold: plan %s, moved %d, commits %v", res.Plan, res.Moved, res.Commits)
	}
	if got := gitcli.Run(t, dir, "ls-tree", "-r", "--name-only", "HEAD"); strings.Contains(got, "traces/") || strings.Contains(got, "experience/") {
		t.Fatalf("main still tracks the state:\n%s", got)
	}
	// Nothing more: no commit.
	head := gitcli.Run(t, dir, "rev-parse", "HEAD")
	if res, err = Run(ctx, st, at(day0)); err != nil || len(res.Commits) != 0 || res.State != "" {
		t.Fatalf("third run: %+v, %v", res, err)
	}
	if gitcli.Run(t, dir, "rev-parse", "HEAD") != head {
		t.Fatal("third run committed")
	}
}
