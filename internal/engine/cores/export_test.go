package cores

// Abandon stops the lease's heartbeat without giving its cores back: what
// a process killed while holding them leaves in the region.
func (l *Lease) Abandon() {
	close(l.stop)
	<-l.done
}

// Held returns the cores the region records for slot i.
func (r *Region) Held(i int) int { return held(r.w[wordAlloc].Load(), i) }

// ShareOf exposes the policy to the table tests.
func ShareOf(self int, prios []Priority, starving, live []bool, holds []int, cores int) int {
	st := make([]slotState, len(prios))
	for i := range st {
		st[i] = slotState{prio: prios[i], starving: starving[i], live: live[i], held: holds[i]}
	}
	return share(self, st, cores)
}

// PoisonAlloc writes v over the alloc word, as another process of the same
// user mapping the region could.
func (r *Region) PoisonAlloc(v uint64) { r.w[wordAlloc].Store(v) }

// PoisonSlot writes v over word w (SlotPrio, SlotBeat) of slot i.
func (r *Region) PoisonSlot(i, w int, v uint64) { r.slot(i, w).Store(v) }

// Slot words, for PoisonSlot.
const (
	SlotPrio = slotPrio
	SlotBeat = slotBeat
)
