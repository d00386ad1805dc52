package driver

import (
	"bytes"
	"hash/crc32"
	"strings"
	"testing"

	"tandem/internal/invariant"
	"tandem/internal/pd/kvwire"
	"tandem/internal/pd/room"
)

// stateTestBytes is a state of two full frames and a short one.
const stateTestBytes = 2*pageBytes + 10

// stateFrames returns the state frames of state, pageBytes each.
func stateFrames(state []byte) []KVFrame {
	var out []KVFrame
	for i := 0; i*pageBytes < len(state); i++ {
		out = append(out, KVFrame{KV: kvwire.KV{Kind: kvwire.KindState, Ordinal: uint32(i)},
			Data: state[i*pageBytes : min(len(state), (i+1)*pageBytes)]})
	}
	return out
}

func testState() []byte {
	s := make([]byte, stateTestBytes)
	for i := range s {
		s[i] = byte(i*7 + 3)
	}
	return s
}

// TestPrefillShipsState: the state goes out after the pages on the KV lane,
// counts towards DONE's bytes, and DONE carries its count and CRC-32C; a
// compute that ends without the state fails the room (engine) and sends no
// DONE.
func TestPrefillShipsState(t *testing.T) {
	state := testState()
	h := newStateHarness(t, room.RolePrefill, Limits{}, stateTestBytes)
	id, leg := roomID(1), &testLeg{"a"}
	h.prefillRoom(id, leg, 1)
	h.drainControl("d1")
	h.d.KVReady(h.now, id, leg, append(kvFrames(1), stateFrames(state)...))
	h.d.ComputeDone(h.now, id, leg, Token{ID: 7})
	var kinds []kvwire.KVKind
	for {
		if _, ok := h.outstanding("d1", LaneKV); !ok {
			break
		}
		kinds = append(kinds, h.complete("d1", LaneKV, nil).KV.Kind)
	}
	if want := []kvwire.KVKind{0, 1, 0, 1, 2, 2, 2}; !bytes.Equal(kindBytes(kinds), kindBytes(want)) {
		t.Errorf("KV lane order %v, want pages then state %v", kinds, want)
	}
	ctl := h.drainControl("d1")
	if len(ctl) != 2 || ctl[1].Type != kvwire.TypeDone {
		t.Fatalf("control frames %v, want FIRST_TOKEN, DONE", types(ctl))
	}
	var done kvwire.Done
	wantBytes := uint64(4*pageBytes + stateTestBytes)
	if err := done.Decode(ctl[1].Payload); err != nil || done.Bytes != wantBytes || done.StateBytes != stateTestBytes ||
		done.StateSum != crc32.Checksum(state, crc32.MakeTable(crc32.Castagnoli)) {
		t.Errorf("DONE %+v (%v), want %d bytes, %d of state, the state's CRC-32C", done, err, wantBytes, stateTestBytes)
	}

	// The state's last frame never handed over: no DONE, the room fails.
	h2 := newStateHarness(t, room.RolePrefill, Limits{}, stateTestBytes)
	h2.prefillRoom(id, leg, 1)
	h2.drainControl("d1")
	h2.d.KVReady(h2.now, id, leg, append(kvFrames(1), stateFrames(state)[:2]...))
	h2.d.ComputeDone(h2.now, id, leg, Token{ID: 7})
	for {
		if _, ok := h2.outstanding("d1", LaneKV); !ok {
			break
		}
		h2.complete("d1", LaneKV, nil)
	}
	ctl = h2.drainControl("d1")
	if st, r := h2.state(id); st != room.StateFailed || r != room.ReasonEngine || len(ctl) != 1 || ctl[0].Type != kvwire.TypeFailed {
		t.Errorf("state cut short: room %v (%v), control %v; want failed (engine) with FAILED only", st, r, types(ctl))
	}
}

func kindBytes(k []kvwire.KVKind) []byte {
	out := make([]byte, len(k))
	for i, v := range k {
		out[i] = byte(v)
	}
	return out
}

// receiveState writes state's frames (all but those in skip) through
// KVDest/KVDone and checks each lands.
func (h *harness) receiveState(id room.ID, state []byte, skip map[int]bool) {
	h.t.Helper()
	for i, f := range stateFrames(state) {
		if skip[i] {
			continue
		}
		dst := h.d.KVDest("p1", id, f.KV, len(f.Data))
		if len(dst) != len(f.Data) {
			h.t.Fatalf("KVDest(state %d, %d bytes) = %d bytes", i, len(f.Data), len(dst))
		}
		copy(dst, f.Data)
		h.d.KVDone(h.now, "p1", id, f.KV, len(f.Data), true)
	}
}

// receivePages writes every page frame of the decode room (pages 4, 5).
func (h *harness) receivePages(id room.ID) {
	h.t.Helper()
	for _, f := range kvFrames(2) {
		if h.d.KVDest("p1", id, f.KV, pageBytes) == nil {
			h.t.Fatalf("KVDest(%+v) = nil", f.KV)
		}
		h.d.KVDone(h.now, "p1", id, f.KV, pageBytes, true)
	}
}

// TestDecodeReceivesState: state frames land in the state buffer the engine
// admitted the room with; bad coordinates and duplicates are dropped and
// counted; DONE resumes the sequence only with the whole state and a
// matching checksum, else the room fails (protocol) and the engine
// sequence (pages and state) is cancelled.
func TestDecodeReceivesState(t *testing.T) {
	state := testState()
	sum := crc32.Checksum(state, crc32.MakeTable(crc32.Castagnoli))
	full := uint64(8*pageBytes + stateTestBytes)
	tests := []struct {
		name   string
		skip   map[int]bool
		done   kvwire.Done
		resume bool
	}{
		{"whole state", nil, kvwire.Done{PageCount: 2, Bytes: full, StateBytes: stateTestBytes, StateSum: sum}, true},
		{"a state frame lost", map[int]bool{1: true}, kvwire.Done{PageCount: 2, Bytes: full, StateBytes: stateTestBytes, StateSum: sum}, false},
		{"checksum differs", nil, kvwire.Done{PageCount: 2, Bytes: full, StateBytes: stateTestBytes, StateSum: sum ^ 1}, false},
		{"DONE without state", nil, kvwire.Done{PageCount: 2, Bytes: 8 * pageBytes}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newStateHarness(t, room.RoleDecode, Limits{}, stateTestBytes)
			id, leg := roomID(1), &testLeg{"a"}
			h.decodeRoom(id, leg)
			h.receivePages(id)
			h.receiveState(id, state, tt.skip)
			for _, bad := range []struct {
				kv  kvwire.KV
				n   int
				why string
			}{
				{kvwire.KV{Kind: kvwire.KindState, Ordinal: 3}, pageBytes, "bad_coordinates"},
				{kvwire.KV{Kind: kvwire.KindState, Ordinal: 2}, pageBytes, "bad_coordinates"}, // the last piece is 10 bytes
				{kvwire.KV{Kind: kvwire.KindState, Layer: 1}, pageBytes, "bad_coordinates"},
				{kvwire.KV{Kind: kvwire.KindState, Ordinal: 0}, pageBytes, "duplicate"},
			} {
				before := h.obs.kvDropped[bad.why]
				if dst := h.d.KVDest("p1", id, bad.kv, bad.n); dst != nil || h.obs.kvDropped[bad.why] != before+1 {
					t.Errorf("KVDest(%+v, %d) = %d bytes, want a %s drop", bad.kv, bad.n, len(dst), bad.why)
				}
			}
			h.frame("p1", kvwire.TypeFirstToken, id, (&kvwire.FirstToken{Token: 9}).AppendTo(nil))
			h.frame("p1", kvwire.TypeDone, id, tt.done.AppendTo(nil))
			st, r := h.state(id)
			if tt.resume {
				if st != room.StateSucceeded || !h.eng.has("resume a 9") || !bytes.Equal(h.stateBuf, state) {
					t.Errorf("room %v (%v), engine %v, state equal %v: want succeeded, resumed on the state prefill sent",
						st, r, h.eng.calls, bytes.Equal(h.stateBuf, state))
				}
				return
			}
			if st != room.StateFailed || r != room.ReasonProtocol || h.eng.has("resume a 9") || !h.eng.has("cancel a") {
				t.Errorf("room %v (%v), engine %v: want failed (protocol), not resumed, cancelled", st, r, h.eng.calls)
			}
		})
	}
}

// TestStateWriteQuarantined: a room that fails while a state frame is being
// written keeps its sequence (pages and state buffer) until the write ends.
func TestStateWriteQuarantined(t *testing.T) {
	h := newStateHarness(t, room.RoleDecode, Limits{}, stateTestBytes)
	id, leg := roomID(1), &testLeg{"a"}
	h.decodeRoom(id, leg)
	kv := kvwire.KV{Kind: kvwire.KindState, Ordinal: 1}
	if dst := h.d.KVDest("p1", id, kv, pageBytes); len(dst) != pageBytes {
		t.Fatalf("KVDest(state 1) = %d bytes", len(dst))
	}
	h.d.ClientAbort(h.now, id, leg)
	if h.eng.has("cancel a") || h.d.Stats().Quarantined != 1 {
		t.Fatalf("cancelled with a state write in flight (engine %v, stats %+v)", h.eng.calls, h.d.Stats())
	}
	h.d.KVDone(h.now, "p1", id, kv, pageBytes, true)
	if !h.eng.has("cancel a") || h.d.Stats().Rooms != 0 {
		t.Errorf("after the write: engine %v, stats %+v; want cancelled, nothing held", h.eng.calls, h.d.Stats())
	}
}

// TestAdmittedStateSize: an engine that admits a room with a state buffer
// of the wrong size breaks its contract, loudly.
func TestAdmittedStateSize(t *testing.T) {
	h := newStateHarness(t, room.RoleDecode, Limits{}, stateTestBytes)
	id, leg := roomID(1), &testLeg{"a"}
	if rej := h.d.Request(h.now, id, "r", "p1", leg); rej != nil {
		t.Fatal(rej)
	}
	defer func() {
		ie, ok := recover().(*invariant.Error)
		if !ok || !strings.Contains(ie.Msg, "state buffer") {
			t.Errorf("Admitted with a short state buffer panicked with %v, want an invariant.Error about the state buffer", ie)
		}
	}()
	h.d.Admitted(h.now, id, leg, &fakePages{buf: map[[3]int32][]byte{}}, []int32{4, 5}, make([]byte, 3))
}
