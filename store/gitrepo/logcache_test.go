package gitrepo

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pemdev/pem/store/storetest/gitcli"
)

// logCacheRepo makes a repository with the knowledge tree at sub ("" for the
// root) and commits rounds of changes to facts/ and experience/ (and to
// traces/, which the cache does not record): additions, edits, a deletion,
// a mode change, a file that becomes a directory, a merged side branch.
func logCacheRepo(t *testing.T, sub string) (repo, tree string) {
	t.Helper()
	repo = t.TempDir()
	gitcli.Run(t, repo, "init", "-q", "-b", "main")
	gitcli.Run(t, repo, "config", "gc.auto", "0")
	tree = filepath.Join(repo, filepath.FromSlash(sub))
	write := func(rel, content string) {
		name := filepath.Join(tree, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	commit := func(msg string) {
		gitcli.Run(t, repo, "add", "-A")
		gitcli.Run(t, repo, "commit", "-q", "--allow-empty", "-m", msg+"\n\nbody of "+msg)
	}
	for d := 0; d < 4; d++ {
		write(fmt.Sprintf("facts/d%d.example/k.yaml", d), "format: 1\nstatus: candidate\nrevision: 0\n")
		write(fmt.Sprintf("experience/d%d.example/k.yaml", d), "format: 1\nattempts: 0\n")
	}
	write("pem.yaml", "format: 1\n")
	commit("the tree")
	for i := 1; i <= 12; i++ {
		d := i % 3
		write(fmt.Sprintf("experience/d%d.example/k.yaml", d), fmt.Sprintf("format: 1\nattempts: %d\n", i))
		if i%4 == 0 {
			write(fmt.Sprintf("facts/d%d.example/k.yaml", d), fmt.Sprintf("format: 1\nstatus: candidate\nrevision: %d\n", i))
		}
		write(fmt.Sprintf("traces/d%d.example/t%d.yaml", d, i), "id: x\n")
		switch i {
		case 5:
			gitcli.Run(t, repo, "rm", "-q", filepath.Join(tree, "facts/d1.example/k.yaml"))
		case 6:
			if err := os.Chmod(filepath.Join(tree, "facts/d2.example/k.yaml"), 0o755); err != nil {
				t.Fatal(err)
			}
		case 8:
			gitcli.Run(t, repo, "rm", "-q", filepath.Join(tree, "facts/d3.example/k.yaml"))
			write("facts/d3.example/k.yaml/inner.yaml", "format: 1\n")
		case 10:
			gitcli.Run(t, repo, "checkout", "-q", "-b", "side")
			write("facts/d0.example/side.yaml", "format: 1\n")
			commit("side change")
			gitcli.Run(t, repo, "checkout", "-q", "main")
			commit(fmt.Sprintf("round %d", i))
			gitcli.Run(t, repo, "merge", "-q", "--no-ff", "-m", "merge side", "side")
			continue
		}
		commit(fmt.Sprintf("round %d", i))
	}
	return repo, tree
}

var logCachePaths = [][]string{
	{"facts/d0.example/k.yaml", "experience/d0.example/k.yaml"},
	{"facts/d1.example/k.yaml", "experience/d1.example/k.yaml"},
	{"facts/d2.example/k.yaml"},                   // a mode change only: not listed
	{"facts/d3.example/k.yaml"},                   // a file, then a directory
	{"facts/d0.example", "experience/d0.example"}, // a domain
	{"facts"},
	{"experience"},
	{"facts/none.example/k.yaml"},
	{"traces/d1.example"}, // another top-level directory: the records computed for facts/ and experience/ grow
	{"pem.yaml", "facts/d1.example/k.yaml"},
}

// logsOf opens a new handle on tree (a new cache read) and lists, with
// walk, the entries of every path set in paths.
func logsOf(t *testing.T, tree string, paths [][]string, walk func(h *History, ps []string) ([]LogEntry, error)) [][]LogEntry {
	t.Helper()
	h, err := OpenHistory(tree)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	var out [][]LogEntry
	for _, ps := range paths {
		es, err := walk(h, ps)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, es)
	}
	return out
}

// logAll runs Log for every path set on a new handle (a new cache read).
func logAll(t *testing.T, tree string) [][]LogEntry {
	t.Helper()
	return logsOf(t, tree, logCachePaths, func(h *History, ps []string) ([]LogEntry, error) {
		return h.Log(context.Background(), ps, 0)
	})
}

// uncachedLog is the same walk with the cache bypassed (the original walk, as
// for a path outside facts/ and experience/).
func uncachedLog(t *testing.T, tree string) [][]LogEntry {
	t.Helper()
	return logsOf(t, tree, logCachePaths, func(h *History, ps []string) ([]LogEntry, error) {
		head, err := h.repo.Head()
		if err != nil {
			return nil, err
		}
		return h.walkLog(context.Background(), head.Hash(), ps, 0)
	})
}

func sameLogs(t *testing.T, stage string, got, want [][]LogEntry) {
	t.Helper()
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Fatalf("%s: Log(%v) through the cache differs from the walk over the trees:\ncache: %+v\ntrees: %+v", stage, logCachePaths[i], got[i], want[i])
		}
	}
}

// gitLogHashes is what git lists for the path sets (in the knowledge tree's directory).
func gitLogHashes(t *testing.T, tree string, logs [][]LogEntry) {
	t.Helper()
	for i, ps := range logCachePaths {
		if i == 2 {
			continue // git lists a mode change; pem's walk compares entry hashes and never did
		}
		var got []string
		for _, e := range logs[i] {
			got = append(got, e.Hash)
		}
		want := gitcli.Run(t, tree, append([]string{"log", "--first-parent", "--format=%H", "--"}, ps...)...)
		if strings.Join(got, "\n") != want {
			t.Fatalf("Log(%v): %d commits, git log %d:\n%s\ngit:\n%s", ps, len(got), len(strings.Fields(want)), strings.Join(got, "\n"), want)
		}
	}
}

func cacheRecords(t *testing.T, repo, prefix string) int {
	t.Helper()
	return len(loadLogCache(filepath.Join(repo, ".git"), prefix).recs)
}

func TestLogCache(t *testing.T) {
	repo, tree := logCacheRepo(t, "")
	cache := filepath.Join(repo, ".git", logCacheFile)
	commits := func() int { return len(strings.Fields(gitcli.Run(t, repo, "rev-list", "--first-parent", "HEAD"))) }

	want := uncachedLog(t, tree)
	gitLogHashes(t, tree, want)
	if len(want[0]) < 5 || len(want[3]) < 2 {
		t.Fatalf("the busy entry has %d commits, the file turned directory %d: the test proves little", len(want[0]), len(want[3]))
	}
	if _, err := os.Stat(cache); err == nil {
		t.Fatal("the walk over the trees wrote a log cache")
	}

	// Cold: the walk builds the cache (one record per first-parent commit).
	sameLogs(t, "cold", logAll(t, tree), want)
	if n := cacheRecords(t, repo, ""); n != commits() {
		t.Fatalf("the cache holds %d records for %d commits", n, commits())
	}
	// Warm: the same from the cache.
	sameLogs(t, "warm", logAll(t, tree), want)

	t.Run("read from the cache", func(t *testing.T) {
		// A record changed in the file (checksum made right) shows in Log:
		// a warm Log reads no commit for what the cache has.
		c := loadLogCache(filepath.Join(repo, ".git"), "")
		newest := want[5][0].Hash // the newest commit that changed facts/
		for k, r := range c.recs {
			if k.hash.String() == newest && !k.state {
				if r.info == nil {
					t.Fatal("the commit changed facts/ but its record has no commit info")
				}
				ci := *r.info
				ci.Subject, ci.Message = "marked", "marked\n"
				r.info = &ci
				c.dirty = true
			}
		}
		c.save("")
		logs := logAll(t, tree)
		if logs[5][0].Subject != "marked" {
			t.Fatalf("Log did not read the cache's record: subject %q", logs[5][0].Subject)
		}
		os.Remove(cache)
		sameLogs(t, "rebuilt", logAll(t, tree), want)
	})

	t.Run("damaged", func(t *testing.T) {
		data, err := os.ReadFile(cache)
		if err != nil {
			t.Fatal(err)
		}
		for _, damage := range []struct {
			name string
			data []byte
		}{
			{"a flipped byte", func() []byte { b := append([]byte(nil), data...); b[len(b)/2] ^= 0x40; return b }()},
			{"truncated", data[:len(data)/2]},
			{"empty", nil},
			{"another format", append([]byte("pem-log-cache 9\n"), data[16:]...)},
		} {
			if err := os.WriteFile(cache, damage.data, 0o644); err != nil {
				t.Fatal(err)
			}
			sameLogs(t, damage.name, logAll(t, tree), want)
			if n := cacheRecords(t, repo, ""); n != commits() {
				t.Fatalf("%s: the cache was not rebuilt: %d records for %d commits", damage.name, n, commits())
			}
		}
	})

	t.Run("tip moved", func(t *testing.T) {
		gitlogWriteFile(filepath.Join(tree, "experience/d0.example/k.yaml"), []byte("format: 1\nattempts: 100\n"), 0o644)
		gitcli.Run(t, repo, "commit", "-qam", "after the cache")
		gitlogWriteFile(filepath.Join(tree, "facts/d0.example/k.yaml"), []byte("format: 1\nstatus: verified\nrevision: 9\n"), 0o644)
		gitcli.Run(t, repo, "commit", "-qam", "after the cache, again")
		want := uncachedLog(t, tree)
		got := logAll(t, tree)
		sameLogs(t, "tip moved", got, want)
		gitLogHashes(t, tree, got)
		if got[0][0].Subject != "after the cache, again" {
			t.Fatalf("the newest commit is not listed first: %q", got[0][0].Subject)
		}
		if n := cacheRecords(t, repo, ""); n != commits() {
			t.Fatalf("the new commits were not added: %d records for %d commits", n, commits())
		}
	})

	t.Run("history rewritten", func(t *testing.T) {
		before := cacheRecords(t, repo, "")
		gitcli.Run(t, repo, "reset", "-q", "--hard", "HEAD~5")
		gitlogWriteFile(filepath.Join(tree, "experience/d1.example/k.yaml"), []byte("format: 1\nattempts: 777\n"), 0o644)
		gitcli.Run(t, repo, "commit", "-qam", "rewritten")
		gitcli.Run(t, repo, "commit", "-q", "--amend", "-m", "rewritten, amended")
		want := uncachedLog(t, tree)
		got := logAll(t, tree)
		sameLogs(t, "rewritten", got, want)
		gitLogHashes(t, tree, got)
		if got[1][0].Subject != "rewritten, amended" {
			t.Fatalf("the rewritten commit is not listed: %q", got[1][0].Subject)
		}
		if n := cacheRecords(t, repo, ""); n != before+1 {
			t.Fatalf("%d records after the rewrite, %d before: want one more (the old ones are unused, not wrong)", n, before)
		}
		// Packed, with a commit-graph: the same again, cold and warm.
		gitcli.Run(t, repo, "gc", "-q")
		os.Remove(cache)
		sameLogs(t, "packed, cold", logAll(t, tree), want)
		sameLogs(t, "packed, warm", logAll(t, tree), want)
	})

	t.Run("limit", func(t *testing.T) {
		os.Remove(cache)
		h, err := OpenHistory(tree)
		if err != nil {
			t.Fatal(err)
		}
		es, err := h.Log(context.Background(), logCachePaths[0], 2)
		h.Close()
		if err != nil || len(es) != 2 {
			t.Fatalf("Log(limit 2): %d entries, %v", len(es), err)
		}
		sameLogs(t, "after a limited walk", logAll(t, tree), uncachedLog(t, tree))
	})
}

// A cache made for another knowledge tree of the same repository (another
// prefix) is not used: its records list paths relative to that tree.
func TestLogCacheOtherTree(t *testing.T) {
	repo, tree := logCacheRepo(t, "kt")
	want := uncachedLog(t, tree)
	gitLogHashes(t, tree, want)
	sameLogs(t, "in kt/", logAll(t, tree), want)
	if n := cacheRecords(t, repo, "kt/"); n == 0 {
		t.Fatal("no cache for the tree in kt/")
	}
	if n := cacheRecords(t, repo, ""); n != 0 {
		t.Fatalf("the cache of kt/ was read for the root: %d records", n)
	}
	other := filepath.Join(repo, "other")
	if err := os.MkdirAll(filepath.Join(other, "facts"), 0o755); err != nil {
		t.Fatal(err)
	}
	h, err := OpenHistory(other)
	if err != nil {
		t.Fatal(err)
	}
	es, err := h.Log(context.Background(), []string{"facts"}, 0)
	h.Close()
	if err != nil || len(es) != 0 {
		t.Fatalf("Log of other/facts (never committed): %d entries, %v", len(es), err)
	}
	sameLogs(t, "kt/ after other/", logAll(t, tree), want)
}

// Described keeps a version's description across handles, for this
// executable only, and never keeps one whose read failed.
func TestDescribedCache(t *testing.T) {
	repo, tree := logCacheRepo(t, "")
	blob := gitcli.Run(t, repo, "rev-parse", "HEAD:facts/d0.example/k.yaml")
	calls := 0
	describe := func(text string, keep bool) func() (string, bool) {
		return func() (string, bool) { calls++; return text, keep }
	}
	with := func(f func(h *History)) {
		t.Helper()
		h, err := OpenHistory(tree)
		if err != nil {
			t.Fatal(err)
		}
		f(h)
		if err := h.Close(); err != nil {
			t.Fatal(err)
		}
	}
	with(func(h *History) {
		if got := h.Described("facts/d0.example/k.yaml", blob, describe("unreadable: read failed", false)); got != "unreadable: read failed" {
			t.Fatalf("got %q", got)
		}
		if got := h.Described("facts/d0.example/k.yaml", blob, describe("status candidate", true)); got != "status candidate" {
			t.Fatalf("a failed read was kept: got %q", got)
		}
		h.Described("facts/d0.example/k.yaml", blob, describe("other", true))
		h.Described("experience/d0.example/k.yaml", blob, describe("same blob, another path", true))
	})
	if calls != 3 {
		t.Fatalf("describe called %d times, want 3 (the failed read, the first kept text, the other path)", calls)
	}
	with(func(h *History) {
		if got := h.Described("facts/d0.example/k.yaml", blob, describe("recomputed", true)); got != "status candidate" {
			t.Fatalf("a new handle described again: %q", got)
		}
	})
	if calls != 3 {
		t.Fatalf("the description was not kept across handles (%d calls)", calls)
	}
	// Written by another pem (another executable): not read.
	c := loadDescribeCache(filepath.Join(repo, ".git"))
	c.exe, c.dirty = "/elsewhere/pem\x00123\x00456", true
	c.save()
	with(func(h *History) {
		if got := h.Described("facts/d0.example/k.yaml", blob, describe("this pem's", true)); got != "this pem's" {
			t.Fatalf("another executable's description was used: %q", got)
		}
	})
	// Damaged: dropped.
	name := filepath.Join(repo, ".git", describeCacheFile)
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-6] ^= 1
	os.WriteFile(name, data, 0o644)
	with(func(h *History) {
		if got := h.Described("facts/d0.example/k.yaml", blob, describe("after damage", true)); got != "after damage" {
			t.Fatalf("a damaged cache was read: %q", got)
		}
	})
}

// The state's walk through the cache lists what it lists over the trees: a
// chain of state commits, then a snapshot that replaced it (compared with
// the commit it replaced while the repository has it), then the same after a
// gc dropped the replaced chain (the snapshot's files all added, the walk
// ends there) — from a cache written before the gc.
func TestStateLogCache(t *testing.T) {
	repo, tree := logCacheRepo(t, "")
	exp := func(n int) string { return fmt.Sprintf("format: 1\nattempts: %d\n", n) }
	// A state commit whose tree is the branch's with experience/d0's file at version n.
	stateCommit := func(n int, msg string, parents ...string) string {
		blob := logGit(t, repo, nil, exp(n), "hash-object", "-w", "--stdin")
		idx := filepath.Join(repo, ".git", "state-index")
		env := []string{"GIT_INDEX_FILE=" + idx}
		logGit(t, repo, env, "", "read-tree", "HEAD")
		logGit(t, repo, env, "", "update-index", "--cacheinfo", "100644,"+blob+",experience/d0.example/k.yaml")
		tr := logGit(t, repo, env, "", "write-tree")
		args := []string{"commit-tree", tr, "-m", msg}
		for _, p := range parents {
			args = append(args, "-p", p)
		}
		return logGit(t, repo, nil, "", args...)
	}
	s1 := stateCommit(101, "pem: state 1")
	s2 := stateCommit(102, "pem: state 2", s1)
	s3 := stateCommit(103, "pem: state 3", s2)
	gitcli.Run(t, repo, "update-ref", string(StateRef), s3)

	paths := [][]string{{"facts/d0.example/k.yaml", "experience/d0.example/k.yaml"}, {"experience"}, {"facts", "experience"}}
	stateLogs := func(off bool) [][]LogEntry {
		t.Helper()
		logCacheOff = off
		defer func() { logCacheOff = false }()
		return logsOf(t, tree, paths, func(h *History, ps []string) ([]LogEntry, error) {
			return h.StateLog(context.Background(), ps, 0)
		})
	}
	same := func(stage string, wantN int) {
		t.Helper()
		want := stateLogs(true)
		if len(want[0]) != wantN {
			t.Fatalf("%s: the state's walk lists %d commits, want %d", stage, len(want[0]), wantN)
		}
		for _, round := range []string{"cold", "warm"} {
			got := stateLogs(false)
			for i := range want {
				if !reflect.DeepEqual(got[i], want[i]) {
					t.Fatalf("%s, %s: StateLog(%v) through the cache:\n%+v\nover the trees:\n%+v", stage, round, paths[i], got[i], want[i])
				}
			}
		}
	}
	same("a chain", 3)

	// A snapshot replacing the chain: parentless, naming what it replaced.
	s4 := stateCommit(104, "pem: state snapshot\n\n"+replacesTrailer+s3)
	gitcli.Run(t, repo, "update-ref", string(StateRef), s4)
	same("a snapshot, the chain still there", 4)

	// gc drops the replaced chain; the cache still holds its records.
	gitcli.Run(t, repo, "reflog", "expire", "--expire=now", "--all")
	gitcli.Run(t, repo, "gc", "-q", "--prune=now")
	if _, err := gitcli.Output(repo, "cat-file", "-e", s3); err == nil {
		t.Fatal("gc kept the replaced chain: the test proves nothing")
	}
	same("a snapshot, the chain gone", 1)
	got := stateLogs(false)
	if ch := got[0][0].Changes; len(ch) != 2 || !ch[0].Added() || !ch[1].Added() {
		t.Fatalf("the snapshot after the gc is not compared with nothing: %+v", ch)
	}
}

// logGit runs git in dir with extra environment and standard input (what
// gitcli.Run does not take), with gitcli's fixed identity.
func logGit(t *testing.T, dir string, env []string, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), append([]string{"GIT_AUTHOR_NAME=tester", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=tester", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_NOSYSTEM=1", "HOME=" + dir}, env...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %s: %v", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out))
}

func TestLogCacheRoots(t *testing.T) {
	for _, c := range []struct {
		paths []string
		want  []string
	}{
		{[]string{"facts/d.example/k.yaml", "experience/d.example/k.yaml"}, []string{"facts/d.example", "experience/d.example"}},
		{[]string{"facts/d.example", "experience/d.example/"}, []string{"facts/d.example", "experience/d.example"}},
		{[]string{"facts"}, []string{"facts"}},
		{[]string{"facts/a.example/k.yaml", "facts", "facts/b.example"}, []string{"facts"}},
		{[]string{"facts/a.example/x.yaml", "facts/a.example/y.yaml"}, []string{"facts/a.example"}},
		{[]string{"pem.yaml"}, []string{"pem.yaml"}},
		{[]string{"facts", ""}, nil},
		{[]string{"/"}, nil},
		{nil, nil},
	} {
		if got := logCacheRoots(c.paths); !reflect.DeepEqual(got, c.want) {
			t.Errorf("logCacheRoots(%q) = %q, want %q", c.paths, got, c.want)
		}
	}
	r := &logRec{roots: []string{"facts/a.example", "experience/a.example"}}
	if !r.covers([]string{"facts/a.example", "experience/a.example"}) || r.covers([]string{"facts/b.example"}) || r.covers([]string{"facts"}) {
		t.Error("covers: a record covers its roots and what lies below them, nothing else")
	}
	if got := r.union([]string{"facts"}); !reflect.DeepEqual(got, []string{"experience/a.example", "facts"}) {
		t.Errorf("union with facts = %q", got)
	}
}

// TestLogCacheStaleTemps: a pem killed while writing the log cache leaves
// its temporary file in the git directory; the next write removes it once it
// is older than staleCacheTemp, and leaves a fresh one (another pem's,
// being written) and other files alone.
func TestLogCacheStaleTemps(t *testing.T) {
	repo, tree := logCacheRepo(t, "")
	gitDir := filepath.Join(repo, ".git")
	stale := filepath.Join(gitDir, "."+logCacheFile+"-123456")
	fresh := filepath.Join(gitDir, "."+logCacheFile+"-654321")
	other := filepath.Join(gitDir, ".pem-sync-777")
	old := time.Now().Add(-2 * staleCacheTemp)
	for _, f := range []string{stale, fresh, other} {
		if err := os.WriteFile(f, []byte("half a cache"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{stale, other} {
		if err := os.Chtimes(f, old, old); err != nil {
			t.Fatal(err)
		}
	}
	logAll(t, tree) // builds and writes the cache
	if _, err := os.Stat(filepath.Join(gitDir, logCacheFile)); err != nil {
		t.Fatalf("the log did not write its cache: %v", err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("a temporary file older than %s is still there (err %v)", staleCacheTemp, err)
	}
	for _, f := range []string{fresh, other} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("%s was removed: %v", filepath.Base(f), err)
		}
	}
}
