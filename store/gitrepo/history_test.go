package gitrepo_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/pemdev/pem/store"
	"github.com/pemdev/pem/store/gitrepo"
	"github.com/pemdev/pem/store/storetest/gitcli"
)

func gitlogWrite(t testing.TB, dir, rel, content string) {
	t.Helper()
	name := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func gitlogCommit(t testing.TB, dir, msg string, when int) string {
	t.Helper()
	gitcli.Run(t, dir, "add", "-A")
	date := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(when) * time.Hour).Format(time.RFC3339)
	cmd := exec.Command("git", "commit", "-q", "--allow-empty", "-m", msg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=tester", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=tester", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_AUTHOR_DATE="+date, "GIT_COMMITTER_DATE="+date,
		"GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git commit: %v\n%s", err, out)
	}
	return gitcli.Run(t, dir, "rev-parse", "HEAD")
}

func gitlogInit(t testing.TB, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	gitcli.Run(t, dir, "init", "-q", "-b", "main")
}

func gitlogPaths(cs []gitrepo.FileChange) []string {
	var out []string
	for _, c := range cs {
		tag := "M"
		switch {
		case c.Added():
			tag = "A"
		case c.Deleted():
			tag = "D"
		}
		out = append(out, tag+" "+c.Path)
	}
	return out
}

// TestHistory runs Log, Diff, Walk and FileAt against a repository made by
// the git CLI, with the knowledge tree in a subdirectory (the prefix case).
func TestHistory(t *testing.T) {
	ctx := context.Background()
	repo := t.TempDir()
	gitlogInit(t, repo)
	kn := filepath.Join(repo, "knowledge")
	gitlogWrite(t, repo, "README.md", "outside the tree\n")
	gitlogWrite(t, kn, "pem.yaml", "format: 1\n")
	gitlogWrite(t, kn, "facts/a.example/one.yaml", "v1\n")
	gitlogWrite(t, kn, "facts/b.example/two.yaml", "v1\n")
	c1 := gitlogCommit(t, repo, "first", 1)
	gitlogWrite(t, kn, "traces/a.example/2026-01-01/01J00000000000000000000001.yaml", "t\n")
	gitlogWrite(t, repo, "README.md", "changed outside\n")
	c2 := gitlogCommit(t, repo, "traces only", 2)
	gitlogWrite(t, kn, "facts/a.example/one.yaml", "v2\n")
	gitlogWrite(t, kn, "experience/a.example/one.yaml", "x\n")
	c3 := gitlogCommit(t, repo, "consolidate one\n\nbody", 3)
	gitlogWrite(t, kn, "facts/b.example/two.yaml", "v2\n")
	c4 := gitlogCommit(t, repo, "touch two", 4)
	if err := os.Remove(filepath.Join(kn, "facts/a.example/one.yaml")); err != nil {
		t.Fatal(err)
	}
	c5 := gitlogCommit(t, repo, "delete one", 5)

	h, err := gitrepo.OpenHistory(kn)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if h.Prefix() != "knowledge/" {
		t.Fatalf("prefix = %q", h.Prefix())
	}

	log, err := h.Log(ctx, []string{"facts/a.example/one.yaml", "experience/a.example/one.yaml"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range log {
		got = append(got, e.Hash+" "+e.Subject+" "+strings.Join(gitlogPaths(e.Changes), ","))
	}
	want := []string{ // within a commit, changes follow the order of the paths given
		c5 + " delete one D facts/a.example/one.yaml",
		c3 + " consolidate one M facts/a.example/one.yaml,A experience/a.example/one.yaml",
		c1 + " first A facts/a.example/one.yaml",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Log =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !log[1].When.Equal(time.Date(2026, 1, 1, 3, 0, 0, 0, time.UTC)) {
		t.Errorf("when = %v", log[1].When)
	}
	// A directory path and a limit.
	log, err = h.Log(ctx, []string{"facts"}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(log) != 2 || log[0].Hash != c5 || log[1].Hash != c4 {
		t.Fatalf("Log(facts, 2) = %+v", log)
	}
	// The whole tree: the README change outside the tree is not a change of it.
	log, err = h.Log(ctx, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(log) != 5 {
		t.Fatalf("Log(all) has %d commits, want 5", len(log))
	}

	diff, err := h.Diff(ctx, c1, c3, "")
	if err != nil {
		t.Fatal(err)
	}
	wantDiff := []string{"A experience/a.example/one.yaml", "M facts/a.example/one.yaml", "A traces/a.example/2026-01-01/01J00000000000000000000001.yaml"}
	if !reflect.DeepEqual(gitlogPaths(diff), wantDiff) {
		t.Fatalf("Diff = %v, want %v", gitlogPaths(diff), wantDiff)
	}
	diff, err = h.Diff(ctx, "", "HEAD~4", "facts")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gitlogPaths(diff), []string{"A facts/a.example/one.yaml", "A facts/b.example/two.yaml"}) {
		t.Fatalf("Diff(empty, first, facts) = %v", gitlogPaths(diff))
	}
	if _, err := h.Diff(ctx, "no-such-rev", "HEAD", ""); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a bad revision gives %v", err)
	}
	hash, err := h.FileAt(ctx, c3, "facts/a.example/one.yaml")
	if err != nil || hash == "" {
		t.Fatalf("FileAt = %q, %v", hash, err)
	}
	data, err := h.Blob(ctx, hash, 100)
	if err != nil || string(data) != "v2\n" {
		t.Fatalf("Blob = %q, %v", data, err)
	}
	if hash, err := h.FileAt(ctx, c5, "facts/a.example/one.yaml"); err != nil || hash != "" {
		t.Fatalf("FileAt of a deleted file = %q, %v", hash, err)
	}

	// WalkIntroduced sees every commit that made a change to facts; the merge
	// only brings side's change, made (and seen) there.
	gitcli.Run(t, repo, "checkout", "-q", "-b", "side", c2)
	gitlogWrite(t, kn, "facts/c.example/three.yaml", "side\n")
	side := gitlogCommit(t, repo, "side facts", 6)
	gitcli.Run(t, repo, "checkout", "-q", "main")
	gitcli.Run(t, repo, "merge", "-q", "--no-edit", "side")
	walkedSet := map[string]bool{}
	n, err := h.WalkIntroduced(ctx, gitrepo.WalkOptions{Under: "facts"}, func(ci gitrepo.CommitInfo, _ gitrepo.FileChange) error {
		walkedSet[ci.Subject] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var walked []string
	for s := range walkedSet {
		walked = append(walked, s)
	}
	sort.Strings(walked)
	if want := []string{"consolidate one", "delete one", "first", "side facts", "touch two"}; !reflect.DeepEqual(walked, want) || n < len(want)+1 {
		t.Fatalf("WalkIntroduced visited %d commits, with changes %q, want %q", n, walked, want)
	}
	mb, err := h.MergeBase(ctx, side, c5)
	if err != nil || mb != c2 {
		t.Fatalf("MergeBase = %s, %v; want %s", mb, err, c2)
	}
}

func TestOpenHistoryOutsideRepo(t *testing.T) {
	if _, err := gitrepo.OpenHistory(t.TempDir()); !errors.Is(err, gitrepo.ErrNoRepo) {
		t.Fatalf("got %v, want ErrNoRepo", err)
	}
}

func TestInstallMergeDriver(t *testing.T) {
	ctx := context.Background()
	repo := t.TempDir()
	gitlogInit(t, repo)
	kn := filepath.Join(repo, "kn")
	gitlogWrite(t, kn, ".gitattributes", "*.png binary")
	for i := 0; i < 2; i++ { // idempotent
		if err := installMergeDriver(ctx, kn); err != nil {
			t.Fatal(err)
		}
	}
	if got := gitcli.Run(t, repo, "config", "--get", "merge.pem.driver"); got != gitrepo.MergeDriverCommand {
		t.Fatalf("merge.pem.driver = %q", got)
	}
	data, err := os.ReadFile(filepath.Join(kn, ".gitattributes"))
	if err != nil {
		t.Fatal(err)
	}
	want := "*.png binary\nexperience/** linguist-generated=true merge=pem\ntraces/** linguist-generated=true\nverdicts/** linguist-generated=true\nfacts/** merge=pem\n"
	if string(data) != want {
		t.Fatalf(".gitattributes =\n%s\nwant\n%s", data, want)
	}
	// git itself sees the attributes on a path inside the tree.
	if got := gitcli.Run(t, repo, "check-attr", "merge", "--", "kn/experience/a.example/k.yaml"); !strings.HasSuffix(got, "merge: pem") {
		t.Fatalf("git check-attr: %q", got)
	}
}

// gitlogTrace writes a trace-shaped file (sync does not read its content).
func gitlogTrace(t *testing.T, dir, domain string, n int) string {
	rel := fmt.Sprintf("traces/%s/2026-01-02/01J%023d.yaml", domain, n)
	gitlogWrite(t, dir, rel, fmt.Sprintf("id: %d\n", n))
	return rel
}

func gitlogStatusClean(t *testing.T, dir string) {
	t.Helper()
	if st := gitcli.Run(t, dir, "status", "--porcelain"); st != "" {
		t.Fatalf("git status in %s is not clean:\n%s", dir, st)
	}
}

func gitlogFiles(t *testing.T, dir string) []string {
	t.Helper()
	return strings.Split(gitcli.Run(t, dir, "ls-tree", "-r", "--name-only", "HEAD"), "\n")
}

// TestSync: a bare repository and two clones that save traces and sync in
// turn — the traces travel on the state ref, a trace committed on main by
// hand on main — then a local commit that is not add-only.
func TestSync(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	bare := filepath.Join(root, "shared.git")
	gitcli.Run(t, root, "init", "-q", "--bare", "-b", "main", bare)
	seed := filepath.Join(root, "seed")
	gitcli.Run(t, root, "clone", "-q", bare, seed)
	gitlogWrite(t, seed, "pem.yaml", "format: 1\n")
	gitlogWrite(t, seed, ".gitignore", store.StateIgnore)
	gitlogWrite(t, seed, "facts/a.example/one.yaml", "v1\n")
	gitlogCommit(t, seed, "init", 0)
	gitcli.Run(t, seed, "push", "-q", "origin", "main")
	a, b := filepath.Join(root, "a"), filepath.Join(root, "b")
	gitcli.Run(t, root, "clone", "-q", bare, a)
	gitcli.Run(t, root, "clone", "-q", bare, b)
	now := func() time.Time { return time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC) }
	opt := gitrepo.SyncOptions{Now: now, TracesDir: store.TracesDir, TraceExt: store.TraceExt}
	state := gitrepo.StateRef.String()

	// A: two pending traces, committed on the state ref and pushed; main
	// does not move.
	gitlogTrace(t, a, "a.example", 1)
	gitlogTrace(t, a, "b.example", 2)
	res, err := syncDir(ctx, a, opt)
	if err != nil {
		t.Fatal(err)
	}
	if res.Committed != 2 || res.Pushed || !res.StatePushed || res.Replayed != 0 || res.State != gitcli.Run(t, bare, "rev-parse", state) {
		t.Fatalf("A's first sync: %+v", res)
	}
	if got := gitcli.Run(t, bare, "log", "--format=%s", "main"); got != "init" {
		t.Fatalf("main moved: %s", got)
	}
	gitlogStatusClean(t, a)

	// B: a trace committed on main by hand (the old way, still replayed)
	// and a pending one; A's state arrived meanwhile.
	gitlogTrace(t, b, "a.example", 3)
	gitcli.Run(t, b, "add", "-f", "traces")
	gitcli.Run(t, b, "commit", "-qm", "b: one trace by hand")
	gitlogTrace(t, b, "a.example", 4) // pending
	res, err = syncDir(ctx, b, opt)
	if err != nil {
		t.Fatal(err)
	}
	if res.Committed != 1 || !res.Pushed || res.StateReplayed != 1 || !res.StatePushed || len(res.Notes) != 0 {
		t.Fatalf("B's sync: %+v", res)
	}
	gitlogStatusClean(t, b)
	if got := gitcli.Run(t, b, "log", "--format=%s", state); got != "pem: add 1 trace(s)\npem: add 2 trace(s)" {
		t.Fatalf("B's state is not linear on top of A's:\n%s", got)
	}

	// A again: takes B's main commit and state by fast-forward; the trace
	// B synced appears on A's disk.
	res, err = syncDir(ctx, a, opt)
	if err != nil {
		t.Fatal(err)
	}
	if res.Committed != 0 || res.Pushed || res.StatePushed || !res.FastForwarded || res.StateFiles != 1 {
		t.Fatalf("A's second sync: %+v", res)
	}
	gitlogStatusClean(t, a)
	for _, ref := range []string{"main", state} {
		if ha, hb, hr := gitcli.Run(t, a, "rev-parse", ref), gitcli.Run(t, b, "rev-parse", ref), gitcli.Run(t, bare, "rev-parse", ref); ha != hb || hb != hr {
			t.Fatalf("%s differs: a %s, b %s, remote %s", ref, ha, hb, hr)
		}
	}
	files := strings.Split(gitcli.Run(t, a, "ls-tree", "-r", "--name-only", state), "\n")
	files = append(files, gitlogFiles(t, a)...)
	for _, n := range []int{1, 2, 3, 4} {
		found := false
		for _, f := range files {
			if strings.Contains(f, fmt.Sprintf("%023d", n)) {
				found = true
			}
		}
		if !found {
			t.Errorf("trace %d missing after sync: %v", n, files)
		}
		if _, err := os.Stat(filepath.Join(a, "traces", map[bool]string{true: "b.example", false: "a.example"}[n == 2], "2026-01-02", fmt.Sprintf("01J%023d.yaml", n))); err != nil {
			t.Errorf("trace %d is not in A's working tree: %v", n, err)
		}
	}
	gitcli.Run(t, bare, "fsck", "--strict")
	gitcli.Run(t, a, "fsck", "--strict")

	// Nothing new anywhere: a no-op.
	res, err = syncDir(ctx, a, opt)
	if err != nil || res.Committed != 0 || res.Pushed || res.StatePushed || res.Replayed != 0 || res.StateReplayed != 0 {
		t.Fatalf("idle sync: %+v, %v", res, err)
	}

	// B consolidates locally (changes facts) while A pushes a commit on
	// main: refused with what to do.
	gitlogTrace(t, a, "a.example", 5)
	gitcli.Run(t, a, "add", "-f", "traces")
	gitcli.Run(t, a, "commit", "-qm", "a: one trace by hand")
	if _, err := syncDir(ctx, a, opt); err != nil {
		t.Fatal(err)
	}
	gitlogWrite(t, b, "facts/a.example/one.yaml", "v2 from b\n")
	gitlogCommit(t, b, "pem: consolidate", 2)
	before := gitcli.Run(t, b, "rev-parse", "HEAD")
	_, err = syncDir(ctx, b, opt)
	if !errors.Is(err, gitrepo.ErrNotAddOnly) || !strings.Contains(err.Error(), "facts/a.example/one.yaml") || !strings.Contains(err.Error(), "pull request") {
		t.Fatalf("non-add-only sync: %v", err)
	}
	if after := gitcli.Run(t, b, "rev-parse", "HEAD"); after != before {
		t.Fatalf("a refused sync moved HEAD")
	}
	gitlogStatusClean(t, b)
}

// TestSyncProtectsLocalEdits: a remote change to a file the user edited
// without committing stops the sync before anything is written.
func TestSyncProtectsLocalEdits(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	bare := filepath.Join(root, "shared.git")
	gitcli.Run(t, root, "init", "-q", "--bare", "-b", "main", bare)
	a, b := filepath.Join(root, "a"), filepath.Join(root, "b")
	gitcli.Run(t, root, "clone", "-q", bare, a)
	gitlogWrite(t, a, "facts/a.example/one.yaml", "v1\n")
	gitlogCommit(t, a, "init", 0)
	gitcli.Run(t, a, "push", "-q", "origin", "main")
	gitcli.Run(t, root, "clone", "-q", bare, b)
	gitlogWrite(t, a, "facts/a.example/one.yaml", "v2\n")
	gitlogCommit(t, a, "edit", 1)
	gitcli.Run(t, a, "push", "-q", "origin", "main")
	gitlogWrite(t, b, "facts/a.example/one.yaml", "my uncommitted edit\n")
	_, err := syncDir(ctx, b, gitrepo.SyncOptions{TracesDir: store.TracesDir, TraceExt: store.TraceExt})
	if err == nil || !strings.Contains(err.Error(), "local changes") {
		t.Fatalf("got %v, want a refusal naming local changes", err)
	}
	data, _ := os.ReadFile(filepath.Join(b, "facts/a.example/one.yaml"))
	if string(data) != "my uncommitted edit\n" {
		t.Fatalf("the local edit was overwritten: %q", data)
	}
}

// TestSyncEmptyRemote: the first sync into an empty bare repository pushes.
func TestSyncEmptyRemote(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	bare := filepath.Join(root, "shared.git")
	gitcli.Run(t, root, "init", "-q", "--bare", "-b", "main", bare)
	a := filepath.Join(root, "a")
	gitcli.Run(t, root, "clone", "-q", bare, a)
	gitlogWrite(t, a, "pem.yaml", "format: 1\n")
	gitlogCommit(t, a, "init", 0)
	gitlogTrace(t, a, "a.example", 1)
	res, err := syncDir(ctx, a, gitrepo.SyncOptions{TracesDir: store.TracesDir, TraceExt: store.TraceExt})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Pushed || res.Committed != 1 {
		t.Fatalf("%+v", res)
	}
	if got := gitcli.Run(t, bare, "rev-parse", "main"); got != res.Head {
		t.Fatalf("remote main = %s, want %s", got, res.Head)
	}
}

// TestHistoryPacked: Log, FileAt and Blob read packed, deltified objects (the
// direct pack reader) and the commit-graph file exactly as git does.
func TestHistoryPacked(t *testing.T) {
	ctx := context.Background()
	repo := t.TempDir()
	gitlogInit(t, repo)
	var body strings.Builder
	for i := 0; i < 400; i++ {
		fmt.Fprintf(&body, "line %03d of a long facts file that git will store as deltas\n", i)
	}
	var commits, contents []string
	for v := 0; v < 12; v++ {
		content := fmt.Sprintf("version: %d\n%s", v, body.String())
		gitlogWrite(t, repo, "facts/a.example/big.yaml", content)
		// Many sibling directories make the facts/ tree itself large and deltified.
		for d := 0; d < 30; d++ {
			gitlogWrite(t, repo, fmt.Sprintf("facts/d%02d.example/k.yaml", d), fmt.Sprintf("v%d\n", v*(d%3)))
		}
		commits = append(commits, gitlogCommit(t, repo, fmt.Sprintf("round %d", v), v))
		contents = append(contents, content)
	}
	logOf := func() []string {
		h, err := gitrepo.OpenHistory(repo)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		es, err := h.Log(ctx, []string{"facts/a.example/big.yaml"}, 0)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range es {
			out = append(out, e.Hash+" "+e.Subject+" "+strings.Join(gitlogPaths(e.Changes), ","))
		}
		for i, c := range commits {
			hash, err := h.FileAt(ctx, c, "facts/a.example/big.yaml")
			if err != nil {
				t.Fatal(err)
			}
			data, err := h.Blob(ctx, hash, 1<<20)
			if err != nil || string(data) != contents[i] {
				t.Fatalf("blob of version %d differs (%v): %.40q", i, err, data)
			}
		}
		return out
	}
	loose := logOf()
	if len(loose) != 12 {
		t.Fatalf("loose log has %d entries", len(loose))
	}
	gitcli.Run(t, repo, "repack", "-adfq", "--depth=50", "--window=50")
	gitcli.Run(t, repo, "prune-packed")
	if out := gitcli.Run(t, repo, "count-objects", "-v"); !strings.Contains(out, "count: 0") {
		t.Fatalf("objects still loose:\n%s", out)
	}
	if vp := gitcli.Run(t, repo, "verify-pack", "-v", gitlogGlob(t, filepath.Join(repo, ".git/objects/pack/*.idx"))); !strings.Contains(vp, "chain length = 2") {
		t.Fatalf("the pack has no delta chains, the test proves little:\n%s", vp[len(vp)-300:])
	}
	if packed := logOf(); !reflect.DeepEqual(packed, loose) {
		t.Fatalf("packed log differs:\n%s\nloose:\n%s", strings.Join(packed, "\n"), strings.Join(loose, "\n"))
	}
	gitcli.Run(t, repo, "commit-graph", "write", "--reachable")
	if _, err := os.Stat(filepath.Join(repo, ".git/objects/info/commit-graph")); err != nil {
		t.Fatal(err)
	}
	if graph := logOf(); !reflect.DeepEqual(graph, loose) {
		t.Fatalf("log with a commit-graph differs:\n%s", strings.Join(graph, "\n"))
	}
	// A commit made after the graph is read from its object.
	gitlogWrite(t, repo, "facts/a.example/big.yaml", "version: last\n"+body.String())
	last := gitlogCommit(t, repo, "after the graph", 20)
	if after := logOf(); len(after) != 13 || !strings.HasPrefix(after[0], last) {
		t.Fatalf("log after a new commit: %v", after)
	}
}

func gitlogGlob(t *testing.T, pattern string) string {
	t.Helper()
	m, err := filepath.Glob(pattern)
	if err != nil || len(m) != 1 {
		t.Fatalf("glob %s: %v %v", pattern, m, err)
	}
	return m[0]
}

func installMergeDriver(ctx context.Context, dir string) error {
	r, err := gitrepo.Open(ctx, dir)
	if err != nil {
		return err
	}
	defer r.Close()
	return r.InstallMergeDriver(ctx, "", store.GitAttributes)
}

func syncDir(ctx context.Context, dir string, opt gitrepo.SyncOptions) (*gitrepo.SyncResult, error) {
	r, err := gitrepo.Open(ctx, dir)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return r.Sync(ctx, opt)
}
