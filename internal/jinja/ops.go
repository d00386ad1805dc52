package jinja

import (
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Operators, printing and comparison, with Python's semantics.

// typeRepr is Jinja2's object_type_repr, for undefined messages.
func typeRepr(v Value) string {
	if v.kind == KindNone {
		return "None"
	}
	return v.typeName() + " object"
}

func undefMessage(v Value) string {
	how := v.undefHow()
	var typ string
	if how != undefName && how != undefMsg {
		typ = typeRepr(Value{kind: Kind(v.flag >> 4), ref: v.ref})
	}
	switch how {
	case undefName:
		return "'" + v.s + "' is undefined"
	case undefAttr, undefItemStr:
		return "'" + typ + "' has no attribute '" + v.s + "'"
	case undefItem:
		return typ + " has no element " + formatInt(v.n)
	case undefUnsafe:
		return "access to attribute '" + v.s + "' of '" + strings.TrimSuffix(typ, " object") + "' object is unsafe."
	}
	return v.s
}

// str is Python's str(v), keeping the provenance of strings.
func (r *renderer) str(v Value) (Value, error) {
	switch v.kind {
	case KindString:
		v.flag &^= flagSafe
		return v, nil
	case KindUndefined:
		return Value{kind: KindString}, nil
	case KindNone:
		return Str("None"), nil
	case KindBool:
		if v.n != 0 {
			return Str("True"), nil
		}
		return Str("False"), nil
	case KindInt:
		return Str(formatInt(v.n)), nil
	case KindFloat:
		return Str(pythonFloat(v.float())), nil
	}
	var b reprBuf
	if err := r.repr(&b, v, 0); err != nil {
		return Value{}, err
	}
	return untrustedIf(b.String(), b.untrusted), nil
}

// reprBuf collects a repr and whether any untrusted string went into it.
type reprBuf struct {
	strings.Builder
	untrusted bool
}

// walkValue charges one step of writing a value nested depth deep into b
// (repr, tojson): the depth, string and step budgets.
func (r *renderer) walkValue(b *reprBuf, depth int) error {
	if depth > r.lim.Depth {
		return r.budget(BudgetDepth, int64(r.lim.Depth))
	}
	if int64(b.Len()) > r.lim.StringBytes {
		return r.budget(BudgetString, r.lim.StringBytes)
	}
	return r.tick(1)
}

// repr writes Python's repr(v).
func (r *renderer) repr(b *reprBuf, v Value, depth int) error {
	if err := r.walkValue(b, depth); err != nil {
		return err
	}
	switch v.kind {
	case KindString:
		if v.flag&flagSafe != 0 {
			b.WriteString("Markup(")
			pyQuote(&b.Builder, v.s)
			b.WriteString(")")
		} else {
			pyQuote(&b.Builder, v.s)
		}
		b.untrusted = b.untrusted || tainted(v)
		return r.work(len(v.s), 0)
	case KindUndefined:
		b.WriteString("Undefined")
	case KindNone, KindBool, KindInt, KindFloat:
		s, _ := r.str(v)
		b.WriteString(s.s)
	case KindList, KindTuple:
		open, close := "[", "]"
		if v.kind == KindTuple {
			open, close = "(", ")"
		}
		items := v.list().Items
		b.WriteString(open)
		for i, it := range items {
			if i > 0 {
				b.WriteString(", ")
			}
			if err := r.repr(b, it, depth+1); err != nil {
				return err
			}
		}
		if v.kind == KindTuple && len(items) == 1 {
			b.WriteString(",")
		}
		b.WriteString(close)
	case KindDict, KindNamespace:
		if v.kind == KindNamespace {
			b.WriteString("<Namespace ")
		}
		d := v.dict()
		b.WriteString("{")
		for i, k := range d.keys {
			if i > 0 {
				b.WriteString(", ")
			}
			if err := r.repr(b, k, depth+1); err != nil {
				return err
			}
			b.WriteString(": ")
			if err := r.repr(b, d.vals[i], depth+1); err != nil {
				return err
			}
		}
		b.WriteString("}")
		if v.kind == KindNamespace {
			b.WriteString(">")
		}
	case KindRange:
		rg := v.ref.(*rangeVal)
		b.WriteString("range(" + formatInt(rg.start) + ", " + formatInt(rg.stop))
		if rg.step != 1 {
			b.WriteString(", " + formatInt(rg.step))
		}
		b.WriteString(")")
	case KindIter:
		b.WriteString("<" + v.typeName() + " object>")
	case KindCallable:
		b.WriteString(v.ref.(*callable).repr())
	case KindObject:
		b.WriteString(v.ref.(object).repr())
	}
	return nil
}

// pyQuote writes s as Python's repr of a str.
func pyQuote(b *strings.Builder, s string) {
	q := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		q = '"'
	}
	const hex = "0123456789abcdef"
	b.WriteByte(q)
	for _, c := range s {
		switch {
		case c == rune(q) || c == '\\':
			b.WriteByte('\\')
			b.WriteRune(c)
		case c == '\t':
			b.WriteString(`\t`)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\r':
			b.WriteString(`\r`)
		case c < ' ' || c == 0x7f:
			b.WriteString(`\x`)
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		case c < 0x7f || unicode.IsPrint(c):
			b.WriteRune(c)
		case c <= 0xff:
			b.WriteString(`\x` + strconv.FormatInt(int64(c)+0x100, 16)[1:])
		case c <= 0xffff:
			b.WriteString(`\u` + strconv.FormatInt(int64(c)+0x10000, 16)[1:])
		default:
			b.WriteString(`\U` + strconv.FormatInt(int64(c)+0x100000000, 16)[1:])
		}
	}
	b.WriteByte(q)
}

// Arithmetic.

func (r *renderer) typeErrorOp(op string, a, b Value) error {
	return r.errorf(ErrType, "unsupported operand type(s) for %s: '%s' and '%s'", op, a.typeName(), b.typeName())
}

func (r *renderer) binop(op string, a, b Value) (Value, error) {
	if a.kind == KindUndefined {
		return Value{}, r.undefError(a)
	}
	if b.kind == KindUndefined {
		return Value{}, r.undefError(b)
	}
	if a.isNumber() && b.isNumber() {
		return r.arith(op, a, b)
	}
	switch op {
	case "+":
		return r.add(a, b)
	case "*":
		switch {
		case b.isInt() && (a.kind == KindString || a.kind == KindList || a.kind == KindTuple):
			return r.repeat(a, b.n)
		case a.isInt() && (b.kind == KindString || b.kind == KindList || b.kind == KindTuple):
			return r.repeat(b, a.n)
		case a.kind == KindString || a.kind == KindList || a.kind == KindTuple:
			return Value{}, r.errorf(ErrType, "can't multiply sequence by non-int of type '%s'", b.typeName())
		}
	case "%":
		if a.kind == KindString {
			return r.percentFormat(a, b)
		}
	}
	return Value{}, r.typeErrorOp(op, a, b)
}

func (r *renderer) add(a, b Value) (Value, error) {
	switch {
	case a.kind == KindString && b.kind == KindString:
		if (a.flag|b.flag)&flagSafe != 0 {
			// Markup + str escapes the str, as markupsafe does.
			if a.flag&flagSafe == 0 {
				a = mapRuns(a, htmlEscape)
			}
			if b.flag&flagSafe == 0 {
				b = mapRuns(b, htmlEscape)
			}
		}
		if err := r.newString(len(a.s) + len(b.s)); err != nil {
			return Value{}, err
		}
		out := concat2(a, b)
		if (a.flag|b.flag)&flagSafe != 0 {
			out.flag = flagSafe
		}
		return out, nil
	case (a.kind == KindList || a.kind == KindTuple) && a.kind == b.kind:
		x, y := a.list().Items, b.list().Items
		if err := r.newItems(len(x) + len(y)); err != nil {
			return Value{}, err
		}
		items := make([]Value, 0, len(x)+len(y))
		items = append(append(items, x...), y...)
		return Value{kind: a.kind, ref: &List{Items: items}}, nil
	case a.kind == KindString || a.kind == KindList || a.kind == KindTuple:
		return Value{}, r.errorf(ErrType, "can only concatenate %s (not \"%s\") to %s", a.typeName(), b.typeName(), a.typeName())
	}
	return Value{}, r.typeErrorOp("+", a, b)
}

// concat2 joins two strings with their provenance.
func concat2(a, b Value) Value {
	if a.ref == nil && b.ref == nil {
		return Value{kind: KindString, s: a.s + b.s}
	}
	var t textBuf
	t.grow(len(a.s) + len(b.s))
	t.write(a)
	t.write(b)
	return t.value()
}

func (r *renderer) repeat(seq Value, n int64) (Value, error) {
	if n < 0 {
		n = 0
	}
	if seq.kind == KindString {
		if n > 0 && int64(len(seq.s)) > r.lim.StringBytes/n {
			return Value{}, r.budget(BudgetString, r.lim.StringBytes)
		}
		if err := r.newString(len(seq.s) * int(n)); err != nil {
			return Value{}, err
		}
		if seq.ref == nil {
			return Value{kind: KindString, s: strings.Repeat(seq.s, int(n)), flag: seq.flag}, nil
		}
		var t textBuf
		for range n {
			t.write(seq)
		}
		out := t.value()
		out.flag = seq.flag
		return out, nil
	}
	items := seq.list().Items
	if n > 0 && int64(len(items)) > int64(r.lim.Items)/n {
		return Value{}, r.budget(BudgetItems, int64(r.lim.Items))
	}
	if err := r.newItems(len(items) * int(n)); err != nil {
		return Value{}, err
	}
	out := make([]Value, 0, len(items)*int(n))
	for range n {
		out = append(out, items...)
	}
	return Value{kind: seq.kind, ref: &List{Items: out}}, nil
}

// arith applies op to two numbers (bools count as ints).
func (r *renderer) arith(op string, a, b Value) (Value, error) {
	if a.isInt() && b.isInt() && op != "/" {
		return r.intArith(op, a.n, b.n)
	}
	x, y := a.asFloat(), b.asFloat()
	switch op {
	case "+":
		return Float(x + y), nil
	case "-":
		return Float(x - y), nil
	case "*":
		return Float(x * y), nil
	case "/":
		if y == 0 {
			return Value{}, r.errorf(ErrValue, "division by zero")
		}
		return Float(x / y), nil
	case "//":
		if y == 0 {
			return Value{}, r.errorf(ErrValue, "float floor division by zero")
		}
		return Float(math.Floor(x / y)), nil
	case "%":
		if y == 0 {
			return Value{}, r.errorf(ErrValue, "float modulo")
		}
		m := math.Mod(x, y)
		if m != 0 && (m < 0) != (y < 0) {
			m += y
		}
		return Float(m), nil
	case "**":
		if x == 0 && y < 0 {
			return Value{}, r.errorf(ErrValue, "0.0 cannot be raised to a negative power")
		}
		return Float(math.Pow(x, y)), nil
	}
	return Value{}, r.typeErrorOp(op, a, b)
}

func (r *renderer) intArith(op string, x, y int64) (Value, error) {
	overflow := func() (Value, error) {
		return Value{}, r.errorf(ErrValue, "integer result of %d %s %d does not fit in 64 bits", x, op, y)
	}
	switch op {
	case "+":
		s := x + y
		if (s > x) != (y > 0) {
			return overflow()
		}
		return Int(s), nil
	case "-":
		s := x - y
		if (s < x) != (y > 0) {
			return overflow()
		}
		return Int(s), nil
	case "*":
		if x != 0 && y != 0 {
			p := x * y
			if p/y != x || (x == -1 && y == math.MinInt64) || (y == -1 && x == math.MinInt64) {
				return overflow()
			}
			return Int(p), nil
		}
		return Int(0), nil
	case "//", "%":
		if y == 0 {
			return Value{}, r.errorf(ErrValue, "integer division or modulo by zero")
		}
		if x == math.MinInt64 && y == -1 {
			return overflow()
		}
		q, m := x/y, x%y
		if m != 0 && (m < 0) != (y < 0) {
			q, m = q-1, m+y
		}
		if op == "//" {
			return Int(q), nil
		}
		return Int(m), nil
	case "**":
		if y < 0 {
			if x == 0 {
				return Value{}, r.errorf(ErrValue, "0.0 cannot be raised to a negative power")
			}
			return Float(math.Pow(float64(x), float64(y))), nil
		}
		switch {
		case x == 0 && y > 0:
			return Int(0), nil
		case x == 0 || x == 1 || y == 0:
			return Int(1), nil
		case x == -1 && y%2 == 1:
			return Int(-1), nil
		case x == -1:
			return Int(1), nil
		}
		p := int64(1)
		for range y { // |x| >= 2: at most 63 rounds before overflow
			if (p*x)/x != p {
				return overflow()
			}
			p *= x
		}
		return Int(p), nil
	}
	return Value{}, r.errorf(ErrType, "unsupported operand %s", op)
}

func (r *renderer) neg(v Value) (Value, error) {
	switch v.kind {
	case KindBool, KindInt:
		if v.n == math.MinInt64 {
			return Value{}, r.errorf(ErrValue, "integer result of -%d does not fit in 64 bits", v.n)
		}
		return Int(-v.n), nil
	case KindFloat:
		return Float(-v.float()), nil
	case KindUndefined:
		return Value{}, r.undefError(v)
	}
	return Value{}, r.errorf(ErrType, "bad operand type for unary -: '%s'", v.typeName())
}

func (r *renderer) pos(v Value) (Value, error) {
	switch v.kind {
	case KindBool, KindInt:
		return Int(v.n), nil
	case KindFloat:
		return v, nil
	case KindUndefined:
		return Value{}, r.undefError(v)
	}
	return Value{}, r.errorf(ErrType, "bad operand type for unary +: '%s'", v.typeName())
}

// Comparison.

func (r *renderer) compare(op string, a, b Value) (bool, error) {
	switch op {
	case "==":
		return r.equal(a, b, 0)
	case "!=":
		eq, err := r.equal(a, b, 0)
		return !eq, err
	case "in":
		return r.contains(b, a)
	case "notin":
		in, err := r.contains(b, a)
		return !in, err
	}
	if a.kind == KindUndefined {
		return false, r.undefError(a)
	}
	if b.kind == KindUndefined {
		return false, r.undefError(b)
	}
	if (a.kind == KindFloat && math.IsNaN(a.float())) || (b.kind == KindFloat && math.IsNaN(b.float())) {
		return false, nil
	}
	c, err := r.order(op, a, b, 0)
	if err != nil {
		return false, err
	}
	switch op {
	case "<":
		return c < 0, nil
	case "<=":
		return c <= 0, nil
	case ">":
		return c > 0, nil
	}
	return c >= 0, nil
}

// order compares a and b as Python's < does: numbers, strings (by code
// point), and lists or tuples item by item.
func (r *renderer) order(op string, a, b Value, depth int) (int, error) {
	if depth > r.lim.Depth {
		return 0, r.budget(BudgetDepth, int64(r.lim.Depth))
	}
	switch {
	case a.isNumber() && b.isNumber():
		return numCompare(a, b), nil
	case a.kind == KindString && b.kind == KindString:
		if err := r.work(min(len(a.s), len(b.s)), 0); err != nil {
			return 0, err
		}
		return strings.Compare(a.s, b.s), nil
	case (a.kind == KindList || a.kind == KindTuple) && a.kind == b.kind:
		x, y := a.list().Items, b.list().Items
		for i := 0; i < len(x) && i < len(y); i++ {
			eq, err := r.equal(x[i], y[i], depth+1)
			if err != nil {
				return 0, err
			}
			if !eq {
				return r.order(op, x[i], y[i], depth+1)
			}
		}
		return len(x) - len(y), nil
	}
	return 0, r.errorf(ErrType, "'%s' not supported between instances of '%s' and '%s'", op, a.typeName(), b.typeName())
}

// numCompare compares two numbers exactly (an int and a float too).
func numCompare(a, b Value) int {
	if a.isInt() && b.isInt() {
		switch {
		case a.n < b.n:
			return -1
		case a.n > b.n:
			return 1
		}
		return 0
	}
	if a.isInt() {
		return -numCompare(b, a)
	}
	x := a.float()
	if b.isInt() {
		// a float against an int: exact when the int is not a float.
		y := b.n
		if f := float64(y); f != x {
			if x < f {
				return -1
			}
			return 1
		}
		if x >= math.MaxInt64 || x < math.MinInt64 {
			return 0
		}
		switch xi := int64(x); {
		case xi < y:
			return -1
		case xi > y:
			return 1
		}
		return 0
	}
	y := b.float()
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// equal is Python's ==.
func (r *renderer) equal(a, b Value, depth int) (bool, error) {
	if depth > r.lim.Depth {
		return false, r.budget(BudgetDepth, int64(r.lim.Depth))
	}
	switch {
	case a.isNumber() && b.isNumber():
		if a.kind == KindFloat && math.IsNaN(a.float()) || b.kind == KindFloat && math.IsNaN(b.float()) {
			return false, nil
		}
		return numCompare(a, b) == 0, nil
	case a.kind != b.kind:
		return false, nil
	}
	switch a.kind {
	case KindUndefined, KindNone:
		return true, nil
	case KindString:
		if err := r.work(min(len(a.s), len(b.s)), 0); err != nil {
			return false, err
		}
		return a.s == b.s, nil
	case KindList, KindTuple:
		x, y := a.list().Items, b.list().Items
		if len(x) != len(y) {
			return false, nil
		}
		for i := range x {
			if err := r.tick(1); err != nil {
				return false, err
			}
			eq, err := r.equal(x[i], y[i], depth+1)
			if err != nil || !eq {
				return false, err
			}
		}
		return true, nil
	case KindDict:
		x, y := a.dict(), b.dict()
		if x.Len() != y.Len() {
			return false, nil
		}
		for i, k := range x.keys {
			if err := r.tick(1); err != nil {
				return false, err
			}
			w, ok := y.Get(k)
			if !ok {
				return false, nil
			}
			eq, err := r.equal(x.vals[i], w, depth+1)
			if err != nil || !eq {
				return false, err
			}
		}
		return true, nil
	case KindRange:
		p, q := a.ref.(*rangeVal), b.ref.(*rangeVal)
		n := p.len()
		return n == q.len() && (n == 0 || p.start == q.start && (n == 1 || p.step == q.step)), nil
	}
	return a.ref == b.ref, nil
}

// contains is Python's item in container.
func (r *renderer) contains(container, item Value) (bool, error) {
	switch container.kind {
	case KindString:
		if item.kind != KindString {
			if item.kind == KindUndefined {
				return false, r.undefError(item)
			}
			return false, r.errorf(ErrType, "'in <string>' requires string as left operand, not %s", item.typeName())
		}
		if err := r.work(len(container.s), 0); err != nil {
			return false, err
		}
		return strings.Contains(container.s, item.s), nil
	case KindDict:
		if _, ok := hashKey(item, 0); !ok {
			return false, r.errorf(ErrType, "unhashable type: '%s'", item.typeName())
		}
		_, ok := container.dict().Get(item)
		return ok, nil
	case KindRange:
		if !item.isNumber() {
			return false, nil
		}
		rg := container.ref.(*rangeVal)
		for i := int64(0); i < rg.len(); i++ {
			if err := r.tick(1); err != nil {
				return false, err
			}
			if numCompare(Int(rg.at(i)), item) == 0 {
				return true, nil
			}
		}
		return false, nil
	case KindList, KindTuple, KindIter, KindUndefined, KindObject:
		seq, err := r.iterate(container)
		if err != nil {
			return false, r.errorf(ErrType, "argument of type '%s' is not iterable", container.typeName())
		}
		for i := 0; i < seq.len(); i++ {
			if err := r.tick(1); err != nil {
				return false, err
			}
			eq, err := r.equal(seq.at(i), item, 0)
			if err != nil {
				return false, err
			}
			if eq {
				return true, nil
			}
		}
		return false, nil
	}
	return false, r.errorf(ErrType, "argument of type '%s' is not iterable", container.typeName())
}

// Attributes and items, as Jinja2's sandbox looks them up.

// getattr is obj.name: an attribute (a method, a namespace's member),
// else the item name, else undefined.
func (r *renderer) getattr(obj Value, name string) (Value, error) {
	v, ok, err := r.attrOf(obj, name)
	if err != nil || ok {
		return v, err
	}
	if v, ok := r.itemOf(obj, Str(name)); ok {
		return v, nil
	}
	return undefOn(undefAttr, obj, name, 0), nil
}

// getitem is obj[key]: the item, else (for a string key) the attribute,
// else undefined.
func (r *renderer) getitem(obj, key Value) (Value, error) {
	if obj.kind == KindUndefined {
		return Value{}, r.undefError(obj)
	}
	if v, ok := r.itemOf(obj, key); ok {
		return v, nil
	}
	if key.kind == KindString {
		v, ok, err := r.attrOf(obj, key.s)
		if err != nil || ok {
			return v, err
		}
		return undefOn(undefItemStr, obj, key.s, 0), nil
	}
	if key.isInt() {
		return undefOn(undefItem, obj, "", key.n), nil
	}
	return undefMsgf(typeRepr(obj) + " has no such element"), nil
}

// attrOf looks up an attribute; ok is false when obj has none of that
// name.
func (r *renderer) attrOf(obj Value, name string) (Value, bool, error) {
	if obj.kind == KindUndefined {
		return Value{}, false, r.undefError(obj)
	}
	if strings.HasPrefix(name, "_") {
		if strings.HasPrefix(name, "__") && strings.HasSuffix(name, "__") {
			return undefOn(undefUnsafe, obj, name, 0), true, nil
		}
		return Value{}, false, nil
	}
	switch obj.kind {
	case KindString, KindDict, KindList, KindTuple:
		if unsafeMethod(obj.kind, name) {
			return undefOn(undefUnsafe, obj, name, 0), true, nil
		}
		if m := methodFor(obj, name); m != nil {
			recv := obj
			return Value{kind: KindCallable, ref: &callable{name: name, recv: obj.typeName(), fn: func(r *renderer, a *args) (Value, error) {
				return m(r, recv, a)
			}}}, true, nil
		}
	case KindNamespace:
		v, ok := obj.dict().GetStr(name)
		return v, ok, nil
	case KindObject:
		v, err := obj.ref.(object).attr(r, name)
		return v, err == nil && v.kind != KindUndefined, err
	case KindRange:
		rg := obj.ref.(*rangeVal)
		switch name {
		case "start":
			return Int(rg.start), true, nil
		case "stop":
			return Int(rg.stop), true, nil
		case "step":
			return Int(rg.step), true, nil
		}
	case KindInt, KindBool, KindFloat:
		switch name {
		case "real":
			if obj.kind == KindBool {
				return Int(obj.n), true, nil
			}
			return obj, true, nil
		case "imag":
			if obj.kind == KindFloat {
				return Float(0), true, nil
			}
			return Int(0), true, nil
		}
	}
	return Value{}, false, nil
}

// itemOf looks up obj[key]; ok is false when there is no such item.
func (r *renderer) itemOf(obj, key Value) (Value, bool) {
	switch obj.kind {
	case KindDict:
		return obj.dict().Get(key)
	case KindList, KindTuple:
		if !key.isInt() {
			return Value{}, false
		}
		items := obj.list().Items
		i := key.n
		if i < 0 {
			i += int64(len(items))
		}
		if i < 0 || i >= int64(len(items)) {
			return Value{}, false
		}
		return items[i], true
	case KindString:
		if !key.isInt() {
			return Value{}, false
		}
		return charAt(obj, key.n)
	case KindRange:
		if !key.isInt() {
			return Value{}, false
		}
		rg := obj.ref.(*rangeVal)
		i := key.n
		if i < 0 {
			i += rg.len()
		}
		if i < 0 || i >= rg.len() {
			return Value{}, false
		}
		return Int(rg.at(i)), true
	}
	return Value{}, false
}

// charAt is s[i] by code point, Python's indexing of a str.
func charAt(s Value, i int64) (Value, bool) {
	if isASCII(s.s) {
		n := int64(len(s.s))
		if i < 0 {
			i += n
		}
		if i < 0 || i >= n {
			return Value{}, false
		}
		return substr(s, int(i), int(i)+1), true
	}
	cuts := runeCuts(s.s)
	n := int64(len(cuts) - 1)
	if i < 0 {
		i += n
	}
	if i < 0 || i >= n {
		return Value{}, false
	}
	return substr(s, cuts[i], cuts[i+1]), true
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// runeCuts returns the byte offset of each code point of s, then len(s).
func runeCuts(s string) []int {
	cuts := make([]int, 0, len(s)+1)
	for i := range s {
		cuts = append(cuts, i)
	}
	return append(cuts, len(s))
}

// slice is obj[start:stop:step].
func (r *renderer) slice(obj, start, stop, step Value) (Value, error) {
	if obj.kind == KindUndefined {
		return Value{}, r.undefError(obj)
	}
	var n int
	var cuts []int
	switch obj.kind {
	case KindString:
		if isASCII(obj.s) {
			n = len(obj.s)
		} else {
			cuts = runeCuts(obj.s)
			n = len(cuts) - 1
		}
	case KindList, KindTuple:
		n = len(obj.list().Items)
	case KindRange:
		n = int(obj.ref.(*rangeVal).len())
	default:
		return undefMsgf(typeRepr(obj) + " cannot be sliced"), nil
	}
	lo, hi, st, err := r.sliceIndices(start, stop, step, n)
	if err != nil {
		return Value{}, err
	}
	count := 0
	if st > 0 && lo < hi {
		count = (hi - lo + st - 1) / st
	} else if st < 0 && lo > hi {
		count = (lo - hi - st - 1) / -st
	}
	switch obj.kind {
	case KindString:
		if st == 1 {
			if cuts != nil {
				return substr(obj, cuts[lo], cuts[max(lo, hi)]), r.work(count, 0)
			}
			return substr(obj, lo, max(lo, hi)), r.work(count, 0)
		}
		if err := r.newString(count * 4); err != nil {
			return Value{}, err
		}
		var t textBuf
		for k, i := 0, lo; k < count; k, i = k+1, i+st {
			a, b := i, i+1
			if cuts != nil {
				a, b = cuts[i], cuts[i+1]
			}
			t.write(substr(obj, a, b))
		}
		out := t.value()
		out.flag = obj.flag & flagSafe
		return out, nil
	case KindRange:
		rg := obj.ref.(*rangeVal)
		return Value{kind: KindRange, ref: &rangeVal{start: rg.at(int64(lo)), stop: rg.at(int64(lo)) + int64(count)*rg.step*int64(st), step: rg.step * int64(st)}}, nil
	}
	items := obj.list().Items
	if err := r.newItems(count); err != nil {
		return Value{}, err
	}
	out := make([]Value, 0, count)
	for k, i := 0, lo; k < count; k, i = k+1, i+st {
		out = append(out, items[i])
	}
	return Value{kind: obj.kind, ref: &List{Items: out}}, nil
}

// sliceIndices is Python's slice.indices(n).
func (r *renderer) sliceIndices(start, stop, step Value, n int) (lo, hi, st int, err error) {
	st = 1
	if step.kind != KindNone {
		if !step.isInt() {
			return 0, 0, 0, r.errorf(ErrType, "slice indices must be integers or None or have an __index__ method")
		}
		if step.n == 0 {
			return 0, 0, 0, r.errorf(ErrValue, "slice step cannot be zero")
		}
		st = int(max(min(step.n, int64(n)+1), -int64(n)-1))
	}
	bound := func(v Value, def int) (int, error) {
		if v.kind == KindNone {
			return def, nil
		}
		if !v.isInt() {
			return 0, r.errorf(ErrType, "slice indices must be integers or None or have an __index__ method")
		}
		i := v.n
		if i < 0 {
			i += int64(n)
			if i < 0 {
				if st < 0 {
					return -1, nil
				}
				return 0, nil
			}
		}
		if i >= int64(n) {
			if st < 0 {
				return n - 1, nil
			}
			return n, nil
		}
		return int(i), nil
	}
	if st > 0 {
		lo, err = bound(start, 0)
		if err == nil {
			hi, err = bound(stop, n)
		}
	} else {
		lo, err = bound(start, n-1)
		if err == nil {
			hi, err = bound(stop, -1)
		}
	}
	return lo, hi, st, err
}
