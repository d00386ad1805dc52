package grammar

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// This file compiles GBNF, llama.cpp's grammar format: rules
// `name ::= alternatives`, string literals, character classes, the dot,
// grouping, alternation and the repetition operators, with `root` as the
// start rule. Each rule becomes a rule of the pushdown automaton, so rules
// may refer to each other recursively; small rules that are not recursive
// are inlined into their callers (fewer stack frames and fewer ambiguous
// readings).

// Limits of CompileGBNF.
const (
	// MaxGBNFBytes bounds the source text.
	MaxGBNFBytes = 1 << 20
	// MaxGBNFRepeat bounds the counts of {m}, {m,} and {m,n}.
	MaxGBNFRepeat = MaxLengthBound
	// MaxGBNFRules bounds the number of rules.
	MaxGBNFRules = 1 << 14
	// maxGBNFNesting bounds nested parentheses.
	maxGBNFNesting = 128
	// maxGBNFPostfix bounds the repetition operators on one item.
	maxGBNFPostfix = 16
	// gbnfInlineSize is the largest body (in estimated NFA states) of a
	// non-recursive rule that is inlined rather than called.
	gbnfInlineSize = 128
)

// CompileGBNF compiles a grammar in llama.cpp's GBNF format (as described
// in llama.cpp's grammars/README.md) whose start rule is root. Characters
// are Unicode code points, matched in their UTF-8 encoding: "\xE9" and
// [\xE0-\xFF] are code points (é is two bytes), as in llama.cpp. Left
// recursion is refused with an error naming the rule; every error names
// the line and column (in characters, from 1). Token references (<...>)
// are refused with ErrUnsupported. Options apply only to the caches and
// the stack depth: a GBNF grammar spells out its own whitespace.
func CompileGBNF(src string, opts Options) (*Grammar, error) {
	if len(src) > MaxGBNFBytes {
		return nil, fmt.Errorf("grammar: gbnf: the grammar is %d bytes, more than %d", len(src), MaxGBNFBytes)
	}
	if !utf8.ValidString(src) {
		i := 0
		for i < len(src) {
			r, n := utf8.DecodeRuneInString(src[i:])
			if r == utf8.RuneError && n == 1 {
				break
			}
			i += n
		}
		return nil, (&gbnfParser{src: src}).errAt(i, "invalid UTF-8")
	}
	p := &gbnfParser{src: src, index: map[string]int{}}
	if err := p.parse(); err != nil {
		return nil, err
	}
	root, ok := p.index["root"]
	if !ok || p.rules[root].body == nil {
		return nil, p.errAt(len(src), `no rule named root (the start rule): add "root ::= ..."`)
	}
	for _, r := range p.rules {
		if r.body == nil {
			return nil, p.errAt(r.refPos, "rule %q is used but not defined", r.name)
		}
	}
	return p.compile(root, opts)
}

// gbnfRule is one rule of a GBNF source: its body refers to other rules by
// their index in gbnfParser.rules.
type gbnfRule struct {
	name   string
	body   *expr // nil until defined
	defPos int   // offset of the name in its definition
	refPos int   // offset of the first reference
}

type gbnfParser struct {
	src   string
	pos   int
	rules []gbnfRule
	index map[string]int
	// tooMany is set when a rule past MaxGBNFRules is named.
	tooMany bool
}

// errAt formats an error at byte offset off as line and column.
func (p *gbnfParser) errAt(off int, format string, args ...any) error {
	line, col := p.lineCol(off)
	return fmt.Errorf("grammar: gbnf: line %d, column %d: %s", line, col, fmt.Sprintf(format, args...))
}

func (p *gbnfParser) unsupportedAt(off int, format string, args ...any) error {
	line, col := p.lineCol(off)
	return fmt.Errorf("grammar: gbnf: line %d, column %d: %s: %w", line, col, fmt.Sprintf(format, args...), ErrUnsupported)
}

func (p *gbnfParser) lineCol(off int) (line, col int) {
	off = min(off, len(p.src))
	before := p.src[:off]
	line = strings.Count(before, "\n") + 1
	col = utf8.RuneCountInString(before[strings.LastIndexByte(before, '\n')+1:]) + 1
	return line, col
}

func (p *gbnfParser) eof() bool { return p.pos >= len(p.src) }

func (p *gbnfParser) peek() byte {
	if p.pos < len(p.src) {
		return p.src[p.pos]
	}
	return 0
}

// skipSpace skips whitespace (newlines included) and # comments.
func (p *gbnfParser) skipSpace() {
	for p.pos < len(p.src) {
		switch c := p.src[p.pos]; c {
		case ' ', '\t', '\n', '\r':
			p.pos++
		case '#':
			for p.pos < len(p.src) && p.src[p.pos] != '\n' {
				p.pos++
			}
		default:
			return
		}
	}
}

func isNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

func (p *gbnfParser) name() string {
	start := p.pos
	for p.pos < len(p.src) && isNameByte(p.src[p.pos]) {
		p.pos++
	}
	return p.src[start:p.pos]
}

// atDefinition reports whether a rule definition (name ::=) starts here;
// a newline does not end a rule, the next definition does.
func (p *gbnfParser) atDefinition() bool {
	save := p.pos
	defer func() { p.pos = save }()
	if p.name() == "" {
		return false
	}
	p.skipSpace()
	return strings.HasPrefix(p.src[p.pos:], "::=")
}

// ruleIndex returns the index of the rule called name, adding it.
func (p *gbnfParser) ruleIndex(name string, refPos int) int {
	if i, ok := p.index[name]; ok {
		return i
	}
	if len(p.rules) == MaxGBNFRules {
		p.tooMany = true
	}
	p.rules = append(p.rules, gbnfRule{name: name, refPos: refPos, defPos: -1})
	p.index[name] = len(p.rules) - 1
	return len(p.rules) - 1
}

func (p *gbnfParser) parse() error {
	for {
		p.skipSpace()
		if p.eof() {
			return nil
		}
		at := p.pos
		name := p.name()
		if name == "" {
			return p.errAt(at, "expected a rule name, found %q", p.peekRune())
		}
		p.skipSpace()
		if !strings.HasPrefix(p.src[p.pos:], "::=") {
			return p.errAt(p.pos, "expected ::= after rule name %q", name)
		}
		p.pos += 3
		id := p.ruleIndex(name, at)
		if p.tooMany {
			return p.errAt(at, "more than %d rules", MaxGBNFRules)
		}
		if r := &p.rules[id]; r.body != nil {
			line, col := p.lineCol(r.defPos)
			return p.errAt(at, "rule %q is defined twice (first at line %d, column %d)", name, line, col)
		}
		body, err := p.alternates(0)
		if err != nil {
			return err
		}
		p.rules[id].body = body
		p.rules[id].defPos = at
		p.skipSpace()
		if !p.eof() && !isNameByte(p.peek()) {
			if p.peek() == ')' {
				return p.errAt(p.pos, "unmatched )")
			}
			return p.errAt(p.pos, "unexpected %q", p.peekRune())
		}
	}
}

func (p *gbnfParser) peekRune() string {
	if p.eof() {
		return "end of input"
	}
	r, _ := utf8.DecodeRuneInString(p.src[p.pos:])
	return string(r)
}

// alternates parses sequences separated by |.
func (p *gbnfParser) alternates(depth int) (*expr, error) {
	var alts []*expr
	for {
		e, err := p.sequence(depth)
		if err != nil {
			return nil, err
		}
		alts = append(alts, e)
		if p.peek() != '|' {
			break
		}
		p.pos++
	}
	if len(alts) == 1 {
		return alts[0], nil
	}
	// alt drops alternatives that match nothing; keep the result none
	// only when all of them are.
	return alt(alts...), nil
}

// sequence parses items up to |, ), the end, or the next definition.
func (p *gbnfParser) sequence(depth int) (*expr, error) {
	var items []*expr
	for {
		p.skipSpace()
		if p.eof() {
			break
		}
		c := p.peek()
		if c == '|' || c == ')' {
			break
		}
		if isNameByte(c) && p.atDefinition() {
			break
		}
		at := p.pos
		item, err := p.primary(depth)
		if err != nil {
			return nil, err
		}
		if item, err = p.postfix(item, at); err != nil {
			return nil, err
		}
		items = append(items, item)
	}
	return seq(items...), nil
}

func (p *gbnfParser) primary(depth int) (*expr, error) {
	at := p.pos
	switch c := p.peek(); {
	case c == '"':
		p.pos++
		var b []byte
		for {
			if p.eof() {
				return nil, p.errAt(at, "unterminated string")
			}
			if p.peek() == '"' {
				p.pos++
				return lit(string(b)), nil
			}
			r, err := p.char()
			if err != nil {
				return nil, err
			}
			b = utf8.AppendRune(b, r)
		}
	case c == '[':
		p.pos++
		return p.class(at)
	case c == '.':
		p.pos++
		return utf8Expr([]runeRange{{0, utf8.MaxRune}}), nil
	case c == '(':
		if depth >= maxGBNFNesting {
			return nil, p.errAt(at, "parentheses nested more than %d deep", maxGBNFNesting)
		}
		p.pos++
		e, err := p.alternates(depth + 1)
		if err != nil {
			return nil, err
		}
		if p.peek() != ')' {
			return nil, p.errAt(at, "missing ) for this (")
		}
		p.pos++
		return e, nil
	case isNameByte(c):
		name := p.name()
		id := p.ruleIndex(name, at)
		if p.tooMany {
			return nil, p.errAt(at, "more than %d rules", MaxGBNFRules)
		}
		return ref(id), nil
	case c == '<' || c == '!':
		return nil, p.unsupportedAt(at, "token references (<...>, !<...>) are not supported")
	case c == '*' || c == '+' || c == '?' || c == '{':
		return nil, p.errAt(at, "%q has nothing to repeat", c)
	}
	return nil, p.errAt(at, "unexpected %q", p.peekRune())
}

// postfix applies the repetition operators after an item.
func (p *gbnfParser) postfix(e *expr, at int) (*expr, error) {
	for ops := 0; ; ops++ {
		p.skipSpace()
		if c := p.peek(); ops == maxGBNFPostfix && (c == '*' || c == '+' || c == '?' || c == '{') {
			return nil, p.errAt(at, "more than %d repetition operators on one item", maxGBNFPostfix)
		}
		switch p.peek() {
		case '*':
			p.pos++
			e = star(e)
		case '+':
			p.pos++
			e = plus(e)
		case '?':
			p.pos++
			e = opt(e)
		case '{':
			lo, hi, err := p.braces()
			if err != nil {
				return nil, err
			}
			e = repeat(e, lo, hi)
		default:
			return e, nil
		}
	}
}

// braces parses {m}, {m,} or {m,n}.
func (p *gbnfParser) braces() (lo, hi int, err error) {
	at := p.pos
	p.pos++ // {
	num := func() (int, error) {
		p.skipSpace()
		start := p.pos
		for p.pos < len(p.src) && p.src[p.pos] >= '0' && p.src[p.pos] <= '9' {
			p.pos++
		}
		if p.pos == start {
			return 0, p.errAt(p.pos, "expected a number in {m,n}")
		}
		if p.pos-start > 6 {
			return 0, p.errAt(start, "repeat count above %d", MaxGBNFRepeat)
		}
		n, _ := strconv.Atoi(p.src[start:p.pos])
		if n > MaxGBNFRepeat {
			return 0, p.errAt(start, "repeat count %d above %d", n, MaxGBNFRepeat)
		}
		p.skipSpace()
		return n, nil
	}
	if lo, err = num(); err != nil {
		return 0, 0, err
	}
	hi = lo
	if p.peek() == ',' {
		p.pos++
		p.skipSpace()
		if p.peek() == '}' {
			hi = -1
		} else if hi, err = num(); err != nil {
			return 0, 0, err
		}
	}
	if p.peek() != '}' {
		return 0, 0, p.errAt(p.pos, "expected } to close {m,n}")
	}
	p.pos++
	if hi >= 0 && lo > hi {
		return 0, 0, p.errAt(at, "repeat {%d,%d} has its minimum above its maximum", lo, hi)
	}
	return lo, hi, nil
}

// class parses a character class after [ up to and including ].
func (p *gbnfParser) class(at int) (*expr, error) {
	neg := false
	if p.peek() == '^' {
		neg = true
		p.pos++
	}
	var rs []runeRange
	for {
		if p.eof() {
			return nil, p.errAt(at, "unterminated character class")
		}
		if p.peek() == ']' {
			p.pos++
			break
		}
		lo, err := p.char()
		if err != nil {
			return nil, err
		}
		hi := lo
		if p.peek() == '-' && p.pos+1 < len(p.src) && p.src[p.pos+1] != ']' {
			p.pos++
			rangeAt := p.pos
			if hi, err = p.char(); err != nil {
				return nil, err
			}
			if hi < lo {
				return nil, p.errAt(rangeAt, "character range %q-%q is out of order", lo, hi)
			}
		}
		rs = append(rs, runeRange{lo, hi})
	}
	if neg {
		rs = complementRanges(rs)
	}
	return utf8Expr(rs), nil
}

// char reads one character of a string or class: a UTF-8 character or an
// escape (\x, \u, \U, \t, \n, \r, or an escaped punctuation character).
func (p *gbnfParser) char() (rune, error) {
	at := p.pos
	r, n := utf8.DecodeRuneInString(p.src[p.pos:])
	p.pos += n
	if r != '\\' {
		return r, nil
	}
	if p.eof() {
		return 0, p.errAt(at, "the grammar ends with a backslash")
	}
	c := p.src[p.pos]
	p.pos++
	switch c {
	case 'x', 'u', 'U':
		digits := map[byte]int{'x': 2, 'u': 4, 'U': 8}[c]
		if p.pos+digits > len(p.src) {
			return 0, p.errAt(at, `\%c needs %d hexadecimal digits`, c, digits)
		}
		v, err := strconv.ParseUint(p.src[p.pos:p.pos+digits], 16, 32)
		if err != nil {
			return 0, p.errAt(at, `\%c needs %d hexadecimal digits`, c, digits)
		}
		p.pos += digits
		if v > utf8.MaxRune || v >= 0xD800 && v <= 0xDFFF {
			return 0, p.errAt(at, `\%c%s is not a Unicode character`, c, p.src[p.pos-digits:p.pos])
		}
		return rune(v), nil
	case 't':
		return '\t', nil
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	}
	if strings.IndexByte("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", c) >= 0 {
		return rune(c), nil // \\ \" \[ \] \- \^ and other punctuation
	}
	bad, _ := utf8.DecodeRuneInString(p.src[at+1:])
	return 0, p.errAt(at, `unknown escape \%c`, bad)
}

// compile checks the rules reachable from root (left recursion, rules that
// never finish) and turns them into a Grammar.
func (p *gbnfParser) compile(root int, opts Options) (*Grammar, error) {
	n := len(p.rules)
	refs := make([][]int, n) // rules each rule's body refers to
	for r := range p.rules {
		refs[r] = exprRefs(p.rules[r].body, nil)
	}
	reach := make([]bool, n)
	var order []int
	stack := []int{root}
	reach[root] = true
	for len(stack) > 0 {
		r := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		order = append(order, r)
		for _, q := range refs[r] {
			if !reach[q] {
				reach[q] = true
				stack = append(stack, q)
			}
		}
	}

	recursive, callees := p.recursiveRules(order, refs)
	callers := make([][]int, n)
	for _, r := range order {
		for _, q := range refs[r] {
			callers[q] = append(callers[q], r)
		}
	}
	// Nullable and productive rules, by worklists seeded callees first (a
	// rule outside a cycle is evaluated once).
	nullable := make([]bool, n)
	productive := make([]bool, n)
	fix := func(val []bool, f func(*expr) bool) {
		queue := append([]int(nil), callees...)
		queued := make([]bool, n)
		for _, r := range queue {
			queued[r] = true
		}
		for len(queue) > 0 {
			r := queue[0]
			queue = queue[1:]
			queued[r] = false
			if val[r] || !f(p.rules[r].body) {
				continue
			}
			val[r] = true
			for _, c := range callers[r] {
				if !val[c] && !queued[c] {
					queued[c] = true
					queue = append(queue, c)
				}
			}
		}
	}
	var isNull, isProd func(*expr) bool
	isNull = func(e *expr) bool { return exprTest(e, nullable, false, isNull) }
	isProd = func(e *expr) bool { return exprTest(e, productive, true, isProd) }
	fix(nullable, isNull)
	fix(productive, isProd)

	if err := p.checkLeftRecursion(order, isNull); err != nil {
		return nil, err
	}
	if !productive[root] {
		var stuck []string
		for _, r := range order {
			if !productive[r] {
				stuck = append(stuck, strconv.Quote(p.rules[r].name))
			}
		}
		return nil, p.errAt(p.rules[root].defPos, "rule root matches no text: rules %s never finish (each of their alternatives needs a rule that never finishes, or an empty class)", strings.Join(stuck, ", "))
	}

	rs := &ruleSet{b: newBudget(opts)}
	// The parsed rules: a few expression nodes per source byte.
	if err := rs.b.charge(4 * exprBytes * int64(len(p.src))); err != nil {
		return nil, fmt.Errorf("grammar: gbnf: %w", err)
	}
	ids := map[int]int{root: rs.add(p.rules[root].name)}
	lowered := make([]*expr, n)
	memo := map[*expr]*expr{}
	var pending []int
	var low func(e *expr) *expr
	lowRule := func(r int) *expr {
		if lowered[r] == nil {
			lowered[r] = low(p.rules[r].body)
		}
		return lowered[r]
	}
	refTo := func(r int) *expr {
		if !recursive[r] {
			if b := lowRule(r); b.size(gbnfInlineSize) <= gbnfInlineSize {
				return b
			}
		}
		id, ok := ids[r]
		if !ok {
			id = rs.add(p.rules[r].name)
			ids[r] = id
			pending = append(pending, r)
		}
		return ref(id)
	}
	low = func(e *expr) *expr {
		if x, ok := memo[e]; ok {
			return x
		}
		var out *expr
		switch e.kind {
		case exSeq, exAlt:
			subs := make([]*expr, len(e.subs))
			for i, s := range e.subs {
				subs[i] = low(s)
			}
			if e.kind == exSeq {
				out = seq(subs...)
			} else {
				out = alt(subs...)
			}
		case exRepeat:
			out = repeat(low(e.subs[0]), e.min, e.max)
		case exRef:
			out = refTo(e.rule)
		default:
			out = e
		}
		memo[e] = out
		return out
	}
	rs.define(ids[root], lowRule(root))
	for len(pending) > 0 {
		r := pending[len(pending)-1]
		pending = pending[:len(pending)-1]
		rs.define(ids[r], lowRule(r))
	}
	g, err := compileRules(rs, ids[root], opts)
	if err != nil {
		return nil, fmt.Errorf("grammar: gbnf: %w", err)
	}
	return g, nil
}

// exprRefs appends the rules e refers to.
func exprRefs(e *expr, out []int) []int {
	if e.kind == exRef {
		return append(out, e.rule)
	}
	for _, s := range e.subs {
		out = exprRefs(s, out)
	}
	return out
}

// exprTest evaluates nullable (bytes false) or productive (bytes true) on
// e, given the property per rule in val.
func exprTest(e *expr, val []bool, bytes bool, rec func(*expr) bool) bool {
	switch e.kind {
	case exEmpty:
		return true
	case exBytes:
		return bytes
	case exNone:
		return false
	case exRef:
		return val[e.rule]
	case exSeq:
		for _, s := range e.subs {
			if !rec(s) {
				return false
			}
		}
		return true
	case exAlt:
		for _, s := range e.subs {
			if rec(s) {
				return true
			}
		}
		return false
	case exRepeat:
		return e.min == 0 || rec(e.subs[0])
	}
	return false
}

// checkLeftRecursion refuses a rule that can reach itself before reading
// a character: the automaton would call it without end.
func (p *gbnfParser) checkLeftRecursion(order []int, isNull func(*expr) bool) error {
	var first func(e *expr, out []int) []int
	first = func(e *expr, out []int) []int {
		switch e.kind {
		case exRef:
			out = append(out, e.rule)
		case exSeq:
			for _, s := range e.subs {
				out = first(s, out)
				if !isNull(s) {
					break
				}
			}
		case exAlt:
			for _, s := range e.subs {
				out = first(s, out)
			}
		case exRepeat:
			if e.max != 0 {
				out = first(e.subs[0], out)
			}
		}
		return out
	}
	firsts := map[int][]int{}
	for _, r := range order {
		firsts[r] = first(p.rules[r].body, nil)
	}
	colour := map[int]uint8{}
	var path []int
	var visit func(r int) []int
	visit = func(r int) []int {
		colour[r] = 1
		path = append(path, r)
		for _, q := range firsts[r] {
			switch colour[q] {
			case 1:
				i := len(path) - 1
				for path[i] != q {
					i--
				}
				return append(append([]int(nil), path[i:]...), q)
			case 0:
				if c := visit(q); c != nil {
					return c
				}
			}
		}
		path = path[:len(path)-1]
		colour[r] = 2
		return nil
	}
	for _, r := range order {
		if colour[r] != 0 {
			continue
		}
		if cycle := visit(r); cycle != nil {
			names := make([]string, len(cycle))
			for i, q := range cycle {
				names[i] = p.rules[q].name
			}
			q := cycle[0]
			return p.errAt(p.rules[q].defPos, "rule %q is left-recursive (%s, before any character is read); rewrite it with repetition, as in expr ::= term (\"+\" term)*", p.rules[q].name, strings.Join(names, " -> "))
		}
	}
	return nil
}

// recursiveRules marks the rules that can reach themselves (Tarjan's
// strongly connected components over the reachable rules) and returns the
// reachable rules callees first (each component after those it calls).
func (p *gbnfParser) recursiveRules(order []int, refs [][]int) (rec []bool, callees []int) {
	n := len(p.rules)
	rec = make([]bool, n)
	index := make([]int, n)
	low := make([]int, n)
	on := make([]bool, n)
	for i := range index {
		index[i] = -1
	}
	var stack []int
	next := 0
	var strong func(v int)
	strong = func(v int) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		on[v] = true
		for _, w := range refs[v] {
			if w == v {
				rec[v] = true
			}
			if index[w] < 0 {
				strong(w)
				low[v] = min(low[v], low[w])
			} else if on[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] == index[v] {
			var comp []int
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				on[w] = false
				comp = append(comp, w)
				callees = append(callees, w)
				if w == v {
					break
				}
			}
			if len(comp) > 1 {
				for _, w := range comp {
					rec[w] = true
				}
			}
		}
	}
	for _, r := range order {
		if index[r] < 0 {
			strong(r)
		}
	}
	return rec, callees
}
