package room

// The prefill role. A room is created by the router's request (awaiting
// HELLO) or by decode's HELLO (awaiting the request); with both it waits for
// ALLOC, computes the prompt into decode's pages, sends FIRST_TOKEN and
// DONE, and succeeds on DONE_ACK.

// stepPrefill handles a room event on the prefill side; r is nil when the
// room is neither live nor remembered.
func (m *Machine) stepPrefill(now Instant, r *room, ev Event) Outcome {
	if !m.accepts(ev.Kind) {
		return OutcomeRejected
	}
	if r == nil {
		return m.prefillUnknown(now, ev)
	}
	if m.foreign(r, ev) {
		return OutcomeRejected
	}
	switch ev.Kind {
	case EventRequest:
		return m.prefillRequest(now, r, ev)
	case EventHello:
		return m.prefillHello(now, r, ev)
	case EventAlloc:
		return m.prefillAlloc(now, r, ev)
	case EventComputeStarted:
		if !r.computing {
			return OutcomeRejected
		}
		m.note(now, r, ev.Kind)
		return OutcomeApplied
	case EventKVSent:
		return m.prefillKVSent(now, r, ev)
	case EventComputeDone:
		return m.prefillComputeDone(now, r, ev)
	case EventDoneAck:
		if r.phase != PhaseSending || !r.doneSent {
			return m.violation(now, r, ev)
		}
		m.emit(Effect{Kind: EffectReplyDone, Room: r.id, RequestID: r.requestID})
		m.finish(now, r, StateSucceeded, ReasonNone, ev.Kind)
		return OutcomeApplied
	case EventClientAbort:
		return m.localFailure(now, r, ev, ReasonClientAbort)
	case EventEngineError:
		return m.localFailure(now, r, ev, ReasonEngine)
	case EventSendFailed:
		m.fail(now, r, ReasonSendFailed, ev.Kind)
		return OutcomeApplied
	case EventAbort, EventFailed:
		return m.peerFailure(now, r, ev)
	}
	return OutcomeRejected
}

// prefillUnknown handles an event for a room the prefill side neither holds
// nor remembers. Only the request and HELLO create a live room; an ABORT or
// FAILED creates a Failed tombstone so that the request, when it comes, is
// answered with that failure at once (the SGLang silent pin); ALLOC is
// answered with FAILED(unknown_room); the rest is rejected.
func (m *Machine) prefillUnknown(now Instant, ev Event) Outcome {
	switch ev.Kind {
	case EventRequest:
		if m.refuseRequest(ev) {
			return OutcomeAnswered
		}
		r := m.create(now, ev.Room, PhaseAwaitingHello, ev.Kind)
		r.requested, r.requestID = true, ev.RequestID
		return OutcomeApplied
	case EventHello:
		switch {
		case ev.Peer == "":
			return OutcomeRejected
		case m.stopping:
			return m.answerFailed(ev, ReasonShutdown)
		case len(m.live) >= m.cfg.RoomsMax:
			return m.answerFailed(ev, ReasonOverloaded)
		}
		r := m.create(now, ev.Room, PhaseAwaitingRequest, ev.Kind)
		r.peer = ev.Peer
		m.send(r.id, r.peer, FrameHelloAck, ReasonNone)
		return OutcomeParked
	case EventAlloc:
		return m.answerFailed(ev, ReasonUnknownRoom)
	case EventAbort:
		if m.cfg.Planted == PlantedDropEarlyAbort {
			return OutcomeRejected // TEST-ONLY planted bug: SGLang's #24539 no-op
		}
		m.tombstone(now, ev, ReasonPeerAbort)
		return OutcomeParked
	case EventFailed:
		m.tombstone(now, ev, ReasonPeerFailed)
		return OutcomeParked
	}
	return OutcomeRejected
}

// prefillRequest handles the router's request for a live room: it completes
// a room HELLO parked, and is a duplicate (rejected) for any other.
func (m *Machine) prefillRequest(now Instant, r *room, ev Event) Outcome {
	if r.phase != PhaseAwaitingRequest {
		m.reject(ev, ReasonDuplicate)
		return OutcomeAnswered
	}
	r.requested, r.requestID = true, ev.RequestID
	if r.allocated {
		m.startCompute(now, r, ev.Kind)
	} else {
		m.move(now, r, PhaseAwaitingAlloc, ev.Kind)
	}
	return OutcomeApplied
}

// prefillHello handles HELLO for a live room (from its peer, or for a room
// whose peer is not known yet). The first one moves a room awaiting HELLO
// on; a repeat from the same peer gets HELLO_ACK again.
func (m *Machine) prefillHello(now Instant, r *room, ev Event) Outcome {
	if ev.Peer == "" {
		return OutcomeRejected
	}
	m.send(r.id, ev.Peer, FrameHelloAck, ReasonNone)
	if r.phase != PhaseAwaitingHello {
		return OutcomeAnswered
	}
	r.peer = ev.Peer
	m.move(now, r, PhaseAwaitingAlloc, ev.Kind)
	return OutcomeApplied
}

// prefillAlloc handles ALLOC, decode's page list. It is valid once per room,
// after HELLO: awaiting ALLOC it starts the compute; still awaiting the
// router's request (decode admitted fast) it is kept until the request
// comes. (Before the room's HELLO, foreign answers it FAILED(protocol) and
// the room is untouched.) A second ALLOC, one in a later phase, or one with
// no pages or more than AllocPagesMax fails the room (protocol).
func (m *Machine) prefillAlloc(now Instant, r *room, ev Event) Outcome {
	if r.allocated || (r.phase != PhaseAwaitingAlloc && r.phase != PhaseAwaitingRequest) ||
		len(ev.Pages) == 0 || len(ev.Pages) > AllocPagesMax {
		return m.violation(now, r, ev)
	}
	r.pages, r.allocated = cloneInt32(ev.Pages), true
	if r.phase == PhaseAwaitingRequest {
		m.note(now, r, ev.Kind)
		return OutcomeApplied
	}
	m.startCompute(now, r, ev.Kind)
	return OutcomeApplied
}

// startCompute submits the prompt with decode's pages and waits for it.
func (m *Machine) startCompute(now Instant, r *room, on EventKind) {
	r.computing = true
	m.emit(Effect{Kind: EffectStartCompute, Room: r.id, RequestID: r.requestID, Peer: r.peer, Pages: cloneInt32(r.pages)})
	m.move(now, r, PhaseComputing, on)
}

// prefillKVSent records transfer progress (Bytes so far, never less than
// before) while the compute runs: the first moves the room to Sending, each
// restarts the progress deadline.
func (m *Machine) prefillKVSent(now Instant, r *room, ev Event) Outcome {
	return m.progress(now, r, ev, r.computing, PhaseComputing, PhaseSending)
}

// progress records transfer progress on either side: ev.Bytes is the total
// so far and never goes down. The first report moves the room from phase
// before to phase during; each restarts the progress deadline. ok says the
// room is in a state that moves KV at all.
func (m *Machine) progress(now Instant, r *room, ev Event, ok bool, before, during Phase) Outcome {
	if !ok || ev.Bytes < r.bytes || ev.StateBytes < r.stateBytes || ev.StateBytes > ev.Bytes {
		return OutcomeRejected
	}
	r.bytes, r.stateBytes = ev.Bytes, ev.StateBytes
	if r.phase == before {
		m.move(now, r, during, ev.Kind)
	} else {
		m.refresh(now, r)
	}
	return OutcomeApplied
}

// prefillComputeDone sends FIRST_TOKEN then DONE (the edge reported every
// KV byte with EventKVSent before this event) and waits for DONE_ACK.
func (m *Machine) prefillComputeDone(now Instant, r *room, ev Event) Outcome {
	if !r.computing {
		return OutcomeRejected
	}
	if r.stateBytes != m.cfg.StateBytes {
		// The engine ended the prompt without handing over its whole
		// state: decode could not resume from it.
		m.fail(now, r, ReasonEngine, ev.Kind)
		return OutcomeApplied
	}
	r.computing, r.doneSent, r.doneAt = false, true, now
	m.emit(Effect{Kind: EffectSend, Room: r.id, Peer: r.peer, Frame: FrameFirstToken, Token: ev.Token, Logprob: ev.Logprob})
	m.emit(Effect{Kind: EffectSend, Room: r.id, Peer: r.peer, Frame: FrameDone, PageCount: len(r.pages), Bytes: r.bytes, StateBytes: r.stateBytes})
	if r.phase == PhaseComputing {
		m.move(now, r, PhaseSending, ev.Kind)
	} else {
		m.refresh(now, r)
		m.note(now, r, ev.Kind)
	}
	return OutcomeApplied
}
