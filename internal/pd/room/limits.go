package room

// The core's fixed limits. The configurable ones (live rooms, tombstones,
// deadlines) are in Config.
const (
	// historyMax bounds a room's History; older transitions are dropped first.
	historyMax = 32

	// AllocPagesMax bounds the pages one ALLOC frame may name. An ALLOC with
	// more (or none) is a protocol violation. The transport may use it to
	// size its frame limit.
	AllocPagesMax = 1 << 20

	// durationMax bounds every Config duration (about 52 days) so that
	// Instant arithmetic can never overflow on a sane clock.
	durationMax Duration = 1 << 52

	// instantMax caps the time Step accepts (about 146 years of a monotonic
	// clock): a deadline or tombstone expiry past it still fits an Instant.
	instantMax Instant = 1 << 62
)
