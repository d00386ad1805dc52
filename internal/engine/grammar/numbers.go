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

var (
	digit    = rangeExpr('0', '9')
	digit19  = rangeExpr('1', '9')
	digits   = plus(digit)
	fracPart = seq(byteExpr('.'), digits)
	expPart  = seq(alt(byteExpr('e'), byteExpr('E')), opt(alt(byteExpr('+'), byteExpr('-'))), digits)
	// natural matches a non-negative integer without leading zeros.
	natural = alt(byteExpr('0'), seq(digit19, star(digit)))
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
		// [lo, 10^len(lo) - 1] then every longer number.
		top := strings.Repeat("9", len(ls))
		longer := seq(digit19, repeat(digit, len(ls), -1))
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

// boundedNumberExpr matches JSON numbers x with lo <= x <= hi (or strict
// when loEx / hiEx), for integral bounds. The number is written without an
// exponent; either bound may be nil.
func boundedNumberExpr(lo *big.Int, loEx bool, hi *big.Int, hiEx bool) *expr {
	anyFrac := opt(fracPart)
	zeroFrac := opt(seq(byteExpr('.'), plus(byteExpr('0'))))
	nonzeroFrac := seq(byteExpr('.'), star(digit), digit19, star(digit))
	one := big.NewInt(1)
	// A value is sign, magnitude m (integer part) and fraction f. Build the
	// non-negative values and the negative ones separately as conditions
	// on m and f.
	var parts []*expr
	// Non-negative x = m.f >= 0.
	{
		// Lower: x >= lo (or >). For lo <= 0 every non-negative value passes
		// (except x > 0 when lo == 0 and strict: m.f must be non-zero).
		mlo := big.NewInt(0)
		strictAtLo := false // m == mlo needs a non-zero fraction
		if lo != nil && lo.Sign() >= 0 {
			mlo = new(big.Int).Set(lo)
			strictAtLo = loEx
		}
		// Upper: x <= hi: m < hi any f, m == hi only zero fraction (or, when
		// strict, m < hi only).
		if hi == nil || hi.Sign() >= 0 {
			parts = append(parts, magnitudeExpr(mlo, strictAtLo, hi, hiEx, anyFrac, zeroFrac, nonzeroFrac, one))
		}
	}
	// Negative x = -(m.f) < 0, i.e. m.f > 0 with the bounds mirrored:
	// x >= lo  ⇔  m.f <= -lo;  x <= hi  ⇔  m.f >= -hi.
	if lo == nil || lo.Sign() < 0 {
		var mhi *big.Int
		if lo != nil {
			mhi = new(big.Int).Neg(lo)
		}
		mlo := big.NewInt(0)
		strictAtLo := true // m.f > 0
		if hi != nil && hi.Sign() < 0 {
			mlo = new(big.Int).Neg(hi)
			strictAtLo = hiEx
		}
		parts = append(parts, seq(byteExpr('-'), magnitudeExpr(mlo, strictAtLo, mhi, loEx, anyFrac, zeroFrac, nonzeroFrac, one)))
	}
	return alt(parts...)
}

// magnitudeExpr matches m.f with mlo <= m.f <= mhi (strict on either side
// as flagged; mhi nil: unbounded), for integral mlo >= 0 and mhi.
func magnitudeExpr(mlo *big.Int, loStrict bool, mhi *big.Int, hiStrict bool, anyFrac, zeroFrac, nonzeroFrac *expr, one *big.Int) *expr {
	var parts []*expr
	if mhi != nil && mlo.Cmp(mhi) > 0 {
		return noneExpr
	}
	if mhi != nil && mlo.Cmp(mhi) == 0 {
		if loStrict || hiStrict {
			return noneExpr
		}
		return seq(natRange(mlo, mlo), zeroFrac)
	}
	// m == mlo.
	if loStrict {
		parts = append(parts, seq(natRange(mlo, mlo), nonzeroFrac))
	} else {
		parts = append(parts, seq(natRange(mlo, mlo), anyFrac))
	}
	// mlo < m < mhi: any fraction.
	innerLo := new(big.Int).Add(mlo, one)
	var innerHi *big.Int
	if mhi != nil {
		innerHi = new(big.Int).Sub(mhi, one)
	}
	if innerHi == nil || innerLo.Cmp(innerHi) <= 0 {
		parts = append(parts, seq(natRange(innerLo, innerHi), anyFrac))
	}
	// m == mhi: only a zero fraction, and only when not strict.
	if mhi != nil && !hiStrict {
		parts = append(parts, seq(natRange(mhi, mhi), zeroFrac))
	}
	return alt(parts...)
}
