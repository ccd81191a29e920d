//go:build unix

package consolidate

import "syscall"

// selfCPUMs is the process's CPU time so far (user + system), in ms.
func selfCPUMs() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e6
}

// syncDisks writes dirty pages back (sync(2)).
func syncDisks() { syscall.Sync() }
