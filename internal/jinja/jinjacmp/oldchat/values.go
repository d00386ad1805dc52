package oldchat

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
	"time"
	"unicode/utf16"

	"github.com/ardanlabs/jinja"
)

// This file fills what github.com/ardanlabs/jinja v1.8.0 lacks to render
// chat templates as Hugging Face does (transformers' Jinja2 setup, and
// @huggingface/jinja, which agree but for float formatting in tojson):
//
//   - Its tojson(indent=N) goes through Go maps (keys sorted) and
//     encoding/json (HTML escaped); its plain tojson formats floats with
//     %g, not Python's repr (1 for 1.0, 1.23456789e+08 for 123456789.0),
//     and it has no ensure_ascii or sort_keys. Filters cannot be registered, but a filter name the
//     library does not know is looked up among the template's variables,
//     so NewTemplate renames the tojson filter to tandemToJSON
//     (rewriteFilters) and every render passes that function.
//   - Its strftime_now reads time.Now and knows a subset of directives;
//     ours knows Python's common ones and reads Template.now, so a test
//     can pin the clock. Variables shadow globals, so passing it is enough.
//   - Request JSON becomes values with the client's key order (FromGoValue
//     sorts map keys) and integers kept apart from floats.

// tandemToJSON is the variable the tojson filter is renamed to.
const tandemToJSON = "tandem_tojson"

// templateGlobals returns the functions every render passes as variables.
func (c *Template) templateGlobals() map[string]jinja.Value {
	now := c.now
	if now == nil {
		now = time.Now
	}
	return map[string]jinja.Value{
		tandemToJSON: jinja.NewCallable(tandemToJSON, filterToJSON),
		"strftime_now": jinja.NewCallable("strftime_now", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
			if len(args) != 1 || !args[0].IsString() {
				return jinja.Undefined(), errors.New("strftime_now takes one format string")
			}
			return jinja.NewString(strftime(now(), args[0].AsString())), nil
		}),
	}
}

// rewriteFilters renames the tojson filter ("| tojson") to tandemToJSON
// inside the template's {{ }} and {% %} tags, leaving text, comments and
// string literals alone.
func rewriteFilters(src string) string {
	var b strings.Builder
	b.Grow(len(src) + 64)
	i := 0
	for i < len(src) {
		j := strings.IndexByte(src[i:], '{')
		if j < 0 || i+j+1 >= len(src) {
			b.WriteString(src[i:])
			break
		}
		j += i
		open := src[j+1]
		if open != '{' && open != '%' && open != '#' {
			b.WriteString(src[i : j+1])
			i = j + 1
			continue
		}
		b.WriteString(src[i:j])
		if open == '#' {
			end := strings.Index(src[j+2:], "#}")
			if end < 0 {
				b.WriteString(src[j:])
				break
			}
			b.WriteString(src[j : j+2+end+2])
			i = j + 2 + end + 2
			continue
		}
		closeTag := "}}"
		if open == '%' {
			closeTag = "%}"
		}
		i = rewriteTag(&b, src, j, closeTag)
	}
	return b.String()
}

// rewriteTag copies the tag starting at src[start] up to closeTag,
// renaming the tojson filter, and returns the index after it.
func rewriteTag(b *strings.Builder, src string, start int, closeTag string) int {
	b.WriteString(src[start : start+2])
	i := start + 2
	pipe := false // the last token was "|"
	for i < len(src) {
		ch := src[i]
		switch {
		case strings.HasPrefix(src[i:], closeTag):
			b.WriteString(closeTag)
			return i + 2
		case ch == '\'' || ch == '"':
			k := i + 1
			for k < len(src) && src[k] != ch {
				if src[k] == '\\' {
					k++
				}
				k++
			}
			k = min(k+1, len(src))
			b.WriteString(src[i:k])
			i, pipe = k, false
		case ch == '|':
			b.WriteByte(ch)
			i, pipe = i+1, true
		case ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r':
			b.WriteByte(ch)
			i++
		case isIdentByte(ch):
			k := i
			for k < len(src) && isIdentByte(src[k]) {
				k++
			}
			if pipe && src[i:k] == "tojson" {
				b.WriteString(tandemToJSON)
			} else {
				b.WriteString(src[i:k])
			}
			i, pipe = k, false
		default:
			b.WriteByte(ch)
			i, pipe = i+1, false
		}
	}
	return i
}

func isIdentByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// filterToJSON is tojson as transformers writes it: json.dumps(x,
// ensure_ascii=False) with the value's key order, separators ", " and ": "
// (with indent: "," and newlines), and the kwargs indent, separators,
// ensure_ascii and sort_keys. Integers are written as integers, floats as
// Python's repr writes them (1.0, 0.5, 1e-07, 1e+21); @huggingface/jinja
// writes JavaScript's numbers there (1, 1e-7), the only place where the two
// references were seen to disagree.
func filterToJSON(args []jinja.Value, kwargs map[string]jinja.Value) (jinja.Value, error) {
	if len(args) == 0 {
		return jinja.Undefined(), errors.New("tojson needs a value")
	}
	o := jsonOpts{item: ", ", key: ": "}
	if v, ok := kwargs["indent"]; ok && !v.IsNone() && !v.IsUndefined() {
		if !v.IsInt() || v.AsInt() < 0 || v.AsInt() > 64 {
			return jinja.Undefined(), errors.New("tojson: indent must be an integer from 0 to 64")
		}
		o.indent = strings.Repeat(" ", int(v.AsInt()))
		o.item = ","
	}
	if v, ok := kwargs["separators"]; ok && !v.IsNone() && !v.IsUndefined() {
		if !v.IsList() || v.AsList().Len() != 2 || !v.AsList().Get(0).IsString() || !v.AsList().Get(1).IsString() {
			return jinja.Undefined(), errors.New("tojson: separators must be two strings")
		}
		o.item, o.key = v.AsList().Get(0).AsString(), v.AsList().Get(1).AsString()
	}
	if v, ok := kwargs["ensure_ascii"]; ok {
		o.ascii = v.IsTruthy()
	}
	if v, ok := kwargs["sort_keys"]; ok {
		o.sortKeys = v.IsTruthy()
	}
	var b strings.Builder
	if err := o.write(&b, args[0], 0); err != nil {
		return jinja.Undefined(), err
	}
	return jinja.NewString(b.String()), nil
}

type jsonOpts struct {
	item, key, indent string
	ascii, sortKeys   bool
}

func (o *jsonOpts) write(b *strings.Builder, v jinja.Value, depth int) error {
	if depth > 100 {
		return errors.New("tojson: value nested too deeply")
	}
	switch {
	case v.IsUndefined(), v.IsNone(), v.IsCallable():
		b.WriteString("null")
	case v.IsBool():
		b.WriteString(strconv.FormatBool(v.AsBool()))
	case v.IsInt():
		b.WriteString(strconv.FormatInt(v.AsInt(), 10))
	case v.IsFloat():
		f := v.AsFloat()
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return fmt.Errorf("tojson: %v is not a JSON number", f)
		}
		b.WriteString(pythonFloat(f))
	case v.IsString():
		o.writeString(b, v.AsString())
	case v.IsList():
		items := v.AsList().Items
		if len(items) == 0 {
			b.WriteString("[]")
			return nil
		}
		b.WriteByte('[')
		for i, it := range items {
			if i > 0 {
				b.WriteString(o.item)
			}
			o.newline(b, depth+1)
			if err := o.write(b, it, depth+1); err != nil {
				return err
			}
		}
		o.newline(b, depth)
		b.WriteByte(']')
	case v.IsDict():
		d := v.AsDict()
		keys := d.OrderedKeys()
		if o.sortKeys {
			slices.Sort(keys)
		}
		if len(keys) == 0 {
			b.WriteString("{}")
			return nil
		}
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteString(o.item)
			}
			o.newline(b, depth+1)
			o.writeString(b, k)
			b.WriteString(o.key)
			val, _ := d.Get(k)
			if err := o.write(b, val, depth+1); err != nil {
				return err
			}
		}
		o.newline(b, depth)
		b.WriteByte('}')
	default:
		b.WriteString("null")
	}
	return nil
}

func (o *jsonOpts) newline(b *strings.Builder, depth int) {
	if o.indent == "" {
		return
	}
	b.WriteByte('\n')
	for range depth {
		b.WriteString(o.indent)
	}
}

// pythonFloat formats f as Python's repr does: the shortest digits that
// read back as f, in positional notation with at least one decimal when
// the decimal exponent is from -4 to 15, else as d.ddde±XX.
func pythonFloat(f float64) string {
	e := strconv.FormatFloat(f, 'e', -1, 64) // [-]d.ddde±XX
	mant, expStr, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expStr)
	if exp < -4 || exp >= 16 {
		sign := "+"
		if exp < 0 {
			sign, exp = "-", -exp
		}
		return fmt.Sprintf("%se%s%02d", mant, sign, exp)
	}
	out := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(out, ".") {
		out += ".0"
	}
	return out
}

// writeString writes s as JSON.stringify and json.dumps do: \" \\ \b \f
// \n \r \t, other control characters as \u00XX, everything else as is, or
// with ensure_ascii every character from U+007F on as \uXXXX (UTF-16).
func (o *jsonOpts) writeString(b *strings.Builder, s string) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || o.ascii && r >= 0x7f:
			units := []uint16{uint16(r)}
			if r > 0xffff {
				r1, r2 := utf16.EncodeRune(r)
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
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}

// jsonToValue decodes one JSON value into a template value: objects keep
// their key order, numbers without a fraction or exponent are integers.
func jsonToValue(raw json.RawMessage) (jinja.Value, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeValue(dec, 0)
	if err != nil {
		return jinja.Undefined(), err
	}
	if _, err := dec.Token(); err != io.EOF {
		return jinja.Undefined(), errors.New("invalid JSON: more than one value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder, depth int) (jinja.Value, error) {
	if depth > 64 {
		return jinja.Undefined(), errors.New("JSON nested more than 64 levels deep")
	}
	t, err := dec.Token()
	if err != nil {
		return jinja.Undefined(), fmt.Errorf("invalid JSON: %w", err)
	}
	switch t := t.(type) {
	case nil:
		return jinja.None(), nil
	case bool:
		return jinja.NewBool(t), nil
	case string:
		return jinja.NewString(t), nil
	case json.Number:
		if !strings.ContainsAny(string(t), ".eE") {
			if n, err := t.Int64(); err == nil {
				return jinja.NewInt(n), nil
			}
		}
		f, err := t.Float64()
		if err != nil {
			return jinja.Undefined(), fmt.Errorf("invalid number %s: %w", t, err)
		}
		return jinja.NewFloat(f), nil
	case json.Delim:
		switch t {
		case '[':
			var items []jinja.Value
			for dec.More() {
				v, err := decodeValue(dec, depth+1)
				if err != nil {
					return jinja.Undefined(), err
				}
				items = append(items, v)
			}
			if _, err := dec.Token(); err != nil {
				return jinja.Undefined(), fmt.Errorf("invalid JSON: %w", err)
			}
			if items == nil {
				items = []jinja.Value{}
			}
			return jinja.NewList(items), nil
		case '{':
			d := jinja.NewDict()
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return jinja.Undefined(), fmt.Errorf("invalid JSON: %w", err)
				}
				k, _ := kt.(string)
				v, err := decodeValue(dec, depth+1)
				if err != nil {
					return jinja.Undefined(), err
				}
				d.AsDict().Set(k, v)
			}
			if _, err := dec.Token(); err != nil {
				return jinja.Undefined(), fmt.Errorf("invalid JSON: %w", err)
			}
			return d, nil
		}
	}
	return jinja.Undefined(), fmt.Errorf("invalid JSON token %v", t)
}

// strftime formats t with Python's strftime directives: %a %A %b %B %d %e
// %H %I %j %m %M %p %S %y %Y %z %Z %%; others are copied as written.
func strftime(t time.Time, format string) string {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' || i+1 == len(format) {
			b.WriteByte(c)
			continue
		}
		i++
		switch format[i] {
		case 'a':
			b.WriteString(t.Format("Mon"))
		case 'A':
			b.WriteString(t.Format("Monday"))
		case 'b':
			b.WriteString(t.Format("Jan"))
		case 'B':
			b.WriteString(t.Format("January"))
		case 'd':
			b.WriteString(t.Format("02"))
		case 'e':
			b.WriteString(t.Format("_2"))
		case 'H':
			b.WriteString(t.Format("15"))
		case 'I':
			b.WriteString(t.Format("03"))
		case 'j':
			fmt.Fprintf(&b, "%03d", t.YearDay())
		case 'm':
			b.WriteString(t.Format("01"))
		case 'M':
			b.WriteString(t.Format("04"))
		case 'p':
			b.WriteString(t.Format("PM"))
		case 'S':
			b.WriteString(t.Format("05"))
		case 'y':
			b.WriteString(t.Format("06"))
		case 'Y':
			fmt.Fprintf(&b, "%d", t.Year())
		case 'z':
			b.WriteString(t.Format("-0700"))
		case 'Z':
			b.WriteString(t.Format("MST"))
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(format[i])
		}
	}
	return b.String()
}
