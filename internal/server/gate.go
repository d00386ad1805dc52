package server

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// errGateFull: the gate's slots are taken and its queue is full, or a
// queued caller waited its longest.
var errGateFull = errors.New("gate full")

// gate admits at most cap holders at once and queues at most queue more,
// each for at most wait; beyond that, acquire fails at once. It is what
// bounds /tokenize and /detokenize (see tokenize.go). Hand-written: it is a
// buffered channel and a counter; golang.org/x/sync/semaphore has no bound
// on its waiters.
type gate struct {
	slots   chan struct{}
	queue   int32
	waiting atomic.Int32
	wait    time.Duration
}

func newGate(cap, queue int, wait time.Duration) *gate {
	return &gate{slots: make(chan struct{}, cap), queue: int32(queue), wait: wait}
}

// acquire takes a slot, waiting in the queue when there is room in it,
// until ctx is done or wait passes. A nil error must be paired with
// release.
func (g *gate) acquire(ctx context.Context) error {
	select {
	case g.slots <- struct{}{}:
		return nil
	default:
	}
	if g.waiting.Add(1) > g.queue {
		g.waiting.Add(-1)
		return errGateFull
	}
	defer g.waiting.Add(-1)
	t := time.NewTimer(g.wait)
	defer t.Stop()
	select {
	case g.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return errGateFull
	}
}

func (g *gate) release() { <-g.slots }
