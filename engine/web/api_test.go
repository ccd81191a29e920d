package web_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/pemdev/pem/consolidate"
	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/engine/web"
)

// call sends a request and decodes the JSON answer into v (nil: ignored).
func call(t testing.TB, method, u, token, body string, v any) int {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, u, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	if ct := res.Header.Get("Content-Type"); strings.Contains(u, "/api/") && !strings.HasPrefix(ct, "application/json") {
		t.Errorf("%s %s: Content-Type %q, want JSON", method, u, ct)
	}
	if v != nil {
		if err := json.Unmarshal(data, v); err != nil {
			t.Fatalf("%s %s: %v in %s", method, u, err, data)
		}
	}
	return res.StatusCode
}

type apiErr struct {
	Error  string `json:"error"`
	Code   int    `json:"code"`
	Status int    `json:"status"`
}

func TestAPIReads(t *testing.T) {
	tr := sample(t)
	srv := serve(t, tr, web.Options{})
	var list engine.ListResult
	if code := call(t, "GET", srv.URL+"/api/entries?filter=example.com&page_size=1&page=2", "", "", &list); code != 200 {
		t.Fatalf("status %d", code)
	}
	want, err := tr.eng.List(ctx, engine.ListRequest{Filter: "example.com", Page: 2, PageSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	if list.Total != 2 || list.TotalPages != 2 || len(list.Entries) != 1 || list.Entries[0].IntentKey != want.Entries[0].IntentKey {
		t.Errorf("list %+v, want %+v", list, want)
	}
	var view engine.EntryView
	if code := call(t, "GET", srv.URL+"/api/entries/example.com/"+url.PathEscape("star count"), "", "", &view); code != 200 {
		t.Fatalf("entry: status %d", code)
	}
	if view.IntentKey != "star-count" || len(view.Evidence) != 4 || view.Pending != 1 || !strings.HasPrefix(view.Memory, engine.MemoryHeader) {
		t.Errorf("entry: key %s, %d evidence, %d pending, memory %q", view.IntentKey, len(view.Evidence), view.Pending, view.Memory)
	}
	var r engine.Recall
	call(t, "GET", srv.URL+"/api/query?url="+url.QueryEscape(repo)+"&intent=star+count", "", "", &r)
	q, _ := tr.eng.Query(ctx, repo, "star count")
	if r.Tier != q.Tier || r.Confidence != q.Confidence || r.SuccessCount != 3 || r.FailureCount != 1 {
		t.Errorf("query %s %.2f %d/%d, engine %s %.2f", r.Tier, r.Confidence, r.SuccessCount, r.FailureCount, q.Tier, q.Confidence)
	}
	var m struct {
		Memory string `json:"memory"`
		Chars  int    `json:"chars"`
	}
	call(t, "GET", srv.URL+"/api/memory?url="+url.QueryEscape(repo)+"&intent=star+count&max_chars=300", "", "", &m)
	wantM, _ := tr.eng.Memory(ctx, repo, "star count", 300)
	if m.Memory != wantM || m.Chars != len([]rune(wantM)) || m.Chars > 300 {
		t.Errorf("memory (%d chars):\n%s\nwant:\n%s", m.Chars, m.Memory, wantM)
	}
	for _, c := range []struct {
		path         string
		status, code int
	}{
		{"/api/query?intent=x", 400, 2},
		{"/api/query?url=ftp://x/y", 400, 2},
		{"/api/entries?page=0", 400, 2},
		{"/api/entries?page_size=abc", 400, 2},
		{"/api/memory?url=" + url.QueryEscape(repo) + "&max_chars=-1", 400, 2},
		{"/api/entries/example.com/no-such-thing", 404, 4},
		{"/api/nothing", 404, 4},
		{"/entry/example.com/no-such-thing.html", 404, 4},
	} {
		var e apiErr
		var got int
		if strings.HasPrefix(c.path, "/api/") {
			got = call(t, "GET", srv.URL+c.path, "", "", &e)
		} else {
			got = call(t, "GET", srv.URL+c.path, "", "", nil)
			e.Code = c.code
		}
		if got != c.status || e.Code != c.code {
			t.Errorf("%s: status %d code %d (%s), want %d %d", c.path, got, e.Code, e.Error, c.status, c.code)
		}
	}
	var e apiErr
	if got := call(t, "POST", srv.URL+"/api/entries", "", "{}", &e); got != http.StatusMethodNotAllowed {
		t.Errorf("POST /api/entries: %d", got)
	}
}

func TestToken(t *testing.T) {
	tr := sample(t)
	srv := serve(t, tr, web.Options{Token: "s3cret-token"})
	for _, c := range []struct {
		name, token string
		want        int
	}{{"missing", "", 401}, {"wrong", "s3cret-tokeN", 401}, {"prefix", "s3cret", 401}, {"right", "s3cret-token", 200}} {
		var e apiErr
		got := call(t, "GET", srv.URL+"/api/entries", c.token, "", &e)
		if got != c.want {
			t.Errorf("%s token: status %d, want %d", c.name, got, c.want)
		}
		if got == 401 && (e.Code != 2 || !strings.Contains(e.Error, "Authorization header with the Bearer scheme")) {
			t.Errorf("%s token: error %+v", c.name, e)
		}
	}
	// Pages too; a browser gives the token once in the URL and gets a cookie.
	if got := call(t, "GET", srv.URL+"/", "", "", nil); got != 401 {
		t.Errorf("index without a token: %d", got)
	}
	jar := &cookieJar{}
	client := &http.Client{Jar: jar}
	res, err := client.Get(srv.URL + "/?token=s3cret-token")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !bytes.Contains(body, []byte("star count")) || strings.Contains(res.Request.URL.String(), "token=") {
		t.Errorf("?token=: status %d at %s", res.StatusCode, res.Request.URL)
	}
	res, err = client.Get(srv.URL + "/?token=wrong")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 401 {
		t.Errorf("?token=wrong: %d", res.StatusCode)
	}
}

// cookieJar is the smallest http.CookieJar: one host.
type cookieJar struct {
	mu sync.Mutex
	cs []*http.Cookie
}

func (j *cookieJar) SetCookies(_ *url.URL, cs []*http.Cookie) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.cs = append(j.cs, cs...)
}

func (j *cookieJar) Cookies(*url.URL) []*http.Cookie {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.cs
}

func TestLoopbackHostOnly(t *testing.T) {
	tr := newTree(t)
	srv := serve(t, tr, web.Options{})
	req, _ := http.NewRequest("GET", srv.URL+"/api/entries", nil)
	req.Host = "attacker.example:80" // a DNS rebinding page
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 401 {
		t.Errorf("rebinding Host: %d, want 401", res.StatusCode)
	}
	for addr, ok := range map[string]bool{"127.0.0.1:8080": true, "localhost:0": true, "[::1]:9": true, "0.0.0.0:8080": false, ":8080": false, "192.168.1.2:80": false} {
		if err := web.CheckAddr(addr, ""); (err == nil) != ok {
			t.Errorf("CheckAddr(%q, no token) = %v", addr, err)
		}
		if err := web.CheckAddr(addr, "t"); err != nil {
			t.Errorf("CheckAddr(%q, token) = %v", addr, err)
		}
	}
}

func TestWrites(t *testing.T) {
	tr := sample(t)
	ro := serve(t, tr, web.Options{})
	body := fmt.Sprintf(`{"url": %q, "intent": "star count", "session": "w1", "trace": %s}`, repo, run(repo, "#stars", "45", true))
	var e apiErr
	if got := call(t, "POST", ro.URL+"/api/traces", "", body, &e); got != 403 || e.Code != 10 || !strings.Contains(e.Error, "--write") {
		t.Errorf("read-only save: %d %+v", got, e)
	}
	before, _ := tr.st.TraceRefs(ctx, "")

	rw := serve(t, tr, web.Options{Write: true, MaxBody: 4096})
	var res engine.SaveResult
	if got := call(t, "POST", rw.URL+"/api/traces", "", body, &res); got != 200 || !res.Saved || res.IntentKey != "star-count" || res.Domain != "example.com" {
		t.Fatalf("save: %d %+v", got, res)
	}
	// The same redaction as the CLI: a password typed is never stored.
	secret := fmt.Sprintf(`{"url": %q, "intent": "sign in", "trace": {"steps": [{"action": "type", "selector": "input[type=password]", "value": "hunter2-hunter2"}, {"action": "click", "selector": "#go", "ok": true}]}}`, repo)
	var sres engine.SaveResult
	if got := call(t, "POST", rw.URL+"/api/traces", "", secret, &sres); got != 200 {
		t.Fatalf("save with a password: %d", got)
	}
	tf, err := tr.st.Trace(ctx, engine.TraceRef{Domain: "example.com", Day: sres.TracePath[len("traces/example.com/"):][:10], ID: sres.ID})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(tf); bytes.Contains(b, []byte("hunter2")) {
		t.Errorf("the password was stored: %s", b)
	}
	var fb engine.FeedbackResult
	if got := call(t, "POST", rw.URL+"/api/feedback", "", fmt.Sprintf(`{"trace": %q, "verdict": "right", "judge": "api"}`, res.ID), &fb); got != 200 || !fb.Recorded {
		t.Errorf("feedback: %d %+v", got, fb)
	}
	for _, c := range []struct {
		name, path, body string
		status, code     int
	}{
		{"unknown field", "/api/traces", `{"url": "https://example.com/", "trace": {}, "colour": 1}`, 400, 2},
		{"no steps, no facts", "/api/traces", `{"url": "https://example.com/"}`, 400, 2},
		{"bad trace", "/api/traces", `{"url": "https://example.com/", "trace": {"steps": "no"}}`, 400, 2},
		{"two values", "/api/traces", `{"url": "https://example.com/"} {}`, 400, 2},
		{"over the cap", "/api/traces", `{"url": "https://example.com/", "trace": {"task": "` + strings.Repeat("x", 5000) + `"}}`, 413, 2},
		{"unknown trace", "/api/feedback", `{"trace": "01J00000000000000000000000", "verdict": "right"}`, 404, 4},
		{"bad verdict", "/api/feedback", fmt.Sprintf(`{"trace": %q, "verdict": "maybe"}`, res.ID), 400, 2},
	} {
		var e apiErr
		if got := call(t, "POST", rw.URL+c.path, "", c.body, &e); got != c.status || e.Code != c.code {
			t.Errorf("%s: %d %+v, want %d code %d", c.name, got, e, c.status, c.code)
		}
	}
	// The facts patch has the CLI's cap of its own (--facts), under the body's.
	big := serve(t, tr, web.Options{Write: true})
	var fe apiErr
	over := `{"url": "https://example.com/", "facts": {"anti_patterns": ["` + strings.Repeat("x", engine.MaxPatchBytes) + `"]}}`
	if got := call(t, "POST", big.URL+"/api/traces", "", over, &fe); got != 413 || fe.Code != 2 || !strings.Contains(fe.Error, "facts is over the cap") {
		t.Errorf("facts over their cap: %d %+v", got, fe)
	}
	// A form post (no JSON content type) is refused: no write from another site's form.
	res2, err := http.Post(rw.URL+"/api/traces", "text/plain", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	res2.Body.Close()
	if res2.StatusCode != 400 {
		t.Errorf("text/plain body: %d", res2.StatusCode)
	}
	after, _ := tr.st.TraceRefs(ctx, "")
	if len(after) != len(before)+2 {
		t.Errorf("%d traces after, %d before: only the two good saves may write", len(after), len(before))
	}
}

// Concurrent saves and verdicts over the API while consolidations run lose
// nothing: every run is folded exactly once, every verdict counted.
func TestConcurrentWritesAndConsolidation(t *testing.T) {
	tr := newTree(t)
	srv := serve(t, tr, web.Options{Write: true})
	const writers, each = 4, 6
	var wg sync.WaitGroup
	stop, done := make(chan struct{}), make(chan struct{})
	var cerr error
	go func() { // consolidations, back to back, until the writers are done
		defer close(stop)
		for i := 0; i < 50; i++ {
			if _, err := consolidate.Run(ctx, tr.st, consolidate.Options{}); err != nil {
				cerr = err
				return
			}
			select {
			case <-done:
				return
			default:
			}
		}
	}()
	errs := make(chan string, writers*each*2)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				u := fmt.Sprintf("%s/item/%d", repo, i)
				body := fmt.Sprintf(`{"url": %q, "intent": "item price", "session": "w%d", "trace": %s}`, u, w, run(u, "#price", "9", true))
				var res engine.SaveResult
				if got := call(t, "POST", srv.URL+"/api/traces", "", body, &res); got != 200 {
					errs <- fmt.Sprintf("save: %d", got)
					continue
				}
				var fb engine.FeedbackResult
				if got := call(t, "POST", srv.URL+"/api/feedback", "", fmt.Sprintf(`{"trace": %q, "verdict": "right"}`, res.ID), &fb); got != 200 {
					errs <- fmt.Sprintf("feedback: %d", got)
				}
			}
		}(w)
	}
	wg.Wait()
	close(done)
	<-stop
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if cerr != nil {
		t.Fatal(cerr)
	}
	tr.consolidate(t)
	tr.consolidate(t)
	x, err := tr.st.Experience(ctx, "example.com", engine.IntentKey("item price"))
	if err != nil {
		t.Fatal(err)
	}
	right := 0
	for _, ev := range x.Evidence {
		if ev.Verdict == engine.Right {
			right++
		}
	}
	if len(x.Evidence) != writers*each || x.Successes != writers*each || right != writers*each {
		t.Errorf("folded %d runs (%d successes, %d judged right), want %d of each", len(x.Evidence), x.Successes, right, writers*each)
	}
}
