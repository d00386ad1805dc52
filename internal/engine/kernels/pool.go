package kernels

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"tandem/internal/invariant"
)

// MaxThreads is the most worker goroutines a Pool runs; NewPool clamps
// larger requests to it.
const MaxThreads = 256

// chunksPerThread is how many chunks Parallel cuts per thread, so a thread
// that is slowed down (the machine's cores are shared) leaves its remaining
// chunks to the others.
const chunksPerThread = 4

// spinWait is how long an idle helper keeps polling for the next round
// before it parks on its channel. Rounds of one forward step follow each
// other within microseconds, so a helper that spins between them starts
// the next round at once instead of waiting for a goroutine wake-up (a
// futex call and a scheduler pass, tens of microseconds on a loaded
// machine); between steps it parks, and the next round pays one wake-up.
const spinWait = 50 * time.Microsecond

// While polling, a worker reads the clock every pollClock loads of the
// round state and yields its P to other goroutines (runtime.Gosched) every
// pollYield: a few microseconds apart, so the poll reacts within
// nanoseconds but other goroutines still get to run.
const (
	pollClock = 128
	pollYield = 1024
)

// maxChunks bounds the chunks of one round: the chunk counter and count
// share the round state word (16 bits each).
const maxChunks = 1<<16 - 1

// Pool runs data-parallel loops on persistent worker goroutines: Threads()-1
// helpers plus the calling goroutine. No goroutine is started per call.
//
// A round (one Parallel or one phase of MatMul) publishes its chunks in one
// atomic word; idle helpers poll it for a short while (spinWait) before
// parking, so back-to-back rounds need no goroutine wake-ups. The caller
// takes chunks too and waits only for chunks that a helper has claimed: a
// helper that has not woken up yet when the chunks run out is not waited
// for.
//
// Lifetime: NewPool starts the helpers; Close stops them. A Pool that
// becomes unreachable without Close has its helpers stopped by a runtime
// cleanup, but servers should Close pools they are done with.
//
// Concurrency: all methods are safe for concurrent use. Parallel and MatMul
// calls on one Pool are serialized (one runs at a time, the others wait), so
// several goroutines may share a Pool but gain no parallelism from doing so.
// A function passed to Parallel must not call back into the same Pool (it
// would deadlock).
type Pool struct {
	threads int

	mu     sync.Mutex // serializes Parallel, MatMul and Close
	closed bool
	sh     *poolShared
	round  uint32    // the last round published (p.mu)
	stats  PoolStats // p.mu

	mm matmulState // MatMul's arguments and scratch, reused between calls
	mv matvecState // MatVecs's, likewise
	pp panelState  // MatMulQ8Panels's, likewise
}

// CoreLease shares the machine's cores between pools of different
// processes (internal/engine/cores implements it over shared memory). A
// pool with a lease runs each round only on cores the lease gives it: the
// caller takes one at round start (Acquire, which may park it while
// another process has priority), helpers join a round only while the lease
// grants this pool that many cores and it gives them one (TryAcquire), and
// a helper holding one stops claiming chunks when the lease revokes it
// (the caller, which must finish the round, waits for a core again).
// Every method must be safe for concurrent use and cheap (a few atomic
// loads): Revoked runs before every chunk a helper claims.
type CoreLease interface {
	// Acquire returns when the calling thread may run on a core; it may
	// wait, for a bounded time, while other processes have the cores.
	Acquire()
	// Grant returns how many threads the pool may run now, >= 1 (the
	// caller, which holds a core, included).
	Grant() int
	// TryAcquire takes a core for a helper if one is free and the lease
	// allows this pool another; it never waits.
	TryAcquire() bool
	// Revoked reports whether a thread holding a core should give it back
	// before its next chunk: another process of higher priority wants it.
	Revoked() bool
	// Release gives back a core taken by Acquire or TryAcquire.
	Release()
}

// SetCoreLease makes the pool run its rounds only on cores l gives it (nil:
// on all its threads, as without a lease). Set it before the pool is used;
// Threads is then the most threads a round may run on.
func (p *Pool) SetCoreLease(l CoreLease) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sh.lease = l
}

// PoolStats counts a Pool's rounds since NewPool: Rounds is the rounds run
// (each Parallel call and each threaded phase of a MatMul), Serial those
// run on the caller alone (too little work to share), and Wakes the helper
// wake-ups they needed (a helper that was parked, not polling, when its
// round started).
type PoolStats struct {
	Rounds, Serial, Wakes uint64
}

// Stats returns the pool's counters.
func (p *Pool) Stats() PoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// poolShared is the part of a Pool the helper goroutines see. It does not
// point back to the Pool, so an abandoned Pool can be collected and its
// cleanup can stop the helpers.
type poolShared struct {
	// state is the current round: round<<32 | chunks<<16 | next chunk.
	// The caller stores it to start a round; workers claim chunks by
	// compare-and-swap on it, so a worker that claims chunk i of round r
	// knows that fn, n and grain below are round r's: the caller does not
	// change them before every claimed chunk has finished.
	state atomic.Uint64
	// left is the chunks of the current round not yet finished.
	left atomic.Int64

	// The current round's work, written before state is stored.
	fn    func(lo, hi int)
	n     int
	grain int

	helpers []helperSlot

	// lease, when set, decides how many helpers may join a round
	// (allowed) and gives each a core; see CoreLease.
	lease   CoreLease
	allowed atomic.Int32 // helpers slots [0, allowed) may join the current round

	// waiting is set while the caller sleeps on finished for the last
	// claimed chunks (after spinning for them spinWait).
	waiting  atomic.Bool
	finished chan struct{}

	panicMu  sync.Mutex
	panicVal any // first panic raised by fn in this round
	panicked bool

	stopped atomic.Bool
}

// helperSlot is one helper's parking place.
type helperSlot struct {
	parked atomic.Bool   // the helper is (about to be) blocked on wake
	index  int           // the slot's place in poolShared.helpers
	wake   chan struct{} // a value ends a park; closed by stop
	_      [40]byte      // keep slots on separate cache lines
}

// NewPool starts a pool of threads workers (the caller's goroutine counts
// as one). threads <= 0 means runtime.NumCPU(); more than MaxThreads means
// MaxThreads.
func NewPool(threads int) *Pool {
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	threads = min(threads, MaxThreads)
	sh := &poolShared{
		helpers:  make([]helperSlot, threads-1),
		finished: make(chan struct{}, 1),
	}
	for i := range sh.helpers {
		sh.helpers[i].wake = make(chan struct{}, 1)
		sh.helpers[i].index = i
		go sh.helper(&sh.helpers[i])
	}
	p := &Pool{threads: threads, sh: sh}
	p.mm.init()
	p.mv.init()
	p.pp.init()
	runtime.AddCleanup(p, (*poolShared).stop, sh)
	return p
}

// Threads returns the number of workers, the calling goroutine included.
func (p *Pool) Threads() int { return p.threads }

// Close stops the helper goroutines. It waits for a call in flight to
// finish; calling Parallel or MatMul afterwards panics. Close is idempotent.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed {
		p.closed = true
		p.sh.stop()
	}
}

// Parallel calls fn on disjoint contiguous ranges [lo, hi) that together
// cover [0, n), from up to Threads() goroutines at once (the caller's
// included), and returns when all calls have returned. Ranges are cut into
// about 4 per thread and handed out in order as workers free up, so one
// worker may get several. n <= 0 calls nothing. A panic in fn is re-raised
// in the caller after the other ranges finish.
func (p *Pool) Parallel(n int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.checkOpen()
	grain := (n + p.threads*chunksPerThread - 1) / (p.threads * chunksPerThread)
	p.run(n, grain, fn)
}

func (p *Pool) checkOpen() {
	if p.closed {
		invariant.Failf("kernels", "Pool used after Close")
	}
}

// run executes one round: fn over [0, n) in chunks of grain. p.mu is held.
func (p *Pool) run(n, grain int, fn func(lo, hi int)) {
	grain = max(grain, 1)
	chunks := (n + grain - 1) / grain
	if chunks > maxChunks {
		// whole multiples of the grain, so callers' alignment holds
		k := (chunks + maxChunks - 1) / maxChunks
		grain *= k
		chunks = (n + grain - 1) / grain
	}
	s := p.sh
	helpers := min(p.threads, chunks) - 1
	if s.lease != nil {
		s.lease.Acquire()
		defer s.lease.Release()
		if helpers > 0 {
			helpers = min(helpers, s.lease.Grant()-1)
		}
	}
	p.stats.Rounds++
	if helpers <= 0 {
		p.stats.Serial++
		if s.lease == nil || chunks == 1 {
			fn(0, n)
			return
		}
		// With a lease the caller alone still goes chunk by chunk, so it
		// can give its core back mid-round (see work).
		helpers = 0
	}
	s.allowed.Store(int32(helpers))
	s.fn, s.n, s.grain = fn, n, grain
	s.panicked, s.panicVal = false, nil
	s.left.Store(int64(chunks))
	p.round++
	s.state.Store(uint64(p.round)<<32 | uint64(chunks)<<16)
	for i := range helpers {
		h := &s.helpers[i]
		if h.parked.Load() && h.parked.CompareAndSwap(true, false) {
			p.stats.Wakes++
			h.wake <- struct{}{}
		}
	}
	s.work(p.round, nil)
	s.waitFinished()
	s.fn = nil
	if s.panicked {
		v := s.panicVal
		s.panicVal = nil
		panic(v)
	}
}

// waitFinished returns when every chunk of the round has finished: it
// polls for spinWait, then sleeps until the worker that finishes the last
// chunk wakes it.
func (s *poolShared) waitFinished() {
	if s.left.Load() == 0 {
		return
	}
	start := time.Now()
	for i := 1; ; i++ {
		if s.left.Load() == 0 {
			return
		}
		if i%pollClock == 0 {
			if time.Since(start) > spinWait {
				break
			}
			if i%pollYield == 0 {
				runtime.Gosched()
			}
		}
	}
	s.waiting.Store(true)
	if s.left.Load() == 0 {
		if s.waiting.CompareAndSwap(true, false) {
			return
		}
		// the last worker saw waiting and sends
	}
	<-s.finished
}

// work takes chunks of round r until none are left, then returns. It
// never reads the round's fields without having claimed a chunk of it. h
// is the helper's slot (nil: the caller); with a lease, a helper claims
// chunks only while it holds a core (see CoreLease), and the caller gives
// its core back and waits for another when revoked.
func (s *poolShared) work(r uint32, h *helperSlot) {
	holds, ran := false, false
	if h != nil && s.lease != nil {
		defer func() {
			if holds {
				s.lease.Release()
			}
		}()
	}
	for {
		st := s.state.Load()
		if uint32(st>>32) != r {
			return
		}
		chunks, next := st>>16&0xffff, st&0xffff
		if next >= chunks {
			return
		}
		if h == nil && s.lease != nil && ran && s.lease.Revoked() {
			// The caller gives its core back between chunks when the
			// lease revokes it (another process's step outranks this
			// one), and waits for one as at round start: a long round
			// does not hold a core a chunk past the revocation.
			s.lease.Release()
			s.lease.Acquire()
		}
		if h != nil && s.lease != nil {
			if !holds {
				// allowed is read after the round was seen; a later
				// round's value only makes the claim below fail.
				if h.index >= int(s.allowed.Load()) || !s.lease.TryAcquire() {
					return
				}
				holds = true
			} else if s.lease.Revoked() {
				return
			}
		}
		if !s.state.CompareAndSwap(st, st+1) {
			continue
		}
		lo := int(next) * s.grain
		s.call(lo, min(lo+s.grain, s.n))
		ran = true
		if s.left.Add(-1) == 0 && s.waiting.Load() && s.waiting.CompareAndSwap(true, false) {
			s.finished <- struct{}{}
		}
	}
}

// call runs fn on one chunk, recording a panic instead of letting it kill
// the process from a helper goroutine.
func (s *poolShared) call(lo, hi int) {
	defer func() {
		if r := recover(); r != nil {
			s.panicMu.Lock()
			if !s.panicked {
				s.panicked, s.panicVal = true, fmt.Errorf("kernels: panic in Pool worker: %v", r)
			}
			s.panicMu.Unlock()
		}
	}()
	s.fn(lo, hi)
}

// helper is a worker goroutine: it polls for a new round, works on it, and
// parks when no round has come for spinWait, until stop.
func (s *poolShared) helper(h *helperSlot) {
	// Round 0 is the state before the first round. Reading the state here
	// instead could see round 1 already published and skip it.
	seen := uint32(0)
	for {
		r, ok := s.nextRound(h, seen)
		if !ok {
			return
		}
		seen = r
		s.work(r, h)
	}
}

// nextRound waits for a round other than seen and returns it; false when
// the pool is stopped.
func (s *poolShared) nextRound(h *helperSlot, seen uint32) (uint32, bool) {
	start := time.Now()
	for i := 1; ; i++ {
		if r := uint32(s.state.Load() >> 32); r != seen {
			return r, true
		}
		if i%pollClock != 0 {
			continue
		}
		if s.stopped.Load() {
			return 0, false
		}
		if time.Since(start) < spinWait {
			if i%pollYield == 0 {
				runtime.Gosched()
			}
			continue
		}
		// Park. The caller clears parked before sending, so either it
		// sees parked set and wakes us, or we see its round here.
		h.parked.Store(true)
		if r := uint32(s.state.Load() >> 32); r != seen || s.stopped.Load() {
			if !h.parked.CompareAndSwap(true, false) {
				<-h.wake // the caller cleared it and is sending
			}
		} else {
			<-h.wake
		}
		if s.stopped.Load() {
			return 0, false
		}
		start, i = time.Now(), 0
	}
}

// stop ends the helper goroutines (they finish the round they are in).
func (s *poolShared) stop() {
	if !s.stopped.CompareAndSwap(false, true) {
		return
	}
	for i := range s.helpers {
		close(s.helpers[i].wake)
	}
}
