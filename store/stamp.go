package store

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"strconv"

	"github.com/pemdev/pem/engine"
)

// appendStamp appends the part of a stamp every platform has: size,
// modification and change times, and mode (octal), colon-separated.
func appendStamp(b []byte, size, mtime, ctime int64, mode fs.FileMode) []byte {
	b = strconv.AppendInt(b, size, 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, mtime, 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, ctime, 10)
	b = append(b, ':')
	return strconv.AppendUint(b, uint64(mode), 8)
}

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

// TraceDirStamp is TraceStamp for the directory traces/<domain> (day "")
// or traces/<domain>/<day>. A directory's stamp moves when an entry is
// added to it, removed or renamed — how every pem writer puts a trace (a
// new file linked or renamed into place) or expires one —, not when a file
// in it is edited in place: that moves the file's own stamp. So a remembered
// listing of an unchanged directory is the listing (deep-learn's state).
func (s *Store) TraceDirStamp(domain, day string) (string, bool) {
	if checkDomain(domain) != nil {
		return "", false
	}
	rel := tracesDir + "/" + domain
	if day != "" {
		if checkDay(day) != nil {
			return "", false
		}
		rel += "/" + day
	}
	fi, err := os.Lstat(s.abs(rel))
	if errors.Is(err, fs.ErrNotExist) {
		return "absent", true
	}
	if err != nil || !fi.IsDir() || !trusted(fi, s.now()) {
		return "", false
	}
	return idOf(fi).stamp(), true
}

// TraceDayRefs lists the traces of one day directory of domain, as
// TraceRefs lists them (in its order; none when the directory is missing).
func (s *Store) TraceDayRefs(ctx context.Context, domain, day string) ([]engine.TraceRef, error) {
	if err := checkDomain(domain); err != nil {
		return nil, err
	}
	if err := checkDay(day); err != nil {
		return nil, err
	}
	refs, err := s.dayRefs(ctx, domain, day, true, nil)
	if err != nil {
		return nil, err
	}
	sortTraceRefs(refs)
	return refs, nil
}

// TraceDays lists the day directories of traces/<domain> that TraceRefs
// reads, sorted (none when the domain has no traces directory).
func (s *Store) TraceDays(ctx context.Context, domain string) ([]string, error) {
	if err := checkDomain(domain); err != nil {
		return nil, err
	}
	return s.subdirsIn(ctx, tracesDir+"/"+domain, checkDay, true)
}

func (s *Store) stamp(rel string) (string, bool) {
	fi, err := os.Lstat(s.abs(rel))
	if errors.Is(err, fs.ErrNotExist) {
		return "absent", true
	}
	if err != nil || !fi.Mode().IsRegular() || !trusted(fi, s.now()) {
		return "", false
	}
	return idOf(fi).stamp(), true
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
