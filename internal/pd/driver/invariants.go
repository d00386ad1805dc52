package driver

import (
	"errors"
	"fmt"
	"slices"

	"tandem/internal/invariant"
	"tandem/internal/pd/kvwire"
	"tandem/internal/pd/room"
)

// CheckInvariants checks the room core's invariants (room.Machine's
// CheckInvariants, O(rooms and tombstones)) and the driver's own
// (CheckAccounting), and returns what is broken, or nil. The simulator
// calls it at every watchdog sweep; production need not.
func (d *Driver[Leg]) CheckInvariants() error {
	return errors.Join(d.m.CheckInvariants(), d.CheckAccounting())
}

// CheckAccounting checks the driver's own invariants and returns what is
// broken, or nil:
//
//   - lanes: a peer's control or KV lane holds frames waiting while it has
//     none outstanding (the driver never holds a frame back from a free
//     lane), or a frame sits in the wrong peer's or lane's queue;
//   - bytes: a peer's counted bytes are not those of its queued and
//     outstanding frames, its KV count or serving order does not match its
//     queues, the worker-wide count is not the peers' sum, or a count is
//     past its limit (Limits) or below zero;
//   - peers: a peer with no room and nothing queued or outstanding still
//     has state, or a peer's room count is not the records that name it;
//   - records: an ended record is kept with no KV write into its pages in
//     flight, a record's in-flight count is not its frames being written,
//     or a live prefill record's pending KV count is not its frames queued
//     and outstanding.
//
// It is O(records + queued frames): the simulator calls it after every
// call into a driver; production need not.
func (d *Driver[Leg]) CheckAccounting() error {
	var errs []error
	for id, r := range d.rooms {
		if err := d.checkRecord(id, r); err != nil {
			errs = append(errs, err)
		}
		if p := d.peers[r.peer]; p != nil {
			p.named++
		} else if r.peer != "" {
			errs = append(errs, fmt.Errorf("room %v names peer %q, which has no state", r.id, r.peer))
		}
	}
	var total int64
	for addr, p := range d.peers {
		if err := d.checkPeer(addr, p); err != nil {
			errs = append(errs, err)
		}
		p.named = 0
		total += p.bytes
	}
	if total != d.queued || d.queued < 0 || d.queued > d.lim.QueueBytesMax {
		errs = append(errs, fmt.Errorf("the driver counts %d queued bytes (limit %d), its peers %d", d.queued, d.lim.QueueBytesMax, total))
	}
	return errors.Join(errs...)
}

// checkPeer checks one peer's lanes and byte counts; p.named is the
// number of records that name it.
func (d *Driver[Leg]) checkPeer(addr string, p *peer) error {
	var errs []error
	if p.addr != addr {
		errs = append(errs, fmt.Errorf("peer %q kept under %q", p.addr, addr))
	}
	var b int64
	for _, f := range p.control {
		b += f.Bytes()
		if f.Peer != addr || f.Lane != LaneControl {
			errs = append(errs, fmt.Errorf("peer %q: a frame for %q lane %d in its control queue", addr, f.Peer, f.Lane))
		}
	}
	kvN := 0
	for id, q := range p.kvq {
		if len(q) == 0 {
			errs = append(errs, fmt.Errorf("peer %q: an empty KV queue kept for room %v", addr, id))
		}
		kvN += len(q)
		for _, f := range q {
			b += f.Bytes()
			if f.Peer != addr || f.Lane != LaneKV || f.Room != id {
				errs = append(errs, fmt.Errorf("peer %q: a frame for %q lane %d room %v in room %v's KV queue", addr, f.Peer, f.Lane, f.Room, id))
			}
		}
	}
	for lane, f := range p.out {
		if f != nil {
			b += f.Bytes()
			if f.Peer != addr || f.Lane != Lane(lane) {
				errs = append(errs, fmt.Errorf("peer %q: a frame for %q lane %d outstanding on lane %d", addr, f.Peer, f.Lane, lane))
			}
		}
	}
	for i, id := range p.kvOrder {
		if len(p.kvq[id]) == 0 || slices.Contains(p.kvOrder[:i], id) {
			errs = append(errs, fmt.Errorf("peer %q: room %v in the KV serving order twice or without frames", addr, id))
		}
	}
	switch {
	case b != p.bytes:
		errs = append(errs, fmt.Errorf("peer %q counts %d bytes, its frames hold %d", addr, p.bytes, b))
	case kvN != p.kvN || len(p.kvOrder) != len(p.kvq):
		errs = append(errs, fmt.Errorf("peer %q counts %d KV frames in %d rooms' order, its queues hold %d in %d rooms",
			addr, p.kvN, len(p.kvOrder), kvN, len(p.kvq)))
	case p.bytes > d.lim.PeerQueueBytesMax:
		errs = append(errs, fmt.Errorf("peer %q holds %d bytes, limit %d", addr, p.bytes, d.lim.PeerQueueBytesMax))
	case len(p.control) > 0 && p.out[LaneControl] == nil:
		errs = append(errs, fmt.Errorf("lanes: %d control frames wait for %q while its control lane is free", len(p.control), addr))
	case p.kvN > 0 && p.out[LaneKV] == nil:
		errs = append(errs, fmt.Errorf("lanes: %d KV frames wait for %q while its KV lane is free", p.kvN, addr))
	case p.rooms != p.named:
		errs = append(errs, fmt.Errorf("peer %q counts %d rooms, %d records name it", addr, p.rooms, p.named))
	case p.rooms == 0 && len(p.control) == 0 && p.kvN == 0 && p.out[LaneControl] == nil && p.out[LaneKV] == nil:
		errs = append(errs, fmt.Errorf("peer %q has state with no room and nothing queued or outstanding", addr))
	}
	return errors.Join(errs...)
}

// checkRecord checks one room record, kept under id.
func (d *Driver[Leg]) checkRecord(id room.ID, r *rec[Leg]) error {
	writing := 0
	for _, st := range r.recv {
		if st == frameWriting {
			writing++
		}
	}
	switch {
	case r.id != id:
		return fmt.Errorf("record of room %v kept under %v", r.id, id)
	case writing != r.inflight:
		return fmt.Errorf("room %v: %d KV writes counted in flight, %d frames being written", id, r.inflight, writing)
	case r.ended && r.inflight == 0:
		return fmt.Errorf("room %v ended but its record is kept with no KV write in flight", id)
	case !r.ended && d.role == room.RolePrefill && r.kvPending != d.pendingKV(r):
		return fmt.Errorf("room %v counts %d KV frames pending, %d are queued or outstanding", id, r.kvPending, d.pendingKV(r))
	}
	return nil
}

// pendingKV counts r's KV frames queued or outstanding on its peer.
func (d *Driver[Leg]) pendingKV(r *rec[Leg]) int {
	p := d.peers[r.peer]
	if p == nil {
		return 0
	}
	n := len(p.kvq[r.id])
	if f := p.out[LaneKV]; f != nil && f.Room == r.id {
		n++
	}
	return n
}

// checkSent asserts the Wire's contract when it reports a frame's end:
// the frame must be outstanding on that peer's lane (one Sent per Send).
func (d *Driver[Leg]) checkSent(peer string, lane Lane) *peer {
	p := d.peers[peer]
	invariant.Check(lane == LaneControl || lane == LaneKV, "driver", "Sent(%q, lane %d): no such lane (the Wire broke its contract)", peer, lane)
	invariant.Check(p != nil && p.out[lane] != nil, "driver",
		"Sent(%q, %v lane) with no frame outstanding on that lane (the Wire reported a frame twice, or one it was never handed)", peer, laneName(lane))
	return p
}

// checkKVDone asserts the transport's contract when it reports a KV
// write's end: KVDest must have given out a buffer for exactly that frame
// of the room, and no KVDone may have followed it yet. A record with a
// write in flight is kept until the write ends, so a KVDone finds it.
func (d *Driver[Leg]) checkKVDone(id room.ID, kv kvwire.KV) *rec[Leg] {
	r := d.rooms[id]
	invariant.Check(r != nil && r.recv != nil && d.validKV(r, kv) && r.recv[d.frameIndex(r, kv)] == frameWriting, "driver",
		"KVDone(room %v, %+v) for a frame no KVDest buffer is out for (the transport called it twice, or without a buffer)", id, kv)
	return r
}

func laneName(l Lane) string {
	switch l {
	case LaneControl:
		return "control"
	case LaneKV:
		return "kv"
	}
	return fmt.Sprintf("lane(%d)", l)
}
