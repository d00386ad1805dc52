package jinja

// Tests ("x is defined"), as Jinja2 defines them (jinja2/tests.py).

type testFunc func(r *renderer, v Value, a *args) (bool, error)

// lookupTest returns the test called name, or nil.
func lookupTest(name string) testFunc {
	switch name {
	case "defined":
		return func(r *renderer, v Value, a *args) (bool, error) { return v.kind != KindUndefined, nil }
	case "undefined":
		return func(r *renderer, v Value, a *args) (bool, error) { return v.kind == KindUndefined, nil }
	case "none":
		return func(r *renderer, v Value, a *args) (bool, error) { return v.kind == KindNone, nil }
	case "boolean":
		return func(r *renderer, v Value, a *args) (bool, error) { return v.kind == KindBool, nil }
	case "true":
		return func(r *renderer, v Value, a *args) (bool, error) { return v.kind == KindBool && v.n != 0, nil }
	case "false":
		return func(r *renderer, v Value, a *args) (bool, error) { return v.kind == KindBool && v.n == 0, nil }
	case "integer":
		return func(r *renderer, v Value, a *args) (bool, error) { return v.kind == KindInt, nil }
	case "float":
		return func(r *renderer, v Value, a *args) (bool, error) { return v.kind == KindFloat, nil }
	case "number":
		return func(r *renderer, v Value, a *args) (bool, error) { return v.isNumber(), nil }
	case "string":
		return func(r *renderer, v Value, a *args) (bool, error) { return v.kind == KindString, nil }
	case "mapping":
		return func(r *renderer, v Value, a *args) (bool, error) { return v.kind == KindDict, nil }
	case "sequence":
		return tSequence
	case "iterable":
		return tIterable
	case "callable":
		return tCallable
	case "escaped":
		return func(r *renderer, v Value, a *args) (bool, error) {
			return v.kind == KindString && v.flag&flagSafe != 0, nil
		}
	case "lower", "upper":
		upper := name == "upper"
		return func(r *renderer, v Value, a *args) (bool, error) {
			s, err := r.str(v)
			if err != nil {
				return false, err
			}
			ok, err := mIsCase(upper)(r, s, &args{})
			return ok.truth(), err
		}
	case "odd", "even":
		want := int64(0)
		if name == "odd" {
			want = 1
		}
		return func(r *renderer, v Value, a *args) (bool, error) {
			m, err := r.binop("%", v, Int(2))
			if err != nil {
				return false, err
			}
			return r.equal(m, Int(want), 0)
		}
	case "divisibleby":
		return func(r *renderer, v Value, a *args) (bool, error) {
			n, ok := a.get(0, "num")
			if !ok {
				return false, r.errorf(ErrType, "divisibleby() missing required argument 'num'")
			}
			m, err := r.binop("%", v, n)
			if err != nil {
				return false, err
			}
			return r.equal(m, Int(0), 0)
		}
	case "sameas":
		return tSameas
	case "in":
		return func(r *renderer, v Value, a *args) (bool, error) {
			seq, ok := a.get(0, "seq")
			if !ok {
				return false, r.errorf(ErrType, "in() missing required argument 'seq'")
			}
			return r.contains(seq, v)
		}
	case "filter":
		return func(r *renderer, v Value, a *args) (bool, error) {
			return v.kind == KindString && lookupFilter(v.s) != nil, nil
		}
	case "test":
		return func(r *renderer, v Value, a *args) (bool, error) {
			return v.kind == KindString && lookupTest(v.s) != nil, nil
		}
	case "==", "eq", "equalto":
		return tCompare("==")
	case "!=", "ne":
		return tCompare("!=")
	case ">", "gt", "greaterthan":
		return tCompare(">")
	case ">=", "ge":
		return tCompare(">=")
	case "<", "lt", "lessthan":
		return tCompare("<")
	case "<=", "le":
		return tCompare("<=")
	}
	return nil
}

func tCompare(op string) testFunc {
	return func(r *renderer, v Value, a *args) (bool, error) {
		other, ok := a.get(0, "other")
		if !ok {
			return false, r.errorf(ErrType, "the %s test takes one argument", op)
		}
		return r.compare(op, v, other)
	}
}

// tSequence: len(v) and v.__getitem__ both exist.
func tSequence(r *renderer, v Value, a *args) (bool, error) {
	switch v.kind {
	case KindUndefined, KindString, KindList, KindTuple, KindDict, KindRange:
		return true, nil
	}
	return false, nil
}

// tIterable: iter(v) works.
func tIterable(r *renderer, v Value, a *args) (bool, error) {
	switch v.kind {
	case KindUndefined, KindString, KindList, KindTuple, KindDict, KindRange, KindIter:
		return true, nil
	case KindObject:
		_, ok := v.ref.(*loopState)
		return ok, nil
	}
	return false, nil
}

func tCallable(r *renderer, v Value, a *args) (bool, error) {
	switch v.kind {
	case KindCallable, KindUndefined:
		return true, nil
	case KindObject:
		switch v.ref.(type) {
		case *loopState, *joiner:
			return true, nil
		}
	}
	return false, nil
}

// tSameas is Python's "is": the same object. Scalars and strings are
// compared by value (Python caches small ints, None, True and False, and
// interns string constants); containers by identity.
func tSameas(r *renderer, v Value, a *args) (bool, error) {
	o, ok := a.get(0, "other")
	if !ok {
		return false, r.errorf(ErrType, "sameas() missing required argument 'other'")
	}
	if v.kind != o.kind {
		return false, nil
	}
	switch v.kind {
	case KindNone, KindUndefined:
		return true, nil
	case KindBool, KindInt, KindFloat:
		return v.n == o.n, nil
	case KindString:
		return v.s == o.s, nil
	}
	return v.ref == o.ref, nil
}
