package grammar

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
)

// Limits on what a compiled grammar may hold. Past them Compile fails with
// ErrTooLarge instead of allocating without bound.
const (
	// MaxNFAStates caps the NFA states of all rules together.
	MaxNFAStates = 1 << 20
	// MaxDFAStates caps the DFA states of all rules together.
	MaxDFAStates = 1 << 17
	// MaxDeterminizeWork caps the NFA states summed over all DFA states
	// (the subset construction's work), so that a regex whose DFA explodes
	// fails fast.
	MaxDeterminizeWork = 1 << 22
)

// ErrTooLarge is returned (wrapped) when a schema expands past the limits.
var ErrTooLarge = errors.New("grammar: schema too large")

// call is a DFA edge that pushes a rule: run rule, then continue in ret.
type call struct {
	rule int32
	ret  int32
}

// Grammar is a compiled grammar: a pushdown automaton over bytes made of one
// DFA per rule whose edges are bytes or calls of other rules. A Grammar is
// immutable after Compile and safe for concurrent use; per-vocabulary mask
// tables are built on first use by NewMatcher and shared by its matchers.
type Grammar struct {
	nclass   int
	class    [256]uint8
	trans    []int32 // state*nclass + class: next state or -1
	final    []bool
	calls    [][]call
	hasBytes []bool
	simple   []bool // only byte edges: no calls, not final
	tail     []bool // final with nothing else: a call returning here is a tail call
	// canon maps a state whose only move is a tail call to the called
	// rule's start (through chains of such states), every other state to
	// itself: a frame in such a state behaves as one in the start state,
	// so stacks are stored with the start (after "!" in `r ::= x "!" r`,
	// the stack is the one of the start of r again).
	canon     []int32
	ruleStart []int32
	ruleNames []string
	root      int32
	opts      Options

	mu     sync.Mutex
	tables map[*Vocab]*tables
}

// States returns the number of DFA states of all rules together.
func (g *Grammar) States() int { return len(g.final) }

// Rules returns the number of rules.
func (g *Grammar) Rules() int { return len(g.ruleStart) }

// next returns the state after byte b from state s, or -1.
func (g *Grammar) next(s int32, b byte) int32 {
	return g.trans[int(s)*g.nclass+int(g.class[b])]
}

// ruleSet collects named rules while a schema or regex is compiled,
// within the compilation's memory budget (nil: none).
type ruleSet struct {
	exprs  []*expr
	names  []string
	b      *budget
	owners *ruleOwners // CompileParts: the part that made each rule
}

// add reserves a rule and returns its number; define sets its expression.
func (r *ruleSet) add(name string) int {
	r.exprs = append(r.exprs, nil)
	r.names = append(r.names, name)
	return len(r.exprs) - 1
}

// define sets rule id's expression and charges its nodes to the budget
// (a budget error shows at the next check: compileRules checks first).
func (r *ruleSet) define(id int, e *expr) {
	r.exprs[id] = e
	r.b.exprs(e)
}

// nfa is a Thompson automaton for one rule.
type nfa struct {
	eps   [][]int32
	bytes []nfaByte
	calls []nfaCall
	n     int
}

type nfaByte struct {
	from, to int32
	set      byteSet
}

type nfaCall struct {
	from, to int32
	rule     int32
}

func (a *nfa) newState() int32 {
	a.eps = append(a.eps, nil)
	a.n++
	return int32(a.n - 1)
}

// build adds e between fresh states and returns (start, end).
func (a *nfa) build(e *expr) (int32, int32) {
	s, t := a.newState(), a.newState()
	switch e.kind {
	case exEmpty:
		a.eps[s] = append(a.eps[s], t)
	case exNone:
	case exBytes:
		a.bytes = append(a.bytes, nfaByte{s, t, e.set})
	case exRef:
		a.calls = append(a.calls, nfaCall{s, t, int32(e.rule)})
	case exSeq:
		cur := s
		for _, sub := range e.subs {
			ss, st := a.build(sub)
			a.eps[cur] = append(a.eps[cur], ss)
			cur = st
		}
		a.eps[cur] = append(a.eps[cur], t)
	case exAlt:
		for _, sub := range e.subs {
			ss, st := a.build(sub)
			a.eps[s] = append(a.eps[s], ss)
			a.eps[st] = append(a.eps[st], t)
		}
	case exRepeat:
		sub := e.subs[0]
		cur := s
		for i := 0; i < e.min; i++ {
			ss, st := a.build(sub)
			a.eps[cur] = append(a.eps[cur], ss)
			cur = st
		}
		if e.max < 0 {
			ss, st := a.build(sub)
			a.eps[cur] = append(a.eps[cur], ss, t)
			a.eps[st] = append(a.eps[st], ss, t)
		} else {
			for i := e.min; i < e.max; i++ {
				ss, st := a.build(sub)
				a.eps[cur] = append(a.eps[cur], ss, t)
				cur = st
			}
			a.eps[cur] = append(a.eps[cur], t)
		}
	}
	return s, t
}

// closure returns the sorted epsilon closure of set.
func (a *nfa) closure(set []int32, seen []bool) []int32 {
	out := slices.Clone(set)
	for _, s := range set {
		seen[s] = true
	}
	for i := 0; i < len(out); i++ {
		for _, t := range a.eps[out[i]] {
			if !seen[t] {
				seen[t] = true
				out = append(out, t)
			}
		}
	}
	for _, s := range out {
		seen[s] = false
	}
	slices.Sort(out)
	return out
}

// compileRules turns rules into a Grammar with root as its start rule.
func compileRules(rs *ruleSet, root int, opts Options) (*Grammar, error) {
	b := rs.b
	if err := b.charge(0); err != nil {
		return nil, err
	}
	total := 0
	sizes := make([]int, len(rs.exprs)) // NFA states per rule, then DFA states
	for i, e := range rs.exprs {
		if e == nil {
			return nil, fmt.Errorf("grammar: rule %s has no definition", rs.names[i])
		}
		n := e.size(MaxNFAStates)
		sizes[i] = n
		total += n
		if total > MaxNFAStates {
			return nil, rs.owners.blame(fmt.Errorf("%w: more than %d automaton states (reduce maxLength, maxItems or the number of properties)", ErrTooLarge, MaxNFAStates), sizes[:i+1])
		}
		if err := b.charge(nfaStateByte * int64(n)); err != nil {
			return nil, rs.owners.blame(err, sizes[:i+1])
		}
	}
	opts.ctx = nil // a Grammar does not keep its compilation's context
	g := &Grammar{root: int32(root), opts: opts, ruleNames: rs.names}
	work := 0
	// Byte classes: bytes that no set in the grammar tells apart share one.
	var sets []byteSet
	nfas := make([]*nfa, len(rs.exprs))
	starts := make([]int32, len(rs.exprs))
	ends := make([]int32, len(rs.exprs))
	for i, e := range rs.exprs {
		a := &nfa{}
		starts[i], ends[i] = a.build(e)
		nfas[i] = a
		for _, b := range a.bytes {
			sets = append(sets, b.set)
		}
	}
	g.computeClasses(sets)
	reps := make([]byte, g.nclass) // one byte per class
	for b := 255; b >= 0; b-- {
		reps[g.class[b]] = byte(b)
	}
	g.ruleStart = make([]int32, len(rs.exprs))
	for i, a := range nfas {
		before := len(g.final)
		start, err := g.determinize(a, starts[i], ends[i], reps, &work, b)
		sizes[i] = len(g.final) - before
		if err != nil {
			if errors.Is(err, ErrTooLarge) {
				err = rs.owners.blame(err, sizes[:i+1])
			}
			return nil, err
		}
		g.ruleStart[i] = start
		nfas[i] = nil // garbage from here on
	}
	if err := g.prune(); err != nil {
		return nil, err
	}
	if err := g.checkLeftRecursion(); err != nil {
		return nil, err
	}
	g.simple = make([]bool, len(g.final))
	g.tail = make([]bool, len(g.final))
	for s := range g.simple {
		g.simple[s] = g.hasBytes[s] && len(g.calls[s]) == 0 && !g.final[s]
		g.tail[s] = g.final[s] && !g.hasBytes[s] && len(g.calls[s]) == 0
	}
	g.canon = make([]int32, len(g.final))
	for s := range g.canon {
		t := int32(s)
		// A chain of such states cannot loop (that would be left
		// recursion, refused above); the bound is belt and braces.
		for range len(g.final) {
			cs := g.calls[t]
			if g.hasBytes[t] || g.final[t] || len(cs) != 1 || !g.tail[cs[0].ret] {
				break
			}
			t = g.ruleStart[cs[0].rule]
		}
		g.canon[s] = t
	}
	return g, nil
}

// checkLeftRecursion refuses a rule that can call itself before reading a
// byte (such as a $ref cycle with nothing in between, or anyOf whose first
// branch is the schema itself): the automaton would push without end.
func (g *Grammar) checkLeftRecursion() error {
	nr := len(g.ruleStart)
	// epsReach(r): the states of r reachable from its start through calls
	// of nullable rules only.
	epsReach := func(r int, nullable []bool) []int32 {
		seen := map[int32]bool{g.ruleStart[r]: true}
		stack := []int32{g.ruleStart[r]}
		var out []int32
		for len(stack) > 0 {
			s := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			out = append(out, s)
			for _, cl := range g.calls[s] {
				if nullable[cl.rule] && !seen[cl.ret] {
					seen[cl.ret] = true
					stack = append(stack, cl.ret)
				}
			}
		}
		return out
	}
	nullable := make([]bool, nr)
	for changed := true; changed; {
		changed = false
		for r := 0; r < nr; r++ {
			if nullable[r] {
				continue
			}
			for _, s := range epsReach(r, nullable) {
				if g.final[s] {
					nullable[r] = true
					changed = true
					break
				}
			}
		}
	}
	first := make([][]int32, nr) // rules r may call before reading a byte
	for r := 0; r < nr; r++ {
		for _, s := range epsReach(r, nullable) {
			for _, cl := range g.calls[s] {
				first[r] = append(first[r], cl.rule)
			}
		}
	}
	// A cycle in first: depth-first search with colours.
	colour := make([]uint8, nr)
	var visit func(r int32) int32
	visit = func(r int32) int32 {
		colour[r] = 1
		for _, q := range first[r] {
			if colour[q] == 1 {
				return q
			}
			if colour[q] == 0 {
				if c := visit(q); c >= 0 {
					return c
				}
			}
		}
		colour[r] = 2
		return -1
	}
	for r := 0; r < nr; r++ {
		if colour[r] == 0 {
			if c := visit(int32(r)); c >= 0 {
				return fmt.Errorf("%w: %s refers to itself before any value is read (left recursion through $ref)", ErrUnsupported, g.ruleNames[c])
			}
		}
	}
	return nil
}

// computeClasses partitions the byte values by membership in sets.
func (g *Grammar) computeClasses(sets []byteSet) {
	sig := make(map[string]uint8)
	var key []byte
	for b := 0; b < 256; b++ {
		key = key[:0]
		for i := range sets {
			if sets[i].has(byte(b)) {
				key = strconv.AppendInt(key, int64(i), 36)
				key = append(key, ',')
			}
		}
		id, ok := sig[string(key)]
		if !ok {
			id = uint8(len(sig))
			sig[string(key)] = id
		}
		g.class[b] = id
	}
	g.nclass = len(sig)
}

// determinize runs the subset construction for one rule's NFA, treating
// each called rule as a letter, and appends the DFA states to g.
func (g *Grammar) determinize(a *nfa, start, end int32, reps []byte, work *int, b *budget) (int32, error) {
	seen := make([]bool, a.n)
	// Per NFA state, its byte edges as (class, target) pairs.
	type edge struct{ class, to int32 }
	byFrom := make([][]edge, a.n)
	for _, b := range a.bytes {
		for c := 0; c < g.nclass; c++ {
			if b.set.has(reps[c]) {
				byFrom[b.from] = append(byFrom[b.from], edge{int32(c), b.to})
			}
		}
	}
	callFrom := make([][]int, a.n)
	for i, c := range a.calls {
		callFrom[c.from] = append(callFrom[c.from], i)
	}
	ids := map[string]int32{}
	type item struct {
		id  int32
		set []int32
	}
	var queue []item
	var kb []byte
	intern := func(set []int32) (int32, error) {
		kb = kb[:0]
		for _, s := range set {
			kb = append(kb, byte(s), byte(s>>8), byte(s>>16), byte(s>>24))
		}
		if id, ok := ids[string(kb)]; ok {
			return id, nil
		}
		*work += len(set)
		if len(g.final) >= MaxDFAStates || *work > MaxDeterminizeWork {
			return 0, fmt.Errorf("%w: more than %d automaton states (reduce maxLength, maxItems or the number of properties)", ErrTooLarge, MaxDFAStates)
		}
		// Its transition row, its key and queued set, and the rest.
		if err := b.charge(int64(4*g.nclass+8*len(set)) + dfaStateByte); err != nil {
			return 0, err
		}
		id := int32(len(g.final))
		ids[string(kb)] = id
		g.final = append(g.final, slices.Contains(set, end))
		g.calls = append(g.calls, nil)
		g.hasBytes = append(g.hasBytes, false)
		for i := 0; i < g.nclass; i++ {
			g.trans = append(g.trans, -1)
		}
		queue = append(queue, item{id, set})
		return id, nil
	}
	first, err := intern(a.closure([]int32{start}, seen))
	if err != nil {
		return 0, err
	}
	tgt := make([][]int32, g.nclass)
	for len(queue) > 0 {
		it := queue[0]
		queue = queue[1:]
		id, set := it.id, it.set
		for c := range tgt {
			tgt[c] = tgt[c][:0]
		}
		for _, s := range set {
			for _, e := range byFrom[s] {
				tgt[e.class] = append(tgt[e.class], e.to)
			}
		}
		for c := 0; c < g.nclass; c++ {
			if len(tgt[c]) == 0 {
				continue
			}
			t := tgt[c]
			slices.Sort(t)
			t = slices.Compact(t)
			nt, err := intern(a.closure(t, seen))
			if err != nil {
				return 0, err
			}
			g.trans[int(id)*g.nclass+c] = nt
			g.hasBytes[id] = true
		}
		byRule := map[int32][]int32{}
		var rules []int32
		for _, s := range set {
			for _, ci := range callFrom[s] {
				r := a.calls[ci].rule
				if _, ok := byRule[r]; !ok {
					rules = append(rules, r)
				}
				byRule[r] = append(byRule[r], a.calls[ci].to)
			}
		}
		slices.Sort(rules)
		for _, r := range rules {
			t := byRule[r]
			slices.Sort(t)
			t = slices.Compact(t)
			nt, err := intern(a.closure(t, seen))
			if err != nil {
				return 0, err
			}
			g.calls[id] = append(g.calls[id], call{rule: r, ret: nt})
		}
	}
	return first, nil
}

// prune removes edges into states from which no end of the rule can be
// reached (through bytes and calls of rules that match something), so that
// every live matcher state can still complete a document.
func (g *Grammar) prune() error {
	n := len(g.final)
	productive := make([]bool, len(g.ruleStart))
	live := make([]bool, n)
	// live(s): s is final, or a byte edge leads to a live state, or a call
	// of a productive rule returns to a live state; productive(r):
	// live(start of r). One backward worklist pass over reverse edges.
	type callEdge struct{ from, other int32 }
	bytePred := make([][]int32, n)
	byRet := make([][]callEdge, n)                 // ret -> (caller, rule)
	byRule := make([][]callEdge, len(g.ruleStart)) // rule -> (caller, ret)
	startOf := make([][]int32, n)
	for s := 0; s < n; s++ {
		for c := 0; c < g.nclass; c++ {
			if t := g.trans[s*g.nclass+c]; t >= 0 {
				bytePred[t] = append(bytePred[t], int32(s))
			}
		}
		for _, cl := range g.calls[s] {
			byRet[cl.ret] = append(byRet[cl.ret], callEdge{int32(s), cl.rule})
			byRule[cl.rule] = append(byRule[cl.rule], callEdge{int32(s), cl.ret})
		}
	}
	for r, st := range g.ruleStart {
		startOf[st] = append(startOf[st], int32(r))
	}
	var work []int32
	mark := func(s int32) {
		if !live[s] {
			live[s] = true
			work = append(work, s)
		}
	}
	for s := 0; s < n; s++ {
		if g.final[s] {
			mark(int32(s))
		}
	}
	for len(work) > 0 {
		s := work[len(work)-1]
		work = work[:len(work)-1]
		for _, p := range bytePred[s] {
			mark(p)
		}
		for _, e := range byRet[s] {
			if productive[e.other] {
				mark(e.from)
			}
		}
		for _, r := range startOf[s] {
			if productive[r] {
				continue
			}
			productive[r] = true
			for _, e := range byRule[r] {
				if live[e.other] {
					mark(e.from)
				}
			}
		}
	}
	if !productive[g.root] {
		return errors.New("grammar: the schema admits no value (check enum, const, minimum/maximum, minItems/maxItems and minLength/maxLength for contradictions)")
	}
	for s := 0; s < n; s++ {
		has := false
		for c := 0; c < g.nclass; c++ {
			i := s*g.nclass + c
			if t := g.trans[i]; t >= 0 && !live[t] {
				g.trans[i] = -1
			}
			if g.trans[i] >= 0 {
				has = true
			}
		}
		g.hasBytes[s] = has
		kept := g.calls[s][:0]
		for _, cl := range g.calls[s] {
			if productive[cl.rule] && live[cl.ret] {
				kept = append(kept, cl)
			}
		}
		g.calls[s] = kept
	}
	return nil
}
