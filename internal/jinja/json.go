package jinja

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
)

// JSON in (FromJSON) and out (the tojson filter).

// jsonDepthMax bounds the nesting of JSON given to FromJSON.
const jsonDepthMax = 64

// FromJSON decodes one JSON value into a template value: objects become
// dicts that keep their key order, numbers without a fraction or exponent
// become ints (floats when outside int64), strings are marked untrusted
// when untrusted is set (keys included). It refuses nesting deeper than 64
// levels and anything after the value.
func FromJSON(raw []byte, untrusted bool) (Value, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeJSON(dec, 0, untrusted)
	if err != nil {
		return Value{}, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return Value{}, errors.New("invalid JSON: more than one value")
	}
	return v, nil
}

func decodeJSON(dec *json.Decoder, depth int, untrusted bool) (Value, error) {
	if depth > jsonDepthMax {
		return Value{}, fmt.Errorf("JSON nested more than %d levels deep", jsonDepthMax)
	}
	t, err := dec.Token()
	if err != nil {
		return Value{}, fmt.Errorf("invalid JSON: %w", err)
	}
	str := Str
	if untrusted {
		str = UntrustedStr
	}
	switch t := t.(type) {
	case nil:
		return None(), nil
	case bool:
		return Bool(t), nil
	case string:
		return str(t), nil
	case json.Number:
		if !strings.ContainsAny(string(t), ".eE") {
			if n, err := t.Int64(); err == nil {
				return Int(n), nil
			}
		}
		f, err := strconv.ParseFloat(string(t), 64)
		if err != nil && !isRangeErr(err) {
			return Value{}, fmt.Errorf("invalid number %s: %w", t, err)
		}
		return Float(f), nil
	case json.Delim:
		switch t {
		case '[':
			items := []Value{}
			for dec.More() {
				v, err := decodeJSON(dec, depth+1, untrusted)
				if err != nil {
					return Value{}, err
				}
				items = append(items, v)
			}
			if _, err := dec.Token(); err != nil {
				return Value{}, fmt.Errorf("invalid JSON: %w", err)
			}
			return NewList(items), nil
		case '{':
			d := NewDict()
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return Value{}, fmt.Errorf("invalid JSON: %w", err)
				}
				k, _ := kt.(string)
				v, err := decodeJSON(dec, depth+1, untrusted)
				if err != nil {
					return Value{}, err
				}
				d.Set(str(k), v)
			}
			if _, err := dec.Token(); err != nil {
				return Value{}, fmt.Errorf("invalid JSON: %w", err)
			}
			return DictValue(d), nil
		}
	}
	return Value{}, fmt.Errorf("invalid JSON token %v", t)
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
	if depth > r.lim.Depth {
		return r.budget(BudgetDepth, int64(r.lim.Depth))
	}
	if int64(b.Len()) > r.lim.StringBytes {
		return r.budget(BudgetString, r.lim.StringBytes)
	}
	if err := r.tick(1); err != nil {
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
