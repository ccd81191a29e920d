package bench

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/pemdev/pem/agent/demosite"
	"github.com/pemdev/pem/engine"
)

// BenchmarkDemoP1VsCold runs pem demo's six rounds on the demo site (round
// 1 cold, then P3, P2 ×3 and P1 in round 6), in one tab of the package's
// browser, and reports the P1 round's wall time against the cold round's,
// both measured in the same iteration (the goal is p1/cold ≤ 0.3). An
// iteration takes a minute or two:
//
//	go test ./agent/bench -run '^$' -bench DemoP1VsCold -benchtime 1x
func BenchmarkDemoP1VsCold(b *testing.B) {
	ctx := context.Background()
	var cold, p1, checks, actions, answer float64
	n := 0
	for b.Loop() {
		h, err := Start(ctx, browser, nil)
		if err != nil {
			b.Fatal(err)
		}
		on, _ := arm(b, fmt.Sprintf("on-%d", n))
		runs, err := h.Demo(ctx, on, DemoOptions{Rounds: 6, Variant: demosite.Stable})
		h.Close()
		if err != nil {
			b.Fatal(err)
		}
		rs := Rounds(runs)
		if len(rs) != 6 || rs[5].Tiers[engine.P1] != rs[5].Runs {
			b.Fatalf("round 6 is not all P1: %+v", rs)
		}
		for _, r := range runs {
			if !r.Success {
				b.Fatalf("round %d %s failed: %s", r.Round, r.Task, r.Error)
			}
		}
		cold, p1 = cold+rs[0].Seconds, p1+rs[5].Seconds
		checks, actions, answer = checks+rs[5].Phases.Checks, actions+rs[5].Phases.Actions, answer+rs[5].Phases.Answer
		n++
	}
	load, _ := os.ReadFile("/proc/loadavg")
	b.Logf("load average %s", strings.Join(strings.Fields(string(load))[:3], " "))
	f := float64(n)
	b.ReportMetric(p1/cold, "p1/cold")
	b.ReportMetric(cold/f, "cold-s")
	b.ReportMetric(p1/f, "p1-s")
	b.ReportMetric(actions/f, "p1-actions-s")
	b.ReportMetric(checks/f, "p1-checks-s")
	b.ReportMetric(answer/f, "p1-answer-s")
}
