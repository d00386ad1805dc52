package room

import (
	"cmp"
	"slices"

	"tandem/internal/invariant"
)

// phaseTable gives each live phase its state, the role that uses it and the
// reason a room fails with when its deadline passes. PhaseDone is terminal
// and has none.
var phaseTable = [PhaseDone + 1]struct {
	state   State
	role    Role
	timeout Reason
}{
	PhaseAwaitingHello:   {StateBootstrapping, RolePrefill, ReasonHelloTimeout},
	PhaseAwaitingRequest: {StateBootstrapping, RolePrefill, ReasonRequestTimeout},
	PhaseAwaitingAlloc:   {StateBootstrapping, RolePrefill, ReasonAllocTimeout},
	PhaseComputing:       {StateWaitingForInput, RolePrefill, ReasonPrefillTimeout},
	PhaseSending:         {StateTransferring, RolePrefill, ReasonProgressTimeout},
	PhaseHandshake:       {StateBootstrapping, RoleDecode, ReasonHandshakeTimeout},
	PhaseAdmission:       {StateBootstrapping, RoleDecode, ReasonAdmissionTimeout},
	PhaseAwaitingKV:      {StateWaitingForInput, RoleDecode, ReasonPrefillTimeout},
	PhaseReceiving:       {StateTransferring, RoleDecode, ReasonProgressTimeout},
}

// timeout returns how long a room may stay in live phase p.
func (m *Machine) timeout(p Phase) Duration {
	switch p {
	case PhaseAwaitingHello:
		return m.cfg.HelloTimeout
	case PhaseAwaitingRequest:
		return m.cfg.RequestTimeout
	case PhaseAwaitingAlloc:
		return m.cfg.AllocTimeout
	case PhaseComputing, PhaseAwaitingKV:
		return m.cfg.PrefillTimeout
	case PhaseSending, PhaseReceiving:
		return m.cfg.ProgressTimeout
	case PhaseHandshake:
		return m.cfg.HandshakeTimeout
	case PhaseAdmission:
		return m.cfg.AdmissionTimeout
	}
	invariant.Failf("room", "no timeout for phase %v", p)
	return 0
}

// create makes a live room in phase p.
func (m *Machine) create(now Instant, id ID, p Phase, on EventKind) *room {
	m.seq++
	r := &room{id: id, seq: m.seq, created: now, heapIdx: -1}
	m.rooms[id] = r
	m.move(now, r, p, on)
	return r
}

// move puts a live room into phase p with that phase's deadline from now.
func (m *Machine) move(now Instant, r *room, p Phase, on EventKind) {
	if phaseTable[p].role != m.cfg.Role || r.state.Terminal() {
		invariant.Failf("room", "room %v: move %v/%v -> %v on %v", r.id, r.state, r.phase, p, on)
	}
	from, fromPhase := r.state, r.phase
	if from != 0 {
		m.c.live[from]--
	}
	r.state, r.phase = phaseTable[p].state, p
	r.deadline = now + Instant(m.timeout(p))
	m.c.live[r.state]++
	if r.heapIdx < 0 {
		m.live.push(r)
	} else {
		m.live.fix(r.heapIdx)
	}
	m.record(r, Transition{
		Room: r.id, At: now, From: from, FromPhase: fromPhase, To: r.state, ToPhase: p,
		Event: on, Deadline: r.deadline,
	}, true)
}

// refresh restarts the current phase's deadline from now (progress).
func (m *Machine) refresh(now Instant, r *room) {
	r.deadline = now + Instant(m.timeout(r.phase))
	m.live.fix(r.heapIdx)
}

// note records an event that changes no state in the room's history only.
func (m *Machine) note(now Instant, r *room, on EventKind) {
	m.record(r, Transition{
		Room: r.id, At: now, From: r.state, FromPhase: r.phase, To: r.state, ToPhase: r.phase,
		Event: on, Deadline: r.deadline,
	}, false)
}

// record appends t to the room's bounded history and, when ready, to Ready.
func (m *Machine) record(r *room, t Transition, ready bool) {
	if len(r.history) == historyMax {
		// Never overwrite an entry: RoomInfo.History shares the backing
		// array (see info), so the oldest is dropped into a new one.
		r.history = slices.Clip(r.history[1:])
	}
	r.history = append(r.history, t)
	if ready {
		m.ready.Transitions = append(m.ready.Transitions, t)
	}
}

// fail ends a live room with reason: it tells the peer (unless the peer
// caused it), cancels the local compute and request, then finishes.
func (m *Machine) fail(now Instant, r *room, reason Reason, on EventKind) {
	if f := m.noticeFrame(reason); f != 0 && r.peer != "" {
		m.send(r.id, r.peer, f, reason)
	}
	if r.computing {
		m.emit(Effect{Kind: EffectCancelCompute, Room: r.id, RequestID: r.requestID})
	}
	if r.requested {
		m.emit(Effect{Kind: EffectCancelRequest, Room: r.id, RequestID: r.requestID, Reason: reason})
	}
	m.finish(now, r, StateFailed, reason, on)
}

// noticeFrame returns the frame that tells the peer about a local failure
// with reason, or 0 when the peer caused it (it knows, or is gone). The
// decode side always sends ABORT; the prefill side sends FAILED for engine
// and protocol failures and ABORT for the rest.
func (m *Machine) noticeFrame(reason Reason) FrameKind {
	switch reason {
	case ReasonPeerAbort, ReasonPeerFailed, ReasonPeerLost, ReasonPeerUnreachable:
		return 0
	case ReasonEngine, ReasonProtocol:
		if m.cfg.Role == RolePrefill {
			return FrameFailed
		}
	}
	return FrameAbort
}

// finish makes the room terminal, emits its one EffectRelease last and
// remembers it as a tombstone.
func (m *Machine) finish(now Instant, r *room, to State, reason Reason, on EventKind) {
	if r.state.Terminal() || r.released || !to.Terminal() {
		invariant.Failf("room", "room %v: finish %v -> %v twice or to a live state", r.id, r.state, to)
	}
	from, fromPhase := r.state, r.phase
	if r.heapIdx >= 0 {
		m.live.remove(r)
		m.c.live[from]--
	}
	r.state, r.phase, r.reason, r.deadline, r.ended = to, PhaseDone, reason, 0, now
	r.computing, r.admitting = false, false
	m.record(r, Transition{
		Room: r.id, At: now, From: from, FromPhase: fromPhase, To: to, ToPhase: PhaseDone,
		Event: on, Reason: reason,
	}, true)
	release := Effect{Kind: EffectRelease, Room: r.id, RequestID: r.requestID, Peer: r.peer, Reason: reason}
	if to == StateSucceeded {
		m.c.Successes++
	} else {
		m.c.failures[reason]++
		if m.cfg.Role == RoleDecode {
			release.Pages = r.pages // reserved for the KV; nobody else owns them
		}
	}
	r.released = true
	m.emit(release)
	m.remember(r)
}

// tombstone records a room that never lived here but must not be created
// later: an ABORT or FAILED frame for a room the prefill side does not know
// yet (SGLang's silent pin). It is born Failed and answers later requests.
func (m *Machine) tombstone(now Instant, ev Event, reason Reason) {
	m.seq++
	r := &room{id: ev.Room, seq: m.seq, created: now, heapIdx: -1, peer: ev.Peer, peerReason: peerReason(ev.Reason)}
	m.rooms[ev.Room] = r
	m.finish(now, r, StateFailed, reason, ev.Kind)
}

// remember appends a terminal room to the tombstones, forgetting the oldest
// when more than TombstonesMax are remembered.
func (m *Machine) remember(r *room) {
	m.tombs = append(m.tombs, r)
	if len(m.tombs)-m.tombHead > m.cfg.TombstonesMax {
		m.forgetOldest()
		m.c.Evicted++
	}
}

// forgetOldest drops the oldest tombstone.
func (m *Machine) forgetOldest() {
	r := m.tombs[m.tombHead]
	m.tombs[m.tombHead] = nil
	m.tombHead++
	if m.rooms[r.id] != r {
		invariant.Failf("room", "room %v: tombstone is not the room on record", r.id)
	}
	delete(m.rooms, r.id)
	if m.tombHead >= 64 && 2*m.tombHead >= len(m.tombs) {
		n := copy(m.tombs, m.tombs[m.tombHead:])
		clear(m.tombs[n:])
		m.tombs = m.tombs[:n]
		m.tombHead = 0
	}
}

// expire fails the rooms whose deadline has come and forgets the
// tombstones whose TTL has passed.
func (m *Machine) expire(now Instant) {
	for len(m.live) > 0 && m.live[0].deadline <= now {
		r := m.live[0]
		m.fail(now, r, phaseTable[r.phase].timeout, EventTick)
	}
	for m.tombHead < len(m.tombs) && m.expires(m.tombs[m.tombHead]) <= now {
		m.forgetOldest()
		m.c.Forgotten++
	}
}

// liveByAge returns the live rooms, oldest first (a copy: failing them
// changes the heap).
func (m *Machine) liveByAge() []*room {
	rs := slices.Clone(m.live)
	slices.SortFunc(rs, bySeq)
	return rs
}

// peerLost fails every live room whose peer is ev.Peer.
func (m *Machine) peerLost(now Instant, ev Event) Outcome {
	if ev.Peer == "" {
		return OutcomeRejected
	}
	for _, r := range m.liveByAge() {
		if r.peer == ev.Peer {
			m.fail(now, r, ReasonPeerLost, ev.Kind)
		}
	}
	return OutcomeApplied
}

// peerAlive extends the deadline of every prefill room that waits for
// ev.Peer's DONE_ACK to now + ProgressTimeout, capped at DoneAckWaitMax
// progress timeouts after its DONE (see "Progress" in api.go). Decode
// rooms measure progress themselves: there it changes nothing.
func (m *Machine) peerAlive(now Instant, ev Event) Outcome {
	if ev.Peer == "" {
		return OutcomeRejected
	}
	var waiting []*room
	for _, r := range m.live {
		if m.cfg.Role == RolePrefill && r.peer == ev.Peer && r.phase == PhaseSending && r.doneSent {
			waiting = append(waiting, r)
		}
	}
	for _, r := range waiting {
		d := min(now+Instant(m.cfg.ProgressTimeout), r.doneAt+Instant(DoneAckWaitMax*m.cfg.ProgressTimeout))
		if d > r.deadline {
			r.deadline = d
			m.live.fix(r.heapIdx)
		}
	}
	return OutcomeApplied
}

// shutdown fails every live room and refuses new ones from now on.
func (m *Machine) shutdown(now Instant) {
	m.stopping = true
	for _, r := range m.liveByAge() {
		m.fail(now, r, ReasonShutdown, EventShutdown)
	}
}

// emit appends an effect to Ready.
func (m *Machine) emit(e Effect) { m.ready.Effects = append(m.ready.Effects, e) }

// send emits a control frame with an optional reason.
func (m *Machine) send(id ID, to string, f FrameKind, reason Reason) {
	m.emit(Effect{Kind: EffectSend, Room: id, Peer: to, Frame: f, Reason: reason})
}

// peerReason keeps a reason a peer sent when it is one we know.
func peerReason(r Reason) Reason {
	if r >= reasonCount {
		return ReasonNone
	}
	return r
}

// bySeq orders rooms by age.
func bySeq(a, b *room) int { return cmp.Compare(a.seq, b.seq) }
