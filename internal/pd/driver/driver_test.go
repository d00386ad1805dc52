package driver

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"tandem/internal/invariant"
	"tandem/internal/pd/kvwire"
	"tandem/internal/pd/room"
)

// The fakes record every call; the tests drive the driver by hand, so
// every test is deterministic.

type testLeg struct{ name string }

type fakeEngine struct {
	calls    []string
	startErr error
}

func (e *fakeEngine) StartCompute(l *testLeg, pages int) error {
	e.calls = append(e.calls, fmt.Sprintf("start %s %d", l.name, pages))
	return e.startErr
}
func (e *fakeEngine) Admit(l *testLeg) error {
	e.calls = append(e.calls, "admit "+l.name)
	return nil
}
func (e *fakeEngine) Resume(l *testLeg, first Token) error {
	e.calls = append(e.calls, fmt.Sprintf("resume %s %d", l.name, first.ID))
	return nil
}
func (e *fakeEngine) Cancel(l *testLeg) { e.calls = append(e.calls, "cancel "+l.name) }

func (e *fakeEngine) has(call string) bool { return slices.Contains(e.calls, call) }

type fakeWire struct {
	sent []Frame // every frame handed to Send, in order
	idle []string
}

func (w *fakeWire) Send(f Frame)         { w.sent = append(w.sent, f) }
func (w *fakeWire) PeerIdle(peer string) { w.idle = append(w.idle, peer) }

type fakeLegs struct {
	ok     []*testLeg
	failed map[*testLeg]room.Reason
}

func (l *fakeLegs) Succeed(g *testLeg) { l.ok = append(l.ok, g) }
func (l *fakeLegs) Fail(g *testLeg, r room.Reason) {
	if l.failed == nil {
		l.failed = map[*testLeg]room.Reason{}
	}
	l.failed[g] = r
}

type countingObserver struct {
	NopObserver
	kvDropped   map[string]int
	sendDropped map[string]int
}

func (o *countingObserver) KVDropped(why string) { o.kvDropped[why]++ }
func (o *countingObserver) SendDropped(why string, n int) {
	o.sendDropped[why] += n
}

type fakePages struct{ buf map[[3]int32][]byte }

func (p *fakePages) KVPage(layer int, kind kvwire.KVKind, page int32) []byte {
	k := [3]int32{int32(layer), int32(kind), page}
	if p.buf[k] == nil {
		p.buf[k] = make([]byte, pageBytes)
	}
	return p.buf[k]
}

const (
	ms        = room.Instant(1_000_000)
	progress  = 500 * ms
	pageBytes = 64
	layers    = 2
)

type harness struct {
	t    *testing.T
	d    *Driver[*testLeg]
	eng  *fakeEngine
	wire *fakeWire
	legs *fakeLegs
	obs  *countingObserver
	now  room.Instant
	// stateB is the state size; decodeRoom admits with a buffer of it,
	// kept in stateBuf.
	stateB   int
	stateBuf []byte
}

func testRoomConfig(role room.Role) room.Config {
	return room.Config{Role: role, HelloTimeout: room.Duration(1000 * ms), RequestTimeout: room.Duration(1000 * ms),
		AllocTimeout: room.Duration(2000 * ms), HandshakeTimeout: room.Duration(1000 * ms), AdmissionTimeout: room.Duration(1000 * ms),
		PrefillTimeout: room.Duration(3000 * ms), ProgressTimeout: room.Duration(progress), TombstoneTTL: room.Duration(60_000 * ms),
		RoomsMax: 100, TombstonesMax: 100}
}

func newHarness(t *testing.T, role room.Role, lim Limits) *harness {
	t.Helper()
	return newStateHarness(t, role, lim, 0)
}

// newStateHarness is newHarness for a model whose sequences carry a
// stateBytes-byte state.
func newStateHarness(t *testing.T, role room.Role, lim Limits, stateBytes int) *harness {
	t.Helper()
	h := &harness{t: t, eng: &fakeEngine{}, wire: &fakeWire{}, legs: &fakeLegs{},
		obs: &countingObserver{kvDropped: map[string]int{}, sendDropped: map[string]int{}}, now: ms}
	d, err := New(Config[*testLeg]{Room: testRoomConfig(role), Layers: layers, PageBytes: pageBytes, StateBytes: stateBytes, Limits: lim,
		Engine: h.eng, Wire: h.wire, Legs: h.legs, Observer: h.obs})
	if err != nil {
		t.Fatal(err)
	}
	h.d, h.stateB = d, stateBytes
	t.Cleanup(h.check) // and after every Sent the harness reports
	return h
}

// check fails the test when the driver's invariants do not hold.
func (h *harness) check() {
	h.t.Helper()
	if err := h.d.CheckInvariants(); err != nil {
		h.t.Errorf("driver invariants: %v", err)
	}
}

func roomID(n byte) room.ID { return room.ID{15: n} }

// tick advances the clock by dt and fires due deadlines.
func (h *harness) tick(dt room.Instant) {
	h.now += dt
	if next, ok := h.d.NextDeadline(); ok && next <= h.now {
		h.d.Tick(h.now)
	}
}

// outstanding returns the frame outstanding on peer's lane, if any.
func (h *harness) outstanding(peer string, lane Lane) (Frame, bool) {
	for _, p := range h.d.peers {
		if p.addr == peer && p.out[lane] != nil {
			return *p.out[lane], true
		}
	}
	return Frame{}, false
}

// complete reports the outstanding frame on peer's lane as written (or
// failed with err) and returns it.
func (h *harness) complete(peer string, lane Lane, err error) Frame {
	h.t.Helper()
	f, ok := h.outstanding(peer, lane)
	if !ok {
		h.t.Fatalf("no frame outstanding on %s lane %d", peer, lane)
	}
	h.d.Sent(h.now, peer, lane, err)
	h.check()
	return f
}

// drainControl completes every control frame for peer and returns them.
func (h *harness) drainControl(peer string) []Frame {
	var out []Frame
	for {
		if _, ok := h.outstanding(peer, LaneControl); !ok {
			return out
		}
		out = append(out, h.complete(peer, LaneControl, nil))
	}
}

func (h *harness) frame(peer string, typ kvwire.Type, id room.ID, payload []byte) {
	h.d.Frame(h.now, peer, kvwire.NewHeader(typ, id, payload), payload)
}

func (h *harness) state(id room.ID) (room.State, room.Reason) {
	info, _ := h.d.Room(id)
	return info.State, info.Reason
}

// prefillRoom brings a prefill room to computing with decode d1's pages.
func (h *harness) prefillRoom(id room.ID, leg *testLeg, pages int) {
	h.t.Helper()
	if rej := h.d.Request(h.now, id, "req-"+leg.name, "", leg); rej != nil {
		h.t.Fatalf("request %s rejected: %v", leg.name, rej)
	}
	h.frame("d1", kvwire.TypeHello, id, nil)
	ps := make([]int32, pages)
	for i := range ps {
		ps[i] = int32(10 + i)
	}
	h.frame("d1", kvwire.TypeAlloc, id, (&kvwire.Alloc{Pages: ps}).AppendTo(nil))
	if !h.eng.has(fmt.Sprintf("start %s %d", leg.name, pages)) {
		h.t.Fatalf("compute of %s not started: %v", leg.name, h.eng.calls)
	}
}

// decodeRoom brings a decode room to awaiting KV from prefill p1: request,
// HELLO, HELLO_ACK, admission of pages 4 and 5, ALLOC.
func (h *harness) decodeRoom(id room.ID, leg *testLeg) {
	h.t.Helper()
	if rej := h.d.Request(h.now, id, "r", "p1", leg); rej != nil {
		h.t.Fatal(rej)
	}
	h.drainControl("p1")
	h.frame("p1", kvwire.TypeHelloAck, id, nil)
	if !h.eng.has("admit " + leg.name) {
		h.t.Fatalf("no admission: %v", h.eng.calls)
	}
	h.stateBuf = nil
	if h.stateB > 0 {
		h.stateBuf = make([]byte, h.stateB)
	}
	h.d.Admitted(h.now, id, leg, &fakePages{buf: map[[3]int32][]byte{}}, []int32{4, 5}, h.stateBuf)
	h.drainControl("p1") // ALLOC
}

// kvFrames returns every K and V frame of pages pages over all layers.
func kvFrames(pages int) []KVFrame {
	var out []KVFrame
	for ord := range pages {
		for l := range layers {
			for k := range 2 {
				out = append(out, KVFrame{KV: kvwire.KV{Layer: uint16(l), Kind: kvwire.KVKind(k), Ordinal: uint32(ord)},
					Data: make([]byte, pageBytes)})
			}
		}
	}
	return out
}

// TestProgressCountedOnTheWire: KV queued for a slow link counts as
// progress only when it is written; a transfer that keeps moving outlives
// ProgressTimeout many times over; the engine's first token is held until
// the last KV frame is written, and DONE then carries every byte.
func TestProgressCountedOnTheWire(t *testing.T) {
	h := newHarness(t, room.RolePrefill, Limits{})
	id, leg := roomID(1), &testLeg{"a"}
	h.prefillRoom(id, leg, 2)
	frames := kvFrames(2) // 8 frames
	h.d.KVReady(h.now, id, leg, frames)
	h.d.ComputeDone(h.now, id, leg, Token{ID: 7, Logprob: -1})
	h.drainControl("d1") // HELLO_ACK
	if b, _ := h.d.SentBytes(id); b != 0 {
		t.Fatalf("sent bytes %d before any KV frame was written", b)
	}
	for i := range frames {
		h.tick(progress * 9 / 10) // slow link: each frame takes 0.9 progress timeouts
		if st, r := h.state(id); st != room.StateTransferring && !(i == 0 && st == room.StateWaitingForInput) {
			t.Fatalf("after %d frames written: room %v (%v), want still transferring", i, st, r)
		}
		if _, ok := h.outstanding("d1", LaneControl); ok {
			t.Fatalf("a control frame went out with %d of %d KV frames written", i, len(frames))
		}
		h.complete("d1", LaneKV, nil)
	}
	ctl := h.drainControl("d1")
	if len(ctl) != 2 || ctl[0].Type != kvwire.TypeFirstToken || ctl[1].Type != kvwire.TypeDone {
		t.Fatalf("after the last KV frame: control frames %v, want FIRST_TOKEN, DONE", types(ctl))
	}
	var done kvwire.Done
	if err := done.Decode(ctl[1].Payload); err != nil || done.Bytes != uint64(len(frames)*pageBytes) || done.PageCount != 2 {
		t.Errorf("DONE %+v (%v), want 2 pages, %d bytes", done, err, len(frames)*pageBytes)
	}
	h.tick(progress / 2)
	h.frame("d1", kvwire.TypeDoneAck, id, nil)
	if st, _ := h.state(id); st != room.StateSucceeded || len(h.legs.ok) != 1 {
		t.Errorf("room %v, legs answered %v: want succeeded and answered", st, h.legs.ok)
	}
	if s := h.d.Stats(); s.Rooms != 0 || s.Peers != 0 || s.QueuedBytes != 0 {
		t.Errorf("after success: %+v, want nothing held", s)
	}
}

// TestStalledLinkStillTimesOut: KV that is never written fails the room by
// ProgressTimeout: progress is not invented.
func TestStalledLinkStillTimesOut(t *testing.T) {
	h := newHarness(t, room.RolePrefill, Limits{})
	id, leg := roomID(1), &testLeg{"a"}
	h.prefillRoom(id, leg, 1)
	h.d.KVReady(h.now, id, leg, kvFrames(1))
	h.complete("d1", LaneKV, nil) // one frame moves the room to sending
	h.tick(progress)
	if st, r := h.state(id); st != room.StateFailed || r != room.ReasonProgressTimeout {
		t.Errorf("stalled room %v (%v), want failed progress_timeout", st, r)
	}
}

func types(fs []Frame) []kvwire.Type {
	var out []kvwire.Type
	for _, f := range fs {
		out = append(out, f.Type)
	}
	return out
}

// TestControlNeverWaitsBehindAnotherRoomsKV: with room A's KV queued, room
// B's HELLO_ACK is handed to the wire at once, and B's KV is served in turn
// with A's instead of after all of it.
func TestControlNeverWaitsBehindAnotherRoomsKV(t *testing.T) {
	h := newHarness(t, room.RolePrefill, Limits{})
	a, b := roomID(1), roomID(2)
	la, lb := &testLeg{"a"}, &testLeg{"b"}
	h.prefillRoom(a, la, 4)
	h.drainControl("d1")
	h.d.KVReady(h.now, a, la, kvFrames(4)) // 16 frames
	before := len(h.wire.sent)
	h.frame("d1", kvwire.TypeHello, b, nil) // B's HELLO (no request yet: parked)
	if f, ok := h.outstanding("d1", LaneControl); !ok || f.Room != b || f.Type != kvwire.TypeHelloAck {
		t.Fatalf("B's HELLO_ACK not on the wire at once: outstanding %+v %v", f, ok)
	}
	if got := h.wire.sent[before:]; len(got) != 1 {
		t.Fatalf("wire got %d frames for B's HELLO, want 1", len(got))
	}
	h.drainControl("d1")
	if rej := h.d.Request(h.now, b, "req-b", "", lb); rej != nil {
		t.Fatal(rej)
	}
	h.frame("d1", kvwire.TypeAlloc, b, (&kvwire.Alloc{Pages: []int32{50}}).AppendTo(nil))
	h.d.KVReady(h.now, b, lb, kvFrames(1)) // 4 frames
	var order []byte
	for {
		if _, ok := h.outstanding("d1", LaneKV); !ok {
			break
		}
		f := h.complete("d1", LaneKV, nil)
		order = append(order, f.Room[15])
		h.drainControl("d1")
	}
	// A's first frame was outstanding before B queued; then the rooms alternate.
	if first := slices.Index(order, 2); first < 0 || first > 2 {
		t.Errorf("KV order %v: B's first frame waited behind %d of A's", order, first)
	}
	if n := len(order); n != 20 {
		t.Errorf("%d KV frames written, want 20", n)
	}
}

// TestRoomFramesKeepTheirOrder: a room's control frames leave in the order
// the core emitted them, and its DONE only after its last KV frame.
func TestRoomFramesKeepTheirOrder(t *testing.T) {
	h := newHarness(t, room.RolePrefill, Limits{})
	id, leg := roomID(1), &testLeg{"a"}
	h.prefillRoom(id, leg, 1)
	h.d.KVReady(h.now, id, leg, kvFrames(1))
	h.d.ComputeDone(h.now, id, leg, Token{ID: 3})
	var seq []string
	for {
		progressed := false
		if f, ok := h.outstanding("d1", LaneControl); ok {
			h.complete("d1", LaneControl, nil)
			seq = append(seq, f.Type.String())
			progressed = true
		}
		if f, ok := h.outstanding("d1", LaneKV); ok && !progressed {
			h.complete("d1", LaneKV, nil)
			seq = append(seq, fmt.Sprintf("kv%d", f.KV.Layer*2+uint16(f.KV.Kind)))
			progressed = true
		}
		if !progressed {
			break
		}
	}
	want := []string{kvwire.TypeHelloAck.String(), "kv0", "kv1", "kv2", "kv3", kvwire.TypeFirstToken.String(), kvwire.TypeDone.String()}
	if !slices.Equal(seq, want) {
		t.Errorf("frames %v, want %v", seq, want)
	}
}

// TestKVOfAnEndedRoomIsDropped: when a room fails, its queued KV is dropped
// (counted), not sent; the frame already on the wire completes harmlessly.
func TestKVOfAnEndedRoomIsDropped(t *testing.T) {
	h := newHarness(t, room.RolePrefill, Limits{})
	id, leg := roomID(1), &testLeg{"a"}
	h.prefillRoom(id, leg, 4)
	h.drainControl("d1")
	h.d.KVReady(h.now, id, leg, kvFrames(4)) // 16 frames, one outstanding
	h.d.ClientAbort(h.now, id, leg)
	if st, r := h.state(id); st != room.StateFailed || r != room.ReasonClientAbort {
		t.Fatalf("room %v (%v), want failed client_abort", st, r)
	}
	if got := h.obs.sendDropped["room_ended"]; got != 15 {
		t.Errorf("dropped %d queued KV frames, want 15", got)
	}
	h.complete("d1", LaneKV, nil)
	if _, ok := h.outstanding("d1", LaneKV); ok {
		t.Errorf("KV of the failed room still sent")
	}
	ctl := h.drainControl("d1")
	if len(ctl) != 1 || ctl[0].Type != kvwire.TypeAbort {
		t.Errorf("control after the abort: %v, want ABORT", types(ctl))
	}
	h.d.KVReady(h.now, id, leg, kvFrames(1)) // the engine's last layer, after the end
	if _, ok := h.outstanding("d1", LaneKV); ok || h.obs.sendDropped["room_ended"] != 19 {
		t.Errorf("late KV of the failed room queued (dropped %d)", h.obs.sendDropped["room_ended"])
	}
	if s := h.d.Stats(); s.Peers != 0 || s.QueuedBytes != 0 || s.Rooms != 0 {
		t.Errorf("after the room ended: %+v, want nothing held", s)
	}
	if !slices.Equal(h.wire.idle, []string{"d1"}) {
		t.Errorf("PeerIdle calls %v, want [d1]", h.wire.idle)
	}
}

// TestLocalSendErrorFailsOneRoom: a frame the codec refuses (or a full send
// queue) fails its room only; a connection error fails every room with the
// peer and drops what was queued for it.
func TestLocalSendErrorFailsOneRoom(t *testing.T) {
	for _, local := range []error{
		fmt.Errorf("send KV: %w", kvwire.ErrTooLarge),
		fmt.Errorf("send: %w", kvwire.ErrType),
		fmt.Errorf("%w: %w", ErrLocal, errors.New("transfer: send queue full")),
	} {
		h := newHarness(t, room.RolePrefill, Limits{})
		a, b := roomID(1), roomID(2)
		la, lb := &testLeg{"a"}, &testLeg{"b"}
		h.prefillRoom(a, la, 1)
		h.prefillRoom(b, lb, 1)
		h.drainControl("d1")
		h.d.KVReady(h.now, a, la, kvFrames(1))
		h.d.KVReady(h.now, b, lb, kvFrames(1))
		h.complete("d1", LaneKV, local) // A's first frame
		if st, r := h.state(a); st != room.StateFailed || r != room.ReasonSendFailed {
			t.Errorf("%v: room A %v (%v), want failed send_failed", local, st, r)
		}
		if st, _ := h.state(b); st.Terminal() {
			t.Errorf("%v: room B %v: a local error of A's frame failed it", local, st)
		}
		if h.legs.failed[la] != room.ReasonSendFailed {
			t.Errorf("%v: leg A failed with %v", local, h.legs.failed[la])
		}
		// a connection error: the peer is unreachable
		h.complete("d1", LaneKV, errors.New("write tcp: broken pipe"))
		if st, r := h.state(b); st != room.StateFailed || r != room.ReasonPeerLost {
			t.Errorf("after a connection error room B %v (%v), want failed peer_lost", st, r)
		}
	}
}

// TestPeerStateGoesWhenIdle: a decode leg naming an unreachable prefill
// address fails, and the peer's state (and the adapter's lanes, through
// PeerIdle) goes with it; a stranger's HELLO answered while stopping leaves
// nothing behind either.
func TestPeerStateGoesWhenIdle(t *testing.T) {
	h := newHarness(t, room.RoleDecode, Limits{})
	for i := range 50 {
		id, leg, peer := roomID(byte(i)), &testLeg{fmt.Sprint(i)}, fmt.Sprintf("p%d", i)
		if rej := h.d.Request(h.now, id, "r", peer, leg); rej != nil {
			t.Fatal(rej)
		}
		f := h.complete(peer, LaneControl, errors.New("dial: connection refused"))
		if f.Type != kvwire.TypeHello {
			t.Fatalf("first frame %v, want HELLO", f.Type)
		}
		if h.legs.failed[leg] != room.ReasonPeerLost {
			t.Fatalf("leg %d: %v, want peer_lost", i, h.legs.failed[leg])
		}
	}
	if s := h.d.Stats(); s.Peers != 0 || s.Rooms != 0 || len(h.d.Peers()) != 0 || len(h.wire.idle) != 50 {
		t.Errorf("after 50 unreachable peers: %+v, %d PeerIdle calls: want no peer state", s, len(h.wire.idle))
	}

	p := newHarness(t, room.RolePrefill, Limits{})
	p.d.Shutdown(p.now)
	p.frame("stranger", kvwire.TypeHello, roomID(9), nil)
	ctl := p.drainControl("stranger")
	if len(ctl) != 1 || ctl[0].Type != kvwire.TypeFailed {
		t.Errorf("stranger's HELLO while stopping answered %v, want FAILED", types(ctl))
	}
	if s := p.d.Stats(); s.Peers != 0 {
		t.Errorf("after answering a stranger: %+v, want no peer state", s)
	}
}

// TestOverBudgetFailsTheRoom: KV that would pass the peer's share of the
// budget fails its room (send_failed) instead of growing memory; another
// room is unaffected and the budget is back once the room is gone.
func TestOverBudgetFailsTheRoom(t *testing.T) {
	lim, err := LimitsFor(QueueBytesMin)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, room.RolePrefill, lim)
	a, b := roomID(1), roomID(2)
	la, lb := &testLeg{"a"}, &testLeg{"b"}
	h.prefillRoom(a, la, 1)
	h.prefillRoom(b, lb, 1)
	h.drainControl("d1")
	big := []KVFrame{{KV: kvwire.KV{}, Data: make([]byte, lim.PeerQueueBytesMax)}} // one header too many
	h.d.KVReady(h.now, a, la, big)
	if st, r := h.state(a); st != room.StateFailed || r != room.ReasonSendFailed {
		t.Errorf("room over budget %v (%v), want failed send_failed", st, r)
	}
	if h.obs.sendDropped["over_budget"] != 1 {
		t.Errorf("over_budget drops %d, want 1", h.obs.sendDropped["over_budget"])
	}
	h.d.KVReady(h.now, b, lb, kvFrames(1))
	if st, _ := h.state(b); st.Terminal() {
		t.Errorf("room B %v after A went over budget", st)
	}
}

// TestDecodeQuarantineAndDuplicates: a KV write in flight keeps an ended
// room's pages from the engine until it completes; a frame that arrives
// twice counts once; frames with bad coordinates or from another peer are
// dropped and counted.
func TestDecodeQuarantineAndDuplicates(t *testing.T) {
	h := newHarness(t, room.RoleDecode, Limits{})
	id, leg := roomID(1), &testLeg{"a"}
	h.decodeRoom(id, leg)
	kv := kvwire.KV{Layer: 1, Kind: kvwire.KindV, Ordinal: 1}
	if dst := h.d.KVDest("p1", id, kv, pageBytes); len(dst) != pageBytes {
		t.Fatalf("KVDest = %d bytes, want %d", len(dst), pageBytes)
	}
	h.d.KVDone(h.now, "p1", id, kv, pageBytes, true)
	if dst := h.d.KVDest("p1", id, kv, pageBytes); dst != nil || h.obs.kvDropped["duplicate"] != 1 {
		t.Errorf("a duplicate got a destination (drops %v)", h.obs.kvDropped)
	}
	for _, c := range []struct {
		peer string
		kv   kvwire.KV
		n    int
		why  string
	}{
		{"p2", kvwire.KV{}, pageBytes, "wrong_peer"},
		{"p1", kvwire.KV{Ordinal: 2}, pageBytes, "bad_coordinates"},
		{"p1", kvwire.KV{Layer: layers}, pageBytes, "bad_coordinates"},
		{"p1", kvwire.KV{}, pageBytes - 1, "bad_coordinates"},
	} {
		if dst := h.d.KVDest(c.peer, id, c.kv, c.n); dst != nil || h.obs.kvDropped[c.why] == 0 {
			t.Errorf("KVDest(%s, %+v, %d) = %d bytes, want a %s drop", c.peer, c.kv, c.n, len(dst), c.why)
		}
	}
	if b, _ := h.d.RecvBytes(id); b != pageBytes {
		t.Errorf("received %d bytes, want %d", b, pageBytes)
	}
	// a write in flight when the room fails
	kv2 := kvwire.KV{Ordinal: 0}
	if dst := h.d.KVDest("p1", id, kv2, pageBytes); dst == nil {
		t.Fatal("no destination for a fresh frame")
	}
	h.d.ClientAbort(h.now, id, leg)
	if h.eng.has("cancel a") {
		t.Fatal("the engine sequence was cancelled (pages freed) while a KV write into them was in flight")
	}
	if s := h.d.Stats(); s.Quarantined != 1 {
		t.Errorf("stats %+v, want one quarantined room", s)
	}
	h.d.KVDone(h.now, "p1", id, kv2, pageBytes, true)
	if !h.eng.has("cancel a") {
		t.Errorf("the sequence was not cancelled after the last write: %v", h.eng.calls)
	}
	if s := h.d.Stats(); s.Quarantined != 0 || s.Rooms != 0 {
		t.Errorf("stats %+v after the write, want nothing held", s)
	}
}

// TestSuccessWithAWriteInFlight: a prefill whose DONE counts fewer bytes
// than it sent can make a decode room succeed while one of its KV writes
// is still in flight. The record stays until that write's KVDone (which
// must find it: a KVDone with no buffer out is a broken invariant), and
// only then goes; the sequence that resumed runs on.
func TestSuccessWithAWriteInFlight(t *testing.T) {
	h := newHarness(t, room.RoleDecode, Limits{})
	id, leg := roomID(1), &testLeg{"a"}
	h.decodeRoom(id, leg)
	var stored int64
	var last kvwire.KV
	for _, f := range kvFrames(2) {
		if h.d.KVDest("p1", id, f.KV, pageBytes) == nil {
			t.Fatalf("no destination for %+v", f.KV)
		}
		last = f.KV
		if f.KV.Ordinal == 1 && f.KV.Layer == layers-1 && f.KV.Kind == kvwire.KindV {
			break // the last frame stays in flight
		}
		h.d.KVDone(h.now, "p1", id, f.KV, pageBytes, true)
		stored += pageBytes
	}
	h.frame("p1", kvwire.TypeFirstToken, id, (&kvwire.FirstToken{Token: 7}).AppendTo(nil))
	h.frame("p1", kvwire.TypeDone, id, (&kvwire.Done{PageCount: 2, Bytes: uint64(stored)}).AppendTo(nil))
	if st, _ := h.state(id); st != room.StateSucceeded || !h.eng.has("resume a 7") {
		t.Fatalf("room %v, engine %v; want it succeeded and resumed", st, h.eng.calls)
	}
	if s := h.d.Stats(); s.Rooms != 1 || s.Quarantined != 1 {
		t.Errorf("stats %+v with a write in flight, want the record kept", s)
	}
	h.d.KVDone(h.now, "p1", id, last, pageBytes, true)
	if s := h.d.Stats(); s.Rooms != 0 || h.eng.has("cancel a") {
		t.Errorf("stats %+v, engine %v after the write; want the record gone and the sequence running", s, h.eng.calls)
	}
}

// TestLimitsRelations asserts how the queue limits derive from the one
// budget.
func TestLimitsRelations(t *testing.T) {
	for _, budget := range []int64{QueueBytesMin, DefaultQueueBytesMax, 1 << 40} {
		l, err := LimitsFor(budget)
		if err != nil {
			t.Fatalf("LimitsFor(%d): %v", budget, err)
		}
		if l.QueueBytesMax != budget || l.PeerQueueBytesMax*PeerShare > l.QueueBytesMax ||
			l.PeerQueueBytesMax < FrameBytesMax {
			t.Errorf("LimitsFor(%d) = %+v: want PeerShare (%d) peers within the budget and one largest frame (%d) per peer",
				budget, l, PeerShare, FrameBytesMax)
		}
	}
	if _, err := LimitsFor(QueueBytesMin - 1); err == nil {
		t.Errorf("LimitsFor(QueueBytesMin-1) accepted a budget a peer cannot hold one frame in")
	}
	if DefaultLimits() != must(LimitsFor(DefaultQueueBytesMax)) {
		t.Errorf("DefaultLimits %+v is not LimitsFor(DefaultQueueBytesMax)", DefaultLimits())
	}
	if FrameBytesMax < int64(kvwire.HeaderBytes+kvwire.KVPayloadBytesMax) ||
		FrameBytesMax < int64(kvwire.HeaderBytes+kvwire.ControlPayloadBytesMax) {
		t.Errorf("FrameBytesMax %d below a largest frame", FrameBytesMax)
	}
	if (Frame{Data: make([]byte, kvwire.KVDataBytesMax)}).Bytes() > FrameBytesMax {
		t.Errorf("a largest KV frame counts more than FrameBytesMax")
	}
}

func must(l Limits, err error) Limits {
	if err != nil {
		panic(err)
	}
	return l
}

// TestLateHelloAckGetsAbort: decode's handshake timed out; when prefill's
// HELLO_ACK comes after all, decode answers it with ABORT so prefill ends
// its room at once.
func TestLateHelloAckGetsAbort(t *testing.T) {
	h := newHarness(t, room.RoleDecode, Limits{})
	id, leg := roomID(1), &testLeg{"a"}
	if rej := h.d.Request(h.now, id, "r", "p1", leg); rej != nil {
		t.Fatal(rej)
	}
	h.drainControl("p1") // HELLO
	h.tick(1000 * ms)    // HandshakeTimeout
	if st, r := h.state(id); st != room.StateFailed || r != room.ReasonHandshakeTimeout {
		t.Fatalf("room %v (%v), want failed handshake_timeout", st, r)
	}
	h.drainControl("p1") // the ABORT of the timeout (lost on the way, say)
	h.frame("p1", kvwire.TypeHelloAck, id, nil)
	ctl := h.drainControl("p1")
	if len(ctl) != 1 || ctl[0].Type != kvwire.TypeAbort {
		t.Fatalf("late HELLO_ACK answered with %v, want ABORT", types(ctl))
	}
	var a kvwire.Abort
	if err := a.Decode(ctl[0].Payload); err != nil || a.Reason != room.ReasonHandshakeTimeout {
		t.Errorf("ABORT %+v (%v), want reason handshake_timeout", a, err)
	}
}

// TestFailedRoomSendsNoQueuedDone: a prefill room that fails while its DONE
// waits in the control lane (behind its FIRST_TOKEN, being written) sends
// the ABORT and never the DONE. Sent, the DONE let decode verify the KV and
// succeed while prefill and the client had failed (the simulator's
// exhaustive mode found it: the sides disagreed on the room's outcome).
func TestFailedRoomSendsNoQueuedDone(t *testing.T) {
	h := newHarness(t, room.RolePrefill, Limits{})
	id, leg := roomID(1), &testLeg{"a"}
	h.prefillRoom(id, leg, 1)
	h.drainControl("d1") // HELLO_ACK
	h.d.KVReady(h.now, id, leg, kvFrames(1))
	h.d.ComputeDone(h.now, id, leg, Token{ID: 3})
	for {
		if _, ok := h.outstanding("d1", LaneKV); !ok {
			break
		}
		h.complete("d1", LaneKV, nil)
	}
	if f, ok := h.outstanding("d1", LaneControl); !ok || f.Type != kvwire.TypeFirstToken {
		t.Fatalf("outstanding control frame %v %v, want FIRST_TOKEN (DONE queued behind it)", f.Type, ok)
	}
	h.d.ClientAbort(h.now, id, leg)
	got := types(h.drainControl("d1"))
	want := []kvwire.Type{kvwire.TypeFirstToken, kvwire.TypeAbort}
	if !slices.Equal(got, want) {
		t.Errorf("control frames after the abort: %v, want %v (no DONE)", got, want)
	}
	if st, _ := h.state(id); st != room.StateFailed {
		t.Errorf("room state %v, want failed", st)
	}
	if n := h.obs.sendDropped["room_ended"]; n != 1 {
		t.Errorf("send drops counted room_ended = %d, want 1 (the DONE)", n)
	}
}

// TestDuplicateWhileTheFirstIsBeingWritten: a duplicate KV frame that
// arrives (on another connection) while the first copy is still being
// written gets no buffer, so the frame's bytes count once towards DONE's
// check. Before, the duplicate got a second buffer and both writes counted,
// so a duplicate could stand in for a lost frame.
func TestDuplicateWhileTheFirstIsBeingWritten(t *testing.T) {
	h := newHarness(t, room.RoleDecode, Limits{})
	id, leg := roomID(1), &testLeg{"a"}
	h.decodeRoom(id, leg)
	kv := kvwire.KV{Layer: 1, Kind: kvwire.KindK, Ordinal: 0}
	if dst := h.d.KVDest("p1", id, kv, pageBytes); dst == nil {
		t.Fatal("no destination for the first copy")
	}
	if dst := h.d.KVDest("p1", id, kv, pageBytes); dst != nil {
		t.Fatal("the duplicate got a buffer while the first copy was being written")
	}
	h.d.KVDone(h.now, "p1", id, kv, pageBytes, true) // the first copy's write
	if b, _ := h.d.RecvBytes(id); b != pageBytes {
		t.Errorf("after the write: %d bytes counted, want %d", b, pageBytes)
	}
	if b, _ := h.d.RecvBytes(id); b != pageBytes || h.obs.kvDropped["duplicate"] != 1 {
		t.Errorf("%d bytes, drops %v; want %d bytes and one duplicate", b, h.obs.kvDropped, pageBytes)
	}
}

// TestContractBreachesFailLoudly: a Sent for a lane with no frame
// outstanding (the Wire reporting a frame twice, or one it was never
// handed) and a KVDone for a frame no KVDest buffer is out for (the
// transport calling it twice, or without a buffer) are broken invariants:
// the driver panics with an invariant.Error instead of ignoring the call.
func TestContractBreachesFailLoudly(t *testing.T) {
	mustFail := func(t *testing.T, what, want string, call func()) {
		t.Helper()
		defer func() {
			t.Helper()
			ie, ok := recover().(*invariant.Error)
			if !ok || !strings.Contains(ie.Msg, want) {
				t.Errorf("%s: panicked with %v, want an invariant.Error saying %q", what, ie, want)
			}
		}()
		call()
	}
	t.Run("sent", func(t *testing.T) {
		h := newHarness(t, room.RoleDecode, Limits{})
		id, leg := roomID(1), &testLeg{"a"}
		h.decodeRoom(id, leg) // HELLO and ALLOC written: nothing outstanding
		mustFail(t, "Sent with nothing outstanding", "no frame outstanding", func() { h.d.Sent(h.now, "p1", LaneControl, nil) })
		mustFail(t, "Sent for an unknown peer", "no frame outstanding", func() { h.d.Sent(h.now, "p9", LaneKV, nil) })
		mustFail(t, "Sent for lane 7", "no such lane", func() { h.d.Sent(h.now, "p1", Lane(7), nil) })
	})
	t.Run("kvdone", func(t *testing.T) {
		h := newHarness(t, room.RoleDecode, Limits{})
		id, leg := roomID(1), &testLeg{"a"}
		h.decodeRoom(id, leg)
		kv := kvwire.KV{Layer: 1, Kind: kvwire.KindK, Ordinal: 0}
		mustFail(t, "KVDone without KVDest", "no KVDest buffer", func() { h.d.KVDone(h.now, "p1", id, kv, pageBytes, true) })
		if dst := h.d.KVDest("p1", id, kv, pageBytes); dst == nil {
			t.Fatal("no destination")
		}
		h.d.KVDone(h.now, "p1", id, kv, pageBytes, true)
		mustFail(t, "a second KVDone", "no KVDest buffer", func() { h.d.KVDone(h.now, "p1", id, kv, pageBytes, true) })
		mustFail(t, "KVDone for an unknown room", "no KVDest buffer", func() { h.d.KVDone(h.now, "p1", roomID(9), kv, pageBytes, true) })
	})
}
