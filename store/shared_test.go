package store_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store/storetest"
)

// TestSharedExperienceUntouched: the engine reads experiences without a
// copy (ExperienceShared) on its query path; no query, memory, list or
// entry view modifies the store's cached value, and a view handed out
// (Entry, Entries) is the caller's own.
func TestSharedExperienceUntouched(t *testing.T) {
	ctx := context.Background()
	s := openLater(t, newTree(t).Root())
	const domain = "example.com"
	intents := []string{"find the stars", "find the stars count", "find the forks"}
	for i, in := range intents {
		x := storetest.NewExperience(domain, in)
		for j := range 3 + i {
			tr := storetest.NewTrace(domain, in, time.Date(2025, 6, 2, 10, j, 0, 0, time.UTC), int64(100*i+j+10))
			tr.Outcome, tr.FailureCategory = engine.Success, ""
			tr.Result.Answer = "42"
			x.Fold(tr)
		}
		if _, err := s.PutExperience(ctx, x); err != nil {
			t.Fatal(err)
		}
		f := storetest.NewFacts(domain, in)
		if _, err := s.PutFacts(ctx, f); err != nil {
			t.Fatal(err)
		}
		// An unfolded run too, so a query merges pending evidence and answers.
		tr := storetest.NewTrace(domain, in, time.Date(2025, 6, 3, 10, 0, 0, 0, time.UTC), int64(1000+i))
		tr.Outcome, tr.FailureCategory, tr.Result.Answer = engine.Success, "", "43"
		if _, err := s.PutTrace(ctx, tr); err != nil {
			t.Fatal(err)
		}
	}
	snap := map[string]*engine.Experience{}
	shared := map[string]*engine.Experience{}
	for _, in := range intents {
		k := engine.IntentKey(in)
		x, err := s.ExperienceShared(ctx, domain, k)
		if err != nil {
			t.Fatal(err)
		}
		shared[k], snap[k] = x, x.Clone()
	}
	// Queries far enough in the future that the entries fall below P2, so
	// related routes (other entries' experiences) are read too.
	for _, now := range []time.Time{time.Date(2025, 6, 4, 0, 0, 0, 0, time.UTC), time.Date(2026, 6, 4, 0, 0, 0, 0, time.UTC)} {
		e := engine.New(s)
		e.Now = func() time.Time { return now }
		for _, in := range append(intents, "find stars", "") {
			if _, err := e.Query(ctx, "https://"+domain+"/pemdev/pem", in); err != nil {
				t.Fatal(err)
			}
			if _, err := e.Memory(ctx, "https://"+domain+"/pemdev/pem", in, 4000); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := e.List(ctx, engine.ListRequest{}); err != nil {
			t.Fatal(err)
		}
		views, _, err := e.Entries(ctx, domain)
		if err != nil {
			t.Fatal(err)
		}
		v, err := e.Entry(ctx, domain, engine.IntentKey(intents[0]))
		if err != nil {
			t.Fatal(err)
		}
		views = append(views, v)
		for _, v := range views {
			if v.Experience == nil {
				t.Fatalf("entry view %s has no experience", v.IntentKey)
			}
			if v.Experience == shared[v.IntentKey] {
				t.Fatalf("entry view %s hands out the store's shared experience", v.IntentKey)
			}
			// The caller may do what it likes with its view.
			v.Experience.Evidence[0].Outcome = "scribbled"
			v.Experience.Patterns["/*/*"].OK = -1
			v.Experience.Answers = nil
		}
	}
	for k, x := range shared {
		again, err := s.ExperienceShared(ctx, domain, k)
		if err != nil {
			t.Fatal(err)
		}
		if again != x {
			t.Fatalf("%s: the cache decoded the experience again (the test would not see a change)", k)
		}
		if !reflect.DeepEqual(x, snap[k]) {
			t.Errorf("%s: the store's shared experience was modified by a read", k)
		}
	}
}
