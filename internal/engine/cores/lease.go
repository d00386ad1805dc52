package cores

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Options tunes a Lease; zero fields take the defaults.
type Options struct {
	// TTL is how long a slot's heartbeat stays valid: a process silent
	// for longer (killed, or stopped) counts as gone, and the cores it held
	// are taken back. Default 1 s.
	TTL time.Duration
	// MaxPark is how long the caller of a round waits for a core before it
	// marks itself starving, which reserves it one core from
	// higher-priority processes. Default 100 ms (decode ITL's SLO is 250 ms).
	MaxPark time.Duration
	// MaxWait bounds Acquire: past it, the round runs without a core (the
	// machine is then overcommitted, counted in Stats.Forced), so no other
	// process can stop this one. Default 1 s.
	MaxWait time.Duration
}

func (o *Options) defaults() {
	if o.TTL <= 0 {
		o.TTL = time.Second
	}
	if o.MaxPark <= 0 {
		o.MaxPark = 100 * time.Millisecond
	}
	if o.MaxWait <= 0 {
		o.MaxWait = time.Second
	}
}

// Lease is one process's slot in a Region. It implements
// kernels.CoreLease: the process's kernel pool runs on as many cores as the
// lease gives it, and Step sets the priority of the work in progress.
//
// Concurrency: every method is safe for concurrent use.
type Lease struct {
	r    *Region
	slot int
	o    Options
	base int // the even share: cores/slots, at least 1

	prio   atomic.Uint32 // the current step's Priority; Idle between steps
	beatAt atomic.Int64  // unix nanoseconds of the last heartbeat written
	over   atomic.Int32  // cores taken without the alloc word (Acquire past MaxWait)

	mu    sync.Mutex // the accounting below
	held  int        // cores this process holds (alloc's and over's)
	since time.Time  // when held last changed
	stats Stats

	stop chan struct{}
	done chan struct{}
}

// Stats counts a lease's use since it was taken.
type Stats struct {
	// Borrowed is core-time held beyond the even share (cores/slots).
	Borrowed time.Duration
	// Lent is the time this process's caller waited for a core at round
	// start while others held them.
	Lent time.Duration
	// Parks is the rounds whose caller had to wait; Forced those that ran
	// without a core after MaxWait; Reclaimed the cores taken back from
	// dead processes.
	Parks, Forced, Reclaimed uint64
	// Held is the cores this process holds now.
	Held int
}

// Lease takes slot (0..Slots()-1) of the region for this process: cores
// it held before (a previous run of the same worker that was killed) are
// dropped, and a heartbeat keeps the slot live until Close.
func (r *Region) Lease(slot int, o Options) (*Lease, error) {
	if slot < 0 || slot >= r.slots {
		return nil, fmt.Errorf("cores: slot %d is out of range 0..%d", slot, r.slots-1)
	}
	o.defaults()
	l := &Lease{r: r, slot: slot, o: o, base: max(1, r.cores/r.slots),
		since: time.Now(), stop: make(chan struct{}), done: make(chan struct{})}
	l.r.slot(slot, slotPrio).Store(uint64(Idle))
	l.r.slot(slot, slotPID).Store(uint64(os.Getpid()))
	l.beat()
	l.clearAlloc()
	go l.heartbeat()
	return l, nil
}

// Slot returns the lease's slot.
func (l *Lease) Slot() int { return l.slot }

// Cores returns how many cores the region shares: the most threads a
// round of this process's pool can run on.
func (l *Lease) Cores() int { return l.r.cores }

func (l *Lease) beat() {
	now := time.Now().UnixNano()
	l.beatAt.Store(now)
	l.r.slot(l.slot, slotBeat).Store(uint64(now))
}

// beatIfDue refreshes the heartbeat when the last one is older than TTL/8:
// a process taking cores is alive even when its heartbeat goroutine is
// late (on an overloaded host a second can pass between its runs).
func (l *Lease) beatIfDue() {
	if time.Now().UnixNano()-l.beatAt.Load() > int64(l.o.TTL/8) {
		l.beat()
	}
}

func (l *Lease) heartbeat() {
	defer close(l.done)
	t := time.NewTicker(l.o.TTL / 4)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			l.beat()
		}
	}
}

// Close gives back every core the process holds and leaves the slot
// (a heartbeat of 0: not live). Rounds must not run any more.
func (l *Lease) Close() {
	select {
	case <-l.stop:
		return
	default:
	}
	close(l.stop)
	<-l.done
	l.r.slot(l.slot, slotPrio).Store(uint64(Idle))
	l.clearAlloc()
	l.r.slot(l.slot, slotBeat).Store(0)
}

// clearAlloc drops every core the slot holds in the alloc word.
func (l *Lease) clearAlloc() {
	a := &l.r.w[wordAlloc]
	for {
		v := a.Load()
		if held(v, l.slot) == 0 || a.CompareAndSwap(v, v&^(0xff<<(8*l.slot))) {
			return
		}
	}
}

// Step marks work of priority p as running until the returned function is
// called (the end of an engine step).
func (l *Lease) Step(p Priority) (end func()) {
	l.setPrio(p)
	return func() { l.setPrio(Idle) }
}

func (l *Lease) setPrio(p Priority) {
	l.prio.Store(uint32(p))
	w := l.r.slot(l.slot, slotPrio)
	for {
		v := w.Load()
		if w.CompareAndSwap(v, v&starvingBit|uint64(p)) {
			return
		}
	}
}

func (l *Lease) setStarving(on bool) {
	w := l.r.slot(l.slot, slotPrio)
	for {
		v := w.Load()
		nv := v &^ starvingBit
		if on {
			nv |= starvingBit
		}
		if v == nv || w.CompareAndSwap(v, nv) {
			return
		}
	}
}

// state reads every slot's state; alloc is the alloc word it was read
// with. A round outside Step asks with Normal priority.
func (l *Lease) state(now int64) (st [MaxSlots]slotState, alloc uint64) {
	alloc = l.r.w[wordAlloc].Load()
	ttl := int64(l.o.TTL)
	for i := range l.r.slots {
		p := l.r.slot(i, slotPrio).Load()
		beat := int64(l.r.slot(i, slotBeat).Load())
		st[i] = slotState{prio: Priority(p & 0xff), starving: p&starvingBit != 0,
			live: beat != 0 && now-beat <= ttl, held: held(alloc, i)}
	}
	for i := range l.r.slots {
		if st[i].prio == Idle && st[i].held > 0 {
			st[i].prio = Normal // rounds outside a step run at Normal
		}
	}
	me := &st[l.slot]
	me.live = true
	if me.prio == Idle {
		me.prio = Normal
	}
	return st, alloc
}

// share returns the cores the policy gives this process now.
func (l *Lease) share() (int, uint64, [MaxSlots]slotState) {
	st, alloc := l.state(time.Now().UnixNano())
	return share(l.slot, st[:l.r.slots], l.r.cores), alloc, st
}

// take tries to add one core to the slot's count: the policy must allow
// it and a core must be free (after taking back those of dead slots).
func (l *Lease) take() bool {
	a := &l.r.w[wordAlloc]
	for {
		n, v, st := l.share()
		if held(v, l.slot)+1 > n {
			return false
		}
		if total(v, l.r.slots) >= l.r.cores {
			if !l.reclaim(v, st) {
				return false
			}
			continue
		}
		if a.CompareAndSwap(v, v+1<<(8*l.slot)) {
			l.account(+1)
			l.beatIfDue()
			return true
		}
	}
}

// reclaim takes back the cores of slots that are not live; it reports
// whether it freed any (or the alloc word changed, so the caller retries).
func (l *Lease) reclaim(v uint64, st [MaxSlots]slotState) bool {
	nv, freed := v, 0
	for i := range l.r.slots {
		if i != l.slot && !st[i].live && st[i].held > 0 {
			nv &^= 0xff << (8 * i)
			freed += st[i].held
		}
	}
	if freed == 0 {
		return false
	}
	if l.r.w[wordAlloc].CompareAndSwap(v, nv) {
		l.mu.Lock()
		l.stats.Reclaimed += uint64(freed)
		l.mu.Unlock()
	}
	return true
}

// account records a change of the cores held, for Stats.
func (l *Lease) account(d int) {
	now := time.Now()
	l.mu.Lock()
	if over := l.held - l.base; over > 0 {
		l.stats.Borrowed += time.Duration(over) * now.Sub(l.since)
	}
	l.held += d
	l.since = now
	l.mu.Unlock()
}

// Acquire polls the region while it waits: a few yields, then naps from
// minNap doubling to maxNap, so a short wait (a helper of another process
// finishing its chunk) ends within tens of microseconds and a long one (a
// lower priority parked behind an urgent step) costs a wake-up a
// millisecond.
const (
	minNap = 20 * time.Microsecond
	maxNap = time.Millisecond
)

// Acquire implements kernels.CoreLease: it returns once the calling
// thread holds a core. While the policy gives this process none (another
// has priority) or none is free, it waits, polling the region; past
// MaxPark it marks the process starving (the others then leave it one
// core), past MaxWait it runs without one.
func (l *Lease) Acquire() {
	if l.take() {
		return
	}
	start := time.Now()
	starving := false
	nap := minNap
	for i := 0; ; i++ {
		if i < 64 {
			runtime.Gosched()
		} else {
			time.Sleep(nap)
			nap = min(2*nap, maxNap)
		}
		if l.take() {
			break
		}
		waited := time.Since(start)
		if !starving && waited > l.o.MaxPark {
			starving = true
			l.setStarving(true)
		}
		if waited > l.o.MaxWait {
			l.over.Add(1)
			l.account(+1)
			l.mu.Lock()
			l.stats.Forced++
			l.mu.Unlock()
			break
		}
	}
	if starving {
		l.setStarving(false)
	}
	l.mu.Lock()
	l.stats.Parks++
	l.stats.Lent += time.Since(start)
	l.mu.Unlock()
}

// Grant implements kernels.CoreLease: the threads this process may run
// now (at least 1).
func (l *Lease) Grant() int {
	n, _, _ := l.share()
	return max(n, 1)
}

// TryAcquire implements kernels.CoreLease: one more core for a helper if
// the policy allows it and one is free.
func (l *Lease) TryAcquire() bool { return l.take() }

// Revoked implements kernels.CoreLease: the process holds more cores than
// its share and another process wants one.
func (l *Lease) Revoked() bool {
	n, v, st := l.share()
	if held(v, l.slot) <= n {
		return false
	}
	for i := range l.r.slots {
		if i != l.slot && st[i].live && (st[i].prio > Idle || st[i].starving) {
			return true
		}
	}
	return false
}

// Release implements kernels.CoreLease: gives back one core.
func (l *Lease) Release() {
	l.account(-1)
	if o := l.over.Load(); o > 0 && l.over.CompareAndSwap(o, o-1) {
		return
	}
	a := &l.r.w[wordAlloc]
	for {
		v := a.Load()
		if held(v, l.slot) == 0 { // taken back as dead (a heartbeat missed): nothing to give
			return
		}
		if a.CompareAndSwap(v, v-1<<(8*l.slot)) {
			return
		}
	}
}

// OthersWant reports whether another live process of the region is in a
// step, holds cores or is starving: cores this process leaves idle would be
// used.
func (l *Lease) OthersWant() bool {
	st, _ := l.state(time.Now().UnixNano())
	for i := range l.r.slots {
		if i != l.slot && st[i].live && (st[i].prio > Idle || st[i].starving) {
			return true
		}
	}
	return false
}

// Stats returns the lease's counters.
func (l *Lease) Stats() Stats {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.stats
	if over := l.held - l.base; over > 0 {
		s.Borrowed += time.Duration(over) * now.Sub(l.since)
	}
	s.Held = l.held
	return s
}

// SlotInfo is one slot's state as the region holds it, for debugging.
type SlotInfo struct {
	Slot     int    `json:"slot"`
	PID      int    `json:"pid"`
	Priority string `json:"priority"`
	Starving bool   `json:"starving"`
	Live     bool   `json:"live"`
	Held     int    `json:"held"`
}

// Slots returns every slot's state.
func (l *Lease) Slots() []SlotInfo {
	st, _ := l.state(time.Now().UnixNano())
	out := make([]SlotInfo, l.r.slots)
	for i := range out {
		p := st[i].prio
		if i == l.slot {
			p = Priority(l.prio.Load())
		}
		out[i] = SlotInfo{Slot: i, PID: int(l.r.slot(i, slotPID).Load()), Priority: p.String(),
			Starving: st[i].starving, Live: st[i].live, Held: st[i].held}
	}
	return out
}
