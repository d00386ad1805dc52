package kernels

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"tandem/internal/invariant"
)

// MaxThreads is the most worker goroutines a Pool runs; NewPool clamps
// larger requests to it.
const MaxThreads = 256

// chunksPerThread is how many chunks Parallel cuts per thread, so a thread
// that is slowed down (the machine's cores are shared) leaves its remaining
// chunks to the others.
const chunksPerThread = 4

// Pool runs data-parallel loops on persistent worker goroutines: Threads()-1
// helpers plus the calling goroutine. No goroutine is started per call.
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

	mm matmulState // MatMul's arguments and scratch, reused between calls
}

// poolShared is the part of a Pool the helper goroutines see. It does not
// point back to the Pool, so an abandoned Pool can be collected and its
// cleanup can stop the helpers.
type poolShared struct {
	wake []chan struct{} // one per helper; a value starts a round, close stops it
	done chan struct{}   // each woken helper sends once per round

	// The current round, written before the wake-up sends.
	fn    func(lo, hi int)
	n     int
	grain int
	next  atomic.Int64

	panicMu  sync.Mutex
	panicVal any // first panic raised by fn in this round
	panicked bool

	stopped atomic.Bool
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
		wake: make([]chan struct{}, threads-1),
		done: make(chan struct{}, threads),
	}
	for i := range sh.wake {
		sh.wake[i] = make(chan struct{}, 1)
		go sh.helper(sh.wake[i])
	}
	p := &Pool{threads: threads, sh: sh}
	p.mm.init()
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
	helpers := min(p.threads, chunks) - 1
	if helpers <= 0 {
		fn(0, n)
		return
	}
	s := p.sh
	s.fn, s.n, s.grain = fn, n, grain
	s.next.Store(0)
	s.panicked, s.panicVal = false, nil
	for i := 0; i < helpers; i++ {
		s.wake[i] <- struct{}{}
	}
	s.drainSafe()
	for i := 0; i < helpers; i++ {
		<-s.done
	}
	s.fn = nil
	if s.panicked {
		v := s.panicVal
		s.panicVal = nil
		panic(v)
	}
}

// helper is a worker goroutine: one drain per wake-up until wake closes.
func (s *poolShared) helper(wake chan struct{}) {
	for range wake {
		s.drainSafe()
		s.done <- struct{}{}
	}
}

// drainSafe takes chunks until none are left, recording a panic of fn
// instead of letting it kill the process from a helper goroutine.
func (s *poolShared) drainSafe() {
	defer func() {
		if r := recover(); r != nil {
			s.panicMu.Lock()
			if !s.panicked {
				s.panicked, s.panicVal = true, fmt.Errorf("kernels: panic in Pool worker: %v", r)
			}
			s.panicMu.Unlock()
		}
	}()
	for {
		hi := int(s.next.Add(int64(s.grain)))
		lo := hi - s.grain
		if lo >= s.n {
			return
		}
		s.fn(lo, min(hi, s.n))
	}
}

// stop ends the helper goroutines (they finish the round they are in).
func (s *poolShared) stop() {
	if !s.stopped.CompareAndSwap(false, true) {
		return
	}
	for _, w := range s.wake {
		close(w)
	}
}
