package driver

import (
	"fmt"

	"tandem/internal/pd/kvwire"
)

// The send queue budget. Every frame the driver holds for a peer (queued or
// outstanding) counts Frame.Bytes against two limits: the worker-wide
// QueueBytesMax and the peer's PeerQueueBytesMax, which is derived from it
// (PeerShare peers can fill their share at once). The relations are
// asserted by TestLimitsRelations.
const (
	// DefaultQueueBytesMax is the worker-wide budget of queued send bytes.
	DefaultQueueBytesMax int64 = 1 << 30

	// PeerShare is how many peers can fill their per-peer limit at once:
	// PeerQueueBytesMax = QueueBytesMax / PeerShare.
	PeerShare = 4

	// FrameBytesMax is the most one frame can count (a KV frame of the
	// largest page, or a control frame of the largest payload, each with
	// its header): every per-peer limit holds at least one.
	FrameBytesMax = int64(kvwire.HeaderBytes + max(kvwire.KVPayloadBytesMax, kvwire.ControlPayloadBytesMax))

	// QueueBytesMin is the smallest budget LimitsFor accepts.
	QueueBytesMin = PeerShare * FrameBytesMax
)

// Limits bounds the bytes waiting in the send lanes.
type Limits struct {
	QueueBytesMax     int64 // every peer together
	PeerQueueBytesMax int64 // one peer: QueueBytesMax / PeerShare
}

// DefaultLimits returns LimitsFor(DefaultQueueBytesMax).
func DefaultLimits() Limits {
	l, _ := LimitsFor(DefaultQueueBytesMax)
	return l
}

// LimitsFor derives the limits from a worker-wide budget of queued bytes.
// It refuses a budget below QueueBytesMin, where one peer could not hold
// one frame of the largest size.
func LimitsFor(budget int64) (Limits, error) {
	if budget < QueueBytesMin {
		return Limits{}, fmt.Errorf("driver: send queue budget %d bytes is below the minimum %d (%d peers of one %d-byte frame)",
			budget, QueueBytesMin, PeerShare, FrameBytesMax)
	}
	return Limits{QueueBytesMax: budget, PeerQueueBytesMax: budget / PeerShare}, nil
}
