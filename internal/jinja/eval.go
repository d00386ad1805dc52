package jinja

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// renderer is the state of one Render. It evaluates the syntax tree
// directly, charging every step to the budgets: the Go recursion it uses
// is bounded by the parser's nesting limit times Limits.Depth.
type renderer struct {
	ctx       context.Context
	done      <-chan struct{}
	lim       Limits
	now       func() time.Time
	steps     int64
	nextCheck int64
	alloc     int64
	depth     int
	maxDepth  int
	line      int
	out       *textBuf
	outMax    int64
	outBudget Budget
	root, sc  *scope
}

// Loop control travels up as errors to the loop; the parser makes sure
// they never leave one.
var (
	errBreak    = errors.New("jinja: break outside a loop")
	errContinue = errors.New("jinja: continue outside a loop")
)

// tick charges n steps, and every Limits.CheckEvery steps looks at the
// context.
func (r *renderer) tick(n int64) error {
	r.steps += n
	if r.steps < r.nextCheck {
		return nil
	}
	return r.checkpoint()
}

func (r *renderer) checkpoint() error {
	if r.steps > r.lim.Steps {
		return r.budget(BudgetSteps, r.lim.Steps)
	}
	if err := r.checkCtx(); err != nil {
		return err
	}
	r.nextCheck = min(r.steps+r.lim.CheckEvery, r.lim.Steps+1)
	return nil
}

func (r *renderer) checkCtx() error {
	select {
	case <-r.done:
		return fmt.Errorf("template render stopped: %w", context.Cause(r.ctx))
	default:
		return nil
	}
}

func (r *renderer) budget(b Budget, limit int64) error {
	return &BudgetError{Budget: b, Limit: limit, Line: r.line}
}

// work charges the steps of walking or building bytes bytes and items
// items.
func (r *renderer) work(bytes, items int) error {
	return r.tick(1 + int64(bytes)>>8 + int64(items)>>3)
}

// allocate charges n bytes to the allocation budget.
func (r *renderer) allocate(n int) error {
	r.alloc += int64(n)
	if r.alloc > r.lim.AllocBytes {
		return r.budget(BudgetAlloc, r.lim.AllocBytes)
	}
	return nil
}

// newString checks a string of n bytes the template is about to build.
func (r *renderer) newString(n int) error {
	if int64(n) > r.lim.StringBytes {
		return r.budget(BudgetString, r.lim.StringBytes)
	}
	if err := r.allocate(n); err != nil {
		return err
	}
	return r.work(n, 0)
}

// newItems checks a list, tuple or dict of n items the template is about
// to build.
func (r *renderer) newItems(n int) error {
	if n > r.lim.Items {
		return r.budget(BudgetItems, int64(r.lim.Items))
	}
	if err := r.allocate(n * 48); err != nil {
		return err
	}
	return r.work(0, n)
}

func (r *renderer) errorf(kind ErrorKind, format string, args ...any) error {
	return &Error{Kind: kind, Line: r.line, Msg: fmt.Sprintf(format, args...)}
}

// undefError is the error of using an undefined value.
func (r *renderer) undefError(v Value) error {
	kind := ErrUndefined
	if v.undefHow() == undefUnsafe {
		kind = ErrSecurity
	}
	return &Error{Kind: kind, Line: r.line, Msg: undefMessage(v)}
}

// write appends a string value to the current output.
func (r *renderer) write(v Value) error {
	if int64(r.out.len()+len(v.s)) > r.outMax {
		return r.budget(r.outBudget, r.outMax)
	}
	if err := r.allocate(len(v.s)); err != nil {
		return err
	}
	if err := r.work(len(v.s), 0); err != nil {
		return err
	}
	r.out.write(v)
	return nil
}

// capture runs body in scope sc and returns what it wrote.
func (r *renderer) capture(body []stmt, sc *scope) (Value, error) {
	out, max, budget, prev := r.out, r.outMax, r.outBudget, r.sc
	buf := &textBuf{}
	r.out, r.outMax, r.outBudget, r.sc = buf, r.lim.StringBytes, BudgetString, sc
	err := r.execBody(body)
	r.out, r.outMax, r.outBudget, r.sc = out, max, budget, prev
	if err != nil {
		return Value{}, err
	}
	return buf.value(), nil
}

// call depth, counted.
func (r *renderer) enterCall() error {
	r.depth++
	r.maxDepth = max(r.maxDepth, r.depth)
	if r.depth > r.lim.Depth {
		return r.budget(BudgetDepth, int64(r.lim.Depth))
	}
	return nil
}

func (r *renderer) leaveCall() { r.depth-- }

// Scopes. Jinja2 gives each loop iteration, macro call, call block,
// filter block, set block and with block a scope of its own; if blocks
// share their parent's. Names are looked up from the innermost scope out,
// then among the builtins.

type scope struct {
	parent *scope
	vars   []scopeVar
	index  map[string]int // for scopes with many names (the render's variables)
}

type scopeVar struct {
	name string
	v    Value
}

const scopeIndexMin = 16

func (s *scope) set(name string, v Value) {
	if s.index != nil {
		if i, ok := s.index[name]; ok {
			s.vars[i].v = v
			return
		}
	} else {
		for i := range s.vars {
			if s.vars[i].name == name {
				s.vars[i].v = v
				return
			}
		}
	}
	s.vars = append(s.vars, scopeVar{name: name, v: v})
	if s.index != nil {
		s.index[name] = len(s.vars) - 1
	} else if len(s.vars) > scopeIndexMin {
		s.index = make(map[string]int, len(s.vars)*2)
		for i, sv := range s.vars {
			s.index[sv.name] = i
		}
	}
}

func (s *scope) get(name string) (Value, bool) {
	for ; s != nil; s = s.parent {
		if s.index != nil {
			if i, ok := s.index[name]; ok {
				return s.vars[i].v, true
			}
			continue
		}
		for i := len(s.vars) - 1; i >= 0; i-- {
			if s.vars[i].name == name {
				return s.vars[i].v, true
			}
		}
	}
	return Value{}, false
}

func (s *scope) reset() {
	clear(s.vars)
	s.vars, s.index = s.vars[:0], nil
}

func (r *renderer) lookup(name string) Value {
	if v, ok := r.sc.get(name); ok {
		return v
	}
	if b := builtin(name); b != nil {
		return Value{kind: KindCallable, ref: b}
	}
	return Undefined(name)
}

// Statements.

func (r *renderer) execBody(body []stmt) error {
	for _, s := range body {
		if err := s.exec(r); err != nil {
			return err
		}
	}
	return nil
}

func (s *textStmt) exec(r *renderer) error {
	return r.write(Value{kind: KindString, s: s.text})
}

func (s *outputStmt) exec(r *renderer) error {
	r.line = s.line
	v, err := s.e.eval(r)
	if err != nil {
		return err
	}
	sv, err := r.str(v)
	if err != nil {
		return err
	}
	return r.write(sv)
}

func (s *ifStmt) exec(r *renderer) error {
	r.line = s.line
	if err := r.tick(1); err != nil {
		return err
	}
	v, err := s.cond.eval(r)
	if err != nil {
		return err
	}
	if v.truth() {
		return r.execBody(s.body)
	}
	return r.execBody(s.else_)
}

func (s *setStmt) exec(r *renderer) error {
	r.line = s.line
	v, err := s.value.eval(r)
	if err != nil {
		return err
	}
	return r.assign(s.target, v)
}

func (s *setBlockStmt) exec(r *renderer) error {
	r.line = s.line
	v, err := r.filteredBlock(s.body, s.filters)
	if err != nil {
		return err
	}
	return r.assign(s.target, v)
}

func (s *filterBlockStmt) exec(r *renderer) error {
	r.line = s.line
	v, err := r.filteredBlock(s.body, s.filters)
	if err != nil {
		return err
	}
	sv, err := r.str(v)
	if err != nil {
		return err
	}
	return r.write(sv)
}

// filteredBlock captures body, in a scope of its own, and runs the chain
// of filters (parsed without an input) on what it wrote.
func (r *renderer) filteredBlock(body []stmt, chain []*filterExpr) (Value, error) {
	v, err := r.capture(body, &scope{parent: r.sc})
	if err != nil {
		return Value{}, err
	}
	for _, f := range chain {
		if v, err = f.apply(r, v); err != nil {
			return Value{}, err
		}
	}
	return v, nil
}

func (s *macroStmt) exec(r *renderer) error {
	r.sc.set(s.m.name, Value{kind: KindCallable, ref: &callable{name: s.m.name, macro: s.m, closure: r.sc}})
	return nil
}

func (s *callBlockStmt) exec(r *renderer) error {
	r.line = s.line
	caller := Value{kind: KindCallable, ref: &callable{name: "caller", macro: s.caller, closure: r.sc}}
	v, err := r.evalCall(s.call, &namedArg{name: "caller", v: caller})
	if err != nil {
		return err
	}
	sv, err := r.str(v)
	if err != nil {
		return err
	}
	return r.write(sv)
}

func (s *withStmt) exec(r *renderer) error {
	r.line = s.line
	vals := make([]Value, len(s.values))
	for i, e := range s.values {
		v, err := e.eval(r)
		if err != nil {
			return err
		}
		vals[i] = v
	}
	prev := r.sc
	r.sc = &scope{parent: prev}
	defer func() { r.sc = prev }()
	for i, t := range s.targets {
		if err := r.assign(t, vals[i]); err != nil {
			return err
		}
	}
	return r.execBody(s.body)
}

func (s *scopeStmt) exec(r *renderer) error {
	if s.shared {
		return r.execBody(s.body)
	}
	prev := r.sc
	r.sc = &scope{parent: prev}
	defer func() { r.sc = prev }()
	return r.execBody(s.body)
}

func (s *breakStmt) exec(*renderer) error    { return errBreak }
func (s *continueStmt) exec(*renderer) error { return errContinue }

// assign binds a value to a target in the current scope.
func (r *renderer) assign(t target, v Value) error {
	switch t := t.(type) {
	case *nameTarget:
		r.sc.set(t.name, v)
		return nil
	case *nsTarget:
		ns := r.lookup(t.ns)
		if ns.kind != KindNamespace {
			return r.errorf(ErrType, "cannot assign attribute on non-namespace object")
		}
		ns.dict().SetStr(t.attr, v)
		return nil
	case *tupleTarget:
		items, err := r.unpack(v, len(t.items))
		if err != nil {
			return err
		}
		for i, it := range t.items {
			if err := r.assign(it, items[i]); err != nil {
				return err
			}
		}
		return nil
	}
	return r.errorf(ErrType, "cannot assign to %T", t)
}

// unpack splits v into n values, as Python's tuple unpacking.
func (r *renderer) unpack(v Value, n int) ([]Value, error) {
	it, err := r.iterate(v)
	if err != nil {
		return nil, err
	}
	switch {
	case it.len() > n:
		return nil, r.errorf(ErrValue, "too many values to unpack (expected %d)", n)
	case it.len() < n:
		return nil, r.errorf(ErrValue, "not enough values to unpack (expected %d, got %d)", n, it.len())
	}
	out := make([]Value, n)
	for i := range out {
		out[i] = it.at(i)
	}
	return out, nil
}

// Loops.

func (s *forStmt) exec(r *renderer) error {
	r.line = s.line
	v, err := s.iter.eval(r)
	if err != nil {
		return err
	}
	return r.runLoop(s, v, 0)
}

// runLoop runs a for loop over v at recursion depth depth (recursive loops
// call it again through loop(...)).
func (r *renderer) runLoop(s *forStmt, v Value, depth int) error {
	seq, err := r.iterate(v)
	if err != nil {
		return err
	}
	outer := r.sc
	sc := &scope{parent: outer}
	r.sc = sc
	defer func() { r.sc = outer }()
	if s.cond != nil {
		if seq, err = r.filterLoop(s, seq, sc); err != nil {
			return err
		}
	}
	n := seq.len()
	if n == 0 {
		sc.reset()
		return r.execBody(s.else_)
	}
	loop := &loopState{stmt: s, seq: seq, depth: depth, outer: outer}
	loopV := Value{kind: KindObject, ref: loop}
	for i := 0; i < n; i++ {
		if err := r.tick(1); err != nil {
			return err
		}
		loop.index = i
		sc.reset()
		if err := r.assign(s.target, seq.at(i)); err != nil {
			return err
		}
		sc.set("loop", loopV)
		err := r.execBody(s.body)
		switch {
		case err == errBreak:
			return nil
		case err == errContinue:
		case err != nil:
			return err
		}
	}
	return nil
}

// filterLoop keeps the items for which the loop's if clause holds.
func (r *renderer) filterLoop(s *forStmt, seq sequence, sc *scope) (sequence, error) {
	var kept []Value
	for i := 0; i < seq.len(); i++ {
		if err := r.tick(1); err != nil {
			return sequence{}, err
		}
		sc.reset()
		it := seq.at(i)
		if err := r.assign(s.target, it); err != nil {
			return sequence{}, err
		}
		ok, err := s.cond.eval(r)
		if err != nil {
			return sequence{}, err
		}
		if ok.truth() {
			if err := r.newItems(len(kept) + 1); err != nil {
				return sequence{}, err
			}
			kept = append(kept, it)
		}
	}
	return sequence{items: kept}, nil
}

// sequence is what a loop walks: items, a range or a string's characters,
// without copying them.
type sequence struct {
	items []Value
	rng   *rangeVal
	str   Value // a string: its characters
	cuts  []int // byte offset of each character of str, and len(str.s)
}

func (q sequence) len() int {
	switch {
	case q.rng != nil:
		return int(q.rng.len())
	case q.cuts != nil:
		return len(q.cuts) - 1
	}
	return len(q.items)
}

func (q sequence) at(i int) Value {
	switch {
	case q.rng != nil:
		return Int(q.rng.at(int64(i)))
	case q.cuts != nil:
		return substr(q.str, q.cuts[i], q.cuts[i+1])
	}
	return q.items[i]
}

// values returns the items as a slice (a range or string is built).
func (r *renderer) values(q sequence) ([]Value, error) {
	if q.rng == nil && q.cuts == nil {
		return q.items, nil
	}
	n := q.len()
	if err := r.newItems(n); err != nil {
		return nil, err
	}
	out := make([]Value, n)
	for i := range out {
		out[i] = q.at(i)
	}
	return out, nil
}

// iterate returns what iterating over v gives, as Python's iter(v): a
// list's or tuple's items, a dict's keys, a string's characters, a
// range's numbers; an iterator is consumed; undefined gives nothing.
func (r *renderer) iterate(v Value) (sequence, error) {
	switch v.kind {
	case KindList, KindTuple:
		return sequence{items: v.list().Items}, nil
	case KindDict:
		return sequence{items: v.dict().keys}, nil
	case KindString:
		if err := r.work(len(v.s), 0); err != nil {
			return sequence{}, err
		}
		cuts := make([]int, 0, len(v.s)+1)
		for i := range v.s {
			cuts = append(cuts, i)
		}
		return sequence{str: v, cuts: append(cuts, len(v.s))}, nil
	case KindRange:
		return sequence{rng: v.ref.(*rangeVal)}, nil
	case KindIter:
		return sequence{items: v.ref.(*iterState).drain()}, nil
	case KindUndefined:
		return sequence{}, nil
	case KindObject:
		if it, ok := v.ref.(interface{ items() []Value }); ok {
			return sequence{items: it.items()}, nil
		}
	}
	return sequence{}, r.errorf(ErrType, "'%s' object is not iterable", v.typeName())
}

// loopState is the loop variable of a for loop.
type loopState struct {
	stmt    *forStmt
	seq     sequence
	index   int
	depth   int
	outer   *scope
	changed *Value // last value given to loop.changed
}

func (l *loopState) typeName() string { return "LoopContext" }

func (l *loopState) repr() string {
	return fmt.Sprintf("<LoopContext %d/%d>", l.index+1, l.seq.len())
}

func (l *loopState) attr(r *renderer, name string) (Value, error) {
	n := l.seq.len()
	switch name {
	case "index":
		return Int(int64(l.index + 1)), nil
	case "index0":
		return Int(int64(l.index)), nil
	case "revindex":
		return Int(int64(n - l.index)), nil
	case "revindex0":
		return Int(int64(n - l.index - 1)), nil
	case "first":
		return Bool(l.index == 0), nil
	case "last":
		return Bool(l.index == n-1), nil
	case "length":
		return Int(int64(n)), nil
	case "depth":
		return Int(int64(l.depth + 1)), nil
	case "depth0":
		return Int(int64(l.depth)), nil
	case "previtem":
		if l.index == 0 {
			return undefMsgf("there is no previous item"), nil
		}
		return l.seq.at(l.index - 1), nil
	case "nextitem":
		if l.index+1 >= n {
			return undefMsgf("there is no next item"), nil
		}
		return l.seq.at(l.index + 1), nil
	case "cycle":
		return Value{kind: KindCallable, ref: &callable{name: "cycle", fn: func(r *renderer, a *args) (Value, error) {
			if len(a.pos) == 0 {
				return Value{}, r.errorf(ErrType, "no items for cycling given")
			}
			return a.pos[l.index%len(a.pos)], nil
		}}}, nil
	case "changed":
		return Value{kind: KindCallable, ref: &callable{name: "changed", fn: func(r *renderer, a *args) (Value, error) {
			cur := newTuple(a.pos)
			if l.changed != nil {
				same, err := r.equal(*l.changed, cur, 0)
				if err != nil || same {
					return Bool(false), err
				}
			}
			l.changed = &cur
			return Bool(true), nil
		}}}, nil
	}
	return undefOn(undefAttr, Value{kind: KindObject, ref: l}, name, 0), nil
}

// call renders the loop body over another iterable, one level deeper
// (recursive loops).
func (l *loopState) call(r *renderer, a *args) (Value, error) {
	if !l.stmt.recursive {
		return Value{}, r.errorf(ErrType, "the loop must have the 'recursive' marker to be called recursively")
	}
	if len(a.pos) != 1 || len(a.kw) != 0 {
		return Value{}, r.errorf(ErrType, "loop() takes one iterable")
	}
	if err := r.enterCall(); err != nil {
		return Value{}, err
	}
	defer r.leaveCall()
	out, max, budget, prev := r.out, r.outMax, r.outBudget, r.sc
	buf := &textBuf{}
	r.out, r.outMax, r.outBudget, r.sc = buf, r.lim.StringBytes, BudgetString, l.outer
	err := r.runLoop(l.stmt, a.pos[0], l.depth+1)
	r.out, r.outMax, r.outBudget, r.sc = out, max, budget, prev
	if err != nil {
		return Value{}, err
	}
	return buf.value(), nil
}
