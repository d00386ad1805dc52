package room

import (
	"encoding/hex"
	"fmt"
)

// ID is a room id: 128 bits minted by the router (crypto/rand), carried
// unchanged by both legs and every frame. Workers never derive ids.
type ID [16]byte

// String returns the id as 32 lower-case hex digits.
func (id ID) String() string { return hex.EncodeToString(id[:]) }

// ParseID parses 32 hex digits.
func ParseID(s string) (ID, error) {
	var id ID
	if len(s) != 32 {
		return id, fmt.Errorf("room id %q: want 32 hex digits", s)
	}
	if _, err := hex.Decode(id[:], []byte(s)); err != nil {
		return id, fmt.Errorf("room id %q: %w", s, err)
	}
	return id, nil
}

// Instant is a point on the driver's monotonic clock, in nanoseconds. The
// core never reads a clock: every Step carries the time.
type Instant int64

// Duration is a span of Instants, in nanoseconds.
type Duration int64

// Role is the side of the handoff a Machine plays.
type Role uint8

// The roles.
const (
	RolePrefill Role = iota + 1
	RoleDecode
)

// State is a room's KVPoll-style state.
type State uint8

// The states. Succeeded and Failed are terminal and sticky.
const (
	StateBootstrapping State = iota + 1
	StateWaitingForInput
	StateTransferring
	StateSucceeded
	StateFailed
)

// Phase refines Bootstrapping (and names the others) for visibility.
type Phase uint8

// The phases. Prefill: AwaitingHello, AwaitingRequest, AwaitingAlloc, then
// Computing, Sending. Decode: Handshake, Admission, then AwaitingKV,
// Receiving. Terminal rooms have PhaseDone.
const (
	PhaseAwaitingHello   Phase = iota + 1 // prefill: request here, no HELLO from decode yet
	PhaseAwaitingRequest                  // prefill: HELLO here, no request from the router yet
	PhaseAwaitingAlloc                    // prefill: both here, decode has not sent its pages
	PhaseComputing                        // prefill: WaitingForInput, prompt queued or running
	PhaseSending                          // prefill: Transferring, waiting for DONE_ACK
	PhaseHandshake                        // decode: HELLO sent, waiting for HELLO_ACK
	PhaseAdmission                        // decode: waiting for pages
	PhaseAwaitingKV                       // decode: ALLOC sent, no KV yet
	PhaseReceiving                        // decode: KV arriving
	PhaseDone                             // terminal
)

// Reason says why a room failed. Its String is the metrics label.
type Reason uint8

// The reasons.
const (
	ReasonNone             Reason = iota
	ReasonClientAbort             // the client (router leg) went away
	ReasonPeerAbort               // the peer sent ABORT
	ReasonPeerFailed              // the peer sent FAILED
	ReasonPeerLost                // heartbeats stopped or the connection closed for good
	ReasonPeerUnreachable         // could not connect to the peer
	ReasonHelloTimeout            // prefill: decode never said HELLO
	ReasonRequestTimeout          // prefill: HELLO came, the router's request never did
	ReasonAllocTimeout            // prefill: decode never sent its pages
	ReasonHandshakeTimeout        // decode: no HELLO_ACK
	ReasonAdmissionTimeout        // decode: no pages in time
	ReasonPrefillTimeout          // waiting for the prompt to be computed took too long
	ReasonProgressTimeout         // a transfer stalled
	ReasonChecksum                // a KV payload failed its checksum
	ReasonProtocol                // the peer broke the protocol (counts, order)
	ReasonIncompatible            // model shape, page layout, dtype or version differ
	ReasonUnknownRoom             // the peer does not know the room
	ReasonEngine                  // the local engine failed the request
	ReasonShutdown                // the worker is stopping
	ReasonDeadline                // the watchdog found the room past its deadline
	ReasonDuplicate               // EffectReject: the room id is live or was used already (never fails a room)
	ReasonOverloaded              // EffectReject / FAILED: RoomsMax live rooms already (never fails a room)
	ReasonBadRequest              // EffectReject: the request lacks what the role needs (never fails a room)
	ReasonSendFailed              // a frame of the room could not be sent (refused locally: too large, queue full, over budget)
	reasonCount
)

// EventKind names an input to Step.
type EventKind uint8

// The events. "Frame" events come from the peer; the rest from local edges.
const (
	EventRequest        EventKind = iota + 1 // the router's HTTP leg arrived (Peer: decode side gets the prefill address)
	EventClientAbort                         // the router's HTTP leg was cancelled (only for a request the machine took: not one it answered with EffectReject)
	EventHello                               // frame HELLO (prefill): Peer is the decode worker's address
	EventHelloAck                            // frame HELLO_ACK (decode)
	EventAdmitted                            // decode engine reserved Pages (answer to EffectAdmit; pages no room can take come back in EffectFreePages)
	EventAlloc                               // frame ALLOC with Pages (prefill)
	EventComputeStarted                      // prefill engine started the prompt (visibility only)
	EventKVSent                              // prefill edge wrote KV frames to the wire (Bytes so far, never less): progress; see "Progress" below
	EventComputeDone                         // prefill engine sampled the first token (Token, Logprob) and every KV frame is on the wire; see "Progress" below
	EventKVReceived                          // decode edge stored KV frames (Bytes so far, never less): progress
	EventFirstToken                          // frame FIRST_TOKEN (decode): Token, Logprob
	EventDone                                // frame DONE (decode): PageCount, Bytes as the sender counted
	EventDoneAck                             // frame DONE_ACK (prefill)
	EventAbort                               // frame ABORT: Reason
	EventFailed                              // frame FAILED: Reason
	EventChecksumError                       // decode edge: a KV payload failed its checksum
	EventEngineError                         // the local engine failed the request
	EventPeerLost                            // transport: the peer at Peer is gone; fails all its live rooms
	EventShutdown                            // the worker is stopping: fails every live room
	EventTick                                // the driver's timer fired: Step(now, EventTick) is Tick(now)
	EventWatchdog                            // the edge's watchdog found Room live past its deadline (a timer did not fire): see watchdog.go
	EventSendFailed                          // the edge could not send a frame of Room for a local reason (not the peer's): fails the room (send_failed)
	EventPeerAlive                           // transport: a heartbeat came from Peer; prefill rooms waiting for its DONE_ACK extend their deadline (see "Progress")
	eventKindCount
)

// Progress. The prefill edge reports EventKVSent when KV bytes have been
// written to the connection (the transport's send returned), not when they
// were queued: a transfer that keeps moving, however slowly, refreshes the
// progress deadline and never hits ProgressTimeout. The engine usually
// samples the first token while KV is still queued; the edge holds that
// EventComputeDone back until the room's last KV frame is on the wire and
// only then steps it. So when EventComputeDone arrives every byte has been
// reported, the DONE it emits carries the full count, and DONE goes out
// after the last KV frame. (package driver implements this.)
//
// Written is not received: the kernel's socket buffers can hold megabytes,
// so the last KV frame and DONE may be "on the wire" long before decode has
// read them, and prefill learns nothing more until DONE_ACK. While a
// prefill room waits for DONE_ACK (Sending, DONE sent), each EventPeerAlive
// from its peer (the transport heard a heartbeat: decode is up and would
// have sent ABORT had its room failed, since decode's own progress deadline
// is measured at reception) moves the deadline to now + ProgressTimeout,
// but never past DoneAckWaitMax progress timeouts after DONE was sent. So a
// slow link fails only when what the buffers held takes longer than that
// to drain, and a silent peer still fails the room by ProgressTimeout (or
// PeerLost).

// Event is one input. Which fields matter depends on Kind (see each kind).
// Every frame event carries the sending peer's address in Peer; a frame from
// a peer other than the room's never changes the room.
type Event struct {
	Kind      EventKind
	Room      ID
	Peer      string  // the peer worker's transfer address
	RequestID string  // EventRequest: the router's request id
	Pages     []int32 // EventAdmitted, EventAlloc
	Token     int32   // EventComputeDone, EventFirstToken
	Logprob   float32
	PageCount int   // EventDone
	Bytes     int64 // EventKVSent, EventKVReceived, EventDone: every KV data byte, state included
	// StateBytes is the state's share of Bytes (EventKVSent,
	// EventKVReceived: so far; EventDone: as the sender counted).
	StateBytes int64
	// StateBad (EventDone) says the state the decode edge holds does not
	// match DONE's checksum of it.
	StateBad bool
	Reason   Reason
}

// FrameKind names a control frame the core asks the transport to send.
// KV payload frames are sent by the edges directly; the core only learns
// their progress.
type FrameKind uint8

// The control frames.
const (
	FrameHello FrameKind = iota + 1
	FrameHelloAck
	FrameAlloc
	FrameFirstToken
	FrameDone
	FrameDoneAck
	FrameAbort
	FrameFailed
)

// EffectKind names an output of the core that the driver must carry out.
type EffectKind uint8

// The effects.
const (
	EffectSend          EffectKind = iota + 1 // send Frame to Peer for Room (with Reason/Pages/Token/... as the frame needs)
	EffectStartCompute                        // prefill: submit the prompt to the engine; KV goes to Pages on Peer
	EffectCancelCompute                       // prefill: cancel the engine request
	EffectAdmit                               // decode: ask the engine for pages (answer with EventAdmitted)
	EffectResume                              // decode: KV complete; continue decoding from Token
	EffectCancelRequest                       // cancel the local request (engine and HTTP leg) with Reason
	EffectReject                              // answer the router's request at once with Reason: refused (duplicate, overloaded, shutdown, bad request), or the room's earlier failure
	EffectRelease                             // the room is terminal: free every resource it held (after its writers stopped); see Effect
	EffectReplyDone                           // prefill: the transfer succeeded; finish the router's HTTP leg
	EffectFreePages                           // decode: the engine reserved Pages for a room that cannot take them (ended, unknown, or already has pages): free them now
	effectKindCount
)

// Effect is one output. Which fields matter depends on Kind:
//
//   - EffectSend: Frame to Peer for Room; HELLO carries nothing more, ALLOC
//     Pages, FIRST_TOKEN Token and Logprob, DONE PageCount, Bytes and StateBytes, ABORT
//     and FAILED Reason.
//   - EffectStartCompute: RequestID's prompt, KV into Pages on Peer.
//   - EffectCancelCompute, EffectAdmit, EffectReplyDone: RequestID.
//   - EffectResume: RequestID continues from Token (Logprob) on Pages.
//   - EffectCancelRequest: RequestID ends with Reason.
//   - EffectReject: the request RequestID (the event's, not the room's) is
//     answered at once with Reason: ReasonDuplicate, ReasonOverloaded,
//     ReasonShutdown or ReasonBadRequest when it is refused, or (prefill)
//     the reason its room failed earlier. How that answer is put (an HTTP
//     status, a message) is the edge's business.
//   - EffectRelease: emitted exactly once per room record, when it turns
//     terminal, as its last effect; Reason is ReasonNone for success. It
//     frees what the ROOM held: on prefill the compute and transfer state;
//     on decode after a failure the reserved pages, after success only the
//     room's transfer bookkeeping (the pages now belong to the running
//     sequence, which EffectResume handed over). A room born terminal (a
//     tombstone from an ABORT or FAILED frame for an unknown room) held
//     nothing and its Release is a no-op for the edge.
//   - EffectFreePages: Pages (decode) that no room owns.
type Effect struct {
	Kind      EffectKind
	Room      ID
	RequestID string // the router's request id (see Kind)
	Peer      string
	Frame     FrameKind
	Reason    Reason
	Pages     []int32
	Token     int32
	Logprob   float32
	PageCount int
	Bytes     int64
	// StateBytes is DONE's count of state bytes (Config.StateBytes).
	StateBytes int64
}

// Transition records one state change, for /debug/rooms and traces.
type Transition struct {
	Room      ID
	At        Instant
	From, To  State
	FromPhase Phase
	ToPhase   Phase
	Event     EventKind
	Reason    Reason
	Deadline  Instant // the new state's deadline; 0 when To is terminal
}

// Ready is what a Step produced: effects to carry out, in order, and the
// transitions made.
type Ready struct {
	Effects     []Effect
	Transitions []Transition
}

// Outcome classifies how Step handled an event; every event gets exactly
// one and each is counted.
type Outcome uint8

// The outcomes.
const (
	OutcomeApplied  Outcome = iota + 1 // changed a live room
	OutcomeParked                      // created a room or tombstone that waits with a deadline (HELLO or ABORT before the request)
	OutcomeAnswered                    // answered without state change (e.g. FAILED for an unknown room, a duplicate request rejected)
	OutcomeLate                        // for a terminal room: ignored and counted
	OutcomeRejected                    // invalid for the room's state or unknown room: dropped and counted
)

// Config sets the core's deadlines and limits.
type Config struct {
	Role             Role
	HelloTimeout     Duration // prefill: request here, waiting for HELLO
	RequestTimeout   Duration // prefill: HELLO here, waiting for the request
	AllocTimeout     Duration // prefill: waiting for ALLOC (covers decode's admission)
	HandshakeTimeout Duration // decode: waiting for HELLO_ACK
	AdmissionTimeout Duration // decode: waiting for pages
	PrefillTimeout   Duration // prefill: computing; decode: waiting for the first KV
	ProgressTimeout  Duration // both: no transfer progress for this long
	TombstoneTTL     Duration // terminal rooms are remembered this long (longer than any deadline)
	RoomsMax         int      // live rooms; requests past it are rejected (ReasonOverloaded)
	TombstonesMax    int      // remembered terminal rooms; the oldest are forgotten first
	// StateBytes is the size of one sequence's recurrent state, which a
	// room moves after its pages (0: the model has none). Prefill fails a
	// room whose compute ended without sending all of it (engine); decode
	// resumes only when DONE's and its own state counts both equal it and
	// the state's checksum matched.
	StateBytes int64
	// Planted is a TEST-ONLY bug planted in the core (see PlantedBug) so
	// that a test can prove the simulator catches it. Its zero value,
	// PlantedNone, is the only one production uses: no flag, environment
	// variable or configuration file sets it.
	Planted PlantedBug
}

// RoomInfo is a room as /debug/rooms shows it.
type RoomInfo struct {
	ID        ID
	RequestID string
	Role      Role
	State     State
	Phase     Phase
	Reason    Reason
	Peer      string
	Created   Instant
	Deadline  Instant // 0 for terminal rooms
	Ended     Instant // when it turned terminal; 0 while live
	Expires   Instant // when the tombstone is forgotten; 0 while live
	Bytes     int64   // KV bytes sent (prefill) or received (decode) so far
	PageCount int     // pages the decode side reserved for the room
	// PeerReason is the reason the peer's ABORT or FAILED frame carried,
	// when one ended the room.
	PeerReason Reason
	// History holds the room's transitions, oldest first, the last
	// historyMax of them. It shares the machine's storage, which is
	// append-only (entries are never overwritten), so it stays valid and
	// unchanged after later steps; do not modify it.
	History []Transition
}
