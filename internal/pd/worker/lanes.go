package worker

import (
	"errors"
	"fmt"

	"tandem/internal/pd/driver"
	"tandem/internal/pd/room"
	"tandem/internal/pd/transfer"
)

// peerLanes are the goroutines that write one peer's frames: one per lane
// (control, KV), each handed at most one frame at a time by the driver, so
// a channel of capacity one never blocks the caller. They exist while the
// driver holds frames or rooms for the peer and end when it says the peer
// is idle (or the worker closes).
type peerLanes struct {
	ch [driver.LaneKV + 1]chan driver.Frame
}

// wireAdapter is the driver's Wire: it hands frames to the peer's lane
// goroutines, which send them through the transport and report back.
type wireAdapter struct{ w *Worker }

// Send runs with w.mu held: it starts the peer's lanes on first use and
// queues the frame without blocking.
func (a wireAdapter) Send(f driver.Frame) {
	w := a.w
	pl := w.lanes[f.Peer]
	if pl == nil && w.closed {
		return // stopping: Close waits for the lanes; start no new ones
	}
	if pl == nil {
		pl = &peerLanes{}
		for _, lane := range []driver.Lane{driver.LaneControl, driver.LaneKV} {
			ch := make(chan driver.Frame, 1)
			pl.ch[lane] = ch
			w.wg.Add(1)
			go w.runLane(f.Peer, lane, ch)
		}
		w.lanes[f.Peer] = pl
	}
	pl.ch[f.Lane] <- f
}

// PeerIdle runs with w.mu held: the peer's lanes are empty, so their
// goroutines can go.
func (a wireAdapter) PeerIdle(peer string) {
	w := a.w
	if pl := w.lanes[peer]; pl != nil {
		delete(w.lanes, peer)
		for _, ch := range pl.ch[driver.LaneControl:] {
			close(ch)
		}
	}
}

// runLane writes the frames of one peer's lane, one at a time, and tells
// the driver when each is on the wire (or failed).
func (w *Worker) runLane(peer string, lane driver.Lane, ch <-chan driver.Frame) {
	defer w.wg.Done()
	for {
		var f driver.Frame
		var ok bool
		select {
		case <-w.ctx.Done():
			select { // the one frame the driver may have handed over
			case f, ok := <-ch:
				if ok && f.Release != nil {
					f.Release()
				}
			default:
			}
			return
		case f, ok = <-ch:
			if !ok {
				return
			}
		}
		var err error
		if lane == driver.LaneKV {
			err = w.tr.SendKVHeld(w.ctx, peer, f.Room, f.KV, f.Data, f.Release)
		} else {
			err = w.tr.Send(w.ctx, peer, f.Type, f.Room, f.Payload)
		}
		if w.ctx.Err() != nil {
			return // closing: Close failed every room already
		}
		if errors.Is(err, transfer.ErrSendQueueFull) || errors.Is(err, transfer.ErrFrame) {
			err = fmt.Errorf("%w: %w", driver.ErrLocal, err)
		}
		w.locked(func(now room.Instant) { w.rep.Sent(now, peer, lane, err) })
	}
}
