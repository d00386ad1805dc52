package engine

import (
	"sync"
	"time"

	"tandem/internal/engine/grammar"
)

// Token masks off the step's critical path.
//
// A constrained sequence's mask for its next token depends only on the
// tokens it has, so it is computed as soon as the previous token is
// accepted (or, for the first token, when the sequence is admitted or its
// import resumed): taken from the grammar's cache on the spot when it is
// there (a bounded lookup and a copy), else by a pool of mask workers,
// while the step loop goes on:
// the mask runs beside the forward pass that computes the logits it will
// be applied to. When the step's logits come and the mask is ready, the
// sequence samples as before. When it is not, the loop does not wait: it
// keeps the logits (Config.MaskBudget caps how long) and the sequence sits
// out the following steps (it has no token to feed) until its mask is
// ready, then samples from the kept logits; every other sequence steps on.
// A mask that runs past its budget (MaskBudget each, RequestMaskBudget for
// all of a sequence's masks) ends the sequence with FinishGrammarBudget.
//
// Accepting the sampled token stays on the loop (the finish reason depends
// on whether the document is complete): it steps the same readings along
// one token's bytes that the mask, which finished within its budget, walked
// along every token's, so it costs a small part of that mask.
//
// Each sequence has at most one mask job. The job's fields are handed
// between the loop and a worker through job (an atomic): the loop writes
// left and dispatches (queue mutex); the worker owns the matcher, mask,
// took and err until it stores maskReady or maskFailed; the loop touches
// them again only after it has seen that. Interrupt (from finish) is the
// one call that crosses while the worker runs.

// Mask job states (constraint.job).
const (
	maskIdle    int32 = iota // no mask for the matcher's state
	maskQueued               // dispatched, waiting for a worker
	maskRunning              // a worker computes it
	maskReady                // c.mask holds it
	maskFailed               // c.err says why
)

// maskGrace is how far past its budget a running mask may go before the
// loop ends the sequence without waiting for the worker to notice (the
// worker looks at its deadline every few hundred units of work).
const maskGrace = 50 * time.Millisecond

// maskPool runs mask jobs on a fixed set of goroutines, oldest first.
type maskPool struct {
	mu      sync.Mutex
	cond    sync.Cond
	queue   []*constraint
	head    int
	closed  bool
	started bool
	workers int
	wg      sync.WaitGroup
	done    func()              // called as each job starts and ends (the loop's wake-up)
	hook    func(id, at string) // tests: called with the request ID before ("start") and after ("end") each job
}

func newMaskPool(workers int, done func()) *maskPool {
	p := &maskPool{workers: workers, done: done}
	p.cond.L = &p.mu
	return p
}

// submit queues c's mask; the workers start on the first call.
func (p *maskPool) submit(c *constraint) {
	p.mu.Lock()
	if !p.started {
		p.started = true
		for range p.workers {
			p.wg.Go(p.work)
		}
	}
	if p.head > 0 && p.head >= len(p.queue)/2 { // reuse the consumed front
		n := copy(p.queue, p.queue[p.head:])
		clear(p.queue[n:])
		p.queue, p.head = p.queue[:n], 0
	}
	p.queue = append(p.queue, c)
	p.mu.Unlock()
	p.cond.Signal()
}

// stop ends the workers once the queue is drained (the engine has
// interrupted the jobs of every sequence it ended) and waits for them.
func (p *maskPool) stop() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cond.Broadcast()
	p.wg.Wait()
}

func (p *maskPool) work() {
	for {
		p.mu.Lock()
		for p.head == len(p.queue) && !p.closed {
			p.cond.Wait()
		}
		if p.head == len(p.queue) {
			p.mu.Unlock()
			return
		}
		c := p.queue[p.head]
		p.queue[p.head] = nil
		p.head++
		p.mu.Unlock()
		c.compute(p.hook, p.done)
		p.done()
	}
}

// compute is a worker's side of c's job: the mask within the budget the
// loop gave it. started is called once the job counts as running, so that
// a loop waiting for the mask learns its deadline.
func (c *constraint) compute(hook func(id, at string), started func()) {
	start := time.Now()
	c.started.Store(start.UnixNano())
	c.job.Store(maskRunning)
	started()
	if hook != nil {
		hook(c.id, "start")
	}
	_, err := c.m.MaskWithin(c.mask, grammar.Limit{Deadline: start.Add(c.left)})
	c.took = time.Since(start)
	if hook != nil {
		hook(c.id, "end")
	}
	if err != nil {
		c.err = err
		c.job.Store(maskFailed)
		return
	}
	c.job.Store(maskReady)
}
