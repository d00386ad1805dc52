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
	offSrcAck    = 192 // the consumer's ack of the producer's source region (NonceBytes)
	offRevoked   = 256 // its own cache line: written by the producer only
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
	if n <= 0 {
		return 0, 0, nil, false, fmt.Errorf("%d bytes: %w", n, ErrTooLarge)
	}
	return p.alloc(n)
}

// Mark takes a slot without data (its header alone) for a frame whose
// bytes lie elsewhere (a KV_SRC frame: in the producer's source region),
// so that frame keeps the ring's order and is released like the others.
// ok and err mean what they mean for Alloc.
func (p *Producer) Mark() (seq, off uint64, ok bool, err error) {
	seq, off, _, ok, err = p.alloc(0)
	return seq, off, ok, err
}

// Collect reads the consumer's released number, checks it (an error
// wraps ErrPeer) and frees the slots it covers; it returns the number.
func (p *Producer) Collect() (uint64, error) {
	rel := p.r.released().Load()
	if rel < p.released || rel > p.last {
		return p.released, fmt.Errorf("peer released slot %d, after %d with %d sent: %w", rel, p.released, p.last, ErrPeer)
	}
	for p.released < rel {
		p.released++
		p.inflight -= p.sizes[p.released%SlotsMax]
	}
	return rel, nil
}

// alloc is Alloc for n >= 0 data bytes.
func (p *Producer) alloc(n int) (seq, off uint64, data []byte, ok bool, err error) {
	size := uint64(len(p.r.data))
	m := slotBytes(uint64(n))
	if m > size {
		return 0, 0, nil, false, fmt.Errorf("%d bytes, ring data area %d: %w", n, size, ErrTooLarge)
	}
	rel, err := p.Collect()
	if err != nil {
		return 0, 0, nil, false, err
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

// SourceAcked reports whether the consumer wrote ack, the value of the
// source offer this producer sent, into the region's header: it mapped
// the producer's source region, so KV_SRC frames may go.
func (p *Producer) SourceAcked(ack [kvwire.NonceBytes]byte) bool {
	return subtle.ConstantTimeCompare(p.r.mem[offSrcAck:offSrcAck+kvwire.NonceBytes], ack[:]) == 1
}

// Revoke tells the consumer that no KV_SRC frame of this ring is to be
// trusted any more: the producer is about to reuse the source memory
// they name (its connection ended before the consumer released them).
// The consumer checks it after each KV_SRC copy (Consumer.Revoked). Safe
// for concurrent use.
func (p *Producer) Revoke() { word(p.r.mem, offRevoked).Store(1) }

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

// stamped checks that the slot at off holds frame seq of n data bytes.
func (c *Consumer) stamped(seq, off uint64, n uint32) error {
	got := word(c.r.data, off).Load() // after the copy's loads
	gotN := binary.LittleEndian.Uint32(c.r.data[off+8:])
	if got != seq || gotN != n {
		return fmt.Errorf("slot at %d holds seq %d length %d, frame says seq %d length %d: %w", off, got, gotN, seq, n, ErrSlot)
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
	err := c.stamped(f.Seq, f.Offset, f.Length)
	c.next = f.Seq + 1
	c.r.released().Store(f.Seq)
	return err
}

// Mark checks a KV_SRC frame's slot against the ring, as Slot does for
// KV_SHM: the next in sequence, its slot header aligned and inside the
// data area. Every error wraps ErrPeer.
func (c *Consumer) Mark(f *kvwire.KVSrc) error {
	size := uint64(len(c.r.data))
	if f.Seq != c.next {
		return fmt.Errorf("KV_SRC seq %d, want %d: %w", f.Seq, c.next, ErrPeer)
	}
	if f.Slot%slotAlign != 0 || f.Slot > size || SlotHeaderBytes > size-f.Slot {
		return fmt.Errorf("KV_SRC slot at %d outside the %d-byte ring or unaligned: %w", f.Slot, size, ErrPeer)
	}
	return nil
}

// ReleaseMark ends KV_SRC frame f (after Mark): it checks the slot
// holds f's sequence number and no data, then hands it back.
func (c *Consumer) ReleaseMark(f *kvwire.KVSrc) error {
	err := c.stamped(f.Seq, f.Slot, 0)
	c.next = f.Seq + 1
	c.r.released().Store(f.Seq)
	return err
}

// AckSource writes ack, the value of the producer's source offer, into
// the header: this side mapped the producer's source region.
func (c *Consumer) AckSource(ack [kvwire.NonceBytes]byte) {
	copy(c.r.mem[offSrcAck:offSrcAck+kvwire.NonceBytes], ack[:])
}

// Revoked reports whether the producer revoked its KV_SRC frames
// (Producer.Revoke). Called after a KV_SRC copy: it is a read-modify-write
// so that, on weakly ordered CPUs too, none of the copy's loads comes
// after it; true means the bytes copied may be another page's.
func (c *Consumer) Revoked() bool { return word(c.r.mem, offRevoked).Add(0) != 0 }
