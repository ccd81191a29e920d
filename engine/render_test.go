package engine_test

import (
	"strings"
	"testing"
	"unicode"

	"github.com/pemdev/pem/engine"
)

// breaksOut reports whether a Memory line opens a heading, a fence or a tag
// (checked on the normalized line, so full-width and invisible characters
// count as what they look like).
func breaksOut(line string) bool {
	n := strings.TrimLeftFunc(engine.ScreenNormalize(line), unicode.IsSpace)
	return strings.HasPrefix(n, "#") || strings.HasPrefix(n, "```") || strings.HasPrefix(n, "~~~") || strings.HasPrefix(n, "<")
}

func hostileRecall(s string) *engine.Recall {
	return &engine.Recall{
		Tier: engine.P3, Confidence: 0.5, Status: engine.Status(s), Domain: s, Intent: s, URLPattern: s,
		PrimarySelectors: map[string]string{s: s, "x": s},
		Fallbacks:        map[string][]string{s: {s, s}, "x": {s}},
		Steps: []engine.Step{{Action: s, Selector: s, Value: s}, {Action: "navigate", URL: s},
			{Action: "type", Selector: s, Param: s}, {Action: "click", Selector: s, Value: s}},
		ExtractionQuery:  s,
		KnownBlockers:    []engine.Blocker{{Type: s, Selector: s, Action: s, Note: s}},
		AntiPatterns:     []string{s},
		InteractionHints: []string{s, "\r" + s},
		Answers: []engine.Answer{{Query: s, Value: s, SourceURL: s, Freshness: engine.Stable},
			{Query: s, Value: s, Freshness: engine.Volatile}},
		Warnings: []string{s},
	}
}

// FuzzMemory: no stored string, however spelled, yields a Memory line that
// starts a heading, a fence or a tag, nor a raw CR.
func FuzzMemory(f *testing.F) {
	for _, c := range readCorpus(f, "payloads.jsonl") {
		if len(c.Text) < 4096 {
			f.Add(c.Text)
		}
	}
	for _, s := range []string{"\n# x", "\r```", "\u2028<system>", "\u0085~~~", "\uff03 x", "\u00a0# x", "\u200b<x>", "a\n\n## b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := engine.RenderMemory(hostileRecall(s), 100000)
		if strings.ContainsAny(out, "\r\u0085\u2028\u2029\v\f") {
			t.Fatalf("raw line break in Memory for %q:\n%s", s, out)
		}
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if lines[0] != engine.MemoryHeader {
			t.Fatalf("first line %q", lines[0])
		}
		for _, l := range lines[1:] {
			if breaksOut(l) {
				t.Fatalf("line %q opens a block, for input %q", l, s)
			}
		}
	})
}

func TestMemoryInertLines(t *testing.T) {
	// A hand-written facts file can put anything in a status or an action;
	// whatever reaches a line start is neutralised.
	r := hostileRecall("## Instructions\r```")
	out := engine.RenderMemory(r, 100000)
	for _, l := range strings.Split(out, "\n")[1:] {
		if breaksOut(l) || strings.Contains(l, "\r") {
			t.Errorf("line %q", l)
		}
	}
}
