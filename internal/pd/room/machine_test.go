package room

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// The peers the table tests use: the room's decode peer on prefill and its
// prefill peer on decode.
const (
	testDecodePeer  = "d1"
	testPrefillPeer = "p1"
)

func newTestMachine(t *testing.T, role Role) *Machine {
	t.Helper()
	m, err := New(defaultConfig(role))
	if err != nil {
		t.Fatalf("New(defaultConfig(%v)) error: %v", role, err)
	}
	return m
}

// pathTo returns the events that take a new room to live phase p.
func pathTo(id ID, p Phase) []Event {
	request := Event{Kind: EventRequest, Room: id, RequestID: "r"}
	hello := Event{Kind: EventHello, Room: id, Peer: testDecodePeer}
	alloc := Event{Kind: EventAlloc, Room: id, Peer: testDecodePeer, Pages: []int32{1, 2}}
	dreq := Event{Kind: EventRequest, Room: id, RequestID: "r", Peer: testPrefillPeer}
	ack := Event{Kind: EventHelloAck, Room: id, Peer: testPrefillPeer}
	admitted := Event{Kind: EventAdmitted, Room: id, Pages: []int32{1, 2}}
	switch p {
	case PhaseAwaitingHello:
		return []Event{request}
	case PhaseAwaitingRequest:
		return []Event{hello}
	case PhaseAwaitingAlloc:
		return []Event{request, hello}
	case PhaseComputing:
		return []Event{request, hello, alloc}
	case PhaseSending:
		return []Event{request, hello, alloc, {Kind: EventKVSent, Room: id, Bytes: 64}}
	case PhaseHandshake:
		return []Event{dreq}
	case PhaseAdmission:
		return []Event{dreq, ack}
	case PhaseAwaitingKV:
		return []Event{dreq, ack, admitted}
	case PhaseReceiving:
		return []Event{dreq, ack, admitted, {Kind: EventKVReceived, Room: id, Bytes: 64}}
	}
	return nil
}

// succeedPath returns the events that take a new room to Succeeded.
func succeedPath(role Role, id ID) []Event {
	if role == RolePrefill {
		return append(pathTo(id, PhaseSending),
			Event{Kind: EventComputeDone, Room: id, Token: 7},
			Event{Kind: EventDoneAck, Room: id, Peer: testDecodePeer})
	}
	return append(pathTo(id, PhaseReceiving),
		Event{Kind: EventFirstToken, Room: id, Peer: testPrefillPeer, Token: 7},
		Event{Kind: EventDone, Room: id, Peer: testPrefillPeer, PageCount: 2, Bytes: 64})
}

// stepAll steps events at now, failing the test on an outcome it does not
// expect for a path (rejected or late).
func stepAll(t *testing.T, m *Machine, now Instant, events []Event) {
	t.Helper()
	for _, ev := range events {
		if o := m.Step(now, ev); o == OutcomeRejected || o == OutcomeLate {
			t.Fatalf("Step(%v, %v) = %v on the way to a phase", now, ev.Kind, o)
		}
	}
}

// livePhases returns the live phases of a role, from the phase table.
func livePhases(role Role) []Phase {
	var out []Phase
	for _, p := range Phases() {
		if p != PhaseDone && phaseTable[p].role == role {
			out = append(out, p)
		}
	}
	return out
}

func TestNewValidatesConfig(t *testing.T) {
	good := defaultConfig(RolePrefill)
	if _, err := New(good); err != nil {
		t.Fatalf("New(default) error: %v", err)
	}
	tests := []struct {
		name string
		edit func(*Config)
	}{
		{"no role", func(c *Config) { c.Role = 0 }},
		{"bad role", func(c *Config) { c.Role = 9 }},
		{"zero hello", func(c *Config) { c.HelloTimeout = 0 }},
		{"negative request", func(c *Config) { c.RequestTimeout = -1 }},
		{"zero alloc", func(c *Config) { c.AllocTimeout = 0 }},
		{"zero handshake", func(c *Config) { c.HandshakeTimeout = 0 }},
		{"zero admission", func(c *Config) { c.AdmissionTimeout = 0 }},
		{"zero prefill", func(c *Config) { c.PrefillTimeout = 0 }},
		{"zero progress", func(c *Config) { c.ProgressTimeout = 0 }},
		{"ttl equal to a timeout", func(c *Config) { c.TombstoneTTL = c.PrefillTimeout }},
		{"ttl shorter than a timeout", func(c *Config) { c.TombstoneTTL = c.AdmissionTimeout - 1 }},
		{"huge timeout", func(c *Config) { c.PrefillTimeout = durationMax + 1 }},
		{"zero rooms", func(c *Config) { c.RoomsMax = 0 }},
		{"zero tombstones", func(c *Config) { c.TombstonesMax = 0 }},
	}
	for _, tt := range tests {
		cfg := good
		tt.edit(&cfg)
		m, err := New(cfg)
		if err == nil || !errors.Is(err, ErrConfig) || m != nil {
			t.Errorf("New(%s) = %v, %v; want nil and an error wrapping ErrConfig", tt.name, m, err)
		}
	}
}

// TestEveryLivePhaseHasDeadline drives a room into every live phase of both
// roles and checks that it has the phase's deadline, that Tick one
// nanosecond before leaves it alone, and that Tick at the deadline fails it
// with the phase's timeout reason and one release.
func TestEveryLivePhaseHasDeadline(t *testing.T) {
	covered := map[Phase]bool{}
	for _, role := range Roles() {
		for _, p := range livePhases(role) {
			covered[p] = true
			m, err := New(distinctConfig(role))
			if err != nil {
				t.Fatal(err)
			}
			id := scenarioID(1)
			const at = Instant(5e6)
			stepAll(t, m, at, pathTo(id, p))
			ri, ok := m.Room(id)
			if !ok || ri.Phase != p || ri.State != phaseTable[p].state {
				t.Fatalf("%v: Room after pathTo = %v, %v; want phase %v", role, ri, ok, p)
			}
			if want := at + Instant(wantTimeout(m.cfg, p)); ri.Deadline != want || ri.Deadline <= ri.Created {
				t.Errorf("%v/%v: deadline %v, want %v (after creation %v)", role, p, ri.Deadline, want, ri.Created)
			}
			if next, ok := m.NextDeadline(); !ok || next != ri.Deadline {
				t.Errorf("%v/%v: NextDeadline() = %v, %v; want %v", role, p, next, ok, ri.Deadline)
			}
			m.Advance()
			m.Tick(ri.Deadline - 1)
			if s, _, _ := m.State(id); s.Terminal() || len(m.Ready().Effects) != 0 {
				t.Errorf("%v/%v: Tick(deadline-1) ended the room or emitted %v", role, p, m.Ready().Effects)
			}
			m.Tick(ri.Deadline)
			ri, _ = m.Room(id)
			if want := wantTimeoutReason[p]; ri.State != StateFailed || ri.Reason != want {
				t.Errorf("%v/%v: after Tick(deadline) %v/%v, want failed with %v", role, p, ri.State, ri.Reason, want)
			}
			if n := countKind(m.Ready().Effects, EffectRelease); n != 1 {
				t.Errorf("%v/%v: timeout emitted %d releases, want 1", role, p, n)
			}
		}
	}
	for _, p := range Phases() {
		if p != PhaseDone && !covered[p] {
			t.Errorf("phase %v belongs to no role's live phases", p)
		}
	}
}

// distinctConfig gives every timeout a different value so a deadline names
// the timeout it came from.
func distinctConfig(role Role) Config {
	return Config{
		Role: role, HelloTimeout: ms(1001), RequestTimeout: ms(1002), AllocTimeout: ms(2003),
		HandshakeTimeout: ms(1004), AdmissionTimeout: ms(2005), PrefillTimeout: ms(3006),
		ProgressTimeout: ms(507), TombstoneTTL: ms(10000), RoomsMax: 8, TombstonesMax: 8,
	}
}

// wantTimeoutReason is the design's timeout reason per phase.
var wantTimeoutReason = map[Phase]Reason{
	PhaseAwaitingHello: ReasonHelloTimeout, PhaseAwaitingRequest: ReasonRequestTimeout,
	PhaseAwaitingAlloc: ReasonAllocTimeout, PhaseComputing: ReasonPrefillTimeout, PhaseSending: ReasonProgressTimeout,
	PhaseHandshake: ReasonHandshakeTimeout, PhaseAdmission: ReasonAdmissionTimeout,
	PhaseAwaitingKV: ReasonPrefillTimeout, PhaseReceiving: ReasonProgressTimeout,
}

// wantTimeout is the design's deadline per phase (pd-protocol.md's tables),
// written out independently of Machine.timeout.
func wantTimeout(c Config, p Phase) Duration {
	return map[Phase]Duration{
		PhaseAwaitingHello: c.HelloTimeout, PhaseAwaitingRequest: c.RequestTimeout,
		PhaseAwaitingAlloc: c.AllocTimeout, PhaseComputing: c.PrefillTimeout, PhaseSending: c.ProgressTimeout,
		PhaseHandshake: c.HandshakeTimeout, PhaseAdmission: c.AdmissionTimeout,
		PhaseAwaitingKV: c.PrefillTimeout, PhaseReceiving: c.ProgressTimeout,
	}[p]
}

func countKind(effects []Effect, k EffectKind) int {
	n := 0
	for _, e := range effects {
		if e.Kind == k {
			n++
		}
	}
	return n
}

// terminalRooms returns ways to end a room for a role: each yields a
// machine holding room 1 terminal and advanced.
func terminalRooms(t *testing.T, role Role) map[string]*Machine {
	id := scenarioID(1)
	out := map[string]*Machine{}
	m := newTestMachine(t, role)
	stepAll(t, m, 1e6, succeedPath(role, id))
	out["succeeded"] = m
	for _, p := range livePhases(role) {
		m := newTestMachine(t, role)
		stepAll(t, m, 1e6, pathTo(id, p))
		m.Step(2e6, Event{Kind: EventAbort, Room: id, Peer: map[Role]string{RolePrefill: testDecodePeer, RoleDecode: testPrefillPeer}[role]})
		out["aborted in "+p.String()] = m
		m = newTestMachine(t, role)
		stepAll(t, m, 1e6, pathTo(id, p))
		m.Tick(1e12)
		out["timed out in "+p.String()] = m
	}
	if role == RolePrefill {
		m := newTestMachine(t, role)
		m.Step(1e6, Event{Kind: EventAbort, Room: id, Peer: testDecodePeer})
		out["tombstone from abort"] = m
	}
	for name, m := range out {
		if s, _, ok := m.State(id); !ok || !s.Terminal() {
			t.Fatalf("%v %s: room is %v, %v; want terminal", role, name, s, ok)
		}
		m.Advance()
	}
	return out
}

// TestTerminalRoomsNeverChange steps every event kind into every kind of
// terminal room and checks that the room is unchanged, that nothing but the
// late counter (and the event's own count) moves, and that the only effects
// are the documented answers.
func TestTerminalRoomsNeverChange(t *testing.T) {
	id := scenarioID(1)
	for _, role := range Roles() {
		peer := map[Role]string{RolePrefill: testDecodePeer, RoleDecode: testPrefillPeer}[role]
		for name := range terminalRooms(t, role) {
			for _, k := range EventKinds() {
				m := terminalRooms(t, role)[name]
				before, _ := m.Room(id)
				cBefore := m.Counters()
				ev := Event{Kind: k, Room: id, Peer: peer, RequestID: "again", Pages: []int32{9}, PageCount: 2, Bytes: 64, Token: 3}
				o := m.Step(3e6, ev)
				after, _ := m.Room(id)
				if !reflect.DeepEqual(before, after) {
					t.Errorf("%v %s: Step(%v) changed the room:\n%v\n%v", role, name, k, before, after)
				}
				rd := m.Ready()
				if len(rd.Transitions) != 0 {
					t.Errorf("%v %s: Step(%v) made transitions %v", role, name, k, rd.Transitions)
				}
				want := terminalAnswer(role, name, before.State, k)
				if got := effectKinds(rd.Effects); !slices.Equal(got, want) {
					t.Errorf("%v %s: Step(%v) effects %v, want %v", role, name, k, rd.Effects, want)
				}
				checkOnlyLateMoved(t, role, name, k, o, cBefore, m.Counters())
			}
		}
	}
}

// terminalAnswer is what a terminal room answers to an event of kind k.
func terminalAnswer(role Role, name string, s State, k EventKind) []EffectKind {
	switch {
	case k == EventHelloAck && role == RoleDecode && name == "timed out in handshake":
		return []EffectKind{EffectSend} // ABORT: prefill took the room after decode gave up
	case k == EventRequest:
		return []EffectKind{EffectReject}
	case k == EventHello && role == RolePrefill && s == StateFailed:
		return []EffectKind{EffectSend}
	case k == EventAdmitted && role == RoleDecode:
		return []EffectKind{EffectFreePages}
	}
	return nil
}

func effectKinds(effects []Effect) []EffectKind {
	var out []EffectKind
	for _, e := range effects {
		out = append(out, e.Kind)
	}
	return out
}

func checkOnlyLateMoved(t *testing.T, role Role, name string, k EventKind, o Outcome, before, after Counters) {
	t.Helper()
	global := k == EventPeerLost || k == EventShutdown || k == EventTick || k == EventPeerAlive
	wantLate := before.Late + 1
	if global {
		wantLate = before.Late
	}
	if after.Late != wantLate {
		t.Errorf("%v %s: Step(%v) late counter %d -> %d, want %d", role, name, k, before.Late, after.Late, wantLate)
	}
	if after.Events(k, o) != before.Events(k, o)+1 {
		t.Errorf("%v %s: Step(%v) = %v not counted", role, name, k, o)
	}
	if !global && o != OutcomeLate && o != OutcomeAnswered {
		t.Errorf("%v %s: Step(%v) = %v, want late or answered", role, name, k, o)
	}
	before.events, after.events = [eventKindCount][OutcomeRejected + 1]uint64{}, [eventKindCount][OutcomeRejected + 1]uint64{}
	before.Late, after.Late = 0, 0
	if before != after {
		t.Errorf("%v %s: Step(%v) changed counters %+v -> %+v", role, name, k, before, after)
	}
}

// failureTrigger is an event that may fail a live room.
type failureTrigger struct {
	name  string
	event func(id ID, peer string) Event
	tick  bool
}

var failureTriggers = []failureTrigger{
	{name: "client_abort", event: func(id ID, _ string) Event { return Event{Kind: EventClientAbort, Room: id} }},
	{name: "engine_error", event: func(id ID, _ string) Event { return Event{Kind: EventEngineError, Room: id} }},
	{name: "abort", event: func(id ID, p string) Event { return Event{Kind: EventAbort, Room: id, Peer: p, Reason: ReasonEngine} }},
	{name: "failed", event: func(id ID, p string) Event { return Event{Kind: EventFailed, Room: id, Peer: p} }},
	{name: "peer_lost", event: func(_ ID, p string) Event { return Event{Kind: EventPeerLost, Peer: p} }},
	{name: "shutdown", event: func(ID, string) Event { return Event{Kind: EventShutdown} }},
	{name: "checksum_error", event: func(id ID, _ string) Event { return Event{Kind: EventChecksumError, Room: id} }},
	{name: "done_mismatch", event: func(id ID, p string) Event { return Event{Kind: EventDone, Room: id, Peer: p, PageCount: 5} }},
	{name: "done_ack_early", event: func(id ID, p string) Event { return Event{Kind: EventDoneAck, Room: id, Peer: p} }},
	{name: "hello_ack_again", event: func(id ID, p string) Event { return Event{Kind: EventHelloAck, Room: id, Peer: p} }},
	{name: "tick", tick: true},
}

// expectedFailure says which reason a trigger fails a room in phase p with,
// or ReasonNone when it does not apply there.
func expectedFailure(role Role, p Phase, trigger string) Reason {
	receivingKV := p == PhaseAwaitingKV || p == PhaseReceiving
	fixed := map[string]Reason{
		"client_abort": ReasonClientAbort, "engine_error": ReasonEngine, "abort": ReasonPeerAbort,
		"failed": ReasonPeerFailed, "peer_lost": ReasonPeerLost, "shutdown": ReasonShutdown,
		"tick": phaseTable[p].timeout,
	}
	switch {
	case (trigger == "client_abort" || trigger == "engine_error") && p == PhaseAwaitingRequest:
		return ReasonNone // no router request to abort
	case trigger == "peer_lost" && p == PhaseAwaitingHello:
		return ReasonNone // no peer known yet
	case trigger == "checksum_error":
		return map[bool]Reason{true: ReasonChecksum}[role == RoleDecode && receivingKV]
	case trigger == "done_mismatch":
		return map[bool]Reason{true: ReasonProtocol}[role == RoleDecode]
	case trigger == "done_ack_early":
		return map[bool]Reason{true: ReasonProtocol}[role == RolePrefill && p != PhaseAwaitingHello]
	case trigger == "hello_ack_again":
		return map[bool]Reason{true: ReasonProtocol}[role == RoleDecode && p != PhaseHandshake]
	}
	return fixed[trigger]
}

// TestEveryFailurePathReleasesOnce fails a room in every live phase by every
// trigger that applies there and checks: Failed with the expected reason,
// exactly one release (the last effect, with the decode pages when it held
// some), and no second release whatever comes next. Triggers that do not
// apply leave the room live and release nothing.
func TestEveryFailurePathReleasesOnce(t *testing.T) {
	id := scenarioID(1)
	for _, role := range Roles() {
		peer := map[Role]string{RolePrefill: testDecodePeer, RoleDecode: testPrefillPeer}[role]
		for _, p := range livePhases(role) {
			for _, tr := range failureTriggers {
				m := newTestMachine(t, role)
				stepAll(t, m, 1e6, pathTo(id, p))
				m.Advance()
				if tr.tick {
					m.Tick(1e12)
				} else {
					m.Step(2e6, tr.event(id, peer))
				}
				want := expectedFailure(role, p, tr.name)
				checkFailure(t, m, id, role, p, tr.name, want)
				m.Advance()
				for _, k := range EventKinds() {
					m.Step(3e6, Event{Kind: k, Room: id, Peer: peer, RequestID: "r", Pages: []int32{4}})
				}
				m.Tick(1e13)
				if want != ReasonNone && countKind(m.Ready().Effects, EffectRelease) != 0 {
					t.Errorf("%v/%v %s: a second release after %v", role, p, tr.name, m.Ready().Effects)
				}
			}
		}
	}
}

func checkFailure(t *testing.T, m *Machine, id ID, role Role, p Phase, trigger string, want Reason) {
	t.Helper()
	ri, _ := m.Room(id)
	effects := m.Ready().Effects
	releases := countKind(effects, EffectRelease)
	if want == ReasonNone {
		if ri.State.Terminal() || releases != 0 {
			t.Errorf("%v/%v %s: room %v/%v with %d releases; want it live", role, p, trigger, ri.State, ri.Reason, releases)
		}
		return
	}
	if ri.State != StateFailed || ri.Reason != want {
		t.Errorf("%v/%v %s: room %v/%v, want failed/%v", role, p, trigger, ri.State, ri.Reason, want)
	}
	if releases != 1 {
		t.Fatalf("%v/%v %s: %d releases in %v, want 1", role, p, trigger, releases, effects)
	}
	last := effects[len(effects)-1]
	if last.Kind != EffectRelease || last.Room != id || last.Reason != want {
		t.Errorf("%v/%v %s: last effect %v, want release with %v", role, p, trigger, last, want)
	}
	holdsPages := role == RoleDecode && (p == PhaseAwaitingKV || p == PhaseReceiving)
	if got := len(last.Pages) > 0; got != holdsPages {
		t.Errorf("%v/%v %s: release pages %v, want pages %v", role, p, trigger, last.Pages, holdsPages)
	}
	peerCaused := want == ReasonPeerAbort || want == ReasonPeerFailed || want == ReasonPeerLost
	for _, e := range effects {
		if e.Kind == EffectSend && peerCaused {
			t.Errorf("%v/%v %s: answered the peer with %v", role, p, trigger, e)
		}
	}
}

func TestForeignFramesLeaveRoomAlone(t *testing.T) {
	id := scenarioID(1)
	tests := []struct {
		role       Role
		phase      Phase
		ev         Event
		wantAnswer bool
	}{
		{RolePrefill, PhaseAwaitingAlloc, Event{Kind: EventHello, Room: id, Peer: "d2"}, true},
		{RolePrefill, PhaseAwaitingAlloc, Event{Kind: EventAlloc, Room: id, Peer: "d2", Pages: []int32{1}}, true},
		{RolePrefill, PhaseSending, Event{Kind: EventDoneAck, Room: id, Peer: "d2"}, false},
		{RolePrefill, PhaseSending, Event{Kind: EventAbort, Room: id, Peer: "d2"}, false},
		{RolePrefill, PhaseComputing, Event{Kind: EventFailed, Room: id, Peer: ""}, false},
		{RoleDecode, PhaseHandshake, Event{Kind: EventHelloAck, Room: id, Peer: "p2"}, false},
		{RoleDecode, PhaseReceiving, Event{Kind: EventDone, Room: id, Peer: "p2", PageCount: 2, Bytes: 64}, true},
		{RoleDecode, PhaseReceiving, Event{Kind: EventFirstToken, Room: id, Peer: "p2"}, false},
		{RoleDecode, PhaseReceiving, Event{Kind: EventAbort, Room: id, Peer: "p2"}, false},
		// wrong role: never answered
		{RoleDecode, PhaseReceiving, Event{Kind: EventHello, Room: id, Peer: "p2"}, false},
		{RolePrefill, PhaseSending, Event{Kind: EventDone, Room: id, Peer: "d1"}, false},
	}
	for _, tt := range tests {
		m := newTestMachine(t, tt.role)
		stepAll(t, m, 1e6, pathTo(id, tt.phase))
		m.Advance()
		before, _ := m.Room(id)
		if o := m.Step(2e6, tt.ev); o != OutcomeRejected {
			t.Errorf("%v/%v Step(%v from %q) = %v, want rejected", tt.role, tt.phase, tt.ev.Kind, tt.ev.Peer, o)
		}
		after, _ := m.Room(id)
		if !reflect.DeepEqual(before, after) {
			t.Errorf("%v/%v Step(%v from %q) changed the room: %v -> %v", tt.role, tt.phase, tt.ev.Kind, tt.ev.Peer, before, after)
		}
		var want []Effect
		if tt.wantAnswer {
			want = []Effect{{Kind: EffectSend, Room: id, Peer: tt.ev.Peer, Frame: FrameFailed, Reason: ReasonProtocol}}
		}
		if got := m.Ready().Effects; !reflect.DeepEqual(got, want) {
			t.Errorf("%v/%v Step(%v from %q) effects %v, want %v", tt.role, tt.phase, tt.ev.Kind, tt.ev.Peer, got, want)
		}
	}
}

func TestBadInputNeverPanics(t *testing.T) {
	id := scenarioID(1)
	events := []Event{
		{Kind: 0, Room: id},
		{Kind: 200, Room: id},
		{Kind: eventKindCount, Room: id},
		{Kind: EventAbort, Room: id, Peer: "p1", Reason: 250},
		{Kind: EventAlloc, Room: id, Peer: testDecodePeer}, // no pages
		{Kind: EventAlloc, Room: id, Peer: testDecodePeer, Pages: make([]int32, AllocPagesMax+1)}, // too many
		{Kind: EventKVSent, Room: id, Bytes: -5},
		{Kind: EventKVReceived, Room: id, Bytes: -5},
		{Kind: EventPeerLost},
		{Kind: EventHello, Room: id},
	}
	for _, role := range Roles() {
		for _, p := range livePhases(role) {
			for _, ev := range events {
				m := newTestMachine(t, role)
				stepAll(t, m, 1e6, pathTo(id, p))
				o := m.Step(2e6, ev)
				if o < OutcomeApplied || o > OutcomeRejected {
					t.Errorf("%v/%v Step(%v) = %v, want a valid outcome", role, p, ev.Kind, o)
				}
				if err := m.checkAll(); err != nil {
					t.Errorf("%v/%v Step(%v): %v", role, p, ev.Kind, err)
				}
			}
		}
	}
	// An ALLOC without pages or with too many fails the room (protocol).
	for _, n := range []int{0, AllocPagesMax + 1} {
		m := newTestMachine(t, RolePrefill)
		stepAll(t, m, 1e6, pathTo(id, PhaseAwaitingAlloc))
		m.Step(2e6, Event{Kind: EventAlloc, Room: id, Peer: testDecodePeer, Pages: make([]int32, n)})
		if ri, _ := m.Room(id); ri.State != StateFailed || ri.Reason != ReasonProtocol {
			t.Errorf("ALLOC with %d pages: room %v/%v, want failed/protocol", n, ri.State, ri.Reason)
		}
	}
}

func TestTimeNeverRunsBackwards(t *testing.T) {
	m := newTestMachine(t, RolePrefill)
	m.Step(100e6, Event{Kind: EventRequest, Room: scenarioID(1), RequestID: "a"})
	m.Step(5e6, Event{Kind: EventRequest, Room: scenarioID(2), RequestID: "b"})
	ri, _ := m.Room(scenarioID(2))
	if ri.Created != 100e6 || ri.Deadline != 100e6+Instant(m.cfg.HelloTimeout) {
		t.Errorf("room created with an earlier time: created %v deadline %v, want 100ms and 1100ms", ri.Created, ri.Deadline)
	}
	// A clock far in the future cannot overflow a deadline.
	m.Step(Instant(1<<63-1), Event{Kind: EventRequest, Room: scenarioID(3), RequestID: "c"})
	if ri, _ := m.Room(scenarioID(3)); ri.Deadline <= ri.Created {
		t.Errorf("room created at the clock's end: created %v deadline %v, want the deadline after", ri.Created, ri.Deadline)
	}
}

func TestRoomsOldestFirstAndNextDeadline(t *testing.T) {
	m := newTestMachine(t, RoleDecode)
	if _, ok := m.NextDeadline(); ok {
		t.Errorf("NextDeadline() on an empty machine = true, want false")
	}
	ids := []uint64{9, 3, 7, 1, 5}
	for i, n := range ids {
		m.Step(Instant(i+1)*1e6, Event{Kind: EventRequest, Room: scenarioID(n), RequestID: "r", Peer: testPrefillPeer})
	}
	m.Step(10e6, Event{Kind: EventClientAbort, Room: scenarioID(3)})
	var got []ID
	for _, ri := range m.Rooms() {
		got = append(got, ri.ID)
	}
	var want []ID
	for _, n := range ids {
		want = append(want, scenarioID(n))
	}
	if !slices.Equal(got, want) {
		t.Errorf("Rooms() ids = %v, want creation order %v", got, want)
	}
	if next, ok := m.NextDeadline(); !ok || next != 1e6+Instant(m.cfg.HandshakeTimeout) {
		t.Errorf("NextDeadline() = %v, %v; want the first room's handshake deadline", next, ok)
	}
	if m.Live() != 4 || m.Counters().Tombstones != 1 || m.Counters().LiveIn(StateBootstrapping) != 4 {
		t.Errorf("Live() = %d, counters %+v; want 4 live, 1 tombstone", m.Live(), m.Counters())
	}
}

func TestReadyAdvance(t *testing.T) {
	m := newTestMachine(t, RoleDecode)
	id := scenarioID(1)
	m.Step(1e6, Event{Kind: EventRequest, Room: id, RequestID: "r", Peer: testPrefillPeer})
	m.Step(2e6, Event{Kind: EventHelloAck, Room: id, Peer: testPrefillPeer})
	rd := m.Ready()
	if len(rd.Transitions) != 2 || len(rd.Effects) != 2 || rd.Effects[0].Frame != FrameHello || rd.Effects[1].Kind != EffectAdmit {
		t.Fatalf("Ready() after two steps = %+v; want 2 transitions, HELLO then admit", rd)
	}
	m.Advance()
	if rd2 := m.Ready(); len(rd2.Transitions) != 0 || len(rd2.Effects) != 0 {
		t.Errorf("Ready() after Advance = %+v, want empty", rd2)
	}
	pages := []int32{4, 5}
	m.Step(3e6, Event{Kind: EventAdmitted, Room: id, Pages: pages})
	pages[0] = 99 // the machine keeps its own copy
	if e := m.Ready().Effects[0]; e.Pages[0] != 4 || rd.Effects[0].Frame != FrameHello {
		t.Errorf("ALLOC pages %v after the caller changed its slice; earlier Ready changed to %v", e.Pages, rd.Effects[0])
	}
}

func TestTombstonesExpireAndEvict(t *testing.T) {
	cfg := defaultConfig(RolePrefill)
	cfg.TombstonesMax = 3
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= 5; i++ {
		m.Step(Instant(i)*1e6, Event{Kind: EventAbort, Room: scenarioID(i), Peer: "d1"})
	}
	c := m.Counters()
	if c.Tombstones != 3 || c.Evicted != 2 {
		t.Errorf("after 5 tombstones with limit 3: %d kept, %d evicted; want 3, 2", c.Tombstones, c.Evicted)
	}
	if _, _, ok := m.State(scenarioID(1)); ok {
		t.Errorf("State(oldest tombstone) found after eviction")
	}
	next, ok := m.NextDeadline()
	if want := 3e6 + Instant(cfg.TombstoneTTL); !ok || next != want {
		t.Errorf("NextDeadline() = %v, %v; want %v (the oldest kept tombstone's expiry)", next, ok, want)
	}
	m.Tick(next)
	if c := m.Counters(); c.Tombstones != 2 || c.Forgotten != 1 {
		t.Errorf("after Tick(first expiry): %d tombstones, %d forgotten; want 2, 1", c.Tombstones, c.Forgotten)
	}
	// A forgotten room id is unknown again: a request creates a fresh room.
	if o := m.Step(next, Event{Kind: EventRequest, Room: scenarioID(3), RequestID: "r"}); o != OutcomeApplied {
		t.Errorf("request for a forgotten room = %v, want applied", o)
	}
	// Many evictions keep the queue compact and consistent.
	for i := uint64(10); i < 500; i++ {
		m.Step(next+Instant(i), Event{Kind: EventAbort, Room: scenarioID(i), Peer: "d1"})
	}
	if err := m.checkAll(); err != nil || len(m.tombs) > 200 {
		t.Errorf("after 490 tombstones: %v, queue length %d", err, len(m.tombs))
	}
}

func TestStringsAreNamed(t *testing.T) {
	check := func(kind string, s string) {
		if s == "" || strings.Contains(s, "(") || strings.ToLower(s) != s || strings.ContainsAny(s, " -") {
			t.Errorf("%s String() = %q, want a snake_case name", kind, s)
		}
	}
	for _, v := range Roles() {
		check("Role", v.String())
	}
	for _, v := range States() {
		check("State", v.String())
	}
	for _, v := range Phases() {
		check("Phase", v.String())
	}
	for _, v := range Reasons() {
		check("Reason", v.String())
	}
	for _, v := range EventKinds() {
		check("EventKind", v.String())
	}
	for _, v := range FrameKinds() {
		check("FrameKind", v.String())
	}
	for _, v := range EffectKinds() {
		check("EffectKind", v.String())
	}
	for _, v := range Outcomes() {
		check("Outcome", v.String())
	}
	tests := []struct{ got, want string }{
		{ReasonClientAbort.String(), "client_abort"},
		{ReasonPeerLost.String(), "peer_lost"},
		{ReasonNone.String(), "none"},
		{Reason(200).String(), "reason(200)"},
		{EventKind(0).String(), "event(0)"},
		{Duration(5e6).String(), "5ms"},
		{Duration(3e9).String(), "3s"},
		{Duration(1500).String(), "1500ns"},
		{Duration(250e3).String(), "250us"},
		{Instant(0).String(), "0s"},
		{Duration(-2e6).String(), "-2ms"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("String() = %q, want %q", tt.got, tt.want)
		}
	}
}

func TestIDRoundTrip(t *testing.T) {
	id := ID{0xde, 0xad, 0xbe, 0xef, 15: 0x01}
	got, err := ParseID(id.String())
	if err != nil || got != id {
		t.Errorf("ParseID(%q) = %v, %v; want %v", id.String(), got, err, id)
	}
	for _, bad := range []string{"", "abc", strings.Repeat("z", 32), strings.Repeat("0", 33)} {
		if _, err := ParseID(bad); err == nil {
			t.Errorf("ParseID(%q) = nil error, want one", bad)
		}
	}
}

func TestReasonErrors(t *testing.T) {
	tests := []struct {
		r    Reason
		want error
	}{
		{ReasonClientAbort, ErrAborted}, {ReasonPeerAbort, ErrAborted}, {ReasonShutdown, ErrAborted},
		{ReasonHelloTimeout, ErrTimeout}, {ReasonProgressTimeout, ErrTimeout}, {ReasonAdmissionTimeout, ErrTimeout},
		{ReasonPeerLost, ErrPeer}, {ReasonPeerFailed, ErrPeer}, {ReasonUnknownRoom, ErrPeer},
		{ReasonChecksum, ErrTransfer}, {ReasonProtocol, ErrTransfer}, {ReasonEngine, ErrEngine},
		{ReasonDuplicate, ErrRejected}, {ReasonOverloaded, ErrRejected},
	}
	for _, tt := range tests {
		err := tt.r.Err()
		var re *ReasonError
		if !errors.Is(err, tt.want) || !errors.As(err, &re) || re.Reason != tt.r || !strings.Contains(err.Error(), tt.r.String()) {
			t.Errorf("%v.Err() = %v, want it to wrap %v and name the reason", tt.r, err, tt.want)
		}
	}
	if err := ReasonNone.Err(); err != nil {
		t.Errorf("ReasonNone.Err() = %v, want nil", err)
	}
	for _, r := range Reasons() {
		if r.Err() == nil {
			t.Errorf("%v.Err() = nil", r)
		}
	}
}

func TestHistoryIsBounded(t *testing.T) {
	m := newTestMachine(t, RolePrefill)
	id := scenarioID(1)
	stepAll(t, m, 1e6, pathTo(id, PhaseComputing))
	for i := 0; i < 3*historyMax; i++ {
		m.Step(2e6, Event{Kind: EventComputeStarted, Room: id})
	}
	ri, _ := m.Room(id)
	if len(ri.History) != historyMax || ri.History[len(ri.History)-1].Event != EventComputeStarted {
		t.Errorf("history has %d entries (last %v), want %d ending with compute_started", len(ri.History), ri.History[len(ri.History)-1], historyMax)
	}
}
