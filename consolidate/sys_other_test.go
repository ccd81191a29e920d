//go:build !unix

package consolidate

// selfCPUMs is 0 where getrusage is missing: the benchmark reports no CPU
// time there, as peakRSSMB reports no peak RSS off Linux.
func selfCPUMs() float64 { return 0 }

// syncDisks does nothing where sync(2) is missing.
func syncDisks() {}
