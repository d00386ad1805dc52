package cores

import "strconv"

// Priority is how urgent a process's current work is. The lease gives the
// cores to the highest priority among the live processes that want them,
// shared evenly between processes of equal priority.
type Priority uint8

// Priorities.
const (
	// Idle: no work; the process's cores are free for the others.
	Idle Priority = iota
	// Normal: work that can run on an even share (decode steps, the
	// prefill worker's chunks).
	Normal
	// Urgent: work someone waits on the first token of (a decode worker's
	// step that carries prompt tokens): it takes every core but those
	// reserved for starving processes.
	Urgent
)

// String returns the priority's name.
func (p Priority) String() string {
	switch p {
	case Idle:
		return "idle"
	case Normal:
		return "normal"
	case Urgent:
		return "urgent"
	}
	return "priority(" + strconv.Itoa(int(p)) + ")"
}

// slotState is what the policy sees of one slot.
type slotState struct {
	prio     Priority
	starving bool // its caller has waited past MaxPark
	live     bool // heartbeat within the TTL
	held     int  // cores held now
}

// share returns how many cores slot self may hold, given every slot's
// state (self's included, its prio being the priority of the work it asks
// for) and the cores shared. Slots that are not live count for nothing (their
// cores are reclaimed). Among the live slots that want cores (a priority
// above Idle, or cores held), those of the highest priority split the
// cores evenly, the remainder going to the lowest slot numbers, after one
// core is set aside for each starving slot of lower priority; a lower
// priority gets nothing unless it is starving (then one core). Every slot
// of the highest priority gets at least one core.
func share(self int, st []slotState, cores int) int {
	me := st[self]
	top := me.prio
	for i, s := range st {
		if i != self && s.live && (s.prio > Idle || s.held > 0) && s.prio > top {
			top = s.prio
		}
	}
	if me.prio < top {
		if me.starving {
			return 1
		}
		return 0
	}
	reserved, peers, rank := 0, 0, 0
	for i, s := range st {
		if i != self && !s.live {
			continue
		}
		if i == self || s.prio == top {
			if i < self {
				rank++
			}
			peers++
		} else if s.starving {
			reserved++
		}
	}
	avail := max(cores-reserved, 0)
	n := avail / peers
	if rank < avail%peers {
		n++
	}
	return max(n, 1)
}
