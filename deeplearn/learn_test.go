package deeplearn

import (
	"bytes"
	"context"
	"encoding/gob"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store"
)

// The state's round trip changes nothing: every fixture case mined, its core
// encoded and decoded the way Learn remembers it, then finished, gives the
// golden proposal and report byte for byte.
func TestCoreRoundTripGolden(t *testing.T) {
	for _, name := range caseNames(t) {
		t.Run(name, func(t *testing.T) {
			in := loadCase(t, name)
			var buf bytes.Buffer
			if err := gob.NewEncoder(&buf).Encode([]core{mineCore(in)}); err != nil {
				t.Fatal(err)
			}
			var cores []core
			if err := gob.NewDecoder(&buf).Decode(&cores); err != nil || len(cores) != 1 {
				t.Fatal(cores, err)
			}
			p := finish(cores[0], in.Now, in.Policy)
			got := marshal(t, p) + "---\n" + Report([]Proposal{p}, in.Now)
			want, err := os.ReadFile(filepath.Join("testdata", name+".golden"))
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("finished from the remembered core, the proposal differs from %s.golden:\n%s", name, got)
			}
		})
	}
}

// fixtureTree writes every fixture case into a tree, each under a domain of
// its own, with its facts and experience. The store's clock runs a minute
// ahead so that the files just written count as settled (stamps trusted).
func fixtureTree(t *testing.T) (*store.Store, int) {
	ctx := context.Background()
	dir := t.TempDir()
	if _, err := store.Init(ctx, dir); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(dir, &store.Options{Now: func() time.Time { return time.Now().Add(time.Minute) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	n := 0
	for _, name := range caseNames(t) {
		in := loadCase(t, name)
		d := strings.ReplaceAll(name, "_", "-") + ".example"
		for _, tr := range in.Traces {
			tr.Domain = d
			if _, err := st.PutTrace(ctx, tr); err != nil {
				t.Fatal(name, err)
			}
		}
		if in.Facts != nil {
			in.Facts.Domain = d
			if _, err := st.PutFacts(ctx, in.Facts); err != nil {
				t.Fatal(name, err)
			}
		}
		if in.Experience != nil {
			in.Experience.Domain = d
			if _, err := st.PutExperience(ctx, in.Experience); err != nil {
				t.Fatal(name, err)
			}
		}
		n++
	}
	return st, n
}

// result is everything a run hands out: each proposal's facts file as pem
// writes it, the report, the warnings.
func result(t *testing.T, ps []Proposal, warnings []string, at time.Time) string {
	var b strings.Builder
	for _, p := range ps {
		data, err := store.Marshal(p.Facts)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "== %s/%s changed=%v\n%s", p.Domain, p.IntentKey, p.Changed, data)
	}
	b.WriteString("== report\n" + Report(ps, at))
	b.WriteString("== warnings\n" + strings.Join(warnings, "\n"))
	return b.String()
}

func full(t *testing.T, st *store.Store, f Filter, at time.Time) string {
	ps, w, err := MineTree(context.Background(), st, f, at)
	if err != nil {
		t.Fatal(err)
	}
	return result(t, ps, w, at)
}

// learn runs Learn with Options.Encode (store.Marshal, what cmd/pem
// passes) and checks that every changed proposal carries the very bytes
// encoding its facts gives now, whether encoded or remembered.
func learn(t *testing.T, st *store.Store, f Filter, at time.Time, opt Options) (string, Stats) {
	t.Helper()
	opt.Encode = func(f *engine.Facts) ([]byte, error) { return store.Marshal(f) }
	ps, w, stats, err := Learn(context.Background(), st, f, at, opt)
	if err != nil {
		t.Fatal(err)
	}
	changed := 0
	for _, p := range ps {
		want, err := store.Marshal(p.Facts)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case p.Changed && !bytes.Equal(p.Data, want):
			t.Fatalf("%s/%s: Data is not the encoding of the proposal's facts:\n%s\n--- want\n%s", p.Domain, p.IntentKey, p.Data, want)
		case !p.Changed && p.Data != nil:
			t.Fatalf("%s/%s: an unchanged proposal carries Data", p.Domain, p.IntentKey)
		}
		if p.Changed {
			changed++
		}
	}
	if stats.Encoded > changed {
		t.Fatalf("encoded %d proposals, but only %d changed", stats.Encoded, changed)
	}
	return result(t, ps, w, at), stats
}

// An incremental run after a full one gives what a full run gives on the
// union, reading only what changed: new traces, an edited facts file, an
// expired trace, a corrupt file, another clock, an --intent filter.
func TestLearnIncrementalEqualsFull(t *testing.T) {
	ctx := context.Background()
	st, entries := fixtureTree(t)
	opt := Options{StateDir: filepath.Join(t.TempDir(), "state")}
	check := func(step string, f Filter, at time.Time, mined, reused int) Stats {
		t.Helper()
		want := full(t, st, f, at)
		got, stats := learn(t, st, f, at, opt)
		if got != want {
			t.Fatalf("%s: Learn differs from the full run:\n--- Learn\n%s\n--- full\n%s", step, got, want)
		}
		if stats.Mined != mined || stats.Reused != reused {
			t.Fatalf("%s: mined %d, reused %d; want %d, %d (%+v)", step, stats.Mined, stats.Reused, mined, reused, stats)
		}
		return stats
	}
	if s := check("first run", Filter{}, now, entries, 0); s.Encoded == 0 {
		t.Fatalf("the first run encoded no proposal: %+v", s)
	}
	if s := check("nothing changed", Filter{}, now, 0, entries); s.TracesRead != 0 || s.Encoded != 0 {
		t.Fatalf("nothing changed, yet %d trace files were read and %d proposals encoded", s.TracesRead, s.Encoded)
	}
	// Another clock: status and history move with it; still no file read
	// (the proposals whose history moved are encoded again: checked in learn).
	check("a month later", Filter{}, now.AddDate(0, 1, 0), 0, entries)
	if s := check("the same month later", Filter{}, now.AddDate(0, 1, 0), 0, entries); s.Encoded != 0 {
		t.Fatalf("nothing changed since the last run, yet %d proposals were encoded", s.Encoded)
	}

	// New traces for two entries.
	refs, err := st.TraceRefs(ctx, "stable-route.example")
	if err != nil || len(refs) == 0 {
		t.Fatal(refs, err)
	}
	tr, err := st.Trace(ctx, refs[len(refs)-1])
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range []string{"stable-route.example", "stable-route.example", "selector-drift.example"} {
		nt := tr.Clone()
		nt.ID = fmt.Sprintf("01JZZZZZZZZZZZZZZZZZZZZZ%02d", i)
		nt.StartedAt = tr.StartedAt.Add(time.Duration(i+1) * time.Hour)
		nt.Domain = d
		if d != tr.Domain {
			other, err := st.TraceRefs(ctx, d)
			if err != nil || len(other) == 0 {
				t.Fatal(other, err)
			}
			o, err := st.Trace(ctx, other[0])
			if err != nil {
				t.Fatal(err)
			}
			nt.Intent, nt.IntentKey = o.Intent, o.IntentKey
		}
		if _, err := st.PutTrace(ctx, nt); err != nil {
			t.Fatal(err)
		}
	}
	s := check("new traces", Filter{}, now, 2, entries-2)
	// Only the new files are decoded: the entries' other traces come from the state.
	if all := countTraces(t, st, "stable-route.example") + countTraces(t, st, "selector-drift.example"); s.TracesRead != 3 || s.TracesCached != all-3 {
		t.Fatalf("read %d trace files and took %d from the state, want the 3 new ones read and the other %d of the two entries taken", s.TracesRead, s.TracesCached, all-3)
	}
	check("again", Filter{}, now, 0, entries)

	// A hand edit of one entry's facts.
	f, err := st.Facts(ctx, "navigate-param.example", loadCase(t, "navigate_param").IntentKey)
	if err != nil {
		f = nil
	}
	if f != nil {
		f.InteractionHints = append(f.InteractionHints, "a reviewer's note")
		if _, err := st.PutFacts(ctx, f); err != nil {
			t.Fatal(err)
		}
		check("facts edited", Filter{}, now, 1, entries-1)
	}

	// An expired trace.
	refs, _ = st.TraceRefs(ctx, "stable-answer.example")
	if err := st.DeleteTrace(ctx, refs[0]); err != nil {
		t.Fatal(err)
	}
	check("trace expired", Filter{}, now, 1, entries-1)

	// A corrupt trace: warned about on every run, like the full run does.
	bad := filepath.Join(st.Root(), "traces", "injection.example", "2026-11-01", "01J99999999999999999999999.yaml")
	if err := os.MkdirAll(filepath.Dir(bad), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("format: 1\nid: [not a string\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	check("corrupt trace", Filter{}, now, 0, entries)
	if s := check("corrupt trace again", Filter{}, now, 0, entries); s.TracesRead != 1 {
		t.Fatalf("read %d trace files, want only the corrupt one", s.TracesRead)
	}

	// --intent: the selected entry only; the others' state is kept.
	key := loadCase(t, "overlay_recovery").IntentKey
	check("one entry", Filter{Domain: "overlay-recovery.example", Intent: key}, now, 0, 1)
	same := 0
	for _, name := range caseNames(t) {
		if loadCase(t, name).IntentKey == key {
			same++
		}
	}
	check("one intent, every domain", Filter{Intent: key}, now, 0, same)
	check("after the filter", Filter{}, now, 0, entries)

	// Full mode mines everything again, with the same bytes.
	got, stats := learn(t, st, Filter{}, now, Options{StateDir: opt.StateDir, Full: true})
	if want := full(t, st, Filter{}, now); got != want || stats.Mined != entries || stats.Reused != 0 {
		t.Fatalf("full mode: mined %d, reused %d; same bytes %v", stats.Mined, stats.Reused, got == want)
	}
	// No state directory: nothing remembered, the same bytes.
	got, stats = learn(t, st, Filter{}, now, Options{})
	if want := full(t, st, Filter{}, now); got != want || stats.Reused != 0 {
		t.Fatalf("without state: reused %d; same bytes %v", stats.Reused, got == want)
	}
	// A damaged state file is ignored (that domain is mined again).
	if err := os.WriteFile(filepath.Join(opt.StateDir, "stable-route.example.state"), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	check("damaged state", Filter{}, now, 1, entries-1)
}

func countTraces(t *testing.T, st *store.Store, d string) int {
	refs, err := st.TraceRefs(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	return len(refs)
}

// Files changed a moment ago are not trusted: they are read again next run.
func TestLearnRacyFilesReadAgain(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if _, err := store.Init(ctx, dir); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(dir, nil) // the real clock: what was just written is racy
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	in := loadCase(t, "stable_route")
	for _, tr := range in.Traces {
		if _, err := st.PutTrace(ctx, tr); err != nil {
			t.Fatal(err)
		}
	}
	opt := Options{StateDir: filepath.Join(t.TempDir(), "state")}
	for i := 0; i < 2; i++ {
		got, stats := learn(t, st, Filter{}, now, opt)
		if want := full(t, st, Filter{}, now); got != want {
			t.Fatalf("run %d differs from the full run", i)
		}
		if stats.Reused != 0 || stats.TracesRead != len(in.Traces) {
			t.Fatalf("run %d: reused %d, read %d traces; racy files must be read again", i, stats.Reused, stats.TracesRead)
		}
	}
}

var _ Stamper = (*store.Store)(nil)

func TestLearnNeedsAStamper(t *testing.T) {
	// engine.Store without stamps: Learn still mines, remembering nothing.
	st, entries := fixtureTree(t)
	var plain engine.Store = struct{ engine.Store }{st}
	ps, _, stats, err := Learn(context.Background(), plain, Filter{}, now, Options{StateDir: t.TempDir()})
	if err != nil || len(ps) != entries || stats.Reused != 0 || stats.Mined != entries {
		t.Fatalf("%d proposals, %+v, %v", len(ps), stats, err)
	}
}

// deeplearn's expressions are compiled on first use: they must all compile.
func TestLazyRegexps(t *testing.T) {
	if _, err := engine.AllLazyCompile(); err != nil {
		t.Fatal(err)
	}
}

// The skip rules of the listing and of the trace cache, each with a change
// it must not miss: a trace edited in place (no directory's stamp moves,
// only the file's), a trace added to a day directory that is there already
// (the domain directory's stamp does not move), a day directory that
// expired whole, and a re-mined entry whose other traces come from the
// state's decoding.
func TestLearnSkipRules(t *testing.T) {
	ctx := context.Background()
	st, entries := fixtureTree(t)
	opt := Options{StateDir: filepath.Join(t.TempDir(), "state")}
	check := func(step string, mined, listed int) Stats {
		t.Helper()
		want := full(t, st, Filter{}, now)
		got, stats := learn(t, st, Filter{}, now, opt)
		if got != want {
			t.Fatalf("%s: Learn differs from the full run:\n--- Learn\n%s\n--- full\n%s", step, got, want)
		}
		if stats.Mined != mined || stats.Reused != entries-mined || listed >= 0 && stats.Listed != listed {
			t.Fatalf("%s: mined %d, reused %d, listed %d directories; want %d, %d, %d (%+v)", step, stats.Mined, stats.Reused, stats.Listed, mined, entries-mined, listed, stats)
		}
		return stats
	}
	check("first run", entries, -1)
	if s := check("nothing changed", 0, 0); s.TracesRead != 0 {
		t.Fatalf("nothing changed, yet %d trace files were read", s.TracesRead)
	}

	// An edit in place: a success becomes a failure, in the same file.
	d := "stable-route.example"
	refs, err := st.TraceRefs(ctx, d)
	if err != nil || len(refs) < 2 {
		t.Fatal(refs, err)
	}
	p := filepath.Join(st.Root(), filepath.FromSlash(store.TracePath(refs[0])))
	data, err := os.ReadFile(p)
	if err != nil || !bytes.Contains(data, []byte("outcome: success")) {
		t.Fatalf("%s: %v\n%s", p, err, data)
	}
	before, _ := os.Stat(filepath.Dir(p))
	if err := os.WriteFile(p, bytes.Replace(data, []byte("outcome: success"), []byte("outcome: failure"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.Stat(filepath.Dir(p)); !after.ModTime().Equal(before.ModTime()) {
		t.Fatal("the edit in place moved its directory's time: the test would not test the file stamps")
	}
	if s := check("edited in place", 1, 0); s.TracesRead != 1 || s.TracesCached != len(refs)-1 {
		t.Fatalf("edited in place: read %d trace files, took %d from the state; want 1 and %d", s.TracesRead, s.TracesCached, len(refs)-1)
	}

	// A trace added to a day directory the domain has already.
	tr, err := st.Trace(ctx, refs[1])
	if err != nil {
		t.Fatal(err)
	}
	nt := tr.Clone()
	nt.ID = "01JZZZZZZZZZZZZZZZZZZZZZAA"
	if _, err := st.PutTrace(ctx, nt); err != nil {
		t.Fatal(err)
	}
	if store.RefOf(nt).Day != refs[1].Day {
		t.Fatal("the new trace is in another day directory")
	}
	if s := check("a trace added to an existing day", 1, 1); s.TracesRead != 1 { // that day's directory only
		t.Fatalf("read %d trace files, want the new one", s.TracesRead)
	}

	// A whole day directory expired (the domain's directory changes).
	var day string
	ds, err := st.Domains(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, d = range ds {
		if refs, err = st.TraceRefs(ctx, d); err != nil {
			t.Fatal(err)
		}
		if len(refs) > 1 && refs[0].Day != refs[len(refs)-1].Day && d != "stable-route.example" {
			day = refs[0].Day
			break
		}
	}
	if day == "" {
		t.Fatal("no fixture domain has traces on two days")
	}
	for _, r := range refs {
		if r.Day == day {
			if err := st.DeleteTrace(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
	}
	os.Remove(filepath.Join(st.Root(), "traces", d, day)) // gone with its last trace, or now
	if _, err := os.Stat(filepath.Join(st.Root(), "traces", d, day)); !os.IsNotExist(err) {
		t.Fatalf("the day directory is still there: %v", err)
	}
	check("a day expired", 1, 1) // the domain's directory, for its days; the other days are not listed
	check("again", 0, 0)

	// The decoded traces are read only for an entry mined again; lost, they
	// cost decoding the files again, nothing else.
	if err := os.Remove(filepath.Join(opt.StateDir, "stable-route.example.traces")); err != nil {
		t.Fatal(err)
	}
	check("decoded traces lost, nothing changed", 0, 0)
	nt = tr.Clone()
	nt.ID = "01JZZZZZZZZZZZZZZZZZZZZZAB"
	if _, err := st.PutTrace(ctx, nt); err != nil {
		t.Fatal(err)
	}
	if s, all := check("decoded traces lost, a new trace", 1, 1), countTraces(t, st, "stable-route.example"); s.TracesRead != all || s.TracesCached != 0 {
		t.Fatalf("read %d trace files, took %d decoded; want all %d read", s.TracesRead, s.TracesCached, all)
	}

	// A listing merged from remembered days and one listed again is
	// TraceRefs' listing, in its order: here a trace whose id sorts first
	// lands in a new day directory after the domain's others.
	d = "stable-route.example"
	refs, err = st.TraceRefs(ctx, d)
	if err != nil || len(refs) < 2 {
		t.Fatal(refs, err)
	}
	last := refs[len(refs)-1]
	data, err = os.ReadFile(filepath.Join(st.Root(), filepath.FromSlash(store.TracePath(last))))
	if err != nil {
		t.Fatal(err)
	}
	first := "01A00000000000000000000000"
	p = filepath.Join(st.Root(), "traces", d, "2099-12-31", first+".yaml")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, bytes.Replace(data, []byte(last.ID), []byte(first), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	l := &learner{st: st, stamper: st, opt: opt, policy: policyID(mustConfig(t, st).Policy)}
	old, _, _ := l.load(d)
	if old == nil {
		t.Fatal("no state remembered for", d)
	}
	var res domainResult
	got, prev, err := l.listing(ctx, d, old, &domainState{}, &res)
	want, err2 := st.TraceRefs(ctx, d)
	if err != nil || err2 != nil || prev != nil || res.stats.Listed != 2 || fmt.Sprint(got) != fmt.Sprint(want) || got[0].ID != first {
		t.Fatalf("merged listing (listed %d, %v, %v):\n%v\nTraceRefs:\n%v", res.stats.Listed, err, err2, got, want)
	}
}

func mustConfig(t *testing.T, st *store.Store) engine.Config {
	cfg, err := st.Config(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// A run on another day with nothing new: a changed proposal that differs
// from the last run's only in the time of the transition finish dates now
// (it supersedes its entry, or changes its status) is that encoding with
// the time replaced, not encoded again — and carries exactly the bytes an
// encoding gives (learn checks every Data against store.Marshal). Every
// other changed proposal is encoded. The clock moves forward and back, to
// times whose text is longer (nanoseconds) and shorter.
func TestLearnRedated(t *testing.T) {
	st, entries := fixtureTree(t)
	opt := Options{StateDir: filepath.Join(t.TempDir(), "state")}
	type shape struct {
		status, revision, supersedes, from, to, reason string
		n                                              int
		dated                                          bool
	}
	shapes := func(ps []Proposal, at time.Time) map[string]shape {
		m := map[string]shape{}
		for _, p := range ps {
			if !p.Changed {
				continue
			}
			f := p.Facts
			s := shape{status: string(f.Status), revision: f.Revision, supersedes: f.Supersedes, n: len(f.History)}
			if len(f.History) > 0 {
				tr := f.History[len(f.History)-1]
				s.from, s.to, s.reason, s.dated = string(tr.From), string(tr.To), tr.Reason, tr.At.Equal(at)
			}
			m[p.Domain+"/"+p.IntentKey] = s
		}
		return m
	}
	run := func(at time.Time) (map[string]shape, Stats) {
		t.Helper()
		got, stats := learn(t, st, Filter{}, at, opt)
		if want := full(t, st, Filter{}, at); got != want {
			t.Fatalf("%v: Learn differs from the full run:\n--- Learn\n%s\n--- full\n%s", at, got, want)
		}
		ps, _, _, err := Learn(context.Background(), st, Filter{}, at, Options{})
		if err != nil {
			t.Fatal(err)
		}
		return shapes(ps, at), stats
	}
	last, _ := run(now)
	dated := 0
	for _, s := range last {
		if s.dated {
			dated++
		}
	}
	if dated == 0 {
		t.Fatal("no proposal of the fixture adds a transition dated now: the test tests nothing")
	}
	for _, at := range []time.Time{
		now.Add(24 * time.Hour),
		now.Add(48*time.Hour + 123456789),
		now.Add(72*time.Hour + 5),
		now.Add(24 * time.Hour), // back: shorter text again
		now.AddDate(0, 2, 0),    // statuses decay
	} {
		cur, stats := run(at)
		want := 0 // the changed proposals whose facts moved beyond the dated transition's time
		for k, s := range cur {
			if last[k] != s {
				want++
			}
		}
		if stats.Mined != 0 || stats.Reused != entries || stats.TracesRead != 0 {
			t.Fatalf("%v: nothing new, yet %+v", at, stats)
		}
		if stats.Encoded != want {
			t.Fatalf("%v: %d proposals encoded, want %d (%d changed, %d dated the day before)", at, stats.Encoded, want, len(cur), dated)
		}
		last = cur
	}
}

// dateSpan finds only the last transition's time, as the key of a line.
func TestDateSpan(t *testing.T) {
	at := time.Date(2026, 12, 2, 9, 0, 0, 120, time.UTC)
	ts := at.Format(time.RFC3339Nano)
	f := &engine.Facts{Format: engine.Format, Domain: "a.example", Intent: "x", IntentKey: "x", Status: engine.Candidate,
		Answers: []engine.Answer{{Value: "v", ObservedAt: at}},
		History: []engine.Transition{{From: engine.Hypothesis, To: engine.Candidate, At: at, Reason: "r"}}}
	data, err := store.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	span := dateSpan(data, at)
	if span[1] != len(ts) || string(data[span[0]:span[0]+span[1]]) != ts || bytes.LastIndex(data, []byte(ts)) != span[0] {
		t.Fatalf("span %v of\n%s", span, data)
	}
	later := at.Add(36 * time.Hour)
	f.History[0].At = later
	want, _ := store.Marshal(f)
	if got := redate(data, span, later); !bytes.Equal(got, want) {
		t.Fatalf("redated:\n%s\nwant\n%s", got, want)
	}
	if redate(data, [2]int{span[0] - 1, span[1]}, later) != nil || redate(data, [2]int{0, len(data) + 1}, later) != nil {
		t.Fatal("redate replaced text that is not a time")
	}
	// Not the last item of the history, or only the answer's time: not found.
	f.History = append(f.History, engine.Transition{From: engine.Candidate, To: engine.Hypothesis, At: at.Add(time.Hour), Reason: "r2"})
	f.History[0].At = at
	data, _ = store.Marshal(f)
	if span := dateSpan(data, at); span != [2]int{} {
		t.Fatalf("found %v: a transition before the last, or observed_at\n%s", span, data)
	}
	f.History = nil
	data, _ = store.Marshal(f)
	if span := dateSpan(data, at); span != [2]int{} {
		t.Fatalf("found %v in a facts without history\n%s", span, data)
	}
}
