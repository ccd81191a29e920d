package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/pemdev/pem/engine"
)

// Stamps change with every write (pem's renames and edits in place alike),
// are "absent" for a missing file, and are not trusted for a file changed a
// moment ago.
func TestStamps(t *testing.T) {
	ctx := context.Background()
	ahead := testStore(t, func() time.Time { return time.Now().Add(time.Hour) })
	at := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	tr := &engine.Trace{Format: engine.Format, ID: "01JB000000000000000000000A", Domain: "a.example", Intent: "x", IntentKey: "x",
		URL: "https://a.example/", Outcome: engine.Success, StartedAt: at}
	if _, err := ahead.PutTrace(ctx, tr); err != nil {
		t.Fatal(err)
	}
	ref := RefOf(tr)
	s1, ok := ahead.TraceStamp(ref)
	if !ok || s1 == "" || s1 == "absent" {
		t.Fatalf("stamp %q, %v", s1, ok)
	}
	if s, ok := ahead.TraceStamp(ref); s != s1 || !ok {
		t.Fatalf("the stamp moved without a write: %q, %q", s1, s)
	}
	if s, ok := ahead.FactsStamp("a.example", "x"); s != "absent" || !ok {
		t.Fatalf("missing facts: %q, %v", s, ok)
	}
	// An edit in place, same size, mtime put back: the change time still moves.
	p := filepath.Join(ahead.Root(), filepath.FromSlash(TracePath(ref)))
	fi, _ := os.Stat(p)
	data, _ := os.ReadFile(p)
	time.Sleep(10 * time.Millisecond)
	if err := os.WriteFile(p, append(data[:len(data)-1], '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(p, fi.ModTime(), fi.ModTime())
	if s, _ := ahead.TraceStamp(ref); s == s1 {
		t.Fatal("an edit in place kept the stamp")
	}
	// With the real clock, a file written now is not trusted.
	now := testStore(t, nil)
	if _, err := now.PutTrace(ctx, tr); err != nil {
		t.Fatal(err)
	}
	if _, ok := now.TraceStamp(ref); ok {
		t.Fatal("a trace written a moment ago is trusted")
	}
	if _, ok := now.TraceStamp(engine.TraceRef{Domain: "../x", Day: "2026-11-01", ID: tr.ID}); ok {
		t.Fatal("a bad ref has a stamp")
	}
}

// TraceOnce reads what Trace reads, with the same errors, and caches nothing.
func TestTraceOnce(t *testing.T) {
	ctx := context.Background()
	s := testStore(t, func() time.Time { return time.Now().Add(time.Hour) })
	tr := &engine.Trace{Format: engine.Format, ID: "01JB000000000000000000000B", Domain: "a.example", Intent: "x", IntentKey: "x",
		URL: "https://a.example/", Outcome: engine.Success, StartedAt: time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)}
	if _, err := s.PutTrace(ctx, tr); err != nil {
		t.Fatal(err)
	}
	ref := RefOf(tr)
	once, err := s.TraceOnce(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if n := s.traces.len(); n != 0 {
		t.Fatalf("TraceOnce left %d traces in the cache", n)
	}
	cached, err := s.Trace(ctx, ref)
	if err != nil || !reflect.DeepEqual(once, cached) {
		t.Fatalf("TraceOnce %+v, Trace %+v (%v)", once, cached, err)
	}
	if _, err := s.TraceOnce(ctx, engine.TraceRef{Domain: "a.example", Day: "2026-11-02", ID: "01JB000000000000000000000C"}); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("missing trace: %v", err)
	}
	p := filepath.Join(s.Root(), filepath.FromSlash(TracePath(ref)))
	if err := os.WriteFile(p, []byte("format: 1\nid: [broken\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TraceOnce(ctx, ref); !errors.Is(err, engine.ErrCorrupt) {
		t.Fatalf("corrupt trace: %v", err)
	}
}

// A trace directory's stamp moves when a trace is added or removed in it, not
// when one is edited in place; TraceDays lists the day directories TraceRefs
// reads, an empty one too.
func TestTraceDirStamps(t *testing.T) {
	ctx := context.Background()
	s := testStore(t, func() time.Time { return time.Now().Add(time.Hour) })
	if st, ok := s.TraceDirStamp("a.example", ""); st != "absent" || !ok {
		t.Fatalf("a domain without traces: %q, %v", st, ok)
	}
	tr := &engine.Trace{Format: engine.Format, ID: "01JB000000000000000000000C", Domain: "a.example", Intent: "x", IntentKey: "x",
		URL: "https://a.example/", Outcome: engine.Success, StartedAt: time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)}
	if _, err := s.PutTrace(ctx, tr); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(s.Root(), "traces", "a.example", "2026-11-02")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	if days, err := s.TraceDays(ctx, "a.example"); err != nil || !reflect.DeepEqual(days, []string{"2026-11-01", "2026-11-02"}) {
		t.Fatalf("days %v, %v", days, err)
	}
	dir, ok1 := s.TraceDirStamp("a.example", "")
	day, ok2 := s.TraceDirStamp("a.example", "2026-11-01")
	if !ok1 || !ok2 || dir == "absent" || day == "absent" || dir == day {
		t.Fatalf("stamps %q %v, %q %v", dir, ok1, day, ok2)
	}
	p := filepath.Join(s.Root(), filepath.FromSlash(TracePath(RefOf(tr))))
	data, _ := os.ReadFile(p)
	time.Sleep(10 * time.Millisecond)
	if err := os.WriteFile(p, append(data, '\n'), 0o644); err != nil { // in place
		t.Fatal(err)
	}
	if d2, _ := s.TraceDirStamp("a.example", "2026-11-01"); d2 != day {
		t.Fatalf("an edit in place moved the day directory's stamp: %q, %q", day, d2)
	}
	tr2 := tr.Clone()
	tr2.ID = "01JB000000000000000000000D"
	if _, err := s.PutTrace(ctx, tr2); err != nil {
		t.Fatal(err)
	}
	if d2, _ := s.TraceDirStamp("a.example", "2026-11-01"); d2 == day {
		t.Fatal("a new trace kept the day directory's stamp")
	}
	if d2, _ := s.TraceDirStamp("a.example", ""); d2 != dir {
		t.Fatalf("a trace in an existing day moved the domain directory's stamp")
	}
	if err := os.Mkdir(filepath.Join(s.Root(), "traces", "a.example", "2026-11-03"), 0o755); err != nil {
		t.Fatal(err)
	}
	if d2, _ := s.TraceDirStamp("a.example", ""); d2 == dir {
		t.Fatal("a new day directory kept the domain directory's stamp")
	}
	if _, ok := s.TraceDirStamp("a.example", "not-a-day"); ok {
		t.Fatal("a bad day has a stamp")
	}
	// With the real clock, a directory changed a moment ago is not trusted.
	now := testStore(t, nil)
	if _, err := now.PutTrace(ctx, tr); err != nil {
		t.Fatal(err)
	}
	if _, ok := now.TraceDirStamp("a.example", "2026-11-01"); ok {
		t.Fatal("a day directory written a moment ago is trusted")
	}
}
