// Package kvwire is the frame codec of the link between prefill and decode
// workers: a versioned, framed binary protocol, with no sockets and no
// goroutines.
//
// # Place in the data flow
//
// internal/pd/transfer owns the TCP connections. It reads every frame's
// fixed header with [ReadHeader], reads the payload the header announces,
// and decodes it with the payload types here ([AuthHello] ... [Failed]).
// The worker edges build payloads with AppendTo and hand them to the
// transport; [TypeFor] and [Type.FrameKind] translate between the room
// core's room.FrameKind and the wire types. KV frames are special: their
// payload is an 8-byte [KV] sub-header followed by the page's data, which
// the transport reads straight into the destination page and writes
// straight from the source page (no copy), so the sub-header comes first.
//
// # Format
//
// Every frame is a 32-byte little-endian [Header] (magic "TDKV", version
// 2, type, flags, room id, payload length, CRC-32C of the payload on
// handshake frames) and the payload: in clear for the five handshake
// frames, sealed with AES-256-GCM for every frame after them
// ([SealedBytes], keys from [SessionKeys]). Each [Type] has a payload length range ([Type.PayloadBytesMin],
// [Type.PayloadBytesMax]); the header check refuses lengths outside it, so
// a reader never allocates more than the type allows: at most
// [ControlPayloadBytesMax] (64 KiB) for control frames and
// [KVPayloadBytesMax] (16 MiB + 8) for KV frames. Strings carry a u16
// length and a per-field limit; lists carry a count checked against both
// its limit and the bytes that remain before anything is allocated.
//
// The checksum covers handshake payloads (a bad one closes the
// connection). Sealed frames carry 0 there: their tags authenticate
// header and payload, and a frame that fails to open closes the
// connection. [AuthPayloadBytesMax] bounds what a peer that has not
// authenticated can make a node read.
//
// # Invariants
//
//   - Decoders never panic, never read past their input, and refuse
//     trailing bytes; every error wraps one sentinel ([ErrMagic],
//     [ErrVersion], [ErrType], [ErrTooLarge], [ErrMalformed],
//     [ErrChecksum]) so callers count failures with errors.Is.
//   - Decode(AppendTo(x)) == x for every value within the field limits, and
//     the encoding is canonical: whatever decodes re-encodes to the same
//     bytes. Values over a limit either are cut (messages, at a UTF-8
//     boundary) or encode bytes that no receiver accepts; never a
//     different valid value.
//   - The handshake MACs ([AuthMAC]) bind the cluster token, the whole
//     transcript ([HandshakeHash]: both nonces, both addresses, versions,
//     shapes, incarnations, intervals) and the side that computed them.
//
// # Tests
//
// Round trips of hand-made and random values of every payload, a table of
// malformed headers and payloads with the error each gives, allocation
// bounds, the Shape diff text, and FuzzReadFrame (seeds in
// testdata/fuzz/FuzzReadFrame; regenerate with
// go test ./internal/pd/kvwire/ -run TestFuzzSeeds -update-seeds).
package kvwire
