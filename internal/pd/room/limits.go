package room

// The core's fixed limits. The configurable ones (live rooms, tombstones,
// deadlines) are in Config.
const (
	// historyMax bounds a room's History; older transitions are dropped first.
	historyMax = 32

	// AllocPagesMax bounds the pages one ALLOC frame may name: as many
	// 4-byte page numbers as fit in a 64 KiB control payload after the
	// 4-byte count. It is the wire's limit (kvwire.AllocPagesMax is this
	// constant, and kvwire's tests assert that such an ALLOC encodes). An
	// ALLOC with more (or none) is a protocol violation, and a decode
	// admission with more fails the room (engine) before any ALLOC is sent.
	AllocPagesMax = (64<<10 - 4) / 4

	// DoneAckWaitMax bounds a prefill room's wait for DONE_ACK: heartbeats
	// from its peer (EventPeerAlive) extend the deadline, but never past
	// DoneAckWaitMax progress timeouts after DONE was sent.
	DoneAckWaitMax = 8

	// WatchdogGrace is how far past its deadline a live room must be
	// before a watchdog fails it (Overdue(now - WatchdogGrace)), and before
	// an outside observer (the router's inspect, the e2e checks) may call
	// it overdue: a timer that is merely late by less never counts.
	WatchdogGrace Duration = 1_000_000_000 // one second

	// stateBytesMax bounds Config.StateBytes: the wire's limit
	// (kvwire.StateBytesMax, which TestLimits there checks equal).
	stateBytesMax = 1 << 30

	// durationMax bounds every Config duration (about 52 days) so that
	// Instant arithmetic can never overflow on a sane clock.
	durationMax Duration = 1 << 52

	// instantMax caps the time Step accepts (about 146 years of a monotonic
	// clock): a deadline or tombstone expiry past it still fits an Instant.
	instantMax Instant = 1 << 62
)
