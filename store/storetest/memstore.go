package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store"
)

// MemStore is an in-memory engine.Store for the tests of packages above the
// store (engine, agent, …); it passes this suite (memstore_test.go) and
// refuses the same names as the store on disk. Records are kept as JSON
// copies, so callers never share memory with it. A test can make the tree
// missing (SetNoTree), make a file unreadable (Corrupt), count reads per
// domain (Reads) and look at every trace (Traces, RawTraces).
type MemStore struct {
	mu      sync.Mutex
	noTree  bool
	traces  map[string][]byte // tree path → JSON
	facts   map[string][]byte // tree path → JSON
	exps    map[string][]byte // tree path → JSON
	sites   map[string][]byte // tree path → JSON (engine.SiteStore)
	corrupt map[string]bool   // tree paths whose reads fail with ErrCorrupt
	reads   map[string]int    // domain → reads of any record of that domain
	lock    chan struct{}
	config  *engine.Config // nil: engine.DefaultConfig()
}

var _ engine.Store = (*MemStore)(nil)
var _ engine.SiteStore = (*MemStore)(nil)

// NewMemStore returns an empty tree with the default configuration.
func NewMemStore() *MemStore {
	return &MemStore{traces: map[string][]byte{}, facts: map[string][]byte{}, exps: map[string][]byte{}, sites: map[string][]byte{},
		corrupt: map[string]bool{}, reads: map[string]int{}, lock: make(chan struct{}, 1)}
}

// SetConfig makes Config return c (a policy of the test's own).
func (s *MemStore) SetConfig(c engine.Config) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.config = &c
}

// SetNoTree makes Config fail with engine.ErrNoTree (or work again).
func (s *MemStore) SetNoTree(missing bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noTree = missing
}

// Corrupt makes reads of the file at path (as the tree names it, for
// example store.FactsPath(domain, key)) fail with engine.ErrCorrupt.
func (s *MemStore) Corrupt(path string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.corrupt[path] = true
}

// Reads returns how many records of domain were read since the last ResetReads.
func (s *MemStore) Reads(domain string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads[domain]
}

// ResetReads sets every read count to zero.
func (s *MemStore) ResetReads() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.reads)
}

// Traces returns every stored trace, oldest id first.
func (s *MemStore) Traces() []*engine.Trace {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*engine.Trace
	for _, b := range s.traces {
		var t engine.Trace
		if err := json.Unmarshal(b, &t); err != nil {
			panic(err) // written by PutTrace
		}
		out = append(out, &t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// RawTraces returns every stored trace as JSON, for leak checks.
func (s *MemStore) RawTraces() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, b := range s.traces {
		out = append(out, string(b))
	}
	sort.Strings(out)
	return out
}

func (s *MemStore) Config(ctx context.Context) (engine.Config, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.noTree {
		return engine.Config{}, fmt.Errorf("in-memory tree: %w", engine.ErrNoTree)
	}
	if s.config != nil {
		return *s.config, nil
	}
	return engine.DefaultConfig(), nil
}

// get reads the record at path into v, counting a read of domain.
func (s *MemStore) get(m map[string][]byte, path, domain, what string, v any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads[domain]++
	if s.corrupt[path] {
		return fmt.Errorf("%s: %w", path, engine.ErrCorrupt)
	}
	b, ok := m[path]
	if !ok {
		return fmt.Errorf("%s %s: %w", what, path, engine.ErrNotFound)
	}
	return json.Unmarshal(b, v)
}

func (s *MemStore) put(ctx context.Context, m map[string][]byte, path string, v any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m[path] = b
	return nil
}

func (s *MemStore) PutTrace(ctx context.Context, t *engine.Trace) (string, error) {
	ref := store.RefOf(t)
	if err := store.CheckRef(ref); err != nil {
		return "", err
	}
	b, err := json.Marshal(t)
	if err != nil {
		return "", err
	}
	if len(b) > engine.MaxTraceBytes {
		return "", fmt.Errorf("trace %s: %w", t.ID, engine.ErrTooLarge)
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	path := store.TracePath(ref)
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.traces {
		if strings.HasSuffix(k, "/"+t.ID+".yaml") {
			return "", fmt.Errorf("trace %s: %w", t.ID, engine.ErrExists)
		}
	}
	s.traces[path] = b
	return path, nil
}

func (s *MemStore) Trace(ctx context.Context, ref engine.TraceRef) (*engine.Trace, error) {
	if err := store.CheckRef(ref); err != nil {
		return nil, err
	}
	var t engine.Trace
	if err := s.get(s.traces, store.TracePath(ref), ref.Domain, "trace", &t); err != nil {
		return nil, err
	}
	return &t, nil
}

func (s *MemStore) TraceRefs(ctx context.Context, domain string) ([]engine.TraceRef, error) {
	if domain != "" {
		if err := store.CheckDomain(domain); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var refs []engine.TraceRef
	for k := range s.traces {
		p := strings.Split(strings.TrimSuffix(k, ".yaml"), "/") // traces/<domain>/<day>/<id>
		if domain == "" || p[1] == domain {
			refs = append(refs, engine.TraceRef{Domain: p[1], Day: p[2], ID: p[3]})
		}
	}
	sort.Slice(refs, func(i, j int) bool { return refs[i].ID < refs[j].ID })
	return refs, nil
}

func (s *MemStore) DeleteTrace(ctx context.Context, ref engine.TraceRef) error {
	if err := store.CheckRef(ref); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.traces, store.TracePath(ref))
	return nil
}

func checkEntry(domain, key string) error {
	if err := store.CheckDomain(domain); err != nil {
		return err
	}
	return store.CheckKey(key)
}

func (s *MemStore) Facts(ctx context.Context, domain, key string) (*engine.Facts, error) {
	if err := checkEntry(domain, key); err != nil {
		return nil, err
	}
	var f engine.Facts
	if err := s.get(s.facts, store.FactsPath(domain, key), domain, "facts", &f); err != nil {
		return nil, err
	}
	return &f, nil
}

func (s *MemStore) PutFacts(ctx context.Context, f *engine.Facts) (string, error) {
	if err := checkEntry(f.Domain, f.IntentKey); err != nil {
		return "", err
	}
	path := store.FactsPath(f.Domain, f.IntentKey)
	return path, s.put(ctx, s.facts, path, f)
}

// Site reads a domain's site entry (engine.SiteStore).
func (s *MemStore) Site(ctx context.Context, domain string) (*engine.Site, error) {
	if err := store.CheckDomain(domain); err != nil {
		return nil, err
	}
	var site engine.Site
	if err := s.get(s.sites, store.SitePath(domain), domain, "site", &site); err != nil {
		return nil, err
	}
	return &site, nil
}

// PutSite writes a domain's site entry (engine.SiteStore).
func (s *MemStore) PutSite(ctx context.Context, site *engine.Site) (string, error) {
	if err := store.CheckDomain(site.Domain); err != nil {
		return "", err
	}
	path := store.SitePath(site.Domain)
	return path, s.put(ctx, s.sites, path, site)
}

func (s *MemStore) Experience(ctx context.Context, domain, key string) (*engine.Experience, error) {
	if err := checkEntry(domain, key); err != nil {
		return nil, err
	}
	var x engine.Experience
	if err := s.get(s.exps, store.ExperiencePath(domain, key), domain, "experience", &x); err != nil {
		return nil, err
	}
	return &x, nil
}

func (s *MemStore) PutExperience(ctx context.Context, x *engine.Experience) (string, error) {
	if err := checkEntry(x.Domain, x.IntentKey); err != nil {
		return "", err
	}
	path := store.ExperiencePath(x.Domain, x.IntentKey)
	return path, s.put(ctx, s.exps, path, x)
}

// keys lists the intent keys of domain in m (paths <dir>/<domain>/<key>.yaml), sorted.
func (s *MemStore) keys(m map[string][]byte, domain string) ([]string, error) {
	if err := store.CheckDomain(domain); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var ks []string
	for k := range m {
		if p := strings.Split(strings.TrimSuffix(k, ".yaml"), "/"); p[1] == domain {
			ks = append(ks, p[2])
		}
	}
	sort.Strings(ks)
	return ks, nil
}

func (s *MemStore) FactsKeys(ctx context.Context, domain string) ([]string, error) {
	return s.keys(s.facts, domain)
}

func (s *MemStore) ExperienceKeys(ctx context.Context, domain string) ([]string, error) {
	return s.keys(s.exps, domain)
}

func (s *MemStore) Domains(ctx context.Context) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	set := map[string]bool{}
	for _, m := range []map[string][]byte{s.traces, s.facts, s.exps} {
		for k := range m {
			set[strings.Split(k, "/")[1]] = true
		}
	}
	ds := make([]string, 0, len(set))
	for d := range set {
		ds = append(ds, d)
	}
	sort.Strings(ds)
	return ds, nil
}

// Lock is an in-process lock; a wait cut short by ctx is engine.ErrLocked.
func (s *MemStore) Lock(ctx context.Context) (func() error, error) {
	select {
	case s.lock <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("in-memory tree: %w", errors.Join(engine.ErrLocked, ctx.Err()))
	}
	var once sync.Once
	return func() error {
		once.Do(func() { <-s.lock })
		return nil
	}, nil
}
