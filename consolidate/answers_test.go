package consolidate

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store/storetest/gitcli"
)

// TestConsolidationCachesAnswers: consolidation records the answers runs
// read in experience; a recall serves one read alike in two sessions as
// stable, with its source and observed time; a later run that reads another
// value demotes it (volatile, no value); a second consolidation changes
// nothing.
func TestConsolidationCachesAnswers(t *testing.T) {
	ctx := context.Background()
	st, dir := newRepoTree(t)
	f := newFx(21)
	run := func(session, answer string, at time.Time) *engine.Trace {
		tr := f.trace(traceSpec{url: starsURL, intent: "default branch", session: session, at: at, ok: true, steps: starsRoute})
		tr.Result = engine.Result{Answer: answer, FinalURL: starsURL}
		return tr
	}
	put(t, st, run("a", "main", day0.Add(-3*time.Hour)), run("b", "main", day0.Add(-2*time.Hour)))
	if _, err := Run(ctx, st, at(day0)); err != nil {
		t.Fatal(err)
	}
	x, err := st.Experience(ctx, "github.com", "default-branch")
	if err != nil {
		t.Fatal(err)
	}
	if len(x.Answers) != 1 || x.Answers[0].Value != "main" || len(x.Answers[0].Reads) != 2 || x.Answers[0].SourceURL != starsURL {
		t.Fatalf("experience answers after two reads: %+v", x.Answers)
	}
	e := &engine.Engine{Store: st, Now: func() time.Time { return day0 }}
	r, err := e.Query(ctx, starsURL, "default branch")
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Answers) != 1 || r.Answers[0].Value != "main" || r.Answers[0].Freshness != engine.Stable ||
		!r.Answers[0].ObservedAt.Equal(day0.Add(-2*time.Hour)) || r.Answers[0].Revision != r.Revision || r.Revision == "" {
		t.Fatalf("recall answers: %+v (revision %s)", r.Answers, r.Revision)
	}

	// Idempotent: nothing new, nothing written.
	head, digest := gitcli.Run(t, dir, "rev-parse", "HEAD"), treeDigest(t, dir)
	res, err := Run(ctx, st, at(day0.Add(time.Minute)))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Plan.Empty() || gitcli.Run(t, dir, "rev-parse", "HEAD") != head || treeDigest(t, dir) != digest {
		t.Fatalf("a second consolidation changed something: %s", res.Plan)
	}

	// A re-read that differs demotes it.
	put(t, st, run("c", "trunk", day0.Add(time.Hour)))
	if _, err := Run(ctx, st, at(day0.Add(2*time.Hour))); err != nil {
		t.Fatal(err)
	}
	e.Now = func() time.Time { return day0.Add(2 * time.Hour) }
	r, err = e.Query(ctx, starsURL, "default branch")
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Answers) != 1 || !r.Answers[0].Demoted || r.Answers[0].Value != "" || r.Answers[0].Freshness != engine.Volatile {
		t.Fatalf("after a changed re-read: %+v", r.Answers)
	}
	if mem := engine.RenderMemory(r, 0); containsAny(mem, `"main"`, `"trunk"`) {
		t.Fatalf("Memory serves a demoted answer's value:\n%s", mem)
	}
}

func containsAny(s string, subs ...string) bool {
	for _, x := range subs {
		if strings.Contains(s, x) {
			return true
		}
	}
	return false
}
