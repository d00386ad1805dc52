package room

import (
	"reflect"
	"slices"
	"testing"
)

// TestWatchdog steps EventWatchdog into a room in every live phase of both
// roles, one nanosecond before its deadline and at it, and into terminal
// and unknown rooms: before the deadline it is rejected and the room is
// unchanged; at the deadline the room fails with ReasonDeadline, releases
// once and the failure is counted; terminal rooms count it as late; unknown
// rooms reject it and nothing is created.
func TestWatchdog(t *testing.T) {
	id := scenarioID(1)
	for _, role := range Roles() {
		for _, p := range livePhases(role) {
			m := newTestMachine(t, role)
			stepAll(t, m, 1e6, pathTo(id, p))
			m.Advance()
			before, _ := m.Room(id)
			deadline := before.Deadline

			o := m.Step(deadline-1, Event{Kind: EventWatchdog, Room: id})
			after, _ := m.Room(id)
			if o != OutcomeRejected || !reflect.DeepEqual(before, after) || len(m.Ready().Effects) != 0 {
				t.Errorf("%v/%v: Step(deadline-1, watchdog) = %v, room %v -> %v, effects %v; want rejected and unchanged",
					role, p, o, before, after, m.Ready().Effects)
			}
			if n := m.Counters().Events(EventWatchdog, OutcomeRejected); n != 1 {
				t.Errorf("%v/%v: watchdog rejected counted %d times, want 1", role, p, n)
			}

			o = m.Step(deadline, Event{Kind: EventWatchdog, Room: id})
			after, _ = m.Room(id)
			if o != OutcomeApplied || after.State != StateFailed || after.Reason != ReasonDeadline {
				t.Errorf("%v/%v: Step(deadline, watchdog) = %v, room %v/%v; want applied, failed/deadline",
					role, p, o, after.State, after.Reason)
			}
			effects := m.Ready().Effects
			if n := countKind(effects, EffectRelease); n != 1 || effects[len(effects)-1].Kind != EffectRelease {
				t.Errorf("%v/%v: watchdog failure effects %v, want one release, last", role, p, effects)
			}
			c := m.Counters()
			if c.Failures(ReasonDeadline) != 1 || c.Events(EventWatchdog, OutcomeApplied) != 1 || c.Live != 0 {
				t.Errorf("%v/%v: counters deadline=%d watchdog/applied=%d live=%d, want 1 1 0", role, p,
					c.Failures(ReasonDeadline), c.Events(EventWatchdog, OutcomeApplied), c.Live)
			}
			if err := m.checkAll(); err != nil {
				t.Errorf("%v/%v: invariants after the watchdog: %v", role, p, err)
			}
			m.Advance()

			if o := m.Step(deadline+1, Event{Kind: EventWatchdog, Room: id}); o != OutcomeLate || len(m.Ready().Effects) != 0 {
				t.Errorf("%v/%v: watchdog on the failed room = %v with %v, want late and nothing", role, p, o, m.Ready().Effects)
			}
			other := scenarioID(2)
			if o := m.Step(deadline+1, Event{Kind: EventWatchdog, Room: other}); o != OutcomeRejected {
				t.Errorf("%v/%v: watchdog on an unknown room = %v, want rejected", role, p, o)
			}
			if _, _, ok := m.State(other); ok {
				t.Errorf("%v/%v: watchdog on an unknown room created it", role, p)
			}
		}
	}
}

// TestOverdue checks Overdue against a brute-force list over many rooms
// with distinct and equal deadlines, with and without a limit.
func TestOverdue(t *testing.T) {
	cfg := defaultConfig(RolePrefill)
	cfg.RoomsMax = 64
	m, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	// Rooms created at 1ms steps; some get HELLO (deadline moves to the
	// alloc timeout), so the heap holds several deadlines and ties.
	for i := range 40 {
		id := scenarioID(uint64(i + 1))
		now := Instant(i%7) * 1e6
		m.Step(now, Event{Kind: EventRequest, Room: id, RequestID: "r"})
		if i%3 == 0 {
			m.Step(now, Event{Kind: EventHello, Room: id, Peer: testDecodePeer})
		}
	}
	m.Advance()
	all := m.Rooms()
	for _, before := range []Instant{0, 1000e6, 1003e6, 1006e6, 2004e6, 1e12} {
		var want []RoomInfo
		for _, ri := range all {
			if ri.Deadline <= before {
				want = append(want, ri)
			}
		}
		slices.SortStableFunc(want, func(a, b RoomInfo) int {
			if a.Deadline != b.Deadline {
				return int(a.Deadline - b.Deadline)
			}
			return 0 // Rooms is oldest first, and the sort is stable
		})
		var wantIDs []ID
		for _, ri := range want {
			wantIDs = append(wantIDs, ri.ID)
		}
		for _, limit := range []int{0, 1, 5} {
			got := m.Overdue(before, limit)
			w := wantIDs
			if limit > 0 && len(w) > limit {
				w = w[:limit]
			}
			if len(got) != len(w) || (len(w) > 0 && !slices.Equal(got, w)) {
				t.Errorf("Overdue(%v, %d) = %d rooms %v, want %d %v", before, limit, len(got), got, len(w), w)
			}
		}
	}
	if got := m.Overdue(1e12, 0); len(got) != 40 {
		t.Errorf("Overdue(far future) = %d rooms, want 40", len(got))
	}
}
