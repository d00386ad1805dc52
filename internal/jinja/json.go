package jinja

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// JSON in (FromJSON) and out (the tojson filter).

// jsonDepthMax bounds the nesting of JSON given to FromJSON.
const jsonDepthMax = 64

// FromJSON decodes one JSON value into a template value: objects become
// dicts that keep their key order (a repeated key keeps its first place
// and its last value, as Python's json does), numbers without a fraction
// or exponent become ints (floats when outside int64), strings are marked
// untrusted when untrusted is set (keys included). It refuses invalid
// JSON, nesting deeper than 64 levels and anything after the value.
//
// The decoder is written here rather than built on encoding/json's token
// API, which keeps key order only through json.Decoder.Token, several
// times slower than the rest of a render; FuzzFromJSON checks it against
// encoding/json.
func FromJSON(raw []byte, untrusted bool) (Value, error) {
	// One copy of the input: strings without escapes and numbers are
	// slices of it.
	p := &jsonParser{data: raw, text: string(raw), untrusted: untrusted}
	p.space()
	v, err := p.value(0)
	if err != nil {
		return Value{}, err
	}
	p.space()
	if p.pos < len(p.data) {
		return Value{}, errors.New("invalid JSON: more than one value")
	}
	return v, nil
}

type jsonParser struct {
	data      []byte
	text      string // data as a string
	pos       int
	untrusted bool
}

func (p *jsonParser) fail(what string) error {
	if p.pos >= len(p.data) {
		return fmt.Errorf("invalid JSON: unexpected end of input, expected %s", what)
	}
	return fmt.Errorf("invalid JSON: unexpected %q at offset %d, expected %s", p.data[p.pos], p.pos, what)
}

func (p *jsonParser) space() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *jsonParser) literal(word string, v Value) (Value, error) {
	if !bytes.HasPrefix(p.data[p.pos:], []byte(word)) {
		return Value{}, p.fail("a value")
	}
	p.pos += len(word)
	return v, nil
}

func (p *jsonParser) str(s string) Value {
	if p.untrusted {
		return UntrustedStr(s)
	}
	return Str(s)
}

func (p *jsonParser) value(depth int) (Value, error) {
	if depth > jsonDepthMax {
		return Value{}, fmt.Errorf("JSON nested more than %d levels deep", jsonDepthMax)
	}
	if p.pos >= len(p.data) {
		return Value{}, p.fail("a value")
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		s, err := p.stringLit()
		if err != nil {
			return Value{}, err
		}
		return p.str(s), nil
	case c == 't':
		return p.literal("true", Bool(true))
	case c == 'f':
		return p.literal("false", Bool(false))
	case c == 'n':
		return p.literal("null", None())
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	}
	return Value{}, p.fail("a value")
}

func (p *jsonParser) object(depth int) (Value, error) {
	p.pos++ // {
	d := newDictCap(4)
	p.space()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		return DictValue(d), nil
	}
	for {
		p.space()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return Value{}, p.fail("a string key")
		}
		k, err := p.stringLit()
		if err != nil {
			return Value{}, err
		}
		p.space()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return Value{}, p.fail("':'")
		}
		p.pos++
		p.space()
		v, err := p.value(depth + 1)
		if err != nil {
			return Value{}, err
		}
		d.Set(p.str(k), v)
		p.space()
		if p.pos < len(p.data) && p.data[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.pos < len(p.data) && p.data[p.pos] == '}' {
			p.pos++
			return DictValue(d), nil
		}
		return Value{}, p.fail("',' or '}'")
	}
}

func (p *jsonParser) array(depth int) (Value, error) {
	p.pos++ // [
	items := []Value{}
	p.space()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		return NewList(items), nil
	}
	for {
		p.space()
		v, err := p.value(depth + 1)
		if err != nil {
			return Value{}, err
		}
		items = append(items, v)
		p.space()
		if p.pos < len(p.data) && p.data[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.pos < len(p.data) && p.data[p.pos] == ']' {
			p.pos++
			return NewList(items), nil
		}
		return Value{}, p.fail("',' or ']'")
	}
}

// stringLit reads a string literal; invalid UTF-8 becomes U+FFFD, as
// encoding/json does.
func (p *jsonParser) stringLit() (string, error) {
	p.pos++ // "
	start := p.pos
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		switch {
		case c == '"':
			raw := p.text[start:p.pos]
			p.pos++
			return validUTF8(raw), nil
		case c == '\\':
			return p.escapedString(start)
		case c < 0x20:
			return "", p.fail("a character (control characters must be escaped)")
		}
		p.pos++
	}
	return "", p.fail("'\"'")
}

// escapedString reads the rest of a string literal that has escapes, from
// start (just after its opening quote).
func (p *jsonParser) escapedString(start int) (string, error) {
	var b strings.Builder
	b.Write(p.data[start:p.pos])
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		switch {
		case c == '"':
			p.pos++
			return validUTF8(b.String()), nil
		case c < 0x20:
			return "", p.fail("a character (control characters must be escaped)")
		case c != '\\':
			b.WriteByte(c)
			p.pos++
			continue
		}
		p.pos++
		if p.pos >= len(p.data) {
			return "", p.fail("an escape")
		}
		e := p.data[p.pos]
		p.pos++
		switch e {
		case '"', '\\', '/':
			b.WriteByte(e)
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			r, ok := p.hex4()
			if !ok {
				return "", p.fail("four hex digits")
			}
			if utf16.IsSurrogate(r) {
				// A high surrogate pairs with a following \uDC00-\uDFFF;
				// anything else is U+FFFD, as encoding/json decodes it.
				save := p.pos
				if p.pos+1 < len(p.data) && p.data[p.pos] == '\\' && p.data[p.pos+1] == 'u' {
					p.pos += 2
					if r2, ok := p.hex4(); ok {
						if pair := utf16.DecodeRune(r, r2); pair != utf8.RuneError {
							b.WriteRune(pair)
							continue
						}
					}
				}
				p.pos = save
				r = utf8.RuneError
			}
			b.WriteRune(r)
		default:
			p.pos--
			return "", p.fail("an escape character")
		}
	}
	return "", p.fail("'\"'")
}

// validUTF8 replaces each byte of s that is not UTF-8 with U+FFFD, as
// encoding/json does.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for _, c := range s { // an invalid byte ranges as one utf8.RuneError
		b.WriteRune(c)
	}
	return b.String()
}

func (p *jsonParser) hex4() (rune, bool) {
	if p.pos+4 > len(p.data) {
		return 0, false
	}
	var r rune
	for _, c := range p.data[p.pos : p.pos+4] {
		d := digitValue(c)
		if d > 15 {
			return 0, false
		}
		r = r<<4 | rune(d)
	}
	p.pos += 4
	return r, true
}

// number reads -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?.
func (p *jsonParser) number() (Value, error) {
	start := p.pos
	digits := func() int {
		n := 0
		for p.pos < len(p.data) && p.data[p.pos] >= '0' && p.data[p.pos] <= '9' {
			p.pos++
			n++
		}
		return n
	}
	if p.data[p.pos] == '-' {
		p.pos++
	}
	if p.pos < len(p.data) && p.data[p.pos] == '0' {
		p.pos++
	} else if digits() == 0 {
		return Value{}, p.fail("a digit")
	}
	isInt := true
	if p.pos < len(p.data) && p.data[p.pos] == '.' {
		p.pos++
		if digits() == 0 {
			return Value{}, p.fail("a digit")
		}
		isInt = false
	}
	if p.pos < len(p.data) && (p.data[p.pos] == 'e' || p.data[p.pos] == 'E') {
		p.pos++
		if p.pos < len(p.data) && (p.data[p.pos] == '+' || p.data[p.pos] == '-') {
			p.pos++
		}
		if digits() == 0 {
			return Value{}, p.fail("a digit")
		}
		isInt = false
	}
	text := p.text[start:p.pos]
	if isInt {
		if n, err := strconv.ParseInt(text, 10, 64); err == nil {
			return Int(n), nil
		}
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil && !isRangeErr(err) {
		return Value{}, fmt.Errorf("invalid number %s: %w", text, err)
	}
	return Float(f), nil
}

// jsonOpts are tojson's options: transformers' tojson is
// json.dumps(x, ensure_ascii=False, indent=None, separators=None,
// sort_keys=False).
type jsonOpts struct {
	item, key, indent string
	pretty            bool
	ascii, sortKeys   bool
}

// fToJSON is transformers' tojson filter: Python's json.dumps with the
// value's key order, ", " and ": " between items and keys (",", ": " with
// indent), and the arguments ensure_ascii, indent, separators and
// sort_keys, by position or by name. Floats are written as Python writes
// them (1.0, 1e-07). The output is untrusted when any string in the value
// is.
func fToJSON(r *renderer, v Value, a *args) (Value, error) {
	if err := a.check(r, "tojson", "ensure_ascii", "indent", "separators", "sort_keys"); err != nil {
		return Value{}, err
	}
	o := jsonOpts{item: ", ", key: ": "}
	if x, ok := a.get(0, "ensure_ascii"); ok {
		o.ascii = x.truth()
	}
	if x, ok := a.get(1, "indent"); ok && x.kind != KindNone {
		switch {
		case x.kind == KindString:
			o.indent = x.s
		case x.isInt():
			if x.n > 1<<10 {
				return Value{}, r.errorf(ErrValue, "tojson: indent %d is too large", x.n)
			}
			o.indent = strings.Repeat(" ", int(max(x.n, 0)))
		default:
			return Value{}, r.errorf(ErrType, "tojson: indent must be an integer or a string")
		}
		o.pretty, o.item = true, ","
	}
	if x, ok := a.get(2, "separators"); ok && x.kind != KindNone {
		if (x.kind != KindList && x.kind != KindTuple) || len(x.list().Items) != 2 ||
			x.list().Items[0].kind != KindString || x.list().Items[1].kind != KindString {
			return Value{}, r.errorf(ErrValue, "tojson: separators must be two strings")
		}
		o.item, o.key = x.list().Items[0].s, x.list().Items[1].s
	}
	if x, ok := a.get(3, "sort_keys"); ok {
		o.sortKeys = x.truth()
	}
	var b reprBuf
	if err := r.writeJSON(&b, &o, v, 0); err != nil {
		return Value{}, err
	}
	return untrustedIf(b.String(), b.untrusted), nil
}

func (r *renderer) writeJSON(b *reprBuf, o *jsonOpts, v Value, depth int) error {
	if err := r.walkValue(b, depth); err != nil {
		return err
	}
	switch v.kind {
	case KindNone:
		b.WriteString("null")
	case KindBool:
		b.WriteString(strconv.FormatBool(v.n != 0))
	case KindInt:
		b.WriteString(formatInt(v.n))
	case KindFloat:
		b.WriteString(jsonFloat(v.float()))
	case KindString:
		b.untrusted = b.untrusted || tainted(v)
		o.writeString(&b.Builder, v.s)
		return r.work(len(v.s), 0)
	case KindList, KindTuple:
		items := v.list().Items
		if len(items) == 0 {
			b.WriteString("[]")
			return nil
		}
		b.WriteByte('[')
		for i, it := range items {
			if i > 0 {
				b.WriteString(o.item)
			}
			o.newline(&b.Builder, depth+1)
			if err := r.writeJSON(b, o, it, depth+1); err != nil {
				return err
			}
		}
		o.newline(&b.Builder, depth)
		b.WriteByte(']')
	case KindDict:
		return r.writeJSONDict(b, o, v.dict(), depth)
	default:
		return r.errorf(ErrType, "Object of type %s is not JSON serializable", v.typeName())
	}
	return nil
}

func (r *renderer) writeJSONDict(b *reprBuf, o *jsonOpts, d *Dict, depth int) error {
	if d.Len() == 0 {
		b.WriteString("{}")
		return nil
	}
	order := make([]int, d.Len())
	for i := range order {
		order[i] = i
	}
	if o.sortKeys {
		var err error
		if order, err = r.sortedKeys(d); err != nil {
			return err
		}
	}
	b.WriteByte('{')
	for n, i := range order {
		k := d.keys[i]
		var key string
		switch k.kind {
		case KindString:
			key = k.s
			b.untrusted = b.untrusted || tainted(k)
		case KindInt:
			key = formatInt(k.n)
		case KindFloat:
			key = jsonFloat(k.float())
		case KindBool:
			key = strconv.FormatBool(k.n != 0)
		case KindNone:
			key = "null"
		default:
			return r.errorf(ErrType, "keys must be str, int, float, bool or None, not %s", k.typeName())
		}
		if n > 0 {
			b.WriteString(o.item)
		}
		o.newline(&b.Builder, depth+1)
		o.writeString(&b.Builder, key)
		b.WriteString(o.key)
		if err := r.writeJSON(b, o, d.vals[i], depth+1); err != nil {
			return err
		}
	}
	o.newline(&b.Builder, depth)
	b.WriteByte('}')
	return nil
}

// sortedKeys orders a dict's keys as Python's sorted() would.
func (r *renderer) sortedKeys(d *Dict) ([]int, error) {
	order := make([]int, d.Len())
	for i := range order {
		order[i] = i
	}
	var err error
	slices.SortStableFunc(order, func(i, j int) int {
		if err != nil {
			return 0
		}
		c, e := r.order("<", d.keys[i], d.keys[j], 0)
		if e != nil {
			err = e
		}
		return c
	})
	return order, err
}

// jsonFloat is a float as Python's json writes it.
func jsonFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	return pythonFloat(f)
}

func (o *jsonOpts) newline(b *strings.Builder, depth int) {
	if !o.pretty {
		return
	}
	b.WriteByte('\n')
	for range depth {
		b.WriteString(o.indent)
	}
}

// writeString writes s as json.dumps does: \" \\ \b \f \n \r \t, other
// control characters as \u00XX, the rest as is, or with ensure_ascii
// every character from U+007F on as \uXXXX (UTF-16).
func (o *jsonOpts) writeString(b *strings.Builder, s string) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	for _, c := range s {
		switch {
		case c == '"':
			b.WriteString(`\"`)
		case c == '\\':
			b.WriteString(`\\`)
		case c == '\b':
			b.WriteString(`\b`)
		case c == '\f':
			b.WriteString(`\f`)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\r':
			b.WriteString(`\r`)
		case c == '\t':
			b.WriteString(`\t`)
		case c < 0x20 || o.ascii && c >= 0x7f:
			units := []uint16{uint16(c)}
			if c > 0xffff {
				r1, r2 := utf16.EncodeRune(c)
				units = []uint16{uint16(r1), uint16(r2)}
			}
			for _, u := range units {
				b.WriteString(`\u`)
				b.WriteByte(hex[u>>12&15])
				b.WriteByte(hex[u>>8&15])
				b.WriteByte(hex[u>>4&15])
				b.WriteByte(hex[u&15])
			}
		default:
			b.WriteRune(c)
		}
	}
	b.WriteByte('"')
}
