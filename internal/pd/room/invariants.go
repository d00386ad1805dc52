package room

import (
	"errors"
	"fmt"

	"tandem/internal/invariant"
)

// invariantf builds the panic value for a broken invariant: a bug in this
// package, never bad input.

// checkStep runs after every Step: the cheap global checks and the room the
// event named. It panics on a broken invariant. checkAll, run by the tests
// and the simulator, checks every room.
func (m *Machine) checkStep(id ID) {
	if err := m.checkLimits(); err != nil {
		invariant.Failf("room", "%v", err)
	}
	if r := m.rooms[id]; r != nil {
		if err := m.checkRoom(r); err != nil {
			invariant.Failf("room", "%v", err)
		}
	}
}

// checkLimits checks the counts and limits.
func (m *Machine) checkLimits() error {
	tombs := len(m.tombs) - m.tombHead
	switch {
	case len(m.live) > m.cfg.RoomsMax:
		return fmt.Errorf("%d live rooms, limit %d", len(m.live), m.cfg.RoomsMax)
	case tombs > m.cfg.TombstonesMax:
		return fmt.Errorf("%d tombstones, limit %d", tombs, m.cfg.TombstonesMax)
	case len(m.rooms) != len(m.live)+tombs:
		return fmt.Errorf("%d rooms on record, %d live + %d tombstones", len(m.rooms), len(m.live), tombs)
	}
	sum := 0
	for _, n := range m.c.live {
		sum += n
	}
	if sum != len(m.live) {
		return fmt.Errorf("live-by-state counts sum to %d, %d live", sum, len(m.live))
	}
	return nil
}

// checkRoom checks one room's record against its state.
func (m *Machine) checkRoom(r *room) error {
	if m.rooms[r.id] != r {
		return fmt.Errorf("room %v: not the room on record", r.id)
	}
	if r.state.Terminal() {
		if r.phase != PhaseDone || r.deadline != 0 || !r.released || r.heapIdx != -1 || r.computing || r.admitting {
			return fmt.Errorf("room %v: terminal %v/%v with deadline %v, released %v, heap %d",
				r.id, r.state, r.phase, r.deadline, r.released, r.heapIdx)
		}
		return nil
	}
	if r.phase == 0 || r.phase >= PhaseDone || phaseTable[r.phase].state != r.state || phaseTable[r.phase].role != m.cfg.Role {
		return fmt.Errorf("room %v: live in %v/%v for role %v", r.id, r.state, r.phase, m.cfg.Role)
	}
	if r.released || r.heapIdx < 0 || r.heapIdx >= len(m.live) || m.live[r.heapIdx] != r {
		return fmt.Errorf("room %v: live but released %v or not in the deadline heap (%d)", r.id, r.released, r.heapIdx)
	}
	if r.deadline <= r.created {
		return fmt.Errorf("room %v: deadline %v not after creation %v", r.id, r.deadline, r.created)
	}
	if r.computing && r.phase != PhaseComputing && r.phase != PhaseSending {
		return fmt.Errorf("room %v: computing in %v", r.id, r.phase)
	}
	return nil
}

// checkAll checks every invariant over every room, including the deadline
// heap's order and the tombstones' expiry order.
func (m *Machine) checkAll() error {
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	add(m.checkLimits())
	for i, r := range m.live {
		if i > 0 && m.live.less(i, (i-1)/2) {
			add(fmt.Errorf("deadline heap out of order at %d", i))
		}
		if r.state.Terminal() {
			add(fmt.Errorf("room %v: terminal but in the deadline heap", r.id))
		}
		add(m.checkRoom(r))
	}
	for i := m.tombHead; i < len(m.tombs); i++ {
		r := m.tombs[i]
		if !r.state.Terminal() {
			add(fmt.Errorf("room %v: tombstone in %v", r.id, r.state))
		}
		if i > m.tombHead && r.ended < m.tombs[i-1].ended {
			add(fmt.Errorf("room %v: tombstones out of order", r.id))
		}
		add(m.checkRoom(r))
	}
	return errors.Join(errs...)
}

// CheckInvariants checks every invariant over every room (what Step checks
// for the room it touched, plus the deadline heap's and the tombstones'
// order) and returns what is broken, or nil. It is O(rooms): the simulator
// and tests call it periodically; production need not.
func (m *Machine) CheckInvariants() error { return m.checkAll() }
