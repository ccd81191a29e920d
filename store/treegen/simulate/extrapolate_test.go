//go:build unix

package main

import (
	"io"
	"os"
	"regexp"
	"strings"
	"testing"
)

// captured runs f with stdout sent to a pipe and returns what it printed.
func captured(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdout
	os.Stdout = w
	done := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		done <- string(b)
	}()
	f()
	os.Stdout = old
	w.Close()
	return <-done
}

// TestExtrapolateSteadyState: the weeks of a 63-day run at 1,200 traces a
// day (as printed 2026-12-07): past week 5 the consolidating clone's .git
// went up and down (prunes) and the full clone's pack came out smaller in
// the last week than the week before. Neither is scaled into a year as a
// line through its last week (that printed 4.53 GiB, and -45536 KiB).
func TestExtrapolateSteadyState(t *testing.T) {
	const mib = 1 << 20
	sizes := []struct{ git, full float64 }{{19.4, 1.9}, {39.3, 2.7}, {57.6, 3.3}, {76.9, 3.8}, {107.4, 4.3}, {65.1, 4.7}, {63.3, 5.2}, {54.5, 5.0}, {65.8, 4.8}}
	var weeks []week
	for i, s := range sizes {
		weeks = append(weeks, week{n: i + 1, gitBytes: int64(s.git * mib), fullBytes: int64(s.full * mib), fullClone: 1e9, consolidations: 14, cpu: 30e9, peakRSS: 140 << 10})
	}
	c := config{days: 63, traces: 1200, yearRuns: 10000, perDay: 2}
	out := captured(t, func() { extrapolate(c, weeks) })
	for _, want := range []string{"steady state (week 5 on", ".git of the consolidating clone: between 54.5 MiB and 107.4 MiB from week 5 to week 9", "history a new full clone fetches: +"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	if regexp.MustCompile(`[+ (]-\d`).MatchString(out) {
		t.Errorf("a negative figure scaled:\n%s", out)
	}
	// A pack that came out smaller than the base week's: no growth.
	weeks[8].fullBytes = 42 * mib / 10
	out = captured(t, func() { extrapolate(c, weeks) })
	if !strings.Contains(out, "history a new full clone fetches: no growth (4.3 MiB in week 5, 4.2 MiB in week 9)") {
		t.Errorf("want no growth from week 5 to 9:\n%s", out)
	}
	// Five weeks only: no steady state to speak of, the last week's growth.
	out = captured(t, func() { extrapolate(config{days: 35, traces: 1200, yearRuns: 10000, perDay: 2}, weeks[:5]) })
	if !strings.Contains(out, "run 7 weeks or more") || !strings.Contains(out, "(weeks 4 -> 5)") {
		t.Errorf("five weeks:\n%s", out)
	}
}
