//go:build !linux

package kernels

import "testing"

// loopCPU runs f in a b.Loop (no per-thread CPU time on this OS).
func loopCPU(b *testing.B, f func()) {
	for b.Loop() {
		f()
	}
}
