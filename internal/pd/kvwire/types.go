package kvwire

import (
	"fmt"

	"tandem/internal/pd/room"
)

// Type is a frame type: the header's type byte. The set is closed for a
// protocol version; ReadHeader refuses any other value with ErrType.
type Type uint8

// The frame types. The five Auth types make up the handshake that opens
// every connection; Heartbeat flows both ways every interval afterwards;
// the rest belong to one room each (the header's room id) and map 1:1 to
// room.FrameKind, except KV, which the edges send directly.
const (
	TypeAuthHello     Type = iota + 1 // dialer → listener: version, identity, shape, nonce
	TypeAuthChallenge                 // listener → dialer: nonce, listener identity
	TypeAuthResponse                  // dialer → listener: MAC proving the cluster token
	TypeAuthOK                        // listener → dialer: shape, MAC proving the token back
	TypeAuthReject                    // listener → dialer: why the connection is refused
	TypeHeartbeat                     // both ways: sequence number and load
	TypeHello                         // decode → prefill: decode has the room's request
	TypeHelloAck                      // prefill → decode: prefill accepts the room
	TypeAlloc                         // decode → prefill: the room's pages are reserved
	TypeKV                            // prefill → decode: one page of one layer's K or V, or one piece of the state
	TypeFirstToken                    // prefill → decode: the sampled first token
	TypeDone                          // prefill → decode: all KV sent (counts to verify)
	TypeDoneAck                       // decode → prefill: KV verified, room succeeded
	TypeAbort                         // either way: the sender gave up on the room
	TypeFailed                        // either way: the room failed at the sender
	TypeShmOffer                      // either way: a shared-memory region to receive KV data into
	TypeShmReply                      // either way: the answer to an SHM_OFFER
	TypeKVShm                         // prefill → decode: a KV frame whose data lies in the region
	TypeShmSource                     // prefill → decode: the sender's KV pages, to copy KV_SRC frames' data out of
	TypeKVSrc                         // prefill → decode: a KV frame whose data lies in the sender's source region
	typeEnd
)

var typeNames = [typeEnd]string{
	TypeAuthHello:     "AUTH_HELLO",
	TypeAuthChallenge: "AUTH_CHALLENGE",
	TypeAuthResponse:  "AUTH_RESPONSE",
	TypeAuthOK:        "AUTH_OK",
	TypeAuthReject:    "AUTH_REJECT",
	TypeHeartbeat:     "HEARTBEAT",
	TypeHello:         "HELLO",
	TypeHelloAck:      "HELLO_ACK",
	TypeAlloc:         "ALLOC",
	TypeKV:            "KV",
	TypeFirstToken:    "FIRST_TOKEN",
	TypeDone:          "DONE",
	TypeDoneAck:       "DONE_ACK",
	TypeAbort:         "ABORT",
	TypeFailed:        "FAILED",
	TypeShmOffer:      "SHM_OFFER",
	TypeShmReply:      "SHM_REPLY",
	TypeKVShm:         "KV_SHM",
	TypeShmSource:     "SHM_SOURCE",
	TypeKVSrc:         "KV_SRC",
}

// String returns the type's protocol name ("HELLO_ACK"), or "type(N)".
func (t Type) String() string {
	if t.Valid() {
		return typeNames[t]
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// Valid reports whether t is a type of this protocol version.
func (t Type) Valid() bool { return t >= TypeAuthHello && t < typeEnd }

// IsAuth reports whether t belongs to the handshake.
func (t Type) IsAuth() bool { return t >= TypeAuthHello && t <= TypeAuthReject }

// HasRoom reports whether frames of type t belong to a room (and so carry a
// non-zero room id); auth, heartbeat and the connection's SHM_OFFER,
// SHM_REPLY and SHM_SOURCE frames carry a zero id.
func (t Type) HasRoom() bool {
	return (t >= TypeHello && t <= TypeFailed) || t == TypeKVShm || t == TypeKVSrc
}

// Encoded sizes used for the per-type bounds.
const (
	shapeBytesMin     = 2 + 4*4 + 2 + 4 + 2 + 4 + 2
	shapeBytesMax     = shapeBytesMin + ModelBytesMax + DTypeBytesMax + WindowMaskBytesMax + StateLayoutBytesMax
	authHelloBytesMin = 1 + 2 + shapeBytesMin + NonceBytes + 8 + 4
	authOKBytesMin    = shapeBytesMin + NonceBytes + 8 + 4
	challengeBytesMin = NonceBytes + 2
	messageFrameMin   = 1 + 2 // reason or code, message length
	heartbeatBytes    = 8 + 5*4
	firstTokenMin     = 4 + 4 + 1
	topLogprobBytes   = 4 + 4
	doneBytes         = 4 + 8 + 8 + 4
	allocBytesMin     = 4
)

// payloadBounds holds each type's [min, max] payload length.
var payloadBounds = [typeEnd][2]int{
	TypeAuthHello:     {authHelloBytesMin, authHelloBytesMin + NodeAddrBytesMax + shapeBytesMax - shapeBytesMin},
	TypeAuthChallenge: {challengeBytesMin, challengeBytesMin + NodeAddrBytesMax},
	TypeAuthResponse:  {NonceBytes, NonceBytes},
	TypeAuthOK:        {authOKBytesMin, authOKBytesMin + shapeBytesMax - shapeBytesMin},
	TypeAuthReject:    {messageFrameMin, messageFrameMin + MessageBytesMax},
	TypeHeartbeat:     {heartbeatBytes, heartbeatBytes},
	TypeHello:         {0, 0},
	TypeHelloAck:      {0, 0},
	TypeAlloc:         {allocBytesMin, allocBytesMin + 4*AllocPagesMax},
	TypeKV:            {KVSubHeaderBytes, KVPayloadBytesMax},
	TypeFirstToken:    {firstTokenMin, firstTokenMin + TopLogprobsMax*topLogprobBytes},
	TypeDone:          {doneBytes, doneBytes},
	TypeDoneAck:       {0, 0},
	TypeAbort:         {messageFrameMin, messageFrameMin + MessageBytesMax},
	TypeFailed:        {messageFrameMin, messageFrameMin + MessageBytesMax},
	TypeShmOffer:      {shmOfferBytes, shmOfferBytes},
	TypeShmReply:      {messageFrameMin, messageFrameMin + MessageBytesMax},
	TypeKVShm:         {kvShmBytes, kvShmBytes},
	TypeShmSource:     {shmOfferBytes, shmOfferBytes},
	TypeKVSrc:         {kvSrcBytes, kvSrcBytes},
}

// PayloadBytesMin is the shortest payload a frame of type t can have; 0
// for an unknown type.
func (t Type) PayloadBytesMin() int {
	if !t.Valid() {
		return 0
	}
	return payloadBounds[t][0]
}

// PayloadBytesMax is the longest payload a frame of type t can have:
// KVPayloadBytesMax for KV, at most ControlPayloadBytesMax for the rest; 0
// for an unknown type.
func (t Type) PayloadBytesMax() int {
	if !t.Valid() {
		return 0
	}
	return payloadBounds[t][1]
}

// frameKindTypes maps room.FrameKind to Type.
var frameKindTypes = [...]Type{
	room.FrameHello:      TypeHello,
	room.FrameHelloAck:   TypeHelloAck,
	room.FrameAlloc:      TypeAlloc,
	room.FrameFirstToken: TypeFirstToken,
	room.FrameDone:       TypeDone,
	room.FrameDoneAck:    TypeDoneAck,
	room.FrameAbort:      TypeAbort,
	room.FrameFailed:     TypeFailed,
}

// TypeFor returns the frame type that carries the core's frame kind k, or
// 0 (not a valid Type) for a kind this version does not know.
func TypeFor(k room.FrameKind) Type {
	if int(k) >= len(frameKindTypes) {
		return 0
	}
	return frameKindTypes[k]
}

// FrameKind returns the core's frame kind for t, and false for the types
// the core never sees (auth, heartbeat, KV).
func (t Type) FrameKind() (room.FrameKind, bool) {
	for k, typ := range frameKindTypes {
		if typ == t && typ != 0 {
			return room.FrameKind(k), true
		}
	}
	return 0, false
}
