package consolidate

import (
	"context"
	"github.com/pemdev/pem/store/storetest/gitcli"
	"strings"
	"testing"
	"time"

	"github.com/pemdev/pem/engine"
)

// TestVerdictsFoldOnceAndContest: a wrong verdict on a verified entry's run is
// folded by the next consolidation (a judged_wrong failure; the entry is
// contested; the verdict file is committed with it); consolidating again
// folds nothing and makes no commit; a newer run judged right lifts the cap.
func TestVerdictsFoldOnceAndContest(t *testing.T) {
	ctx := context.Background()
	st, dir := newRepoTree(t)
	f := newFx(21)
	lifecycle(t, st, f, day0, 6, true, "s1", "s2")
	if fa := readFacts(t, st); fa.Status != engine.Verified {
		t.Fatalf("status %s after 6 successes in 2 sessions", fa.Status)
	}
	x, err := st.Experience(ctx, "github.com", "star-count")
	if err != nil {
		t.Fatal(err)
	}
	judged, newer := x.Evidence[4].Trace, x.Evidence[5].Trace
	eng := &engine.Engine{Store: st, Now: func() time.Time { return day0.Add(time.Hour) }, Writer: "ci"}
	res, err := eng.Feedback(ctx, engine.FeedbackRequest{Trace: judged, Verdict: "wrong", Note: "stale count", Judge: "qa"})
	if err != nil || !res.Recorded {
		t.Fatalf("feedback: %+v, %v", res, err)
	}
	if again, err := eng.Feedback(ctx, engine.FeedbackRequest{Trace: judged, Verdict: "wrong", Judge: "qa"}); err != nil || again.Recorded {
		t.Fatalf("the same verdict again: %+v, %v", again, err)
	}

	r, err := Run(ctx, st, at(day0.Add(2*time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	if r.Plan.Count(KindJudge) != 1 || r.Plan.Count(KindContest) != 1 {
		t.Fatalf("plan:\n%s", r.Plan)
	}
	if !strings.Contains(r.Plan.String(), "qa judged it wrong: a judged_wrong failure (stale count)") ||
		!strings.Contains(r.Plan.String(), "run "+judged+" was judged wrong") {
		t.Errorf("plan reasons:\n%s", r.Plan)
	}
	if files := gitcli.Run(t, dir, "show", "--name-only", "--format=", "HEAD"); !strings.Contains(files, "verdicts/github.com/"+judged+"/qa.yaml") {
		t.Errorf("the verdict is not committed with its fold: %s", files)
	}
	x, _ = st.Experience(ctx, "github.com", "star-count")
	if ev := x.Evidence[4]; ev.Outcome != engine.Failure || ev.Category != engine.JudgedWrong || ev.Verdict != engine.Wrong || ev.VerdictBy != "qa" {
		t.Errorf("folded evidence %+v", ev)
	}
	if x.ByCategory[engine.JudgedWrong] != 1 || x.Successes != 5 || x.Failures != 1 {
		t.Errorf("counts %d/%d %v", x.Successes, x.Failures, x.ByCategory)
	}
	if fa := readFacts(t, st); fa.Status != engine.Contested {
		t.Errorf("status %s after a wrong verdict, want contested", fa.Status)
	}
	q, err := eng.Query(ctx, starsURL, "star count")
	if err != nil || q.Tier != engine.P3 || !strings.Contains(strings.Join(q.Reasons, "\n"), "P2 needs no open wrong verdict") {
		t.Errorf("query after the verdict: %s %q %v", q.Tier, q.Reasons, err)
	}

	// Idempotent: the verdict is folded; nothing to do, no commit.
	head := gitcli.Run(t, dir, "rev-parse", "HEAD")
	r, err = Run(ctx, st, at(day0.Add(3*time.Hour)))
	if err != nil || !r.Plan.Empty() || gitcli.Run(t, dir, "rev-parse", "HEAD") != head {
		t.Fatalf("second consolidation: %v\n%s", err, r.Plan)
	}

	// A newer run judged right: the cap is lifted.
	if _, err := eng.Feedback(ctx, engine.FeedbackRequest{Trace: newer, Verdict: "right", Judge: "qa"}); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(ctx, st, at(day0.Add(4*time.Hour))); err != nil {
		t.Fatal(err)
	}
	q, _ = eng.Query(ctx, starsURL, "star count")
	if q.Tier != engine.P2 || q.ConfirmedCount != 1 {
		t.Errorf("after a newer right verdict: %s confirmed %d %q", q.Tier, q.ConfirmedCount, q.Reasons)
	}
}

// TestConsecutiveFailuresContestAtConsolidation: three route failures in a
// row contest a verified entry whose confidence is still above contest_below.
func TestConsecutiveFailuresContestAtConsolidation(t *testing.T) {
	st, _ := newRepoTree(t)
	f := newFx(22)
	lifecycle(t, st, f, day0, 12, true, "s1", "s2", "s3")
	if fa := readFacts(t, st); fa.Status != engine.Verified {
		t.Fatalf("status %s", fa.Status)
	}
	r := lifecycle(t, st, f, day0.Add(2*time.Hour), 3, false, "s4")
	if fa := readFacts(t, st); fa.Status != engine.Contested || r.Plan.Count(KindContest) != 1 ||
		!strings.Contains(r.Plan.String(), "the last 3 outcomes failed") || r.Plan.Entries[0].Score.Confidence < 0.6 {
		t.Errorf("status %s, plan:\n%s", fa.Status, r.Plan)
	}
}
