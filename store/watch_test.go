package store_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store"
)

// TestKeptAnswersSeeEveryChange: an engine over a store with its change
// watch answers exactly as one over a store without it (which stats every
// file), through every kind of change to the tree — an edit in place within
// the racy window with the mtime put back, a replacement by rename, another
// process's save, a trace in a new day directory, pem.yaml, a deletion —
// while it serves kept answers between changes; a change in another domain,
// or a temporary file, keeps them.
func TestKeptAnswersSeeEveryChange(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the change watch is inotify: Linux only (elsewhere Generation says no and nothing is kept)")
	}
	ctx := context.Background()
	st := openTree(t)
	dir := st.Root()
	const url, intent, domain = "https://example.com/pemdev/pem/issues", "count open issues", "example.com"
	key := engine.IntentKey(intent)
	now := time.Now().UTC()
	for _, d := range []string{domain, "other.org"} {
		f := &engine.Facts{Format: 1, Domain: d, Intent: intent, IntentKey: key, Status: engine.Verified,
			URLPatterns: []string{"/*/*/issues"}, Steps: []engine.Step{{Seq: 1, Action: "get_text", Selector: "#issues-count"}},
			Provenance: engine.Provenance{LastVerified: now.Add(-time.Hour)}}
		if _, err := st.PutFacts(ctx, f); err != nil {
			t.Fatal(err)
		}
		x := &engine.Experience{Format: 1, Domain: d, Intent: intent, IntentKey: key}
		for i := 0; i < 6; i++ {
			x.Evidence = append(x.Evidence, engine.Evidence{Trace: fmt.Sprintf("01JB%022d", i), At: now.Add(-time.Duration(i+1) * time.Hour),
				Outcome: engine.Success, Session: fmt.Sprintf("s%d", i%2), Steps: 1})
		}
		if _, err := st.PutExperience(ctx, x); err != nil {
			t.Fatal(err)
		}
	}
	kept := engine.New(st)
	served := func() int { n, _ := kept.KeptAnswers(); return n }
	answer := func(e *engine.Engine) string {
		t.Helper()
		r, err := e.Query(ctx, url, intent)
		if err != nil {
			t.Fatal(err)
		}
		j, _ := json.Marshal(r)
		return string(j)
	}
	// The reference: a new store for every answer, with no watch.
	want := func() string {
		t.Helper()
		s, err := store.Open(dir, &store.Options{NoWatch: true})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		return answer(engine.New(s))
	}
	gen := func() uint64 {
		t.Helper()
		g, ok := st.Generation(ctx, domain)
		if !ok {
			t.Fatal("Generation: no change watch on a local file system: are inotify instances or watches used up? (/proc/sys/fs/inotify/max_user_instances, max_user_watches)")
		}
		return g
	}
	answer(kept) // an Engine's first query keeps nothing,
	answer(kept) // its second computes the answer it keeps
	last := gen()
	check := func(what string, changes bool) {
		t.Helper()
		g := gen()
		if changes && g == last {
			t.Errorf("%s: the generation of %s did not move", what, domain)
		}
		if !changes && g != last {
			t.Errorf("%s: the generation of %s moved", what, domain)
		}
		last = g
		before := served()
		if got, w := answer(kept), want(); got != w {
			t.Errorf("%s: the answer\n %s\nwant %s", what, got, w)
		}
		if got, w := answer(kept), want(); got != w {
			t.Errorf("%s, asked again: the answer\n %s\nwant %s", what, got, w)
		}
		if n := served() - before; changes && n != 1 || !changes && n != 2 {
			t.Errorf("%s: %d of 2 answers were kept ones, want %d", what, n, map[bool]int{true: 1, false: 2}[changes])
		}
		last = gen()
	}
	check("nothing changed", false)

	facts := filepath.Join(dir, filepath.FromSlash(store.FactsPath(domain, key)))
	fi, err := os.Stat(facts)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(facts)
	edited := bytes.Replace(data, []byte("#issues-count"), []byte("#issues-total"), 1)
	if err := os.WriteFile(facts, edited, 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(facts, fi.ModTime(), fi.ModTime()) // same size, same mtime: only ctime and the event tell
	check("an edit in place with its mtime put back", true)

	tmp := facts + ".new"
	os.WriteFile(tmp, bytes.Replace(edited, []byte("#issues-total"), []byte("#open-issues"), 1), 0o644)
	if err := os.Rename(tmp, facts); err != nil {
		t.Fatal(err)
	}
	check("a replacement by rename", true)

	other := filepath.Join(dir, filepath.FromSlash(store.FactsPath("other.org", key)))
	data, _ = os.ReadFile(other)
	os.WriteFile(other, bytes.Replace(data, []byte("#issues-count"), []byte("#elsewhere"), 1), 0o644)
	check("a change in another domain", false)

	os.WriteFile(filepath.Join(filepath.Dir(facts), ".scratch.tmp"), []byte("x"), 0o644)
	check("a temporary (dot) file beside the facts", false)

	child := exec.Command(os.Args[0], "-test.run=^TestHelperSaver$")
	child.Env = append(os.Environ(), envTree+"="+dir, envCount+"=1", envName+"=w")
	if out, err := child.CombinedOutput(); err != nil {
		t.Fatalf("the saving child: %v\n%s", err, out)
	}
	check("another process saved a run (and patched the facts)", true)

	s2, err := store.Open(dir, &store.Options{NoWatch: true})
	if err != nil {
		t.Fatal(err)
	}
	tr := &engine.Trace{Format: 1, ID: "01JB0000000000000000000099", Domain: domain, Intent: intent, IntentKey: key,
		URL: url, StartedAt: now.Add(-50 * time.Hour), Outcome: engine.Failure, Steps: []engine.Step{{Seq: 1, Action: "get_text", Selector: "#issues-count"}}}
	if _, err := s2.PutTrace(ctx, tr); err != nil {
		t.Fatal(err)
	}
	s2.Close()
	check("a trace in a new day directory", true)

	cfg := filepath.Join(dir, "pem.yaml")
	data, _ = os.ReadFile(cfg)
	os.WriteFile(cfg, bytes.Replace(data, []byte("half_life_days: 30"), []byte("half_life_days: 7"), 1), 0o644)
	check("pem.yaml", true)

	if err := os.Remove(filepath.Join(dir, filepath.FromSlash(store.ExperiencePath(domain, key)))); err != nil {
		t.Fatal(err)
	}
	check("the experience deleted", true)

	if err := os.RemoveAll(filepath.Join(dir, "traces", domain)); err != nil {
		t.Fatal(err)
	}
	check("the domain's traces deleted", true)
}

// TestKeptAnswersConcurrent: queries from several goroutines while another
// saves runs into the entry (go test -race checks the kept answers and the
// watch): once the saves are done, every query answers as a store without
// the watch does, with all the runs counted.
func TestKeptAnswersConcurrent(t *testing.T) {
	ctx := context.Background()
	st := openTree(t)
	dir := st.Root()
	const url, intent = "https://example.com/pemdev/pem/issues", "count open issues"
	e := engine.New(st)
	save := func() {
		if _, err := e.Save(ctx, engine.SaveRequest{URL: url, Intent: intent,
			Trace: &engine.TraceInput{Steps: []engine.StepInput{{Action: "get_text", Selector: "#issues-count"}}}}); err != nil {
			t.Error(err)
		}
	}
	save()
	done := make(chan struct{})
	errs := make(chan error, 4)
	for g := 0; g < 4; g++ {
		go func() {
			for {
				select {
				case <-done:
					errs <- nil
					return
				default:
				}
				if _, err := e.Query(ctx, url, intent); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for i := 0; i < 20; i++ {
		save()
	}
	close(done)
	for g := 0; g < 4; g++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	ref, err := store.Open(dir, &store.Options{NoWatch: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	want, err := engine.New(ref).Query(ctx, url, intent)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		got, err := e.Query(ctx, url, intent)
		if err != nil {
			t.Fatal(err)
		}
		gj, _ := json.Marshal(got)
		wj, _ := json.Marshal(want)
		if string(gj) != string(wj) || got.SuccessCount != 21 {
			t.Fatalf("after the saves (%d successes, want 21):\n %s\nwant %s", got.SuccessCount, gj, wj)
		}
	}
}
