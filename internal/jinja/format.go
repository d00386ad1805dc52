package jinja

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// String formatting: Python's "fmt % values", str.format and
// datetime.strftime (for strftime_now).

// fmtSpec is a parsed conversion: flags, width, precision and type.
type fmtSpec struct {
	minus, plus, space, zero, alt bool
	width, prec                   int // -1: not given
	typ                           byte
	fill                          rune
	align                         byte // str.format: < > ^ = (0: default)
	comma                         bool
}

// percentFormat is Python's s % values.
func (r *renderer) percentFormat(s, values Value) (Value, error) {
	var pos []Value
	var mapping *Dict
	switch values.kind {
	case KindTuple:
		pos = values.list().Items
	case KindDict:
		mapping = values.dict()
		pos = []Value{values}
	default:
		pos = []Value{values}
	}
	next := 0
	arg := func() (Value, error) {
		if next >= len(pos) {
			return Value{}, r.errorf(ErrType, "not enough arguments for format string")
		}
		next++
		return pos[next-1], nil
	}
	var t textBuf
	f := s.s
	usedMapping := false
	for i := 0; i < len(f); {
		j := strings.IndexByte(f[i:], '%')
		if j < 0 {
			t.write(substr(s, i, len(f)))
			break
		}
		t.write(substr(s, i, i+j))
		i += j + 1
		if i >= len(f) {
			return Value{}, r.errorf(ErrValue, "incomplete format")
		}
		if f[i] == '%' {
			t.writeTrusted("%")
			i++
			continue
		}
		var v Value
		haveV := false
		if f[i] == '(' {
			end := strings.IndexByte(f[i:], ')')
			if end < 0 {
				return Value{}, r.errorf(ErrValue, "incomplete format key")
			}
			if mapping == nil {
				return Value{}, r.errorf(ErrType, "format requires a mapping")
			}
			key := f[i+1 : i+end]
			got, ok := mapping.GetStr(key)
			if !ok {
				return Value{}, r.errorf(ErrValue, "KeyError: '%s'", key)
			}
			v, haveV, usedMapping = got, true, true
			i += end + 1
		}
		sp := fmtSpec{width: -1, prec: -1, fill: ' '}
	flags:
		for ; i < len(f); i++ {
			switch f[i] {
			case '-':
				sp.minus = true
			case '+':
				sp.plus = true
			case ' ':
				sp.space = true
			case '#':
				sp.alt = true
			case '0':
				sp.zero = true
			default:
				break flags
			}
		}
		num := func() (int, error) {
			if i < len(f) && f[i] == '*' {
				i++
				w, err := arg()
				if err != nil {
					return 0, err
				}
				if !w.isInt() {
					return 0, r.errorf(ErrType, "* wants int")
				}
				return int(w.n), nil
			}
			start := i
			for i < len(f) && f[i] >= '0' && f[i] <= '9' {
				i++
			}
			if start == i {
				return -1, nil
			}
			n, err := strconv.Atoi(f[start:i])
			if err != nil || n > 1<<20 {
				return 0, r.errorf(ErrValue, "width too big")
			}
			return n, nil
		}
		var err error
		if sp.width, err = num(); err != nil {
			return Value{}, err
		}
		if sp.width < -1 {
			sp.minus, sp.width = true, -sp.width
		}
		if i < len(f) && f[i] == '.' {
			i++
			if sp.prec, err = num(); err != nil {
				return Value{}, err
			}
			sp.prec = max(sp.prec, 0)
		}
		for i < len(f) && (f[i] == 'h' || f[i] == 'l' || f[i] == 'L') {
			i++
		}
		if i >= len(f) {
			return Value{}, r.errorf(ErrValue, "incomplete format")
		}
		sp.typ = f[i]
		i++
		if !haveV {
			if v, err = arg(); err != nil {
				return Value{}, err
			}
		}
		out, err := r.formatOne(v, sp, true)
		if err != nil {
			return Value{}, err
		}
		if err := r.newString(t.len() + len(out.s)); err != nil {
			return Value{}, err
		}
		t.write(out)
	}
	if next < len(pos) && !usedMapping && mapping == nil {
		return Value{}, r.errorf(ErrType, "not all arguments converted during string formatting")
	}
	out := t.value()
	return out, nil
}

// formatOne formats one value for a conversion (percent: printf-style
// types; else str.format's).
func (r *renderer) formatOne(v Value, sp fmtSpec, percent bool) (Value, error) {
	var body Value
	numeric := false
	switch sp.typ {
	case 's', 'r', 'a', 0:
		var err error
		if sp.typ == 'r' || sp.typ == 'a' {
			var b reprBuf
			if err = r.repr(&b, v, 0); err == nil {
				body = untrustedIf(b.String(), b.untrusted)
			}
		} else {
			body, err = r.str(v)
		}
		if err != nil {
			return Value{}, err
		}
		if sp.prec >= 0 && utf8.RuneCountInString(body.s) > sp.prec {
			body = substr(body, 0, runeOffset(body.s, sp.prec))
		}
		if sp.typ == 0 && v.isNumber() {
			numeric = true
		}
	case 'c':
		switch {
		case v.isInt():
			body = Str(string(rune(v.n)))
		case v.kind == KindString && utf8.RuneCountInString(v.s) == 1:
			body = v
		default:
			return Value{}, r.errorf(ErrType, "%%c requires int or char")
		}
	default:
		if !v.isNumber() {
			if v.kind == KindUndefined {
				return Value{}, r.undefError(v)
			}
			return Value{}, r.errorf(ErrType, "%%%c format: a real number is required, not %s", sp.typ, v.typeName())
		}
		s, err := r.formatNumber(v, sp)
		if err != nil {
			return Value{}, err
		}
		body, numeric = Str(s), true
	}
	return r.pad(body, sp, numeric, percent)
}

func (r *renderer) formatNumber(v Value, sp fmtSpec) (string, error) {
	var s string
	neg := false
	switch sp.typ {
	case 'd', 'i', 'u', 'n':
		n := v.n
		if v.kind == KindFloat {
			f := v.float()
			if math.IsNaN(f) || math.IsInf(f, 0) {
				return "", r.errorf(ErrValue, "cannot convert float %s to integer", pythonFloat(f))
			}
			n = int64(f)
		}
		neg = n < 0
		s = strconv.FormatUint(absU(n), 10)
		if sp.comma {
			s = groupThousands(s)
		}
	case 'x', 'X', 'o', 'b':
		if !v.isInt() {
			return "", r.errorf(ErrType, "%%%c format: an integer is required, not float", sp.typ)
		}
		neg = v.n < 0
		base := map[byte]int{'x': 16, 'X': 16, 'o': 8, 'b': 2}[sp.typ]
		s = strconv.FormatUint(absU(v.n), base)
		if sp.typ == 'X' {
			s = strings.ToUpper(s)
		}
		if sp.alt {
			s = "0" + string(sp.typ) + s
		}
	case 'e', 'E', 'f', 'F', 'g', 'G', '%':
		f := v.asFloat()
		neg = f < 0 || f == 0 && math.Signbit(f)
		f = math.Abs(f)
		prec := sp.prec
		if prec < 0 {
			prec = 6
		}
		switch sp.typ {
		case '%':
			s = strconv.FormatFloat(f*100, 'f', prec, 64) + "%"
		case 'e', 'E':
			s = strconv.FormatFloat(f, 'e', prec, 64)
		case 'f', 'F':
			s = strconv.FormatFloat(f, 'f', prec, 64)
			if sp.comma {
				ip, fp, _ := strings.Cut(s, ".")
				s = groupThousands(ip)
				if fp != "" {
					s += "." + fp
				}
			}
		default:
			s = pyGeneral(f, prec, sp.alt)
		}
		if math.IsInf(f, 0) {
			s = "inf"
		} else if math.IsNaN(f) {
			s, neg = "nan", false
		}
		if sp.typ == 'E' || sp.typ == 'G' || sp.typ == 'F' {
			s = strings.ToUpper(s)
		}
	default:
		return "", r.errorf(ErrValue, "unsupported format character '%c'", sp.typ)
	}
	switch {
	case neg:
		s = "-" + s
	case sp.plus:
		s = "+" + s
	case sp.space:
		s = " " + s
	}
	return s, nil
}

func absU(n int64) uint64 {
	if n < 0 {
		return uint64(-(n + 1)) + 1
	}
	return uint64(n)
}

func groupThousands(s string) string {
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// pyGeneral is Python's 'g' format.
func pyGeneral(f float64, prec int, alt bool) string {
	if prec == 0 {
		prec = 1
	}
	if f == 0 {
		if alt {
			return "0." + strings.Repeat("0", prec-1)
		}
		return "0"
	}
	exp := int(math.Floor(math.Log10(f)))
	// Rounding can move the exponent: take it from the 'e' form.
	es := strconv.FormatFloat(f, 'e', prec-1, 64)
	if i := strings.IndexByte(es, 'e'); i >= 0 {
		exp, _ = strconv.Atoi(es[i+1:])
	}
	var s string
	if exp < -4 || exp >= prec {
		s = es
		mant, e, _ := strings.Cut(s, "e")
		if !alt && strings.Contains(mant, ".") {
			mant = strings.TrimRight(strings.TrimRight(mant, "0"), ".")
		}
		n, _ := strconv.Atoi(e)
		sign := "+"
		if n < 0 {
			sign, n = "-", -n
		}
		s = fmt.Sprintf("%se%s%02d", mant, sign, n)
	} else {
		s = strconv.FormatFloat(f, 'f', max(prec-1-exp, 0), 64)
		if !alt && strings.Contains(s, ".") {
			s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
		}
	}
	return s
}

// pad applies width, fill and alignment.
func (r *renderer) pad(body Value, sp fmtSpec, numeric, percent bool) (Value, error) {
	n := utf8.RuneCountInString(body.s)
	if sp.width <= n {
		return body, nil
	}
	if err := r.newString(len(body.s) + (sp.width-n)*utf8.RuneLen(sp.fill)); err != nil {
		return Value{}, err
	}
	gap := sp.width - n
	align := sp.align
	if align == 0 {
		switch {
		case percent && sp.minus:
			align = '<'
		case percent && sp.zero && numeric:
			align = '='
		case percent, numeric:
			align = '>'
		default:
			align = '<'
		}
	}
	fill := string(sp.fill)
	if percent && align == '=' {
		fill = "0"
	}
	switch align {
	case '<':
		return concat2(body, Str(strings.Repeat(fill, gap))), nil
	case '^':
		left := gap / 2
		return concat2(concat2(Str(strings.Repeat(fill, left)), body), Str(strings.Repeat(fill, gap-left))), nil
	case '=':
		s := body.s
		sign := ""
		if s != "" && (s[0] == '-' || s[0] == '+' || s[0] == ' ') {
			sign, s = s[:1], s[1:]
		}
		if len(s) > 1 && s[0] == '0' && strings.ContainsRune("xXob", rune(s[1])) {
			sign, s = sign+s[:2], s[2:]
		}
		return Str(sign + strings.Repeat(fill, gap) + s), nil
	}
	return concat2(Str(strings.Repeat(fill, gap)), body), nil
}

// strFormat is Python's str.format (through Jinja2's sandboxed
// formatter): {} {0} {name} with .attr and [key] lookups, !r !s !a and a
// format spec.
func (r *renderer) strFormat(s Value, a *args) (Value, error) {
	var t textBuf
	f := s.s
	auto := 0
	for i := 0; i < len(f); {
		c := f[i]
		switch {
		case c == '{' && i+1 < len(f) && f[i+1] == '{':
			t.writeTrusted("{")
			i += 2
			continue
		case c == '}' && i+1 < len(f) && f[i+1] == '}':
			t.writeTrusted("}")
			i += 2
			continue
		case c == '}':
			return Value{}, r.errorf(ErrValue, "Single '}' encountered in format string")
		case c != '{':
			j := i
			for j < len(f) && f[j] != '{' && f[j] != '}' {
				j++
			}
			t.write(substr(s, i, j))
			i = j
			continue
		}
		end := strings.IndexByte(f[i:], '}')
		if end < 0 {
			return Value{}, r.errorf(ErrValue, "Single '{' encountered in format string")
		}
		field := f[i+1 : i+end]
		i += end + 1
		name, spec, _ := strings.Cut(field, ":")
		conv := byte(0)
		if k := strings.IndexByte(name, '!'); k >= 0 {
			if k+2 != len(name) {
				return Value{}, r.errorf(ErrValue, "invalid conversion in format string")
			}
			conv, name = name[k+1], name[:k]
		}
		v, err := r.formatField(name, a, &auto)
		if err != nil {
			return Value{}, err
		}
		sp, err := r.parseFormatSpec(spec)
		if err != nil {
			return Value{}, err
		}
		if conv == 'r' || conv == 'a' {
			var b reprBuf
			if err := r.repr(&b, v, 0); err != nil {
				return Value{}, err
			}
			v = untrustedIf(b.String(), b.untrusted)
		} else if conv == 's' {
			if v, err = r.str(v); err != nil {
				return Value{}, err
			}
		}
		if sp.typ == 0 && !v.isNumber() {
			sp.typ = 's'
		} else if sp.typ == 0 && v.isInt() && sp.prec < 0 {
			sp.typ = 'd'
		}
		out, err := r.formatOne(v, sp, false)
		if err != nil {
			return Value{}, err
		}
		if err := r.newString(t.len() + len(out.s)); err != nil {
			return Value{}, err
		}
		t.write(out)
	}
	return t.value(), nil
}

// formatField resolves a str.format field name: an index or a name, then
// .attr and [key] parts.
func (r *renderer) formatField(name string, a *args, auto *int) (Value, error) {
	head := name
	rest := ""
	if k := strings.IndexAny(name, ".["); k >= 0 {
		head, rest = name[:k], name[k:]
	}
	var v Value
	switch {
	case head == "":
		if *auto >= len(a.pos) {
			return Value{}, r.errorf(ErrValue, "Replacement index %d out of range for positional args tuple", *auto)
		}
		v = a.pos[*auto]
		*auto++
	case strings.Trim(head, "0123456789") == "":
		i, _ := strconv.Atoi(head)
		if i >= len(a.pos) {
			return Value{}, r.errorf(ErrValue, "Replacement index %d out of range for positional args tuple", i)
		}
		v = a.pos[i]
	default:
		got, ok := kwOnly(a, head)
		if !ok {
			return Value{}, r.errorf(ErrValue, "KeyError: '%s'", head)
		}
		v = got
	}
	for rest != "" {
		var err error
		if rest[0] == '.' {
			k := strings.IndexAny(rest[1:], ".[")
			if k < 0 {
				k = len(rest) - 1
			}
			if v, err = r.getattr(v, rest[1:1+k]); err != nil {
				return Value{}, err
			}
			rest = rest[1+k:]
			continue
		}
		k := strings.IndexByte(rest, ']')
		if k < 0 {
			return Value{}, r.errorf(ErrValue, "Missing ']' in format string")
		}
		key := rest[1:k]
		var kv Value = Str(key)
		if n, err := strconv.ParseInt(key, 10, 64); err == nil {
			kv = Int(n)
		}
		if v, err = r.getitem(v, kv); err != nil {
			return Value{}, err
		}
		rest = rest[k+1:]
	}
	return v, nil
}

// parseFormatSpec parses [[fill]align][sign][#][0][width][,][.prec][type].
func (r *renderer) parseFormatSpec(spec string) (fmtSpec, error) {
	sp := fmtSpec{width: -1, prec: -1, fill: ' '}
	isAlign := func(c byte) bool { return c == '<' || c == '>' || c == '^' || c == '=' }
	i := 0
	if c, n := utf8.DecodeRuneInString(spec); n > 0 && n < len(spec) && isAlign(spec[n]) {
		sp.fill, sp.align, i = c, spec[n], n+1
	} else if len(spec) > 0 && isAlign(spec[0]) {
		sp.align, i = spec[0], 1
	}
	if i < len(spec) {
		switch spec[i] {
		case '+':
			sp.plus = true
			i++
		case ' ':
			sp.space = true
			i++
		case '-':
			i++
		}
	}
	if i < len(spec) && spec[i] == '#' {
		sp.alt = true
		i++
	}
	if i < len(spec) && spec[i] == '0' {
		if sp.align == 0 {
			sp.fill, sp.align = '0', '='
		}
		i++
	}
	start := i
	for i < len(spec) && spec[i] >= '0' && spec[i] <= '9' {
		i++
	}
	if i > start {
		w, err := strconv.Atoi(spec[start:i])
		if err != nil || w > 1<<20 {
			return sp, r.errorf(ErrValue, "width too big")
		}
		sp.width = w
	}
	if i < len(spec) && spec[i] == ',' {
		sp.comma = true
		i++
	}
	if i < len(spec) && spec[i] == '.' {
		i++
		start := i
		for i < len(spec) && spec[i] >= '0' && spec[i] <= '9' {
			i++
		}
		p, err := strconv.Atoi(spec[start:i])
		if err != nil || p > 1<<10 {
			return sp, r.errorf(ErrValue, "format specifier missing precision")
		}
		sp.prec = p
	}
	if i < len(spec) {
		sp.typ = spec[i]
		i++
	}
	if i != len(spec) {
		return sp, r.errorf(ErrValue, "Invalid format specifier '%s'", spec)
	}
	return sp, nil
}

// strftime formats t with Python's strftime directives (%a %A %b %B %c %d
// %e %f %H %I %j %m %M %p %S %U %w %W %x %X %y %Y %z %Z %%, and glibc's
// %-d style unpadded forms); others are copied as written.
func strftime(t time.Time, format string) string {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' || i+1 == len(format) {
			b.WriteByte(c)
			continue
		}
		i++
		unpad := false
		if format[i] == '-' && i+1 < len(format) {
			unpad = true
			i++
		}
		num := func(n, width int) {
			s := strconv.Itoa(n)
			if !unpad {
				for len(s) < width {
					s = "0" + s
				}
			}
			b.WriteString(s)
		}
		switch format[i] {
		case 'a':
			b.WriteString(t.Format("Mon"))
		case 'A':
			b.WriteString(t.Format("Monday"))
		case 'b', 'h':
			b.WriteString(t.Format("Jan"))
		case 'B':
			b.WriteString(t.Format("January"))
		case 'c':
			b.WriteString(t.Format("Mon Jan _2 15:04:05 2006"))
		case 'd':
			num(t.Day(), 2)
		case 'e':
			b.WriteString(t.Format("_2"))
		case 'f':
			num(t.Nanosecond()/1000, 6)
		case 'H':
			num(t.Hour(), 2)
		case 'I':
			h := t.Hour() % 12
			if h == 0 {
				h = 12
			}
			num(h, 2)
		case 'j':
			num(t.YearDay(), 3)
		case 'm':
			num(int(t.Month()), 2)
		case 'M':
			num(t.Minute(), 2)
		case 'p':
			b.WriteString(t.Format("PM"))
		case 'S':
			num(t.Second(), 2)
		case 'U':
			num((t.YearDay()+6-int(t.Weekday()))/7, 2)
		case 'w':
			b.WriteString(strconv.Itoa(int(t.Weekday())))
		case 'W':
			num((t.YearDay()+6-(int(t.Weekday())+6)%7)/7, 2)
		case 'x':
			b.WriteString(t.Format("01/02/06"))
		case 'X':
			b.WriteString(t.Format("15:04:05"))
		case 'y':
			num(t.Year()%100, 2)
		case 'Y':
			b.WriteString(strconv.Itoa(t.Year()))
		case 'z':
			b.WriteString(t.Format("-0700"))
		case 'Z':
			b.WriteString(t.Format("MST"))
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			if unpad {
				b.WriteByte('-')
			}
			b.WriteByte(format[i])
		}
	}
	return b.String()
}
