package web

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/pemdev/pem/engine"
)

// Commit is one commit that changed an entry's files, newest first in a
// History answer.
type Commit struct {
	Hash    string    `json:"hash"`
	When    time.Time `json:"when"`
	Subject string    `json:"subject"`
	Changes []string  `json:"changes"` // one line per file: "facts/…yaml: changed, status verified, revision r…"
}

// Report is one bench report (pem bench's report.html).
type Report struct {
	Name     string    // unique, one path segment of letters, digits, '.', '_' and '-': its URL is reports/<Name>.html
	Dir      string    // where it was found, as shown to the reader
	Modified time.Time // newest first in the list
	Read     func() ([]byte, error)
}

// Errors of the server, for the caller's Classify.
var (
	// ErrUnauthorized: the request lacks the token, or carries another one.
	ErrUnauthorized = errors.New("unauthorized")
	// ErrWriteDisabled: a write to a server started without writes.
	ErrWriteDisabled = errors.New("writes are disabled")
)

// DefaultMaxBody caps a request body: a trace and a facts patch at their
// caps, and room for the other fields.
const DefaultMaxBody = engine.MaxTraceBytes + engine.MaxPatchBytes + 256<<10

// Options are the server's collaborators and settings; nil funcs leave their
// section out.
type Options struct {
	// History lists the commits that changed the entry, newest first.
	History func(ctx context.Context, domain, key string) ([]Commit, error)
	// Reports lists the bench reports, newest first.
	Reports func(ctx context.Context) ([]Report, error)
	// Classify maps an error to an HTTP status, the CLI's exit code and the
	// message to show (what happened and what to do). nil: 500, 1, the error.
	Classify func(error) (status, code int, msg string)
	Token    string // when set, every request must carry it (Authorization: Bearer, or the cookie ?token= sets)
	Write    bool   // accept POST /api/traces and /api/feedback
	MaxBody  int64  // 0: DefaultMaxBody
	Logger   *slog.Logger
}

// Server is the knowledge browser and the API over one engine.
type Server struct {
	eng *engine.Engine
	o   Options
	log *slog.Logger
	mux *http.ServeMux
}

// New returns the server over eng.
func New(eng *engine.Engine, o Options) *Server {
	if o.MaxBody <= 0 {
		o.MaxBody = DefaultMaxBody
	}
	s := &Server{eng: eng, o: o, log: o.Logger, mux: http.NewServeMux()}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.mux.HandleFunc("GET /{$}", s.page(s.indexPage))
	s.mux.HandleFunc("GET /index.html", s.page(s.indexPage))
	s.mux.HandleFunc("GET /entry/{domain}/{file}", s.page(func(r *http.Request) ([]byte, error) {
		key, ok := strings.CutSuffix(r.PathValue("file"), ".html")
		if !ok {
			return nil, fmt.Errorf("%w: an entry's page ends in .html", engine.ErrNotFound)
		}
		return s.entryPage(r.Context(), r.PathValue("domain"), key)
	}))
	s.mux.HandleFunc("GET /reports/{file}", s.page(func(r *http.Request) ([]byte, error) {
		return s.reportPage(r.Context(), r.PathValue("file"))
	}))
	s.mux.HandleFunc("/api/entries", s.api(http.MethodGet, s.apiList))
	s.mux.HandleFunc("/api/entries/{domain}/{intent}", s.api(http.MethodGet, s.apiEntry))
	s.mux.HandleFunc("/api/query", s.api(http.MethodGet, s.apiQuery))
	s.mux.HandleFunc("/api/memory", s.api(http.MethodGet, s.apiMemory))
	s.mux.HandleFunc("/api/traces", s.api(http.MethodPost, s.apiSave))
	s.mux.HandleFunc("/api/feedback", s.api(http.MethodPost, s.apiFeedback))
	s.mux.HandleFunc("/api/", s.api("", func(r *http.Request) (any, error) {
		return nil, fmt.Errorf("%w: no API endpoint %s: the endpoints are /api/entries, /api/entries/{domain}/{intent}, /api/query, /api/memory, /api/traces, /api/feedback", engine.ErrNotFound, r.URL.Path)
	}))
	return s
}

// ServeHTTP checks the host and the token, then serves.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Referrer-Policy", "no-referrer")
	if s.o.Token == "" && !loopbackHost(r.Host) {
		// Without a token only a loopback name reaches it: a page that
		// rebinds its own name to 127.0.0.1 reads nothing.
		s.fail(w, r, fmt.Errorf("%w: host %q is not a loopback name: open http://127.0.0.1:PORT/, or start pem serve --http with --token", ErrUnauthorized, r.Host))
		return
	}
	if s.o.Token != "" {
		if t := r.URL.Query().Get("token"); t != "" && r.Method == http.MethodGet && !strings.HasPrefix(r.URL.Path, "/api/") {
			if !s.tokenOK(t) {
				s.fail(w, r, fmt.Errorf("%w: wrong token: give the --token pem serve was started with", ErrUnauthorized))
				return
			}
			// The token once in the URL, then a cookie: links keep working
			// and the token leaves the address bar.
			http.SetCookie(w, &http.Cookie{Name: cookieName, Value: t, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
			u := *r.URL
			q := u.Query()
			q.Del("token")
			u.RawQuery = q.Encode()
			http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
			return
		}
		if !s.authorized(r) {
			s.fail(w, r, fmt.Errorf("%w: send the token pem serve was started with, in an Authorization header with the Bearer scheme (a browser: open the page once with ?token= and the token added to its address)", ErrUnauthorized))
			return
		}
	}
	s.mux.ServeHTTP(w, r)
}

const cookieName = "pem_token"

func (s *Server) tokenOK(t string) bool {
	return subtle.ConstantTimeCompare([]byte(t), []byte(s.o.Token)) == 1
}

func (s *Server) authorized(r *http.Request) bool {
	if h := r.Header.Get("Authorization"); h != "" {
		t, ok := strings.CutPrefix(h, "Bearer ")
		return ok && s.tokenOK(strings.TrimSpace(t))
	}
	if c, err := r.Cookie(cookieName); err == nil {
		return s.tokenOK(c.Value)
	}
	return false
}

// loopbackHost reports whether a Host header names this machine's loopback.
func loopbackHost(host string) bool {
	h, _, err := net.SplitHostPort(host)
	if err != nil {
		h = host
	}
	h = strings.Trim(h, "[]")
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// Loopback reports whether addr (host:port) listens on loopback only.
func Loopback(addr string) bool {
	h, _, err := net.SplitHostPort(addr)
	return err == nil && h != "" && loopbackHost(h)
}

// CheckAddr refuses to serve a non-loopback address without a token.
func CheckAddr(addr, token string) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("%w: --http %q: give HOST:PORT, such as 127.0.0.1:8080", engine.ErrInvalid, addr)
	}
	if !Loopback(addr) && token == "" {
		return fmt.Errorf("%w: --http %s listens beyond this machine: give --token TOKEN (every request then needs it), or use 127.0.0.1:PORT", engine.ErrInvalid, addr)
	}
	return nil
}

// Serve listens on addr and serves h until ctx ends, then stops gracefully
// (requests in flight get a few seconds). ready, when not nil, receives the
// address listened on (":0" picks a port).
func Serve(ctx context.Context, addr string, h http.Handler, log *slog.Logger, ready func(addr string)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		// The address is the caller's choice: bad input, not a failure of pem.
		return fmt.Errorf("%w: listening on %s: %v: give another --http ADDR (is another server on that port?)", engine.ErrInvalid, addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, WriteTimeout: 2 * time.Minute, IdleTimeout: 2 * time.Minute}
	if log != nil {
		srv.ErrorLog = slog.NewLogLogger(log.Handler(), slog.LevelWarn)
	}
	if ready != nil {
		ready(ln.Addr().String())
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(stop); err != nil {
		srv.Close()
	}
	<-done
	return nil
}

// ---- errors and JSON ----------------------------------------------------

// apiError is every API error's body.
type apiError struct {
	Error  string `json:"error"`
	Code   int    `json:"code"`   // the CLI's exit code for the same error
	Status int    `json:"status"` // the HTTP status
}

func (s *Server) classify(err error) (int, int, string) {
	if s.o.Classify != nil {
		return s.o.Classify(err)
	}
	return http.StatusInternalServerError, 1, err.Error()
}

// fail answers err: JSON for the API, a short page otherwise.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	status, code, msg := s.classify(err)
	msg, _ = engine.ScrubText(msg)
	if status >= 500 {
		s.log.Error("request failed", "path", r.URL.Path, "status", status, "error", err)
	} else {
		s.log.Info("request refused", "path", r.URL.Path, "status", status, "error", err)
	}
	if errors.Is(err, ErrUnauthorized) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="pem"`)
	}
	if strings.HasPrefix(r.URL.Path, "/api/") {
		writeJSON(w, status, apiError{Error: msg, Code: code, Status: status})
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", csp)
	w.WriteHeader(status)
	fmt.Fprintf(w, "<!doctype html><meta charset=utf-8><title>pem: %d</title><p>pem: %s</p><p><a href=\"/\">knowledge browser</a></p>\n", status, esc(msg))
}

// writeJSON writes v as pem's CLI prints it: indented, <, > and & as they
// are, every string scrubbed of credentials.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := encodeJSON(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"encoding the answer failed","code":1,"status":500}`+"\n")
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(b)
}

func encodeJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return engine.ScrubJSON(buf.Bytes()), nil
}

func (s *Server) api(method string, run func(*http.Request) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if method != "" && r.Method != method && !(method == http.MethodGet && r.Method == http.MethodHead) {
			w.Header().Set("Allow", method)
			err := fmt.Errorf("%w: %s %s: use %s", engine.ErrInvalid, r.Method, r.URL.Path, method)
			status, code, msg := s.classify(err)
			if status == http.StatusBadRequest {
				status = http.StatusMethodNotAllowed
			}
			writeJSON(w, status, apiError{Error: msg, Code: code, Status: status})
			return
		}
		v, err := run(r)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, v)
	}
}

// csp keeps every page to itself: no script, no request to anywhere.
const csp = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

func (s *Server) page(render func(*http.Request) ([]byte, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		b, err := render(r)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", csp)
		w.Header().Set("Cache-Control", "no-store")
		w.Write(b)
	}
}

// ---- the API ------------------------------------------------------------

func (s *Server) apiList(r *http.Request) (any, error) {
	q := r.URL.Query()
	req := engine.ListRequest{Filter: q.Get("filter"), IntentFilter: q.Get("intent_filter")}
	var err error
	if req.Page, err = intParam(q.Get("page"), "page", 1); err != nil {
		return nil, err
	}
	if req.PageSize, err = intParam(q.Get("page_size"), "page_size", 20); err != nil {
		return nil, err
	}
	// As pem experience list's flags: given, they must be in range (the
	// engine reads 0 as "the default").
	if req.Page < 1 {
		return nil, fmt.Errorf("%w: page %d: pages start at 1", engine.ErrInvalid, req.Page)
	}
	if req.PageSize < 1 {
		return nil, fmt.Errorf("%w: page_size %d: use 1 to %d", engine.ErrInvalid, req.PageSize, engine.MaxPageSize)
	}
	return s.eng.List(r.Context(), req)
}

func intParam(v, name string, def int) (int, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("%w: %s=%q: give a whole number", engine.ErrInvalid, name, v)
	}
	return n, nil
}

// keyOf reads an intent as pem log does: a key as it is, else the text's key.
func keyOf(intent string) string {
	if engine.ValidKey(intent) {
		return intent
	}
	return engine.IntentKey(intent)
}

func (s *Server) apiEntry(r *http.Request) (any, error) {
	domain, err := engine.NormalizeDomain(r.PathValue("domain"))
	if err != nil {
		return nil, fmt.Errorf("%w: %q is not a domain: %v", engine.ErrInvalid, r.PathValue("domain"), err)
	}
	return s.eng.Entry(r.Context(), domain, keyOf(r.PathValue("intent")))
}

func urlIntent(r *http.Request) (string, string, error) {
	q := r.URL.Query()
	if strings.TrimSpace(q.Get("url")) == "" {
		return "", "", fmt.Errorf("%w: url is required: the page the task starts at, e.g. ?url=https://github.com/owner/repo&intent=star+count", engine.ErrInvalid)
	}
	return q.Get("url"), q.Get("intent"), nil
}

func (s *Server) apiQuery(r *http.Request) (any, error) {
	u, intent, err := urlIntent(r)
	if err != nil {
		return nil, err
	}
	return s.eng.Query(r.Context(), u, intent)
}

// MaxMemoryChars bounds max_chars; a Memory section is for a prompt.
const MaxMemoryChars = 100_000

func (s *Server) apiMemory(r *http.Request) (any, error) {
	u, intent, err := urlIntent(r)
	if err != nil {
		return nil, err
	}
	n, err := intParam(r.URL.Query().Get("max_chars"), "max_chars", 0)
	if err != nil {
		return nil, err
	}
	if n < 0 || n > MaxMemoryChars {
		return nil, fmt.Errorf("%w: max_chars %d: use 0 (the tree's default) to %d", engine.ErrInvalid, n, MaxMemoryChars)
	}
	text, err := s.eng.Memory(r.Context(), u, intent, n)
	if err != nil {
		return nil, err
	}
	return struct {
		Memory string `json:"memory"`
		Chars  int    `json:"chars"`
	}{text, len([]rune(text))}, nil
}

// readBody decodes a JSON object body of at most MaxBody bytes into v,
// refusing unknown fields.
func (s *Server) readBody(r *http.Request, v any) error {
	if !s.o.Write {
		return fmt.Errorf("%w: this server is read-only: start pem serve --http with --write to accept saves and verdicts", ErrWriteDisabled)
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(strings.ToLower(ct), "application/json") {
		return fmt.Errorf("%w: Content-Type %q: send the body as application/json", engine.ErrInvalid, ct)
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, s.o.MaxBody+1))
	if err != nil {
		return fmt.Errorf("reading the request body: %w", err)
	}
	if int64(len(data)) > s.o.MaxBody {
		return fmt.Errorf("%w: the request body is over the cap of %d bytes: send less", engine.ErrTooLarge, s.o.MaxBody)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: the body is not the JSON object this endpoint takes: %v (docs/cli.md lists its fields)", engine.ErrInvalid, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: the body holds more than one JSON value: send one object", engine.ErrInvalid)
	}
	return nil
}

// saveBody is POST /api/traces: pem experience save's arguments and flags.
type saveBody struct {
	URL      string          `json:"url"`
	Trace    json.RawMessage `json:"trace"` // the TRACE_JSON of pem experience save
	Outcome  string          `json:"outcome"`
	TaskType string          `json:"task_type"`
	Intent   string          `json:"intent"`
	Session  string          `json:"session"`
	Facts    json.RawMessage `json:"facts"` // the --facts patch
}

// apiSave is pem experience save over HTTP: the same parsing (the engine's
// ParseTraceInput and ParsePatch) and the same Save.
func (s *Server) apiSave(r *http.Request) (any, error) {
	var b saveBody
	if err := s.readBody(r, &b); err != nil {
		return nil, err
	}
	req := engine.SaveRequest{URL: b.URL, Outcome: b.Outcome, TaskType: b.TaskType, Intent: b.Intent, Session: b.Session}
	if t := bytes.TrimSpace(b.Trace); len(t) > 0 && string(t) != "null" {
		in, err := engine.ParseTraceInput(t)
		if err != nil {
			return nil, err
		}
		req.Trace = in
	}
	if f := bytes.TrimSpace(b.Facts); len(f) > 0 && string(f) != "null" {
		if len(f) > engine.MaxPatchBytes {
			return nil, fmt.Errorf("%w: facts is over the cap of %d bytes: save less", engine.ErrTooLarge, engine.MaxPatchBytes)
		}
		p, err := engine.ParsePatch(f)
		if err != nil {
			return nil, err
		}
		req.Facts = p
	}
	res, err := s.eng.Save(r.Context(), req)
	if err != nil && res != nil && res.Saved {
		return nil, fmt.Errorf("trace %s was saved at %s, but: %w", res.ID, res.TracePath, err)
	}
	return res, err
}

// feedbackBody is POST /api/feedback: pem experience feedback's argument and flags.
type feedbackBody struct {
	Trace   string `json:"trace"`
	Verdict string `json:"verdict"`
	Note    string `json:"note"`
	Judge   string `json:"judge"`
}

func (s *Server) apiFeedback(r *http.Request) (any, error) {
	var b feedbackBody
	if err := s.readBody(r, &b); err != nil {
		return nil, err
	}
	return s.eng.Feedback(r.Context(), engine.FeedbackRequest{Trace: b.Trace, Verdict: b.Verdict, Note: b.Note, Judge: b.Judge})
}
