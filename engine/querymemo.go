package engine

import (
	"math"
	"sync"
	"time"
)

// Kept answers. A warm query of an entry nothing changed in computes the
// same recall again: the same files, the same rules. When the Store can
// tell that nothing a query read has changed (ChangeWatch: the disk store
// watches the tree's directories), the engine keeps each answer and serves
// a copy of it while
//
//   - the store's generation of the domain is the one the answer was
//     computed under (taken before the query read anything, and the same
//     again after it), and
//   - the clock is inside the answer's window [from, until): confidence
//     decays with time, so an answer holds only until its confidence could
//     cross a tier threshold or change in its second decimal (what the
//     recall and its reasons print). until is computed from the evidence
//     (stableUntil), for the entry and for each related route.
//
// So a kept answer is the answer the query would compute — the tests in
// querymemo_test.go check it against a store that keeps nothing, across
// threshold crossings, edits, and another process's saves. The first query
// of an Engine keeps nothing (a one-shot CLI query never starts the
// store's watch).

// maxKept bounds the kept answers (then they start over); maxKeptLife
// bounds how long one is kept even when nothing decays.
const (
	maxKept     = 1 << 14
	maxKeptLife = time.Hour
)

type keptAnswer struct {
	domain      string
	gen         uint64
	from, until time.Time
	r           *Recall
}

type keptAnswers struct {
	mu               sync.Mutex
	m                map[string]*keptAnswer
	queries          int
	served, computed int
}

// KeptAnswers reports how many queries this Engine answered with a kept
// answer (served) and how many it computed while it could keep them
// (computed: the first query of an Engine, and every query without a
// ChangeWatch, count in neither).
func (e *Engine) KeptAnswers() (served, computed int) {
	e.kept.mu.Lock()
	defer e.kept.mu.Unlock()
	return e.kept.served, e.kept.computed
}

func (k *keptAnswers) count(served bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if served {
		k.served++
	} else {
		k.computed++
	}
}

// first reports whether this is the Engine's first query.
func (k *keptAnswers) first() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.queries++
	return k.queries == 1
}

func (k *keptAnswers) get(key string) *keptAnswer {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.m[key]
}

func (k *keptAnswers) put(key string, a *keptAnswer) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.m == nil || len(k.m) >= maxKept {
		k.m = make(map[string]*keptAnswer)
	}
	k.m[key] = a
}

// stableUntil is the time until which the score of ev and d, computed at
// now as sc, prints and decides alike: its confidence stays above the
// highest tier threshold or rounding boundary it is above now (the zero
// time: no such window, keep nothing). It holds when every weight decays
// at one rate from now on — all evidence at or before now, the digest's
// half-life the policy's — since then S and F shrink by one factor, S/(S+F)
// stays, and confidence only falls.
func stableUntil(ev []Evidence, d *Digest, now time.Time, p Policy, sc Score) time.Time {
	keep := now.Add(maxKeptLife)
	if sc.Runs() == 0 {
		return keep // no runs: P5, nothing decays
	}
	for i := range ev {
		if ev[i].At.After(now) {
			return time.Time{}
		}
	}
	h := p.HalfLifeDays
	if d != nil && (d.HalfLifeDays > 0 && d.HalfLifeDays != h || d.Before.After(now)) {
		return time.Time{}
	}
	c, c1 := sc.Confidence, p.FirstSuccessConfidence
	if sc.S <= 0 || c1 <= 0 || c1 >= 1 || h <= 0 || math.IsInf(h, 0) {
		return keep // confidence 0, or S/(S+F) whatever S is: it does not move
	}
	// The highest value below c where what is printed or decided changes:
	// a threshold of DecideTier (c ≥ t holds now) or the boundary of c's
	// second decimal (round2, %.2f).
	const margin = 1e-6
	level := (float64(int64(c*100+0.5)) - 0.5) / 100
	for _, t := range []float64{p.P1, p.P2, p.P3} {
		if t <= c && t > level {
			level = t
		}
	}
	target := level + margin
	if c <= target+margin {
		return time.Time{} // on a boundary now
	}
	if target <= 0 {
		return keep
	}
	// c(a) = (1 − (1−c1)^(a·S)) · R with R = S/(S+F) and a the decay factor
	// from now: solve c(a) = target for a, then 0.5^(days/h) = a for days.
	R := sc.S / (sc.S + sc.F)
	x := 1 - target/R
	if x <= 0 || x >= 1 {
		return time.Time{}
	}
	a := math.Log(x) / math.Log(1-c1) / sc.S
	if !(a > 0 && a < 1) {
		return time.Time{}
	}
	days := h * math.Log2(1/a)
	wait := time.Duration(days*24*float64(time.Hour)) - time.Second
	if wait <= 0 {
		return time.Time{}
	}
	if until := now.Add(wait); until.Before(keep) {
		return until
	}
	return keep
}
