package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"time"

	"tandem/internal/engine/kvcache"
	"tandem/internal/engine/model"
	"tandem/internal/engine/prefixcache"
	"tandem/internal/engine/sample"
)

// Limits on configuration values, so a mistyped flag fails at start-up.
const (
	maxBatchTokensMax = 1 << 16
	maxRunningMax     = 4096
	maxWaitingMax     = 1 << 20
	topLogprobsMax    = 20
	itlTargetMax      = time.Minute
	agingRatioMax     = 1 << 20
	maskBudgetMax     = time.Minute
	requestMaskMax    = time.Hour
	maskWorkersMax    = 256
)

// Engine schedules sequences onto one model runner. See the package doc.
type Engine struct {
	r  *model.Runner
	kv *kvcache.Cache
	// pc is the prefix cache of each layer group (nil when the prefix
	// cache is off or the group has no layers): a hit needs every group's
	// pages of the prefix (see match).
	pc     [kvcache.Groups]*prefixcache.Cache
	active []int // the groups that have layers (groups())
	cfg    Config
	log    *slog.Logger
	// ctxTokens is the longest sequence the engine accepts.
	ctxTokens int
	// gv is the vocabulary index for constrained decoding (constrain.go).
	gv grammarVocab
	// masks computes token masks off the loop (maskpool.go); probes
	// bounds concurrent grammar cost probes (checkGrammarCost).
	masks  *maskPool
	probes chan struct{}
	// states holds the recurrent-state slots of a model with state (nil
	// for the others; state.go); stateBuf is PromptState's scratch.
	states   *statePool
	stateBuf []byte

	mu      sync.Mutex
	waiting []*seq // FIFO; preempted sequences go to the front
	// waitPrefill sums waitTokens over waiting: their prefill work.
	waitPrefill int
	submitted   uint64 // Submit calls that queued a sequence
	fed         uint64 // prefill tokens fed so far: the clock of prefill aging
	resumes     []resume
	unheld      []heldPage // ReleasePage's, for the loop to give back
	closed      bool
	stats       Stats
	wake        chan struct{} // capacity 1: a pending wake-up is never lost
	done        chan struct{} // closed when the loop has exited

	// owned by the loop goroutine
	running    []*seq
	cost       costModel
	evictAt    time.Time   // when publish last walked the prefix caches (evictable)
	lastDecode time.Time   // when the last step that fed every decoding sequence started (DecodePace)
	paceTimer  *time.Timer // DecodePace's wait, reused
	maskTimer  *time.Timer // the wait for a late mask's budget, reused
}

// seq is one request inside the engine.
type seq struct {
	req      Request
	ctx      context.Context
	cancel   context.CancelFunc
	stopWake func() bool
	h        *Handle
	enqueued time.Time
	admitted time.Time // first admission (pages allocated)
	arrival  uint64    // Engine.fed at Submit: the clock of prefill aging
	order    uint64    // submission number: ties in prefill priority

	tokens   []int32 // prompt, then generated tokens
	nPrompt  int
	computed int            // tokens whose K/V are in pages
	pages    kvcache.Tables // page tables per layer group; the seq holds one reference on each page (-1: released)
	slid     int            // window-group slots before this one are released (-1)
	cached   int            // prompt tokens served from the prefix cache
	smp      *sample.Sampler
	con      *constraint // grammar, logit bias, min tokens; nil when the request has none
	promptLP []float32   // prompt logprobs being gathered (PromptLogprobs)
	lpDone   bool        // prompt logprobs delivered
	preempt  int
	queued   bool // in the waiting queue (after preemption)
	// waitTokens is the prefill work s added to Engine.waitPrefill when it
	// was queued (prefillLeft then); subtracted when it leaves the queue.
	waitTokens int
	// importing: admitted with pages for the prompt, waiting for Resume
	// (Request.Import); never scheduled or preempted meanwhile.
	importing bool
	// slot and state: the sequence's recurrent-state slot (state.go) while
	// it is admitted (-1 and nil otherwise, and for models without state);
	// state holds the state after the first computed tokens.
	slot  int
	state []float32
	// stateSent: the prompt's state went to the StateSink.
	stateSent bool
	// snapAt are the positions (page boundaries, ascending) where the
	// prefix cache takes a state snapshot of this sequence; prefill chunks
	// end there (snapshot.go).
	snapAt []int
}

// New starts an engine on r. Zero Config fields take their defaults.
func New(r *model.Runner, cfg Config, log *slog.Logger) (*Engine, error) {
	m := r.Model()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.PageTokens == 0 {
		cfg.PageTokens = 16
	}
	maxLen := m.Config.Context
	if cfg.MaxModelLen != 0 {
		if cfg.MaxModelLen < 1 || cfg.MaxModelLen > m.Config.Context {
			return nil, fmt.Errorf("engine: max model len %d is out of range 1..%d (the model's context length); leave it out to use the model's", cfg.MaxModelLen, m.Config.Context)
		}
		maxLen = cfg.MaxModelLen
	}
	if cfg.KVMemoryBytes < 0 {
		return nil, fmt.Errorf("engine: KV memory budget %d bytes is negative (0: the default, %d bytes)", cfg.KVMemoryBytes, int64(DefaultKVMemoryBytes))
	}
	if cfg.Pages == 0 {
		pages, err := defaultPages(m, cfg, maxLen, log)
		if err != nil {
			return nil, err
		}
		cfg.Pages = pages
	}
	if cfg.MaxBatchTokens == 0 {
		cfg.MaxBatchTokens = 512
	}
	if cfg.MaxRunning == 0 {
		cfg.MaxRunning = 64
	}
	if cfg.MaxWaiting == 0 {
		cfg.MaxWaiting = 256
	}
	if cfg.AgingRatio == 0 {
		cfg.AgingRatio = 4
	}
	if cfg.MinPrefillTokens == 0 {
		cfg.MinPrefillTokens = min(16, cfg.MaxBatchTokens)
	}
	if cfg.MaskBudget == 0 {
		cfg.MaskBudget = 250 * time.Millisecond
	}
	if cfg.RequestMaskBudget == 0 {
		cfg.RequestMaskBudget = max(10*time.Second, cfg.MaskBudget)
	}
	if cfg.MaskWorkers == 0 {
		cfg.MaskWorkers = max(1, runtime.GOMAXPROCS(0)/2)
	}
	switch {
	case cfg.MaxBatchTokens < 1 || cfg.MaxBatchTokens > maxBatchTokensMax:
		return nil, fmt.Errorf("engine: max batch tokens %d is out of range 1..%d", cfg.MaxBatchTokens, maxBatchTokensMax)
	case cfg.MaxRunning < 1 || cfg.MaxRunning > maxRunningMax:
		return nil, fmt.Errorf("engine: max running %d is out of range 1..%d", cfg.MaxRunning, maxRunningMax)
	case cfg.MaxWaiting < 1 || cfg.MaxWaiting > maxWaitingMax:
		return nil, fmt.Errorf("engine: max waiting %d is out of range 1..%d", cfg.MaxWaiting, maxWaitingMax)
	case cfg.ITLTarget < 0 || cfg.ITLTarget > itlTargetMax:
		return nil, fmt.Errorf("engine: ITL target %v is out of range 0..%v (0: off)", cfg.ITLTarget, itlTargetMax)
	case cfg.MinPrefillTokens < 1 || cfg.MinPrefillTokens > cfg.MaxBatchTokens:
		return nil, fmt.Errorf("engine: min prefill tokens %d is out of range 1..%d (max batch tokens)", cfg.MinPrefillTokens, cfg.MaxBatchTokens)
	case cfg.AgingRatio < 1 || cfg.AgingRatio > agingRatioMax:
		return nil, fmt.Errorf("engine: aging ratio %d is out of range 1..%d", cfg.AgingRatio, agingRatioMax)
	case cfg.MaskBudget < 0 || cfg.MaskBudget > maskBudgetMax:
		return nil, fmt.Errorf("engine: mask budget %v is out of range 0..%v (0: the default)", cfg.MaskBudget, maskBudgetMax)
	case cfg.RequestMaskBudget < cfg.MaskBudget || cfg.RequestMaskBudget > requestMaskMax:
		return nil, fmt.Errorf("engine: request mask budget %v is out of range %v (the mask budget)..%v", cfg.RequestMaskBudget, cfg.MaskBudget, requestMaskMax)
	case cfg.MaskWorkers < 1 || cfg.MaskWorkers > maskWorkersMax:
		return nil, fmt.Errorf("engine: mask workers %d is out of range 1..%d", cfg.MaskWorkers, maskWorkersMax)
	case cfg.Pages < 2:
		return nil, fmt.Errorf("engine: the KV cache needs at least 2 pages, got %d", cfg.Pages)
	case cfg.StateSlots < 0 || cfg.StateSlots > maxRunningMax:
		return nil, fmt.Errorf("engine: state slots %d is out of range 0..%d (0: max running)", cfg.StateSlots, maxRunningMax)
	case cfg.StateSnapshots < 0 || cfg.StateSnapshots > maxRunningMax:
		return nil, fmt.Errorf("engine: state snapshots %d is out of range 0..%d (0: as many as state slots)", cfg.StateSnapshots, maxRunningMax)
	}
	if m.StateSize() > 0 {
		if cfg.StateSlots == 0 {
			cfg.StateSlots = cfg.MaxRunning
		}
		if cfg.StateSnapshots == 0 {
			cfg.StateSnapshots = min(cfg.StateSlots, max(1, int(DefaultSnapshotMemoryBytes/(4*int64(m.StateSize())))))
		}
	} else {
		cfg.StateSlots, cfg.StateSnapshots = 0, 0
	}
	kc := m.GroupedCacheConfig(cfg.PageTokens, cfg.Pages, 0, cfg.KVType)
	if kc.Window > 0 {
		// enough for every running sequence's window and one full step
		if cfg.WindowPages == 0 {
			cfg.WindowPages = cfg.MaxRunning*(kc.WindowPagesMax()+1) + kc.PagesFor(cfg.MaxBatchTokens)
		}
		if least := kc.WindowPagesMax() + kc.PagesFor(cfg.MaxBatchTokens) + 1; cfg.WindowPages < least {
			return nil, fmt.Errorf("engine: the sliding-window KV pool needs at least %d pages (a %d-token window and a %d-token step), got %d",
				least, kc.Window, cfg.MaxBatchTokens, cfg.WindowPages)
		}
		kc.WindowPages = cfg.WindowPages
	} else {
		cfg.WindowPages = 0
	}
	var mem []byte
	if cfg.KVMemory != nil {
		var err error
		if mem, err = cfg.KVMemory(kc.Bytes()); err != nil {
			return nil, fmt.Errorf("engine: KV cache memory: %w", err)
		}
	}
	kv, err := kvcache.NewIn(kc, mem)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	ctx := min(maxLen, (cfg.Pages-1)*cfg.PageTokens)
	if kc.GroupLayers(kvcache.GroupGlobal) == 0 {
		ctx = maxLen // no pool grows with the context
	}
	e := &Engine{r: r, kv: kv, cfg: cfg, log: log, ctxTokens: ctx, active: activeGroups(kc),
		wake: make(chan struct{}, 1), done: make(chan struct{}), probes: make(chan struct{}, cfg.MaskWorkers)}
	e.masks = newMaskPool(cfg.MaskWorkers, e.wakeup)
	if cfg.hooks != nil {
		e.masks.hook = cfg.hooks.mask
	}
	if cfg.PrefixCache {
		for _, g := range e.active {
			e.pc[g] = prefixcache.New(kv.Pool(g), cfg.PageTokens, 0)
		}
	}
	if n := m.StateSize(); n > 0 {
		e.states = newStatePool(cfg.StateSlots, n)
		if pc := e.pc[e.active[0]]; pc != nil {
			pc.KeepStates(n, cfg.StateSnapshots)
		}
		e.stats.StateSlotsTot = cfg.StateSlots
		e.stats.StateSlotBytes = 4 * int64(n)
		log.Info("recurrent state slots", "slots", cfg.StateSlots, "bytes_per_slot", 4*n, "snapshots", cfg.StateSnapshots, "layout", m.StateLayout())
	}
	e.stats.PagesTot = kc.Pages + kc.WindowPages
	e.stats.WindowPagesTot = kc.WindowPages
	e.stats.KVBytesTot = e.kvBytes(kc.Pages, kc.WindowPages)
	go e.loop()
	return e, nil
}

// Model returns the engine's model.
func (e *Engine) Model() *model.Model { return e.r.Model() }

// Config returns the engine's configuration with defaults filled in.
func (e *Engine) Config() Config { return e.cfg }

// MaxContext returns the longest sequence (prompt plus generated tokens) the
// engine accepts.
func (e *Engine) MaxContext() int { return e.ctxTokens }

// KVCache returns the engine's KV cache. Its Config never changes, so any
// goroutine may read it (a PD worker sizes its transfers by it). While the
// engine runs, the cache's state (pools, reference counts, page tables) is
// the step loop's alone, and so are page bytes, with two exceptions that
// the engine hands out itself: a KVSink reads its sequence's pages during
// LayerComputed (and, holding references, until it gives them back with
// ReleasePage), and an Import's owner writes the pages Allocated gave it,
// from any goroutine, until Handle.Resume.
func (e *Engine) KVCache() *kvcache.Cache { return e.kv }

func (e *Engine) wakeup() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// Submit queues a request. The sequence ends when its context is done, when
// the Handle is cancelled, or when generation finishes; in every case its
// final Update says why and its pages are freed.
func (e *Engine) Submit(ctx context.Context, req Request) (*Handle, error) {
	if err := e.check(&req); err != nil {
		return nil, err
	}
	con, err := e.newConstraint(ctx, &req)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	s := &seq{req: req, ctx: sctx, cancel: cancel, enqueued: time.Now(),
		tokens: slices.Clone(req.Prompt), nPrompt: len(req.Prompt), smp: sample.New(req.Sample), con: con, queued: true, slot: -1}
	s.h = &Handle{notify: make(chan struct{}, 1), cancel: cancel, e: e, s: s}
	// Set before s is queued: the loop may finish s (and call stopWake) at
	// once. On the error paths below cancel runs it, a harmless wake-up.
	s.stopWake = context.AfterFunc(sctx, e.wakeup)
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		cancel()
		return nil, ErrClosed
	}
	if len(e.waiting) >= e.cfg.MaxWaiting {
		e.mu.Unlock()
		cancel()
		return nil, fmt.Errorf("%w (%d requests waiting); retry later", ErrQueueFull, e.cfg.MaxWaiting)
	}
	s.arrival, s.order = e.fed, e.submitted
	e.submitted++
	e.enqueueLocked(s, false)
	e.stats.Waiting = len(e.waiting)
	e.mu.Unlock()
	e.wakeup()
	return s.h, nil
}

func (e *Engine) check(req *Request) error {
	vocab := e.r.Model().Config.Vocab
	switch {
	case len(req.Prompt) == 0:
		return fmt.Errorf("%w: the prompt is empty", ErrBadRequest)
	case req.MaxTokens < 1:
		return fmt.Errorf("%w: max tokens must be at least 1, got %d", ErrBadRequest, req.MaxTokens)
	case req.TopLogprobs < 0 || req.TopLogprobs > topLogprobsMax:
		return fmt.Errorf("%w: top logprobs must be in 0..%d, got %d", ErrBadRequest, topLogprobsMax, req.TopLogprobs)
	case req.Import != nil && (req.KVSink != nil || req.PromptLogprobs):
		return fmt.Errorf("%w: an imported prompt cannot also export K/V or report prompt logprobs", ErrBadRequest)
	case req.Import != nil && req.Import.Allocated == nil:
		return fmt.Errorf("%w: Import.Allocated is nil", ErrBadRequest)
	case req.KVSink != nil && e.states != nil && !isStateSink(req.KVSink):
		return fmt.Errorf("%w: the model keeps recurrent state, which pages do not carry: the KVSink must also be a StateSink", ErrBadRequest)
	case len(req.Prompt)+req.MaxTokens > e.ctxTokens:
		return fmt.Errorf("%w: %d prompt tokens + %d max tokens exceed the maximum context length of %d tokens",
			ErrTooLong, len(req.Prompt), req.MaxTokens, e.ctxTokens)
	}
	for _, t := range req.Prompt {
		if t < 0 || int(t) >= vocab {
			return fmt.Errorf("%w: token id %d is out of range 0..%d", ErrBadRequest, t, vocab-1)
		}
	}
	if err := req.Sample.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	return e.checkConstraint(req)
}

// Stats returns a snapshot of the engine's queues and counters.
func (e *Engine) Stats() Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.stats
	s.PrefillQueueTokens += e.waitPrefill
	if len(e.waiting) > 0 {
		s.OldestWaiting = time.Since(e.waiting[0].enqueued)
	}
	return s
}

// Close fails every queued and running sequence with ErrClosed, frees their
// pages and stops the step loop. It waits for the loop to exit.
func (e *Engine) Close() {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	e.wakeup()
	<-e.done
}

// Handle is the caller's side of one sequence. Its methods are safe for
// concurrent use.
type Handle struct {
	mu        sync.Mutex
	pending   Update
	has       bool // pending holds something to deliver
	finished  bool // the final update has been queued
	delivered bool // the final update has been returned by Next
	notify    chan struct{}
	cancel    context.CancelFunc
	e         *Engine
	s         *seq
}

// resume is a Handle.Resume waiting for the step loop.
type resume struct {
	s     *seq
	tok   Token
	state []byte // ResumeState's copy of the prompt's state (nil: none)
}

// ErrNotImporting is returned by Resume for a sequence that was not
// submitted with Request.Import, or was resumed already.
var ErrNotImporting = errors.New("engine: sequence is not waiting for imported K/V")

// Resume tells the engine that the prompt's K/V has been written into the
// pages given to Import.Allocated, and that first is the first generated
// token (computed elsewhere). The sequence then decodes from there; first
// is delivered through Next like any generated token. On a model with
// recurrent state it fails with ErrStateRequired: use ResumeState.
func (h *Handle) Resume(first Token) error {
	if h.s.req.Import == nil {
		return ErrNotImporting
	}
	if h.e.states != nil {
		return ErrStateRequired
	}
	return h.resume(first, nil)
}

// ResumeState is Resume for a model with recurrent state: state is the
// sequence's state after the whole prompt, as the prefill side's
// StateSink.PromptState got it (Model.StateSize() little-endian float32s).
// ResumeState copies it before returning; the step loop puts it into the
// sequence's state slot before the sequence is scheduled. A state of
// another length fails with ErrBadRequest (the sequence keeps waiting: the
// caller cancels it). On a model without state, an empty state makes it
// Resume.
func (h *Handle) ResumeState(first Token, state []byte) error {
	if h.s.req.Import == nil {
		return ErrNotImporting
	}
	if err := h.e.checkState(state); err != nil {
		return err
	}
	if len(state) == 0 {
		return h.resume(first, nil)
	}
	return h.resume(first, slices.Clone(state))
}

func (h *Handle) resume(first Token, state []byte) error {
	h.e.mu.Lock()
	h.e.resumes = append(h.e.resumes, resume{h.s, first, state})
	h.e.mu.Unlock()
	h.e.wakeup()
	return nil
}

// Cancel ends the sequence; its final Update has Finish == FinishCancelled
// unless it had already finished.
func (h *Handle) Cancel() { h.cancel() }

// Next blocks until the sequence has new tokens or has ended, and returns
// everything since the previous call. After the Update with Done it returns
// io.EOF. A done ctx returns ctx.Err() without ending the sequence.
func (h *Handle) Next(ctx context.Context) (Update, error) {
	for {
		h.mu.Lock()
		if h.delivered {
			h.mu.Unlock()
			return Update{}, io.EOF
		}
		if h.has {
			u := h.pending
			h.pending = Update{}
			h.has = false
			if u.Done {
				h.delivered = true
			}
			h.mu.Unlock()
			return u, nil
		}
		h.mu.Unlock()
		select {
		case <-h.notify:
		case <-ctx.Done():
			return Update{}, ctx.Err()
		}
	}
}

// push merges u into the pending update and wakes Next.
func (h *Handle) push(u Update) {
	h.mu.Lock()
	if h.finished {
		h.mu.Unlock()
		return
	}
	p := &h.pending
	p.Tokens = append(p.Tokens, u.Tokens...)
	if u.PromptLogprobs != nil {
		p.PromptLogprobs = u.PromptLogprobs
	}
	p.PromptTokens, p.CachedTokens, p.Preempted = u.PromptTokens, u.CachedTokens, u.Preempted
	if u.QueueTime != 0 {
		p.QueueTime = u.QueueTime
	}
	if u.Done {
		p.Done, p.Finish, p.Err = true, u.Finish, u.Err
		h.finished = true
	}
	h.has = true
	h.mu.Unlock()
	select {
	case h.notify <- struct{}{}:
	default:
	}
}
