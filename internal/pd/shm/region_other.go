//go:build !linux

package shm

import (
	"sync/atomic"
	"time"

	"tandem/internal/pd/kvwire"
)

// Supported reports whether this platform has shared-memory regions.
func Supported() bool { return false }

// Create fails with ErrUnsupported: regions need Linux.
func Create(size int) (*Region, kvwire.ShmOffer, error) {
	return nil, kvwire.ShmOffer{}, ErrUnsupported
}

// CloseFD does nothing (no region has a descriptor here).
func (r *Region) CloseFD() error { return nil }

// Open fails with ErrUnsupported: regions need Linux.
func Open(o *kvwire.ShmOffer, maxBytes int) (*Region, error) { return nil, ErrUnsupported }

// futexWait sleeps d: without futexes (and without regions shared with
// another process) nothing wakes a waiter early.
func futexWait(w *atomic.Uint32, val uint32, d time.Duration) {
	if w.Load() == val {
		time.Sleep(d)
	}
}

// futexWake does nothing (see futexWait).
func futexWake(*atomic.Uint32) {}
