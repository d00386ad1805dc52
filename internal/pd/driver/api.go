package driver

import (
	"errors"
	"log/slog"

	"tandem/internal/pd/kvwire"
	"tandem/internal/pd/room"
)

// The type parameter Leg of Driver, Config, Engine and Legs is the
// adapter's record of one router HTTP leg (the worker's *leg, the
// simulator's *nodeLeg). The driver never looks inside: it stores the leg
// with its room, compares legs for equality (normally pointers: one per
// leg) and hands them back in Engine and Legs calls, typed, so an adapter
// needs no type assertion.

// Token is a sampled token as the first-token handoff carries it.
type Token struct {
	ID      int32
	Logprob float32
	// Top holds the alternatives the request asked for (FIRST_TOKEN carries
	// at most kvwire.TopLogprobsMax of them; more are cut).
	Top []kvwire.TopLogprob
}

// Engine is the local inference engine as the driver uses it. Every method
// returns quickly (the engine only queues work) and must not call back into
// the driver; results come back later through the Driver methods named.
type Engine[Leg comparable] interface {
	// StartCompute (prefill) submits leg's prompt, to be computed into
	// pages pages on the decode side. The engine then reports KV with
	// Driver.KVReady (each frame of the prompt's pages, every layer, K
	// and V, once; a sliding-window layer's frames only from the prompt's
	// last window), then, for a model with state, the prompt's final state
	// (Config.StateBytes) as KV frames of kind kvwire.KindState in ordinal
	// order after the last page's frames, then the first token with
	// Driver.ComputeDone (once, after every KV frame), or a failure with Driver.EngineError. An
	// error fails the room (engine), for example when the prompt needs a
	// different number of pages; nothing is reported for it then.
	StartCompute(leg Leg, pages int) error
	// Admit (decode) asks for the pages of leg's prompt, and for a state
	// buffer of Config.StateBytes bytes when the model has state; the
	// engine answers with Driver.Admitted, once, with one page per page of
	// the prompt and the buffer. An error fails the room (engine).
	Admit(leg Leg) error
	// Resume (decode) continues leg's sequence from the first token, on
	// the pages and from the state Admitted gave (they now belong to the
	// sequence; the state buffer holds the prompt's final state).
	Resume(leg Leg, first Token) error
	// Cancel ends leg's engine sequence and frees its pages and state. It is
	// idempotent. The driver calls it only when no KV write into the
	// sequence's pages is in flight.
	Cancel(leg Leg)
}

// Reports is how Engine and Wire implementations report back: the Driver
// methods they call (under the caller's lock, after the call that caused
// them has returned). An adapter that holds a Reports rather than its
// *Driver lets a conformance test (package drivertest) stand in for the
// driver.
type Reports[Leg comparable] interface {
	Sent(now room.Instant, peer string, lane Lane, err error)
	KVReady(now room.Instant, id room.ID, leg Leg, frames []KVFrame)
	ComputeDone(now room.Instant, id room.ID, leg Leg, first Token)
	EngineError(now room.Instant, id room.ID, leg Leg)
	Admitted(now room.Instant, id room.ID, leg Leg, dest Pages, pages []int32, state []byte)
}

var _ Reports[int] = (*Driver[int])(nil)

// Pages is where a decode room's KV lands: the engine's cache pages the
// room was admitted with.
type Pages interface {
	// KVPage returns the bytes of layer's K (kind 0) or V (kind 1) page
	// number page in the engine's cache.
	KVPage(layer int, kind kvwire.KVKind, page int32) []byte
}

// Lane names one of a peer's two send lanes.
type Lane uint8

// The lanes.
const (
	LaneControl Lane = iota + 1 // control frames, FIFO across the peer's rooms
	LaneKV                      // KV frames, the peer's rooms served in turn
)

// Frame is one frame handed to Wire.Send: a control frame (Lane
// LaneControl: Type and Payload) or a KV frame (LaneKV: KV and Data).
type Frame struct {
	Peer    string
	Lane    Lane
	Room    room.ID
	Type    kvwire.Type // control frames
	Payload []byte      // control frames: the encoded payload
	KV      kvwire.KV   // KV frames: the coordinates
	Data    []byte      // KV frames: the page bytes (owned by the frame until Sent)
	// Release, when set (KV frames), gives Data back to the engine that
	// holds it. It is called exactly once: by the driver for a frame it
	// drops, by the Wire for a frame handed to Send (once Data is no
	// longer read). It must not block or call back into the driver.
	Release func()
}

// Bytes returns what the frame counts against the queue budget: its data
// or payload and a header's worth, so that even an empty frame costs.
func (f Frame) Bytes() int64 { return int64(kvwire.HeaderBytes + len(f.Data) + len(f.Payload)) }

// Wire is the transport as the driver uses it.
type Wire interface {
	// Send hands f to its peer and lane. It must not block or call back
	// into the driver. The driver has at most one frame outstanding per
	// peer and lane: exactly one Driver.Sent(now, f.Peer, f.Lane, err)
	// call must follow, after the frame was written to the connection
	// (err nil) or could not be (err says why; wrap a local refusal, such
	// as a full send queue, with ErrLocal). A KV frame's Release is then
	// the Wire's to call.
	Send(f Frame)
	// PeerIdle says the driver holds nothing for peer any more: no room,
	// no queued or outstanding frame. The adapter may stop what it runs
	// for the peer; a later Send for it starts afresh.
	PeerIdle(peer string)
}

// Legs answers the router's HTTP legs.
type Legs[Leg comparable] interface {
	// Succeed finishes a prefill leg whose transfer succeeded
	// (room.EffectReplyDone).
	Succeed(leg Leg)
	// Fail ends leg with the room's failure reason
	// (room.EffectCancelRequest).
	Fail(leg Leg, reason room.Reason)
}

// Observer receives what the driver counts, for metrics. It is called
// with the driver's caller's lock held and must return quickly. Embed
// NopObserver to implement only some methods.
type Observer interface {
	// Event reports one stepped event and how the core handled it.
	Event(kind room.EventKind, o room.Outcome)
	// Transition reports one state change; for a transition to a
	// terminal state bytes is the room's KV bytes (sent or received), 0
	// otherwise.
	Transition(t room.Transition, bytes int64)
	// KVDropped counts a received KV frame whose bytes were discarded, by
	// why: unknown_or_finished_room, room_not_receiving, wrong_peer,
	// bad_coordinates, duplicate.
	KVDropped(why string)
	// BadFrame counts a control frame dropped as malformed_payload or
	// unexpected_type.
	BadFrame(why string)
	// SendDropped counts frames the driver did not send, by why:
	// room_ended (queued KV of a room that ended), over_budget,
	// send_error.
	SendDropped(why string, frames int)
}

// NopObserver is an Observer that ignores everything.
type NopObserver struct{}

// Event does nothing.
func (NopObserver) Event(room.EventKind, room.Outcome) {}

// Transition does nothing.
func (NopObserver) Transition(room.Transition, int64) {}

// KVDropped does nothing.
func (NopObserver) KVDropped(string) {}

// BadFrame does nothing.
func (NopObserver) BadFrame(string) {}

// SendDropped does nothing.
func (NopObserver) SendDropped(string, int) {}

// ErrLocal marks a send error as local to the frame (the codec refused it,
// the send queue was full): only the frame's room fails. Any other error
// from Wire means the peer is unreachable and fails every room with it.
// Errors wrapping kvwire.ErrTooLarge, kvwire.ErrType or kvwire.ErrMalformed
// count as local too.
var ErrLocal = errors.New("driver: local send failure")

// IsLocal reports whether a send error is local to its frame (see ErrLocal).
func IsLocal(err error) bool {
	return errors.Is(err, ErrLocal) || errors.Is(err, kvwire.ErrTooLarge) || errors.Is(err, kvwire.ErrType) ||
		errors.Is(err, kvwire.ErrMalformed)
}

// Config configures a Driver.
type Config[Leg comparable] struct {
	// Room configures the core; Room.Role is the worker's role.
	Room room.Config
	// Layers and PageBytes describe the KV cache: a KV frame names a page
	// ordinal, a layer below Layers and K or V, and carries exactly
	// PageBytes bytes.
	Layers    int
	PageBytes int
	// StateBytes is one sequence's recurrent state (kvwire.Shape's; 0
	// for models without one): it travels after the pages in KV frames of
	// kind kvwire.KindState, kvwire.StateFrameSize bytes each (the last
	// one the rest).
	// Room.StateBytes must be 0 (then it is set to this) or equal.
	StateBytes int
	// Limits bounds the send queues; the zero value means DefaultLimits.
	Limits Limits

	Engine   Engine[Leg]
	Wire     Wire
	Legs     Legs[Leg]
	Observer Observer     // nil: NopObserver
	Logger   *slog.Logger // nil: discard
}

// Reject is the immediate answer to a Request the core refused
// (room.EffectReject). Reason is why: room.ReasonDuplicate (the id is in
// use, or was), room.ReasonOverloaded (RoomsMax live rooms),
// room.ReasonShutdown (the worker is stopping), room.ReasonBadRequest (a
// decode request without the prefill address), or, with Failed, the
// reason the room already failed here (a prefill tombstone). Msg says so
// in words. The adapter chooses how to put it to its client.
type Reject struct {
	Reason room.Reason
	Failed bool // Reason is the room's earlier failure, not a refusal of this request
	Msg    string
}

func (r *Reject) Error() string { return r.Msg }

// PeerInfo is one peer's send state, for /debug and tests.
type PeerInfo struct {
	Peer          string `json:"peer"`
	Rooms         int    `json:"rooms"`          // driver rooms with this peer
	ControlQueued int    `json:"control_queued"` // control frames waiting (not counting the outstanding one)
	KVQueued      int    `json:"kv_queued"`      // KV frames waiting, all rooms
	QueuedBytes   int64  `json:"queued_bytes"`   // bytes of the waiting frames
	Outstanding   int    `json:"outstanding"`    // frames handed to Wire.Send, Sent not yet called (0-2)
}

// Stats are the driver's own counters.
type Stats struct {
	QueuedBytes int64 // bytes waiting in every peer's lanes
	Peers       int   // peers with driver state
	Rooms       int   // rooms with driver state (live, or ended with a write in flight)
	Quarantined int   // ended decode rooms whose pages wait for an in-flight KV write
}
