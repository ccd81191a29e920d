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
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pemdev/pem/engine"

	"golang.org/x/sync/errgroup"
)

// Stamper is what a store offers to tell, without reading a file, whether it
// changed since it was last seen (store.Store implements it). ok false means
// the stamp cannot be trusted (the file changed a moment ago, or cannot be
// stat'ed): the file is read again next time. A directory's stamp
// (TraceDirStamp: traces/<domain>, or one of its day directories) moves when
// an entry is added, removed or renamed in it; a file's, when it is
// rewritten or edited in place.
type Stamper interface {
	TraceStamp(ref engine.TraceRef) (stamp string, ok bool)
	TraceDirStamp(domain, day string) (stamp string, ok bool)
	TraceDays(ctx context.Context, domain string) ([]string, error)
	TraceDayRefs(ctx context.Context, domain, day string) ([]engine.TraceRef, error)
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
	Domains      int // domains walked
	Listed       int // trace directories listed (a domain's, for its days, and each day's): new or changed since the last run
	Entries      int // entries mined or taken from the last run
	Mined        int // entries whose traces, facts or experience changed (or Full): read and mined
	Reused       int // entries unchanged since the last run: finished from its state, no file read
	TracesRead   int // trace files read and decoded
	TracesCached int // traces of re-mined entries taken decoded from the last run (their files unchanged)
	Encoded      int // proposals encoded (Options.Encode); the rest of the changed ones came from the last run
}

// Learn mines every entry f selects, like MineTree (the same proposals in
// the same order, and the same warnings), with three differences that bound
// its time and memory on a large tree:
//
//   - streaming: one domain's traces at a time per worker, GOMAXPROCS domains
//     in flight, results kept in domain order;
//   - incremental: with opt.StateDir and a store that is a Stamper, it
//     remembers per domain the listing of its trace directories (with their
//     stamps: an unchanged directory is not listed again), which intent each
//     trace belongs to, each entry's mined core (everything Mine derives but
//     what depends on the clock) and the entry's traces as decoded. An entry
//     none of whose trace, facts or experience files changed since is
//     finished from that core as of now — no file read, the same bytes as
//     mining it —; an entry that changed is mined again, decoding only its
//     new or changed trace files;
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
		stats.TracesCached += r.stats.TracesCached
		stats.Listed += r.stats.Listed
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

// stateFormat changes whenever the state file's layout, or the shape of
// domainState, core, output or cachedTraces, changes.
const stateFormat = 4

// stateMagic starts a domain's state file (<domain>.state); then come
// three sections, each a uvarint length and its bytes:
//
//  0. the gob-encoded domainState (the listing, the traces' intents, the
//     entries' fingerprints);
//  1. the gob-encoded cores of domainState.Entries, in order, one stream
//     (encoded before the proposals are finished: finishing completes the
//     cores in place, and the state keeps them unfinished);
//  2. the gob-encoded map of key → output (the last run's encodings).
//
// Section 3, the entries' decoded traces — one gob-encoded cachedTraces per
// entry, each with its own encoder, at entryState.T — is the file
// <domain>.traces after tracesMagic: most of the bytes, read only when an
// entry is mined again. A section nothing changed in is written again byte
// for byte.
const (
	stateMagic  = "pem deep-learn state\n"
	tracesMagic = "pem deep-learn traces\n"
)

// domainState is what Learn remembers of one domain.
type domainState struct {
	Format  int
	Binary  string       // the pem binary that wrote it: new mining rules mean mining again
	Policy  string       // the policy it was mined under
	Dir     string       // stamp of traces/<domain> when its days were listed; "" (not trusted): list them again
	Days    []dayStamp   // its day directories, each with its stamp when listed ("": not trusted, list it again)
	Traces  []traceState // the listing (store.TraceRefs), in its order
	Entries []entryState // sorted by key; section 1 holds their cores in this order

	sections   [4][]byte // as read (not encoded: unexported); [3] from tracesPath, when first asked for
	tracesPath string
	readTraces sync.Once
}

// dayStamp is a day directory of the domain with its stamp when listed.
type dayStamp struct{ Day, Stamp string }

// traceState is one listed trace file: its stamp when it was read ("":
// not trusted, or it could not be read: read again) and its intent.
type traceState struct{ Day, ID, Stamp, Key, Intent string }

// entryState is an entry whose core the state holds: the fingerprint of
// the files it was mined from, and where its decoded traces are in
// section 3 (offset, length; length 0: none).
type entryState struct {
	Key   string
	Print string
	T     [2]int
}

// cachedTraces are an entry's traces as decoded when it was last mined,
// each with its file's stamp then (trusted stamps only): mining the entry
// again decodes only the files whose stamps moved, and new ones.
type cachedTraces struct {
	Refs, Stamps []string
	Traces       []*engine.Trace
}

// output is an entry's encoded proposal as the last run made it: the
// fingerprint of the facts (outPrint) and their bytes (Options.Encode).
type output struct {
	Print string
	Data  []byte
	At    [2]int // where Data holds the time of a transition dated as of its run (dateSpan); [0, 0]: none
}

// domain mines one domain: the same inputs, in the same order, as Walk.
func (l *learner) domain(ctx context.Context, d string) (domainResult, error) {
	var res domainResult
	old, oldCores, oldOuts := l.load(d)
	next := &domainState{Format: stateFormat, Binary: binaryID(), Policy: l.policy}
	dirty := old == nil

	// The listing: the remembered one when the domain's directory and each
	// of its day directories kept their stamps, else listed again (stamps
	// first: a file added while listing moves a stamp taken before it).
	refs, prev, err := l.listing(ctx, d, old, next, &res)
	if err != nil {
		return res, err
	}
	if old != nil && prev == nil {
		dirty = true
	}

	// Which entry each trace belongs to: remembered, or read now. Every
	// trace's stamp is taken: an edit in place moves only the file's.
	stamps := make([]string, len(refs))
	trusted := make([]bool, len(refs))
	if l.stamper != nil {
		parallel(len(refs), func(i int) { stamps[i], trusted[i] = l.stamper.TraceStamp(refs[i]) })
	}
	keys := make([]string, len(refs))
	intents := make([]string, len(refs))
	next.Traces = make([]traceState, len(refs))
	var oldByID map[string]int
	if old != nil && prev == nil {
		oldByID = make(map[string]int, len(old.Traces))
		for j, ts := range old.Traces {
			oldByID[ts.Day+"/"+ts.ID] = j
		}
	}
	var toRead []int
	for i, r := range refs {
		next.Traces[i] = traceState{Day: r.Day, ID: r.ID}
		j := -1
		if prev != nil {
			j = prev[i]
		} else if k, ok := oldByID[refID(r)]; ok {
			j = k
		}
		if j >= 0 && trusted[i] {
			if ts := old.Traces[j]; ts.Stamp != "" && ts.Stamp == stamps[i] {
				keys[i], intents[i] = ts.Key, ts.Intent
				next.Traces[i] = ts
				continue
			}
		}
		toRead = append(toRead, i)
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
		dirty = true
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
		if trusted[i] {
			next.Traces[i] = traceState{Day: refs[i].Day, ID: refs[i].ID, Stamp: stamps[i], Key: keys[i], Intent: intents[i]}
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
		blob        []byte // its cachedTraces, encoded (mined now)
		old         int    // reused: its index in old.Entries (its blob is the last run's); else -1
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

	oldEntry := map[string]int{}
	if old != nil {
		for j, es := range old.Entries {
			oldEntry[es.Key] = j
		}
	}
	var todo []*entry
	for _, e := range sorted {
		if l.stamper != nil {
			e.print, e.cacheable = l.fingerprint(d, e.key, refs, e.idx, stamps, trusted)
		}
		e.old = -1
		if j, ok := oldEntry[e.key]; ok && e.cacheable && old.Entries[j].Print == e.print && oldCores != nil {
			e.core, e.cached, e.old = oldCores[j], true, j
			res.stats.Reused++
			continue
		}
		todo = append(todo, e)
	}

	// Mine what changed: the rest of its traces (decoded by the last run
	// when their files did not change, else read), its facts and experience.
	var more []int
	for _, e := range todo {
		var cache map[string]int
		var ct cachedTraces
		if j, ok := oldEntry[e.key]; ok {
			if b := old.blob(j); len(b) > 0 && gob.NewDecoder(bytes.NewReader(b)).Decode(&ct) == nil &&
				len(ct.Refs) == len(ct.Traces) && len(ct.Stamps) == len(ct.Traces) {
				cache = make(map[string]int, len(ct.Refs))
				for k, r := range ct.Refs {
					cache[r] = k
				}
			}
		}
		for _, i := range e.idx {
			if decoded[i] != nil {
				continue
			}
			if k, ok := cache[refID(refs[i])]; ok && trusted[i] && ct.Stamps[k] == stamps[i] && ct.Traces[k] != nil {
				decoded[i] = ct.Traces[k]
				res.stats.TracesCached++
				continue
			}
			more = append(more, i)
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
				next.Traces[i] = traceState{Day: refs[i].Day, ID: refs[i].ID}
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
		var ct cachedTraces
		for _, i := range e.idx {
			if !gone[i] {
				in.Traces = append(in.Traces, decoded[i])
				if trusted[i] {
					ct.Refs, ct.Stamps, ct.Traces = append(ct.Refs, refID(refs[i])), append(ct.Stamps, stamps[i]), append(ct.Traces, decoded[i])
				}
			}
		}
		if l.stamper != nil && len(ct.Traces) > 0 {
			// Encoded before mining, which must not see them changed (it does not change them).
			var buf bytes.Buffer
			if gob.NewEncoder(&buf).Encode(&ct) == nil {
				e.blob = buf.Bytes()
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

	// The entries the state keeps, in key order: those mined or reused now,
	// and those this run did not select (--intent), as they were.
	var keep []*entry
	if l.stamper != nil {
		for _, e := range sorted {
			if e.cached || e.cacheable {
				keep = append(keep, e)
			}
		}
		if old != nil {
			for j, es := range old.Entries {
				if _, seen := byKey[es.Key]; !seen && oldCores != nil && !l.match(es.Key, oldCores[j].P.Intent) {
					keep = append(keep, &entry{key: es.Key, print: es.Print, core: oldCores[j], cached: true, old: j})
				}
			}
			sort.Slice(keep, func(i, j int) bool { return keep[i].key < keep[j].key })
			if len(keep) != len(old.Entries) {
				dirty = true
			}
		}
	}
	// The state is encoded now, before finish completes the cores in place
	// — when it changed: else it is the last run's, byte for byte. The
	// decoded traces (their own file) are written again only when an entry
	// kept was mined now, or one was dropped.
	var sections [4][]byte
	var encErr error
	tracesChanged := old == nil || len(keep) != len(old.Entries)
	for _, e := range keep {
		tracesChanged = tracesChanged || e.old < 0
	}
	if l.stamper != nil && dirty {
		cores := make([]core, len(keep))
		var blobs bytes.Buffer
		for i, e := range keep {
			es := entryState{Key: e.key, Print: e.print}
			switch {
			case !tracesChanged:
				es.T = old.Entries[e.old].T
			case e.old >= 0:
				b := old.blob(e.old)
				es.T = [2]int{blobs.Len(), len(b)}
				blobs.Write(b)
			default:
				es.T = [2]int{blobs.Len(), len(e.blob)}
				blobs.Write(e.blob)
			}
			next.Entries = append(next.Entries, es)
			cores[i] = e.core
		}
		var head, cs bytes.Buffer
		if encErr = gob.NewEncoder(&head).Encode(next); encErr == nil {
			encErr = gob.NewEncoder(&cs).Encode(cores)
		}
		sections[0], sections[1] = head.Bytes(), cs.Bytes()
		if tracesChanged {
			sections[3] = blobs.Bytes()
		}
	} else if l.stamper != nil {
		sections[0], sections[1] = old.sections[0], old.sections[1]
	}
	kept := map[string]bool{}
	for _, e := range keep {
		kept[e.key] = true
	}
	outs := map[string]output{}
	for _, e := range sorted {
		res.warnings = append(res.warnings, e.warnings...)
		if !e.cached && allGone(e.idx, gone) {
			continue // every trace went away since it was listed: no input left
		}
		p := finish(e.core, l.now, l.pol)
		if p.Changed && l.opt.Encode != nil {
			fp, dated := outPrint(e.print, p.Facts, l.now)
			o, ok := oldOuts[e.key]
			if ok && o.Print == fp && fp != "" {
				// The same facts but, when dated, the time of the
				// transition this run adds: that text is replaced.
				if !dated {
					p.Data = o.Data
				} else {
					p.Data = redate(o.Data, o.At, l.now)
				}
			}
			if p.Data == nil {
				data, err := l.opt.Encode(p.Facts)
				if err != nil {
					return res, fmt.Errorf("encoding the proposal for %s/%s: %w", d, e.key, err)
				}
				p.Data = data
				res.stats.Encoded++
				o = output{Print: fp, Data: data}
				if dated {
					o.At = dateSpan(data, l.now)
				}
			}
			if kept[e.key] && fp != "" {
				outs[e.key] = o // as encoded: a re-dated encoding is not remembered again
			}
		}
		res.proposals = append(res.proposals, p)
	}
	if l.stamper != nil {
		for k, o := range oldOuts {
			if _, seen := byKey[k]; kept[k] && !seen {
				outs[k] = o // an entry this run did not select (--intent)
			}
		}
		if dirty || !sameOutputs(outs, oldOuts) {
			if encErr == nil {
				var b bytes.Buffer
				encErr = gob.NewEncoder(&b).Encode(outs)
				sections[2] = b.Bytes()
			}
			if err := l.save(d, sections, dirty && tracesChanged, encErr); err != nil {
				res.warnings = append(res.warnings, err.Error())
			}
		}
	}
	return res, nil
}

// listing returns the domain's trace refs in store.TraceRefs' order, and
// fills next's Dir, Days and the stats. prev[i] is the index in
// old.Traces of refs[i] when the remembered listing is the listing (no
// directory's stamp moved); nil when a directory was listed again. A day
// directory whose stamp did not move keeps its remembered traces; the
// others are listed (stamps first: a file added while listing moves a
// stamp taken before it).
func (l *learner) listing(ctx context.Context, d string, old, next *domainState, res *domainResult) ([]engine.TraceRef, []int, error) {
	if l.stamper == nil {
		refs, err := l.st.TraceRefs(ctx, d)
		return refs, nil, err
	}
	if next.Dir, _ = l.stamper.TraceDirStamp(d, ""); old == nil || next.Dir == "" || next.Dir != old.Dir {
		// The set of day directories may have changed: list it.
		res.stats.Listed++
		days, err := l.stamper.TraceDays(ctx, d)
		if err != nil {
			return nil, nil, err
		}
		next.Days = make([]dayStamp, len(days))
		for i, day := range days {
			next.Days[i].Day = day
		}
	} else {
		next.Days = make([]dayStamp, len(old.Days))
		for i, ds := range old.Days {
			next.Days[i].Day = ds.Day
		}
	}
	parallel(len(next.Days), func(i int) { next.Days[i].Stamp, _ = l.stamper.TraceDirStamp(d, next.Days[i].Day) })
	was := map[string]string{}
	if old != nil {
		for _, ds := range old.Days {
			was[ds.Day] = ds.Stamp
		}
	}
	same := old != nil && next.Dir == old.Dir && len(next.Days) == len(old.Days)
	for _, ds := range next.Days {
		same = same && ds.Stamp != "" && ds.Stamp == was[ds.Day]
	}
	if same {
		refs := make([]engine.TraceRef, len(old.Traces))
		prev := make([]int, len(old.Traces))
		for i, ts := range old.Traces {
			refs[i], prev[i] = engine.TraceRef{Domain: d, Day: ts.Day, ID: ts.ID}, i
		}
		return refs, prev, nil
	}
	kept := map[string][]engine.TraceRef{}
	if old != nil {
		for _, ts := range old.Traces {
			kept[ts.Day] = append(kept[ts.Day], engine.TraceRef{Domain: d, Day: ts.Day, ID: ts.ID})
		}
	}
	lists := make([][]engine.TraceRef, len(next.Days))
	errs := make([]error, len(next.Days))
	var listed sync.Map
	parallel(len(next.Days), func(i int) {
		ds := next.Days[i]
		if ds.Stamp != "" && ds.Stamp == was[ds.Day] {
			lists[i] = kept[ds.Day]
			return
		}
		listed.Store(i, true)
		lists[i], errs[i] = l.stamper.TraceDayRefs(ctx, d, ds.Day)
	})
	var refs []engine.TraceRef
	for i := range lists {
		if errs[i] != nil {
			return nil, nil, errs[i]
		}
		if _, ok := listed.Load(i); ok {
			res.stats.Listed++
		}
		refs = append(refs, lists[i]...)
	}
	sort.Slice(refs, func(i, j int) bool { // store.TraceRefs' order, within one domain
		if refs[i].ID != refs[j].ID {
			return refs[i].ID < refs[j].ID
		}
		return refs[i].Day < refs[j].Day
	})
	return refs, nil, nil
}

// outPrint fingerprints a finished proposal's facts for the output cache.
// An entry with a fingerprint (its input files' stamps: the core is a
// function of them, the binary and the policy, which the state checks) is
// finished into facts that only the status and the history's last
// transition tell apart, so those and the fingerprint are enough; without
// one, it is the facts' JSON (several times cheaper to make than their
// YAML). "" if it cannot be made.
//
// dated says the last transition is dated now — the one finish adds when
// the proposal supersedes its entry or changes its status: its time is
// left out of the fingerprint (only that it is now), so that a run on
// another day with nothing new finds the encoding it made and re-dates it
// (redate) instead of encoding the proposal again. A last transition at
// another time (the current entry's own history) is in the fingerprint.
func outPrint(print string, f *engine.Facts, now time.Time) (fp string, dated bool) {
	if print == "" {
		return factsPrint(f), false
	}
	h := sha256.New()
	io.WriteString(h, print)
	fmt.Fprintf(h, "\x00%s\x00%s\x00%s\x00%d", f.Status, f.Revision, f.Supersedes, len(f.History))
	if n := len(f.History); n > 0 {
		t := f.History[n-1]
		at := strconv.FormatInt(t.At.UnixNano(), 10)
		if dated = t.At.Equal(now); dated {
			at = "now"
		}
		fmt.Fprintf(h, "\x00%s\x00%s\x00%s\x00%s", t.From, t.To, at, t.Reason)
	}
	return "e" + hex.EncodeToString(h.Sum(nil)), dated
}

// dateSpan finds, in data (a proposal's encoding, Options.Encode), the text
// of its last transition's time — the history is the last field of the
// facts, the transition its last item, and only its reason follows —:
// now in UTC as time.RFC3339Nano, the key "at" at the start of a line. It
// returns its offset and length; [0, 0] when not found (another encoder):
// then a run on another day encodes the proposal again.
func dateSpan(data []byte, now time.Time) [2]int {
	ts := now.UTC().Format(time.RFC3339Nano)
	i := bytes.LastIndex(data, []byte("at: "+ts+"\n"))
	if i <= 0 {
		return [2]int{}
	}
	j := i
	for j > 0 && data[j-1] == ' ' {
		j--
	}
	if j == i || j == 0 || data[j-1] != '\n' || bytes.Contains(data[i+4+len(ts):], []byte("\n  - ")) {
		return [2]int{} // not a key at a line's start, or not the last item
	}
	return [2]int{i + 4, len(ts)}
}

// redate is data, an encoding dateSpan found the transition's time in at
// span, with that time replaced by now's; nil when span is not such a
// time of data (a damaged state): then the proposal is encoded again.
func redate(data []byte, span [2]int, now time.Time) []byte {
	at, n := span[0], span[1]
	if n <= 0 || at < 0 || at+n > len(data) {
		return nil
	}
	was := string(data[at : at+n])
	if _, err := time.Parse(time.RFC3339Nano, was); err != nil {
		return nil
	}
	ts := now.UTC().Format(time.RFC3339Nano)
	if ts == was {
		return data
	}
	out := make([]byte, 0, len(data)-n+len(ts))
	out = append(out, data[:at]...)
	out = append(out, ts...)
	return append(out, data[at+n:]...)
}

// factsPrint fingerprints everything of f an encoding shows (its JSON);
// "" if it cannot be made.
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
		io.WriteString(h, "t "+refs[i].Day+"/"+refs[i].ID+" "+stamps[i]+"\n")
	}
	fs, ok1 := l.stamper.FactsStamp(d, key)
	xs, ok2 := l.stamper.ExperienceStamp(d, key)
	if !ok1 || !ok2 {
		return "", false
	}
	io.WriteString(h, "f "+fs+"\nx "+xs+"\n")
	return hex.EncodeToString(h.Sum(nil)), true
}

func refID(r engine.TraceRef) string { return r.Day + "/" + r.ID }

// blob is entry j's encoded cachedTraces (nil: none), from the domain's
// traces file, read the first time one is asked for.
func (s *domainState) blob(j int) []byte {
	s.readTraces.Do(func() {
		data, err := os.ReadFile(s.tracesPath)
		if rest, ok := bytes.CutPrefix(data, []byte(tracesMagic)); err == nil && ok {
			s.sections[3] = rest
		}
	})
	t := s.Entries[j].T
	if t[1] <= 0 || t[0] < 0 || t[0]+t[1] > len(s.sections[3]) {
		return nil
	}
	return s.sections[3][t[0] : t[0]+t[1] : t[0]+t[1]]
}

// statePath is the domain's state file, tracesPath its decoded traces
// (domains are checked names: no slash).
func (l *learner) statePath(d string) string  { return filepath.Join(l.opt.StateDir, d+".state") }
func (l *learner) tracesPath(d string) string { return filepath.Join(l.opt.StateDir, d+".traces") }

// load reads the domain's state, its cores and the outputs of its last
// run; nil when there is none to trust. The cores are nil when they cannot
// be decoded (then every entry is mined again). The decoded traces are
// read when first asked for (blob).
func (l *learner) load(d string) (*domainState, []core, map[string]output) {
	if l.stamper == nil || l.opt.Full {
		return nil, nil, nil
	}
	data, err := os.ReadFile(l.statePath(d))
	if err != nil {
		return nil, nil, nil
	}
	rest, ok := bytes.CutPrefix(data, []byte(stateMagic))
	if !ok {
		return nil, nil, nil
	}
	var sections [4][]byte
	for i := range sections[:3] {
		n, k := binary.Uvarint(rest)
		if k <= 0 || n > uint64(len(rest)-k) {
			return nil, nil, nil
		}
		sections[i], rest = rest[k:k+int(n):k+int(n)], rest[k+int(n):]
	}
	var s domainState
	if gob.NewDecoder(bytes.NewReader(sections[0])).Decode(&s) != nil || s.Format != stateFormat || s.Binary != binaryID() || s.Policy != l.policy {
		return nil, nil, nil
	}
	s.sections, s.tracesPath = sections, l.tracesPath(d)
	var cores []core
	if len(s.Entries) > 0 && (gob.NewDecoder(bytes.NewReader(sections[1])).Decode(&cores) != nil || len(cores) != len(s.Entries)) {
		cores = nil
	}
	var outs map[string]output
	if gob.NewDecoder(bytes.NewReader(sections[2])).Decode(&outs) != nil {
		outs = nil // only the encodings are lost: they are made again
	}
	return &s, cores, outs
}

// save writes the domain's state (its sections, or the error encoding them
// gave) atomically: the decoded traces first when they changed, then the
// state that points into them. A failure only costs time next run. (A
// state whose traces file is another run's is harmless: a decoded trace is
// only ever used for a file of the same name and stamp.)
func (l *learner) save(d string, sections [4][]byte, traces bool, encErr error) error {
	if encErr != nil {
		return fmt.Errorf("deep-learn state of %s not saved: %v (the next run mines the domain in full)", d, encErr)
	}
	if traces {
		if err := writeFile(l.opt.StateDir, l.tracesPath(d), append([]byte(tracesMagic), sections[3]...)); err != nil {
			return fmt.Errorf("deep-learn state of %s not saved: %v (the next run mines the domain in full)", d, err)
		}
	}
	size := len(stateMagic)
	for _, s := range sections[:3] {
		size += binary.MaxVarintLen64 + len(s)
	}
	data := append(make([]byte, 0, size), stateMagic...)
	for _, s := range sections[:3] {
		data = append(binary.AppendUvarint(data, uint64(len(s))), s...)
	}
	if err := writeFile(l.opt.StateDir, l.statePath(d), data); err != nil {
		return fmt.Errorf("deep-learn state of %s not saved: %v (the next run mines the domain in full)", d, err)
	}
	// The format-2 file of the domain, if an older pem left one.
	os.Remove(filepath.Join(l.opt.StateDir, d+".gob"))
	return nil
}

// writeFile replaces path with data (a temporary file in dir, renamed).
func writeFile(dir, path string, data []byte) error {
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
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
	b.WriteString(runtime.Version() + " " + strconv.Itoa(stateFormat))
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
