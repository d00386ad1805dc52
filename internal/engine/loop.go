package engine

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"tandem/internal/engine/kvcache"
	"tandem/internal/engine/model"
	"tandem/internal/engine/sample"
	"tandem/internal/invariant"
)

// step is one sequence's share of a forward step.
type step struct {
	s    *seq
	take int // tokens fed this step
}

// loop is the engine's only goroutine. It exits when Close is called.
func (e *Engine) loop() {
	defer close(e.done)
	for {
		if e.isClosed() {
			e.shutdown()
			e.masks.stop()
			return
		}
		e.reapCancelled()
		e.applyResumes()
		e.applyUnheld()
		e.applyMasks()
		wait := e.decodeWait()
		steps, fedAll := e.schedule(wait <= 0)
		if len(steps) == 0 {
			if !fedAll && wait > 0 { // decoding sequences wait out the pace
				e.pace(wait)
				continue
			}
			e.publish()
			e.idle()
			continue
		}
		e.observeStep(steps, fedAll)
		e.publish()
	}
}

// decodeWait returns how long the decoding sequences' next token waits
// under Config.DecodePace: the pace less the time since the last step in
// which every decoding sequence got its token (0: due now; always 0
// without a pace). Until then steps carry only prompt work (a submission,
// a prompt's next chunk), so a new prompt is prefilled at once and costs
// only its own tokens, while the decoding sequences still get a token
// every pace however many prompts come.
func (e *Engine) decodeWait() time.Duration {
	if e.cfg.DecodePace == nil || e.lastDecode.IsZero() {
		return 0
	}
	return e.cfg.DecodePace() - time.Since(e.lastDecode)
}

// pace waits d, or less when a wake-up comes (a submission, a resume, a
// cancellation, Close): the loop then looks again.
func (e *Engine) pace(d time.Duration) {
	if e.paceTimer == nil {
		e.paceTimer = time.NewTimer(d)
	} else {
		e.paceTimer.Reset(d)
	}
	start := time.Now()
	select {
	case <-e.wake:
	case <-e.paceTimer.C:
	}
	e.paceTimer.Stop()
	waited := time.Since(start)
	e.mu.Lock()
	e.stats.PacedWait += waited
	e.mu.Unlock()
}

// idle waits for a wake-up (a submission, a resume, a cancellation, a
// finished mask, Close), and no longer than until the earliest time a
// running late mask is past its budget, so that its sequence ends then.
func (e *Engine) idle() {
	var due time.Time
	for _, s := range e.running {
		if c := s.con; c != nil && c.holding && c.job.Load() == maskRunning {
			if at := c.started.Load(); at != 0 {
				if t := time.Unix(0, at).Add(c.left + maskGrace); due.IsZero() || t.Before(due) {
					due = t
				}
			}
		}
	}
	if due.IsZero() {
		<-e.wake
		return
	}
	d := max(time.Until(due), time.Millisecond)
	if e.maskTimer == nil {
		e.maskTimer = time.NewTimer(d)
	} else {
		e.maskTimer.Reset(d)
	}
	select {
	case <-e.wake:
	case <-e.maskTimer.C:
	}
	e.maskTimer.Stop()
}

// applyMasks samples the sequences that were waiting for a late mask and
// now have it (from the logits they kept), and ends those whose mask ran
// past its budget.
func (e *Engine) applyMasks() {
	var ended []*seq
	now := time.Now()
	for _, s := range e.running {
		c := s.con
		if c == nil || !c.holding {
			continue
		}
		switch st, err := e.maskState(s, now); st {
		case maskReady:
			c.holding = false
			if e.sampleNext(s, c.held) {
				ended = append(ended, s)
			}
		case maskFailed:
			c.holding = false
			e.endForMask(s, err)
			ended = append(ended, s)
		}
	}
	if len(ended) > 0 {
		e.running = slices.DeleteFunc(e.running, func(s *seq) bool { return slices.Contains(ended, s) })
	}
}

func (e *Engine) isClosed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}

// shutdown ends every sequence with ErrClosed.
func (e *Engine) shutdown() {
	e.mu.Lock()
	waiting := e.waiting
	e.waiting = nil
	e.waitPrefill = 0
	e.mu.Unlock()
	for _, s := range append(e.running, waiting...) {
		e.finish(s, FinishError, ErrClosed)
	}
	e.running = nil
	for _, pc := range e.pc {
		if pc != nil {
			pc.Reset()
		}
	}
	e.publish()
}

// reapCancelled ends sequences whose context is done, running or waiting.
func (e *Engine) reapCancelled() {
	e.running = slices.DeleteFunc(e.running, func(s *seq) bool {
		if s.ctx.Err() != nil {
			e.finish(s, FinishCancelled, s.ctx.Err())
			return true
		}
		return false
	})
	var gone []*seq
	e.mu.Lock()
	e.waiting = slices.DeleteFunc(e.waiting, func(s *seq) bool {
		if s.ctx.Err() != nil {
			gone = append(gone, s)
			e.waitPrefill -= s.waitTokens
			return true
		}
		return false
	})
	e.mu.Unlock()
	for _, s := range gone {
		e.finish(s, FinishCancelled, s.ctx.Err())
	}
}

// ensurePages grows s's page tables to hold n positions, first releasing
// its window-group pages that fell out of the window, then evicting from
// the prefix caches and preempting the newest running sequences that are
// not in this step. It reports false when s itself had to be preempted.
func (e *Engine) ensurePages(s *seq, n int, inStep map[*seq]bool) bool {
	e.slide(s)
	kc := e.kv.Config()
	for _, g := range e.groups() {
		pool := e.kv.Pool(g)
		for need := kc.PagesFor(n) - len(s.pages[g]); need > 0; need = kc.PagesFor(n) - len(s.pages[g]) {
			if p, err := pool.Alloc(need); err == nil {
				s.pages[g] = append(s.pages[g], p...)
				break
			}
			short := need - pool.FreeCount()
			if e.pc[g] != nil && e.pc[g].Evict(short) > 0 {
				continue
			}
			victim := s
			for i := len(e.running) - 1; i >= 0; i-- {
				if v := e.running[i]; v != s && !inStep[v] && !v.importing {
					victim = v
					break
				}
			}
			e.preempt(victim)
			if victim == s {
				return false
			}
		}
	}
	return true
}

// preempt releases s's pages and queues it at the front to be recomputed.
func (e *Engine) preempt(s *seq) {
	e.release(s)
	if s.con != nil {
		s.con.holding = false // recompute brings the logits again
	}
	s.computed = 0
	s.preempt++
	s.queued = true
	e.running = slices.DeleteFunc(e.running, func(v *seq) bool { return v == s })
	e.mu.Lock()
	e.enqueueLocked(s, true)
	e.stats.Preemptions++
	e.mu.Unlock()
	e.log.Warn("preempted sequence for recompute: KV cache is full", "request", s.req.ID, "tokens", len(s.tokens), "times", s.preempt)
}

// admit moves s from the queue into the running set when its pages fit
// with one page of reserve per running sequence in every layer group, and
// reports whether it did.
func (e *Engine) admit(s *seq) bool {
	pt := e.kv.Config().PageTokens
	if !e.takeSlot(s) {
		return false // every state slot is held: wait for one
	}
	var matched kvcache.Tables
	blocks, shared := 0, 0
	if !s.req.PromptLogprobs && s.req.Import == nil {
		matched, blocks, shared = e.match(s)
	}
	p := e.plan(s, matched, blocks)
	for _, g := range e.groups() {
		avail := e.kv.Pool(g).FreeCount()
		if e.pc[g] != nil {
			avail += e.pc[g].Evictable()
		}
		if avail-p.need[g] < len(e.running) {
			e.releaseTables(s.req.ID, matched)
			e.dropSlot(s)
			return false
		}
	}
	var tabs kvcache.Tables
	for _, g := range e.groups() {
		pool := e.kv.Pool(g)
		for pool.FreeCount() < p.need[g] && e.pc[g] != nil && e.pc[g].Evict(p.need[g]-pool.FreeCount()) > 0 {
		}
		pages, err := pool.Alloc(p.need[g])
		if err != nil {
			e.releaseTables(s.req.ID, matched)
			e.releaseTables(s.req.ID, tabs)
			e.dropSlot(s)
			return false
		}
		tabs[g] = pages
	}
	for _, g := range e.groups() {
		s.pages[g] = extend(matched[g], p.end[g], tabs[g])
	}
	s.computed = blocks * pt
	if blocks == 0 && s.state != nil {
		clear(s.state) // match may have copied a snapshot it then gave up
	}
	s.snapAt = e.snapPoints(s, shared)
	e.countSnapshotHit(s, blocks, shared)
	s.slid = 0
	if importsKV(s) {
		s.slid = e.kv.Config().FirstNeeded(kvcache.GroupWindow, len(s.tokens))
	} else if blocks > 0 {
		s.slid = e.kv.Config().FirstNeeded(kvcache.GroupWindow, s.computed)
	}
	first := s.preempt == 0
	if first {
		s.cached = s.computed
		s.admitted = time.Now()
	}
	s.queued = false
	e.mu.Lock()
	e.waiting = slices.DeleteFunc(e.waiting, func(v *seq) bool { return v == s })
	e.waitPrefill -= s.waitTokens
	if first {
		e.stats.PrefixHitTokens += uint64(s.cached)
		e.stats.PromptTokens += uint64(s.nPrompt)
	}
	e.mu.Unlock()
	e.running = append(e.running, s)
	if s.req.Import != nil && first {
		s.importing = true
		var t kvcache.Tables
		for g, tab := range s.pages {
			t[g] = slices.Clone(tab)
		}
		s.req.Import.Allocated(e.kv, t)
	}
	if !s.importing {
		// The first token's mask, beside the prompt's forward passes (an
		// import's comes after its first token, in applyResumes).
		e.dispatchMask(s)
	}
	return true
}

// run executes one forward step and hands out its results.
func (e *Engine) run(steps []step) {
	batch := make([]model.Seq, len(steps))
	for i, st := range steps {
		s := st.s
		batch[i] = model.Seq{Tokens: s.tokens[s.computed : s.computed+st.take], Pos: s.computed,
			Pages: s.pages[kvcache.GroupGlobal], WinPages: s.pages[kvcache.GroupWindow], State: s.state,
			AllLogits: s.req.PromptLogprobs && !s.lpDone && s.computed < s.nPrompt}
	}
	e.r.SetLayerHook(e.sinkHook(steps))
	out, err := e.r.Forward(e.kv, batch)
	e.r.SetLayerHook(nil)
	e.mu.Lock()
	e.stats.Steps++
	e.mu.Unlock()
	if err != nil {
		e.log.Error("forward step failed", "err", err, "sequences", len(steps))
		for _, st := range steps {
			e.finish(st.s, FinishError, fmt.Errorf("engine: forward step: %w", err))
		}
		e.running = slices.DeleteFunc(e.running, func(s *seq) bool { return s.h.finishedFlag() })
		return
	}
	vocab := e.r.Model().Config.Vocab
	var ended []*seq
	for i, st := range steps {
		s := st.s
		logits := out[i]
		if batch[i].AllLogits {
			e.gatherPromptLogprobs(s, logits, st.take, vocab)
			logits = logits[(st.take-1)*vocab:]
		}
		s.computed += st.take
		e.slide(s)
		if len(s.snapAt) > 0 && s.computed == s.snapAt[0] {
			e.takeSnapshot(s)
			s.snapAt = s.snapAt[1:]
		}
		e.sendPromptState(s) // before sampling, which may end s
		if s.computed < len(s.tokens) {
			continue // more prompt to go
		}
		if s.computed >= s.nPrompt && s.preempt == 0 && len(s.tokens) == s.nPrompt {
			e.cachePrefix(s)
		}
		if e.sampleNext(s, logits) {
			ended = append(ended, s)
		}
	}
	if len(ended) > 0 {
		e.running = slices.DeleteFunc(e.running, func(s *seq) bool { return slices.Contains(ended, s) })
	}
}

// sinkHook returns the layer hook that feeds this step's K/V sinks, or nil
// when no sequence in the step exports its prompt.
func (e *Engine) sinkHook(steps []step) func(layer int) {
	var sinks []step
	for _, st := range steps {
		if st.s.req.KVSink != nil && st.s.computed < st.s.nPrompt {
			sinks = append(sinks, st)
		}
	}
	if len(sinks) == 0 {
		return nil
	}
	return func(layer int) {
		for _, st := range sinks {
			s := st.s
			done := s.computed + st.take
			s.req.KVSink.LayerComputed(e.kv, s.pages.Layer(e.kv, layer), layer, done, done == s.nPrompt)
		}
	}
}

// gatherPromptLogprobs records log p(prompt[i+1] | prompt[:i+1]) from the
// chunk's logits rows.
func (e *Engine) gatherPromptLogprobs(s *seq, logits []float32, take, vocab int) {
	if s.computed == 0 {
		s.promptLP = append(make([]float32, 0, s.nPrompt), 0)
	}
	for j := range take {
		next := s.computed + j + 1
		if next >= s.nPrompt {
			break
		}
		s.promptLP = append(s.promptLP, sample.LogSoftmax(logits[j*vocab:(j+1)*vocab], s.tokens[next]))
	}
}

// sampleNext picks the next token from logits, delivers it and reports
// whether the sequence ended (in which case it has been finished). A
// constrained sequence whose mask is not ready keeps the logits and waits
// (see maskpool.go): it is not ended, and applyMasks samples it later.
func (e *Engine) sampleNext(s *seq, logits []float32) bool {
	var id int32
	var lp float32
	if s.con == nil {
		id, lp = s.smp.Sample(logits, s.tokens)
	} else {
		if s.con.m != nil {
			switch st, err := e.maskState(s, time.Now()); st {
			case maskReady:
			case maskFailed:
				e.endForMask(s, err)
				return true
			default:
				e.holdLogits(s, logits)
				return false
			}
		}
		id, lp = s.con.sample(s.smp, logits, s)
		if s.con.m != nil {
			s.con.maskDone()
		}
		if id < 0 {
			e.finish(s, FinishError, fmt.Errorf("%w: no token is allowed next (the vocabulary cannot spell what the grammar needs)", ErrConstraint))
			return true
		}
	}
	tok := Token{ID: id, Logprob: lp}
	if s.req.TopLogprobs > 0 {
		tok.Top = sample.TopLogprobs(logits, s.req.TopLogprobs)
	}
	return e.accept(s, tok)
}

// holdLogits keeps the step's logits of s, whose mask is late.
func (e *Engine) holdLogits(s *seq, logits []float32) {
	c := s.con
	if len(c.held) != len(logits) {
		c.held = make([]float32, len(logits)) // once per sequence that ever waits
	}
	copy(c.held, logits)
	c.holding = true
	e.mu.Lock()
	e.stats.MaskWaits++
	e.mu.Unlock()
}

// endForMask ends s, whose mask failed: for its budget
// (FinishGrammarBudget) or another error.
func (e *Engine) endForMask(s *seq, err error) {
	if errors.Is(err, ErrGrammarTooCostly) {
		e.log.Warn("constrained sequence ended: its grammar's masks are over budget", "request", s.req.ID, "err", err)
		e.mu.Lock()
		e.stats.GrammarBudgetEnds++
		e.mu.Unlock()
		e.finish(s, FinishGrammarBudget, err)
		return
	}
	e.finish(s, FinishError, fmt.Errorf("%w: %w", ErrConstraint, err))
}

// accept appends a generated token, delivers it and reports whether the
// sequence ended (in which case it has been finished). A constrained
// sequence that goes on gets its next mask started.
func (e *Engine) accept(s *seq, tok Token) bool {
	id := tok.ID
	complete, err := s.con.advance(id)
	if err != nil {
		e.log.Warn("constrained sequence got a token its grammar rejects", "request", s.req.ID, "err", err)
		e.finish(s, FinishError, err)
		return true
	}
	s.tokens = append(s.tokens, id)
	u := Update{Tokens: []Token{tok}, PromptTokens: s.nPrompt, CachedTokens: s.cached, Preempted: s.preempt}
	if len(s.tokens)-s.nPrompt == 1 && !s.admitted.IsZero() {
		u.QueueTime = s.admitted.Sub(s.enqueued)
	}
	if s.req.PromptLogprobs && !s.lpDone {
		u.PromptLogprobs = s.promptLP
		s.lpDone = true
	}
	e.mu.Lock()
	e.stats.GeneratedTokens++
	e.mu.Unlock()
	gen := len(s.tokens) - s.nPrompt
	var reason FinishReason
	switch {
	case !s.req.IgnoreEOS && e.r.Model().Tokenizer.IsEOG(id), slices.Contains(s.req.StopTokens, id), complete:
		reason = FinishStop
	case gen >= s.req.MaxTokens || len(s.tokens) >= e.ctxTokens:
		reason = FinishLength
	}
	s.h.push(u)
	if reason != "" {
		e.finish(s, reason, nil)
		return true
	}
	e.dispatchMask(s)
	return false
}

// applyResumes moves imported sequences whose K/V has arrived into
// decoding, delivering the first token that came with it.
func (e *Engine) applyResumes() {
	e.mu.Lock()
	rs := e.resumes
	e.resumes = nil
	e.mu.Unlock()
	for _, r := range rs {
		s := r.s
		if !s.importing || !slices.Contains(e.running, s) {
			continue // cancelled meanwhile, or resumed twice: nothing to do
		}
		s.importing = false
		if r.state != nil && s.state != nil {
			decodeState(s.state, r.state) // ResumeState checked the length
		}
		s.computed = s.nPrompt
		s.smp.Skip(1) // the first token was drawn by the prefill side: the next draw is the second
		if e.accept(s, r.tok) {
			e.running = slices.DeleteFunc(e.running, func(v *seq) bool { return v == s })
		}
	}
}

// heldPage is a page of a layer group a KVSink took a reference on.
type heldPage struct {
	group int
	page  int32
}

// ReleasePage gives back a reference a KVSink took on page of layer
// group g (kvcache.Pool.Ref during LayerComputed). Safe from any
// goroutine: the loop drops the reference before its next step. After
// Close it does nothing.
func (e *Engine) ReleasePage(g int, page int32) {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return
	}
	e.unheld = append(e.unheld, heldPage{g, page})
	e.mu.Unlock()
	e.wakeup()
}

// applyUnheld drops the references ReleasePage gave back. A page given
// back for no layer group, or one that was not held, is a broken
// invariant (a KVSink released what it never took, or twice): the page
// accounting no longer adds up, so the engine stops loudly rather than
// hand a page to two sequences.
func (e *Engine) applyUnheld() {
	e.mu.Lock()
	hs := e.unheld
	e.unheld = nil
	e.mu.Unlock()
	var pages [kvcache.Groups][]int32
	for _, h := range hs {
		if h.group < 0 || h.group >= kvcache.Groups {
			invariant.Failf("engine", "kv page accounting broken: page %d given back for layer group %d, which does not exist", h.page, h.group)
		}
		pages[h.group] = append(pages[h.group], h.page)
	}
	for g, ps := range pages {
		if len(ps) == 0 {
			continue
		}
		if err := e.kv.Pool(g).Release(ps); err != nil {
			invariant.Failf("engine", "kv page accounting broken: %s pages %v given back: %v", kvcache.GroupName(g), ps, err)
		}
	}
}

// cachePrefix offers the sequence's full computed pages to the prefix
// caches: every global-group page, and the window-group pages it still
// holds (slide offered the earlier ones of its prompt as it released them).
func (e *Engine) cachePrefix(s *seq) {
	if s.req.PromptLogprobs {
		return
	}
	pt := e.kv.Config().PageTokens
	for _, g := range e.groups() {
		full := min(s.computed/pt, len(s.pages[g]))
		if e.pc[g] != nil && full > 0 {
			e.pc[g].Insert(s.tokens[:full*pt], s.pages[g][:full])
		}
	}
}

// release drops the sequence's page references and its state slot.
func (e *Engine) release(s *seq) {
	e.releaseTables(s.req.ID, s.pages)
	s.pages = kvcache.Tables{}
	s.slid = 0
	e.dropSlot(s)
	s.snapAt = nil
}

// finish ends s: caches its prefix, frees its pages and delivers the final
// update. The caller removes s from the running set or queue.
func (e *Engine) finish(s *seq, reason FinishReason, err error) {
	if reason == FinishStop || reason == FinishLength {
		e.cachePrefix(s)
	}
	if s.con != nil && s.con.m != nil {
		s.con.m.Interrupt() // a mask worker on it stops at once
	}
	e.release(s)
	if s.stopWake != nil {
		s.stopWake()
	}
	s.cancel()
	s.h.push(Update{Done: true, Finish: reason, Err: err, PromptTokens: s.nPrompt, CachedTokens: s.cached, Preempted: s.preempt})
}

// evictableEvery bounds how often a stepping engine walks its prefix
// caches for Stats.PagesEvictable (Evictable is O(cached pages)).
const evictableEvery = 100 * time.Millisecond

// evictable returns the pages of each group only its prefix cache holds,
// and false when it is not time to walk the caches again: an engine with
// running sequences walks them at most every evictableEvery; an idle one
// (nothing running) always, so the figure is exact once it settles.
func (e *Engine) evictable() (ev [kvcache.Groups]int, ok bool) {
	now := time.Now()
	if len(e.running) > 0 && now.Sub(e.evictAt) < evictableEvery {
		return ev, false
	}
	e.evictAt = now
	for _, g := range e.groups() {
		if e.pc[g] != nil {
			ev[g] = e.pc[g].Evictable()
		}
	}
	return ev, true
}

// publish refreshes the gauges in Stats.
func (e *Engine) publish() {
	running := 0
	for _, s := range e.running {
		running += prefillLeft(s)
	}
	ev, evOK := e.evictable() // walks the caches outside mu
	e.mu.Lock()
	e.stats.Waiting = len(e.waiting)
	e.stats.Running = len(e.running)
	global, window := e.pagesUsed()
	e.stats.PagesUsed = global + window
	e.stats.WindowPagesUsed = window
	e.stats.KVBytesUsed = e.kvBytes(global, window)
	if evOK {
		e.stats.PagesEvictable = ev[kvcache.GroupGlobal] + ev[kvcache.GroupWindow]
		e.stats.KVBytesEvictable = e.kvBytes(ev[kvcache.GroupGlobal], ev[kvcache.GroupWindow])
	}
	e.stats.PrefillQueueTokens = running
	e.stats.StateSlotsUsed = e.states.used()
	if len(e.active) > 0 {
		e.stats.StateSnapshots = e.pc[e.active[0]].States()
	}
	e.mu.Unlock()
}

// prefillLeft is s's prefill work: the tokens it must still compute before
// it samples from its own prompt (or recomputed history). A decoding
// sequence, one whose K/V is being imported and a fresh imported one in
// the queue have none.
func prefillLeft(s *seq) int {
	if s.importing || (s.req.Import != nil && s.preempt == 0 && len(s.tokens) == s.nPrompt) {
		return 0
	}
	need := len(s.tokens) - s.computed
	if s.computed >= s.nPrompt && need <= 1 {
		return 0 // decoding
	}
	return need
}

// enqueueLocked puts s in the waiting queue (at the front for a preempted
// sequence) and counts its prefill work. The caller holds e.mu.
func (e *Engine) enqueueLocked(s *seq, front bool) {
	s.waitTokens = prefillLeft(s)
	e.waitPrefill += s.waitTokens
	if front {
		e.waiting = slices.Insert(e.waiting, 0, s)
	} else {
		e.waiting = append(e.waiting, s)
	}
}

func (h *Handle) finishedFlag() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.finished
}
