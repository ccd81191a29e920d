package engine

import (
	"fmt"
	"testing"
	"time"
)

// Benchmarks of an entry's evidence handling at 100, 1,000 and 3,000 items:
// each reports ns-per-item and the ratio of its time to the 100-item case
// measured in the same run (x-vs-100; linear handling keeps it near 10 and
// 30). Run: go test ./engine -run '^$' -bench 'Evidence' -benchtime 20x

var evidenceSizes = []int{100, 1000, 3000}

// benchEvidence is n runs over n/3 hours, a fifth failing, five sessions.
func benchEvidence(n int) []Evidence {
	base := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	ev := make([]Evidence, n)
	for i := range ev {
		e := Evidence{Trace: fmt.Sprintf("01J%023d", i), At: base.Add(time.Duration(i) * 20 * time.Minute),
			Outcome: Success, Session: fmt.Sprintf("s%d", i%5), URLPattern: "/item/*", Steps: 3, DurationMs: 900}
		if i%5 == 4 {
			e.Outcome, e.Category = Failure, SelectorDrift
		}
		ev[i] = e
	}
	// Stored order is by time; a merge or a hand edit can leave any order.
	for i := 0; i < n; i += 7 {
		j := (i * 31) % n
		ev[i], ev[j] = ev[j], ev[i]
	}
	return ev
}

// benchRatio runs f for each size and reports its time per call and the
// ratio to the smallest size's.
func benchRatio(b *testing.B, f func(b *testing.B, n int)) {
	var base float64
	for _, n := range evidenceSizes {
		var per float64
		b.Run(fmt.Sprintf("items=%d", n), func(b *testing.B) {
			f(b, n)
			per = float64(b.Elapsed()) / float64(b.N)
			b.ReportMetric(per/float64(n), "ns/item")
			if n == evidenceSizes[0] {
				base = per
			}
			if base > 0 {
				b.ReportMetric(per/base, "x-vs-100")
			}
		})
	}
}

// BenchmarkEvidenceConfidence: Confidence over an entry's evidence (the
// warm query's and consolidation's core).
func BenchmarkEvidenceConfidence(b *testing.B) {
	p := DefaultPolicy()
	now := time.Date(2025, 7, 1, 0, 0, 0, 0, time.UTC)
	benchRatio(b, func(b *testing.B, n int) {
		ev := benchEvidence(n)
		b.ResetTimer()
		for range b.N {
			if sc := Confidence(ev, now, p); sc.Runs() != n {
				b.Fatalf("counted %d runs of %d", sc.Runs(), n)
			}
		}
	})
}

// BenchmarkEvidenceFold: folding 10 new traces into an entry of n items
// (what consolidation does per entry).
func BenchmarkEvidenceFold(b *testing.B) {
	benchRatio(b, func(b *testing.B, n int) {
		ev := benchEvidence(n)
		sortEvidence(ev) // as stored: oldest first
		x := &Experience{Format: Format, Domain: "example.com", Intent: "t", IntentKey: "t", Evidence: ev}
		x.Recount()
		base := time.Date(2025, 8, 1, 0, 0, 0, 0, time.UTC)
		var ts []*Trace
		for i := range 10 {
			ts = append(ts, &Trace{Format: Format, ID: fmt.Sprintf("01K%023d", i), Domain: "example.com", Intent: "t", IntentKey: "t",
				Outcome: Success, StartedAt: base.Add(time.Duration(i) * time.Minute), Session: "s9",
				Steps: []Step{{Seq: 1, Action: "click", Selector: "#a", OK: true}}})
		}
		b.ResetTimer()
		for range b.N {
			y := x.Clone()
			for _, t := range ts {
				y.Fold(t)
			}
			if len(y.Evidence) != n+10 {
				b.Fatal("fold lost evidence")
			}
		}
	})
}

// BenchmarkEvidenceMerge: the merge driver's three-way merge of two copies
// that each added 10 items to a base of n.
func BenchmarkEvidenceMerge(b *testing.B) {
	benchRatio(b, func(b *testing.B, n int) {
		ev := benchEvidence(n)
		base := &Experience{Format: Format, Domain: "example.com", Intent: "t", IntentKey: "t", Evidence: ev}
		base.Recount()
		ours, theirs := base.Clone(), base.Clone()
		at := time.Date(2025, 8, 1, 0, 0, 0, 0, time.UTC)
		for i := range 10 {
			ours.Evidence = append(ours.Evidence, Evidence{Trace: fmt.Sprintf("01K%023d", i), At: at.Add(time.Duration(i) * time.Minute), Outcome: Success, Steps: 2})
			theirs.Evidence = append(theirs.Evidence, Evidence{Trace: fmt.Sprintf("01M%023d", i), At: at.Add(time.Duration(i) * time.Minute), Outcome: Success, Steps: 2})
		}
		ours.Recount()
		theirs.Recount()
		b.ResetTimer()
		for range b.N {
			m, err := MergeExperience(base, ours, theirs, nil)
			if err != nil || len(m.Evidence) != n+20 {
				b.Fatalf("merge: %v, %d items", err, len(m.Evidence))
			}
		}
	})
}
