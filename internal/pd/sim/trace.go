package sim

import (
	"strconv"
	"strings"

	"tandem/internal/pd/room"
)

// traceStep appends one line for a Step (time, node and incarnation,
// event, outcome) and one indented line per transition and effect, in the
// room package's trace line format.
func (s *sim) traceStep(n *node, e room.Event, o room.Outcome, rd room.Ready) {
	var b strings.Builder
	b.WriteString(s.now.String())
	b.WriteByte(' ')
	b.WriteString(n.addr)
	b.WriteByte('.')
	b.WriteString(strconv.Itoa(int(n.epoch)))
	b.WriteByte(' ')
	b.WriteString(describeEvent(e))
	b.WriteString(" => ")
	b.WriteString(o.String())
	s.trace = append(s.trace, s.shorten(b.String()))
	for _, t := range rd.Transitions {
		s.trace = append(s.trace, s.shorten("    "+t.String()))
	}
	for _, eff := range rd.Effects {
		s.trace = append(s.trace, s.shorten("    "+eff.String()))
	}
}

// describeEvent prints an event as "kind room=<id> key=value...".
func describeEvent(e room.Event) string {
	b := []byte(e.Kind.String())
	if e.Room != (room.ID{}) {
		b = append(b, " room="...)
		b = append(b, e.Room.String()...)
	}
	add := func(key, value string) {
		b = append(b, ' ')
		b = append(b, key...)
		b = append(b, '=')
		b = append(b, value...)
	}
	if e.Peer != "" {
		add("peer", e.Peer)
	}
	if e.RequestID != "" {
		add("req", e.RequestID)
	}
	if len(e.Pages) > 0 {
		add("pages", strconv.Itoa(len(e.Pages)))
	}
	switch e.Kind {
	case room.EventComputeDone, room.EventFirstToken:
		add("token", strconv.Itoa(int(e.Token)))
	case room.EventDone:
		add("page_count", strconv.Itoa(e.PageCount))
		add("bytes", strconv.FormatInt(e.Bytes, 10))
	case room.EventKVSent, room.EventKVReceived:
		add("bytes", strconv.FormatInt(e.Bytes, 10))
	}
	if e.Reason != room.ReasonNone {
		add("reason", e.Reason.String())
	}
	return string(b)
}
