package worker

import (
	"sync"

	"tandem/internal/pd/kvwire"
	"tandem/internal/pd/room"
)

// queueBytesMax bounds the KV bytes waiting to be sent to one peer; a sink
// that would pass it fails its room instead of growing memory without end.
const queueBytesMax = 4 << 30

// outFrame is one frame waiting for a peer's sender goroutine.
type outFrame struct {
	typ     kvwire.Type
	room    room.ID
	payload []byte
	kv      *kvwire.KV // set for KV frames; data holds the page bytes
	data    []byte
}

// peerQueue orders the frames for one peer and sends them from one
// goroutine, so a room's frames leave in the order the core emitted them.
type peerQueue struct {
	w      *Worker
	peer   string
	mu     sync.Mutex
	items  []outFrame
	bytes  int64
	notify chan struct{} // capacity 1
	quit   chan struct{}
}

// enqueue queues frames for peer, starting its sender on first use. It
// reports false when the queue is over its byte limit or the worker closed.
func (w *Worker) enqueue(peer string, frames ...outFrame) bool {
	w.mu.Lock()
	q := w.queueLocked(peer)
	w.mu.Unlock()
	if q == nil {
		return false
	}
	var n int64
	for _, f := range frames {
		n += int64(len(f.data))
	}
	q.mu.Lock()
	if q.bytes+n > queueBytesMax {
		q.mu.Unlock()
		return false
	}
	q.items = append(q.items, frames...)
	q.bytes += n
	q.mu.Unlock()
	select {
	case q.notify <- struct{}{}:
	default:
	}
	return true
}

// queueLocked returns peer's queue, starting its sender on first use; nil
// once the worker has closed. w.mu is held.
func (w *Worker) queueLocked(peer string) *peerQueue {
	q := w.peers[peer]
	if q == nil && !w.closed {
		q = &peerQueue{w: w, peer: peer, notify: make(chan struct{}, 1), quit: make(chan struct{})}
		w.peers[peer] = q
		w.wg.Add(1)
		go q.run()
	}
	return q
}

func (q *peerQueue) close() { close(q.quit) }

func (q *peerQueue) run() {
	defer q.w.wg.Done()
	for {
		select {
		case <-q.quit:
			return
		case <-q.notify:
		}
		for {
			q.mu.Lock()
			items := q.items
			q.items = nil
			q.mu.Unlock()
			if len(items) == 0 {
				break
			}
			q.send(items)
		}
	}
}

func (q *peerQueue) send(items []outFrame) {
	ctx := q.w.ctx
	for i, f := range items {
		var err error
		if f.kv != nil {
			err = q.w.tr.SendKV(ctx, q.peer, f.room, *f.kv, f.data)
		} else {
			err = q.w.tr.Send(ctx, q.peer, f.typ, f.room, f.payload)
		}
		q.mu.Lock()
		q.bytes -= int64(len(f.data))
		q.mu.Unlock()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			q.w.log.Warn("send to peer failed; failing its rooms", "peer", q.peer, "err", err)
			var rest int64
			for _, g := range items[i+1:] {
				rest += int64(len(g.data))
			}
			q.mu.Lock()
			q.bytes -= rest
			q.mu.Unlock()
			q.w.step(room.Event{Kind: room.EventPeerLost, Peer: q.peer, Reason: room.ReasonPeerUnreachable})
			return
		}
	}
}

// sendControl queues the control frame an EffectSend asks for. w.mu is held
// by the caller, so it must not call enqueue (which locks): it appends
// directly.
func (w *Worker) sendControl(e room.Effect) {
	typ := kvwire.TypeFor(e.Frame)
	var payload []byte
	switch e.Frame {
	case room.FrameAlloc:
		payload = (&kvwire.Alloc{Pages: e.Pages}).AppendTo(nil)
	case room.FrameFirstToken:
		ft := kvwire.FirstToken{Token: e.Token, Logprob: e.Logprob}
		if l := w.legs[e.Room]; l != nil && len(l.first.Tokens) > 0 {
			for _, tl := range l.first.Tokens[0].Top {
				ft.Top = append(ft.Top, kvwire.TopLogprob{ID: tl.ID, Logprob: tl.Logprob})
			}
		}
		payload = ft.AppendTo(nil)
	case room.FrameDone:
		payload = (&kvwire.Done{PageCount: uint32(e.PageCount), Bytes: uint64(e.Bytes)}).AppendTo(nil)
	case room.FrameAbort:
		payload = (&kvwire.Abort{Reason: e.Reason, Message: e.Reason.String()}).AppendTo(nil)
	case room.FrameFailed:
		payload = (&kvwire.Failed{Reason: e.Reason, Message: e.Reason.String()}).AppendTo(nil)
	}
	f := outFrame{typ: typ, room: e.Room, payload: payload}
	q := w.queueLocked(e.Peer)
	if q == nil {
		return
	}
	q.mu.Lock()
	q.items = append(q.items, f)
	q.mu.Unlock()
	select {
	case q.notify <- struct{}{}:
	default:
	}
}
