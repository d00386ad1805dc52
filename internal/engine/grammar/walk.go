package grammar

import (
	"sync/atomic"
	"time"
)

// This file runs the pushdown automaton. A stack is a chain of frames in an
// arena: each frame holds a DFA state and the index of the frame below it
// (-1 at the bottom). The top frame's state is where the automaton is; the
// frames below hold the states to return to when the rule on top ends.
// Frames are never modified, so stacks that share a tail share frames.

// closureBudget bounds the rule calls one closure may push without reading
// a byte; it stops left recursion (a rule that calls itself first) from
// looping.
const closureBudget = 4096

// config is an expanded stack: the top state has byte transitions.
type config struct {
	state  int32
	parent int32
}

// walker holds the arena and scratch space for running the automaton. It is
// owned by one goroutine at a time.
//
// A budgeted mask (Matcher.MaskWithin) counts its work in units, one per
// trie node walked below and per rule call expanded (tick), and every
// tickEvery units looks at its limits: the work bound, the deadline and
// the matcher's interrupt flag. Past one, stopped is set and every walk
// unwinds at once; the caller then discards what it computed.
type walker struct {
	g        *Grammar
	st       []int32 // frame state
	par      []int32 // frame below, -1 at the bottom
	dep      []int32 // frame depth, 1 at the bottom
	cfg      []config
	fl       []config // unexpanded stacks of the trie walk, a stack of per-node lists
	maxDepth int32
	maxRel   int32            // deepest frame made since it was last reset
	fan      int              // most readings a trie walk had after a byte, see visit
	work     int              // trie nodes walked against real stacks by one fast mask
	workMax  int              // beyond it the mask is computed by exactMask
	hc       map[config]int32 // when set, frame returns the existing frame of a (state, parent)
	budget   int
	cfgBase  int // first config of the current closure

	// Budget of the current mask (see tick).
	units    int64        // work units so far
	check    int64        // look at the limits when units reach this
	unitMax  int64        // stop past this many units (0: no bound)
	deadline time.Time    // stop past this instant (zero: none)
	intr     *atomic.Bool // stop once set (nil: not interruptible)
	stopped  bool         // a limit was hit: unwind and discard

	// What the current mask depended on (see tables.lookup): minPop is
	// the lowest frame depth the automaton popped into since it was reset
	// (math.MaxInt32: none), refused records that the depth limit refused
	// a call, and marks (when not nil) flags the loaded frames whose state
	// was read by a pop.
	minPop   int32
	refused  bool
	marks    []bool
	tr       trace
	tops     []int32  // scratch: the top frame of each loaded stack
	doneKeys []string // scratch of maskStack
	kb       keyBuilder
}

// trace is what one mask computation read of its stacks (see
// tables.store): for each stack the lowest frame depth (bottom 1) whose
// state it read, and the deepest frame depth any walk reached.
type trace struct {
	low   []int32
	reach int32
}

// startTrace resets the trace and the depth-limit flag for a mask of
// stacks: so far each stack's top is read.
func (w *walker) startTrace(stacks [][]int32) *trace {
	w.tr.low = w.tr.low[:0]
	w.tr.reach = 0
	for _, st := range stacks {
		w.tr.low = append(w.tr.low, int32(len(st)))
		w.tr.reach = max(w.tr.reach, int32(len(st)))
	}
	w.refused = false
	return &w.tr
}

// tickEvery is how many work units pass between two looks at the limits
// (the clock and an atomic load): the overshoot past a deadline is at most
// that much work, well under a millisecond.
const tickEvery = 256

// spend counts n units of work about to be done and reports whether the
// walk must stop instead: past the work bound (exact), the deadline or an
// interrupt (looked at every tickEvery units).
// A unit is a step of the automaton: one expansion of a frame (a call or
// a return) or one configuration tried against one trie node.
func (w *walker) spend(n int) bool {
	if w.stopped {
		return true
	}
	if w.unitMax > 0 && w.units+int64(n) > w.unitMax {
		w.stopped = true // the work bound is exact: this work is not done
		return true
	}
	w.units += int64(n)
	if w.units < w.check {
		return false
	}
	w.check = w.units + tickEvery
	switch {
	case !w.deadline.IsZero() && time.Now().After(w.deadline),
		w.intr != nil && w.intr.Load():
		w.stopped = true
	}
	return w.stopped
}

// limit sets the budget of the next mask and clears the work count.
func (w *walker) limit(unitMax int64, deadline time.Time, intr *atomic.Bool) {
	w.units, w.check, w.unitMax, w.deadline, w.intr, w.stopped = 0, tickEvery, unitMax, deadline, intr, false
}

func newWalker(g *Grammar) *walker {
	d := int32(g.opts.MaxDepth)
	if d <= 0 {
		d = DefaultMaxDepth
	}
	return &walker{g: g, maxDepth: d}
}

func (w *walker) reset() {
	clear(w.hc)
	w.st, w.par, w.dep, w.cfg = w.st[:0], w.par[:0], w.dep[:0], w.cfg[:0]
}

// frame appends a frame and returns its index.
func (w *walker) frame(state, parent int32) int32 {
	if w.hc != nil {
		if f, ok := w.hc[config{state, parent}]; ok {
			return f
		}
		w.hc[config{state, parent}] = int32(len(w.st))
	}
	d := int32(1)
	if parent >= 0 {
		d = w.dep[parent] + 1
	}
	w.st = append(w.st, state)
	w.par = append(w.par, parent)
	w.dep = append(w.dep, d)
	w.maxRel = max(w.maxRel, d)
	return int32(len(w.st) - 1)
}

// load copies a stack (bottom first) into the arena and returns its top
// frame.
func (w *walker) load(stack []int32) int32 {
	f := int32(-1)
	for _, s := range stack {
		f = w.frame(s, f)
	}
	return f
}

// unload returns the stack whose top is frame f, bottom first.
func (w *walker) unload(f int32) []int32 {
	n := 0
	if f >= 0 {
		n = int(w.dep[f])
	}
	out := make([]int32, n)
	for i := n - 1; i >= 0; i-- {
		out[i] = w.st[f]
		f = w.par[f]
	}
	return out
}

// closure expands the frame f (state s over parent p) into configs appended
// to w.cfg: every way of reaching a state with byte transitions by calling
// rules or returning from finished ones. It reports whether the bottom rule
// can finish (pop below the stack).
func (w *walker) closure(s, p int32) (popBelow bool) {
	w.budget = closureBudget
	w.cfgBase = len(w.cfg)
	return w.expand(s, p)
}

func (w *walker) expand(s, p int32) bool {
	if w.spend(1) {
		return false
	}
	g := w.g
	pop := false
	if g.hasBytes[s] {
		w.addConfig(config{s, p})
	}
	if cs := g.calls[s]; len(cs) > 0 && w.budget > 0 {
		depth := int32(1)
		if p >= 0 {
			depth = w.dep[p] + 1
		}
		for _, c := range cs {
			w.budget--
			if w.budget <= 0 || w.stopped {
				break
			}
			// A tail call (the caller has nothing left to do after it) pushes
			// no frame: the callee returns straight to p, so right recursion
			// does not grow the stack (llama.cpp's grammar does the same).
			ret := p
			if !g.tail[c.ret] {
				if depth >= w.maxDepth {
					w.refused = true
					continue
				}
				ret = w.frame(c.ret, p)
			}
			if w.expand(g.ruleStart[c.rule], ret) {
				pop = true
			}
		}
	}
	if g.final[s] {
		if p < 0 {
			pop = true
		} else {
			w.popInto(p)
			if w.expand(w.st[p], w.par[p]) {
				pop = true
			}
		}
	}
	return pop
}

// popInto records that the automaton returned into frame p (its state is
// read): the mask cache key must hold that frame.
func (w *walker) popInto(p int32) {
	if d := w.dep[p]; d < w.minPop {
		w.minPop = d
	}
	if int(p) < len(w.marks) {
		w.marks[p] = true
	}
}

// addConfig appends c unless the same config is already among the last
// ones (cheap duplicate removal for alternatives that join again).
func (w *walker) addConfig(c config) {
	n := len(w.cfg)
	for i := n - 1; i >= w.cfgBase && i >= n-8; i-- {
		if w.cfg[i] == c {
			return
		}
	}
	w.cfg = append(w.cfg, c)
}

// stepStacks feeds one byte to a set of stacks and returns the new set
// (nil when the byte is rejected). Stacks are bottom-first state lists.
func (w *walker) stepStacks(stacks [][]int32, b byte) [][]int32 {
	w.reset()
	for _, st := range stacks {
		top := w.load(st)
		w.closure(w.st[top], w.par[top])
	}
	var out [][]int32
	seen := map[string]bool{}
	ncfg := len(w.cfg)
	for i := 0; i < ncfg; i++ {
		c := w.cfg[i]
		t := w.g.next(c.state, b)
		if t < 0 {
			continue
		}
		f := w.frame(w.g.canon[t], c.parent)
		st := w.unload(f)
		k := stackKey(st)
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, st)
	}
	return out
}

// canEnd reports whether some stack can finish the document now. With a
// trace it records what it read of each stack.
func (w *walker) canEnd(stacks [][]int32, tr *trace) bool {
	for i, st := range stacks {
		w.reset()
		w.maxRel, w.minPop = 0, int32(len(st))
		top := w.load(st)
		end := w.closure(w.st[top], w.par[top])
		if tr != nil {
			tr.low[i] = min(tr.low[i], w.minPop)
			tr.reach = max(tr.reach, w.maxRel)
		}
		if end {
			return true
		}
	}
	return false
}

// canContinue reports whether some stack accepts another byte.
func (w *walker) canContinue(stacks [][]int32) bool {
	w.reset()
	for _, st := range stacks {
		top := w.load(st)
		w.closure(w.st[top], w.par[top])
	}
	return len(w.cfg) > 0
}

// stackKey encodes one stack canonically.
func stackKey(st []int32) string {
	b := make([]byte, 0, 4*len(st))
	for _, s := range st {
		b = append(b, byte(s), byte(s>>8), byte(s>>16), byte(s>>24))
	}
	return string(b)
}
