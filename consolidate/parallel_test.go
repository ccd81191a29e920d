package consolidate

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
)

func TestParallelN(t *testing.T) {
	ctx := context.Background()
	var sum atomic.Int64
	if err := parallelN(ctx, 100, 4, func(i int) error { sum.Add(int64(i)); return nil }); err != nil || sum.Load() != 4950 {
		t.Fatalf("sum %d, err %v: want every index once", sum.Load(), err)
	}
	// One worker: the error of call 3 is returned and no later call starts.
	boom := errors.New("boom")
	var calls atomic.Int32
	err := parallelN(ctx, 10, 1, func(i int) error {
		calls.Add(1)
		if i == 3 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || calls.Load() != 4 {
		t.Errorf("err %v after %d calls, want boom after 4", err, calls.Load())
	}
	// A cancelled context: its error, and no call at all.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	calls.Store(0)
	if err := parallelN(cctx, 10, 4, func(int) error { calls.Add(1); return nil }); !errors.Is(err, context.Canceled) || calls.Load() != 0 {
		t.Errorf("cancelled: err %v after %d calls", err, calls.Load())
	}
	if err := parallelN(cctx, 0, 4, func(int) error { return boom }); err != nil {
		t.Errorf("no work: %v", err)
	}
}
