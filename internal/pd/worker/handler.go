package worker

import (
	"slices"
	"strings"
	"time"

	"tandem/internal/pd/kvwire"
	"tandem/internal/pd/room"
)

// The Worker is the transport's Handler: the methods below run on the
// transport's reader goroutines and hand everything to the driver.

// Frame hands a control frame to the driver, which turns it into a room
// event.
func (w *Worker) Frame(peer string, h kvwire.Header, payload []byte) {
	w.locked(func(now room.Instant) { w.d.Frame(now, peer, h, payload) })
}

// KVDest returns the page bytes a KV frame's data goes to, or nil to have
// the transport discard them (the driver counts why).
func (w *Worker) KVDest(peer string, id room.ID, kv kvwire.KV, n int) []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.d.KVDest(peer, id, kv, n)
}

// KVDone follows every KVDest that returned a buffer, exactly once, when
// the transport is done with it (transfer.Handler's contract; the driver
// fails loudly on a KVDone for a frame no buffer is out for). A frame
// KVDest gave no buffer is discarded by the transport and gets none.
func (w *Worker) KVDone(peer string, id room.ID, kv kvwire.KV, n int, checksumOK bool) {
	w.locked(func(now room.Instant) { w.d.KVDone(now, peer, id, kv, n, checksumOK) })
}

// peerLoad is a peer's last heartbeat and when it came.
type peerLoad struct {
	At   time.Time
	Load kvwire.Heartbeat
}

// PeerUp records a peer's heartbeat (its load), shown in /pd/status, and
// tells the driver the peer is alive (prefill rooms waiting for its
// DONE_ACK extend their deadline).
func (w *Worker) PeerUp(peer string, hb kvwire.Heartbeat) {
	w.loadMu.Lock()
	w.loads[peer] = peerLoad{At: time.Now(), Load: hb}
	w.loadMu.Unlock()
	if w.role == room.RolePrefill && hb.Seq != 0 {
		w.locked(func(now room.Instant) { w.d.PeerAlive(now, peer) })
	}
}

// PeerLost fails every live room with that peer and forgets its load.
func (w *Worker) PeerLost(peer string, err error) {
	w.log.Warn("peer lost", "peer", peer, "err", err)
	w.loadMu.Lock()
	delete(w.loads, peer)
	w.loadMu.Unlock()
	w.locked(func(now room.Instant) { w.d.PeerLost(now, peer) })
}

// PeerLoadJSON is one peer's last heartbeat in /pd/status.
type PeerLoadJSON struct {
	Peer       string  `json:"peer"`
	AgoMS      float64 `json:"ago_ms"` // since the heartbeat arrived
	Waiting    uint32  `json:"waiting"`
	Running    uint32  `json:"running"`
	PagesFree  uint32  `json:"pages_free"`
	PagesTotal uint32  `json:"pages_total"`
	RoomsLive  uint32  `json:"rooms_live"`
}

// peerLoads returns the peers' last heartbeats, by address.
func (w *Worker) peerLoads() []PeerLoadJSON {
	w.loadMu.Lock()
	out := make([]PeerLoadJSON, 0, len(w.loads))
	for p, l := range w.loads {
		out = append(out, PeerLoadJSON{Peer: p, AgoMS: float64(time.Since(l.At)) / float64(time.Millisecond),
			Waiting: l.Load.Waiting, Running: l.Load.Running, PagesFree: l.Load.PagesFree,
			PagesTotal: l.Load.PagesTotal, RoomsLive: l.Load.RoomsLive})
	}
	w.loadMu.Unlock()
	slices.SortFunc(out, func(a, b PeerLoadJSON) int { return strings.Compare(a.Peer, b.Peer) })
	return out
}
