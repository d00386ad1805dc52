package grammar

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// MaxRegexRepeat bounds the counts of a {m,n} quantifier.
const MaxRegexRepeat = 1000

// regexParser parses the subset of ECMAScript regular expressions the
// grammar supports: literals, escapes (\d \w \s \D \W \S, \n \t \r \f \v \0,
// \xHH, \uHHHH, escaped punctuation), classes with ranges and negation, the
// dot, groups ((...), (?:...), (?<name>...)), alternation, the quantifiers
// * + ? {m} {m,} {m,n} (lazy forms match the same strings), and ^ and $ at
// the start and end of a top-level alternative. Lookaround, backreferences
// and word boundaries are refused.
type regexParser struct {
	src   []rune
	pos   int
	chars func([]runeRange) *expr // one character from ranges
}

func (p *regexParser) errorf(format string, args ...any) error {
	return fmt.Errorf("pattern %q at offset %d: %s", string(p.src), p.pos, fmt.Sprintf(format, args...))
}

func (p *regexParser) more() bool { return p.pos < len(p.src) }
func (p *regexParser) peek() rune {
	if p.pos < len(p.src) {
		return p.src[p.pos]
	}
	return -1
}

// parseTop parses the whole pattern. Each top-level alternative not
// anchored with ^ (or $) gets anyChar* before (or after) it, because a JSON
// Schema pattern matches anywhere in the string unless anchored; with
// anchored set the whole text must match.
func (p *regexParser) parseTop(anchored bool, anyChar *expr) (*expr, error) {
	var alts []*expr
	for {
		start := anchored
		if p.peek() == '^' {
			p.pos++
			start = true
		}
		e, end, err := p.parseConcat(0)
		if err != nil {
			return nil, err
		}
		end = end || anchored
		if !start {
			e = seq(star(anyChar), e)
		}
		if !end {
			e = seq(e, star(anyChar))
		}
		alts = append(alts, e)
		if !p.more() {
			break
		}
		if p.peek() == '|' {
			p.pos++
			continue
		}
		return nil, p.errorf("unexpected %q", p.peek())
	}
	return alt(alts...), nil
}

func (p *regexParser) parseAlt(depth int) (*expr, error) {
	var alts []*expr
	for {
		e, end, err := p.parseConcat(depth)
		if err != nil {
			return nil, err
		}
		if end {
			return nil, p.errorf("$ is only supported at the end of the pattern")
		}
		alts = append(alts, e)
		if p.peek() != '|' {
			return alt(alts...), nil
		}
		p.pos++
	}
}

// parseConcat parses items up to | or ) or the end; end reports a final $.
func (p *regexParser) parseConcat(depth int) (e *expr, end bool, err error) {
	var items []*expr
	for p.more() {
		c := p.peek()
		if c == '|' || c == ')' {
			break
		}
		if c == '$' {
			p.pos++
			if depth > 0 || (p.more() && p.peek() != '|') {
				return nil, false, p.errorf("$ is only supported at the end of the pattern")
			}
			return seq(items...), true, nil
		}
		if c == '^' {
			return nil, false, p.errorf("^ is only supported at the start of the pattern")
		}
		atom, err := p.parseAtom(depth)
		if err != nil {
			return nil, false, err
		}
		atom, err = p.parseQuant(atom)
		if err != nil {
			return nil, false, err
		}
		items = append(items, atom)
	}
	return seq(items...), false, nil
}

func (p *regexParser) parseQuant(atom *expr) (*expr, error) {
	for p.more() {
		var lo, hi int
		switch p.peek() {
		case '*':
			lo, hi = 0, -1
			p.pos++
		case '+':
			lo, hi = 1, -1
			p.pos++
		case '?':
			lo, hi = 0, 1
			p.pos++
		case '{':
			save := p.pos
			l, h, ok := p.parseBraces()
			if !ok {
				p.pos = save
				return atom, nil // a literal brace, as ECMAScript allows
			}
			lo, hi = l, h
			if lo > MaxRegexRepeat || hi > MaxRegexRepeat {
				return nil, p.errorf("repeat count above %d", MaxRegexRepeat)
			}
			if hi >= 0 && lo > hi {
				return nil, p.errorf("repeat {%d,%d} has min above max", lo, hi)
			}
		default:
			return atom, nil
		}
		if p.peek() == '?' {
			p.pos++ // lazy: same language
		}
		atom = repeat(atom, lo, hi)
		if c := p.peek(); c == '*' || c == '+' || c == '?' {
			return nil, p.errorf("nothing to repeat")
		}
	}
	return atom, nil
}

// parseBraces parses {m}, {m,} or {m,n}.
func (p *regexParser) parseBraces() (lo, hi int, ok bool) {
	p.pos++ // {
	num := func() (int, bool) {
		start := p.pos
		for p.more() && p.peek() >= '0' && p.peek() <= '9' {
			p.pos++
		}
		if p.pos == start || p.pos-start > 6 {
			return 0, false
		}
		n, _ := strconv.Atoi(string(p.src[start:p.pos]))
		return n, true
	}
	lo, ok = num()
	if !ok {
		return 0, 0, false
	}
	hi = lo
	if p.peek() == ',' {
		p.pos++
		if p.peek() == '}' {
			hi = -1
		} else if hi, ok = num(); !ok {
			return 0, 0, false
		}
	}
	if p.peek() != '}' {
		return 0, 0, false
	}
	p.pos++
	return lo, hi, true
}

var (
	digitRanges = []runeRange{{'0', '9'}}
	wordRanges  = []runeRange{{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}
	spaceRanges = []runeRange{{'\t', '\r'}, {' ', ' '}, {0xA0, 0xA0}, {0x1680, 0x1680}, {0x2000, 0x200A},
		{0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}}
	dotRanges = complementRanges([]runeRange{{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}})
)

func (p *regexParser) parseAtom(depth int) (*expr, error) {
	c := p.peek()
	switch c {
	case '(':
		p.pos++
		if p.peek() == '?' {
			p.pos++
			switch p.peek() {
			case ':':
				p.pos++
			case '<':
				p.pos++
				if c := p.peek(); c == '=' || c == '!' {
					return nil, p.errorf("lookbehind is not supported")
				}
				for p.more() && p.peek() != '>' {
					p.pos++
				}
				if !p.more() {
					return nil, p.errorf("unterminated group name")
				}
				p.pos++
			default:
				return nil, p.errorf("lookahead and group flags are not supported")
			}
		}
		if depth > 64 {
			return nil, p.errorf("groups nested too deeply")
		}
		e, err := p.parseAlt(depth + 1)
		if err != nil {
			return nil, err
		}
		if p.peek() != ')' {
			return nil, p.errorf("missing )")
		}
		p.pos++
		return e, nil
	case '[':
		p.pos++
		rs, err := p.parseClass()
		if err != nil {
			return nil, err
		}
		return p.chars(rs), nil
	case '.':
		p.pos++
		return p.chars(dotRanges), nil
	case '\\':
		p.pos++
		rs, err := p.parseEscape(false)
		if err != nil {
			return nil, err
		}
		return p.chars(rs), nil
	case '*', '+', '?':
		return nil, p.errorf("nothing to repeat")
	case ')':
		return nil, p.errorf("unmatched )")
	}
	p.pos++
	return p.chars([]runeRange{{c, c}}), nil
}

// parseEscape parses the escape after a backslash; inClass allows \b as
// backspace.
func (p *regexParser) parseEscape(inClass bool) ([]runeRange, error) {
	if !p.more() {
		return nil, p.errorf("pattern ends with a backslash")
	}
	c := p.src[p.pos]
	p.pos++
	one := func(r rune) []runeRange { return []runeRange{{r, r}} }
	switch c {
	case 'd':
		return digitRanges, nil
	case 'D':
		return complementRanges(digitRanges), nil
	case 'w':
		return wordRanges, nil
	case 'W':
		return complementRanges(wordRanges), nil
	case 's':
		return spaceRanges, nil
	case 'S':
		return complementRanges(spaceRanges), nil
	case 'n':
		return one('\n'), nil
	case 'r':
		return one('\r'), nil
	case 't':
		return one('\t'), nil
	case 'f':
		return one('\f'), nil
	case 'v':
		return one('\v'), nil
	case '0':
		return one(0), nil
	case 'b':
		if inClass {
			return one('\b'), nil
		}
		return nil, p.errorf(`word boundary \b is not supported`)
	case 'B':
		return nil, p.errorf(`\B is not supported`)
	case 'x', 'u':
		n := 2
		if c == 'u' {
			n = 4
		}
		if p.pos+n > len(p.src) {
			return nil, p.errorf(`short \%c escape`, c)
		}
		v, err := strconv.ParseUint(string(p.src[p.pos:p.pos+n]), 16, 32)
		if err != nil {
			return nil, p.errorf(`bad \%c escape`, c)
		}
		p.pos += n
		return one(rune(v)), nil
	}
	if c >= '1' && c <= '9' {
		return nil, p.errorf("backreferences are not supported")
	}
	if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
		return nil, p.errorf(`escape \%c is not supported`, c)
	}
	return one(c), nil
}

// parseClass parses a class after [ up to and including ].
func (p *regexParser) parseClass() ([]runeRange, error) {
	neg := false
	if p.peek() == '^' {
		neg = true
		p.pos++
	}
	var rs []runeRange
	first := true
	for {
		if !p.more() {
			return nil, p.errorf("missing ]")
		}
		c := p.src[p.pos]
		if c == ']' && !first {
			p.pos++
			break
		}
		if c == ']' && first {
			// "[]" matches nothing and "[^]" anything, as in ECMAScript.
			p.pos++
			break
		}
		first = false
		lo, set, err := p.classAtom()
		if err != nil {
			return nil, err
		}
		if set != nil {
			rs = append(rs, set...)
			continue
		}
		if p.peek() == '-' && p.pos+1 < len(p.src) && p.src[p.pos+1] != ']' {
			p.pos++
			hi, hset, err := p.classAtom()
			if err != nil {
				return nil, err
			}
			if hset != nil {
				return nil, p.errorf("class range with a class escape")
			}
			if hi < lo {
				return nil, p.errorf("class range out of order")
			}
			rs = append(rs, runeRange{lo, hi})
			continue
		}
		rs = append(rs, runeRange{lo, lo})
	}
	if neg {
		return complementRanges(rs), nil
	}
	return normalizeRanges(rs), nil
}

// classAtom returns one class member: a character, or a set for \d and
// friends.
func (p *regexParser) classAtom() (rune, []runeRange, error) {
	c := p.src[p.pos]
	p.pos++
	if c != '\\' {
		return c, nil, nil
	}
	rs, err := p.parseEscape(true)
	if err != nil {
		return 0, nil, err
	}
	if len(rs) == 1 && rs[0].lo == rs[0].hi {
		return rs[0].lo, nil, nil
	}
	return 0, rs, nil
}

// compilePattern turns a JSON Schema pattern into the content of a JSON
// string (between the quotes).
func compilePattern(pattern string) (*expr, error) {
	if !utf8.ValidString(pattern) {
		return nil, fmt.Errorf("pattern is not valid UTF-8")
	}
	p := &regexParser{src: []rune(pattern), chars: charsExpr}
	return p.parseTop(false, charsExpr([]runeRange{{0, utf8.MaxRune}}))
}
