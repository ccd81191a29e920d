package store_test

import (
	"context"
	"fmt"
	"hash/crc32"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
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

// intentIDs is the ids of s's traces of key in example.com.
func intentIDs(t testing.TB, s *store.Store, key string) []string {
	t.Helper()
	refs, err := s.IntentTraceRefs(context.Background(), "example.com", key)
	if err != nil {
		t.Fatal(err)
	}
	return ids(refs)
}

func TestIntentTraceRefs(t *testing.T) {
	ctx := context.Background()
	s0 := newTree(t)
	dir := s0.Root()
	byKey := putTraces(t, s0, "example.com", []string{"find the price", "read the news", "open a ticket"}, 4)
	check := func(s *store.Store, what string) {
		t.Helper()
		for k, want := range byKey {
			if got := intentIDs(t, s, k); !slices.Equal(got, want) {
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
	idxFile := filepath.Join(dir, ".pem-cache", "trace-index", "example.com")
	if data, err := os.ReadFile(idxFile); err != nil {
		t.Fatal(err)
	} else {
		parseIndex(t, data) // rewritten by reader: a changed middle day merged into the others
	}

	// A trace deleted by consolidation's TTL drops out.
	gone := byKey[k][0]
	refs, _ := reader.IntentTraceRefs(ctx, "example.com", k)
	if err := other.DeleteTrace(ctx, refs[0]); err != nil {
		t.Fatal(err)
	}
	byKey[k] = byKey[k][1:]
	check(reader, "after a delete of "+gone)
	if data, err := os.ReadFile(idxFile); err != nil {
		t.Fatal(err)
	} else {
		parseIndex(t, data)
	}
	check(openLater(t, dir), "a new process after the delete")
	// The file rewritten after those changes (a middle day's lines merged
	// into the unchanged days' copied ones) is the file a rebuild writes.
	merged, err := os.ReadFile(filepath.Join(dir, ".pem-cache", "trace-index", "example.com"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, ".pem-cache", "trace-index", "example.com")); err != nil {
		t.Fatal(err)
	}
	check(openLater(t, dir), "a rebuild")
	rebuilt, err := os.ReadFile(filepath.Join(dir, ".pem-cache", "trace-index", "example.com"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(merged, rebuilt) {
		t.Errorf("the index rewritten after changes differs from a rebuild:\n%s\nrebuilt:\n%s", merged, rebuilt)
	}

	// A damaged or foreign index file is rebuilt, never trusted.
	idx := []string{filepath.Join(dir, ".pem-cache", "trace-index", "example.com")}
	for _, p := range idx {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("no index file for example.com: %v", err)
		}
		// One file for the domain: a line per day directory, a block per
		// key; every line of a block names a real trace of its key.
		ix := parseIndex(t, data)
		if len(ix.days) != 4 || !strings.HasPrefix(ix.days[0], "day 2025-06-01 1 ") {
			t.Fatalf("%s: day lines %q, want 4 (the day directories), the first trusted", p, ix.days)
		}
		n := 0
		for k, lines := range ix.blocks {
			for _, l := range lines {
				n++
				if _, id, _ := strings.Cut(l, " "); !slices.Contains(byKey[k], id) {
					t.Errorf("%s: the line %q names no trace of %s", p, l, k)
				}
			}
		}
		if want := 4 * 3; n != want {
			t.Errorf("%s: %d lines, want %d (one per trace)", p, n, want)
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

// index is a trace index file taken apart (format 3, traceindex.go).
type index struct {
	days   []string            // the day lines
	keys   []string            // the keys, in file order
	blocks map[string][]string // key → its "<day> <id>" lines
	fields []string            // the key lines' fields: key, offset, length, crc
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// parseIndex takes apart an index file, failing t where it is not one.
func parseIndex(t *testing.T, data []byte) index {
	t.Helper()
	first, rest, _ := strings.Cut(string(data), "\n")
	var headLen, bodyLen int
	var crc uint32
	if _, err := fmt.Sscanf(first, "pem trace index 3 %d %d %d", &headLen, &bodyLen, &crc); err != nil {
		t.Fatalf("index header %q: %v", first, err)
	}
	if headLen+bodyLen != len(data) {
		t.Fatalf("index header %q: %d bytes in all, want %d", first, len(data), headLen+bodyLen)
	}
	head, body := rest[:headLen-len(first)-1], data[headLen:]
	if got := crc32.Checksum([]byte(head), castagnoli); got != crc {
		t.Fatalf("head CRC %d, the header says %d", got, crc)
	}
	ix := index{blocks: map[string][]string{}}
	for _, l := range strings.Split(strings.TrimSuffix(head, "\n"), "\n") {
		switch {
		case strings.HasPrefix(l, "day "):
			ix.days = append(ix.days, l)
		case strings.HasPrefix(l, "key "):
			var k string
			var off, n int
			var c uint32
			if _, err := fmt.Sscanf(l, "key %s %d %d %d", &k, &off, &n, &c); err != nil {
				t.Fatalf("key line %q: %v", l, err)
			}
			blk := body[off : off+n]
			if got := crc32.Update(crc32.Checksum([]byte(k+"\n"), castagnoli), castagnoli, blk); got != c {
				t.Fatalf("block of %s: CRC %d, the key line says %d", k, got, c)
			}
			ix.keys = append(ix.keys, k)
			ix.blocks[k] = strings.Split(strings.TrimSuffix(string(blk), "\n"), "\n")
			for i := 1; i < len(ix.blocks[k]); i++ {
				if ix.blocks[k][i-1] >= ix.blocks[k][i] {
					t.Fatalf("block of %s not strictly sorted by day, then id: %q", k, ix.blocks[k])
				}
			}
		default:
			t.Fatalf("head line %q is neither a day nor a key line", l)
		}
	}
	return ix
}

// format writes ix back as an index file; edit may change the key lines'
// fields (key, offset, length, crc) before the head's CRC is computed.
func (ix index) format(edit func(i int, f []string)) []byte {
	var body strings.Builder
	head := strings.Join(ix.days, "\n") + "\n"
	for i, k := range ix.keys {
		blk := strings.Join(ix.blocks[k], "\n") + "\n"
		at := body.Len()
		body.WriteString(blk)
		c := crc32.Update(crc32.Checksum([]byte(k+"\n"), castagnoli), castagnoli, []byte(blk))
		f := []string{k, fmt.Sprint(at), fmt.Sprint(len(blk)), fmt.Sprint(c)}
		if edit != nil {
			edit(i, f)
		}
		head += "key " + strings.Join(f, " ") + "\n"
	}
	crc := crc32.Checksum([]byte(head), castagnoli)
	for hl := len(head); ; {
		first := fmt.Sprintf("pem trace index 3 %d %d %d\n", hl, body.Len(), crc)
		if len(first)+len(head) == hl {
			return []byte(first + head + body.String())
		}
		hl = len(first) + len(head)
	}
}

// A damaged index file — truncated anywhere, a byte changed anywhere, a key
// table whose offsets or lengths lie (its own CRC made right), a block given
// to another key, an old format holding wrong keys — gives the right answer
// for every key (the days are listed and read again), never a panic or a
// missed trace, and is written anew, whole.
func TestTraceIndexDamaged(t *testing.T) {
	ctx := context.Background()
	s0 := newTree(t)
	dir := s0.Root()
	byKey := putTraces(t, s0, "example.com", []string{"find the price", "read the news", "open a ticket"}, 4)
	p := filepath.Join(dir, ".pem-cache", "trace-index", "example.com")
	check := func(what string) {
		t.Helper()
		s := openLater(t, dir)
		for k, want := range byKey {
			refs, err := s.IntentTraceRefs(ctx, "example.com", k)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if got := ids(refs); !slices.Equal(got, want) {
				t.Fatalf("%s: IntentTraceRefs(%s) = %v, want %v", what, k, got, want)
			}
		}
	}
	check("building the index")
	good, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	ix := parseIndex(t, good)
	if len(ix.keys) != 3 {
		t.Fatalf("%d keys in the index, want 3: %q", len(ix.keys), ix.keys)
	}
	damaged := map[string][]byte{}
	for n := 0; n < len(good); n += 7 {
		damaged[fmt.Sprintf("truncated to %d bytes", n)] = good[:n]
	}
	for i := 0; i < len(good); i += 5 {
		b := slices.Clone(good)
		b[i] ^= 0x01
		damaged[fmt.Sprintf("byte %d changed", i)] = b
	}
	damaged["grown by a line"] = append(slices.Clone(good), "2025-06-01 01ARZ3NDEKTSV4RRFFQ69G5FAV\n"...)
	lie := func(name string, edit func(i int, f []string)) { damaged[name] = ix.format(edit) }
	for i := range ix.keys {
		for _, d := range []int{-38, 38, -1, 1} {
			lie(fmt.Sprintf("key %d's offset %+d", i, d), func(j int, f []string) {
				if j == i {
					f[1] = fmt.Sprint(atoi(t, f[1]) + d)
				}
			})
			lie(fmt.Sprintf("key %d's length %+d", i, d), func(j int, f []string) {
				if j == i {
					f[2] = fmt.Sprint(atoi(t, f[2]) + d)
				}
			})
		}
		lie(fmt.Sprintf("key %d's offset out of range", i), func(j int, f []string) {
			if j == i {
				f[1] = "1000000"
			}
		})
		lie(fmt.Sprintf("key %d's length out of range", i), func(j int, f []string) {
			if j == i {
				f[2] = "99999999999"
			}
		})
	}
	// Two keys' names swapped (their blocks and CRCs stay): each would
	// answer with the other's traces.
	lie("two keys swapped", func(j int, f []string) {
		if j < 2 {
			f[0] = ix.keys[1-j]
		}
	})
	// The old format (2), its lines wrong: used, it would answer wrongly.
	var v2 strings.Builder
	v2.WriteString("pem trace index 2\n")
	for _, d := range ix.days {
		v2.WriteString(d + "\n")
	}
	for k, v := range ix.blocks {
		for _, l := range v {
			_, id, _ := strings.Cut(l, " ")
			fmt.Fprintf(&v2, "%s %s\n", id, strings.TrimSuffix(k, "e")+"x")
		}
	}
	damaged["format 2, wrong keys"] = []byte(v2.String())
	damaged["empty"] = nil
	damaged["a directory's worth of zeros"] = make([]byte, 4096)

	names := slices.Sorted(maps.Keys(damaged))
	t.Logf("%d damaged files over a %d-byte index", len(names), len(good))
	for _, name := range names {
		if err := os.WriteFile(p, damaged[name], 0o644); err != nil {
			t.Fatal(err)
		}
		check(name)
		// The file is written anew, whole (not necessarily byte for byte:
		// the days' trusted flags, the order of nothing else).
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("%s: no index file after the query: %v", name, err)
		}
		if !slices.Equal(data, good) {
			t.Fatalf("%s: the index file was not rewritten as it was built:\n%s\nwant\n%s", name, data, good)
		}
		parseIndex(t, data)
	}

	// A file whose lines are wrong but whose lengths and CRCs are right is
	// one pem could have written: it is used, and a wrong line hides only
	// the trace it names (as in format 2, and as documented). Here a block
	// boundary moved by a line, the CRCs recomputed: the first key loses
	// its last trace, the second gains it (the engine, decoding each trace
	// it is handed, drops it there) — or, its lines now out of order, reads
	// its day again.
	moved := index{days: ix.days, keys: ix.keys, blocks: maps.Clone(ix.blocks)}
	a, b := ix.keys[0], ix.keys[1]
	last := ix.blocks[a][len(ix.blocks[a])-1]
	moved.blocks[a] = ix.blocks[a][:len(ix.blocks[a])-1]
	moved.blocks[b] = append([]string{last}, ix.blocks[b]...)
	if err := os.WriteFile(p, moved.format(nil), 0o644); err != nil {
		t.Fatal(err)
	}
	_, lost, _ := strings.Cut(last, " ")
	s := openLater(t, dir)
	for _, k := range ix.keys { // a first: a query of b may find its block out of order and rewrite the file
		want := byKey[k]
		got := intentIDs(t, s, k)
		if k == a {
			want = slices.DeleteFunc(slices.Clone(want), func(id string) bool { return id == lost })
		} else if k == b && len(got) == len(want)+1 { // its block still in order: used
			want = append(slices.Clone(want), lost)
			slices.Sort(want)
		}
		if !slices.Equal(got, want) {
			t.Errorf("a line moved, CRCs right: IntentTraceRefs(%s) = %v, want %v", k, got, want)
		}
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A query reads only its own key's block (and unknownKey's) of the index
// file: a damaged block of another key goes unnoticed by it — were it read,
// the damage would make the days be listed again, and a trace damaged in
// place since would show (listed for every intent). A long-lived store
// whose index file is replaced by another process (same days) reads the
// next key's block from the new file, without listing the days again.
func TestTraceIndexReadsOnlyItsKey(t *testing.T) {
	s0 := newTree(t)
	dir := s0.Root()
	byKey := putTraces(t, s0, "example.com", []string{"find the price", "read the news", "open a ticket"}, 4)
	p := filepath.Join(dir, ".pem-cache", "trace-index", "example.com")
	for k := range byKey {
		intentIDs(t, openLater(t, dir), k)
	}
	good, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	ix := parseIndex(t, good)
	const price, news, ticket = "find-the-price", "read-the-news", "open-a-ticket"
	// A ticket trace damaged in place (its day directory's identity stays).
	bad := byKey[ticket][0]
	tp := filepath.Join(dir, "traces", "example.com", "2025-06-01", bad+".yaml")
	if err := os.WriteFile(tp, []byte("not: [yaml"), 0o644); err != nil {
		t.Fatal(err)
	}

	// The news block damaged: a byte of its first line's id.
	off := 0
	for _, k := range ix.keys {
		if k == news {
			break
		}
		off += len(ix.blocks[k]) * 38
	}
	damaged := slices.Clone(good)
	damaged[len(good)-len(strings.Join(flatten(ix), ""))+off+20] ^= 0x01
	if err := os.WriteFile(p, damaged, 0o644); err != nil {
		t.Fatal(err)
	}
	s := openLater(t, dir)
	if got := intentIDs(t, s, price); !slices.Equal(got, byKey[price]) {
		t.Errorf("price, the news block damaged: %v, want %v (only its own block read)", got, byKey[price])
	}
	wantNews := append(slices.Clone(byKey[news]), bad) // the days listed again: the damaged trace shows
	slices.Sort(wantNews)
	if got := intentIDs(t, s, news); !slices.Equal(got, wantNews) {
		t.Errorf("news, its block damaged: %v, want %v (the days listed again)", got, wantNews)
	}

	// The good file back, then a long-lived store reads one key; another
	// process replaces the file (a new inode, the same days); the store's
	// next key comes from the new file's block, the days not listed again.
	if err := os.WriteFile(p, good, 0o644); err != nil {
		t.Fatal(err)
	}
	s = openLater(t, dir)
	if got := intentIDs(t, s, price); !slices.Equal(got, byKey[price]) {
		t.Fatalf("price: %v, want %v", got, byKey[price])
	}
	tmp := p + ".new"
	if err := os.WriteFile(tmp, good, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
	if got := intentIDs(t, s, ticket); !slices.Equal(got, byKey[ticket]) {
		t.Errorf("ticket after the file was replaced: %v, want %v (the new file's block)", got, byKey[ticket])
	}
	// A replacement that no longer holds the days as they were (another
	// process's view of an older tree: every day untrusted) is not used for
	// them: the days are listed again.
	ix2 := parseIndex(t, good)
	for i, d := range ix2.days {
		ix2.days[i] = strings.Replace(d, " 1 ", " 0 ", 1)
	}
	if err := os.WriteFile(tmp, ix2.format(nil), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
	if got := intentIDs(t, s, news); !slices.Equal(got, wantNews) {
		t.Errorf("news after a replacement with other days: %v, want %v (the days listed again)", got, wantNews)
	}
	if err := os.Remove(tp); err != nil { // so newTree's Check passes
		t.Fatal(err)
	}
}

func flatten(ix index) []string {
	var out []string
	for _, k := range ix.keys {
		for _, l := range ix.blocks[k] {
			out = append(out, l+"\n")
		}
	}
	return out
}

// Queries of every key, in one long-lived store and in new ones, while
// another writer keeps replacing the index file with a good copy, a damaged
// one or none: every answer is the right one (run under -race).
func TestTraceIndexConcurrent(t *testing.T) {
	ctx := context.Background()
	s0 := newTree(t)
	dir := s0.Root()
	byKey := putTraces(t, s0, "example.com", []string{"find the price", "read the news", "open a ticket"}, 4)
	p := filepath.Join(dir, ".pem-cache", "trace-index", "example.com")
	shared := openLater(t, dir)
	for k := range byKey {
		if _, err := shared.IntentTraceRefs(ctx, "example.com", k); err != nil {
			t.Fatal(err)
		}
	}
	good, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	keys := slices.Sorted(maps.Keys(byKey))
	done := make(chan struct{})
	writer := make(chan struct{})
	go func() { // the other writer
		defer close(writer)
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			data := good
			switch i % 3 {
			case 1:
				data = slices.Clone(good)
				data[len(data)/2] ^= 0x20
			case 2:
				_ = os.Remove(p)
				continue
			}
			tmp := fmt.Sprintf("%s.%d.tmp", p, i)
			if os.WriteFile(tmp, data, 0o644) == nil {
				_ = os.Rename(tmp, p)
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 30 {
				s := shared
				if g%2 == 1 {
					s = openLater(t, dir)
				}
				k := keys[(g+i)%len(keys)]
				refs, err := s.IntentTraceRefs(ctx, "example.com", k)
				if err != nil {
					errs <- err
					return
				}
				if got := ids(refs); !slices.Equal(got, byKey[k]) {
					errs <- fmt.Errorf("goroutine %d, query %d: IntentTraceRefs(%s) = %v, want %v", g, i, k, got, byKey[k])
					return
				}
			}
		}()
	}
	wg.Wait()
	close(done)
	<-writer
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// A long-lived store whose index days came from the file learns a trace
// added to a middle day: the file it writes keeps the other days' lines
// (copied from the old file), the changed day's once (the old and the
// learned), every block strictly in order — the file a rebuild writes.
func TestTraceIndexMergesChangedDay(t *testing.T) {
	ctx := context.Background()
	s0 := newTree(t)
	dir := s0.Root()
	byKey := putTraces(t, s0, "example.com", []string{"find the price", "read the news", "open a ticket"}, 4)
	p := filepath.Join(dir, ".pem-cache", "trace-index", "example.com")
	for k := range byKey {
		if _, err := openLater(t, dir).IntentTraceRefs(ctx, "example.com", k); err != nil {
			t.Fatal(err)
		}
	}
	s := openLater(t, dir)
	if _, err := s.IntentTraceRefs(ctx, "example.com", "find-the-price"); err != nil {
		t.Fatal(err)
	}
	// A copy of a news trace of the second day under a new id (only its
	// intent_key line is read by the index).
	day := filepath.Join(dir, "traces", "example.com", "2025-06-02")
	src := byKey["read-the-news"][1]
	data, err := os.ReadFile(filepath.Join(day, src+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	added := src[:20] + "ZZZZZZ"
	np := filepath.Join(day, added+".yaml")
	if err := os.WriteFile(np, data, 0o644); err != nil {
		t.Fatal(err)
	}
	refs, err := s.IntentTraceRefs(ctx, "example.com", "read-the-news")
	if err != nil {
		t.Fatal(err)
	}
	want := append(slices.Clone(byKey["read-the-news"]), added)
	slices.Sort(want)
	if got := ids(refs); !slices.Equal(got, want) {
		t.Fatalf("IntentTraceRefs(read-the-news) = %v, want %v", got, want)
	}
	merged, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	ix := parseIndex(t, merged)
	if n := len(ix.blocks["read-the-news"]); n != 5 {
		t.Errorf("news block: %d lines, want 5: %q", n, ix.blocks["read-the-news"])
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if _, err := openLater(t, dir).IntentTraceRefs(ctx, "example.com", "read-the-news"); err != nil {
		t.Fatal(err)
	}
	rebuilt, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(merged, rebuilt) {
		t.Errorf("the merged index differs from a rebuild:\n%s\nrebuilt:\n%s", merged, rebuilt)
	}
	if err := os.Remove(np); err != nil { // so newTree's Check passes
		t.Fatal(err)
	}
}
