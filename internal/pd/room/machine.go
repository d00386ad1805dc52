package room

import (
	"errors"
	"fmt"
	"slices"
)

// ErrConfig is wrapped by every error New returns.
var ErrConfig = errors.New("invalid room config")

// Machine holds every room of one worker (one Role) and applies events to
// them. It is the pure protocol core: no goroutines, no clock, no I/O.
// It is not safe for concurrent use: its owner (package driver's Driver,
// whose callers serialize every call: the worker with one mutex, the
// simulator with its one goroutine) feeds it events with Step and timer
// firings with Tick, reads Ready, carries out every effect in order, then
// calls Advance.
type Machine struct {
	cfg      Config
	now      Instant // the latest time seen; earlier times are raised to it
	seq      uint64  // creation counter: orders rooms by age
	rooms    map[ID]*room
	live     deadlineHeap
	tombs    []*room // terminal rooms in the order they ended (so by expiry)
	tombHead int     // tombs[:tombHead] are forgotten
	stopping bool    // Shutdown was stepped: no new rooms
	ready    Ready
	c        Counters
}

// room is one room's record, live or tombstone.
type room struct {
	id         ID
	seq        uint64
	requestID  string
	peer       string
	state      State
	phase      Phase
	reason     Reason
	peerReason Reason
	created    Instant
	deadline   Instant
	ended      Instant
	bytes      int64
	stateBytes int64 // the state's share of bytes
	pages      []int32
	token      int32
	logprob    float32
	requested  bool    // the router's request is here (its HTTP leg is open)
	allocated  bool    // pages are known (prefill: ALLOC came; decode: admitted)
	computing  bool    // prefill: StartCompute emitted, ComputeDone not yet
	doneSent   bool    // prefill: FIRST_TOKEN and DONE sent
	doneAt     Instant // prefill: when DONE was sent
	admitting  bool    // decode: EffectAdmit emitted, no pages yet
	haveToken  bool    // decode: FIRST_TOKEN stored
	released   bool    // EffectRelease emitted
	heapIdx    int
	history    []Transition
}

// New returns an empty Machine for cfg.Role. It checks that the role is
// set, every timeout is positive (and at most about 52 days), the tombstone
// TTL is longer than every timeout, both limits are positive and Planted is
// a known value.
func New(cfg Config) (*Machine, error) {
	if cfg.Role != RolePrefill && cfg.Role != RoleDecode {
		return nil, fmt.Errorf("new room machine: role %v: want prefill or decode: %w", cfg.Role, ErrConfig)
	}
	timeouts := []struct {
		name string
		d    Duration
	}{
		{"HelloTimeout", cfg.HelloTimeout}, {"RequestTimeout", cfg.RequestTimeout},
		{"AllocTimeout", cfg.AllocTimeout}, {"HandshakeTimeout", cfg.HandshakeTimeout},
		{"AdmissionTimeout", cfg.AdmissionTimeout}, {"PrefillTimeout", cfg.PrefillTimeout},
		{"ProgressTimeout", cfg.ProgressTimeout},
	}
	for _, t := range timeouts {
		if t.d <= 0 || t.d > durationMax {
			return nil, fmt.Errorf("new room machine: %s %v: want > 0 and <= %v: %w", t.name, t.d, durationMax, ErrConfig)
		}
		if cfg.TombstoneTTL <= t.d || cfg.TombstoneTTL > durationMax {
			return nil, fmt.Errorf("new room machine: TombstoneTTL %v: want longer than %s %v and <= %v: %w",
				cfg.TombstoneTTL, t.name, t.d, durationMax, ErrConfig)
		}
	}
	if cfg.Planted >= plantedCount {
		return nil, fmt.Errorf("new room machine: Planted %v: unknown planted bug: %w", cfg.Planted, ErrConfig)
	}
	if cfg.StateBytes < 0 || cfg.StateBytes > stateBytesMax {
		return nil, fmt.Errorf("new room machine: StateBytes %d: want 0 to %d: %w", cfg.StateBytes, stateBytesMax, ErrConfig)
	}
	if cfg.RoomsMax <= 0 || cfg.TombstonesMax <= 0 {
		return nil, fmt.Errorf("new room machine: RoomsMax %d, TombstonesMax %d: want both > 0: %w",
			cfg.RoomsMax, cfg.TombstonesMax, ErrConfig)
	}
	return &Machine{cfg: cfg, rooms: make(map[ID]*room)}, nil
}

// Step applies one event at time now and returns how it was handled. Its
// effects and transitions accumulate in Ready until Advance. Times earlier
// than one already seen are treated as that time (the core's clock never
// runs backwards), and times past instantMax as instantMax. Bad input (an
// unknown kind, a frame from the wrong peer, a frame out of order) is
// rejected or fails the room; it never panics.
func (m *Machine) Step(now Instant, ev Event) Outcome {
	if now > m.now {
		m.now = min(now, instantMax)
	}
	now = m.now
	var o Outcome
	r := m.rooms[ev.Room]
	switch {
	case ev.Kind == EventTick:
		m.expire(now)
		o = OutcomeApplied
	case ev.Kind == EventPeerLost:
		o = m.peerLost(now, ev)
	case ev.Kind == EventPeerAlive:
		o = m.peerAlive(now, ev)
	case ev.Kind == EventShutdown:
		m.shutdown(now)
		o = OutcomeApplied
	case r != nil && r.state.Terminal():
		o = m.stepTerminal(r, ev)
	case ev.Kind == EventWatchdog:
		o = m.watchdog(now, r)
	case m.cfg.Role == RolePrefill:
		o = m.stepPrefill(now, r, ev)
	default:
		o = m.stepDecode(now, r, ev)
	}
	m.count(ev.Kind, o)
	m.checkStep(ev.Room)
	return o
}

// Tick fails every live room whose deadline is at or before now, with its
// phase's timeout reason, and forgets tombstones whose TTL has passed. It is
// Step(now, Event{Kind: EventTick}).
func (m *Machine) Tick(now Instant) { m.Step(now, Event{Kind: EventTick}) }

// NextDeadline returns the earliest instant at which Tick has work: the
// first live room's deadline or the first tombstone's expiry. It returns
// false when the machine holds no rooms.
func (m *Machine) NextDeadline() (Instant, bool) {
	var next Instant
	ok := false
	if len(m.live) > 0 {
		next, ok = m.live[0].deadline, true
	}
	if m.tombHead < len(m.tombs) {
		exp := m.expires(m.tombs[m.tombHead])
		if !ok || exp < next {
			next, ok = exp, true
		}
	}
	return next, ok
}

// Ready returns the effects and transitions produced since the last
// Advance, in order. The slices belong to the caller; they stay valid after
// Advance. The driver carries out every effect, in order, then calls
// Advance.
func (m *Machine) Ready() Ready { return m.ready }

// Advance tells the machine the driver carried out everything Ready
// returned: those effects are done, and the next Ready starts empty.
// Until Advance, Ready keeps returning them (with any that later Steps
// add), so an owner that stops before carrying them out loses nothing.
func (m *Machine) Advance() { m.ready = Ready{} }

// State returns the room's state and phase, and false when the machine
// neither holds nor remembers it.
func (m *Machine) State(id ID) (State, Phase, bool) {
	r := m.rooms[id]
	if r == nil {
		return 0, 0, false
	}
	return r.state, r.phase, true
}

// Room returns the room as /debug/rooms shows it, and false when the machine
// neither holds nor remembers it.
func (m *Machine) Room(id ID) (RoomInfo, bool) {
	r := m.rooms[id]
	if r == nil {
		return RoomInfo{}, false
	}
	return m.info(r), true
}

// Rooms returns every live and remembered room, oldest first.
func (m *Machine) Rooms() []RoomInfo {
	all := make([]*room, 0, len(m.live)+len(m.tombs)-m.tombHead)
	all = append(all, m.live...)
	all = append(all, m.tombs[m.tombHead:]...)
	slices.SortFunc(all, bySeq)
	out := make([]RoomInfo, len(all))
	for i, r := range all {
		out[i] = m.info(r)
	}
	return out
}

// LiveRoom is a live room's state and age, for queue gauges.
type LiveRoom struct {
	ID      ID
	State   State
	Created Instant
}

// LiveRooms returns every live room's state and creation time, in no
// particular order: O(live rooms), without copying histories.
func (m *Machine) LiveRooms() []LiveRoom {
	out := make([]LiveRoom, len(m.live))
	for i, r := range m.live {
		out[i] = LiveRoom{ID: r.id, State: r.state, Created: r.created}
	}
	return out
}

// Live returns the number of live (non-terminal) rooms.
func (m *Machine) Live() int { return len(m.live) }

// Counters returns a snapshot of the statistics.
func (m *Machine) Counters() Counters {
	c := m.c
	c.Live = len(m.live)
	c.Tombstones = len(m.tombs) - m.tombHead
	return c
}

// info copies a room into a RoomInfo.
func (m *Machine) info(r *room) RoomInfo {
	ri := RoomInfo{
		ID: r.id, RequestID: r.requestID, Role: m.cfg.Role,
		State: r.state, Phase: r.phase, Reason: r.reason, PeerReason: r.peerReason,
		Peer: r.peer, Created: r.created, Deadline: r.deadline,
		Bytes: r.bytes, PageCount: len(r.pages), History: slices.Clip(r.history),
	}
	if r.state.Terminal() {
		ri.Ended, ri.Expires = r.ended, m.expires(r)
	}
	return ri
}

// expires returns when a tombstone is forgotten.
func (m *Machine) expires(r *room) Instant { return r.ended + Instant(m.cfg.TombstoneTTL) }
