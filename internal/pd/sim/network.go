package sim

import (
	"fmt"

	"tandem/internal/pd/driver"
	"tandem/internal/pd/kvwire"
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

// wire is the driver's Wire on node n. Send puts the frame on the link to
// its peer: the link writes one frame at a time at the seed's bandwidth,
// so a frame is on the wire (Sent) after the frames ahead of it and its
// own transmission time; then it travels with latency and the faults
// below. It only schedules items: it never calls the driver.
type wire struct {
	s *sim
	n *node
}

// Send schedules f's transmission and its Sent.
func (w wire) Send(f driver.Frame) {
	s, n := w.s, w.n
	to := s.byAddr[f.Peer]
	if to == nil || to.role == n.role {
		s.violate("edge", "%s: send of room=%v to unknown peer %q", n.addr, f.Room, f.Peer)
		return
	}
	out := n.out[f.Peer]
	if out == nil {
		out = &[driver.LaneKV + 1]*driver.Frame{}
		n.out[f.Peer] = out
	}
	if f.Lane != driver.LaneControl && f.Lane != driver.LaneKV {
		s.violate("lanes", "%s: send of room=%v on lane %d", n.addr, f.Room, f.Lane)
		return
	}
	if out[f.Lane] != nil {
		s.violate("lanes", "%s: a second frame on the %v lane to %s (room=%v) while one is outstanding (room=%v)",
			n.addr, laneName(f.Lane), f.Peer, f.Room, out[f.Lane].Room)
		return
	}
	// No control frame waits behind more than one KV frame of another
	// room: the frames ahead of it on the link are the KV lane's one.
	if f.Lane == driver.LaneControl {
		if k := out[driver.LaneKV]; k != nil && k.Room != f.Room && s.linkBusy[n.idx][to.idx] > s.now {
			s.st.ControlBehindKV++
		}
	}
	// A frame of a room that ended in an earlier call waited in the
	// driver's lane past the end (ABORT and FAILED are the end's notice).
	if c, ended := n.endedIn[f.Room]; ended && c < n.calls {
		s.st.FramesAfterEnd[frameName(f)]++
	}
	fc := f
	out[f.Lane] = &fc
	start := max(s.now, s.linkBusy[n.idx][to.idx])
	end := start + room.Instant(s.txTime(f.Bytes()))
	s.linkBusy[n.idx][to.idx] = end
	s.schedule(end, item{kind: itemSent, node: int32(n.idx), peer: int32(to.idx), epoch: n.epoch, gen: uint64(f.Lane), frame: &fc})
	if s.tracing {
		s.tracef("%v %s send %s room=%v to %s lane=%v on the wire at %v", s.now, n.addr, frameName(f), f.Room, f.Peer, laneName(f.Lane), end)
	}
}

// PeerIdle notes that the driver holds nothing for peer: the wire must
// have nothing outstanding for it either.
func (w wire) PeerIdle(peer string) {
	s, n := w.s, w.n
	if out := n.out[peer]; out != nil {
		if out[driver.LaneControl] != nil || out[driver.LaneKV] != nil {
			s.violate("peer_state", "%s: PeerIdle(%s) while a frame to it is outstanding", n.addr, peer)
			return
		}
		delete(n.out, peer)
	}
	s.st.PeersIdle++
}

// txTime is how long the link takes to write b bytes.
func (s *sim) txTime(b int64) room.Duration {
	return room.Duration(float64(b)/s.sw.LinkBytesPerUs)*us + us
}

func laneName(l driver.Lane) string {
	if l == driver.LaneKV {
		return "kv"
	}
	return "control"
}

// isStateFrame reports whether f is a state frame (a KV frame of kind
// state).
func isStateFrame(f *driver.Frame) bool {
	return f != nil && f.Lane == driver.LaneKV && f.KV.Kind == kvwire.KindState
}

func frameName(f driver.Frame) string {
	if f.Lane == driver.LaneKV && f.KV.Kind == kvwire.KindState {
		return "KV(state)"
	}
	if f.Lane == driver.LaneKV {
		return "KV"
	}
	return f.Type.String()
}

// sent is the end of a frame's transmission: Driver.Sent with the
// connection's fate, and the frame's way to the receiver.
func (s *sim) sent(it *item) {
	n, to := s.nodes[it.node], s.nodes[it.peer]
	if !n.up || it.epoch != n.epoch {
		return
	}
	lane := driver.Lane(it.gen)
	if out := n.out[to.addr]; out == nil || out[lane] != it.frame {
		s.violate("lanes", "%s: Sent for a %v frame to %s that is not outstanding", n.addr, laneName(lane), to.addr)
		return
	}
	n.out[to.addr][lane] = nil
	var err error
	switch {
	case !to.up && to.mode != crashSilent:
		err = fmt.Errorf("connection to %s refused: it is down", to.addr)
	case s.blocked[n.idx][to.idx] && s.broken[n.idx][to.idx]:
		err = fmt.Errorf("connection to %s closed during a partition", to.addr)
	}
	if err != nil {
		s.st.FramesLost++
		if s.tracing {
			s.tracef("%v net %s room=%v %s->%s lost (%v)", s.now, frameName(*it.frame), it.frame.Room, n.addr, to.addr, err)
		}
	} else {
		s.transmit(n, to, item{kind: itemFrame, frame: it.frame, from: int32(n.idx)}, frameName(*it.frame))
	}
	if it.frame.Release != nil {
		it.frame.Release() // the wire is done with the frame (the simulated delivery reads Data, a buffer no engine reuses)
	}
	s.call(n, room.Event{}, func() { n.rep.Sent(s.now, to.addr, lane, err) })
}

// transmit schedules a written frame's delivery, or loses it.
func (s *sim) transmit(from, to *node, it item, what string) {
	s.st.FramesSent++
	state := isStateFrame(it.frame)
	if state {
		s.st.StateFramesSent++
	}
	lost := ""
	switch {
	case !to.up:
		lost = to.addr + " is down"
	case s.blocked[from.idx][to.idx]:
		// TCP keeps retrying: the frame arrives after the heal, unless
		// a side gives the connection up first.
		it.node, it.epoch = int32(to.idx), to.epoch
		s.held[from.idx][to.idx] = append(s.held[from.idx][to.idx], it)
		if s.tracing {
			s.tracef("%v net %s room=%v %s->%s held (partition)", s.now, what, it.frame.Room, from.addr, to.addr)
		}
		return
	case s.chance(s.sw.DropRate):
		lost = "dropped"
	}
	if lost != "" {
		s.st.FramesLost++
		if state {
			s.st.StateFramesLost++
		}
		if s.tracing {
			s.tracef("%v net %s room=%v %s->%s lost (%s)", s.now, what, it.frame.Room, from.addr, to.addr, lost)
		}
		return
	}
	it.node, it.epoch = int32(to.idx), to.epoch
	// One connection per pair keeps frames in order; only a held-back
	// frame (the reorder fault) arrives after frames sent later.
	at := s.now + room.Instant(s.between(10*us, s.sw.FrameLatencyMax))
	if s.chance(s.sw.ReorderRate) {
		at += room.Instant(s.between(0, s.sw.ReorderMax))
		if state {
			s.st.StateFramesReordered++
		}
		if s.tracing {
			s.tracef("%v net %s room=%v %s->%s held back until %v (reorder)", s.now, what, it.frame.Room, from.addr, to.addr, at)
		}
	} else {
		at = max(at, s.linkLast[from.idx][to.idx])
		s.linkLast[from.idx][to.idx] = at
	}
	s.schedule(at, it)
	if s.chance(s.sw.DupRate) {
		s.st.FramesDuplicated++
		if state {
			s.st.StateFramesDuplicated++
		}
		dup := at + room.Instant(s.between(0, s.sw.ReorderMax))
		s.schedule(dup, it)
		if s.tracing {
			s.tracef("%v net %s room=%v %s->%s duplicated, again at %v", s.now, what, it.frame.Room, from.addr, to.addr, dup)
		}
	}
}

// reader is the receiving side of one connection, as the transport reads
// it: one frame at a time. A KV frame's bytes are copied into the page
// KVDest gave after it (the copy takes a little while; other calls into the
// driver happen meanwhile), then KVDone; frames behind it wait.
type reader struct {
	busy    bool
	waiting []item
	page    int32 // the page being written, -1 for none
	slot    int32 // the state slot being written, -1 for none
}

// deliver hands a frame to its node's reader for the sending peer.
func (s *sim) deliver(it *item) {
	n := s.nodes[it.node]
	if !n.up || it.epoch != n.epoch {
		if s.tracing {
			s.tracef("%v net room=%v to %s lost (the receiver restarted or is down)", s.now, it.frame.Room, n.addr)
		}
		return
	}
	rd := n.readers[int(it.from)]
	if rd == nil {
		rd = &reader{page: -1, slot: -1}
		n.readers[int(it.from)] = rd
	}
	if rd.busy {
		rd.waiting = append(rd.waiting, *it)
		return
	}
	s.read(n, rd, it)
}

// read is the transport handling one received frame: a control frame goes
// to Driver.Frame; a KV frame asks KVDest for its page and schedules the
// copy's end (KVDone).
func (s *sim) read(n *node, rd *reader, it *item) {
	f, from := it.frame, s.nodes[it.from].addr
	if f.Lane == driver.LaneControl {
		h := kvwire.NewHeader(f.Type, f.Room, f.Payload)
		s.call(n, room.Event{Kind: driver.FrameEventKind(f.Type), Room: f.Room, Peer: from}, func() {
			n.d.Frame(s.now, from, h, f.Payload)
		})
		return
	}
	var dst []byte
	n.pool.lastPage = -1
	s.call(n, room.Event{}, func() { dst = n.d.KVDest(from, f.Room, f.KV, len(f.Data)) })
	if s.v != nil || !n.up {
		return
	}
	state := f.KV.Kind == kvwire.KindState
	if dst == nil {
		if state {
			if st, _, known := n.d.State(f.Room); !known || st.Terminal() {
				s.st.StateFramesLate++
			}
		}
		return // the transport discards the bytes; no KVDone follows
	}
	if state {
		s.readState(n, rd, it, dst)
		return
	}
	p := n.pool.lastPage
	if p < 0 || n.role != room.RoleDecode {
		s.violate("kv_dest", "%s: KVDest for room=%v returned bytes that are no page of the pool", n.addr, f.Room)
		return
	}
	if pg := n.pool.pages[p]; pg.state != pageReserved || pg.leg == nil || pg.leg.req.id != f.Room || pg.leg.req.p.addr != from {
		s.violate("kv_dest", "%s: KVDest points KV of room=%v from %s into page %d, which is %v (leg %v)",
			n.addr, f.Room, from, p, pg.state, legDesc(pg.leg))
		return
	}
	n.pool.writes[p]++
	n.inflight[f.Room]++
	rd.busy, rd.page = true, p
	ok := !s.chance(s.sw.ChecksumRate)
	s.after(s.between(us, 50*us), item{kind: itemKVDone, node: int32(n.idx), epoch: n.epoch, from: it.from, frame: f, ok: ok})
	_ = dst
}

// kvDone ends a KV frame's copy into its page: the bytes land (corrupted
// when the checksum fault hit), KVDone, and the reader takes the next
// frame.
func (s *sim) kvDone(it *item) {
	n := s.nodes[it.node]
	if !n.up || it.epoch != n.epoch {
		return
	}
	rd := n.readers[int(it.from)]
	f, from := it.frame, s.nodes[it.from].addr
	p := rd.page
	var dst []byte
	if rd.slot >= 0 {
		off := int(f.KV.Ordinal) * s.sw.stateChunk()
		dst = n.pool.stateBuf(rd.slot)[off : off+len(f.Data)]
		n.pool.stateWrites[rd.slot]--
	} else {
		dst = n.pool.kvSlot(int(f.KV.Layer), f.KV.Kind, p)
		n.pool.writes[p]--
	}
	copy(dst, f.Data)
	if !it.ok {
		dst[0] ^= 0xff
	}
	n.inflight[f.Room]--
	if n.inflight[f.Room] == 0 {
		delete(n.inflight, f.Room)
	}
	if st, _, known := n.d.State(f.Room); !known || st.Terminal() {
		s.st.QuarantinedWrites++
	}
	rd.busy, rd.page, rd.slot = false, -1, -1
	s.call(n, room.Event{}, func() { n.d.KVDone(s.now, from, f.Room, f.KV, len(f.Data), it.ok) })
	for !rd.busy && len(rd.waiting) > 0 && s.v == nil && n.up && it.epoch == n.epoch {
		next := rd.waiting[0]
		rd.waiting = rd.waiting[1:]
		s.read(n, rd, &next)
	}
}

// readState starts the copy of a state frame into the slot KVDest named:
// it must be the state slot of the room's leg from that prefill node, and
// the frame's own piece of it.
func (s *sim) readState(n *node, rd *reader, it *item, dst []byte) {
	f, from := it.frame, s.nodes[it.from].addr
	slot := n.pool.stateSlotOf(dst, s.sw.stateChunk())
	if slot < 0 || n.role != room.RoleDecode {
		s.violate("kv_dest", "%s: KVDest for a state frame of room=%v returned bytes of no state slot", n.addr, f.Room)
		return
	}
	sl := n.pool.slots[slot]
	off := int(f.KV.Ordinal) * s.sw.stateChunk()
	if sl.state != pageReserved || sl.leg == nil || sl.leg.req.id != f.Room || sl.leg.req.p.addr != from ||
		&n.pool.stateBuf(slot)[off] != &dst[0] || len(dst) != len(f.Data) {
		s.violate("kv_dest", "%s: KVDest points state frame %d of room=%v from %s into state slot %d, which is %v (leg %v)",
			n.addr, f.KV.Ordinal, f.Room, from, slot, sl.state, legDesc(sl.leg))
		return
	}
	n.pool.stateWrites[slot]++
	n.inflight[f.Room]++
	rd.busy, rd.slot = true, slot
	ok := !s.chance(s.sw.ChecksumRate)
	s.after(s.between(us, 50*us), item{kind: itemKVDone, node: int32(n.idx), epoch: n.epoch, from: it.from, frame: f, ok: ok})
}

func legDesc(l *nodeLeg) string {
	if l == nil {
		return "none"
	}
	return l.req.name
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
	s.call(n, room.Event{}, func() { n.d.PeerLost(s.now, peer.addr) })
	if s.v == nil && n.up {
		s.checkPeerGone(n, peer.addr)
	}
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
		s.call(n, room.Event{}, func() { n.d.Shutdown(s.now) })
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
	n.up, n.mode, n.d, n.rep, n.stopping = false, mode, nil, nil, false
	n.epoch++
	n.legList, n.jobs, n.admitQ, n.gens, n.track, n.admittedPages = nil, nil, nil, nil, nil, nil
	n.out, n.readers, n.inflight = nil, nil, nil
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
