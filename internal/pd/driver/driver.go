package driver

import (
	"fmt"
	"log/slog"

	"tandem/internal/pd/kvwire"
	"tandem/internal/pd/room"
)

// Driver is one worker's deterministic edge around its room.Machine. It is
// not safe for concurrent use (see the package doc).
type Driver[Leg comparable] struct {
	role   room.Role
	layers int
	pageB  int
	stateB int // one sequence's state bytes (0: none), sent in stateN pieces
	stateN int // kvwire.StateFrameSize
	lim    Limits
	m      *room.Machine
	eng    Engine[Leg]
	wire   Wire
	legs   Legs[Leg]
	obs    Observer
	log    *slog.Logger

	rooms  map[room.ID]*rec[Leg]
	peers  map[string]*peer
	queued int64 // bytes held in every peer's lanes (queued and outstanding)

	// submitting is the record whose EventRequest is being stepped, so an
	// EffectReject reaches it and not a live record with the same id.
	submitting *rec[Leg]
	rejected   *Reject
	// more holds follow-up events the effects produced, stepped after the
	// current step's effects.
	more []room.Event
}

// rec is the driver's record of one room with a router leg here.
type rec[Leg comparable] struct {
	id   room.ID
	leg  Leg
	peer string // "" until known (prefill: at StartCompute)

	ended         bool // EffectRelease seen
	resumed       bool // decode: the sequence runs on after the room
	cancelPending bool // decode: Engine.Cancel once inflight drops to 0

	// prefill
	kvPending int    // KV frames queued or outstanding
	sentBytes int64  // KV bytes on the wire (state included)
	sentState int64  // state bytes on the wire
	stateSum  uint32 // CRC-32C of the state frames handed over so far
	held      bool   // ComputeDone came before the last KV frame was sent
	first     Token  // the first token (FIRST_TOKEN's alternatives)

	// decode
	dest      Pages
	pages     []int32
	inflight  int // KV writes between KVDest and KVDone
	recvBytes int64
	recvState int64  // state bytes stored
	state     []byte // the state buffer the engine admitted the room with
	recv      []frameState
	firstTop  []kvwire.TopLogprob
}

// KVFrame is one KV page a prefill engine finished: one layer's K or V of
// one page ordinal. Data must stay unchanged until it is sent: a copy,
// or memory the engine holds until Release (see Frame.Release).
type KVFrame struct {
	KV      kvwire.KV
	Data    []byte
	Release func()
}

// releaseKV calls the Release of each frame that has one.
func releaseKV(frames []KVFrame) {
	for _, f := range frames {
		if f.Release != nil {
			f.Release()
		}
	}
}

// New returns a driver with an empty room machine.
func New[Leg comparable](cfg Config[Leg]) (*Driver[Leg], error) {
	if cfg.Room.StateBytes == 0 {
		cfg.Room.StateBytes = int64(cfg.StateBytes)
	}
	m, err := room.New(cfg.Room)
	if err != nil {
		return nil, fmt.Errorf("driver: %w", err)
	}
	if cfg.Engine == nil || cfg.Wire == nil || cfg.Legs == nil {
		return nil, fmt.Errorf("driver: Engine, Wire and Legs are all required")
	}
	if cfg.Layers <= 0 || cfg.PageBytes <= 0 || cfg.PageBytes > kvwire.KVDataBytesMax {
		return nil, fmt.Errorf("driver: %d layers of %d-byte pages: want both > 0 and pages at most %d bytes",
			cfg.Layers, cfg.PageBytes, kvwire.KVDataBytesMax)
	}
	if cfg.StateBytes < 0 || cfg.StateBytes > kvwire.StateBytesMax || int64(cfg.StateBytes) != cfg.Room.StateBytes {
		return nil, fmt.Errorf("driver: state of %d bytes (the room core's %d): want equal, 0 to %d",
			cfg.StateBytes, cfg.Room.StateBytes, kvwire.StateBytesMax)
	}
	lim := cfg.Limits
	if lim == (Limits{}) {
		lim = DefaultLimits()
	}
	if lim.PeerQueueBytesMax < FrameBytesMax || lim.QueueBytesMax < lim.PeerQueueBytesMax {
		return nil, fmt.Errorf("driver: limits %+v: want FrameBytesMax (%d) <= PeerQueueBytesMax <= QueueBytesMax (use LimitsFor)",
			lim, FrameBytesMax)
	}
	d := &Driver[Leg]{role: cfg.Room.Role, layers: cfg.Layers, pageB: cfg.PageBytes, lim: lim, m: m,
		stateB: cfg.StateBytes, stateN: kvwire.StateFrameSize(cfg.StateBytes, cfg.PageBytes),
		eng: cfg.Engine, wire: cfg.Wire, legs: cfg.Legs, obs: cfg.Observer, log: cfg.Logger,
		rooms: map[room.ID]*rec[Leg]{}, peers: map[string]*peer{}}
	if d.obs == nil {
		d.obs = NopObserver{}
	}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	return d, nil
}

// stateFrames is the number of state frames of one sequence's state.
func (d *Driver[Leg]) stateFrames() int {
	if d.stateN == 0 {
		return 0
	}
	return (d.stateB + d.stateN - 1) / d.stateN
}

// stateFrameBytes is the length of (valid) state frame ordinal i
// (kvwire.StateFrameSize, the last one the rest), as
// kvwire.Shape.StateFrameBytes.
func (d *Driver[Leg]) stateFrameBytes(i int) int { return min(d.stateN, d.stateB-i*d.stateN) }

// Role returns the worker's role.
func (d *Driver[Leg]) Role() room.Role { return d.role }

// Limits returns the send queue limits in force.
func (d *Driver[Leg]) Limits() Limits { return d.lim }

// step applies one event, carries out its effects and then the follow-up
// events they produced.
func (d *Driver[Leg]) step(now room.Instant, ev room.Event) room.Outcome {
	out := d.stepOne(now, ev)
	for len(d.more) > 0 {
		e := d.more[0]
		d.more = d.more[1:]
		d.stepOne(now, e)
	}
	d.more = nil
	return out
}

func (d *Driver[Leg]) stepOne(now room.Instant, ev room.Event) room.Outcome {
	out := d.m.Step(now, ev)
	if ev.Kind != room.EventTick {
		d.obs.Event(ev.Kind, out)
	}
	rd := d.m.Ready()
	d.apply(now, rd)
	d.m.Advance() // carried out: the next Ready starts empty
	return out
}

// apply carries out a Ready in order.
func (d *Driver[Leg]) apply(now room.Instant, rd room.Ready) {
	for _, t := range rd.Transitions {
		var b int64
		if t.To.Terminal() {
			if info, ok := d.m.Room(t.Room); ok {
				b = info.Bytes
			}
		}
		d.obs.Transition(t, b)
	}
	for _, e := range rd.Effects {
		d.applyOne(now, e)
	}
}

func (d *Driver[Leg]) applyOne(now room.Instant, e room.Effect) {
	r := d.rooms[e.Room]
	switch e.Kind {
	case room.EffectSend:
		d.sendControl(e, r)
	case room.EffectStartCompute:
		if r == nil {
			return
		}
		d.attach(r, e.Peer)
		if err := d.eng.StartCompute(r.leg, len(e.Pages)); err != nil {
			d.log.Warn("prefill engine refused the prompt", "room", e.Room, "err", err)
			d.more = append(d.more, room.Event{Kind: room.EventEngineError, Room: e.Room})
			return
		}
		d.more = append(d.more, room.Event{Kind: room.EventComputeStarted, Room: e.Room})
	case room.EffectCancelCompute:
		if r != nil {
			d.eng.Cancel(r.leg)
		}
	case room.EffectAdmit:
		if r == nil {
			return
		}
		if err := d.eng.Admit(r.leg); err != nil {
			d.log.Warn("decode engine refused the request", "room", e.Room, "err", err)
			d.more = append(d.more, room.Event{Kind: room.EventEngineError, Room: e.Room})
		}
	case room.EffectResume:
		if r == nil {
			return
		}
		r.resumed = true
		if err := d.eng.Resume(r.leg, Token{ID: e.Token, Logprob: e.Logprob, Top: r.firstTop}); err != nil {
			d.log.Error("resume failed", "room", e.Room, "err", err)
		}
	case room.EffectCancelRequest:
		if r != nil {
			d.legs.Fail(r.leg, e.Reason)
			d.cancelSequence(r)
		}
	case room.EffectReplyDone:
		if r != nil {
			d.legs.Succeed(r.leg)
		}
	case room.EffectReject:
		if s := d.submitting; s != nil && s.id == e.Room {
			st, _, _ := d.m.State(e.Room)
			rj := &Reject{Reason: e.Reason, Failed: st == room.StateFailed && e.Reason != room.ReasonDuplicate}
			rj.Msg = rejectMessage(e.Room, rj)
			d.rejected = rj
		}
	case room.EffectFreePages:
		// Pages reserved for a room that had already ended: the engine
		// owns them, and the room's failure cancelled the engine
		// sequence, which frees them when the engine reaps it.
	case room.EffectRelease:
		if r != nil {
			d.release(r, e.Reason)
		}
	}
}

// rejectMessage says in words why the request for room id was refused.
func rejectMessage(id room.ID, rj *Reject) string {
	switch {
	case rj.Failed:
		return fmt.Sprintf("room %s already failed here: %s", id, rj.Reason)
	case rj.Reason == room.ReasonDuplicate:
		return fmt.Sprintf("room %s is already in use on this worker (room ids are single-use)", id)
	case rj.Reason == room.ReasonShutdown:
		return "this worker is stopping; retry on another"
	case rj.Reason == room.ReasonOverloaded:
		return "this worker has too many live rooms; retry later"
	case rj.Reason == room.ReasonBadRequest:
		return "a decode leg needs the prefill worker's transfer address"
	}
	return fmt.Sprintf("room %s refused: %s", id, rj.Reason)
}

// release handles the room's one EffectRelease (reason: ReasonNone for
// success): its queued KV is dropped; after a failure so are its queued
// control frames other than the ABORT or FAILED that tell the peer (a DONE
// sent after the room failed here would let decode succeed on a room this
// side failed); its engine sequence ends (unless decode resumed it), and
// the record goes once no KV write into its pages is in flight (a decode
// room that succeeded with one in flight, which only a peer whose DONE
// counted fewer bytes than it sent can cause, keeps its record until that
// write's KVDone too).
func (d *Driver[Leg]) release(r *rec[Leg], reason room.Reason) {
	r.ended = true
	if p := d.peers[r.peer]; p != nil {
		n := p.dropRoom(&d.queued, r.id)
		if reason != room.ReasonNone {
			n += p.dropControl(&d.queued, r.id)
		}
		if n > 0 {
			d.obs.SendDropped("room_ended", n)
		}
	}
	r.kvPending = 0
	if !r.resumed {
		d.cancelSequence(r)
	}
	if r.inflight == 0 {
		d.forget(r)
	}
}

// cancelSequence ends the leg's engine sequence once no KV write into its
// pages is in flight, so no page is reused while a write can land.
func (d *Driver[Leg]) cancelSequence(r *rec[Leg]) {
	if r.inflight > 0 {
		r.cancelPending = true
		return
	}
	d.eng.Cancel(r.leg)
}

// forget removes an ended record and lets its peer go when idle.
func (d *Driver[Leg]) forget(r *rec[Leg]) {
	if d.rooms[r.id] == r {
		delete(d.rooms, r.id)
	}
	if p := d.peers[r.peer]; p != nil && r.peer != "" {
		p.rooms--
		d.idle(p)
	}
	r.peer = ""
}

// attach makes peer the record's peer (counted in the peer's rooms).
func (d *Driver[Leg]) attach(r *rec[Leg], peer string) {
	if r.peer == peer || peer == "" {
		return
	}
	if old := d.peers[r.peer]; old != nil && r.peer != "" {
		old.rooms--
		d.idle(old)
	}
	r.peer = peer
	d.peerFor(peer).rooms++
}

// Request is the router's HTTP leg for room id arriving (in the worker:
// server → Worker.SubmitLeg). peer is the prefill worker's transfer address on the
// decode side ("" on prefill). It returns the immediate answer when the
// core refused the request; otherwise the driver keeps leg with the room
// and answers it later through Legs.
func (d *Driver[Leg]) Request(now room.Instant, id room.ID, requestID, peer string, leg Leg) *Reject {
	r := &rec[Leg]{id: id, leg: leg}
	dup := d.rooms[id] != nil
	if !dup {
		d.rooms[id] = r
		if d.role == room.RoleDecode {
			d.attach(r, peer)
		}
	}
	d.submitting, d.rejected = r, nil
	d.step(now, room.Event{Kind: room.EventRequest, Room: id, RequestID: requestID, Peer: peer})
	rej := d.rejected
	d.submitting, d.rejected = nil, nil
	if rej != nil && d.rooms[id] == r {
		d.forget(r)
	}
	return rej
}

// ClientAbort is the router's leg going away. Before the room is over it
// is room.EventClientAbort; after success it ends the sequence that runs
// on (decode), once no KV write into its pages is in flight.
func (d *Driver[Leg]) ClientAbort(now room.Instant, id room.ID, leg Leg) {
	r := d.rooms[id]
	if r != nil && r.leg == leg && !r.ended {
		d.step(now, room.Event{Kind: room.EventClientAbort, Room: id})
		r = d.rooms[id]
	}
	switch {
	case r != nil && r.leg == leg && r.ended && r.inflight > 0:
		r.cancelPending = true
	case r == nil || r.leg != leg:
		d.eng.Cancel(leg) // the room is over: end the sequence that ran on
	}
}

// Shutdown fails every live room; the core refuses new ones from now on.
func (d *Driver[Leg]) Shutdown(now room.Instant) { d.step(now, room.Event{Kind: room.EventShutdown}) }

// Tick fires the core's deadlines due at now.
func (d *Driver[Leg]) Tick(now room.Instant) { d.step(now, room.Event{Kind: room.EventTick}) }

// NextDeadline returns when Tick next has work.
func (d *Driver[Leg]) NextDeadline() (room.Instant, bool) { return d.m.NextDeadline() }

// Watchdog fails the live rooms more than room.WatchdogGrace past their
// deadline (a timer that did not fire) and returns their ids, for the log.
func (d *Driver[Leg]) Watchdog(now room.Instant) []room.ID {
	ids := d.m.Overdue(now-room.Instant(room.WatchdogGrace), 0)
	for _, id := range ids {
		d.step(now, room.Event{Kind: room.EventWatchdog, Room: id})
	}
	return ids
}

// PeerLost fails every live room with peer (the transport lost it).
func (d *Driver[Leg]) PeerLost(now room.Instant, peer string) {
	d.step(now, room.Event{Kind: room.EventPeerLost, Peer: peer, Reason: room.ReasonPeerLost})
	if p := d.peers[peer]; p != nil {
		d.idle(p)
	}
}

// PeerAlive reports that the transport heard from peer (a heartbeat):
// prefill rooms waiting for its DONE_ACK extend their deadline (see
// "Progress" in package room). Decode ignores it.
func (d *Driver[Leg]) PeerAlive(now room.Instant, peer string) {
	if d.role == room.RolePrefill {
		d.step(now, room.Event{Kind: room.EventPeerAlive, Peer: peer})
	}
}

// Step applies an event the driver has no method for (tests, the
// simulator's probes) and carries out its effects.
func (d *Driver[Leg]) Step(now room.Instant, ev room.Event) room.Outcome { return d.step(now, ev) }
