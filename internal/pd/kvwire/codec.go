package kvwire

import (
	"encoding/binary"
	"fmt"
	"math"
	"unicode/utf8"
)

// decoder reads little-endian fields from a payload with a sticky error:
// after the first failure every read returns zero values, so a Decode can
// read all its fields and check the error once. Nothing it does allocates
// more than the bytes it has been given.
type decoder struct {
	what string // the payload's name, for errors
	b    []byte
	err  error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("decode %s: %s: %w", d.what, fmt.Sprintf(format, args...), ErrMalformed)
	}
}

// take returns the next n bytes, or nil after recording an error naming
// field when fewer remain.
func (d *decoder) take(field string, n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b) {
		d.fail("%s: need %d bytes, %d left", field, n, len(d.b))
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) u8(field string) uint8 {
	if v := d.take(field, 1); v != nil {
		return v[0]
	}
	return 0
}

func (d *decoder) u16(field string) uint16 {
	if v := d.take(field, 2); v != nil {
		return binary.LittleEndian.Uint16(v)
	}
	return 0
}

func (d *decoder) u32(field string) uint32 {
	if v := d.take(field, 4); v != nil {
		return binary.LittleEndian.Uint32(v)
	}
	return 0
}

func (d *decoder) u64(field string) uint64 {
	if v := d.take(field, 8); v != nil {
		return binary.LittleEndian.Uint64(v)
	}
	return 0
}

func (d *decoder) f32(field string) float32 { return math.Float32frombits(d.u32(field)) }

func (d *decoder) array32(field string) (a [32]byte) {
	if v := d.take(field, 32); v != nil {
		copy(a[:], v)
	}
	return a
}

// str reads a u16 length and that many bytes, refusing more than max.
func (d *decoder) str(field string, max int) string {
	n := int(d.u16(field + " length"))
	if d.err == nil && n > max {
		d.fail("%s: %d bytes, limit %d", field, n, max)
		return ""
	}
	return string(d.take(field, n))
}

// count reads a count of items of itemBytes each, refusing more than max or
// more than the remaining bytes can hold, so the caller may allocate it.
func (d *decoder) count(field string, n, itemBytes, max int) int {
	if d.err != nil {
		return 0
	}
	if n > max {
		d.fail("%s: %d items, limit %d", field, n, max)
		return 0
	}
	if n*itemBytes > len(d.b) {
		d.fail("%s: %d items need %d bytes, %d left", field, n, n*itemBytes, len(d.b))
		return 0
	}
	return n
}

// done returns the sticky error, or an error when bytes are left over.
func (d *decoder) done() error {
	if d.err == nil && len(d.b) != 0 {
		d.fail("%d trailing bytes", len(d.b))
	}
	return d.err
}

func appendU16(b []byte, v uint16) []byte { return binary.LittleEndian.AppendUint16(b, v) }
func appendU32(b []byte, v uint32) []byte { return binary.LittleEndian.AppendUint32(b, v) }
func appendU64(b []byte, v uint64) []byte { return binary.LittleEndian.AppendUint64(b, v) }
func appendF32(b []byte, v float32) []byte {
	return binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
}

// appendStr appends a u16 length and s. A string longer than 65535 bytes
// gets the length 65535 and its first 65535 bytes, which no decoder
// accepts (every field limit is lower), so an over-long field fails at
// the receiver instead of arriving changed. Fields that are better cut
// than refused (messages) go through cutMessage first.
func appendStr(b []byte, s string) []byte {
	if len(s) > math.MaxUint16 {
		s = s[:math.MaxUint16]
	}
	b = appendU16(b, uint16(len(s)))
	return append(b, s...)
}

// cutMessage shortens s to at most MessageBytesMax bytes at a UTF-8
// boundary.
func cutMessage(s string) string {
	if len(s) <= MessageBytesMax {
		return s
	}
	n := MessageBytesMax
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
