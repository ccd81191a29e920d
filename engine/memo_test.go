package engine

import (
	"strings"
	"testing"
)

// The memos answer what the functions they remember answer, for short and
// long arguments, across a reset when full.
func TestMemoAgrees(t *testing.T) {
	c := memo[int]{max: 3}
	calls := 0
	f := func(s string) int { calls++; return len(s) }
	for round := 0; round < 2; round++ {
		for _, s := range []string{"a", "bb", "ccc", "dddd", "a", strings.Repeat("x", maxMemoKey+1)} {
			if got := c.get(s, f); got != len(s) {
				t.Fatalf("memo(%q) = %d, want %d", s, got, len(s))
			}
		}
	}
	if calls == 12 {
		t.Errorf("the memo remembered nothing (%d calls for 12 lookups)", calls)
	}
	intents := []string{"find the price", "Find the PRICE!", "read the news", "prices found", "", "a an the", strings.Repeat("word ", 80)}
	for _, q := range intents {
		for _, k := range intents {
			got := IntentScore(q, k)
			a, b := Tokens(q), Tokens(k)
			want := 0.0
			if IntentKey(q) == IntentKey(k) {
				want = 1
			} else if len(a) > 0 && len(b) > 0 {
				set := map[string]bool{}
				for _, x := range a {
					set[x] = true
				}
				inter := 0
				for _, x := range b {
					if set[x] {
						inter++
					}
				}
				want = float64(inter) / float64(len(a)+len(b)-inter)
			}
			if got != want {
				t.Errorf("IntentScore(%q, %q) = %v, want %v", q, k, got, want)
			}
		}
	}
	for _, v := range []string{"42", "2025-06-01", "open", "the value", " 1,234 ", strings.Repeat("9", 300)} {
		for _, in := range []string{"how many stars", "what is the title"} {
			first, again := AnswerFreshness(in, v), AnswerFreshness(in, v)
			want := Stable
			if volatileValue(v) || volatileRe.MatchString(in) {
				want = Volatile
			}
			if first != want || again != want {
				t.Errorf("AnswerFreshness(%q, %q) = %s then %s, want %s", in, v, first, again, want)
			}
		}
	}
}
