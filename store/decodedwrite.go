package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"path"
	"runtime"
	"strings"
)

// The decoded cache (decoded.go) of the experience and facts a
// consolidation writes.
//
// A consolidation reads in full the entries its new traces touch, and
// decoding their YAML was most of its load time at 100,000 traces
// (docs/performance.md, "Consolidation"); every entry it touches it wrote
// itself in an earlier run, from a value it had in memory. So PutRecords
// keeps that value in the decoded cache, and the next process that reads
// the entry decodes its binary form (expcodec.go, factscodec.go) instead
// of YAML.
//
// A file just written has an identity younger than the racy window: a
// same-size edit in place within the file system's clock tick could keep
// it, so the identity cannot key this cache file. Its key is the SHA-256
// of the YAML bytes written instead, and a read checks the file's bytes
// against it (one read and a hash of a few kilobytes, far cheaper than the
// YAML decode). Only values that decode back to themselves are kept:
// those whose times are all in UTC (the codec declines the others, which
// would come back with their times moved to UTC).

// verifiedHead is the first lines of a cache file keyed by content.
func verifiedHead(kind string, sum []byte) string {
	return decodedHeader + "types " + typePrintOf(kind) + "\nsum " + hex.EncodeToString(sum) + "\n"
}

// verifiedBody returns the body of a content-keyed cache file data of rel,
// when rel holds the bytes it was made from.
func (s *Store) verifiedBody(rel, kind string, data []byte) ([]byte, bool) {
	prefix := decodedHeader + "types " + typePrintOf(kind) + "\nsum "
	rest, ok := bytes.CutPrefix(data, []byte(prefix))
	if !ok || len(rest) < 2*sha256.Size+1 || rest[2*sha256.Size] != '\n' {
		return nil, false
	}
	want := rest[:2*sha256.Size]
	yml, _, err := s.readFile(rel, int64(MaxBytes(kind)))
	if err != nil {
		return nil, false
	}
	sum := sha256.Sum256(yml)
	if hex.EncodeToString(sum[:]) != string(want) {
		return nil, false
	}
	return rest[2*sha256.Size+1:], true
}

// cacheWritten writes the decoded cache of each record of kind a batch
// placed (writes[i] holds values[i]); best effort, like every cache write.
func cacheWritten[T any](s *Store, kind string, writes []*fileWrite, values []*T) {
	bodies := make([][]byte, len(writes))
	_ = forEach(len(writes), runtime.GOMAXPROCS(0), func(i int) error {
		w, v := writes[i], values[i]
		if !w.placed {
			return nil
		}
		sum := sha256.Sum256(w.data)
		if b, ok := appendBody([]byte(verifiedHead(kind, sum[:])), any(v)); ok {
			bodies[i] = b
		}
		return nil
	})
	// One root per cache directory (writeCacheFiles).
	type group struct {
		names  []string
		bodies [][]byte
	}
	var dirs []string
	groups := map[string]*group{}
	for i, w := range writes {
		if bodies[i] == nil {
			continue
		}
		dir, name := path.Split(decodedPath(w.rel))
		dir = strings.TrimSuffix(dir, "/")
		g := groups[dir]
		if g == nil {
			g = &group{}
			groups[dir] = g
			dirs = append(dirs, dir)
		}
		g.names, g.bodies = append(g.names, name), append(g.bodies, bodies[i])
	}
	_ = forEach(len(dirs), runtime.GOMAXPROCS(0), func(i int) error {
		g := groups[dirs[i]]
		s.writeCacheFiles(dirs[i], g.names, g.bodies)
		return nil
	})
}
