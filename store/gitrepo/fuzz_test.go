package gitrepo

import (
	"bytes"
	"crypto/sha1"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/index"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"

	"github.com/pemdev/pem/store/storetest/gitcli"
)

// The fuzz targets of the parsers that read bytes git (or anything else)
// wrote: the pack index and pack reader, the delta patcher and the index
// parser. Their seeds — real files written by git and by pem, built in
// f.TempDir, plus testdata/fuzz/<Target> — run as plain tests in go test;
// go test -fuzz FuzzX explores from them. What each asserts beyond "no
// panic, no allocation the input cannot justify" is in its comment.

// seedRepo makes a repository with similar files over several commits, so
// that git's repack stores deltas, and returns it.
func seedRepo(tb testing.TB) string {
	tb.Helper()
	dir := tb.TempDir()
	gitcli.Run(tb, dir, "init", "-q", "-b", "main")
	base := strings.Repeat("selector: '#repo-stars-counter-star'\nsteps: [navigate, get_text]\n", 40)
	for c := 0; c < 4; c++ {
		for i := 0; i < 6; i++ {
			writeFile(tb, dir, fmt.Sprintf("facts/d%d/k%d.yaml", i%2, i), base+fmt.Sprintf("revision: %d-%d\n", c, i))
		}
		gitcli.Run(tb, dir, "add", "-A")
		gitcli.Run(tb, dir, "commit", "-q", "-m", fmt.Sprintf("c%d", c))
	}
	return dir
}

// packSeeds returns (idx, pack) pairs: packs git wrote with offset deltas
// and with ref deltas, and a pack pem's writer wrote.
func packSeeds(tb testing.TB) [][2][]byte {
	tb.Helper()
	var out [][2][]byte
	read := func(dir string) {
		idxs, _ := filepath.Glob(filepath.Join(dir, ".git", "objects", "pack", "pack-*.idx"))
		for _, idx := range idxs {
			a, err1 := os.ReadFile(idx)
			b, err2 := os.ReadFile(strings.TrimSuffix(idx, ".idx") + ".pack")
			if err1 != nil || err2 != nil {
				tb.Fatal(err1, err2)
			}
			out = append(out, [2][]byte{a, b})
		}
	}
	for _, ofs := range []string{"true", "false"} {
		dir := seedRepo(tb)
		gitcli.Run(tb, dir, "-c", "repack.useDeltaBaseOffset="+ofs, "repack", "-q", "-a", "-d", "-f", "--depth=5")
		read(dir)
	}
	dir := tb.TempDir()
	gitcli.Run(tb, dir, "init", "-q", "-b", "main")
	var paths []string
	for i := 0; i < packMinObjects+4; i++ {
		p := fmt.Sprintf("traces/d/%02d.yaml", i)
		writeFile(tb, dir, p, fmt.Sprintf("id: %d\n", i))
		paths = append(paths, p)
	}
	if _, err := commitDir(tb.Context(), dir, paths, "many", testSig); err != nil {
		tb.Fatal(err)
	}
	read(dir)
	if len(out) < 3 {
		tb.Fatalf("want 3 seed packs, got %d", len(out))
	}
	return out
}

// FuzzPackRead: the direct pack reader resolves every object an index
// names, or fails with an error; reading again (from its cache) gives the
// same bytes.
func FuzzPackRead(f *testing.F) {
	for _, s := range packSeeds(f) {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, idx, pack []byte) {
		p, ok := gitlogNewPackFile(idx, bytes.NewReader(pack), int64(len(pack)))
		if !ok {
			return
		}
		ps := &gitlogPacks{packs: []*gitlogPackFile{p}, cache: map[gitlogKey]gitlogObj{}}
		names := idx[8+256*4:]
		for i := 0; i < min(p.n, 64); i++ {
			var h plumbing.Hash
			copy(h[:], names[i*20:])
			data, typ, err := ps.read(h)
			if err != nil {
				continue
			}
			again, typ2, err := ps.read(h)
			if err != nil || typ2 != typ || !bytes.Equal(again, data) {
				t.Fatalf("object %s read twice: %v, %s/%s, equal %v", h, err, typ, typ2, bytes.Equal(again, data))
			}
		}
	})
}

// FuzzPatchDelta: a delta the patcher accepts, go-git's patcher accepts
// too and patches to the same bytes. (go-git is asked only then: it
// allocates whatever target size a delta claims.)
func FuzzPatchDelta(f *testing.F) {
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 8; i++ {
		base := randBytes(rng, rng.Intn(3000))
		tgt := mutate(rng, base)
		f.Add(base, packfile.DiffDelta(base, tgt))
	}
	f.Add([]byte("abc"), []byte{3, 3, 0x91, 0, 3})                            // copy 3 bytes from 0
	f.Add([]byte("abc"), []byte{3, 2, 0})                                     // op 0 is reserved
	f.Add([]byte("abc"), []byte{3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}) // absurd target size
	f.Add([]byte(""), []byte{0, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01})
	f.Fuzz(func(t *testing.T, base, delta []byte) {
		out, err := gitlogPatch(base, delta)
		if err != nil {
			return
		}
		ref, rerr := packfile.PatchDelta(base, delta)
		if rerr != nil {
			t.Fatalf("pem accepts a delta go-git refuses (%v)", rerr)
		}
		if !bytes.Equal(out, ref) {
			t.Fatalf("pem and go-git patch differently: %d vs %d bytes", len(out), len(ref))
		}
	})
}

// TestPatchDeltaRoundTrip: patching a base with go-git's delta to a target
// gives the target.
func TestPatchDeltaRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	for i := 0; i < 200; i++ {
		base := randBytes(rng, rng.Intn(70000))
		tgt := mutate(rng, base)
		got, err := gitlogPatch(base, packfile.DiffDelta(base, tgt))
		if err != nil || !bytes.Equal(got, tgt) {
			t.Fatalf("case %d (%d → %d bytes): %v, equal %v", i, len(base), len(tgt), err, bytes.Equal(got, tgt))
		}
	}
}

func randBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = "abcdefgh: \n-#"[rng.Intn(13)]
	}
	return b
}

// mutate copies b with a few insertions, deletions and changes.
func mutate(rng *rand.Rand, b []byte) []byte {
	out := append([]byte(nil), b...)
	for k := rng.Intn(6); k >= 0; k-- {
		at := 0
		if len(out) > 0 {
			at = rng.Intn(len(out))
		}
		switch rng.Intn(3) {
		case 0:
			out = append(out[:at], append(randBytes(rng, rng.Intn(200)), out[at:]...)...)
		case 1:
			out = append(out[:at], out[min(len(out), at+rng.Intn(100)):]...)
		default:
			if len(out) > 0 {
				out[at] ^= 0x20
			}
		}
	}
	return out
}

// indexSeeds are index files git wrote (versions 2, 3 and 4, with a
// conflict) and pem wrote, without their trailing checksum.
func indexSeeds(tb testing.TB) [][]byte {
	tb.Helper()
	var out [][]byte
	add := func(dir string) {
		b, err := os.ReadFile(filepath.Join(dir, ".git", "index"))
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, b[:len(b)-sha1.Size])
	}
	dir := seedRepo(tb)
	add(dir)
	gitcli.Run(tb, dir, "update-index", "--index-version", "3")
	writeFile(tb, dir, "new.yaml", "x\n")
	gitcli.Run(tb, dir, "add", "-N", "new.yaml") // intent-to-add: an extended flag
	add(dir)
	gitcli.Run(tb, dir, "update-index", "--index-version", "4")
	add(dir)
	gitcli.Run(tb, dir, "update-index", "--index-version", "2")
	writeFile(tb, dir, "facts/d1/k1.yaml", "changed\n")
	if _, err := commitDir(tb.Context(), dir, []string{"facts/d1/k1.yaml"}, "pem", testSig); err != nil {
		tb.Fatal(err)
	}
	add(dir)
	return out
}

// FuzzParseIndex: whatever the raw index parser accepts, the raw writer
// writes back as an index that parses to the same entries; and go-git's
// decoder, where it reads the same file, finds the same paths. (The seed in
// testdata/fuzz is a name holding a NUL inside the length its flags give,
// which the parser used to cut at the NUL where git and go-git do not.)
func FuzzParseIndex(f *testing.F) {
	for _, b := range indexSeeds(f) {
		f.Add(b)
	}
	f.Add([]byte("DIRC\x00\x00\x00\x02\x00\x00\x00\x00"))
	f.Add([]byte("DIRC\x00\x00\x00\x02\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, body []byte) {
		sum := sha1.Sum(body)
		b := append(append([]byte(nil), body...), sum[:]...) // reach past the checksum
		version, entries, err := parseIndex(b)
		if err != nil {
			return
		}
		names := make([]string, len(entries))
		stages := make([]int, len(entries))
		for i, e := range entries {
			names[i], stages[i] = string(e.name), e.stage
		}
		var buf bytes.Buffer
		if err := updateIndexRaw(&buf, version, entries, nil); err != nil {
			t.Fatal(err)
		}
		v2, again, err := parseIndex(buf.Bytes())
		if err != nil || v2 != version || len(again) != len(names) {
			t.Fatalf("rewritten index: version %d→%d, %d→%d entries, %v", version, v2, len(names), len(again), err)
		}
		for i, e := range again {
			if string(e.name) != names[i] || e.stage != stages[i] {
				t.Fatalf("entry %d: %q stage %d became %q stage %d", i, names[i], stages[i], e.name, e.stage)
			}
		}
		// go-git is asked only about an index without extensions: it
		// allocates whatever length an extension claims.
		size := idxHeader
		for _, e := range entries {
			size += len(e.data)
		}
		if size != len(b)-sha1.Size {
			return
		}
		var idx index.Index
		if index.NewDecoder(bytes.NewReader(b)).Decode(&idx) != nil {
			return
		}
		if len(idx.Entries) != len(names) {
			t.Fatalf("go-git reads %d entries, pem %d", len(idx.Entries), len(names))
		}
		for i, e := range idx.Entries {
			if e.Name != names[i] {
				t.Fatalf("entry %d: go-git reads %q, pem %q", i, e.Name, names[i])
			}
		}
	})
}
