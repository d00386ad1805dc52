package driver

import (
	"slices"
	"strings"

	"tandem/internal/pd/room"
)

// Live returns the number of live rooms.
func (d *Driver[Leg]) Live() int { return d.m.Live() }

// State returns a room's state and phase, and false when the core does not
// know the room.
func (d *Driver[Leg]) State(id room.ID) (room.State, room.Phase, bool) { return d.m.State(id) }

// Room returns one room as /debug/rooms shows it.
func (d *Driver[Leg]) Room(id room.ID) (room.RoomInfo, bool) { return d.m.Room(id) }

// Rooms returns every room the core holds (live and tombstones). Each
// RoomInfo's History shares the core's immutable history (see
// room.Machine.Rooms), so the copy is cheap enough to take under the lock
// and format after it.
func (d *Driver[Leg]) Rooms() []room.RoomInfo { return d.m.Rooms() }

// Counters returns the core's counters.
func (d *Driver[Leg]) Counters() room.Counters { return d.m.Counters() }

// LiveRooms returns the state and creation time of every live room,
// without histories: what the queue gauges need.
func (d *Driver[Leg]) LiveRooms() []room.LiveRoom { return d.m.LiveRooms() }

// RecvBytes returns the distinct KV bytes a decode room has stored, and
// false when the driver holds no record of the room.
func (d *Driver[Leg]) RecvBytes(id room.ID) (int64, bool) {
	r := d.rooms[id]
	if r == nil {
		return 0, false
	}
	return r.recvBytes, true
}

// SentBytes returns the KV bytes of a prefill room on the wire so far, and
// false when the driver holds no record of the room.
func (d *Driver[Leg]) SentBytes(id room.ID) (int64, bool) {
	r := d.rooms[id]
	if r == nil {
		return 0, false
	}
	return r.sentBytes, true
}

// Peers returns the send state of every peer the driver holds, by address.
func (d *Driver[Leg]) Peers() []PeerInfo {
	out := make([]PeerInfo, 0, len(d.peers))
	for _, p := range d.peers {
		pi := PeerInfo{Peer: p.addr, Rooms: p.rooms, ControlQueued: len(p.control), KVQueued: p.kvN}
		for _, f := range p.control {
			pi.QueuedBytes += f.Bytes()
		}
		for _, q := range p.kvq {
			for _, f := range q {
				pi.QueuedBytes += f.Bytes()
			}
		}
		for _, o := range p.out {
			if o != nil {
				pi.Outstanding++
			}
		}
		out = append(out, pi)
	}
	slices.SortFunc(out, func(a, b PeerInfo) int { return strings.Compare(a.Peer, b.Peer) })
	return out
}

// Stats returns the driver's own counters.
func (d *Driver[Leg]) Stats() Stats {
	s := Stats{QueuedBytes: d.queued, Peers: len(d.peers), Rooms: len(d.rooms)}
	for _, r := range d.rooms {
		if r.ended {
			s.Quarantined++
		}
	}
	return s
}
