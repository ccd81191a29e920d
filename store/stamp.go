package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/pemdev/pem/engine"
)

// TraceStamp, FactsStamp and ExperienceStamp identify the current version of
// a file without reading it (one lstat): device, inode, size, modification
// and change times, so that any write — pem's (a rename: a new inode) or an
// editor's — gives another stamp. ok is false when the file cannot be stat'ed or
// is not a regular file, and when it changed within racyWindow of now (a change
// in the same clock tick could keep its stamp): callers that remember stamps
// (deep-learn's state) then read it again next time. A file that does not
// exist has the stamp "absent" (ok).
func (s *Store) TraceStamp(ref engine.TraceRef) (stamp string, ok bool) {
	if checkRef(ref) != nil {
		return "", false
	}
	return s.stamp(TracePath(ref))
}

// FactsStamp is TraceStamp for facts/<domain>/<key>.yaml.
func (s *Store) FactsStamp(domain, key string) (string, bool) {
	if checkDomain(domain) != nil || checkKey(key) != nil {
		return "", false
	}
	return s.stamp(FactsPath(domain, key))
}

// ExperienceStamp is TraceStamp for experience/<domain>/<key>.yaml.
func (s *Store) ExperienceStamp(domain, key string) (string, bool) {
	if checkDomain(domain) != nil || checkKey(key) != nil {
		return "", false
	}
	return s.stamp(ExperiencePath(domain, key))
}

func (s *Store) stamp(rel string) (string, bool) {
	fi, err := os.Lstat(s.abs(rel))
	if errors.Is(err, fs.ErrNotExist) {
		return "absent", true
	}
	if err != nil || !fi.Mode().IsRegular() || !trusted(fi, s.now()) {
		return "", false
	}
	return fmt.Sprintf("%+v", idOf(fi)), true
}

// noCache is an LRU that keeps nothing: batch reads that must not fill the
// store's caches go through it.
var noCache = newLRU(0)

// TraceOnce reads a trace like Trace, without keeping it in the store's
// cache of decoded traces: for a batch reader that reads each trace once
// (deep-learn), whose memory the cache (up to 50,000 decoded traces) would
// otherwise hold. The result is the caller's own.
func (s *Store) TraceOnce(ctx context.Context, ref engine.TraceRef) (*engine.Trace, error) {
	if err := checkRef(ref); err != nil {
		return nil, err
	}
	v, err := s.load(ctx, noCache, TracePath(ref), KindTrace, true, traceDecoder(ref))
	if err != nil {
		return nil, err
	}
	return v.(*engine.Trace), nil
}
