//go:build !linux

package shm

import "tandem/internal/pd/kvwire"

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

// OpenSource fails with ErrUnsupported: regions need Linux.
func OpenSource(o *kvwire.ShmSource, maxBytes uint64) (*Region, error) { return nil, ErrUnsupported }

// CreateSource fails with ErrUnsupported: regions need Linux.
func CreateSource(dataBytes int) (*Source, error) { return nil, ErrUnsupported }
