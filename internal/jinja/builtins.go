package jinja

// The globals of the environment: Jinja2's range (with the sandbox's
// limit), dict, namespace, cycler and joiner, and transformers'
// raise_exception and strftime_now.

// builtins are the global functions; never modified.
var builtins = map[string]*callable{
	"range":           {name: "range", fn: bRange},
	"dict":            {name: "dict", fn: bDict},
	"namespace":       {name: "namespace", fn: bNamespace},
	"cycler":          {name: "cycler", fn: bCycler},
	"joiner":          {name: "joiner", fn: bJoiner},
	"raise_exception": {name: "raise_exception", fn: bRaise},
	"strftime_now":    {name: "strftime_now", fn: bStrftimeNow},
}

func builtin(name string) *callable { return builtins[name] }

func bRange(r *renderer, a *args) (Value, error) {
	if len(a.kw) > 0 {
		return Value{}, r.errorf(ErrType, "range() takes no keyword arguments")
	}
	var nums [3]int64
	for i, v := range a.pos {
		if i >= 3 {
			return Value{}, r.errorf(ErrType, "range expected at most 3 arguments, got %d", len(a.pos))
		}
		if !v.isInt() {
			if v.kind == KindUndefined {
				return Value{}, r.undefError(v)
			}
			return Value{}, r.errorf(ErrType, "'%s' object cannot be interpreted as an integer", v.typeName())
		}
		nums[i] = v.n
	}
	rg := &rangeVal{step: 1}
	switch len(a.pos) {
	case 0:
		return Value{}, r.errorf(ErrType, "range expected at least 1 argument, got 0")
	case 1:
		rg.stop = nums[0]
	case 2:
		rg.start, rg.stop = nums[0], nums[1]
	case 3:
		rg.start, rg.stop, rg.step = nums[0], nums[1], nums[2]
		if rg.step == 0 {
			return Value{}, r.errorf(ErrValue, "range() arg 3 must not be zero")
		}
	}
	if n := rg.len(); n > rangeItemsMax || n > int64(r.lim.Items) || n < 0 {
		return Value{}, r.budget(BudgetItems, min(rangeItemsMax, int64(r.lim.Items)))
	}
	return Value{kind: KindRange, ref: rg}, nil
}

// dictFrom builds a dict from a mapping or an iterable of pairs, then
// keyword arguments, as Python's dict(...).
func (r *renderer) dictFrom(fn string, a *args) (*Dict, error) {
	d := NewDict()
	if len(a.pos) > 1 {
		return nil, r.errorf(ErrType, "%s expected at most 1 argument, got %d", fn, len(a.pos))
	}
	if len(a.pos) == 1 {
		src := a.pos[0]
		if src.kind == KindDict {
			sd := src.dict()
			if err := r.newItems(sd.Len()); err != nil {
				return nil, err
			}
			for i, k := range sd.keys {
				d.Set(k, sd.vals[i])
			}
		} else {
			seq, err := r.iterate(src)
			if err != nil {
				return nil, err
			}
			if err := r.newItems(seq.len()); err != nil {
				return nil, err
			}
			for i := 0; i < seq.len(); i++ {
				kv, err := r.unpack(seq.at(i), 2)
				if err != nil {
					return nil, err
				}
				if !d.Set(kv[0], kv[1]) {
					return nil, r.errorf(ErrType, "unhashable type: '%s'", kv[0].typeName())
				}
			}
		}
	}
	if err := r.newItems(d.Len() + len(a.kw)); err != nil {
		return nil, err
	}
	for _, k := range a.kw {
		d.SetStr(k.name, k.v)
	}
	return d, nil
}

func bDict(r *renderer, a *args) (Value, error) {
	d, err := r.dictFrom("dict", a)
	if err != nil {
		return Value{}, err
	}
	return DictValue(d), nil
}

func bNamespace(r *renderer, a *args) (Value, error) {
	d, err := r.dictFrom("namespace", a)
	if err != nil {
		return Value{}, err
	}
	return Value{kind: KindNamespace, ref: d}, nil
}

func bRaise(r *renderer, a *args) (Value, error) {
	msg := ""
	if len(a.pos) > 0 {
		s, err := r.str(a.pos[0])
		if err != nil {
			return Value{}, err
		}
		msg = s.s
	}
	return Value{}, &Error{Kind: ErrRaised, Line: r.line, Msg: msg}
}

func bStrftimeNow(r *renderer, a *args) (Value, error) {
	if len(a.pos) != 1 || a.pos[0].kind != KindString {
		return Value{}, r.errorf(ErrType, "strftime_now takes one format string")
	}
	return Str(strftime(r.now(), a.pos[0].s)), nil
}

// cycler is Jinja2's cycler: next() gives the items in turn.
type cycler struct {
	items []Value
	pos   int
}

func bCycler(r *renderer, a *args) (Value, error) {
	if len(a.pos) == 0 {
		return Value{}, r.errorf(ErrType, "at least one item has to be provided")
	}
	return Value{kind: KindObject, ref: &cycler{items: a.pos}}, nil
}

func (c *cycler) typeName() string { return "Cycler" }
func (c *cycler) repr() string     { return "<Cycler>" }

func (c *cycler) attr(r *renderer, name string) (Value, error) {
	switch name {
	case "current":
		return c.items[c.pos], nil
	case "next":
		return Value{kind: KindCallable, ref: &callable{name: "next", fn: func(r *renderer, a *args) (Value, error) {
			v := c.items[c.pos]
			c.pos = (c.pos + 1) % len(c.items)
			return v, nil
		}}}, nil
	case "reset":
		return Value{kind: KindCallable, ref: &callable{name: "reset", fn: func(r *renderer, a *args) (Value, error) {
			c.pos = 0
			return None(), nil
		}}}, nil
	}
	return undefOn(undefAttr, Value{kind: KindObject, ref: c}, name, 0), nil
}

// joiner is Jinja2's joiner: "" the first time it is called, then sep.
type joiner struct {
	sep   Value
	first bool
}

func bJoiner(r *renderer, a *args) (Value, error) {
	sep, ok := a.get(0, "sep")
	if !ok {
		sep = Str(", ")
	}
	return Value{kind: KindObject, ref: &joiner{sep: sep, first: true}}, nil
}

func (j *joiner) typeName() string { return "Joiner" }
func (j *joiner) repr() string     { return "<Joiner>" }

func (j *joiner) attr(r *renderer, name string) (Value, error) {
	return undefOn(undefAttr, Value{kind: KindObject, ref: j}, name, 0), nil
}

func (j *joiner) call(r *renderer, a *args) (Value, error) {
	if j.first {
		j.first = false
		return Str(""), nil
	}
	return j.sep, nil
}
