package consolidate

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store/gitrepo"
	"github.com/pemdev/pem/store/storetest/gitcli"
)

// TestFactsMoveOnlyWithWhatAReviewerReads: runs that change neither an
// entry's content nor its status leave its facts file (and main) alone —
// their evidence goes to the state ref; a selector's stability is rewritten
// only when it moves by StabilityStep or more, and provenance.traces move
// with the content.
func TestFactsMoveOnlyWithWhatAReviewerReads(t *testing.T) {
	ctx := context.Background()
	st, dir := newRepoTree(t)
	f := newFx(21)
	rel := filepath.Join("facts", "github.com", "star-count.yaml")
	read := func() (string, *engine.Facts) {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		return string(data), readFacts(t, st)
	}
	// One session only: it stays a candidate however many successes it has.
	runs := func(now time.Time, fails int) {
		t.Helper()
		var ts []*engine.Trace
		for i := 0; i < fails; i++ {
			ts = append(ts, f.trace(traceSpec{url: starsURL, intent: "star count", session: "s1", at: now.Add(-time.Hour + time.Duration(i)*time.Minute), steps: starsBroken}))
		}
		ts = append(ts, f.trace(traceSpec{url: starsURL, intent: "star count", session: "s1", at: now.Add(-time.Minute), ok: true, steps: starsRoute}))
		put(t, st, ts...)
		if _, err := Run(ctx, st, at(now)); err != nil {
			t.Fatal(err)
		}
	}
	var ts []*engine.Trace
	for i := 0; i < 30; i++ {
		ts = append(ts, f.trace(traceSpec{url: starsURL, intent: "star count", session: "s1", at: day0.Add(-days(1) + time.Duration(i)*time.Minute), ok: true, steps: starsRoute}))
	}
	put(t, st, ts...)
	if _, err := Run(ctx, st, at(day0)); err != nil {
		t.Fatal(err)
	}
	data0, f0 := read()
	if f0.Status == engine.Verified || f0.Selectors["click_repo_stars_counter_star"].Stability != 1 {
		t.Fatalf("after 30 successes in one session: status %s, selectors %+v; want not verified, stability 1", f0.Status, f0.Selectors)
	}

	// One more success of the same route, then one failure and a success
	// (stability 31/32 = 0.97, < StabilityStep from 1): the file stays.
	for i, fails := range []int{0, 1} {
		head := gitcli.Run(t, dir, "rev-parse", "HEAD")
		runs(day0.Add(days(float64(i+1))), fails)
		if data, fa := read(); data != data0 {
			t.Fatalf("run %d (%d failure(s) and a success of the same route) rewrote the facts (stability %v, traces %v):\n%s\nwas\n%s",
				i, fails, fa.Selectors["click_repo_stars_counter_star"].Stability, fa.Provenance.Traces, data, data0)
		}
		if moved := gitcli.Run(t, dir, "diff", "--name-only", head, "HEAD", "--", "facts/github.com/star-count.yaml"); moved != "" {
			t.Fatalf("run %d: main changed %s", i, moved)
		}
	}
	state := gitcli.Run(t, dir, "show", gitrepo.StateRef.String()+":experience/github.com/star-count.yaml")
	if !strings.Contains(state, "\nattempts: 33\n") {
		t.Fatalf("the state's experience does not hold the 33 runs:\n%s", state)
	}

	// Three failures and a success: 32/36 = 0.89, a move of 0.11: a new
	// revision, with the runs behind it in provenance.
	runs(day0.Add(days(3)), 3)
	data, fa := read()
	if data == data0 || fa.Selectors["click_repo_stars_counter_star"].Stability != 0.89 || fa.Revision == f0.Revision {
		t.Fatalf("after 3 more failures: stability %v, r%s (was r%s); want 0.89 and a new revision",
			fa.Selectors["click_repo_stars_counter_star"].Stability, fa.Revision, f0.Revision)
	}
	if slices.Equal(fa.Provenance.Traces, f0.Provenance.Traces) {
		t.Fatalf("the content moved but provenance.traces did not: %v", fa.Provenance.Traces)
	}
	assertGitClean(t, dir)
}

// TestSiteMovedIgnoresRotationOnly: a site note seen again at the cap of its
// trace ids (the newest rotate, last_seen moves) does not rewrite the site
// file; a new intent, a worked intent, one more run under the cap or a new
// note does.
func TestSiteMovedIgnoresRotationOnly(t *testing.T) {
	ids := func(from, n int) []string {
		var out []string
		for i := from; i < from+n; i++ {
			out = append(out, fmt.Sprintf("T%03d", i))
		}
		return out
	}
	note := func(traces []string, intents ...string) engine.SiteNote {
		return engine.SiteNote{Kind: engine.NoteAntiPattern, Selector: "#x", Intents: intents, Traces: traces, LastSeen: day0}
	}
	site := func(ns ...engine.SiteNote) *engine.Site {
		return &engine.Site{Format: engine.Format, Domain: "github.com", Notes: ns}
	}
	base := site(note(ids(0, engine.MaxSiteTraces), "a"))
	rotated := note(ids(5, engine.MaxSiteTraces), "a")
	rotated.LastSeen = day0.Add(time.Hour)
	worked := note(ids(0, engine.MaxSiteTraces), "a")
	worked.Worked = []string{"b"}
	under := site(note(ids(0, 3), "a"))
	for _, c := range []struct {
		name       string
		base, next *engine.Site
		want       bool
	}{
		{"rotation at the cap and last_seen", base, site(rotated), false},
		{"a new intent", base, site(note(ids(5, engine.MaxSiteTraces), "a", "b")), true},
		{"worked under an intent", base, site(worked), true},
		{"one more run under the cap", under, site(note(ids(0, 4), "a")), true},
		{"a new note", base, site(note(ids(0, engine.MaxSiteTraces), "a"), engine.SiteNote{Kind: engine.NoteBlocker, Type: "anti_bot", Intents: []string{"a"}, Traces: ids(20, 1)}), true},
		{"no file yet", nil, base, true},
	} {
		if got := siteMoved(c.base, c.next); got != c.want {
			t.Errorf("%s: siteMoved = %v, want %v", c.name, got, c.want)
		}
	}
}
