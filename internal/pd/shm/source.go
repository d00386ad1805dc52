package shm

import (
	"crypto/rand"
	"unsafe"

	"tandem/internal/pd/kvwire"
)

// Source is a region of the KV sender's own memory (a prefill worker's
// KV cache lives in its data area) that each receiving peer maps
// read-only, so a KV frame can name the bytes where they already are
// (kvwire.KVSrc) and the receiver copies them once, straight into its
// page. The sender keeps a page unchanged until the receiver released
// the frame naming it, or revoked the ring the frame came on
// (Producer.Revoke). Its methods are safe for concurrent use.
type Source struct {
	r     *Region
	offer kvwire.ShmOffer // Ack left zero: Offer draws one per peer
	data  []byte
}

// Data returns the source's data area (page-aligned), for the caller to
// keep its pages in.
func (s *Source) Data() []byte { return s.data }

// Offer returns the SHM_SOURCE payload for one peer, with a fresh ack
// value that peer writes into its ring (Consumer.AckSource) once mapped.
func (s *Source) Offer() kvwire.ShmSource {
	o := kvwire.ShmSource{ShmOffer: s.offer}
	rand.Read(o.Ack[:])
	return o
}

// Locate returns where b lies in the data area, and false when b is not
// wholly inside it (or is empty).
func (s *Source) Locate(b []byte) (off uint64, ok bool) {
	if len(b) == 0 || len(s.data) == 0 {
		return 0, false
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(s.data)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	if p < base || p-base > uintptr(len(s.data)) || uintptr(len(b)) > uintptr(len(s.data))-(p-base) {
		return 0, false
	}
	return uint64(p - base), true
}

// Close unmaps the source and closes its descriptor. Nothing may use
// Data afterwards.
func (s *Source) Close() error { return s.r.Close() }

// Source returns the source data within a mapping of its region (a
// receiver's OpenSource): [off, off+n) of the data area, or false when
// that range is not inside it. Checked in uint64 before any slice is
// formed.
func (r *Region) Source(off uint64, n uint32) ([]byte, bool) {
	size := uint64(len(r.data))
	if n == 0 || off > size || uint64(n) > size-off {
		return nil, false
	}
	return r.data[off : off+uint64(n) : off+uint64(n)], true
}
