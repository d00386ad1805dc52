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
