package gitrepo_test

import (
	"context"
	"reflect"
	"sort"
	"testing"

	"github.com/pemdev/pem/store/gitrepo"
	"github.com/pemdev/pem/store/storetest/gitcli"
)

// A history with a side branch merged back:
//
//	c1 ── c2 ─────── m (merge of side)
//	  └── s1 (edits b) ┘
func reviewRepo(t *testing.T) (dir string, c map[string]string) {
	dir = t.TempDir()
	gitlogInit(t, dir)
	c = map[string]string{}
	gitlogWrite(t, dir, "facts/a.yaml", "a1\n")
	gitlogWrite(t, dir, "facts/b.yaml", "b1\n")
	c["c1"] = gitlogCommit(t, dir, "c1", 1)
	gitcli.Run(t, dir, "checkout", "-q", "-b", "side")
	gitlogWrite(t, dir, "facts/b.yaml", "b2\n")
	c["s1"] = gitlogCommit(t, dir, "s1", 2)
	gitcli.Run(t, dir, "checkout", "-q", "main")
	gitlogWrite(t, dir, "facts/a.yaml", "a2\n")
	gitlogWrite(t, dir, "notes.txt", "not under facts\n")
	c["c2"] = gitlogCommit(t, dir, "c2", 3)
	gitcli.Run(t, dir, "merge", "-q", "--no-ff", "-m", "m", "side")
	c["m"] = gitcli.Run(t, dir, "rev-parse", "HEAD")
	return dir, c
}

func TestWalkIntroduced(t *testing.T) {
	ctx := context.Background()
	dir, c := reviewRepo(t)
	r, err := gitrepo.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	h, err := r.History()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	for k, v := range c {
		names[v] = k
	}
	walk := func(exclude ...string) (int, []string) {
		t.Helper()
		var got []string
		n, err := h.WalkIntroduced(ctx, gitrepo.WalkOptions{Under: "facts", Exclude: exclude}, func(ci gitrepo.CommitInfo, ch gitrepo.FileChange) error {
			got = append(got, names[ci.Hash]+" "+ch.Path)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		sort.Strings(got)
		return n, got
	}
	// The merge brings b2 from side: not new there (s1 made it).
	if n, got := walk(); n != 4 || !reflect.DeepEqual(got, []string{"c1 facts/a.yaml", "c1 facts/b.yaml", "c2 facts/a.yaml", "s1 facts/b.yaml"}) {
		t.Errorf("full walk: %d commits, %v", n, got)
	}
	// REV ^c2: the merge and the side branch only.
	if n, got := walk(c["c2"]); n != 2 || !reflect.DeepEqual(got, []string{"s1 facts/b.yaml"}) {
		t.Errorf("walk ^c2: %d commits, %v", n, got)
	}
	if n, got := walk(c["m"]); n != 0 || len(got) != 0 {
		t.Errorf("walk ^HEAD: %d commits, %v", n, got)
	}
	if _, err := h.WalkIntroduced(ctx, gitrepo.WalkOptions{Exclude: []string{"nope"}}, nil); err == nil {
		t.Error("an unknown exclusion is accepted")
	}
}

func TestDiffVersionsAndReadAt(t *testing.T) {
	ctx := context.Background()
	dir, c := reviewRepo(t)
	h, err := gitrepo.OpenHistory(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	vs, err := h.DiffVersions(ctx, c["c1"], c["c2"], "", func(p string) int {
		if p == "facts/a.yaml" {
			return 100
		}
		return 0
	})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][2]string{}
	for _, v := range vs {
		got[v.Path] = [2]string{string(v.Old), string(v.New)}
	}
	want := map[string][2]string{"facts/a.yaml": {"a1\n", "a2\n"}, "notes.txt": {"", ""}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("DiffVersions: %q, want %q", got, want)
	}
	if data, hash, err := h.ReadAt(ctx, c["s1"], "facts/b.yaml", 100); err != nil || string(data) != "b2\n" || len(hash) != 40 {
		t.Errorf("ReadAt: %q %q %v", data, hash, err)
	}
	if data, hash, err := h.ReadAt(ctx, c["c1"], "notes.txt", 100); err != nil || data != nil || hash != "" {
		t.Errorf("ReadAt of an absent file: %q %q %v", data, hash, err)
	}
	if data, _, _ := h.ReadAt(ctx, c["c1"], "facts/a.yaml", 1); string(data) != "a1" {
		t.Errorf("ReadAt over the cap reads cap+1 bytes: %q", data)
	}
	changes, err := h.BranchChanges(ctx, c["c2"], "side")
	if err != nil || len(changes) != 1 || changes[0].Path != "facts/b.yaml" {
		t.Errorf("BranchChanges: %+v %v", changes, err)
	}
	if from, to, err := h.DiffRange(ctx, nil); err != nil || from != c["c2"] || to != c["m"] {
		t.Errorf("DiffRange(): %s %s %v", from, to, err)
	}
	if _, _, err := h.DiffRange(ctx, []string{"nope"}); err == nil {
		t.Error("DiffRange accepts an unknown revision")
	}
}

func TestRemember(t *testing.T) {
	ctx := context.Background()
	dir, c := reviewRepo(t)
	r, err := gitrepo.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, ok := r.Remembered(ctx, "pem-test", "k"); ok {
		t.Fatal("remembered before Remember")
	}
	if err := r.Remember("pem-test", "k v1", c["c2"]); err != nil {
		t.Fatal(err)
	}
	if got, ok := r.Remembered(ctx, "pem-test", "k v1"); !ok || got != c["c2"] {
		t.Errorf("Remembered: %q %v", got, ok)
	}
	if _, ok := r.Remembered(ctx, "pem-test", "k v2"); ok {
		t.Error("remembered under another key")
	}
	// A commit the repository no longer has is forgotten.
	if err := r.Remember("pem-test", "k v1", "0123456789012345678901234567890123456789"); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Remembered(ctx, "pem-test", "k v1"); ok {
		t.Error("remembered a commit the repository does not have")
	}
	if st := gitcli.Run(t, dir, "status", "--porcelain"); st != "" {
		t.Errorf("the state shows in git status:\n%s", st)
	}
}
