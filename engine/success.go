package engine

import "strings"

// Fingerprint identifies the control a recorded click or type step acted
// on, beyond its selector: a replay checks that the selector still finds
// the same control (DESIGN §7), so it never clicks a different button that
// happens to match the old selector.
type Fingerprint struct {
	Tag  string `yaml:"tag,omitempty" json:"tag,omitempty"`
	Role string `yaml:"role,omitempty" json:"role,omitempty"`
	// Name is the accessible name or the visible text, at most 80 characters.
	Name string `yaml:"name,omitempty" json:"name,omitempty"`
}

// Same reports whether two fingerprints name the same control: same tag,
// same role, and the same name once digits are set aside (a counter in a
// link's text, "Issues 12" → "Issues 13", is the same link).
func (f *Fingerprint) Same(g *Fingerprint) bool {
	if f == nil || g == nil {
		return true // nothing recorded: nothing to compare
	}
	return strings.EqualFold(f.Tag, g.Tag) && strings.EqualFold(f.Role, g.Role) && fpName(f.Name) == fpName(g.Name)
}

func fpName(s string) string {
	s = strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return ' '
		}
		return r
	}, strings.ToLower(s))
	return strings.Join(strings.Fields(s), " ")
}

// SuccessCondition is what the successful runs of a route had in common
// at the end (DESIGN §7): the page the answer was read on, where on it the
// answer sits, and the kind of value it is. A replay checks it live; a
// replay that fails it is a failure (success_condition_failed) and hands
// over to the planner.
type SuccessCondition struct {
	// URLPattern is the pattern (Pattern) of the page the answer was read on.
	URLPattern string `yaml:"url_pattern,omitempty" json:"url_pattern,omitempty"`
	// Selector read the answer; Under is the heading or label it sits under.
	Selector string `yaml:"selector,omitempty" json:"selector,omitempty"`
	Under    string `yaml:"under,omitempty" json:"under,omitempty"`
	// AnswerType is the kind of value (number, date, version, command,
	// name, explain), "" when the task did not say.
	AnswerType string `yaml:"answer_type,omitempty" json:"answer_type,omitempty"`
}

// Empty reports whether the condition says nothing.
func (c *SuccessCondition) Empty() bool {
	return c == nil || *c == SuccessCondition{}
}

// CommonCondition keeps what every given condition agrees on, field by
// field; nil when nothing is common.
func CommonCondition(cs []*SuccessCondition) *SuccessCondition {
	var out *SuccessCondition
	for _, c := range cs {
		if c.Empty() {
			continue
		}
		if out == nil {
			cp := *c
			out = &cp
			continue
		}
		if out.URLPattern != c.URLPattern {
			out.URLPattern = ""
		}
		if out.Selector != c.Selector {
			out.Selector = ""
		}
		if out.Under != c.Under {
			out.Under = ""
		}
		if out.AnswerType != c.AnswerType {
			out.AnswerType = ""
		}
	}
	if out.Empty() {
		return nil
	}
	return out
}
