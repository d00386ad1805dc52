package room

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestRandomEventSequences steps thousands of seeded random event sequences
// (random kinds, rooms, peers, fields and times, some invalid, about half
// steered along the happy path so rooms get far) through both roles and
// checks after every Step and Tick: the invariants hold, terminal rooms never
// change, no transition leaves a terminal state, every room is released
// exactly once and only when it ends, and every page the decode engine
// reserves is owned by exactly one room or freed at once. At the end a Tick
// far in the future leaves no live room, every room created was released
// once, and every page is back. A failure names the seed.
func TestRandomEventSequences(t *testing.T) {
	seeds := 1500
	if testing.Short() {
		seeds = 150
	}
	for _, role := range Roles() {
		var successes, late, rejected uint64
		reasons := map[Reason]bool{}
		for seed := range seeds {
			c, err := runRandom(uint64(seed), role, 120)
			if err != nil {
				t.Fatalf("seed %d, role %v: %v", seed, role, err)
			}
			successes, late, rejected = successes+c.Successes, late+c.Late, rejected+c.Rejected
			for _, r := range Reasons() {
				if c.Failures(r) > 0 {
					reasons[r] = true
				}
			}
		}
		// The sequences must reach far: successes, late and rejected
		// events, and most failure reasons of the role.
		t.Logf("%v: %d successes, %d late, %d rejected, %d failure reasons", role, successes, late, rejected, len(reasons))
		if successes < uint64(seeds)/10 || late == 0 || rejected == 0 || len(reasons) < 10 {
			t.Errorf("%v: %d successes, %d late, %d rejected, %d failure reasons %v; the random walk is too shallow",
				role, successes, late, rejected, len(reasons), reasons)
		}
	}
}

// randomRun is one random sequence's state and bookkeeping.
type randomRun struct {
	rng       *rand.Rand
	m         *Machine
	now       Instant
	nextPage  int32
	created   map[ID]int     // creation transitions per id
	released  map[ID]int     // releases per id
	owned     map[int32]ID   // decode pages held by a room (sent in ALLOC)
	freed     map[int32]bool // pages handed back (FreePages, failed Release, Resume)
	admitted  map[int32]bool // pages the engine reserved
	terminal  map[ID]State   // terminal rooms before the step
	peers     []string       // peers events may claim to come from
	ids       []ID           // the room ids events pick from
	stepCount uint64         // events stepped, to reconcile the counters
	lastEvent Event          // for error messages
}

func runRandom(seed uint64, role Role, steps int) (Counters, error) {
	rng := rand.New(rand.NewPCG(seed, uint64(role)))
	cfg := randomConfig(rng, role)
	m, err := New(cfg)
	if err != nil {
		return Counters{}, fmt.Errorf("New(%+v): %w", cfg, err)
	}
	r := &randomRun{
		rng: rng, m: m, created: map[ID]int{}, released: map[ID]int{},
		owned: map[int32]ID{}, freed: map[int32]bool{}, admitted: map[int32]bool{},
		peers: []string{"a", "b", ""},
	}
	for i := range 1 + rng.IntN(6) {
		r.ids = append(r.ids, scenarioID(uint64(i+1)))
	}
	for range steps {
		r.advanceClock()
		if rng.IntN(10) == 0 {
			r.lastEvent = Event{Kind: EventTick}
			m.Tick(r.now)
		} else {
			r.lastEvent = r.randomEvent()
			if o := m.Step(r.now, r.lastEvent); o < OutcomeApplied || o > OutcomeRejected {
				return Counters{}, fmt.Errorf("Step(%+v) = %v", r.lastEvent, o)
			}
		}
		r.stepCount++
		if err := r.check(); err != nil {
			return Counters{}, fmt.Errorf("after %+v at %v: %w", r.lastEvent, r.now, err)
		}
	}
	return m.Counters(), r.finish()
}

func randomConfig(rng *rand.Rand, role Role) Config {
	d := func() Duration { return Duration(1+rng.IntN(50)) * 1e6 }
	cfg := Config{
		Role: role, HelloTimeout: d(), RequestTimeout: d(), AllocTimeout: d(), HandshakeTimeout: d(),
		AdmissionTimeout: d(), PrefillTimeout: d(), ProgressTimeout: d(),
		TombstoneTTL: Duration(51+rng.IntN(100)) * 1e6, RoomsMax: 1 + rng.IntN(5), TombstonesMax: 1 + rng.IntN(6),
	}
	if rng.IntN(2) == 0 {
		cfg.StateBytes = int64(1 + rng.IntN(150)) // a hybrid model's state after the pages
	}
	return cfg
}

// advanceClock moves time forward by a random step: often none or a little,
// sometimes past every deadline, rarely backwards (the machine must clamp).
func (r *randomRun) advanceClock() {
	switch n := r.rng.IntN(20); {
	case n < 4:
	case n < 16:
		r.now += Instant(r.rng.IntN(10e6))
	case n < 19:
		r.now += Instant(r.rng.IntN(200e6))
	default:
		r.now -= Instant(r.rng.IntN(5e6))
	}
}

func (r *randomRun) randomEvent() Event {
	id := r.ids[r.rng.IntN(len(r.ids))]
	if room := r.m.rooms[id]; room != nil && !room.state.Terminal() && r.rng.IntN(10) < 7 {
		if ev, ok := r.happyEvent(room); ok {
			return ev
		}
	}
	kinds := EventKinds()
	ev := Event{
		Room: id, Peer: r.peers[r.rng.IntN(len(r.peers))], RequestID: "r",
		Token: int32(r.rng.IntN(100)), PageCount: r.rng.IntN(4), Bytes: int64(r.rng.IntN(300)),
		StateBytes: int64(r.rng.IntN(200)), StateBad: r.rng.IntN(8) == 0,
		Reason: Reason(r.rng.IntN(int(reasonCount) + 2)),
	}
	switch n := r.rng.IntN(400); {
	case n < 8:
		ev.Kind = EventKind(r.rng.IntN(256)) // mostly invalid
	case n == 8:
		ev.Kind = EventShutdown // rare: it ends the run's usefulness
	default:
		for ev.Kind = EventShutdown; ev.Kind == EventShutdown; {
			ev.Kind = kinds[r.rng.IntN(len(kinds))]
		}
	}
	if ev.Kind == EventAdmitted || ev.Kind == EventAlloc {
		ev.Pages = r.freshPages(r.rng.IntN(4))
	}
	return ev
}

// happyEvent returns the event that moves a live room along the happy path.
func (r *randomRun) happyEvent(room *room) (Event, bool) {
	ev := Event{Room: room.id, Peer: room.peer, RequestID: "r"}
	switch room.phase {
	case PhaseAwaitingHello:
		ev.Kind, ev.Peer = EventHello, r.peers[r.rng.IntN(2)]
	case PhaseAwaitingRequest:
		ev.Kind = []EventKind{EventRequest, EventAlloc}[r.rng.IntN(2)]
		ev.Pages = r.freshPages(1 + r.rng.IntN(3))
	case PhaseAwaitingAlloc:
		ev.Kind, ev.Pages = EventAlloc, r.freshPages(1+r.rng.IntN(3))
	case PhaseComputing, PhaseSending:
		switch {
		case room.computing && r.rng.IntN(2) == 0:
			ev.Kind, ev.Bytes, ev.StateBytes = EventKVSent, room.bytes+int64(r.rng.IntN(100)), r.moreState(room)
			ev.Bytes += ev.StateBytes - room.stateBytes
		case room.computing:
			ev.Kind = EventComputeDone
		default:
			ev.Kind = EventDoneAck
		}
	case PhaseHandshake:
		ev.Kind = EventHelloAck
	case PhaseAdmission:
		ev.Kind, ev.Pages = EventAdmitted, r.freshPages(1+r.rng.IntN(3))
	case PhaseAwaitingKV, PhaseReceiving:
		switch {
		case r.rng.IntN(2) == 0:
			ev.Kind, ev.Bytes, ev.StateBytes = EventKVReceived, room.bytes+int64(r.rng.IntN(100)), r.moreState(room)
			ev.Bytes += ev.StateBytes - room.stateBytes
		case !room.haveToken:
			ev.Kind = EventFirstToken
		default:
			ev.Kind, ev.PageCount, ev.Bytes, ev.StateBytes = EventDone, len(room.pages), room.bytes, room.stateBytes
		}
	default:
		return ev, false
	}
	return ev, true
}

// freshPages returns n page indices never used before in this run.
func (r *randomRun) freshPages(n int) []int32 {
	var p []int32
	for range n {
		r.nextPage++
		p = append(p, r.nextPage)
	}
	return p
}

// check verifies one step's Ready and the machine, then Advances.
func (r *randomRun) check() error {
	if err := r.m.checkAll(); err != nil {
		return err
	}
	rd := r.m.Ready()
	endedHere := map[ID]int{}
	createdHere := map[ID]bool{}
	for _, tr := range rd.Transitions {
		if tr.From.Terminal() {
			return fmt.Errorf("transition out of a terminal state: %v", tr)
		}
		if tr.From == 0 {
			r.created[tr.Room]++
			createdHere[tr.Room] = true
		}
		if tr.To.Terminal() {
			endedHere[tr.Room]++
		}
	}
	for id, s := range r.terminal {
		if cur, _, ok := r.m.State(id); ok && !createdHere[id] && cur != s {
			return fmt.Errorf("terminal room %v changed %v -> %v", id, s, cur)
		}
	}
	if err := r.checkEffects(rd, endedHere); err != nil {
		return err
	}
	r.m.Advance()
	r.terminal = map[ID]State{}
	for _, ri := range r.m.Rooms() {
		if ri.State.Terminal() {
			r.terminal[ri.ID] = ri.State
		} else if ri.Deadline <= ri.Created {
			return fmt.Errorf("live room %v: deadline %v not after creation %v", ri.ID, ri.Deadline, ri.Created)
		}
	}
	return nil
}

// checkEffects checks releases against the rooms that ended in this step and
// follows every page.
func (r *randomRun) checkEffects(rd Ready, endedHere map[ID]int) error {
	releasedHere := map[ID]int{}
	adm := r.lastEvent.Kind == EventAdmitted && r.m.cfg.Role == RoleDecode && len(r.lastEvent.Pages) > 0
	if adm {
		for _, p := range r.lastEvent.Pages {
			r.admitted[p] = true
		}
	}
	pagesPlaced := 0
	for _, e := range rd.Effects {
		switch {
		case e.Kind == EffectRelease:
			releasedHere[e.Room]++
			r.released[e.Room]++
			if r.released[e.Room] > r.created[e.Room] {
				return fmt.Errorf("room %v released %d times, created %d", e.Room, r.released[e.Room], r.created[e.Room])
			}
			if err := r.handBack(e.Pages, e.Room, true); err != nil {
				return fmt.Errorf("release: %w", err)
			}
		case e.Kind == EffectResume:
			if err := r.handBack(e.Pages, e.Room, true); err != nil {
				return fmt.Errorf("resume: %w", err)
			}
		case e.Kind == EffectFreePages:
			if !adm || !slices.Equal(e.Pages, r.lastEvent.Pages) {
				return fmt.Errorf("free_pages %v not the pages just admitted", e.Pages)
			}
			pagesPlaced++
			if err := r.handBack(e.Pages, e.Room, false); err != nil {
				return fmt.Errorf("free_pages: %w", err)
			}
		case e.Kind == EffectSend && e.Frame == FrameAlloc && r.m.cfg.Role == RoleDecode:
			if !adm || !slices.Equal(e.Pages, r.lastEvent.Pages) {
				return fmt.Errorf("ALLOC %v not the pages just admitted", e.Pages)
			}
			pagesPlaced++
			for _, p := range e.Pages {
				r.owned[p] = e.Room
			}
		}
	}
	if adm && pagesPlaced != 1 {
		return fmt.Errorf("admitted pages %v placed %d times, want once (ALLOC or free_pages)", r.lastEvent.Pages, pagesPlaced)
	}
	for id, n := range endedHere {
		if releasedHere[id] != n {
			return fmt.Errorf("room %v ended %d times but released %d times in one step", id, n, releasedHere[id])
		}
	}
	for id, n := range releasedHere {
		if endedHere[id] != n {
			return fmt.Errorf("room %v released without ending", id)
		}
	}
	return nil
}

// handBack records pages returned by the machine; owned says they must have
// been the room's.
func (r *randomRun) handBack(pages []int32, id ID, owned bool) error {
	for _, p := range pages {
		if r.freed[p] {
			return fmt.Errorf("page %d handed back twice", p)
		}
		if owned && r.owned[p] != id {
			return fmt.Errorf("page %d handed back by room %v, owned by %v", p, id, r.owned[p])
		}
		delete(r.owned, p)
		r.freed[p] = true
	}
	return nil
}

// finish ticks far past every deadline and checks that everything ended.
func (r *randomRun) finish() error {
	r.now += 1e15
	r.lastEvent = Event{Kind: EventTick}
	r.m.Tick(r.now)
	r.stepCount++
	if err := r.check(); err != nil {
		return fmt.Errorf("final tick: %w", err)
	}
	if r.m.Live() != 0 {
		return fmt.Errorf("%d rooms live after the final tick", r.m.Live())
	}
	for id, n := range r.created {
		if r.released[id] != n {
			return fmt.Errorf("room %v created %d times, released %d times", id, n, r.released[id])
		}
	}
	if len(r.owned) != 0 {
		return fmt.Errorf("pages still owned after every room ended: %v", r.owned)
	}
	for p := range r.admitted {
		if !r.freed[p] {
			return fmt.Errorf("admitted page %d never handed back", p)
		}
	}
	var total uint64
	c := r.m.Counters()
	for k := range c.events {
		for o := range c.events[k] {
			total += c.events[k][o]
		}
	}
	if total != r.stepCount {
		return fmt.Errorf("counters hold %d events, %d were stepped", total, r.stepCount)
	}
	return nil
}

// moreState is the state a progress event of the happy path reports: some
// more of it, never past the configured size.
func (r *randomRun) moreState(room *room) int64 {
	return min(r.m.cfg.StateBytes, room.stateBytes+int64(r.rng.IntN(80)))
}
