package worker

import (
	"encoding/json"
	"net/http"
	"time"

	"tandem/internal/pd/debugdoc"
	"tandem/internal/pd/room"
)

// Handler serves the worker's disaggregation endpoints:
//
//	GET /pd/info      role, transfer address, model, instance id (new at each start), start time
//	GET /pd/status    instance id, load, for the router's choice of worker (prefill_queue_tokens:
//	                  the prompt tokens the engine has still to compute, engine.Stats.PrefillQueueTokens)
//	GET /debug/rooms  live and recently finished rooms with their histories
//
// The handler checks no credential: its caller mounts it behind the
// cluster credential (cmd/tandem wraps /pd/ and /debug/ in
// leg.Keys.RequireCredential), since /debug/rooms lists live room ids.
func (w *Worker) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /pd/info", w.serveInfo)
	mux.HandleFunc("GET /pd/status", w.serveStatus)
	mux.HandleFunc("GET /debug/rooms", w.serveRooms)
	return mux
}

func writeJSON(rw http.ResponseWriter, v any) {
	rw.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(rw)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func (w *Worker) serveInfo(rw http.ResponseWriter, _ *http.Request) {
	writeJSON(rw, map[string]any{"role": w.role.String(), "transfer_addr": w.tr.AdvertiseAddr(), "model": w.eng.Model().Config.Name,
		"instance": w.instance, "started": w.start.UTC().Format(time.RFC3339)})
}

func (w *Worker) serveStatus(rw http.ResponseWriter, _ *http.Request) {
	hb := w.load()
	est := w.eng.Stats()
	queued := est.PrefillQueueTokens
	w.mu.Lock()
	st, peers := w.d.Stats(), w.d.Peers()
	w.mu.Unlock()
	writeJSON(rw, map[string]any{"role": w.role.String(), "waiting": hb.Waiting, "running": hb.Running,
		"prefill_queue_tokens": queued, "kv_usage": est.KVUsage(),
		"pages_used": hb.PagesTotal - hb.PagesFree, "pages_total": hb.PagesTotal, "rooms_live": hb.RoomsLive,
		"transfer_addr": w.TransferAddr(), "send_queued_bytes": st.QueuedBytes, "send_peers": peers,
		"peer_loads": w.peerLoads(), "instance": w.instance})
}

func ms(d room.Duration) float64 { return float64(time.Duration(d)) / float64(time.Millisecond) }

// Rooms returns the /debug/rooms document (the schema of package debugdoc).
func (w *Worker) Rooms() debugdoc.Rooms {
	// The copy under the lock is flat (RoomInfo shares the core's
	// append-only histories); formatting happens after it.
	w.mu.Lock()
	now := w.now()
	infos := w.d.Rooms()
	live := w.d.Live()
	views := make(map[room.ID]view, len(infos))
	for _, r := range infos {
		if l := w.views[r.ID]; l != nil {
			views[r.ID] = view{traceID: l.traceID, resumed: l.resumed, resumedIn: l.resumedIn, ended: l.ended, endedIn: l.endedIn,
				outcome: l.outcome, reason: l.reason}
		}
	}
	w.mu.Unlock()
	doc := debugdoc.Rooms{Role: w.role.String(), TransferAddr: w.TransferAddr(), Live: live, Rooms: make([]debugdoc.Room, 0, len(infos))}
	for _, r := range infos {
		j := debugdoc.Room{ID: r.ID.String(), RequestID: r.RequestID, State: r.State.String(), Phase: r.Phase.String(), Peer: r.Peer,
			AgeMS: ms(room.Duration(now - r.Created)), Bytes: r.Bytes}
		if r.Reason != room.ReasonNone {
			j.Reason = r.Reason.String()
		}
		if r.Deadline != 0 {
			d := ms(room.Duration(r.Deadline - now))
			j.DeadlineInMS = &d
		}
		for _, t := range r.History {
			tj := debugdoc.Transition{AtMS: ms(room.Duration(t.At - r.Created)), From: t.From.String(), To: t.To.String(),
				Phase: t.ToPhase.String(), Event: t.Event.String()}
			if t.Reason != room.ReasonNone {
				tj.Reason = t.Reason.String()
			}
			j.History = append(j.History, tj)
		}
		if v, ok := views[r.ID]; ok {
			j.TraceID = v.traceID
			if w.role == room.RoleDecode && r.State == room.StateSucceeded && v.resumed {
				// The KV arrived; the request generates until its stream ends.
				j.History = append(j.History, debugdoc.Transition{AtMS: ms(room.Duration(v.resumedIn - r.Created)), From: j.State,
					To: StateDecoding, Phase: "generating", Event: "resumed"})
				if !v.ended {
					j.State, j.Phase = StateDecoding, "generating"
					doc.Live++
				} else {
					to := debugdoc.StateSucceeded
					if v.outcome != "ok" {
						to, j.Reason = debugdoc.StateFailed, v.reason
					}
					j.History = append(j.History, debugdoc.Transition{AtMS: ms(room.Duration(v.endedIn - r.Created)), From: StateDecoding,
						To: to, Event: "stream_end", Reason: j.Reason})
					j.State = to
				}
			}
		}
		doc.Rooms = append(doc.Rooms, j)
	}
	return doc
}

// view is what Rooms shows of a room's leg.
type view struct {
	traceID            string
	resumed, ended     bool
	resumedIn, endedIn room.Instant
	outcome, reason    string
}

func (w *Worker) serveRooms(rw http.ResponseWriter, _ *http.Request) { writeJSON(rw, w.Rooms()) }
