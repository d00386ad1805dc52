package kvwire

import "tandem/internal/pd/room"

// reasonWire gives each room.Reason its value on the wire (the reason byte
// of ABORT and FAILED). The values are part of the protocol and are
// written out here instead of taken from the Go enum, so that a reason
// inserted in the middle of room's list cannot silently renumber what
// older peers read. A new reason gets the next unused value.
// TestReasonWireValues pins every entry.
var reasonWire = [...]struct {
	reason room.Reason
	wire   uint8
}{
	{room.ReasonNone, 0},
	{room.ReasonClientAbort, 1},
	{room.ReasonPeerAbort, 2},
	{room.ReasonPeerFailed, 3},
	{room.ReasonPeerLost, 4},
	{room.ReasonPeerUnreachable, 5},
	{room.ReasonHelloTimeout, 6},
	{room.ReasonRequestTimeout, 7},
	{room.ReasonAllocTimeout, 8},
	{room.ReasonHandshakeTimeout, 9},
	{room.ReasonAdmissionTimeout, 10},
	{room.ReasonPrefillTimeout, 11},
	{room.ReasonProgressTimeout, 12},
	{room.ReasonChecksum, 13},
	{room.ReasonProtocol, 14},
	{room.ReasonIncompatible, 15},
	{room.ReasonUnknownRoom, 16},
	{room.ReasonEngine, 17},
	{room.ReasonShutdown, 18},
	{room.ReasonDeadline, 19},
	{room.ReasonDuplicate, 20},
	{room.ReasonOverloaded, 21},
	{room.ReasonBadRequest, 22},
	{room.ReasonSendFailed, 23},
}

// ReasonToWire returns r's wire value; a reason without one (none exists:
// the test checks every room.Reason) is sent as 0, "none".
func ReasonToWire(r room.Reason) uint8 {
	for _, e := range reasonWire {
		if e.reason == r {
			return e.wire
		}
	}
	return 0
}

// ReasonFromWire returns the reason a wire value stands for; a value this
// version does not know (a newer peer's reason) reads as room.ReasonNone.
func ReasonFromWire(w uint8) room.Reason {
	for _, e := range reasonWire {
		if e.wire == w {
			return e.reason
		}
	}
	return room.ReasonNone
}
