package engine

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// A run whose page text tries to instruct the agent must not teach memory
// anything: neither the route the engine answers from unconsolidated traces,
// nor the one consolidation records, nor deep-learn's proposals. This is the
// one rule all three use.

var injectionRe = regexp.MustCompile(`(?i)(ignore (all |any |the )?(previous|prior|above|earlier) (instructions|prompts?|messages?)|disregard (the |all |any )?(previous|prior|above)|forget (all |your )?(previous |prior )?instructions|you are now|new instructions:|(reveal|print|show|output|repeat) (your |the )?system prompt|^\s*#{1,6}\s|\n\s*#{1,6}\s|</?(system|assistant|user|tool_call|tool_use|function_call|function_calls|invoke|memory)\b[^>]*>|"(tool|tool_name|function_call|tool_calls)"\s*:|\{\{secret:|` + "```" + `)`)

// InjectedText returns the part of s that looks like a prompt injection, or "".
func InjectedText(s string) string { return injectionRe.FindString(s) }

// Injection reports why a trace's page-derived text looks like a prompt
// injection ("" when it does not): instruction overrides, text that would
// close or open a Memory block or a heading, tool-call look-alikes. It reads
// the answer, the final title, the extracted values, the steps' results, and
// the selectors (a selector can quote page text).
func Injection(t *Trace) string {
	check := func(where, s string) string {
		if m := injectionRe.FindString(s); m != "" {
			return fmt.Sprintf("%s contains %q", where, strings.TrimSpace(m))
		}
		return ""
	}
	if w := check("answer", t.Result.Answer); w != "" {
		return w
	}
	if w := check("final title", t.Result.FinalTitle); w != "" {
		return w
	}
	keys := make([]string, 0, len(t.Result.Extracted))
	for k := range t.Result.Extracted {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if w := check("extracted "+k, k+"\n"+t.Result.Extracted[k]); w != "" {
			return w
		}
	}
	for i, s := range t.Steps {
		if w := check(fmt.Sprintf("step %d result", i+1), s.Result); w != "" {
			return w
		}
		sel := strings.Join(append([]string{s.Selector}, s.Fallbacks...), "\n")
		if w := check(fmt.Sprintf("step %d selector", i+1), strings.ReplaceAll(sel, "{{secret:", "")); w != "" {
			return w
		}
	}
	return ""
}
