package grammar

import (
	"encoding/json"
	"math/big"
	"strings"
)

func parseRat(n json.Number) (*big.Rat, bool) {
	r, ok := new(big.Rat).SetString(string(n))
	return r, ok
}

func numEqual(a, b json.Number) bool {
	x, ok1 := parseRat(a)
	y, ok2 := parseRat(b)
	if !ok1 || !ok2 {
		return a == b
	}
	return x.Cmp(y) == 0
}

// isInteger reports whether n has an integral value (1.0 is an integer in
// JSON Schema).
func isInteger(n json.Number) bool {
	r, ok := parseRat(n)
	return ok && r.IsInt()
}

// Digit bounds of numbers whose schema sets no bound of its own, as
// llama.cpp's json-schema-to-grammar writes them (an integer part of at
// most 16 digits, a fraction of at most 16): past them a model could
// write digits until max_tokens. An exponent takes at most 3 digits
// (float64's range ends at 1e308).
const (
	MaxIntegerDigits  = 16
	MaxFractionDigits = 16
	MaxExponentDigits = 3
)

var (
	digit    = rangeExpr('0', '9')
	digit19  = rangeExpr('1', '9')
	fracPart = seq(byteExpr('.'), repeat(digit, 1, MaxFractionDigits))
	expPart  = seq(alt(byteExpr('e'), byteExpr('E')), opt(alt(byteExpr('+'), byteExpr('-'))), repeat(digit, 1, MaxExponentDigits))
	// natural matches a non-negative integer without leading zeros, of at
	// most MaxIntegerDigits digits.
	natural = alt(byteExpr('0'), seq(digit19, repeat(digit, 0, MaxIntegerDigits-1)))
)

// numberExpr matches any JSON number.
func numberExpr() *expr {
	return seq(opt(byteExpr('-')), natural, opt(fracPart), opt(expPart))
}

// integerExpr matches any JSON integer written without fraction or
// exponent.
func integerExpr() *expr { return seq(opt(byteExpr('-')), natural) }

// bound is one side of an integer range; nil means unbounded.
type bound = *big.Int

// intRangeExpr matches the decimal integers n with lo <= n <= hi (either
// side nil for unbounded), written without leading zeros, "-0" or
// exponent.
func intRangeExpr(lo, hi bound) *expr {
	zero := big.NewInt(0)
	var parts []*expr
	// Non-negative part: [max(lo,0), hi].
	nlo := zero
	if lo != nil && lo.Sign() > 0 {
		nlo = lo
	}
	if hi == nil || hi.Sign() >= 0 {
		parts = append(parts, natRange(nlo, hi))
	}
	// Negative part: magnitudes [max(-hi,1), -lo].
	if lo == nil || lo.Sign() < 0 {
		mlo := big.NewInt(1)
		if hi != nil && hi.Sign() < 0 {
			mlo = new(big.Int).Neg(hi)
		}
		var mhi *big.Int
		if lo != nil {
			mhi = new(big.Int).Neg(lo)
		}
		if mhi == nil || mhi.Cmp(mlo) >= 0 {
			parts = append(parts, seq(byteExpr('-'), natRange(mlo, mhi)))
		}
	}
	return alt(parts...)
}

// natRange matches decimal numbers in [lo, hi] (hi nil: unbounded), lo >= 0.
func natRange(lo, hi *big.Int) *expr {
	if hi != nil && lo.Cmp(hi) > 0 {
		return noneExpr
	}
	ls := lo.String()
	if hi == nil {
		// [lo, 10^len(lo) - 1] then longer numbers, up to
		// MaxIntegerDigits digits (or lo's own length).
		top := strings.Repeat("9", len(ls))
		if len(ls) >= MaxIntegerDigits {
			return digitRange(ls, top)
		}
		longer := seq(digit19, repeat(digit, len(ls), MaxIntegerDigits-1))
		return alt(digitRange(ls, top), longer)
	}
	hs := hi.String()
	var parts []*expr
	for n := len(ls); n <= len(hs); n++ {
		a, b := ls, hs
		if n > len(ls) {
			a = "1" + strings.Repeat("0", n-1)
		}
		if n < len(hs) {
			b = strings.Repeat("9", n)
		}
		parts = append(parts, digitRange(a, b))
	}
	return alt(parts...)
}

// digitRange matches the numbers from a to b, both of the same length.
func digitRange(a, b string) *expr {
	if len(a) == 1 {
		return rangeExpr(a[0], b[0])
	}
	if a[0] == b[0] {
		return seq(byteExpr(a[0]), digitRange(a[1:], b[1:]))
	}
	rest := len(a) - 1
	nines, zeros := strings.Repeat("9", rest), strings.Repeat("0", rest)
	var parts []*expr
	if a[1:] == zeros {
		parts = append(parts, seq(byteExpr(a[0]), repeat(digit, rest, rest)))
	} else {
		parts = append(parts, seq(byteExpr(a[0]), digitRange(a[1:], nines)))
	}
	if a[0]+1 <= b[0]-1 {
		parts = append(parts, seq(rangeExpr(a[0]+1, b[0]-1), repeat(digit, rest, rest)))
	}
	if b[1:] == nines {
		parts = append(parts, seq(byteExpr(b[0]), repeat(digit, rest, rest)))
	} else {
		parts = append(parts, seq(byteExpr(b[0]), digitRange(zeros, b[1:])))
	}
	return alt(parts...)
}

// decimal is a non-negative decimal: integer part and fraction digits
// without trailing zeros ("" for an integer).
type decimal struct {
	ip   *big.Int
	frac string
}

// toDecimal converts |r| (a finite decimal, as JSON numbers are).
func toDecimal(r *big.Rat) decimal {
	a := new(big.Rat).Abs(r)
	ip := floorRat(a)
	f := new(big.Rat).Sub(a, new(big.Rat).SetInt(ip))
	if f.Sign() == 0 {
		return decimal{ip: ip}
	}
	for prec := 1; prec <= 1000; prec++ {
		s := f.FloatString(prec)
		if back, ok := new(big.Rat).SetString(s); ok && back.Cmp(f) == 0 {
			return decimal{ip: ip, frac: strings.TrimRight(s[2:], "0")}
		}
	}
	return decimal{ip: ip, frac: strings.TrimRight(f.FloatString(1000)[2:], "0")}
}

var (
	anyFrac = opt(fracPart)
	// Fractions next to a bound keep unbounded digits: bounding them
	// multiplies the automaton's states past the compile limit, and the
	// value they spell stays within the schema's bounds.
	zeroFrac    = opt(seq(byteExpr('.'), plus(byteExpr('0'))))
	nonzeroFrac = seq(byteExpr('.'), star(digit), digit19, star(digit))
)

// fracGE matches an optional fraction ".ddd" whose value is >= 0.F (or >
// when strict).
func fracGE(f string, strict bool) *expr {
	if f == "" {
		if strict {
			return nonzeroFrac
		}
		return anyFrac
	}
	var alts []*expr
	for i := 0; i < len(f); i++ {
		if f[i] < '9' {
			alts = append(alts, seq(byteExpr('.'), lit(f[:i]), rangeExpr(f[i]+1, '9'), star(digit)))
		}
	}
	if strict {
		alts = append(alts, seq(byteExpr('.'), lit(f), star(byteExpr('0')), digit19, star(digit)))
	} else {
		alts = append(alts, seq(byteExpr('.'), lit(f), star(digit)))
	}
	return alt(alts...)
}

// fracLE matches an optional fraction whose value is <= 0.F (or < when
// strict).
func fracLE(f string, strict bool) *expr {
	if f == "" {
		if strict {
			return noneExpr
		}
		return zeroFrac
	}
	alts := []*expr{emptyExpr}
	for i := 0; i < len(f); i++ {
		if f[i] > '0' {
			alts = append(alts, seq(byteExpr('.'), lit(f[:i]), rangeExpr('0', f[i]-1), star(digit)))
		}
		if i > 0 {
			alts = append(alts, seq(byteExpr('.'), lit(f[:i]), star(byteExpr('0'))))
		}
	}
	if !strict {
		alts = append(alts, seq(byteExpr('.'), lit(f), star(byteExpr('0'))))
	}
	return alt(alts...)
}

// fracNonzeroLE matches a fraction ".ddd" with 0 < 0.ddd <= 0.F (or <),
// for a non-empty F: d leaves F at position i with a smaller digit, or is
// a prefix of F padded with zeros, or equals F; and is not all zeros.
func fracNonzeroLE(f string, strict bool) *expr {
	nonzeroTail := seq(star(digit), digit19, star(digit))
	var alts []*expr
	for i := 0; i < len(f); i++ {
		prefixZero := strings.Trim(f[:i], "0") == ""
		if f[i] > '0' {
			if prefixZero {
				if f[i] > '1' {
					alts = append(alts, seq(byteExpr('.'), lit(f[:i]), rangeExpr('1', f[i]-1), star(digit)))
				}
				alts = append(alts, seq(byteExpr('.'), lit(f[:i]), byteExpr('0'), nonzeroTail))
			} else {
				alts = append(alts, seq(byteExpr('.'), lit(f[:i]), rangeExpr('0', f[i]-1), star(digit)))
			}
		}
		if i > 0 && !prefixZero {
			alts = append(alts, seq(byteExpr('.'), lit(f[:i]), star(byteExpr('0'))))
		}
	}
	if !strict {
		alts = append(alts, seq(byteExpr('.'), lit(f), star(byteExpr('0'))))
	}
	return alt(alts...)
}

// boundedNumberExpr matches JSON numbers x with lo <= x <= hi (strict when
// loEx / hiEx; nil means unbounded), written without an exponent. It
// reports false for the one case it does not build: both bounds with a
// fraction inside the same unit interval (such as 0.1 to 0.9).
func boundedNumberExpr(lo *big.Rat, loEx bool, hi *big.Rat, hiEx bool) (*expr, bool) {
	var parts []*expr
	zero := decimal{ip: big.NewInt(0)}
	// Non-negative x: magnitude in [max(lo, 0), hi].
	if hi == nil || hi.Sign() >= 0 {
		mlo, loStrict := zero, false
		if lo != nil && lo.Sign() >= 0 {
			mlo, loStrict = toDecimal(lo), loEx
		}
		var mhi *decimal
		if hi != nil {
			d := toDecimal(hi)
			mhi = &d
		}
		e, ok := magnitudeExpr(mlo, loStrict, mhi, hiEx)
		if !ok {
			return nil, false
		}
		parts = append(parts, e)
	}
	// Negative x = -(m.f): m.f > 0, m.f >= -hi when hi < 0, m.f <= -lo.
	if lo == nil || lo.Sign() < 0 {
		mlo, loStrict := zero, true
		if hi != nil && hi.Sign() < 0 {
			mlo, loStrict = toDecimal(hi), hiEx
		}
		var mhi *decimal
		if lo != nil {
			d := toDecimal(lo)
			mhi = &d
		}
		e, ok := magnitudeExpr(mlo, loStrict, mhi, loEx)
		if !ok {
			return nil, false
		}
		parts = append(parts, seq(byteExpr('-'), e))
	}
	return alt(parts...), true
}

// magnitudeExpr matches non-negative m.f between lo and hi (strict as
// flagged; hi nil: unbounded).
func magnitudeExpr(lo decimal, loStrict bool, hi *decimal, hiStrict bool) (*expr, bool) {
	one := big.NewInt(1)
	if hi != nil {
		switch c := lo.ip.Cmp(hi.ip); {
		case c > 0:
			return noneExpr, true
		case c == 0:
			m := natRange(lo.ip, lo.ip)
			switch {
			case lo.frac == "" && !loStrict:
				return seq(m, fracLE(hi.frac, hiStrict)), true
			case hi.frac == "":
				return noneExpr, true // lo >= ip.0 > hi, or an empty strict range
			case lo.frac == "" && loStrict:
				return seq(m, fracNonzeroLE(hi.frac, hiStrict)), true
			}
			return nil, false
		}
	}
	parts := []*expr{seq(natRange(lo.ip, lo.ip), fracGE(lo.frac, loStrict))}
	innerLo := new(big.Int).Add(lo.ip, one)
	var innerHi *big.Int
	if hi != nil {
		innerHi = new(big.Int).Sub(hi.ip, one)
	}
	if innerHi == nil || innerLo.Cmp(innerHi) <= 0 {
		parts = append(parts, seq(natRange(innerLo, innerHi), anyFrac))
	}
	if hi != nil {
		parts = append(parts, seq(natRange(hi.ip, hi.ip), fracLE(hi.frac, hiStrict)))
	}
	return alt(parts...), true
}
