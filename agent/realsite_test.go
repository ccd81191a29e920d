package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pemdev/pem/agent"
	"github.com/pemdev/pem/consolidate"
	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store"
	"github.com/pemdev/pem/store/gitrepo"
)

// The real-site fixture: Sphinx documentation of Flask and Jinja as Debian
// ships it (agent/testdata/realsite), served on 127.0.0.1, eleven
// information-seeking tasks one or two links from each start page. The
// test runs them cold, consolidates, runs them warm (replayed), consolidates,
// and runs them once more on a drifted copy of the pages.

type siteTask struct {
	ID, Site, Task, Want string
}

func loadSiteTasks(t *testing.T, file string) []siteTask {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []siteTask
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return out
}

// rightAnswer judges an answer: it holds the expected text (whitespace and
// case aside) and is not a whole page.
func rightAnswer(answer, want string) bool {
	norm := func(s string) string { return strings.ToLower(strings.Join(strings.Fields(s), " ")) }
	return answer != "" && len(answer) <= 600 && strings.Contains(norm(answer), norm(want))
}

var (
	idAttr    = regexp.MustCompile(`\bid="([^"]+)"`)
	classAttr = regexp.MustCompile(`\bclass="([^"]+)"`)
)

// drift renames every id and class and wraps the body in one more element;
// the text is unchanged.
func drift(html string) string {
	html = idAttr.ReplaceAllString(html, `id="d-$1"`)
	html = classAttr.ReplaceAllStringFunc(html, func(m string) string {
		cs := strings.Fields(m[len(`class="`) : len(m)-1])
		for i := range cs {
			cs[i] = "d-" + cs[i]
		}
		return `class="` + strings.Join(cs, " ") + `"`
	})
	html = strings.Replace(html, "<body>", `<body><div class="d-wrap">`, 1)
	return strings.Replace(html, "</body>", "</div></body>", 1)
}

// docServer serves dir's sites under /<site>/; missing pages answer 404.
func docServer(t *testing.T, root fs.FS, drifted *bool) string {
	t.Helper()
	files := http.FileServer(http.FS(root))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The browser must see the drifted copy, not a cached original.
		w.Header().Set("Cache-Control", "no-store")
		if drifted != nil && *drifted && strings.HasSuffix(r.URL.Path, ".html") {
			data, err := fs.ReadFile(root, strings.TrimPrefix(path.Clean(r.URL.Path), "/"))
			if err != nil {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(w, drift(string(data)))
			return
		}
		files.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

type siteWorld struct {
	st   *store.Store
	eng  *engine.Engine
	page agent.Page
	logs *bytes.Buffer
	w    *world // for the clock
}

func newSiteWorld(t *testing.T) *siteWorld {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	if _, err := store.Init(ctx, dir); err != nil {
		t.Fatal(err)
	}
	if err := gitrepo.Init(ctx, dir); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	w := &world{clock: time.Now().UTC().Add(-time.Hour)}
	sw := &siteWorld{st: st, w: w, logs: &bytes.Buffer{}, eng: &engine.Engine{Store: st, Writer: "e2e", Now: w.now}}
	sw.page, err = browser.NewPage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sw.page.Close() })
	return sw
}

func (sw *siteWorld) run(t *testing.T, base string, k siteTask, session string) *agent.RunResult {
	t.Helper()
	res, err := agent.Run(context.Background(), agent.RunConfig{
		Engine: sw.eng, Page: sw.page, Planner: agent.NewExplore(), Task: k.Task,
		StartURL: base + "/" + k.Site + "/index.html", Session: session, Now: sw.w.now,
		Logger: slog.New(slog.NewTextHandler(sw.logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
	})
	if err != nil {
		t.Fatalf("%s: %v", k.ID, err)
	}
	return res
}

func (sw *siteWorld) consolidate(t *testing.T) {
	t.Helper()
	if _, err := consolidate.Run(context.Background(), sw.st, consolidate.Options{Now: sw.w.now}); err != nil {
		t.Fatalf("consolidate: %v", err)
	}
}

// roundScore runs every task once and reports right answers, wrong answers
// recorded as success and wrong answers served by a replay.
type roundScore struct {
	right, wrongSuccess, wrongReplay, planner int
	tiers                                     map[engine.Tier]int
}

func (sw *siteWorld) round(t *testing.T, name, base string, tasks []siteTask, session string) (roundScore, map[string]*agent.RunResult) {
	t.Helper()
	sc := roundScore{tiers: map[engine.Tier]int{}}
	out := map[string]*agent.RunResult{}
	for _, k := range tasks {
		res := sw.run(t, base, k, session)
		out[k.ID] = res
		ok := rightAnswer(res.Answer, k.Want)
		sc.tiers[res.Tier]++
		sc.planner += res.PlannerCalls
		if ok && res.Success {
			sc.right++
		}
		if !ok && res.Success {
			sc.wrongSuccess++
			if (res.Tier == engine.P1 || res.Tier == engine.P2) && !res.HandedOver {
				sc.wrongReplay++
			}
		}
		mark := "right"
		if !ok || !res.Success {
			mark = "WRONG"
		}
		t.Logf("%s %-18s %s %-5s tier %s planner %d steps %d answer %q category %s", name, k.ID, mark, fmt.Sprint(res.Success), res.Tier,
			res.PlannerCalls, res.Steps, oneLineT(res.Answer, 90), res.FailureCategory)
		if mark == "WRONG" && testing.Verbose() {
			t.Logf("  trace of %s:\n    %s", k.ID, strings.Join(res.ActionLog, "\n    "))
		}
	}
	t.Logf("%s: %d/%d right, %d wrong recorded as success, %d wrong served by replay, %d planner calls, tiers %v",
		name, sc.right, len(tasks), sc.wrongSuccess, sc.wrongReplay, sc.planner, sc.tiers)
	return sc, out
}

func oneLineT(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}

// TestRealSiteColdWarm is the real-site goal: cold ≥ 8 of the tasks right,
// warm ≥ cold, no wrong answer recorded as success or served by a replay,
// and the drifted copy answered right with the drift recorded.
func TestRealSiteColdWarm(t *testing.T) {
	tasks := loadSiteTasks(t, "testdata/realsite/tasks.json")
	drifted := false
	base := docServer(t, os.DirFS("testdata/realsite"), &drifted)
	sw := newSiteWorld(t)

	cold, _ := sw.round(t, "cold", base, tasks, "cold")
	sw.consolidate(t)
	// One session's successes earn hints (P3): the planner runs with the
	// Memory section. A second session's make the routes P2: replayed.
	warm, _ := sw.round(t, "warm", base, tasks, "warm")
	sw.consolidate(t)
	replay, _ := sw.round(t, "replay", base, tasks, "replay")
	sw.consolidate(t)
	drifted = true
	dr, dres := sw.round(t, "drift", base, tasks, "drift")

	if cold.right < 8 {
		t.Errorf("cold: %d of %d right, want ≥ 8", cold.right, len(tasks))
	}
	if warm.right < cold.right {
		t.Errorf("warm: %d right, fewer than cold (%d)", warm.right, cold.right)
	}
	if replay.right < cold.right {
		t.Errorf("replay: %d right, fewer than cold (%d)", replay.right, cold.right)
	}
	for name, sc := range map[string]roundScore{"cold": cold, "warm": warm, "replay": replay, "drift": dr} {
		if sc.wrongSuccess > 0 || sc.wrongReplay > 0 {
			t.Errorf("%s: %d wrong answers recorded as success, %d served by replay", name, sc.wrongSuccess, sc.wrongReplay)
		}
	}
	if warm.tiers[engine.P2]+warm.tiers[engine.P1] != 0 {
		t.Errorf("warm replayed on one session's evidence: tiers %v", warm.tiers)
	}
	if replay.tiers[engine.P2]+replay.tiers[engine.P1] == 0 {
		t.Errorf("the third round replayed nothing: tiers %v", replay.tiers)
	}
	if dr.right < cold.right {
		t.Errorf("drift: %d right, fewer than cold (%d)", dr.right, cold.right)
	}
	drifts := 0
	for _, res := range dres {
		for _, f := range res.Recovered {
			if f.Category == engine.SelectorDrift {
				drifts++
			}
		}
	}
	if drifts == 0 {
		t.Errorf("drift: no selector drift recorded")
	}
}
