package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// DefaultMaxLineBytes caps one inbound JSON-RPC line (8 MiB).
const DefaultMaxLineBytes = 8 << 20

// Transport is newline-delimited JSON-RPC over a reader and a writer (stdio).
//
// The SDK's own IOTransport ends the session on the first line it cannot
// decode or that is over its cap. A model-driven client that sends one bad
// line must not lose its memory server, so this transport answers bad lines
// itself and keeps reading:
//   - a line that is not JSON: -32700 parse error, id null;
//   - JSON that is not a JSON-RPC message, or a batch: -32600 invalid request,
//     with the request's id when it can be read;
//   - a line over MaxLineBytes: -32600 with the request's id when it appears
//     in the line (scanned while the rest is discarded, never buffered whole).
//
// Only messages go to Writer, one per line.
type Transport struct {
	Reader       io.Reader // closed on Close when it is an io.Closer
	Writer       io.Writer
	MaxLineBytes int          // 0: DefaultMaxLineBytes
	Logger       *slog.Logger // nil: discard
}

var _ sdk.Transport = (*Transport)(nil)

// Connect starts reading lines and returns the connection.
func (t *Transport) Connect(context.Context) (sdk.Connection, error) {
	if t.Reader == nil || t.Writer == nil {
		return nil, errors.New("mcp transport: Reader and Writer are required")
	}
	max := t.MaxLineBytes
	if max <= 0 {
		max = DefaultMaxLineBytes
	}
	log := t.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &conn{w: t.Writer, in: make(chan jsonrpc.Message), closed: make(chan struct{}), log: log}
	if rc, ok := t.Reader.(io.Closer); ok {
		c.rc = rc
	}
	go c.readLoop(t.Reader, max)
	return c, nil
}

type conn struct {
	wmu sync.Mutex
	w   io.Writer

	in        chan jsonrpc.Message // closed when the input ends
	closed    chan struct{}
	closeOnce sync.Once
	rc        io.Closer
	log       *slog.Logger

	// Calls read but not yet answered. When the input ends, the connection
	// reports EOF only once they are answered (or drainTimeout passed), so a
	// client that writes its requests and closes stdin gets every answer.
	mu      sync.Mutex
	pending map[jsonrpc.ID]bool
	idle    chan struct{} // closed when pending empties
}

// drainTimeout bounds the wait for unanswered calls after the input ended.
const drainTimeout = 30 * time.Second

func (c *conn) SessionID() string { return "" }

func (c *conn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case m, ok := <-c.in:
		if !ok {
			return nil, io.EOF
		}
		return m, nil
	case <-c.closed:
		return nil, io.EOF
	}
}

func (c *conn) Write(_ context.Context, msg jsonrpc.Message) error {
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("encoding a JSON-RPC message: %w", err)
	}
	err = c.writeLine(data)
	if r, ok := msg.(*jsonrpc.Response); ok {
		c.answered(r.ID)
	}
	return err
}

func (c *conn) answered(id jsonrpc.ID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pending, id)
	if len(c.pending) == 0 && c.idle != nil {
		close(c.idle)
		c.idle = nil
	}
}

// drain waits until every call read so far is answered.
func (c *conn) drain() {
	deadline := time.NewTimer(drainTimeout)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		n := len(c.pending)
		ch := make(chan struct{})
		c.idle = ch
		c.mu.Unlock()
		if n == 0 {
			return
		}
		select {
		case <-ch:
		case <-c.closed:
			return
		case <-deadline.C:
			c.log.Warn("input ended with calls still unanswered", "calls", n)
			return
		}
	}
}

func (c *conn) writeLine(data []byte) error {
	select {
	case <-c.closed:
		return sdk.ErrConnectionClosed
	default:
	}
	line := make([]byte, 0, len(data)+1)
	line = append(append(line, data...), '\n')
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if _, err := c.w.Write(line); err != nil {
		return fmt.Errorf("writing to the client: %w", err)
	}
	return nil
}

func (c *conn) Close() error {
	var err error
	c.closeOnce.Do(func() {
		close(c.closed)
		if c.rc != nil {
			err = c.rc.Close()
		}
	})
	return err
}

// readLoop reads lines until the input ends, passing on good messages and
// answering bad ones.
func (c *conn) readLoop(r io.Reader, max int) {
	defer close(c.in)
	defer c.drain()
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, tooLong, err := readLine(br, max)
		if tooLong != nil {
			c.log.Warn("input line over the cap", "bytes", tooLong.n, "cap", max)
			c.replyError(tooLong.scan.id(), jsonrpc.CodeInvalidRequest,
				fmt.Sprintf("request line of %d bytes is over the %d-byte cap: send smaller arguments (fewer trace steps, shorter values)", tooLong.n, max))
		} else if len(line) > 0 && !c.handleLine(line) {
			return
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				c.log.Warn("reading input", "error", err)
			}
			return
		}
	}
}

// handleLine decodes one line and hands it on; false when the connection closed.
func (c *conn) handleLine(line []byte) bool {
	msg, err := decode(line)
	if err != nil {
		var syn *json.SyntaxError
		switch {
		case errors.As(err, &syn):
			c.log.Warn("input line is not JSON", "bytes", len(line))
			c.replyError(nil, jsonrpc.CodeParseError, "parse error: the line is not valid JSON; send one JSON-RPC 2.0 message per line")
		case line[0] == '[':
			c.replyError(nil, jsonrpc.CodeInvalidRequest, "batch requests are not supported: send one JSON-RPC message per line")
		default:
			c.replyError(idOf(line), jsonrpc.CodeInvalidRequest,
				fmt.Sprintf("invalid request: %v; want {\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"...\",\"params\":{...}}", err))
		}
		return true
	}
	if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
		c.mu.Lock()
		if c.pending == nil {
			c.pending = map[jsonrpc.ID]bool{}
		}
		c.pending[req.ID] = true
		c.mu.Unlock()
	}
	select {
	case c.in <- msg:
		return true
	case <-c.closed:
		return false
	}
}

// wireMessage is a JSON-RPC message as it arrives.
type wireMessage struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      any             `json:"id"`
	Method  json.RawMessage `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   *jsonrpc.Error  `json:"error"`
}

// decode reads one message with the same rules as jsonrpc.DecodeMessage, on
// the standard library's decoder: the SDK's decoder allocates a 32 KiB buffer
// per call, which is most of the protocol's cost on a small request. A line
// that is not JSON is a *json.SyntaxError.
func decode(line []byte) (jsonrpc.Message, error) {
	var w wireMessage
	if err := json.Unmarshal(line, &w); err != nil {
		return nil, err
	}
	if w.JSONRPC != "2.0" {
		return nil, fmt.Errorf("invalid message version tag %q; expected \"2.0\"", w.JSONRPC)
	}
	id, err := jsonrpc.MakeID(w.ID)
	if err != nil {
		return nil, fmt.Errorf("invalid id: %v", err)
	}
	if len(w.Method) > 0 {
		var method string
		if err := json.Unmarshal(w.Method, &method); err != nil {
			return nil, errors.New("method must be a string")
		}
		return &jsonrpc.Request{ID: id, Method: method, Params: w.Params}, nil
	}
	if !id.IsValid() {
		return nil, errors.New("a message with neither method nor id")
	}
	r := &jsonrpc.Response{ID: id, Result: w.Result}
	if w.Error != nil {
		r.Error = w.Error
	}
	return r, nil
}

// replyError writes a JSON-RPC error response; id nil is written as null.
func (c *conn) replyError(id json.RawMessage, code int, message string) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	data, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}{JSONRPC: "2.0", ID: id, Error: struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}{code, message}})
	if err := c.writeLine(data); err != nil {
		c.log.Warn("writing an error response", "error", err)
	}
}

// idOf returns the "id" of a JSON object when it is a valid request id
// (a string or a number).
func idOf(line []byte) json.RawMessage {
	var v struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(line, &v) != nil {
		return nil
	}
	return validID(v.ID)
}

func validID(raw json.RawMessage) json.RawMessage {
	var x any
	if len(raw) == 0 || json.Unmarshal(raw, &x) != nil {
		return nil
	}
	switch x.(type) {
	case string, float64:
		return raw
	}
	return nil
}

type overLine struct {
	n    int64
	scan *idScanner
}

// readLine returns the next line without its line ending. A line over max
// bytes is consumed to its end without being kept; then line is nil and
// tooLong says how long it was and what id it carried. err is set when the
// input ended (a last line without a newline is still returned).
func readLine(br *bufio.Reader, max int) (line []byte, tooLong *overLine, err error) {
	var buf []byte
	var over *overLine
	for {
		chunk, rerr := br.ReadSlice('\n')
		if over == nil && len(buf)+len(chunk) > max+2 { // +2: room for "\r\n"
			over = &overLine{n: int64(len(buf)), scan: &idScanner{}}
			over.scan.feed(buf)
			buf = nil
		}
		if over != nil {
			over.n += int64(len(chunk))
			over.scan.feed(chunk)
		} else {
			buf = append(buf, chunk...)
		}
		if errors.Is(rerr, bufio.ErrBufferFull) {
			continue
		}
		if over != nil {
			return nil, over, rerr
		}
		return bytes.TrimSpace(buf), nil, rerr
	}
}

// idScanner finds the top-level "id" of a JSON object streamed through it in
// pieces, keeping only a few bytes, so an oversized request can still be
// answered with its own id.
type idScanner struct {
	started, done  bool
	depth          int
	inStr, esc     bool
	inKey, keyLong bool
	key            []byte
	expectKey      bool
	wantValue      bool
	keyIsID        bool
	capturing      bool
	strValue       bool
	val            []byte
	found          json.RawMessage
}

const maxIDBytes = 256

func (s *idScanner) id() json.RawMessage {
	if s == nil {
		return nil
	}
	return s.found
}

func (s *idScanner) finish() {
	s.found = validID(s.val)
	s.done = true
}

func (s *idScanner) feed(p []byte) {
	for _, b := range p {
		if s.done {
			return
		}
		if s.inStr {
			if s.capturing {
				s.val = append(s.val, b)
				if len(s.val) > maxIDBytes {
					s.done = true
					return
				}
			}
			if s.esc {
				s.esc = false
				if s.inKey {
					s.keyLong = true // an escaped key is never the plain "id"
				}
				continue
			}
			if b == '\\' {
				s.esc = true
				continue
			}
			if b == '"' {
				s.inStr = false
				if s.inKey {
					s.inKey = false
					s.keyIsID = !s.keyLong && string(s.key) == "id"
				}
				if s.capturing {
					s.finish()
				}
				continue
			}
			if s.inKey {
				if len(s.key) < 4 {
					s.key = append(s.key, b)
				} else {
					s.keyLong = true
				}
			}
			continue
		}
		if s.capturing { // a number or literal
			switch b {
			case ',', '}', ' ', '\t', '\r', '\n':
				s.finish()
				return
			}
			s.val = append(s.val, b)
			if len(s.val) > maxIDBytes {
				s.done = true
			}
			continue
		}
		switch b {
		case ' ', '\t', '\r', '\n':
			continue
		}
		if !s.started {
			s.started = true
			if b != '{' {
				s.done = true
				return
			}
			s.depth, s.expectKey = 1, true
			continue
		}
		top := s.depth == 1
		switch b {
		case '"':
			s.inStr = true
			switch {
			case top && s.expectKey:
				s.inKey, s.keyLong, s.key, s.expectKey = true, false, s.key[:0], false
			case top && s.wantValue && s.keyIsID:
				s.capturing, s.val = true, append(s.val[:0], '"')
			}
			s.wantValue = false
		case '{', '[':
			if top && s.wantValue && s.keyIsID {
				s.done = true // an object id is no id
				return
			}
			s.depth++
			s.wantValue = false
		case '}', ']':
			s.depth--
			if s.depth <= 0 {
				s.done = true
			}
		case ':':
			if top {
				s.wantValue = true
			}
		case ',':
			if top {
				s.expectKey, s.wantValue, s.keyIsID = true, false, false
			}
		default:
			if top && s.wantValue && s.keyIsID {
				s.capturing, s.val = true, append(s.val[:0], b)
			}
			s.wantValue = false
		}
	}
}
