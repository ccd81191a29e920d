package deeplearn

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/gob"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pemdev/pem/engine"

	"golang.org/x/sync/errgroup"
)

// Stamper is what a store offers to tell, without reading a file, whether it
// changed since it was last seen (store.Store implements it). ok false means
// the stamp cannot be trusted (the file changed a moment ago, or cannot be
// stat'ed): the file is read again next time.
type Stamper interface {
	TraceStamp(ref engine.TraceRef) (stamp string, ok bool)
	FactsStamp(domain, key string) (stamp string, ok bool)
	ExperienceStamp(domain, key string) (stamp string, ok bool)
}

// Options tune Learn.
type Options struct {
	// StateDir is where Learn remembers the last run, one file per domain
	// (cmd/pem: pem-deeplearn/ in the git directory, never committed). ""
	// remembers nothing: every file is read, as with Full.
	StateDir string
	// Full reads every file again and mines every entry, ignoring (and then
	// rewriting) what the last run remembered.
	Full bool
	// Encode, when set, encodes each changed proposal's facts into
	// Proposal.Data (cmd/pem: store.Marshal, the bytes the review commit
	// holds). With StateDir the bytes are remembered per entry with a
	// fingerprint of the facts they encode: a proposal whose facts are
	// the same as last run's is not encoded again.
	Encode func(*engine.Facts) ([]byte, error)
}

// Stats says how much work a Learn run did.
type Stats struct {
	Domains    int // domains walked
	Entries    int // entries mined or taken from the last run
	Mined      int // entries whose traces, facts or experience changed (or Full): read and mined
	Reused     int // entries unchanged since the last run: finished from its state, no file read
	TracesRead int // trace files read and decoded
	Encoded    int // proposals encoded (Options.Encode); the rest of the changed ones came from the last run
}

// stateFormat changes whenever domainState, core or output changes shape.
const stateFormat = 2

// output is an entry's encoded proposal as the last run made it: the
// fingerprint of the facts (factsPrint) and their bytes (Options.Encode).
// A state file holds the length of the gob-encoded domainState (a uvarint),
// that encoding, then the gob-encoded map of key → output, each with its own
// encoder: the domainState is encoded before the proposals are finished
// (finishing completes the cores in place, and the state keeps them
// unfinished), and kept byte for byte when only the outputs changed.
type output struct {
	Print string
	Data  []byte
}

// domainState is what Learn remembers of one domain: the intent of every
// trace read (traces are immutable; the stamp catches a rewrite, e.g. by pem
// scrub), and each entry's core with the fingerprint of the files it was
// mined from.
type domainState struct {
	Format  int
	Binary  string // the pem binary that wrote it: new mining rules mean mining again
	Policy  string // the policy it was mined under
	Traces  map[string]traceState
	Entries map[string]entryState

	raw []byte // its encoding, as read (not encoded: unexported)
}

type traceState struct{ Stamp, Key, Intent string }

type entryState struct {
	Print string // fingerprint of the entry's trace, facts and experience files
	Core  core
}

// Learn mines every entry f selects, like MineTree (the same proposals in
// the same order, and the same warnings), with three differences that bound
// its time and memory on a large tree:
//
//   - streaming: one domain's traces at a time per worker, GOMAXPROCS domains
//     in flight, results kept in domain order;
//   - incremental: with opt.StateDir and a store that is a Stamper, it
//     remembers per domain which intent each trace belongs to and each
//     entry's mined core (everything Mine derives but what depends on the
//     clock). An entry none of whose trace, facts or experience files
//     changed since is finished from that core as of now — no file read, the
//     same bytes as mining it — and only new traces are decoded;
//   - opt.Full ignores the state (then rewrites it).
//
// The state is a cache: a missing, unreadable or outdated file (another pem
// binary, another policy) means mining that domain in full.
func Learn(ctx context.Context, st engine.Store, f Filter, now time.Time, opt Options) ([]Proposal, []string, Stats, error) {
	var stats Stats
	cfg, err := st.Config(ctx)
	if err != nil {
		return nil, nil, stats, err
	}
	var domains []string
	if f.Domain != "" {
		d, err := engine.NormalizeDomain(f.Domain)
		if err != nil {
			return nil, nil, stats, fmt.Errorf("%w: --domain %q: %v", engine.ErrInvalid, f.Domain, err)
		}
		domains = []string{d}
	} else if domains, err = st.Domains(ctx); err != nil {
		return nil, nil, stats, err
	}
	want := strings.TrimSpace(f.Intent)
	wantKey := engine.IntentKey(want)
	match := func(key, intent string) bool {
		return want == "" || key == want || key == wantKey || strings.EqualFold(strings.TrimSpace(intent), want)
	}
	stamper, _ := st.(Stamper)
	if opt.StateDir == "" {
		stamper = nil
	}
	l := &learner{st: st, stamper: stamper, opt: opt, match: match, pol: cfg.Policy, policy: policyID(cfg.Policy), now: now}
	if stamper != nil {
		if err := os.MkdirAll(opt.StateDir, 0o755); err != nil {
			return nil, nil, stats, fmt.Errorf("deep-learn state %s: %w (remove it, or run with --full)", opt.StateDir, err)
		}
	}
	results := make([]domainResult, len(domains))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(1, runtime.GOMAXPROCS(0)))
	for i, d := range domains {
		g.Go(func() error {
			r, err := l.domain(gctx, d)
			results[i] = r
			return err
		})
	}
	if err := g.Wait(); err != nil {
		if ctx.Err() != nil {
			return nil, nil, stats, ctx.Err()
		}
		return nil, nil, stats, err
	}
	var out []Proposal
	var warnings []string
	for _, r := range results {
		out = append(out, r.proposals...)
		warnings = append(warnings, r.warnings...)
		stats.Mined += r.stats.Mined
		stats.Reused += r.stats.Reused
		stats.TracesRead += r.stats.TracesRead
		stats.Encoded += r.stats.Encoded
	}
	stats.Domains, stats.Entries = len(domains), len(out)
	return out, warnings, stats, nil
}

type learner struct {
	st      engine.Store
	stamper Stamper
	opt     Options
	match   func(key, intent string) bool
	pol     engine.Policy
	policy  string
	now     time.Time
}

type domainResult struct {
	proposals []Proposal
	warnings  []string
	stats     Stats
}

// domain mines one domain: the same inputs, in the same order, as Walk.
func (l *learner) domain(ctx context.Context, d string) (domainResult, error) {
	var res domainResult
	refs, err := l.st.TraceRefs(ctx, d)
	if err != nil {
		return res, err
	}
	old, oldOuts := l.load(d)
	next := &domainState{Format: stateFormat, Binary: binaryID(), Policy: l.policy, Traces: map[string]traceState{}, Entries: map[string]entryState{}}
	dirty := old == nil

	// Which entry each trace belongs to: remembered, or read now.
	stamps := make([]string, len(refs))
	trusted := make([]bool, len(refs))
	if l.stamper != nil {
		parallel(len(refs), func(i int) { stamps[i], trusted[i] = l.stamper.TraceStamp(refs[i]) })
	}
	keys := make([]string, len(refs))
	intents := make([]string, len(refs))
	var toRead []int
	for i, r := range refs {
		if old != nil && trusted[i] {
			if ts, ok := old.Traces[refID(r)]; ok && ts.Stamp == stamps[i] {
				keys[i], intents[i] = ts.Key, ts.Intent
				next.Traces[refID(r)] = ts
				continue
			}
		}
		toRead = append(toRead, i)
	}
	if old != nil && len(next.Traces) != len(old.Traces) {
		dirty = true // traces expired, or new ones
	}
	decoded := make([]*engine.Trace, len(refs))
	gone := make([]bool, len(refs)) // corrupt, or removed since listed
	readRefs := make([]engine.TraceRef, len(toRead))
	for j, i := range toRead {
		readRefs[j] = refs[i]
	}
	ts, errs := readTraces(ctx, l.st, readRefs)
	res.stats.TracesRead += len(toRead)
	for j, i := range toRead {
		if err := errs[j]; err != nil {
			switch {
			case errors.Is(err, engine.ErrCorrupt):
				res.warnings = append(res.warnings, err.Error())
			case errors.Is(err, engine.ErrNotFound):
			default:
				return res, err
			}
			gone[i] = true
			continue
		}
		decoded[i], keys[i], intents[i] = ts[j], ts[j].IntentKey, ts[j].Intent
		dirty = true
		if trusted[i] {
			next.Traces[refID(refs[i])] = traceState{Stamp: stamps[i], Key: keys[i], Intent: intents[i]}
		}
	}

	// The entries, in key order, with their traces in ref order.
	type entry struct {
		key, intent string
		idx         []int // into refs
		print       string
		core        core
		cached      bool
		cacheable   bool
		warnings    []string
	}
	byKey := map[string]*entry{}
	for i := range refs {
		if gone[i] || !l.match(keys[i], intents[i]) {
			continue
		}
		e := byKey[keys[i]]
		if e == nil {
			e = &entry{key: keys[i], intent: intents[i]}
			byKey[keys[i]] = e
		}
		e.idx = append(e.idx, i)
	}
	sorted := make([]*entry, 0, len(byKey))
	for _, e := range byKey {
		sorted = append(sorted, e)
	}
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].key < sorted[j].key })

	var todo []*entry
	for _, e := range sorted {
		if l.stamper != nil {
			e.print, e.cacheable = l.fingerprint(d, e.key, refs, e.idx, stamps, trusted)
		}
		if old != nil && e.cacheable {
			if es, ok := old.Entries[e.key]; ok && es.Print == e.print {
				e.core, e.cached = es.Core, true
				next.Entries[e.key] = es
				res.stats.Reused++
				continue
			}
		}
		todo = append(todo, e)
	}

	// Mine what changed: the rest of its traces, its facts and experience.
	var more []int
	for _, e := range todo {
		for _, i := range e.idx {
			if decoded[i] == nil {
				more = append(more, i)
			}
		}
	}
	moreRefs := make([]engine.TraceRef, len(more))
	for j, i := range more {
		moreRefs[j] = refs[i]
	}
	ts, errs = readTraces(ctx, l.st, moreRefs)
	res.stats.TracesRead += len(more)
	for j, i := range more {
		if err := errs[j]; err != nil {
			if errors.Is(err, engine.ErrCorrupt) || errors.Is(err, engine.ErrNotFound) {
				// Rewritten or removed since the last run: the next run reads it again.
				gone[i] = true
				delete(next.Traces, refID(refs[i]))
				if errors.Is(err, engine.ErrCorrupt) {
					res.warnings = append(res.warnings, err.Error())
				}
				continue
			}
			return res, err
		}
		decoded[i] = ts[j]
	}
	var mu sync.Mutex
	var ctxErr error
	parallel(len(todo), func(k int) {
		e := todo[k]
		in := Input{Domain: d, Intent: e.intent, IntentKey: e.key, Policy: l.pol, Now: l.now}
		for _, i := range e.idx {
			if !gone[i] {
				in.Traces = append(in.Traces, decoded[i])
			}
		}
		var ferr, xerr error
		in.Facts, ferr = l.st.Facts(ctx, d, e.key)
		in.Experience, xerr = l.st.Experience(ctx, d, e.key)
		e.cacheable = e.cacheable && len(in.Traces) == len(e.idx)
		for _, err := range []error{ferr, xerr} {
			if err != nil && !errors.Is(err, engine.ErrNotFound) {
				if ctx.Err() != nil {
					mu.Lock()
					ctxErr = ctx.Err()
					mu.Unlock()
				}
				e.warnings = append(e.warnings, err.Error())
				e.cacheable = false // the warning must show again next time
			}
		}
		e.core = mineCore(in)
	})
	if ctxErr != nil {
		return res, ctxErr
	}
	res.stats.Mined += len(todo)
	if len(todo) > 0 {
		dirty = true
	}

	// Remember the cores before finishing them (finish completes them in place).
	if l.stamper != nil {
		for _, e := range todo {
			if e.cacheable {
				next.Entries[e.key] = entryState{Print: e.print, Core: e.core}
			}
		}
		if old != nil {
			// Entries this run did not select (--intent) stay as they were.
			for k, es := range old.Entries {
				if _, seen := byKey[k]; !seen && !l.match(k, es.Core.P.Intent) {
					next.Entries[k] = es
				}
			}
			if len(next.Entries) != len(old.Entries) {
				dirty = true
			}
		}
	}
	// The state is encoded now, before finish completes the cores in place
	// — when it changed: else it is the last run's, byte for byte.
	var part1 []byte
	var encErr error
	if l.stamper != nil && dirty {
		var buf bytes.Buffer
		encErr = gob.NewEncoder(&buf).Encode(next)
		part1 = buf.Bytes()
	} else if l.stamper != nil {
		part1 = old.raw
	}
	outs := map[string]output{}
	for _, e := range sorted {
		res.warnings = append(res.warnings, e.warnings...)
		if !e.cached && allGone(e.idx, gone) {
			continue // every trace went away since it was listed: no input left
		}
		p := finish(e.core, l.now, l.pol)
		if p.Changed && l.opt.Encode != nil {
			fp := factsPrint(p.Facts)
			if o, ok := oldOuts[e.key]; ok && o.Print == fp && fp != "" {
				p.Data = o.Data
			} else {
				data, err := l.opt.Encode(p.Facts)
				if err != nil {
					return res, fmt.Errorf("encoding the proposal for %s/%s: %w", d, e.key, err)
				}
				p.Data = data
				res.stats.Encoded++
			}
			if _, kept := next.Entries[e.key]; kept && fp != "" {
				outs[e.key] = output{Print: fp, Data: p.Data}
			}
		}
		res.proposals = append(res.proposals, p)
	}
	if l.stamper != nil {
		for k, o := range oldOuts {
			if _, kept := next.Entries[k]; kept {
				if _, seen := byKey[k]; !seen {
					outs[k] = o // an entry this run did not select (--intent)
				}
			}
		}
		if dirty || !sameOutputs(outs, oldOuts) {
			var part2 bytes.Buffer
			if encErr == nil {
				encErr = gob.NewEncoder(&part2).Encode(outs)
			}
			if err := l.save(d, part1, part2.Bytes(), encErr); err != nil {
				res.warnings = append(res.warnings, err.Error())
			}
		}
	}
	return res, nil
}

// factsPrint fingerprints everything of f an encoding shows (its JSON, which
// is several times cheaper to make than its YAML); "" if it cannot be made.
func factsPrint(f *engine.Facts) string {
	b, err := json.Marshal(f)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func sameOutputs(a, b map[string]output) bool {
	if len(a) != len(b) {
		return false
	}
	for k, o := range a {
		if p, ok := b[k]; !ok || p.Print != o.Print {
			return false
		}
	}
	return true
}

func allGone(idx []int, gone []bool) bool {
	for _, i := range idx {
		if !gone[i] {
			return false
		}
	}
	return true
}

// fingerprint identifies the files an entry is mined from: its traces, in
// order, with their stamps, its facts and its experience. ok is false when a
// stamp cannot be trusted.
func (l *learner) fingerprint(d, key string, refs []engine.TraceRef, idx []int, stamps []string, trusted []bool) (string, bool) {
	h := sha256.New()
	for _, i := range idx {
		if !trusted[i] {
			return "", false
		}
		fmt.Fprintf(h, "t %s %s\n", refID(refs[i]), stamps[i])
	}
	fs, ok1 := l.stamper.FactsStamp(d, key)
	xs, ok2 := l.stamper.ExperienceStamp(d, key)
	if !ok1 || !ok2 {
		return "", false
	}
	fmt.Fprintf(h, "f %s\nx %s\n", fs, xs)
	return hex.EncodeToString(h.Sum(nil)), true
}

func refID(r engine.TraceRef) string { return r.Day + "/" + r.ID }

// statePath is the domain's state file (domains are checked names: no slash).
func (l *learner) statePath(d string) string { return filepath.Join(l.opt.StateDir, d+".gob") }

// load reads the domain's state and the outputs of its last run; nil when
// there is none to trust.
func (l *learner) load(d string) (*domainState, map[string]output) {
	if l.stamper == nil || l.opt.Full {
		return nil, nil
	}
	data, err := os.ReadFile(l.statePath(d))
	if err != nil {
		return nil, nil
	}
	n, k := binary.Uvarint(data)
	if k <= 0 || n > uint64(len(data)-k) {
		return nil, nil
	}
	raw, rest := data[k:k+int(n)], data[k+int(n):]
	var s domainState
	if gob.NewDecoder(bytes.NewReader(raw)).Decode(&s) != nil || s.Format != stateFormat || s.Binary != binaryID() || s.Policy != l.policy {
		return nil, nil
	}
	s.raw = raw
	if s.Traces == nil {
		s.Traces = map[string]traceState{}
	}
	if s.Entries == nil {
		s.Entries = map[string]entryState{}
	}
	var outs map[string]output
	if gob.NewDecoder(bytes.NewReader(rest)).Decode(&outs) != nil {
		outs = nil // only the encodings are lost: they are made again
	}
	return &s, outs
}

// save writes the domain's state (its two encoded parts, or the error
// encoding them gave) atomically. A failure only costs time next run.
func (l *learner) save(d string, part1, part2 []byte, encErr error) error {
	if encErr != nil {
		return fmt.Errorf("deep-learn state of %s not saved: %v (the next run mines the domain in full)", d, encErr)
	}
	tmp, err := os.CreateTemp(l.opt.StateDir, d+".*.tmp")
	if err != nil {
		return fmt.Errorf("deep-learn state of %s not saved: %v (the next run mines the domain in full)", d, err)
	}
	data := binary.AppendUvarint(make([]byte, 0, binary.MaxVarintLen64+len(part1)+len(part2)), uint64(len(part1)))
	data = append(append(data, part1...), part2...)
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), l.statePath(d))
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("deep-learn state of %s not saved: %v (the next run mines the domain in full)", d, err)
	}
	return nil
}

func policyID(p engine.Policy) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%#v", p)))
	return hex.EncodeToString(sum[:])
}

// binaryID identifies the running pem: its build (module version, VCS
// revision) and the executable's size and time, so that a rebuilt binary —
// maybe with other mining rules — does not trust an older state.
var binaryID = sync.OnceValue(func() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %d", runtime.Version(), stateFormat)
	if bi, ok := debug.ReadBuildInfo(); ok {
		b.WriteString(" " + bi.Main.Path + "@" + bi.Main.Version)
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" || s.Key == "vcs.modified" {
				b.WriteString(" " + s.Value)
			}
		}
	}
	if exe, err := os.Executable(); err == nil {
		if fi, err := os.Stat(exe); err == nil {
			fmt.Fprintf(&b, " %d %d", fi.Size(), fi.ModTime().UnixNano())
		}
	}
	return b.String()
})
