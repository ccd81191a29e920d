package store_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store"
	"github.com/pemdev/pem/store/storetest"
)

// openLater opens the tree at dir with a clock an hour ahead, so every file
// is old enough for the caches to trust (as on a tree at rest).
func openLater(t *testing.T, dir string) *store.Store {
	t.Helper()
	s, err := store.Open(dir, &store.Options{Now: func() time.Time { return time.Now().Add(time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func ids(refs []engine.TraceRef) []string {
	out := []string{}
	for _, r := range refs {
		out = append(out, r.ID)
	}
	return out
}

// putTraces saves n traces for each intent over three days.
func putTraces(t *testing.T, s engine.Store, domain string, intents []string, n int) map[string][]string {
	t.Helper()
	byKey := map[string][]string{}
	base := time.Date(2025, 6, 1, 10, 0, 0, 0, time.UTC)
	for i := range n {
		for j, in := range intents {
			tr := storetest.NewTrace(domain, in, base.Add(time.Duration(i)*25*time.Hour+time.Duration(j)*time.Minute), int64(i*100+j))
			if _, err := s.PutTrace(context.Background(), tr); err != nil {
				t.Fatal(err)
			}
			byKey[tr.IntentKey] = append(byKey[tr.IntentKey], tr.ID)
		}
	}
	for _, v := range byKey {
		slices.Sort(v)
	}
	return byKey
}

func TestIntentTraceRefs(t *testing.T) {
	ctx := context.Background()
	s0 := newTree(t)
	dir := s0.Root()
	byKey := putTraces(t, s0, "example.com", []string{"find the price", "read the news", "open a ticket"}, 4)
	check := func(s *store.Store, what string) {
		t.Helper()
		for k, want := range byKey {
			refs, err := s.IntentTraceRefs(ctx, "example.com", k)
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(refs); !slices.Equal(got, want) {
				t.Errorf("%s: IntentTraceRefs(%s) = %v, want %v", what, k, got, want)
			}
		}
	}
	check(s0, "fresh, racy (just written)")
	check(openLater(t, dir), "index on disk, trusted")
	check(openLater(t, dir), "index on disk again")

	// Another process adds a trace (a pull, a save elsewhere): seen at once.
	other := openLater(t, dir)
	reader := openLater(t, dir)
	check(reader, "warm reader")
	extra := storetest.NewTrace("example.com", "find the price", time.Date(2025, 6, 2, 11, 0, 0, 0, time.UTC), 99)
	if _, err := other.PutTrace(ctx, extra); err != nil {
		t.Fatal(err)
	}
	k := extra.IntentKey
	byKey[k] = append(byKey[k], extra.ID)
	slices.Sort(byKey[k])
	check(reader, "after another writer's save")

	// A trace deleted by consolidation's TTL drops out.
	gone := byKey[k][0]
	refs, _ := reader.IntentTraceRefs(ctx, "example.com", k)
	if err := other.DeleteTrace(ctx, refs[0]); err != nil {
		t.Fatal(err)
	}
	byKey[k] = byKey[k][1:]
	check(reader, "after a delete of "+gone)
	check(openLater(t, dir), "a new process after the delete")

	// A damaged or foreign index file is rebuilt, never trusted.
	idx := []string{filepath.Join(dir, ".pem-cache", "trace-index", "example.com")}
	for _, p := range idx {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("no index file for example.com: %v", err)
		}
		// One file for the domain: a section per day directory, every line
		// in it names a real trace with its key.
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		if lines[0] != "pem trace index 2" || !strings.HasPrefix(lines[1], "day 2025-06-01 1 ") {
			t.Fatalf("%s: unexpected header %q", p, lines[:2])
		}
		days := 0
		for _, l := range lines[1:] {
			if strings.HasPrefix(l, "day ") {
				days++
				continue
			}
			id, k, _ := strings.Cut(l, " ")
			if !slices.Contains(byKey[k], id) {
				t.Errorf("%s: the line %q names no trace of that key", p, l)
			}
		}
		if days != 4 {
			t.Errorf("%s: %d day sections, want 4 (the day directories)", p, days)
		}
		if err := os.WriteFile(p, append(data, "garbage line\n"...), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	check(openLater(t, dir), "after damaging the index")
	for _, p := range idx {
		if err := os.WriteFile(p, []byte("something else\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	check(openLater(t, dir), "after replacing the index")
	if err := os.RemoveAll(filepath.Join(dir, ".pem-cache")); err != nil {
		t.Fatal(err)
	}
	check(openLater(t, dir), "after deleting the cache folder")
}

// A trace the index cannot read is listed for every intent, so every query
// reports it, and a trace written by hand (not canonical) is still indexed.
func TestIntentTraceRefsUnreadable(t *testing.T) {
	ctx := context.Background()
	s := newTree(t)
	byKey := putTraces(t, s, "example.com", []string{"find the price", "read the news"}, 1)
	day := "2025-06-01"
	bad := "01JXBADBADBADBADBADBADBADB"
	p := filepath.Join(s.Root(), "traces", "example.com", day, bad+".yaml")
	if err := os.WriteFile(p, []byte("format: 1\nid: ["), 0o644); err != nil {
		t.Fatal(err)
	}
	for k := range byKey {
		refs, err := openLater(t, s.Root()).IntentTraceRefs(ctx, "example.com", k)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(ids(refs), bad) {
			t.Errorf("IntentTraceRefs(%s) = %v leaves out the unreadable trace %s", k, ids(refs), bad)
		}
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	refs, _ := openLater(t, s.Root()).IntentTraceRefs(ctx, "example.com", "find-the-price")
	if slices.Contains(ids(refs), bad) {
		t.Errorf("the removed trace %s is still listed", bad)
	}
}

// The index is local state: git never sees it, and the tree's listings,
// Check and Files pass it over.
func TestTraceIndexIsLocal(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Fatal("this test needs git on PATH: install git")
	}
	ctx := context.Background()
	s := newTree(t)
	putTraces(t, s, "example.com", []string{"find the price"}, 2)
	if _, err := openLater(t, s.Root()).IntentTraceRefs(ctx, "example.com", "find-the-price"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(s.Root(), ".pem-cache", ".gitignore")); err != nil {
		t.Fatalf("the cache folder has no .gitignore: %v", err)
	}
	run := func(args ...string) string {
		cmd := exec.Command(git, args...)
		cmd.Dir = s.Root()
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_SYSTEM=/dev/null")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	run("init", "-q")
	if out := run("status", "--porcelain", "--untracked-files=all"); strings.Contains(out, ".pem-cache") {
		t.Errorf("git status shows the cache:\n%s", out)
	}
	ds, err := s.Domains(ctx)
	if err != nil || !slices.Equal(ds, []string{"example.com"}) {
		t.Errorf("Domains = %v, %v", ds, err)
	}
	var seen []string
	if err := s.Files(ctx, 1<<20, func(rel string, _ []byte) error {
		seen = append(seen, rel)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, rel := range seen {
		if strings.HasPrefix(rel, ".pem-cache") {
			t.Errorf("Files hands over the cache file %s", rel)
		}
	}
	// newTree's cleanup runs Check: the cache must not be reported.
}

// A query for one intent reads no trace of another: once the index knows
// them, replacing the other intent's traces with garbage changes nothing
// in the answer and warns of nothing.
func TestQueryReadsOnlyItsIntentsTraces(t *testing.T) {
	ctx := context.Background()
	s := newTree(t)
	byKey := putTraces(t, s, "example.com", []string{"find the price", "read the news"}, 3)
	e := engine.New(openLater(t, s.Root()))
	u := "https://example.com/p/1"
	before, err := e.Query(ctx, u, "find the price")
	if err != nil {
		t.Fatal(err)
	}
	if before.SuccessCount+before.FailureCount != 3 {
		t.Fatalf("before: %d runs, want 3 (%+v)", before.SuccessCount+before.FailureCount, before)
	}
	refs, err := s.TraceRefs(ctx, "example.com")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range refs {
		if slices.Contains(byKey["read-the-news"], r.ID) {
			p := filepath.Join(s.Root(), filepath.FromSlash(store.TracePath(r)))
			if err := os.WriteFile(p, []byte("not: [yaml"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	after, err := engine.New(openLater(t, s.Root())).Query(ctx, u, "find the price")
	if err != nil {
		t.Fatal(err)
	}
	if len(after.Warnings) != len(before.Warnings) || after.Confidence != before.Confidence || after.SuccessCount != before.SuccessCount {
		t.Errorf("the query read another intent's traces: before %+v, after %+v", before, after)
	}
	// Remove the garbage so newTree's Check passes.
	for _, r := range refs {
		if slices.Contains(byKey["read-the-news"], r.ID) {
			_ = os.Remove(filepath.Join(s.Root(), filepath.FromSlash(store.TracePath(r))))
		}
	}
}

// A save reports what a query right after it answers, though it reads no
// trace it met before: across intents, sessions and outcomes, with traces
// saved by another process in between.
func TestSaveReportsWhatQueryAnswers(t *testing.T) {
	ctx := context.Background()
	s := newTree(t)
	e := engine.New(s)
	other := engine.New(openLater(t, s.Root()))
	u := "https://example.com/p/1"
	for i := range 18 {
		intent := []string{"find the price", "read the news", "open a ticket"}[i%3]
		req := engine.SaveRequest{URL: u, Intent: intent, Session: fmt.Sprintf("s%d", i%4),
			Trace: &engine.TraceInput{Steps: []engine.StepInput{{Action: "navigate", URL: u}, {Action: "click", Selector: "#go"}, {Action: "get_text", Selector: ".price", Result: "42"}}}}
		if i%5 == 4 {
			req.Outcome = "failure"
		}
		saver := e
		if i%4 == 3 {
			saver = other // another process's save: the first engine has not met it
		}
		res, err := saver.Save(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		q, err := engine.New(openLater(t, s.Root())).Query(ctx, u, intent)
		if err != nil {
			t.Fatal(err)
		}
		if res.Confidence != q.Confidence || res.RetrievalTier != q.Tier {
			t.Errorf("save %d (%s): reported %.2f %s, a query answers %.2f %s", i, intent, res.Confidence, res.RetrievalTier, q.Confidence, q.Tier)
		}
	}
}

// A day listed too recently to trust is kept in the index file, marked so:
// the next process lists the day again but reads only the traces the
// index does not name (here: another intent's trace, damaged in place, is
// not read again — read, it would be listed for every intent).
func TestTraceIndexKeepsUntrustedDays(t *testing.T) {
	ctx := context.Background()
	s := newTree(t) // the real clock: what it writes now is within the racy window
	dir := s.Root()
	byKey := putTraces(t, s, "example.com", []string{"find the price", "read the news"}, 1)
	open := func() *store.Store {
		t.Helper()
		st, err := store.Open(dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	if _, err := open().IntentTraceRefs(ctx, "example.com", "find-the-price"); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, ".pem-cache", "trace-index", "example.com"))
	if err != nil {
		t.Fatalf("no index file after a listing that read traces: %v", err)
	}
	if !strings.Contains(string(data), "\nday 2025-06-01 0 ") {
		t.Fatalf("the recently changed day is not in the index file, marked untrusted:\n%s", data)
	}
	news := byKey["read-the-news"][0]
	p := filepath.Join(dir, "traces", "example.com", "2025-06-01", news+".yaml")
	if err := os.WriteFile(p, []byte("not: [yaml"), 0o644); err != nil {
		t.Fatal(err)
	}
	refs, err := open().IntentTraceRefs(ctx, "example.com", "find-the-price")
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(refs); !slices.Equal(got, byKey["find-the-price"]) {
		t.Errorf("IntentTraceRefs = %v, want %v: the untrusted day's known keys were not used", got, byKey["find-the-price"])
	}
	_ = os.Remove(p) // so newTree's Check passes
}
