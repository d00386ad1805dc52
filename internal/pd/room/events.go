package room

// Handling shared by both roles: which events a role accepts, frames from
// the wrong peer, terminal rooms, rejections and failures.

// prefillEvents and decodeEvents say which room events each role accepts;
// the rest are rejected (PeerLost, Shutdown, Tick and Watchdog are handled
// by Step).
var (
	prefillEvents = kindSet(EventRequest, EventClientAbort, EventHello, EventAlloc, EventComputeStarted,
		EventKVSent, EventComputeDone, EventDoneAck, EventAbort, EventFailed, EventEngineError, EventSendFailed)
	decodeEvents = kindSet(EventRequest, EventClientAbort, EventHelloAck, EventAdmitted, EventKVReceived,
		EventFirstToken, EventDone, EventAbort, EventFailed, EventChecksumError, EventEngineError, EventSendFailed)
	frameEvents = kindSet(EventHello, EventHelloAck, EventAlloc, EventFirstToken, EventDone, EventDoneAck,
		EventAbort, EventFailed)
	// answeredEvents are the frames whose sender waits for an answer; only
	// they are ever answered with FAILED (never ABORT or FAILED: no storms).
	answeredEvents = kindSet(EventHello, EventAlloc, EventDone)
)

func kindSet(kinds ...EventKind) (set [eventKindCount]bool) {
	for _, k := range kinds {
		set[k] = true
	}
	return set
}

// in reports whether k is in set (false for kinds out of range).
func in(set *[eventKindCount]bool, k EventKind) bool { return int(k) < len(set) && set[k] }

// accepts reports whether the machine's role takes room events of kind k.
func (m *Machine) accepts(k EventKind) bool {
	if m.cfg.Role == RolePrefill {
		return in(&prefillEvents, k)
	}
	return in(&decodeEvents, k)
}

// foreign reports whether ev is a frame for the live room r from a peer
// other than the room's. Such a frame never changes the room; if its sender
// waits for an answer it gets FAILED(protocol). While the room's peer is not
// known (prefill, awaiting HELLO) only HELLO, ABORT and FAILED are taken,
// from anyone: the 128-bit room id is the credential, and an ABORT must
// always end the room.
func (m *Machine) foreign(r *room, ev Event) bool {
	if !in(&frameEvents, ev.Kind) || (r.peer != "" && ev.Peer == r.peer) {
		return false
	}
	if r.peer == "" && (ev.Kind == EventHello || ev.Kind == EventAbort || ev.Kind == EventFailed) {
		return false
	}
	m.answerFailed(ev, ReasonProtocol)
	return true
}

// answerFailed answers a frame that waits for an answer with FAILED(reason)
// and returns OutcomeAnswered, or returns OutcomeRejected when the frame
// gets no answer (or has no sender to answer).
func (m *Machine) answerFailed(ev Event, reason Reason) Outcome {
	if !in(&answeredEvents, ev.Kind) || ev.Peer == "" {
		return OutcomeRejected
	}
	m.send(ev.Room, ev.Peer, FrameFailed, reason)
	return OutcomeAnswered
}

// stepTerminal handles any event for a terminal room: the room never
// changes. A request gets its answer (duplicate, or on the prefill side the
// room's failure), a HELLO to a failed prefill room gets FAILED at once, and
// pages the decode engine reserved too late are freed. The rest is late.
func (m *Machine) stepTerminal(r *room, ev Event) Outcome {
	m.c.Late++
	switch ev.Kind {
	case EventRequest:
		if m.cfg.Role == RolePrefill && r.state == StateFailed {
			m.reject(ev, r.reason)
		} else {
			m.reject(ev, ReasonDuplicate)
		}
		return OutcomeAnswered
	case EventHello:
		if m.cfg.Role == RolePrefill && r.state == StateFailed {
			if o := m.answerFailed(ev, r.reason); o == OutcomeAnswered {
				return o
			}
		}
	case EventHelloAck:
		// decode gave up on the room in its handshake (timeout, peer
		// lost) but prefill took it after all: tell it, or it waits for
		// its alloc deadline. ABORT is never answered, so this cannot
		// storm; a room the peer itself ended gets nothing.
		if m.cfg.Role == RoleDecode && failedInHandshake(r) && ev.Peer != "" && ev.Peer == r.peer {
			m.send(r.id, r.peer, FrameAbort, r.reason)
			return OutcomeAnswered
		}
	case EventAdmitted:
		if m.cfg.Role == RoleDecode {
			m.freePages(ev)
		}
	}
	return OutcomeLate
}

// failedInHandshake reports whether a decode room failed while waiting for
// HELLO_ACK, for a reason of its own (not the peer's ABORT or FAILED).
func failedInHandshake(r *room) bool {
	if r.state != StateFailed || r.reason == ReasonPeerAbort || r.reason == ReasonPeerFailed || len(r.history) == 0 {
		return false
	}
	return r.history[len(r.history)-1].FromPhase == PhaseHandshake
}

// reject answers the router's request at once with reason.
func (m *Machine) reject(ev Event, reason Reason) {
	m.emit(Effect{Kind: EffectReject, Room: ev.Room, RequestID: ev.RequestID, Reason: reason})
}

// refuseRequest rejects a request for a new room when the worker is
// stopping or RoomsMax rooms are live, and reports whether it did.
func (m *Machine) refuseRequest(ev Event) bool {
	switch {
	case m.stopping:
		m.reject(ev, ReasonShutdown)
	case len(m.live) >= m.cfg.RoomsMax:
		m.reject(ev, ReasonOverloaded)
	default:
		return false
	}
	return true
}

// freePages hands pages the decode engine reserved, that no room takes,
// straight back.
func (m *Machine) freePages(ev Event) {
	if len(ev.Pages) == 0 {
		return
	}
	m.emit(Effect{Kind: EffectFreePages, Room: ev.Room, Pages: cloneInt32(ev.Pages)})
}

// violation fails a live room whose own peer sent a frame the protocol does
// not allow in its state; the frame is counted as rejected.
func (m *Machine) violation(now Instant, r *room, ev Event) Outcome {
	m.fail(now, r, ReasonProtocol, ev.Kind)
	return OutcomeRejected
}

// localFailure fails a room with a router request on a local event
// (client abort, engine error).
func (m *Machine) localFailure(now Instant, r *room, ev Event, reason Reason) Outcome {
	if !r.requested {
		return OutcomeRejected
	}
	m.fail(now, r, reason, ev.Kind)
	return OutcomeApplied
}

// peerFailure fails a live room on the peer's ABORT or FAILED frame; the
// peer is not answered.
func (m *Machine) peerFailure(now Instant, r *room, ev Event) Outcome {
	reason := ReasonPeerAbort
	if ev.Kind == EventFailed {
		reason = ReasonPeerFailed
	}
	r.peerReason = peerReason(ev.Reason)
	m.fail(now, r, reason, ev.Kind)
	return OutcomeApplied
}

// cloneInt32 copies pages so the machine never shares the caller's slice.
func cloneInt32(p []int32) []int32 {
	if p == nil {
		return nil
	}
	return append(make([]int32, 0, len(p)), p...)
}
