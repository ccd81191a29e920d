package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"
)

// Engine is pem's service over a Store: Save, Query, List and Memory, the same
// for the CLI, the MCP server and the agent.
type Engine struct {
	Store   Store
	Now     func() time.Time  // the clock; nil means time.Now
	Rand    io.Reader         // ids; nil means crypto/rand
	Writer  string            // who writes traces (host or user), recorded in each trace
	Secrets map[string]string // declared secrets: name → value, never stored

	mu     sync.Mutex
	traces map[string]traceMemo // trace id → what the engine needs of it; traces never change
	kept   keptAnswers          // answers kept while nothing they read changes (querymemo.go)
}

// traceMemo is what Save needs of a trace it met before, so that it never
// reads it again: its intent key, its evidence and whether the injection
// screen flagged it.
type traceMemo struct {
	key         string
	ev          Evidence
	quarantined string
}

// maxTraceMemo bounds the memo of traces (about 300 bytes each).
const maxTraceMemo = 1 << 18

func (e *Engine) traceMemo(id string) (traceMemo, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	m, ok := e.traces[id]
	return m, ok
}

// remember memoizes t and returns its memo.
func (e *Engine) remember(t *Trace) traceMemo {
	m := memoOf(t)
	e.keep(t.ID, m)
	return m
}

func memoOf(t *Trace) traceMemo {
	return traceMemo{key: t.IntentKey, ev: EvidenceOf(t), quarantined: Injection(t)}
}

// keep memoizes m as the memo of the trace id.
func (e *Engine) keep(id string, m traceMemo) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.traces == nil || len(e.traces) >= maxTraceMemo {
		e.traces = map[string]traceMemo{}
	}
	e.traces[id] = m
}

// New returns an Engine over s with the real clock.
func New(s Store) *Engine { return &Engine{Store: s} }

// WithSecrets returns an Engine over the same store, clock and writer that also
// redacts the given secrets (name → value) in what it saves. e is unchanged, so
// concurrent runs with different secrets never share a map.
func (e *Engine) WithSecrets(extra map[string]string) *Engine {
	merged := make(map[string]string, len(e.Secrets)+len(extra))
	for k, v := range e.Secrets {
		merged[k] = v
	}
	for k, v := range extra {
		merged[k] = v
	}
	return &Engine{Store: e.Store, Now: e.Now, Rand: e.Rand, Writer: e.Writer, Secrets: merged}
}

func (e *Engine) now() time.Time {
	if e.Now != nil {
		return e.Now().UTC()
	}
	return time.Now().UTC()
}

// ErrInvalid is returned for bad arguments; the message says which and how to fix it.
var ErrInvalid = errors.New("invalid argument")

// SaveRequest is one experience_save call.
type SaveRequest struct {
	URL      string
	Trace    *TraceInput // nil: an empty trace
	Outcome  string      // "success" (default) or "failure"; overrides the trace's
	TaskType string
	Intent   string
	Session  string
	Facts    *Patch
}

// SaveResult is the experience_save answer.
type SaveResult struct {
	Saved           bool            `json:"saved"`
	ID              string          `json:"id"`
	Domain          string          `json:"domain"`
	Intent          string          `json:"intent"`
	IntentKey       string          `json:"intent_key"`
	Outcome         Outcome         `json:"outcome"`
	Confidence      float64         `json:"confidence"`
	RetrievalTier   Tier            `json:"retrieval_tier"`
	TracePath       string          `json:"trace_path"`
	FailureCategory FailureCategory `json:"failure_category,omitempty"`
	FactsMerged     bool            `json:"facts_merged"`
	FactsStatus     Status          `json:"facts_status,omitempty"`
	FactsRejected   bool            `json:"facts_rejected"`
	FactsMessage    string          `json:"facts_message,omitempty"`
	// Lesson: the save had no steps, only a facts patch. It is recorded for
	// provenance and counts neither as a success nor as a failure.
	Lesson  bool   `json:"lesson"`
	Message string `json:"message,omitempty"`
	// Quarantined says why the run looks like a prompt injection: it is
	// kept, but counts as no evidence and teaches memory nothing.
	Quarantined string `json:"quarantined,omitempty"`
}

// BuildTrace turns a request into the trace Save would store (redacted, with a
// new id), without writing anything.
func (e *Engine) BuildTrace(req SaveRequest) (*Trace, error) {
	in := req.Trace
	if in == nil {
		in = &TraceInput{}
	}
	defOutcome := string(Success)
	if in.ErrorMessage != "" {
		defOutcome = string(Failure) // Browser4 tells a failure by its error_message
	}
	outcome := Outcome(strings.ToLower(firstNonEmpty(req.Outcome, in.Outcome, defOutcome)))
	if outcome == "completed" || outcome == "ok" {
		outcome = Success
	}
	if outcome == "failed" || outcome == "error" {
		outcome = Failure
	}
	finalURL, finalTitle := in.FinalPageURL, in.FinalPageTitle
	if in.FinalState != nil {
		finalURL, finalTitle = firstNonEmpty(finalURL, in.FinalState.URL), firstNonEmpty(finalTitle, in.FinalState.Title)
	}
	t := &Trace{
		Writer: in.Writer, Session: firstNonEmpty(req.Session, in.Session), Task: in.Task,
		Intent:   firstNonEmpty(req.Intent, in.Intent, req.TaskType, in.TaskType, in.Task),
		TaskType: firstNonEmpty(req.TaskType, in.TaskType), URL: firstNonEmpty(req.URL, in.URL),
		Outcome: outcome, Error: in.ErrorMessage, HTTPStatus: in.HTTPStatus, DurationMs: in.DurationMs,
		PlannerCalls: in.PlannerCalls, Tier: Tier(in.Tier), Params: in.Params, FailureCategory: FailureCategory(in.FailureCategory),
		FactsRevision: in.FactsRevision, SuccessCondition: in.SuccessCondition,
		Result: Result{Answer: in.Answer, FinalURL: finalURL, FinalTitle: finalTitle},
	}
	if in.StartedAt != nil {
		t.StartedAt = in.StartedAt.Time
	} else if in.Timestamp != nil {
		t.StartedAt = in.Timestamp.Time
	}
	if len(in.ExtractionResults) > 0 {
		t.Result.Extracted = map[string]string{}
		for k, v := range in.ExtractionResults {
			t.Result.Extracted[k] = resultString(v)
		}
	}
	sensitive := map[int]bool{}
	for i, s := range in.Steps {
		// Browser4's ActionStep has no ok: a failed step says so in its
		// result, or the trace's error_message names its selector.
		ok, stepErr := true, s.Error
		switch {
		case s.OK != nil:
			ok = *s.OK
		case s.Success != nil:
			ok = *s.Success
		case s.Error != "":
			ok = false
		case resultError(s.Result) != "":
			ok, stepErr = false, resultError(s.Result)
		case s.Selector != "" && in.ErrorMessage != "" && strings.Contains(in.ErrorMessage, s.Selector):
			ok, stepErr = false, in.ErrorMessage
		}
		seq := s.Seq
		if seq == 0 {
			seq = s.Sequence
		}
		t.Steps = append(t.Steps, Step{Seq: seq, Action: s.Action, Selector: s.Selector, Fallbacks: s.Fallbacks, Value: s.Value,
			Param: s.Param, URL: s.URL, OK: ok, Error: stepErr, ErrorKind: s.ErrorKind, HTTPStatus: s.HTTPStatus, Target: s.Target,
			Result: resultString(s.Result), DurationMs: s.DurationMs})
		if s.Sensitive {
			sensitive[i] = true
		}
	}
	if err := e.seal(t, sensitive); err != nil {
		return nil, err
	}
	if len(t.Steps) == 0 && req.Facts.Empty() {
		return nil, fmt.Errorf("%w: nothing to save: give the run's steps in the trace (a run, evidence) or a facts patch with --facts (a lesson); a save with neither is no evidence of anything", ErrInvalid)
	}
	return t, nil
}

// seal checks a trace a caller filled in and completes what the engine
// owns: format, id, normalized URL, domain and pattern, intent key, start
// time, writer and session defaults, step numbers, the failure category
// (classified) and redaction, with sensitive the steps whose typed values
// are secrets. It is the one validation of both the JSON input (BuildTrace)
// and the typed one (SaveTrace).
func (e *Engine) seal(t *Trace, sensitive map[int]bool) error {
	n, err := NormalizeURL(t.URL)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err := CheckHost(n, t.URL); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if !t.Outcome.Valid() {
		return fmt.Errorf("%w: outcome %q: use success or failure", ErrInvalid, t.Outcome)
	}
	intent := strings.TrimSpace(firstNonEmpty(t.Intent, t.TaskType, t.Task))
	if len(intent) > MaxIntent {
		return fmt.Errorf("%w: intent is %d bytes, over the cap of %d", ErrInvalid, len(intent), MaxIntent)
	}
	if strings.ContainsAny(intent, "\x00\r\n") {
		return fmt.Errorf("%w: intent must be one line of text", ErrInvalid)
	}
	now := e.now()
	if t.StartedAt.IsZero() {
		t.StartedAt = now.Truncate(time.Second) // whole seconds keep the YAML readable
	}
	t.StartedAt = t.StartedAt.UTC()
	if t.StartedAt.After(now.Add(24 * time.Hour)) {
		return fmt.Errorf("%w: timestamp %s is in the future", ErrInvalid, t.StartedAt.Format(time.RFC3339))
	}
	id, err := NewTraceID(now, e.Rand)
	if err != nil {
		return fmt.Errorf("making a trace id: %w", err)
	}
	t.Format, t.ID, t.Writer = Format, id, firstNonEmpty(t.Writer, e.Writer)
	t.Intent, t.IntentKey = intent, IntentKey(intent)
	t.URL, t.Domain, t.URLPattern = n.URL, n.Domain, Pattern(n)
	if t.Session == "" {
		t.Session = id
	}
	if t.FailureCategory != "" && !t.FailureCategory.Valid() {
		return fmt.Errorf("%w: failure_category %q is not one of %v", ErrInvalid, t.FailureCategory, FailureCategories)
	}
	if t.FailureCategory == JudgedWrong {
		return fmt.Errorf("%w: failure_category judged_wrong comes only from a verdict: save the run, then pem experience feedback ID --verdict wrong", ErrInvalid)
	}
	if len(t.Approvals) > MaxSteps {
		return fmt.Errorf("%w: %d approvals is over the cap of %d", ErrInvalid, len(t.Approvals), MaxSteps)
	}
	for i := range t.Approvals {
		a := &t.Approvals[i]
		if !ValidDecision(a.Decision) || !IsAction(a.Action) || a.Rule == "" {
			return fmt.Errorf("%w: approvals[%d] needs an action, a rule and a decision (%s, %s or %s)", ErrInvalid, i, Approved, Refused, Unanswered)
		}
		a.Why, a.Note = capString(a.Why, 500), capString(a.Note, 500)
	}
	for i := range t.Steps {
		st := &t.Steps[i]
		if !IsAction(st.Action) {
			return fmt.Errorf("%w: steps[%d].action %q is not one of %s", ErrInvalid, i, st.Action, strings.Join(Actions, ", "))
		}
		if st.Seq == 0 {
			st.Seq = i + 1
		}
		st.Result = capString(st.Result, 4096)
		if st.Action == "navigate" && st.URL == "" && st.Value != "" {
			st.URL, st.Value = st.Value, ""
		}
	}
	if t.Outcome == Failure {
		t.FailureCategory = Classify(t)
	} else {
		t.FailureCategory = ""
	}
	Redact(t, sensitive, e.Secrets)
	return nil
}

// SaveTrace stores a run recorded in process (the agent's) as an immutable
// trace: the typed counterpart of Save for callers that hold an engine.Trace
// rather than the external JSON input. t carries what the run recorded (url,
// intent, task, outcome, steps, result, …); SaveTrace checks it and fills in
// what the engine owns exactly as Save does (id, format, domain, pattern,
// intent key, classification, redaction, with sensitive the indexes of steps
// whose typed values are secrets), then writes it. t is changed in place.
// Errors: ErrInvalid (wrapped) for a trace that cannot be saved, else the
// store's.
func (e *Engine) SaveTrace(ctx context.Context, t *Trace, sensitive map[int]bool) (*SaveResult, error) {
	if len(t.Steps) == 0 {
		return nil, fmt.Errorf("%w: nothing to save: a run that took no step is no evidence of anything", ErrInvalid)
	}
	if err := e.seal(t, sensitive); err != nil {
		return nil, err
	}
	return e.save(ctx, t, nil)
}

// Save stores one run as an immutable trace and, when the request carries a
// facts patch, merges it into the (domain, intent) entry — unless the entry is
// verified, when the patch is refused whole and the trace is still saved. The
// returned confidence and tier already include the new trace.
func (e *Engine) Save(ctx context.Context, req SaveRequest) (*SaveResult, error) {
	t, err := e.BuildTrace(req)
	if err != nil {
		return nil, err
	}
	return e.save(ctx, t, req.Facts)
}

// save writes a sealed trace and applies facts, if any (see Save).
func (e *Engine) save(ctx context.Context, t *Trace, facts *Patch) (*SaveResult, error) {
	if _, err := e.Store.Config(ctx); err != nil {
		return nil, err
	}
	if !facts.Empty() {
		// Take the lock before writing anything: a save that cannot patch its
		// facts writes nothing at all.
		release, err := e.Store.Lock(ctx)
		if err != nil {
			return nil, err
		}
		defer release()
	}
	m := memoOf(t) // kept once the trace is saved: an id that failed to save may name another run
	// Without a facts patch the answer (the entry's confidence and tier
	// with t counted) does not depend on the trace file: t comes from
	// memory and a listing that already shows t skips it. So it is worked
	// out while PutTrace waits for its two fsyncs, instead of after them.
	var early chan recallResult
	if facts.Empty() {
		early = make(chan recallResult, 1)
		go func() {
			r, err := e.savedRecall(ctx, t, m)
			early <- recallResult{r, err}
		}()
	}
	path, err := e.Store.PutTrace(ctx, t)
	if err != nil {
		if early != nil {
			<-early
		}
		return nil, fmt.Errorf("saving trace %s: %w", t.ID, err)
	}
	e.keep(t.ID, m)
	res := &SaveResult{Saved: true, ID: t.ID, Domain: t.Domain, Intent: t.Intent, IntentKey: t.IntentKey,
		Outcome: t.Outcome, TracePath: path, FailureCategory: t.FailureCategory, Lesson: len(t.Steps) == 0,
		Quarantined: m.quarantined}
	if res.Lesson {
		res.Message = "a lesson: the facts patch is applied and the save recorded for provenance; with no steps it is no evidence (neither a success nor a failure)"
	}
	var r *Recall
	if early != nil {
		a := <-early
		r, err = a.r, a.err
	} else {
		if err := e.patchFacts(ctx, t, facts, res); err != nil {
			return res, err
		}
		r, err = e.savedRecall(ctx, t, m)
	}
	if err != nil {
		return res, err
	}
	res.Confidence, res.RetrievalTier = r.Confidence, r.Tier
	if res.FactsStatus == "" && facts != nil {
		res.FactsStatus = r.Status
	}
	return res, nil
}

type recallResult struct {
	r   *Recall
	err error
}

// savedRecall answers for the entry of t, being saved, as a query would:
// its folded evidence, the unfolded runs of its intent and t itself (tm, its
// memo). t and the runs this engine met before come from memory (a save
// reads no trace it has read before, and none of another intent); the rest
// is read once. It does not read t's file, so it may run while t is written.
func (e *Engine) savedRecall(ctx context.Context, t *Trace, tm traceMemo) (*Recall, error) {
	cfg, err := e.Store.Config(ctx)
	if err != nil {
		return nil, err
	}
	en := &entry{key: t.IntentKey, intent: t.Intent}
	var ev []Evidence
	var digest *Digest
	folded := map[string]bool{}
	x, err := e.Store.Experience(ctx, t.Domain, t.IntentKey)
	switch {
	case err == nil:
		ev, digest = x.Evidence, x.Digest
		en.intent = x.Intent
		for i := range x.Evidence {
			folded[x.Evidence[i].Trace] = true
		}
	case !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrCorrupt):
		return nil, err
	}
	f, err := e.Store.Facts(ctx, t.Domain, t.IntentKey)
	switch {
	case err == nil:
		en.facts, en.intent = f, f.Intent
	case !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrCorrupt):
		return nil, err
	}
	var refs []TraceRef
	if ti, ok := e.Store.(TraceIndex); ok {
		refs, err = ti.IntentTraceRefs(ctx, t.Domain, t.IntentKey)
	} else {
		refs, err = e.Store.TraceRefs(ctx, t.Domain)
	}
	if err != nil {
		return nil, err
	}
	for _, ref := range refs {
		if folded[ref.ID] || ref.ID == t.ID {
			continue
		}
		m, ok := e.traceMemo(ref.ID)
		if !ok {
			tr, err := e.Store.Trace(ctx, ref)
			if errors.Is(err, ErrCorrupt) || errors.Is(err, ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, err
			}
			m = e.remember(tr)
		}
		if m.key == t.IntentKey && m.quarantined == "" && !digest.Holds(m.ev.At) {
			ev = append(ev, m.ev)
		}
	}
	if tm.quarantined == "" && !folded[t.ID] && !digest.Holds(tm.ev.At) {
		ev = append(ev, tm.ev)
	}
	en.exp = &Experience{Evidence: ev, Digest: digest}
	return e.recall(en, NormalizedURL{Domain: t.Domain}, MatchExact, cfg.Policy), nil
}

// patchFacts merges p into the entry of t. The caller holds the store's lock.
func (e *Engine) patchFacts(ctx context.Context, t *Trace, p *Patch, res *SaveResult) error {
	if refused, err := screenPatch(&p, res); refused || err != nil {
		return err
	}
	f, err := e.Store.Facts(ctx, t.Domain, t.IntentKey)
	switch {
	case errors.Is(err, ErrNotFound):
		f = &Facts{Format: Format, Domain: t.Domain, Intent: t.Intent, IntentKey: t.IntentKey, TaskType: t.TaskType,
			Status: Hypothesis, Provenance: Provenance{FirstSeen: t.StartedAt}}
		if t.URLPattern != "" {
			f.URLPatterns = []string{t.URLPattern}
		}
	case err != nil:
		return err
	}
	if err := f.Apply(p); err != nil {
		if errors.Is(err, ErrFrozen) {
			res.FactsRejected, res.FactsStatus, res.FactsMessage = true, f.Status, err.Error()
			return nil
		}
		return err
	}
	f.Provenance.Sources = appendUnique(f.Provenance.Sources, "experience_save")
	f.Provenance.Traces = appendUnique(f.Provenance.Traces, t.ID)
	if _, err := e.Store.PutFacts(ctx, f); err != nil {
		return fmt.Errorf("writing facts %s/%s: %w", f.Domain, f.IntentKey, err)
	}
	res.FactsMerged, res.FactsStatus = true, f.Status
	res.FactsMessage = fmt.Sprintf("merged into %s/%s (status %s, revision %s)", f.Domain, f.IntentKey, f.Status, f.Revision)
	return nil
}

// entry is everything known of one (domain, intent key).
type entry struct {
	key      string
	intent   string
	facts    *Facts
	exp      *Experience
	pending  []*Trace // traces not yet folded, oldest first
	patterns []string
	types    []string

	// quarantined: unfolded traces the injection screen flagged ("id: why");
	// they count as no evidence.
	quarantined []string

	// score, when set, is the entry's score at the query's time from its
	// summary (summary.go; a related route's: exp is nil then), and
	// scoreDigest the summary's digest.
	score       *Score
	scoreDigest *Digest
}

// domainEntries gathers a domain's entries from facts, experience and the
// traces consolidation has not folded yet. It reads only that domain's files.
// With only set, it gathers that one intent key and reads nothing of the
// others: the traces of other intents are left out by the store's trace
// index (TraceIndex) when it has one, else by the engine's memo of trace id
// → intent key (traces are immutable, so it never goes stale).
func (e *Engine) domainEntries(ctx context.Context, domain, only string) (map[string]*entry, []string, error) {
	var warnings []string
	want := func(k string) bool { return only == "" || k == only }
	entries := map[string]*entry{}
	get := func(k string) *entry {
		en := entries[k]
		if en == nil {
			en = &entry{key: k}
			entries[k] = en
		}
		return en
	}
	folded := map[string]bool{}
	xkeys, err := e.Store.ExperienceKeys(ctx, domain)
	if err != nil {
		return nil, nil, err
	}
	for _, k := range xkeys {
		if !want(k) {
			continue
		}
		x, err := e.readExperience(ctx, domain, k)
		if err != nil {
			if errors.Is(err, ErrCorrupt) {
				warnings = append(warnings, err.Error())
				continue
			}
			return nil, nil, err
		}
		en := get(k)
		en.exp, en.intent = x, x.Intent
		en.patterns = append(en.patterns, x.URLPatterns()...)
		en.types = append(en.types, x.TaskTypes...)
		for _, ev := range x.Evidence {
			folded[ev.Trace] = true
		}
	}
	fkeys, err := e.Store.FactsKeys(ctx, domain)
	if err != nil {
		return nil, nil, err
	}
	for _, k := range fkeys {
		if !want(k) {
			continue
		}
		f, err := e.Store.Facts(ctx, domain, k)
		if err != nil {
			if errors.Is(err, ErrCorrupt) {
				warnings = append(warnings, err.Error())
				continue
			}
			return nil, nil, err
		}
		en := get(k)
		en.facts, en.intent = f, f.Intent
		en.patterns = append(append([]string{}, f.URLPatterns...), en.patterns...)
		if f.TaskType != "" {
			en.types = append(en.types, f.TaskType)
		}
	}
	var refs []TraceRef
	ti, indexed := e.Store.(TraceIndex)
	if only != "" && indexed {
		refs, err = ti.IntentTraceRefs(ctx, domain, only)
	} else {
		refs, err = e.Store.TraceRefs(ctx, domain)
	}
	if err != nil {
		return nil, nil, err
	}
	for _, ref := range refs {
		if folded[ref.ID] {
			continue
		}
		if only != "" {
			if m, ok := e.traceMemo(ref.ID); ok && m.key != only {
				continue
			}
		}
		t, err := e.Store.Trace(ctx, ref)
		if err != nil {
			if errors.Is(err, ErrCorrupt) || errors.Is(err, ErrNotFound) {
				warnings = append(warnings, err.Error())
				continue
			}
			return nil, nil, err
		}
		e.remember(t)
		if !want(t.IntentKey) {
			continue
		}
		en := get(t.IntentKey)
		if en.intent == "" {
			en.intent = t.Intent
		}
		if why := Injection(t); why != "" {
			en.quarantined = append(en.quarantined, t.ID+": "+why)
			continue
		}
		if en.digest().Holds(t.StartedAt) {
			continue // it may be a run the digest counts: consolidation never folds it either
		}
		en.pending = append(en.pending, t)
		if !contains(en.patterns, t.URLPattern) {
			en.patterns = append(en.patterns, t.URLPattern)
		}
		if t.TaskType != "" && !contains(en.types, t.TaskType) {
			en.types = append(en.types, t.TaskType)
		}
	}
	return entries, warnings, nil
}

// readExperience reads an experience the engine only reads (never
// modifies): the store's shared value when it offers one (SharedExperience),
// else the caller's own copy.
func (e *Engine) readExperience(ctx context.Context, domain, key string) (*Experience, error) {
	if sx, ok := e.Store.(SharedExperience); ok {
		return sx.ExperienceShared(ctx, domain, key)
	}
	return e.Store.Experience(ctx, domain, key)
}

// Query answers what memory holds for a task at url: the domain's entry whose
// intent matches (exact key, then token overlap), ranked by URL-pattern
// specificity. Nothing known: tier P5. It never returns another domain's facts.
//
// With a Store that can tell nothing changed (ChangeWatch), an answer is
// kept and served again while nothing it read changed and its confidence
// has not decayed across what it prints or decides (querymemo.go).
func (e *Engine) Query(ctx context.Context, rawURL, intent string) (*Recall, error) {
	cw, watched := e.Store.(ChangeWatch)
	if !watched || e.kept.first() {
		return e.query(ctx, rawURL, intent, e.now())
	}
	now := e.now()
	key := rawURL + "\x00" + intent
	if a := e.kept.get(key); a != nil && !now.Before(a.from) && now.Before(a.until) {
		if g, ok := cw.Generation(ctx, a.domain); ok && g == a.gen {
			e.kept.count(true)
			return a.r.clone(), nil
		}
	}
	e.kept.count(false)
	n, err := NormalizeURL(rawURL)
	if err != nil {
		return e.query(ctx, rawURL, intent, now) // its error
	}
	g0, ok := cw.Generation(ctx, n.Domain) // before anything is read
	r, err := e.query(ctx, rawURL, intent, now)
	if err != nil || !ok || !r.until.After(now) {
		return r, err
	}
	if g1, ok := cw.Generation(ctx, n.Domain); ok && g1 == g0 {
		e.kept.put(key, &keptAnswer{domain: n.Domain, gen: g0, from: now, until: r.until, r: r.clone()})
	}
	return r, nil
}

// query is Query, computed, with the clock read once (now).
func (e *Engine) query(ctx context.Context, rawURL, intent string, now time.Time) (*Recall, error) {
	n, err := NormalizeURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if len(intent) > MaxIntent {
		return nil, fmt.Errorf("%w: intent is over %d bytes", ErrInvalid, MaxIntent)
	}
	cfg, err := e.Store.Config(ctx)
	if err != nil {
		return nil, err
	}
	// The exact intent first, reading only its own files; the whole domain
	// only when that finds nothing (word overlap needs every intent).
	var entries map[string]*entry
	var warnings []string
	if strings.TrimSpace(intent) != "" {
		entries, warnings, err = e.domainEntries(ctx, n.Domain, IntentKey(intent))
		if err != nil {
			return nil, err
		}
	}
	if len(entries) == 0 {
		entries, warnings, err = e.domainEntries(ctx, n.Domain, "")
		if err != nil {
			return nil, err
		}
	}
	en, why := pick(entries, n, intent)
	if en == nil {
		r := emptyRecall(n.Domain)
		r.Intent = intent
		r.Warnings = append(r.Warnings, warnings...)
		r.until = now.Add(maxKeptLife)                          // nothing decays
		return r, e.addSite(ctx, r, n, intent, cfg.Policy, now) // related.go
	}
	match := MatchExact
	if why != "" {
		// Another task's route is a hint, never something to replay.
		match = MatchOverlap
		if strings.TrimSpace(intent) == "" {
			match = MatchURL
		}
	}
	r := e.recallAt(en, n, match, cfg.Policy, now)
	if why != "" {
		r.Warnings = append(r.Warnings, why+"; tier capped at P3 (hints only)")
	}
	r.Warnings = append(r.Warnings, warnings...)
	return r, e.addSite(ctx, r, n, intent, cfg.Policy, now) // related.go
}

// How a Recall's entry was found.
const (
	MatchExact   = "exact"   // the intent's key
	MatchOverlap = "overlap" // another intent of the domain sharing words: at most P3
	MatchURL     = "url"     // no intent given, matched by URL pattern: at most P3
)

// pick chooses the entry for a query: with an intent, the exact key or else the
// best token overlap ≥ MinIntentOverlap, ties broken by URL specificity; with
// no intent, the most specific URL-pattern match, ties broken by evidence.
func pick(entries map[string]*entry, n NormalizedURL, intent string) (*entry, string) {
	keys := make([]string, 0, len(entries))
	for k := range entries {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	spec := func(en *entry) (Specificity, bool) {
		var best Specificity
		found := false
		for _, p := range en.patterns {
			if s, ok := MatchPattern(p, n); ok && (!found || best.Less(s)) {
				best, found = s, true
			}
		}
		return best, found
	}
	if strings.TrimSpace(intent) != "" {
		if en := entries[IntentKey(intent)]; en != nil {
			return en, ""
		}
		var best *entry
		var bestScore float64
		var bestSpec Specificity
		for _, k := range keys {
			en := entries[k]
			sc := IntentScore(intent, en.intent)
			if sc < MinIntentOverlap {
				continue
			}
			sp, _ := spec(en)
			if best == nil || sc > bestScore || sc == bestScore && bestSpec.Less(sp) {
				best, bestScore, bestSpec = en, sc, sp
			}
		}
		if best == nil {
			return nil, ""
		}
		return best, fmt.Sprintf("intent matched by word overlap (%.2f) with %q, not exactly", bestScore, best.intent)
	}
	var best *entry
	var bestSpec Specificity
	for _, k := range keys {
		en := entries[k]
		sp, ok := spec(en)
		if !ok {
			continue
		}
		if best == nil || bestSpec.Less(sp) || (!sp.Less(bestSpec) && evidenceCount(en) > evidenceCount(best)) {
			best, bestSpec = en, sp
		}
	}
	if best == nil {
		return nil, ""
	}
	return best, "no intent given: matched by URL pattern only"
}

func evidenceCount(en *entry) int {
	n := len(en.pending)
	if en.exp != nil {
		n += len(en.exp.Evidence)
	}
	return n
}

// evidenceRead is evidence for a reader that never modifies it (recall,
// cachedAnswer): with nothing pending, the folded evidence itself, without
// a copy (an experience may be the store's shared value: readExperience).
func (en *entry) evidenceRead() []Evidence {
	if len(en.pending) == 0 && en.exp != nil {
		return en.exp.Evidence[:len(en.exp.Evidence):len(en.exp.Evidence)]
	}
	return en.evidence()
}

// evidence is everything behind an entry's confidence: folded plus pending,
// the caller's own slice.
func (en *entry) evidence() []Evidence {
	var ev []Evidence
	if en.exp != nil {
		ev = append(ev, en.exp.Evidence...)
	}
	for _, t := range en.pending {
		ev = append(ev, EvidenceOf(t))
	}
	return ev
}

// digest is the entry's compacted evidence, if any.
func (en *entry) digest() *Digest {
	if en.exp == nil {
		return nil
	}
	return en.exp.Digest
}

// recall answers for one entry at n (n.Path "" : no URL to check the page
// type against), found by match. The tier comes from DecideTier.
func (e *Engine) recall(en *entry, n NormalizedURL, match string, p Policy) *Recall {
	return e.recallAt(en, n, match, p, e.now())
}

// recallAt is recall with the clock read once by the caller (a query's
// entry and its related routes are scored at one time).
func (e *Engine) recallAt(en *entry, n NormalizedURL, match string, p Policy, now time.Time) *Recall {
	r := emptyRecall(n.Domain)
	r.Intent, r.IntentKey, r.Match = en.intent, en.key, match
	ev := en.evidenceRead()
	var sc Score
	if en.score != nil {
		// From a summary, which holds no evidence newer than now (ScoreAt).
		sc = *en.score
		r.until = stableUntil(nil, en.scoreDigest, now, p, sc)
	} else {
		sc = ScoreOf(ev, en.digest(), now, p)
		r.until = stableUntil(ev, en.digest(), now, p, sc)
	}
	r.SuccessCount, r.FailureCount = sc.Successes, sc.Failures-sc.NoFault
	r.LessonCount, r.ConfirmedCount = sc.Lessons, sc.Confirmed
	if d := en.digest(); d != nil {
		r.AbortedCount += d.ByCategory[Aborted]
		r.PlannerErrorCount += d.ByCategory[PlannerError]
		r.JudgedWrongCount += d.ByCategory[JudgedWrong]
	}
	for _, x := range ev {
		if !x.IsRun() {
			continue
		}
		switch x.Category {
		case Aborted:
			r.AbortedCount++
		case PlannerError:
			r.PlannerErrorCount++
		case JudgedWrong:
			r.JudgedWrongCount++
		}
	}
	r.Confidence = round2(sc.Confidence)
	r.Status = Hypothesis
	var best Specificity
	patterns := dedupe(en.patterns)
	for _, pt := range patterns { // the most specific pattern that matches
		if sp, ok := MatchPattern(pt, n); ok && (r.URLPattern == "" || best.Less(sp)) {
			r.URLPattern, best = pt, sp
		}
	}
	// The page-type guard: served above P3 only on a page type it was learned on.
	basis := TierBasis{Score: sc, Match: match, MatchedIntent: en.intent, Patterns: patterns, PatternOK: true}
	if n.Path != "" {
		basis.QueryPattern = Pattern(n)
		basis.PatternOK = r.URLPattern != "" || len(patterns) == 0
	}
	if r.URLPattern == "" && len(patterns) > 0 {
		r.URLPattern = patterns[0]
	}
	openBlocker := false
	if f := en.facts; f != nil {
		r.Source = "facts"
		r.Status = f.Status
		r.Revision = f.Revision
		for name, s := range f.Selectors {
			r.PrimarySelectors[name] = s.Primary
			if len(s.Fallbacks) > 0 {
				if r.Fallbacks == nil {
					r.Fallbacks = map[string][]string{}
				}
				r.Fallbacks[name] = s.Fallbacks
			}
		}
		r.Steps = append(r.Steps, f.Steps...)
		r.ExtractionQuery = f.ExtractionQuery
		r.SuccessCondition = f.SuccessCondition
		r.KnownBlockers = append(r.KnownBlockers, f.KnownBlockers...)
		r.AntiPatterns = append(r.AntiPatterns, f.AntiPatterns...)
		r.InteractionHints = append(r.InteractionHints, f.InteractionHints...)
		r.Answers = append(r.Answers, f.Answers...)
		// last_verified: when the entry was verified (the facts' own, set
		// on the status change) or, while it stays verified, its latest
		// folded success (the experience's): per-run freshness lives in
		// experience, so the facts file does not move with every run.
		if lv := f.Provenance.LastVerified; !lv.IsZero() {
			if f.Status == Verified && en.exp != nil && en.exp.LastSuccessAt.After(lv) {
				lv = en.exp.LastSuccessAt
			}
			r.LastVerified = &lv
		}
		for _, b := range f.KnownBlockers {
			if FailureCategory(b.Type).IsGate() && b.Action == "" {
				openBlocker = true // a gate nothing is known to get past
			}
		}
	}
	if len(r.Steps) == 0 {
		// Not consolidated yet: the latest successful route on hand.
		for i := len(en.pending) - 1; i >= 0; i-- {
			if t := en.pending[i]; t.Outcome == Success && len(t.Steps) > 0 && Injection(t) == "" {
				r.Steps = append(r.Steps, t.Steps...)
				if r.Source == "" {
					r.Source = "traces"
				}
				for _, s := range t.Steps {
					if s.Selector != "" && s.Action != "navigate" {
						name := s.Action + ":" + s.Selector
						if _, ok := r.PrimarySelectors[name]; !ok && len(r.PrimarySelectors) < 20 {
							r.PrimarySelectors[name] = s.Selector
						}
					}
				}
				break
			}
		}
	}
	if r.Source == "" {
		r.Source = "traces"
	}
	e.observedAnswers(en, r, p) // answers.go: what the runs read
	basis.Status, basis.Revision, basis.OpenBlocker = r.Status, r.Revision, openBlocker
	r.Tier, r.Reasons = DecideTier(basis, p)
	r.basis = &basis
	if !basis.PatternOK {
		// Its route leads to another page type: never replayed here.
		r.Warnings = append(r.Warnings, fmt.Sprintf("pattern_mismatch: the knowledge was learned on %s, not on %s; served as hints (P3 at most) without its route",
			strings.Join(patterns, " "), basis.QueryPattern))
		r.Steps = []Step{}
	}
	if sc.WrongHolds(r.Revision) {
		r.Warnings = append(r.Warnings, fmt.Sprintf("judged_wrong: run %s was judged wrong; capped at P3 until a newer run is judged right or the route changes", sc.OpenWrong))
	}
	if sc.Streak > 0 && r.Status == Verified {
		r.Warnings = append(r.Warnings, fmt.Sprintf("consecutive_failures: the last %d %s failed; %d in a row contest this entry at the next consolidation",
			sc.Streak, plural(sc.Streak, "run", "runs"), p.ContestLastN))
	}
	if sc.OpenGate != "" {
		r.Warnings = append(r.Warnings, fmt.Sprintf("the latest run was stopped by %s: expect it again", sc.OpenGate))
		r.KnownBlockers = MergeBlocker(r.KnownBlockers, Blocker{Type: string(sc.OpenGate), Note: "seen in the latest run"})
	}
	if r.Status == Contested {
		r.Warnings = append(r.Warnings, "contested: recent runs failed with this knowledge; verify everything")
	}
	return r
}

// ListRequest filters and pages experience_list.
type ListRequest struct {
	Filter       string // domain substring
	IntentFilter string // intent substring
	Page         int    // from 1
	PageSize     int    // ≤ 100, default 20
}

// ListEntry is one (domain, intent) in experience_list.
type ListEntry struct {
	Domain        string     `json:"domain"`
	Intent        string     `json:"intent"`
	IntentKey     string     `json:"intent_key"`
	URLPatterns   []string   `json:"url_patterns"`
	TaskTypes     []string   `json:"task_types"`
	Confidence    float64    `json:"confidence"`
	RetrievalTier Tier       `json:"retrieval_tier"`
	Status        Status     `json:"status"`
	LastVerified  *time.Time `json:"last_verified,omitempty"`
	SuccessCount  int        `json:"success_count"`
	FailureCount  int        `json:"failure_count"` // failures that count against the route (no-fault runs excluded)
	// Runs the site is not to blame for (weight 0), lessons (no evidence),
	// runs judged wrong and successes judged right by a verdict.
	AbortedCount      int `json:"aborted_count"`
	PlannerErrorCount int `json:"planner_error_count"`
	LessonCount       int `json:"lesson_count"`
	JudgedWrongCount  int `json:"judged_wrong_count"`
	ConfirmedCount    int `json:"confirmed_count"`
	// Quarantined lists the runs kept out of the evidence because they look
	// like a prompt injection ("<trace id>: <why>").
	Quarantined []string `json:"quarantined,omitempty"`
}

// ListResult is the experience_list answer.
type ListResult struct {
	Total      int         `json:"total"`
	Page       int         `json:"page"`
	PageSize   int         `json:"page_size"`
	TotalPages int         `json:"total_pages"`
	Entries    []ListEntry `json:"entries"`
	Warnings   []string    `json:"warnings,omitempty"`
}

// MaxPageSize caps experience_list pages.
const MaxPageSize = 100

// List returns the known (domain, intent) entries, sorted by domain and
// intent, one page at a time.
func (e *Engine) List(ctx context.Context, req ListRequest) (*ListResult, error) {
	if req.Page == 0 {
		req.Page = 1
	}
	if req.PageSize == 0 {
		req.PageSize = 20
	}
	if req.Page < 1 {
		return nil, fmt.Errorf("%w: page %d: pages start at 1", ErrInvalid, req.Page)
	}
	if req.PageSize < 1 || req.PageSize > MaxPageSize {
		return nil, fmt.Errorf("%w: page size %d: use 1 to %d", ErrInvalid, req.PageSize, MaxPageSize)
	}
	cfg, err := e.Store.Config(ctx)
	if err != nil {
		return nil, err
	}
	domains, err := e.Store.Domains(ctx)
	if err != nil {
		return nil, err
	}
	res := &ListResult{Page: req.Page, PageSize: req.PageSize, Entries: []ListEntry{}}
	df := strings.ToLower(req.Filter)
	itf := strings.ToLower(req.IntentFilter)
	var all []ListEntry
	for _, d := range domains {
		if df != "" && !strings.Contains(d, df) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		entries, warnings, err := e.domainEntries(ctx, d, "")
		if err != nil {
			return nil, err
		}
		res.Warnings = append(res.Warnings, warnings...)
		for _, en := range entries {
			if itf != "" && !strings.Contains(strings.ToLower(en.intent), itf) && !strings.Contains(en.key, itf) {
				continue
			}
			r := e.recall(en, NormalizedURL{Domain: d}, MatchExact, cfg.Policy)
			le := ListEntry{Domain: d, Intent: en.intent, IntentKey: en.key, URLPatterns: dedupe(en.patterns),
				TaskTypes: dedupe(en.types), Confidence: r.Confidence, RetrievalTier: r.Tier, Status: r.Status,
				LastVerified: r.LastVerified, SuccessCount: r.SuccessCount, FailureCount: r.FailureCount,
				AbortedCount: r.AbortedCount, PlannerErrorCount: r.PlannerErrorCount, LessonCount: r.LessonCount,
				JudgedWrongCount: r.JudgedWrongCount, ConfirmedCount: r.ConfirmedCount,
				Quarantined: en.quarantined}
			all = append(all, le)
		}
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].Domain != all[j].Domain {
			return all[i].Domain < all[j].Domain
		}
		return all[i].IntentKey < all[j].IntentKey
	})
	res.Total = len(all)
	res.TotalPages = (len(all) + req.PageSize - 1) / req.PageSize
	lo := (req.Page - 1) * req.PageSize
	if lo < len(all) {
		hi := min(lo+req.PageSize, len(all))
		res.Entries = all[lo:hi]
	}
	return res, nil
}

// Memory renders the "## Memory" section for a task at url (empty when
// nothing is known). maxChars ≤ 0 uses the tree's memory_max_chars.
func (e *Engine) Memory(ctx context.Context, rawURL, intent string, maxChars int) (string, error) {
	r, err := e.Query(ctx, rawURL, intent)
	if err != nil {
		return "", err
	}
	if maxChars <= 0 {
		cfg, err := e.Store.Config(ctx)
		if err != nil {
			return "", err
		}
		maxChars = cfg.Policy.MemoryMaxChars
	}
	return RenderMemory(r, maxChars), nil
}

func dedupe(xs []string) []string {
	out := []string{}
	for _, x := range xs {
		if x != "" && !contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func firstNonEmpty(xs ...string) string {
	for _, x := range xs {
		if strings.TrimSpace(x) != "" {
			return x
		}
	}
	return ""
}

func capString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
