package room

// Counters is a snapshot of a Machine's statistics, for metrics. Every event
// is counted once under its kind and outcome; an unknown kind is counted
// under kind 0.
type Counters struct {
	events   [eventKindCount][OutcomeRejected + 1]uint64
	failures [reasonCount]uint64
	live     [StateFailed + 1]int

	Successes uint64 // rooms that reached Succeeded
	Late      uint64 // events addressed to a terminal room (whatever their outcome)
	Rejected  uint64 // events with OutcomeRejected
	Forgotten uint64 // tombstones forgotten when their TTL passed
	Evicted   uint64 // tombstones forgotten early because TombstonesMax were remembered
	Live      int    // live rooms now
	// Tombstones is the number of terminal rooms remembered now.
	Tombstones int
}

// Events returns how many events of kind k had outcome o.
func (c Counters) Events(k EventKind, o Outcome) uint64 {
	if int(k) >= len(c.events) || int(o) >= len(c.events[0]) {
		return 0
	}
	return c.events[k][o]
}

// Failures returns how many rooms failed with reason r.
func (c Counters) Failures(r Reason) uint64 {
	if int(r) >= len(c.failures) {
		return 0
	}
	return c.failures[r]
}

// LiveIn returns how many live rooms are in state s now.
func (c Counters) LiveIn(s State) int {
	if int(s) >= len(c.live) {
		return 0
	}
	return c.live[s]
}

// count records one event's outcome.
func (m *Machine) count(k EventKind, o Outcome) {
	if int(k) >= len(m.c.events) {
		k = 0
	}
	m.c.events[k][o]++
	if o == OutcomeRejected {
		m.c.Rejected++
	}
}
