package deeplearn

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/pemdev/pem/engine"
)

// Filter selects what to mine.
type Filter struct {
	Domain string // exact domain; "" = all
	Intent string // intent text or key; "" = all of the domain
}

// Collect gathers the mining input of every (domain, intent) that has traces,
// reading each domain's traces once. Corrupt files are skipped and reported in
// the second result; the rest still loads.
func Collect(ctx context.Context, st engine.Store, f Filter, now time.Time) ([]Input, []string, error) {
	cfg, err := st.Config(ctx)
	if err != nil {
		return nil, nil, err
	}
	var domains []string
	if f.Domain != "" {
		d, err := engine.NormalizeDomain(f.Domain)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: --domain %q: %v", engine.ErrInvalid, f.Domain, err)
		}
		domains = []string{d}
	} else if domains, err = st.Domains(ctx); err != nil {
		return nil, nil, err
	}
	wantKey := ""
	if strings.TrimSpace(f.Intent) != "" {
		wantKey = f.Intent
		if !engine.ValidKey(wantKey) {
			wantKey = engine.IntentKey(f.Intent)
		}
	}
	var out []Input
	var warnings []string
	for _, d := range domains {
		refs, err := st.TraceRefs(ctx, d)
		if err != nil {
			return nil, nil, err
		}
		byKey := map[string]*Input{}
		for _, ref := range refs {
			if err := ctx.Err(); err != nil {
				return nil, nil, err
			}
			t, err := st.Trace(ctx, ref)
			if err != nil {
				if errors.Is(err, engine.ErrCorrupt) {
					warnings = append(warnings, err.Error())
					continue
				}
				return nil, nil, err
			}
			if wantKey != "" && t.IntentKey != wantKey {
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
		for _, k := range keys {
			in := byKey[k]
			if fa, err := st.Facts(ctx, d, k); err == nil {
				in.Facts = fa
			} else if !errors.Is(err, engine.ErrNotFound) {
				warnings = append(warnings, err.Error())
			}
			if x, err := st.Experience(ctx, d, k); err == nil {
				in.Experience = x
			} else if !errors.Is(err, engine.ErrNotFound) {
				warnings = append(warnings, err.Error())
			}
			out = append(out, *in)
		}
	}
	return out, warnings, nil
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
		for _, fl := range p.Flagged {
			fmt.Fprintf(&b, "- ⚠ flagged, not used: %s\n", mdCode(fl))
		}
	}
	return b.String()
}

func mdCode(s string) string { return strings.ReplaceAll(s, "`", "'") }
