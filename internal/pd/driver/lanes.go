package driver

import (
	"slices"

	"tandem/internal/pd/kvwire"
	"tandem/internal/pd/room"
)

// peer is the send state for one peer: a control FIFO and per-room KV
// queues served in turn, each lane with at most one frame outstanding.
type peer struct {
	addr    string
	rooms   int     // records with this peer
	control []Frame // FIFO
	kvq     map[room.ID][]Frame
	kvOrder []room.ID // rooms with queued KV, in serving order
	kvN     int       // KV frames queued
	out     [LaneKV + 1]*Frame
	bytes   int64 // queued and outstanding
	named   int   // CheckAccounting's count of the records naming the peer (nothing else reads it)
}

func (d *Driver[Leg]) peerFor(addr string) *peer {
	p := d.peers[addr]
	if p == nil {
		p = &peer{addr: addr, kvq: map[room.ID][]Frame{}}
		d.peers[addr] = p
	}
	return p
}

// fits reports whether n more bytes fit the peer's and the worker's budget.
func (d *Driver[Leg]) fits(p *peer, n int64) bool {
	return p.bytes+n <= d.lim.PeerQueueBytesMax && d.queued+n <= d.lim.QueueBytesMax
}

func (p *peer) pushKV(queued *int64, f Frame) {
	q, ok := p.kvq[f.Room]
	if !ok || len(q) == 0 {
		p.kvOrder = append(p.kvOrder, f.Room)
	}
	p.kvq[f.Room] = append(q, f)
	p.kvN++
	p.bytes += f.Bytes()
	*queued += f.Bytes()
}

// popKV takes the next KV frame, serving the rooms in turn.
func (p *peer) popKV() (Frame, bool) {
	if len(p.kvOrder) == 0 {
		return Frame{}, false
	}
	id := p.kvOrder[0]
	p.kvOrder = p.kvOrder[1:]
	q := p.kvq[id]
	f := q[0]
	q[0] = Frame{}
	if q = q[1:]; len(q) > 0 {
		p.kvq[id] = q
		p.kvOrder = append(p.kvOrder, id)
	} else {
		delete(p.kvq, id)
	}
	p.kvN--
	return f, true
}

// dropRoom drops the room's queued KV and returns how many frames went.
func (p *peer) dropRoom(queued *int64, id room.ID) int {
	q := p.kvq[id]
	for _, f := range q {
		p.bytes -= f.Bytes()
		*queued -= f.Bytes()
		if f.Release != nil {
			f.Release()
		}
	}
	delete(p.kvq, id)
	p.kvOrder = slices.DeleteFunc(p.kvOrder, func(x room.ID) bool { return x == id })
	p.kvN -= len(q)
	return len(q)
}

// dropControl drops the failed room's queued control frames except the
// ABORT or FAILED that announce its end (and a DONE_ACK, which only a
// room that succeeded sends), and returns how many went. A frame already
// handed to the wire is not recalled.
func (p *peer) dropControl(queued *int64, id room.ID) int {
	n := 0
	p.control = slices.DeleteFunc(p.control, func(f Frame) bool {
		if f.Room != id || f.Type == kvwire.TypeAbort || f.Type == kvwire.TypeFailed || f.Type == kvwire.TypeDoneAck {
			return false
		}
		p.bytes -= f.Bytes()
		*queued -= f.Bytes()
		n++
		return true
	})
	return n
}

// dropAll drops everything queued for the peer (it is unreachable) and
// returns how many frames went. Outstanding frames still get their Sent.
func (p *peer) dropAll(queued *int64) int {
	n := len(p.control) + p.kvN
	for _, f := range p.control {
		p.bytes -= f.Bytes()
		*queued -= f.Bytes()
	}
	p.control = nil
	for id := range p.kvq {
		p.dropRoom(queued, id)
	}
	return n
}

// sendControl queues the control frame an EffectSend asks for. One that
// does not fit the budget is dropped and fails its room.
func (d *Driver[Leg]) sendControl(e room.Effect, r *rec[Leg]) {
	f := d.encode(e, r)
	p := d.peerFor(e.Peer)
	if !d.fits(p, f.Bytes()) {
		d.obs.SendDropped("over_budget", 1)
		d.log.Warn("send queue budget exhausted; dropping a control frame and failing its room", "room", e.Room,
			"peer", e.Peer, "frame", e.Frame)
		d.more = append(d.more, room.Event{Kind: room.EventSendFailed, Room: e.Room})
		d.idle(p)
		return
	}
	p.control = append(p.control, f)
	p.bytes += f.Bytes()
	d.queued += f.Bytes()
	d.pump(p)
}

// pump hands the next frame of each free lane to the wire.
func (d *Driver[Leg]) pump(p *peer) {
	if p.out[LaneControl] == nil && len(p.control) > 0 {
		f := p.control[0]
		p.control[0] = Frame{}
		p.control = p.control[1:]
		p.out[LaneControl] = &f
		d.wire.Send(f)
	}
	if p.out[LaneKV] == nil {
		if f, ok := p.popKV(); ok {
			p.out[LaneKV] = &f
			d.wire.Send(f)
		}
	}
}

// idle removes the peer's state when it holds nothing and tells the wire.
func (d *Driver[Leg]) idle(p *peer) {
	if p.rooms > 0 || len(p.control) > 0 || p.kvN > 0 || p.out[LaneControl] != nil || p.out[LaneKV] != nil {
		return
	}
	if d.peers[p.addr] == p {
		delete(d.peers, p.addr)
		d.wire.PeerIdle(p.addr)
	}
}

// Sent reports the end of the frame handed to Wire.Send for peer's lane:
// written (err nil), refused locally (IsLocal: only its room fails), or
// failed on the connection (the peer is unreachable: every room with it
// fails and everything queued for it is dropped). A written KV frame is
// the room's progress (room.EventKVSent); the room's last one releases a
// held ComputeDone. A Sent for a lane with no frame outstanding breaks
// the Wire's contract (one Sent per Send): invariant.Failf.
func (d *Driver[Leg]) Sent(now room.Instant, peerAddr string, lane Lane, err error) {
	p := d.checkSent(peerAddr, lane)
	f := *p.out[lane]
	p.out[lane] = nil
	p.bytes -= f.Bytes()
	d.queued -= f.Bytes()
	r := d.rooms[f.Room]
	if r != nil && r.ended {
		r = nil
	}
	if lane == LaneKV && r != nil {
		r.kvPending--
	}
	switch {
	case err == nil:
		if lane == LaneKV && r != nil {
			r.sentBytes += int64(len(f.Data))
			if f.KV.Kind == kvwire.KindState {
				r.sentState += int64(len(f.Data))
			}
			d.step(now, room.Event{Kind: room.EventKVSent, Room: f.Room, Bytes: r.sentBytes, StateBytes: r.sentState})
			if r.kvPending == 0 && r.held && !r.ended {
				r.held = false
				d.step(now, room.Event{Kind: room.EventComputeDone, Room: f.Room, Token: r.first.ID, Logprob: r.first.Logprob})
			}
		}
	case IsLocal(err):
		d.obs.SendDropped("send_error", 1)
		d.log.Warn("a frame was refused locally; failing its room", "peer", peerAddr, "room", f.Room, "err", err)
		d.step(now, room.Event{Kind: room.EventSendFailed, Room: f.Room})
	default:
		d.log.Warn("send to peer failed; failing its rooms", "peer", peerAddr, "err", err)
		if n := p.dropAll(&d.queued); n > 0 {
			d.obs.SendDropped("send_error", n+1)
		} else {
			d.obs.SendDropped("send_error", 1)
		}
		d.step(now, room.Event{Kind: room.EventPeerLost, Peer: peerAddr, Reason: room.ReasonPeerUnreachable})
	}
	if q := d.peers[peerAddr]; q == p {
		d.pump(p)
		d.idle(p)
	}
}
