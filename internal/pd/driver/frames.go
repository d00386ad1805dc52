package driver

import (
	"hash/crc32"

	"tandem/internal/invariant"
	"tandem/internal/pd/kvwire"
	"tandem/internal/pd/room"
)

// Frame turns a control frame the transport received from peer into a room
// event (decoding its payload) and steps it. A malformed payload or an
// unexpected type is dropped and counted (Observer.BadFrame).
func (d *Driver[Leg]) Frame(now room.Instant, peer string, h kvwire.Header, payload []byte) {
	ev, ok := d.frameEvent(peer, h, payload)
	if ok {
		d.step(now, ev)
	}
}

type payloadDecoder interface{ Decode([]byte) error }

func (d *Driver[Leg]) decode(peer string, h kvwire.Header, payload []byte, into payloadDecoder) bool {
	if err := into.Decode(payload); err != nil {
		d.obs.BadFrame("malformed_payload")
		d.log.Warn("dropped a malformed frame", "peer", peer, "type", h.Type, "room", room.ID(h.Room), "err", err)
		return false
	}
	return true
}

// FrameEventKind is the room event a control frame of type t becomes
// (0 for a type that is no control frame).
func FrameEventKind(t kvwire.Type) room.EventKind {
	switch t {
	case kvwire.TypeHello:
		return room.EventHello
	case kvwire.TypeHelloAck:
		return room.EventHelloAck
	case kvwire.TypeAlloc:
		return room.EventAlloc
	case kvwire.TypeFirstToken:
		return room.EventFirstToken
	case kvwire.TypeDone:
		return room.EventDone
	case kvwire.TypeDoneAck:
		return room.EventDoneAck
	case kvwire.TypeAbort:
		return room.EventAbort
	case kvwire.TypeFailed:
		return room.EventFailed
	}
	return 0
}

func (d *Driver[Leg]) frameEvent(peer string, h kvwire.Header, payload []byte) (room.Event, bool) {
	ev := room.Event{Kind: FrameEventKind(h.Type), Room: room.ID(h.Room), Peer: peer}
	switch h.Type {
	case kvwire.TypeHello, kvwire.TypeHelloAck, kvwire.TypeDoneAck:
	case kvwire.TypeAlloc:
		var a kvwire.Alloc
		if !d.decode(peer, h, payload, &a) {
			return ev, false
		}
		ev.Pages = a.Pages
	case kvwire.TypeFirstToken:
		var f kvwire.FirstToken
		if !d.decode(peer, h, payload, &f) {
			return ev, false
		}
		ev.Token, ev.Logprob = f.Token, f.Logprob
		if r := d.rooms[ev.Room]; r != nil && r.peer == peer && !r.ended {
			r.firstTop = append(r.firstTop[:0], f.Top...)
		}
	case kvwire.TypeDone:
		var f kvwire.Done
		if !d.decode(peer, h, payload, &f) {
			return ev, false
		}
		ev.PageCount, ev.Bytes, ev.StateBytes = int(f.PageCount), int64(f.Bytes), int64(f.StateBytes)
		if r := d.rooms[ev.Room]; r != nil && r.peer == peer && !r.ended && d.stateB > 0 &&
			r.recvState == int64(len(r.state)) && r.inflight == 0 {
			ev.StateBad = crc32.Checksum(r.state, castagnoli) != f.StateSum
		}
	case kvwire.TypeAbort:
		var a kvwire.Abort
		if !d.decode(peer, h, payload, &a) {
			return ev, false
		}
		ev.Reason = a.Reason
	case kvwire.TypeFailed:
		var f kvwire.Failed
		if !d.decode(peer, h, payload, &f) {
			return ev, false
		}
		ev.Reason = f.Reason
	default:
		d.obs.BadFrame("unexpected_type")
		d.log.Warn("dropped a frame of an unexpected type", "peer", peer, "type", h.Type)
		return ev, false
	}
	return ev, true
}

// encode returns the frame an EffectSend asks for.
func (d *Driver[Leg]) encode(e room.Effect, r *rec[Leg]) Frame {
	var payload []byte
	switch e.Frame {
	case room.FrameAlloc:
		payload = (&kvwire.Alloc{Pages: e.Pages}).AppendTo(nil)
	case room.FrameFirstToken:
		ft := kvwire.FirstToken{Token: e.Token, Logprob: e.Logprob}
		if r != nil {
			ft.Top = r.first.Top[:min(len(r.first.Top), kvwire.TopLogprobsMax)]
		}
		payload = ft.AppendTo(nil)
	case room.FrameDone:
		done := kvwire.Done{PageCount: uint32(e.PageCount), Bytes: uint64(e.Bytes), StateBytes: uint64(e.StateBytes)}
		if r != nil {
			done.StateSum = r.stateSum
		}
		payload = done.AppendTo(nil)
	case room.FrameAbort:
		payload = (&kvwire.Abort{Reason: e.Reason, Message: e.Reason.String()}).AppendTo(nil)
	case room.FrameFailed:
		payload = (&kvwire.Failed{Reason: e.Reason, Message: e.Reason.String()}).AppendTo(nil)
	}
	return Frame{Peer: e.Peer, Lane: LaneControl, Room: e.Room, Type: kvwire.TypeFor(e.Frame), Payload: payload}
}

// KVDest returns the page bytes a received KV frame's data goes to, or nil
// to have the transport discard them (unknown room, room not receiving,
// wrong peer, bad coordinates or size, duplicate): counted
// (Observer.KVDropped), and the room is not changed. A non-nil slice puts
// the room's pages in quarantine until the matching KVDone.
func (d *Driver[Leg]) KVDest(peer string, id room.ID, kv kvwire.KV, n int) []byte {
	r := d.rooms[id]
	st, _, ok := d.m.State(id)
	switch {
	case r == nil || !ok || r.ended:
		d.obs.KVDropped("unknown_or_finished_room")
		return nil
	case st != room.StateWaitingForInput && st != room.StateTransferring:
		d.obs.KVDropped("room_not_receiving")
		return nil
	case r.peer != peer || r.dest == nil:
		d.obs.KVDropped("wrong_peer")
		return nil
	case !d.validKV(r, kv) || n != d.frameBytes(kv):
		d.obs.KVDropped("bad_coordinates")
		return nil
	}
	if r.recv == nil {
		r.recv = make([]frameState, len(r.pages)*d.layers*2+d.stateFrames())
	}
	i := d.frameIndex(r, kv)
	if r.recv[i] != frameNone {
		d.obs.KVDropped("duplicate") // stored already, or being written
		return nil
	}
	var dst []byte
	if kv.Kind == kvwire.KindState {
		off := int(kv.Ordinal) * d.stateN
		dst = r.state[off : off+n : off+n]
	} else {
		dst = r.dest.KVPage(int(kv.Layer), kv.Kind, r.pages[kv.Ordinal])
	}
	if len(dst) < n {
		d.obs.KVDropped("bad_coordinates")
		return nil
	}
	r.recv[i] = frameWriting
	r.inflight++
	return dst
}

// frameState is where one (ordinal, layer, K/V) frame of a decode room
// stands. A frame is marked writing when KVDest hands out its buffer, so a
// duplicate arriving on another connection before the first write ended
// gets no second buffer (its bytes would count twice towards DONE's check).
type frameState uint8

const (
	frameNone    frameState = iota // not received
	frameWriting                   // KVDest gave out the buffer; KVDone not yet called
	frameStored                    // written with a good checksum
)

// KVDone follows every KVDest that returned a buffer, exactly once (a
// call for a frame no buffer is out for breaks the transport's contract:
// invariant.Failf). A complete write with a good checksum counts towards
// the room's bytes once; a bad one fails the room (checksum). The last
// write into an ended room's pages lets them go.
func (d *Driver[Leg]) KVDone(now room.Instant, peer string, id room.ID, kv kvwire.KV, n int, checksumOK bool) {
	r := d.checkKVDone(id, kv)
	i := d.frameIndex(r, kv)
	r.recv[i] = frameNone
	r.inflight--
	var ev room.Event
	if !r.ended {
		if checksumOK {
			r.recv[i] = frameStored
			r.recvBytes += int64(n)
			if kv.Kind == kvwire.KindState {
				r.recvState += int64(n)
			}
			ev = room.Event{Kind: room.EventKVReceived, Room: id, Bytes: r.recvBytes, StateBytes: r.recvState}
		} else {
			ev = room.Event{Kind: room.EventChecksumError, Room: id}
		}
	}
	if r.ended && r.inflight == 0 {
		if r.cancelPending {
			r.cancelPending = false
			d.eng.Cancel(r.leg)
		}
		d.forget(r)
	}
	if ev.Kind != 0 {
		d.step(now, ev)
	}
}

// castagnoli is the CRC-32C table of DONE's state checksum.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// validKV reports whether kv's coordinates name a frame of r's pages or a
// piece of its state.
func (d *Driver[Leg]) validKV(r *rec[Leg], kv kvwire.KV) bool {
	if kv.Kind == kvwire.KindState {
		return kv.Layer == 0 && int(kv.Ordinal) < d.stateFrames() && len(r.state) == d.stateB
	}
	return int(kv.Ordinal) < len(r.pages) && int(kv.Layer) < d.layers && kv.Kind <= kvwire.KindV
}

// frameBytes is the data length of the (valid) frame kv: a page, or its
// piece of the state.
func (d *Driver[Leg]) frameBytes(kv kvwire.KV) int {
	if kv.Kind == kvwire.KindState {
		return d.stateFrameBytes(int(kv.Ordinal))
	}
	return d.pageB
}

// frameIndex numbers a KV frame within its room: the pages' frames, then
// the state's.
func (d *Driver[Leg]) frameIndex(r *rec[Leg], kv kvwire.KV) int {
	if kv.Kind == kvwire.KindState {
		return len(r.pages)*d.layers*2 + int(kv.Ordinal)
	}
	return (int(kv.Ordinal)*d.layers+int(kv.Layer))*2 + int(kv.Kind)
}

// Admitted is the decode engine's answer to Engine.Admit: pages reserved
// for leg's room, whose bytes dest returns, and the state buffer the
// prompt's state is received into (Config.StateBytes bytes; nil without
// state). A buffer of another size breaks the Engine's contract:
// invariant.Failf.
func (d *Driver[Leg]) Admitted(now room.Instant, id room.ID, leg Leg, dest Pages, pages []int32, state []byte) {
	if len(state) != d.stateB {
		invariant.Failf("driver", "Admitted(room %v) with a %d-byte state buffer, want %d (Config.StateBytes)", id, len(state), d.stateB)
	}
	if r := d.rooms[id]; r != nil && r.leg == leg && !r.ended {
		r.dest, r.pages, r.state = dest, append([]int32(nil), pages...), state
	}
	d.step(now, room.Event{Kind: room.EventAdmitted, Room: id, Pages: pages})
}

// KVReady queues KV frames the prefill engine finished for leg's room. They
// count as progress only when Sent reports them on the wire. Frames for a
// room that ended (or another leg's) are dropped; frames that would pass the
// send budget fail the room (room.EventSendFailed).
func (d *Driver[Leg]) KVReady(now room.Instant, id room.ID, leg Leg, frames []KVFrame) {
	r := d.rooms[id]
	if r == nil || r.leg != leg || r.ended || r.peer == "" {
		if len(frames) > 0 {
			d.obs.SendDropped("room_ended", len(frames))
			releaseKV(frames)
		}
		return
	}
	p := d.peerFor(r.peer)
	var n int64
	for _, f := range frames {
		n += Frame{Data: f.Data}.Bytes()
	}
	if !d.fits(p, n) {
		d.obs.SendDropped("over_budget", len(frames))
		releaseKV(frames)
		d.log.Warn("send queue budget exhausted; failing the room", "room", id, "peer", r.peer, "bytes", n,
			"peer_queued", p.bytes, "queued", d.queued)
		d.step(now, room.Event{Kind: room.EventSendFailed, Room: id})
		return
	}
	for _, f := range frames {
		if f.KV.Kind == kvwire.KindState {
			r.stateSum = crc32.Update(r.stateSum, castagnoli, f.Data)
		}
		p.pushKV(&d.queued, Frame{Peer: r.peer, Lane: LaneKV, Room: id, KV: f.KV, Data: f.Data, Release: f.Release})
	}
	r.kvPending += len(frames)
	d.pump(p)
}

// ComputeDone is the prefill engine's first token for leg's room. It is
// stepped (room.EventComputeDone: FIRST_TOKEN and DONE go out) once the
// room's last KV frame is on the wire; until then it is held.
func (d *Driver[Leg]) ComputeDone(now room.Instant, id room.ID, leg Leg, first Token) {
	r := d.rooms[id]
	if r == nil || r.leg != leg || r.ended {
		return
	}
	r.first = first
	if r.kvPending > 0 {
		r.held = true
		return
	}
	d.step(now, room.Event{Kind: room.EventComputeDone, Room: id, Token: first.ID, Logprob: first.Logprob})
}

// EngineError is the engine failing leg's room.
func (d *Driver[Leg]) EngineError(now room.Instant, id room.ID, leg Leg) {
	if r := d.rooms[id]; r != nil && r.leg == leg && !r.ended {
		d.step(now, room.Event{Kind: room.EventEngineError, Room: id})
	}
}
