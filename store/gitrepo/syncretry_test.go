package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/transport"
)

// The push errors go-git returns, as they read: its own pre-push check, and
// git receive-pack's per-ref status ("command error on REF: REASON").
func TestLostRaceClassification(t *testing.T) {
	cases := []struct {
		err           error
		lost, refused bool
	}{
		// Races: another writer moved the branch first.
		{git.ErrForceNeeded, true, false},
		{git.ErrNonFastForwardUpdate, true, false},
		{errors.New("non-fast-forward update: refs/heads/main"), true, false},
		{errors.New("command error on refs/heads/main: failed to update ref"), true, false},
		{errors.New("command error on refs/heads/main: failed to lock"), true, false},
		{errors.New("command error on refs/heads/main: cannot lock ref 'refs/heads/main': is at 1f0c but expected 9e2a"), true, false},
		{errors.New("command error on refs/heads/main: reference already exists"), true, false},
		{errors.New("command error on refs/heads/main: stale info"), true, false},
		{errors.New("command error on refs/heads/main: fetch first"), true, false},
		{errors.New("command error on refs/heads/main: incorrect old value provided"), true, false},
		{fmt.Errorf("sync: %w", errors.New("command error on refs/heads/main: failed to update ref")), true, false},
		// Refusals: retrying cannot help.
		{transport.ErrAuthenticationRequired, false, true},
		{transport.ErrAuthorizationFailed, false, true},
		{transport.ErrRepositoryNotFound, false, true},
		{fmt.Errorf("x: %w", transport.ErrAuthorizationFailed), false, true},
		{errors.New("command error on refs/heads/main: pre-receive hook declined"), false, true},
		{errors.New("command error on refs/heads/main: protected branch hook declined"), false, true},
		{errors.New("command error on refs/heads/main: deny updating a hidden ref"), false, true},
		{errors.New("command error on refs/heads/main: branch is currently checked out"), false, true},
		{errors.New("command error on refs/heads/main: failed to update ref: Permission denied"), false, true},
		{errors.New("unpack error: unpack-objects abnormal exit"), false, true},
		// Neither: other errors keep their own message and code.
		{errors.New("dial tcp 10.0.0.1:22: connection refused"), false, false},
		{errors.New("reading HEAD: file does not exist"), false, false},
		{context.Canceled, false, false},
	}
	for _, c := range cases {
		if got := lostRace(c.err); got != c.lost {
			t.Errorf("lostRace(%q) = %v, want %v", c.err, got, c.lost)
		}
		if got := refused(c.err); got != c.refused {
			t.Errorf("refused(%q) = %v, want %v", c.err, got, c.refused)
		}
	}
	if lostRace(nil) {
		t.Error("lostRace(nil) = true")
	}
}

// The pauses: full jitter under a cap that starts at the backoff (or the
// duration of the try that lost, when longer) and doubles up to the maximum.
func TestSyncBackoffBounds(t *testing.T) {
	var asked []int64
	top := func(n int64) int64 { asked = append(asked, n); return n - 1 } // the largest value allowed
	r := newSyncRetry(SyncOptions{Rand: top})
	if r.tries != SyncTries || r.base != SyncBackoff || r.max != SyncMaxBackoff {
		t.Fatalf("defaults: %+v", r)
	}
	ms := time.Millisecond
	want := []time.Duration{50 * ms, 100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 6400 * ms}
	for len(want) < SyncTries-1 {
		want = append(want, 8000*ms)
	}
	var total time.Duration
	for n := 1; n < r.tries; n++ {
		d := r.delay(n, 10*ms) // a try faster than the backoff: the backoff is the unit
		if d != want[n-1] {
			t.Errorf("retry %d: the longest pause is %v, want %v", n, d, want[n-1])
		}
		total += d
	}
	if total > 70*time.Second {
		t.Errorf("the pauses of one sync add up to %v at most, want a bound under 70s", total)
	}
	// Rand is asked for [0, cap] inclusive: n = cap+1.
	if asked[0] != int64(50*ms)+1 {
		t.Errorf("Rand asked for n = %d, want %d", asked[0], int64(50*ms)+1)
	}
	// A slow try (a loaded machine, a far remote) is the unit instead.
	if d := r.delay(1, 700*ms); d != 700*ms {
		t.Errorf("after a 700ms try: the first pause is at most %v, want 700ms", d)
	}
	if d := r.delay(3, 700*ms); d != 2800*ms {
		t.Errorf("after a 700ms try: the third pause is at most %v, want 2.8s", d)
	}
	if d := r.delay(5, time.Minute); d != SyncMaxBackoff {
		t.Errorf("after a one-minute try: the pause is at most %v, want the maximum %v", d, SyncMaxBackoff)
	}
	// The smallest draw is no pause at all (full jitter).
	zero := newSyncRetry(SyncOptions{Rand: func(int64) int64 { return 0 }})
	for n := 1; n < zero.tries; n++ {
		if d := zero.delay(n, 0); d != 0 {
			t.Errorf("retry %d with Rand 0: %v", n, d)
		}
	}
	// Options override the defaults; a maximum below the backoff is raised to it.
	o := newSyncRetry(SyncOptions{Tries: 3, Backoff: 10 * ms, MaxBackoff: 5 * ms, Rand: top})
	if o.tries != 3 || o.delay(1, 0) != 10*ms || o.delay(2, 0) != 10*ms {
		t.Errorf("overrides: %+v, delays %v %v", o, o.delay(1, 0), o.delay(2, 0))
	}
}

// A Sleep that reports the context's error ends the retries with it.
func TestSyncSleepCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := sleepContext(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("sleepContext on a cancelled context: %v", err)
	}
	if err := sleepContext(context.Background(), time.Millisecond); err != nil {
		t.Fatal(err)
	}
}

// A clone that pushed moments ago defers before its first try (the capture
// effect); one whose last push is older, or unknown, does not.
func TestSyncYieldsAfterItsOwnPush(t *testing.T) {
	ms := time.Millisecond
	r := newSyncRetry(SyncOptions{Rand: func(n int64) int64 { return n - 1 }})
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	if d := r.yield(now, time.Time{}, 0); d != 0 {
		t.Errorf("no last push: pause %v", d)
	}
	if d := r.yield(now, now.Add(-100*ms), 300*ms); d != 900*ms {
		t.Errorf("a push 100ms ago whose try took 300ms: pause %v, want at most 900ms (3 units)", d)
	}
	if d := r.yield(now, now.Add(-100*ms), 0); d != 150*ms {
		t.Errorf("a fast push 100ms ago: pause %v, want at most 150ms (3 × the backoff)", d)
	}
	if d := r.yield(now, now.Add(-1200*ms), 300*ms); d != 0 {
		t.Errorf("a push 4 units ago: pause %v, want none", d)
	}
	if d := r.yield(now, now.Add(time.Minute), 300*ms); d != 0 {
		t.Errorf("a last push in the future (clock moved): pause %v, want none", d)
	}
	low := newSyncRetry(SyncOptions{Rand: func(int64) int64 { return 0 }})
	if d := low.yield(now, now.Add(-100*ms), 300*ms); d != 300*ms {
		t.Errorf("the shortest deferral: %v, want one unit (300ms)", d)
	}
	// The record round-trips; a missing or garbled one is no record.
	name := t.TempDir() + "/last"
	if e, d := readLastPush(name); !e.IsZero() || d != 0 {
		t.Errorf("missing record: %v %v", e, d)
	}
	writeLastPush(name, now, 300*ms)
	if e, d := readLastPush(name); !e.Equal(now) || d != 300*ms {
		t.Errorf("record: %v %v", e, d)
	}
	os.WriteFile(name, []byte("garbage"), 0o644)
	if e, d := readLastPush(name); !e.IsZero() || d != 0 {
		t.Errorf("garbled record: %v %v", e, d)
	}
}
