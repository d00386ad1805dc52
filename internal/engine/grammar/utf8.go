package grammar

import (
	"slices"
	"unicode/utf8"
)

// runeRange is an inclusive range of code points.
type runeRange struct{ lo, hi rune }

// utf8Expr matches the UTF-8 encoding of one code point in any of ranges
// (surrogates never match).
func utf8Expr(ranges []runeRange) *expr {
	var parts []*expr
	for _, r := range normalizeRanges(ranges) {
		parts = append(parts, utf8RangeExpr(r.lo, r.hi)...)
	}
	return alt(parts...)
}

// normalizeRanges sorts and merges ranges and removes the surrogates.
func normalizeRanges(in []runeRange) []runeRange {
	rs := slices.Clone(in)
	slices.SortFunc(rs, func(a, b runeRange) int { return int(a.lo - b.lo) })
	var out []runeRange
	for _, r := range rs {
		if r.lo > r.hi {
			continue
		}
		if n := len(out); n > 0 && r.lo <= out[n-1].hi+1 {
			out[n-1].hi = max(out[n-1].hi, r.hi)
			continue
		}
		out = append(out, r)
	}
	var res []runeRange
	for _, r := range out {
		if r.lo <= 0xDFFF && r.hi >= 0xD800 {
			if r.lo < 0xD800 {
				res = append(res, runeRange{r.lo, 0xD7FF})
			}
			if r.hi > 0xDFFF {
				res = append(res, runeRange{0xE000, r.hi})
			}
			continue
		}
		res = append(res, r)
	}
	return res
}

// complementRanges returns the code points in [0, MaxRune] not in rs.
func complementRanges(rs []runeRange) []runeRange {
	rs = normalizeRanges(rs)
	var out []runeRange
	next := rune(0)
	for _, r := range rs {
		if r.lo > next {
			out = append(out, runeRange{next, r.lo - 1})
		}
		next = r.hi + 1
	}
	if next <= utf8.MaxRune {
		out = append(out, runeRange{next, utf8.MaxRune})
	}
	return normalizeRanges(out)
}

// utf8RangeExpr splits [lo, hi] into pieces whose encodings are one byte
// range per position (the utf8-ranges construction).
func utf8RangeExpr(lo, hi rune) []*expr {
	bounds := []rune{0x7F, 0x7FF, 0xFFFF}
	for _, b := range bounds {
		if lo <= b && hi > b {
			return append(utf8RangeExpr(lo, b), utf8RangeExpr(b+1, hi)...)
		}
	}
	if hi <= 0x7F {
		return []*expr{rangeExpr(byte(lo), byte(hi))}
	}
	n := utf8.RuneLen(lo)
	for i := 1; i < n; i++ {
		m := rune(1)<<(6*i) - 1
		if lo&^m != hi&^m {
			if lo&m != 0 {
				return append(utf8RangeExpr(lo, lo|m), utf8RangeExpr((lo|m)+1, hi)...)
			}
			if hi&m != m {
				return append(utf8RangeExpr(lo, (hi&^m)-1), utf8RangeExpr(hi&^m, hi)...)
			}
		}
	}
	var a, b [4]byte
	utf8.EncodeRune(a[:], lo)
	utf8.EncodeRune(b[:], hi)
	parts := make([]*expr, n)
	for i := 0; i < n; i++ {
		parts[i] = rangeExpr(a[i], b[i])
	}
	return []*expr{seq(parts...)}
}

// jsonCharExpr matches one character of JSON string content: a literal
// character other than quote, backslash and control characters, or an
// escape.
func jsonCharExpr() *expr {
	literal := utf8Expr([]runeRange{{0x20, 0x21}, {0x23, 0x5B}, {0x5D, utf8.MaxRune}})
	return alt(literal, escapeExpr())
}

func escapeExpr() *expr { return escapeExprExcept(nil) }

// escapeExprExcept matches an escape other than backslash followed by one
// of the bytes in except.
func escapeExprExcept(except []byte) *expr {
	var simple byteSet
	for _, c := range []byte(`"\\/bfnrt`) {
		simple.add(c)
	}
	for _, c := range except {
		simple[c>>6] &^= 1 << (c & 63)
	}
	hex := rangeExpr('0', '9')
	hex.set.addRange('a', 'f')
	hex.set.addRange('A', 'F')
	return seq(byteExpr('\\'), alt(setExpr(simple), seq(byteExpr('u'), repeat(hex, 4, 4))))
}

// charsExpr matches one character from ranges in the grammar's canonical
// JSON encoding: literal, except quote, backslash and control characters,
// which are escaped.
func charsExpr(ranges []runeRange) *expr {
	rs := normalizeRanges(ranges)
	var plain []runeRange
	var esc []*expr
	for _, r := range rs {
		lo, hi := r.lo, r.hi
		for c := lo; c <= hi && c < 0x20; c++ {
			esc = append(esc, lit(string(appendJSONChar(nil, c))))
		}
		if lo < 0x20 {
			lo = 0x20
		}
		for _, special := range []rune{'"', '\\'} {
			if lo <= special && special <= hi {
				esc = append(esc, lit(string(appendJSONChar(nil, special))))
			}
		}
		if lo <= hi {
			plain = append(plain, runeRange{lo, hi})
		}
	}
	plain = subtractRunes(plain, '"', '\\')
	return alt(append([]*expr{utf8Expr(plain)}, esc...)...)
}

// subtractRunes removes single code points from ranges.
func subtractRunes(rs []runeRange, cs ...rune) []runeRange {
	for _, c := range cs {
		var out []runeRange
		for _, r := range rs {
			if c < r.lo || c > r.hi {
				out = append(out, r)
				continue
			}
			if r.lo < c {
				out = append(out, runeRange{r.lo, c - 1})
			}
			if c < r.hi {
				out = append(out, runeRange{c + 1, r.hi})
			}
		}
		rs = out
	}
	return rs
}
