package store

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/pemdev/pem/engine"
)

// The decoded-record cache keeps, beside the other caches in .pem-cache
// (never committed), each experience and facts file as this code last
// decoded it, in a binary form (expcodec.go, factscodec.go), so that a new
// process (every CLI query, the first MCP query of a domain) does not
// parse its YAML again: YAML costs ~40 µs an evidence item, gob ~2 and the
// binary form less (docs/performance.md, "Query"). An experience grows with
// its entry's runs; facts do not, but a facts file's YAML decode (~0.3 ms)
// costs more than reading its cache file instead (the cache replaces the
// YAML's read, it is not a second file), and a query below P2 reads up to
// four other entries' facts for their related routes (engine/related.go):
// 39 % of such a query's CPU was their YAML ("Query, fifth round").
//
//	.pem-cache/decoded/experience/<domain>/<key>.yaml.bin
//	.pem-cache/decoded/facts/<domain>/<key>.yaml.bin
//
// A cache file holds a header, the identity of the YAML file it was
// decoded from (device, inode, size, mtime, ctime: the identity the
// in-memory caches use, cache.go), a fingerprint of the Go types of its
// kind (a pem whose engine.Experience or engine.Facts differs never reads
// it), and the value. It is used only when the YAML file has that very
// identity now and the identity is old enough to show any later change
// (racyWindow), so a rename (a new inode), an edit in place (mtime, ctime,
// size) or a checkout is seen; the decoded value is checked again for its
// format, domain and key. After a YAML decode that succeeded and is
// trusted, the read writes it, as a whole file renamed into place (no
// fsync: losing it costs one YAML decode): for experience only the query
// path's read (ExperienceShared; Experience, a writer's copy, reads it but
// never writes it: a consolidation or deep-learn reads every entry and
// rewrites many), for facts every read (Facts: their readers seldom
// rewrite them), and for pem.yaml every read too (configcodec.go:
//
//	.pem-cache/decoded/pem.yaml.bin
//
// whose fingerprint also covers engine.DefaultConfig). PutRecords writes it too, for the experience and facts
// it just wrote, keyed by the YAML bytes' SHA-256 instead of the file's
// identity (decodedwrite.go). A missing, stale or unreadable cache file is
// rebuilt by the next read; one for an entry that is gone stays until
// .pem-cache is removed (it is never read: no YAML file has its identity).
const (
	decodedDir    = cacheDir + "/decoded"
	decodedHeader = "pem decoded 3\n" // 3: the body is expcodec.go's, not gob
)

// decodable: the kinds kept in the decoded cache, each with a new value
// to decode into (pem.yaml's is a value, engine.Config, as Config keeps
// it). Traces are read once.
var decodable = map[string]func() any{
	KindExperience: func() any { return new(engine.Experience) },
	KindFacts:      func() any { return new(engine.Facts) },
	KindConfig:     func() any { return new(engine.Config) },
}

// typePrint is a fingerprint of the Go types of the cached experience
// (and of its summary, summary.go): field names, types and tags,
// recursively. Facts have their own (factsTypePrint), so that a change of
// one kind's types leaves the other's cache files valid.
var typePrint = sync.OnceValue(func() string {
	return fingerprint("experience:", new(engine.Experience), "summary:", new(engine.ExperienceSummary))
})

// factsTypePrint is typePrint for facts.
var factsTypePrint = sync.OnceValue(func() string {
	return fingerprint("facts:", new(engine.Facts))
})

// typePrintOf is the fingerprint of kind's cache files.
func typePrintOf(kind string) string {
	switch kind {
	case KindFacts:
		return factsTypePrint()
	case KindConfig:
		return configTypePrint()
	}
	return typePrint()
}

// quoteTo writes strconv.Quote(s) to b, by hand for printable ASCII (a
// struct tag: only '"' and '\\' need escaping).
func quoteTo(b *strings.Builder, s string) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			b.WriteString(strconv.Quote(s))
			return
		}
	}
	b.WriteByte('"')
	for {
		i := strings.IndexAny(s, `"\`)
		if i < 0 {
			break
		}
		b.WriteString(s[:i])
		b.WriteByte('\\')
		b.WriteByte(s[i])
		s = s[i+1:]
	}
	b.WriteString(s)
	b.WriteByte('"')
}

// fingerprint hashes the types of its values, each after its label
// (labels and values alternate).
func fingerprint(labelled ...any) string {
	var b strings.Builder
	b.Grow(32 << 10)
	seen := map[reflect.Type]bool{}
	var walk func(t reflect.Type)
	// fmt's "%s/%s;" and "%s %q " written by hand: the same bytes (the
	// fingerprints of cache files already written stay), without fmt's
	// cost in a new process (~0.4 ms a kind in a profile of CLI queries).
	walk = func(t reflect.Type) {
		b.WriteString(t.String())
		b.WriteByte('/')
		b.WriteString(t.Kind().String())
		b.WriteByte(';')
		if seen[t] {
			return
		}
		seen[t] = true
		switch t.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array:
			walk(t.Elem())
		case reflect.Map:
			walk(t.Key())
			walk(t.Elem())
		case reflect.Struct:
			for i := 0; i < t.NumField(); i++ {
				f := t.Field(i)
				b.WriteString(f.Name)
				b.WriteByte(' ')
				quoteTo(&b, string(f.Tag))
				b.WriteByte(' ')
				walk(f.Type)
			}
		}
	}
	for _, v := range labelled {
		if label, ok := v.(string); ok {
			b.WriteString(label)
			continue
		}
		walk(reflect.TypeOf(v))
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:8])
}

func decodedPath(rel string) string { return decodedDir + "/" + rel + ".bin" }

// decodedHead is the first lines of a cache file of kind for a YAML file
// of identity id.
func decodedHead(kind string, id fileID) string {
	return decodedHeader + "types " + typePrintOf(kind) + "\nfile " + fmt.Sprint(id) + "\n"
}

// readDecoded returns the value cached for rel when the YAML file has
// identity id; false when there is none, it is stale or does not decode.
func (s *Store) readDecoded(rel, kind string, id fileID) (any, bool) {
	mk := decodable[kind]
	if mk == nil || !id.unique() {
		return nil, false
	}
	data, _, err := s.readFile(decodedPath(rel), 4*int64(MaxBytes(kind)))
	if err != nil {
		return nil, false
	}
	body, ok := bytes.CutPrefix(data, []byte(decodedHead(kind, id)))
	if !ok {
		if body, ok = s.verifiedBody(rel, kind, data); !ok {
			return nil, false
		}
	}
	v, ok := decodeBody(kind, body)
	if !ok {
		return nil, false
	}
	return v, true
}

// decodeBody decodes a cache file's body (expcodec.go).
func decodeBody(kind string, body []byte) (any, bool) {
	switch kind {
	case KindExperience:
		return decodeExperienceBin(body)
	case KindFacts:
		return decodeFactsBin(body)
	case KindConfig:
		return decodeConfigBin(body)
	}
	return nil, false
}

// appendBody encodes v as a cache file's body; false when it is not kept
// (a kind not cached, the codec off, a time outside UTC).
func appendBody(b []byte, v any) ([]byte, bool) {
	switch x := v.(type) {
	case *engine.Experience:
		return appendExperienceBin(b, x)
	case *engine.Facts:
		return appendFactsBin(b, x)
	case engine.Config:
		return appendConfigBin(b, x)
	}
	return nil, false
}

// checkDecoded checks a decoded value as the YAML decoder does after
// parsing (format, and the entry its path names).
func checkDecoded(rel, kind string, v any) error {
	switch x := v.(type) {
	case *engine.Experience:
		if err := checkFormat(x.Format); err != nil {
			return err
		}
		if rel != ExperiencePath(x.Domain, x.IntentKey) {
			return fmt.Errorf("%w: the file names %s/%s, not the entry its path names", engine.ErrCorrupt, x.Domain, x.IntentKey)
		}
		return nil
	case *engine.Facts:
		if err := checkFormat(x.Format); err != nil {
			return err
		}
		if rel != FactsPath(x.Domain, x.IntentKey) {
			return fmt.Errorf("%w: the file names %s/%s, not the entry its path names", engine.ErrCorrupt, x.Domain, x.IntentKey)
		}
		return nil
	case engine.Config:
		if rel != configFile {
			return fmt.Errorf("%w: a config cached for %s", engine.ErrCorrupt, rel)
		}
		_, err := checkConfig(x)
		return err
	}
	return fmt.Errorf("the decoded cache holds no %s", kind)
}

// writeDecoded stores v, decoded from rel whose identity is id (best
// effort: it is a cache).
func (s *Store) writeDecoded(rel, kind string, id fileID, v any) {
	if decodable[kind] == nil || !id.unique() {
		return
	}
	b, ok := appendBody([]byte(decodedHead(kind, id)), v)
	if !ok {
		return
	}
	s.writeCacheFile(decodedPath(rel), b)
}

// writeCacheFile replaces a file under .pem-cache (a temporary file renamed
// into place; no fsync: losing it costs a rebuild). Errors are ignored: a
// read-only tree still answers, it reads more.
func (s *Store) writeCacheFile(rel string, data []byte) {
	dir := path.Dir(rel)
	if err := s.cacheDirs(dir); err != nil {
		return
	}
	replaceCacheFile(s.root, rel, data)
}

// replaceCacheFile writes data to name under r through a temporary file
// renamed into place (no fsync).
func replaceCacheFile(r *os.Root, name string, data []byte) {
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return
	}
	dir, base := path.Split(name)
	tmp := dir + "." + base + "." + hex.EncodeToString(rnd[:]) + ".tmp"
	f, err := r.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = r.Rename(tmp, name)
	}
	if err != nil {
		_ = r.Remove(tmp)
	}
}

// writeCacheFiles is writeCacheFile for many files of one directory: the
// directory is opened once as its own root, so that each file costs a
// create and a rename in it, not two walks from the tree's root.
func (s *Store) writeCacheFiles(dir string, names []string, data [][]byte) {
	if err := s.cacheDirs(dir); err != nil {
		return
	}
	r, err := s.root.OpenRoot(dir)
	if err != nil {
		return
	}
	defer r.Close()
	for i, name := range names {
		replaceCacheFile(r, name, data[i])
	}
}
