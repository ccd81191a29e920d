package gitrepo

import (
	"bufio"
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/pemdev/pem/store/storetest/gitcli"
)

// TestDifferentialAgainstGit checks pem's plumbing against the git CLI on
// random trees: pem writes (random nested paths and contents, several
// commits, deletions, executable files, enough objects for a pack), git
// checks (fsck --strict, verify-pack -v, ls-tree -r compared with what was
// written, a clean status); then git rewrites every object into packs of
// its own, with deltas (repack -a -d -f), and pem's reader reads each object
// back and must hash it to its name.
func TestDifferentialAgainstGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("the differential test needs the git CLI: install git (apt-get install git): %v", err)
	}
	for seed := int64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			differential(t, seed, seed%2 == 0)
		})
	}
}

type diffFile struct {
	data []byte
	exec bool
}

func differential(t *testing.T, seed int64, sub bool) {
	ctx := context.Background()
	rng := rand.New(rand.NewSource(seed))
	root := t.TempDir()
	gitcli.Run(t, root, "init", "-q", "-b", "main")
	gitcli.Run(t, root, "config", "gc.auto", "0")
	model := map[string]diffFile{} // tree path → what HEAD must hold
	tree := root                   // the knowledge tree: the root, or a directory inside it
	prefix := ""
	if sub {
		tree, prefix = filepath.Join(root, "kn"), "kn/"
		writeFile(t, root, "README", "project\n")
		writeFile(t, root, "kn/pem.yaml", "format: 1\n")
		model["pem.yaml"] = diffFile{data: []byte("format: 1\n")}
		gitcli.Run(t, root, "add", "README", "kn/pem.yaml")
		gitcli.Run(t, root, "commit", "-q", "-m", "project")
	}

	r, err := Open(ctx, tree)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for c := 0; c < 4; c++ {
		changed := map[string]bool{}
		n := 5 + rng.Intn(20)
		if c == 0 {
			n = packMinObjects * 3 // the first commit is a pack
		}
		for i := 0; i < n; i++ {
			var p string
			if len(model) > 0 && rng.Intn(3) == 0 {
				p = randomKey(rng, model)
			} else if p = randomPath(rng); conflicts(p, model) {
				continue
			}
			if _, ok := model[p]; ok && rng.Intn(3) == 0 {
				delete(model, p)
				if err := os.Remove(filepath.Join(tree, filepath.FromSlash(p))); err != nil {
					t.Fatal(err)
				}
				removeEmptyDirs(tree)
			} else {
				f := diffFile{data: randomContent(rng), exec: rng.Intn(8) == 0}
				model[p] = f
				full := filepath.Join(tree, filepath.FromSlash(p))
				if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
					t.Fatal(err)
				}
				perm := os.FileMode(0o644)
				if f.exec {
					perm = 0o755
				}
				if err := os.WriteFile(full, f.data, perm); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(full, perm); err != nil {
					t.Fatal(err)
				}
			}
			changed[p] = true
		}
		// One series of up to three commits over the changed paths.
		var paths []string
		for p := range changed {
			paths = append(paths, p)
		}
		sort.Strings(paths)
		rng.Shuffle(len(paths), func(i, j int) { paths[i], paths[j] = paths[j], paths[i] })
		parts := 1 + rng.Intn(3)
		reqs := make([]CommitRequest, parts)
		for i, p := range paths {
			reqs[i%parts].Paths = append(reqs[i%parts].Paths, p)
			reqs[i%parts].Message = fmt.Sprintf("commit %d.%d", c, i%parts)
		}
		if _, err := r.CommitSeries(ctx, reqs, testSig); err != nil {
			t.Fatalf("commit %d: %v", c, err)
		}
		checkWithGit(t, root, prefix, model)
	}
	packs, _ := filepath.Glob(filepath.Join(root, ".git", "objects", "pack", "pack-*.idx"))
	if len(packs) == 0 {
		t.Fatal("pem wrote no pack")
	}

	// git's own packs, with deltas, read by pem.
	gitcli.Run(t, root, "repack", "-q", "-a", "-d", "-f", "--depth=10")
	packs, _ = filepath.Glob(filepath.Join(root, ".git", "objects", "pack", "pack-*.idx"))
	deltas := 0
	for _, p := range packs {
		for _, l := range strings.Split(gitcli.Run(t, root, "verify-pack", "-v", p), "\n") {
			if f := strings.Fields(l); len(f) == 7 && plumbing.IsHash(f[0]) {
				deltas++ // "hash type size size-in-pack offset depth base"
			}
		}
	}
	if deltas == 0 {
		t.Fatal("git's repack stored no delta: the test does not reach the delta reader")
	}
	ps := gitlogOpenPacks(filepath.Join(root, ".git", "objects", "pack"))
	defer ps.close()
	objs := 0
	sc := bufio.NewScanner(strings.NewReader(gitcli.Run(t, root, "cat-file", "--batch-all-objects", "--batch-check=%(objectname) %(objecttype) %(objectsize)")))
	for sc.Scan() {
		var hash, typ string
		var size int
		if _, err := fmt.Sscan(sc.Text(), &hash, &typ, &size); err != nil {
			t.Fatal(err)
		}
		h := plumbing.NewHash(hash)
		data, ot, err := ps.read(h)
		if err != nil || data == nil {
			t.Fatalf("pem cannot read %s %s from git's pack: %v", typ, hash, err)
		}
		if ot.String() != typ || len(data) != size || plumbing.ComputeHash(ot, data) != h {
			t.Fatalf("pem reads %s %s as a %s of %d bytes hashing to %s", typ, hash, ot, len(data), plumbing.ComputeHash(ot, data))
		}
		objs++
	}
	if objs == 0 {
		t.Fatal("git lists no objects")
	}

	// A new handle reads every file through the history API and commits
	// on top of git's packs.
	r2, err := Open(ctx, tree)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	hist, err := r2.History()
	if err != nil {
		t.Fatal(err)
	}
	for p, f := range model {
		hash, err := hist.FileAt(ctx, "HEAD", p)
		if err != nil || hash != plumbing.ComputeHash(plumbing.BlobObject, f.data).String() {
			t.Fatalf("FileAt(HEAD, %s) = %s, %v", p, hash, err)
		}
		data, err := hist.Blob(ctx, hash, len(f.data)+10)
		if err != nil || string(data) != string(f.data) {
			t.Fatalf("Blob(%s) of %s: %v, equal %v", hash, p, err, string(data) == string(f.data))
		}
	}
	p := randomKey(rng, model)
	f := diffFile{data: []byte("after git's repack\n")}
	model[p] = f
	if err := os.WriteFile(filepath.Join(tree, filepath.FromSlash(p)), f.data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(tree, filepath.FromSlash(p)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := r2.Commit(ctx, []string{p}, "after repack", testSig); err != nil {
		t.Fatal(err)
	}
	checkWithGit(t, root, prefix, model)
}

// checkWithGit: git finds the repository sound, every pack valid, HEAD's
// tree equal to the model, and the worktree and index clean.
func checkWithGit(t *testing.T, root, prefix string, model map[string]diffFile) {
	t.Helper()
	gitcli.Run(t, root, "fsck", "--strict", "--no-dangling")
	packs, _ := filepath.Glob(filepath.Join(root, ".git", "objects", "pack", "pack-*.idx"))
	for _, p := range packs {
		gitcli.Run(t, root, "verify-pack", "-v", p)
	}
	got := map[string]string{}
	for _, l := range strings.Split(gitcli.Run(t, root, "ls-tree", "-r", "-z", "--full-tree", "HEAD"), "\x00") {
		if l == "" {
			continue
		}
		meta, name, ok := strings.Cut(l, "\t")
		f := strings.Fields(meta)
		if !ok || len(f) != 3 || f[1] != "blob" {
			t.Fatalf("ls-tree line %q", l)
		}
		if strings.HasPrefix(name, prefix) {
			got[strings.TrimPrefix(name, prefix)] = f[0] + " " + f[2]
		}
	}
	want := map[string]string{}
	for p, f := range model {
		mode := "100644"
		if f.exec {
			mode = "100755"
		}
		want[p] = mode + " " + plumbing.ComputeHash(plumbing.BlobObject, f.data).String()
	}
	for p, w := range want {
		if got[p] != w {
			t.Errorf("HEAD:%s is %q, pem wrote %q", p, got[p], w)
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("HEAD has %s, which pem deleted or never wrote", p)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	assertSynced(t, root)
}

var segs = []string{"a", "b", "c", "traces", "facts", "github.com", "x.y", "_k", "Z9", "d-e", "ünï", "sp ace"}

func randomPath(rng *rand.Rand) string {
	n := 1 + rng.Intn(4)
	parts := make([]string, n)
	for i := range parts {
		parts[i] = segs[rng.Intn(len(segs))]
	}
	parts[n-1] += fmt.Sprintf("%d.yaml", rng.Intn(50))
	return path.Join(parts...)
}

// conflicts reports a path that is a directory of the model, or lies under
// one of its files.
func conflicts(p string, model map[string]diffFile) bool {
	if _, ok := model[p]; ok {
		return false
	}
	for q := range model {
		if strings.HasPrefix(q, p+"/") || strings.HasPrefix(p, q+"/") {
			return true
		}
	}
	return false
}

func randomKey(rng *rand.Rand, model map[string]diffFile) string {
	keys := make([]string, 0, len(model))
	for k := range model {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys[rng.Intn(len(keys))]
}

func randomContent(rng *rand.Rand) []byte {
	switch rng.Intn(6) {
	case 0:
		return nil // empty file
	case 1:
		return randBytes(rng, 4000+rng.Intn(12000))
	}
	return []byte(fmt.Sprintf("format: 1\nvalue: %d\n%s", rng.Int63(), randBytes(rng, rng.Intn(2000))))
}
