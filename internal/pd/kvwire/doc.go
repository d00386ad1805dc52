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
// 3, type, flags, room id, payload length, CRC-32C of the payload on
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
// # Types
//
// Handshake: AUTH_HELLO (the dialer's nonce and incarnation),
// AUTH_CHALLENGE (with the listener's own address), AUTH_RESPONSE, AUTH_OK
// (a MAC and the listener's incarnation), AUTH_REJECT (a code, so the
// dialer tells a token mismatch from a shape mismatch without reading
// text). Both sides prove the cluster token ([AuthMAC] over
// [HandshakeHash], role-separated) and learn when the other restarted;
// [SessionKeys] derives the two per-direction keys (HKDF-SHA256 of the
// token, salted with the transcript). Session: HEARTBEAT, HELLO,
// HELLO_ACK, ALLOC, KV, FIRST_TOKEN, DONE, DONE_ACK, ABORT, FAILED. Room
// ids are zero on handshake and heartbeat frames and non-zero otherwise;
// flags must be 0.
//
// The same-host shared-memory path (package shm) adds SHM_OFFER (a region
// to receive KV into: pid, fd, size, random name, cookie, ack), SHM_REPLY
// (accepted, declined or failed, with why), KV_SHM (a KV frame whose data
// lies in the receiver's ring: sub-header, ring sequence number, offset,
// length), SHM_SOURCE (an offer of the sender's source region, its KV
// cache, to be mapped read-only) and KV_SRC (a KV frame whose data lies in
// that source: sub-header, sequence number, the offset of its data-less
// ring slot, the data's offset in the source, length).
//
// A sealed frame is the header in clear as AES-256-GCM additional data,
// then records of ciphertext and a 16-byte tag (a control payload is one
// record; a KV frame is its sub-header, then its data in 64 KiB records),
// with the direction's record counter as nonce.
//
// # Shape
//
// Both handshake sides send their [Shape] (model, layers, KV heads, head
// dim, page tokens, dtype, and the sliding window: Window and WindowMask,
// one bit per layer); the connection is refused when they differ
// ([Shape.Diff] names the fields). [Shape.Validate] checks the mask
// against Layers. [Shape.FirstWindowPage] is the first page ordinal a windowed
// layer ships for a prompt: KV frames of windowed layers cover the
// prompt's last window only.
//
// Hybrid models (linear-attention layers with a recurrent state per
// sequence) add StateBytes and StateLayout to the shape: the state's size
// and a name for its layout, both compared by Diff, so two workers whose
// states differ in size or meaning refuse each other. The state travels
// after the room's pages in KV frames of their own kind ([KindState]:
// layer 0, the piece's ordinal, [Shape.StateFrames] pieces of
// [Shape.StateFrameBytes]); they ride every KV path unchanged (KV, KV_SHM,
// KV_SRC carry the same sub-header). DONE counts them in Bytes and adds
// StateBytes and StateSum (CRC-32C of the whole state), so decode verifies
// the state end to end, also on the shared-memory paths whose data carries
// no checksum.
//
// # Limits
//
// limits.go: handshake payloads up to [AuthPayloadBytesMax] (2 KiB),
// control payloads 64 KiB, KV data 16 MiB a frame, ALLOC [AllocPagesMax]
// pages, FIRST_TOKEN [TopLogprobsMax] alternatives, messages 1 KiB (cut at
// a UTF-8 boundary), addresses and model names 255 bytes, dtype 16 bytes,
// offered rings 1 MiB..1 GiB in 4 KiB pages, source regions 8 KiB..1 TiB,
// KV_SHM and KV_SRC lengths 1..16 MiB, a state of at most
// [StateBytesMax] (1 GiB) with a layout name of 255 bytes, cut into frames
// of [StateFrameSize] (about [StateFramesTarget] of them, whole pages, at
// most [StateFrameBytesMax] unless a page is larger).
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
package kvwire
