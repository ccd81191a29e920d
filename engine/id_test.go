package engine_test

import (
	"bytes"
	"errors"
	"sort"
	"testing"
	"time"

	"github.com/pemdev/pem/engine"
)

func TestNewTraceID(t *testing.T) {
	id, err := engine.NewTraceID(t0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(id) != 26 || !engine.ValidTraceID(id) {
		t.Errorf("NewTraceID = %q: want 26 valid characters", id)
	}
	// Known vector: time 0 and zero randomness is all zeros; all ones is the max.
	zero, _ := engine.NewTraceID(time.UnixMilli(0), bytes.NewReader(make([]byte, 10)))
	if zero != "00000000000000000000000000" {
		t.Errorf("zero id = %q", zero)
	}
	max, _ := engine.NewTraceID(time.UnixMilli(1<<48-1), bytes.NewReader(bytes.Repeat([]byte{0xff}, 10)))
	if max != "7ZZZZZZZZZZZZZZZZZZZZZZZZZ" || !engine.ValidTraceID(max) {
		t.Errorf("max id = %q", max)
	}
	// The time part is the first 10 characters (48 bits), as in ULID:
	// 1469918176385 ms is 01ARYZ6S41 (the ULID spec's example).
	ex, _ := engine.NewTraceID(time.UnixMilli(1469918176385), bytes.NewReader(make([]byte, 10)))
	if ex[:10] != "01ARYZ6S41" {
		t.Errorf("time part = %q, want 01ARYZ6S41", ex[:10])
	}
}

func TestNewTraceIDRandomnessError(t *testing.T) {
	_, err := engine.NewTraceID(t0, bytes.NewReader([]byte{1, 2, 3}))
	if err == nil {
		t.Error("short random source: want an error")
	}
	if _, err := engine.NewTraceID(t0, errReader{}); !errors.Is(err, errBroken) {
		t.Errorf("err = %v, want the reader's error", err)
	}
}

var errBroken = errors.New("broken")

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errBroken }

func TestTraceIDsSortByTimeAndDiffer(t *testing.T) {
	var ids []string
	seen := map[string]bool{}
	for i := 0; i < 2000; i++ {
		id, err := engine.NewTraceID(t0.Add(time.Duration(i)*time.Millisecond), nil)
		if err != nil {
			t.Fatal(err)
		}
		if seen[id] {
			t.Fatalf("duplicate id %s", id)
		}
		seen[id] = true
		ids = append(ids, id)
	}
	if !sort.StringsAreSorted(ids) {
		t.Error("ids made at increasing milliseconds do not sort increasingly")
	}
	// Same millisecond: still distinct.
	a, _ := engine.NewTraceID(t0, nil)
	b, _ := engine.NewTraceID(t0, nil)
	if a == b || a[:10] != b[:10] {
		t.Errorf("same ms: %s, %s; want the same time part and distinct ids", a, b)
	}
}

func TestValidTraceID(t *testing.T) {
	for _, id := range []string{"", "01ARYZ6S41TSV4RRFFQ69G5FAV0", "01ARYZ6S41TSV4RRFFQ69G5FA", "81ARYZ6S41TSV4RRFFQ69G5FAV",
		"01ARYZ6S41TSV4RRFFQ69G5FAI", "01ARYZ6S41TSV4RRFFQ69G5FAL", "01ARYZ6S41TSV4RRFFQ69G5FAO", "01ARYZ6S41TSV4RRFFQ69G5FAU",
		"01aryz6s41tsv4rrffq69g5fav", "01ARYZ6S41TSV4RRFFQ69G5F/V", "../../../../../../../etc/x"} {
		if engine.ValidTraceID(id) {
			t.Errorf("ValidTraceID(%q) = true", id)
		}
	}
	if !engine.ValidTraceID("01ARYZ6S41TSV4RRFFQ69G5FAV") {
		t.Error("ValidTraceID rejects the ULID spec's example")
	}
}
