package room

import (
	"reflect"
	"slices"
	"testing"
)

// TestRoomsCopyIsFlat: Rooms copies each room's fields but shares its
// history, so the copy a worker takes under the lock its engine callbacks
// need costs a few allocations however many rooms there are (it used to
// clone every history: one allocation per room), and a later step never
// changes a copy already taken.
func TestRoomsCopyIsFlat(t *testing.T) {
	m := newTestMachine(t, RolePrefill)
	const n = 500
	for i := range n {
		id := ID{14: byte(i >> 8), 15: byte(i)}
		stepAll(t, m, 1e6, succeedPath(RolePrefill, id))
	}
	live := ID{0: 1}
	stepAll(t, m, 1e6, pathTo(live, PhaseSending))
	allocs := testing.AllocsPerRun(10, func() { _ = m.Rooms() })
	if allocs > 4 {
		t.Errorf("Rooms() of %d rooms: %.0f allocations, want a handful (histories shared, not cloned)", n+1, allocs)
	}
	snap := m.Rooms()
	i := slices.IndexFunc(snap, func(r RoomInfo) bool { return r.ID == live })
	before := slices.Clone(snap[i].History)
	// Fill the live room's history past historyMax: the oldest entries go,
	// but never in the copy taken before.
	for k := range historyMax + 5 {
		m.Step(Instant(2e6+k), Event{Kind: EventKVSent, Room: live, Bytes: int64(100 + k)})
		m.Step(Instant(2e6+k), Event{Kind: EventComputeStarted, Room: live})
	}
	if !reflect.DeepEqual(snap[i].History, before) {
		t.Errorf("a later step changed a history copy taken before it")
	}
	now, _ := m.Room(live)
	if len(now.History) != historyMax || now.History[historyMax-1].Event != EventComputeStarted {
		t.Errorf("history after many steps: %d entries, last %v", len(now.History), now.History[len(now.History)-1].Event)
	}
}
