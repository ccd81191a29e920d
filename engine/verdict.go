package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// VerdictValue is a judgement of a run.
type VerdictValue string

const (
	Right VerdictValue = "right" // the run's answer was right: a confirmed success
	Wrong VerdictValue = "wrong" // the run's answer was wrong: a judged_wrong failure
)

// Valid reports whether v is right or wrong.
func (v VerdictValue) Valid() bool { return v == Right || v == Wrong }

// Verdict is a human's or a grader's judgement of one run, stored as an
// immutable file beside the traces (verdicts/<domain>/<trace-id>/<judge>.yaml)
// and shared like them. Consolidation folds it into the run's evidence
// (ApplyVerdict); the trace itself is never edited.
type Verdict struct {
	Format    int          `yaml:"format" json:"format"`
	Trace     string       `yaml:"trace" json:"trace"`
	Domain    string       `yaml:"domain" json:"domain"`
	IntentKey string       `yaml:"intent_key" json:"intent_key"`
	Verdict   VerdictValue `yaml:"verdict" json:"verdict"`
	Judge     string       `yaml:"judge" json:"judge"` // one path segment (a slug of who judged)
	Note      string       `yaml:"note,omitempty" json:"note,omitempty"`
	At        time.Time    `yaml:"at" json:"at"`
}

// JudgeKey turns a judge's name into the one path segment its verdict files
// use ("CI grader" → "ci-grader").
func JudgeKey(name string) string {
	name = strings.TrimSpace(name)
	if name == "" {
		return "anonymous"
	}
	if judgeRe.MatchString(name) {
		return name // already a slug: kept as it is
	}
	return IntentKey(name)
}

var judgeRe = LazyRE(`^[a-z0-9][a-z0-9-]{0,47}$`)

// ApplyVerdict folds a verdict into the evidence of its run: wrong turns the
// run into a judged_wrong failure, right into a confirmed success. A verdict
// older than the one already applied changes nothing, so folding the same
// verdicts twice, in any order, gives the same evidence. It reports whether
// e changed.
func ApplyVerdict(e *Evidence, v *Verdict) bool {
	if e.Verdict != "" && (v.At.Before(e.VerdictAt) || v.At.Equal(e.VerdictAt) && v.Judge < e.VerdictBy) {
		return false
	}
	before := *e
	e.Verdict, e.VerdictBy, e.VerdictAt = v.Verdict, v.Judge, v.At.UTC()
	switch v.Verdict {
	case Wrong:
		e.Outcome, e.Category = Failure, JudgedWrong
	case Right:
		e.Outcome, e.Category = Success, ""
	}
	return before != *e
}

// VerdictStore is the part of a Store that keeps verdicts. A Store that does
// not implement it cannot take feedback.
type VerdictStore interface {
	// PutVerdict writes verdicts/<domain>/<trace>/<judge>.yaml once. Returns
	// ErrExists (with the verdict already there) if that judge judged the run before.
	PutVerdict(ctx context.Context, v *Verdict) (string, error)
	// Verdict reads the verdict of judge on a trace. Returns ErrNotFound.
	Verdict(ctx context.Context, domain, trace, judge string) (*Verdict, error)
	// Verdicts lists every verdict of a domain ("" for all), oldest first.
	Verdicts(ctx context.Context, domain string) ([]*Verdict, error)
}

// Errors of feedback.
var (
	ErrUnknownTrace = errors.New("unknown trace")
	ErrContradicts  = errors.New("contradicts an earlier verdict")
)

// FeedbackRequest is one judgement: pem experience feedback, the MCP tool
// experience_feedback, the bench's and demo's graders.
type FeedbackRequest struct {
	Trace   string // trace id
	Verdict string // right or wrong
	Note    string
	Judge   string // who judges; "" is the engine's Writer
}

// FeedbackResult is the answer to a judgement.
type FeedbackResult struct {
	Recorded  bool         `json:"recorded"` // false: the same verdict was already recorded (nothing written)
	Trace     string       `json:"trace"`
	Domain    string       `json:"domain"`
	IntentKey string       `json:"intent_key"`
	Verdict   VerdictValue `json:"verdict"`
	Judge     string       `json:"judge"`
	Path      string       `json:"path,omitempty"`
	Message   string       `json:"message"`
}

// MaxNote caps a verdict's note.
const MaxNote = 2000

// Feedback records a verdict on a run. The trace must exist (on disk, or as
// evidence kept after it expired) and be a run, not a lesson. The same verdict
// from the same judge twice is recorded once; a contradictory one is
// ErrContradicts. Consolidation folds the verdict into the run's evidence.
func (e *Engine) Feedback(ctx context.Context, req FeedbackRequest) (*FeedbackResult, error) {
	vs, ok := e.Store.(VerdictStore)
	if !ok {
		return nil, fmt.Errorf("%w: this store keeps no verdicts", ErrInvalid)
	}
	v := VerdictValue(strings.ToLower(strings.TrimSpace(req.Verdict)))
	if !v.Valid() {
		return nil, fmt.Errorf("%w: verdict %q: use right or wrong", ErrInvalid, req.Verdict)
	}
	id := strings.ToUpper(strings.TrimSpace(req.Trace))
	if !ValidTraceID(id) {
		return nil, fmt.Errorf("%w: %q is not a trace id (26 characters, as printed by pem experience save in \"id\")", ErrInvalid, req.Trace)
	}
	if len(req.Note) > MaxNote || strings.ContainsAny(req.Note, "\x00") {
		return nil, fmt.Errorf("%w: the note is over %d bytes or holds a NUL", ErrInvalid, MaxNote)
	}
	if _, err := e.Store.Config(ctx); err != nil {
		return nil, err
	}
	domain, key, steps, err := e.findRun(ctx, id)
	if err != nil {
		return nil, err
	}
	if steps == 0 {
		return nil, fmt.Errorf("%w: trace %s is a lesson (a save with no steps), not a run: there is nothing to judge", ErrInvalid, id)
	}
	judge := JudgeKey(firstNonEmpty(req.Judge, e.Writer))
	verdict := &Verdict{Format: Format, Trace: id, Domain: domain, IntentKey: key, Verdict: v, Judge: judge,
		Note: strings.TrimSpace(req.Note), At: e.now().Truncate(time.Second)}
	res := &FeedbackResult{Trace: id, Domain: domain, IntentKey: key, Verdict: v, Judge: judge}
	path, err := vs.PutVerdict(ctx, verdict)
	if errors.Is(err, ErrExists) {
		old, rerr := vs.Verdict(ctx, domain, id, judge)
		if rerr != nil {
			return nil, rerr
		}
		if old.Verdict != v {
			return nil, fmt.Errorf("%w: %s judged trace %s %s at %s; a judge gives one verdict per run: judge a newer run, or use another --judge",
				ErrContradicts, judge, id, old.Verdict, old.At.Format(time.RFC3339))
		}
		res.Message = fmt.Sprintf("%s already judged trace %s %s: nothing written", judge, id, v)
		return res, nil
	}
	if err != nil {
		return nil, fmt.Errorf("recording the verdict on %s: %w", id, err)
	}
	res.Recorded, res.Path = true, path
	res.Message = fmt.Sprintf("recorded: trace %s judged %s by %s; the next consolidation folds it into %s/%s", id, v, judge, domain, key)
	return res, nil
}

// findRun finds a trace's entry and step count: on disk, else among the
// evidence of every experience (a trace past its TTL).
func (e *Engine) findRun(ctx context.Context, id string) (domain, key string, steps int, err error) {
	refs, err := e.Store.TraceRefs(ctx, "")
	if err != nil {
		return "", "", 0, err
	}
	for _, ref := range refs {
		if ref.ID != id {
			continue
		}
		t, err := e.Store.Trace(ctx, ref)
		if err != nil {
			return "", "", 0, err
		}
		return t.Domain, t.IntentKey, len(t.Steps), nil
	}
	domains, err := e.Store.Domains(ctx)
	if err != nil {
		return "", "", 0, err
	}
	for _, d := range domains {
		keys, err := e.Store.ExperienceKeys(ctx, d)
		if err != nil {
			return "", "", 0, err
		}
		for _, k := range keys {
			x, err := e.Store.Experience(ctx, d, k)
			if err != nil {
				if errors.Is(err, ErrCorrupt) {
					continue
				}
				return "", "", 0, err
			}
			for _, ev := range x.Evidence {
				if ev.Trace == id {
					return d, k, ev.Steps, nil
				}
			}
		}
	}
	return "", "", 0, fmt.Errorf("%w: no trace %s in this tree (nor its evidence): check the id (pem experience save prints it as \"id\")", ErrUnknownTrace, id)
}
