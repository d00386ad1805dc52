package worker

import (
	"tandem/internal/engine/sample"
	"tandem/internal/pd/kvwire"
	"tandem/internal/pd/room"
)

// The Worker is the transport's Handler: the methods below run on the
// transport's reader goroutines.

// Frame turns a control frame into a room event.
func (w *Worker) Frame(peer string, h kvwire.Header, payload []byte) {
	ev := room.Event{Room: room.ID(h.Room), Peer: peer}
	switch h.Type {
	case kvwire.TypeHello:
		ev.Kind = room.EventHello
	case kvwire.TypeHelloAck:
		ev.Kind = room.EventHelloAck
	case kvwire.TypeAlloc:
		var a kvwire.Alloc
		if !w.decode(peer, h, payload, &a) {
			return
		}
		ev.Kind, ev.Pages = room.EventAlloc, a.Pages
	case kvwire.TypeFirstToken:
		var f kvwire.FirstToken
		if !w.decode(peer, h, payload, &f) {
			return
		}
		ev.Kind, ev.Token, ev.Logprob = room.EventFirstToken, f.Token, f.Logprob
		w.mu.Lock()
		if l := w.legs[ev.Room]; l != nil && l.peer == peer {
			l.firstTop = l.firstTop[:0]
			for _, tl := range f.Top {
				l.firstTop = append(l.firstTop, sample.TokenLogprob{ID: tl.ID, Logprob: tl.Logprob})
			}
		}
		w.mu.Unlock()
	case kvwire.TypeDone:
		var d kvwire.Done
		if !w.decode(peer, h, payload, &d) {
			return
		}
		ev.Kind, ev.PageCount, ev.Bytes = room.EventDone, int(d.PageCount), int64(d.Bytes)
	case kvwire.TypeDoneAck:
		ev.Kind = room.EventDoneAck
	case kvwire.TypeAbort:
		var a kvwire.Abort
		if !w.decode(peer, h, payload, &a) {
			return
		}
		ev.Kind, ev.Reason = room.EventAbort, a.Reason
	case kvwire.TypeFailed:
		var f kvwire.Failed
		if !w.decode(peer, h, payload, &f) {
			return
		}
		ev.Kind, ev.Reason = room.EventFailed, f.Reason
	default:
		w.met.badFrame("unexpected_type")
		w.log.Warn("dropped a frame of an unexpected type", "peer", peer, "type", h.Type)
		return
	}
	w.step(ev)
}

type payloadDecoder interface{ Decode([]byte) error }

func (w *Worker) decode(peer string, h kvwire.Header, payload []byte, into payloadDecoder) bool {
	if err := into.Decode(payload); err != nil {
		w.met.badFrame("malformed_payload")
		w.log.Warn("dropped a malformed frame", "peer", peer, "type", h.Type, "room", room.ID(h.Room), "err", err)
		return false
	}
	return true
}

// KVDest returns the page bytes a KV frame's data goes to, or nil to have
// the transport discard them (unknown room, room not receiving, wrong
// peer, ordinal or size): counted, and the room itself is not changed.
func (w *Worker) KVDest(peer string, id room.ID, kv kvwire.KV, n int) []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	l := w.legs[id]
	st, _, ok := w.m.State(id)
	switch {
	case l == nil || !ok || l.roomDone:
		w.met.kvDropped("unknown_or_finished_room")
		return nil
	case st != room.StateWaitingForInput && st != room.StateTransferring:
		w.met.kvDropped("room_not_receiving")
		return nil
	case l.peer != peer || l.pages == nil:
		w.met.kvDropped("wrong_peer")
		return nil
	case int(kv.Ordinal) >= len(l.pages) || int(kv.Layer) >= w.kvCfg.Layers || kv.Kind > 1 || n != w.kvCfg.PageBytes():
		w.met.kvDropped("bad_coordinates")
		return nil
	}
	if l.recvSeen == nil {
		l.recvSeen = make([]bool, len(l.pages)*w.kvCfg.Layers*2)
	}
	if l.recvSeen[frameIndex(kv, w.kvCfg.Layers)] {
		w.met.kvDropped("duplicate")
		return nil
	}
	l.inflight++
	p := l.pages[kv.Ordinal]
	if kv.Kind == 0 {
		return l.kv.KPage(int(kv.Layer), p)
	}
	return l.kv.VPage(int(kv.Layer), p)
}

// KVDone follows every KVDest that returned a buffer (and every discard).
func (w *Worker) KVDone(peer string, id room.ID, kv kvwire.KV, n int, checksumOK bool) {
	w.mu.Lock()
	l := w.legs[id]
	var ev room.Event
	if l != nil && l.inflight > 0 {
		l.inflight--
		if checksumOK {
			l.recvSeen[frameIndex(kv, w.kvCfg.Layers)] = true
			l.recvBytes += int64(n)
			ev = room.Event{Kind: room.EventKVReceived, Room: id, Bytes: l.recvBytes}
		} else {
			ev = room.Event{Kind: room.EventChecksumError, Room: id}
		}
	} else if pl := w.released[id]; pl != nil && pl.inflight > 0 {
		// the room was released while this write was in flight
		l = pl
		l.inflight--
	}
	if l != nil && l.cancelPending && l.inflight == 0 {
		l.cancelPending = false
		delete(w.released, id)
		l.cancelEngine()
	}
	w.mu.Unlock()
	if ev.Kind != 0 {
		w.step(ev)
	}
}

// PeerUp records a peer's heartbeat (its load, for visibility).
func (w *Worker) PeerUp(peer string, hb kvwire.Heartbeat) {}

// PeerLost fails every live room with that peer.
func (w *Worker) PeerLost(peer string, err error) {
	w.log.Warn("peer lost", "peer", peer, "err", err)
	w.step(room.Event{Kind: room.EventPeerLost, Peer: peer})
}

// frameIndex numbers a KV frame within its room.
func frameIndex(kv kvwire.KV, layers int) int {
	return (int(kv.Ordinal)*layers+int(kv.Layer))*2 + int(kv.Kind)
}
