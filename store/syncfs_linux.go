//go:build linux

package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// syncFS flushes the whole file system holding f with one syncfs(2): every
// dirty inode and page written back, one journal commit, one cache flush.
// Since Linux 5.8 it also reports a writeback error of any file on that file
// system since f was opened (so a batch opens f before it writes). ENOSYS
// (an old kernel, a sandbox without the call) and EPERM (a seccomp filter)
// are errSyncFSUnavailable: the batch then takes the per-file fsync path.
func syncFS(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return &fs.PathError{Op: "syncfs", Path: f.Name(), Err: err}
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			if serr = unix.Syncfs(int(fd)); serr != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return &fs.PathError{Op: "syncfs", Path: f.Name(), Err: err}
	}
	if errors.Is(serr, unix.ENOSYS) || errors.Is(serr, unix.EPERM) {
		return &fs.PathError{Op: "syncfs", Path: f.Name(), Err: errors.Join(errSyncFSUnavailable, serr)}
	}
	if serr != nil {
		return &fs.PathError{Op: "syncfs", Path: f.Name(), Err: serr}
	}
	return nil
}

// dirtyBytes reports the machine's dirty and under-writeback page cache
// (/proc/meminfo); a variable so that tests can stand in for it.
var dirtyBytes = func() (int64, error) {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	return parseDirty(data)
}

// parseDirty sums the Dirty and Writeback lines (kB) of /proc/meminfo.
func parseDirty(meminfo []byte) (int64, error) {
	var sum int64
	found := 0
	for _, line := range strings.Split(string(meminfo), "\n") {
		name, rest, ok := strings.Cut(line, ":")
		if !ok || name != "Dirty" && name != "Writeback" {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("/proc/meminfo: %q", line)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/meminfo: %q: %w", line, err)
		}
		sum += kb << 10
		found++
	}
	if found != 2 {
		return 0, errors.New("/proc/meminfo: no Dirty and Writeback lines")
	}
	return sum, nil
}

// dirtyBelow reports whether the machine has less than max bytes dirty or
// being written back; false when that cannot be read (the fsync path).
func dirtyBelow(max int64) bool {
	n, err := dirtyBytes()
	return err == nil && n < max
}
