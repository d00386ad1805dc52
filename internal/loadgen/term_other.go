//go:build !linux && !darwin && !freebsd && !netbsd && !openbsd && !dragonfly

package loadgen

// isTerminal reports false: on this system progress is always written as
// plain lines.
func isTerminal(uintptr) bool { return false }
