package sim

import (
	"fmt"

	"tandem/internal/pd/room"
)

// The fake transport between prefill and decode nodes. A frame becomes a
// delivery after a latency; while faults are on it may be lost, held back
// (so later frames overtake it) or delivered twice. Frames to a node that
// is down, or that restarted since they were sent, are lost; so are frames
// across a partition. Peers learn that a node is gone the way the
// transport would tell them: after the heartbeat timeout (a silent crash,
// a partition) or at once when the connection closes (a process that
// exits, a graceful shutdown), and then also when a send is refused.

// crashMode is how a crash looks to the node's peers.
type crashMode uint8

const (
	crashSilent   crashMode = iota // the host vanishes: peers notice after the heartbeat timeout
	crashClose                     // the process dies: connections close at once, sends are refused
	crashShutdown                  // graceful: EventShutdown first, then as crashClose
)

var crashModeNames = [...]string{"silent", "close", "shutdown"}

func (c crashMode) String() string { return crashModeNames[c] }

// frameEvent turns an EffectSend into the event its receiver steps.
func frameEvent(e room.Effect, from string) room.Event {
	ev := room.Event{Room: e.Room, Peer: from, Reason: e.Reason}
	switch e.Frame {
	case room.FrameHello:
		ev.Kind = room.EventHello
	case room.FrameHelloAck:
		ev.Kind = room.EventHelloAck
	case room.FrameAlloc:
		ev.Kind, ev.Pages = room.EventAlloc, append([]int32(nil), e.Pages...)
	case room.FrameFirstToken:
		ev.Kind, ev.Token, ev.Logprob = room.EventFirstToken, e.Token, e.Logprob
	case room.FrameDone:
		ev.Kind, ev.PageCount, ev.Bytes = room.EventDone, e.PageCount, e.Bytes
	case room.FrameDoneAck:
		ev.Kind = room.EventDoneAck
	case room.FrameAbort:
		ev.Kind = room.EventAbort
	case room.FrameFailed:
		ev.Kind = room.EventFailed
	}
	return ev
}

// sendFrame carries out an EffectSend.
func (s *sim) sendFrame(n *node, e room.Effect) {
	to := s.byAddr[e.Peer]
	if to == nil {
		s.violate("edge", "%s: send %v to unknown peer %q", n.addr, e.Frame, e.Peer)
		return
	}
	if n.role == room.RoleDecode && e.Frame == room.FrameAlloc {
		if l := n.legs[e.Room]; l != nil {
			l.allocated = true
		}
		for _, p := range e.Pages {
			if pg := n.pages[p]; pg.state != pageReserved || pg.room != e.Room {
				s.violate("pages", "%s: ALLOC of room=%v names page %d, which is %v of room=%v", n.addr, e.Room, p, pg.state, pg.room)
				return
			}
			n.pages[p].state = pageRoom
		}
	}
	s.transmit(n, to, item{kind: itemFrame, ev: frameEvent(e, n.addr)}, e.Frame.String())
}

// sendKV ships chunk c of a prefill job (bytes of KV) to its decode node.
func (s *sim) sendKV(n *node, j *job, c int, bytes int64) {
	to := s.byAddr[j.peer]
	if to == nil {
		s.violate("edge", "%s: KV for room=%v to unknown peer %q", n.addr, j.room, j.peer)
		return
	}
	s.transmit(n, to, item{kind: itemFrame, ev: room.Event{Room: j.room, Peer: n.addr}, chunk: int32(c + 1), bytes: bytes}, "kv")
}

// transmit schedules a frame's delivery, or loses it.
func (s *sim) transmit(from, to *node, it item, what string) {
	s.st.FramesSent++
	lost := ""
	switch {
	case !to.up:
		lost = to.addr + " is down"
		if to.mode != crashSilent {
			// the connection is refused: the sender's transport says so
			s.after(s.between(10*us, s.sw.FrameLatencyMax), item{kind: itemPeerLost, node: int32(from.idx), peer: int32(to.idx), epoch: from.epoch})
		}
	case s.blocked[from.idx][to.idx] && s.broken[from.idx][to.idx]:
		lost = "partition, connection closed"
	case s.blocked[from.idx][to.idx]:
		// TCP keeps retrying: the frame arrives after the heal, unless
		// a side gives the connection up first.
		it.node, it.epoch = int32(to.idx), to.epoch
		s.held[from.idx][to.idx] = append(s.held[from.idx][to.idx], it)
		if s.tracing {
			s.tracef("%v net %s room=%v %s->%s held (partition)", s.now, what, it.ev.Room, from.addr, to.addr)
		}
		return
	case s.chance(s.sw.DropRate):
		lost = "dropped"
	}
	if lost != "" {
		s.st.FramesLost++
		if s.tracing {
			s.tracef("%v net %s room=%v %s->%s lost (%s)", s.now, what, it.ev.Room, from.addr, to.addr, lost)
		}
		return
	}
	it.node, it.epoch = int32(to.idx), to.epoch
	// One connection per pair keeps frames in order; only a held-back
	// frame (the reorder fault) arrives after frames sent later.
	at := s.now + room.Instant(s.between(10*us, s.sw.FrameLatencyMax))
	if s.chance(s.sw.ReorderRate) {
		at += room.Instant(s.between(0, s.sw.ReorderMax))
		if s.tracing {
			s.tracef("%v net %s room=%v %s->%s held back until %v (reorder)", s.now, what, it.ev.Room, from.addr, to.addr, at)
		}
	} else {
		at = max(at, s.linkLast[from.idx][to.idx])
		s.linkLast[from.idx][to.idx] = at
	}
	s.schedule(at, it)
	if s.chance(s.sw.DupRate) {
		s.st.FramesDuplicated++
		dup := at + room.Instant(s.between(0, s.sw.ReorderMax))
		s.schedule(dup, it)
		if s.tracing {
			s.tracef("%v net %s room=%v %s->%s duplicated, again at %v", s.now, what, it.ev.Room, from.addr, to.addr, dup)
		}
	}
}

// deliver hands a frame to its node.
func (s *sim) deliver(it *item) {
	n := s.nodes[it.node]
	if !n.up || it.epoch != n.epoch {
		if s.tracing {
			s.tracef("%v net room=%v to %s lost (the receiver restarted or is down)", s.now, it.ev.Room, n.addr)
		}
		return
	}
	if it.chunk == 0 {
		s.step(n, it.ev)
		return
	}
	s.storeKV(n, it)
}

// storeKV is the decode edge storing one KV frame (the worker's KVDest and
// KVDone): only for a room with pages that is receiving from this peer;
// anything else is discarded and the room is not touched. A chunk stored
// twice is counted once, so a duplicated frame cannot stand in for a lost
// one.
func (s *sim) storeKV(n *node, it *item) {
	id := it.ev.Room
	l := n.legs[id]
	st, _, ok := n.m.State(id)
	why := ""
	switch {
	case l == nil || !ok || l.roomDone:
		why = "unknown or finished room"
	case st != room.StateWaitingForInput && st != room.StateTransferring:
		why = "room not receiving"
	case l.req.p.addr != it.ev.Peer || !l.allocated:
		why = "wrong peer or no pages"
	case l.chunks&(1<<uint(it.chunk-1)) != 0:
		why = "chunk already stored"
	}
	if why != "" {
		if s.tracing {
			s.tracef("%v %s kv room=%v chunk %d from %s discarded (%s)", s.now, n.addr, id, it.chunk-1, it.ev.Peer, why)
		}
		return
	}
	l.chunks |= 1 << uint(it.chunk-1)
	if s.chance(s.sw.ChecksumRate) {
		s.step(n, room.Event{Kind: room.EventChecksumError, Room: id})
		return
	}
	l.recvBytes += it.bytes
	s.step(n, room.Event{Kind: room.EventKVReceived, Room: id, Bytes: l.recvBytes})
}

// scheduleFaults queues the run's crashes and partitions, all within
// phase one.
func (s *sim) scheduleFaults() {
	phaseOne := room.Instant(s.sw.PhaseOne)
	for range s.sw.Crashes {
		n := s.nodes[s.rng.IntN(len(s.nodes))]
		at := room.Instant(s.between(0, s.sw.PhaseOne-1))
		mode := crashMode(s.rng.IntN(3))
		s.schedule(at, item{kind: itemCrash, node: int32(n.idx), gen: uint64(mode)})
		if back := at + room.Instant(s.between(10*ms, 500*ms)); back < phaseOne {
			s.schedule(back, item{kind: itemRestart, node: int32(n.idx)})
		}
	}
	for range s.sw.Partitions {
		a := s.nodes[s.rng.IntN(len(s.nodes))]
		at := room.Instant(s.between(0, s.sw.PhaseOne-1))
		heal := min(at+room.Instant(s.between(5*ms, 500*ms)), phaseOne)
		isolate := s.rng.IntN(2) == 0 // from every peer, or from one
		dir := s.rng.IntN(4)          // 0, 1: both ways; 2: a->b only; 3: b->a only
		first, count := s.sw.Prefills, s.sw.Decodes
		if a.role == room.RoleDecode {
			first, count = 0, s.sw.Prefills
		}
		peers := s.nodes[first : first+count]
		if !isolate {
			peers = []*node{peers[s.rng.IntN(count)]}
		}
		for _, b := range peers {
			var dirs [][2]*node
			if dir != 3 {
				dirs = append(dirs, [2]*node{a, b})
			}
			if dir != 2 {
				dirs = append(dirs, [2]*node{b, a})
			}
			for _, d := range dirs {
				s.schedule(at, item{kind: itemPartition, node: int32(d[0].idx), peer: int32(d[1].idx)})
				s.schedule(heal, item{kind: itemHeal, node: int32(d[0].idx), peer: int32(d[1].idx)})
			}
		}
	}
}

// partition stops frames from it.node to it.peer: TCP holds them back.
// The receiver stops hearing heartbeats and gives the connection up after
// the heartbeat timeout, unless the partition healed first; then what was
// held is lost.
func (s *sim) partition(it *item) {
	if !s.faults || s.blocked[it.node][it.peer] {
		return
	}
	s.st.Partitions++
	s.blocked[it.node][it.peer] = true
	s.blockGen[it.node][it.peer]++
	to := s.nodes[it.peer]
	s.after(s.sw.Heartbeat, item{kind: itemPeerLost, node: it.peer, peer: it.node, epoch: to.epoch, gen: s.blockGen[it.node][it.peer]})
	if s.tracing {
		s.tracef("%v net partition %s->%s", s.now, s.nodes[it.node].addr, to.addr)
	}
}

// heal ends a partition: frames held back go out in order, and a
// connection given up is replaced by a new one.
func (s *sim) heal(it *item) {
	a, b := int(it.node), int(it.peer)
	if s.blocked[a][b] && s.tracing {
		s.tracef("%v net heal %s->%s", s.now, s.nodes[a].addr, s.nodes[b].addr)
	}
	s.blocked[a][b] = false
	if !s.blocked[b][a] {
		s.broken[a][b], s.broken[b][a] = false, false
	}
	held := s.held[a][b]
	s.held[a][b] = nil
	for _, h := range held {
		at := max(s.now+room.Instant(s.between(10*us, s.sw.FrameLatencyMax)), s.linkLast[a][b])
		s.linkLast[a][b] = at
		s.schedule(at, h)
	}
}

// peerLost tells it.node that it.peer is gone: EventPeerLost. A partition's
// notice (gen != 0) counts only if that partition still holds; it closes
// the connection, losing what was held back in both directions, and the
// peer learns of the close at once if it can still hear this side.
func (s *sim) peerLost(it *item) {
	n, peer := s.nodes[it.node], s.nodes[it.peer]
	if !n.up || it.epoch != n.epoch {
		return
	}
	if it.gen != 0 {
		a, b := int(it.peer), int(it.node)
		if !s.blocked[a][b] || s.blockGen[a][b] != it.gen {
			return
		}
		s.closeConnection(a, b)
		if !s.blocked[b][a] && peer.up {
			s.after(s.between(10*us, s.sw.FrameLatencyMax), item{kind: itemPeerLost, node: int32(a), peer: int32(b), epoch: peer.epoch})
		}
	}
	s.step(n, room.Event{Kind: room.EventPeerLost, Peer: peer.addr})
}

// closeConnection gives up the connection between nodes a and b: frames
// held back either way are lost, and while a partition lasts new frames
// are lost too.
func (s *sim) closeConnection(a, b int) {
	for _, d := range [][2]int{{a, b}, {b, a}} {
		s.st.FramesLost += len(s.held[d[0]][d[1]])
		s.held[d[0]][d[1]] = nil
		s.broken[d[0]][d[1]] = true
	}
}

// crash takes a node down: its machine, legs, engine and pages are gone.
// The router's open legs to it break; its peers learn it is gone. A
// graceful shutdown first steps EventShutdown and drains for a while
// (still up: frames and engine events come in, new rooms are refused).
func (s *sim) crash(n *node, mode crashMode) {
	if !n.up || !s.faults || (n.stopping && mode == crashShutdown) {
		return
	}
	if !n.stopping {
		s.st.Crashes++
	}
	if s.tracing {
		s.tracef("%v %s crash (%v)", s.now, n.addr, mode)
	}
	if mode == crashShutdown {
		n.stopping = true
		s.step(n, room.Event{Kind: room.EventShutdown})
		s.after(s.between(1*ms, 50*ms), item{kind: itemCrash, node: int32(n.idx), gen: uint64(crashClose)})
		return
	}
	s.down(n, mode)
}

// down is the moment a node is gone.
func (s *sim) down(n *node, mode crashMode) {
	for _, l := range n.legList {
		if !l.answered {
			l.answered = true
			s.answerRouter(l.req, l.leg, false, fmt.Sprintf("connection reset: %s crashed", n.addr))
		}
	}
	for _, p := range s.nodes {
		s.closeConnection(n.idx, p.idx)
		s.broken[n.idx][p.idx], s.broken[p.idx][n.idx] = false, false
	}
	n.up, n.mode, n.m, n.stopping = false, mode, nil, false
	n.epoch++
	n.legs, n.legList, n.jobs, n.admitQ, n.gens, n.track = nil, nil, nil, nil, nil, nil
	for _, p := range s.nodes {
		if p.role == n.role {
			continue
		}
		d := s.sw.Heartbeat
		if mode != crashSilent {
			d = s.between(10*us, s.sw.FrameLatencyMax)
		}
		s.after(d, item{kind: itemPeerLost, node: int32(p.idx), peer: int32(n.idx), epoch: p.epoch})
	}
}

// restart brings a crashed node back with a fresh Machine and engine.
func (s *sim) restart(n *node) {
	if n.up {
		return
	}
	s.boot(n)
	if s.tracing {
		s.tracef("%v %s restart (epoch %d)", s.now, n.addr, n.epoch)
	}
}
