package kvwire

import (
	"fmt"
	"slices"

	"tandem/internal/pd/room"
)

// Payload is the decoded body of one frame type. AppendTo appends the
// encoding; Decode replaces the receiver's fields with the decoding of
// exactly b (reusing slice capacity it already has) and refuses anything
// else with an error wrapping ErrMalformed, never a panic, and never
// allocates more than len(b) allows. Decode(AppendTo(nil)) gives back an
// equal value for every value within the field limits.
type Payload interface {
	Type() Type
	AppendTo(b []byte) []byte
	Decode(b []byte) error
}

// NewPayload returns a zero Payload of type t, or nil for an unknown type.
func NewPayload(t Type) Payload {
	switch t {
	case TypeAuthHello:
		return new(AuthHello)
	case TypeAuthChallenge:
		return new(AuthChallenge)
	case TypeAuthResponse:
		return new(AuthResponse)
	case TypeAuthOK:
		return new(AuthOK)
	case TypeAuthReject:
		return new(AuthReject)
	case TypeHeartbeat:
		return new(Heartbeat)
	case TypeHello:
		return new(Hello)
	case TypeHelloAck:
		return new(HelloAck)
	case TypeAlloc:
		return new(Alloc)
	case TypeKV:
		return new(KV)
	case TypeFirstToken:
		return new(FirstToken)
	case TypeDone:
		return new(Done)
	case TypeDoneAck:
		return new(DoneAck)
	case TypeAbort:
		return new(Abort)
	case TypeFailed:
		return new(Failed)
	case TypeShmOffer:
		return new(ShmOffer)
	case TypeShmReply:
		return new(ShmReply)
	case TypeKVShm:
		return new(KVShm)
	case TypeShmSource:
		return new(ShmSource)
	case TypeKVSrc:
		return new(KVSrc)
	}
	return nil
}

// DecodePayload decodes a frame payload of type t. For KV it decodes the
// sub-header from the first KVSubHeaderBytes and ignores the data after it.
func DecodePayload(t Type, b []byte) (Payload, error) {
	p := NewPayload(t)
	if p == nil {
		return nil, fmt.Errorf("decode payload: type %d: %w", uint8(t), ErrType)
	}
	if t == TypeKV && len(b) > KVSubHeaderBytes {
		b = b[:KVSubHeaderBytes]
	}
	if err := p.Decode(b); err != nil {
		return nil, err
	}
	return p, nil
}

// AuthHello opens a connection (dialer → listener).
type AuthHello struct {
	Version     uint8            // the protocol version the dialer speaks (Version)
	NodeAddr    string           // the dialer's own transfer address: its identity (≤ NodeAddrBytesMax)
	Shape       Shape            // the dialer's model and page layout
	Nonce       [NonceBytes]byte // the dialer's challenge for the listener's AUTH_OK MAC
	Incarnation uint64           // random per dialer process: a new value means the peer restarted
	// HeartbeatMillis is the dialer's heartbeat interval. Each side
	// declares the other lost after twice the longer of the two
	// intervals, so nodes with different settings do not flap.
	HeartbeatMillis uint32
}

// Type returns TypeAuthHello.
func (*AuthHello) Type() Type { return TypeAuthHello }

// AppendTo appends the encoding of m.
func (m *AuthHello) AppendTo(b []byte) []byte {
	b = append(b, m.Version)
	b = appendStr(b, m.NodeAddr)
	b = m.Shape.AppendTo(b)
	b = append(b, m.Nonce[:]...)
	b = appendU64(b, m.Incarnation)
	return appendU32(b, m.HeartbeatMillis)
}

// Decode decodes b into m.
func (m *AuthHello) Decode(b []byte) error {
	d := decoder{what: "AUTH_HELLO", b: b}
	m.Version = d.u8("version")
	m.NodeAddr = d.str("node_addr", NodeAddrBytesMax)
	m.Shape.decodeFrom(&d)
	m.Nonce = d.array32("nonce")
	m.Incarnation = d.u64("incarnation")
	m.HeartbeatMillis = d.u32("heartbeat_millis")
	return d.done()
}

// AuthChallenge answers AUTH_HELLO (listener → dialer).
type AuthChallenge struct {
	Nonce    [NonceBytes]byte // the listener's challenge for the dialer's AUTH_RESPONSE MAC
	NodeAddr string           // the listener's own transfer address, which the dialer checks against the one it dialed
}

// Type returns TypeAuthChallenge.
func (*AuthChallenge) Type() Type { return TypeAuthChallenge }

// AppendTo appends the encoding of m.
func (m *AuthChallenge) AppendTo(b []byte) []byte {
	b = append(b, m.Nonce[:]...)
	return appendStr(b, m.NodeAddr)
}

// Decode decodes b into m.
func (m *AuthChallenge) Decode(b []byte) error {
	d := decoder{what: "AUTH_CHALLENGE", b: b}
	m.Nonce = d.array32("nonce")
	m.NodeAddr = d.str("node_addr", NodeAddrBytesMax)
	return d.done()
}

// AuthResponse proves the dialer holds the cluster token (dialer →
// listener): MAC = AuthMAC(token, AuthRoleDialer, ...).
type AuthResponse struct {
	MAC [NonceBytes]byte
}

// Type returns TypeAuthResponse.
func (*AuthResponse) Type() Type { return TypeAuthResponse }

// AppendTo appends the encoding of m.
func (m *AuthResponse) AppendTo(b []byte) []byte { return append(b, m.MAC[:]...) }

// Decode decodes b into m.
func (m *AuthResponse) Decode(b []byte) error {
	d := decoder{what: "AUTH_RESPONSE", b: b}
	m.MAC = d.array32("mac")
	return d.done()
}

// AuthOK accepts the connection (listener → dialer).
type AuthOK struct {
	Shape           Shape            // the listener's model and page layout (the dialer checks it too)
	MAC             [NonceBytes]byte // AuthMAC(token, AuthRoleListener, ...): the listener holds the token
	Incarnation     uint64           // random per listener process
	HeartbeatMillis uint32           // the listener's heartbeat interval (see AuthHello)
}

// Type returns TypeAuthOK.
func (*AuthOK) Type() Type { return TypeAuthOK }

// AppendTo appends the encoding of m.
func (m *AuthOK) AppendTo(b []byte) []byte {
	b = m.Shape.AppendTo(b)
	b = append(b, m.MAC[:]...)
	b = appendU64(b, m.Incarnation)
	return appendU32(b, m.HeartbeatMillis)
}

// Decode decodes b into m.
func (m *AuthOK) Decode(b []byte) error {
	d := decoder{what: "AUTH_OK", b: b}
	m.Shape.decodeFrom(&d)
	m.MAC = d.array32("mac")
	m.Incarnation = d.u64("incarnation")
	m.HeartbeatMillis = d.u32("heartbeat_millis")
	return d.done()
}

// RejectCode says why a listener refused a connection.
type RejectCode uint8

// The codes. Unknown codes decode unchanged (a newer peer may send more).
const (
	RejectAuth         RejectCode = iota + 1 // the MAC did not verify: cluster tokens differ
	RejectIncompatible                       // shapes differ; the message is Shape.Diff's text
	RejectVersion                            // the dialer speaks another protocol version
	RejectIdentity                           // the dialer's address is empty or the listener's own
	RejectBusy                               // the listener has no room for another peer
	RejectProtocol                           // the handshake broke the protocol
)

var rejectNames = [...]string{
	RejectAuth:         "auth",
	RejectIncompatible: "incompatible",
	RejectVersion:      "version",
	RejectIdentity:     "identity",
	RejectBusy:         "busy",
	RejectProtocol:     "protocol",
}

// String returns the code's name ("incompatible"), or "code(N)".
func (c RejectCode) String() string {
	if c > 0 && int(c) < len(rejectNames) {
		return rejectNames[c]
	}
	return fmt.Sprintf("code(%d)", uint8(c))
}

// AuthReject refuses a connection (listener → dialer); the listener closes
// the connection after sending it.
type AuthReject struct {
	Code    RejectCode
	Message string // cut to MessageBytesMax at a UTF-8 boundary when encoded
}

// Type returns TypeAuthReject.
func (*AuthReject) Type() Type { return TypeAuthReject }

// AppendTo appends the encoding of m.
func (m *AuthReject) AppendTo(b []byte) []byte {
	b = append(b, byte(m.Code))
	return appendStr(b, cutMessage(m.Message))
}

// Decode decodes b into m.
func (m *AuthReject) Decode(b []byte) error {
	d := decoder{what: "AUTH_REJECT", b: b}
	m.Code = RejectCode(d.u8("code"))
	m.Message = d.str("message", MessageBytesMax)
	return d.done()
}

// Heartbeat flows both ways every interval and carries the sender's load,
// so each side's view of the other's liveness and queues stays current.
type Heartbeat struct {
	Seq        uint64 // per connection, from 1; 0 means "no heartbeat yet"
	Waiting    uint32 // requests queued, not yet running
	Running    uint32 // requests running
	PagesFree  uint32 // free KV pages
	PagesTotal uint32 // all KV pages
	RoomsLive  uint32 // non-terminal rooms
}

// Type returns TypeHeartbeat.
func (*Heartbeat) Type() Type { return TypeHeartbeat }

// AppendTo appends the encoding of m.
func (m *Heartbeat) AppendTo(b []byte) []byte {
	b = appendU64(b, m.Seq)
	b = appendU32(b, m.Waiting)
	b = appendU32(b, m.Running)
	b = appendU32(b, m.PagesFree)
	b = appendU32(b, m.PagesTotal)
	return appendU32(b, m.RoomsLive)
}

// Decode decodes b into m.
func (m *Heartbeat) Decode(b []byte) error {
	d := decoder{what: "HEARTBEAT", b: b}
	m.Seq = d.u64("seq")
	m.Waiting = d.u32("waiting")
	m.Running = d.u32("running")
	m.PagesFree = d.u32("pages_free")
	m.PagesTotal = d.u32("pages_total")
	m.RoomsLive = d.u32("rooms_live")
	return d.done()
}

// Hello says the decode worker has the room's request (decode → prefill).
// Its identity and shape were settled by the connection's handshake, so
// the payload is empty.
type Hello struct{}

// Type returns TypeHello.
func (*Hello) Type() Type { return TypeHello }

// AppendTo appends nothing.
func (*Hello) AppendTo(b []byte) []byte { return b }

// Decode accepts only an empty payload.
func (*Hello) Decode(b []byte) error { return decodeEmpty("HELLO", b) }

// HelloAck says the prefill worker accepts the room (prefill → decode).
type HelloAck struct{}

// Type returns TypeHelloAck.
func (*HelloAck) Type() Type { return TypeHelloAck }

// AppendTo appends nothing.
func (*HelloAck) AppendTo(b []byte) []byte { return b }

// Decode accepts only an empty payload.
func (*HelloAck) Decode(b []byte) error { return decodeEmpty("HELLO_ACK", b) }

// DoneAck says the decode worker verified the KV (decode → prefill).
type DoneAck struct{}

// Type returns TypeDoneAck.
func (*DoneAck) Type() Type { return TypeDoneAck }

// AppendTo appends nothing.
func (*DoneAck) AppendTo(b []byte) []byte { return b }

// Decode accepts only an empty payload.
func (*DoneAck) Decode(b []byte) error { return decodeEmpty("DONE_ACK", b) }

func decodeEmpty(what string, b []byte) error {
	d := decoder{what: what, b: b}
	return d.done()
}

// Alloc lists the decode worker's pages reserved for the room, in sequence
// order (decode → prefill). Ordinal i of the room's KV frames lands in
// Pages[i] on the decode side.
type Alloc struct {
	Pages []int32 // at most AllocPagesMax
}

// Type returns TypeAlloc.
func (*Alloc) Type() Type { return TypeAlloc }

// AppendTo appends a u32 count and the pages. More than AllocPagesMax
// pages encode a payload that no receiver accepts.
func (m *Alloc) AppendTo(b []byte) []byte {
	b = appendU32(b, uint32(len(m.Pages)))
	for _, p := range m.Pages {
		b = appendU32(b, uint32(p))
	}
	return b
}

// Decode decodes b into m.
func (m *Alloc) Decode(b []byte) error {
	d := decoder{what: "ALLOC", b: b}
	n := d.count("pages", int(d.u32("page count")), 4, AllocPagesMax)
	m.Pages = slices.Grow(m.Pages[:0], n)
	for range n {
		m.Pages = append(m.Pages, int32(d.u32("page")))
	}
	return d.done()
}

// KVKind says whether a KV frame carries keys or values.
type KVKind uint8

// The kinds. A KindState frame carries a piece of the sequence's
// recurrent state (Shape.StateBytes) instead of a page: its Layer is 0 and
// its Ordinal numbers the piece (Shape.StateFrames of them, each
// Shape.StateFrameBytes long); the receiver writes it into the room's state
// buffer, not into a page.
const (
	KindK     KVKind = 0
	KindV     KVKind = 1
	KindState KVKind = 2
)

// String returns "K", "V" or "S", or "kind(N)".
func (k KVKind) String() string {
	switch k {
	case KindK:
		return "K"
	case KindV:
		return "V"
	case KindState:
		return "S"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// KV is the sub-header of a KV frame (prefill → decode): which layer, K or
// V (or a piece of the state: KindState), and which page of the room's sequence the data bytes that follow it
// belong to. Ordinal counts the room's pages from 0; it is not a page
// index: the receiver maps it through the room's ALLOC list. Encoding
// (KVSubHeaderBytes): layer u16, kind u8, a reserved zero byte, ordinal u32.
type KV struct {
	Layer   uint16
	Kind    KVKind
	Ordinal uint32
}

// Type returns TypeKV.
func (*KV) Type() Type { return TypeKV }

// AppendTo appends the 8-byte sub-header (not the data).
func (m *KV) AppendTo(b []byte) []byte {
	b = appendU16(b, m.Layer)
	b = append(b, byte(m.Kind), 0)
	return appendU32(b, m.Ordinal)
}

// Decode decodes exactly one sub-header from b.
func (m *KV) Decode(b []byte) error {
	d := decoder{what: "KV", b: b}
	m.Layer = d.u16("layer")
	m.Kind = KVKind(d.u8("kind"))
	reserved := d.u8("reserved")
	m.Ordinal = d.u32("ordinal")
	if d.err == nil && m.Kind > KindState {
		d.fail("kind %d is neither K (0), V (1) nor state (2)", m.Kind)
	}
	if d.err == nil && m.Kind == KindState && m.Layer != 0 {
		d.fail("a state frame names layer %d, want 0", m.Layer)
	}
	if d.err == nil && reserved != 0 {
		d.fail("reserved byte is %d, want 0", reserved)
	}
	return d.done()
}

// TopLogprob is one alternative of the first token.
type TopLogprob struct {
	ID      int32
	Logprob float32
}

// FirstToken carries the token prefill sampled (prefill → decode).
type FirstToken struct {
	Token   int32
	Logprob float32
	Top     []TopLogprob // at most TopLogprobsMax
}

// Type returns TypeFirstToken.
func (*FirstToken) Type() Type { return TypeFirstToken }

// AppendTo appends token, logprob, a u8 count and the alternatives. More
// than TopLogprobsMax alternatives encode a payload no receiver accepts.
func (m *FirstToken) AppendTo(b []byte) []byte {
	b = appendU32(b, uint32(m.Token))
	b = appendF32(b, m.Logprob)
	b = append(b, byte(min(len(m.Top), 255)))
	for _, t := range m.Top[:min(len(m.Top), 255)] {
		b = appendU32(b, uint32(t.ID))
		b = appendF32(b, t.Logprob)
	}
	return b
}

// Decode decodes b into m.
func (m *FirstToken) Decode(b []byte) error {
	d := decoder{what: "FIRST_TOKEN", b: b}
	m.Token = int32(d.u32("token"))
	m.Logprob = d.f32("logprob")
	n := d.count("top", int(d.u8("top count")), topLogprobBytes, TopLogprobsMax)
	m.Top = slices.Grow(m.Top[:0], n)
	for range n {
		m.Top = append(m.Top, TopLogprob{ID: int32(d.u32("top id")), Logprob: d.f32("top logprob")})
	}
	return d.done()
}

// Done closes the room's transfer (prefill → decode) with the counts the
// receiver verifies. Bytes counts every data byte of the room's KV frames,
// state frames included; StateBytes the state's share of it and StateSum
// the CRC-32C (Castagnoli) of the whole state as prefill sent it (0 and 0
// without state).
type Done struct {
	PageCount  uint32 // distinct pages sent
	Bytes      uint64 // KV data bytes sent (pages and state), sub-headers excluded
	StateBytes uint64 // state bytes sent
	StateSum   uint32 // CRC-32C of the state
}

// Type returns TypeDone.
func (*Done) Type() Type { return TypeDone }

// AppendTo appends the encoding of m.
func (m *Done) AppendTo(b []byte) []byte {
	b = appendU32(b, m.PageCount)
	b = appendU64(b, m.Bytes)
	b = appendU64(b, m.StateBytes)
	return appendU32(b, m.StateSum)
}

// Decode decodes b into m.
func (m *Done) Decode(b []byte) error {
	d := decoder{what: "DONE", b: b}
	m.PageCount = d.u32("page_count")
	m.Bytes = d.u64("bytes")
	m.StateBytes = d.u64("state_bytes")
	m.StateSum = d.u32("state_sum")
	if d.err == nil && m.StateBytes > m.Bytes {
		d.fail("state bytes %d exceed the %d bytes sent", m.StateBytes, m.Bytes)
	}
	return d.done()
}

// Abort says the sender gave up on the room (either way). The reason is
// carried as its wire value (ReasonToWire); a value this node does not
// know reads as room.ReasonNone.
type Abort struct {
	Reason  room.Reason
	Message string // cut to MessageBytesMax at a UTF-8 boundary when encoded
}

// Type returns TypeAbort.
func (*Abort) Type() Type { return TypeAbort }

// AppendTo appends the encoding of m.
func (m *Abort) AppendTo(b []byte) []byte {
	return appendStr(append(b, ReasonToWire(m.Reason)), cutMessage(m.Message))
}

// Decode decodes b into m.
func (m *Abort) Decode(b []byte) error {
	d := decoder{what: "ABORT", b: b}
	m.Reason = ReasonFromWire(d.u8("reason"))
	m.Message = d.str("message", MessageBytesMax)
	return d.done()
}

// Failed says the room failed at the sender (either way).
type Failed struct {
	Reason  room.Reason
	Message string // cut to MessageBytesMax at a UTF-8 boundary when encoded
}

// Type returns TypeFailed.
func (*Failed) Type() Type { return TypeFailed }

// AppendTo appends the encoding of m.
func (m *Failed) AppendTo(b []byte) []byte {
	return appendStr(append(b, ReasonToWire(m.Reason)), cutMessage(m.Message))
}

// Decode decodes b into m.
func (m *Failed) Decode(b []byte) error {
	d := decoder{what: "FAILED", b: b}
	m.Reason = ReasonFromWire(d.u8("reason"))
	m.Message = d.str("message", MessageBytesMax)
	return d.done()
}
