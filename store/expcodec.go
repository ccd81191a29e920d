package store

import (
	"encoding/binary"
	"io"
	"math"
	"time"

	"github.com/pemdev/pem/engine"
)

// The decoded cache's binary form of an experience (decoded.go).
//
// It replaced encoding/gob there: each cache file is its own gob stream,
// so every read built a new gob.Decoder that compiled the types again —
// most of the 0.68 s a consolidation of 1,000 new traces into 100,000 spent
// reading the entries it touches (docs/performance.md, "Consolidation").
// This codec writes the fields of engine.Experience in the order of
// experienceLayout (yamlenc.go), which is checked against the Go types: a
// field the codec does not know turns it off (no cache file is written or
// read, the YAML is decoded). Its integers are varints, floats their IEEE
// bits, times seconds and nanoseconds in UTC (a value with a time
// elsewhere is not cached: it would not come back the same), strings
// length and bytes with back-references to a string already written in the
// same value (outcomes, sessions, patterns repeat; trace ids, written once,
// are not entered), decoded as substrings of one copy of the input (not an
// allocation each), and slices and maps
// their length plus one (0: nil, so nil and empty come back as they were).
// A decode checks every length against the bytes left and fails, never
// panics, on a damaged file; the caller then decodes the YAML.

// appendExperienceBin encodes x; ok=false when the codec is off or x holds
// a time outside UTC.
func appendExperienceBin(b []byte, x *engine.Experience) ([]byte, bool) {
	return encodeBin(b, x != nil && experienceLayoutOK(), func(w *binWriter) { w.experience(x) })
}

// encodeBin appends what enc writes to b; ok=false when the codec is off
// (on false) or enc failed. Each kind's codec (experience, facts, pem.yaml)
// goes through it.
func encodeBin(b []byte, on bool, enc func(*binWriter)) ([]byte, bool) {
	if !on {
		return nil, false
	}
	w := binWriter{b: b, ok: true, seen: map[string]int{}}
	enc(&w)
	if !w.ok {
		return nil, false
	}
	return w.b, true
}

// decodeBin runs dec over b; false when the codec is off (on false), dec
// failed or bytes are left over.
func decodeBin(b []byte, on bool, dec func(*binReader)) bool {
	if !on {
		return false
	}
	r := binReader{s: string(b), ok: true}
	dec(&r)
	return r.ok && len(r.s) == 0
}

// decodeExperienceBin decodes what appendExperienceBin wrote; ok=false on
// anything else (the codec off, damaged or trailing bytes).
func decodeExperienceBin(b []byte) (*engine.Experience, bool) {
	x := new(engine.Experience)
	if !decodeBin(b, experienceLayoutOK(), func(r *binReader) { r.experience(x) }) {
		return nil, false
	}
	return x, true
}

type binWriter struct {
	b    []byte
	ok   bool
	seen map[string]int // string → its index among the strings written
}

func (w *binWriter) int(v int64)   { w.b = binary.AppendVarint(w.b, v) }
func (w *binWriter) uint(v uint64) { w.b = binary.AppendUvarint(w.b, v) }
func (w *binWriter) float(v float64) {
	w.b = binary.LittleEndian.AppendUint64(w.b, math.Float64bits(v))
}

func (w *binWriter) time(t time.Time) {
	if t.Location() != time.UTC {
		w.ok = false
		return
	}
	w.int(t.Unix())
	w.uint(uint64(t.Nanosecond()))
}

// str: 0 and the bytes for a string not written before, else its index + 2.
func (w *binWriter) str(s string) {
	if i, ok := w.seen[s]; ok {
		w.uint(uint64(i) + 2)
		return
	}
	w.seen[s] = len(w.seen)
	w.uint(0)
	w.uint(uint64(len(s)))
	w.b = append(w.b, s...)
}

// id: 1 and the bytes, never referred back to (a trace id is written once:
// entering 100,000 of them in the table would only cost).
func (w *binWriter) id(s string) {
	w.uint(1)
	w.uint(uint64(len(s)))
	w.b = append(w.b, s...)
}

// count writes a slice's or map's length (nil: 0, else length + 1).
func (w *binWriter) count(n int, isNil bool) {
	if isNil {
		w.uint(0)
		return
	}
	w.uint(uint64(n) + 1)
}

func (w *binWriter) strings(ss []string) {
	w.count(len(ss), ss == nil)
	for _, s := range ss {
		w.str(s)
	}
}

func (w *binWriter) intMap(m map[engine.FailureCategory]int) {
	w.count(len(m), m == nil)
	for k, v := range m {
		w.str(string(k))
		w.int(int64(v))
	}
}

func (w *binWriter) countsMap(m map[string]*engine.Counts) {
	w.count(len(m), m == nil)
	for k, c := range m {
		w.str(k)
		if c == nil {
			w.uint(0)
			continue
		}
		w.uint(1)
		w.int(int64(c.OK))
		w.int(int64(c.Fail))
	}
}

func (w *binWriter) experience(x *engine.Experience) {
	w.int(int64(x.Format))
	w.str(x.Domain)
	w.str(x.Intent)
	w.str(x.IntentKey)
	w.strings(x.TaskTypes)
	w.int(int64(x.Attempts))
	w.int(int64(x.Successes))
	w.int(int64(x.Failures))
	w.int(int64(x.Lessons))
	w.intMap(x.ByCategory)
	w.countsMap(x.Patterns)
	w.count(len(x.Selectors), x.Selectors == nil)
	for k, s := range x.Selectors {
		w.str(k)
		if s == nil {
			w.uint(0)
			continue
		}
		w.uint(1)
		w.int(int64(s.OK))
		w.int(int64(s.Fail))
		w.time(s.LastOK)
		w.time(s.LastFail)
	}
	w.float(x.AvgSteps)
	w.float(x.AvgDurationMs)
	w.time(x.LastSuccessAt)
	w.time(x.LastFailureAt)
	w.count(len(x.Evidence), x.Evidence == nil)
	for i := range x.Evidence {
		e := &x.Evidence[i]
		w.id(e.Trace)
		w.time(e.At)
		w.str(string(e.Outcome))
		w.str(string(e.Category))
		w.str(e.Session)
		w.str(e.URLPattern)
		w.int(int64(e.Steps))
		w.int(e.DurationMs)
		w.str(e.Revision)
		w.str(string(e.Verdict))
		w.str(e.VerdictBy)
		w.time(e.VerdictAt)
	}
	w.count(len(x.Answers), x.Answers == nil)
	for i := range x.Answers {
		a := &x.Answers[i]
		w.str(a.Value)
		w.str(a.SourceURL)
		w.count(len(a.Reads), a.Reads == nil)
		for _, rd := range a.Reads {
			w.id(rd.Trace)
			w.str(rd.Session)
			w.time(rd.At)
		}
	}
	d := x.Digest
	if d == nil {
		w.uint(0)
		return
	}
	w.uint(1)
	w.time(d.Before)
	w.float(d.HalfLifeDays)
	w.float(d.S)
	w.float(d.F)
	for _, v := range []int{d.Traces, d.Successes, d.Failures, d.Gates, d.NoFault, d.Confirmed, d.Lessons} {
		w.int(int64(v))
	}
	w.intMap(d.ByCategory)
	w.countsMap(d.Patterns)
	w.int(d.Steps)
	w.int(d.DurationMs)
	w.strings(d.Sessions)
	w.count(len(d.Recent), d.Recent == nil)
	for _, o := range d.Recent {
		w.str(string(o))
	}
	w.int(int64(d.Streak))
	w.time(d.Newest)
	w.str(string(d.OpenGate))
	w.time(d.Judged)
	w.str(d.OpenWrong)
	w.str(d.OpenWrongRevision)
	w.time(d.LastSuccessAt)
	w.time(d.LastFailureAt)
}

// binReader reads from a string: the strings it returns are substrings of
// it (one copy of the input, not one allocation per string).
type binReader struct {
	s    string
	ok   bool
	strs []string
}

func (r *binReader) uint() uint64 {
	if !r.ok {
		return 0
	}
	var v uint64
	for i := 0; i < len(r.s) && i < binary.MaxVarintLen64; i++ {
		c := r.s[i]
		if c < 0x80 {
			if i == binary.MaxVarintLen64-1 && c > 1 {
				break // overflow
			}
			r.s = r.s[i+1:]
			return v | uint64(c)<<(7*i)
		}
		v |= uint64(c&0x7f) << (7 * i)
	}
	r.ok = false
	return 0
}

func (r *binReader) int64() int64 {
	u := r.uint()
	v := int64(u >> 1)
	if u&1 != 0 {
		v = ^v
	}
	return v
}

// int reads a Go int (a value past its range is damage).
func (r *binReader) int() int {
	v := r.int64()
	if int64(int(v)) != v {
		r.ok = false
		return 0
	}
	return int(v)
}

func (r *binReader) float() float64 {
	if !r.ok || len(r.s) < 8 {
		r.ok = false
		return 0
	}
	var u uint64
	for i := 7; i >= 0; i-- {
		u = u<<8 | uint64(r.s[i])
	}
	r.s = r.s[8:]
	return math.Float64frombits(u)
}

func (r *binReader) time() time.Time {
	sec := r.int64()
	ns := r.uint()
	if !r.ok || ns >= 1e9 {
		r.ok = false
		return time.Time{}
	}
	return time.Unix(sec, int64(ns)).UTC()
}

// bytes returns the next n bytes.
func (r *binReader) bytes(n uint64) string {
	if !r.ok || n > uint64(len(r.s)) {
		r.ok = false
		return ""
	}
	s := r.s[:n]
	r.s = r.s[n:]
	return s
}

func (r *binReader) str() string {
	switch i := r.uint(); {
	case !r.ok:
		return ""
	case i == 0:
		s := r.bytes(r.uint())
		if r.ok {
			r.strs = append(r.strs, s)
		}
		return s
	case i == 1:
		return r.bytes(r.uint())
	case i-2 < uint64(len(r.strs)):
		return r.strs[i-2]
	}
	r.ok = false
	return ""
}

// count reads a length written by binWriter.count: nil, and the length
// (each element takes at least one byte, so a length past the bytes left
// is damage, and no allocation is made for it).
func (r *binReader) count() (n int, isNil bool) {
	c := r.uint()
	if !r.ok {
		return 0, true
	}
	if c == 0 {
		return 0, true
	}
	if c-1 > uint64(len(r.s)) {
		r.ok = false
		return 0, true
	}
	return int(c - 1), false
}

func (r *binReader) strings() []string {
	n, isNil := r.count()
	if isNil {
		return nil
	}
	ss := make([]string, n)
	for i := range ss {
		ss[i] = r.str()
	}
	return ss
}

func (r *binReader) intMap() map[engine.FailureCategory]int {
	n, isNil := r.count()
	if isNil {
		return nil
	}
	m := make(map[engine.FailureCategory]int, n)
	for i := 0; i < n && r.ok; i++ {
		k := r.str()
		m[engine.FailureCategory(k)] = r.int()
	}
	return m
}

func (r *binReader) present() bool {
	switch r.uint() {
	case 0:
		return false
	case 1:
		return true
	}
	r.ok = false
	return false
}

func (r *binReader) countsMap() map[string]*engine.Counts {
	n, isNil := r.count()
	if isNil {
		return nil
	}
	m := make(map[string]*engine.Counts, n)
	for i := 0; i < n && r.ok; i++ {
		k := r.str()
		if !r.present() {
			m[k] = nil
			continue
		}
		m[k] = &engine.Counts{OK: r.int(), Fail: r.int()}
	}
	return m
}

func (r *binReader) experience(x *engine.Experience) {
	x.Format = r.int()
	x.Domain = r.str()
	x.Intent = r.str()
	x.IntentKey = r.str()
	x.TaskTypes = r.strings()
	x.Attempts = r.int()
	x.Successes = r.int()
	x.Failures = r.int()
	x.Lessons = r.int()
	x.ByCategory = r.intMap()
	x.Patterns = r.countsMap()
	if n, isNil := r.count(); !isNil {
		x.Selectors = make(map[string]*engine.SelectorStats, n)
		for i := 0; i < n && r.ok; i++ {
			k := r.str()
			if !r.present() {
				x.Selectors[k] = nil
				continue
			}
			s := &engine.SelectorStats{OK: r.int(), Fail: r.int()}
			s.LastOK = r.time()
			s.LastFail = r.time()
			x.Selectors[k] = s
		}
	}
	x.AvgSteps = r.float()
	x.AvgDurationMs = r.float()
	x.LastSuccessAt = r.time()
	x.LastFailureAt = r.time()
	if n, isNil := r.count(); !isNil {
		x.Evidence = make([]engine.Evidence, n)
		for i := 0; i < n && r.ok; i++ {
			e := &x.Evidence[i]
			e.Trace = r.str()
			e.At = r.time()
			e.Outcome = engine.Outcome(r.str())
			e.Category = engine.FailureCategory(r.str())
			e.Session = r.str()
			e.URLPattern = r.str()
			e.Steps = r.int()
			e.DurationMs = r.int64()
			e.Revision = r.str()
			e.Verdict = engine.VerdictValue(r.str())
			e.VerdictBy = r.str()
			e.VerdictAt = r.time()
		}
	}
	if n, isNil := r.count(); !isNil {
		x.Answers = make([]engine.Observed, n)
		for i := 0; i < n && r.ok; i++ {
			a := &x.Answers[i]
			a.Value = r.str()
			a.SourceURL = r.str()
			if m, isNil := r.count(); !isNil {
				a.Reads = make([]engine.AnswerRead, m)
				for j := 0; j < m && r.ok; j++ {
					a.Reads[j] = engine.AnswerRead{Trace: r.str(), Session: r.str(), At: r.time()}
				}
			}
		}
	}
	if !r.present() {
		return
	}
	d := &engine.Digest{}
	x.Digest = d
	d.Before = r.time()
	d.HalfLifeDays = r.float()
	d.S = r.float()
	d.F = r.float()
	for _, p := range []*int{&d.Traces, &d.Successes, &d.Failures, &d.Gates, &d.NoFault, &d.Confirmed, &d.Lessons} {
		*p = r.int()
	}
	d.ByCategory = r.intMap()
	d.Patterns = r.countsMap()
	d.Steps = r.int64()
	d.DurationMs = r.int64()
	d.Sessions = r.strings()
	if n, isNil := r.count(); !isNil {
		d.Recent = make([]engine.Outcome, n)
		for i := range d.Recent {
			d.Recent[i] = engine.Outcome(r.str())
		}
	}
	d.Streak = r.int()
	d.Newest = r.time()
	d.OpenGate = engine.FailureCategory(r.str())
	d.Judged = r.time()
	d.OpenWrong = r.str()
	d.OpenWrongRevision = r.str()
	d.LastSuccessAt = r.time()
	d.LastFailureAt = r.time()
}

// BinEncoder writes a stream of values in the decoded cache's binary form:
// experiences (as appendExperienceBin does) and the integers and strings
// around them, a string written once referred back to afterwards in the
// whole stream. Other caches of many entries use it (consolidate's summary
// cache), so that they neither run gob's reflection over every evidence
// item nor keep a second format of the same records.
type BinEncoder struct{ w binWriter }

// NewBinEncoder returns an encoder appending to b.
func NewBinEncoder(b []byte) *BinEncoder {
	return &BinEncoder{w: binWriter{b: b, ok: true, seen: map[string]int{}}}
}

// Experience appends x; false (and the stream is unusable) when the codec
// is off or x holds a time outside UTC.
func (e *BinEncoder) Experience(x *engine.Experience) bool {
	if !experienceLayoutOK() {
		e.w.ok = false
	}
	if e.w.ok {
		e.w.experience(x)
	}
	return e.w.ok
}

func (e *BinEncoder) Int(v int64)     { e.w.int(v) }
func (e *BinEncoder) String(s string) { e.w.str(s) }
func (e *BinEncoder) Blob(b []byte)   { e.w.uint(uint64(len(b))); e.w.b = append(e.w.b, b...) }
func (e *BinEncoder) OK() bool        { return e.w.ok }
func (e *BinEncoder) Bytes() []byte   { return e.w.b }

// BinDecoder reads what a BinEncoder wrote, in the same order. Any damage
// makes OK false from then on (reads return zero values); it never panics.
type BinDecoder struct{ r binReader }

// NewBinDecoder returns a decoder of b.
func NewBinDecoder(b []byte) *BinDecoder { return &BinDecoder{r: binReader{s: string(b), ok: true}} }

// Experience reads one experience (nil when the stream is damaged).
func (d *BinDecoder) Experience() *engine.Experience {
	if !experienceLayoutOK() {
		d.r.ok = false
	}
	if !d.r.ok {
		return nil
	}
	x := new(engine.Experience)
	d.r.experience(x)
	if !d.r.ok {
		return nil
	}
	return x
}

func (d *BinDecoder) Int() int64     { return d.r.int64() }
func (d *BinDecoder) String() string { return d.r.str() }

// OK reports whether everything read so far was whole.
func (d *BinDecoder) OK() bool { return d.r.ok }

// Done reports whether the stream was read whole and to its end.
func (d *BinDecoder) Done() bool { return d.r.ok && len(d.r.s) == 0 }

// RawString appends s without entering it in the back-references (a long
// string written once: a directory's listing).
func (e *BinEncoder) RawString(s string) {
	e.w.uint(uint64(len(s)))
	e.w.b = append(e.w.b, s...)
}

// Flush writes what was encoded so far to w and empties the buffer (the
// back-references stay: they count strings, not bytes).
func (e *BinEncoder) Flush(w io.Writer) error {
	_, err := w.Write(e.w.b)
	e.w.b = e.w.b[:0]
	return err
}

// RawString reads what BinEncoder.RawString wrote (a substring of the
// decoder's copy of its input).
func (d *BinDecoder) RawString() string { return d.r.bytes(d.r.uint()) }
