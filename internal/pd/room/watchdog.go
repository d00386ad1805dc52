package room

import (
	"cmp"
	"slices"

	"tandem/internal/invariant"
)

// The watchdog: a second line of defence behind Tick. The edge runs it
// periodically; it asks Overdue which live rooms are past their deadline
// (longer ago than a grace it chooses, so a timer that is merely late does
// not count) and steps EventWatchdog for each. Tick fails a room at its
// deadline, so with a working timer the watchdog never finds anything;
// when it does, a timer did not fire and the room still ends.
//
// EventWatchdog for:
//   - a live room past its deadline (at or before now): the room fails with
//     ReasonDeadline (counted under Failures(ReasonDeadline)) and the step's
//     outcome is applied;
//   - a live room not past its deadline: rejected and counted, the room is
//     unchanged;
//   - a terminal room: late, like any event for it;
//   - a room the machine does not know: rejected.

// watchdog handles EventWatchdog for a live room r, or nil when the machine
// does not know the room.
func (m *Machine) watchdog(now Instant, r *room) Outcome {
	if r == nil || r.deadline > now {
		return OutcomeRejected
	}
	if r.state.Terminal() {
		invariant.Failf("room", "room %v: watchdog on terminal room", r.id)
	}
	m.fail(now, r, ReasonDeadline, EventWatchdog)
	return OutcomeApplied
}

// Overdue returns the live rooms whose deadline is at or before before,
// earliest deadline first (ties oldest first), at most limit of them (all
// when limit <= 0). The watchdog passes now minus WatchdogGrace, and so
// should anyone else who judges a room overdue. It reads the
// deadline heap and visits only the overdue rooms and their children.
func (m *Machine) Overdue(before Instant, limit int) []ID {
	var found []*room
	stack := []int{0}
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if i >= len(m.live) || m.live[i].deadline > before {
			continue
		}
		found = append(found, m.live[i])
		stack = append(stack, 2*i+1, 2*i+2)
	}
	slices.SortFunc(found, byDeadline)
	if limit > 0 && len(found) > limit {
		found = found[:limit]
	}
	ids := make([]ID, len(found))
	for i, r := range found {
		ids[i] = r.id
	}
	return ids
}

// byDeadline orders rooms as the deadline heap does: by deadline, then age.
func byDeadline(a, b *room) int {
	if c := cmp.Compare(a.deadline, b.deadline); c != 0 {
		return c
	}
	return cmp.Compare(a.seq, b.seq)
}
