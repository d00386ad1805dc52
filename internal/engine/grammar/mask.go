package grammar

import (
	"slices"
	"sync"
)

// Default cache sizes of a (grammar, vocabulary) pair.
const (
	// DefaultMaskCacheBytes bounds the cached masks of whole matcher states.
	DefaultMaskCacheBytes = 8 << 20
	// DefaultStateCacheBytes bounds the per-DFA-state tables.
	DefaultStateCacheBytes = 32 << 20
)

// stateTable is what one DFA state s accepts on its own, whatever lies
// below it on the stack: the tokens whose bytes the rule on top (and the
// rules it calls) can read entirely (accept), and the trie nodes after
// which the rule can end so that the rest of a token depends on the stack
// below (conts; the root is rootPop instead).
type stateTable struct {
	accept  Bitset
	conts   []int32
	rootPop bool
	maxRel  int32 // deepest frame the walk reached, relative to s
	// maxFan is the most readings (configs) the walk had after any byte,
	// capped at MaxStacks+1 (the walk stops below a node with more).
	maxFan int
}

func (st *stateTable) bytes() int { return 8*len(st.accept) + 4*len(st.conts) + 64 }

// tables holds the mask caches of one grammar over one vocabulary; every
// matcher of the pair shares them.
type tables struct {
	g *Grammar
	v *Vocab

	mu         sync.Mutex
	states     map[int32]*stateTable
	stateBytes int
	masks      map[string]*maskEntry
	maskBytes  int
	// depths are the key depths of the cached masks, at most
	// maxKeyDepths of them: a lookup tries each.
	depths []int32
	stats  CacheStats

	// CheckCost's results, one probe at a time.
	costMu sync.Mutex
	costs  map[CostLimit]error
}

// CacheStats counts mask cache use for one grammar and vocabulary.
type CacheStats struct {
	MaskHits, MaskMisses   int64
	StateHits, StateMisses int64
}

func (g *Grammar) tablesFor(v *Vocab) *tables {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.tables == nil {
		g.tables = map[*Vocab]*tables{}
	}
	t := g.tables[v]
	if t == nil {
		t = &tables{g: g, v: v, states: map[int32]*stateTable{}, masks: map[string]*maskEntry{}}
		g.tables[v] = t
	}
	return t
}

// Stats returns the cache counters of g over v.
func (g *Grammar) Stats(v *Vocab) CacheStats {
	t := g.tablesFor(v)
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stats
}

func (t *tables) limits() (maskMax, stateMax int) {
	maskMax, stateMax = t.g.opts.MaskCacheBytes, t.g.opts.StateCacheBytes
	if maskMax == 0 {
		maskMax = DefaultMaskCacheBytes
	}
	if stateMax == 0 {
		stateMax = DefaultStateCacheBytes
	}
	return maskMax, stateMax
}

// state returns the table of DFA state s, computing it on first use.
func (t *tables) state(s int32, w *walker) *stateTable {
	t.mu.Lock()
	st := t.states[s]
	if st != nil {
		t.stats.StateHits++
	} else {
		t.stats.StateMisses++
	}
	t.mu.Unlock()
	if st != nil {
		return st
	}
	st = &stateTable{accept: NewBitset(t.v.Size())}
	w.reset()
	w.fl = append(w.fl[:0], config{s, -1})
	w.maxRel = 1
	w.fan = 0
	w.visit(t.v, 0, 0, 1, st.accept, st)
	st.maxRel = w.maxRel
	st.maxFan = w.fan
	_, stateMax := t.limits()
	if stateMax < 0 || w.stopped { // a stopped walk is incomplete: never cached
		return st
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if old := t.states[s]; old != nil {
		return old
	}
	for t.stateBytes+st.bytes() > stateMax && len(t.states) > 0 {
		for k, old := range t.states {
			t.stateBytes -= old.bytes()
			delete(t.states, k)
			break
		}
	}
	t.states[s] = st
	t.stateBytes += st.bytes()
	return st
}

// computeMask ORs into dst the tokens that the stacks accept, exactly as
// Accept decides them, MaxStacks included.
//
// The fast path (maskStack per stack, from the per-state tables) ignores
// MaxStacks; it also sums, over the parts it walks, the most readings each
// had after any byte: an upper bound on how many stacks Accept can hold
// after any byte of any token. When that bound is within MaxStacks no token
// can hit the limit and the fast mask is exact. Otherwise the mask is
// computed by exactMask, which steps the whole stack set along the trie as
// Accept does, limit included. exactMask is also used when the fast path
// walks more trie nodes against real stacks than the trie has (many stacks
// of an ambiguous grammar, each walked down its own frames: measured, the
// nested grammar of TestGBNFStackLimitMask at 111 stacks takes 0.12 s per
// mask by the fast path and 3 ms by exactMask).
func (t *tables) computeMask(stacks [][]int32, dst Bitset, w *walker) {
	var done map[string]int32
	if len(stacks) > 1 {
		done = map[string]int32{}
	}
	fan := 0
	w.work, w.workMax = 0, len(t.v.nodes)
	for i, st := range stacks {
		fan += t.maskStack(st, dst, w, done, i)
		if w.stopped {
			return
		}
		if fan > MaxStacks || w.work > w.workMax {
			dst.clear()
			t.exactMask(stacks, dst, w)
			return
		}
	}
}

// exactMask ORs into dst the tokens Accept takes from stacks: a depth-first
// walk of the vocabulary trie that steps the whole stack set byte by byte as
// stepStacks does and prunes a subtree when no stack survives its byte or
// more than MaxStacks do, as Accept refuses both. Frames are hash-consed
// (a frame with the same state over the same frame is made once), so equal
// stacks are one config and the count per node is Accept's stack count.
func (t *tables) exactMask(stacks [][]int32, dst Bitset, w *walker) {
	w.reset()
	w.hc = map[config]int32{}
	w.fl = w.fl[:0]
	w.tops = w.tops[:0]
	for _, st := range stacks {
		top := w.load(st)
		w.tops = append(w.tops, top)
		w.fl = append(w.fl, config{w.st[top], w.par[top]})
	}
	// Mark the loaded frames the walk pops into: what the mask depends on.
	w.marks = append(w.marks[:0], make([]bool, len(w.st))...)
	w.maxRel = 0
	w.fl = sortConfigs(w.fl)
	w.exactVisit(t.v, 0, 0, len(w.fl), dst)
	w.hc = nil
	tr := &w.tr
	tr.reach = max(tr.reach, w.maxRel)
	for i, f := range w.tops {
		for ; f >= 0; f = w.par[f] {
			if w.marks[f] {
				tr.low[i] = min(tr.low[i], w.dep[f])
			}
		}
	}
	w.marks = w.marks[:0]
}

// sortConfigs sorts cs and removes duplicates.
func sortConfigs(cs []config) []config {
	slices.SortFunc(cs, func(a, b config) int {
		if a.state != b.state {
			return int(a.state) - int(b.state)
		}
		return int(a.parent) - int(b.parent)
	})
	return slices.Compact(cs)
}

// exactVisit is visit for exactMask: w.fl[fs:fe] are distinct stacks after
// node's bytes; a child is walked when 1 to MaxStacks stacks read its byte.
func (w *walker) exactVisit(v *Vocab, node int32, fs, fe int, dst Bitset) {
	g := w.g
	cfgStart := len(w.cfg)
	for i := fs; i < fe; i++ {
		f := w.fl[i]
		if g.simple[f.state] {
			w.cfg = append(w.cfg, f)
			continue
		}
		w.closure(f.state, f.parent)
	}
	cfgEnd := len(w.cfg)
	mark := len(w.st)
	nc := g.nclass
	nodes := v.nodes
	for c := nodes[node].first; c >= 0; c = nodes[c].sib {
		if w.spend(cfgEnd - cfgStart) {
			return
		}
		n := &nodes[c]
		cls := int(g.class[n.b])
		flStart := len(w.fl)
		for i := cfgStart; i < cfgEnd; i++ {
			cf := w.cfg[i]
			if nt := g.trans[int(cf.state)*nc+cls]; nt >= 0 {
				w.fl = append(w.fl, config{nt, cf.parent})
			}
		}
		if len(w.fl) > flStart+1 {
			if w.spend(len(w.fl) - flStart) { // the sort
				return
			}
			w.fl = append(w.fl[:flStart], sortConfigs(w.fl[flStart:])...)
		}
		if k := len(w.fl) - flStart; k > 0 && k <= MaxStacks {
			for i := n.tokS; i < n.tokE; i++ {
				dst.Set(int(v.ids[i]))
			}
			if n.first >= 0 {
				w.exactVisit(v, c, flStart, len(w.fl), dst)
				if w.stopped {
					return
				}
			}
			w.truncate(mark)
		}
		w.fl = w.fl[:flStart]
	}
	w.cfg = w.cfg[:cfgStart]
}

// maskStack ORs into dst the tokens stack st (stack i of the mask)
// accepts: the top state's precomputed set, plus, where the top rule can
// end inside a token, the rest of that token walked against the stack
// below; when the top rule can end before the token starts, the same again
// one frame down.
//
// With several stacks, done holds the stacks already masked: a stack
// contributes the same tokens whichever stack it is the lower part of, so
// a shared lower part is walked once. done maps each to the lowest frame
// depth its walks read, which the stacks that skip it inherit (w.tr).
//
// It returns an upper bound on the readings of st after any byte of any
// token: the most each walk had, summed (a lower part skipped here adds
// nothing, as its readings are those counted where it was walked). Past
// MaxStacks it stops early, and dst is incomplete.
func (t *tables) maskStack(st []int32, dst Bitset, w *walker, done map[string]int32, i int) (fan int) {
	tr := &w.tr
	low := int32(len(st)) // the lowest frame depth read: the top's, so far
	keys := w.doneKeys[:0]
	defer func() {
		tr.low[i] = min(tr.low[i], low)
		for _, k := range keys {
			done[k] = low
		}
		w.doneKeys = keys[:0]
	}()
	for len(st) > 0 {
		if done != nil {
			k := stackKey(st)
			if l, ok := done[k]; ok {
				low = min(low, l)
				return fan
			}
			done[k] = int32(len(st))
			keys = append(keys, k)
		}
		low = min(low, int32(len(st)))
		top := st[len(st)-1]
		below := st[:len(st)-1]
		tab := t.state(top, w)
		if w.stopped {
			return fan
		}
		if int32(len(st))+tab.maxRel+1 >= w.maxDepth {
			// Near the depth limit the context-free table may accept what
			// the real stack cannot: walk the whole trie exactly.
			w.refused = true
			f, l := t.fullWalk(st, 0, dst, w)
			low = min(low, l)
			return fan + f
		}
		tr.reach = max(tr.reach, int32(len(st))-1+tab.maxRel)
		fan += tab.maxFan
		if fan > MaxStacks {
			return fan
		}
		dst.or(tab.accept)
		if len(below) == 0 {
			return fan
		}
		for _, node := range tab.conts {
			f, l := t.fullWalk(below, node, dst, w)
			fan += f
			low = min(low, l)
			if fan > MaxStacks || w.work > w.workMax || w.stopped {
				return fan
			}
		}
		if !tab.rootPop {
			return fan
		}
		st = below
	}
	return fan
}

// fullWalk walks the trie below node against the real stack st, marking
// every token of the subtree (not node's own) the stack accepts. It
// returns the most readings the walk had after any byte (MaxStacks+1 when
// it stopped at a node with more) and the lowest frame depth of st it read
// (len(st): only the top), and adds the nodes it walked to w.work.
func (t *tables) fullWalk(st []int32, node int32, dst Bitset, w *walker) (fan int, low int32) {
	w.reset()
	w.maxRel, w.minPop = 0, int32(len(st))
	top := w.load(st)
	w.fl = append(w.fl[:0], config{w.st[top], w.par[top]})
	w.fan = 0
	w.visit(t.v, node, 0, 1, dst, nil)
	w.tr.reach = max(w.tr.reach, w.maxRel)
	return w.fan, w.minPop
}

// visit walks the trie below node with the unexpanded stacks w.fl[fs:fe]
// (state over parent frame, after reading node's bytes), marks in dst
// every token whose bytes some stack reads, and, for a state table walk
// (tab != nil), records the nodes where the bottom rule can end.
func (w *walker) visit(v *Vocab, node int32, fs, fe int, dst Bitset, tab *stateTable) {
	g := w.g
	cfgStart := len(w.cfg)
	pop := false
	for i := fs; i < fe; i++ {
		f := w.fl[i]
		if g.simple[f.state] {
			w.cfg = append(w.cfg, f) // only byte edges: its own expansion
			continue
		}
		if w.closure(f.state, f.parent) {
			pop = true
		}
	}
	if pop && tab != nil {
		if node == 0 {
			tab.rootPop = true
		} else {
			tab.conts = append(tab.conts, node)
		}
	}
	cfgEnd := len(w.cfg)
	mark := len(w.st)
	nc := g.nclass
	trans := g.trans
	nodes := v.nodes
	for c := nodes[node].first; c >= 0; c = nodes[c].sib {
		if w.spend(cfgEnd - cfgStart) {
			return
		}
		n := &nodes[c]
		cls := int(g.class[n.b])
		flStart := len(w.fl)
		for i := cfgStart; i < cfgEnd && len(w.fl)-flStart <= MaxStacks; i++ {
			cf := w.cfg[i]
			nt := trans[int(cf.state)*nc+cls]
			if nt < 0 {
				continue
			}
			next := config{nt, cf.parent}
			dup := false
			for j := flStart; j < len(w.fl); j++ {
				if w.fl[j] == next {
					dup = true
					break
				}
			}
			if !dup {
				w.fl = append(w.fl, next)
			}
		}
		if k := len(w.fl) - flStart; k > w.fan {
			w.fan = k
		}
		if len(w.fl)-flStart > MaxStacks {
			// More readings than Accept allows: the caller's bound is
			// past MaxStacks and it recomputes the mask exactly.
			w.fan = MaxStacks + 1
		} else if len(w.fl) > flStart {
			if tab == nil {
				w.work++
			}
			for i := n.tokS; i < n.tokE; i++ {
				id := v.ids[i]
				dst[id>>6] |= 1 << (uint(id) & 63)
			}
			if n.first >= 0 {
				w.visit(v, c, flStart, len(w.fl), dst, tab)
				if w.stopped {
					return
				}
			}
			w.truncate(mark)
		}
		w.fl = w.fl[:flStart]
	}
	w.cfg = w.cfg[:cfgStart]
}

func (w *walker) truncate(n int) {
	if w.hc != nil {
		for i := n; i < len(w.st); i++ {
			delete(w.hc, config{w.st[i], w.par[i]})
		}
	}
	w.st, w.par, w.dep = w.st[:n], w.par[:n], w.dep[:n]
}
