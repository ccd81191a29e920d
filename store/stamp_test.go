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
