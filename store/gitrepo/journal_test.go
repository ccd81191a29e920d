package gitrepo

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/pemdev/pem/store/storetest/gitcli"
)

func TestJournaledSeries(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	gitcli.Run(t, dir, "init", "-q", "-b", "main")
	writeFile(t, dir, "a.yaml", "a\n")
	if _, err := commitDir(ctx, dir, []string{"a.yaml"}, "a", testSig); err != nil {
		t.Fatal(err)
	}
	r, err := Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	reqs := []CommitRequest{{Paths: []string{"c.yaml", "b.yaml"}, Message: "b and c"}, {Paths: []string{"d.yaml"}, Message: "d"}}

	// Nothing journaled: nothing to recover.
	if hs, found, err := r.RecoverSeries(ctx, "test", testSig); err != nil || found || hs != nil {
		t.Fatalf("RecoverSeries with no journal = %v, %v, %v", hs, found, err)
	}

	// Journaled, then killed after writing only b and c: the next command
	// makes the first commit; d holds no change and makes none.
	if _, err := r.BeginSeries("test", reqs); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(r.JournalPath("test")); err != nil {
		t.Fatalf("no journal after BeginSeries: %v", err)
	}
	if reqs[0].Paths[0] != "b.yaml" {
		t.Errorf("journaled paths not sorted: %v", reqs[0].Paths)
	}
	writeFile(t, dir, "b.yaml", "b\n")
	writeFile(t, dir, "c.yaml", "c\n")
	r2, err := Open(ctx, dir) // the next command
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	hs, found, err := r2.RecoverSeries(ctx, "test", testSig)
	if err != nil || !found || len(hs) != 2 || hs[0] == "" || hs[1] != "" {
		t.Fatalf("RecoverSeries = %v, %v, %v; want one commit", hs, found, err)
	}
	if s := gitcli.Run(t, dir, "log", "-1", "--format=%s"); s != "b and c" {
		t.Fatalf("HEAD is %q", s)
	}
	if _, err := os.Stat(r2.JournalPath("test")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("journal left after recovery: %v", err)
	}
	assertClean(t, dir)

	// A whole series: Commit makes the commits and removes the journal.
	s, err := r2.BeginSeries("test", []CommitRequest{{Paths: []string{"d.yaml"}, Message: "d"}})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "d.yaml", "d\n")
	if hs, err := s.Commit(ctx, testSig); err != nil || len(hs) != 1 || hs[0] == "" {
		t.Fatalf("Series.Commit = %v, %v", hs, err)
	}
	if _, err := os.Stat(r2.JournalPath("test")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("journal left after Commit: %v", err)
	}
	assertClean(t, dir)

	// A foreign journal is set aside, not trusted.
	if err := os.WriteFile(r2.JournalPath("test"), []byte(`{"format":9}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, found, err := r2.RecoverSeries(ctx, "test", testSig); !found || !errors.Is(err, ErrBadJournal) {
		t.Fatalf("RecoverSeries of a foreign journal = %v, %v; want ErrBadJournal", found, err)
	}
	if _, err := os.Stat(r2.JournalPath("test") + ".bad"); err != nil {
		t.Fatalf("foreign journal not set aside: %v", err)
	}
}
