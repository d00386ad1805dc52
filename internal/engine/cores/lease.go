package cores

import (
	"fmt"
	"os"
	"runtime"
	"strings"
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
	// HealthWindow is how long a forced round or a value in the region
	// that no lease wrote keeps Health degraded. Default 10 s.
	HealthWindow time.Duration
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
	if o.HealthWindow <= 0 {
		o.HealthWindow = 10 * time.Second
	}
}

// Lease is one process's slot in a Region. It implements
// kernels.CoreLease: the process's kernel pool runs on as many cores as the
// lease gives it, and Step sets the priority of the work in progress.
//
// The region is writable by every process of the user that can open it, so
// a lease trusts its own memory over the region's: its slot's count in the
// alloc word is always written from what the lease holds (mine), never
// incremented in place, and the heartbeat goroutine rewrites the whole
// slot (count, priority word, pid) every TTL/4 when it differs (counted in
// Stats.Repairs). Values no lease writes (a count above the cores shared,
// an unknown priority, a heartbeat in the future) are read as nothing. So
// a write to the region stalls nobody for good: rounds go on during it and
// are back to normal within TTL/4 of its end.
//
// Concurrency: every method is safe for concurrent use.
type Lease struct {
	r    *Region
	slot int
	o    Options
	base int // the even share: cores/slots, at least 1

	prio   atomic.Uint32 // the current step's Priority; Idle between steps
	beatAt atomic.Int64  // unix nanoseconds of the last heartbeat written
	// mine is the cores this process holds in the alloc word: what its
	// slot's count must say. Written under mu, read without it.
	mine atomic.Int32

	mu       sync.Mutex // the slot's writes (count, priority word) and the accounting below
	starving bool       // the slot's starving bit
	over     int        // cores taken without the alloc word (Acquire past MaxWait)
	held     int        // cores this process holds (mine and over)
	since    time.Time  // when held last changed
	stats    Stats
	// When a round last ran forced, and when and what the region last
	// held that no lease wrote (for Health).
	forcedAt  time.Time
	anomalyAt time.Time
	anomaly   string

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
	// Repairs counts the times this lease found its own slot other than
	// it wrote it (its count, priority word or pid) and rewrote it;
	// Anomalies the heartbeat checks that found a value no lease writes
	// in another slot (a count above the cores shared, counts adding up
	// to more, an unknown priority, a heartbeat in the future).
	Repairs, Anomalies uint64
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

// withHeld returns the alloc word a with slot i's count set to n.
func withHeld(a uint64, i, n int) uint64 {
	return a&^(0xff<<(8*i)) | uint64(n)<<(8*i)
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
			l.check()
		}
	}
}

// check rewrites the lease's own slot from what it holds when the region
// says otherwise, and notes values no lease writes in the other slots.
func (l *Lease) check() {
	l.mu.Lock()
	defer l.mu.Unlock()
	var fixed []string
	mine := int(l.mine.Load())
	if old, ok := l.writeMine(mine, mine); !ok {
		fixed = append(fixed, fmt.Sprintf("its count was %d, it holds %d", old, mine))
	}
	pw := l.r.slot(l.slot, slotPrio)
	if v, want := pw.Load(), l.prioWord(Priority(l.prio.Load())); v != want {
		pw.Store(want)
		fixed = append(fixed, fmt.Sprintf("its priority word was %#x, not %#x", v, want))
	}
	if w := l.r.slot(l.slot, slotPID); w.Load() != uint64(os.Getpid()) {
		w.Store(uint64(os.Getpid()))
		fixed = append(fixed, "its pid was changed")
	}
	now := time.Now()
	if len(fixed) > 0 {
		l.stats.Repairs++
		l.anomalyAt, l.anomaly = now, fmt.Sprintf("slot %d (this worker's) was rewritten: %s", l.slot, strings.Join(fixed, ", "))
	}
	if what := l.impossible(now.UnixNano()); what != "" {
		l.stats.Anomalies++
		l.anomalyAt, l.anomaly = now, what
	}
}

// noteRewrite counts a repair of the slot's count, found by a take or a
// release (old: what the region said, mine: what the lease holds), and
// notes it for Health as check does: whichever of them meets a written-
// over count first reports it. The caller holds mu.
func (l *Lease) noteRewrite(old, mine int) {
	l.stats.Repairs++
	l.anomalyAt, l.anomaly = time.Now(), fmt.Sprintf("slot %d (this worker's) was rewritten: its count was %d, it holds %d", l.slot, old, mine)
}

// impossible describes the first value of another slot that no lease
// writes, or returns "".
func (l *Lease) impossible(now int64) string {
	a := l.r.w[wordAlloc].Load()
	sum := int(l.mine.Load())
	for i := range l.r.slots {
		if i == l.slot {
			continue
		}
		n := held(a, i)
		if n > l.r.cores {
			return fmt.Sprintf("slot %d claims %d of %d cores", i, n, l.r.cores)
		}
		sum += n
		if p := l.r.slot(i, slotPrio).Load(); p&^(starvingBit|0xff) != 0 || Priority(p&0xff) > Urgent {
			return fmt.Sprintf("slot %d's priority word is %#x", i, p)
		}
		if beat := int64(l.r.slot(i, slotBeat).Load()); beat-now > int64(l.o.TTL) {
			return fmt.Sprintf("slot %d's heartbeat is %v in the future", i, time.Duration(beat-now).Round(time.Second))
		}
	}
	if sum > l.r.cores {
		// Forced rounds are not in the alloc word, so the counts never add
		// up to more than the cores, except for a moment when a lease that
		// was taken for dead while late writes back what it still holds.
		return fmt.Sprintf("the slots claim %d of %d cores", sum, l.r.cores)
	}
	return ""
}

// writeMine sets the slot's count in the alloc word to n; it returns the
// count it replaced and whether that was expect (what this lease last
// wrote). The caller holds mu.
func (l *Lease) writeMine(n, expect int) (old int, ok bool) {
	a := &l.r.w[wordAlloc]
	for {
		v := a.Load()
		old = held(v, l.slot)
		if old == n || a.CompareAndSwap(v, withHeld(v, l.slot, n)) {
			return old, old == expect
		}
	}
}

// prioWord is the slot's priority word for priority p. The caller holds mu.
func (l *Lease) prioWord(p Priority) uint64 {
	w := uint64(p)
	if l.starving {
		w |= starvingBit
	}
	return w
}

// Health reports whether the lease is degraded, and why: a round ran
// forced (it waited MaxWait for a core) or the region held a value no
// lease writes, within the last HealthWindow. A worker's /health shows it.
func (l *Lease) Health() (degraded bool, reason string) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	var rs []string
	if !l.forcedAt.IsZero() && now.Sub(l.forcedAt) < l.o.HealthWindow {
		rs = append(rs, fmt.Sprintf("core lease: kernel rounds waited %v for a core and ran without one (%d in all, the last %v ago): "+
			"another worker kept the cores, or something wrote the lease region", l.o.MaxWait, l.stats.Forced, now.Sub(l.forcedAt).Round(time.Millisecond)))
	}
	if !l.anomalyAt.IsZero() && now.Sub(l.anomalyAt) < l.o.HealthWindow {
		rs = append(rs, fmt.Sprintf("core lease: the region held values no worker writes (%s; the last %v ago); "+
			"each worker repairs its own slot, but a process of this user may be writing the region", l.anomaly, now.Sub(l.anomalyAt).Round(time.Millisecond)))
	}
	return len(rs) > 0, strings.Join(rs, "; ")
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
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mine.Store(0)
	l.writeMine(0, 0)
}

// Step marks work of priority p as running until the returned function is
// called (the end of an engine step).
func (l *Lease) Step(p Priority) (end func()) {
	l.setPrio(p)
	return func() { l.setPrio(Idle) }
}

func (l *Lease) setPrio(p Priority) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.prio.Store(uint32(p))
	l.r.slot(l.slot, slotPrio).Store(l.prioWord(p))
}

func (l *Lease) setStarving(on bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.starving = on
	l.r.slot(l.slot, slotPrio).Store(l.prioWord(Priority(l.prio.Load())))
}

// state reads every slot's state; alloc is the alloc word it was read
// with. A round outside Step asks with Normal priority. Values no lease
// writes count for nothing: a count above the cores shared is 0, an
// unknown priority Idle, a heartbeat from the future not live. This
// slot's own state is what the lease holds, not what the region says.
func (l *Lease) state(now int64) (st [MaxSlots]slotState, alloc uint64) {
	alloc = l.r.w[wordAlloc].Load()
	ttl := int64(l.o.TTL)
	for i := range l.r.slots {
		p := l.r.slot(i, slotPrio).Load()
		beat := int64(l.r.slot(i, slotBeat).Load())
		prio := Priority(p & 0xff)
		if prio > Urgent {
			prio = Idle
		}
		n := held(alloc, i)
		if n > l.r.cores {
			n = 0
		}
		st[i] = slotState{prio: prio, starving: p&starvingBit != 0,
			live: beat != 0 && now-beat <= ttl && beat-now <= ttl, held: n}
	}
	for i := range l.r.slots {
		if st[i].prio == Idle && st[i].held > 0 {
			st[i].prio = Normal // rounds outside a step run at Normal
		}
	}
	me := &st[l.slot]
	me.live, me.held, me.prio = true, int(l.mine.Load()), Priority(l.prio.Load())
	if me.prio == Idle {
		me.prio = Normal
	}
	return st, alloc
}

// sum returns the cores the slots of st hold.
func (l *Lease) sum(st *[MaxSlots]slotState) int {
	n := 0
	for i := range l.r.slots {
		n += st[i].held
	}
	return n
}

// share returns the cores the policy gives this process now.
func (l *Lease) share() (int, uint64, [MaxSlots]slotState) {
	st, alloc := l.state(time.Now().UnixNano())
	return share(l.slot, st[:l.r.slots], l.r.cores), alloc, st
}

// take tries to add one core to the slot's count: the policy must allow
// it and a core must be free (after taking back those of dead slots). The
// slot's count is written from mine, whatever the word held.
func (l *Lease) take() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	a := &l.r.w[wordAlloc]
	for {
		n, v, st := l.share()
		mine := int(l.mine.Load())
		if mine+1 > n {
			return false
		}
		if l.sum(&st) >= l.r.cores {
			if !l.reclaim(v, st) {
				return false
			}
			continue
		}
		if a.CompareAndSwap(v, withHeld(v, l.slot, mine+1)) {
			if old := held(v, l.slot); old != mine {
				l.noteRewrite(old, mine)
			}
			l.mine.Store(int32(mine + 1))
			l.account(+1)
			l.beatIfDue()
			return true
		}
	}
}

// reclaim takes back the cores of slots that are not live; it reports
// whether it freed any (or the alloc word changed, so the caller retries).
// The caller holds mu.
func (l *Lease) reclaim(v uint64, st [MaxSlots]slotState) bool {
	nv, freed := v, 0
	for i := range l.r.slots {
		if i != l.slot && !st[i].live && held(v, i) > 0 {
			nv &^= 0xff << (8 * i)
			freed += st[i].held
		}
	}
	if nv == v {
		return false
	}
	if l.r.w[wordAlloc].CompareAndSwap(v, nv) {
		l.stats.Reclaimed += uint64(freed)
	}
	return true
}

// account records a change of the cores held, for Stats. The caller holds
// mu.
func (l *Lease) account(d int) {
	now := time.Now()
	if over := l.held - l.base; over > 0 {
		l.stats.Borrowed += time.Duration(over) * now.Sub(l.since)
	}
	l.held += d
	l.since = now
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
			l.mu.Lock()
			l.over++
			l.account(+1)
			l.stats.Forced++
			l.forcedAt = time.Now()
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
	n, _, st := l.share()
	if int(l.mine.Load()) <= n {
		return false
	}
	for i := range l.r.slots {
		if i != l.slot && st[i].live && (st[i].prio > Idle || st[i].starving) {
			return true
		}
	}
	return false
}

// Release implements kernels.CoreLease: gives back one core. The slot's
// count is written from mine, whatever the word held (another process may
// have taken the cores back while this one was late, or written the
// region).
func (l *Lease) Release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.account(-1)
	if l.over > 0 {
		l.over--
		return
	}
	mine := l.mine.Load()
	if mine == 0 {
		return // a Release without a core: nothing to give
	}
	if old, ok := l.writeMine(int(mine-1), int(mine)); !ok {
		l.noteRewrite(old, int(mine))
	}
	l.mine.Store(mine - 1)
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
