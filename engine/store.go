package engine

import (
	"context"
	"errors"
)

// Errors of the Store contract. Implementations wrap them with the path or id
// that failed; callers test with errors.Is.
var (
	ErrNotFound   = errors.New("not found")
	ErrExists     = errors.New("already exists")
	ErrCorrupt    = errors.New("corrupt file")      // unreadable, not canonical format, over a cap
	ErrUnsafePath = errors.New("unsafe path")       // would escape the tree, a symlink, a reserved name
	ErrTooLarge   = errors.New("record too large")  // over the size cap on write
	ErrLocked     = errors.New("tree is locked")    // another writer holds the lock and ctx ended
	ErrNoTree     = errors.New("no knowledge tree") // the directory holds no pem.yaml: run pem init
)

// TraceRef names one stored trace without reading it.
type TraceRef struct {
	Domain string // normalized domain
	Day    string // YYYY-MM-DD (UTC) of StartedAt
	ID     string
}

// Store keeps the knowledge tree. Every method is safe for concurrent use by
// several goroutines; writers in several processes coordinate with Lock.
// Names (domains, keys, ids) that are not one safe path segment are refused
// with ErrUnsafePath before anything is touched.
type Store interface {
	// Config returns pem.yaml with defaults filled in. Returns ErrNoTree when
	// the tree was never initialized.
	Config(ctx context.Context) (Config, error)

	// PutTrace writes a new trace once, atomically, and returns its path
	// relative to the tree root. Returns ErrExists if the id is taken (traces
	// are immutable), ErrTooLarge over the cap.
	PutTrace(ctx context.Context, t *Trace) (string, error)
	// Trace reads one trace. Returns ErrNotFound, or ErrCorrupt naming the path.
	Trace(ctx context.Context, ref TraceRef) (*Trace, error)
	// TraceRefs lists the traces of a domain ("" for all domains), oldest
	// first (ids are time-sortable). It reads directory names only.
	TraceRefs(ctx context.Context, domain string) ([]TraceRef, error)
	// DeleteTrace removes a trace. Deleting a missing trace is not an error.
	DeleteTrace(ctx context.Context, ref TraceRef) error

	// Facts reads facts/<domain>/<key>.yaml. Returns ErrNotFound or ErrCorrupt.
	Facts(ctx context.Context, domain, key string) (*Facts, error)
	// PutFacts writes the entry atomically in canonical form and returns its
	// relative path; writing identical content leaves the file's bytes as they were.
	PutFacts(ctx context.Context, f *Facts) (string, error)
	// FactsKeys lists the intent keys with a facts file in domain, sorted.
	FactsKeys(ctx context.Context, domain string) ([]string, error)

	// Experience reads experience/<domain>/<key>.yaml. Returns ErrNotFound or ErrCorrupt.
	Experience(ctx context.Context, domain, key string) (*Experience, error)
	// PutExperience writes atomically in canonical form; returns the relative path.
	PutExperience(ctx context.Context, x *Experience) (string, error)
	// ExperienceKeys lists the intent keys with an experience file in domain, sorted.
	ExperienceKeys(ctx context.Context, domain string) ([]string, error)

	// Domains lists every domain that has traces, experience or facts, sorted.
	Domains(ctx context.Context) ([]string, error)

	// Lock takes the tree's writer lock, shared by every process using the
	// tree, waiting until ctx ends (then ErrLocked). release is idempotent.
	Lock(ctx context.Context) (release func() error, err error)
}

// SiteStore is the part of a Store that keeps site entries
// (facts/<domain>/_site.yaml, site.go). A Store that does not implement it
// serves no site notes; consolidation needs it to write them.
type SiteStore interface {
	// Site reads a domain's site entry. Returns ErrNotFound or ErrCorrupt.
	Site(ctx context.Context, domain string) (*Site, error)
	// PutSite writes it atomically in canonical form and returns its
	// relative path; identical content leaves the file as it was.
	PutSite(ctx context.Context, s *Site) (string, error)
}

// SharedExperience is what a Store may also offer so that a query does not
// deep-copy every experience it reads (an entry's evidence grows with its
// runs): ExperienceShared returns the store's own cached value, which the
// caller must never modify, and which the store never modifies either (a
// change on disk gives a new value). The engine reads it on its query path
// and copies it where it hands an experience out (Entry, Entries).
type SharedExperience interface {
	ExperienceShared(ctx context.Context, domain, key string) (*Experience, error)
}

// ChangeWatch is what a Store may also offer so that the engine can keep a
// query's answer and serve it again, unread, until something it was
// computed from changes (querymemo.go).
type ChangeWatch interface {
	// Generation returns a number that is the same at two calls only if
	// nothing a read of domain (its facts, experience, site entry and
	// traces, their listings, pem.yaml) depends on changed in between —
	// for every read made through the store after the first call. ok false:
	// the store cannot tell (no watch on this file system, a directory it
	// could not watch); the caller then keeps nothing.
	Generation(ctx context.Context, domain string) (gen uint64, ok bool)
}

// TraceIndex is what a Store may also offer so that the engine finds one
// intent's traces without reading the rest of the domain's (a hot domain
// holds tens of thousands): Query, Memory and Save use it when the Store
// has it, and otherwise read every trace of the domain they have not met.
type TraceIndex interface {
	// IntentTraceRefs lists, oldest first, the traces of domain whose intent
	// key is key, and those whose key could not be read (so that the caller
	// reads them and reports the bad file). It may list a trace of another
	// key (the caller checks each trace it reads), never leave one of key
	// out. Unsafe names: ErrUnsafePath.
	IntentTraceRefs(ctx context.Context, domain, key string) ([]TraceRef, error)
}
