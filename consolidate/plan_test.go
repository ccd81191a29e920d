package consolidate

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store"
	"github.com/pemdev/pem/store/gitrepo"
)

var update = flag.Bool("update", false, "rewrite testdata/*/plan.golden")

// copyTree copies a fixture tree into a fresh temporary directory.
func copyTree(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func caseNow(t testing.TB, dir string) time.Time {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "case.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "now: "); ok {
			now, err := time.Parse(time.RFC3339, strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return now
		}
	}
	t.Fatalf("%s/case.yaml has no now:", dir)
	return time.Time{}
}

// renderPlan is what the golden files hold: the plan as pem consolidate
// --dry-run prints it, the commits it would make, and the facts it writes.
func renderPlan(t testing.TB, plan *Changeset) string {
	t.Helper()
	var b strings.Builder
	b.WriteString(plan.String())
	state, reqs := commitRequests(plan)
	if len(state.Paths) > 0 {
		squash := ""
		if state.Squash {
			squash = ", a snapshot"
		}
		fmt.Fprintf(&b, "\n=== state commit on %s (%d paths%s)\n%s\n", gitrepo.StateRef, len(state.Paths), squash, state.Message)
	}
	for _, req := range reqs {
		if len(req.Paths) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n=== commit (%d paths)\n%s\n", len(req.Paths), req.Message)
	}
	for _, e := range plan.Entries {
		if e.Experience != nil {
			x := e.Experience
			fmt.Fprintf(&b, "\n=== experience %s: attempts %d, successes %d, failures %d, confidence %.2f (S %.2f F %.2f), sessions %d\n",
				e.Key, x.Attempts, x.Successes, x.Failures, e.Score.Confidence, e.Score.S, e.Score.F, e.Score.Sessions)
		}
		if e.Facts != nil {
			data, err := store.Marshal(e.Facts)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "\n=== %s\n%s", store.FactsPath(e.Key.Domain, e.Key.IntentKey), data)
		}
	}
	for _, s := range plan.Sites {
		data, err := store.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "\n=== %s\n%s", store.SitePath(s.Domain), data)
	}
	return b.String()
}

func TestGoldenPlans(t *testing.T) {
	dirs, err := filepath.Glob("testdata/*/tree")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no fixtures in testdata/*/tree (%v)", err)
	}
	for _, treeDir := range dirs {
		caseDir := filepath.Dir(treeDir)
		name := filepath.Base(caseDir)
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st, err := store.Open(copyTree(t, treeDir), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			now := caseNow(t, caseDir)
			in, err := Load(ctx, st, LoadOptions{Now: now})
			if err != nil {
				t.Fatal(err)
			}
			got := renderPlan(t, Plan(now, in))
			golden := filepath.Join(caseDir, "plan.golden")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./consolidate -run GoldenPlans -update)", err)
			}
			if got != string(want) {
				t.Errorf("plan differs from %s (-update to accept):\n--- got\n%s\n--- want\n%s", golden, got, want)
			}
		})
	}
}

// loadCase loads a fixture's input.
func loadCase(t *testing.T, name string) (Input, time.Time) {
	t.Helper()
	st, err := store.Open(copyTree(t, filepath.Join("testdata", name, "tree")), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := caseNow(t, filepath.Join("testdata", name))
	in, err := Load(context.Background(), st, LoadOptions{Now: now, All: true})
	if err != nil {
		t.Fatal(err)
	}
	return in, now
}

func TestPlanIsPureAndOrderIndependent(t *testing.T) {
	in, now := loadCase(t, "contest-frozen")
	before := renderInput(t, in)
	want := renderPlan(t, Plan(now, in))
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 5; i++ {
		rng.Shuffle(len(in.Traces), func(a, b int) { in.Traces[a], in.Traces[b] = in.Traces[b], in.Traces[a] })
		if got := renderPlan(t, Plan(now, in)); got != want {
			t.Fatalf("plan depends on trace order:\n%s\n---\n%s", got, want)
		}
	}
	if after := renderInput(t, in); after != before {
		t.Fatalf("Plan changed its input")
	}
}

func renderInput(t *testing.T, in Input) string {
	var b strings.Builder
	for k, x := range in.Experience {
		data, _ := store.Marshal(x)
		fmt.Fprintf(&b, "%s\n%s", k, data)
	}
	for k, f := range in.Facts {
		data, _ := store.Marshal(f)
		fmt.Fprintf(&b, "%s\n%s", k, data)
	}
	return b.String()
}

func TestPlanFrozenContentUnchanged(t *testing.T) {
	in, now := loadCase(t, "contest-frozen")
	k := Key{"github.com", "star-count"}
	before := in.Facts[k]
	plan := Plan(now, in)
	var e *Entry
	for _, x := range plan.Entries {
		if x.Key == k {
			e = x
		}
	}
	if e == nil || e.Facts == nil {
		t.Fatal("no facts change planned for the contested entry")
	}
	if e.Facts.Status != engine.Contested {
		t.Fatalf("status %s, want contested", e.Facts.Status)
	}
	if e.Facts.ContentHash() != before.ContentHash() || e.Facts.Revision != before.Revision {
		t.Fatalf("frozen content changed: r%s → r%s", before.Revision, e.Facts.ContentHash())
	}
	if plan.Count(KindUpdate) != 0 {
		t.Fatalf("an update of frozen content was planned:\n%s", plan)
	}
}

func TestPlanSkipsFoldedAndReappearingTraces(t *testing.T) {
	in, now := loadCase(t, "expire")
	k := Key{"github.com", "search-issues"}
	x := in.Experience[k]
	// A trace that expired long ago (only its evidence is left) comes back
	// from an old branch: it must not count again.
	old := &engine.Trace{Format: 1, ID: x.Evidence[0].Trace, Domain: k.Domain, IntentKey: k.IntentKey, Intent: "search issues",
		Outcome: engine.Success, StartedAt: x.Evidence[0].At}
	in.Traces = append(in.Traces, old)
	plan := Plan(now, in)
	if !strings.Contains(plan.String(), "skip trace "+old.ID+": already folded into github.com/search-issues") {
		t.Fatalf("reappearing trace not skipped:\n%s", plan)
	}
	for _, e := range plan.Entries {
		if e.Key == k && e.Experience != nil && e.Experience.Successes != x.Successes {
			t.Fatalf("successes %d → %d: a folded trace counted twice", x.Successes, e.Experience.Successes)
		}
	}
}

func TestRankSelectorsBySuccess(t *testing.T) {
	stats := map[string]*engine.SelectorStats{"a": {OK: 1, Fail: 3}, "b": {OK: 5}, "c": {OK: 5, Fail: 1}}
	got := rankSelectors([]string{"a", "c", "b", "d", "a"}, stats)
	if strings.Join(got, ",") != "b,c,a,d" {
		t.Fatalf("ranked %v", got)
	}
}

// TestLoadOnlyWhatChangesAndCache checks that the plan made from Load's
// partial input (only entries the plan can change, summaries from the cache
// for the rest) equals the plan made from every entry, cold and warm, and
// that a file changed behind the cache's back is read again.
func TestLoadOnlyWhatChangesAndCache(t *testing.T) {
	ctx := context.Background()
	dirs, _ := filepath.Glob("testdata/*/tree")
	for _, treeDir := range dirs {
		name := filepath.Base(filepath.Dir(treeDir))
		t.Run(name, func(t *testing.T) {
			dir := copyTree(t, treeDir)
			if err := gitrepo.Init(ctx, dir); err != nil {
				t.Fatal(err)
			}
			now := caseNow(t, filepath.Dir(treeDir))
			plan := func(o LoadOptions) string {
				st, err := store.Open(dir, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer st.Close()
				repo, err := gitrepo.Open(ctx, dir)
				if err != nil {
					t.Fatal(err)
				}
				defer repo.Close()
				o.Now, o.Repo = now, repo
				in, err := Load(ctx, st, o)
				if err != nil {
					t.Fatal(err)
				}
				return renderPlan(t, Plan(now, in))
			}
			all := plan(LoadOptions{All: true})
			for i, mode := range []string{"cold", "warm"} {
				if i == 1 {
					// Age the files past the racy window so the cache trusts them.
					old := time.Now().Add(-time.Hour)
					filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
						if err == nil && !d.IsDir() && !strings.Contains(p, ".git") {
							os.Chtimes(p, old, old)
						}
						return nil
					})
					os.Remove(filepath.Join(dir, ".git", cacheName))
					plan(LoadOptions{}) // writes the cache
				}
				if got := plan(LoadOptions{}); got != all {
					t.Fatalf("%s: partial load plans differently:\n%s\n--- all\n%s", mode, got, all)
				}
			}
		})
	}

	// A facts file changed behind the cache (same size, new mtime) is re-read.
	dir := copyTree(t, filepath.Join("testdata", "decay", "tree"))
	if err := gitrepo.Init(ctx, dir); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.Contains(p, ".git") {
			os.Chtimes(p, old, old)
		}
		return nil
	})
	now := caseNow(t, filepath.Join("testdata", "decay"))
	load := func() *Changeset {
		st, _ := store.Open(dir, nil)
		defer st.Close()
		repo, err := gitrepo.Open(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		defer repo.Close()
		in, err := Load(ctx, st, LoadOptions{Now: now, Repo: repo})
		if err != nil {
			t.Fatal(err)
		}
		return Plan(now, in)
	}
	if p := load(); p.Count(KindContest) != 1 {
		t.Fatalf("decay case: %s", p)
	}
	p := filepath.Join(dir, "facts", "github.com", "star-count.yaml")
	data, _ := os.ReadFile(p)
	data = bytes.Replace(data, []byte("status: verified"), []byte("status: retired\n"[:len("status: verified")]), 1)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if pl := load(); pl.Count(KindContest) != 0 {
		t.Fatalf("a retired entry was contested: the cache served a stale status\n%s", pl)
	}
}
