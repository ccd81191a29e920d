package store

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/pemdev/pem/engine"
)

// This file is the store's half of the review commands, which compare
// versions of the tree's files that git holds (pem merge-driver, pem diff,
// pem check's history audit): where a path sits in the layout, and decoding
// the versions before engine's rules (MergeExperience, MergeFacts,
// DiffEntry, CheckFrozenChange) decide. The versions come as bytes from
// store/gitrepo, or as the files git hands a merge driver.

// Place is where a file sits in the layout (relative path, forward slashes).
type Place struct {
	Top    string // the top-level directory of the layout it is under (TracesDir, ExperienceDir, FactsDir), or ""
	Kind   string // KindTrace, KindExperience, KindFacts, KindSite, KindConfig where the layout puts one; else ""
	Domain string
	Key    string          // experience and facts: the intent key
	Ref    engine.TraceRef // traces
}

// PlaceOf tells where rel sits. It checks the shape, not the names (Check
// does): a file of no kind, or at the wrong depth, has Kind "".
func PlaceOf(rel string) Place {
	parts := strings.Split(rel, "/")
	var p Place
	switch parts[0] {
	case tracesDir, experienceDir, factsDir:
		if len(parts) > 1 {
			p.Top = parts[0]
		}
	case configFile:
		if len(parts) == 1 {
			p.Kind = KindConfig
		}
	}
	switch {
	case p.Top == tracesDir && len(parts) == 4:
		p.Kind, p.Domain = KindTrace, parts[1]
		p.Ref = engine.TraceRef{Domain: parts[1], Day: parts[2], ID: strings.TrimSuffix(parts[3], yamlExt)}
	case p.Top == factsDir && len(parts) == 3 && parts[2] == siteFile:
		p.Kind, p.Domain = KindSite, parts[1] // the domain's site entry: no intent key
	case p.Top != "" && p.Top != tracesDir && len(parts) == 3 && strings.HasSuffix(parts[2], yamlExt):
		p.Kind = KindFacts
		if p.Top == experienceDir {
			p.Kind = KindExperience
		}
		p.Domain, p.Key = parts[1], strings.TrimSuffix(parts[2], yamlExt)
	}
	return p
}

// ---- pem merge-driver --------------------------------------------------

// MergeFiles is the merge driver: it reads the three versions git hands it
// (ancestor, ours, theirs: %O %A %B; an empty ancestor means none) and
// returns the merged file, canonical. where is the file's path (%P, "" when
// unknown): it tells an experience file from a facts file, else their
// content does, and it locates the tree whose traces settle evidence that
// differs between the sides (read through the store, as every tree file is).
func MergeFiles(ctx context.Context, baseFile, oursFile, theirsFile, where string) ([]byte, error) {
	var data [3][]byte
	for i, name := range []string{baseFile, oursFile, theirsFile} {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		data[i], err = io.ReadAll(io.LimitReader(f, MaxExperienceBytes+1))
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", name, err)
		}
	}
	kind := mergeKind(where, data[1])
	lookup, done := traceLookup(ctx, where)
	defer done()
	opt := &engine.MergeOptions{Trace: lookup}
	switch kind {
	case KindExperience:
		return mergeKindOf(data, kind, opt, engine.MergeExperience)
	case KindFacts:
		return mergeKindOf(data, kind, opt, engine.MergeFacts)
	case KindSite:
		// A join: the ancestor is not needed (engine.MergeSite).
		return mergeKindOf(data, kind, opt, func(_, ours, theirs *engine.Site, _ *engine.MergeOptions) (*engine.Site, error) {
			return engine.MergeSite(ours, theirs)
		})
	}
	return nil, fmt.Errorf("not an %s/ or %s/ file: pem merges only those", experienceDir, factsDir)
}

// mergeKind tells an experience file from a facts file by its path, or by
// its content when git gave no path.
func mergeKind(where string, data []byte) string {
	p := "/" + filepath.ToSlash(where)
	switch {
	case strings.Contains(p, "/"+factsDir+"/") && strings.HasSuffix(p, "/"+siteFile):
		return KindSite
	case strings.Contains(p, "/"+experienceDir+"/"):
		return KindExperience
	case strings.Contains(p, "/"+factsDir+"/"):
		return KindFacts
	}
	var x engine.Experience
	if Unmarshal(data, &x, KindExperience) == nil {
		return KindExperience
	}
	var f engine.Facts
	if Unmarshal(data, &f, KindFacts) == nil {
		return KindFacts
	}
	return ""
}

// traceLookup reads the trace behind a piece of evidence from the working
// tree, which git's merge runs in, through the store (its caps, strict
// decoding and confinement): the knowledge tree is the part of where before
// experience/. The lookup is nil when where names no experience file or no
// tree is there; done releases the store.
func traceLookup(ctx context.Context, where string) (lookup func(engine.Evidence) (*engine.Trace, bool), done func()) {
	p := filepath.ToSlash(where)
	i := strings.LastIndex("/"+p, "/"+experienceDir+"/")
	if where == "" || i < 0 {
		return nil, func() {}
	}
	root := strings.TrimSuffix(p[:i], "/")
	if root == "" {
		root = "."
	}
	s, err := Open(filepath.FromSlash(root), nil)
	if err != nil {
		return nil, func() {}
	}
	dom, _, _ := strings.Cut(strings.TrimPrefix(p[i:], experienceDir+"/"), "/")
	return func(e engine.Evidence) (*engine.Trace, bool) {
		t, err := s.Trace(ctx, engine.TraceRef{Domain: dom, Day: e.At.UTC().Format(dayLayout), ID: e.Trace})
		if err != nil || t.ID != e.Trace {
			return nil, false
		}
		return t, true
	}, func() { s.Close() }
}

// mergeKindOf decodes ancestor, ours and theirs (an empty ancestor means
// none), merges them with merge and encodes the result canonically.
func mergeKindOf[T any](data [3][]byte, kind string, opt *engine.MergeOptions,
	merge func(base, ours, theirs *T, opt *engine.MergeOptions) (*T, error)) ([]byte, error) {
	var v [3]T
	var has [3]bool
	for i, side := range []string{"ancestor", "our", "their"} {
		if len(bytes.TrimSpace(data[i])) == 0 {
			if i > 0 {
				return nil, fmt.Errorf("%s version is empty", side)
			}
			continue // no common ancestor: git passes an empty file
		}
		if err := Unmarshal(data[i], &v[i], kind); err != nil {
			return nil, fmt.Errorf("%s version: %w", side, err)
		}
		has[i] = true
	}
	base := &v[0]
	if !has[0] {
		base = nil
	}
	m, err := merge(base, &v[1], &v[2], opt)
	if err != nil {
		return nil, err
	}
	return Marshal(m)
}

// ---- pem diff ----------------------------------------------------------

// Change is a file that differs between two versions of the tree, with the
// bytes of both versions when they were read (nil: absent or not read).
type Change struct {
	Path     string
	From, To string // blob hashes; "" when the version is absent
	Old, New []byte
}

// DiffLimit is the cap Diff wants a changed file's versions read at: its
// kind's cap for facts and experience entries, 0 (not read) for the rest.
func DiffLimit(rel string) int {
	switch k := PlaceOf(rel).Kind; k {
	case KindFacts, KindExperience:
		return MaxBytes(k)
	}
	return 0
}

// Diff builds pem diff's report between two versions of the tree, labelled
// from and to, out of the files that changed (facts and experience read at
// DiffLimit). factsAt reads a facts file in the newer version, with its blob
// hash ("" when absent), for entries where only the experience moved; Diff also reads the
// newer version's .gitignore with it. A version that does not decode is listed in the
// report's problems.
//
// When the newer version keeps traces and experience off the branch (its .gitignore has
// StateIgnore's lines: they live on refs/pem/state), a trace or experience file the branch
// stopped tracking was moved there, not expired or lost: it is counted as moved, and a moved
// experience file is no entry change.
func Diff(from, to string, changes []Change, factsAt func(rel string) (data []byte, hash string, err error)) *engine.DiffReport {
	rep := &engine.DiffReport{From: from, To: to, Entries: []engine.EntryDiff{}, Traces: []engine.TraceDelta{}}
	offBranch := false
	if data, hash, err := factsAt(".gitignore"); err == nil && hash != "" {
		offBranch = ignoresState(data)
	}
	type pair struct{ facts, exp *Change }
	entries := map[[2]string]*pair{}
	traces := map[string]*engine.TraceDelta{}
	for i := range changes {
		ch := &changes[i]
		pl := PlaceOf(ch.Path)
		switch pl.Kind {
		case KindTrace:
			td := traces[pl.Domain]
			if td == nil {
				td = &engine.TraceDelta{Domain: pl.Domain}
				traces[pl.Domain] = td
			}
			switch {
			case ch.From == "":
				td.Added++
			case ch.To == "" && offBranch:
				td.Moved++
			case ch.To == "":
				td.Removed++
			}
		case KindSite:
			// Not an entry: the site entry is derived from the entries'
			// runs, and pem diff reports entries and traces.
		case KindFacts, KindExperience:
			if pl.Kind == KindExperience && ch.To == "" && offBranch {
				rep.MovedExperience++
				continue
			}
			k := [2]string{pl.Domain, pl.Key}
			if entries[k] == nil {
				entries[k] = &pair{}
			}
			if pl.Kind == KindFacts {
				entries[k].facts = ch
			} else {
				entries[k].exp = ch
			}
		}
	}
	decode := func(rel, hash string, data []byte, v any, kind string) bool {
		if hash == "" {
			return false
		}
		if err := Unmarshal(data, v, kind); err != nil {
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s at %s: %v", rel, hash[:min(10, len(hash))], err))
			return false
		}
		return true
	}
	facts := func(rel, hash string, data []byte) *engine.Facts {
		var f engine.Facts
		if !decode(rel, hash, data, &f, KindFacts) {
			return nil
		}
		return &f
	}
	exp := func(rel, hash string, data []byte) *engine.Experience {
		var x engine.Experience
		if !decode(rel, hash, data, &x, KindExperience) {
			return nil
		}
		return &x
	}
	for k, p := range entries {
		var oldF, newF *engine.Facts
		var oldX, newX *engine.Experience
		if p.facts != nil {
			oldF, newF = facts(p.facts.Path, p.facts.From, p.facts.Old), facts(p.facts.Path, p.facts.To, p.facts.New)
		} else {
			rel := FactsPath(k[0], k[1])
			// Only experience moved: the facts are the same on both sides.
			if data, hash, err := factsAt(rel); err == nil && hash != "" {
				oldF = facts(rel, hash, data)
				newF = oldF
			}
		}
		if p.exp != nil {
			oldX, newX = exp(p.exp.Path, p.exp.From, p.exp.Old), exp(p.exp.Path, p.exp.To, p.exp.New)
		}
		d := engine.DiffEntry(oldF, newF, oldX, newX)
		if d.Domain == "" {
			d.Domain, d.IntentKey = k[0], k[1]
		}
		if !d.Empty() {
			rep.Entries = append(rep.Entries, d)
		}
	}
	for _, td := range traces {
		rep.Traces = append(rep.Traces, *td)
	}
	rep.Sort()
	return rep
}

// ---- pem check: the frozen-content audit ----------------------------------

// CheckFrozen applies engine.CheckFrozenChange to one change of the facts
// file rel made by commit: old is the version before (nil: the file is new),
// readNew reads the version after (nil: deleted) and is called only when the
// old version is verified (decided on the parsed status, after a sound
// pre-filter on the bytes: MayHoldScalar). A version that does not decode is
// the schema check's business, not a frozen problem.
func CheckFrozen(rel, commit string, old []byte, readNew func() ([]byte, error)) (*engine.CheckProblem, error) {
	if old == nil || !strings.HasSuffix(rel, yamlExt) || !MayHoldScalar(old, string(engine.Verified)) {
		return nil, nil
	}
	var of engine.Facts
	if Unmarshal(old, &of, KindFacts) != nil || of.Status != engine.Verified {
		return nil, nil
	}
	data, err := readNew()
	if err != nil {
		return nil, err
	}
	var nf *engine.Facts
	if data != nil {
		nf = &engine.Facts{}
		if Unmarshal(data, nf, KindFacts) != nil {
			return nil, nil
		}
	}
	return engine.CheckFrozenChange(rel, commit, &of, nf), nil
}

// ---- pem log -----------------------------------------------------------

// EntryPaths are the paths pem log follows for DOMAIN[/INTENT]: an entry's
// facts and experience files (INTENT is an intent key or the intent's
// text), a domain's two directories, or all of facts/ for "".
func EntryPaths(arg string) ([]string, error) {
	if arg == "" {
		return []string{factsDir}, nil
	}
	domPart, intent, hasIntent := strings.Cut(arg, "/")
	dom, err := engine.NormalizeDomain(domPart)
	if err != nil {
		return nil, fmt.Errorf("%q is not a domain: %v", domPart, err)
	}
	if !hasIntent || intent == "" {
		return []string{factsDir + "/" + dom, experienceDir + "/" + dom}, nil
	}
	key := intent
	if !engine.ValidKey(key) {
		key = engine.IntentKey(intent)
	}
	return []string{FactsPath(dom, key), ExperiencePath(dom, key)}, nil
}

// Describe says what a version of the file rel holds, for pem log: a facts
// entry's status and revision, an experience file's evidence counts; ""
// for other files (a .gitkeep, anything not YAML). read reads the version
// (at most limit bytes plus one).
func Describe(rel string, read func(limit int) ([]byte, error)) string {
	top := PlaceOf(rel).Top
	if top != factsDir && top != experienceDir || !strings.HasSuffix(rel, yamlExt) {
		return ""
	}
	if PlaceOf(rel).Kind == KindSite {
		data, err := read(MaxBytes(KindSite))
		var site engine.Site
		if err == nil {
			err = Unmarshal(data, &site, KindSite)
		}
		if err != nil {
			return "unreadable: " + err.Error()
		}
		served := 0
		for _, n := range site.Notes {
			if n.Served(engine.DefaultPolicy()) {
				served++
			}
		}
		return fmt.Sprintf("site entry: %d note(s), %d served under the default policy", len(site.Notes), served)
	}
	kind := KindFacts
	if top == experienceDir {
		kind = KindExperience
	}
	data, err := read(MaxBytes(kind))
	if err != nil {
		return "unreadable: " + err.Error()
	}
	if len(data) <= MaxBytes(kind) {
		if d, ok := describeCanonical(data, kind); ok {
			return d
		}
	}
	return describeDecoded(data, kind)
}

// describeDecoded is Describe by strict decoding.
func describeDecoded(data []byte, kind string) string {
	var err error
	if kind == KindFacts {
		var f engine.Facts
		if err = Unmarshal(data, &f, kind); err == nil {
			rev := f.Revision
			if rev == "" {
				rev = f.ContentHash()
			}
			s := fmt.Sprintf("status %s, revision r%s", f.Status, rev)
			if f.Supersedes != "" {
				s += ", supersedes r" + f.Supersedes
			}
			return s
		}
	} else {
		var x engine.Experience
		if err = Unmarshal(data, &x, kind); err == nil {
			return fmt.Sprintf("%d run(s): %d succeeded, %d failed", x.Attempts, x.Successes, x.Failures)
		}
	}
	return "unreadable: " + err.Error()
}

// describeCanonical is Describe without decoding the document: pem log
// describes every version of an entry in its history, and decoding each
// (an experience file holds every folded outcome) cost most of its time. A
// file in the canonical form pem writes (Marshal) has its top-level keys at
// the start of a line, once each, with plain values; the fields Describe
// shows are read from those lines. Anything else — no or an unreadable
// format, a field missing, repeated or not a plain token, a document marker,
// a tab, a carriage return or a NUL, a top-level line that is not `key:` —
// is not canonical: ok is false and Describe decodes strictly. Only what the
// description shows is checked here: a version damaged below its top level
// is described from its top level (pem check validates every file).
func describeCanonical(data []byte, kind string) (string, bool) {
	if bytes.ContainsAny(data, "\t\r\x00") || len(data) == 0 || data[len(data)-1] != '\n' {
		return "", false
	}
	var want []string
	if kind == KindFacts {
		want = []string{"format", "status", "revision", "supersedes"}
	} else {
		want = []string{"format", "attempts", "successes", "failures"}
	}
	vals := make(map[string]string, len(want))
	seen := map[string]bool{}
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		line := data[:i]
		data = data[i+1:]
		if len(line) > 0 && line[0] == ' ' {
			continue // nested content
		}
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 || !plainKey(line[:colon]) || (colon+1 < len(line) && line[colon+1] != ' ') {
			return "", false
		}
		key := string(line[:colon])
		if seen[key] {
			return "", false // strict decoding refuses a repeated key
		}
		seen[key] = true
		if slices.Contains(want, key) {
			vals[key] = strings.TrimSpace(string(line[colon+1:]))
		}
	}
	f, err := strconv.Atoi(vals["format"])
	if err != nil || checkFormat(f) != nil {
		return "", false
	}
	token := func(k string, ok func(byte) bool) (string, bool) {
		v := vals[k]
		for i := 0; i < len(v); i++ {
			if !ok(v[i]) {
				return "", false
			}
		}
		return v, v != ""
	}
	digit := func(c byte) bool { return '0' <= c && c <= '9' }
	if kind == KindFacts {
		st, ok1 := token("status", func(c byte) bool { return 'a' <= c && c <= 'z' })
		rev, ok2 := token("revision", func(c byte) bool { return digit(c) || 'a' <= c && c <= 'f' })
		if !ok1 || !ok2 || !engine.Status(st).Valid() {
			return "", false // no revision: Describe computes the content hash
		}
		s := fmt.Sprintf("status %s, revision r%s", st, rev)
		if _, has := vals["supersedes"]; has {
			sup, ok := token("supersedes", func(c byte) bool { return digit(c) || 'a' <= c && c <= 'f' })
			if !ok {
				return "", false
			}
			s += ", supersedes r" + sup
		}
		return s, true
	}
	var n [3]int
	for i, k := range want[1:] {
		v, ok := token(k, digit)
		if !ok || len(v) > 12 || len(v) > 1 && v[0] == '0' {
			return "", false
		}
		n[i], _ = strconv.Atoi(v)
	}
	return fmt.Sprintf("%d run(s): %d succeeded, %d failed", n[0], n[1], n[2]), true
}

// plainKey: a canonical top-level key (lower case, digits, underscores).
func plainKey(k []byte) bool {
	for _, c := range k {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// CheckInjected lists a trace or facts file (rel, placed by the layout)
// whose text the injection screen flags (engine.CheckInjectedTrace and
// CheckInjectedFacts); a file that does not decode is the schema check's
// business, and any other file is none of this check's.
func CheckInjected(rel string, data []byte) []engine.CheckProblem {
	var p *engine.CheckProblem
	switch PlaceOf(rel).Kind {
	case KindTrace:
		var t engine.Trace
		if Unmarshal(data, &t, KindTrace) != nil {
			return nil
		}
		p = engine.CheckInjectedTrace(rel, &t)
	case KindFacts:
		var f engine.Facts
		if Unmarshal(data, &f, KindFacts) != nil {
			return nil
		}
		p = engine.CheckInjectedFacts(rel, &f)
	case KindSite:
		var site engine.Site
		if Unmarshal(data, &site, KindSite) != nil {
			return nil
		}
		p = engine.CheckInjectedSite(rel, &site)
	}
	if p == nil {
		return nil
	}
	return []engine.CheckProblem{*p}
}

// ignoresState reports whether a .gitignore holds StateIgnore's lines: the
// tree keeps traces and experience on refs/pem/state.
func ignoresState(gitignore []byte) bool {
	have := map[string]bool{}
	for _, l := range strings.Split(string(gitignore), "\n") {
		have[strings.TrimSpace(l)] = true
	}
	for _, l := range strings.Split(strings.TrimSpace(StateIgnore), "\n") {
		if !have[l] {
			return false
		}
	}
	return true
}
