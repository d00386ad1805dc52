package kvwire

import "errors"

// Sentinel errors. Every error this package returns wraps exactly one of
// them (or io.EOF / io.ErrUnexpectedEOF from ReadHeader), so callers can
// classify and count failures with errors.Is without reading error text.
var (
	// ErrMagic: the first four bytes of a header are not "TDKV"; the peer
	// does not speak this protocol.
	ErrMagic = errors.New("kvwire: bad magic")
	// ErrVersion: the header's protocol version is not Version.
	ErrVersion = errors.New("kvwire: unsupported protocol version")
	// ErrType: the header's frame type is not one this version defines.
	ErrType = errors.New("kvwire: unknown frame type")
	// ErrTooLarge: the payload length is above its type's limit.
	ErrTooLarge = errors.New("kvwire: payload too large")
	// ErrMalformed: a header or payload breaks the format (length below
	// the type's minimum, flags set, a field out of range, trailing or
	// missing bytes).
	ErrMalformed = errors.New("kvwire: malformed frame")
	// ErrChecksum: a payload does not match the header's CRC-32C.
	ErrChecksum = errors.New("kvwire: checksum mismatch")
)
