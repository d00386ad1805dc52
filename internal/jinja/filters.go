package jinja

import (
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Filters, as Jinja2 defines them (jinja2/filters.py), with transformers'
// tojson. Filters that make generators in Jinja2 (map, select, reject,
// selectattr, rejectattr, unique, batch, slice, items) return one-shot
// iterators here too, so that a template that uses one twice, or asks for
// its length, behaves as it does under transformers.

type filterFunc func(r *renderer, v Value, a *args) (Value, error)

// lookupFilter returns the filter called name, or nil.
func lookupFilter(name string) filterFunc {
	switch name {
	case "abs":
		return fAbs
	case "attr":
		return fAttr
	case "batch":
		return fBatch
	case "capitalize":
		return fCase(pyCapitalize, true)
	case "center":
		return fCenter
	case "count", "length":
		return fLength
	case "d", "default":
		return fDefault
	case "dictsort":
		return fDictsort
	case "e", "escape":
		return fEscape
	case "forceescape":
		return fForceEscape
	case "first":
		return fFirst
	case "float":
		return fFloat
	case "format":
		return fFormat
	case "groupby":
		return fGroupby
	case "indent":
		return fIndent
	case "int":
		return fInt
	case "items":
		return fItems
	case "join":
		return fJoin
	case "last":
		return fLast
	case "list":
		return fList
	case "lower":
		return fCase(pyLower, true)
	case "map":
		return fMap
	case "max":
		return fMinMax(true)
	case "min":
		return fMinMax(false)
	case "reject":
		return fSelect(false, false)
	case "rejectattr":
		return fSelect(false, true)
	case "replace":
		return fReplace
	case "reverse":
		return fReverse
	case "round":
		return fRound
	case "safe":
		return fSafe
	case "select":
		return fSelect(true, false)
	case "selectattr":
		return fSelect(true, true)
	case "slice":
		return fSlice
	case "sort":
		return fSort
	case "string":
		return fString
	case "striptags":
		return fStriptags
	case "sum":
		return fSum
	case "title":
		return fTitle
	case "tojson":
		return fToJSON
	case "trim":
		return fTrim
	case "truncate":
		return fTruncate
	case "unique":
		return fUnique
	case "upper":
		return fCase(pyUpper, true)
	case "wordcount":
		return fWordcount
	}
	return nil
}

// softStr is Jinja2's soft_str: str(v), but a Markup string stays one.
func (r *renderer) softStr(v Value) (Value, error) {
	if v.kind == KindString {
		return v, nil
	}
	return r.str(v)
}

func fAbs(r *renderer, v Value, a *args) (Value, error) {
	switch v.kind {
	case KindInt, KindBool:
		if v.n < 0 {
			return r.neg(v)
		}
		return Int(v.n), nil
	case KindFloat:
		return Float(math.Abs(v.float())), nil
	case KindUndefined:
		return Value{}, r.undefError(v)
	}
	return Value{}, r.errorf(ErrType, "bad operand type for abs(): '%s'", v.typeName())
}

func fAttr(r *renderer, v Value, a *args) (Value, error) {
	name, ok := a.get(0, "name")
	if !ok || name.kind != KindString {
		return Value{}, r.errorf(ErrType, "attr() needs an attribute name")
	}
	got, found, err := r.attrOf(v, name.s)
	if err != nil || found {
		return got, err
	}
	return undefOn(undefAttr, v, name.s, 0), nil
}

func fCase(f func(string) string, keepSafe bool) filterFunc {
	return func(r *renderer, v Value, a *args) (Value, error) {
		s, err := r.softStr(v)
		if err != nil {
			return Value{}, err
		}
		if err := r.newString(len(s.s)); err != nil {
			return Value{}, err
		}
		out := caseValue(s, f)
		if !keepSafe {
			out.flag = 0
		}
		return out, nil
	}
}

// fTitle is Jinja2's title filter: each word (after - white space ( { [ or
// <) gets its first character upper-cased and the rest lower-cased.
func fTitle(r *renderer, v Value, a *args) (Value, error) {
	s, err := r.softStr(v)
	if err != nil {
		return Value{}, err
	}
	if err := r.newString(len(s.s)); err != nil {
		return Value{}, err
	}
	out := caseValue(s, func(s string) string {
		var b strings.Builder
		start := true
		for _, c := range s {
			sep := c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || pyIsSpace(c)
			switch {
			case sep:
				b.WriteRune(c)
			case start:
				b.WriteString(pyUpper(string(c)))
			default:
				b.WriteString(pyLower(string(c)))
			}
			start = sep
		}
		return b.String()
	})
	out.flag = 0
	return out, nil
}

func fCenter(r *renderer, v Value, a *args) (Value, error) {
	s, err := r.softStr(v)
	if err != nil {
		return Value{}, err
	}
	w, err := intArg(r, a, 0, "width", 80)
	if err != nil {
		return Value{}, err
	}
	return r.justify(s, w, " ", 'c')
}

func fLength(r *renderer, v Value, a *args) (Value, error) {
	n, ok := v.length()
	if !ok {
		return Value{}, r.errorf(ErrType, "object of type '%s' has no len()", v.typeName())
	}
	return Int(int64(n)), nil
}

func fDefault(r *renderer, v Value, a *args) (Value, error) {
	if err := a.check(r, "default", "default_value", "boolean"); err != nil {
		return Value{}, err
	}
	def, ok := a.get(0, "default_value")
	if !ok {
		def = Str("")
	}
	boolean := false
	if b, ok := a.get(1, "boolean"); ok {
		boolean = b.truth()
	}
	if v.kind == KindUndefined || boolean && !v.truth() {
		return def, nil
	}
	return v, nil
}

func fEscape(r *renderer, v Value, a *args) (Value, error) {
	if v.kind == KindString && v.flag&flagSafe != 0 {
		return v, nil
	}
	return fForceEscape(r, v, a)
}

func fForceEscape(r *renderer, v Value, a *args) (Value, error) {
	s, err := r.str(v)
	if err != nil {
		return Value{}, err
	}
	out := mapRuns(s, htmlEscape)
	out.flag = flagSafe
	return out, nil
}

func fSafe(r *renderer, v Value, a *args) (Value, error) {
	s, err := r.softStr(v)
	if err != nil {
		return Value{}, err
	}
	s.flag = flagSafe
	return s, nil
}

func fString(r *renderer, v Value, a *args) (Value, error) { return r.softStr(v) }

func fFirst(r *renderer, v Value, a *args) (Value, error) {
	if v.kind == KindIter {
		it := v.ref.(*iterState)
		if it.pos < len(it.items) {
			it.pos++
			return it.items[it.pos-1], nil
		}
		return undefMsgf("No first item, sequence was empty."), nil
	}
	seq, err := r.iterate(v)
	if err != nil {
		return Value{}, err
	}
	if seq.len() == 0 {
		return undefMsgf("No first item, sequence was empty."), nil
	}
	return seq.at(0), nil
}

func fLast(r *renderer, v Value, a *args) (Value, error) {
	switch v.kind {
	case KindIter, KindNone, KindInt, KindFloat, KindBool, KindNamespace, KindCallable:
		return Value{}, r.errorf(ErrType, "'%s' object is not reversible", v.typeName())
	}
	seq, err := r.iterate(v)
	if err != nil {
		return Value{}, err
	}
	if seq.len() == 0 {
		return undefMsgf("No last item, sequence was empty."), nil
	}
	return seq.at(seq.len() - 1), nil
}

func fList(r *renderer, v Value, a *args) (Value, error) {
	items, err := r.listOf(v)
	if err != nil {
		return Value{}, err
	}
	if err := r.newItems(len(items)); err != nil {
		return Value{}, err
	}
	return NewList(append(make([]Value, 0, len(items)), items...)), nil
}

func fItems(r *renderer, v Value, a *args) (Value, error) {
	switch v.kind {
	case KindUndefined:
		return newIter("generator", nil), nil
	case KindDict:
		items, err := r.dictItems(v.dict())
		if err != nil {
			return Value{}, err
		}
		return newIter("generator", items.list().Items), nil
	}
	return Value{}, r.errorf(ErrType, "Can only get item pairs from a mapping.")
}

func fJoin(r *renderer, v Value, a *args) (Value, error) {
	if err := a.check(r, "join", "d", "attribute"); err != nil {
		return Value{}, err
	}
	sep := Str("")
	if d, ok := a.get(0, "d"); ok {
		var err error
		if sep, err = r.str(d); err != nil {
			return Value{}, err
		}
	}
	items, err := r.listOf(v)
	if err != nil {
		return Value{}, err
	}
	if items, err = r.mapAttribute(items, a, 1); err != nil {
		return Value{}, err
	}
	strs := make([]Value, len(items))
	for i, it := range items {
		if strs[i], err = r.str(it); err != nil {
			return Value{}, err
		}
	}
	return r.joinStrings(sequence{items: strs}, sep)
}

// listOf is list(v): the items iterating over v gives.
func (r *renderer) listOf(v Value) ([]Value, error) {
	seq, err := r.iterate(v)
	if err != nil {
		return nil, err
	}
	return r.values(seq)
}

// mapAttribute maps items to their attribute given as argument i
// ("attribute"), when there is one.
func (r *renderer) mapAttribute(items []Value, a *args, i int) ([]Value, error) {
	attr, ok := a.get(i, "attribute")
	if !ok || attr.kind == KindNone {
		return items, nil
	}
	get, err := r.attrGetter(attr, Value{})
	if err != nil {
		return nil, err
	}
	return r.mapValues(items, get)
}

func (r *renderer) mapValues(items []Value, f func(Value) (Value, error)) ([]Value, error) {
	out := make([]Value, len(items))
	for i, it := range items {
		if err := r.tick(1); err != nil {
			return nil, err
		}
		v, err := f(it)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// attrGetter is Jinja2's make_attrgetter: "a.b.0" looks up a, then b,
// then item 0, as obj[part]; def replaces undefined parts when it is
// given (not undefined and not None).
func (r *renderer) attrGetter(attr Value, def Value) (func(Value) (Value, error), error) {
	var parts []Value
	switch {
	case attr.kind == KindString:
		for _, p := range strings.Split(attr.s, ".") {
			if p != "" && strings.Trim(p, "0123456789") == "" {
				n, err := strconv.ParseInt(p, 10, 64)
				if err != nil {
					return nil, r.errorf(ErrValue, "attribute index %s is too large", p)
				}
				parts = append(parts, Int(n))
			} else {
				parts = append(parts, Str(p))
			}
		}
	case attr.kind == KindNone:
	default:
		parts = []Value{attr}
	}
	useDef := def.kind != KindUndefined && def.kind != KindNone
	return func(v Value) (Value, error) {
		for _, p := range parts {
			var err error
			if v, err = r.getitem(v, p); err != nil {
				return Value{}, err
			}
			if useDef && v.kind == KindUndefined {
				v = def
			}
		}
		return v, nil
	}, nil
}

// ignoreCase lower-cases strings, for the sort keys of sort, dictsort,
// unique, min, max and groupby.
func ignoreCase(v Value) Value {
	if v.kind == KindString {
		return Str(pyLower(v.s))
	}
	return v
}

func fMap(r *renderer, v Value, a *args) (Value, error) {
	items, err := r.listOf(v)
	if err != nil {
		return Value{}, err
	}
	var f func(Value) (Value, error)
	if attr, ok := kwOnly(a, "attribute"); ok && len(a.pos) == 0 {
		def, _ := kwOnly(a, "default")
		for _, k := range a.kw {
			if k.name != "attribute" && k.name != "default" {
				return Value{}, r.errorf(ErrType, "Unexpected keyword argument '%s'", k.name)
			}
		}
		if f, err = r.attrGetter(attr, def); err != nil {
			return Value{}, err
		}
	} else {
		if len(a.pos) == 0 || a.pos[0].kind != KindString {
			return Value{}, r.errorf(ErrType, "map requires a filter argument")
		}
		name := a.pos[0].s
		fn := lookupFilter(name)
		if fn == nil {
			return Value{}, r.errorf(ErrType, "No filter named '%s'.", name)
		}
		rest := &args{pos: a.pos[1:], kw: a.kw}
		f = func(it Value) (Value, error) { return fn(r, it, rest) }
	}
	out, err := r.mapValues(items, f)
	if err != nil {
		return Value{}, err
	}
	return newIter("generator", out), nil
}

func kwOnly(a *args, name string) (Value, bool) {
	for _, k := range a.kw {
		if k.name == name {
			return k.v, true
		}
	}
	return Value{}, false
}

// fSelect is select, reject, selectattr and rejectattr.
func fSelect(keep, byAttr bool) filterFunc {
	return func(r *renderer, v Value, a *args) (Value, error) {
		if !v.truth() {
			return newIter("generator", nil), nil
		}
		items, err := r.listOf(v)
		if err != nil {
			return Value{}, err
		}
		get := func(x Value) (Value, error) { return x, nil }
		pos := a.pos
		if byAttr {
			if len(pos) == 0 {
				return Value{}, r.errorf(ErrType, "Missing parameter for attribute name")
			}
			if get, err = r.attrGetter(pos[0], Value{}); err != nil {
				return Value{}, err
			}
			pos = pos[1:]
		}
		test := func(x Value) (bool, error) { return x.truth(), nil }
		if len(pos) > 0 {
			if pos[0].kind != KindString {
				return Value{}, r.errorf(ErrType, "test name must be a string")
			}
			fn := lookupTest(pos[0].s)
			if fn == nil {
				return Value{}, r.errorf(ErrType, "No test named '%s'.", pos[0].s)
			}
			rest := &args{pos: pos[1:], kw: a.kw}
			test = func(x Value) (bool, error) { return fn(r, x, rest) }
		}
		var out []Value
		for _, it := range items {
			if err := r.tick(1); err != nil {
				return Value{}, err
			}
			x, err := get(it)
			if err != nil {
				return Value{}, err
			}
			ok, err := test(x)
			if err != nil {
				return Value{}, err
			}
			if ok == keep {
				out = append(out, it)
			}
		}
		return newIter("generator", out), nil
	}
}

func fReplace(r *renderer, v Value, a *args) (Value, error) {
	if err := a.check(r, "replace", "old", "new", "count"); err != nil {
		return Value{}, err
	}
	old, ok1 := a.get(0, "old")
	nw, ok2 := a.get(1, "new")
	if !ok1 || !ok2 {
		return Value{}, r.errorf(ErrType, "replace() missing required argument")
	}
	s, err := r.str(v)
	if err != nil {
		return Value{}, err
	}
	os, err := r.str(old)
	if err != nil {
		return Value{}, err
	}
	ns, err := r.str(nw)
	if err != nil {
		return Value{}, err
	}
	count, err := intArg(r, a, 2, "count", -1)
	if err != nil {
		return Value{}, err
	}
	return r.replace(s, os.s, ns, count)
}

func fReverse(r *renderer, v Value, a *args) (Value, error) {
	switch v.kind {
	case KindString:
		return r.slice(v, None(), None(), Int(-1))
	case KindList, KindTuple, KindDict, KindRange:
		items, err := r.listOf(v)
		if err != nil {
			return Value{}, err
		}
		if err := r.newItems(len(items)); err != nil {
			return Value{}, err
		}
		out := slices.Clone(items)
		slices.Reverse(out)
		typ := map[Kind]string{KindList: "list_reverseiterator", KindTuple: "reversed", KindDict: "dict_reversekeyiterator", KindRange: "range_iterator"}[v.kind]
		return newIter(typ, out), nil
	}
	seq, err := r.iterate(v)
	if err != nil {
		return Value{}, r.errorf(ErrType, "argument must be iterable")
	}
	items, err := r.values(seq)
	if err != nil {
		return Value{}, err
	}
	out := slices.Clone(items)
	slices.Reverse(out)
	return NewList(out), nil
}

func fRound(r *renderer, v Value, a *args) (Value, error) {
	if err := a.check(r, "round", "precision", "method"); err != nil {
		return Value{}, err
	}
	prec, err := intArg(r, a, 0, "precision", 0)
	if err != nil {
		return Value{}, err
	}
	method := "common"
	if m, ok := a.get(1, "method"); ok {
		method = m.s
	}
	if method != "common" && method != "ceil" && method != "floor" {
		return Value{}, r.errorf(ErrValue, "method must be common, ceil or floor")
	}
	if !v.isNumber() {
		if v.kind == KindUndefined {
			return Value{}, r.undefError(v)
		}
		return Value{}, r.errorf(ErrType, "type %s doesn't define __round__ method", v.typeName())
	}
	if method == "common" {
		if v.isInt() {
			return Int(v.n), nil // round(int, n) keeps an int (n >= 0)
		}
		return Float(roundHalfEven(v.float(), int(prec))), nil
	}
	scale := math.Pow(10, float64(prec))
	f := v.asFloat() * scale
	if method == "ceil" {
		return Float(math.Ceil(f) / scale), nil
	}
	return Float(math.Floor(f) / scale), nil
}

// roundHalfEven is Python's round(f, prec) for a float: correctly rounded
// to prec decimals, ties to even.
func roundHalfEven(f float64, prec int) float64 {
	if math.IsInf(f, 0) || math.IsNaN(f) || prec > 300 {
		return f
	}
	if prec < 0 {
		scale := math.Pow(10, float64(-prec))
		return math.RoundToEven(f/scale) * scale
	}
	out, err := strconv.ParseFloat(strconv.FormatFloat(f, 'f', prec, 64), 64)
	if err != nil {
		return f
	}
	return out
}

func fInt(r *renderer, v Value, a *args) (Value, error) {
	if err := a.check(r, "int", "default", "base"); err != nil {
		return Value{}, err
	}
	def, ok := a.get(0, "default")
	if !ok {
		def = Int(0)
	}
	base, err := intArg(r, a, 1, "base", 10)
	if err != nil {
		return Value{}, err
	}
	switch v.kind {
	case KindInt, KindBool:
		return Int(v.n), nil
	case KindFloat:
		f := v.float()
		if math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) >= 1<<63 {
			return def, nil
		}
		return Int(int64(f)), nil
	case KindString:
		if n, ok := pyParseInt(v.s, int(base)); ok {
			return Int(n), nil
		}
		if f, ok := pyParseFloat(v.s); ok && !math.IsNaN(f) && !math.IsInf(f, 0) && math.Abs(f) < 1<<63 {
			return Int(int64(f)), nil
		}
		return def, nil
	case KindUndefined:
		return Value{}, r.undefError(v)
	}
	return def, nil
}

func fFloat(r *renderer, v Value, a *args) (Value, error) {
	if err := a.check(r, "float", "default"); err != nil {
		return Value{}, err
	}
	def, ok := a.get(0, "default")
	if !ok {
		def = Float(0)
	}
	switch v.kind {
	case KindInt, KindBool:
		return Float(float64(v.n)), nil
	case KindFloat:
		return v, nil
	case KindString:
		if f, ok := pyParseFloat(v.s); ok {
			return Float(f), nil
		}
		return def, nil
	case KindUndefined:
		return Value{}, r.undefError(v)
	}
	return def, nil
}

// pyParseInt is Python's int(s, base) for a str: white space around, a
// sign, _ between digits, and with base 0 or a matching base a 0x, 0o or
// 0b prefix.
func pyParseInt(s string, base int) (int64, bool) {
	s = strings.TrimFunc(s, pyIsSpace)
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg, s = s[0] == '-', s[1:]
	}
	if len(s) > 2 && s[0] == '0' {
		p := map[byte]int{'x': 16, 'X': 16, 'o': 8, 'O': 8, 'b': 2, 'B': 2}[s[1]]
		if p != 0 && (base == 0 || base == p) {
			s, base = strings.TrimPrefix(s[2:], "_"), p
		}
	}
	if base == 0 {
		base = 10
	}
	if s == "" || s[0] == '_' || s[len(s)-1] == '_' || strings.Contains(s, "__") {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), base, 64)
	if err != nil {
		return 0, false
	}
	if neg {
		n = -n
	}
	return n, true
}

// pyParseFloat is Python's float(s) for a str.
func pyParseFloat(s string) (float64, bool) {
	s = strings.TrimFunc(s, pyIsSpace)
	switch strings.ToLower(strings.TrimLeft(s, "+-")) {
	case "inf", "infinity", "nan":
	default:
		if s == "" || strings.ContainsAny(s, "xXpP") || strings.HasPrefix(s, "_") || strings.HasSuffix(s, "_") || strings.Contains(s, "__") {
			return 0, false
		}
	}
	f, err := strconv.ParseFloat(strings.ReplaceAll(s, "_", ""), 64)
	if err != nil && !isRangeErr(err) {
		return 0, false
	}
	return f, true
}

func fFormat(r *renderer, v Value, a *args) (Value, error) {
	if len(a.pos) > 0 && len(a.kw) > 0 {
		return Value{}, r.errorf(ErrType, "can't handle positional and keyword arguments at the same time")
	}
	s, err := r.softStr(v)
	if err != nil {
		return Value{}, err
	}
	if len(a.kw) > 0 {
		d := NewDict()
		for _, k := range a.kw {
			d.SetStr(k.name, k.v)
		}
		return r.percentFormat(s, DictValue(d))
	}
	return r.percentFormat(s, newTuple(a.pos))
}

func fIndent(r *renderer, v Value, a *args) (Value, error) {
	if err := a.check(r, "indent", "width", "first", "blank"); err != nil {
		return Value{}, err
	}
	s, err := r.softStr(v)
	if err != nil {
		return Value{}, err
	}
	ind := Str("    ")
	if w, ok := a.get(0, "width"); ok {
		switch {
		case w.kind == KindString:
			ind = w
		case w.isInt():
			if w.n > 1<<16 {
				return Value{}, r.budget(BudgetString, r.lim.StringBytes)
			}
			ind = Str(strings.Repeat(" ", int(max(w.n, 0))))
		default:
			return Value{}, r.errorf(ErrType, "can't multiply sequence by non-int of type '%s'", w.typeName())
		}
	}
	first, blank := false, false
	if f, ok := a.get(1, "first"); ok {
		first = f.truth()
	}
	if b, ok := a.get(2, "blank"); ok {
		blank = b.truth()
	}
	nl := Str("\n")
	text := concat2(s, nl)
	lines, err := mSplitlines(r, text, &args{})
	if err != nil {
		return Value{}, err
	}
	ls := lines.list().Items
	if err := r.newString(len(text.s) + len(ls)*(len(ind.s)+1)); err != nil {
		return Value{}, err
	}
	var t textBuf
	if first {
		t.write(ind)
	}
	for i, line := range ls {
		if i > 0 {
			t.write(nl)
			if blank || line.s != "" {
				t.write(ind)
			}
		}
		t.write(line)
	}
	out := t.value()
	out.flag = s.flag & flagSafe
	return out, nil
}

func fTrim(r *renderer, v Value, a *args) (Value, error) {
	s, err := r.softStr(v)
	if err != nil {
		return Value{}, err
	}
	return mStrip(true, true)(r, s, a)
}

func fTruncate(r *renderer, v Value, a *args) (Value, error) {
	if err := a.check(r, "truncate", "length", "killwords", "end", "leeway"); err != nil {
		return Value{}, err
	}
	s, err := r.softStr(v)
	if err != nil {
		return Value{}, err
	}
	length, err := intArg(r, a, 0, "length", 255)
	if err != nil {
		return Value{}, err
	}
	kill := false
	if k, ok := a.get(1, "killwords"); ok {
		kill = k.truth()
	}
	end := Str("...")
	if e, ok := a.get(2, "end"); ok {
		end = e
	}
	leeway, err := intArg(r, a, 3, "leeway", 5)
	if err != nil {
		return Value{}, err
	}
	n := int64(utf8.RuneCountInString(s.s))
	endLen := int64(utf8.RuneCountInString(end.s))
	if length < endLen || leeway < 0 {
		return Value{}, r.errorf(ErrValue, "expected length >= %d and leeway >= 0", endLen)
	}
	if n <= length+leeway {
		return s, nil
	}
	cut := substr(s, 0, runeOffset(s.s, int(length-endLen)))
	if !kill {
		if i := strings.LastIndexByte(cut.s, ' '); i >= 0 {
			cut = substr(cut, 0, i)
		}
	}
	cut.flag = 0
	return concat2(cut, end), nil
}

var wordRE = regexp.MustCompile(`[\p{L}\p{N}_]+`)

func fWordcount(r *renderer, v Value, a *args) (Value, error) {
	s, err := r.softStr(v)
	if err != nil {
		return Value{}, err
	}
	if err := r.work(len(s.s), 0); err != nil {
		return Value{}, err
	}
	return Int(int64(len(wordRE.FindAllStringIndex(s.s, -1)))), nil
}

var (
	tagRE     = regexp.MustCompile(`(?s)<!--.*?-->|<[^>]*>`)
	entityRE  = regexp.MustCompile(`&(#[0-9]+|#[xX][0-9a-fA-F]+|amp|lt|gt|quot|apos|#39|#34);`)
	entityMap = map[string]string{"amp": "&", "lt": "<", "gt": ">", "quot": "\"", "apos": "'"}
)

// fStriptags removes SGML/XML tags and collapses white space, as
// markupsafe's striptags does (the common entities are unescaped).
func fStriptags(r *renderer, v Value, a *args) (Value, error) {
	s, err := r.str(v)
	if err != nil {
		return Value{}, err
	}
	if err := r.work(len(s.s), 0); err != nil {
		return Value{}, err
	}
	text := strings.Join(strings.FieldsFunc(tagRE.ReplaceAllString(s.s, ""), pyIsSpace), " ")
	text = entityRE.ReplaceAllStringFunc(text, func(e string) string {
		name := e[1 : len(e)-1]
		if rep, ok := entityMap[name]; ok {
			return rep
		}
		var n int64
		var err error
		if strings.HasPrefix(name, "#x") || strings.HasPrefix(name, "#X") {
			n, err = strconv.ParseInt(name[2:], 16, 32)
		} else {
			n, err = strconv.ParseInt(name[1:], 10, 32)
		}
		if err != nil || n > unicode.MaxRune {
			return e
		}
		return string(rune(n))
	})
	return untrustedIf(text, tainted(s)), nil
}

func fSum(r *renderer, v Value, a *args) (Value, error) {
	if err := a.check(r, "sum", "attribute", "start"); err != nil {
		return Value{}, err
	}
	items, err := r.listOf(v)
	if err != nil {
		return Value{}, err
	}
	if items, err = r.mapAttribute(items, a, 0); err != nil {
		return Value{}, err
	}
	total, ok := a.get(1, "start")
	if !ok {
		total = Int(0)
	}
	for _, it := range items {
		if total.kind == KindString {
			return Value{}, r.errorf(ErrType, "sum() can't sum strings [use ''.join(seq) instead]")
		}
		if total, err = r.binop("+", total, it); err != nil {
			return Value{}, err
		}
	}
	return total, nil
}

func fMinMax(isMax bool) filterFunc {
	return func(r *renderer, v Value, a *args) (Value, error) {
		if err := a.check(r, "min", "case_sensitive", "attribute"); err != nil {
			return Value{}, err
		}
		items, err := r.listOf(v)
		if err != nil {
			return Value{}, err
		}
		if len(items) == 0 {
			return undefMsgf("No aggregated item, sequence was empty."), nil
		}
		key, err := r.sortKey(a, 0, 1)
		if err != nil {
			return Value{}, err
		}
		best, bestKey := items[0], Value{}
		if bestKey, err = key(items[0]); err != nil {
			return Value{}, err
		}
		for _, it := range items[1:] {
			k, err := key(it)
			if err != nil {
				return Value{}, err
			}
			op := "<"
			if isMax {
				op = ">"
			}
			better, err := r.compare(op, k, bestKey)
			if err != nil {
				return Value{}, err
			}
			if better {
				best, bestKey = it, k
			}
		}
		return best, nil
	}
}

// sortKey builds the key of sort-like filters from their case_sensitive
// (argument cs) and attribute (argument at) arguments.
func (r *renderer) sortKey(a *args, cs, at int) (func(Value) (Value, error), error) {
	caseSensitive := false
	if c, ok := a.get(cs, "case_sensitive"); ok {
		caseSensitive = c.truth()
	}
	get := func(v Value) (Value, error) { return v, nil }
	if attr, ok := a.get(at, "attribute"); ok && attr.kind != KindNone {
		var err error
		if get, err = r.attrGetter(attr, Value{}); err != nil {
			return nil, err
		}
	}
	return func(v Value) (Value, error) {
		k, err := get(v)
		if err != nil || caseSensitive {
			return k, err
		}
		return ignoreCase(k), nil
	}, nil
}

// sortValues sorts items by key, stably, as Python's sorted.
func (r *renderer) sortValues(items []Value, key func(Value) (Value, error), reverse bool) ([]Value, error) {
	if err := r.newItems(len(items)); err != nil {
		return nil, err
	}
	if err := r.tick(int64(len(items)) * int64(bitsLen(len(items)))); err != nil {
		return nil, err
	}
	keys := make([]Value, len(items))
	for i, it := range items {
		k, err := key(it)
		if err != nil {
			return nil, err
		}
		keys[i] = k
	}
	idx := make([]int, len(items))
	for i := range idx {
		idx[i] = i
	}
	var sortErr error
	slices.SortStableFunc(idx, func(i, j int) int {
		if sortErr != nil {
			return 0
		}
		x, y := keys[i], keys[j]
		if reverse {
			x, y = y, x
		}
		less, err := r.compare("<", x, y)
		if err != nil {
			sortErr = err
			return 0
		}
		if less {
			return -1
		}
		if more, err := r.compare("<", y, x); err != nil {
			sortErr = err
		} else if more {
			return 1
		}
		return 0
	})
	if sortErr != nil {
		return nil, sortErr
	}
	out := make([]Value, len(items))
	for i, k := range idx {
		out[i] = items[k]
	}
	return out, nil
}

func bitsLen(n int) int {
	b := 1
	for n > 1 {
		n >>= 1
		b++
	}
	return b
}

func fSort(r *renderer, v Value, a *args) (Value, error) {
	if err := a.check(r, "sort", "reverse", "case_sensitive", "attribute"); err != nil {
		return Value{}, err
	}
	items, err := r.listOf(v)
	if err != nil {
		return Value{}, err
	}
	reverse := false
	if rv, ok := a.get(0, "reverse"); ok {
		reverse = rv.truth()
	}
	key, err := r.sortKey(a, 1, 2)
	if err != nil {
		return Value{}, err
	}
	out, err := r.sortValues(items, key, reverse)
	if err != nil {
		return Value{}, err
	}
	return NewList(out), nil
}

func fDictsort(r *renderer, v Value, a *args) (Value, error) {
	if err := a.check(r, "dictsort", "case_sensitive", "by", "reverse"); err != nil {
		return Value{}, err
	}
	if v.kind != KindDict {
		if v.kind == KindUndefined {
			return Value{}, r.undefError(v)
		}
		return Value{}, r.errorf(ErrType, "'%s' object has no attribute 'items'", v.typeName())
	}
	caseSensitive, reverse := false, false
	if c, ok := a.get(0, "case_sensitive"); ok {
		caseSensitive = c.truth()
	}
	pos := 0
	if b, ok := a.get(1, "by"); ok {
		switch {
		case b.kind == KindString && b.s == "key":
		case b.kind == KindString && b.s == "value":
			pos = 1
		default:
			return Value{}, r.errorf(ErrValue, "You can only sort by either \"key\" or \"value\"")
		}
	}
	if rv, ok := a.get(2, "reverse"); ok {
		reverse = rv.truth()
	}
	items, err := r.dictItems(v.dict())
	if err != nil {
		return Value{}, err
	}
	out, err := r.sortValues(items.list().Items, func(it Value) (Value, error) {
		k := it.list().Items[pos]
		if !caseSensitive {
			k = ignoreCase(k)
		}
		return k, nil
	}, reverse)
	if err != nil {
		return Value{}, err
	}
	return NewList(out), nil
}

func fUnique(r *renderer, v Value, a *args) (Value, error) {
	if err := a.check(r, "unique", "case_sensitive", "attribute"); err != nil {
		return Value{}, err
	}
	items, err := r.listOf(v)
	if err != nil {
		return Value{}, err
	}
	key, err := r.sortKey(a, 0, 1)
	if err != nil {
		return Value{}, err
	}
	seen := map[hkey]bool{}
	var out []Value
	for _, it := range items {
		if err := r.tick(1); err != nil {
			return Value{}, err
		}
		k, err := key(it)
		if err != nil {
			return Value{}, err
		}
		hk, ok := hashKey(k, 0)
		if !ok {
			return Value{}, r.errorf(ErrType, "unhashable type: '%s'", k.typeName())
		}
		if !seen[hk] {
			seen[hk] = true
			out = append(out, it)
		}
	}
	return newIter("generator", out), nil
}

func fBatch(r *renderer, v Value, a *args) (Value, error) {
	if err := a.check(r, "batch", "linecount", "fill_with"); err != nil {
		return Value{}, err
	}
	n, err := intArg(r, a, 0, "linecount", 0)
	if err != nil {
		return Value{}, err
	}
	if n <= 0 {
		return Value{}, r.errorf(ErrValue, "batch size must be positive")
	}
	items, err := r.listOf(v)
	if err != nil {
		return Value{}, err
	}
	fill, hasFill := a.get(1, "fill_with")
	hasFill = hasFill && fill.kind != KindNone
	var out []Value
	for i := 0; i < len(items); i += int(n) {
		chunk := slices.Clone(items[i:min(len(items), i+int(n))])
		for hasFill && len(chunk) < int(n) {
			chunk = append(chunk, fill)
		}
		if err := r.newItems(len(chunk)); err != nil {
			return Value{}, err
		}
		out = append(out, NewList(chunk))
	}
	return newIter("generator", out), nil
}

func fSlice(r *renderer, v Value, a *args) (Value, error) {
	if err := a.check(r, "slice", "slices", "fill_with"); err != nil {
		return Value{}, err
	}
	n, err := intArg(r, a, 0, "slices", 0)
	if err != nil {
		return Value{}, err
	}
	if n <= 0 {
		return Value{}, r.errorf(ErrValue, "slices must be positive")
	}
	if err := r.newItems(int(min(n, int64(r.lim.Items)+1))); err != nil {
		return Value{}, err
	}
	items, err := r.listOf(v)
	if err != nil {
		return Value{}, err
	}
	fill, hasFill := a.get(1, "fill_with")
	hasFill = hasFill && fill.kind != KindNone
	per, extra := len(items)/int(n), len(items)%int(n)
	offset := 0
	out := make([]Value, 0, n)
	for k := 0; k < int(n); k++ {
		start := offset + k*per
		if k < extra {
			offset++
		}
		end := offset + (k+1)*per
		chunk := slices.Clone(items[start:end])
		if hasFill && k >= extra {
			chunk = append(chunk, fill)
		}
		out = append(out, NewList(chunk))
	}
	return newIter("generator", out), nil
}

func fGroupby(r *renderer, v Value, a *args) (Value, error) {
	if err := a.check(r, "groupby", "attribute", "default", "case_sensitive"); err != nil {
		return Value{}, err
	}
	attr, ok := a.get(0, "attribute")
	if !ok {
		return Value{}, r.errorf(ErrType, "groupby() missing required argument 'attribute'")
	}
	def, _ := a.get(1, "default")
	caseSensitive := false
	if c, ok := a.get(2, "case_sensitive"); ok {
		caseSensitive = c.truth()
	}
	get, err := r.attrGetter(attr, def)
	if err != nil {
		return Value{}, err
	}
	key := func(x Value) (Value, error) {
		k, err := get(x)
		if err != nil || caseSensitive {
			return k, err
		}
		return ignoreCase(k), nil
	}
	items, err := r.listOf(v)
	if err != nil {
		return Value{}, err
	}
	sorted, err := r.sortValues(items, key, false)
	if err != nil {
		return Value{}, err
	}
	var out []Value
	var group []Value
	var groupKey Value
	flush := func() error {
		if len(group) == 0 {
			return nil
		}
		k, err := get(group[0])
		if err != nil {
			return err
		}
		out = append(out, newTuple([]Value{k, NewList(group)}))
		group = nil
		return nil
	}
	for _, it := range sorted {
		k, err := key(it)
		if err != nil {
			return Value{}, err
		}
		if len(group) > 0 {
			same, err := r.equal(k, groupKey, 0)
			if err != nil {
				return Value{}, err
			}
			if !same {
				if err := flush(); err != nil {
					return Value{}, err
				}
			}
		}
		groupKey = k
		group = append(group, it)
	}
	if err := flush(); err != nil {
		return Value{}, err
	}
	if out == nil {
		out = []Value{}
	}
	return NewList(out), nil
}
