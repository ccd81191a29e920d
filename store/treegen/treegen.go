// Package treegen generates large knowledge trees for benchmarks: domains ×
// intents entries, each with facts and experience, and traces spread over
// the entries and the last 30 days. It writes files directly (no fsync, no
// lock), in the canonical form store.Marshal gives, so the store reads them
// as if pem had written them. Output depends only on the arguments.
package treegen

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store"

	"golang.org/x/sync/errgroup"
)

// Base is the generated tree's "now": traces start in the 30 days before it.
var Base = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// Domain and Intent name the generated entries.
func Domain(i int) string { return fmt.Sprintf("site%04d.example", i) }

// Intent is the text of intent j.
func Intent(j int) string { return fmt.Sprintf("find item %d details", j) }

// URL is a page of domain i that intent j's entries match.
func URL(i, j int) string { return fmt.Sprintf("https://%s/section%d/item/%d", Domain(i), j, 1000+j) }

// Generate writes a tree into dir (initializing it first): domains×intents
// entries with facts and experience, and `traces` traces spread evenly over
// the entries, every one of them folded into its entry's experience.
func Generate(ctx context.Context, dir string, domains, intents, traces int, seed int64) error {
	if domains < 1 || intents < 1 || traces < 0 {
		return fmt.Errorf("treegen: need at least 1 domain and 1 intent (have %d, %d)", domains, intents)
	}
	if _, err := store.Init(ctx, dir); err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(1, runtime.GOMAXPROCS(0)))
	for d := 0; d < domains; d++ {
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err
			}
			return domain(dir, d, domains, intents, traces, seed)
		})
	}
	return g.Wait()
}

// GenerateHot writes a tree of one domain (Domain(0)) with `intents`
// entries where intent `hot` holds exactly hotTraces traces and the other
// intents share the rest of `traces` evenly: the hot entry's own evidence
// stays the same while the domain's other traces grow (the fresh-process
// query row of make bench-scale). Traces start in the 30 days before base.
func GenerateHot(ctx context.Context, dir string, intents, traces, hot, hotTraces int, base time.Time, seed int64) error {
	if intents < 2 || hot < 0 || hot >= intents || hotTraces < 0 || traces < hotTraces {
		return fmt.Errorf("treegen: GenerateHot needs 2+ intents, 0 ≤ hot < intents and hotTraces ≤ traces (have %d, %d, %d, %d)", intents, hot, hotTraces, traces)
	}
	if _, err := store.Init(ctx, dir); err != nil {
		return err
	}
	rest, others := traces-hotTraces, intents-1
	count := func(j int) int {
		if j == hot {
			return hotTraces
		}
		o := j
		if j > hot {
			o--
		}
		n := rest / others
		if o < rest%others {
			n++
		}
		return n
	}
	return writeDomain(dir, 0, intents, count, base, seed)
}

func domain(dir string, d, domains, intents, traces int, seed int64) error {
	pairs := domains * intents
	count := func(j int) int {
		pair := d*intents + j
		n := traces / pairs
		if pair < traces%pairs {
			n++
		}
		return n
	}
	return writeDomain(dir, d, intents, count, Base, seed)
}

// writeDomain writes domain d's entries, count(j) traces for intent j.
func writeDomain(dir string, d, intents int, count func(j int) int, base time.Time, seed int64) error {
	rng := rand.New(rand.NewSource(seed*1_000_003 + int64(d)))
	for j := 0; j < intents; j++ {
		n := count(j)
		x := &engine.Experience{}
		for k := 0; k < n; k++ {
			t := trace(rng, base, d, j, k)
			if err := write(dir, store.TracePath(store.RefOf(t)), t); err != nil {
				return err
			}
			x.Fold(t)
		}
		if x.Domain == "" {
			x.Format, x.Domain, x.Intent, x.IntentKey = engine.Format, Domain(d), Intent(j), engine.IntentKey(Intent(j))
		}
		if err := write(dir, store.ExperiencePath(x.Domain, x.IntentKey), x); err != nil {
			return err
		}
		f := facts(base, d, j)
		if err := write(dir, store.FactsPath(f.Domain, f.IntentKey), f); err != nil {
			return err
		}
	}
	return nil
}

func trace(rng *rand.Rand, base time.Time, d, j, k int) *engine.Trace {
	at := base.Add(-time.Duration(rng.Int63n(int64(30 * 24 * time.Hour))))
	id, _ := engine.NewTraceID(at, rng)
	n, _ := engine.NormalizeURL(URL(d, j))
	t := &engine.Trace{Format: engine.Format, ID: id, Writer: "treegen", Session: fmt.Sprintf("s%d", rng.Intn(5)),
		Task: Intent(j), Intent: Intent(j), IntentKey: engine.IntentKey(Intent(j)), TaskType: "lookup",
		URL: n.URL, Domain: n.Domain, URLPattern: engine.Pattern(n), Outcome: engine.Success, StartedAt: at,
		DurationMs: 500 + rng.Int63n(5000), PlannerCalls: 1}
	t.Steps = []engine.Step{
		{Seq: 1, Action: "navigate", URL: n.URL, OK: true, DurationMs: 300},
		{Seq: 2, Action: "click", Selector: fmt.Sprintf("#tab-%d", j), OK: true, DurationMs: 40},
		{Seq: 3, Action: "get_text", Selector: ".details .value", OK: true, Result: "value", DurationMs: 12},
	}
	if rng.Intn(5) == 0 {
		t.Outcome = engine.Failure
		t.Steps[2].OK, t.Steps[2].Error = false, "no element matches .details .value"
		t.FailureCategory = engine.Classify(t)
	}
	t.Result = engine.Result{Answer: "value", FinalURL: n.URL}
	return t
}

func facts(base time.Time, d, j int) *engine.Facts {
	n, _ := engine.NormalizeURL(URL(d, j))
	f := &engine.Facts{Format: engine.Format, Domain: Domain(d), Intent: Intent(j), IntentKey: engine.IntentKey(Intent(j)),
		TaskType: "lookup", URLPatterns: []string{engine.Pattern(n)}, Status: engine.Verified,
		Selectors: map[string]engine.Selector{
			"tab":   {Primary: fmt.Sprintf("#tab-%d", j), Fallbacks: []string{"[role=tab]:nth-child(2)"}, Stability: 0.95},
			"value": {Primary: ".details .value", Fallbacks: []string{"dd.value"}, Stability: 0.9},
		},
		Steps: []engine.Step{
			{Seq: 1, Action: "navigate", URL: n.URL, OK: true},
			{Seq: 2, Action: "click", Selector: fmt.Sprintf("#tab-%d", j), OK: true},
			{Seq: 3, Action: "get_text", Selector: ".details .value", OK: true},
		},
		ExtractionQuery:  "the value in the details panel",
		InteractionHints: []string{"the details tab loads lazily: wait for .details"},
		KnownBlockers:    []engine.Blocker{{Type: "overlay_blocked", Selector: "#cookie-banner", Action: "click", Note: "accept cookies first"}},
		AntiPatterns:     []string{".old-details"},
		Provenance:       engine.Provenance{Sources: []string{"treegen"}, FirstSeen: base.Add(-30 * 24 * time.Hour), LastVerified: base.Add(-24 * time.Hour)},
	}
	f.Revision = f.ContentHash()
	return f
}

func write(dir, rel string, v any) error {
	b, err := store.Marshal(v)
	if err != nil {
		return err
	}
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.WriteFile(p, b, 0o644); err != nil {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		return os.WriteFile(p, b, 0o644)
	}
	return nil
}

// LoadAverage is the machine's 1, 5 and 15 minute load averages as printed
// beside the figures of make bench-scale and make simulate ("unknown" where
// /proc/loadavg is missing): wall times on a shared machine move with it.
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
