package sim

import (
	"bytes"
	"slices"

	"tandem/internal/pd/room"
)

// The invariants. checkStep runs after every Step, checkDeadline after
// every batch of steps on a node, the watchdog sweep periodically, and
// finalCheck once faults have been off for the drain bound. Each
// violation names its invariant:
//
//   - outcome: Step returned an outcome outside the enum.
//   - terminal_changed: a transition left a terminal state, or an event
//     changed or forgot a terminal room.
//   - created_state: an event created a room other than the ways the
//     protocol allows (the router's request; on prefill a HELLO parks, an
//     ABORT or FAILED leaves a tombstone), or Parked without creating.
//   - abort_before_request: prefill took the router's request (or HELLO)
//     as a new live room although an ABORT or FAILED for it had arrived
//     first and is still remembered: the request must be answered at once
//     (SGLang's silent pin).
//   - release_once: a room ended without exactly one EffectRelease in the
//     same step, or released without ending.
//   - prefill_success: prefill succeeded a room that no decode verified.
//   - deadline_missed: a node holds a live room (or a tombstone) past its
//     deadline by more than the scheduling tolerance; tick: a Tick left
//     work due.
//   - watchdog_fired: the periodic watchdog found a room past its deadline
//     (a timer did not fire). watchdog_probe: EventWatchdog for a room not
//     past its deadline changed it.
//   - core_invariants: Machine.CheckInvariants failed; panic: the core (or
//     the simulator) panicked.
//   - pages, resume, edge: a page freed twice or by a non-owner, a resume
//     with incomplete KV or the wrong token, an effect the edge cannot
//     carry out.
//   - leg_answered_twice, one_outcome: a leg answered twice, a client
//     given two outcomes.
//   - drain: after the drain bound a room is live, a gauge is not zero, a
//     page, leg, job, admission or sequence is left, a client has no
//     outcome or a leg no answer.

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
	if global(e.Kind) {
		return snap{}
	}
	st, ph, ok := n.m.State(e.Room)
	return snap{known: ok, state: st, phase: ph}
}

// checkStep checks one Step: its outcome, transitions and releases, and
// what happened to the room the event named.
func (s *sim) checkStep(n *node, e room.Event, o room.Outcome, before snap, rd room.Ready) {
	if o < room.OutcomeApplied || o > room.OutcomeRejected {
		s.violate("outcome", "%s: Step(%v) = %v", n.addr, e.Kind, o)
		return
	}
	s.checkEnds(n, rd)
	if global(e.Kind) || s.v != nil {
		return
	}
	st, ph, known := n.m.State(e.Room)
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
		if t == nil || !t.abortFirst || s.now >= t.abortAt+room.Instant(s.sw.Room.TombstoneTTL) || n.m.Counters().Evicted != 0 {
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

// checkEnds checks that every room that ended in the step released
// exactly once in it, and nothing else released; it records the ends.
func (s *sim) checkEnds(n *node, rd room.Ready) {
	var ended, released []room.ID
	for _, t := range rd.Transitions {
		if t.From.Terminal() {
			s.violate("terminal_changed", "%s: transition out of a terminal state: %v", n.addr, t)
			return
		}
		if !t.To.Terminal() {
			continue
		}
		ended = append(ended, t.Room)
		tr := n.trackOf(t.Room)
		tr.ended++
		tr.terminal = t.To
		switch {
		case t.To == room.StateSucceeded && n.role == room.RoleDecode:
			s.verified[roomAt{t.Room, n.addr}] = true
		case t.To == room.StateSucceeded && !s.verified[roomAt{t.Room, releasePeer(rd, t.Room)}]:
			s.violate("prefill_success", "%s: room=%v succeeded on prefill but its decode node %q never verified its KV",
				n.addr, t.Room, releasePeer(rd, t.Room))
			return
		}
	}
	for _, e := range rd.Effects {
		if e.Kind == room.EffectRelease {
			released = append(released, e.Room)
		}
	}
	if len(ended) == 0 && len(released) == 0 {
		return
	}
	less := func(a, b room.ID) int { return bytes.Compare(a[:], b[:]) }
	slices.SortFunc(ended, less)
	slices.SortFunc(released, less)
	if !slices.Equal(ended, released) || len(slices.Compact(slices.Clone(ended))) != len(ended) {
		s.violate("release_once", "%s: rooms ended in one step %v, released %v; want each exactly once", n.addr, ended, released)
	}
}

// releasePeer returns the peer the room's EffectRelease in rd names.
func releasePeer(rd room.Ready, id room.ID) string {
	for _, e := range rd.Effects {
		if e.Kind == room.EffectRelease && e.Room == id {
			return e.Peer
		}
	}
	return ""
}

// checkDeadline checks that nothing on n is due longer ago than the
// tolerance: Tick at NextDeadline handles every deadline.
func (s *sim) checkDeadline(n *node) {
	next, ok := n.m.NextDeadline()
	if !ok || next+room.Instant(s.sw.tolerance()) >= s.now {
		return
	}
	s.violate("deadline_missed", "%s: work due at %v is still there at %v (tolerance %v); overdue rooms %v",
		n.addr, next, s.now, s.sw.tolerance(), n.m.Overdue(s.now-room.Instant(s.sw.tolerance()), 4))
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
		for _, id := range n.m.Overdue(s.now-room.Instant(s.sw.tolerance()), 0) {
			ri, _ := n.m.Room(id)
			s.step(n, room.Event{Kind: room.EventWatchdog, Room: id})
			s.violate("watchdog_fired", "%s: the watchdog found %v past its deadline (a timer did not fire)", n.addr, ri)
		}
		s.probeWatchdog(n)
		if err := n.m.CheckInvariants(); err != nil {
			s.violate("core_invariants", "%s: %v", n.addr, err)
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
	before, ok := n.m.Room(l.req.id)
	if !ok || before.State.Terminal() || before.Deadline <= s.now {
		return
	}
	s.st.WatchdogProbes++
	o := s.step(n, room.Event{Kind: room.EventWatchdog, Room: l.req.id})
	after, _ := n.m.Room(l.req.id)
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
}

// checkDrained checks one node at the end of the run.
func (s *sim) checkDrained(n *node) {
	if !n.up {
		s.violate("drain", "%s is down after phase two", n.addr)
		return
	}
	if live := n.m.Live(); live != 0 {
		var rooms []string
		for _, ri := range n.m.Rooms() {
			if !ri.State.Terminal() {
				rooms = append(rooms, ri.String())
			}
		}
		s.violate("drain", "%s: %d rooms live at %v: %v", n.addr, live, s.now, rooms)
		return
	}
	c := n.m.Counters()
	for _, st := range room.States() {
		if c.LiveIn(st) != 0 {
			s.violate("drain", "%s: gauge live{state=%v} = %d, want 0", n.addr, st, c.LiveIn(st))
			return
		}
	}
	switch {
	case len(n.legs) != 0:
		s.violate("drain", "%s: %d legs left", n.addr, len(n.legs))
	case len(n.gens) != 0:
		s.violate("drain", "%s: %d sequences still running", n.addr, len(n.gens))
	case len(n.jobs) != 0:
		s.violate("drain", "%s: %d prompts left on the prefill engine", n.addr, len(n.jobs))
	case len(n.admitQ) != 0:
		s.violate("drain", "%s: %d requests left in the admission queue", n.addr, len(n.admitQ))
	case len(n.free) != len(n.pages):
		s.violate("drain", "%s: %d of %d pages free, want all", n.addr, len(n.free), len(n.pages))
	}
	for _, l := range n.legList {
		if !l.answered {
			s.violate("drain", "%s: the %s leg of %s was never answered", n.addr, legName(l.leg), l.req.name)
		}
	}
	if err := n.m.CheckInvariants(); err != nil {
		s.violate("core_invariants", "%s: %v", n.addr, err)
	}
}
