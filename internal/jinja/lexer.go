package jinja

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The lexer splits a template into text and tag tokens the way Jinja2's
// lexer does with transformers' settings (trim_blocks, lstrip_blocks,
// keep_trailing_newline off):
//
//   - \r\n and \r become \n, and one newline at the very end is dropped;
//   - {%- / {{- / {#- drop the white space before the tag, -%} / -}} / -#}
//     the white space after it;
//   - without a sign, a block or comment tag that is alone on its line
//     after white space takes that white space with it (lstrip_blocks),
//     and a block or comment tag drops the newline right after it
//     (trim_blocks); {%+ and +%} turn these off for one tag;
//   - {% raw %}...{% endraw %} is text;
//   - inside a tag, %} and }} end it only outside brackets.

type tokKind uint8

const (
	tokEOF tokKind = iota
	tokData
	tokVarBegin
	tokVarEnd
	tokBlockBegin
	tokBlockEnd
	tokName
	tokString
	tokInt
	tokFloat
	tokOp
)

func (k tokKind) String() string {
	switch k {
	case tokEOF:
		return "end of template"
	case tokData:
		return "template data"
	case tokVarBegin:
		return "'{{'"
	case tokVarEnd:
		return "'}}'"
	case tokBlockBegin:
		return "'{%'"
	case tokBlockEnd:
		return "'%}'"
	case tokName:
		return "name"
	case tokString:
		return "string"
	case tokInt:
		return "integer"
	case tokFloat:
		return "float"
	case tokOp:
		return "operator"
	}
	return "token"
}

type token struct {
	kind tokKind
	val  string // text, name, unescaped string or operator
	i    int64
	f    float64
	line int
}

func (t token) String() string {
	switch t.kind {
	case tokName, tokOp:
		return "'" + t.val + "'"
	case tokString:
		return "string"
	}
	return t.kind.String()
}

// operators, longest first.
var operators = []string{"//", "**", "==", "!=", ">=", "<=",
	"+", "-", "/", "*", "%", "~", "[", "]", "(", ")", "{", "}", ">", "<", "=", ".", ":", "|", ",", ";"}

type lexer struct {
	src          string
	pos          int
	line         int
	lineStarting bool
	toks         []token
}

// normalizeSource applies Jinja2's newline handling to a template source.
func normalizeSource(src string) string {
	if strings.IndexByte(src, '\r') >= 0 {
		src = strings.ReplaceAll(src, "\r\n", "\n")
		src = strings.ReplaceAll(src, "\r", "\n")
	}
	return strings.TrimSuffix(src, "\n")
}

func lex(src string) ([]token, error) {
	lx := &lexer{src: normalizeSource(src), line: 1, lineStarting: true}
	if err := lx.run(); err != nil {
		return nil, err
	}
	lx.toks = append(lx.toks, token{kind: tokEOF, line: lx.line})
	return lx.toks, nil
}

func (lx *lexer) fail(format string, args ...any) error {
	return &Error{Kind: ErrSyntax, Line: lx.line, Msg: fmt.Sprintf(format, args...)}
}

func (lx *lexer) emit(kind tokKind, val string) {
	lx.toks = append(lx.toks, token{kind: kind, val: val, line: lx.line})
}

// advance moves past n bytes, counting newlines.
func (lx *lexer) advance(n int) {
	lx.line += strings.Count(lx.src[lx.pos:lx.pos+n], "\n")
	lx.pos += n
}

// nextTag finds the next {{, {% or {# at or after from: its index, its
// kind ('{', '%' or '#') and its sign ('-', '+' or 0); -1 if none.
func nextTag(src string, from int) (int, byte, byte) {
	for i := from; ; {
		j := strings.IndexByte(src[i:], '{')
		if j < 0 || i+j+1 >= len(src) {
			return -1, 0, 0
		}
		i += j
		if c := src[i+1]; c == '{' || c == '%' || c == '#' {
			var sign byte
			if i+2 < len(src) && (src[i+2] == '-' || src[i+2] == '+') {
				sign = src[i+2]
			}
			return i, c, sign
		}
		i++
	}
}

func (lx *lexer) run() error {
	for lx.pos < len(lx.src) {
		p, kind, sign := nextTag(lx.src, lx.pos)
		if p < 0 {
			lx.emit(tokData, lx.src[lx.pos:])
			lx.advance(len(lx.src) - lx.pos)
			return nil
		}
		rawEnd := -1
		if kind == '%' {
			rawEnd = matchRawBegin(lx.src, p)
		}
		text := lx.src[lx.pos:p]
		lstrip := kind != '{' // block, comment or raw
		text = lx.stripText(text, sign, lstrip)
		if text != "" {
			lx.emit(tokData, text)
		}
		lx.advance(p - lx.pos)
		lx.lineStarting = false
		start := 2
		if sign != 0 {
			start = 3
		}
		var err error
		switch {
		case rawEnd >= 0:
			lx.lineStarting = lx.src[rawEnd-1] == '\n'
			lx.advance(rawEnd - lx.pos)
			err = lx.raw()
		case kind == '#':
			lx.advance(start)
			err = lx.comment()
		case kind == '{':
			lx.emit(tokVarBegin, "")
			lx.advance(start)
			err = lx.tag(false)
		default:
			lx.emit(tokBlockBegin, "")
			lx.advance(start)
			err = lx.tag(true)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// stripText applies the whitespace control of the tag that follows text:
// its sign, else lstrip_blocks for block and comment tags.
func (lx *lexer) stripText(text string, sign byte, lstrip bool) string {
	switch {
	case sign == '-':
		return strings.TrimRightFunc(text, pyIsSpace)
	case sign != '+' && lstrip:
		l := strings.LastIndexByte(text, '\n') + 1
		if l > 0 || lx.lineStarting {
			if rest := text[l:]; rest != "" && strings.TrimLeftFunc(rest, pyIsSpace) == "" {
				return text[:l]
			}
		}
	}
	return text
}

// matchRawBegin matches {%(-|+|)\s*raw\s*(-%}\s*|%}) at p and returns the
// index after it, or -1.
func matchRawBegin(src string, p int) int {
	i := p + 2
	if i < len(src) && (src[i] == '-' || src[i] == '+') {
		i++
	}
	i = skipSpace(src, i)
	if !strings.HasPrefix(src[i:], "raw") {
		return -1
	}
	i = skipSpace(src, i+3)
	switch {
	case strings.HasPrefix(src[i:], "-%}"):
		return skipSpace(src, i+3)
	case strings.HasPrefix(src[i:], "%}"):
		return i + 2
	}
	return -1
}

// matchRawEnd matches {%(-|+|)\s*endraw\s*(+%}|-%}\s*|%}\n?) at p and
// returns the sign and the index after it, or -1.
func matchRawEnd(src string, p int) (byte, int) {
	i := p + 2
	var sign byte
	if i < len(src) && (src[i] == '-' || src[i] == '+') {
		sign = src[i]
		i++
	}
	i = skipSpace(src, i)
	if !strings.HasPrefix(src[i:], "endraw") {
		return 0, -1
	}
	i = skipSpace(src, i+6)
	return sign, blockEnd(src, i)
}

// blockEnd matches +%}, -%}\s* or %}\n? at i and returns the index after
// it, or -1.
func blockEnd(src string, i int) int {
	switch {
	case strings.HasPrefix(src[i:], "+%}"):
		return i + 3
	case strings.HasPrefix(src[i:], "-%}"):
		return skipSpace(src, i+3)
	case strings.HasPrefix(src[i:], "%}"):
		if i+2 < len(src) && src[i+2] == '\n' {
			return i + 3
		}
		return i + 2
	}
	return -1
}

func skipSpace(src string, i int) int {
	for i < len(src) {
		r, n := utf8.DecodeRuneInString(src[i:])
		if !pyIsSpace(r) {
			break
		}
		i += n
	}
	return i
}

func (lx *lexer) raw() error {
	for i := lx.pos; ; {
		j := strings.Index(lx.src[i:], "{%")
		if j < 0 {
			return lx.fail("missing end of raw directive")
		}
		sign, end := matchRawEnd(lx.src, i+j)
		if end < 0 {
			i += j + 2
			continue
		}
		text := lx.stripText(lx.src[lx.pos:i+j], sign, true)
		if text != "" {
			lx.emit(tokData, text)
		}
		lx.lineStarting = lx.src[end-1] == '\n'
		lx.advance(end - lx.pos)
		return nil
	}
}

func (lx *lexer) comment() error {
	j := strings.Index(lx.src[lx.pos:], "#}")
	if j < 0 {
		return lx.fail("missing end of comment tag")
	}
	end := lx.pos + j + 2
	if j > 0 {
		switch lx.src[lx.pos+j-1] {
		case '-':
			end = skipSpace(lx.src, end)
		case '+':
		default:
			if end < len(lx.src) && lx.src[end] == '\n' {
				end++
			}
		}
	} else if end < len(lx.src) && lx.src[end] == '\n' {
		end++
	}
	lx.lineStarting = lx.src[end-1] == '\n'
	lx.advance(end - lx.pos)
	return nil
}

// tag lexes the inside of a {{ }} (block false) or {% %} tag, its end
// included.
func (lx *lexer) tag(block bool) error {
	var brackets []byte
	src := lx.src
	for {
		if lx.pos >= len(src) {
			return lx.fail("unexpected end of template: the tag opened here is not closed")
		}
		if len(brackets) == 0 {
			if end := lx.tagEnd(block); end >= 0 {
				kind := tokVarEnd
				if block {
					kind = tokBlockEnd
				}
				lx.emit(kind, "")
				lx.lineStarting = src[end-1] == '\n'
				lx.advance(end - lx.pos)
				return nil
			}
		}
		c := src[lx.pos]
		r, n := utf8.DecodeRuneInString(src[lx.pos:])
		switch {
		case pyIsSpace(r):
			lx.advance(n)
		case c >= '0' && c <= '9':
			if err := lx.number(); err != nil {
				return err
			}
		case c == '_' || unicode.IsLetter(r):
			e := lx.pos + n
			for e < len(src) {
				r, n := utf8.DecodeRuneInString(src[e:])
				if r != '_' && !unicode.IsLetter(r) && !unicode.IsDigit(r) && !unicode.Is(unicode.Mn, r) && !unicode.Is(unicode.Mc, r) {
					break
				}
				e += n
			}
			lx.emit(tokName, src[lx.pos:e])
			lx.advance(e - lx.pos)
		case c == '\'' || c == '"':
			if err := lx.str(c); err != nil {
				return err
			}
		default:
			op := ""
			for _, o := range operators {
				if strings.HasPrefix(src[lx.pos:], o) {
					op = o
					break
				}
			}
			if op == "" {
				return lx.fail("unexpected char %q", r)
			}
			switch op {
			case "(", "[", "{":
				if len(brackets) >= nestingMax {
					return lx.fail("brackets nested more than %d deep", nestingMax)
				}
				brackets = append(brackets, map[string]byte{"(": ')', "[": ']', "{": '}'}[op])
			case ")", "]", "}":
				if len(brackets) == 0 {
					return lx.fail("unexpected '%s'", op)
				}
				if want := brackets[len(brackets)-1]; want != op[0] {
					return lx.fail("unexpected '%s', expected '%c'", op, want)
				}
				brackets = brackets[:len(brackets)-1]
			}
			lx.emit(tokOp, op)
			lx.advance(len(op))
		}
	}
}

// tagEnd matches the end of the current tag at lx.pos and returns the
// index after it (and the white space or newline it takes), or -1.
func (lx *lexer) tagEnd(block bool) int {
	src, i := lx.src, lx.pos
	if block {
		return blockEnd(src, i)
	}
	switch {
	case strings.HasPrefix(src[i:], "-}}"):
		return skipSpace(src, i+3)
	case strings.HasPrefix(src[i:], "}}"):
		return i + 2
	}
	return -1
}

// number lexes a float (digits with a fraction or an exponent) or an
// integer (decimal, 0b, 0o or 0x, with _ separators) as Jinja2 does.
func (lx *lexer) number() error {
	src, i := lx.src, lx.pos
	digits := func(i int) int { // (\d+_)*\d+ ; returns the end or i
		e := i
		for e < len(src) && src[e] >= '0' && src[e] <= '9' {
			e++
		}
		if e == i {
			return i
		}
		for e+1 < len(src) && src[e] == '_' && src[e+1] >= '0' && src[e+1] <= '9' {
			e++
			for e < len(src) && src[e] >= '0' && src[e] <= '9' {
				e++
			}
		}
		return e
	}
	exponent := func(i int) int { // e[+-]?digits ; returns the end or i
		if i >= len(src) || (src[i] != 'e' && src[i] != 'E') {
			return i
		}
		j := i + 1
		if j < len(src) && (src[j] == '+' || src[j] == '-') {
			j++
		}
		if e := digits(j); e > j {
			return e
		}
		return i
	}
	floatEnd := -1
	if i == 0 || src[i-1] != '.' {
		m := digits(i)
		fracEnd := m
		if m < len(src) && src[m] == '.' {
			if e := digits(m + 1); e > m+1 {
				fracEnd = e
			}
		}
		if e := exponent(fracEnd); e > fracEnd {
			floatEnd = e
		} else if fracEnd > m {
			floatEnd = fracEnd
		}
	}
	if floatEnd > 0 {
		text := strings.ReplaceAll(src[i:floatEnd], "_", "")
		f, err := strconv.ParseFloat(text, 64)
		if err != nil && !isRangeErr(err) {
			return lx.fail("invalid float %q", text)
		}
		lx.toks = append(lx.toks, token{kind: tokFloat, f: f, line: lx.line})
		lx.advance(floatEnd - i)
		return nil
	}
	end, base := i, 10
	if src[i] == '0' && i+1 < len(src) {
		switch src[i+1] | 0x20 {
		case 'b':
			base = 2
		case 'o':
			base = 8
		case 'x':
			base = 16
		}
	}
	if base != 10 {
		end = i + 2
		for end < len(src) {
			c := src[end]
			if c == '_' && end+1 < len(src) && digitValue(src[end+1]) < base {
				end += 2
				continue
			}
			if digitValue(c) >= base {
				break
			}
			end++
		}
		if end == i+2 { // "0x" alone: the integer 0, then a name
			base, end = 10, i+1
		}
	} else if src[i] == '0' {
		end = i + 1
		for end < len(src) && (src[end] == '0' || src[end] == '_' && end+1 < len(src) && src[end+1] == '0') {
			end++
		}
	} else {
		end = digits(i)
	}
	text := strings.ReplaceAll(src[i:end], "_", "")
	if base != 10 {
		text = text[2:]
	}
	n, err := strconv.ParseInt(text, base, 64)
	if err != nil {
		return lx.fail("integer literal %s is too large", src[i:end])
	}
	lx.toks = append(lx.toks, token{kind: tokInt, i: n, line: lx.line})
	lx.advance(end - i)
	return nil
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

func digitValue(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return 99
}

// str lexes a quoted string and unescapes it as Jinja2 does (Python's
// unicode-escape codec after backslashreplace).
func (lx *lexer) str(quote byte) error {
	src := lx.src
	e := lx.pos + 1
	for {
		if e >= len(src) {
			return lx.fail("unexpected end of string")
		}
		if src[e] == '\\' {
			e += 2
			continue
		}
		if src[e] == quote {
			break
		}
		e++
	}
	if e >= len(src) {
		return lx.fail("unexpected end of string")
	}
	val, err := unescape(src[lx.pos+1 : e])
	if err != nil {
		return lx.fail("%v", err)
	}
	lx.emit(tokString, val)
	lx.advance(e + 1 - lx.pos)
	return nil
}

func unescape(s string) (string, error) {
	if strings.IndexByte(s, '\\') < 0 {
		return s, nil
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			b.WriteByte(c)
			i++
			continue
		}
		d := s[i+1]
		i += 2
		switch d {
		case '\n':
		case '\\', '\'', '"':
			b.WriteByte(d)
		case 'a':
			b.WriteByte(7)
		case 'b':
			b.WriteByte(8)
		case 'f':
			b.WriteByte(12)
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'v':
			b.WriteByte(11)
		case '0', '1', '2', '3', '4', '5', '6', '7':
			v := int(d - '0')
			for k := 0; k < 2 && i < len(s) && s[i] >= '0' && s[i] <= '7'; k++ {
				v = v*8 + int(s[i]-'0')
				i++
			}
			b.WriteRune(rune(v))
		case 'x', 'u', 'U':
			n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[d]
			if i+n > len(s) {
				return "", fmt.Errorf("truncated \\%c escape", d)
			}
			v, err := strconv.ParseUint(s[i:i+n], 16, 32)
			if err != nil {
				return "", fmt.Errorf("truncated \\%c escape", d)
			}
			if v > unicode.MaxRune {
				return "", fmt.Errorf("illegal Unicode character")
			}
			b.WriteRune(rune(v))
			i += n
		case 'N':
			return "", fmt.Errorf("\\N{...} escapes are not supported")
		default:
			b.WriteByte('\\')
			if d < utf8.RuneSelf {
				b.WriteByte(d)
				continue
			}
			// A backslash before a non-ASCII character: Python's
			// backslashreplace turns the character into an escape first,
			// which then reads as text.
			r, n := utf8.DecodeRuneInString(s[i-1:])
			i += n - 1
			switch {
			case r < 0x100:
				fmt.Fprintf(&b, "x%02x", r)
			case r < 0x10000:
				fmt.Fprintf(&b, "u%04x", r)
			default:
				fmt.Fprintf(&b, "U%08x", r)
			}
		}
	}
	return b.String(), nil
}

// pyIsSpace is Python's str.isspace for one character (also what re's \s
// and str.strip() use): Unicode white space and the separators U+001C to
// U+001F.
func pyIsSpace(r rune) bool {
	return unicode.IsSpace(r) || r >= 0x1c && r <= 0x1f
}
