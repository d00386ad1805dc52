package room

import "strconv"

// The trace line format. Transitions, effects and rooms print as one line
// each, "key=value" fields in a fixed order, zero fields left out. The same
// lines appear in the scenario files, on /debug/rooms and in the simulator's
// traces, so a failure in one can be searched for in the others.

// pagesShownMax bounds the page indices a line prints; the rest are counted.
const pagesShownMax = 8

// String formats the transition as one trace line, for example
// "5ms room=<id> bootstrapping/awaiting_hello -> bootstrapping/awaiting_alloc on=hello deadline=1s"
// or "9ms room=<id> waiting_for_input/computing -> failed on=abort reason=peer_abort".
func (t Transition) String() string {
	b := make([]byte, 0, 128)
	b = append(b, t.At.String()...)
	b = append(b, " room="...)
	b = append(b, t.Room.String()...)
	b = append(b, ' ')
	b = append(b, statePhase(t.From, t.FromPhase)...)
	b = append(b, " -> "...)
	b = append(b, statePhase(t.To, t.ToPhase)...)
	b = append(b, " on="...)
	b = append(b, t.Event.String()...)
	if t.Reason != ReasonNone {
		b = append(b, " reason="...)
		b = append(b, t.Reason.String()...)
	}
	if t.Deadline != 0 {
		b = append(b, " deadline="...)
		b = append(b, t.Deadline.String()...)
	}
	return string(b)
}

// statePhase prints "state/phase", or just the state when it is terminal
// or none.
func statePhase(s State, p Phase) string {
	if s == 0 || s.Terminal() || p == 0 {
		return s.String()
	}
	return s.String() + "/" + p.String()
}

// String formats the effect as one trace line, for example
// "send room=<id> to=d1 frame=done page_count=2 bytes=4096" or
// "reject room=<id> req=r2 reason=duplicate_room".
func (e Effect) String() string {
	b := make([]byte, 0, 128)
	b = append(b, e.Kind.String()...)
	b = append(b, " room="...)
	b = append(b, e.Room.String()...)
	b = field(b, "req", e.RequestID)
	b = field(b, "to", e.Peer)
	if e.Frame != 0 {
		b = field(b, "frame", e.Frame.String())
	}
	if e.Reason != ReasonNone {
		b = field(b, "reason", e.Reason.String())
	}
	if e.Frame == FrameFirstToken || e.Kind == EffectResume {
		b = field(b, "token", strconv.FormatInt(int64(e.Token), 10))
		b = field(b, "logprob", strconv.FormatFloat(float64(e.Logprob), 'g', -1, 32))
	}
	if len(e.Pages) > 0 {
		b = field(b, "pages", formatPages(e.Pages))
	}
	if e.Frame == FrameDone {
		b = field(b, "page_count", strconv.Itoa(e.PageCount))
		b = field(b, "bytes", strconv.FormatInt(e.Bytes, 10))
	}
	return string(b)
}

// String formats the room as one line (without its history), for example
// "room=<id> req=r1 role=prefill state=failed reason=peer_abort peer=d1 created=5ms ended=9ms expires=10s9ms".
func (ri RoomInfo) String() string {
	b := make([]byte, 0, 128)
	b = append(b, "room="...)
	b = append(b, ri.ID.String()...)
	b = field(b, "req", ri.RequestID)
	b = field(b, "role", ri.Role.String())
	b = field(b, "state", statePhase(ri.State, ri.Phase))
	if ri.Reason != ReasonNone {
		b = field(b, "reason", ri.Reason.String())
	}
	if ri.PeerReason != ReasonNone {
		b = field(b, "peer_reason", ri.PeerReason.String())
	}
	b = field(b, "peer", ri.Peer)
	b = field(b, "created", ri.Created.String())
	if ri.Deadline != 0 {
		b = field(b, "deadline", ri.Deadline.String())
	}
	if ri.State.Terminal() {
		b = field(b, "ended", ri.Ended.String())
		b = field(b, "expires", ri.Expires.String())
	}
	if ri.Bytes != 0 {
		b = field(b, "bytes", strconv.FormatInt(ri.Bytes, 10))
	}
	if ri.PageCount != 0 {
		b = field(b, "page_count", strconv.Itoa(ri.PageCount))
	}
	return string(b)
}

// field appends " key=value" unless value is empty.
func field(b []byte, key, value string) []byte {
	if value == "" {
		return b
	}
	b = append(b, ' ')
	b = append(b, key...)
	b = append(b, '=')
	b = append(b, value...)
	return b
}

// formatPages prints "3,4,5", or the first pagesShownMax and "+N".
func formatPages(pages []int32) string {
	b := make([]byte, 0, 128)
	for i, p := range pages {
		if i == pagesShownMax {
			b = append(b, ",+"...)
			b = append(b, strconv.Itoa(len(pages)-i)...)
			break
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, strconv.FormatInt(int64(p), 10)...)
	}
	return string(b)
}
