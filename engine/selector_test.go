package engine_test

import (
	"testing"

	"github.com/pemdev/pem/engine"
)

func TestSelectorName(t *testing.T) {
	for sel, want := range map[string]string{
		"#repo-stars-counter-star":                 "repo_stars_counter_star",
		"a[href$='/stargazers']":                   "stargazers",
		"div.js-issue-row a.Link--primary":         "link_primary",
		"input[name=q]":                            "q",
		"[data-testid=stars-count]":                "stars_count",
		"button":                                   "button",
		"ul > li:nth-child(2)":                     "li",
		"[aria-label=\"Search or jump to\"]":       "search_or_jump_to",
		`#a span[title="b c"]`:                     "b_c", // the space in quotes is no combinator
		"main > #x.y[title='p > q']":               "x",
		"ol li.very-long-class-name-of-a-list-row": "very_long_class_name_of",
		"":    "element",
		"!!!": "element",
	} {
		if got := engine.SelectorName(sel); got != want {
			t.Errorf("SelectorName(%q) = %q, want %q", sel, got, want)
		}
	}
}
