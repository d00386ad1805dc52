package shm

import (
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"tandem/internal/pd/kvwire"
)

// Layout of a region.
const (
	// HeaderBytes is the region header; the data area follows it.
	HeaderBytes = kvwire.ShmPageBytes
	// SlotHeaderBytes precedes each slot's data: seq u64, length u32.
	SlotHeaderBytes = 64
	// slotAlign is the alignment of every slot (a cache line).
	slotAlign = 64
	// SlotsMax bounds the slots outstanding (written, not yet released).
	SlotsMax = 4096
	// InflightBytesMax bounds the ring space of the outstanding slots
	// (but at least two slots may be outstanding, so copies on both sides
	// overlap): a producer far ahead of its consumer gains nothing, and
	// its slots would leave the cache before the consumer reads them.
	InflightBytesMax = 8 << 20
	// wrapSlackBytes (or a quarter of the data area, if less) is the room
	// an early wrap leaves for slots written before the consumer hears of
	// them (a batch of KV_SHM frames).
	wrapSlackBytes = 1 << 20

	magic        = 0x31_4d_48_53_56_4b_44_54 // "TDKVSHM1" little-endian
	offMagic     = 0
	offSize      = 8
	offCookie    = 16
	offAck       = offCookie + kvwire.NonceBytes
	offReleased  = 128 // its own cache line: written by the consumer only
	namePrefix   = "tandem-kv-"
	defaultBytes = 64 << 20
)

// DefaultBytes is the default region size per connection.
const DefaultBytes = defaultBytes

// Errors. Every error of the package wraps one of them.
var (
	// ErrUnsupported: shared memory regions are not available on this
	// platform (Linux only).
	ErrUnsupported = errors.New("shm: shared-memory regions need Linux")
	// ErrRegion: a region could not be created, or an offered one could
	// not be opened, checked or mapped.
	ErrRegion = errors.New("shm: region unusable")
	// ErrPeer: a KV_SHM frame or a released sequence number the peer
	// wrote breaks the ring protocol (out of order, out of bounds, past
	// what was sent): a protocol error that closes the connection.
	ErrPeer = errors.New("shm: ring protocol violated by the peer")
	// ErrSlot: a slot's header does not match its frame, or changed
	// during the copy: its bytes were overwritten.
	ErrSlot = errors.New("shm: slot overwritten")
	// ErrTooLarge: a frame does not fit the ring at all (send it over TCP).
	ErrTooLarge = errors.New("shm: frame larger than the ring")
)

// Region is one mapped region. Its methods are not safe for concurrent
// use except where noted: the transport uses a region from one
// goroutine at a time (the consumer from the connection's reader, the
// producer under the connection's write lock).
type Region struct {
	mem   []byte // the whole mapping
	data  []byte // mem[HeaderBytes:]
	fd    int    // the creator's descriptor until CloseFD; -1 after
	unmap func([]byte) error
	ack   [kvwire.NonceBytes]byte // Create: the value Open must write
}

// newRegion wraps mem (a mapping, or any page-aligned test buffer).
func newRegion(mem []byte, fd int, unmap func([]byte) error) *Region {
	return &Region{mem: mem, data: mem[HeaderBytes:], fd: fd, unmap: unmap}
}

// Bytes returns the region's size.
func (r *Region) Bytes() int { return len(r.mem) }

// DataBytes returns the size of the data area.
func (r *Region) DataBytes() int { return len(r.data) }

// Close unmaps the region and closes the descriptor if still open. It is
// idempotent; nothing may use the region afterwards.
func (r *Region) Close() error {
	err := r.CloseFD()
	if r.mem != nil && r.unmap != nil {
		err = errors.Join(err, r.unmap(r.mem))
	}
	r.mem, r.data = nil, nil
	return err
}

// writeHeader fills the header of a new region.
func (r *Region) writeHeader(cookie [kvwire.NonceBytes]byte) {
	binary.LittleEndian.PutUint64(r.mem[offMagic:], magic)
	binary.LittleEndian.PutUint64(r.mem[offSize:], uint64(len(r.mem)))
	copy(r.mem[offCookie:], cookie[:])
}

// checkHeader checks what Open finds in an offered region's header.
func (r *Region) checkHeader(o *kvwire.ShmOffer) error {
	if m := binary.LittleEndian.Uint64(r.mem[offMagic:]); m != magic {
		return fmt.Errorf("header magic %#x: %w", m, ErrRegion)
	}
	if n := binary.LittleEndian.Uint64(r.mem[offSize:]); n != uint64(len(r.mem)) {
		return fmt.Errorf("header says %d bytes, mapped %d: %w", n, len(r.mem), ErrRegion)
	}
	if subtle.ConstantTimeCompare(r.mem[offCookie:offCookie+kvwire.NonceBytes], o.Cookie[:]) != 1 {
		return fmt.Errorf("header cookie is not the offer's: another region: %w", ErrRegion)
	}
	return nil
}

// writeAck writes the offer's ack value into the header (Open does it).
func (r *Region) writeAck(ack [kvwire.NonceBytes]byte) { copy(r.mem[offAck:], ack[:]) }

// CheckAck reports whether the peer wrote the ack value of this region's
// offer (the creator calls it when the offer is accepted): proof that
// the peer mapped this very memory.
func (r *Region) CheckAck() error {
	if subtle.ConstantTimeCompare(r.mem[offAck:offAck+kvwire.NonceBytes], r.ack[:]) != 1 {
		return fmt.Errorf("the peer accepted the region but did not write its ack into it (not the same memory): %w", ErrPeer)
	}
	return nil
}

// word returns the atomic word at byte offset off of b (8-byte aligned).
func word(b []byte, off uint64) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(&b[off]))
}

func (r *Region) released() *atomic.Uint64 { return word(r.mem, offReleased) }

// slotBytes is the ring space a frame of n data bytes takes.
func slotBytes(n uint64) uint64 {
	return SlotHeaderBytes + (n+slotAlign-1)/slotAlign*slotAlign
}

// Producer writes slots into a region (the KV sender's side).
type Producer struct {
	r        *Region
	head     uint64 // where the newest slot ends
	last     uint64 // the newest slot's sequence number (0: none yet)
	released uint64 // the consumer's released number as last read
	inflight uint64 // ring bytes of the outstanding slots
	starts   [SlotsMax]uint64
	sizes    [SlotsMax]uint64
}

// NewProducer returns the producer of r.
func NewProducer(r *Region) *Producer { return &Producer{r: r} }

// Fits reports whether a frame of n data bytes can ever go through the
// ring.
func (p *Producer) Fits(n int) bool {
	return n > 0 && slotBytes(uint64(n)) <= uint64(len(p.r.data))
}

// Alloc takes a slot for n data bytes (1..kvwire.KVDataBytesMax, Fits):
// it stamps the slot header and returns the frame's sequence number and
// offset, and the slot's data bytes for the caller to fill before it
// sends the KV_SHM frame. ok is false when the ring has no room now
// (wait for the consumer and retry). An error means the consumer broke
// the protocol (ErrPeer) or the frame can never fit (ErrTooLarge).
func (p *Producer) Alloc(n int) (seq, off uint64, data []byte, ok bool, err error) {
	size := uint64(len(p.r.data))
	m := slotBytes(uint64(n))
	if n <= 0 || m > size {
		return 0, 0, nil, false, fmt.Errorf("%d bytes, ring data area %d: %w", n, size, ErrTooLarge)
	}
	rel := p.r.released().Load()
	if rel < p.released || rel > p.last {
		return 0, 0, nil, false, fmt.Errorf("peer released slot %d, after %d with %d sent: %w", rel, p.released, p.last, ErrPeer)
	}
	for p.released < rel {
		p.released++
		p.inflight -= p.sizes[p.released%SlotsMax]
	}
	switch {
	case p.last-rel >= SlotsMax:
		return 0, 0, nil, false, nil
	case rel == p.last: // empty: start over at the beginning
		off = 0
	case p.inflight+m > InflightBytesMax && p.last-rel >= 2:
		return 0, 0, nil, false, nil
	default:
		tail := p.starts[(rel+1)%SlotsMax] // the oldest outstanding slot
		switch {
		case p.head > tail && p.head-tail+m+min(wrapSlackBytes, size/4) <= tail:
			// Wrap early, as soon as the space before the oldest slot holds
			// the outstanding slots, this one and some slack (until the
			// older slots are released that space is all the ring has): the
			// ring then spans about what is in flight plus the slack, which
			// stays in cache, instead of sweeping the whole region through
			// memory.
			off = 0
		case p.head > tail && p.head+m <= size:
			off = p.head
		case p.head > tail && m <= tail:
			off = 0 // wrap; [head, size) stays unused this round
		case p.head < tail && p.head+m <= tail:
			off = p.head
		default:
			return 0, 0, nil, false, nil
		}
	}
	p.last++
	seq = p.last
	p.starts[seq%SlotsMax] = off
	p.sizes[seq%SlotsMax] = m
	p.inflight += m
	p.head = off + m
	word(p.r.data, off).Store(seq) // the stamp goes first
	binary.LittleEndian.PutUint32(p.r.data[off+8:], uint32(n))
	return seq, off, p.r.data[off+SlotHeaderBytes : off+SlotHeaderBytes+uint64(n)], true, nil
}

// Damage changes the stamp of the slot at off (fault injection: the
// consumer then fails that frame as overwritten).
func (p *Producer) Damage(off uint64) { word(p.r.data, off).Add(1 << 40) }

// Released returns the sequence number the consumer last released, as
// the header holds it now, unchecked: a hint for when to notify the
// consumer (Alloc checks the number before it frees any slot by it).
func (p *Producer) Released() uint64 { return p.r.released().Load() }

// Outstanding returns how many slots the consumer has not released yet
// (as last read).
func (p *Producer) Outstanding() uint64 { return p.last - p.released }

// Consumer reads slots out of a region (the KV receiver's side, the
// region's creator).
type Consumer struct {
	r    *Region
	next uint64 // the sequence number the next frame must carry
}

// NewConsumer returns the consumer of r.
func NewConsumer(r *Region) *Consumer { return &Consumer{r: r, next: 1} }

// Slot checks a KV_SHM frame against the ring and returns the slot's
// data bytes (inside the region): the frame must be the next in
// sequence and its slot aligned and inside the data area. Every error
// wraps ErrPeer; nothing is read outside the region. Whether the slot
// holds this frame (its stamp) is checked by Release, after the copy,
// so a frame whose slot was wrong fails like one whose bytes changed.
func (c *Consumer) Slot(f *kvwire.KVShm) ([]byte, error) {
	size := uint64(len(c.r.data))
	if f.Seq != c.next {
		return nil, fmt.Errorf("KV_SHM seq %d, want %d: %w", f.Seq, c.next, ErrPeer)
	}
	if f.Length == 0 || f.Length > kvwire.KVDataBytesMax {
		return nil, fmt.Errorf("KV_SHM length %d: %w", f.Length, ErrPeer)
	}
	m := slotBytes(uint64(f.Length))
	if f.Offset%slotAlign != 0 || f.Offset > size || m > size-f.Offset {
		return nil, fmt.Errorf("KV_SHM slot [%d, +%d) outside the %d-byte ring or unaligned: %w", f.Offset, m, size, ErrPeer)
	}
	start := f.Offset + SlotHeaderBytes
	return c.r.data[start : start+uint64(f.Length) : start+uint64(f.Length)], nil
}

// stamped checks the slot header of f.
func (c *Consumer) stamped(f *kvwire.KVShm) error {
	seq := word(c.r.data, f.Offset).Load() // after the copy's loads
	n := binary.LittleEndian.Uint32(c.r.data[f.Offset+8:])
	if seq != f.Seq || n != f.Length {
		return fmt.Errorf("slot at %d holds seq %d length %d, frame says seq %d length %d: %w", f.Offset, seq, n, f.Seq, f.Length, ErrSlot)
	}
	return nil
}

// Release ends frame f (after Slot succeeded and its bytes were copied
// out, or were to be discarded): it checks that the slot is stamped with
// f's sequence number and length (so it held f and was not overwritten
// during the copy), then hands the slot back to the producer. After an
// ErrSlot the slot is released too, but the bytes copied are not to be
// trusted.
func (c *Consumer) Release(f *kvwire.KVShm) error {
	err := c.stamped(f)
	c.next = f.Seq + 1
	c.r.released().Store(f.Seq)
	return err
}
