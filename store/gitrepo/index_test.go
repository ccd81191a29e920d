package gitrepo

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing/format/index"

	"github.com/pemdev/pem/store/storetest/gitcli"
)

// decodeIndex reads an index file with go-git's codec.
func decodeIndex(t *testing.T, file string) *index.Index {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	idx := &index.Index{}
	if err := index.NewDecoder(bufio.NewReader(bytes.NewReader(b))).Decode(idx); err != nil {
		t.Fatalf("go-git cannot read the index: %v", err)
	}
	return idx
}

// TestRawIndexMatchesCodec commits the same change twice from the same
// starting index — once through the byte-level index writer, once through
// go-git's codec — and checks both indexes hold the same entries, and that
// git agrees with the result (status clean for the committed paths, the
// conflict and the intent-to-add entry resolved, other staged work kept).
func TestRawIndexMatchesCodec(t *testing.T) {
	ctx := context.Background()
	repo := t.TempDir()
	gitcli.Run(t, repo, "init", "-q", "-b", "main")
	for _, p := range []string{"a.yaml", "d/b.yaml", "d/c.yaml", "gone.yaml", "other.txt", "z/deep/e.yaml"} {
		writeFile(t, repo, p, "v1 "+p+"\n")
	}
	gitcli.Run(t, repo, "add", "-A")
	gitcli.Run(t, repo, "commit", "-q", "-m", "base")
	// A version-3 entry (intent to add), an unrelated staged change, and an
	// index written by git with its extensions (TREE).
	writeFile(t, repo, "ita.yaml", "intent\n")
	gitcli.Run(t, repo, "add", "-N", "ita.yaml")
	writeFile(t, repo, "other.txt", "staged elsewhere\n")
	gitcli.Run(t, repo, "add", "other.txt")
	if v := decodeIndex(t, filepath.Join(repo, ".git", "index")).Version; v != 3 {
		t.Fatalf("setup: index version %d, want 3", v)
	}
	writeFile(t, repo, "a.yaml", "v2 a\n")
	writeFile(t, repo, "new/x.yaml", "new\n")
	writeFile(t, repo, "d/0.yaml", "sorts first\n")
	if err := os.Remove(filepath.Join(repo, "gone.yaml")); err != nil {
		t.Fatal(err)
	}
	paths := []string{"a.yaml", "new/x.yaml", "d/0.yaml", "gone.yaml", "ita.yaml"}

	orig, err := os.ReadFile(filepath.Join(repo, ".git", "index"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := openRepo(repo)
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	files := map[string]*fileState{}
	for _, p := range paths {
		if files[p], err = r.readFile(p); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(repo, ".git", "index")
	if err := r.writeIndexRaw(file, files); err != nil {
		t.Fatal(err)
	}
	raw := decodeIndex(t, file)
	// The codec path, from the same starting index.
	if err := os.WriteFile(file, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	rawIndex = false
	err = r.updateIndex(files)
	rawIndex = true
	if err != nil {
		t.Fatal(err)
	}
	codec := decodeIndex(t, file)
	if len(raw.Entries) != len(codec.Entries) {
		t.Fatalf("raw writer: %d entries, codec: %d", len(raw.Entries), len(codec.Entries))
	}
	for i := range raw.Entries {
		a, b := *raw.Entries[i], *codec.Entries[i]
		if !reflect.DeepEqual(a, b) {
			t.Errorf("entry %d differs:\nraw   %+v\ncodec %+v", i, a, b)
		}
	}
	if raw.Cache != nil {
		t.Error("the raw writer kept the cache-tree extension, which no longer matches")
	}

	// git reads the raw index and agrees: a real commit through it.
	if err := os.WriteFile(file, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := commitDir(ctx, repo, paths, "change", Signature{Name: "t", Email: "t@t"}); err != nil {
		t.Fatal(err)
	}
	if st := gitcli.Run(t, repo, "status", "--porcelain", "--untracked-files=all"); st != "M  other.txt" {
		t.Fatalf("git status after commit = %q, want only the unrelated staged change", st)
	}
	if got := gitcli.Run(t, repo, "show", "--name-status", "--format=", "HEAD"); got != strings.Join([]string{
		"M\ta.yaml", "A\td/0.yaml", "D\tgone.yaml", "A\tita.yaml", "A\tnew/x.yaml"}, "\n") {
		t.Fatalf("commit holds:\n%s", got)
	}
	gitcli.Run(t, repo, "fsck", "--strict", "--no-dangling")
}

// TestRawIndexConflictAndFallback: committing a path with conflict stages
// resolves it; an index the raw writer does not handle (version 4) goes
// through the codec and still commits cleanly; a corrupt index is an error,
// never silently replaced.
func TestRawIndexConflictAndFallback(t *testing.T) {
	ctx := context.Background()
	repo := t.TempDir()
	gitcli.Run(t, repo, "init", "-q", "-b", "main")
	writeFile(t, repo, "f.yaml", "base\n")
	writeFile(t, repo, "g.yaml", "g\n")
	gitcli.Run(t, repo, "add", "-A")
	gitcli.Run(t, repo, "commit", "-q", "-m", "base")
	gitcli.Run(t, repo, "checkout", "-q", "-b", "side")
	writeFile(t, repo, "f.yaml", "side\n")
	gitcli.Run(t, repo, "commit", "-q", "-am", "side")
	gitcli.Run(t, repo, "checkout", "-q", "main")
	writeFile(t, repo, "f.yaml", "main\n")
	gitcli.Run(t, repo, "commit", "-q", "-am", "main")
	cmd := []string{"merge", "-q", "side"}
	if out, err := gitcli.Output(repo, cmd...); err == nil {
		t.Fatalf("setup: the merge should conflict:\n%s", out)
	}
	writeFile(t, repo, "f.yaml", "resolved\n")
	if _, err := commitDir(ctx, repo, []string{"f.yaml"}, "resolve", Signature{Name: "t", Email: "t@t"}); err != nil {
		t.Fatal(err)
	}
	if st := gitcli.Run(t, repo, "ls-files", "--unmerged"); st != "" {
		t.Fatalf("conflict stages left:\n%s", st)
	}
	assertSynced(t, repo)

	gitcli.Run(t, repo, "update-index", "--index-version", "4")
	writeFile(t, repo, "g.yaml", "g2\n")
	if _, err := commitDir(ctx, repo, []string{"g.yaml"}, "v4", Signature{Name: "t", Email: "t@t"}); err != nil {
		t.Fatal(err)
	}
	assertClean(t, repo)

	file := filepath.Join(repo, ".git", "index")
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	gitcli.Run(t, repo, "update-index", "--index-version", "2")
	b, _ = os.ReadFile(file)
	b[len(b)/2] ^= 0xff
	if _, _, err := parseIndex(b); err == nil || errors.Is(err, errIndexFallback) {
		t.Fatalf("corrupt index: err = %v, want a checksum error", err)
	}
}
