package kvwire

import "fmt"

// Shared-memory KV transport (see internal/pd/shm). Two workers on one
// host can carry KV data bytes through a shared-memory ring instead of
// the TCP stream; the stream still carries every frame, sealed as usual,
// and a KV frame becomes a small KV_SHM frame that names where its bytes
// lie in the ring. Either side of a connection may offer a region it
// created to receive into (SHM_OFFER); the other answers SHM_REPLY
// (accepted, declined or failed). Both are connection frames (no room id).
//
// A prefill worker whose KV cache itself lies in a memfd (a source
// region) also sends, right after accepting a decode worker's offer,
// SHM_SOURCE: the decode side maps that region read-only, and KV frames
// become KV_SRC frames naming a range of it, which the decode side
// copies straight into its page: one copy a page instead of two.

// ShmRegionBytesMin and ShmRegionBytesMax bound the size of an offered
// region; sizes are whole pages (ShmPageBytes).
const (
	ShmRegionBytesMin = 1 << 20
	ShmRegionBytesMax = 1 << 30
	ShmPageBytes      = 4096
	// ShmNameBytes is the size of the random part of a region's name.
	ShmNameBytes = 16
	// shmPIDMax bounds an offer's process id (Linux's pid_max limit, 2^22).
	shmPIDMax = 1 << 22
	// shmFDMax bounds an offer's file descriptor number.
	shmFDMax = 1<<31 - 1
	// ShmSourceBytesMax bounds a source region (a prefill worker's whole
	// KV cache, its header page included).
	ShmSourceBytesMax = 1 << 40
)

const (
	shmOfferBytes = 4 + 4 + 8 + ShmNameBytes + 2*NonceBytes
	kvShmBytes    = KVSubHeaderBytes + 8 + 8 + 4 + 4
	kvSrcBytes    = KVSubHeaderBytes + 8 + 8 + 8 + 4 + 4
)

// ShmOffer offers the receiver of the frame a shared-memory region to
// write the sender's incoming KV data into. The region is a sealed memfd
// of the sender's process, reachable as /proc/PID/fd/FD while the offer
// is open; its name ends in the hex of Name; its header holds Cookie,
// and the accepting side writes Ack into it, so each side knows the
// other mapped the same memory. Only a peer that completed the handshake
// sees an offer (it is sealed like every frame).
type ShmOffer struct {
	PID    uint32 // the offering process (≤ 2^22)
	FD     uint32 // its descriptor of the region (≤ 2^31-1)
	Bytes  uint64 // the region's size: ShmRegionBytesMin..ShmRegionBytesMax, whole pages
	Name   [ShmNameBytes]byte
	Cookie [NonceBytes]byte
	Ack    [NonceBytes]byte
}

// Type returns TypeShmOffer.
func (*ShmOffer) Type() Type { return TypeShmOffer }

// AppendTo appends the encoding of m.
func (m *ShmOffer) AppendTo(b []byte) []byte {
	b = appendU32(b, m.PID)
	b = appendU32(b, m.FD)
	b = appendU64(b, m.Bytes)
	b = append(b, m.Name[:]...)
	b = append(b, m.Cookie[:]...)
	return append(b, m.Ack[:]...)
}

// Decode decodes b into m.
func (m *ShmOffer) Decode(b []byte) error {
	return m.decode("SHM_OFFER", b, ShmRegionBytesMin, ShmRegionBytesMax)
}

// decode decodes b into m, a region of minBytes..maxBytes.
func (m *ShmOffer) decode(what string, b []byte, minBytes, maxBytes uint64) error {
	d := decoder{what: what, b: b}
	m.PID = d.u32("pid")
	m.FD = d.u32("fd")
	m.Bytes = d.u64("bytes")
	copy(m.Name[:], d.take("name", ShmNameBytes))
	m.Cookie = d.array32("cookie")
	m.Ack = d.array32("ack")
	switch {
	case d.err != nil:
	case m.PID == 0 || m.PID > shmPIDMax:
		d.fail("pid %d outside 1..%d", m.PID, shmPIDMax)
	case m.FD > shmFDMax:
		d.fail("fd %d above %d", m.FD, shmFDMax)
	case m.Bytes < minBytes || m.Bytes > maxBytes || m.Bytes%ShmPageBytes != 0:
		d.fail("region of %d bytes: want whole %d-byte pages within %d..%d", m.Bytes, ShmPageBytes, minBytes, maxBytes)
	}
	return d.done()
}

// ShmSource tells a decode worker where the sender's source region is: a
// sealed memfd holding the prefill worker's KV pages, to be mapped
// read-only. Its fields mean what an ShmOffer's do, except that the
// region's size is 2 pages..ShmSourceBytesMax and that the accepting side
// writes Ack into the header of the region it offered (it cannot write
// into this one), which tells the sender KV_SRC frames may come.
type ShmSource struct{ ShmOffer }

// Type returns TypeShmSource.
func (*ShmSource) Type() Type { return TypeShmSource }

// Decode decodes b into m.
func (m *ShmSource) Decode(b []byte) error {
	return m.decode("SHM_SOURCE", b, 2*ShmPageBytes, ShmSourceBytesMax)
}

// ShmStatus is the answer to an offer.
type ShmStatus uint8

// The answers.
const (
	ShmAccepted ShmStatus = 0 // mapped: KV data to the offerer goes through the region
	ShmDeclined ShmStatus = 1 // this side's configuration says TCP (--kv-transport tcp)
	ShmFailed   ShmStatus = 2 // the region could not be opened, checked or mapped; the message says why
)

// String returns "accepted", "declined", "failed" or "status(N)".
func (s ShmStatus) String() string {
	switch s {
	case ShmAccepted:
		return "accepted"
	case ShmDeclined:
		return "declined"
	case ShmFailed:
		return "failed"
	}
	return fmt.Sprintf("status(%d)", uint8(s))
}

// ShmReply answers an ShmOffer.
type ShmReply struct {
	Status  ShmStatus
	Message string // why, when not accepted; cut to MessageBytesMax when encoded
}

// Type returns TypeShmReply.
func (*ShmReply) Type() Type { return TypeShmReply }

// AppendTo appends the encoding of m.
func (m *ShmReply) AppendTo(b []byte) []byte {
	return appendStr(append(b, byte(m.Status)), cutMessage(m.Message))
}

// Decode decodes b into m.
func (m *ShmReply) Decode(b []byte) error {
	d := decoder{what: "SHM_REPLY", b: b}
	m.Status = ShmStatus(d.u8("status"))
	m.Message = d.str("message", MessageBytesMax)
	if d.err == nil && m.Status > ShmFailed {
		d.fail("status %d unknown", m.Status)
	}
	return d.done()
}

// KVShm is a KV frame whose data bytes lie in the receiver's region (see
// internal/pd/shm): the KV sub-header, the frame's sequence number on
// the connection's ring (1, 2, ...), the offset of its slot in the
// region's data area, and the data length. Encoding: the 8-byte KV
// sub-header, seq u64, offset u64, length u32, a reserved zero u32.
// Decode checks the fields alone; the receiver checks them against its
// region.
type KVShm struct {
	KV     KV
	Seq    uint64
	Offset uint64
	Length uint32 // 1..KVDataBytesMax
}

// Type returns TypeKVShm.
func (*KVShm) Type() Type { return TypeKVShm }

// AppendTo appends the encoding of m.
func (m *KVShm) AppendTo(b []byte) []byte {
	b = m.KV.AppendTo(b)
	b = appendU64(b, m.Seq)
	b = appendU64(b, m.Offset)
	b = appendU32(b, m.Length)
	return appendU32(b, 0)
}

// Decode decodes b into m.
func (m *KVShm) Decode(b []byte) error {
	d := decoder{what: "KV_SHM", b: b}
	sub := d.take("sub-header", KVSubHeaderBytes)
	m.Seq = d.u64("seq")
	m.Offset = d.u64("offset")
	m.Length = d.u32("length")
	reserved := d.u32("reserved")
	if d.err == nil {
		if err := m.KV.Decode(sub); err != nil {
			return fmt.Errorf("KV_SHM: %w", err)
		}
	}
	switch {
	case d.err != nil:
	case m.Seq == 0:
		d.fail("seq 0 (sequence numbers start at 1)")
	case m.Length == 0 || m.Length > KVDataBytesMax:
		d.fail("length %d outside 1..%d", m.Length, KVDataBytesMax)
	case m.Offset >= ShmRegionBytesMax:
		d.fail("offset %d beyond the largest region (%d bytes)", m.Offset, ShmRegionBytesMax)
	case reserved != 0:
		d.fail("reserved field is %d, want 0", reserved)
	}
	return d.done()
}

// KVSrc is a KV frame whose data bytes lie in the sender's source region
// (SHM_SOURCE): the KV sub-header, the frame's sequence number on the
// receiver's ring and the offset of its slot there (a slot without data
// that keeps the ring's order and release), the offset of the data in
// the source region's data area, and the data length. Encoding: the
// 8-byte KV sub-header, seq u64, slot u64, offset u64, length u32, a
// reserved zero u32. Decode checks the fields alone; the receiver checks
// them against its ring and the source region.
type KVSrc struct {
	KV     KV
	Seq    uint64
	Slot   uint64
	Offset uint64
	Length uint32 // 1..KVDataBytesMax
}

// Type returns TypeKVSrc.
func (*KVSrc) Type() Type { return TypeKVSrc }

// AppendTo appends the encoding of m.
func (m *KVSrc) AppendTo(b []byte) []byte {
	b = m.KV.AppendTo(b)
	b = appendU64(b, m.Seq)
	b = appendU64(b, m.Slot)
	b = appendU64(b, m.Offset)
	b = appendU32(b, m.Length)
	return appendU32(b, 0)
}

// Decode decodes b into m.
func (m *KVSrc) Decode(b []byte) error {
	d := decoder{what: "KV_SRC", b: b}
	sub := d.take("sub-header", KVSubHeaderBytes)
	m.Seq = d.u64("seq")
	m.Slot = d.u64("slot")
	m.Offset = d.u64("offset")
	m.Length = d.u32("length")
	reserved := d.u32("reserved")
	if d.err == nil {
		if err := m.KV.Decode(sub); err != nil {
			return fmt.Errorf("KV_SRC: %w", err)
		}
	}
	switch {
	case d.err != nil:
	case m.Seq == 0:
		d.fail("seq 0 (sequence numbers start at 1)")
	case m.Length == 0 || m.Length > KVDataBytesMax:
		d.fail("length %d outside 1..%d", m.Length, KVDataBytesMax)
	case m.Slot >= ShmRegionBytesMax:
		d.fail("slot %d beyond the largest region (%d bytes)", m.Slot, ShmRegionBytesMax)
	case m.Offset >= ShmSourceBytesMax:
		d.fail("offset %d beyond the largest source region (%d bytes)", m.Offset, ShmSourceBytesMax)
	case reserved != 0:
		d.fail("reserved field is %d, want 0", reserved)
	}
	return d.done()
}
