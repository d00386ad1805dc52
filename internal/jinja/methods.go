package jinja

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Methods of str, dict, list and tuple that templates call, with Python's
// semantics. Methods that change a list or dict are refused, as in
// transformers' ImmutableSandboxedEnvironment.

type methodFunc func(r *renderer, recv Value, a *args) (Value, error)

// Mutating methods: accessing one gives an undefined value whose use is a
// security error.
var (
	dictMutators = map[string]bool{"clear": true, "pop": true, "popitem": true, "setdefault": true, "update": true}
	listMutators = map[string]bool{"append": true, "clear": true, "pop": true, "reverse": true, "insert": true,
		"sort": true, "extend": true, "remove": true}
)

// methodFor returns the method name of obj, or nil.
func methodFor(obj Value, name string) methodFunc {
	switch obj.kind {
	case KindString:
		return strMethod(name)
	case KindDict:
		return dictMethod(name)
	case KindList:
		if name == "copy" {
			return mListCopy
		}
		fallthrough
	case KindTuple:
		switch name {
		case "count":
			return mSeqCount
		case "index":
			return mSeqIndex
		}
	}
	return nil
}

func strMethod(name string) methodFunc {
	switch name {
	case "strip":
		return mStrip(true, true)
	case "lstrip":
		return mStrip(true, false)
	case "rstrip":
		return mStrip(false, true)
	case "split":
		return mSplit(false)
	case "rsplit":
		return mSplit(true)
	case "splitlines":
		return mSplitlines
	case "startswith":
		return mAffix(false)
	case "endswith":
		return mAffix(true)
	case "upper":
		return mCase(pyUpper)
	case "lower":
		return mCase(pyLower)
	case "casefold":
		return mCase(pyCasefold)
	case "title":
		return mCase(pyTitle)
	case "capitalize":
		return mCase(pyCapitalize)
	case "swapcase":
		return mCase(swapCase)
	case "replace":
		return mReplace
	case "find":
		return mFind(false, false)
	case "rfind":
		return mFind(true, false)
	case "index":
		return mFind(false, true)
	case "rindex":
		return mFind(true, true)
	case "count":
		return mCount
	case "join":
		return mJoin
	case "format":
		return mFormat
	case "isalpha":
		return mIs(unicode.IsLetter)
	case "isdigit", "isdecimal":
		return mIs(unicode.IsDigit)
	case "isnumeric":
		return mIs(unicode.IsNumber)
	case "isalnum":
		return mIs(func(c rune) bool { return unicode.IsLetter(c) || unicode.IsNumber(c) })
	case "isspace":
		return mIs(pyIsSpace)
	case "islower":
		return mIsCase(false)
	case "isupper":
		return mIsCase(true)
	case "zfill":
		return mZfill
	case "ljust":
		return mJustify('l')
	case "rjust":
		return mJustify('r')
	case "center":
		return mJustify('c')
	case "removeprefix":
		return mRemove(false)
	case "removesuffix":
		return mRemove(true)
	case "partition":
		return mPartition(false)
	case "rpartition":
		return mPartition(true)
	}
	return nil
}

func dictMethod(name string) methodFunc {
	switch name {
	case "get":
		return mDictGet
	case "items", "keys", "values":
		return mDictView(name)
	case "copy":
		return mDictCopy
	}
	return nil
}

func mDictCopy(r *renderer, recv Value, a *args) (Value, error) {
	if err := r.newItems(recv.dict().Len()); err != nil {
		return Value{}, err
	}
	return DictValue(recv.dict().copy()), nil
}

func mListCopy(r *renderer, recv Value, a *args) (Value, error) {
	items := recv.list().Items
	if err := r.newItems(len(items)); err != nil {
		return Value{}, err
	}
	return NewList(append([]Value(nil), items...)), nil
}

func unsafeMethod(k Kind, name string) bool {
	switch k {
	case KindDict:
		return dictMutators[name]
	case KindList:
		return listMutators[name]
	}
	return false
}

// strArg returns argument i as a string (None: ok false).
func strArg(r *renderer, a *args, i int, name, fn string) (string, bool, error) {
	v, ok := a.get(i, name)
	if !ok || v.kind == KindNone {
		return "", false, nil
	}
	if v.kind != KindString {
		if v.kind == KindUndefined {
			return "", false, r.undefError(v)
		}
		return "", false, r.errorf(ErrType, "%s arg must be None or str, not %s", fn, v.typeName())
	}
	return v.s, true, nil
}

// intArg returns argument i as an int, def when absent or None.
func intArg(r *renderer, a *args, i int, name string, def int64) (int64, error) {
	v, ok := a.get(i, name)
	if !ok || v.kind == KindNone {
		return def, nil
	}
	if !v.isInt() {
		if v.kind == KindUndefined {
			return 0, r.undefError(v)
		}
		return 0, r.errorf(ErrType, "'%s' object cannot be interpreted as an integer", v.typeName())
	}
	return v.n, nil
}

func mStrip(left, right bool) methodFunc {
	return func(r *renderer, s Value, a *args) (Value, error) {
		if err := a.check(r, "strip", "chars"); err != nil {
			return Value{}, err
		}
		chars, ok, err := strArg(r, a, 0, "chars", "strip")
		if err != nil {
			return Value{}, err
		}
		if err := r.work(len(s.s), 0); err != nil {
			return Value{}, err
		}
		return stripValue(s, chars, ok, left, right), nil
	}
}

// stripValue strips white space (or the characters of chars, when set)
// from the ends of s, keeping provenance.
func stripValue(s Value, chars string, set, left, right bool) Value {
	cut := pyIsSpace
	if set {
		cut = func(c rune) bool { return strings.ContainsRune(chars, c) }
	}
	i, j := 0, len(s.s)
	if left {
		i = len(s.s) - len(strings.TrimLeftFunc(s.s, cut))
	}
	if right {
		j = len(strings.TrimRightFunc(s.s, cut))
	}
	if i >= j {
		return substr(s, 0, 0)
	}
	return substr(s, i, j)
}

func mSplit(fromRight bool) methodFunc {
	return func(r *renderer, s Value, a *args) (Value, error) {
		if err := a.check(r, "split", "sep", "maxsplit"); err != nil {
			return Value{}, err
		}
		sep, hasSep, err := strArg(r, a, 0, "sep", "split")
		if err != nil {
			return Value{}, err
		}
		maxsplit, err := intArg(r, a, 1, "maxsplit", -1)
		if err != nil {
			return Value{}, err
		}
		if hasSep && sep == "" {
			return Value{}, r.errorf(ErrValue, "empty separator")
		}
		if err := r.work(len(s.s), 0); err != nil {
			return Value{}, err
		}
		var cuts [][2]int
		switch {
		case !hasSep && fromRight:
			cuts = rsplitSpace(s.s, maxsplit)
		case !hasSep:
			cuts = splitSpace(s.s, maxsplit)
		case fromRight:
			cuts = rsplitSep(s.s, sep, maxsplit)
		default:
			cuts = splitSep(s.s, sep, maxsplit)
		}
		if err := r.newItems(len(cuts)); err != nil {
			return Value{}, err
		}
		out := make([]Value, len(cuts))
		for i, c := range cuts {
			out[i] = substr(s, c[0], c[1])
			out[i].flag = 0
		}
		return NewList(out), nil
	}
}

func splitSep(s, sep string, maxsplit int64) [][2]int {
	var cuts [][2]int
	at := 0
	for maxsplit != 0 {
		j := strings.Index(s[at:], sep)
		if j < 0 {
			break
		}
		cuts = append(cuts, [2]int{at, at + j})
		at += j + len(sep)
		maxsplit--
	}
	return append(cuts, [2]int{at, len(s)})
}

func rsplitSep(s, sep string, maxsplit int64) [][2]int {
	var rev [][2]int
	end := len(s)
	for maxsplit != 0 {
		j := strings.LastIndex(s[:end], sep)
		if j < 0 {
			break
		}
		rev = append(rev, [2]int{j + len(sep), end})
		end = j
		maxsplit--
	}
	rev = append(rev, [2]int{0, end})
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	return rev
}

func nextRune(s string, i int) (rune, int) { return utf8.DecodeRuneInString(s[i:]) }

func splitSpace(s string, maxsplit int64) [][2]int {
	var cuts [][2]int
	i := 0
	skip := func() {
		for i < len(s) {
			c, n := nextRune(s, i)
			if !pyIsSpace(c) {
				return
			}
			i += n
		}
	}
	skip()
	for i < len(s) {
		if maxsplit == 0 {
			return append(cuts, [2]int{i, len(s)})
		}
		start := i
		for i < len(s) {
			c, n := nextRune(s, i)
			if pyIsSpace(c) {
				break
			}
			i += n
		}
		cuts = append(cuts, [2]int{start, i})
		maxsplit--
		skip()
	}
	if cuts == nil {
		return [][2]int{}
	}
	return cuts
}

func rsplitSpace(s string, maxsplit int64) [][2]int {
	var rev [][2]int
	j := len(s)
	skip := func() {
		for j > 0 {
			c, n := utf8.DecodeLastRuneInString(s[:j])
			if !pyIsSpace(c) {
				return
			}
			j -= n
		}
	}
	skip()
	for j > 0 {
		if maxsplit == 0 {
			start := len(s[:j]) - len(strings.TrimLeftFunc(s[:j], pyIsSpace))
			rev = append(rev, [2]int{start, j})
			break
		}
		end := j
		for j > 0 {
			c, n := utf8.DecodeLastRuneInString(s[:j])
			if pyIsSpace(c) {
				break
			}
			j -= n
		}
		rev = append(rev, [2]int{j, end})
		maxsplit--
		skip()
	}
	for i, k := 0, len(rev)-1; i < k; i, k = i+1, k-1 {
		rev[i], rev[k] = rev[k], rev[i]
	}
	if rev == nil {
		return [][2]int{}
	}
	return rev
}

func isLineBreak(c rune) bool {
	switch c {
	case '\n', '\r', '\v', '\f', 0x1c, 0x1d, 0x1e, 0x85, 0x2028, 0x2029:
		return true
	}
	return false
}

func mSplitlines(r *renderer, s Value, a *args) (Value, error) {
	if err := a.check(r, "splitlines", "keepends"); err != nil {
		return Value{}, err
	}
	keep := false
	if v, ok := a.get(0, "keepends"); ok {
		keep = v.truth()
	}
	if err := r.work(len(s.s), 0); err != nil {
		return Value{}, err
	}
	var out []Value
	start := 0
	for i := 0; i < len(s.s); {
		c, n := nextRune(s.s, i)
		if !isLineBreak(c) {
			i += n
			continue
		}
		end := i + n
		if c == '\r' && end < len(s.s) && s.s[end] == '\n' {
			end++
		}
		if keep {
			out = append(out, substr(s, start, end))
		} else {
			out = append(out, substr(s, start, i))
		}
		start, i = end, end
		if err := r.newItems(len(out)); err != nil {
			return Value{}, err
		}
	}
	if start < len(s.s) {
		out = append(out, substr(s, start, len(s.s)))
	}
	if out == nil {
		out = []Value{}
	}
	return NewList(out), nil
}

// runeRange converts Python start/end code point arguments to byte offsets
// of s.
func runeRange(r *renderer, s string, a *args, i int) (int, int, error) {
	n := int64(utf8.RuneCountInString(s))
	lo, err := intArg(r, a, i, "start", 0)
	if err != nil {
		return 0, 0, err
	}
	hi, err := intArg(r, a, i+1, "end", n)
	if err != nil {
		return 0, 0, err
	}
	clamp := func(x int64) int64 {
		if x < 0 {
			x += n
		}
		return max(0, min(x, n))
	}
	lo, hi = clamp(lo), clamp(hi)
	if lo > hi {
		return -1, -1, nil
	}
	return runeOffset(s, int(lo)), runeOffset(s, int(hi)), nil
}

// runeOffset is the byte offset of code point k of s.
func runeOffset(s string, k int) int {
	if isASCII(s) {
		return k
	}
	for i := range s {
		if k == 0 {
			return i
		}
		k--
	}
	return len(s)
}

func mAffix(suffix bool) methodFunc {
	name := "startswith"
	if suffix {
		name = "endswith"
	}
	return func(r *renderer, s Value, a *args) (Value, error) {
		if err := a.check(r, name, "prefix", "start", "end"); err != nil {
			return Value{}, err
		}
		p, ok := a.get(0, "prefix")
		if !ok {
			return Value{}, r.errorf(ErrType, "%s() takes at least 1 argument (0 given)", name)
		}
		lo, hi, err := runeRange(r, s.s, a, 1)
		if err != nil || lo < 0 {
			return Bool(false), err
		}
		text := s.s[lo:hi]
		test := func(p Value) (bool, error) {
			if p.kind != KindString {
				return false, r.errorf(ErrType, "%s first arg must be str or a tuple of str, not %s", name, p.typeName())
			}
			if suffix {
				return strings.HasSuffix(text, p.s), nil
			}
			return strings.HasPrefix(text, p.s), nil
		}
		if p.kind == KindTuple {
			for _, it := range p.list().Items {
				ok, err := test(it)
				if err != nil || ok {
					return Bool(ok), err
				}
			}
			return Bool(false), nil
		}
		ok, err = test(p)
		return Bool(ok), err
	}
}

func mCase(f func(string) string) methodFunc {
	return func(r *renderer, s Value, a *args) (Value, error) {
		if err := a.check(r, "case"); err != nil {
			return Value{}, err
		}
		if err := r.newString(len(s.s)); err != nil {
			return Value{}, err
		}
		return caseValue(s, f), nil
	}
}

// caseValue applies a case mapping to s. Mappings that look at the
// character before (title, capitalize) run over the whole text; the
// provenance is kept when the length is unchanged, else the result is
// untrusted if any of s was.
func caseValue(s Value, f func(string) string) Value {
	out := f(s.s)
	v := Value{kind: KindString, s: out, flag: s.flag & flagSafe}
	if s.ref != nil {
		if len(out) == len(s.s) {
			v.ref = s.ref
		} else {
			v.ref = taintAll
		}
	}
	return v
}

func mReplace(r *renderer, s Value, a *args) (Value, error) {
	if err := a.check(r, "replace", "old", "new", "count"); err != nil {
		return Value{}, err
	}
	old, ok1 := a.get(0, "old")
	nw, ok2 := a.get(1, "new")
	if !ok1 || !ok2 {
		return Value{}, r.errorf(ErrType, "replace() takes at least 2 arguments")
	}
	if old.kind != KindString || nw.kind != KindString {
		return Value{}, r.errorf(ErrType, "replace() argument must be str")
	}
	count, err := intArg(r, a, 2, "count", -1)
	if err != nil {
		return Value{}, err
	}
	if s.flag&flagSafe != 0 {
		nw = mapRuns(nw, htmlEscape)
	}
	return r.replace(s, old.s, nw, count)
}

// replace is Python's str.replace with provenance: the kept pieces of s
// keep theirs, each replacement carries new's.
func (r *renderer) replace(s Value, old string, nw Value, count int64) (Value, error) {
	if err := r.work(len(s.s), 0); err != nil {
		return Value{}, err
	}
	if count < 0 {
		count = int64(len(s.s)) + 1
	}
	var pieces [][2]int // kept pieces of s, a replacement between each
	at := 0
	if old == "" {
		// Python inserts new before every character and at the end.
		pieces = append(pieces, [2]int{0, 0})
		for i := range s.s {
			if i == 0 {
				continue
			}
			if int64(len(pieces)) > count {
				break
			}
			pieces = append(pieces, [2]int{at, i})
			at = i
		}
		if int64(len(pieces)) <= count && len(s.s) > 0 {
			pieces = append(pieces, [2]int{at, len(s.s)})
			at = len(s.s)
		}
		pieces = append(pieces, [2]int{at, len(s.s)})
	} else {
		for int64(len(pieces)) < count {
			j := strings.Index(s.s[at:], old)
			if j < 0 {
				break
			}
			pieces = append(pieces, [2]int{at, at + j})
			at += j + len(old)
		}
		pieces = append(pieces, [2]int{at, len(s.s)})
	}
	size := len(s.s) - (len(pieces)-1)*len(old) + (len(pieces)-1)*len(nw.s)
	if err := r.newString(max(size, 0)); err != nil {
		return Value{}, err
	}
	if len(pieces) == 1 {
		return s, nil
	}
	var t textBuf
	t.grow(size)
	for i, p := range pieces {
		if i > 0 {
			t.write(nw)
		}
		t.write(substr(s, p[0], p[1]))
	}
	out := t.value()
	out.flag = s.flag & flagSafe
	return out, nil
}

func mFind(fromRight, raise bool) methodFunc {
	return func(r *renderer, s Value, a *args) (Value, error) {
		if err := a.check(r, "find", "sub", "start", "end"); err != nil {
			return Value{}, err
		}
		sub, ok := a.get(0, "sub")
		if !ok || sub.kind != KindString {
			return Value{}, r.errorf(ErrType, "must be str, not %s", sub.typeName())
		}
		lo, hi, err := runeRange(r, s.s, a, 1)
		if err != nil {
			return Value{}, err
		}
		if err := r.work(len(s.s), 0); err != nil {
			return Value{}, err
		}
		i := -1
		if lo >= 0 {
			if fromRight {
				i = strings.LastIndex(s.s[lo:hi], sub.s)
			} else {
				i = strings.Index(s.s[lo:hi], sub.s)
			}
			if i >= 0 {
				i = utf8.RuneCountInString(s.s[:lo+i])
			}
		}
		if i < 0 && raise {
			return Value{}, r.errorf(ErrValue, "substring not found")
		}
		return Int(int64(i)), nil
	}
}

func mCount(r *renderer, s Value, a *args) (Value, error) {
	if err := a.check(r, "count", "sub", "start", "end"); err != nil {
		return Value{}, err
	}
	sub, ok := a.get(0, "sub")
	if !ok || sub.kind != KindString {
		return Value{}, r.errorf(ErrType, "must be str, not %s", sub.typeName())
	}
	lo, hi, err := runeRange(r, s.s, a, 1)
	if err != nil || lo < 0 {
		return Int(0), err
	}
	if err := r.work(len(s.s), 0); err != nil {
		return Value{}, err
	}
	if sub.s == "" {
		return Int(int64(utf8.RuneCountInString(s.s[lo:hi]) + 1)), nil
	}
	return Int(int64(strings.Count(s.s[lo:hi], sub.s))), nil
}

func mJoin(r *renderer, s Value, a *args) (Value, error) {
	if err := a.check(r, "join", "iterable"); err != nil {
		return Value{}, err
	}
	v, ok := a.get(0, "iterable")
	if !ok {
		return Value{}, r.errorf(ErrType, "join() takes exactly one argument (0 given)")
	}
	seq, err := r.iterate(v)
	if err != nil {
		return Value{}, err
	}
	for i := 0; i < seq.len(); i++ {
		if it := seq.at(i); it.kind != KindString {
			return Value{}, r.errorf(ErrType, "sequence item %d: expected str instance, %s found", i, it.typeName())
		}
	}
	return r.joinStrings(seq, s)
}

// joinStrings joins the strings of seq with sep, keeping provenance.
func (r *renderer) joinStrings(seq sequence, sep Value) (Value, error) {
	n := seq.len()
	size := max(n-1, 0) * len(sep.s)
	for i := 0; i < n; i++ {
		size += len(seq.at(i).s)
		if int64(size) > r.lim.StringBytes {
			return Value{}, r.budget(BudgetString, r.lim.StringBytes)
		}
	}
	if err := r.newString(size); err != nil {
		return Value{}, err
	}
	var t textBuf
	t.grow(size)
	for i := 0; i < n; i++ {
		if i > 0 {
			t.write(sep)
		}
		t.write(seq.at(i))
	}
	return t.value(), nil
}

func mFormat(r *renderer, s Value, a *args) (Value, error) {
	return r.strFormat(s, a)
}

func mIs(pred func(rune) bool) methodFunc {
	return func(r *renderer, s Value, a *args) (Value, error) {
		if s.s == "" {
			return Bool(false), nil
		}
		for _, c := range s.s {
			if !pred(c) {
				return Bool(false), nil
			}
		}
		return Bool(true), nil
	}
}

func mIsCase(upper bool) methodFunc {
	return func(r *renderer, s Value, a *args) (Value, error) {
		cased := false
		for _, c := range s.s {
			switch {
			case unicode.IsUpper(c) || unicode.IsTitle(c):
				if !upper {
					return Bool(false), nil
				}
				cased = true
			case unicode.IsLower(c):
				if upper {
					return Bool(false), nil
				}
				cased = true
			}
		}
		return Bool(cased), nil
	}
}

func mZfill(r *renderer, s Value, a *args) (Value, error) {
	w, err := intArg(r, a, 0, "width", 0)
	if err != nil {
		return Value{}, err
	}
	n := int64(utf8.RuneCountInString(s.s))
	if w <= n {
		return s, nil
	}
	if err := r.newString(int(w-n) + len(s.s)); err != nil {
		return Value{}, err
	}
	pad := strings.Repeat("0", int(w-n))
	if s.s != "" && (s.s[0] == '+' || s.s[0] == '-') {
		return concat2(concat2(substr(s, 0, 1), Str(pad)), substr(s, 1, len(s.s))), nil
	}
	return concat2(Str(pad), s), nil
}

func mJustify(how byte) methodFunc {
	return func(r *renderer, s Value, a *args) (Value, error) {
		w, err := intArg(r, a, 0, "width", 0)
		if err != nil {
			return Value{}, err
		}
		fill := " "
		if f, ok := a.get(1, "fillchar"); ok {
			if f.kind != KindString || utf8.RuneCountInString(f.s) != 1 {
				return Value{}, r.errorf(ErrType, "The fill character must be exactly one character long")
			}
			fill = f.s
		}
		return r.justify(s, w, fill, how)
	}
}

// justify pads s to width w code points: 'l' on the right, 'r' on the
// left, 'c' on both sides as Python's str.center.
func (r *renderer) justify(s Value, w int64, fill string, how byte) (Value, error) {
	n := int64(utf8.RuneCountInString(s.s))
	if w <= n {
		return s, nil
	}
	if err := r.newString(int(w-n)*len(fill) + len(s.s)); err != nil {
		return Value{}, err
	}
	total := int(w - n)
	left := 0
	switch how {
	case 'r':
		left = total
	case 'c':
		left = total / 2
		if total%2 == 1 && n%2 == 1 {
			left++
		}
	}
	return concat2(concat2(Str(strings.Repeat(fill, left)), s), Str(strings.Repeat(fill, total-left))), nil
}

func mRemove(suffix bool) methodFunc {
	return func(r *renderer, s Value, a *args) (Value, error) {
		p, ok := a.get(0, "prefix")
		if !ok || p.kind != KindString {
			return Value{}, r.errorf(ErrType, "argument must be str")
		}
		switch {
		case suffix && strings.HasSuffix(s.s, p.s):
			return substr(s, 0, len(s.s)-len(p.s)), nil
		case !suffix && strings.HasPrefix(s.s, p.s):
			return substr(s, len(p.s), len(s.s)), nil
		}
		return s, nil
	}
}

func mPartition(fromRight bool) methodFunc {
	return func(r *renderer, s Value, a *args) (Value, error) {
		sep, ok := a.get(0, "sep")
		if !ok || sep.kind != KindString {
			return Value{}, r.errorf(ErrType, "must be str")
		}
		if sep.s == "" {
			return Value{}, r.errorf(ErrValue, "empty separator")
		}
		var i int
		if fromRight {
			i = strings.LastIndex(s.s, sep.s)
		} else {
			i = strings.Index(s.s, sep.s)
		}
		empty := substr(s, 0, 0)
		switch {
		case i < 0 && fromRight:
			return newTuple([]Value{empty, empty, s}), nil
		case i < 0:
			return newTuple([]Value{s, empty, empty}), nil
		}
		return newTuple([]Value{substr(s, 0, i), substr(s, i, i+len(sep.s)), substr(s, i+len(sep.s), len(s.s))}), nil
	}
}

func mDictGet(r *renderer, d Value, a *args) (Value, error) {
	if err := a.check(r, "get", "key", "default"); err != nil {
		return Value{}, err
	}
	k, ok := a.get(0, "key")
	if !ok {
		return Value{}, r.errorf(ErrType, "get expected at least 1 argument, got 0")
	}
	if _, ok := hashKey(k, 0); !ok {
		return Value{}, r.errorf(ErrType, "unhashable type: '%s'", k.typeName())
	}
	if v, ok := d.dict().Get(k); ok {
		return v, nil
	}
	if def, ok := a.get(1, "default"); ok {
		return def, nil
	}
	return None(), nil
}

// mDictView returns items(), keys() or values() as a list (Python gives a
// view; templates only iterate, test and count them).
func mDictView(which string) methodFunc {
	return func(r *renderer, d Value, a *args) (Value, error) {
		if err := a.check(r, which); err != nil {
			return Value{}, err
		}
		dd := d.dict()
		switch which {
		case "keys":
			return NewList(dd.keys), nil
		case "values":
			return NewList(dd.vals), nil
		}
		return r.dictItems(dd)
	}
}

func (r *renderer) dictItems(d *Dict) (Value, error) {
	if err := r.newItems(d.Len() * 3); err != nil {
		return Value{}, err
	}
	out := make([]Value, d.Len())
	pairs := make([]Value, 2*d.Len())
	for i := range d.keys {
		pairs[2*i], pairs[2*i+1] = d.keys[i], d.vals[i]
		out[i] = newTuple(pairs[2*i : 2*i+2 : 2*i+2])
	}
	return NewList(out), nil
}

func mSeqCount(r *renderer, s Value, a *args) (Value, error) {
	x, ok := a.get(0, "value")
	if !ok {
		return Value{}, r.errorf(ErrType, "count() takes exactly one argument (0 given)")
	}
	n := int64(0)
	for _, it := range s.list().Items {
		eq, err := r.equal(it, x, 0)
		if err != nil {
			return Value{}, err
		}
		if eq {
			n++
		}
	}
	return Int(n), nil
}

func mSeqIndex(r *renderer, s Value, a *args) (Value, error) {
	x, ok := a.get(0, "value")
	if !ok {
		return Value{}, r.errorf(ErrType, "index expected at least 1 argument, got 0")
	}
	for i, it := range s.list().Items {
		eq, err := r.equal(it, x, 0)
		if err != nil {
			return Value{}, err
		}
		if eq {
			return Int(int64(i)), nil
		}
	}
	return Value{}, r.errorf(ErrValue, "value is not in %s", s.typeName())
}
