package sim

import (
	"tandem/internal/pd/driver"
	"tandem/internal/pd/room"
)

// The invariants. checkCall runs after every call into a driver (with
// checkDeadline and checkPeers), the wire and the fake engine check what
// the driver asks of them as it asks, the watchdog sweep runs
// periodically, and finalCheck once faults have been off for the drain
// bound (in exhaustive mode: at every leaf). Each violation names its
// invariant:
//
//   - outcome: an event the driver stepped got an outcome outside the enum.
//   - terminal_changed: a transition left a terminal state, or an event
//     changed or forgot a terminal room.
//   - created_state: an event created a room other than the ways the
//     protocol allows (the router's request; on prefill a HELLO parks, an
//     ABORT or FAILED leaves a tombstone), or Parked without creating.
//   - abort_before_request: prefill took the router's request (or HELLO)
//     as a new live room although an ABORT or FAILED for it had arrived
//     first and is still remembered: the request must be answered at once
//     (SGLang's silent pin).
//   - release: a room ended but the driver still holds its record with
//     no KV write into its pages in flight.
//   - prefill_success: prefill succeeded a room that no decode verified.
//   - deadline_missed: a node holds a live room (or a tombstone) past its
//     deadline by more than the scheduling tolerance; tick: a Tick left
//     work due.
//   - watchdog_fired: the periodic watchdog found a room past its deadline
//     (a timer did not fire). watchdog_probe: EventWatchdog for a room not
//     past its deadline changed it.
//   - driver_invariants: Driver.CheckAccounting (the driver's own: its
//     lanes never hold a frame back from a free lane, its byte accounting
//     matches its queues and limits, it keeps no idle peer and no ended
//     record without a write in flight) failed after a call, or
//     Driver.CheckInvariants (those and the room core's own invariants)
//     at a watchdog sweep.
//   - panic: the driver, the core (or the simulator) panicked.
//   - pages, resume: a page on the free list that is not free, a resume
//     whose pages do not hold exactly the bytes prefill computed or with
//     the wrong token; quarantine: the engine was told to free (Cancel) a
//     page with a KV write in flight; kv_dest: KVDest pointed a write
//     into a page the room was not admitted with; edge: the driver asked
//     for something impossible (Succeed on decode, a frame to an unknown
//     peer, a malformed frame dropped).
//   - lanes: a second frame on a lane with one outstanding, or a Sent for
//     a frame that is not outstanding (the driver itself checks that no
//     frame waits while its lane is free: driver_invariants; a control
//     frame waits behind at most the one KV frame being written:
//     ControlBehindKV counts those).
//   - peer_state: the driver's outstanding count differs from the wire's;
//     PeerIdle while a frame is outstanding; after PeerLost a room with the
//     peer still live, KV queued for it, or rooms counted beyond those
//     whose pages wait for an in-flight KV write.
//   - leg_answered_twice, one_outcome: a leg answered twice, a client
//     given two outcomes.
//   - drain: after the drain bound a room is live, a gauge is not zero, a
//     driver's Stats are not all zero, a page, leg, job, admission,
//     sequence, KV write or outstanding frame is left, a client has no
//     outcome or a leg no answer.
//   - outcome_agreement: in a calm seed (or an exhaustive leaf without a
//     fault or a disconnect), prefill and decode ended a room differently.

// snap is a room's state before a step.
type snap struct {
	known bool
	state room.State
	phase room.Phase
}

// global reports whether k is not about one room.
func global(k room.EventKind) bool {
	return k == room.EventTick || k == room.EventPeerLost || k == room.EventShutdown
}

func (s *sim) snapshot(n *node, e room.Event) snap {
	if e.Kind == 0 || global(e.Kind) {
		return snap{}
	}
	st, ph, ok := n.d.State(e.Room)
	return snap{known: ok, state: st, phase: ph}
}

// checkCall checks one call into a driver: the outcome of the event it
// stepped first (o, 0 when it stepped none of kind e.Kind), the
// transitions it made and what happened to the room the event named.
func (s *sim) checkCall(n *node, e room.Event, o room.Outcome, before snap) {
	for _, ev := range n.evs {
		if ev.o < room.OutcomeApplied || ev.o > room.OutcomeRejected {
			s.violate("outcome", "%s: Step(%v) = %v", n.addr, ev.kind, ev.o)
			return
		}
	}
	s.checkEnds(n)
	if e.Kind == 0 || global(e.Kind) || o == 0 || s.v != nil {
		return
	}
	st, ph, known := n.d.State(e.Room)
	after := snap{known: known, state: st, phase: ph}
	switch {
	case before.known && before.state.Terminal():
		if !after.known || after.state != before.state || (o != room.OutcomeLate && o != room.OutcomeAnswered) {
			s.violate("terminal_changed", "%s: %v for terminal room=%v (%v) gave %v and left it %v (known %v)",
				n.addr, e.Kind, e.Room, before.state, o, after.state, after.known)
		}
	case !before.known && after.known:
		if !createAllowed(n.role, e.Kind, o, after) {
			s.violate("created_state", "%s: %v for unknown room=%v created it as %v/%v (outcome %v)",
				n.addr, e.Kind, e.Room, after.state, after.phase, o)
		}
	case o == room.OutcomeParked:
		s.violate("created_state", "%s: %v for room=%v parked without creating it", n.addr, e.Kind, e.Room)
	}
	if n.role == room.RolePrefill {
		s.checkEarlyAbort(n, e, o, before, after)
	}
}

// createAllowed lists the ways a room may come to exist.
func createAllowed(role room.Role, k room.EventKind, o room.Outcome, after snap) bool {
	switch {
	case k == room.EventRequest:
		return o == room.OutcomeApplied && !after.state.Terminal()
	case role != room.RolePrefill:
		return false
	case k == room.EventHello:
		return o == room.OutcomeParked && after.phase == room.PhaseAwaitingRequest
	case k == room.EventAbort || k == room.EventFailed:
		return o == room.OutcomeParked && after.state == room.StateFailed
	}
	return false
}

// checkEarlyAbort remembers ABORT and FAILED frames for rooms prefill did
// not know, and checks that a later request or HELLO for such a room,
// while the room would still be remembered, is answered at once and
// creates nothing live.
func (s *sim) checkEarlyAbort(n *node, e room.Event, o room.Outcome, before, after snap) {
	switch e.Kind {
	case room.EventAbort, room.EventFailed:
		if !before.known {
			t := n.trackOf(e.Room)
			t.abortFirst, t.abortAt = true, s.now
			s.st.EarlyAborts++
		}
	case room.EventRequest, room.EventHello:
		t := n.track[e.Room]
		if t == nil || !t.abortFirst || s.now >= t.abortAt+room.Instant(s.sw.Room.TombstoneTTL) || n.d.Counters().Evicted != 0 {
			return
		}
		createdLive := after.known && !after.state.Terminal()
		answered := e.Kind != room.EventRequest || o == room.OutcomeAnswered
		if !createdLive && answered {
			s.st.EarlyAnswered++
			return
		}
		s.violate("abort_before_request",
			"%s: %v for room=%v at %v gave %v and left the room %v/%v, but decode's ABORT/FAILED for it arrived "+
				"first, at %v; the request must be answered at once, not wait out a timeout (the silent pin)",
			n.addr, e.Kind, e.Room, s.now, o, after.state, after.phase, t.abortAt)
	}
}

// checkEnds records the rooms that ended in the call and checks them: no
// transition leaves a terminal state, prefill succeeds only rooms a decode
// verified, and the driver let go of every ended room (its record stays
// only while a KV write into its pages is in flight: the quarantine).
func (s *sim) checkEnds(n *node) {
	for _, t := range n.trans {
		if t.From.Terminal() {
			s.violate("terminal_changed", "%s: transition out of a terminal state: %v", n.addr, t)
			return
		}
		if !t.To.Terminal() {
			continue
		}
		tr := n.trackOf(t.Room)
		tr.ended++
		tr.terminal = t.To
		s.ends[roomAt{t.Room, n.addr}] = t
		info, _ := n.d.Room(t.Room)
		switch {
		case t.To == room.StateSucceeded && n.role == room.RoleDecode:
			s.verified[roomAt{t.Room, n.addr}] = true
		case t.To == room.StateSucceeded && !s.verified[roomAt{t.Room, info.Peer}]:
			s.violate("prefill_success", "%s: room=%v succeeded on prefill but its decode node %q never verified its KV",
				n.addr, t.Room, info.Peer)
			return
		}
		_, rec := n.d.SentBytes(t.Room)
		if n.role == room.RoleDecode {
			_, rec = n.d.RecvBytes(t.Room)
		}
		if st, _, _ := n.d.State(t.Room); rec && st.Terminal() && n.inflight[t.Room] == 0 {
			s.violate("release", "%s: room=%v ended (%v) but the driver still holds its record with no KV write in flight",
				n.addr, t.Room, t.To)
			return
		}
	}
}

// checkPeers runs the driver's own invariants (Driver.CheckAccounting:
// its lanes, byte accounting, peer state and records) and checks its
// per-peer state against the wire's view: the frames outstanding are the
// ones the wire holds.
func (s *sim) checkPeers(n *node) {
	if err := n.d.CheckAccounting(); err != nil {
		s.violate("driver_invariants", "%s: %v", n.addr, err)
		return
	}
	for _, pi := range n.d.Peers() {
		var out [driver.LaneKV + 1]*driver.Frame
		if o := n.out[pi.Peer]; o != nil {
			out = *o
		}
		outstanding := 0
		for _, f := range out {
			if f != nil {
				outstanding++
			}
		}
		if outstanding != pi.Outstanding {
			s.violate("peer_state", "%s: the driver counts %d frames outstanding to %s, the wire %d", n.addr, pi.Outstanding, pi.Peer, outstanding)
			return
		}
	}
}

// checkPeerGone runs after PeerLost: every room with the peer has ended,
// nothing is queued for it, and the only rooms the driver still counts
// for it are ended ones whose pages (or state) wait for an in-flight KV
// write.
func (s *sim) checkPeerGone(n *node, peer string) {
	for _, ri := range n.d.Rooms() {
		if ri.Peer == peer && !ri.State.Terminal() {
			s.violate("peer_state", "%s: room=%v with %s is still %v after PeerLost", n.addr, ri.ID, peer, ri.State)
			return
		}
	}
	writes := 0
	for _, rd := range n.readers {
		if rd.busy && (rd.page >= 0 || rd.slot >= 0) { // a page or a piece of a state
			writes++
		}
	}
	for _, pi := range n.d.Peers() {
		if pi.Peer == peer && (pi.KVQueued > 0 || pi.Rooms > writes) {
			s.violate("peer_state", "%s: after PeerLost(%s) the driver still holds %+v (%d KV writes in flight)", n.addr, peer, pi, writes)
		}
	}
}

// checkDeadline checks that nothing on n is due longer ago than the
// tolerance: Tick at NextDeadline handles every deadline.
func (s *sim) checkDeadline(n *node) {
	next, ok := n.d.NextDeadline()
	if !ok || next+room.Instant(s.sw.tolerance()) >= s.now {
		return
	}
	s.violate("deadline_missed", "%s: work due at %v is still there at %v (tolerance %v); overdue rooms %v",
		n.addr, next, s.now, s.sw.tolerance(), s.overdue(n))
}

// overdue returns the live rooms of n past their deadline by more than
// the tolerance.
func (s *sim) overdue(n *node) []room.RoomInfo {
	var out []room.RoomInfo
	if next, ok := n.d.NextDeadline(); !ok || next+room.Instant(s.sw.tolerance()) >= s.now {
		return nil // nothing is due (NextDeadline is the earliest deadline)
	}
	for _, ri := range n.d.Rooms() {
		if !ri.State.Terminal() && ri.Deadline != 0 && ri.Deadline+room.Instant(s.sw.tolerance()) < s.now {
			out = append(out, ri)
		}
	}
	return out
}

// watchdogSweep runs the watchdog on every node, as the worker edge does
// periodically: rooms past their deadline by more than the tolerance get
// EventWatchdog, which must never happen (Tick handles deadlines). It
// also probes one live room not past its deadline, which EventWatchdog
// must leave alone, and checks every room's invariants.
func (s *sim) watchdogSweep() {
	s.st.WatchdogSweeps++
	for _, n := range s.nodes {
		if !n.up || s.v != nil {
			continue
		}
		for _, ri := range s.overdue(n) {
			s.call(n, room.Event{}, func() { n.d.Step(s.now, room.Event{Kind: room.EventWatchdog, Room: ri.ID}) })
			s.violate("watchdog_fired", "%s: the watchdog found %v past its deadline (a timer did not fire)", n.addr, ri)
		}
		var ids []room.ID
		s.call(n, room.Event{}, func() { ids = n.d.Watchdog(s.now) })
		if len(ids) > 0 {
			s.violate("watchdog_fired", "%s: Driver.Watchdog failed %v (a timer did not fire)", n.addr, ids)
		}
		s.probeWatchdog(n)
		if err := n.d.CheckInvariants(); err != nil {
			s.violate("driver_invariants", "%s: %v", n.addr, err)
		}
	}
	if next := s.now + room.Instant(s.sw.WatchdogPeriod); next <= s.end {
		s.schedule(next, item{kind: itemWatchdog})
	}
}

// probeWatchdog steps EventWatchdog for a random live room whose deadline
// has not come: it must be rejected and change nothing.
func (s *sim) probeWatchdog(n *node) {
	if len(n.legList) == 0 || s.v != nil {
		return
	}
	l := n.legList[s.rng.IntN(len(n.legList))]
	before, ok := n.d.Room(l.req.id)
	if !ok || before.State.Terminal() || before.Deadline <= s.now {
		return
	}
	s.st.WatchdogProbes++
	var o room.Outcome
	s.call(n, room.Event{}, func() { o = n.d.Step(s.now, room.Event{Kind: room.EventWatchdog, Room: l.req.id}) })
	after, _ := n.d.Room(l.req.id)
	if o != room.OutcomeRejected || after.State != before.State || after.Phase != before.Phase || after.Deadline != before.Deadline {
		s.violate("watchdog_probe", "%s: EventWatchdog for %v (deadline %v, now %v) = %v, left %v",
			n.addr, before, before.Deadline, s.now, o, after)
	}
}

// finalCheck runs when faults have been off for the drain bound: every
// room ended, every page, leg, job, admission and sequence is gone, every
// gauge is zero, every client has its one outcome and every leg its
// answer.
func (s *sim) finalCheck() {
	for _, r := range s.reqs {
		if r.outcome == outcomeNone {
			s.violate("drain", "request %s (room=%v, p=%s, d=%s) has no outcome at %v; legs %+v",
				r.name, r.id, r.p.addr, r.d.addr, s.now, r.legs)
			return
		}
		for k := range r.legs {
			if !r.legs[k].answered {
				s.violate("drain", "request %s: the %s leg was never answered", r.name, legName(int8(k)))
				return
			}
		}
	}
	for _, n := range s.nodes {
		if s.v != nil {
			return
		}
		s.checkDrained(n)
	}
	if s.v == nil {
		s.checkAgreement()
	}
}

// checkAgreement compares, for every room both sides ended (of a request
// whose room id no other request used), prefill's outcome with decode's:
// a calm seed must have none that differ; other seeds count them by what
// each side saw.
func (s *sim) checkAgreement() {
	uses := map[room.ID]int{}
	for _, r := range s.reqs {
		uses[r.id]++
	}
	for _, r := range s.reqs {
		if uses[r.id] > 1 {
			continue // a reused id: the ends on either node may be another request's
		}
		p, okP := s.ends[roomAt{r.id, r.p.addr}]
		d, okD := s.ends[roomAt{r.id, r.d.addr}]
		if !okP || !okD {
			continue
		}
		if (p.To == room.StateSucceeded) == (d.To == room.StateSucceeded) {
			s.st.Agreed++
			continue
		}
		why := "prefill=" + endName(p) + " decode=" + endName(d)
		s.st.Disagreements[why]++
		if s.sw.Calm {
			s.violate("outcome_agreement", "request %s room=%v: %s in a seed without faults", r.name, r.id, why)
			return
		}
	}
}

func endName(t room.Transition) string {
	if t.To == room.StateSucceeded {
		return "succeeded"
	}
	return "failed:" + t.Reason.String()
}

// checkDrained checks one node at the end of the run.
func (s *sim) checkDrained(n *node) {
	if !n.up {
		s.violate("drain", "%s is down after phase two", n.addr)
		return
	}
	if live := n.d.Live(); live != 0 {
		var rooms []string
		for _, ri := range n.d.Rooms() {
			if !ri.State.Terminal() {
				rooms = append(rooms, ri.String())
			}
		}
		s.violate("drain", "%s: %d rooms live at %v: %v", n.addr, live, s.now, rooms)
		return
	}
	c := n.d.Counters()
	for _, st := range room.States() {
		if c.LiveIn(st) != 0 {
			s.violate("drain", "%s: gauge live{state=%v} = %d, want 0", n.addr, st, c.LiveIn(st))
			return
		}
	}
	writes := 0
	for _, w := range n.pool.writes {
		writes += w
	}
	for _, w := range n.pool.stateWrites {
		writes += w
	}
	switch st := n.d.Stats(); {
	case st != (driver.Stats{}):
		s.violate("drain", "%s: driver stats %+v after the drain, want all zero (peers %+v)", n.addr, st, n.d.Peers())
	case len(n.gens) != 0:
		s.violate("drain", "%s: %d sequences still running", n.addr, len(n.gens))
	case len(n.jobs) != 0:
		s.violate("drain", "%s: %d prompts left on the prefill engine", n.addr, len(n.jobs))
	case len(n.admitQ) != 0:
		s.violate("drain", "%s: %d requests left in the admission queue", n.addr, len(n.admitQ))
	case len(n.pool.free) != len(n.pool.pages):
		s.violate("drain", "%s: %d of %d pages free, want all", n.addr, len(n.pool.free), len(n.pool.pages))
	case len(n.pool.stateFree) != len(n.pool.slots):
		s.violate("drain", "%s: %d of %d state slots free, want all", n.addr, len(n.pool.stateFree), len(n.pool.slots))
	case writes != 0 || len(n.inflight) != 0:
		s.violate("drain", "%s: %d KV writes still in flight", n.addr, writes)
	case n.kvHeld != 0:
		s.violate("drain", "%s: %d KV frames never released (a prefill engine's pages held for ever)", n.addr, n.kvHeld)
	}
	for peer, out := range n.out {
		if out[driver.LaneControl] != nil || out[driver.LaneKV] != nil {
			s.violate("drain", "%s: a frame to %s is still outstanding on the wire", n.addr, peer)
		}
	}
	for _, l := range n.legList {
		if !l.answered {
			s.violate("drain", "%s: the %s leg of %s was never answered", n.addr, legName(l.leg), l.req.name)
		}
	}
}
