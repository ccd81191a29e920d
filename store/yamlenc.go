package store

import (
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/pemdev/pem/engine"
)

// A hand-written canonical encoder for engine.Experience, the record a
// consolidation writes ~1,000 of per run (docs/performance.md,
// "Consolidation"). yaml.v3 builds an event for every scalar and keeps them
// all until the document ends (~300 MB allocated per run at 1,000 entries
// into 100,000); this writes the same bytes straight into one buffer.
//
// It gives exactly yaml.v3's output (Encoder with SetIndent(2), what
// encodeYAML does) or nothing: every decision yaml.v3 takes for a scalar —
// whether its text would read back as another type (resolve), the emitter's
// analysis of its characters, the style it falls back to, the escapes of a
// double-quoted one — is ported here from yaml.v3 v3.0.6 (encode.go,
// resolve.go, sorter.go, emitterc.go), and whatever it does not model
// returns ok=false so that Marshal takes yaml.v3's own path: invalid UTF-8
// (yaml.v3 writes !!binary), line breaks other than \n, a byte-order mark,
// a literal block that needs the keep indicator (|+), a map key yaml.v3
// would write as a complex key (multi-line or over 128 bytes), map keys
// the natural sort does not order strictly, nil map values, times outside
// UTC, and a struct whose fields are not the ones listed here
// (experienceLayout: a field added to engine.Experience turns the encoder
// off until it is taught the field, TestExperienceEncoderCoversFields).
// TestMarshalExperienceMatches and FuzzMarshalExperience compare it with
// yaml.v3 byte for byte.

// marshalExperience encodes x as encodeYAML(x) would; ok=false when it
// cannot prove it writes the same bytes.
func marshalExperience(x *engine.Experience) (out []byte, ok bool) {
	if x == nil || !experienceLayoutOK() {
		return nil, false
	}
	e := yenc{b: make([]byte, 0, 512+len(x.Evidence)*160), ok: true}
	e.experience(x)
	if !e.ok {
		return nil, false
	}
	return e.b, true
}

type yenc struct {
	b  []byte
	ok bool
}

// key starts a mapping entry at indent (a new line unless the entry follows
// a sequence's "- " on the same line: inline).
func (e *yenc) key(indent int, name string, inline bool) {
	if inline {
		e.b = append(e.b, ' ') // after the item's "-"
	} else {
		e.newline()
		e.pad(indent)
	}
	e.b = append(e.b, name...)
	e.b = append(e.b, ':')
}

func (e *yenc) newline() {
	if n := len(e.b); n > 0 && e.b[n-1] != '\n' {
		e.b = append(e.b, '\n')
	}
}

func (e *yenc) pad(n int) {
	for ; n > 0; n-- {
		e.b = append(e.b, ' ')
	}
}

// item starts a sequence item at indent.
func (e *yenc) item(indent int) {
	e.newline()
	e.pad(indent)
	e.b = append(e.b, '-')
}

func (e *yenc) int(v int64) {
	e.b = append(e.b, ' ')
	e.b = strconv.AppendInt(e.b, v, 10)
}

// float writes v as yaml.v3 does (strconv 'g', shortest; .inf, .nan): its
// characters ([0-9.e+-]) always make a plain scalar.
func (e *yenc) float(v float64) {
	e.b = append(e.b, ' ')
	switch {
	case math.IsInf(v, 1):
		e.b = append(e.b, ".inf"...)
	case math.IsInf(v, -1):
		e.b = append(e.b, "-.inf"...)
	case math.IsNaN(v):
		e.b = append(e.b, ".nan"...)
	default:
		e.b = strconv.AppendFloat(e.b, v, 'g', -1, 64)
	}
}

// time writes t as yaml.v3 does (RFC 3339 with nanoseconds): in UTC its
// characters ([0-9TZ:.-], a '-' first only before a digit) always make a
// plain scalar. A time elsewhere is declined (Marshal moves it to UTC).
func (e *yenc) time(t time.Time) {
	if t.Location() != time.UTC {
		e.ok = false
		return
	}
	e.b = append(e.b, ' ')
	e.b = t.AppendFormat(e.b, time.RFC3339Nano)
}

// str writes a string value; indent is what a literal block's lines take.
func (e *yenc) str(s string, indent int) {
	style, ok := stringStyle(s)
	if !ok {
		e.ok = false
		return
	}
	e.scalar(s, style, false, indent)
}

// mapKey writes a map key at indent (a simple key, as yaml.v3 writes it).
// optTime writes "name: t" at indent unless t is zero (omitempty).
func (e *yenc) optTime(indent int, name string, t time.Time) {
	if !t.IsZero() {
		e.key(indent, name, false)
		e.time(t)
	}
}

// optStr writes "name: s" at indent unless s is empty (omitempty).
func (e *yenc) optStr(indent int, name, s string) {
	if s != "" {
		e.key(indent, name, false)
		e.str(s, indent+2)
	}
}

func (e *yenc) mapKey(indent int, s string) {
	e.newline()
	e.pad(indent)
	style, ok := stringStyle(s)
	// A key yaml.v3 cannot write as a simple key takes "? ": not modelled.
	if !ok || len(s) > 128 || strings.IndexByte(s, '\n') >= 0 {
		e.ok = false
		return
	}
	e.scalar(s, style, true, 0)
	e.b = append(e.b, ':')
}

// sortedKeys returns m's keys in yaml.v3's order; ok=false when that order
// might not be strict on them (yaml.v3's result would then depend on the
// map's order). Without digits the order is a plain lexicographic one;
// with digits every pair is checked, up to maxCheckedKeys keys.
func sortedKeys[K ~string, V any](m map[K]V) ([]string, bool) {
	keys := make([]string, 0, len(m))
	digits := false
	for k := range m {
		keys = append(keys, string(k))
		if !digits && strings.IndexFunc(string(k), unicode.IsDigit) >= 0 {
			digits = true
		}
	}
	slices.SortFunc(keys, func(a, b string) int {
		switch {
		case keyLess(a, b):
			return -1
		case keyLess(b, a):
			return 1
		}
		return 0
	})
	for i := 0; i+1 < len(keys); i++ {
		if !keyLess(keys[i], keys[i+1]) {
			return nil, false
		}
	}
	if digits {
		if len(keys) > maxCheckedKeys {
			return nil, false
		}
		for i := range keys {
			for j := i + 2; j < len(keys); j++ {
				if !keyLess(keys[i], keys[j]) {
					return nil, false
				}
			}
		}
	}
	return keys, true
}

const maxCheckedKeys = 256

// The record layout the encoder writes, field by field; checked once
// against the Go types (a mismatch turns the encoder off).
var experienceLayout = map[reflect.Type][]string{
	reflect.TypeOf(engine.Experience{}): {
		`Format int yaml:"format"`, `Domain string yaml:"domain"`, `Intent string yaml:"intent"`,
		`IntentKey string yaml:"intent_key"`, `TaskTypes []string yaml:"task_types,omitempty"`,
		`Attempts int yaml:"attempts"`, `Successes int yaml:"successes"`, `Failures int yaml:"failures"`,
		`Lessons int yaml:"lessons,omitempty"`,
		`ByCategory map[engine.FailureCategory]int yaml:"by_category,omitempty"`,
		`Patterns map[string]*engine.Counts yaml:"patterns,omitempty"`,
		`Selectors map[string]*engine.SelectorStats yaml:"selectors,omitempty"`,
		`AvgSteps float64 yaml:"avg_steps"`, `AvgDurationMs float64 yaml:"avg_duration_ms"`,
		`LastSuccessAt time.Time yaml:"last_success_at,omitempty"`,
		`LastFailureAt time.Time yaml:"last_failure_at,omitempty"`, `Evidence []engine.Evidence yaml:"evidence"`,
		`Answers []engine.Observed yaml:"answers,omitempty"`, `Digest *engine.Digest yaml:"digest,omitempty"`,
	},
	reflect.TypeOf(engine.Counts{}): {
		`OK int yaml:"ok"`, `Fail int yaml:"fail"`,
	},
	reflect.TypeOf(engine.SelectorStats{}): {
		`OK int yaml:"ok"`, `Fail int yaml:"fail"`, `LastOK time.Time yaml:"last_ok,omitempty"`,
		`LastFail time.Time yaml:"last_fail,omitempty"`,
	},
	reflect.TypeOf(engine.Evidence{}): {
		`Trace string yaml:"trace"`, `At time.Time yaml:"at"`, `Outcome engine.Outcome yaml:"outcome"`,
		`Category engine.FailureCategory yaml:"category,omitempty"`, `Session string yaml:"session,omitempty"`,
		`URLPattern string yaml:"url_pattern,omitempty"`, `Steps int yaml:"steps,omitempty"`,
		`DurationMs int64 yaml:"duration_ms,omitempty"`, `Revision string yaml:"revision,omitempty"`,
		`Verdict engine.VerdictValue yaml:"verdict,omitempty"`, `VerdictBy string yaml:"verdict_by,omitempty"`,
		`VerdictAt time.Time yaml:"verdict_at,omitempty"`,
	},
	reflect.TypeOf(engine.Observed{}): {
		`Value string yaml:"value"`, `SourceURL string yaml:"source_url,omitempty"`,
		`Reads []engine.AnswerRead yaml:"reads"`,
	},
	reflect.TypeOf(engine.AnswerRead{}): {
		`Trace string yaml:"trace"`, `Session string yaml:"session,omitempty"`, `At time.Time yaml:"at"`,
	},
	reflect.TypeOf(engine.Digest{}): {
		`Before time.Time yaml:"before"`, `HalfLifeDays float64 yaml:"half_life_days"`, `S float64 yaml:"s"`,
		`F float64 yaml:"f"`, `Traces int yaml:"traces"`, `Successes int yaml:"successes"`,
		`Failures int yaml:"failures"`, `Gates int yaml:"gates,omitempty"`,
		`NoFault int yaml:"no_fault,omitempty"`, `Confirmed int yaml:"confirmed,omitempty"`,
		`Lessons int yaml:"lessons,omitempty"`,
		`ByCategory map[engine.FailureCategory]int yaml:"by_category,omitempty"`,
		`Patterns map[string]*engine.Counts yaml:"patterns,omitempty"`, `Steps int64 yaml:"steps,omitempty"`,
		`DurationMs int64 yaml:"duration_ms,omitempty"`, `Sessions []string yaml:"sessions,omitempty"`,
		`Recent []engine.Outcome yaml:"recent,omitempty"`, `Streak int yaml:"streak,omitempty"`,
		`Newest time.Time yaml:"newest,omitempty"`, `OpenGate engine.FailureCategory yaml:"open_gate,omitempty"`,
		`Judged time.Time yaml:"judged,omitempty"`, `OpenWrong string yaml:"open_wrong,omitempty"`,
		`OpenWrongRevision string yaml:"open_wrong_revision,omitempty"`,
		`LastSuccessAt time.Time yaml:"last_success_at,omitempty"`,
		`LastFailureAt time.Time yaml:"last_failure_at,omitempty"`,
	},
}

// layoutOf lists t's fields as the encoder's table does.
func layoutOf(t reflect.Type) []string {
	var fs []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		fs = append(fs, f.Name+" "+f.Type.String()+` yaml:"`+f.Tag.Get("yaml")+`"`)
	}
	return fs
}

var experienceLayoutOK = sync.OnceValue(func() bool {
	for t, want := range experienceLayout {
		if !slices.Equal(layoutOf(t), want) {
			return false
		}
	}
	return true
})

func (e *yenc) experience(x *engine.Experience) {
	e.key(0, "format", false)
	e.int(int64(x.Format))
	e.key(0, "domain", false)
	e.str(x.Domain, 2)
	e.key(0, "intent", false)
	e.str(x.Intent, 2)
	e.key(0, "intent_key", false)
	e.str(x.IntentKey, 2)
	if len(x.TaskTypes) > 0 {
		e.key(0, "task_types", false)
		e.strings(2, x.TaskTypes)
	}
	e.key(0, "attempts", false)
	e.int(int64(x.Attempts))
	e.key(0, "successes", false)
	e.int(int64(x.Successes))
	e.key(0, "failures", false)
	e.int(int64(x.Failures))
	if x.Lessons != 0 {
		e.key(0, "lessons", false)
		e.int(int64(x.Lessons))
	}
	if len(x.ByCategory) > 0 {
		e.key(0, "by_category", false)
		e.intMap(2, x.ByCategory)
	}
	if len(x.Patterns) > 0 {
		e.key(0, "patterns", false)
		e.countsMap(2, x.Patterns)
	}
	if len(x.Selectors) > 0 {
		e.key(0, "selectors", false)
		keys, ok := sortedKeys(x.Selectors)
		if !ok {
			e.ok = false
			return
		}
		for _, k := range keys {
			s := x.Selectors[k]
			if s == nil {
				e.ok = false
				return
			}
			e.mapKey(2, k)
			e.key(4, "ok", false)
			e.int(int64(s.OK))
			e.key(4, "fail", false)
			e.int(int64(s.Fail))
			e.optTime(4, "last_ok", s.LastOK)
			e.optTime(4, "last_fail", s.LastFail)
		}
	}
	e.key(0, "avg_steps", false)
	e.float(x.AvgSteps)
	e.key(0, "avg_duration_ms", false)
	e.float(x.AvgDurationMs)
	e.optTime(0, "last_success_at", x.LastSuccessAt)
	e.optTime(0, "last_failure_at", x.LastFailureAt)
	e.key(0, "evidence", false)
	if len(x.Evidence) == 0 {
		e.b = append(e.b, " []"...)
	}
	for i := range x.Evidence {
		e.evidence(&x.Evidence[i])
	}
	if len(x.Answers) > 0 {
		e.key(0, "answers", false)
		for i := range x.Answers {
			a := &x.Answers[i]
			e.item(2)
			e.key(4, "value", true)
			e.str(a.Value, 6)
			e.optStr(4, "source_url", a.SourceURL)
			e.key(4, "reads", false)
			if len(a.Reads) == 0 {
				e.b = append(e.b, " []"...)
			}
			for j := range a.Reads {
				r := &a.Reads[j]
				e.item(6)
				e.key(8, "trace", true)
				e.str(r.Trace, 10)
				e.optStr(8, "session", r.Session)
				e.key(8, "at", false)
				e.time(r.At)
			}
		}
	}
	if x.Digest != nil {
		e.key(0, "digest", false)
		e.digest(x.Digest)
	}
	e.newline()
}

func (e *yenc) evidence(v *engine.Evidence) {
	e.item(2)
	e.key(4, "trace", true)
	e.str(v.Trace, 6)
	e.key(4, "at", false)
	e.time(v.At)
	e.key(4, "outcome", false)
	e.str(string(v.Outcome), 6)
	e.optStr(4, "category", string(v.Category))
	e.optStr(4, "session", v.Session)
	e.optStr(4, "url_pattern", v.URLPattern)
	if v.Steps != 0 {
		e.key(4, "steps", false)
		e.int(int64(v.Steps))
	}
	if v.DurationMs != 0 {
		e.key(4, "duration_ms", false)
		e.int(v.DurationMs)
	}
	e.optStr(4, "revision", v.Revision)
	e.optStr(4, "verdict", string(v.Verdict))
	e.optStr(4, "verdict_by", v.VerdictBy)
	e.optTime(4, "verdict_at", v.VerdictAt)
}

func (e *yenc) digest(d *engine.Digest) {
	e.key(2, "before", false)
	e.time(d.Before)
	e.key(2, "half_life_days", false)
	e.float(d.HalfLifeDays)
	e.key(2, "s", false)
	e.float(d.S)
	e.key(2, "f", false)
	e.float(d.F)
	e.key(2, "traces", false)
	e.int(int64(d.Traces))
	e.key(2, "successes", false)
	e.int(int64(d.Successes))
	e.key(2, "failures", false)
	e.int(int64(d.Failures))
	for _, f := range []struct {
		name string
		v    int
	}{{"gates", d.Gates}, {"no_fault", d.NoFault}, {"confirmed", d.Confirmed}, {"lessons", d.Lessons}} {
		if f.v != 0 {
			e.key(2, f.name, false)
			e.int(int64(f.v))
		}
	}
	if len(d.ByCategory) > 0 {
		e.key(2, "by_category", false)
		e.intMap(4, d.ByCategory)
	}
	if len(d.Patterns) > 0 {
		e.key(2, "patterns", false)
		e.countsMap(4, d.Patterns)
	}
	if d.Steps != 0 {
		e.key(2, "steps", false)
		e.int(d.Steps)
	}
	if d.DurationMs != 0 {
		e.key(2, "duration_ms", false)
		e.int(d.DurationMs)
	}
	if len(d.Sessions) > 0 {
		e.key(2, "sessions", false)
		e.strings(4, d.Sessions)
	}
	if len(d.Recent) > 0 {
		e.key(2, "recent", false)
		for _, o := range d.Recent {
			e.item(4)
			e.str(string(o), 6)
		}
	}
	if d.Streak != 0 {
		e.key(2, "streak", false)
		e.int(int64(d.Streak))
	}
	e.optTime(2, "newest", d.Newest)
	e.optStr(2, "open_gate", string(d.OpenGate))
	e.optTime(2, "judged", d.Judged)
	e.optStr(2, "open_wrong", d.OpenWrong)
	e.optStr(2, "open_wrong_revision", d.OpenWrongRevision)
	e.optTime(2, "last_success_at", d.LastSuccessAt)
	e.optTime(2, "last_failure_at", d.LastFailureAt)
}

// strings writes a sequence of strings, its items at indent.
func (e *yenc) strings(indent int, ss []string) {
	for _, s := range ss {
		e.item(indent)
		e.str(s, indent+2)
	}
}

func (e *yenc) intMap(indent int, m map[engine.FailureCategory]int) {
	keys, ok := sortedKeys(m)
	if !ok {
		e.ok = false
		return
	}
	for _, k := range keys {
		e.mapKey(indent, k)
		e.int(int64(m[engine.FailureCategory(k)]))
	}
}

func (e *yenc) countsMap(indent int, m map[string]*engine.Counts) {
	keys, ok := sortedKeys(m)
	if !ok {
		e.ok = false
		return
	}
	for _, k := range keys {
		c := m[k]
		if c == nil {
			e.ok = false
			return
		}
		e.mapKey(indent, k)
		e.key(indent+2, "ok", false)
		e.int(int64(c.OK))
		e.key(indent+2, "fail", false)
		e.int(int64(c.Fail))
	}
}

// Scalar styles, as yaml.v3 names them.
const (
	stylePlain = iota
	styleSingle
	styleDouble
	styleLiteral
)

// stringStyle is yaml.v3's encoder.stringv: the style it asks the emitter
// for. ok=false for what is not modelled (invalid UTF-8: !!binary).
func stringStyle(s string) (int, bool) {
	if !utf8.ValidString(s) {
		return 0, false
	}
	switch {
	case strings.IndexByte(s, '\n') >= 0:
		return styleLiteral, true
	case resolvesToStr(s) && !isBase60Float(s) && !isOldBool(s):
		return stylePlain, true
	}
	return styleDouble, true
}

// scalar is the emitter's analysis, style selection and writing of one
// scalar (block context, unlimited width). indent: a literal block's.
func (e *yenc) scalar(s string, style int, simpleKey bool, indent int) {
	if !e.ok {
		return
	}
	a, ok := analyzeScalar(s)
	if !ok {
		e.ok = false
		return
	}
	if simpleKey && a.multiline {
		style = styleDouble
	}
	if style == stylePlain {
		if !a.blockPlain || len(s) == 0 && simpleKey {
			style = styleSingle
		}
	}
	if style == styleSingle && !a.singleQuoted {
		style = styleDouble
	}
	if style == styleLiteral && (!a.block || simpleKey) {
		style = styleDouble
	}
	if !simpleKey {
		e.b = append(e.b, ' ')
	}
	switch style {
	case stylePlain:
		e.b = append(e.b, s...)
	case styleSingle:
		e.b = append(e.b, '\'')
		for i := 0; i < len(s); i++ {
			if s[i] == '\'' {
				e.b = append(e.b, '\'')
			}
			e.b = append(e.b, s[i])
		}
		e.b = append(e.b, '\'')
	case styleDouble:
		e.double(s)
	case styleLiteral:
		e.literal(s, indent)
	}
}

type scalarAnalysis struct {
	multiline, blockPlain, singleQuoted, block bool
}

// analyzeScalar is yaml_emitter_analyze_scalar (what the block context
// uses of it); ok=false for a byte-order mark or a line break other than
// \n, which this encoder does not model.
func analyzeScalar(s string) (scalarAnalysis, bool) {
	if len(s) == 0 {
		return scalarAnalysis{blockPlain: true, singleQuoted: true}, true
	}
	if strings.HasPrefix(s, "\uFEFF") {
		return scalarAnalysis{}, false
	}
	var blockIndicators, lineBreaks, special, tabs bool
	var leadingSpace, leadingBreak, trailingSpace, trailingBreak, breakSpace, spaceBreak bool
	var prevSpace, prevBreak bool
	if len(s) >= 3 && (s[:3] == "---" || s[:3] == "...") {
		blockIndicators = true
	}
	precededByWS := true
	for i, w := 0, 0; i < len(s); i += w {
		c := s[i]
		w = yamlWidth(c)
		if w == 0 || i+w > len(s) {
			return scalarAnalysis{}, false
		}
		if isOtherBreak(s, i) {
			return scalarAnalysis{}, false
		}
		followedByWS := i+w >= len(s) || s[i+w] == ' ' || s[i+w] == '\t'
		if i == 0 {
			switch c {
			case '#', ',', '[', ']', '{', '}', '&', '*', '!', '|', '>', '\'', '"', '%', '@', '`':
				blockIndicators = true
			case '?', ':', '-':
				if followedByWS {
					blockIndicators = true
				}
			}
		} else {
			switch c {
			case ':':
				if followedByWS {
					blockIndicators = true
				}
			case '#':
				if precededByWS {
					blockIndicators = true
				}
			}
		}
		if c == '\t' {
			tabs = true
		} else if !isPrintable(s, i) {
			special = true
		}
		switch c {
		case ' ':
			if i == 0 {
				leadingSpace = true
			}
			if i+1 == len(s) {
				trailingSpace = true
			}
			if prevBreak {
				breakSpace = true
			}
			prevSpace, prevBreak = true, false
		case '\n':
			lineBreaks = true
			if i == 0 {
				leadingBreak = true
			}
			if i+1 == len(s) {
				trailingBreak = true
			}
			if prevSpace {
				spaceBreak = true
			}
			prevSpace, prevBreak = false, true
		default:
			prevSpace, prevBreak = false, false
		}
		precededByWS = c == ' ' || c == '\t' || c == '\n' || c == 0
	}
	a := scalarAnalysis{multiline: lineBreaks, blockPlain: true, singleQuoted: true, block: true}
	if leadingSpace || leadingBreak || trailingSpace || trailingBreak {
		a.blockPlain = false
	}
	if trailingSpace {
		a.block = false
	}
	if breakSpace {
		a.blockPlain, a.singleQuoted = false, false
	}
	if spaceBreak || tabs || special {
		a.blockPlain, a.singleQuoted = false, false
	}
	if spaceBreak || special {
		a.block = false
	}
	if lineBreaks {
		a.blockPlain = false
	}
	if blockIndicators {
		a.blockPlain = false
	}
	return a, true
}

func yamlWidth(b byte) int {
	switch {
	case b&0x80 == 0:
		return 1
	case b&0xE0 == 0xC0:
		return 2
	case b&0xF0 == 0xE0:
		return 3
	case b&0xF8 == 0xF0:
		return 4
	}
	return 0
}

// isOtherBreak: \r, NEL, LS or PS at i (yaml's breaks other than \n).
func isOtherBreak(s string, i int) bool {
	switch s[i] {
	case '\r':
		return true
	case 0xC2:
		return i+1 < len(s) && s[i+1] == 0x85
	case 0xE2:
		return i+2 < len(s) && s[i+1] == 0x80 && (s[i+2] == 0xA8 || s[i+2] == 0xA9)
	}
	return false
}

// isPrintable is yaml's is_printable at i (s is valid UTF-8).
func isPrintable(s string, i int) bool {
	b := s[i]
	at := func(k int) byte {
		if i+k < len(s) {
			return s[i+k]
		}
		return 0
	}
	return b == 0x0A ||
		b >= 0x20 && b <= 0x7E ||
		b == 0xC2 && at(1) >= 0xA0 ||
		b > 0xC2 && b < 0xED ||
		b == 0xED && at(1) < 0xA0 ||
		b == 0xEE ||
		b == 0xEF && !(at(1) == 0xBB && at(2) == 0xBF) && !(at(1) == 0xBF && (at(2) == 0xBE || at(2) == 0xBF))
}

// double writes a double-quoted scalar (yaml_emitter_write_double_quoted_scalar
// without folding: the width is unlimited).
func (e *yenc) double(s string) {
	const hexDigits = "0123456789ABCDEF"
	e.b = append(e.b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if isPrintable(s, i) && c != '\n' && c != '"' && c != '\\' {
			w := yamlWidth(c)
			e.b = append(e.b, s[i:i+w]...)
			i += w
			continue
		}
		r, w := utf8.DecodeRuneInString(s[i:])
		i += w
		e.b = append(e.b, '\\')
		switch r {
		case 0x00:
			e.b = append(e.b, '0')
		case 0x07:
			e.b = append(e.b, 'a')
		case 0x08:
			e.b = append(e.b, 'b')
		case 0x09:
			e.b = append(e.b, 't')
		case 0x0A:
			e.b = append(e.b, 'n')
		case 0x0b:
			e.b = append(e.b, 'v')
		case 0x0c:
			e.b = append(e.b, 'f')
		case 0x0d:
			e.b = append(e.b, 'r')
		case 0x1b:
			e.b = append(e.b, 'e')
		case 0x22:
			e.b = append(e.b, '"')
		case 0x5c:
			e.b = append(e.b, '\\')
		case 0x85:
			e.b = append(e.b, 'N')
		case 0xA0:
			e.b = append(e.b, '_')
		case 0x2028:
			e.b = append(e.b, 'L')
		case 0x2029:
			e.b = append(e.b, 'P')
		default:
			n := 8
			switch {
			case r <= 0xFF:
				e.b, n = append(e.b, 'x'), 2
			case r <= 0xFFFF:
				e.b, n = append(e.b, 'u'), 4
			default:
				e.b = append(e.b, 'U')
			}
			for k := (n - 1) * 4; k >= 0; k -= 4 {
				e.b = append(e.b, hexDigits[(r>>uint(k))&0x0F])
			}
		}
	}
	e.b = append(e.b, '"')
}

// literal writes a literal block scalar whose lines take indent
// (yaml_emitter_write_literal_scalar with its hints); the keep indicator
// (a value ending in two line breaks, or only one) is not modelled.
func (e *yenc) literal(s string, indent int) {
	e.b = append(e.b, '|')
	if s[0] == ' ' || s[0] == '\n' {
		e.b = append(e.b, '2')
	}
	switch {
	case s[len(s)-1] != '\n':
		e.b = append(e.b, '-')
	case len(s) == 1 || s[len(s)-2] == '\n':
		e.ok = false
		return
	}
	e.b = append(e.b, '\n')
	breaks := true
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			e.b = append(e.b, '\n')
			breaks = true
			continue
		}
		if breaks {
			e.pad(indent)
		}
		e.b = append(e.b, s[i])
		breaks = false
	}
}

// resolvesToStr is yaml.v3's resolve("", s) == "!!str".
func resolvesToStr(s string) bool {
	if s == "" || resolveSpecial[s] {
		return false // null, or a word of the table
	}
	switch c := s[0]; {
	case c == '+' || c == '-' || c >= '0' && c <= '9':
		if !numeric(s) {
			return true // a trace id: no failed parse (each allocates its error)
		}
		if _, ok := parseTimestamp(s); ok {
			return false
		}
		plain := strings.ReplaceAll(s, "_", "")
		if _, err := strconv.ParseInt(plain, 0, 64); err == nil {
			return false
		}
		if _, err := strconv.ParseUint(plain, 0, 64); err == nil {
			return false
		}
		if yamlStyleFloat.MatchString(plain) {
			if _, err := strconv.ParseFloat(plain, 64); err == nil {
				return false
			}
		}
		return !prefixedInt(plain, "0b", 2) && !prefixedInt(plain, "0o", 8)
	case c == '.':
		_, err := strconv.ParseFloat(s, 64)
		return err != nil
	}
	return true
}

// prefixedInt is resolve's reading of yaml.v3's base prefixes: "0b…" and
// "0o…" as a signed or unsigned integer in base, "-0b…" and "-0o…" as a
// signed one.
func prefixedInt(plain, prefix string, base int) bool {
	if rest, ok := strings.CutPrefix(plain, prefix); ok {
		if _, err := strconv.ParseInt(rest, base, 64); err == nil {
			return true
		}
		_, err := strconv.ParseUint(rest, base, 64)
		return err == nil
	}
	if rest, ok := strings.CutPrefix(plain, "-"+prefix); ok {
		_, err := strconv.ParseInt("-"+rest, base, 64)
		return err == nil
	}
	return false
}

// numeric reports whether every byte of s could be part of what resolve's
// number and timestamp parsers accept (digits, signs, '_', '.', ',', ':',
// ' ', exponents, base prefixes, hex digits, the time's T and Z); a string
// with any other byte resolves to !!str.
func numeric(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9', c >= 'a' && c <= 'f', c >= 'A' && c <= 'F':
		case strings.IndexByte("+-_.,: xXoOtTzZ", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// resolveSpecial: the words yaml.v3 resolves by table (resolve.go).
var resolveSpecial = map[string]bool{
	"true": true, "True": true, "TRUE": true, "false": true, "False": true, "FALSE": true,
	"~": true, "null": true, "Null": true, "NULL": true,
	".nan": true, ".NaN": true, ".NAN": true, ".inf": true, ".Inf": true, ".INF": true,
	"+.inf": true, "+.Inf": true, "+.INF": true, "-.inf": true, "-.Inf": true, "-.INF": true, "<<": true,
}

var (
	yamlStyleFloat = regexp.MustCompile(`^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`)
	base60float    = regexp.MustCompile(`^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$`)
)

var timestampFormats = []string{
	"2006-1-2T15:4:5.999999999Z07:00",
	"2006-1-2t15:4:5.999999999Z07:00",
	"2006-1-2 15:4:5.999999999",
	"2006-1-2",
}

func parseTimestamp(s string) (time.Time, bool) {
	i := 0
	for ; i < len(s); i++ {
		if c := s[i]; c < '0' || c > '9' {
			break
		}
	}
	if i != 4 || i == len(s) || s[i] != '-' {
		return time.Time{}, false
	}
	for _, f := range timestampFormats {
		if t, err := time.Parse(f, s); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

func isBase60Float(s string) bool {
	if s == "" {
		return false
	}
	c := s[0]
	if !(c == '+' || c == '-' || c >= '0' && c <= '9') || strings.IndexByte(s, ':') < 0 {
		return false
	}
	return base60float.MatchString(s)
}

func isOldBool(s string) bool {
	switch s {
	case "y", "Y", "yes", "Yes", "YES", "on", "On", "ON",
		"n", "N", "no", "No", "NO", "off", "Off", "OFF":
		return true
	}
	return false
}

// keyLess is yaml.v3's keyList.Less for two string keys (sorter.go): a
// natural order, digit runs compared as numbers. ASCII keys are compared
// as bytes (the same runes), others as runes.
func keyLess(a, b string) bool {
	if isASCII(a) && isASCII(b) {
		return naturalLess(len(a), len(b), func(i int) rune { return rune(a[i]) }, func(i int) rune { return rune(b[i]) })
	}
	ar, br := []rune(a), []rune(b)
	return naturalLess(len(ar), len(br), func(i int) rune { return ar[i] }, func(i int) rune { return br[i] })
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func naturalLess(na, nb int, ar, br func(int) rune) bool {
	digits := false
	for i := 0; i < na && i < nb; i++ {
		if ar(i) == br(i) {
			digits = unicode.IsDigit(ar(i))
			continue
		}
		al := unicode.IsLetter(ar(i))
		bl := unicode.IsLetter(br(i))
		if al && bl {
			return ar(i) < br(i)
		}
		if al || bl {
			if digits {
				return al
			}
			return bl
		}
		var ai, bi int
		var an, bn int64
		if ar(i) == '0' || br(i) == '0' {
			for j := i - 1; j >= 0 && unicode.IsDigit(ar(j)); j-- {
				if ar(j) != '0' {
					an = 1
					bn = 1
					break
				}
			}
		}
		for ai = i; ai < na && unicode.IsDigit(ar(ai)); ai++ {
			an = an*10 + int64(ar(ai)-'0')
		}
		for bi = i; bi < nb && unicode.IsDigit(br(bi)); bi++ {
			bn = bn*10 + int64(br(bi)-'0')
		}
		if an != bn {
			return an < bn
		}
		if ai != bi {
			return ai < bi
		}
		return ar(i) < br(i)
	}
	return na < nb
}
