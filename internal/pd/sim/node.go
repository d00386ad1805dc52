package sim

import (
	"fmt"

	"tandem/internal/pd/driver"
	"tandem/internal/pd/room"
)

// A node is one worker: the shipped edge (a *driver.Driver around its
// room.Machine) with fake adapters on the virtual clock: an engine
// (engine.go), a wire (network.go) and the router's legs (router.go). A
// crash drops all of it; a restart starts a fresh incarnation (epoch), and
// items meant for an old one are dropped.
//
// The driver is not re-entrant: the adapters' methods only record what
// they were asked and schedule items on the virtual-time queue, never call
// back into the driver.

// node is one prefill or decode worker.
type node struct {
	idx   int
	role  room.Role
	addr  string
	up    bool
	epoch uint32
	mode  crashMode // how its last crash looked to peers
	// stopping: a graceful shutdown is draining (Driver.Shutdown called,
	// the node still up)
	stopping bool
	slow     int64 // engine slowness factor (1: healthy)
	d        *driver.Driver[*nodeLeg]
	// rep is where the fakes report (Sent, KVReady, ComputeDone,
	// EngineError, Admitted): d, or a conformance test's recorder.
	rep driver.Reports[*nodeLeg]

	legList    []*nodeLeg // every leg this incarnation took, in order
	timerArmed bool
	timerAt    room.Instant
	timerGen   uint64

	// prefill engine: jobs in submission order, the first PrefillSlots run
	jobs   []*job
	jobGen uint64
	// decode engine: the page pool (bytes included) and the admission
	// queue (FIFO)
	pool   pool
	admitQ []admission
	gens   map[*nodeLeg]*generation // resumed sequences
	// admittedPages: the pages each leg was admitted with, in the order
	// Driver.Admitted got them (KV ordinal o lands in the o-th)
	admittedPages map[*nodeLeg][]int32
	// admittedState: the state slot each leg was admitted with
	admittedState map[*nodeLeg]int32

	// the wire's view of this node's sends: the frame outstanding on each
	// peer's lane, and the receiving side's reader per sending peer
	out     map[string]*[driver.LaneKV + 1]*driver.Frame
	readers map[int]*reader
	// inflight counts KV writes between KVDest and KVDone per room (the
	// quarantine the driver must respect)
	inflight map[room.ID]int
	// kvHeld counts the KV frames this incarnation's prefill engine handed
	// the driver whose Release has not been called: by the driver for a
	// frame it dropped, by the wire once it is sent (a real engine's page
	// hold)
	kvHeld int

	// what the current driver call stepped, for the checks; calls counts
	// the calls into the driver, endedIn the call in which each room last
	// turned terminal (for frames sent after their room ended)
	evs     []evRec
	trans   []room.Transition
	calls   uint64
	endedIn map[room.ID]uint64

	// per-incarnation bookkeeping for the invariants
	track map[room.ID]*roomTrack
}

// evRec is one event the driver stepped, as its Observer saw it.
type evRec struct {
	kind room.EventKind
	o    room.Outcome
}

// nodeLeg is the node's record of one router leg (the driver's Leg type).
type nodeLeg struct {
	n         *node
	req       *request
	leg       int8
	answered  bool
	ok        bool   // the answer: success
	note      string // the answer: why it failed
	cancelled bool   // the engine's Cancel ran for it
}

// roomTrack is what the checks remember about a room on one incarnation.
type roomTrack struct {
	ended      int
	terminal   room.State
	abortFirst bool         // an ABORT or FAILED came while the room was unknown here
	abortAt    room.Instant // when
}

// boot starts a fresh incarnation of n.
func (s *sim) boot(n *node) {
	cfg := s.sw.Room
	cfg.Role = n.role
	if s.opts.Configure != nil {
		s.opts.Configure(&cfg)
	}
	d, err := driver.New(driver.Config[*nodeLeg]{Room: cfg, Layers: s.sw.KVLayers, PageBytes: kvPageBytes, StateBytes: s.sw.StateBytes,
		Engine: engine{s, n}, Wire: wire{s, n}, Legs: legs{s, n}, Observer: observer{s, n}})
	if err != nil {
		s.violate("config", "driver.New(%+v): %v", cfg, err)
		return
	}
	n.d, n.rep, n.up, n.stopping = d, d, true, false
	n.epoch++
	n.legList, n.kvHeld = nil, 0
	n.timerArmed, n.timerGen = false, n.timerGen+1
	n.jobs, n.admitQ, n.gens = nil, nil, map[*nodeLeg]*generation{}
	n.admittedPages = map[*nodeLeg][]int32{}
	n.admittedState = map[*nodeLeg]int32{}
	n.out, n.readers, n.inflight = map[string]*[driver.LaneKV + 1]*driver.Frame{}, map[int]*reader{}, map[room.ID]int{}
	n.track = map[room.ID]*roomTrack{}
	n.endedIn = map[room.ID]uint64{}
	if n.slow == 0 {
		n.slow = 1
	}
	if n.role == room.RoleDecode {
		n.pool = newPool(s.sw.PoolPages, s.sw.KVLayers, s.sw.StateSlots, s.sw.StateBytes)
	}
}

// trackOf returns the bookkeeping of room id on n.
func (n *node) trackOf(id room.ID) *roomTrack {
	t := n.track[id]
	if t == nil {
		t = &roomTrack{}
		n.track[id] = t
	}
	return t
}

// call runs one call into n's driver and checks it: ev names the event the
// call steps first (its Kind and Room; Kind 0 for calls that step nothing
// of their own, such as Sent), which the checks look at before and after.
func (s *sim) call(n *node, ev room.Event, fn func()) {
	if s.v != nil || !n.up {
		return
	}
	before := s.snapshot(n, ev)
	n.evs, n.trans = n.evs[:0], n.trans[:0]
	n.calls++
	fn()
	if s.v != nil || !n.up {
		return
	}
	var o room.Outcome
	if ev.Kind != 0 {
		for _, e := range n.evs {
			if e.kind == ev.Kind {
				o = e.o
				break
			}
		}
	}
	s.checkCall(n, ev, o, before)
	if s.v == nil && !s.opts.breakTimers {
		s.armTimer(n)
		s.checkDeadline(n)
	}
	if s.v == nil {
		s.checkPeers(n)
	}
}

// legArrive is a router leg's HTTP request reaching its node: the worker's
// submit. A node that is down refuses the connection.
func (s *sim) legArrive(it *item) {
	r, k := s.reqs[it.req], it.leg
	n := r.legNode(k)
	if !n.up {
		s.answerRouter(r, k, false, "connection refused: "+n.addr+" is down")
		return
	}
	l := &nodeLeg{n: n, req: r, leg: k}
	peer := ""
	if n.role == room.RoleDecode {
		peer = r.p.addr
	}
	// Taken before the call: the driver may answer the leg (Legs.Fail)
	// inside it.
	r.legs[k].taken, r.legs[k].epoch = true, n.epoch
	n.legList = append(n.legList, l)
	var rej *driver.Reject
	s.call(n, room.Event{Kind: room.EventRequest, Room: r.id}, func() {
		rej = n.d.Request(s.now, r.id, r.reqID, peer, l)
	})
	if rej != nil {
		r.legs[k].taken = false
		n.legList = n.legList[:len(n.legList)-1]
		s.answerLeg(n, l, false, fmt.Sprintf("rejected %v (failed before: %v)", rej.Reason, rej.Failed))
	}
}

// legCancel is the router's cancel reaching the node that took the leg:
// the worker's clientAbort (Driver.ClientAbort), which before the room
// ends is EventClientAbort and after a decode success ends the running
// sequence.
func (s *sim) legCancel(it *item) {
	r, k := s.reqs[it.req], it.leg
	n := r.legNode(k)
	rl := &r.legs[k]
	if !rl.taken || !n.up || rl.epoch != n.epoch {
		return // never taken, or the connection died with that incarnation
	}
	l := n.legOf(r, k)
	if l == nil {
		return
	}
	s.call(n, room.Event{Kind: room.EventClientAbort, Room: r.id}, func() { n.d.ClientAbort(s.now, r.id, l) })
}

// legOf returns the leg of request r this incarnation took.
func (n *node) legOf(r *request, k int8) *nodeLeg {
	for i := len(n.legList) - 1; i >= 0; i-- {
		if l := n.legList[i]; l.req == r && l.leg == k {
			return l
		}
	}
	return nil
}

// answerRouter sends a leg's answer back to the router.
func (s *sim) answerRouter(r *request, k int8, ok bool, note string) {
	s.after(s.between(50*us, s.sw.LegLatencyMax), item{kind: itemLegAnswer, req: int32(r.idx), leg: k, ok: ok, note: note})
}

// answerLeg answers a leg the node took, exactly once.
func (s *sim) answerLeg(n *node, l *nodeLeg, ok bool, note string) {
	if l.answered {
		s.violate("leg_answered_twice", "%s answered the %s leg of %s twice (second: ok=%v %s)",
			n.addr, legName(l.leg), l.req.name, ok, note)
		return
	}
	l.answered, l.ok, l.note = true, ok, note
	s.answerRouter(l.req, l.leg, ok, note)
}

// legs is the driver's Legs on node n.
type legs struct {
	s *sim
	n *node
}

// The fakes implement the driver's interfaces.
var (
	_ driver.Engine[*nodeLeg] = engine{}
	_ driver.Legs[*nodeLeg]   = legs{}
	_ driver.Wire             = wire{}
	_ driver.Pages            = (*pool)(nil)
	_ driver.Observer         = observer{}
)

// Succeed answers a prefill leg whose transfer succeeded.
func (a legs) Succeed(l *nodeLeg) {
	if a.n.role != room.RolePrefill {
		a.s.violate("edge", "%s: Legs.Succeed for the %s leg of %s on a decode node", a.n.addr, legName(l.leg), l.req.name)
		return
	}
	a.s.answerLeg(a.n, l, true, "")
}

// Fail answers a leg with its room's failure.
func (a legs) Fail(l *nodeLeg, reason room.Reason) {
	a.s.answerLeg(a.n, l, false, reason.String())
}

// observer is the driver's Observer on node n: it counts, traces, and
// keeps what the current call stepped for the checks.
type observer struct {
	s *sim
	n *node
}

// Event records one stepped event.
func (o observer) Event(kind room.EventKind, out room.Outcome) {
	o.s.st.Steps++
	o.n.evs = append(o.n.evs, evRec{kind, out})
	if o.s.tracing {
		o.s.tracef("%v %s.%d %v => %v", o.s.now, o.n.addr, o.n.epoch, kind, out)
	}
}

// Transition records one state change.
func (o observer) Transition(t room.Transition, bytes int64) {
	o.n.trans = append(o.n.trans, t)
	if t.To.Terminal() {
		o.n.endedIn[t.Room] = o.n.calls
	} else {
		delete(o.n.endedIn, t.Room)
	}
	if t.To.Terminal() {
		o.s.st.Drained = max(o.s.st.Drained, o.s.now)
		if t.To == room.StateSucceeded {
			o.s.st.RoomSuccesses++
		} else {
			o.s.st.RoomFailures[t.Reason]++
		}
	}
	if o.s.tracing {
		o.s.trace = append(o.s.trace, o.s.shorten("    "+t.String()))
	}
}

// KVDropped counts a received KV frame the driver discarded.
func (o observer) KVDropped(why string) {
	o.s.st.KVDiscarded++
	if o.s.tracing {
		o.s.tracef("%v %s kv discarded (%s)", o.s.now, o.n.addr, why)
	}
}

// BadFrame is a violation: the simulator only sends well-formed frames.
func (o observer) BadFrame(why string) {
	o.s.violate("edge", "%s: the driver dropped a frame as %s; the simulator sends only well-formed ones", o.n.addr, why)
}

// SendDropped counts frames the driver did not send.
func (o observer) SendDropped(why string, frames int) {
	o.s.st.SendDropped[why] += frames
	if o.s.tracing {
		o.s.tracef("%v %s driver dropped %d frames (%s)", o.s.now, o.n.addr, frames, why)
	}
}

// armTimer sets the node's one timer to the driver's next deadline, late
// by up to TimerLateMax, as the worker's timer loop does.
func (s *sim) armTimer(n *node) {
	next, ok := n.d.NextDeadline()
	if !ok || (n.timerArmed && n.timerAt <= next) {
		return
	}
	n.timerGen++
	n.timerArmed, n.timerAt = true, next
	late := s.between(0, s.sw.TimerLateMax)
	s.schedule(next+room.Instant(late), item{kind: itemTimer, node: int32(n.idx), epoch: n.epoch, gen: n.timerGen})
}

// timerFired ticks the driver. Afterwards nothing may be due any more.
func (s *sim) timerFired(it *item) {
	n := s.nodes[it.node]
	if !n.up || it.epoch != n.epoch || it.gen != n.timerGen {
		return
	}
	n.timerArmed = false
	s.call(n, room.Event{}, func() { n.d.Tick(s.now) })
	if s.v == nil && n.up {
		if next, ok := n.d.NextDeadline(); ok && next <= s.now {
			s.violate("tick", "%s: Tick(%v) left work due at %v", n.addr, s.now, next)
		}
	}
}
