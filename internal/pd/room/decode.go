package room

// The decode role. The router's request creates the room and sends HELLO to
// prefill at once; HELLO_ACK starts admission; the engine's pages go to
// prefill in ALLOC; KV arrives; DONE is verified and the request resumes
// from the first token.

// stepDecode handles a room event on the decode side; r is nil when the
// room is neither live nor remembered.
func (m *Machine) stepDecode(now Instant, r *room, ev Event) Outcome {
	if !m.accepts(ev.Kind) {
		return OutcomeRejected
	}
	if r == nil {
		return m.decodeUnknown(now, ev)
	}
	if m.foreign(r, ev) {
		return OutcomeRejected
	}
	switch ev.Kind {
	case EventRequest:
		m.reject(ev, ReasonDuplicate)
		return OutcomeAnswered
	case EventHelloAck:
		if r.phase != PhaseHandshake {
			return m.violation(now, r, ev)
		}
		r.admitting = true
		m.emit(Effect{Kind: EffectAdmit, Room: r.id, RequestID: r.requestID})
		m.move(now, r, PhaseAdmission, ev.Kind)
		return OutcomeApplied
	case EventAdmitted:
		return m.decodeAdmitted(now, r, ev)
	case EventKVReceived:
		return m.decodeKVReceived(now, r, ev)
	case EventFirstToken:
		if !receiving(r) || r.haveToken {
			return m.violation(now, r, ev)
		}
		r.token, r.logprob, r.haveToken = ev.Token, ev.Logprob, true
		m.note(now, r, ev.Kind)
		return OutcomeApplied
	case EventDone:
		return m.decodeDone(now, r, ev)
	case EventChecksumError:
		if !receiving(r) {
			return OutcomeRejected
		}
		m.fail(now, r, ReasonChecksum, ev.Kind)
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

// receiving reports whether the room waits for KV, FIRST_TOKEN or DONE.
func receiving(r *room) bool { return r.phase == PhaseAwaitingKV || r.phase == PhaseReceiving }

// decodeUnknown handles an event for a room the decode side neither holds
// nor remembers. Only the request creates one (it must name the prefill
// peer); pages reserved for it are freed; DONE is answered with
// FAILED(unknown_room) so prefill stops waiting; the rest is rejected.
func (m *Machine) decodeUnknown(now Instant, ev Event) Outcome {
	switch ev.Kind {
	case EventRequest:
		if ev.Peer == "" {
			m.reject(ev, ReasonBadRequest)
			return OutcomeAnswered
		}
		if m.refuseRequest(ev) {
			return OutcomeAnswered
		}
		r := m.create(now, ev.Room, PhaseHandshake, ev.Kind)
		r.requested, r.requestID, r.peer = true, ev.RequestID, ev.Peer
		m.send(r.id, r.peer, FrameHello, ReasonNone)
		return OutcomeApplied
	case EventAdmitted:
		m.freePages(ev)
	case EventDone:
		return m.answerFailed(ev, ReasonUnknownRoom)
	}
	return OutcomeRejected
}

// decodeAdmitted takes the engine's pages for a room in admission and sends
// them to prefill in ALLOC. Pages for a room that cannot take them are freed
// at once: they must never leak. An admission with no pages, or more than an
// ALLOC may carry, is the engine's error: the pages are freed and the room
// fails (engine) rather than send prefill an ALLOC it must refuse.
func (m *Machine) decodeAdmitted(now Instant, r *room, ev Event) Outcome {
	if r.phase != PhaseAdmission || !r.admitting {
		m.freePages(ev)
		return OutcomeRejected
	}
	if len(ev.Pages) == 0 || len(ev.Pages) > AllocPagesMax {
		m.freePages(ev)
		m.fail(now, r, ReasonEngine, ev.Kind)
		return OutcomeRejected
	}
	r.admitting = false
	r.pages, r.allocated = cloneInt32(ev.Pages), true
	m.emit(Effect{Kind: EffectSend, Room: r.id, Peer: r.peer, Frame: FrameAlloc, Pages: cloneInt32(r.pages)})
	m.move(now, r, PhaseAwaitingKV, ev.Kind)
	return OutcomeApplied
}

// decodeKVReceived records KV stored (Bytes so far, never less than before):
// the first moves the room to Receiving, each restarts the progress deadline.
func (m *Machine) decodeKVReceived(now Instant, r *room, ev Event) Outcome {
	return m.progress(now, r, ev, receiving(r), PhaseAwaitingKV, PhaseReceiving)
}

// doneMatches reports whether DONE's counts match what decode stored: every
// byte, and of them the whole state (Config.StateBytes), with its checksum.
func (m *Machine) doneMatches(r *room, ev Event) bool {
	if m.cfg.Planted == PlantedIgnoreState {
		return ev.Bytes-ev.StateBytes == r.bytes-r.stateBytes
	}
	return ev.Bytes == r.bytes && ev.StateBytes == r.stateBytes && r.stateBytes == m.cfg.StateBytes && !ev.StateBad
}

// decodeDone verifies DONE against what arrived (page count, first token,
// bytes, the state's bytes and checksum). When it matches the request resumes from the first token and
// prefill gets DONE_ACK; otherwise the room fails (protocol) with ABORT.
func (m *Machine) decodeDone(now Instant, r *room, ev Event) Outcome {
	if !receiving(r) {
		return m.violation(now, r, ev)
	}
	if ev.PageCount != len(r.pages) || !r.haveToken || !m.doneMatches(r, ev) {
		m.fail(now, r, ReasonProtocol, ev.Kind)
		return OutcomeApplied
	}
	m.emit(Effect{Kind: EffectResume, Room: r.id, RequestID: r.requestID, Token: r.token, Logprob: r.logprob, Pages: cloneInt32(r.pages)})
	m.send(r.id, r.peer, FrameDoneAck, ReasonNone)
	m.finish(now, r, StateSucceeded, ReasonNone, ev.Kind)
	return OutcomeApplied
}
