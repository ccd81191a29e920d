package deeplearn

import (
	"context"
	"fmt"
	"strings"

	"github.com/pemdev/pem/engine"
)

// Rephraser rewords one interaction hint (a model pass: an adapter over the
// agent's planner, or any text model). It is optional: mining never needs it.
type Rephraser interface {
	Rephrase(ctx context.Context, hint string) (string, error)
}

// MaxHintChars caps a reworded hint.
const MaxHintChars = 240

var quotedRe = engine.LazyRE(`"(?:[^"\\]|\\.)*"`)

// Rephrase rewords the hints that p adds to the entry (hints already in the
// current entry are left as reviewed) through r. It only changes wording: a
// reworded hint must quote exactly the selectors the original quoted, be one
// line of at most MaxHintChars, and read as no injection; otherwise the
// original stays and a warning says why. It never adds or removes a hint, and
// an error of r leaves the hint as it was. current is the entry's current
// hints (nil when new). It returns how many hints changed and the warnings.
func Rephrase(ctx context.Context, p *Proposal, current []string, r Rephraser) (int, []string) {
	if r == nil || p == nil || p.Facts == nil || !p.Changed {
		return 0, nil
	}
	old := map[string]bool{}
	for _, h := range current {
		old[h] = true
	}
	n := 0
	var warnings []string
	for i, h := range p.Facts.InteractionHints {
		if old[h] {
			continue
		}
		if err := ctx.Err(); err != nil {
			warnings = append(warnings, fmt.Sprintf("%s/%s: rephrasing stopped: %v", p.Domain, p.IntentKey, err))
			break
		}
		out, err := r.Rephrase(ctx, h)
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("%s/%s: hint %q kept as mined: the model pass failed: %v", p.Domain, p.IntentKey, h, err))
			continue
		}
		out = strings.TrimSpace(out)
		if out == h || out == "" {
			continue
		}
		if why := rewordingProblem(h, out); why != "" {
			warnings = append(warnings, fmt.Sprintf("%s/%s: hint %q kept as mined: the rewording %s", p.Domain, p.IntentKey, h, why))
			continue
		}
		p.Facts.InteractionHints[i] = out
		n++
		for j := range p.Evidence {
			if p.Evidence[j].Item == "hint "+h {
				p.Evidence[j].Item = "hint " + out
			}
		}
	}
	if n > 0 {
		p.Facts.InteractionHints = mergeStrings(p.Facts.InteractionHints, nil)
		p.Facts.Revision = p.Facts.ContentHash()
		p.Reasons = append(p.Reasons, fmt.Sprintf("%d hint(s) reworded by the model pass (same selectors, no new evidence)", n))
	}
	return n, warnings
}

// rewordingProblem says why out may not replace hint ("" when it may).
func rewordingProblem(hint, out string) string {
	switch {
	case len(out) > MaxHintChars:
		return fmt.Sprintf("is longer than %d characters", MaxHintChars)
	case strings.ContainsAny(out, "\n\r`"):
		return "is not one plain line"
	case engine.InjectedText(out) != "":
		return "reads like an instruction injection"
	}
	want, got := quotedRe.FindAllString(hint, -1), quotedRe.FindAllString(out, -1)
	for _, q := range want {
		if !contains(got, q) {
			return "dropped the selector " + q
		}
	}
	for _, q := range got {
		if !contains(want, q) {
			return "quotes " + q + ", which the mined hint does not"
		}
	}
	return ""
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}
