package engine

import (
	"cmp"
	"slices"
	"time"
)

// Prefill scheduling: which sequences get a step's prefill tokens.
//
// After one token for every decoding sequence, the step's remaining
// budget goes to prefill chunks in priority order, several sequences per
// step when the budget allows. Candidates are the running sequences with
// prompt (or recompute) tokens left and the waiting ones, which are
// admitted on the way. Order:
//
//  1. Waiting sequences that were preempted, in queue order (most recently
//     preempted first): they had been decoding, their clients are mid-stream.
//  2. Everything else by priority = remaining prefill tokens −
//     (prefill tokens the engine fed to other sequences since the request
//     was submitted) / AgingRatio, lowest first; ties go to the earlier
//     submission. Remaining counts the whole prompt for a waiting sequence
//     (its prefix-cache hit is known only at admission); a sequence's own
//     tokens are its computed ones less its prefix-cache hit.
//
// This is shortest-remaining-first with aging. A short prompt behind a
// long one is served first; the long one takes what the short ones leave
// of each step. It cannot be starved: for a sequence X submitted after
// the engine fed F_X − F_L ≥ AgingRatio×R tokens past L's submission (R:
// L's prompt length), AgingRatio × (prio(X) − prio(L)) =
// AgingRatio×rem(X) + own(X) − AgingRatio×rem(L) − own(L) + (F_X − F_L),
// and AgingRatio×rem(L) + own(L) ≤ AgingRatio×R (own(L) ≤ R − rem(L),
// AgingRatio ≥ 1), so X never ranks before L: L's prefill is done at the
// latest when all the work submitted until then is, however many short
// prompts keep coming. Every step with prefill pending feeds at least
// MinPrefillTokens, so the bound holds in steps too.
//
// Aging counts the work fed to others, not a sequence's own prefill. Were
// it to count its own, a long prompt in progress would outrank a fresh
// short one for its last 1/(AgingRatio+1) (4·(1000−c) − c < 4·30 from c =
// 776 of a 1000-token prompt), and under the ITL target, which leaves a
// step only so many prefill tokens, it would take them all for several
// steps while the short prompt waits (see
// TestShortPromptBesideLongPrefillUnderTarget). So a long prompt outranks
// short ones only when it has waited for AgingRatio times its remaining
// tokens of other work, as the rule means.
//
// Aging counts prefill work, not steps or time, so the rule behaves the
// same whether steps carry full chunks or only the ITL floor.
//
// Admission (pages for the whole prompt) follows the same order and stops
// at the first waiting sequence that does not fit, so small requests cannot
// take the pages a large one waits for. A waiting sequence with prompt
// tokens is admitted only while the step has budget left; an imported one
// (which costs the step nothing) is admitted regardless.

// candidate is a sequence that may get prefill tokens this step.
type candidate struct {
	s       *seq
	waiting bool // in the queue when the step was planned: needs admission
}

// prefillOrder returns this step's prefill candidates, best first.
func (e *Engine) prefillOrder(in map[*seq]bool) []candidate {
	var recompute, rest []candidate
	for _, s := range e.running {
		if in[s] || s.queued || s.importing || len(s.tokens)-s.computed <= 1 {
			continue
		}
		rest = append(rest, candidate{s: s})
	}
	e.mu.Lock()
	now := e.fed
	for _, s := range e.waiting {
		if s.preempt > 0 {
			recompute = append(recompute, candidate{s: s, waiting: true})
		} else {
			rest = append(rest, candidate{s: s, waiting: true})
		}
	}
	e.mu.Unlock()
	ratio := int64(e.cfg.AgingRatio)
	prio := func(s *seq) int64 { // AgingRatio × the priority, in integers
		others := int64(now-s.arrival) - int64(max(0, s.computed-s.cached))
		return ratio*int64(len(s.tokens)-s.computed) - others
	}
	slices.SortFunc(rest, func(a, b candidate) int {
		if c := cmp.Compare(prio(a.s), prio(b.s)); c != 0 {
			return c
		}
		return cmp.Compare(a.s.order, b.s.order)
	})
	return append(recompute, rest...)
}

// schedule picks this step's tokens: one for each decoding sequence
// (when decode is true: under DecodePace a step before the decoding
// sequences are due carries prompt work only), then prefill chunks in
// priority order (see prefillOrder), admitting waiting sequences on the
// way, within MaxBatchTokens and, when ITLTarget is set, within the step
// cost the target allows. fedAll reports that no decoding sequence was
// left out.
func (e *Engine) schedule(decode bool) (steps []step, fedAll bool) {
	budget := e.cfg.MaxBatchTokens
	var decodes stepFeatures
	in := map[*seq]bool{}
	fedAll = true
	for _, s := range slices.Clone(e.running) {
		if budget == 0 {
			fedAll = false // the rest are due at the next step
			break
		}
		if len(s.tokens)-s.computed != 1 || s.queued || s.importing {
			continue
		}
		if !decode {
			fedAll = false
			continue
		}
		if !e.ensurePages(s, s.computed+1, in) {
			continue // s itself was preempted
		}
		decodes.add(s.computed, 1)
		steps = append(steps, step{s, 1})
		in[s] = true
		budget--
	}
	plan := e.planPrefill(decodes)
	admitting, fed := true, 0
	for _, c := range e.prefillOrder(in) {
		s := c.s
		if c.waiting {
			if !admitting || len(e.running) >= e.cfg.MaxRunning {
				admitting = false
				continue
			}
			if prefillLeft(s) > 0 && (budget == 0 || plan.exhausted()) {
				continue // no compute left this step: keep its pages free
			}
			if !e.admit(s) {
				admitting = false
				continue
			}
			if s.importing {
				continue
			}
		} else if s.queued {
			continue // preempted by ensurePages earlier in this step
		}
		take := plan.take(s.computed, e.chunkLimit(s, budget))
		if take == 0 {
			continue
		}
		if !c.waiting && !e.ensurePages(s, s.computed+take, in) {
			continue // s itself was preempted
		}
		steps = append(steps, step{s, take})
		in[s] = true
		budget -= take
		fed += take
	}
	if fed > 0 {
		e.mu.Lock()
		e.fed += uint64(fed)
		e.mu.Unlock()
	}
	return steps, fedAll
}

// features describes a scheduled step for the cost model.
func features(steps []step) stepFeatures {
	var f stepFeatures
	for _, st := range steps {
		f.add(st.s.computed, st.take)
	}
	return f
}

// stepInfo is what the test hook sees of a step before it runs.
type stepInfo struct {
	decodes   int            // sequences fed one token past their prompt
	prefill   map[string]int // request ID → prefill tokens fed
	features  stepFeatures   // what the cost model sees of the step
	predicted time.Duration  // the cost model's prediction for the step
	limited   bool           // the ITL target limited the step's prefill
}

// testHooks let the package's tests drive the loop step by step and
// replace measured step times with a cost model of their own.
type testHooks struct {
	step func(stepInfo)                   // called before each step runs; may block
	cost func(stepFeatures) time.Duration // replaces the measured step time
	mask func(id, at string)              // called by a mask worker before ("start") and after ("end") a job; may block
}

// observeStep runs steps, timing them for the cost model (and calling the
// test hooks when set); fedAll: they feed every decoding sequence (the
// pace of DecodePace counts from their start).
func (e *Engine) observeStep(steps []step, fedAll bool) {
	f := features(steps)
	h := e.cfg.hooks
	testStep := h != nil && h.step != nil
	var end func()
	if testStep || e.cfg.StepHook != nil {
		decodes, prefill := 0, 0
		var perReq map[string]int // the test hook's prefill by request
		if testStep {
			perReq = map[string]int{}
		}
		for _, st := range steps {
			if len(st.s.tokens)-st.s.computed == 1 {
				decodes++ // the decode pass of schedule
				continue
			}
			prefill += st.take
			if perReq != nil {
				perReq[st.s.req.ID] += st.take
			}
		}
		if testStep {
			h.step(stepInfo{decodes: decodes, prefill: perReq, features: f,
				predicted: time.Duration(e.cost.predict(f) * float64(time.Second)),
				limited:   e.cfg.ITLTarget > 0 && decodes > 0})
		}
		if e.cfg.StepHook != nil {
			end = e.cfg.StepHook(prefill, decodes)
		}
	}
	start := time.Now()
	if fedAll {
		e.lastDecode = start
	}
	e.run(steps)
	cost := time.Since(start)
	if end != nil {
		end()
	}
	if h != nil && h.cost != nil {
		cost = h.cost(f)
	}
	e.cost.observe(f, cost)
}
