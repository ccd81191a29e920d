package consolidate

import (
	"bytes"
	"encoding/gob"
	"fmt"
	"math/rand"
	"reflect"
	"testing"
	"time"

	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store"
)

// randCacheFile is a summary cache of experience and facts files with
// evidence, digests, verdicts and a trace listing.
func randCacheFile(r *rand.Rand) *cacheFile {
	at := time.Date(2025, 5, 1, 0, 0, 0, 0, time.UTC)
	cf := &cacheFile{Format: cacheFormat, Written: r.Int63(), Files: map[string]cachedFile{},
		Traces: &store.TraceListing{Dirs: map[string]store.ListedDir{}}}
	for i := 0; i < 50; i++ {
		x := &engine.Experience{}
		for j := r.Intn(12); j > 0; j-- {
			ev := engine.Evidence{Trace: fmt.Sprintf("01JT9MWEAMMF9ND24MX5S%05d", r.Intn(1e5)), At: at.Add(time.Duration(r.Int63n(1e15))),
				Outcome: engine.Success, Session: fmt.Sprintf("s%d", r.Intn(5)), Steps: r.Intn(9), URLPattern: "/x/*", DurationMs: 99}
			if r.Intn(3) == 0 {
				ev.Outcome, ev.Category, ev.Revision = engine.Failure, "selector_drift", "r2"
			}
			if r.Intn(5) == 0 {
				ev.Verdict, ev.VerdictBy, ev.VerdictAt = "wrong", "reviewer", at.Add(time.Hour)
			}
			x.Evidence = append(x.Evidence, ev)
		}
		if r.Intn(3) == 0 {
			x.Digest = &engine.Digest{Before: at, HalfLifeDays: 14, S: r.Float64(), F: r.Float64(), Traces: 3, Successes: 2, Failures: 1,
				Sessions: []string{"s1"}, Recent: []engine.Outcome{engine.Success}, Newest: at.In(time.FixedZone("X", 3600)),
				Patterns: map[string]*engine.Counts{"/x/*": {OK: 2, Fail: 1}}, ByCategory: map[engine.FailureCategory]int{"timeout": 1}}
		}
		cf.Files[fmt.Sprintf("experience/d%d/k%d.yaml", i%7, i)] = cachedFile{Size: r.Int63n(1e5), Mod: r.Int63(), Sum: *experienceSummary(x)}
		f := &engine.Facts{Status: engine.Candidate, Revision: fmt.Sprintf("%d", r.Intn(9))}
		cf.Files[fmt.Sprintf("facts/d%d/k%d.yaml", i%7, i)] = cachedFile{Size: 10, Mod: 20, Sum: *factsSummary(f)}
	}
	for i := 0; i < 20; i++ {
		cf.Traces.Dirs[fmt.Sprintf("traces/d%d/2025-05-%02d", i%7, i)] = store.ListedDir{Dev: r.Uint64(), Ino: r.Uint64(), Size: 4096,
			Mtime: r.Int63(), Ctime: r.Int63(), Names: "01JT9MWEAMMF9ND24MX5S00001\n01JT9MWEAMMF9ND24MX5S00002\n"}
	}
	return cf
}

// TestCacheFileRoundTrip: the summary cache comes back equal (times in
// UTC, the same instants); a damaged file, trailing bytes, or a cache of
// the gob format before it are not believed.
func TestCacheFileRoundTrip(t *testing.T) {
	r := rand.New(rand.NewSource(4))
	for i := 0; i < 20; i++ {
		cf := randCacheFile(r)
		if i == 3 {
			cf.Traces = nil
		}
		var b bytes.Buffer
		if err := encodeCache(&b, cf); err != nil {
			t.Fatal(err)
		}
		got := decodeCache(b.Bytes())
		if got == nil {
			t.Fatalf("round %d: its own cache file was not read", i)
		}
		if !reflect.DeepEqual(got, cf) {
			t.Fatalf("round %d: the cache came back different", i)
		}
		data := b.Bytes()
		for _, n := range []int{0, 10, len(cacheHeader), len(cacheHeader) + 3, len(data) / 2, len(data) - 1} {
			if decodeCache(data[:n]) != nil {
				t.Fatalf("a cache file cut to %d of %d bytes was believed", n, len(data))
			}
		}
		if decodeCache(append(bytes.Clone(data), 7)) != nil {
			t.Fatal("trailing bytes were believed")
		}
		for k := 0; k < 200; k++ {
			c := bytes.Clone(data)
			c[len(cacheHeader)+r.Intn(len(c)-len(cacheHeader))] ^= byte(1 + r.Intn(255))
			decodeCache(c) // damaged: must not panic
		}
	}
	var old bytes.Buffer
	if err := gob.NewEncoder(&old).Encode(randCacheFile(r)); err != nil {
		t.Fatal(err)
	}
	if decodeCache(old.Bytes()) != nil {
		t.Fatal("a gob cache of the format before was believed")
	}
}
