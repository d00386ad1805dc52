package sim

import (
	"fmt"

	"tandem/internal/pd/room"
)

// A node is one worker: a real *room.Machine for its role, the edge that
// carries out the machine's effects the way internal/pd/worker does, a
// simulated engine and a timer. A crash drops all of it; a restart starts a
// fresh incarnation (epoch), and items meant for an old one are dropped.

// node is one prefill or decode worker.
type node struct {
	idx   int
	role  room.Role
	addr  string
	up    bool
	epoch uint32
	mode  crashMode // how its last crash looked to peers
	// stopping: a graceful shutdown is draining (EventShutdown stepped,
	// the node still up)
	stopping bool
	slow     int64 // engine slowness factor (1: healthy)
	m        *room.Machine

	legs       map[room.ID]*nodeLeg // rooms with a router leg here (the worker's legs)
	legList    []*nodeLeg           // every leg this incarnation took, in order
	submitting *nodeLeg             // the leg whose EventRequest is being stepped
	timerArmed bool
	timerAt    room.Instant
	timerGen   uint64

	// prefill engine: jobs in submission order, the first PrefillSlots run
	jobs   []*job
	jobGen uint64
	// decode engine: the page pool and the admission queue (FIFO)
	pages  []page
	free   []int32
	admitQ []admission
	gens   map[*request]*generation // resumed sequences, by request (a room id may be reused)

	// per-incarnation bookkeeping for the invariants
	track map[room.ID]*roomTrack
}

// nodeLeg is the node's record of one router leg.
type nodeLeg struct {
	req       *request
	leg       int8
	answered  bool
	rejected  bool
	roomDone  bool   // the room released (the worker's roomDone)
	allocated bool   // decode: ALLOC sent, KV may land in the pages
	chunks    uint32 // decode: distinct KV chunks stored (bit i: chunk i)
	recvBytes int64
}

// job is one prompt on the prefill engine.
type job struct {
	gen     uint64
	room    room.ID
	leg     *nodeLeg
	peer    string
	chunks  int
	next    int // chunks done
	failAt  int // chunk at which the engine fails (-1: never)
	sent    int64
	running bool
}

// pageState says who holds a decode page.
type pageState uint8

const (
	pageFree     pageState = iota
	pageReserved           // the engine reserved it for a room; EventAdmitted is on its way
	pageRoom               // the room sent it in ALLOC
	pageSequence           // the room resumed: the running sequence holds it
)

type page struct {
	state pageState
	room  room.ID
}

// admission is a request waiting in the decode engine for pages.
type admission struct {
	room room.ID
	need int
}

// generation is a resumed decode sequence.
type generation struct {
	leg   *nodeLeg
	pages []int32
}

// roomTrack is what the checks remember about a room on one incarnation.
type roomTrack struct {
	ended      int
	released   int
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
	m, err := room.New(cfg)
	if err != nil {
		s.violate("config", "room.New(%+v): %v", cfg, err)
		return
	}
	n.m, n.up, n.stopping = m, true, false
	n.epoch++
	n.legs, n.legList, n.submitting = map[room.ID]*nodeLeg{}, nil, nil
	n.timerArmed, n.timerGen = false, n.timerGen+1
	n.jobs, n.admitQ, n.gens = nil, nil, map[*request]*generation{}
	n.track = map[room.ID]*roomTrack{}
	if n.slow == 0 {
		n.slow = 1
	}
	if n.role == room.RoleDecode {
		n.pages = make([]page, s.sw.PoolPages)
		n.free = n.free[:0]
		for p := s.sw.PoolPages - 1; p >= 0; p-- {
			n.free = append(n.free, int32(p))
		}
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

// legArrive is a router leg's HTTP request reaching its node: the worker's
// submit. A node that is down refuses the connection.
func (s *sim) legArrive(it *item) {
	r, k := s.reqs[it.req], it.leg
	n := r.legNode(k)
	if !n.up {
		s.answerRouter(r, k, false, "connection refused: "+n.addr+" is down")
		return
	}
	l := &nodeLeg{req: r, leg: k}
	if n.legs[r.id] == nil {
		n.legs[r.id] = l
	}
	ev := room.Event{Kind: room.EventRequest, Room: r.id, RequestID: r.reqID}
	if n.role == room.RoleDecode {
		ev.Peer = r.p.addr
	}
	n.submitting = l
	s.step(n, ev)
	n.submitting = nil
	if l.rejected {
		if n.legs[r.id] == l {
			delete(n.legs, r.id)
		}
		return
	}
	r.legs[k].taken, r.legs[k].epoch = true, n.epoch
	n.legList = append(n.legList, l)
}

// legCancel is the router's cancel reaching the node that took the leg:
// the worker's clientAbort. Before the room ends it is EventClientAbort;
// after decode resumed it ends the running sequence.
func (s *sim) legCancel(it *item) {
	r, k := s.reqs[it.req], it.leg
	n := r.legNode(k)
	rl := &r.legs[k]
	if !rl.taken || !n.up || rl.epoch != n.epoch {
		return // never taken, or the connection died with that incarnation
	}
	if g := n.gens[r]; g != nil {
		s.endSequence(n, r, g, false, "client_abort")
		return
	}
	if l := n.legs[r.id]; l != nil && l.req == r && !l.roomDone {
		s.step(n, room.Event{Kind: room.EventClientAbort, Room: r.id})
	}
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
	l.answered = true
	s.answerRouter(l.req, l.leg, ok, note)
}

// step applies one event to n's machine, checks it, carries out the
// effects, and steps the follow-up events the edge produces (an engine
// that refuses a prompt, a compute that started), as the worker does.
func (s *sim) step(n *node, ev room.Event) room.Outcome {
	pending := []room.Event{ev}
	var first room.Outcome
	for i := 0; i < len(pending) && s.v == nil; i++ {
		if i > followUpsMax {
			s.violate("sim", "more than %d follow-up events from one step on %s", followUpsMax, n.addr)
			break
		}
		e := pending[i]
		before := s.snapshot(n, e)
		o := n.m.Step(s.now, e)
		rd := n.m.Ready()
		n.m.Advance()
		s.st.Steps++
		if s.tracing {
			s.traceStep(n, e, o, rd)
		}
		s.checkStep(n, e, o, before, rd)
		pending = append(pending, s.apply(n, e, rd)...)
		if i == 0 {
			first = o
		}
	}
	if s.v == nil && n.up && !s.opts.breakTimers {
		s.armTimer(n)
		s.checkDeadline(n)
	}
	return first
}

// apply carries out a step's effects in order and returns follow-up
// events.
func (s *sim) apply(n *node, ev room.Event, rd room.Ready) []room.Event {
	var more []room.Event
	for _, t := range rd.Transitions {
		if t.To.Terminal() {
			s.st.Drained = max(s.st.Drained, s.now)
			if t.To == room.StateSucceeded {
				s.st.RoomSuccesses++
			} else {
				s.st.RoomFailures[t.Reason]++
			}
		}
	}
	for _, e := range rd.Effects {
		if s.v != nil {
			break
		}
		if f, ok := s.applyOne(n, ev, e); ok {
			more = append(more, f)
		}
	}
	if ev.Kind == room.EventAdmitted && n.role == room.RoleDecode {
		s.checkAdmittedPlaced(n, ev)
	}
	return more
}

func (s *sim) applyOne(n *node, ev room.Event, e room.Effect) (room.Event, bool) {
	l := n.legs[e.Room]
	switch e.Kind {
	case room.EffectSend:
		s.sendFrame(n, e)
	case room.EffectStartCompute:
		return s.startCompute(n, l, e)
	case room.EffectCancelCompute:
		s.cancelJob(n, e.Room)
	case room.EffectAdmit:
		return s.admit(n, l, e)
	case room.EffectResume:
		s.resume(n, l, e)
	case room.EffectCancelRequest:
		if l == nil {
			s.violate("edge", "%s: cancel_request for room=%v with no leg", n.addr, e.Room)
			break
		}
		s.answerLeg(n, l, false, e.Reason.String())
		s.dropAdmission(n, e.Room)
	case room.EffectReject:
		s.reject(n, ev, e)
	case room.EffectRelease:
		s.release(n, l, e)
	case room.EffectReplyDone:
		if l == nil {
			s.violate("edge", "%s: reply_done for room=%v with no leg", n.addr, e.Room)
			break
		}
		s.answerLeg(n, l, true, "")
	case room.EffectFreePages:
		s.freePages(n, e.Room, e.Pages, pageReserved, "free_pages")
	default:
		s.violate("edge", "%s: unknown effect %v", n.addr, e)
	}
	return room.Event{}, false
}

// reject answers the leg being submitted at once.
func (s *sim) reject(n *node, ev room.Event, e room.Effect) {
	l := n.submitting
	if l == nil || ev.Kind != room.EventRequest || e.Room != ev.Room || e.RequestID != ev.RequestID {
		s.violate("edge", "%s: reject %v outside the request it answers (%v)", n.addr, e, ev.Kind)
		return
	}
	l.rejected = true
	s.answerLeg(n, l, false, fmt.Sprintf("status %d %v", e.Status, e.Reason))
}

// release is the room's one EffectRelease: the leg is done with (unless
// its sequence runs on), a queued admission is dropped, and a failed
// decode room's pages go back to the pool.
func (s *sim) release(n *node, l *nodeLeg, e room.Effect) {
	t := n.trackOf(e.Room)
	t.released++
	if l != nil {
		l.roomDone = true
		delete(n.legs, e.Room)
	}
	if n.role == room.RoleDecode {
		s.dropAdmission(n, e.Room)
		s.freePages(n, e.Room, e.Pages, pageRoom, "release")
	}
}

// armTimer sets the node's one timer to the machine's next deadline, late
// by up to TimerLateMax, as the worker's timer loop does.
func (s *sim) armTimer(n *node) {
	next, ok := n.m.NextDeadline()
	if !ok || (n.timerArmed && n.timerAt <= next) {
		return
	}
	n.timerGen++
	n.timerArmed, n.timerAt = true, next
	late := s.between(0, s.sw.TimerLateMax)
	s.schedule(next+room.Instant(late), item{kind: itemTimer, node: int32(n.idx), epoch: n.epoch, gen: n.timerGen})
}

// timerFired ticks the machine. Afterwards nothing may be due any more.
func (s *sim) timerFired(it *item) {
	n := s.nodes[it.node]
	if !n.up || it.epoch != n.epoch || it.gen != n.timerGen {
		return
	}
	n.timerArmed = false
	s.step(n, room.Event{Kind: room.EventTick})
	if next, ok := n.m.NextDeadline(); ok && next <= s.now && s.v == nil {
		s.violate("tick", "%s: Tick(%v) left work due at %v", n.addr, s.now, next)
	}
}
