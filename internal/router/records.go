package router

import (
	"cmp"
	"slices"
	"sync"
	"time"

	apileg "tandem/internal/api/leg"
	"tandem/internal/pd/debugdoc"
	"tandem/internal/router/pool"
)

// The router's request states.
const (
	stateDispatched = "dispatched"            // the pair is picked and both legs are sent
	stateStreaming  = "streaming"             // the first bytes went to the client
	stateDone       = debugdoc.StateSucceeded // the decode leg's answer reached its end
	stateFailed     = debugdoc.StateFailed    // a leg failed, the client left, or the deadline passed
)

// record is the router's view of one room. Its fields are guarded by
// records.mu.
type record struct {
	room, requestID, endpoint string
	traceID                   string // the request's trace id ("" without one); set before the record is shared
	prefill, decode           string
	start                     time.Time
	state, reason             string
	requestDeadline           time.Time
	legDeadline               map[pool.Role]time.Time // open legs only
	bytes                     int64
	history                   []debugdoc.Transition
	dropped                   int      // history entries over historyMax
	dec                       decision // the attempt's path (set at open, never changed)
	ttft                      time.Duration
	haveTTFT                  bool
	timing                    apileg.Timing // the workers' phases (prefill's and decode's merged)
}

// records keeps live rooms and a ring of the most recently finished ones.
// It is safe for concurrent use.
type records struct {
	now  func() time.Time
	mu   sync.Mutex
	live map[string]*record
	ring []*record // finished, oldest overwritten first
	next int
	size int
}

func newRecords(finishedMax int, now func() time.Time) *records {
	return &records{now: now, live: map[string]*record{}, ring: make([]*record, 0, finishedMax), size: finishedMax}
}

// open starts a record in state dispatched with its legs open: both, or
// for a local attempt (prefill "") the decode worker's alone.
func (rs *records) open(room, requestID, traceID, endpoint, prefill, decode string, legTimeout time.Duration, requestDeadline time.Time, dec decision) *record {
	now := rs.now()
	r := &record{room: room, requestID: requestID, traceID: traceID, endpoint: endpoint, prefill: prefill, decode: decode,
		start: now, state: stateDispatched, requestDeadline: requestDeadline, dec: dec,
		legDeadline: map[pool.Role]time.Time{pool.Decode: now.Add(legTimeout)}}
	if prefill != "" {
		r.legDeadline[pool.Prefill] = now.Add(legTimeout)
	}
	r.history = append(r.history, debugdoc.Transition{From: "", To: stateDispatched, Event: "dispatched"})
	rs.mu.Lock()
	rs.live[room] = r
	rs.mu.Unlock()
	return r
}

// addLocked appends a transition. Callers hold mu.
func (rs *records) addLocked(r *record, to, event, reason string) {
	if len(r.history) >= historyMax {
		r.dropped++
		return
	}
	r.history = append(r.history, debugdoc.Transition{AtMS: millis(rs.now().Sub(r.start)), From: r.state, To: to,
		Event: event, Reason: reason})
}

// note records an event that does not change the state.
func (rs *records) note(r *record, event, reason string) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.addLocked(r, r.state, event, reason)
}

// legActive moves a leg's deadline (it made progress).
func (rs *records) legActive(r *record, leg pool.Role, deadline time.Time) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if _, open := r.legDeadline[leg]; open {
		r.legDeadline[leg] = deadline
	}
}

// legClosed marks a leg ended, with the event that ended it.
func (rs *records) legClosed(r *record, leg pool.Role, event, reason string) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	delete(r.legDeadline, leg)
	rs.addLocked(r, r.state, event, reason)
}

// received counts n bytes of decode's answer.
func (rs *records) received(r *record, n int) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	r.bytes += int64(n)
}

// delivered notes that part of the answer went to the client: a
// dispatched record moves to streaming.
func (rs *records) delivered(r *record) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if r.state == stateDispatched {
		rs.addLocked(r, stateStreaming, "first_bytes", "")
		r.state = stateStreaming
	}
}

// firstToken records the request's time to first token for r's sample
// (nil r: nothing).
func (rs *records) firstToken(r *record, d time.Duration) {
	if r == nil {
		return
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	r.ttft, r.haveTTFT = d, true
}

// setTiming records the workers' phase timings of r.
func (rs *records) setTiming(r *record, t apileg.Timing) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	r.timing = t
}

// finish ends a record (done, or failed with a reason) and moves it to the
// ring of finished records. A second finish is ignored.
func (rs *records) finish(r *record, ok bool, reason string) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if r.state == stateDone || r.state == stateFailed {
		return
	}
	to, event := stateDone, "done"
	if !ok {
		to, event = stateFailed, "failed"
	}
	rs.addLocked(r, to, event, reason)
	r.state, r.reason = to, reason
	clear(r.legDeadline)
	delete(rs.live, r.room)
	if rs.size <= 0 {
		return
	}
	if len(rs.ring) < rs.size {
		rs.ring = append(rs.ring, r)
		return
	}
	rs.ring[rs.next] = r
	rs.next = (rs.next + 1) % rs.size
}

// phaseLocked names the legs still open. Callers hold mu.
func phaseLocked(r *record) string {
	_, p := r.legDeadline[pool.Prefill]
	_, d := r.legDeadline[pool.Decode]
	switch {
	case p && d:
		return "prefill+decode"
	case p:
		return "prefill"
	case d && r.prefill == "":
		return "local"
	case d:
		return "decode"
	}
	return ""
}

// snapshot returns the live rooms (oldest first) then the finished ones
// (newest first).
func (rs *records) snapshot() []debugdoc.Room {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	now := rs.now()
	live := make([]*record, 0, len(rs.live))
	for _, r := range rs.live {
		live = append(live, r)
	}
	slices.SortFunc(live, func(a, b *record) int {
		if c := a.start.Compare(b.start); c != 0 {
			return c
		}
		return cmp.Compare(a.room, b.room)
	})
	out := make([]debugdoc.Room, 0, len(live)+len(rs.ring))
	for _, r := range live {
		out = append(out, roomLocked(r, now))
	}
	for i := range len(rs.ring) {
		j := (rs.next - 1 - i + 2*len(rs.ring)) % len(rs.ring)
		out = append(out, roomLocked(rs.ring[j], now))
	}
	return out
}

// roomLocked renders a record. Callers hold mu.
func roomLocked(r *record, now time.Time) debugdoc.Room {
	room := debugdoc.Room{ID: r.room, RequestID: r.requestID, TraceID: r.traceID, State: r.state, Phase: phaseLocked(r), Reason: r.reason,
		Prefill: r.prefill, Decode: r.decode, AgeMS: millis(now.Sub(r.start)), Bytes: r.bytes,
		History: slices.Clone(r.history), Decision: r.dec.doc(), Phases: phasesLocked(r)}
	if r.state != stateDone && r.state != stateFailed {
		d := r.requestDeadline
		for _, ld := range r.legDeadline {
			if d.IsZero() || ld.Before(d) {
				d = ld
			}
		}
		if !d.IsZero() {
			ms := millis(d.Sub(now))
			room.DeadlineInMS = &ms
		}
	}
	if r.dropped > 0 {
		room.History = append(room.History, debugdoc.Transition{AtMS: room.AgeMS, From: r.state, To: r.state,
			Event: "history_truncated", Reason: "more transitions than the history keeps"})
	}
	return room
}

// phasesLocked renders r's time to first token and its phases (nil when
// nothing is known yet). Callers hold mu.
func phasesLocked(r *record) *debugdoc.Phases {
	ms := func(d *time.Duration) *float64 {
		if d == nil {
			return nil
		}
		v := millis(*d)
		return &v
	}
	p := &debugdoc.Phases{QueueMS: ms(r.timing.Queue), PrefillMS: ms(r.timing.Prefill), TransferMS: ms(r.timing.Transfer),
		FirstDecodeMS: ms(r.timing.FirstDecode)}
	if r.haveTTFT {
		p.TTFTMS = ms(&r.ttft)
	}
	if *p == (debugdoc.Phases{}) {
		return nil
	}
	return p
}

// millis is d in milliseconds, to the microsecond.
func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
