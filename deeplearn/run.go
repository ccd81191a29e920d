package deeplearn

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/pemdev/pem/engine"

	"golang.org/x/sync/errgroup"
)

// Filter selects what to mine.
type Filter struct {
	Domain string // exact domain; "" = all
	Intent string // intent text or key; "" = all of the domain
}

// Collect gathers the mining input of every (domain, intent) that has traces,
// reading each domain's traces once, in order of domain then intent key.
// Corrupt files are skipped and reported in the second result; the rest
// still loads. It holds every trace in memory: MineTree does not.
func Collect(ctx context.Context, st engine.Store, f Filter, now time.Time) ([]Input, []string, error) {
	var out []Input
	warnings, err := Walk(ctx, st, f, now, func(in Input) error {
		out = append(out, in)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return out, warnings, nil
}

// MineTree mines every entry of the tree that f selects, one domain at a
// time: the traces of a domain are released once its entries are mined, so
// memory holds one domain's traces, not the tree's. Same proposals, in the
// same order, as MineAll over Collect.
func MineTree(ctx context.Context, st engine.Store, f Filter, now time.Time) ([]Proposal, []string, error) {
	var out []Proposal
	warnings, err := Walk(ctx, st, f, now, func(in Input) error {
		out = append(out, Mine(in))
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return out, warnings, nil
}

// Walk calls fn with the mining input of every (domain, intent) that f
// selects, in order of domain then intent key, decoding each domain's files
// on GOMAXPROCS workers. An error of fn stops the walk and is returned.
func Walk(ctx context.Context, st engine.Store, f Filter, now time.Time, fn func(Input) error) ([]string, error) {
	cfg, err := st.Config(ctx)
	if err != nil {
		return nil, err
	}
	var domains []string
	if f.Domain != "" {
		d, err := engine.NormalizeDomain(f.Domain)
		if err != nil {
			return nil, fmt.Errorf("%w: --domain %q: %v", engine.ErrInvalid, f.Domain, err)
		}
		domains = []string{d}
	} else if domains, err = st.Domains(ctx); err != nil {
		return nil, err
	}
	// --intent names an entry by its key or its text (any letter case).
	want := strings.TrimSpace(f.Intent)
	wantKey := engine.IntentKey(want)
	match := func(t *engine.Trace) bool {
		return want == "" || t.IntentKey == want || t.IntentKey == wantKey || strings.EqualFold(strings.TrimSpace(t.Intent), want)
	}
	var warnings []string
	for _, d := range domains {
		refs, err := st.TraceRefs(ctx, d)
		if err != nil {
			return nil, err
		}
		traces, errs := readTraces(ctx, st, refs)
		byKey := map[string]*Input{}
		for i := range refs {
			if err := errs[i]; err != nil {
				if errors.Is(err, engine.ErrCorrupt) {
					warnings = append(warnings, err.Error())
					continue
				}
				if errors.Is(err, engine.ErrNotFound) {
					continue // removed since it was listed (consolidation expired it)
				}
				return nil, err
			}
			t := traces[i]
			if !match(t) {
				continue
			}
			in := byKey[t.IntentKey]
			if in == nil {
				in = &Input{Domain: d, Intent: t.Intent, IntentKey: t.IntentKey, Policy: cfg.Policy, Now: now}
				byKey[t.IntentKey] = in
			}
			in.Traces = append(in.Traces, t)
		}
		keys := make([]string, 0, len(byKey))
		for k := range byKey {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		// The entries' facts and experience, decoded in parallel too.
		facts := make([]*engine.Facts, len(keys))
		exps := make([]*engine.Experience, len(keys))
		ferrs, xerrs := make([]error, len(keys)), make([]error, len(keys))
		parallel(2*len(keys), func(i int) {
			if k := keys[i/2]; i%2 == 0 {
				facts[i/2], ferrs[i/2] = st.Facts(ctx, d, k)
			} else {
				exps[i/2], xerrs[i/2] = st.Experience(ctx, d, k)
			}
		})
		for i, k := range keys {
			in := byKey[k]
			for _, err := range []error{ferrs[i], xerrs[i]} {
				if err != nil && !errors.Is(err, engine.ErrNotFound) {
					if ctx.Err() != nil {
						return nil, ctx.Err()
					}
					warnings = append(warnings, err.Error())
				}
			}
			in.Facts, in.Experience = facts[i], exps[i]
			if err := fn(*in); err != nil {
				return nil, err
			}
		}
	}
	return warnings, nil
}

// readTraces decodes refs on GOMAXPROCS workers (decoding YAML is the cost of
// deep-learn); results keep the order of refs, so the outcome does not depend
// on scheduling. errs[i] is the error of refs[i].
func readTraces(ctx context.Context, st engine.Store, refs []engine.TraceRef) ([]*engine.Trace, []error) {
	traces := make([]*engine.Trace, len(refs))
	errs := make([]error, len(refs))
	read := st.Trace
	if o, ok := st.(onceReader); ok {
		read = o.TraceOnce // each trace is read once: keep the store's cache out of it
	}
	parallel(len(refs), func(i int) { traces[i], errs[i] = read(ctx, refs[i]) })
	return traces, errs
}

// onceReader is a store that can read a trace without caching it
// (store.Store); deep-learn reads each trace once per run.
type onceReader interface {
	TraceOnce(ctx context.Context, ref engine.TraceRef) (*engine.Trace, error)
}

// parallel runs f(0) … f(n-1) on up to GOMAXPROCS goroutines and waits.
func parallel(n int, f func(i int)) {
	var g errgroup.Group
	g.SetLimit(max(1, min(runtime.GOMAXPROCS(0), n)))
	for i := 0; i < n; i++ {
		g.Go(func() error { f(i); return nil })
	}
	g.Wait()
}

// MineAll mines every input.
func MineAll(ins []Input) []Proposal {
	out := make([]Proposal, 0, len(ins))
	for _, in := range ins {
		out = append(out, Mine(in))
	}
	return out
}

// Report renders the proposals as Markdown for a pull request body: what
// changed and why, with evidence counts, and the flagged traces.
func Report(ps []Proposal, now time.Time) string {
	var b strings.Builder
	changed := 0
	for _, p := range ps {
		if p.Changed {
			changed++
		}
	}
	fmt.Fprintf(&b, "# pem deep-learn — %s\n\n", now.UTC().Format("2006-01-02"))
	fmt.Fprintf(&b, "%s mined, %d with proposed changes. Proposals are at most `candidate`; verified entries are never edited (a change is a new revision that supersedes them).\n", plural(len(ps), "entry"), changed)
	for _, p := range ps {
		if !p.Changed && len(p.Flagged) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n## %s / %s\n\n", p.Domain, p.IntentKey)
		fmt.Fprintf(&b, "Intent: %q — %d successful and %d failed runs from %d sessions; status `%s`, revision `%s`", p.Intent, p.Successes, p.Failures, p.Sessions, p.Facts.Status, p.Facts.Revision)
		if p.Supersedes != "" {
			fmt.Fprintf(&b, ", supersedes `%s`", p.Supersedes)
		}
		b.WriteString(".\n\n")
		for _, r := range p.Reasons {
			fmt.Fprintf(&b, "- %s\n", r)
		}
		if len(p.Evidence) > 0 {
			b.WriteString("\nEvidence:\n\n")
			// Items backed by the very same runs share one line.
			for i := 0; i < len(p.Evidence); {
				e := p.Evidence[i]
				items := []string{e.Item}
				j := i + 1
				for ; j < len(p.Evidence) && sameRuns(p.Evidence[j], e); j++ {
					items = append(items, p.Evidence[j].Item)
				}
				fmt.Fprintf(&b, "- %s: %s from %s (%s); newest %s\n", mdCode(strings.Join(items, "; ")), plural(e.Runs, "run"),
					plural(len(e.Sessions), "session"), mdCode(list(e.Sessions, 5)), mdCode(list(reverse(e.Traces), 3)))
				i = j
			}
		}
		if len(p.Facts.Steps) > 0 {
			b.WriteString("\nRoute:\n\n")
			for _, s := range p.Facts.Steps {
				line := fmt.Sprintf("%d. `%s`", s.Seq, s.Action)
				switch {
				case s.Selector != "":
					line += fmt.Sprintf(" `%s`", mdCode(s.Selector))
				case s.URL != "":
					line += fmt.Sprintf(" `%s`", mdCode(s.URL))
				}
				if s.Param != "" {
					line += fmt.Sprintf(" ← parameter `%s`", mdCode(s.Param))
				}
				b.WriteString(line + "\n")
			}
		}
		if len(p.Flagged) > 0 {
			b.WriteString("\nFlagged traces (they look like prompt injections and contributed nothing):\n\n")
			for _, fl := range p.Flagged {
				fmt.Fprintf(&b, "- ⚠ flagged, not used: `%s`\n", mdCode(fl))
			}
		}
	}
	return b.String()
}

func sameRuns(a, b Evidence) bool {
	return a.Runs == b.Runs && strings.Join(a.Sessions, "\x00") == strings.Join(b.Sessions, "\x00") &&
		strings.Join(a.Traces, "\x00") == strings.Join(b.Traces, "\x00")
}

// list joins at most n items, saying how many more there are.
func list(xs []string, n int) string {
	if len(xs) <= n {
		return strings.Join(xs, ", ")
	}
	return strings.Join(xs[:n], ", ") + fmt.Sprintf(" and %d more", len(xs)-n)
}

func reverse(xs []string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[len(xs)-1-i] = x
	}
	return out
}

func mdCode(s string) string { return strings.ReplaceAll(s, "`", "'") }
