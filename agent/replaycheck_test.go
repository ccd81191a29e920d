package agent_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/pemdev/pem/agent"
	"github.com/pemdev/pem/engine"
)

// A tea shop whose pages change under a learned route, in real Chromium:
// the route's link id moves to another link (the selector still resolves:
// the fingerprint must catch it), and the answer's paragraph is preceded by
// another one under another heading (the selector still reads a number:
// the success condition must catch it).
func teaShop(mode *atomic.Int32) http.Handler {
	page := func(w http.ResponseWriter, body string) {
		w.Header().Set("Cache-Control", "no-store")
		fmt.Fprintf(w, "<!doctype html><html><head><title>Tea shop</title></head><body><main>%s</main></body></html>", body)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m := mode.Load()
		switch r.URL.Path {
		case "/":
			if m == 2 {
				page(w, `<h1>Tea shop</h1><p><a id="go" href="/about">About us</a></p><p><a href="/prices">Tea prices</a></p>`)
				return
			}
			page(w, `<h1>Tea shop</h1><p><a id="go" href="/prices">Tea prices</a></p><p><a href="/about">About us</a></p>`)
		case "/prices":
			if m == 3 {
				page(w, `<h1>Prices</h1><h2>Coffee</h2><p>Coffee costs 3 EUR per pack.</p><h2>Tea</h2><p>Tea costs 4 EUR per pack.</p>`)
				return
			}
			page(w, `<h1>Prices</h1><h2>Tea</h2><p>Tea costs 4 EUR per pack.</p>`)
		case "/about":
			page(w, `<h1>About us</h1><p>A family business since 1990.</p>`)
		default:
			http.NotFound(w, r)
		}
	})
}

func TestReplayChecksTargetAndSuccessCondition(t *testing.T) {
	var mode atomic.Int32
	mode.Store(1)
	srv := httptest.NewServer(teaShop(&mode))
	t.Cleanup(srv.Close)
	sw := newSiteWorld(t)
	k := siteTask{ID: "tea", Task: "How much does tea cost?", Want: "4 EUR"}
	run := func(session string) *agent.RunResult {
		t.Helper()
		res, err := agent.Run(t.Context(), agent.RunConfig{Engine: sw.eng, Page: sw.page, Planner: agent.NewExplore(),
			Task: k.Task, StartURL: srv.URL + "/", Session: session, Now: sw.w.now})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	for _, s := range []string{"a", "b"} {
		if res := run(s); !res.Success || !rightAnswer(res.Answer, k.Want) {
			t.Fatalf("learning run %s: %q success %v\n%s", s, res.Answer, res.Success, strings.Join(res.ActionLog, "\n"))
		}
		sw.consolidate(t)
	}

	check := func(name string, want engine.FailureCategory) {
		t.Helper()
		res := run(name)
		log := strings.Join(res.ActionLog, "\n")
		if res.Tier != engine.P2 && res.Tier != engine.P1 {
			t.Fatalf("%s: tier %s, want a replay\n%s", name, res.Tier, log)
		}
		if !res.Success || !rightAnswer(res.Answer, k.Want) || !res.HandedOver || res.PlannerCalls == 0 {
			t.Fatalf("%s: answer %q success %v handed over %v planner calls %d\n%s", name, res.Answer, res.Success, res.HandedOver, res.PlannerCalls, log)
		}
		found := false
		for _, f := range res.Recovered {
			found = found || f.Category == want
		}
		if !found {
			t.Fatalf("%s: recovered %+v, want a %s\n%s", name, res.Recovered, want, log)
		}
	}
	mode.Store(2) // #go now finds "About us"
	check("moved-id", engine.SelectorDrift)
	mode.Store(3) // the recorded paragraph selector now reads the coffee price
	check("moved-answer", engine.SuccessConditionFailed)
}
