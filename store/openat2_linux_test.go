//go:build linux

package store

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestOpenat2ReadsAndRefusesFIFO: the one-call open reads a file, and a FIFO
// planted in the tree is refused without blocking.
func TestOpenat2ReadsAndRefusesFIFO(t *testing.T) {
	s := testStore(t, nil)
	if err := os.WriteFile(filepath.Join(s.Root(), "facts", "f.yaml"), []byte("x: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.openNoLinks("facts/f.yaml", false); err != nil {
		t.Fatalf("openat2 unavailable or failing here: %v", err)
	}
	fifo := filepath.Join(s.Root(), "facts", "pipe.yaml")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	done := make(chan error, 1)
	go func() { _, _, err := s.readFile("facts/pipe.yaml", 100); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a FIFO was read as a record")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("reading a FIFO blocked")
	}
}
