package engine

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
)

// Approval of sensitive actions (DESIGN §7). A tree's pem.yaml lists rules
// under `approval:`; a step that a rule matches needs a person's yes before
// the agent takes it, whether a planner chose it or a replay (P1/P2) would
// repeat it. This file is the rule: pure, no I/O. Asking the person is the
// agent's (agent.Approver), the terminal's (pem agent run) or the MCP
// client's (elicitation).
//
// A rule matches a step when each kind of pattern it sets matches (action,
// visible text, selector, URL: AND across kinds) and, within one kind, any
// of its patterns does (OR). A rule that sets no action matches the acting
// tools only (ApprovalActions): reading a page is never sensitive.
//
//   - text: a word or phrase, matched case-insensitively on word boundaries
//     against the target's visible text (its accessible name, label or text):
//     "buy" matches "Buy now" but not "buyer"; "place order" matches
//     "Place order".
//   - selector: matched case-insensitively as a substring of the step's CSS
//     selector: "delete" matches "#delete-repo" and "[data-action=delete]".
//   - url: a glob over the whole URL of the page the step acts on (for
//     navigate: the target), '*' standing for any run of characters,
//     case-insensitive: "*/checkout*" matches https://shop.test/checkout/2.
//   - actions: tool names (click, type, press, navigate, evaluate, …).

// ApprovalActions are the tools a rule with no `actions` applies to: the
// ones that change a page or act on a site.
var ApprovalActions = []string{"click", "type", "press", "navigate", "evaluate"}

// MaxApprovalRules and MaxApprovalPatterns bound pem.yaml's approval list.
const (
	MaxApprovalRules    = 100
	MaxApprovalPatterns = 100 // patterns of one kind in one rule
	maxApprovalPattern  = 300 // characters of one pattern
)

// ApprovalRule is one entry of pem.yaml's `approval:` list.
type ApprovalRule struct {
	// Name says what the rule protects; it is shown to the person asked and
	// recorded in the trace.
	Name     string   `yaml:"name" json:"name"`
	Actions  []string `yaml:"actions,omitempty" json:"actions,omitempty"`
	Text     []string `yaml:"text,omitempty" json:"text,omitempty"`
	Selector []string `yaml:"selector,omitempty" json:"selector,omitempty"`
	URL      []string `yaml:"url,omitempty" json:"url,omitempty"`
}

// ApprovalPolicy is pem.yaml's `approval:` list; empty asks for nothing.
type ApprovalPolicy []ApprovalRule

// ApprovalStep is what the rule sees of a step about to be taken.
type ApprovalStep struct {
	Action   string
	Selector string
	// Text is the target's visible text (accessible name, label or text);
	// "" when the step has no target or it could not be described.
	Text string
	// URL is the page the step acts on; for navigate, the target URL.
	URL string
}

// ApprovalMatch names the rule a step matched and why.
type ApprovalMatch struct {
	Rule string `json:"rule"`
	// Why is the matching part, e.g. `text "Buy now" has "buy"`.
	Why string `json:"why"`
}

// DefaultApproval is the starter list pem init writes: clicks and presses on
// controls that spend money, delete, or send something on the user's behalf.
// A pem.yaml without an `approval:` key asks for nothing, so trees made
// before approval existed keep running unattended.
func DefaultApproval() ApprovalPolicy {
	return ApprovalPolicy{
		{Name: "payment", Actions: []string{"click", "press"}, Text: []string{"buy", "buy now", "pay", "purchase", "checkout", "place order", "subscribe"}},
		{Name: "deletion", Actions: []string{"click", "press"}, Text: []string{"delete", "remove", "destroy"}},
		{Name: "sending", Actions: []string{"click", "press"}, Text: []string{"send", "submit", "publish", "post"}},
	}
}

// Validate reports the first rule that cannot work, naming it.
func (p ApprovalPolicy) Validate() error {
	if len(p) > MaxApprovalRules {
		return fmt.Errorf("pem.yaml: approval has %d rules, over the cap of %d: merge some", len(p), MaxApprovalRules)
	}
	names := map[string]bool{}
	for i, r := range p {
		where := fmt.Sprintf("pem.yaml: approval[%d]", i)
		name := strings.TrimSpace(r.Name)
		switch {
		case name == "":
			return fmt.Errorf("%s has no name: give it one (it is shown when pem asks)", where)
		case len(name) > 80 || strings.ContainsFunc(name, unicode.IsControl):
			return fmt.Errorf("%s: name %q must be one line of at most 80 characters", where, r.Name)
		case names[name]:
			return fmt.Errorf("%s: the name %q is used twice: rename one", where, name)
		case len(r.Actions)+len(r.Text)+len(r.Selector)+len(r.URL) == 0:
			return fmt.Errorf("%s (%s) sets no actions, text, selector or url: it would match everything", where, name)
		}
		names[name] = true
		for _, a := range r.Actions {
			if !IsAction(a) {
				return fmt.Errorf("%s (%s): action %q is not one of %s", where, name, a, strings.Join(Actions, ", "))
			}
		}
		for kind, pats := range map[string][]string{"text": r.Text, "selector": r.Selector, "url": r.URL} {
			if len(pats) > MaxApprovalPatterns {
				return fmt.Errorf("%s (%s): %d %s patterns, over the cap of %d", where, name, len(pats), kind, MaxApprovalPatterns)
			}
			for _, s := range pats {
				if strings.TrimSpace(s) == "" || len(s) > maxApprovalPattern || strings.ContainsFunc(s, unicode.IsControl) {
					return fmt.Errorf("%s (%s): %s pattern %q must be non-empty, one line, at most %d characters", where, name, kind, s, maxApprovalPattern)
				}
			}
		}
		if len(r.Text) > 0 && len(r.Actions) > 0 {
			textual := false
			for _, a := range r.Actions {
				textual = textual || a == "click" || a == "type" || a == "press"
			}
			if !textual {
				return fmt.Errorf("%s (%s): text patterns need a click, type or press action (other actions have no target text)", where, name)
			}
		}
	}
	return nil
}

// Match returns the first rule that marks s as needing approval.
func (p ApprovalPolicy) Match(s ApprovalStep) (ApprovalMatch, bool) {
	for _, r := range p {
		if why, ok := r.match(s); ok {
			return ApprovalMatch{Rule: strings.TrimSpace(r.Name), Why: why}, true
		}
	}
	return ApprovalMatch{}, false
}

func (r ApprovalRule) match(s ApprovalStep) (string, bool) {
	actions := r.Actions
	if len(actions) == 0 {
		actions = ApprovalActions
	}
	if !containsFold(actions, s.Action) {
		return "", false
	}
	var why []string
	if len(r.Actions) > 0 {
		why = append(why, "action "+s.Action)
	}
	if len(r.Text) > 0 {
		w, ok := anyPattern(r.Text, func(p string) bool { return hasPhrase(s.Text, p) })
		if !ok {
			return "", false
		}
		why = append(why, fmt.Sprintf("text %q has %q", oneLineCap(s.Text, 80), w))
	}
	if len(r.Selector) > 0 {
		w, ok := anyPattern(r.Selector, func(p string) bool {
			return s.Selector != "" && strings.Contains(strings.ToLower(s.Selector), strings.ToLower(strings.TrimSpace(p)))
		})
		if !ok {
			return "", false
		}
		why = append(why, fmt.Sprintf("selector %q has %q", oneLineCap(s.Selector, 120), w))
	}
	if len(r.URL) > 0 {
		w, ok := anyPattern(r.URL, func(p string) bool { return s.URL != "" && globMatch(strings.TrimSpace(p), s.URL) })
		if !ok {
			return "", false
		}
		why = append(why, fmt.Sprintf("url %q matches %q", oneLineCap(s.URL, 160), w))
	}
	return strings.Join(why, ", "), true
}

func anyPattern(pats []string, f func(string) bool) (string, bool) {
	for _, p := range pats {
		if f(p) {
			return p, true
		}
	}
	return "", false
}

// hasPhrase reports whether text holds phrase as whole words, ignoring case
// and how the words are spaced.
func hasPhrase(text, phrase string) bool {
	words := strings.Fields(strings.ToLower(phrase))
	if len(words) == 0 || text == "" {
		return false
	}
	for i := range words {
		words[i] = regexp.QuoteMeta(words[i])
	}
	re, err := regexp.Compile(`(?i)(?:^|[^\p{L}\p{N}])` + strings.Join(words, `[^\p{L}\p{N}]+`) + `(?:$|[^\p{L}\p{N}])`)
	return err == nil && re.MatchString(text)
}

// globMatch matches s against a pattern whose '*' stands for any run of
// characters (including '/'), case-insensitively, anchored at both ends.
func globMatch(pattern, s string) bool {
	p, s := strings.ToLower(pattern), strings.ToLower(s)
	parts := strings.Split(p, "*")
	if len(parts) == 1 {
		return p == s
	}
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	last := parts[len(parts)-1]
	for _, part := range parts[1 : len(parts)-1] {
		i := strings.Index(s, part)
		if i < 0 {
			return false
		}
		s = s[i+len(part):]
	}
	return strings.HasSuffix(s, last)
}

func containsFold(xs []string, x string) bool {
	for _, y := range xs {
		if strings.EqualFold(y, x) {
			return true
		}
	}
	return false
}

func oneLineCap(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// Approval decisions recorded in a trace.
const (
	Approved = "approved" // a person said yes
	Refused  = "refused"  // a person said no
	// Unanswered: nobody could be asked (--no-input, no terminal, an MCP
	// client without elicitation); the step was not taken.
	Unanswered = "unanswered"
)

// Approval is one decision on a sensitive step, recorded in the trace
// (Trace.Approvals). Step is the seq the step has (approved) or would have
// had (refused, unanswered: the step was not taken and is not in Steps).
type Approval struct {
	Step     int    `yaml:"step" json:"step"`
	Action   string `yaml:"action" json:"action"`
	Selector string `yaml:"selector,omitempty" json:"selector,omitempty"`
	URL      string `yaml:"url,omitempty" json:"url,omitempty"`
	Rule     string `yaml:"rule" json:"rule"`
	Why      string `yaml:"why,omitempty" json:"why,omitempty"`
	Decision string `yaml:"decision" json:"decision"`
	// Replayed is true for a step a P1/P2 replay would have taken.
	Replayed bool `yaml:"replayed,omitempty" json:"replayed,omitempty"`
	// Note says who answered or why nobody could ("terminal", "mcp
	// elicitation", "stdin is not a terminal").
	Note string `yaml:"note,omitempty" json:"note,omitempty"`
}

// ValidDecision reports whether d is a known approval decision.
func ValidDecision(d string) bool { return d == Approved || d == Refused || d == Unanswered }
