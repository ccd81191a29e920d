package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store"
	"github.com/pemdev/pem/store/gitrepo"
	"github.com/pemdev/pem/store/storetest"
	"github.com/pemdev/pem/store/storetest/gitcli"
	"github.com/pemdev/pem/store/treegen"
)

// These tests use the real git CLI in temporary directories. git calls the
// merge driver as the command "pem": TestMain (testscript.Main) put a copy of
// this test binary named pem first on PATH, and that copy runs main() — the
// real pem — when invoked under that name.

var shareT0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

// shareTeam is one clone that records runs and consolidates them itself.
type shareTeam struct {
	name string
	dir  string
	s    *store.Store
	rnd  *rand.Rand
}

func shareOpen(t *testing.T, name, dir string, seed int64) *shareTeam {
	s, err := store.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &shareTeam{name: name, dir: dir, s: s, rnd: rand.New(rand.NewSource(seed))}
}

// run records a trace and folds it into experience, as a local consolidation would.
func (tm *shareTeam) run(t *testing.T, domain, intent string, minute int, ok bool, sels ...string) string {
	t.Helper()
	ctx := context.Background()
	at := shareT0.Add(time.Duration(minute) * time.Minute)
	id, err := engine.NewTraceID(at, tm.rnd)
	if err != nil {
		t.Fatal(err)
	}
	tr := &engine.Trace{Format: engine.Format, ID: id, Writer: tm.name, Session: tm.name + "-session", Intent: intent,
		IntentKey: engine.IntentKey(intent), URL: "https://" + domain + "/repo", Domain: domain, URLPattern: domain + "/repo",
		Outcome: engine.Success, StartedAt: at, DurationMs: 1200}
	tr.Steps = []engine.Step{{Seq: 1, Action: "navigate", URL: tr.URL, OK: true}}
	for i, s := range sels {
		tr.Steps = append(tr.Steps, engine.Step{Seq: i + 2, Action: "get_text", Selector: s, OK: ok})
	}
	if !ok {
		tr.Outcome, tr.FailureCategory, tr.Error = engine.Failure, engine.SelectorDrift, "no element matches"
	}
	if _, err := tm.s.PutTrace(ctx, tr); err != nil {
		t.Fatal(err)
	}
	x, err := tm.s.Experience(ctx, domain, tr.IntentKey)
	if err != nil {
		x = &engine.Experience{}
	}
	x.Fold(tr)
	if _, err := tm.s.PutExperience(ctx, x); err != nil {
		t.Fatal(err)
	}
	return id
}

func (tm *shareTeam) facts(t *testing.T, domain, intent string, edit func(*engine.Facts)) {
	t.Helper()
	ctx := context.Background()
	f, err := tm.s.Facts(ctx, domain, engine.IntentKey(intent))
	if err != nil {
		f = &engine.Facts{Format: engine.Format, Domain: domain, Intent: intent, IntentKey: engine.IntentKey(intent), Status: engine.Hypothesis}
	}
	edit(f)
	f.Revision = f.ContentHash()
	if _, err := tm.s.PutFacts(ctx, f); err != nil {
		t.Fatal(err)
	}
}

func shareEvidenceIDs(t *testing.T, dir, domain, key string) (ids []string, x *engine.Experience) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, store.ExperiencePath(domain, key)))
	if err != nil {
		t.Fatal(err)
	}
	x = &engine.Experience{}
	if err := store.Unmarshal(data, x, store.KindExperience); err != nil {
		t.Fatalf("merged experience does not parse: %v\n%s", err, data)
	}
	for _, e := range x.Evidence {
		ids = append(ids, e.Trace)
	}
	sort.Strings(ids)
	return ids, x
}

func shareSorted(sets ...[]string) []string {
	m := map[string]bool{}
	for _, s := range sets {
		for _, x := range s {
			m[x] = true
		}
	}
	var out []string
	for x := range m {
		out = append(out, x)
	}
	sort.Strings(out)
	return out
}

// shareSetup makes an origin repository with a shared entry, and three team
// branches that each ran and consolidated locally: more evidence for the
// shared entry, its own facts edit, and (teams a and b) the same new entry
// created on both sides with no ancestor. Plus two trace-only branches.
func shareSetup(t *testing.T) (origin string, want map[string][]string) {
	ctx := context.Background()
	root := t.TempDir()
	origin = filepath.Join(root, "origin")
	if _, err := store.Init(ctx, origin); err != nil {
		t.Fatal(err)
	}
	oldStyleIgnore(t, origin) // merges of experience on branches: a tree from before the state ref
	gitcli.Run(t, root, "init", "-q", "-b", "main", origin)
	base := shareOpen(t, "base", origin, 1)
	const stars, newer = "find stars", "count forks"
	b1 := base.run(t, "example.com", stars, 0, true, "#stars")
	b2 := base.run(t, "example.com", stars, 1, true, "#stars")
	base.facts(t, "example.com", stars, func(f *engine.Facts) {
		f.Status = engine.Candidate
		f.URLPatterns = []string{"example.com/repo"}
		f.Selectors = map[string]engine.Selector{"stars": {Primary: "#stars"}}
		f.InteractionHints = []string{"wait for the counter"}
	})
	gitcli.Run(t, origin, "add", "-A")
	gitcli.Run(t, origin, "commit", "-q", "-m", "base")

	want = map[string][]string{"example.com/find-stars": {b1, b2}}
	type plan struct {
		name string
		work func(tm *shareTeam) (shared, fresh []string)
	}
	plans := []plan{
		{"a", func(tm *shareTeam) ([]string, []string) {
			s := []string{tm.run(t, "example.com", stars, 10, true, "#stars"), tm.run(t, "example.com", stars, 11, false, "#stars")}
			tm.facts(t, "example.com", stars, func(f *engine.Facts) { f.InteractionHints = append(f.InteractionHints, "team a: scroll down") })
			n := []string{tm.run(t, "forks.example", newer, 12, true, "#forks")}
			tm.facts(t, "forks.example", newer, func(f *engine.Facts) {
				f.Selectors = map[string]engine.Selector{"forks": {Primary: "#forks"}}
			})
			return s, n
		}},
		{"b", func(tm *shareTeam) ([]string, []string) {
			s := []string{tm.run(t, "example.com", stars, 20, true, "#stars", "#watchers")}
			tm.facts(t, "example.com", stars, func(f *engine.Facts) {
				f.Selectors["watchers"] = engine.Selector{Primary: "#watchers"}
				f.AntiPatterns = []string{".old-counter"}
			})
			n := []string{tm.run(t, "forks.example", newer, 21, true, "#fork-count"), tm.run(t, "forks.example", newer, 22, true, "#fork-count")}
			tm.facts(t, "forks.example", newer, func(f *engine.Facts) {
				f.Selectors = map[string]engine.Selector{"forks": {Primary: "#fork-count"}}
				f.InteractionHints = []string{"team b hint"}
			})
			return s, n
		}},
		{"c", func(tm *shareTeam) ([]string, []string) {
			s := []string{tm.run(t, "example.com", stars, 30, true, "#stars"), tm.run(t, "example.com", stars, 31, true, "#stars"), tm.run(t, "example.com", stars, 32, true, "#stars")}
			tm.facts(t, "example.com", stars, func(f *engine.Facts) {
				f.KnownBlockers = []engine.Blocker{{Type: "cookie_banner", Selector: "#accept", Action: "click"}}
			})
			return s, nil
		}},
	}
	for i, p := range plans {
		dir := filepath.Join(root, "team-"+p.name)
		gitcli.Run(t, root, "clone", "-q", origin, dir)
		gitcli.Run(t, dir, "checkout", "-q", "-b", "team-"+p.name)
		tm := shareOpen(t, p.name, dir, int64(10+i))
		shared, fresh := p.work(tm)
		want["example.com/find-stars"] = append(want["example.com/find-stars"], shared...)
		want["forks.example/count-forks"] = append(want["forks.example/count-forks"], fresh...)
		gitcli.Run(t, dir, "add", "-A")
		gitcli.Run(t, dir, "commit", "-q", "-m", "team "+p.name+": runs and a local consolidation")
		gitcli.Run(t, dir, "push", "-q", "origin", "team-"+p.name)
	}
	// Two trace-only contributions (what a pull request from a contributor holds).
	for i, name := range []string{"traces-x", "traces-y"} {
		dir := filepath.Join(root, name)
		gitcli.Run(t, root, "clone", "-q", origin, dir)
		gitcli.Run(t, dir, "checkout", "-q", "-b", name)
		tm := shareOpen(t, name, dir, int64(50+i))
		id, err := engine.NewTraceID(shareT0.Add(time.Hour), tm.rnd)
		if err != nil {
			t.Fatal(err)
		}
		tr := &engine.Trace{Format: engine.Format, ID: id, Intent: stars, IntentKey: "find-stars", URL: "https://example.com/repo",
			Domain: "example.com", URLPattern: "example.com/repo", Outcome: engine.Success, StartedAt: shareT0.Add(time.Hour)}
		if _, err := tm.s.PutTrace(ctx, tr); err != nil {
			t.Fatal(err)
		}
		gitcli.Run(t, dir, "add", "-A")
		gitcli.Run(t, dir, "commit", "-q", "-m", "traces from "+name)
		gitcli.Run(t, dir, "push", "-q", "origin", name)
	}
	for k := range want {
		want[k] = shareSorted(want[k])
	}
	return origin, want
}

// TestThreeTeamsMergeInEveryOrder: three clones that each consolidated
// locally merge with the git CLI in all six orders without a conflict, and
// the merged evidence is exactly the union of the distinct traces.
func TestThreeTeamsMergeInEveryOrder(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is required: install it (Debian: apt-get install git)")
	}
	if p, err := exec.LookPath("pem"); err != nil || !strings.Contains(p, "testscript-main") {
		t.Fatalf("pem on PATH is %q (%v), want the test binary set up by TestMain", p, err)
	}
	origin, want := shareSetup(t)
	root := filepath.Dir(origin)
	orders := [][]string{{"a", "b", "c"}, {"a", "c", "b"}, {"b", "a", "c"}, {"b", "c", "a"}, {"c", "a", "b"}, {"c", "b", "a"}}
	var finals []string
	for _, order := range orders {
		name := strings.Join(order, "")
		dir := filepath.Join(root, "merge-"+name)
		gitcli.Run(t, root, "clone", "-q", origin, dir)
		if code, out, errs := runPem(t, "merge-driver", "--install", dir); code != 0 {
			t.Fatalf("merge-driver --install: %d %s %s", code, out, errs)
		}
		for _, team := range order {
			out, err := gitcli.Output(dir, "merge", "--no-edit", "origin/team-"+team)
			if err != nil {
				t.Fatalf("order %s: merging team %s conflicted: %v\n%s\n%s", name, team, err, out, gitcli.Run(t, dir, "status", "--short"))
			}
		}
		if st := gitcli.Run(t, dir, "status", "--porcelain"); st != "" {
			t.Fatalf("order %s: working tree not clean after merges:\n%s", name, st)
		}
		for entry, ids := range want {
			dom, key, _ := strings.Cut(entry, "/")
			got, x := shareEvidenceIDs(t, dir, dom, key)
			if !reflect.DeepEqual(got, ids) {
				t.Fatalf("order %s: %s evidence = %v\nwant the union %v", name, entry, got, ids)
			}
			if x.Attempts != len(ids) || x.Successes+x.Failures != len(ids) {
				t.Fatalf("order %s: %s counts %d/%d/%d, want %d attempts", name, entry, x.Attempts, x.Successes, x.Failures, len(ids))
			}
		}
		// Facts: every team's additions are there.
		s := shareOpen(t, "check", dir, 0)
		f, err := s.s.Facts(context.Background(), "example.com", "find-stars")
		if err != nil {
			t.Fatalf("order %s: merged facts: %v", name, err)
		}
		hints := strings.Join(f.InteractionHints, "|")
		if !strings.Contains(hints, "team a: scroll down") || f.Selectors["watchers"].Primary != "#watchers" ||
			len(f.KnownBlockers) != 1 || len(f.AntiPatterns) != 1 || f.Revision != f.ContentHash() {
			t.Fatalf("order %s: merged facts lost a team's change: %+v", name, f)
		}
		if code, out, _ := runPem(t, "--knowledge", dir, "check"); code != 0 {
			t.Fatalf("order %s: pem check after the merge: %d\n%s", name, code, out)
		}
		finals = append(finals, gitcli.Run(t, dir, "rev-parse", "HEAD:experience/example.com/find-stars.yaml"))
	}
	// Evidence is a set: every order gives the same experience bytes.
	for i := range finals {
		if finals[i] != finals[0] {
			t.Errorf("order %v gives experience blob %s, order %v gives %s", orders[i], finals[i], orders[0], finals[0])
		}
	}

	// Control: without the driver, the same merge conflicts (so the driver did the work).
	dir := filepath.Join(root, "no-driver")
	gitcli.Run(t, root, "clone", "-q", origin, dir)
	gitcli.Run(t, dir, "merge", "--no-edit", "origin/team-a")
	if out, err := gitcli.Output(dir, "merge", "--no-edit", "origin/team-b"); err == nil {
		t.Fatalf("without the driver the merge succeeded, so the test proves nothing:\n%s", out)
	}
}

// TestTraceOnlyBranchesMergeTree: trace-only contributions merge with plain
// git and with `git merge-tree --write-tree` (what a hosting service's merge
// button computes) with zero conflicts, no driver involved.
func TestTraceOnlyBranchesMergeTree(t *testing.T) {
	origin, _ := shareSetup(t)
	root := filepath.Dir(origin)
	dir := filepath.Join(root, "plain")
	gitcli.Run(t, root, "clone", "-q", origin, dir)
	if out, err := gitcli.Output(dir, "config", "--get", "merge.pem.driver"); err == nil {
		t.Fatalf("a fresh clone has a merge driver configured (%s): the test would not show that plain git suffices", out)
	}
	out, err := gitcli.Output(dir, "merge-tree", "--write-tree", "origin/traces-x", "origin/traces-y")
	if err != nil {
		t.Fatalf("merge-tree reports conflicts: %v\n%s", err, out)
	}
	tree := strings.Fields(out)[0]
	files := gitcli.Run(t, dir, "ls-tree", "-r", "--name-only", tree)
	if n := strings.Count(files, "traces/example.com/"); n != 4 { // two base traces + one per branch
		t.Fatalf("merged tree holds %d traces, want 4:\n%s", n, files)
	}
	// A trace-only branch also merges into a team's consolidation.
	if out, err := gitcli.Output(dir, "merge-tree", "--write-tree", "origin/team-a", "origin/traces-x"); err != nil {
		t.Fatalf("merge-tree of a team branch and a trace branch: %v\n%s", err, out)
	}
	gitcli.Run(t, dir, "merge", "--no-edit", "origin/traces-x")
	gitcli.Run(t, dir, "merge", "--no-edit", "origin/traces-y")
}

// TestMergeDriverUnmergeable: a side that cannot be read exits non-zero and
// leaves ours in place; the driver refuses wrong argument counts.
func TestMergeDriverUnmergeable(t *testing.T) {
	dir := t.TempDir()
	ours := filepath.Join(dir, "ours")
	good := "format: 1\ndomain: example.com\nintent: x\nintent_key: x\nstatus: candidate\n"
	for name, content := range map[string]string{"base": "", "ours": good, "theirs": "{{{ not yaml"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	code, _, errs := runPem(t, "merge-driver", filepath.Join(dir, "base"), ours, filepath.Join(dir, "theirs"), "facts/example.com/x.yaml")
	if code == 0 || !strings.Contains(errs, "their version") {
		t.Fatalf("exit %d, stderr %q: want a non-zero exit naming their version", code, errs)
	}
	shareOnePrefix(t, errs, "pem: merge-driver: facts/example.com/x.yaml: ")
	if data, _ := os.ReadFile(ours); string(data) != good {
		t.Fatalf("ours was changed: %q", data)
	}
	if code, _, _ := runPem(t, "merge-driver", "a", "b"); code != exitUsage {
		t.Fatalf("two arguments: exit %d, want %d", code, exitUsage)
	}
	// A clean facts merge with no ancestor writes into ours.
	theirs := "format: 1\ndomain: example.com\nintent: x\nintent_key: x\nstatus: hypothesis\ninteraction_hints:\n  - from theirs\n"
	if err := os.WriteFile(filepath.Join(dir, "theirs"), []byte(theirs), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runPem(t, "merge-driver", filepath.Join(dir, "base"), ours, filepath.Join(dir, "theirs")); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var f engine.Facts
	data, _ := os.ReadFile(ours)
	if err := store.Unmarshal(data, &f, store.KindFacts); err != nil {
		t.Fatal(err)
	}
	if f.Status != engine.Hypothesis || len(f.InteractionHints) != 1 {
		t.Fatalf("merged = %+v", f)
	}
}

// oldStyleIgnore gives the tree at dir the .gitignore pem init wrote before
// the state ref (gitrepo.StateRef): traces and experience are committed on
// the branch, as in every tree made then — the history pem log, diff, check
// --pr and the merge driver must keep reading.
func oldStyleIgnore(t testing.TB, dir string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, ".gitignore"), []byte(".pem.lock\n*.tmp\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// shareHistoryRepo makes a repository with a short, known history of one entry.
func shareHistoryRepo(t *testing.T) (dir string, commits []string) {
	ctx := context.Background()
	dir = filepath.Join(t.TempDir(), "k")
	if _, err := store.Init(ctx, dir); err != nil {
		t.Fatal(err)
	}
	oldStyleIgnore(t, dir) // a history with experience on main: log, diff and check --pr read it
	gitcli.Run(t, dir, "init", "-q", "-b", "main")
	gitcli.Run(t, dir, "add", "-A")
	gitcli.Run(t, dir, "commit", "-q", "-m", "pem: init")
	tm := shareOpen(t, "solo", dir, 7)
	commit := func(msg string) {
		gitcli.Run(t, dir, "add", "-A")
		gitcli.Run(t, dir, "commit", "-q", "-m", msg)
		commits = append(commits, gitcli.Run(t, dir, "rev-parse", "HEAD"))
	}
	tm.run(t, "example.com", "find stars", 0, true, "#stars")
	tm.facts(t, "example.com", "find stars", func(f *engine.Facts) {
		f.Status = engine.Candidate
		f.Selectors = map[string]engine.Selector{"stars": {Primary: "#stars"}}
	})
	commit("pem: consolidate 1 trace")
	tm.run(t, "other.example", "anything", 1, true, "#x")
	commit("pem: consolidate other")
	tm.run(t, "example.com", "find stars", 2, true, "#stars")
	tm.facts(t, "example.com", "find stars", func(f *engine.Facts) {
		f.Status = engine.Verified
		f.Selectors["forks"] = engine.Selector{Primary: "#forks"}
		f.Provenance.LastVerified = shareT0
	})
	commit("pem: verify example.com/find-stars")
	return dir, commits
}

func TestLogCommand(t *testing.T) {
	dir, commits := shareHistoryRepo(t)
	code, out, errs := runPem(t, "--knowledge", dir, "log", "example.com/find-stars")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var heads []string
	for _, l := range lines {
		if !strings.HasPrefix(l, " ") {
			heads = append(heads, l)
		}
	}
	if len(heads) != 2 || !strings.HasPrefix(heads[0], commits[2][:10]) || !strings.Contains(heads[0], "pem: verify example.com/find-stars") ||
		!strings.HasPrefix(heads[1], commits[0][:10]) {
		t.Fatalf("log lists the wrong commits:\n%s", out)
	}
	if !strings.Contains(out, "facts/example.com/find-stars.yaml: changed, status verified, revision r") ||
		!strings.Contains(out, "facts/example.com/find-stars.yaml: added, status candidate") ||
		!strings.Contains(out, "experience/example.com/find-stars.yaml: changed, 2 run(s): 2 succeeded, 0 failed") {
		t.Fatalf("log does not show status, revision and evidence:\n%s", out)
	}
	// The intent's text finds the same entry; a domain lists its commits.
	if _, out2, _ := runPem(t, "--knowledge", dir, "log", "example.com/find stars"); out2 != out {
		t.Fatalf("intent text and key differ:\n%s\n%s", out2, out)
	}
	if _, out, _ := runPem(t, "--knowledge", dir, "log", "other.example", "--limit", "1"); strings.Count(out, "pem: consolidate other") != 1 {
		t.Fatalf("domain log:\n%s", out)
	}
	if code, out, errs := runPem(t, "--knowledge", dir, "log", "nothing.example/x"); code != exitNotFound || out != "" || !strings.Contains(errs, "no entry nothing.example/x") {
		t.Fatalf("an unknown entry: %d %q %s", code, out, errs)
	}
}

func TestDiffCommand(t *testing.T) {
	dir, commits := shareHistoryRepo(t)
	code, out, errs := runPem(t, "--knowledge", dir, "diff")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"1 entry changed, 1 new trace(s), 0 expired", "example.com/find-stars", "status: candidate → verified",
		"selectors added: forks: #forks", "evidence: 1 → 2 runs", "example.com: +1 -0"} {
		if !strings.Contains(out, want) {
			t.Errorf("diff output lacks %q:\n%s", want, out)
		}
	}
	code, md, _ := runPem(t, "--knowledge", dir, "diff", commits[0], commits[2], "--format", "markdown")
	if code != 0 || !strings.HasPrefix(md, "## pem: knowledge changes `"+commits[0][:10]+"`..`"+commits[2][:10]+"`") ||
		!strings.Contains(md, "### `other.example` / `anything`") || !strings.Contains(md, "| `other.example` | 1 | 0 |") {
		t.Fatalf("markdown diff:\n%s", md)
	}
	if code, _, errs := runPem(t, "--knowledge", dir, "diff", "--format", "html"); code != exitUsage {
		t.Fatalf("a bad format: exit %d %s", code, errs)
	}
	if code, _, errs := runPem(t, "--knowledge", dir, "diff", "no-such-branch"); code != exitNotFound || !strings.Contains(errs, "no-such-branch") {
		t.Fatalf("a bad revision: exit %d %s", code, errs)
	}
	// The first commit has no parent: diff against the empty tree.
	fresh := filepath.Join(t.TempDir(), "k")
	if _, err := store.Init(context.Background(), fresh); err != nil {
		t.Fatal(err)
	}
	gitcli.Run(t, fresh, "init", "-q", "-b", "main")
	gitcli.Run(t, fresh, "add", "-A")
	gitcli.Run(t, fresh, "commit", "-q", "-m", "init")
	if code, out, errs := runPem(t, "--knowledge", fresh, "diff"); code != 0 || !strings.Contains(out, "(empty)..") {
		t.Fatalf("diff on the first commit: %d %s %s", code, out, errs)
	}
}

func TestCheckCommand(t *testing.T) {
	dir, _ := shareHistoryRepo(t)
	if code, out, errs := runPem(t, "--knowledge", dir, "check"); code != 0 || !strings.HasPrefix(out, "ok: ") {
		t.Fatalf("a sound tree: exit %d\n%s%s", code, out, errs)
	}
	problems := func(t *testing.T, dir string, args ...string) []string {
		t.Helper()
		code, out, errs := runPem(t, append([]string{"--knowledge", dir, "check"}, args...)...)
		if code == 0 {
			t.Fatalf("pem check passed, want problems:\n%s", out)
		}
		if !strings.Contains(errs, "problem(s)") {
			t.Errorf("stderr does not summarize: %q", errs)
		}
		shareOnePrefix(t, errs, "pem: check: ")
		return strings.Split(strings.TrimSpace(out), "\n")
	}
	one := func(t *testing.T, lines []string, kind, substr string) {
		t.Helper()
		for _, l := range lines {
			if strings.HasPrefix(l, kind+": ") && strings.Contains(l, substr) {
				return
			}
		}
		t.Fatalf("no %s problem containing %q in:\n%s", kind, substr, strings.Join(lines, "\n"))
	}

	t.Run("frozen content edited in a commit", func(t *testing.T) {
		dir, _ := shareHistoryRepo(t)
		name := filepath.Join(dir, "facts/example.com/find-stars.yaml")
		data, _ := os.ReadFile(name)
		edited := strings.Replace(string(data), "primary: '#forks'", "primary: '#forks-renamed'", 1)
		if edited == string(data) {
			t.Fatalf("test setup: selector not found in\n%s", data)
		}
		os.WriteFile(name, []byte(edited), 0o644)
		gitcli.Run(t, dir, "commit", "-q", "-am", "hand edit of a verified entry")
		bad := gitcli.Run(t, dir, "rev-parse", "--short=10", "HEAD")
		one(t, problems(t, dir), "frozen", "commit "+bad)
	})
	t.Run("frozen content with a hand-written status", func(t *testing.T) {
		// The status is read from the parsed entry: a verified entry whose
		// status line is quoted by hand is as frozen as one pem wrote.
		dir, _ := shareHistoryRepo(t)
		name := filepath.Join(dir, "facts/example.com/find-stars.yaml")
		data := string(must(os.ReadFile(name)))
		quoted := strings.Replace(data, "status: verified", `status: "verified"`, 1)
		if quoted == data {
			t.Fatalf("test setup: no verified status in\n%s", data)
		}
		os.WriteFile(name, []byte(quoted), 0o644)
		gitcli.Run(t, dir, "commit", "-q", "-am", "quote the status")
		os.WriteFile(name, []byte(strings.Replace(quoted, "primary: '#forks'", "primary: '#forks-renamed'", 1)), 0o644)
		gitcli.Run(t, dir, "commit", "-q", "-am", "hand edit of a verified entry")
		bad := gitcli.Run(t, dir, "rev-parse", "--short=10", "HEAD")
		lines := problems(t, dir)
		one(t, lines, "frozen", "commit "+bad)
		if len(lines) != 1 {
			t.Errorf("want only the edit reported (quoting changes no content):\n%s", strings.Join(lines, "\n"))
		}
	})
	t.Run("lifecycle change is fine", func(t *testing.T) {
		dir, _ := shareHistoryRepo(t)
		s := shareOpen(t, "x", dir, 1)
		s.facts(t, "example.com", "find stars", func(f *engine.Facts) {
			f.Status = engine.Contested
			f.History = append(f.History, engine.Transition{From: engine.Verified, To: engine.Contested, At: shareT0})
		})
		gitcli.Run(t, dir, "commit", "-q", "-am", "contest")
		if code, out, _ := runPem(t, "--knowledge", dir, "check"); code != 0 {
			t.Fatalf("a lifecycle change is reported:\n%s", out)
		}
	})
	t.Run("secrets", func(t *testing.T) {
		dir, _ := shareHistoryRepo(t)
		tok := "ghp_" + strings.Repeat("Z9", 18)
		os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("token "+tok+"\n"), 0o644)
		os.WriteFile(filepath.Join(dir, "more.txt"), []byte("hello\nopen sesame-42\n"), 0o644)
		os.MkdirAll(filepath.Join(dir, ".notes"), 0o755)
		os.WriteFile(filepath.Join(dir, ".notes", "todo"), []byte("token "+tok+"\n"), 0o644)
		os.Symlink(filepath.Join(t.TempDir(), "nowhere"), filepath.Join(dir, "dangling")) // not followed, not an error
		t.Setenv(EnvSecretEnv, "SITE_PW, UNSET_ONE")
		t.Setenv("SITE_PW", "sesame-42")
		lines := problems(t, dir)
		one(t, lines, "secret", "notes.txt: line 1 holds a GitHub token")
		one(t, lines, "secret", "more.txt: line 2 holds the value of $SITE_PW")
		one(t, lines, "secret", ".notes/todo: line 1 holds a GitHub token")
		if strings.Contains(strings.Join(lines, "\n"), "sesame-42") || strings.Contains(strings.Join(lines, "\n"), tok) {
			t.Fatal("check printed a secret")
		}
	})
	t.Run("schema and path safety", func(t *testing.T) {
		dir, _ := shareHistoryRepo(t)
		os.WriteFile(filepath.Join(dir, "facts/example.com/broken.yaml"), []byte("status: [unclosed\n"), 0o644)
		os.Symlink("/etc/passwd", filepath.Join(dir, "facts/example.com/link.yaml"))
		os.WriteFile(filepath.Join(dir, "facts/example.com/Odd Name.yaml"), []byte("x: 1\n"), 0o644)
		lines := problems(t, dir)
		one(t, lines, "schema", "broken.yaml")
		one(t, lines, "path", "link.yaml")
		one(t, lines, "schema", "Odd Name.yaml")
	})
	t.Run("pull request rules", func(t *testing.T) {
		dir, _ := shareHistoryRepo(t)
		gitcli.Run(t, dir, "checkout", "-q", "-b", "contrib")
		tm := shareOpen(t, "contrib", dir, 99)
		tm.run(t, "example.com", "find stars", 50, true, "#stars") // a new trace and a derived-file change
		var trace string
		filepath.WalkDir(filepath.Join(dir, "traces"), func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(p, ".yaml") && trace == "" {
				trace = p
			}
			return nil
		})
		gitcli.Run(t, dir, "add", "-A")
		gitcli.Run(t, dir, "commit", "-q", "-m", "contribution")
		// Edit an existing trace (one that is on main).
		os.WriteFile(trace, []byte(strings.Replace(string(must(os.ReadFile(trace))), "success", "failure", 1)), 0o644)
		gitcli.Run(t, dir, "commit", "-q", "-am", "rewrite history")
		lines := problems(t, dir, "--pr", "main")
		one(t, lines, "derived", "experience/example.com/find-stars.yaml")
		one(t, lines, "trace-edit", "edits a trace")
		for _, l := range lines {
			if strings.HasPrefix(l, "trace-edit") && !strings.Contains(l, filepath.Base(trace)) {
				t.Errorf("a new trace is reported as an edit: %s", l)
			}
		}
		// Only new traces: clean.
		gitcli.Run(t, dir, "checkout", "-q", "main")
		gitcli.Run(t, dir, "checkout", "-q", "-b", "clean")
		tm.run(t, "example.com", "find stars", 60, true, "#stars")
		gitcli.Run(t, dir, "checkout", "--", "experience")
		gitcli.Run(t, dir, "add", "traces")
		gitcli.Run(t, dir, "commit", "-q", "-m", "traces only")
		if code, out, _ := runPem(t, "--knowledge", dir, "check", "--pr", "main"); code != 0 {
			t.Fatalf("a trace-only PR is refused:\n%s", out)
		}
		if code, _, errs := runPem(t, "--knowledge", dir, "check", "--pr", "origin/nope"); code != exitUsage || !strings.Contains(errs, "fetch the base") {
			t.Fatalf("unknown base: %d %s", code, errs)
		}
	})
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestSyncCommand(t *testing.T) {
	root := t.TempDir()
	bare := filepath.Join(root, "shared.git")
	gitcli.Run(t, root, "init", "-q", "--bare", "-b", "main", bare)
	a, b := filepath.Join(root, "a"), filepath.Join(root, "b")
	if code, _, errs := runPem(t, "init", a); code != 0 {
		t.Fatal(errs)
	}
	gitcli.Run(t, a, "remote", "add", "origin", bare)
	gitcli.Run(t, a, "push", "-q", "origin", "main")
	gitcli.Run(t, root, "clone", "-q", bare, b)
	ta, tb := shareOpen(t, "a", a, 1), shareOpen(t, "b", b, 2)
	state := gitrepo.StateRef.String()
	// Sync shares traces on the state ref; consolidation does the rest.
	ta.run(t, "example.com", "find stars", 0, true, "#stars")
	if code, out, errs := runPem(t, "--knowledge", a, "sync"); code != 0 || !strings.Contains(out, "1 trace(s) committed") || !strings.Contains(out, "pushed") || !strings.Contains(out, ", state ") {
		t.Fatalf("sync a: %d %s %s", code, out, errs)
	}
	tb.run(t, "example.com", "find stars", 1, true, "#stars")
	if code, out, errs := runPem(t, "--knowledge", b, "sync", "origin"); code != 0 || !strings.Contains(out, "remote commits taken") || !strings.Contains(out, "1 local commit(s) replayed") {
		t.Fatalf("sync b: %d %s %s", code, out, errs)
	}
	if code, out, errs := runPem(t, "--knowledge", a, "sync"); code != 0 || !strings.Contains(out, "nothing to push") || !strings.Contains(out, "1 file(s) of traces and experience updated") {
		t.Fatalf("sync a again: %d %s %s", code, out, errs)
	}
	if n := strings.Count(gitcli.Run(t, a, "ls-tree", "-r", "--name-only", state, "traces"), ".yaml"); n != 2 {
		t.Fatalf("a's state has %d traces after syncing, want 2", n)
	}
	if n := gitcli.Run(t, a, "ls-files", "traces", "experience"); n != "" {
		t.Fatalf("main tracks state files:\n%s", n)
	}
	if out := gitcli.Run(t, a, "status", "--porcelain"); out != "" {
		t.Fatalf("git status in a:\n%s", out)
	}
	// A local commit on main that is not add-only, while main moved on the
	// remote (a hand edit from a): exit 1 with what to do.
	os.WriteFile(filepath.Join(b, "pem.yaml"), append(must(os.ReadFile(filepath.Join(b, "pem.yaml"))), "# edit\n"...), 0o644)
	gitcli.Run(t, b, "commit", "-q", "-am", "edit policy")
	os.WriteFile(filepath.Join(a, "pem.yaml"), append(must(os.ReadFile(filepath.Join(a, "pem.yaml"))), "# another edit\n"...), 0o644)
	gitcli.Run(t, a, "commit", "-q", "-am", "edit policy elsewhere")
	ta.run(t, "example.com", "find stars", 2, true, "#stars")
	if code, out, errs := runPem(t, "--knowledge", a, "sync"); code != 0 {
		t.Fatalf("sync a with a main commit: %d %s %s", code, out, errs)
	}
	code, _, errs := runPem(t, "--knowledge", b, "sync")
	if code != exitInternal || !strings.Contains(errs, "pull request") || strings.Contains(errs, "report it") {
		t.Fatalf("non-add-only sync: exit %d, %s", code, errs)
	}
	shareOnePrefix(t, errs, "pem: sync: ")
}

// BenchmarkLogVsGit measures `pem log DOMAIN/INTENT` against
// `git log -- <the entry's two files>` on a big tree (treegen: 1,000 domains ×
// 10 intents with facts and experience, PEM_BENCH_LOG_TRACES traces, default
// 30,000: about 50,000 files) with a 100-commit history on top, both run as
// processes, and History.Log in-process. It reports the times and the ratio
// pem/git (goal ≤ 2). Building the tree takes minutes: PEM_BENCH_LOG_DIR keeps
// it in a directory of your choice for the next run.
//
//	go test ./cmd/pem -run '^$' -bench LogVsGit -benchtime 20x
func BenchmarkLogVsGit(b *testing.B) {
	dir, target := shareBigHistory(b)
	dom, key, _ := strings.Cut(target, "/")
	// The real binary, as users run it (the test binary on PATH carries every
	// test dependency's start-up cost).
	pem := filepath.Join(b.TempDir(), "pem")
	if out, err := exec.Command("go", "build", "-o", pem, ".").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	var pemCPU, gitCPU time.Duration
	proc := func(c *exec.Cmd, cpu *time.Duration) []byte {
		var out bytes.Buffer
		c.Stdout = &out
		if err := c.Run(); err != nil {
			b.Fatalf("%s: %v", strings.Join(c.Args, " "), err)
		}
		*cpu += c.ProcessState.UserTime() + c.ProcessState.SystemTime()
		return out.Bytes()
	}
	runPem := func() []byte {
		return proc(exec.Command(pem, "--knowledge", dir, "log", target), &pemCPU)
	}
	runGit := func() []byte {
		c := exec.Command("git", "log", "--first-parent", "--format=%h %aI %s", "--", store.FactsPath(dom, key), store.ExperiencePath(dom, key))
		c.Dir = dir
		return proc(c, &gitCPU)
	}
	runLib := func() int {
		h, err := gitrepo.OpenHistory(dir)
		if err != nil {
			b.Fatal(err)
		}
		defer h.Close()
		es, err := h.Log(context.Background(), []string{store.FactsPath(dom, key), store.ExperiencePath(dom, key)}, 0)
		if err != nil {
			b.Fatal(err)
		}
		return len(es)
	}
	// Same commits found by all three.
	if p, g, l := strings.Count(string(runPem()), "pem: consolidate round"), strings.Count(string(runGit()), "pem: consolidate round"), runLib(); p != g || p != shareBenchCommits/10 || l != p+1 { // History.Log also lists the commit that created the files
		b.Fatalf("pem log found %d commits, git log %d, History.Log %d, want %d", p, g, l, shareBenchCommits/10)
	}
	var pemTime, gitTime, libTime time.Duration
	pemCPU, gitCPU = 0, 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		runPem()
		t1 := time.Now()
		runGit()
		t2 := time.Now()
		runLib()
		pemTime += t1.Sub(t0)
		gitTime += t2.Sub(t1)
		libTime += time.Since(t2)
	}
	b.ReportMetric(float64(pemTime.Microseconds())/float64(b.N)/1000, "pem-ms/op")
	b.ReportMetric(float64(gitTime.Microseconds())/float64(b.N)/1000, "git-ms/op")
	b.ReportMetric(float64(libTime.Microseconds())/float64(b.N)/1000, "inproc-ms/op")
	b.ReportMetric(float64(pemTime)/float64(gitTime), "pem/git")
	// CPU time (user+system) of the processes: what the load of a shared
	// machine does not distort.
	b.ReportMetric(float64(pemCPU.Microseconds())/float64(b.N)/1000, "pem-cpu-ms/op")
	b.ReportMetric(float64(gitCPU.Microseconds())/float64(b.N)/1000, "git-cpu-ms/op")
	b.ReportMetric(float64(pemCPU)/float64(gitCPU), "pem/git-cpu")
}

const shareBenchCommits = 100

var shareBig struct {
	once        sync.Once
	dir, target string
	err         error
}

// shareBigHistory builds (once per process, or reuses PEM_BENCH_LOG_DIR) the
// big tree with its history and returns it and the entry that changed in
// every tenth commit.
func shareBigHistory(b *testing.B) (string, string) {
	const domains, intents = 1000, 10
	target := treegen.Domain(7) + "/" + engine.IntentKey(treegen.Intent(3))
	shareBig.once.Do(func() {
		dir := os.Getenv("PEM_BENCH_LOG_DIR")
		if dir != "" {
			if _, err := os.Stat(filepath.Join(dir, ".git", "pem-bench-done")); err == nil {
				shareBig.dir, shareBig.target = dir, target
				return
			}
			os.RemoveAll(dir)
		} else {
			tmp, err := os.MkdirTemp("", "pem-log-bench-")
			if err != nil {
				shareBig.err = err
				return
			}
			dir = filepath.Join(tmp, "k") // left for the OS to clean: the setup is shared by b.Run rounds
		}
		shareBig.dir, shareBig.target, shareBig.err = dir, target, shareBuildBig(b, dir, domains, intents, target)
	})
	if shareBig.err != nil {
		b.Fatal(shareBig.err)
	}
	return shareBig.dir, shareBig.target
}

func shareBuildBig(b *testing.B, dir string, domains, intents int, target string) error {
	ctx := context.Background()
	traces := 30000
	if v := os.Getenv("PEM_BENCH_LOG_TRACES"); v != "" {
		if _, err := fmt.Sscan(v, &traces); err != nil {
			return fmt.Errorf("PEM_BENCH_LOG_TRACES=%q: %v", v, err)
		}
	}
	start := time.Now()
	if err := treegen.Generate(ctx, dir, domains, intents, traces, 1); err != nil {
		return err
	}
	gitcli.Run(b, dir, "init", "-q", "-b", "main")
	gitcli.Run(b, dir, "config", "gc.auto", "0") // no background gc racing the explicit one
	gitcli.Run(b, dir, "add", "-A")
	gitcli.Run(b, dir, "commit", "-q", "-m", "big tree")
	// 100 commits, each touching five random entries; every tenth also the target.
	dom, key, _ := strings.Cut(target, "/")
	var stream bytes.Buffer
	rng := rand.New(rand.NewSource(2))
	for i := 0; i < shareBenchCommits; i++ {
		msg := fmt.Sprintf("pem: consolidate round %d", i)
		fmt.Fprintf(&stream, "commit refs/heads/main\ncommitter bench <bench@example.com> %d +0000\ndata %d\n%s\n", 1767225600+i*3600, len(msg), msg)
		if i == 0 {
			stream.WriteString("from refs/heads/main^0\n")
		}
		var touch []string
		for k := 0; k < 5; k++ {
			d, j := treegen.Domain(rng.Intn(domains)), engine.IntentKey(treegen.Intent(rng.Intn(intents)))
			touch = append(touch, store.FactsPath(d, j), store.ExperiencePath(d, j))
		}
		if i%10 == 0 {
			touch = append(touch, store.FactsPath(dom, key), store.ExperiencePath(dom, key))
		}
		for _, p := range touch {
			data, err := os.ReadFile(filepath.Join(dir, p))
			if err != nil {
				return err
			}
			content := fmt.Sprintf("# round %d\n%s", i, data)
			fmt.Fprintf(&stream, "M 100644 inline %s\ndata %d\n%s\n", p, len(content), content)
		}
	}
	cmd := exec.Command("git", "fast-import", "--quiet")
	cmd.Dir, cmd.Stdin = dir, &stream
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("git fast-import: %v\n%s", err, out)
	}
	gitcli.Run(b, dir, "reset", "-q", "--hard")
	gitcli.Run(b, dir, "gc", "-q") // a real repository is packed
	files := strings.Count(gitcli.Run(b, dir, "ls-files"), "\n") + 1
	b.Logf("tree: %d files, %d commits, built in %v", files, shareBenchCommits+1, time.Since(start).Round(time.Second))
	return os.WriteFile(filepath.Join(dir, ".git", "pem-bench-done"), nil, 0o644)
}

// TestMergeDriverReadsTracesThroughStore: a trace folded on both sides since
// the ancestor is counted once in the selector stats, because the driver
// reads it from the working tree (through the store) and subtracts it once.
func TestMergeDriverReadsTracesThroughStore(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "k")
	if _, err := store.Init(ctx, dir); err != nil {
		t.Fatal(err)
	}
	tm := shareOpen(t, "a", dir, 1)
	rel := store.ExperiencePath("example.com", engine.IntentKey("find stars"))
	snapshot := func() []byte {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	tm.run(t, "example.com", "find stars", 1, true, "#stars")
	base := snapshot()
	tm.run(t, "example.com", "find stars", 2, true, "#stars") // folded on both sides
	ours := snapshot()
	tm.run(t, "example.com", "find stars", 3, true, "#stars") // theirs only
	theirs := snapshot()

	merge := func(where string) *engine.Experience {
		t.Helper()
		tmp := t.TempDir()
		files := map[string][]byte{"base": base, "ours": ours, "theirs": theirs}
		for name, data := range files {
			if err := os.WriteFile(filepath.Join(tmp, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if code, _, errs := runPem(t, "merge-driver", filepath.Join(tmp, "base"), filepath.Join(tmp, "ours"), filepath.Join(tmp, "theirs"), where); code != 0 {
			t.Fatalf("merge-driver: exit %d: %s", code, errs)
		}
		data, err := os.ReadFile(filepath.Join(tmp, "ours"))
		if err != nil {
			t.Fatal(err)
		}
		var x engine.Experience
		if err := store.Unmarshal(data, &x, store.KindExperience); err != nil {
			t.Fatal(err)
		}
		return &x
	}
	okOf := func(x *engine.Experience) int {
		n := 0
		for _, st := range x.Selectors {
			n += st.OK
		}
		return n
	}
	if x := merge(filepath.Join(dir, filepath.FromSlash(rel))); x.Attempts != 3 || okOf(x) != 3 {
		t.Errorf("with the traces readable: %d attempts, %d selector successes; want 3 and 3", x.Attempts, okOf(x))
	}
	// Without a tree to read the shared trace from, the count stays within
	// what the sides prove but counts the shared trace twice.
	if x := merge(filepath.Join(t.TempDir(), filepath.FromSlash(rel))); x.Attempts != 3 || okOf(x) != 4 {
		t.Errorf("with no traces: %d attempts, %d selector successes; want 3 and 4", x.Attempts, okOf(x))
	}
}

// shareOnePrefix checks that stderr starts with want and carries pem's prefix
// exactly once per line.
func shareOnePrefix(t *testing.T, stderr, want string) {
	t.Helper()
	if !strings.HasPrefix(stderr, want) {
		t.Errorf("stderr %q does not start with %q", stderr, want)
	}
	for _, l := range strings.Split(strings.TrimSpace(stderr), "\n") {
		if strings.Count(l, "pem: ") != 1 || strings.Contains(l, "pem: pem") || strings.HasPrefix(l, "pem: pem ") {
			t.Errorf("stderr line %q: want exactly one \"pem: \" prefix", l)
		}
	}
}

// TestCheckIncremental: a clean check remembers HEAD, the next walks only
// newer commits and still finds a new frozen edit; a check with problems
// remembers nothing; --since bounds the walk, --full redoes it.
func TestCheckIncremental(t *testing.T) {
	dir, commits := shareHistoryRepo(t)
	check := func(args ...string) (int, string) {
		t.Helper()
		code, out, errs := runPem(t, append([]string{"--knowledge", dir, "check"}, args...)...)
		return code, out + errs
	}
	if code, out := check(); code != 0 || !strings.Contains(out, fmt.Sprintf(" and %d commit(s) checked in ", len(commits)+1)) || strings.Contains(out, "earlier check") {
		t.Fatalf("first check: exit %d\n%s", code, out)
	}
	if code, out := check(); code != 0 || !strings.Contains(out, " and 0 commit(s) checked in ") || !strings.Contains(out, "new since "+commits[len(commits)-1][:10]) {
		t.Fatalf("second check: exit %d\n%s", code, out)
	}
	if code, out := check("--full"); code != 0 || !strings.Contains(out, fmt.Sprintf(" and %d commit(s) checked in ", len(commits)+1)) {
		t.Fatalf("--full: exit %d\n%s", code, out)
	}

	name := filepath.Join(dir, "facts/example.com/find-stars.yaml")
	data := string(must(os.ReadFile(name)))
	os.WriteFile(name, []byte(strings.Replace(data, "primary: '#forks'", "primary: '#forks-renamed'", 1)), 0o644)
	gitcli.Run(t, dir, "commit", "-q", "-am", "hand edit of a verified entry")
	bad := gitcli.Run(t, dir, "rev-parse", "--short=10", "HEAD")
	for _, args := range [][]string{nil, nil, {"--full"}, {"--since", "HEAD~1"}} {
		if code, out := check(args...); code != exitInternal || !strings.Contains(out, "frozen: facts/example.com/find-stars.yaml: commit "+bad) {
			t.Errorf("check %v after a frozen edit: exit %d\n%s", args, code, out)
		}
	}
	if code, out := check("--since", "HEAD"); code != 0 || !strings.Contains(out, " and 0 commit(s) checked in ") {
		t.Errorf("--since HEAD: exit %d\n%s", code, out)
	}
	if code, out := check("--since", "HEAD", "--full"); code != exitUsage || !strings.Contains(out, "exclude each other") {
		t.Errorf("--since with --full: exit %d\n%s", code, out)
	}
	if code, out := check("--since", "nope"); code != exitUsage {
		t.Errorf("--since nope: exit %d\n%s", code, out)
	}
}

// The knowledge browser's history of an entry (entryHistory) lists the
// experience's commits on refs/pem/state, marked, with the branch's facts
// commits, newest first: what pem log prints.
func TestEntryHistoryListsTheState(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "k")
	if code, _, errs := runPem(t, "init", dir); code != 0 {
		t.Fatal(errs)
	}
	run := `{"steps":[{"action":"navigate","url":"https://example.com/repo","ok":true}]}`
	for i, now := range []string{"2026-03-01", "2026-03-02"} {
		if code, _, errs := runPem(t, "--knowledge", dir, "experience", "save", "https://example.com/repo", run, "--intent", "find stars", "--session", fmt.Sprint(i)); code != 0 {
			t.Fatal(errs)
		}
		if code, _, errs := runPem(t, "--knowledge", dir, "consolidate", "--now", now); code != 0 {
			t.Fatal(errs)
		}
	}
	hist, err := entryHistory(context.Background(), dir, "example.com", "find-stars")
	if err != nil {
		t.Fatal(err)
	}
	state, facts := 0, 0
	for i, c := range hist {
		if i > 0 && c.When.After(hist[i-1].When) {
			t.Errorf("history not newest first: %v after %v", c.When, hist[i-1].When)
		}
		for _, ch := range c.Changes {
			switch {
			case strings.HasPrefix(ch, "experience/") && strings.HasSuffix(c.Subject, " [state]"):
				state++
			case strings.HasPrefix(ch, "facts/") && !strings.HasSuffix(c.Subject, " [state]"):
				facts++
			default:
				t.Errorf("%q in commit %q: experience belongs to the state, facts to the branch", ch, c.Subject)
			}
		}
	}
	if state != 2 || facts == 0 {
		t.Fatalf("history lists %d experience changes on the state and %d facts changes, want 2 and some:\n%+v", state, facts, hist)
	}
}

// TestDiffLabelsMovedTraces: a trace a trace-only pull request put on the
// branch, then moved to refs/pem/state by the consolidation that folded it,
// is reported as moved (kept on the state ref), not expired — in the text,
// the pull request body (markdown) and JSON.
func TestDiffLabelsMovedTraces(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "k")
	if _, err := store.Init(ctx, dir); err != nil {
		t.Fatal(err)
	}
	gitcli.Run(t, dir, "init", "-q", "-b", "main")
	gitcli.Run(t, dir, "add", "-A")
	gitcli.Run(t, dir, "commit", "-q", "-m", "init")
	st, err := store.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	tr := storetest.NewTrace("example.com", "find stars", time.Now().Add(-time.Hour), 7)
	if _, err := st.PutTrace(ctx, tr); err != nil {
		t.Fatal(err)
	}
	st.Close()
	// The trace-only pull request, merged: the trace is on main.
	gitcli.Run(t, dir, "add", "-f", "traces")
	gitcli.Run(t, dir, "commit", "-q", "-m", "a trace-only pull request")
	before := gitcli.Run(t, dir, "rev-parse", "HEAD")
	if code, _, errs := runPem(t, "--knowledge", dir, "consolidate"); code != 0 {
		t.Fatalf("consolidate: exit %d: %s", code, errs)
	}
	if files := gitcli.Run(t, dir, "ls-files", "traces"); files != "" {
		t.Fatalf("the consolidation left traces on main: %s", files)
	}
	code, out, errs := runPem(t, "--knowledge", dir, "diff", before, "HEAD")
	if code != 0 {
		t.Fatalf("diff: exit %d: %s", code, errs)
	}
	for _, want := range []string{"0 new trace(s), 0 expired, moved to refs/pem/state: 1 trace(s)", "example.com: +0 -0, 1 moved to refs/pem/state"} {
		if !strings.Contains(out, want) {
			t.Errorf("diff lacks %q:\n%s", want, out)
		}
	}
	_, md, _ := runPem(t, "--knowledge", dir, "diff", before, "HEAD", "--format", "markdown")
	for _, want := range []string{"· 0 expired trace(s) · moved to `refs/pem/state` (kept, off the branch): 1 trace(s)", "| `example.com` | 0 | 0 | 1 |"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown diff lacks %q:\n%s", want, md)
		}
	}
	_, js, _ := runPem(t, "--knowledge", dir, "diff", before, "HEAD", "--format", "json")
	if !strings.Contains(js, `"moved": 1`) || !strings.Contains(js, `"removed": 0`) {
		t.Errorf("json diff does not count the trace as moved:\n%s", js)
	}
}
