package jinja

// Expression evaluation.

// args are the arguments of a call, a filter or a test.
type args struct {
	pos []Value
	kw  []namedArg
}

type namedArg struct {
	name string
	v    Value
}

// get returns argument i, given by position or by name; ok is false when
// it was not given.
func (a *args) get(i int, name string) (Value, bool) {
	if i < len(a.pos) {
		return a.pos[i], true
	}
	for _, k := range a.kw {
		if k.name == name {
			return k.v, true
		}
	}
	return Value{}, false
}

// check refuses more positional arguments than names, and keywords not in
// names.
func (a *args) check(r *renderer, fn string, names ...string) error {
	if len(a.pos) > len(names) {
		return r.errorf(ErrType, "%s() takes at most %d arguments (%d given)", fn, len(names), len(a.pos))
	}
outer:
	for _, k := range a.kw {
		for i, n := range names {
			if n == k.name {
				if i < len(a.pos) {
					return r.errorf(ErrType, "%s() got multiple values for argument '%s'", fn, n)
				}
				continue outer
			}
		}
		return r.errorf(ErrType, "%s() got an unexpected keyword argument '%s'", fn, k.name)
	}
	return nil
}

// noArgs is the arguments of a call without any; never modified.
var noArgs = &args{}

func (r *renderer) evalArgs(c *callArgs, extra *namedArg) (*args, error) {
	if len(c.args) == 0 && len(c.kwargs) == 0 && c.dynArgs == nil && c.dynKwargs == nil && extra == nil {
		return noArgs, nil
	}
	a := &args{}
	if len(c.args) > 0 {
		a.pos = make([]Value, 0, len(c.args))
		for _, e := range c.args {
			v, err := e.eval(r)
			if err != nil {
				return nil, err
			}
			a.pos = append(a.pos, v)
		}
	}
	if c.dynArgs != nil {
		v, err := c.dynArgs.eval(r)
		if err != nil {
			return nil, err
		}
		seq, err := r.iterate(v)
		if err != nil {
			return nil, err
		}
		items, err := r.values(seq)
		if err != nil {
			return nil, err
		}
		if err := r.newItems(len(a.pos) + len(items)); err != nil {
			return nil, err
		}
		a.pos = append(a.pos, items...)
	}
	for _, k := range c.kwargs {
		v, err := k.e.eval(r)
		if err != nil {
			return nil, err
		}
		a.kw = append(a.kw, namedArg{name: k.name, v: v})
	}
	if c.dynKwargs != nil {
		v, err := c.dynKwargs.eval(r)
		if err != nil {
			return nil, err
		}
		if v.kind != KindDict {
			return nil, r.errorf(ErrType, "argument after ** must be a mapping, not %s", v.typeName())
		}
		d := v.dict()
		for i, k := range d.keys {
			if k.kind != KindString {
				return nil, r.errorf(ErrType, "keywords must be strings")
			}
			a.kw = append(a.kw, namedArg{name: k.s, v: d.vals[i]})
		}
	}
	if extra != nil {
		a.kw = append(a.kw, *extra)
	}
	return a, nil
}

func (e *constExpr) eval(r *renderer) (Value, error) { return e.v, r.tick(1) }

func (e *nameExpr) eval(r *renderer) (Value, error) {
	return r.lookup(e.name), r.tick(1)
}

func (e *getattrExpr) eval(r *renderer) (Value, error) {
	obj, err := e.obj.eval(r)
	if err != nil {
		return Value{}, err
	}
	if err := r.tick(1); err != nil {
		return Value{}, err
	}
	r.line = e.line
	return r.getattr(obj, e.name)
}

func (e *getitemExpr) eval(r *renderer) (Value, error) {
	obj, key, err := r.evalPair(e.obj, e.key, e.line)
	if err != nil {
		return Value{}, err
	}
	return r.getitem(obj, key)
}

// evalPair evaluates two operands, then charges the operation at line.
func (r *renderer) evalPair(a, b expr, line int) (Value, Value, error) {
	x, err := a.eval(r)
	if err != nil {
		return Value{}, Value{}, err
	}
	y, err := b.eval(r)
	if err != nil {
		return Value{}, Value{}, err
	}
	r.line = line
	return x, y, r.tick(1)
}

func (e *sliceExpr) eval(r *renderer) (Value, error) {
	obj, err := e.obj.eval(r)
	if err != nil {
		return Value{}, err
	}
	var bounds [3]Value
	for i, b := range []expr{e.start, e.stop, e.step} {
		if b == nil {
			bounds[i] = None()
			continue
		}
		if bounds[i], err = b.eval(r); err != nil {
			return Value{}, err
		}
	}
	r.line = e.line
	return r.slice(obj, bounds[0], bounds[1], bounds[2])
}

func (e *callExpr) eval(r *renderer) (Value, error) { return r.evalCall(e, nil) }

// evalCall calls e, with extra as one more keyword argument (a call
// block's caller).
func (r *renderer) evalCall(e *callExpr, extra *namedArg) (Value, error) {
	if ga, ok := e.fn.(*getattrExpr); ok {
		obj, err := ga.obj.eval(r)
		if err != nil {
			return Value{}, err
		}
		if m := methodFor(obj, ga.name); m != nil {
			a, err := r.evalArgs(&e.callArgs, extra)
			if err != nil {
				return Value{}, err
			}
			if err := r.tick(1); err != nil {
				return Value{}, err
			}
			r.line = e.line
			return m(r, obj, a)
		}
		r.line = ga.line
		fn, err := r.getattr(obj, ga.name)
		if err != nil {
			return Value{}, err
		}
		return r.callWithArgs(e, fn, extra)
	}
	fn, err := e.fn.eval(r)
	if err != nil {
		return Value{}, err
	}
	return r.callWithArgs(e, fn, extra)
}

func (r *renderer) callWithArgs(e *callExpr, fn Value, extra *namedArg) (Value, error) {
	a, err := r.evalArgs(&e.callArgs, extra)
	if err != nil {
		return Value{}, err
	}
	if err := r.tick(1); err != nil {
		return Value{}, err
	}
	r.line = e.line
	return r.call(fn, a)
}

// call calls a value.
func (r *renderer) call(fn Value, a *args) (Value, error) {
	switch fn.kind {
	case KindCallable:
		c := fn.ref.(*callable)
		if c.macro != nil {
			return r.callMacro(c, a)
		}
		return c.fn(r, a)
	case KindObject:
		switch o := fn.ref.(type) {
		case *loopState:
			return o.call(r, a)
		case *joiner:
			return o.call(r, a)
		}
	case KindUndefined:
		return Value{}, r.undefError(fn)
	}
	return Value{}, r.errorf(ErrType, "'%s' object is not callable", fn.typeName())
}

// callable is a function value: a macro (or a call block's caller), or a
// builtin or bound method.
type callable struct {
	name    string
	macro   *macroDef
	closure *scope
	fn      func(r *renderer, a *args) (Value, error)
	recv    string // bound method: the receiver's type name
}

func (c *callable) typeName() string {
	if c.macro != nil {
		return "Macro"
	}
	return "builtin_function_or_method"
}

func (c *callable) repr() string {
	switch {
	case c.macro != nil && c.name == "caller":
		return "<Macro caller>"
	case c.macro != nil:
		return "<Macro '" + c.name + "'>"
	case c.recv != "":
		return "<built-in method " + c.name + " of " + c.recv + " object>"
	}
	return "<built-in function " + c.name + ">"
}

// callMacro runs a macro's body in a scope of its own, on top of the scope
// where it was defined, with its parameters bound as Jinja2 binds them.
func (r *renderer) callMacro(c *callable, a *args) (Value, error) {
	m := c.macro
	if err := r.enterCall(); err != nil {
		return Value{}, err
	}
	defer r.leaveCall()
	if len(a.pos) > len(m.params) && !m.varargs {
		return Value{}, r.errorf(ErrType, "macro '%s' takes not more than %d argument(s)", m.name, len(m.params))
	}
	sc := &scope{parent: c.closure}
	prev := r.sc
	r.sc = sc
	defer func() { r.sc = prev }()
	used := make([]bool, len(a.kw))
	firstDefault := len(m.params) - len(m.defaults)
	for i, p := range m.params {
		v, given := Value{}, false
		if i < len(a.pos) {
			v, given = a.pos[i], true
		}
		for k, kw := range a.kw {
			if kw.name == p {
				if given {
					return Value{}, r.errorf(ErrType, "macro '%s' got multiple values for argument '%s'", m.name, p)
				}
				v, given, used[k] = kw.v, true, true
			}
		}
		if !given {
			if i >= firstDefault {
				d, err := m.defaults[i-firstDefault].eval(r)
				if err != nil {
					return Value{}, err
				}
				v = d
			} else {
				v = undefMsgf("parameter '" + p + "' was not provided")
			}
		}
		sc.set(p, v)
	}
	var extraKw *Dict
	callerSet := false
	for k, kw := range a.kw {
		if used[k] {
			continue
		}
		switch {
		case kw.name == "caller" && m.caller:
			sc.set("caller", kw.v)
			callerSet = true
		case m.kwargs:
			if extraKw == nil {
				extraKw = NewDict()
			}
			extraKw.SetStr(kw.name, kw.v)
		default:
			return Value{}, r.errorf(ErrType, "macro '%s' takes no keyword argument '%s'", m.name, kw.name)
		}
	}
	if m.varargs {
		var extra []Value
		if len(a.pos) > len(m.params) {
			extra = a.pos[len(m.params):]
		}
		sc.set("varargs", newTuple(extra))
	}
	if m.kwargs {
		if extraKw == nil {
			extraKw = NewDict()
		}
		sc.set("kwargs", DictValue(extraKw))
	}
	if m.caller && !callerSet {
		sc.set("caller", undefMsgf("No caller defined"))
	}
	return r.capture(m.body, sc)
}

func (e *filterExpr) eval(r *renderer) (Value, error) {
	v, err := e.e.eval(r)
	if err != nil {
		return Value{}, err
	}
	return e.apply(r, v)
}

// apply runs the filter on v.
func (e *filterExpr) apply(r *renderer, v Value) (Value, error) {
	a, err := r.evalArgs(&e.callArgs, nil)
	if err != nil {
		return Value{}, err
	}
	if err := r.tick(1); err != nil {
		return Value{}, err
	}
	r.line = e.line
	return e.fn(r, v, a)
}

func (e *testExpr) eval(r *renderer) (Value, error) {
	v, err := e.e.eval(r)
	if err != nil {
		return Value{}, err
	}
	a, err := r.evalArgs(&e.callArgs, nil)
	if err != nil {
		return Value{}, err
	}
	if err := r.tick(1); err != nil {
		return Value{}, err
	}
	r.line = e.line
	ok, err := e.fn(r, v, a)
	return Bool(ok), err
}

func (e *unaryExpr) eval(r *renderer) (Value, error) {
	v, err := e.e.eval(r)
	if err != nil {
		return Value{}, err
	}
	if err := r.tick(1); err != nil {
		return Value{}, err
	}
	r.line = e.line
	switch e.op {
	case '!':
		return Bool(!v.truth()), nil
	case '-':
		return r.neg(v)
	}
	return r.pos(v)
}

func (e *binExpr) eval(r *renderer) (Value, error) {
	l, rv, err := r.evalPair(e.l, e.r, e.line)
	if err != nil {
		return Value{}, err
	}
	return r.binop(e.op, l, rv)
}

func (e *logicExpr) eval(r *renderer) (Value, error) {
	l, err := e.l.eval(r)
	if err != nil {
		return Value{}, err
	}
	if err := r.tick(1); err != nil {
		return Value{}, err
	}
	if l.truth() != e.and {
		return l, nil
	}
	return e.r.eval(r)
}

func (e *concatExpr) eval(r *renderer) (Value, error) {
	parts := make([]Value, len(e.items))
	for i, it := range e.items {
		v, err := it.eval(r)
		if err != nil {
			return Value{}, err
		}
		if parts[i], err = r.str(v); err != nil {
			return Value{}, err
		}
	}
	return r.joinStrings(sequence{items: parts}, Value{kind: KindString})
}

func (e *compareExpr) eval(r *renderer) (Value, error) {
	l, err := e.first.eval(r)
	if err != nil {
		return Value{}, err
	}
	for _, op := range e.ops {
		rv, err := op.e.eval(r)
		if err != nil {
			return Value{}, err
		}
		if err := r.tick(1); err != nil {
			return Value{}, err
		}
		r.line = e.line
		ok, err := r.compare(op.op, l, rv)
		if err != nil {
			return Value{}, err
		}
		if !ok {
			return Bool(false), nil
		}
		l = rv
	}
	return Bool(true), nil
}

func (e *condExpr) eval(r *renderer) (Value, error) {
	t, err := e.test.eval(r)
	if err != nil {
		return Value{}, err
	}
	if t.truth() {
		return e.then.eval(r)
	}
	if e.else_ == nil {
		return undefMsgf("the inline if-expression evaluated to false and no else section was defined"), nil
	}
	return e.else_.eval(r)
}

func (e *listExpr) eval(r *renderer) (Value, error) {
	items, err := r.evalItems(e.items)
	if err != nil {
		return Value{}, err
	}
	return NewList(items), nil
}

func (e *tupleExpr) eval(r *renderer) (Value, error) {
	items, err := r.evalItems(e.items)
	if err != nil {
		return Value{}, err
	}
	return newTuple(items), nil
}

func (r *renderer) evalItems(es []expr) ([]Value, error) {
	if err := r.newItems(len(es)); err != nil {
		return nil, err
	}
	items := make([]Value, len(es))
	for i, e := range es {
		v, err := e.eval(r)
		if err != nil {
			return nil, err
		}
		items[i] = v
	}
	return items, nil
}

func (e *dictExpr) eval(r *renderer) (Value, error) {
	if err := r.newItems(len(e.keys)); err != nil {
		return Value{}, err
	}
	d := NewDict()
	for i, ke := range e.keys {
		k, err := ke.eval(r)
		if err != nil {
			return Value{}, err
		}
		v, err := e.vals[i].eval(r)
		if err != nil {
			return Value{}, err
		}
		if !d.Set(k, v) {
			return Value{}, r.errorf(ErrType, "unhashable type: '%s'", k.typeName())
		}
	}
	return DictValue(d), nil
}
