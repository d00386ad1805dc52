// Package room is the pure state machine of Tandem's prefill/decode (PD)
// handoff: one Machine per worker holds every room (one request's KV
// transfer) that worker takes part in, as the prefill or the decode role.
//
// # Where it sits
//
// The router mints a 128-bit room id and sends the request to a prefill
// worker and a decode worker at once. On each worker the edges turn what
// happens into Events: the HTTP leg arriving or being cancelled, control
// frames from the peer (HELLO, HELLO_ACK, ALLOC, FIRST_TOKEN, DONE,
// DONE_ACK, ABORT, FAILED), engine progress (pages reserved, compute
// started, KV sent or stored, first token, errors), a peer lost, shutdown,
// and the timer. The driver (package driver; its callers serialize every
// call) calls Step for each and Tick when the timer set to NextDeadline
// fires, then carries out Ready (frames to send, computes to start or
// cancel, requests to resume, cancel or reject, resources to release) and
// calls Advance. The core has no goroutines, no
// clock, no I/O and no locks: the same code runs in the binaries and in the
// simulator, on a virtual clock. The protocol is described in
// shared/reference/pd-protocol.md.
//
// # API
//
// New(Config) builds a Machine; Step(now, Event) applies one event and
// returns its Outcome; Tick(now) fires the timer; Ready and Advance hand
// over the effects; Overdue, State, Room, Rooms, LiveRooms, Live, Counters
// and CheckInvariants are read-only. A failure carries a Reason (the
// metrics label and the wire value, e.g. ReasonClientAbort,
// ReasonPeerLost, ReasonHelloTimeout); a *ReasonError unwraps to one
// sentinel class (ErrAborted, ErrTimeout, ErrPeer, ErrTransfer, ErrEngine,
// ErrRejected).
//
// # Invariants (checked after every Step; checkAll checks every room)
//
//   - Every live room has a deadline, set on entry to its phase (and
//     restarted by transfer progress) and later than its creation; Tick
//     fails it with that phase's timeout reason. So every room ends.
//     Progress is KV written to the wire (EventKVSent) or stored
//     (EventKVReceived); the prefill edge steps EventComputeDone only after
//     the room's last KV frame is written, so DONE carries every byte. A
//     prefill room waiting for DONE_ACK is extended by its peer's
//     heartbeats (EventPeerAlive), never past DoneAckWaitMax progress
//     timeouts after DONE (socket buffers hold what was written but not yet
//     read).
//   - Succeeded and Failed are terminal: no event changes a terminal room.
//     Events for it are counted as late; a request gets its answer (a
//     duplicate, or on prefill the room's earlier failure), a HELLO to a failed
//     prefill room gets FAILED at once, pages reserved too late are freed.
//   - Every room record, live or born terminal, emits exactly one
//     EffectRelease, as the last effect of the Step that ends it. Pages the
//     decode engine reserves are owned by exactly one of: the room (then
//     freed by its failed Release or handed over by Resume) or an
//     EffectFreePages.
//   - No frame silently creates, revives or changes a room it does not
//     belong to: each event gets one Outcome (applied, parked, answered,
//     late, rejected), counted by kind. Only the router's request (both
//     roles) and HELLO (prefill, parked with the request timeout) create live
//     rooms. An ABORT or FAILED for a room prefill does not know yet creates
//     a Failed tombstone, so the request that comes later is answered at
//     once instead of waiting out a timeout (SGLang's silent pin). A frame
//     from a peer other than the room's never changes it.
//   - Frames are answered only when their sender waits (HELLO, ALLOC,
//     DONE) and never with more than one FAILED; ABORT and FAILED are never
//     answered, so two sides cannot start an answer storm. The one other
//     answer: a HELLO_ACK for a decode room that failed in its handshake
//     gets ABORT, so prefill does not hold the room to its alloc deadline.
//   - Output order never depends on map iteration: rooms are ordered by
//     creation, deadlines by (deadline, creation).
//
// # The watchdog and planted bugs
//
// Tick fails every room at its deadline; the watchdog is a second line
// behind it for a timer that did not fire. The edge runs it periodically:
// Overdue lists the live rooms past their deadline (by more than a grace
// the edge picks: WatchdogGrace, which is also the grace anyone else
// should allow before calling a room overdue), and EventWatchdog fails
// each with ReasonDeadline
// (counted); for a room not past its deadline it is rejected and counted.
// The simulator (package sim) runs it too and requires that it never
// fires. Config.Planted plants a known bug for tests only (PlantedBug),
// so the simulator can prove it catches that bug's class; nothing outside
// tests sets it.
//
// # Limits
//
// Config.RoomsMax live rooms (a request past it is rejected as overloaded, a HELLO
// FAILED(overloaded)); Config.TombstonesMax remembered terminal rooms (the
// oldest are forgotten first, counted as evicted) each for
// Config.TombstoneTTL, which New requires to exceed every timeout;
// historyMax transitions per room; AllocPagesMax pages per ALLOC (what a
// 64 KiB control payload carries; kvwire.AllocPagesMax is this constant),
// and a decode admission with more pages fails the room before any ALLOC. Config
// durations are capped so Instant arithmetic cannot overflow. Time never
// runs backwards inside a Machine: an earlier now is raised to the latest.
//
// # Recurrent state
//
// Hybrid models carry a fixed-size state per sequence besides their pages
// (Config.StateBytes). It moves after the pages, in KV frames of its own
// kind, and the core counts it as part of the transfer: progress events
// carry the state's share (StateBytes) beside the total, prefill fails a
// room (engine) whose compute ended before the whole state was sent, DONE
// carries the state's count, and decode resumes only when DONE's count, its
// own count and Config.StateBytes agree and the edge found the state's
// checksum right (Event.StateBad); otherwise the room fails (protocol).
// Pages and state are released together: the state buffer is one more
// resource of the room, under the same quarantine.
//
// # Choices where the brief left room
//
//   - A frame out of order from the room's own peer (a second ALLOC, DONE
//     before KV could start, DONE_ACK before DONE, ...) fails the room with
//     ReasonProtocol and tells the peer; it is counted as rejected.
//   - ALLOC while prefill still awaits the router's request is legal (decode
//     got HELLO_ACK and admitted before the router's prefill leg arrived):
//     the pages are kept and the compute starts when the request comes.
//   - Prefill tells its peer about its own failures with FAILED for engine
//     and protocol failures and ABORT otherwise; decode always sends ABORT.
package room
