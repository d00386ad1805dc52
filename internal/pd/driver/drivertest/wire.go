package drivertest

import (
	"fmt"
	"sync/atomic"
	"testing"

	"tandem/internal/pd/driver"
	"tandem/internal/pd/kvwire"
	"tandem/internal/pd/room"
)

// WireHost runs a driver.Wire whose Sent reports go to the suite's
// Recorder.
type WireHost interface {
	Host
	// Wire returns the implementation under test.
	Wire() driver.Wire
	// Reachable is a peer the wire can write to; Unreachable one it
	// cannot (nothing listens there, or the peer is down). Frames for
	// rooms those peers do not know are harmless to them.
	Reachable() string
	Unreachable() string
	// KVPageBytes is the size of the KV frames to send (the peer's page).
	KVPageBytes() int
}

// wireFrames is how many frames of each lane go to the reachable peer.
const wireFrames = 8

// TestWire checks a Wire against driver.Wire's contract, standing in for
// the driver (which keeps at most one frame outstanding per peer and
// lane): Send returns without calling back; exactly one Sent follows each
// Send, for its peer and lane, after the frame was written (nil error) or
// could not be (an error); a KV frame's Release is called exactly once,
// by the Wire; after PeerIdle a later Send to the peer starts afresh.
func TestWire[Leg comparable](t testing.TB, h WireHost, rec *Recorder[Leg]) {
	w, peer, gone := h.Wire(), h.Reachable(), h.Unreachable()
	sent := func(p string, lane driver.Lane) func(Call[Leg]) bool {
		return func(c Call[Leg]) bool { return c.Kind == "sent" && c.Peer == p && c.Lane == lane }
	}
	released := make([]atomic.Int32, wireFrames+3) // the KV frames: wireFrames, the fence, the unreachable peer's, after PeerIdle
	next := 0
	kvFrame := func(p string, id room.ID) driver.Frame {
		i := next
		next++
		data := make([]byte, h.KVPageBytes())
		for j := range data {
			data[j] = byte(i + j)
		}
		return driver.Frame{Peer: p, Lane: driver.LaneKV, Room: id, KV: kvwire.KV{Layer: 0, Kind: kvwire.KindK, Ordinal: uint32(i)},
			Data: data, Release: func() { released[i].Add(1) }}
	}
	control := func(p string, id room.ID) driver.Frame {
		payload := (&kvwire.Abort{Reason: room.ReasonClientAbort, Message: "drivertest"}).AppendTo(nil)
		return driver.Frame{Peer: p, Lane: driver.LaneControl, Room: id, Type: kvwire.TypeAbort, Payload: payload}
	}
	send := func(f driver.Frame) {
		t.Helper()
		call(t, h, rec, fmt.Sprintf("Send(%s lane %d)", f.Peer, f.Lane), func() { w.Send(f) })
	}
	// One frame outstanding per lane, both lanes at once: each Send waits
	// for the Sent of the lane's previous frame.
	for i := range wireFrames {
		id := roomID('w', i)
		send(control(peer, id))
		send(kvFrame(peer, id))
		wait(t, h, fmt.Sprintf("Sent for frame %d of each lane", i), func() bool {
			return rec.count(sent(peer, driver.LaneControl)) >= i+1 && rec.count(sent(peer, driver.LaneKV)) >= i+1
		})
		for _, lane := range []driver.Lane{driver.LaneControl, driver.LaneKV} {
			if cs := rec.Calls(sent(peer, lane)); len(cs) != i+1 || cs[i].Err != nil {
				t.Fatalf("after %d frames on lane %d to %s: Sent calls %v, want %d, the last without an error", i+1, lane, peer, calls(cs), i+1)
			}
		}
	}
	// A fence: a later frame's Sent on each lane comes after any stray
	// second Sent of the frames before it.
	fence := roomID('w', 1000)
	send(control(peer, fence))
	send(kvFrame(peer, fence))
	wait(t, h, "Sent for the fence frames", func() bool {
		return rec.count(sent(peer, driver.LaneControl)) > wireFrames && rec.count(sent(peer, driver.LaneKV)) > wireFrames
	})
	for _, lane := range []driver.Lane{driver.LaneControl, driver.LaneKV} {
		if cs := rec.Calls(sent(peer, lane)); len(cs) != wireFrames+1 {
			t.Errorf("lane %d to %s: %d Sent calls for %d frames: %v", lane, peer, len(cs), wireFrames+1, calls(cs))
		}
	}
	// The unreachable peer: one Sent each, with an error.
	send(control(gone, roomID('w', 2000)))
	send(kvFrame(gone, roomID('w', 2000)))
	wait(t, h, "Sent for the frames to the unreachable peer", func() bool {
		return rec.count(sent(gone, driver.LaneControl)) > 0 && rec.count(sent(gone, driver.LaneKV)) > 0
	})
	for _, lane := range []driver.Lane{driver.LaneControl, driver.LaneKV} {
		if cs := rec.Calls(sent(gone, lane)); len(cs) != 1 || cs[0].Err == nil {
			t.Errorf("lane %d to unreachable %s: Sent calls %v, want one with an error", lane, gone, calls(cs))
		}
	}
	// PeerIdle, then the peer afresh.
	call(t, h, rec, "PeerIdle", func() { w.PeerIdle(peer) })
	call(t, h, rec, "PeerIdle", func() { w.PeerIdle(gone) })
	send(control(peer, roomID('w', 3000)))
	send(kvFrame(peer, roomID('w', 3000)))
	wait(t, h, "Sent after PeerIdle", func() bool {
		return rec.count(sent(peer, driver.LaneControl)) > wireFrames+1 && rec.count(sent(peer, driver.LaneKV)) > wireFrames+1
	})
	for _, lane := range []driver.Lane{driver.LaneControl, driver.LaneKV} {
		if cs := rec.Calls(sent(peer, lane)); len(cs) != wireFrames+2 || cs[wireFrames+1].Err != nil {
			t.Errorf("lane %d to %s after PeerIdle: Sent calls %v, want %d, the last without an error", lane, peer, calls(cs), wireFrames+2)
		}
	}
	// Every KV frame handed to Send released once by the Wire (a frame
	// the peer copies out of the sender's memory may be released after
	// its Sent).
	wait(t, h, "the KV frames' releases", func() bool {
		for i := range next {
			if released[i].Load() == 0 {
				return false
			}
		}
		return true
	})
	for i := range next {
		if n := released[i].Load(); n != 1 {
			t.Errorf("KV frame %d released %d times, want 1", i, n)
		}
	}
	if n := rec.count(func(c Call[Leg]) bool { return c.Kind != "sent" }); n != 0 {
		t.Errorf("the Wire made %d reports other than Sent", n)
	}
}

func calls[Leg comparable](cs []Call[Leg]) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = describe(c)
	}
	return out
}
