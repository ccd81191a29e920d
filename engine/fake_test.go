package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/pemdev/pem/engine"
)

// fakeStore is an in-memory engine.Store honoring the interface's error
// contract, for testing the Engine service without a disk. Records are stored
// as JSON copies so callers never share memory with the store.
type fakeStore struct {
	mu      sync.Mutex
	noTree  bool
	cfg     engine.Config
	traces  map[string][]byte // domain/day/id → JSON
	facts   map[string][]byte // domain/key → JSON
	exps    map[string][]byte // domain/key → JSON
	corrupt map[string]bool   // "facts/domain/key", "experience/…", "traces/…/id": reads fail with ErrCorrupt
	reads   map[string]int    // domain → reads of any record of that domain
	lock    chan struct{}
}

var _ engine.Store = (*fakeStore)(nil)

func newFakeStore() *fakeStore {
	return &fakeStore{cfg: engine.DefaultConfig(), traces: map[string][]byte{}, facts: map[string][]byte{},
		exps: map[string][]byte{}, corrupt: map[string]bool{}, reads: map[string]int{}, lock: make(chan struct{}, 1)}
}

func safeDomain(d string) bool {
	return d != "" && d != "." && d != ".." && !strings.ContainsAny(d, "/\\:\x00") && !strings.HasPrefix(d, ".")
}

func (s *fakeStore) checkKey(domain, key string) error {
	if !safeDomain(domain) || !engine.ValidKey(key) {
		return fmt.Errorf("%s/%s: %w", domain, key, engine.ErrUnsafePath)
	}
	return nil
}

func (s *fakeStore) Config(ctx context.Context) (engine.Config, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.noTree {
		return engine.Config{}, fmt.Errorf("fake: %w", engine.ErrNoTree)
	}
	return s.cfg, nil
}

func traceKey(r engine.TraceRef) string { return r.Domain + "/" + r.Day + "/" + r.ID }

func (s *fakeStore) PutTrace(ctx context.Context, t *engine.Trace) (string, error) {
	if !safeDomain(t.Domain) || !engine.ValidTraceID(t.ID) {
		return "", fmt.Errorf("trace %s/%s: %w", t.Domain, t.ID, engine.ErrUnsafePath)
	}
	b, err := json.Marshal(t)
	if err != nil {
		return "", err
	}
	if len(b) > engine.MaxTraceBytes {
		return "", fmt.Errorf("trace %s: %w", t.ID, engine.ErrTooLarge)
	}
	ref := engine.TraceRef{Domain: t.Domain, Day: t.StartedAt.UTC().Format("2006-01-02"), ID: t.ID}
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.traces {
		if strings.HasSuffix(k, "/"+t.ID) {
			return "", fmt.Errorf("trace %s: %w", t.ID, engine.ErrExists)
		}
	}
	s.traces[traceKey(ref)] = b
	return "traces/" + traceKey(ref) + ".yaml", nil
}

func (s *fakeStore) Trace(ctx context.Context, ref engine.TraceRef) (*engine.Trace, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads[ref.Domain]++
	if s.corrupt["traces/"+traceKey(ref)] {
		return nil, fmt.Errorf("traces/%s.yaml: %w", traceKey(ref), engine.ErrCorrupt)
	}
	b, ok := s.traces[traceKey(ref)]
	if !ok {
		return nil, fmt.Errorf("trace %s: %w", ref.ID, engine.ErrNotFound)
	}
	var t engine.Trace
	return &t, json.Unmarshal(b, &t)
}

func (s *fakeStore) TraceRefs(ctx context.Context, domain string) ([]engine.TraceRef, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var refs []engine.TraceRef
	for k := range s.traces {
		p := strings.Split(k, "/")
		if domain == "" || p[0] == domain {
			refs = append(refs, engine.TraceRef{Domain: p[0], Day: p[1], ID: p[2]})
		}
	}
	sort.Slice(refs, func(i, j int) bool { return refs[i].ID < refs[j].ID })
	return refs, nil
}

func (s *fakeStore) DeleteTrace(ctx context.Context, ref engine.TraceRef) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.traces, traceKey(ref))
	return nil
}

func (s *fakeStore) Facts(ctx context.Context, domain, key string) (*engine.Facts, error) {
	if err := s.checkKey(domain, key); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads[domain]++
	if s.corrupt["facts/"+domain+"/"+key] {
		return nil, fmt.Errorf("facts/%s/%s.yaml: %w", domain, key, engine.ErrCorrupt)
	}
	b, ok := s.facts[domain+"/"+key]
	if !ok {
		return nil, fmt.Errorf("facts %s/%s: %w", domain, key, engine.ErrNotFound)
	}
	var f engine.Facts
	return &f, json.Unmarshal(b, &f)
}

func (s *fakeStore) PutFacts(ctx context.Context, f *engine.Facts) (string, error) {
	if err := s.checkKey(f.Domain, f.IntentKey); err != nil {
		return "", err
	}
	b, err := json.Marshal(f)
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.facts[f.Domain+"/"+f.IntentKey] = b
	return "facts/" + f.Domain + "/" + f.IntentKey + ".yaml", nil
}

func keysOf(m map[string][]byte, domain string) []string {
	var ks []string
	for k := range m {
		if d, key, _ := strings.Cut(k, "/"); d == domain {
			ks = append(ks, key)
		}
	}
	sort.Strings(ks)
	return ks
}

func (s *fakeStore) FactsKeys(ctx context.Context, domain string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return keysOf(s.facts, domain), nil
}

func (s *fakeStore) Experience(ctx context.Context, domain, key string) (*engine.Experience, error) {
	if err := s.checkKey(domain, key); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads[domain]++
	if s.corrupt["experience/"+domain+"/"+key] {
		return nil, fmt.Errorf("experience/%s/%s.yaml: %w", domain, key, engine.ErrCorrupt)
	}
	b, ok := s.exps[domain+"/"+key]
	if !ok {
		return nil, fmt.Errorf("experience %s/%s: %w", domain, key, engine.ErrNotFound)
	}
	var x engine.Experience
	return &x, json.Unmarshal(b, &x)
}

func (s *fakeStore) PutExperience(ctx context.Context, x *engine.Experience) (string, error) {
	if err := s.checkKey(x.Domain, x.IntentKey); err != nil {
		return "", err
	}
	b, err := json.Marshal(x)
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.exps[x.Domain+"/"+x.IntentKey] = b
	return "experience/" + x.Domain + "/" + x.IntentKey + ".yaml", nil
}

func (s *fakeStore) ExperienceKeys(ctx context.Context, domain string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return keysOf(s.exps, domain), nil
}

func (s *fakeStore) Domains(ctx context.Context) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	set := map[string]bool{}
	for _, m := range []map[string][]byte{s.traces, s.facts, s.exps} {
		for k := range m {
			d, _, _ := strings.Cut(k, "/")
			set[d] = true
		}
	}
	ds := make([]string, 0, len(set))
	for d := range set {
		ds = append(ds, d)
	}
	sort.Strings(ds)
	return ds, nil
}

func (s *fakeStore) Lock(ctx context.Context) (func() error, error) {
	select {
	case s.lock <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("fake tree: %w", engine.ErrLocked)
	}
	var once sync.Once
	return func() error {
		once.Do(func() { <-s.lock })
		return nil
	}, nil
}

// rawTraces returns every stored trace's JSON, for leak checks.
func (s *fakeStore) rawTraces() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, b := range s.traces {
		out = append(out, string(b))
	}
	return out
}
