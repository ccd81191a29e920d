package mcp

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// A client that never reads the server's stderr must not stall it: the
// protocol loop never writes to stderr itself. Logs go through an
// AsyncWriter (bounded: when the reader falls behind, lines are dropped and
// counted, never waited for) and a RateLimit handler (each message at most
// a burst per interval; the rest summarised as one line).

// AsyncWriter hands writes to a goroutine that copies them to W. A write
// never blocks: when more than the buffer's bytes are waiting, it is dropped
// and counted. Close stops the goroutine and, if anything was dropped, tries
// (without waiting) to say how much.
type AsyncWriter struct {
	w       io.Writer
	ch      chan []byte
	room    atomic.Int64 // bytes that may still be queued
	dropped atomic.Int64 // lines dropped
	done    chan struct{}
	once    sync.Once
}

// NewAsyncWriter starts the writer; maxBytes ≤ 0 means 256 KiB.
func NewAsyncWriter(w io.Writer, maxBytes int) *AsyncWriter {
	if maxBytes <= 0 {
		maxBytes = 256 << 10
	}
	a := &AsyncWriter{w: w, ch: make(chan []byte, 1024), done: make(chan struct{})}
	a.room.Store(int64(maxBytes))
	go a.loop()
	return a
}

func (a *AsyncWriter) loop() {
	defer close(a.done)
	for b := range a.ch {
		a.room.Add(int64(len(b)))
		_, _ = a.w.Write(b) // stderr failing is no reason to stop serving
	}
}

// Write queues a copy of p, or drops it when the queue is full. It always
// reports success: a log line is not worth stalling the protocol for.
func (a *AsyncWriter) Write(p []byte) (int, error) {
	if a.room.Add(-int64(len(p))) < 0 {
		a.room.Add(int64(len(p)))
		a.dropped.Add(1)
		return len(p), nil
	}
	b := append([]byte(nil), p...)
	select {
	case a.ch <- b:
	default:
		a.room.Add(int64(len(p)))
		a.dropped.Add(1)
	}
	return len(p), nil
}

// Dropped returns how many writes were dropped so far.
func (a *AsyncWriter) Dropped() int64 { return a.dropped.Load() }

// Close stops accepting writes and waits at most wait for the queue to be
// written; a last line tells how many writes were dropped. Safe to call twice.
func (a *AsyncWriter) Close(wait time.Duration) {
	a.once.Do(func() {
		if n := a.dropped.Load(); n > 0 {
			msg := fmt.Sprintf("pem mcp: %d log line(s) dropped: stderr was not read fast enough\n", n)
			select {
			case a.ch <- []byte(msg):
			default:
			}
		}
		close(a.ch)
	})
	select {
	case <-a.done:
	case <-time.After(wait):
	}
}

// RateLimit wraps a handler so that each message (by its text) is logged at
// most burst times per interval; the records over that are counted, and the
// next record of the message that is let through carries "suppressed=N".
// Flush logs one summary line per message still holding a count.
type RateLimit struct {
	inner    slog.Handler
	burst    int
	interval time.Duration
	now      func() time.Time
	st       *rateState
}

type rateState struct {
	mu sync.Mutex
	m  map[string]*rateCount
}

type rateCount struct {
	start      time.Time
	n          int
	suppressed int
}

// NewRateLimit returns h limited to burst records per message per interval
// (≤ 0: 5 per 10 s). now is the clock (nil: time.Now).
func NewRateLimit(h slog.Handler, burst int, interval time.Duration, now func() time.Time) *RateLimit {
	if burst <= 0 {
		burst = 5
	}
	if interval <= 0 {
		interval = 10 * time.Second
	}
	if now == nil {
		now = time.Now
	}
	return &RateLimit{inner: h, burst: burst, interval: interval, now: now, st: &rateState{m: map[string]*rateCount{}}}
}

var _ slog.Handler = (*RateLimit)(nil)

func (r *RateLimit) Enabled(ctx context.Context, l slog.Level) bool { return r.inner.Enabled(ctx, l) }

func (r *RateLimit) Handle(ctx context.Context, rec slog.Record) error {
	now := r.now()
	r.st.mu.Lock()
	c := r.st.m[rec.Message]
	if c == nil {
		if len(r.st.m) > 1024 { // distinct messages are few; bound the map anyway
			r.st.m = map[string]*rateCount{}
		}
		c = &rateCount{start: now}
		r.st.m[rec.Message] = c
	}
	if now.Sub(c.start) >= r.interval {
		c.start, c.n = now, 0
	}
	c.n++
	if c.n > r.burst {
		c.suppressed++
		r.st.mu.Unlock()
		return nil
	}
	suppressed := c.suppressed
	c.suppressed = 0
	r.st.mu.Unlock()
	if suppressed > 0 {
		rec = rec.Clone()
		rec.AddAttrs(slog.Int("suppressed", suppressed))
	}
	return r.inner.Handle(ctx, rec)
}

func (r *RateLimit) WithAttrs(as []slog.Attr) slog.Handler {
	c := *r
	c.inner = r.inner.WithAttrs(as)
	return &c
}

func (r *RateLimit) WithGroup(name string) slog.Handler {
	c := *r
	c.inner = r.inner.WithGroup(name)
	return &c
}

// Flush logs, for each message with suppressed records, one summary.
func (r *RateLimit) Flush(ctx context.Context) {
	r.st.mu.Lock()
	var lines []slog.Record
	for msg, c := range r.st.m {
		if c.suppressed > 0 {
			rec := slog.NewRecord(r.now(), slog.LevelWarn, msg+" (repeats summarised)", 0)
			rec.AddAttrs(slog.Int("suppressed", c.suppressed))
			lines = append(lines, rec)
			c.suppressed = 0
		}
	}
	r.st.mu.Unlock()
	for _, rec := range lines {
		_ = r.inner.Handle(ctx, rec)
	}
}
