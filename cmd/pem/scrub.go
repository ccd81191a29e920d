package main

import (
	"bytes"
	"io"
	"sync"

	"github.com/pemdev/pem/engine"
)

// lineScrubber passes text through engine.ScrubText one line at a time, so
// that no output path (errors on stderr, the diff) prints a credential, even
// one from a tree written before the scrubber or quoted back from bad input.
// JSON output is scrubbed by structure instead (writeJSON). It is safe for
// concurrent use; Flush writes a last unterminated line.
type lineScrubber struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
}

// maxScrubLine bounds what is held back waiting for a newline.
const maxScrubLine = 1 << 20

func newLineScrubber(w io.Writer) *lineScrubber { return &lineScrubber{w: w} }

func (s *lineScrubber) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf = append(s.buf, p...)
	for {
		i := bytes.IndexByte(s.buf, '\n')
		if i < 0 {
			if len(s.buf) > maxScrubLine {
				i = len(s.buf) - 1
			} else {
				return len(p), nil
			}
		}
		line, _ := engine.ScrubText(string(s.buf[:i+1]))
		s.buf = s.buf[i+1:]
		if _, err := io.WriteString(s.w, line); err != nil {
			return len(p), err
		}
	}
}

// Flush writes what is held back; it gives up at once when a write is under
// way (a stalled stderr must not keep pem from exiting).
func (s *lineScrubber) Flush() error {
	if !s.mu.TryLock() {
		return nil
	}
	defer s.mu.Unlock()
	if len(s.buf) == 0 {
		return nil
	}
	line, _ := engine.ScrubText(string(s.buf))
	s.buf = nil
	_, err := io.WriteString(s.w, line)
	return err
}
