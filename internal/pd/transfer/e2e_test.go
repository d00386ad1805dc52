package transfer_test

// End-to-end tests over real loopback sockets. Timer-exact behaviour is
// tested in synctest_test.go on net.Pipe; here waits have generous
// real-time bounds so a loaded machine does not fail them.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"tandem/internal/pd/kvwire"
	"tandem/internal/pd/room"
	"tandem/internal/pd/transfer"
)

const patience = 10 * time.Second

// pair starts a prefill node (listener, AcceptOnly) and a decode node
// (dialer); change may edit their configs first.
func pair(t *testing.T, change func(decode, prefill *transfer.Config)) (decode, prefill *node) {
	t.Helper()
	dc, pc := config("127.0.0.1:0"), config("127.0.0.1:0")
	pc.AcceptOnly = true
	if change != nil {
		change(&dc, &pc)
	}
	return start(t, dc), start(t, pc)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	t.Cleanup(cancel)
	return ctx
}

func TestHandshakeAndRoomFlow(t *testing.T) {
	d, p := pair(t, nil)
	ctx := ctxT(t)
	id := roomID(1)
	shape := testShape()
	pageBytes := int(shape.PageBytes())

	// Decode's pages: 4 pages × layers × K/V, addressed through ALLOC.
	pages := []int32{7, 2, 5}
	memory := make([]byte, 8*int(shape.Layers)*2*pageBytes)
	d.rec.dest = func(peer string, r room.ID, kv kvwire.KV, n int) []byte {
		if r != id || int(kv.Ordinal) >= len(pages) || n != pageBytes {
			return nil
		}
		slot := (int(pages[kv.Ordinal])*int(shape.Layers)+int(kv.Layer))*2 + int(kv.Kind)
		return memory[slot*pageBytes : (slot+1)*pageBytes]
	}

	if err := d.Send(ctx, p.Addr(), kvwire.TypeHello, id, nil); err != nil {
		t.Fatalf("decode Send(HELLO) = %v", err)
	}
	hello := p.rec.wait(t, patience, 1, "HELLO at prefill", isFrame(kvwire.TypeHello))
	if hello.peer != d.Addr() || hello.room != id {
		t.Errorf("prefill got HELLO from %s room %v, want %s room %v", hello.peer, hello.room, d.Addr(), id)
	}
	if up := p.rec.wait(t, patience, 1, "PeerUp at prefill", isKind("up")); up.peer != d.Addr() {
		t.Errorf("prefill PeerUp(%s), want %s", up.peer, d.Addr())
	}
	if err := p.Send(ctx, d.Addr(), kvwire.TypeHelloAck, id, nil); err != nil {
		t.Fatalf("prefill Send(HELLO_ACK) = %v", err)
	}
	d.rec.wait(t, patience, 1, "HELLO_ACK at decode", isFrame(kvwire.TypeHelloAck))
	if err := d.Send(ctx, p.Addr(), kvwire.TypeAlloc, id, payload(&kvwire.Alloc{Pages: pages})); err != nil {
		t.Fatalf("decode Send(ALLOC) = %v", err)
	}
	alloc := p.rec.wait(t, patience, 1, "ALLOC at prefill", isFrame(kvwire.TypeAlloc))
	var a kvwire.Alloc
	if err := a.Decode(alloc.payload); err != nil || len(a.Pages) != 3 || a.Pages[0] != 7 {
		t.Errorf("ALLOC payload decodes to %v, %v; want pages %v", a.Pages, err, pages)
	}

	// Prefill sends every page of every layer, K and V, then the rest.
	want := map[[3]int][]byte{}
	for ord := range pages {
		for layer := range int(shape.Layers) {
			for kind := range 2 {
				data := bytes.Repeat([]byte{byte(ord*16 + layer*2 + kind + 1)}, pageBytes)
				kv := kvwire.KV{Layer: uint16(layer), Kind: kvwire.KVKind(kind), Ordinal: uint32(ord)}
				if err := p.SendKV(ctx, d.Addr(), id, kv, data); err != nil {
					t.Fatalf("SendKV(%+v) = %v", kv, err)
				}
				want[[3]int{ord, layer, kind}] = data
			}
		}
	}
	ft := &kvwire.FirstToken{Token: 42, Logprob: -0.5, Top: []kvwire.TopLogprob{{ID: 42, Logprob: -0.5}}}
	if err := p.Send(ctx, d.Addr(), kvwire.TypeFirstToken, id, payload(ft)); err != nil {
		t.Fatalf("Send(FIRST_TOKEN) = %v", err)
	}
	done := &kvwire.Done{PageCount: 3, Bytes: uint64(len(want) * pageBytes)}
	if err := p.Send(ctx, d.Addr(), kvwire.TypeDone, id, payload(done)); err != nil {
		t.Fatalf("Send(DONE) = %v", err)
	}
	d.rec.wait(t, patience, 1, "DONE at decode", isFrame(kvwire.TypeDone))
	if err := d.Send(ctx, p.Addr(), kvwire.TypeDoneAck, id, nil); err != nil {
		t.Fatalf("Send(DONE_ACK) = %v", err)
	}
	p.rec.wait(t, patience, 1, "DONE_ACK at prefill", isFrame(kvwire.TypeDoneAck))

	kvDone := d.rec.all(isKind("kvdone"))
	if len(kvDone) != len(want) {
		t.Fatalf("decode got %d KVDone calls, want %d", len(kvDone), len(want))
	}
	for _, e := range kvDone {
		if !e.ok || e.n != pageBytes || e.room != id {
			t.Errorf("KVDone(%v) = ok %v n %d room %v; want ok, %d bytes, room %v", e.kv, e.ok, e.n, e.room, pageBytes, id)
		}
	}
	for key, data := range want {
		slot := (int(pages[key[0]])*int(shape.Layers)+key[1])*2 + key[2]
		if got := memory[slot*pageBytes : (slot+1)*pageBytes]; !bytes.Equal(got, data) {
			t.Errorf("page for ordinal %d layer %d kind %d holds %x..., want %x...", key[0], key[1], key[2], got[:4], data[:4])
		}
	}
	// Order at decode: all KV before FIRST_TOKEN before DONE.
	var order []string
	for _, e := range d.rec.all(func(e event) bool { return e.kind == "kvdone" || e.kind == "frame" }) {
		order = append(order, e.kind+":"+e.typ.String())
	}
	if got := strings.Join(order[len(order)-2:], ","); got != "frame:FIRST_TOKEN,frame:DONE" || strings.Contains(strings.Join(order[:len(order)-2], ","), "FIRST") {
		t.Errorf("decode saw %v, want every KV, then FIRST_TOKEN, then DONE", order)
	}

	ps := d.Peers()
	if len(ps) != 1 || ps[0].Addr != p.Addr() || !ps[0].Connected || !ps[0].Dialed || ps[0].FramesIn < uint64(len(want)+3) || ps[0].Incarnation == 0 {
		t.Errorf("decode Peers() = %+v, want one connected dialed peer %s with its frames", ps, p.Addr())
	}
	if ps := p.Peers(); len(ps) != 1 || ps[0].Addr != d.Addr() || ps[0].Dialed {
		t.Errorf("prefill Peers() = %+v, want one accepted peer %s", ps, d.Addr())
	}
	c := d.Counters()
	// Besides its 3 frames decode wrote its shared-memory offer and its
	// answer to prefill's, if any.
	setup := c["shm_offered"] + p.Counters()["shm_offered"]
	if c["handshakes_ok"] != 1 || c["conns_dialed"] != 1 || c["kv_checksum_errors"] != 0 || c["frames_out"] != 3+setup {
		t.Errorf("decode counters %v: want 1 handshake, 1 dial, 3 frames out (+%d shared-memory setup frames), no checksum errors", c, setup)
	}
}

func TestWrongTokenRejectedOnBothSides(t *testing.T) {
	d, p := pair(t, func(dc, pc *transfer.Config) { dc.ClusterToken = []byte("another-token-0123456789") })
	err := d.Send(ctxT(t), p.Addr(), kvwire.TypeHello, roomID(1), nil)
	if !errors.Is(err, transfer.ErrAuth) {
		t.Fatalf("Send with a wrong token = %v, want ErrAuth", err)
	}
	if got := p.Counters()["rejected_bad_mac"]; got != 1 {
		t.Errorf("prefill rejected_bad_mac = %d, want 1", got)
	}
	if got := d.Counters()["auth_rejected_by_peer"]; got != 1 {
		t.Errorf("decode auth_rejected_by_peer = %d, want 1", got)
	}
	if ups := p.rec.all(isKind("up")); len(ups) != 0 {
		t.Errorf("prefill PeerUp calls %v, want none", ups)
	}
	if ps := d.Peers(); len(ps) != 0 {
		t.Errorf("decode Peers() = %+v after a refused first dial, want none", ps)
	}
}

func TestShapeMismatchNamesTheField(t *testing.T) {
	d, p := pair(t, func(dc, pc *transfer.Config) { pc.Shape.PageTokens = 32; pc.Shape.DType = "f32" })
	err := d.Send(ctxT(t), p.Addr(), kvwire.TypeHello, roomID(1), nil)
	if !errors.Is(err, transfer.ErrIncompatible) || !strings.Contains(errText(err), "page_tokens 16 vs 32; dtype f16 vs f32") {
		t.Fatalf("Send to a peer with another shape = %v, want ErrIncompatible naming page_tokens and dtype", err)
	}
	if got := p.Counters()["rejected_shape"]; got != 1 {
		t.Errorf("prefill rejected_shape = %d, want 1", got)
	}
}

// TestWindowMismatchRefused: peers whose sliding windows differ (one
// windows layer 0 of its 2, the other none) refuse each other in the
// handshake: the window decides which KV pages a room ships.
func TestWindowMismatchRefused(t *testing.T) {
	d, p := pair(t, func(dc, pc *transfer.Config) {
		pc.Shape.Window, pc.Shape.WindowMask = 8, kvwire.WindowMaskOf([]bool{true, false})
	})
	err := d.Send(ctxT(t), p.Addr(), kvwire.TypeHello, roomID(1), nil)
	if !errors.Is(err, transfer.ErrIncompatible) || !strings.Contains(errText(err), "window 0 vs 8; window_layers") {
		t.Fatalf("Send to a peer with another window = %v, want ErrIncompatible naming the window", err)
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestCorruptKVFrameClosesConnection: a KV frame changed on the way (a
// Faults hook flips a byte of its sealed bytes) fails to open: its
// KVDone says false, it is counted, and the connection closes (a sealed
// stream that fails once is not trusted further); decode redials and
// the next page arrives intact. The caller's data is never changed.
func TestCorruptKVFrameClosesConnection(t *testing.T) {
	var mu sync.Mutex
	kvFrames := 0
	faults := &faultFunc{write: func(peer string, h kvwire.Header) transfer.Fault {
		mu.Lock()
		defer mu.Unlock()
		if h.Type != kvwire.TypeKV {
			return transfer.Fault{}
		}
		kvFrames++
		if kvFrames == 2 {
			return transfer.Fault{Action: transfer.FaultCorrupt}
		}
		return transfer.Fault{}
	}}
	d, p := pair(t, func(dc, pc *transfer.Config) { pc.Faults = faults })
	ctx := ctxT(t)
	pages := [3][]byte{make([]byte, 100), make([]byte, 100), make([]byte, 100)}
	d.rec.dest = func(_ string, _ room.ID, kv kvwire.KV, n int) []byte { return pages[kv.Ordinal] }
	id := roomID(3)
	if err := d.Send(ctx, p.Addr(), kvwire.TypeHello, id, nil); err != nil {
		t.Fatal(err)
	}
	p.rec.wait(t, patience, 1, "HELLO", isFrame(kvwire.TypeHello))
	data := bytes.Repeat([]byte{0x11}, 100)
	for ord := range 2 {
		if err := p.SendKV(ctx, d.Addr(), id, kvwire.KV{Ordinal: uint32(ord)}, data); err != nil {
			t.Fatalf("SendKV(ordinal %d) = %v", ord, err)
		}
	}
	d.rec.wait(t, patience, 2, "2 KVDone", isKind("kvdone"))
	p.rec.wait(t, patience, 2, "the redial's handshake", func(e event) bool { return e.kind == "up" && e.hb.Seq == 0 })
	if err := p.SendKV(ctx, d.Addr(), id, kvwire.KV{Ordinal: 2}, data); err != nil {
		t.Fatalf("SendKV(ordinal 2) after the redial = %v", err)
	}
	d.rec.wait(t, patience, 3, "3 KVDone", isKind("kvdone"))
	for _, e := range d.rec.all(isKind("kvdone")) {
		if wantOK := e.kv.Ordinal != 1; e.ok != wantOK {
			t.Errorf("KVDone(ordinal %d) ok = %v, want %v", e.kv.Ordinal, e.ok, wantOK)
		}
	}
	if !bytes.Equal(pages[2], data) {
		t.Errorf("page 2 after the redial holds %x..., want %x...", pages[2][:4], data[:4])
	}
	if !bytes.Equal(data, bytes.Repeat([]byte{0x11}, 100)) {
		t.Errorf("FaultCorrupt changed the caller's data")
	}
	// Over TCP the frame fails to open; through shared memory its slot
	// fails its check.
	if c := d.Counters(); c["rejected_auth_tag"]+c["rejected_shm"] != 1 {
		t.Errorf("decode rejected_auth_tag = %d, rejected_shm = %d, want 1 in all", c["rejected_auth_tag"], c["rejected_shm"])
	}
}

func TestPeerLostWhenPeerCloses(t *testing.T) {
	for _, tc := range []struct{ name, killed string }{{"prefill killed", "prefill"}, {"decode killed", "decode"}} {
		t.Run(tc.name, func(t *testing.T) {
			d, p := pair(t, nil)
			if err := d.Send(ctxT(t), p.Addr(), kvwire.TypeHello, roomID(1), nil); err != nil {
				t.Fatal(err)
			}
			p.rec.wait(t, patience, 1, "HELLO", isFrame(kvwire.TypeHello))
			victim, survivor := p, d
			if tc.killed == "decode" {
				victim, survivor = d, p
			}
			victim.stop()
			closed := time.Now()
			lost := survivor.rec.wait(t, patience, 1, "PeerLost", isKind("lost"))
			if lost.peer != victim.AdvertiseAddr() || !errors.Is(lost.err, transfer.ErrPeerLost) {
				t.Errorf("PeerLost(%s, %v), want (%s, ErrPeerLost)", lost.peer, lost.err, victim.AdvertiseAddr())
			}
			// The design bound is PeerTimeout (2 intervals) after the last
			// frame heard; synctest_test.go checks it exactly. Here, on
			// a shared machine, allow scheduling slack on top.
			if took := lost.at.Sub(closed); took > survivor.PeerTimeout()+time.Second {
				t.Errorf("PeerLost came %v after the peer closed, want about PeerTimeout %v", took, survivor.PeerTimeout())
			}
			if got := survivor.Counters()["peers_lost"]; got != 1 {
				t.Errorf("peers_lost = %d, want 1", got)
			}
		})
	}
}

// rawConn dials addr with a plain TCP connection.
func rawConn(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, patience)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(patience))
	return c
}

func TestForeignTrafficRejected(t *testing.T) {
	d, p := pair(t, nil)
	hello := func(version uint8) []byte {
		h := &kvwire.AuthHello{Version: version, NodeAddr: "127.0.0.1:1", Shape: testShape()}
		return kvwire.AppendFrame(nil, kvwire.TypeAuthHello, room.ID{}, h.AppendTo(nil))
	}
	badVersion := kvwire.AppendFrame(nil, kvwire.TypeHello, roomID(1), nil)
	badVersion[4] = 9
	oversize := kvwire.NewHeader(kvwire.TypeAlloc, roomID(1), nil)
	oversize.Length = 1 << 30
	unknown := kvwire.AppendFrame(nil, kvwire.TypeHello, roomID(1), nil)
	unknown[5] = 77
	corrupt := hello(kvwire.Version)
	corrupt[len(corrupt)-1] ^= 1
	for _, tc := range []struct {
		name    string
		send    []byte
		counter string
	}{
		{"http", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n......"), "rejected_bad_magic"},
		{"garbage", bytes.Repeat([]byte{0xde, 0xad}, 40), "rejected_bad_magic"},
		{"bad version", badVersion, "rejected_bad_version"},
		{"oversize", oversize.AppendTo(nil), "rejected_oversize"},
		{"unknown type", unknown, "rejected_unknown_type"},
		{"frame before auth", kvwire.AppendFrame(nil, kvwire.TypeHello, roomID(1), nil), "rejected_unauthenticated"},
		{"auth hello version 3", hello(kvwire.Version + 1), "rejected_bad_version"},
		{"auth hello checksum", corrupt, "rejected_checksum"},
		{"malformed auth hello", kvwire.AppendFrame(nil, kvwire.TypeAuthHello, room.ID{}, append(hello(kvwire.Version)[kvwire.HeaderBytes:], 0)), "rejected_malformed"},
	} {
		before := p.Counters()[tc.counter]
		c := rawConn(t, p.Addr())
		c.Write(tc.send)
		rest, err := io.ReadAll(c) // until the transport closes the connection
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("%s: the connection was not closed: %v", tc.name, err)
		}
		if len(rest) > 0 && tc.counter != "rejected_bad_version" {
			t.Errorf("%s: the transport answered %q, want nothing", tc.name, rest)
		}
		if got := p.Counters()[tc.counter]; got != before+1 {
			t.Errorf("%s: %s = %d, want %d", tc.name, tc.counter, got, before+1)
		}
	}

	// A dialer that does not know the token: challenge, bad response.
	c := rawConn(t, p.Addr())
	c.Write(hello(kvwire.Version))
	var hdr [kvwire.HeaderBytes]byte
	h, err := kvwire.ReadHeader(c, &hdr)
	if err != nil || h.Type != kvwire.TypeAuthChallenge {
		t.Fatalf("after AUTH_HELLO: %v %v, want AUTH_CHALLENGE", h.Type, err)
	}
	io.CopyN(io.Discard, c, int64(h.Length))
	c.Write(kvwire.AppendFrame(nil, kvwire.TypeAuthResponse, room.ID{}, make([]byte, 32)))
	h, err = kvwire.ReadHeader(c, &hdr)
	if err != nil || h.Type != kvwire.TypeAuthReject {
		t.Errorf("after a wrong MAC: %v %v, want AUTH_REJECT", h.Type, err)
	}
	io.ReadAll(c)
	if got := p.Counters()["rejected_bad_mac"]; got != 1 {
		t.Errorf("rejected_bad_mac = %d, want 1", got)
	}

	// The transport still serves real peers.
	ctx := ctxT(t)
	if err := d.Send(ctx, p.Addr(), kvwire.TypeHello, roomID(9), nil); err != nil {
		t.Fatalf("Send after foreign traffic = %v", err)
	}
	p.rec.wait(t, patience, 1, "HELLO", isFrame(kvwire.TypeHello))
}

func TestGarbageAfterHandshakeClosesConnection(t *testing.T) {
	// A peer that breaks the protocol after authenticating: a Faults hook
	// on the reading side corrupts a control frame, which must then fail
	// its checksum, be counted, and close the connection.
	var mu sync.Mutex
	corruptNext := false
	faults := &faultFunc{read: func(_ string, h kvwire.Header) transfer.Fault {
		mu.Lock()
		defer mu.Unlock()
		if h.Type == kvwire.TypeAbort && corruptNext {
			corruptNext = false
			return transfer.Fault{Action: transfer.FaultCorrupt}
		}
		return transfer.Fault{}
	}}
	d, p := pair(t, func(dc, pc *transfer.Config) { pc.Faults = faults; pc.HeartbeatInterval = time.Second })
	ctx := ctxT(t)
	if err := d.Send(ctx, p.Addr(), kvwire.TypeHello, roomID(1), nil); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	corruptNext = true
	mu.Unlock()
	if err := d.Send(ctx, p.Addr(), kvwire.TypeAbort, roomID(1), payload(&kvwire.Abort{Reason: room.ReasonClientAbort})); err != nil {
		t.Fatal(err)
	}
	// Prefill closes the connection; decode notices and redials at once
	// (prefill sees a second handshake); then frames flow again.
	p.rec.wait(t, patience, 2, "the redial's handshake", func(e event) bool { return e.kind == "up" && e.hb.Seq == 0 })
	if err := d.Send(ctx, p.Addr(), kvwire.TypeAbort, roomID(2), payload(&kvwire.Abort{})); err != nil {
		t.Fatalf("Send after the redial = %v", err)
	}
	p.rec.wait(t, patience, 1, "ABORT for room 2", func(e event) bool { return e.kind == "frame" && e.room == roomID(2) })
	if got := p.Counters()["rejected_auth_tag"]; got != 1 {
		t.Errorf("rejected_auth_tag = %d, want 1", got)
	}
	if frames := p.rec.all(func(e event) bool { return e.kind == "frame" && e.room == roomID(1) && e.typ == kvwire.TypeAbort }); len(frames) != 0 {
		t.Errorf("the corrupt ABORT was delivered: %v", frames)
	}
}

func TestReconnectAfterListenerRestart(t *testing.T) {
	d, p := pair(t, nil)
	ctx := ctxT(t)
	addr := p.Addr()
	if err := d.Send(ctx, addr, kvwire.TypeHello, roomID(1), nil); err != nil {
		t.Fatal(err)
	}
	p.rec.wait(t, patience, 1, "HELLO", isFrame(kvwire.TypeHello))
	p.stop()

	cfg := config(addr)
	cfg.AcceptOnly = true
	p2 := start(t, cfg)
	if p2.Addr() != addr {
		t.Fatalf("restarted listener on %s, want %s", p2.Addr(), addr)
	}
	// The old incarnation is reported lost (restarted, or lost when the
	// redial came after PeerTimeout); then the next Send reaches the new
	// process, redialing if needed.
	lost := d.rec.wait(t, patience, 1, "PeerLost for the old prefill", isKind("lost"))
	if !errors.Is(lost.err, transfer.ErrPeerRestarted) && !errors.Is(lost.err, transfer.ErrPeerLost) {
		t.Errorf("PeerLost(%v), want ErrPeerRestarted or ErrPeerLost", lost.err)
	}
	if err := d.Send(ctx, addr, kvwire.TypeHello, roomID(2), nil); err != nil {
		t.Fatalf("Send after the restart = %v", err)
	}
	if e := p2.rec.wait(t, patience, 1, "HELLO at the new prefill", isFrame(kvwire.TypeHello)); e.room != roomID(2) {
		t.Errorf("new prefill got room %v, want %v", e.room, roomID(2))
	}
}

func TestManyRoomsKeepPerRoomOrder(t *testing.T) {
	d, p := pair(t, func(dc, pc *transfer.Config) { dc.SendQueueMax = 64; pc.SendQueueMax = 64 })
	ctx := ctxT(t)
	d.rec.dest = func(_ string, _ room.ID, _ kvwire.KV, n int) []byte { return make([]byte, n) }
	const rooms, pagesPerRoom = 24, 6
	for i := range rooms {
		if err := d.Send(ctx, p.Addr(), kvwire.TypeHello, roomID(i), nil); err != nil {
			t.Fatal(err)
		}
	}
	p.rec.wait(t, patience, rooms, "every HELLO", isFrame(kvwire.TypeHello))
	var wg sync.WaitGroup
	errs := make(chan error, rooms)
	for i := range rooms {
		wg.Go(func() {
			id := roomID(i)
			for ord := range pagesPerRoom {
				data := bytes.Repeat([]byte{byte(i)}, 512+i*37+ord)
				if err := p.SendKV(ctx, d.Addr(), id, kvwire.KV{Ordinal: uint32(ord)}, data); err != nil {
					errs <- err
					return
				}
			}
			if err := p.Send(ctx, d.Addr(), kvwire.TypeFirstToken, id, payload(&kvwire.FirstToken{Token: int32(i)})); err != nil {
				errs <- err
				return
			}
			if err := p.Send(ctx, d.Addr(), kvwire.TypeDone, id, payload(&kvwire.Done{PageCount: pagesPerRoom})); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("send = %v", err)
	}
	d.rec.wait(t, patience, rooms, "every DONE", isFrame(kvwire.TypeDone))
	seq := map[room.ID][]string{}
	for _, e := range d.rec.all(func(e event) bool { return e.kind == "kvdone" || e.kind == "frame" }) {
		s := e.typ.String()
		if e.kind == "kvdone" {
			s = fmt.Sprintf("KV%d", e.kv.Ordinal)
			if !e.ok {
				t.Errorf("room %v KV ordinal %d failed its checksum", e.room, e.kv.Ordinal)
			}
		}
		seq[e.room] = append(seq[e.room], s)
	}
	want := "KV0 KV1 KV2 KV3 KV4 KV5 FIRST_TOKEN DONE"
	for i := range rooms {
		if got := strings.Join(seq[roomID(i)], " "); got != want {
			t.Errorf("room %d frames arrived as %q, want %q", i, got, want)
		}
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	good := config("127.0.0.1:0")
	for _, tc := range []struct {
		name   string
		change func(*transfer.Config)
		text   string
	}{
		{"short token", func(c *transfer.Config) { c.ClusterToken = []byte("short") }, "ClusterToken has 5 bytes, need at least 16"},
		{"no listen", func(c *transfer.Config) { c.ListenAddr = "" }, "ListenAddr is empty"},
		{"bad shape", func(c *transfer.Config) { c.Shape.DType = "q4" }, `dtype "q4"`},
		{"tiny interval", func(c *transfer.Config) { c.HeartbeatInterval = time.Microsecond }, "HeartbeatInterval"},
		{"queue", func(c *transfer.Config) { c.SendQueueMax = -1 }, "SendQueueMax"},
		{"bad addr", func(c *transfer.Config) { c.ListenAddr = "256.0.0.1:x" }, "listen on 256.0.0.1:x"},
		{"all interfaces", func(c *transfer.Config) { c.ListenAddr = "0.0.0.0:0" }, "set AdvertiseAddr"},
	} {
		cfg := good
		tc.change(&cfg)
		tr, err := transfer.New(cfg, newRecorder())
		if err == nil {
			tr.Close()
		}
		if !strings.Contains(errText(err), tc.text) {
			t.Errorf("New(%s) = %v, want an error containing %q", tc.name, err, tc.text)
		}
	}
	all := good
	all.ListenAddr, all.AdvertiseAddr = "0.0.0.0:0", "10.1.2.3:7000"
	if tr, err := transfer.New(all, newRecorder()); err != nil || tr.AdvertiseAddr() != "10.1.2.3:7000" {
		t.Errorf("New(all interfaces, AdvertiseAddr set) = %v; want it accepted with that identity", err)
	} else {
		tr.Close()
	}
	if _, err := transfer.New(good, nil); err == nil {
		t.Errorf("New(nil handler) = nil error")
	}
}

func TestSendRefusesBadFrames(t *testing.T) {
	d, p := pair(t, nil)
	ctx := ctxT(t)
	for _, tc := range []struct {
		name    string
		typ     kvwire.Type
		id      room.ID
		payload []byte
		want    error
	}{
		{"heartbeat", kvwire.TypeHeartbeat, room.ID{}, make([]byte, 28), kvwire.ErrType},
		{"kv via Send", kvwire.TypeKV, roomID(1), make([]byte, 8), kvwire.ErrType},
		{"KV_SHM via Send", kvwire.TypeKVShm, roomID(1), payload(&kvwire.KVShm{Seq: 1, Length: 8}), kvwire.ErrType},
		{"SHM_OFFER via Send", kvwire.TypeShmOffer, room.ID{}, make([]byte, 96), kvwire.ErrType},
		{"no room", kvwire.TypeHello, room.ID{}, nil, kvwire.ErrMalformed},
		{"payload on hello", kvwire.TypeHello, roomID(1), []byte{1}, kvwire.ErrTooLarge},
		{"bad alloc", kvwire.TypeAlloc, roomID(1), []byte{9, 0, 0, 0}, kvwire.ErrMalformed},
	} {
		if err := d.Send(ctx, p.Addr(), tc.typ, tc.id, tc.payload); !errors.Is(err, tc.want) {
			t.Errorf("Send(%s) = %v, want %v", tc.name, err, tc.want)
		}
	}
	if err := d.SendKV(ctx, p.Addr(), roomID(1), kvwire.KV{Kind: 3}, nil); !errors.Is(err, kvwire.ErrMalformed) {
		t.Errorf("SendKV(kind 3) = %v, want ErrMalformed", err)
	}
	if err := p.Send(ctx, "127.0.0.1:1", kvwire.TypeHello, roomID(1), nil); !errors.Is(err, transfer.ErrNotConnected) {
		t.Errorf("AcceptOnly Send to an unknown peer = %v, want ErrNotConnected", err)
	}
	if err := d.Send(ctx, d.Addr(), kvwire.TypeHello, roomID(1), nil); !errors.Is(err, transfer.ErrIdentity) {
		t.Errorf("Send to itself = %v, want ErrIdentity", err)
	}
	d.stop()
	if err := d.Send(ctx, p.Addr(), kvwire.TypeHello, roomID(1), nil); !errors.Is(err, transfer.ErrClosed) {
		t.Errorf("Send after Close = %v, want ErrClosed", err)
	}
}

// TestStateMismatchRefused: peers whose recurrent states differ in size or
// layout refuse each other in the handshake, naming both fields: a state
// decode cannot read would resume a sequence from garbage.
func TestStateMismatchRefused(t *testing.T) {
	d, p := pair(t, func(dc, pc *transfer.Config) {
		dc.Shape.StateBytes, dc.Shape.StateLayout = 4096, "gdn:f32:a"
		pc.Shape.StateBytes, pc.Shape.StateLayout = 8192, "gdn:f32:b"
	})
	err := d.Send(ctxT(t), p.Addr(), kvwire.TypeHello, roomID(1), nil)
	if !errors.Is(err, transfer.ErrIncompatible) || !strings.Contains(errText(err), "state_bytes 4096 vs 8192; state_layout gdn:f32:a vs gdn:f32:b") {
		t.Fatalf("Send to a peer with another state = %v, want ErrIncompatible naming state_bytes and state_layout", err)
	}
}
