package grammar

// formatExpr returns the string content matching a format, or nil for a
// format the grammar does not know.
//
//   - date: RFC 3339 full-date, months 01-12, days limited per month
//     (February 29 only in leap years).
//   - time: RFC 3339 full-time: hh:mm:ss (second 60 allowed), optional
//     fraction, then Z or ±hh:mm; T and Z in either case.
//   - date-time: date, T or t, time.
//   - uuid: 8-4-4-4-12 hexadecimal digits, either case.
//   - email: a dot-atom local part (RFC 5322 atext), @, and a domain of
//     dot-separated labels of letters, digits and inner hyphens (no quoted
//     local parts, no IP literals).
func formatExpr(name string) *expr {
	switch name {
	case "date":
		return dateExpr()
	case "time":
		return timeExpr()
	case "date-time":
		return seq(dateExpr(), alt(byteExpr('T'), byteExpr('t')), timeExpr())
	case "uuid":
		h := hexExpr()
		return seq(repeat(h, 8, 8), byteExpr('-'), repeat(h, 4, 4), byteExpr('-'), repeat(h, 4, 4),
			byteExpr('-'), repeat(h, 4, 4), byteExpr('-'), repeat(h, 12, 12))
	case "email":
		var atext byteSet
		atext.addRange('a', 'z')
		atext.addRange('A', 'Z')
		atext.addRange('0', '9')
		for _, c := range []byte("!#$%&'*+/=?^_`{|}~-") {
			atext.add(c)
		}
		atom := plus(setExpr(atext))
		local := seq(atom, star(seq(byteExpr('.'), atom)))
		var alnum byteSet
		alnum.addRange('a', 'z')
		alnum.addRange('A', 'Z')
		alnum.addRange('0', '9')
		an := setExpr(alnum)
		var inner byteSet = alnum
		inner.add('-')
		label := seq(an, opt(seq(repeat(setExpr(inner), 0, 61), an)))
		domain := seq(label, star(seq(byteExpr('.'), label)))
		return seq(local, byteExpr('@'), domain)
	}
	return nil
}

func hexExpr() *expr {
	e := rangeExpr('0', '9')
	e.set.addRange('a', 'f')
	e.set.addRange('A', 'F')
	return e
}

func twoDigits(lo, hi int) *expr {
	var alts []*expr
	for v := lo; v <= hi; v++ {
		alts = append(alts, lit(string([]byte{byte('0' + v/10), byte('0' + v%10)})))
	}
	return alt(alts...)
}

func dateExpr() *expr {
	year := repeat(digit, 4, 4)
	long := alt(lit("01"), lit("03"), lit("05"), lit("07"), lit("08"), lit("10"), lit("12"))
	short := alt(lit("04"), lit("06"), lit("09"), lit("11"))
	md := alt(
		seq(long, byteExpr('-'), twoDigits(1, 31)),
		seq(short, byteExpr('-'), twoDigits(1, 30)),
		seq(lit("02"), byteExpr('-'), twoDigits(1, 28)),
	)
	// Leap years: divisible by 4, centuries only when divisible by 400.
	mult4 := alt(seq(byteExpr('0'), alt(byteExpr('4'), byteExpr('8'))),
		seq(alt(byteExpr('2'), byteExpr('4'), byteExpr('6'), byteExpr('8')), alt(byteExpr('0'), byteExpr('4'), byteExpr('8'))),
		seq(alt(byteExpr('1'), byteExpr('3'), byteExpr('5'), byteExpr('7'), byteExpr('9')), alt(byteExpr('2'), byteExpr('6'))))
	leap := alt(seq(digit, digit, mult4), seq(mult4, lit("00")), lit("0000"))
	return alt(seq(year, byteExpr('-'), md), seq(leap, lit("-02-29")))
}

func timeExpr() *expr {
	hms := seq(twoDigits(0, 23), byteExpr(':'), twoDigits(0, 59), byteExpr(':'), twoDigits(0, 60))
	frac := opt(seq(byteExpr('.'), repeat(digit, 1, MaxFractionDigits)))
	offset := alt(byteExpr('Z'), byteExpr('z'),
		seq(alt(byteExpr('+'), byteExpr('-')), twoDigits(0, 23), byteExpr(':'), twoDigits(0, 59)))
	return seq(hms, frac, offset)
}
