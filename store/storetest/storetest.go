// Package storetest is the conformance suite every engine.Store must pass:
// the behaviour engine's Store interface documents, checked through the
// interface only. store runs it against *store.Store, and this package
// against MemStore, the one in-memory engine.Store for tests elsewhere.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pemdev/pem/engine"
)

// Run runs the suite. open returns a Store on a new, initialized, empty tree
// each time it is called (and cleans it up with t.Cleanup).
func Run(t *testing.T, open func(t *testing.T) engine.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s engine.Store)
	}{
		{"Config", testConfig},
		{"TraceRoundTrip", testTraceRoundTrip},
		{"TraceExists", testTraceExists},
		{"NotFound", testNotFound},
		{"FactsRoundTrip", testFactsRoundTrip},
		{"ExperienceRoundTrip", testExperienceRoundTrip},
		{"UnsafeNames", testUnsafeNames},
		{"ListingOrder", testListingOrder},
		{"DeleteTrace", testDeleteTrace},
		{"Lock", testLock},
		{"LockExclusion", testLockExclusion},
		{"ResaveUnchanged", testResaveUnchanged},
		{"CallerOwnsRecords", testCallerOwnsRecords},
		{"SiteEntry", testSiteEntry},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

var base = time.Date(2025, 3, 14, 9, 26, 53, 0, time.UTC)

// NewTrace returns a complete trace (every field set) for domain and intent,
// started at `at`, with an id made at `at` from seed.
func NewTrace(domain, intent string, at time.Time, seed int64) *engine.Trace {
	id, err := engine.NewTraceID(at, rand.New(rand.NewSource(seed)))
	if err != nil {
		panic(err)
	}
	return &engine.Trace{
		Format: engine.Format, ID: id, Writer: "tester", Session: "s-1", Task: "find the stars",
		Intent: intent, IntentKey: engine.IntentKey(intent), TaskType: "lookup",
		URL: "https://" + domain + "/pemdev/pem", Domain: domain, URLPattern: "/*/*", Outcome: engine.Failure,
		FailureCategory: engine.SelectorDrift, Error: "no element #stars", HTTPStatus: 200, StartedAt: at.UTC(),
		DurationMs: 1234, PlannerCalls: 2, Tier: engine.P3, Params: []string{"repo"},
		Steps: []engine.Step{
			{Seq: 1, Action: "navigate", URL: "https://" + domain + "/pemdev/pem", OK: true, DurationMs: 300},
			{Seq: 2, Action: "get_text", Selector: "#stars", Fallbacks: []string{".stars", "[data-stars]"}, Value: "v",
				Param: "repo", OK: false, Error: "no element", ErrorKind: "not_found", HTTPStatus: 200, Result: "x", DurationMs: 5},
		},
		Result:     engine.Result{Answer: "42", Extracted: map[string]string{"stars": "42", "forks": "7"}, FinalURL: "https://" + domain + "/x", FinalTitle: "X"},
		Redactions: []string{"steps[1].value"},
	}
}

// NewFacts returns a complete facts entry.
func NewFacts(domain, intent string) *engine.Facts {
	return &engine.Facts{
		Format: engine.Format, Domain: domain, Intent: intent, IntentKey: engine.IntentKey(intent), TaskType: "lookup",
		URLPatterns: []string{"/*/*"}, Status: engine.Candidate, Revision: "abc123", Supersedes: "old1",
		Selectors:        map[string]engine.Selector{"stars": {Primary: "#stars", Fallbacks: []string{".stars"}, Stability: 0.9}, "forks": {Primary: "#forks"}},
		Steps:            []engine.Step{{Seq: 1, Action: "get_text", Selector: "#stars", OK: true}},
		ExtractionQuery:  "the star count",
		InteractionHints: []string{"wait for the counter"},
		KnownBlockers:    []engine.Blocker{{Type: "overlay_blocked", Selector: "#cookie", Action: "click", Note: "accept"}},
		AntiPatterns:     []string{".old-stars"},
		Answers:          []engine.Answer{{Query: "stars", Value: "42", SourceURL: "https://" + domain + "/", ObservedAt: base, Freshness: engine.Volatile}},
		Provenance:       engine.Provenance{Traces: []string{"01J0000000000000000000000A"}, Sources: []string{"experience_save"}, FirstSeen: base, LastVerified: base.Add(time.Hour)},
		History:          []engine.Transition{{From: engine.Hypothesis, To: engine.Candidate, At: base, Reason: "2 successes"}},
	}
}

// NewExperience returns an experience with two folded traces.
func NewExperience(domain, intent string) *engine.Experience {
	x := &engine.Experience{}
	ok := NewTrace(domain, intent, base, 1)
	ok.Outcome, ok.FailureCategory = engine.Success, ""
	x.Fold(ok)
	x.Fold(NewTrace(domain, intent, base.Add(time.Hour), 2))
	return x
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// sameJSON compares two records through JSON, which ignores time.Location
// pointers but not instants.
func sameJSON(t *testing.T, what string, got, want any) {
	t.Helper()
	g, _ := json.MarshalIndent(got, "", " ")
	w, _ := json.MarshalIndent(want, "", " ")
	if string(g) != string(w) {
		t.Fatalf("%s: read back differs from what was written:\ngot  %s\nwant %s", what, g, w)
	}
}

func testConfig(t *testing.T, s engine.Store) {
	cfg, err := s.Config(ctxT(t))
	if err != nil {
		t.Fatalf("Config on a new tree: %v", err)
	}
	if cfg.Format != engine.Format {
		t.Errorf("Config().Format = %d, want %d", cfg.Format, engine.Format)
	}
	if err := cfg.Policy.Validate(); err != nil {
		t.Errorf("Config().Policy is not valid: %v", err)
	}
}

func testTraceRoundTrip(t *testing.T, s engine.Store) {
	ctx := ctxT(t)
	tr := NewTrace("example.com", "count the stars", base, 1)
	p, err := s.PutTrace(ctx, tr)
	if err != nil {
		t.Fatal(err)
	}
	ref := engine.TraceRef{Domain: "example.com", Day: "2025-03-14", ID: tr.ID}
	if want := "traces/example.com/2025-03-14/" + tr.ID + ".yaml"; p != want {
		t.Errorf("PutTrace path = %q, want %q", p, want)
	}
	got, err := s.Trace(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "trace", got, tr)

	// A start time in another zone lands on its UTC day.
	late := NewTrace("example.com", "count the stars", time.Date(2025, 3, 14, 23, 30, 0, 0, time.FixedZone("UTC-5", -5*3600)), 2)
	p, err = s.PutTrace(ctx, late)
	if err != nil {
		t.Fatal(err)
	}
	if want := "traces/example.com/2025-03-15/" + late.ID + ".yaml"; p != want {
		t.Errorf("PutTrace path = %q, want %q (day is StartedAt in UTC)", p, want)
	}
}

func testTraceExists(t *testing.T, s engine.Store) {
	ctx := ctxT(t)
	tr := NewTrace("example.com", "stars", base, 1)
	if _, err := s.PutTrace(ctx, tr); err != nil {
		t.Fatal(err)
	}
	dup := NewTrace("example.com", "something else", base, 1) // same id, other content
	if dup.ID != tr.ID {
		t.Fatal("test setup: ids differ")
	}
	if _, err := s.PutTrace(ctx, dup); !errors.Is(err, engine.ErrExists) {
		t.Fatalf("PutTrace of a taken id: err = %v, want ErrExists", err)
	}
	got, err := s.Trace(ctx, RefOf(tr))
	if err != nil {
		t.Fatal(err)
	}
	if got.Intent != tr.Intent {
		t.Errorf("the first trace was overwritten: intent %q", got.Intent)
	}
}

// RefOf is where a trace is stored.
func RefOf(t *engine.Trace) engine.TraceRef {
	return engine.TraceRef{Domain: t.Domain, Day: t.StartedAt.UTC().Format("2006-01-02"), ID: t.ID}
}

func testNotFound(t *testing.T, s engine.Store) {
	ctx := ctxT(t)
	tr := NewTrace("example.com", "stars", base, 1)
	if _, err := s.Trace(ctx, RefOf(tr)); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("Trace of a missing trace: err = %v, want ErrNotFound", err)
	}
	if _, err := s.Facts(ctx, "example.com", "stars"); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("Facts of a missing entry: err = %v, want ErrNotFound", err)
	}
	if _, err := s.Experience(ctx, "example.com", "stars"); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("Experience of a missing entry: err = %v, want ErrNotFound", err)
	}
	refs, err := s.TraceRefs(ctx, "nowhere.example")
	if err != nil || len(refs) != 0 {
		t.Errorf("TraceRefs of an unknown domain = %v, %v; want none, nil", refs, err)
	}
	for name, f := range map[string]func(context.Context, string) ([]string, error){"FactsKeys": s.FactsKeys, "ExperienceKeys": s.ExperienceKeys} {
		keys, err := f(ctx, "nowhere.example")
		if err != nil || len(keys) != 0 {
			t.Errorf("%s of an unknown domain = %v, %v; want none, nil", name, keys, err)
		}
	}
	ds, err := s.Domains(ctx)
	if err != nil || len(ds) != 0 {
		t.Errorf("Domains of an empty tree = %v, %v; want none", ds, err)
	}
}

func testFactsRoundTrip(t *testing.T, s engine.Store) {
	ctx := ctxT(t)
	f := NewFacts("example.com", "count the stars")
	p, err := s.PutFacts(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	if want := "facts/example.com/count-the-stars.yaml"; p != want {
		t.Errorf("PutFacts path = %q, want %q", p, want)
	}
	got, err := s.Facts(ctx, "example.com", "count-the-stars")
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "facts", got, f)
	// Replacing works.
	f.Status = engine.Verified
	if _, err := s.PutFacts(ctx, f); err != nil {
		t.Fatal(err)
	}
	got, err = s.Facts(ctx, "example.com", "count-the-stars")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != engine.Verified {
		t.Errorf("after PutFacts of a changed entry, status = %q, want verified", got.Status)
	}
}

// testSiteEntry: a store that keeps site entries (engine.SiteStore) round-
// trips one, answers ErrNotFound for a domain without one, refuses an unsafe
// domain, and never lists the entry as an intent of the domain.
func testSiteEntry(t *testing.T, s engine.Store) {
	ss, ok := s.(engine.SiteStore)
	if !ok {
		t.Skip("this store keeps no site entries (engine.SiteStore is optional)")
	}
	ctx := ctxT(t)
	if _, err := ss.Site(ctx, "example.com"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("Site of a domain without one: %v, want ErrNotFound", err)
	}
	site := &engine.Site{Format: engine.Format, Domain: "example.com", Notes: []engine.SiteNote{{Kind: engine.NoteBlocker,
		Type: "anti_bot", Intents: []string{"a", "b"}, Traces: []string{NewTrace("example.com", "a", base, 1).ID}, LastSeen: base}}}
	p, err := ss.PutSite(ctx, site)
	if err != nil {
		t.Fatal(err)
	}
	if want := "facts/example.com/_site.yaml"; p != want {
		t.Errorf("PutSite path = %q, want %q", p, want)
	}
	got, err := ss.Site(ctx, "example.com")
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "site", got, site)
	if _, err := s.PutFacts(ctx, NewFacts("example.com", "count the stars")); err != nil {
		t.Fatal(err)
	}
	keys, err := s.FactsKeys(ctx, "example.com")
	if err != nil || len(keys) != 1 || keys[0] != "count-the-stars" {
		t.Errorf("FactsKeys = %v (%v), want only the intent", keys, err)
	}
	if _, err := ss.PutSite(ctx, &engine.Site{Format: engine.Format, Domain: "../etc"}); !errors.Is(err, engine.ErrUnsafePath) {
		t.Errorf("PutSite of an unsafe domain: %v, want ErrUnsafePath", err)
	}
}

func testExperienceRoundTrip(t *testing.T, s engine.Store) {
	ctx := ctxT(t)
	x := NewExperience("example.com", "count the stars")
	p, err := s.PutExperience(ctx, x)
	if err != nil {
		t.Fatal(err)
	}
	if want := "experience/example.com/count-the-stars.yaml"; p != want {
		t.Errorf("PutExperience path = %q, want %q", p, want)
	}
	got, err := s.Experience(ctx, "example.com", "count-the-stars")
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "experience", got, x)
}

// snapshot is everything visible through the interface's listings.
func snapshot(t *testing.T, s engine.Store) string {
	ctx := ctxT(t)
	ds, err := s.Domains(ctx)
	if err != nil {
		t.Fatal(err)
	}
	refs, err := s.TraceRefs(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	out := fmt.Sprint(ds, refs)
	for _, d := range ds {
		fk, _ := s.FactsKeys(ctx, d)
		xk, _ := s.ExperienceKeys(ctx, d)
		out += fmt.Sprint(d, fk, xk)
	}
	return out
}

// UnsafeDomains and UnsafeKeys are names every store must refuse.
var (
	UnsafeDomains = []string{"", "..", ".", "../evil", "a/b", `a\b`, ".git", ".hidden", "CON", "con", "nul.txt", "com1", "LPT9", "Example.com", "exa mple.com", "a..b", "ex\x00ample.com"}
	UnsafeKeys    = []string{"", "..", "../../etc/passwd", "a/b", "Stars", "-x", "con", "aux", "prn", "com3", "lpt1", ".git", "stars.yaml", "a b"}
)

func testUnsafeNames(t *testing.T, s engine.Store) {
	ctx := ctxT(t)
	before := snapshot(t, s)
	isUnsafe := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, engine.ErrUnsafePath) {
			t.Errorf("%s: err = %v, want ErrUnsafePath", what, err)
		}
	}
	for _, d := range UnsafeDomains {
		f := NewFacts("example.com", "stars")
		f.Domain = d
		_, err := s.PutFacts(ctx, f)
		isUnsafe(fmt.Sprintf("PutFacts(domain %q)", d), err)
		x := NewExperience("example.com", "stars")
		x.Domain = d
		_, err = s.PutExperience(ctx, x)
		isUnsafe(fmt.Sprintf("PutExperience(domain %q)", d), err)
		tr := NewTrace("example.com", "stars", base, 1)
		tr.Domain = d
		_, err = s.PutTrace(ctx, tr)
		isUnsafe(fmt.Sprintf("PutTrace(domain %q)", d), err)
		_, err = s.Facts(ctx, d, "stars")
		isUnsafe(fmt.Sprintf("Facts(domain %q)", d), err)
		_, err = s.Experience(ctx, d, "stars")
		isUnsafe(fmt.Sprintf("Experience(domain %q)", d), err)
		_, err = s.FactsKeys(ctx, d)
		if d != "" {
			isUnsafe(fmt.Sprintf("FactsKeys(%q)", d), err)
			_, err = s.TraceRefs(ctx, d)
			isUnsafe(fmt.Sprintf("TraceRefs(%q)", d), err)
		}
		err = s.DeleteTrace(ctx, engine.TraceRef{Domain: d, Day: "2025-03-14", ID: tr.ID})
		isUnsafe(fmt.Sprintf("DeleteTrace(domain %q)", d), err)
	}
	for _, k := range UnsafeKeys {
		f := NewFacts("example.com", "stars")
		f.IntentKey = k
		_, err := s.PutFacts(ctx, f)
		isUnsafe(fmt.Sprintf("PutFacts(key %q)", k), err)
		x := NewExperience("example.com", "stars")
		x.IntentKey = k
		_, err = s.PutExperience(ctx, x)
		isUnsafe(fmt.Sprintf("PutExperience(key %q)", k), err)
		_, err = s.Facts(ctx, "example.com", k)
		isUnsafe(fmt.Sprintf("Facts(key %q)", k), err)
		_, err = s.Experience(ctx, "example.com", k)
		isUnsafe(fmt.Sprintf("Experience(key %q)", k), err)
	}
	for _, id := range []string{"", "../../../x", "01J00000000000000000000000/", "01j0000000000000000000000a", "01J0000000000000000000000" /* 25 */} {
		tr := NewTrace("example.com", "stars", base, 1)
		tr.ID = id
		_, err := s.PutTrace(ctx, tr)
		isUnsafe(fmt.Sprintf("PutTrace(id %q)", id), err)
		_, err = s.Trace(ctx, engine.TraceRef{Domain: "example.com", Day: "2025-03-14", ID: id})
		isUnsafe(fmt.Sprintf("Trace(id %q)", id), err)
	}
	for _, day := range []string{"", "..", "2025-13-01", "2025-03-14/..", "20250314"} {
		tr := NewTrace("example.com", "stars", base, 1)
		_, err := s.Trace(ctx, engine.TraceRef{Domain: "example.com", Day: day, ID: tr.ID})
		isUnsafe(fmt.Sprintf("Trace(day %q)", day), err)
	}
	if after := snapshot(t, s); after != before {
		t.Errorf("refused writes changed the tree:\nbefore %s\nafter  %s", before, after)
	}
}

func testListingOrder(t *testing.T, s engine.Store) {
	ctx := ctxT(t)
	// Ids made at increasing times, saved out of order, on two days and two domains.
	var want []string
	var traces []*engine.Trace
	for i := 0; i < 6; i++ {
		at := base.Add(time.Duration(i) * 7 * time.Hour)
		tr := NewTrace("b.example", "stars", at, int64(i))
		if i%2 == 1 {
			tr = NewTrace("a.example", "forks", at, int64(i))
		}
		traces = append(traces, tr)
		want = append(want, tr.ID)
	}
	for _, i := range []int{3, 0, 5, 1, 4, 2} {
		if _, err := s.PutTrace(ctx, traces[i]); err != nil {
			t.Fatal(err)
		}
	}
	refs, err := s.TraceRefs(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range refs {
		got = append(got, r.ID)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("TraceRefs(\"\") order = %v, want oldest first %v", got, want)
	}
	refs, err = s.TraceRefs(ctx, "a.example")
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) != 3 || refs[0].ID != want[1] || refs[2].ID != want[5] {
		t.Errorf("TraceRefs(a.example) = %v, want the 3 a.example traces oldest first", refs)
	}
	for _, r := range refs {
		if r.Domain != "a.example" {
			t.Errorf("TraceRefs(a.example) returned %v", r)
		}
	}
	for _, in := range []string{"zeta", "alpha", "mid"} {
		if _, err := s.PutFacts(ctx, NewFacts("c.example", in)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.PutExperience(ctx, NewExperience("d.example", in)); err != nil {
			t.Fatal(err)
		}
	}
	fk, err := s.FactsKeys(ctx, "c.example")
	if err != nil || !reflect.DeepEqual(fk, []string{"alpha", "mid", "zeta"}) {
		t.Errorf("FactsKeys = %v, %v; want sorted [alpha mid zeta]", fk, err)
	}
	xk, err := s.ExperienceKeys(ctx, "d.example")
	if err != nil || !reflect.DeepEqual(xk, []string{"alpha", "mid", "zeta"}) {
		t.Errorf("ExperienceKeys = %v, %v; want sorted [alpha mid zeta]", xk, err)
	}
	ds, err := s.Domains(ctx)
	if err != nil || !reflect.DeepEqual(ds, []string{"a.example", "b.example", "c.example", "d.example"}) {
		t.Errorf("Domains = %v, %v; want the 4 domains sorted", ds, err)
	}
}

func testDeleteTrace(t *testing.T, s engine.Store) {
	ctx := ctxT(t)
	a := NewTrace("example.com", "stars", base, 1)
	b := NewTrace("example.com", "stars", base.Add(time.Minute), 2)
	for _, tr := range []*engine.Trace{a, b} {
		if _, err := s.PutTrace(ctx, tr); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 2; i++ {
		if err := s.DeleteTrace(ctx, RefOf(a)); err != nil {
			t.Fatalf("DeleteTrace (call %d): %v", i+1, err)
		}
	}
	if _, err := s.Trace(ctx, RefOf(a)); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("Trace after DeleteTrace: err = %v, want ErrNotFound", err)
	}
	refs, err := s.TraceRefs(ctx, "example.com")
	if err != nil || len(refs) != 1 || refs[0].ID != b.ID {
		t.Errorf("TraceRefs after a delete = %v, %v; want only %s", refs, err, b.ID)
	}
	if err := s.DeleteTrace(ctx, RefOf(b)); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteTrace(ctx, engine.TraceRef{Domain: "never.example", Day: "2020-01-01", ID: b.ID}); err != nil {
		t.Errorf("DeleteTrace of a trace that never existed: %v", err)
	}
	ds, err := s.Domains(ctx)
	if err != nil || len(ds) != 0 {
		t.Errorf("Domains after deleting every trace = %v, %v; want none", ds, err)
	}
}

func testLock(t *testing.T, s engine.Store) {
	ctx := ctxT(t)
	release, err := s.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if r2, err := s.Lock(short); !errors.Is(err, engine.ErrLocked) {
		if err == nil {
			r2()
		}
		t.Fatalf("second Lock while held: err = %v, want ErrLocked", err)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	if err := release(); err != nil {
		t.Errorf("second release: %v (release must be idempotent)", err)
	}
	r3, err := s.Lock(ctx)
	if err != nil {
		t.Fatalf("Lock after release: %v", err)
	}
	r3()
}

func testLockExclusion(t *testing.T, s engine.Store) {
	ctx := ctxT(t)
	var inside, entered atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				release, err := s.Lock(ctx)
				if err != nil {
					errs <- err
					return
				}
				if !inside.CompareAndSwap(0, 1) {
					errs <- errors.New("two goroutines held the lock at once")
				}
				entered.Add(1)
				time.Sleep(100 * time.Microsecond)
				inside.Store(0)
				if err := release(); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if entered.Load() != 40 {
		t.Errorf("entered the lock %d times, want 40", entered.Load())
	}
}

func testResaveUnchanged(t *testing.T, s engine.Store) {
	ctx := ctxT(t)
	f := NewFacts("example.com", "stars")
	if _, err := s.PutFacts(ctx, f); err != nil {
		t.Fatal(err)
	}
	got, err := s.Facts(ctx, "example.com", f.IntentKey)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutFacts(ctx, got); err != nil {
		t.Fatal(err)
	}
	again, err := s.Facts(ctx, "example.com", f.IntentKey)
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "facts re-saved unchanged", again, got)
	x := NewExperience("example.com", "stars")
	if _, err := s.PutExperience(ctx, x); err != nil {
		t.Fatal(err)
	}
	gx, err := s.Experience(ctx, "example.com", x.IntentKey)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutExperience(ctx, gx); err != nil {
		t.Fatal(err)
	}
	ax, err := s.Experience(ctx, "example.com", x.IntentKey)
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "experience re-saved unchanged", ax, gx)
}

// testCallerOwnsRecords: the engine patches the Facts it reads in place, so
// a store must hand out copies, not shared cached values.
func testCallerOwnsRecords(t *testing.T, s engine.Store) {
	ctx := ctxT(t)
	f := NewFacts("example.com", "stars")
	x := NewExperience("example.com", "stars")
	tr := NewTrace("example.com", "stars", base, 1)
	if _, err := s.PutFacts(ctx, f); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutExperience(ctx, x); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutTrace(ctx, tr); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ { // the second round reads from any cache
		gf, err := s.Facts(ctx, "example.com", "stars")
		if err != nil {
			t.Fatal(err)
		}
		sameJSON(t, "facts", gf, f)
		gf.Selectors["stars"] = engine.Selector{Primary: "#mutated"}
		gf.InteractionHints[0] = "mutated"
		gf.Provenance.Traces[0] = "mutated"
		gx, err := s.Experience(ctx, "example.com", "stars")
		if err != nil {
			t.Fatal(err)
		}
		sameJSON(t, "experience", gx, x)
		gx.Evidence[0].Trace = "mutated"
		for _, st := range gx.Selectors {
			st.OK = 999
		}
		gt, err := s.Trace(ctx, RefOf(tr))
		if err != nil {
			t.Fatal(err)
		}
		sameJSON(t, "trace", gt, tr)
		gt.Steps[1].Fallbacks[0] = "mutated"
		gt.Result.Extracted["stars"] = "mutated"
	}
}
