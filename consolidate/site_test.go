package consolidate

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store"
	"github.com/pemdev/pem/store/storetest/gitcli"
)

// TestConsolidationLearnsSiteNotes: runs of two intents of a domain that
// meet the same overlay and recover the same way feed its site entry; a
// recall of a third intent of the domain carries the notes (the Memory
// section too), another domain's never does; the site entry passes pem
// check, and a second consolidation changes nothing.
func TestConsolidationLearnsSiteNotes(t *testing.T) {
	ctx := context.Background()
	st, dir := newRepoTree(t)
	f := newFx(31)
	overlay := []engine.Step{
		{Seq: 1, Action: "navigate", URL: "https://github.com/pemdev/pem", OK: true},
		{Seq: 2, Action: "click", Selector: "#repo-stars-counter-star", OK: false, Error: "covered", ErrorKind: engine.KindNotVisible},
	}
	recovered := []engine.Step{
		{Seq: 1, Action: "navigate", URL: "https://github.com/pemdev/pem", OK: true},
		{Seq: 2, Action: "click", Selector: "#repo-stars-counter-star", OK: false, Error: "covered", ErrorKind: engine.KindNotVisible},
		{Seq: 3, Action: "click", Selector: "#cookie-accept", OK: true},
		{Seq: 4, Action: "click", Selector: "#repo-stars-counter-star", OK: true},
		{Seq: 5, Action: "get_text", Selector: "span.Counter", OK: true},
	}
	var ts []*engine.Trace
	for i, intent := range []string{"star count", "fork count"} {
		ts = append(ts,
			f.trace(traceSpec{url: starsURL, intent: intent, session: "a", at: day0.Add(-5*time.Hour + time.Duration(i)*time.Minute), cat: engine.OverlayBlocked, steps: overlay}),
			f.trace(traceSpec{url: starsURL, intent: intent, session: "b", at: day0.Add(-4*time.Hour + time.Duration(i)*time.Minute), ok: true, steps: recovered}))
	}
	ts = append(ts, f.trace(traceSpec{url: "https://example.org/a", intent: "read title", session: "c", at: day0.Add(-3 * time.Hour), ok: true,
		steps: []engine.Step{{Seq: 1, Action: "navigate", URL: "https://example.org/a", OK: true}, {Seq: 2, Action: "get_text", Selector: "h1", OK: true}}}))
	put(t, st, ts...)
	res, err := Run(ctx, st, at(day0))
	if err != nil {
		t.Fatal(err)
	}
	if res.Plan.Count(KindSite) != 1 {
		t.Fatalf("want one site entry learned (github.com; example.org's run teaches nothing):\n%s", res.Plan)
	}
	show := gitcli.Run(t, dir, "show", "--name-only", "--format=%s", "HEAD")
	if !strings.Contains(show, store.SitePath("github.com")) {
		t.Fatalf("the site entry is not committed:\n%s", show)
	}
	if errs := st.Check(ctx); len(errs) != 0 {
		t.Fatalf("pem check finds problems in a consolidated tree with a site entry: %v", errs)
	}
	if keys, _ := st.FactsKeys(ctx, "github.com"); strings.Contains(strings.Join(keys, " "), engine.SiteKey) {
		t.Fatalf("the site entry is listed as an intent: %v", keys)
	}

	e := &engine.Engine{Store: st, Now: func() time.Time { return day0 }}
	r, err := e.Query(ctx, starsURL, "read the open issues")
	if err != nil {
		t.Fatal(err)
	}
	var blocker, recovery bool
	for _, n := range r.SiteNotes {
		blocker = blocker || n.Kind == engine.NoteBlocker && n.Type == string(engine.OverlayBlocked)
		recovery = recovery || n.Kind == engine.NoteRecovery && n.Action == "click #cookie-accept" && n.URLPattern == "/pemdev/pem"
	}
	if !blocker || !recovery {
		t.Fatalf("a new intent's recall lacks the site's notes: %+v", r.SiteNotes)
	}
	if mem := engine.RenderMemory(r, 0); !strings.Contains(mem, `"click #cookie-accept"`) || len(mem) > 2000 {
		t.Fatalf("Memory of a new intent lacks the recovery (or is over its cap):\n%s", mem)
	}
	o, err := e.Query(ctx, "https://example.org/a", "read the open issues")
	if err != nil {
		t.Fatal(err)
	}
	if len(o.SiteNotes) != 0 || strings.Contains(engine.RenderMemory(o, 0), "cookie") {
		t.Fatalf("another domain's site notes served: %+v", o.SiteNotes)
	}

	head, digest := gitcli.Run(t, dir, "rev-parse", "HEAD"), treeDigest(t, dir)
	res, err = Run(ctx, st, at(day0.Add(time.Minute)))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Plan.Empty() || gitcli.Run(t, dir, "rev-parse", "HEAD") != head || treeDigest(t, dir) != digest {
		t.Fatalf("a second consolidation changed something: %s", res.Plan)
	}

	// A site entry that cannot be read is left alone, and said so.
	if err := os.WriteFile(filepath.Join(dir, "facts", "github.com", "_site.yaml"), []byte("format: 1\nbogus: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	put(t, st, f.trace(traceSpec{url: starsURL, intent: "watchers", session: "d", at: day0.Add(time.Hour), cat: engine.OverlayBlocked, steps: overlay}))
	res, err = Run(ctx, st, at(day0.Add(2*time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	if res.Plan.Count(KindSite) != 0 || !strings.Contains(strings.Join(res.Plan.Warnings, "\n"), "site entry of github.com cannot be read") {
		t.Fatalf("a broken site entry: plan %s", res.Plan)
	}
	if errs := st.Check(ctx); len(errs) != 1 || !strings.Contains(errs[0].Error(), "_site.yaml") {
		t.Fatalf("pem check must name the broken site entry: %v", errs)
	}
}
