package kvwire

import "tandem/internal/pd/room"

// An ALLOC of AllocPagesMax pages (a 4-byte count, then 4 bytes a page)
// fits a control payload; one more page would not.
var (
	_ = [1]int{}[max(0, (4+4*AllocPagesMax)-ControlPayloadBytesMax)]
	_ = [1]int{}[max(0, ControlPayloadBytesMax+1-(4+4*(AllocPagesMax+1)))]
)

// Sizes and limits of the wire format. Each limit has a rejection path that
// names it: ReadHeader refuses a header whose length is outside its type's
// bounds (ErrTooLarge or ErrMalformed) and every Decode refuses a payload
// that breaks a field limit (ErrMalformed). The relations between them are
// checked by TestLimits.
const (
	// HeaderBytes is the size of the fixed frame header.
	HeaderBytes = 32

	// KVSubHeaderBytes is the size of a KV frame's sub-header (layer,
	// kind, reserved byte, ordinal), which precedes the data bytes.
	KVSubHeaderBytes = 8

	// ControlPayloadBytesMax bounds the payload of every frame except KV.
	ControlPayloadBytesMax = 64 << 10

	// KVDataBytesMax bounds the data bytes of one KV frame: one page of
	// one layer's K or V. 16 MiB covers 256-token pages of 64 heads of
	// dimension 256 in f32.
	KVDataBytesMax = 16 << 20

	// KVPayloadBytesMax bounds a KV frame's payload: sub-header and data.
	KVPayloadBytesMax = KVSubHeaderBytes + KVDataBytesMax

	// AuthPayloadBytesMax bounds the payload of every handshake frame:
	// the most a node reads from a peer that has not authenticated yet
	// (the transport refuses any other frame type before the handshake
	// ends, at its header). Every auth type's own maximum is below it.
	AuthPayloadBytesMax = 2 << 10

	// AllocPagesMax is the most page numbers one ALLOC carries: as many as
	// fit in a control payload after the count. It is the room core's
	// limit, so the core never asks for an ALLOC the wire cannot carry
	// (TestLimits asserts the two agree).
	AllocPagesMax = room.AllocPagesMax

	// TopLogprobsMax is the most alternatives a FIRST_TOKEN carries
	// (OpenAI's top_logprobs limit).
	TopLogprobsMax = 20

	// MessageBytesMax bounds the text of ABORT, FAILED and AUTH_REJECT.
	MessageBytesMax = 1 << 10

	// NodeAddrBytesMax bounds a node's transfer address (its identity).
	NodeAddrBytesMax = 255

	// ModelBytesMax bounds Shape.Model.
	ModelBytesMax = 255

	// DTypeBytesMax bounds Shape.DType.
	DTypeBytesMax = 16

	// WindowMaskBytesMax bounds Shape.WindowMask: 4096 layers.
	WindowMaskBytesMax = 512

	// StateBytesMax bounds Shape.StateBytes: one sequence's recurrent
	// state.
	StateBytesMax = 1 << 30

	// StateLayoutBytesMax bounds Shape.StateLayout.
	StateLayoutBytesMax = 255

	// StateFramesTarget is about how many frames a state is cut into
	// (StateFrameSize), and StateFrameBytesMax the most one carries
	// unless a KV page is larger: a quarter of the smallest shared-memory
	// ring.
	StateFramesTarget  = 64
	StateFrameBytesMax = 256 << 10

	// NonceBytes is the size of a handshake nonce and of a MAC.
	NonceBytes = 32

	// SealTagBytes is the size of the AES-GCM tag that ends every sealed
	// record.
	SealTagBytes = 16

	// SealRecordBytesMax bounds the data of one sealed record of a KV
	// frame: the data is sealed in records of this size (the last one
	// shorter), each with its own tag, so a receiver opens each record
	// from a small buffer straight into the destination page, and a
	// sender seals from the source page into a small buffer.
	SealRecordBytesMax = 64 << 10

	// SealRecordsMax bounds the records sealed under one key (one
	// direction of one connection). A connection that reaches it is
	// closed; the redial derives fresh keys. Far below GCM's limits for
	// counter nonces.
	SealRecordsMax = 1 << 48
)
