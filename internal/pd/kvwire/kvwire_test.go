package kvwire_test

import (
	"bytes"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"tandem/internal/pd/kvwire"
	"tandem/internal/pd/room"
)

var testRoom = room.ID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}

func testShape() kvwire.Shape {
	return kvwire.Shape{Model: "llama-3.2-1b", Layers: 16, KVHeads: 8, HeadDim: 64, PageTokens: 16, DType: "f16"}
}

// windowShape is a gemma3-like shape: 12 layers, every sixth global, the
// rest attending to a 1024-token window.
func windowShape() kvwire.Shape {
	s := testShape()
	s.Model, s.Layers, s.Window = "gemma-3-1b", 12, 1024
	w := make([]bool, 12)
	for l := range w {
		w[l] = l%6 != 5
	}
	s.WindowMask = kvwire.WindowMaskOf(w)
	return s
}

func TestHeaderRoundTrip(t *testing.T) {
	for typ := kvwire.TypeAuthHello; typ.Valid(); typ++ {
		id := room.ID{}
		if typ.HasRoom() {
			id = testRoom
		}
		payload := make([]byte, typ.PayloadBytesMin())
		h := kvwire.NewHeader(typ, id, payload)
		var buf [kvwire.HeaderBytes]byte
		var w bytes.Buffer
		if err := kvwire.WriteHeader(&w, &buf, h); err != nil {
			t.Fatalf("WriteHeader(%v) = %v", typ, err)
		}
		if w.Len() != kvwire.HeaderBytes {
			t.Errorf("WriteHeader(%v) wrote %d bytes, want %d", typ, w.Len(), kvwire.HeaderBytes)
		}
		if !bytes.Equal(h.AppendTo(nil), w.Bytes()) {
			t.Errorf("AppendTo(%v) differs from WriteHeader", typ)
		}
		got, err := kvwire.ReadHeader(&w, &buf)
		if err != nil || got != h {
			t.Errorf("ReadHeader(WriteHeader(%+v)) = %+v, %v; want the same header", h, got, err)
		}
	}
}

func TestHeaderLayout(t *testing.T) {
	h := kvwire.NewHeader(kvwire.TypeDone, testRoom, make([]byte, 12))
	b := h.AppendTo(nil)
	if string(b[0:4]) != "TDKV" || b[4] != 3 || b[5] != byte(kvwire.TypeDone) {
		t.Errorf("header bytes %x: want magic TDKV, version 3, type %d", b[:6], kvwire.TypeDone)
	}
	if !bytes.Equal(b[8:24], testRoom[:]) || binary.LittleEndian.Uint32(b[24:]) != 12 {
		t.Errorf("header bytes %x: room or length misplaced", b)
	}
	if got, want := binary.LittleEndian.Uint32(b[28:]), kvwire.Checksum(make([]byte, 12)); got != want {
		t.Errorf("header checksum = %#x, want %#x", got, want)
	}
	// CRC-32C of "123456789" is the standard check value 0xe3069283.
	if got := kvwire.Checksum([]byte("123456789")); got != 0xe3069283 {
		t.Errorf("Checksum(123456789) = %#x, want 0xe3069283 (CRC-32C)", got)
	}
	if got := kvwire.UpdateChecksum(kvwire.Checksum([]byte("1234")), []byte("56789")); got != 0xe3069283 {
		t.Errorf("UpdateChecksum in two pieces = %#x, want 0xe3069283", got)
	}
}

// header builds raw header bytes for the malformed-header table.
func header(magic uint32, version, typ uint8, flags uint16, id room.ID, length uint32) *[kvwire.HeaderBytes]byte {
	var b [kvwire.HeaderBytes]byte
	binary.LittleEndian.PutUint32(b[0:], magic)
	b[4], b[5] = version, typ
	binary.LittleEndian.PutUint16(b[6:], flags)
	copy(b[8:], id[:])
	binary.LittleEndian.PutUint32(b[24:], length)
	return &b
}

func TestParseHeaderErrors(t *testing.T) {
	tv := uint8(kvwire.TypeHello)
	for _, tc := range []struct {
		name string
		buf  *[kvwire.HeaderBytes]byte
		want error
		text string
	}{
		{"http", (*[32]byte)([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n.....")), kvwire.ErrMagic, `magic "GET "`},
		{"zero", header(0, 0, 0, 0, room.ID{}, 0), kvwire.ErrMagic, "is not"},
		{"version 0", header(kvwire.Magic, 0, tv, 0, testRoom, 0), kvwire.ErrVersion, "version 0, this node speaks 3"},
		{"version 1 (plaintext)", header(kvwire.Magic, 1, tv, 0, testRoom, 0), kvwire.ErrVersion, "version 1"},
		{"version 2 (no state)", header(kvwire.Magic, 2, tv, 0, testRoom, 0), kvwire.ErrVersion, "version 2"},
		{"version 4", header(kvwire.Magic, 4, tv, 0, testRoom, 0), kvwire.ErrVersion, "version 4"},
		{"type 0", header(kvwire.Magic, kvwire.Version, 0, 0, testRoom, 0), kvwire.ErrType, "type 0"},
		{"type 99", header(kvwire.Magic, kvwire.Version, 99, 0, testRoom, 0), kvwire.ErrType, "type 99"},
		{"flags", header(kvwire.Magic, kvwire.Version, tv, 4, testRoom, 0), kvwire.ErrMalformed, "flags 0x0004"},
		{"room on heartbeat", header(kvwire.Magic, kvwire.Version, uint8(kvwire.TypeHeartbeat), 0, testRoom, 28), kvwire.ErrMalformed, "carries none"},
		{"no room on hello", header(kvwire.Magic, kvwire.Version, tv, 0, room.ID{}, 0), kvwire.ErrMalformed, "room id missing"},
		{"hello with payload", header(kvwire.Magic, kvwire.Version, tv, 0, testRoom, 1), kvwire.ErrTooLarge, "HELLO frame: payload length 1 above the limit 0"},
		{"control oversize", header(kvwire.Magic, kvwire.Version, uint8(kvwire.TypeAlloc), 0, testRoom, 1<<20), kvwire.ErrTooLarge, "limit 65536"},
		{"abort oversize", header(kvwire.Magic, kvwire.Version, uint8(kvwire.TypeAbort), 0, testRoom, 3+1025), kvwire.ErrTooLarge, "ABORT"},
		{"kv oversize", header(kvwire.Magic, kvwire.Version, uint8(kvwire.TypeKV), 0, testRoom, kvwire.KVPayloadBytesMax+1), kvwire.ErrTooLarge, "KV frame"},
		{"kv max length", header(kvwire.Magic, kvwire.Version, uint8(kvwire.TypeKV), 0, testRoom, math.MaxUint32), kvwire.ErrTooLarge, "4294967295"},
		{"kv no sub-header", header(kvwire.Magic, kvwire.Version, uint8(kvwire.TypeKV), 0, testRoom, 7), kvwire.ErrMalformed, "below the minimum 8"},
		{"short heartbeat", header(kvwire.Magic, kvwire.Version, uint8(kvwire.TypeHeartbeat), 0, room.ID{}, 27), kvwire.ErrMalformed, "below the minimum 28"},
		{"long done", header(kvwire.Magic, kvwire.Version, uint8(kvwire.TypeDone), 0, testRoom, 25), kvwire.ErrTooLarge, "DONE"},
	} {
		_, err := kvwire.ParseHeader(tc.buf)
		if !errors.Is(err, tc.want) || !strings.Contains(errText(err), tc.text) {
			t.Errorf("ParseHeader(%s) = %v, want %v containing %q", tc.name, err, tc.want, tc.text)
		}
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestReadHeaderShort(t *testing.T) {
	var buf [kvwire.HeaderBytes]byte
	if _, err := kvwire.ReadHeader(bytes.NewReader(nil), &buf); !errors.Is(err, io.EOF) {
		t.Errorf("ReadHeader(empty) = %v, want io.EOF", err)
	}
	full := kvwire.NewHeader(kvwire.TypeHello, testRoom, nil).AppendTo(nil)
	if _, err := kvwire.ReadHeader(bytes.NewReader(full[:20]), &buf); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("ReadHeader(20 of 32 bytes) = %v, want io.ErrUnexpectedEOF", err)
	}
}

func TestVerifyChecksum(t *testing.T) {
	payload := []byte("some control payload")
	h := kvwire.NewHeader(kvwire.TypeAbort, testRoom, payload)
	if err := h.VerifyChecksum(payload); err != nil {
		t.Errorf("VerifyChecksum(intact) = %v, want nil", err)
	}
	payload[3] ^= 1
	if err := h.VerifyChecksum(payload); !errors.Is(err, kvwire.ErrChecksum) {
		t.Errorf("VerifyChecksum(flipped bit) = %v, want ErrChecksum", err)
	}
}

// examples returns hand-made values of every payload type.
func examples() []kvwire.Payload {
	s := testShape()
	return []kvwire.Payload{
		&kvwire.AuthHello{Version: 1, NodeAddr: "10.0.0.7:7001", Shape: s, Nonce: [32]byte{9: 1}, Incarnation: 42, HeartbeatMillis: 1000},
		&kvwire.AuthChallenge{Nonce: [32]byte{0: 3, 31: 7}, NodeAddr: "[::1]:7002"},
		&kvwire.AuthResponse{MAC: [32]byte{1, 2, 3}},
		&kvwire.AuthOK{Shape: windowShape(), MAC: [32]byte{31: 0xff}, Incarnation: math.MaxUint64, HeartbeatMillis: 50},
		&kvwire.AuthReject{Code: kvwire.RejectIncompatible, Message: "page_tokens 16 vs 32"},
		&kvwire.Heartbeat{Seq: 7, Waiting: 1, Running: 2, PagesFree: 3, PagesTotal: 4, RoomsLive: 5},
		&kvwire.Hello{},
		&kvwire.HelloAck{},
		&kvwire.Alloc{Pages: []int32{0, 5, 1 << 30, -1}},
		&kvwire.KV{Layer: 15, Kind: kvwire.KindV, Ordinal: 1234567},
		&kvwire.FirstToken{Token: 128000, Logprob: -0.25, Top: []kvwire.TopLogprob{{1, -0.25}, {2, float32(math.Inf(-1))}}},
		&kvwire.Done{PageCount: 9, Bytes: 1 << 40},
		&kvwire.Done{PageCount: 9, Bytes: 1 << 40, StateBytes: 1 << 20, StateSum: 0xdeadbeef},
		&kvwire.KV{Kind: kvwire.KindState, Ordinal: 17},
		&kvwire.DoneAck{},
		&kvwire.Abort{Reason: room.ReasonClientAbort, Message: "client went away"},
		&kvwire.Failed{Reason: room.ReasonEngine, Message: "engine: out of memory ✗"},
		&kvwire.ShmOffer{PID: 4242, FD: 7, Bytes: 64 << 20, Name: [16]byte{1}, Cookie: [32]byte{2}, Ack: [32]byte{31: 3}},
		&kvwire.ShmReply{Status: kvwire.ShmFailed, Message: "open /proc/4242/fd/7: permission denied"},
		&kvwire.KVShm{KV: kvwire.KV{Layer: 3, Kind: kvwire.KindV, Ordinal: 9}, Seq: 1, Offset: 4096, Length: 24 << 10},
		&kvwire.ShmSource{ShmOffer: kvwire.ShmOffer{PID: 4242, FD: 9, Bytes: 3 << 30, Name: [16]byte{4}, Cookie: [32]byte{5}, Ack: [32]byte{31: 6}}},
		&kvwire.KVSrc{KV: kvwire.KV{Layer: 3, Kind: kvwire.KindK, Ordinal: 9}, Seq: 2, Slot: 64, Offset: 5 << 30, Length: 24 << 10},
	}
}

// randomPayload returns a random value of type typ within the field limits.
func randomPayload(r *rand.Rand, typ kvwire.Type) kvwire.Payload {
	str := func(max int) string {
		b := make([]byte, r.IntN(max+1))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return string(b)
	}
	shape := func() kvwire.Shape {
		return kvwire.Shape{Model: str(kvwire.ModelBytesMax), Layers: r.Uint32(), KVHeads: r.Uint32(), HeadDim: r.Uint32(), PageTokens: r.Uint32(), DType: str(kvwire.DTypeBytesMax),
			Window: r.Uint32(), WindowMask: str(kvwire.WindowMaskBytesMax), StateBytes: r.Uint32(), StateLayout: str(kvwire.StateLayoutBytesMax)}
	}
	nonce := func() (n [32]byte) {
		for i := range n {
			n[i] = byte(r.Uint32())
		}
		return n
	}
	f32 := func() float32 { return math.Float32frombits(r.Uint32()) }
	switch typ {
	case kvwire.TypeAuthHello:
		return &kvwire.AuthHello{Version: uint8(r.Uint32()), NodeAddr: str(kvwire.NodeAddrBytesMax), Shape: shape(), Nonce: nonce(), Incarnation: r.Uint64(), HeartbeatMillis: r.Uint32()}
	case kvwire.TypeAuthChallenge:
		return &kvwire.AuthChallenge{Nonce: nonce(), NodeAddr: str(kvwire.NodeAddrBytesMax)}
	case kvwire.TypeAuthResponse:
		return &kvwire.AuthResponse{MAC: nonce()}
	case kvwire.TypeAuthOK:
		return &kvwire.AuthOK{Shape: shape(), MAC: nonce(), Incarnation: r.Uint64(), HeartbeatMillis: r.Uint32()}
	case kvwire.TypeAuthReject:
		return &kvwire.AuthReject{Code: kvwire.RejectCode(r.Uint32()), Message: str(kvwire.MessageBytesMax)}
	case kvwire.TypeHeartbeat:
		return &kvwire.Heartbeat{Seq: r.Uint64(), Waiting: r.Uint32(), Running: r.Uint32(), PagesFree: r.Uint32(), PagesTotal: r.Uint32(), RoomsLive: r.Uint32()}
	case kvwire.TypeAlloc:
		var pages []int32
		for range r.IntN(3) * r.IntN(kvwire.AllocPagesMax/2+1) {
			pages = append(pages, int32(r.Uint32()))
		}
		return &kvwire.Alloc{Pages: pages}
	case kvwire.TypeKV:
		if r.IntN(3) == 0 {
			return &kvwire.KV{Kind: kvwire.KindState, Ordinal: r.Uint32()}
		}
		return &kvwire.KV{Layer: uint16(r.Uint32()), Kind: kvwire.KVKind(r.IntN(2)), Ordinal: r.Uint32()}
	case kvwire.TypeFirstToken:
		var top []kvwire.TopLogprob
		for range r.IntN(kvwire.TopLogprobsMax + 1) {
			top = append(top, kvwire.TopLogprob{ID: int32(r.Uint32()), Logprob: f32()})
		}
		return &kvwire.FirstToken{Token: int32(r.Uint32()), Logprob: f32(), Top: top}
	case kvwire.TypeDone:
		b := r.Uint64()
		return &kvwire.Done{PageCount: r.Uint32(), Bytes: b, StateBytes: r.Uint64N(b + 1), StateSum: r.Uint32()}
	case kvwire.TypeAbort:
		return &kvwire.Abort{Reason: room.Reasons()[r.IntN(len(room.Reasons()))], Message: str(kvwire.MessageBytesMax)}
	case kvwire.TypeFailed:
		return &kvwire.Failed{Reason: room.Reasons()[r.IntN(len(room.Reasons()))], Message: str(kvwire.MessageBytesMax)}
	case kvwire.TypeShmOffer:
		o := &kvwire.ShmOffer{PID: 1 + r.Uint32N(1<<22), FD: r.Uint32N(1 << 31), Bytes: kvwire.ShmPageBytes * (kvwire.ShmRegionBytesMin/kvwire.ShmPageBytes + r.Uint64N((kvwire.ShmRegionBytesMax-kvwire.ShmRegionBytesMin)/kvwire.ShmPageBytes+1)),
			Cookie: nonce(), Ack: nonce()}
		copy(o.Name[:], str(kvwire.ShmNameBytes))
		return o
	case kvwire.TypeShmReply:
		return &kvwire.ShmReply{Status: kvwire.ShmStatus(r.IntN(3)), Message: str(kvwire.MessageBytesMax)}
	case kvwire.TypeKVShm:
		return &kvwire.KVShm{KV: kvwire.KV{Layer: uint16(r.Uint32()), Kind: kvwire.KVKind(r.IntN(2)), Ordinal: r.Uint32()},
			Seq: 1 + r.Uint64N(1<<63), Offset: r.Uint64N(kvwire.ShmRegionBytesMax), Length: 1 + r.Uint32N(kvwire.KVDataBytesMax)}
	case kvwire.TypeShmSource:
		o := &kvwire.ShmSource{ShmOffer: kvwire.ShmOffer{PID: 1 + r.Uint32N(1<<22), FD: r.Uint32N(1 << 31), Bytes: kvwire.ShmPageBytes * (2 + r.Uint64N(kvwire.ShmSourceBytesMax/kvwire.ShmPageBytes-1)),
			Cookie: nonce(), Ack: nonce()}}
		copy(o.Name[:], str(kvwire.ShmNameBytes))
		return o
	case kvwire.TypeKVSrc:
		return &kvwire.KVSrc{KV: kvwire.KV{Layer: uint16(r.Uint32()), Kind: kvwire.KVKind(r.IntN(2)), Ordinal: r.Uint32()},
			Seq: 1 + r.Uint64N(1<<63), Slot: r.Uint64N(kvwire.ShmRegionBytesMax), Offset: r.Uint64N(kvwire.ShmSourceBytesMax), Length: 1 + r.Uint32N(kvwire.KVDataBytesMax)}
	}
	return kvwire.NewPayload(typ) // the empty payloads
}

// checkRoundTrip encodes p, checks the length against its type's bounds,
// decodes it into a fresh value and compares.
func checkRoundTrip(t *testing.T, p kvwire.Payload) {
	t.Helper()
	enc := p.AppendTo([]byte("prefix"))[len("prefix"):]
	typ := p.Type()
	if len(enc) < typ.PayloadBytesMin() || len(enc) > typ.PayloadBytesMax() {
		t.Errorf("%v: encoded %d bytes, outside the type's bounds [%d, %d]", typ, len(enc), typ.PayloadBytesMin(), typ.PayloadBytesMax())
	}
	got := kvwire.NewPayload(typ)
	if err := got.Decode(enc); err != nil {
		t.Errorf("%v: Decode(AppendTo(%+v)) = %v", typ, p, err)
		return
	}
	if !samePayload(got, p) {
		t.Errorf("%v: Decode(AppendTo(x)) = %+v, want x = %+v", typ, got, p)
	}
	if re := got.AppendTo(nil); !bytes.Equal(re, enc) {
		t.Errorf("%v: encoding is not canonical: %x then %x", typ, enc, re)
	}
	if p2, err := kvwire.DecodePayload(typ, enc); err != nil || !samePayload(p2, p) {
		t.Errorf("%v: DecodePayload = %+v, %v; want %+v", typ, p2, err, p)
	}
}

// samePayload compares payloads, treating nil and empty slices as equal
// and floats by their bits (NaN payloads must survive too).
func samePayload(a, b kvwire.Payload) bool {
	return reflect.DeepEqual(normal(a), normal(b))
}

func normal(p kvwire.Payload) any {
	switch v := p.(type) {
	case *kvwire.Alloc:
		if len(v.Pages) == 0 {
			return &kvwire.Alloc{}
		}
	case *kvwire.FirstToken:
		type bits struct {
			Token   int32
			Logprob uint32
			Top     [][2]uint32
		}
		n := bits{Token: v.Token, Logprob: math.Float32bits(v.Logprob)}
		for _, t := range v.Top {
			n.Top = append(n.Top, [2]uint32{uint32(t.ID), math.Float32bits(t.Logprob)})
		}
		return n
	}
	return p
}

func TestPayloadRoundTrip(t *testing.T) {
	seen := map[kvwire.Type]bool{}
	for _, p := range examples() {
		seen[p.Type()] = true
		checkRoundTrip(t, p)
	}
	for typ := kvwire.TypeAuthHello; typ.Valid(); typ++ {
		if !seen[typ] {
			t.Errorf("examples() lacks %v", typ)
		}
	}
}

// TestPayloadRoundTripRandom is the property decode(encode(x)) == x over
// random values of every type, from a fixed seed.
func TestPayloadRoundTripRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for typ := kvwire.TypeAuthHello; typ.Valid(); typ++ {
		for range 200 {
			checkRoundTrip(t, randomPayload(r, typ))
		}
	}
}

func TestPayloadLimitsEncode(t *testing.T) {
	// Messages are cut at a UTF-8 boundary; the rest still decodes.
	long := strings.Repeat("é", kvwire.MessageBytesMax) // 2 bytes each
	ab := &kvwire.Abort{Reason: room.ReasonShutdown, Message: "x" + long}
	var got kvwire.Abort
	if err := got.Decode(ab.AppendTo(nil)); err != nil {
		t.Fatalf("Abort with a %d-byte message: Decode = %v", len(ab.Message), err)
	}
	if len(got.Message) != kvwire.MessageBytesMax-1 || got.Message != ab.Message[:kvwire.MessageBytesMax-1] {
		t.Errorf("Abort message cut to %d bytes, want %d (a UTF-8 boundary)", len(got.Message), kvwire.MessageBytesMax-1)
	}
	// Fields that cannot be cut encode something no receiver accepts.
	for _, p := range []kvwire.Payload{
		&kvwire.Alloc{Pages: make([]int32, kvwire.AllocPagesMax+1)},
		&kvwire.FirstToken{Top: make([]kvwire.TopLogprob, kvwire.TopLogprobsMax+1)},
		&kvwire.FirstToken{Top: make([]kvwire.TopLogprob, 300)},
		&kvwire.AuthHello{NodeAddr: strings.Repeat("a", kvwire.NodeAddrBytesMax+1)},
		&kvwire.AuthOK{Shape: kvwire.Shape{Model: strings.Repeat("m", 70000)}},
		&kvwire.KV{Kind: 3},
		&kvwire.KV{Kind: kvwire.KindState, Layer: 1},
	} {
		if err := kvwire.NewPayload(p.Type()).Decode(p.AppendTo(nil)); !errors.Is(err, kvwire.ErrMalformed) {
			t.Errorf("%v over its limits: Decode(AppendTo) = %v, want ErrMalformed", p.Type(), err)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	u32 := func(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
	hb := (&kvwire.Heartbeat{Seq: 1}).AppendTo(nil)
	for _, tc := range []struct {
		name string
		typ  kvwire.Type
		b    []byte
		text string
	}{
		{"hello payload", kvwire.TypeHello, []byte{0}, "HELLO: 1 trailing bytes"},
		{"heartbeat short", kvwire.TypeHeartbeat, hb[:27], "rooms_live: need 4 bytes, 3 left"},
		{"heartbeat long", kvwire.TypeHeartbeat, append(hb, 0), "1 trailing bytes"},
		{"alloc count too big", kvwire.TypeAlloc, u32(kvwire.AllocPagesMax + 1), "pages: 16384 items, limit 16383"},
		{"alloc count past end", kvwire.TypeAlloc, append(u32(3), 0, 0, 0, 0), "3 items need 12 bytes, 4 left"},
		{"alloc empty", kvwire.TypeAlloc, nil, "page count: need 4 bytes, 0 left"},
		{"kv kind", kvwire.TypeKV, []byte{0, 0, 3, 0, 0, 0, 0, 0}, "kind 3 is neither"},
		{"state layer", kvwire.TypeKV, []byte{1, 0, 2, 0, 0, 0, 0, 0}, "state frame names layer 1"},
		{"done state over bytes", kvwire.TypeDone, []byte{0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, "state bytes 2 exceed"},
		{"kv reserved", kvwire.TypeKV, []byte{0, 0, 1, 9, 0, 0, 0, 0}, "reserved byte is 9"},
		{"kv short", kvwire.TypeKV, []byte{0, 0, 1}, "need"},
		{"first token top", kvwire.TypeFirstToken, append(make([]byte, 8), 21), "top: 21 items, limit 20"},
		{"first token top past end", kvwire.TypeFirstToken, append(make([]byte, 8), 2, 0, 0, 0, 0, 0, 0, 0, 0), "2 items need 16 bytes, 8 left"},
		{"abort message long", kvwire.TypeAbort, append([]byte{1, 0x01, 0x04}, make([]byte, 1025)...), "message: 1025 bytes, limit 1024"},
		{"abort message past end", kvwire.TypeAbort, []byte{1, 5, 0, 'a'}, "message: need 5 bytes, 1 left"},
		{"failed no reason", kvwire.TypeFailed, nil, "reason: need 1 bytes"},
		{"auth hello addr", kvwire.TypeAuthHello, []byte{1, 0xff, 0xff}, "node_addr: 65535 bytes, limit 255"},
		{"auth ok dtype", kvwire.TypeAuthOK, append(make([]byte, 18), 17, 0), "dtype: 17 bytes, limit 16"},
		{"auth response short", kvwire.TypeAuthResponse, make([]byte, 31), "mac: need 32 bytes, 31 left"},
		{"challenge long", kvwire.TypeAuthChallenge, make([]byte, 35), "1 trailing bytes"},
		{"done short", kvwire.TypeDone, make([]byte, 11), "bytes: need 8 bytes, 7 left"},
	} {
		_, err := kvwire.DecodePayload(tc.typ, tc.b)
		if !errors.Is(err, kvwire.ErrMalformed) || !strings.Contains(errText(err), tc.text) {
			t.Errorf("DecodePayload(%v, %s) = %v, want ErrMalformed containing %q", tc.typ, tc.name, err, tc.text)
		}
	}
	if _, err := kvwire.DecodePayload(0, nil); !errors.Is(err, kvwire.ErrType) {
		t.Errorf("DecodePayload(type 0) = %v, want ErrType", err)
	}
}

// allocBytes returns the bytes f allocates per call, averaged over rounds.
func allocBytes(rounds int, f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range rounds {
		f()
	}
	runtime.ReadMemStats(&after)
	return (after.TotalAlloc - before.TotalAlloc) / uint64(rounds)
}

// TestDecodeAllocationBounded checks that a payload claiming many items
// allocates no more than its error message before the claim is checked
// against its length, and that a valid payload costs about its own size.
func TestDecodeAllocationBounded(t *testing.T) {
	claim := binary.LittleEndian.AppendUint32(nil, kvwire.AllocPagesMax)
	if per := allocBytes(50, func() { _ = new(kvwire.Alloc).Decode(claim) }); per > 1024 {
		t.Errorf("Alloc.Decode(count %d, no pages) allocates %d bytes per call, want at most 1 KiB (the error)", kvwire.AllocPagesMax, per)
	}
	top := append(make([]byte, 8), kvwire.TopLogprobsMax)
	if per := allocBytes(50, func() { _ = new(kvwire.FirstToken).Decode(top) }); per > 1024 {
		t.Errorf("FirstToken.Decode(count 20, no entries) allocates %d bytes per call, want at most 1 KiB", per)
	}
	full := (&kvwire.Alloc{Pages: make([]int32, kvwire.AllocPagesMax)}).AppendTo(nil)
	if per := allocBytes(20, func() { _ = new(kvwire.Alloc).Decode(full) }); per > uint64(2*len(full)) {
		t.Errorf("Alloc.Decode(%d bytes) allocates %d bytes per call, want at most %d", len(full), per, 2*len(full))
	}
	// Decoding into a value with capacity reuses it.
	var a kvwire.Alloc
	if n := testing.AllocsPerRun(20, func() { _ = a.Decode(full) }); n != 0 {
		t.Errorf("Alloc.Decode into a reused value allocates %v times, want 0", n)
	}
}

func TestShapeDiff(t *testing.T) {
	a := testShape()
	for _, tc := range []struct {
		change func(*kvwire.Shape)
		want   string
	}{
		{func(*kvwire.Shape) {}, ""},
		{func(s *kvwire.Shape) { s.PageTokens = 32; s.DType = "f32" }, "page_tokens 16 vs 32; dtype f16 vs f32"},
		{func(s *kvwire.Shape) { s.Model = "" }, `model llama-3.2-1b vs ""`},
		{func(s *kvwire.Shape) { s.Layers, s.KVHeads, s.HeadDim = 1, 2, 3 }, "layers 16 vs 1; kv_heads 8 vs 2; head_dim 64 vs 3"},
		{func(s *kvwire.Shape) { s.Window, s.WindowMask = 512, "\x01\x00" }, `window 0 vs 512; window_layers "" vs 0100`},
	} {
		b := a
		tc.change(&b)
		if got := a.Diff(b); got != tc.want {
			t.Errorf("Diff(%+v, %+v) = %q, want %q", a, b, got, tc.want)
		}
	}
}

func TestShapeValidate(t *testing.T) {
	if err := testShape().Validate(); err != nil {
		t.Errorf("Validate(%+v) = %v, want nil", testShape(), err)
	}
	bad := kvwire.Shape{DType: "bf16"}
	err := bad.Validate()
	for _, want := range []string{"model name", "layers is 0", "kv_heads is 0", "head_dim is 0", "page_tokens is 0", `dtype "bf16"`} {
		if !strings.Contains(errText(err), want) {
			t.Errorf("Validate(%+v) = %v, want it to mention %q", bad, err, want)
		}
	}
	ws := windowShape()
	if err := ws.Validate(); err != nil {
		t.Errorf("Validate(%+v) = %v, want nil", ws, err)
	}
	if !ws.Windowed(0) || ws.Windowed(5) || ws.Windowed(12) || ws.Windowed(-1) || testShape().Windowed(0) {
		t.Errorf("Windowed of layers 0, 5, 12, -1: %v %v %v %v", ws.Windowed(0), ws.Windowed(5), ws.Windowed(12), ws.Windowed(-1))
	}
	if got := ws.FirstWindowPage(2000); got != (2000-1024+1)/16 || ws.FirstWindowPage(100) != 0 || testShape().FirstWindowPage(2000) != 0 {
		t.Errorf("FirstWindowPage(2000) = %d, want %d", got, (2000-1024+1)/16)
	}
	for name, tc := range map[string]struct {
		change func(*kvwire.Shape)
		want   string
	}{
		"mask without window": {func(s *kvwire.Shape) { s.Window = 0 }, "without a window"},
		"short mask":          {func(s *kvwire.Shape) { s.WindowMask = s.WindowMask[:1] }, "window mask has 1 bytes, 12 layers need 2"},
		"layer past the end":  {func(s *kvwire.Shape) { s.WindowMask = s.WindowMask[:1] + "\xff" }, "marks layer 12 of 12"},
		"no layer marked":     {func(s *kvwire.Shape) { s.WindowMask = "\x00\x00" }, "no window layer marked"},
		"huge layer count":    {func(s *kvwire.Shape) { s.Layers = 1 << 31 }, "window mask has 2 bytes"},
	} {
		b := windowShape()
		tc.change(&b)
		if err := b.Validate(); !strings.Contains(errText(err), tc.want) {
			t.Errorf("%s: Validate(%+v) = %v, want it to mention %q", name, b, err, tc.want)
		}
	}
	if got := testShape().PageBytes(); got != 16*8*64*2 {
		t.Errorf("PageBytes(%+v) = %d, want %d", testShape(), got, 16*8*64*2)
	}
}

func TestTypes(t *testing.T) {
	names := map[string]bool{}
	for typ := kvwire.TypeAuthHello; typ.Valid(); typ++ {
		name := typ.String()
		if names[name] || strings.HasPrefix(name, "type(") {
			t.Errorf("Type(%d).String() = %q: missing or duplicate", typ, name)
		}
		names[name] = true
		if kvwire.NewPayload(typ) == nil || kvwire.NewPayload(typ).Type() != typ {
			t.Errorf("NewPayload(%v) has the wrong type", typ)
		}
		if typ.PayloadBytesMax() > kvwire.ControlPayloadBytesMax && typ != kvwire.TypeKV {
			t.Errorf("%v payload limit %d above ControlPayloadBytesMax", typ, typ.PayloadBytesMax())
		}
	}
	if got := kvwire.Type(0).String(); got != "type(0)" {
		t.Errorf("Type(0).String() = %q, want type(0)", got)
	}
	if kvwire.NewPayload(0) != nil || kvwire.Type(200).Valid() {
		t.Errorf("type 0/200 accepted as valid")
	}
}

func TestFrameKindMapping(t *testing.T) {
	kinds := []room.FrameKind{room.FrameHello, room.FrameHelloAck, room.FrameAlloc, room.FrameFirstToken, room.FrameDone, room.FrameDoneAck, room.FrameAbort, room.FrameFailed}
	want := []kvwire.Type{kvwire.TypeHello, kvwire.TypeHelloAck, kvwire.TypeAlloc, kvwire.TypeFirstToken, kvwire.TypeDone, kvwire.TypeDoneAck, kvwire.TypeAbort, kvwire.TypeFailed}
	for i, k := range kinds {
		typ := kvwire.TypeFor(k)
		if typ != want[i] {
			t.Errorf("TypeFor(%d) = %v, want %v", k, typ, want[i])
		}
		if back, ok := typ.FrameKind(); !ok || back != k {
			t.Errorf("%v.FrameKind() = %d, %v; want %d, true", typ, back, ok, k)
		}
	}
	for _, typ := range []kvwire.Type{kvwire.TypeKV, kvwire.TypeHeartbeat, kvwire.TypeAuthHello, 0} {
		if _, ok := typ.FrameKind(); ok {
			t.Errorf("%v.FrameKind() ok, want false", typ)
		}
	}
	if got := kvwire.TypeFor(0); got.Valid() {
		t.Errorf("TypeFor(0) = %v, want an invalid type", got)
	}
	if got := kvwire.TypeFor(200); got.Valid() {
		t.Errorf("TypeFor(200) = %v, want an invalid type", got)
	}
}

func TestAuthMAC(t *testing.T) {
	token := []byte("0123456789abcdef")
	th := kvwire.HandshakeHash([]byte("hello"), []byte("challenge"))
	h := sha256.New()
	h.Write([]byte("tandem-kv/2 transcript\x05\x00\x00\x00hello\x09\x00\x00\x00challenge"))
	if want := h.Sum(nil); !bytes.Equal(th[:], want) {
		t.Errorf("HandshakeHash = %x, want %x", th, want)
	}
	got := kvwire.AuthMAC(token, kvwire.AuthRoleDialer, th)
	m := hmac.New(sha256.New, token)
	m.Write([]byte("tandem-kv/2 mac\x01"))
	m.Write(th[:])
	if want := m.Sum(nil); !bytes.Equal(got[:], want) {
		t.Errorf("AuthMAC = %x, want %x", got, want)
	}
	for name, other := range map[string][32]byte{
		"role":       kvwire.AuthMAC(token, kvwire.AuthRoleListener, th),
		"token":      kvwire.AuthMAC([]byte("0123456789abcdeF"), kvwire.AuthRoleDialer, th),
		"transcript": kvwire.AuthMAC(token, kvwire.AuthRoleDialer, kvwire.HandshakeHash([]byte("hello"), []byte("challengf"))),
		"split":      kvwire.AuthMAC(token, kvwire.AuthRoleDialer, kvwire.HandshakeHash([]byte("helloc"), []byte("hallenge"))),
	} {
		if other == got {
			t.Errorf("AuthMAC ignores the %s", name)
		}
	}
}

func TestSessionKeys(t *testing.T) {
	token := []byte("0123456789abcdef")
	th := kvwire.HandshakeHash([]byte("a"))
	d, l := kvwire.SessionKeys(token, th)
	want, err := hkdf.Key(sha256.New, token, th[:], "tandem-kv/2 dialer->listener", 32)
	if err != nil || !bytes.Equal(d[:], want) {
		t.Errorf("dialer->listener key = %x, want %x (%v)", d, want, err)
	}
	if d == l {
		t.Errorf("both directions got the same key")
	}
	if d2, _ := kvwire.SessionKeys(token, kvwire.HandshakeHash([]byte("b"))); d2 == d {
		t.Errorf("keys ignore the transcript")
	}
	if d2, _ := kvwire.SessionKeys([]byte("0123456789abcdeF"), th); d2 == d {
		t.Errorf("keys ignore the token")
	}
}

func TestSealedBytes(t *testing.T) {
	R, tag := kvwire.SealRecordBytesMax, kvwire.SealTagBytes
	for _, tc := range []struct {
		h    kvwire.Header
		want int
	}{
		{kvwire.Header{Type: kvwire.TypeHello}, tag},
		{kvwire.Header{Type: kvwire.TypeDone, Length: 12}, 12 + tag},
		{kvwire.Header{Type: kvwire.TypeKV, Length: 8}, 8 + tag},
		{kvwire.Header{Type: kvwire.TypeKV, Length: 8 + 1}, 8 + tag + 1 + tag},
		{kvwire.Header{Type: kvwire.TypeKV, Length: uint32(8 + R)}, 8 + tag + R + tag},
		{kvwire.Header{Type: kvwire.TypeKV, Length: uint32(8 + R + 1)}, 8 + tag + R + 1 + 2*tag},
	} {
		if got := kvwire.SealedBytes(tc.h); got != tc.want {
			t.Errorf("SealedBytes(%v, length %d) = %d, want %d", tc.h.Type, tc.h.Length, got, tc.want)
		}
	}
}

func TestLimits(t *testing.T) {
	if kvwire.HeaderBytes != 32 || len(kvwire.NewHeader(kvwire.TypeHello, testRoom, nil).AppendTo(nil)) != kvwire.HeaderBytes {
		t.Errorf("HeaderBytes = %d, want 32 and the encoded size", kvwire.HeaderBytes)
	}
	if kvwire.KVSubHeaderBytes != len((&kvwire.KV{}).AppendTo(nil)) {
		t.Errorf("KVSubHeaderBytes = %d, want the encoded sub-header size", kvwire.KVSubHeaderBytes)
	}
	if got := kvwire.TypeAlloc.PayloadBytesMax(); got != kvwire.ControlPayloadBytesMax {
		t.Errorf("ALLOC limit %d, want ControlPayloadBytesMax %d", got, kvwire.ControlPayloadBytesMax)
	}
	if kvwire.KVPayloadBytesMax > math.MaxUint32 || kvwire.KVDataBytesMax < 1<<20 {
		t.Errorf("KVPayloadBytesMax %d must fit the u32 length and hold a page", kvwire.KVPayloadBytesMax)
	}
	if kvwire.MessageBytesMax >= math.MaxUint16 || kvwire.NodeAddrBytesMax >= math.MaxUint16 {
		t.Errorf("string limits must stay below the u16 length so over-long fields fail")
	}
	for typ := kvwire.TypeAuthHello; typ.IsAuth(); typ++ {
		if got := typ.PayloadBytesMax(); got > kvwire.AuthPayloadBytesMax {
			t.Errorf("%v payload limit %d above AuthPayloadBytesMax %d: a stranger could make a node allocate more before authenticating", typ, got, kvwire.AuthPayloadBytesMax)
		}
	}
	if kvwire.TopLogprobsMax >= 255 {
		t.Errorf("TopLogprobsMax %d must stay below the u8 count", kvwire.TopLogprobsMax)
	}
}

// TestShapeState covers the state fields: validation, diff, and the state's
// split into page-sized frames.
func TestShapeState(t *testing.T) {
	s := testShape()
	if err := s.Validate(); err != nil {
		t.Fatalf("Validate(no state) = %v", err)
	}
	pb := int(s.PageBytes())
	s.StateBytes, s.StateLayout = uint32(2*pb+3), "gdn:f32:conv[3x8],rec[2x4x4]"
	if err := s.Validate(); err != nil {
		t.Fatalf("Validate(state) = %v", err)
	}
	if n := s.StateFrames(); n != 3 {
		t.Errorf("StateFrames = %d, want 3", n)
	}
	for i, want := range []int{pb, pb, 3, 0} {
		if got := s.StateFrameBytes(i); got != want {
			t.Errorf("StateFrameBytes(%d) = %d, want %d", i, got, want)
		}
	}
	for _, bad := range []kvwire.Shape{
		func() kvwire.Shape { b := s; b.StateLayout = ""; return b }(),
		func() kvwire.Shape { b := s; b.StateBytes = 0; return b }(),
		func() kvwire.Shape { b := s; b.StateBytes = kvwire.StateBytesMax + 1; return b }(),
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("Validate(state %d bytes, layout %q) = nil, want an error", bad.StateBytes, bad.StateLayout)
		}
	}
	o := s
	o.StateBytes++
	o.StateLayout = "gdn:f16"
	if d := s.Diff(o); !strings.Contains(d, "state_bytes") || !strings.Contains(d, "state_layout") {
		t.Errorf("Diff = %q, want state_bytes and state_layout named", d)
	}
	var back kvwire.Shape
	if err := back.Decode(s.AppendTo(nil)); err != nil || back != s {
		t.Errorf("Decode(AppendTo(%+v)) = %+v, %v", s, back, err)
	}
}

// TestStateFrameSize: a state is cut into about StateFramesTarget frames of
// whole pages, at least a page, at most StateFrameBytesMax unless a page is
// larger.
func TestStateFrameSize(t *testing.T) {
	for _, tc := range []struct{ state, page, want int }{
		{35, 16, 16},                      // the simulator's: page-sized frames
		{430080, 4096, 8192},              // 6720 bytes a frame, two pages
		{20 << 20, 16 << 10, 256 << 10},   // 20 MiB: capped at 256 KiB, 80 frames
		{20 << 20, 1 << 20, 1 << 20},      // pages over the cap: one page
		{20<<20 + 5, 96 << 10, 192 << 10}, // the cap in whole pages
		{0, 4096, 0}, {100, 0, 0},         // nothing to cut
		{kvStateMax(), 4096, 256 << 10}, // the largest state
		{1, kvwire.KVDataBytesMax, kvwire.KVDataBytesMax},
	} {
		if got := kvwire.StateFrameSize(tc.state, tc.page); got != tc.want {
			t.Errorf("StateFrameSize(%d, %d) = %d, want %d", tc.state, tc.page, got, tc.want)
		}
	}
}

func kvStateMax() int { return kvwire.StateBytesMax }
