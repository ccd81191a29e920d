package store

import (
	"reflect"
	"slices"
	"sync"

	"github.com/pemdev/pem/engine"
)

// The decoded cache's binary form of a facts record (decoded.go), written
// with expcodec.go's writer and reader: varints, IEEE bits, UTC times,
// strings with back-references, lengths plus one (0: nil). A query below
// P2 reads the facts of up to four other entries for their related routes
// besides its own, and their YAML decode (yaml.v3, ~0.3 ms a file) was 39 %
// of such a query's CPU in a new process (docs/performance.md, "Query,
// fifth round").
//
// The fields go in the order of factsLayout, which is checked against the
// Go types: a field the codec does not know turns it off (no cache file is
// written or read, the YAML is decoded), as experienceLayout does for
// experience.

var factsLayout = map[reflect.Type][]string{
	reflect.TypeOf(engine.Facts{}): {
		`Format int yaml:"format"`, `Domain string yaml:"domain"`, `Intent string yaml:"intent"`,
		`IntentKey string yaml:"intent_key"`, `TaskType string yaml:"task_type,omitempty"`,
		`URLPatterns []string yaml:"url_patterns,omitempty"`, `Status engine.Status yaml:"status"`,
		`Revision string yaml:"revision,omitempty"`, `Supersedes string yaml:"supersedes,omitempty"`,
		`Selectors map[string]engine.Selector yaml:"selectors,omitempty"`, `Steps []engine.Step yaml:"steps,omitempty"`,
		`ExtractionQuery string yaml:"extraction_query,omitempty"`,
		`SuccessCondition *engine.SuccessCondition yaml:"success_condition,omitempty"`,
		`InteractionHints []string yaml:"interaction_hints,omitempty"`,
		`KnownBlockers []engine.Blocker yaml:"known_blockers,omitempty"`,
		`AntiPatterns []string yaml:"anti_patterns,omitempty"`, `Answers []engine.Answer yaml:"answers,omitempty"`,
		`Provenance engine.Provenance yaml:"provenance,omitempty"`, `History []engine.Transition yaml:"history,omitempty"`,
	},
	reflect.TypeOf(engine.Selector{}): {
		`Primary string yaml:"primary"`, `Fallbacks []string yaml:"fallbacks,omitempty"`,
		`Stability float64 yaml:"stability,omitempty"`,
	},
	reflect.TypeOf(engine.Step{}): {
		`Seq int yaml:"seq"`, `Action string yaml:"action"`, `Selector string yaml:"selector,omitempty"`,
		`Fallbacks []string yaml:"fallbacks,omitempty"`, `Value string yaml:"value,omitempty"`,
		`Param string yaml:"param,omitempty"`, `URL string yaml:"url,omitempty"`, `OK bool yaml:"ok"`,
		`Error string yaml:"error,omitempty"`, `ErrorKind string yaml:"error_kind,omitempty"`,
		`HTTPStatus int yaml:"http_status,omitempty"`, `Result string yaml:"result,omitempty"`,
		`DurationMs int64 yaml:"duration_ms,omitempty"`, `Target *engine.Fingerprint yaml:"target,omitempty"`,
	},
	reflect.TypeOf(engine.Fingerprint{}): {
		`Tag string yaml:"tag,omitempty"`, `Role string yaml:"role,omitempty"`, `Name string yaml:"name,omitempty"`,
	},
	reflect.TypeOf(engine.SuccessCondition{}): {
		`URLPattern string yaml:"url_pattern,omitempty"`, `Selector string yaml:"selector,omitempty"`,
		`Under string yaml:"under,omitempty"`, `AnswerType string yaml:"answer_type,omitempty"`,
	},
	reflect.TypeOf(engine.Blocker{}): {
		`Type string yaml:"type"`, `Selector string yaml:"selector,omitempty"`,
		`Action string yaml:"action,omitempty"`, `Note string yaml:"note,omitempty"`,
	},
	reflect.TypeOf(engine.Answer{}): {
		`Query string yaml:"query"`, `Value string yaml:"value"`, `SourceURL string yaml:"source_url,omitempty"`,
		`ObservedAt time.Time yaml:"observed_at,omitempty"`, `Freshness engine.Freshness yaml:"freshness"`,
		`Sessions int yaml:"sessions,omitempty"`, `Revision string yaml:"revision,omitempty"`,
		`Demoted bool yaml:"demoted,omitempty"`, `Origin string yaml:"origin,omitempty"`,
	},
	reflect.TypeOf(engine.Provenance{}): {
		`Traces []string yaml:"traces,omitempty"`, `Sources []string yaml:"sources,omitempty"`,
		`FirstSeen time.Time yaml:"first_seen,omitempty"`, `LastVerified time.Time yaml:"last_verified,omitempty"`,
	},
	reflect.TypeOf(engine.Transition{}): {
		`From engine.Status yaml:"from"`, `To engine.Status yaml:"to"`, `At time.Time yaml:"at"`,
		`Reason string yaml:"reason,omitempty"`,
	},
}

var factsLayoutOK = sync.OnceValue(func() bool {
	for t, want := range factsLayout {
		if !slices.Equal(layoutOf(t), want) {
			return false
		}
	}
	return true
})

// appendFactsBin encodes f; ok=false when the codec is off or f holds a
// time outside UTC.
func appendFactsBin(b []byte, f *engine.Facts) ([]byte, bool) {
	return encodeBin(b, f != nil && factsLayoutOK(), func(w *binWriter) { w.facts(f) })
}

// decodeFactsBin decodes what appendFactsBin wrote; ok=false on anything
// else (the codec off, damaged or trailing bytes).
func decodeFactsBin(b []byte) (*engine.Facts, bool) {
	f := new(engine.Facts)
	if !decodeBin(b, factsLayoutOK(), func(r *binReader) { r.facts(f) }) {
		return nil, false
	}
	return f, true
}

func (w *binWriter) bool(v bool) {
	if v {
		w.uint(1)
	} else {
		w.uint(0)
	}
}

func (w *binWriter) facts(f *engine.Facts) {
	w.int(int64(f.Format))
	w.str(f.Domain)
	w.str(f.Intent)
	w.str(f.IntentKey)
	w.str(f.TaskType)
	w.strings(f.URLPatterns)
	w.str(string(f.Status))
	w.str(f.Revision)
	w.str(f.Supersedes)
	w.count(len(f.Selectors), f.Selectors == nil)
	for k, s := range f.Selectors {
		w.str(k)
		w.str(s.Primary)
		w.strings(s.Fallbacks)
		w.float(s.Stability)
	}
	w.count(len(f.Steps), f.Steps == nil)
	for i := range f.Steps {
		w.step(&f.Steps[i])
	}
	w.str(f.ExtractionQuery)
	if c := f.SuccessCondition; c == nil {
		w.uint(0)
	} else {
		w.uint(1)
		w.str(c.URLPattern)
		w.str(c.Selector)
		w.str(c.Under)
		w.str(c.AnswerType)
	}
	w.strings(f.InteractionHints)
	w.count(len(f.KnownBlockers), f.KnownBlockers == nil)
	for _, b := range f.KnownBlockers {
		w.str(b.Type)
		w.str(b.Selector)
		w.str(b.Action)
		w.str(b.Note)
	}
	w.strings(f.AntiPatterns)
	w.count(len(f.Answers), f.Answers == nil)
	for i := range f.Answers {
		a := &f.Answers[i]
		w.str(a.Query)
		w.str(a.Value)
		w.str(a.SourceURL)
		w.time(a.ObservedAt)
		w.str(string(a.Freshness))
		w.int(int64(a.Sessions))
		w.str(a.Revision)
		w.bool(a.Demoted)
		w.str(a.Origin)
	}
	p := &f.Provenance
	w.strings(p.Traces)
	w.strings(p.Sources)
	w.time(p.FirstSeen)
	w.time(p.LastVerified)
	w.count(len(f.History), f.History == nil)
	for _, h := range f.History {
		w.str(string(h.From))
		w.str(string(h.To))
		w.time(h.At)
		w.str(h.Reason)
	}
}

func (w *binWriter) step(s *engine.Step) {
	w.int(int64(s.Seq))
	w.str(s.Action)
	w.str(s.Selector)
	w.strings(s.Fallbacks)
	w.str(s.Value)
	w.str(s.Param)
	w.str(s.URL)
	w.bool(s.OK)
	w.str(s.Error)
	w.str(s.ErrorKind)
	w.int(int64(s.HTTPStatus))
	w.str(s.Result)
	w.int(s.DurationMs)
	if t := s.Target; t == nil {
		w.uint(0)
	} else {
		w.uint(1)
		w.str(t.Tag)
		w.str(t.Role)
		w.str(t.Name)
	}
}

func (r *binReader) facts(f *engine.Facts) {
	f.Format = r.int()
	f.Domain = r.str()
	f.Intent = r.str()
	f.IntentKey = r.str()
	f.TaskType = r.str()
	f.URLPatterns = r.strings()
	f.Status = engine.Status(r.str())
	f.Revision = r.str()
	f.Supersedes = r.str()
	if n, isNil := r.count(); !isNil {
		f.Selectors = make(map[string]engine.Selector, n)
		for i := 0; i < n && r.ok; i++ {
			k := r.str()
			f.Selectors[k] = engine.Selector{Primary: r.str(), Fallbacks: r.strings(), Stability: r.float()}
		}
	}
	if n, isNil := r.count(); !isNil {
		f.Steps = make([]engine.Step, n)
		for i := 0; i < n && r.ok; i++ {
			r.step(&f.Steps[i])
		}
	}
	f.ExtractionQuery = r.str()
	if r.present() {
		f.SuccessCondition = &engine.SuccessCondition{URLPattern: r.str(), Selector: r.str(), Under: r.str(), AnswerType: r.str()}
	}
	f.InteractionHints = r.strings()
	if n, isNil := r.count(); !isNil {
		f.KnownBlockers = make([]engine.Blocker, n)
		for i := 0; i < n && r.ok; i++ {
			f.KnownBlockers[i] = engine.Blocker{Type: r.str(), Selector: r.str(), Action: r.str(), Note: r.str()}
		}
	}
	f.AntiPatterns = r.strings()
	if n, isNil := r.count(); !isNil {
		f.Answers = make([]engine.Answer, n)
		for i := 0; i < n && r.ok; i++ {
			a := &f.Answers[i]
			a.Query = r.str()
			a.Value = r.str()
			a.SourceURL = r.str()
			a.ObservedAt = r.time()
			a.Freshness = engine.Freshness(r.str())
			a.Sessions = r.int()
			a.Revision = r.str()
			a.Demoted = r.present()
			a.Origin = r.str()
		}
	}
	p := &f.Provenance
	p.Traces = r.strings()
	p.Sources = r.strings()
	p.FirstSeen = r.time()
	p.LastVerified = r.time()
	if n, isNil := r.count(); !isNil {
		f.History = make([]engine.Transition, n)
		for i := 0; i < n && r.ok; i++ {
			h := &f.History[i]
			h.From = engine.Status(r.str())
			h.To = engine.Status(r.str())
			h.At = r.time()
			h.Reason = r.str()
		}
	}
}

func (r *binReader) step(s *engine.Step) {
	s.Seq = r.int()
	s.Action = r.str()
	s.Selector = r.str()
	s.Fallbacks = r.strings()
	s.Value = r.str()
	s.Param = r.str()
	s.URL = r.str()
	s.OK = r.present()
	s.Error = r.str()
	s.ErrorKind = r.str()
	s.HTTPStatus = r.int()
	s.Result = r.str()
	s.DurationMs = r.int64()
	if r.present() {
		s.Target = &engine.Fingerprint{Tag: r.str(), Role: r.str(), Name: r.str()}
	}
}
