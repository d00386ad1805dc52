package jinja

import (
	"math"
	"strconv"
	"strings"
)

// Kind is the type of a Value, after Python's types.
type Kind uint8

// Value kinds.
const (
	KindUndefined Kind = iota
	KindNone
	KindBool
	KindInt
	KindFloat
	KindString
	KindList
	KindTuple
	KindDict
	KindNamespace
	KindIter     // a one-shot iterator (generator, reversed(), ...)
	KindRange    // range(): lazy
	KindCallable // macro, builtin function or bound method
	KindObject   // loop, cycler, joiner
)

// Value is a template value. The zero Value is undefined. Values are
// immutable, except namespaces (set ns.x = ...) and the one-shot
// iterators that iteration consumes, as in Python.
type Value struct {
	kind Kind
	flag uint8  // string: flagSafe; undefined: how it was made (undef*)
	n    int64  // bool (0/1), int, float bits; undefined: the failed index
	s    string // string text; undefined: the name that was missing
	ref  any    // string: *taint (nil: trusted); list/tuple: *List; dict: *Dict; ...
}

const flagSafe uint8 = 1 // a string marked safe (Markup)

// How an undefined value came about (the low bits of Value.flag), for its
// error message.
const (
	undefName    uint8 = iota // a name: s
	undefAttr                 // a missing attribute s of an object of type ref (string)
	undefItem                 // a missing item n (int) or s of type ref
	undefMsg                  // a message: s
	undefUnsafe               // an attribute the sandbox refuses: s of type ref
	undefItemStr              // a missing item s (a string key) of type ref
)

// List is the items of a list or tuple. Templates cannot change a list
// (list.append and its kind are refused, as in transformers' sandbox).
type List struct {
	Items []Value
}

// Constructors.

// Undefined returns the undefined value of a missing name.
func Undefined(name string) Value { return Value{kind: KindUndefined, flag: undefName, s: name} }

// None returns Python's None.
func None() Value { return Value{kind: KindNone} }

// Bool returns a boolean.
func Bool(b bool) Value {
	v := Value{kind: KindBool}
	if b {
		v.n = 1
	}
	return v
}

// Int returns an integer.
func Int(n int64) Value { return Value{kind: KindInt, n: n} }

// Float returns a float.
func Float(f float64) Value { return Value{kind: KindFloat, n: int64(math.Float64bits(f))} }

// Str returns a string that the template may treat as its own text: its
// bytes are template text in the output, where special tokens count.
func Str(s string) Value { return Value{kind: KindString, s: s} }

// UntrustedStr returns a string that came from a client: its bytes are
// marked untrusted in the output wherever they end up.
func UntrustedStr(s string) Value {
	v := Value{kind: KindString, s: s}
	if s != "" {
		v.ref = taintAll
	}
	return v
}

// NewList returns a list of items (not copied).
func NewList(items []Value) Value { return Value{kind: KindList, ref: &List{Items: items}} }

func newTuple(items []Value) Value { return Value{kind: KindTuple, ref: &List{Items: items}} }

func undefMsgf(msg string) Value { return Value{kind: KindUndefined, flag: undefMsg, s: msg} }

// undefOn is the undefined value of a failed lookup on obj: how (undef*),
// the name or index that was missing. It keeps obj's kind (in flag's high
// bits) and reference, which the error message needs, without
// allocating.
func undefOn(how uint8, obj Value, name string, index int64) Value {
	return Value{kind: KindUndefined, flag: how | uint8(obj.kind)<<4, s: name, n: index, ref: obj.ref}
}

// undefHow is how an undefined value came about (undef*).
func (v Value) undefHow() uint8 { return v.flag & 15 }

// Accessors.

// Kind returns v's kind.
func (v Value) Kind() Kind { return v.kind }

func (v Value) float() float64 { return math.Float64frombits(uint64(v.n)) }

func (v Value) list() *List { return v.ref.(*List) }

func (v Value) dict() *Dict { return v.ref.(*Dict) }

func (v Value) taint() *taint {
	t, _ := v.ref.(*taint)
	return t
}

// Text returns a string value's text ("" for other kinds).
func (v Value) Text() string {
	if v.kind == KindString {
		return v.s
	}
	return ""
}

// isNumber reports whether v is an int, float or bool (Python's bool is an
// int).
func (v Value) isNumber() bool {
	return v.kind == KindInt || v.kind == KindFloat || v.kind == KindBool
}

// isInt reports whether v is an int or a bool.
func (v Value) isInt() bool { return v.kind == KindInt || v.kind == KindBool }

func (v Value) asFloat() float64 {
	if v.kind == KindFloat {
		return v.float()
	}
	return float64(v.n)
}

// typeName is Python's type(v).__name__.
func (v Value) typeName() string {
	switch v.kind {
	case KindUndefined:
		return "Undefined"
	case KindNone:
		return "NoneType"
	case KindBool:
		return "bool"
	case KindInt:
		return "int"
	case KindFloat:
		return "float"
	case KindString:
		if v.flag&flagSafe != 0 {
			return "Markup"
		}
		return "str"
	case KindList:
		return "list"
	case KindTuple:
		return "tuple"
	case KindDict:
		return "dict"
	case KindNamespace:
		return "Namespace"
	case KindIter:
		return v.ref.(*iterState).typ
	case KindRange:
		return "range"
	case KindCallable:
		return v.ref.(*callable).typeName()
	case KindObject:
		return v.ref.(object).typeName()
	}
	return "object"
}

// truth is Python's bool(v).
func (v Value) truth() bool {
	switch v.kind {
	case KindUndefined, KindNone:
		return false
	case KindBool, KindInt:
		return v.n != 0
	case KindFloat:
		return v.float() != 0
	case KindString:
		return v.s != ""
	case KindList, KindTuple:
		return len(v.list().Items) > 0
	case KindDict:
		return v.dict().Len() > 0
	case KindRange:
		return v.ref.(*rangeVal).len() > 0
	}
	return true
}

// length is Python's len(v); ok is false for a value without one.
func (v Value) length() (int, bool) {
	switch v.kind {
	case KindUndefined:
		return 0, true
	case KindString:
		return runeCount(v.s), true
	case KindList, KindTuple:
		return len(v.list().Items), true
	case KindDict:
		return v.dict().Len(), true
	case KindRange:
		return int(v.ref.(*rangeVal).len()), true
	case KindNamespace:
		return 0, false
	case KindObject:
		if l, ok := v.ref.(interface{ length() int }); ok {
			return l.length(), true
		}
	}
	return 0, false
}

func runeCount(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return len([]rune(s))
		}
	}
	return len(s)
}

// rangeVal is range(start, stop, step), never materialised unless asked.
type rangeVal struct{ start, stop, step int64 }

func (r *rangeVal) len() int64 {
	switch {
	case r.step > 0 && r.start < r.stop:
		return (r.stop - r.start + r.step - 1) / r.step
	case r.step < 0 && r.start > r.stop:
		return (r.start - r.stop - r.step - 1) / -r.step
	}
	return 0
}

func (r *rangeVal) at(i int64) int64 { return r.start + i*r.step }

// iterState is a one-shot iterator: items are handed out once.
type iterState struct {
	typ   string // Python's type name: generator, list_reverseiterator, ...
	items []Value
	pos   int
}

func newIter(typ string, items []Value) Value {
	return Value{kind: KindIter, ref: &iterState{typ: typ, items: items}}
}

// drain takes what is left of an iterator.
func (it *iterState) drain() []Value {
	rest := it.items[it.pos:]
	it.pos = len(it.items)
	return rest
}

// object is a value with attributes of its own (loop, cycler, joiner).
type object interface {
	typeName() string
	attr(r *renderer, name string) (Value, error)
	repr() string
}

// Number formatting, as Python's str() and repr() do.

func formatInt(n int64) string { return strconv.FormatInt(n, 10) }

// pythonFloat formats f as Python's repr: the shortest digits that read
// back as f, positional with at least one decimal when the decimal
// exponent is from -4 to 15, else d.ddde±XX; inf and nan as Python prints
// them.
func pythonFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // [-]d.ddde±XX
	mant, expStr, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expStr)
	if exp < -4 || exp >= 16 {
		sign := "+"
		if exp < 0 {
			sign, exp = "-", -exp
		}
		es := strconv.Itoa(exp)
		if len(es) < 2 {
			es = "0" + es
		}
		return mant + "e" + sign + es
	}
	out := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(out, ".") {
		out += ".0"
	}
	return out
}
