package kvwire

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"

	"tandem/internal/pd/room"
)

// Magic is the first field of every header: the bytes "TDKV" read as a
// little-endian uint32.
const Magic uint32 = 'T' | 'D'<<8 | 'K'<<16 | 'V'<<24

// Version is the protocol version this package speaks. A header with any
// other version is refused with ErrVersion.
//
// Version 3 adds the recurrent state of hybrid models: the shape's
// StateBytes and StateLayout, state frames (KindState) and DONE's
// StateBytes and StateSum. Version 2 sealed every frame after the
// handshake (see SealedBytes) and bound the whole handshake transcript in
// its MACs (HandshakeHash). Version 1 sent frames in clear after the
// handshake. A listener answers an AUTH_HELLO of an older version with an
// AUTH_REJECT of that version (RejectVersion; the payload layout is the
// same in every version), so an old dialer fails with a clear message
// instead of a bare close.
const Version uint8 = 3

// VersionPlaintext is the last protocol version without sealed frames.
const VersionPlaintext uint8 = 1

// Header is the fixed 32-byte frame header. Layout, little-endian:
//
//	offset size field
//	0      4    magic "TDKV"
//	4      1    version (2)
//	5      1    type
//	6      2    flags (none defined in version 2; must be 0)
//	8      16   room id (zero for auth and heartbeat frames, non-zero otherwise)
//	24     4    payload length in bytes (plaintext, tags not counted)
//	28     4    CRC-32C (Castagnoli) of the payload on handshake frames
//	            (0 for an empty payload); 0 on sealed frames
//
// Handshake frames travel in clear with the checksum, which the receiver
// verifies (a mismatch closes the connection). Every frame after the
// handshake is sealed (SealedBytes): its header stays in clear and is
// authenticated as the additional data of its records, whose AES-GCM tags
// subsume the checksum (a 128-bit MAC over header and payload, where a
// CRC-32 catches random errors only), so sealed frames carry 0 there.
type Header struct {
	Version  uint8
	Type     Type
	Flags    uint16
	Room     room.ID
	Length   uint32
	Checksum uint32
}

// castagnoli is the CRC-32C table (a constant lookup table).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum returns the CRC-32C of b.
func Checksum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// UpdateChecksum returns the CRC-32C of the bytes summed into crc followed
// by b; it lets a receiver sum a payload read in pieces.
func UpdateChecksum(crc uint32, b []byte) uint32 { return crc32.Update(crc, castagnoli, b) }

// NewHeader returns the header of a frame of type typ for room id carrying
// payload, with its length and checksum filled in.
func NewHeader(typ Type, id room.ID, payload []byte) Header {
	return Header{Version: Version, Type: typ, Room: id, Length: uint32(len(payload)), Checksum: Checksum(payload)}
}

// Put writes h into buf.
func (h Header) Put(buf *[HeaderBytes]byte) {
	binary.LittleEndian.PutUint32(buf[0:], Magic)
	buf[4] = h.Version
	buf[5] = uint8(h.Type)
	binary.LittleEndian.PutUint16(buf[6:], h.Flags)
	copy(buf[8:24], h.Room[:])
	binary.LittleEndian.PutUint32(buf[24:], h.Length)
	binary.LittleEndian.PutUint32(buf[28:], h.Checksum)
}

// AppendTo appends the 32 encoded header bytes to b.
func (h Header) AppendTo(b []byte) []byte {
	var buf [HeaderBytes]byte
	h.Put(&buf)
	return append(b, buf[:]...)
}

// AppendFrame appends a whole frame (header and payload) of type typ for
// room id to dst. It is meant for control frames; KV frames are written
// header first and data after, without copying the data.
func AppendFrame(dst []byte, typ Type, id room.ID, payload []byte) []byte {
	dst = NewHeader(typ, id, payload).AppendTo(dst)
	return append(dst, payload...)
}

// ParseHeader decodes and checks the header in buf: magic, version, a
// known type, no flags, a room id only on frames that carry one, and a
// length within the type's bounds (see PayloadBytesMin / PayloadBytesMax).
// It does not look at the payload.
func ParseHeader(buf *[HeaderBytes]byte) (Header, error) {
	if m := binary.LittleEndian.Uint32(buf[0:]); m != Magic {
		return Header{}, fmt.Errorf("parse header: magic %q is not %q: %w", buf[0:4], "TDKV", ErrMagic)
	}
	h := Header{
		Version:  buf[4],
		Type:     Type(buf[5]),
		Flags:    binary.LittleEndian.Uint16(buf[6:]),
		Length:   binary.LittleEndian.Uint32(buf[24:]),
		Checksum: binary.LittleEndian.Uint32(buf[28:]),
	}
	copy(h.Room[:], buf[8:24])
	if err := h.Check(); err != nil {
		return Header{}, fmt.Errorf("parse header: %w", err)
	}
	return h, nil
}

// Check reports what is wrong with h, or nil. ParseHeader calls it; a
// sender may call it to refuse a frame its peer would refuse.
func (h Header) Check() error {
	if h.Version != Version {
		return fmt.Errorf("version %d, this node speaks %d: %w", h.Version, Version, ErrVersion)
	}
	if !h.Type.Valid() {
		return fmt.Errorf("type %d: %w", uint8(h.Type), ErrType)
	}
	if h.Flags != 0 {
		return fmt.Errorf("%v frame: flags %#04x set, version %d defines none: %w", h.Type, h.Flags, Version, ErrMalformed)
	}
	if !h.Type.HasRoom() && h.Room != (room.ID{}) {
		return fmt.Errorf("%v frame: room id %v set, the type carries none: %w", h.Type, h.Room, ErrMalformed)
	}
	if h.Type.HasRoom() && h.Room == (room.ID{}) {
		return fmt.Errorf("%v frame: room id missing: %w", h.Type, ErrMalformed)
	}
	if max := h.Type.PayloadBytesMax(); int64(h.Length) > int64(max) {
		return fmt.Errorf("%v frame: payload length %d above the limit %d: %w", h.Type, h.Length, max, ErrTooLarge)
	}
	if min := h.Type.PayloadBytesMin(); int64(h.Length) < int64(min) {
		return fmt.Errorf("%v frame: payload length %d below the minimum %d: %w", h.Type, h.Length, min, ErrMalformed)
	}
	return nil
}

// ReadHeader reads one header from r into buf and checks it with
// ParseHeader. A stream that ends before the first byte gives an error
// wrapping io.EOF (a clean close); one that ends inside the header wraps
// io.ErrUnexpectedEOF.
func ReadHeader(r io.Reader, buf *[HeaderBytes]byte) (Header, error) {
	if _, err := io.ReadFull(r, buf[:]); err != nil {
		return Header{}, fmt.Errorf("read header: %w", err)
	}
	return ParseHeader(buf)
}

// SealedBytes returns how many bytes follow the header of a sealed frame
// (every frame after the handshake) with header h: its records, each the
// ciphertext of its plaintext and a SealTagBytes tag. A control frame
// (or heartbeat) is one record of the whole payload (just a tag when the
// payload is empty). A KV frame is one record of the sub-header, then its
// data in records of SealRecordBytesMax (the last one shorter; none for
// empty data). Each record is sealed with AES-256-GCM under the
// direction's session key (SessionKeys), with the 12-byte nonce 0^4 ||
// u64 little-endian count of records sealed before it in that direction
// (never sent: the receiver counts too, so a replayed, dropped or
// reordered record fails to open), and the 32 header bytes as additional
// data.
func SealedBytes(h Header) int {
	if h.Type != TypeKV {
		return int(h.Length) + SealTagBytes
	}
	data := int(h.Length) - KVSubHeaderBytes
	records := (data + SealRecordBytesMax - 1) / SealRecordBytesMax
	return KVSubHeaderBytes + SealTagBytes + data + records*SealTagBytes
}

// WriteHeader encodes h into buf and writes it to w.
func WriteHeader(w io.Writer, buf *[HeaderBytes]byte, h Header) error {
	h.Put(buf)
	if _, err := w.Write(buf[:]); err != nil {
		return fmt.Errorf("write header: %w", err)
	}
	return nil
}

// VerifyChecksum returns an error wrapping ErrChecksum when payload does
// not match h.Checksum.
func (h Header) VerifyChecksum(payload []byte) error {
	if got := Checksum(payload); got != h.Checksum {
		return fmt.Errorf("%v frame for room %v: payload crc32c %#08x, header says %#08x: %w", h.Type, h.Room, got, h.Checksum, ErrChecksum)
	}
	return nil
}
