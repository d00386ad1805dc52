package kernels

import (
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// threadCPU returns the CPU time the calling thread has used, in ns.
func threadCPU() float64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano() + ru.Stime.Nano())
}

// loopCPU runs f in a b.Loop and reports, beside wall time, the thread's
// CPU time per call (cpu-ns/op), which time spent waiting for a core on a
// loaded machine does not inflate.
func loopCPU(b *testing.B, f func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	n := 0
	t0 := threadCPU()
	for b.Loop() {
		f()
		n++
	}
	if n > 0 {
		b.ReportMetric((threadCPU()-t0)/float64(n), "cpu-ns/op")
	}
}
