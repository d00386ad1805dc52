package jinja

import (
	"fmt"
	"slices"
)

// The parser follows Jinja2's grammar (jinja2/parser.py) for the tags and
// expressions chat templates use. Operator precedence, lowest first:
// conditional expression, or, and, not, comparisons (chained; in, not in),
// + and -, ~, * / // %, **, unary - and +, then a primary with its postfix
// (.attr, [item], [a:b:c], call) and its filters and tests (| f, is t).
// It recurses on the syntax, at most nestingMax levels deep.

type parser struct {
	toks  []token
	pos   int
	depth int
	// refs collects the names read inside each macro or call block being
	// parsed, to learn whether it uses varargs, kwargs and caller.
	refs []map[string]bool
	// loops counts the for loops around the statement being parsed (a
	// macro body starts again at zero): break and continue need one.
	loops int
}

// Template is a parsed chat template. It is immutable and safe for
// concurrent use.
type Template struct {
	body []stmt
}

// Parse parses a template source. It fails on a syntax error, on a filter,
// test or tag that the renderer does not have (include, import, extends
// and block have no loader to read from, as in transformers), on a source
// over 1 MiB and on nesting deeper than 128 levels.
func Parse(source string) (*Template, error) {
	if len(source) > sourceBytesMax {
		return nil, errorf(ErrSyntax, "template source is %d bytes, more than %d", len(source), sourceBytesMax)
	}
	toks, err := lex(source)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	body, end, err := p.subparse()
	if err != nil {
		return nil, err
	}
	if end != "" {
		return nil, p.failf("unexpected '%s'", end)
	}
	return &Template{body: body}, nil
}

func (p *parser) cur() token  { return p.toks[p.pos] }
func (p *parser) peek() token { return p.toks[min(p.pos+1, len(p.toks)-1)] }

func (p *parser) next() token {
	t := p.toks[p.pos]
	if p.pos < len(p.toks)-1 {
		p.pos++
	}
	return t
}

func (p *parser) failf(format string, args ...any) error {
	return &Error{Kind: ErrSyntax, Line: p.cur().line, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) isOp(op string) bool {
	t := p.cur()
	return t.kind == tokOp && t.val == op
}

func (p *parser) isName(name string) bool {
	t := p.cur()
	return t.kind == tokName && t.val == name
}

func (p *parser) skipOp(op string) bool {
	if p.isOp(op) {
		p.next()
		return true
	}
	return false
}

func (p *parser) skipName(name string) bool {
	if p.isName(name) {
		p.next()
		return true
	}
	return false
}

func (p *parser) expectOp(op string) error {
	if !p.skipOp(op) {
		return p.failf("expected '%s', got %s", op, p.cur())
	}
	return nil
}

func (p *parser) expectKind(k tokKind) (token, error) {
	if p.cur().kind != k {
		return token{}, p.failf("expected %s, got %s", k, p.cur())
	}
	return p.next(), nil
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > nestingMax {
		return p.failf("template nested more than %d levels deep", nestingMax)
	}
	return nil
}

func (p *parser) leave() { p.depth-- }

// restore sets the nesting back to depth when a function that wraps
// nodes in a loop (a + b + c, x.a.b, x | f | g) returns: each wrap
// nests the tree one level deeper, and the evaluator recurses on it, so
// wraps count against nestingMax as nesting does.
func (p *parser) restore(depth int) { p.depth = depth }

// subparse parses statements until a block tag whose name is one of ends
// (or the end of the template when ends is empty). It returns the body and
// the end tag found, with the parser just after that tag's name.
func (p *parser) subparse(ends ...string) ([]stmt, string, error) {
	if err := p.enter(); err != nil {
		return nil, "", err
	}
	defer p.leave()
	var body []stmt
	for {
		t := p.cur()
		switch t.kind {
		case tokEOF:
			if len(ends) > 0 {
				return nil, "", p.failf("unexpected end of template, expected '%s'", ends[0])
			}
			return body, "", nil
		case tokData:
			p.next()
			body = append(body, &textStmt{text: t.val})
		case tokVarBegin:
			p.next()
			e, err := p.parseTuple(true, true, nil)
			if err != nil {
				return nil, "", err
			}
			if _, err := p.expectKind(tokVarEnd); err != nil {
				return nil, "", err
			}
			body = append(body, &outputStmt{pos: pos{t.line}, e: e})
		case tokBlockBegin:
			p.next()
			name := p.cur()
			if name.kind != tokName {
				return nil, "", p.failf("tag name expected")
			}
			if slices.Contains(ends, name.val) {
				p.next()
				return body, name.val, nil
			}
			s, err := p.statement()
			if err != nil {
				return nil, "", err
			}
			if s != nil {
				body = append(body, s)
			}
		default:
			return nil, "", p.failf("unexpected %s", t)
		}
	}
}

// body parses the statements of a block tag up to one of ends, after the
// rest of the opening tag (an optional ':' then '%}').
func (p *parser) body(ends ...string) ([]stmt, string, error) {
	p.skipOp(":")
	if _, err := p.expectKind(tokBlockEnd); err != nil {
		return nil, "", err
	}
	return p.subparse(ends...)
}

// endTag consumes the rest of an end tag ('%}').
func (p *parser) endTag() error {
	_, err := p.expectKind(tokBlockEnd)
	return err
}

func (p *parser) statement() (stmt, error) {
	t := p.next()
	line := pos{t.line}
	switch t.val {
	case "if":
		return p.parseIf(line)
	case "for":
		return p.parseFor(line)
	case "set":
		return p.parseSet(line)
	case "macro":
		return p.parseMacro(line)
	case "call":
		return p.parseCallBlock(line)
	case "filter":
		filters, err := p.parseFilterChain(nil, true)
		if err != nil {
			return nil, err
		}
		body, _, err := p.body("endfilter")
		if err != nil {
			return nil, err
		}
		return &filterBlockStmt{pos: line, filters: filters, body: body}, p.endTag()
	case "with":
		return p.parseWith(line)
	case "print":
		var items []expr
		for p.cur().kind != tokBlockEnd {
			if len(items) > 0 {
				if err := p.expectOp(","); err != nil {
					return nil, err
				}
			}
			e, err := p.parseExpression(true)
			if err != nil {
				return nil, err
			}
			items = append(items, e)
		}
		if len(items) == 0 {
			return nil, p.endTag()
		}
		if len(items) == 1 {
			return &outputStmt{pos: line, e: items[0]}, p.endTag()
		}
		out := &scopeStmt{shared: true}
		for _, e := range items {
			out.body = append(out.body, &outputStmt{pos: line, e: e})
		}
		return out, p.endTag()
	case "break", "continue":
		if p.loops == 0 {
			return nil, &Error{Kind: ErrSyntax, Line: t.line, Msg: fmt.Sprintf("'%s' outside loop", t.val)}
		}
		if err := p.endTag(); err != nil {
			return nil, err
		}
		if t.val == "break" {
			return &breakStmt{pos: line}, nil
		}
		return &continueStmt{pos: line}, nil
	case "generation":
		body, _, err := p.body("endgeneration")
		if err != nil {
			return nil, err
		}
		return &scopeStmt{body: body}, p.endTag()
	case "include", "import", "from", "extends", "block":
		return nil, &Error{Kind: ErrSyntax, Line: t.line, Msg: fmt.Sprintf("the '%s' tag is not supported: a chat template has no other templates to read", t.val)}
	}
	return nil, &Error{Kind: ErrSyntax, Line: t.line, Msg: fmt.Sprintf("encountered unknown tag '%s'", t.val)}
}

func (p *parser) parseIf(line pos) (stmt, error) {
	cond, err := p.parseTuple(false, false, nil)
	if err != nil {
		return nil, err
	}
	body, end, err := p.body("elif", "else", "endif")
	if err != nil {
		return nil, err
	}
	s := &ifStmt{pos: line, cond: cond, body: body}
	switch end {
	case "elif":
		elif, err := p.parseIf(pos{p.cur().line})
		if err != nil {
			return nil, err
		}
		s.else_ = []stmt{elif}
		return s, nil
	case "else":
		if s.else_, _, err = p.body("endif"); err != nil {
			return nil, err
		}
	}
	return s, p.endTag()
}

func (p *parser) parseFor(line pos) (stmt, error) {
	tgt, err := p.parseTarget(true, false, "in")
	if err != nil {
		return nil, err
	}
	if !p.skipName("in") {
		return nil, p.failf("expected 'in', got %s", p.cur())
	}
	iter, err := p.parseTuple(false, false, []string{"recursive"})
	if err != nil {
		return nil, err
	}
	s := &forStmt{pos: line, target: tgt, iter: iter}
	if p.skipName("if") {
		if s.cond, err = p.parseExpression(true); err != nil {
			return nil, err
		}
	}
	s.recursive = p.skipName("recursive")
	if assignsLoop(tgt) {
		return nil, &Error{Kind: ErrSyntax, Line: line.line, Msg: "can't assign to special loop variable in for-loop target"}
	}
	p.loops++
	body, end, err := p.body("endfor", "else")
	p.loops--
	if err != nil {
		return nil, err
	}
	s.body = body
	if end == "else" {
		if s.else_, _, err = p.body("endfor"); err != nil {
			return nil, err
		}
	}
	return s, p.endTag()
}

func (p *parser) parseSet(line pos) (stmt, error) {
	tgt, err := p.parseTarget(true, true)
	if err != nil {
		return nil, err
	}
	if p.loops > 0 && assignsLoop(tgt) {
		return nil, &Error{Kind: ErrSyntax, Line: line.line, Msg: "can't assign to special loop variable in for-loop target"}
	}
	if p.skipOp("=") {
		v, err := p.parseTuple(true, true, nil)
		if err != nil {
			return nil, err
		}
		return &setStmt{pos: line, target: tgt, value: v}, p.endTag()
	}
	var filters []*filterExpr
	if p.isOp("|") {
		if filters, err = p.parseFilterChain(nil, false); err != nil {
			return nil, err
		}
	}
	body, _, err := p.body("endset")
	if err != nil {
		return nil, err
	}
	return &setBlockStmt{pos: line, target: tgt, filters: filters, body: body}, p.endTag()
}

func (p *parser) parseWith(line pos) (stmt, error) {
	s := &withStmt{pos: line}
	for p.cur().kind != tokBlockEnd {
		if len(s.targets) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, err
			}
		}
		tgt, err := p.parseTarget(true, false)
		if err != nil {
			return nil, err
		}
		if err := p.expectOp("="); err != nil {
			return nil, err
		}
		v, err := p.parseExpression(true)
		if err != nil {
			return nil, err
		}
		s.targets, s.values = append(s.targets, tgt), append(s.values, v)
	}
	body, _, err := p.body("endwith")
	if err != nil {
		return nil, err
	}
	s.body = body
	return s, p.endTag()
}

// parseSignature parses a macro's or call block's parameter list.
func (p *parser) parseSignature(m *macroDef) error {
	if err := p.expectOp("("); err != nil {
		return err
	}
	for !p.isOp(")") {
		if len(m.params) > 0 {
			if err := p.expectOp(","); err != nil {
				return err
			}
		}
		t, err := p.expectKind(tokName)
		if err != nil {
			return err
		}
		if p.skipOp("=") {
			d, err := p.parseExpression(true)
			if err != nil {
				return err
			}
			m.defaults = append(m.defaults, d)
		} else if len(m.defaults) > 0 {
			return p.failf("non-default argument follows default argument")
		}
		m.params = append(m.params, t.val)
	}
	p.next()
	return nil
}

// macroBody parses a macro's or call block's body up to end and records
// whether it reads varargs, kwargs and caller.
func (p *parser) macroBody(m *macroDef, end string) error {
	p.refs = append(p.refs, map[string]bool{})
	loops := p.loops
	p.loops = 0
	body, _, err := p.body(end)
	p.loops = loops
	refs := p.refs[len(p.refs)-1]
	p.refs = p.refs[:len(p.refs)-1]
	if err != nil {
		return err
	}
	for name := range refs { // names read in a nested macro count too
		if len(p.refs) > 0 {
			p.refs[len(p.refs)-1][name] = true
		}
	}
	m.body = body
	m.varargs, m.kwargs, m.caller = refs["varargs"], refs["kwargs"], refs["caller"]
	return p.endTag()
}

func (p *parser) parseMacro(line pos) (stmt, error) {
	t, err := p.expectKind(tokName)
	if err != nil {
		return nil, err
	}
	m := &macroDef{name: t.val}
	if err := p.parseSignature(m); err != nil {
		return nil, err
	}
	if err := p.macroBody(m, "endmacro"); err != nil {
		return nil, err
	}
	return &macroStmt{pos: line, m: m}, nil
}

func (p *parser) parseCallBlock(line pos) (stmt, error) {
	m := &macroDef{name: "caller"}
	if p.isOp("(") {
		if err := p.parseSignature(m); err != nil {
			return nil, err
		}
	}
	e, err := p.parseExpression(true)
	if err != nil {
		return nil, err
	}
	call, ok := e.(*callExpr)
	if !ok {
		return nil, &Error{Kind: ErrSyntax, Line: line.line, Msg: "expected call"}
	}
	if err := p.macroBody(m, "endcall"); err != nil {
		return nil, err
	}
	return &callBlockStmt{pos: line, caller: m, call: call}, nil
}

// parseTarget parses an assignment target: a name, a tuple of names, or
// with nsAttr a namespace attribute (ns.attr). extraEnd ends a tuple.
func (p *parser) parseTarget(withTuple, nsAttr bool, extraEnd ...string) (target, error) {
	var items []target
	line := p.cur().line
	for {
		if len(items) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, err
			}
		}
		if p.isTupleEnd(extraEnd) {
			break
		}
		t, err := p.parsePrimaryTarget(nsAttr)
		if err != nil {
			return nil, err
		}
		items = append(items, t)
		if !withTuple || !p.isOp(",") {
			break
		}
	}
	switch {
	case len(items) == 0:
		return nil, p.failf("expected an assignment target, got %s", p.cur())
	case len(items) == 1 && !(withTuple && p.toks[p.pos-1].kind == tokOp && p.toks[p.pos-1].val == ","):
		return items[0], nil
	}
	return &tupleTarget{pos: pos{line}, items: items}, nil
}

func (p *parser) parsePrimaryTarget(nsAttr bool) (target, error) {
	t := p.cur()
	switch {
	case t.kind == tokName:
		switch t.val {
		case "true", "false", "True", "False", "none", "None":
			return nil, p.failf("can't assign to %s", t.val)
		}
		p.next()
		if nsAttr && p.isOp(".") {
			p.next()
			a, err := p.expectKind(tokName)
			if err != nil {
				return nil, err
			}
			return &nsTarget{pos: pos{t.line}, ns: t.val, attr: a.val}, nil
		}
		return &nameTarget{name: t.val}, nil
	case t.kind == tokOp && t.val == "(":
		p.next()
		if err := p.enter(); err != nil {
			return nil, err
		}
		tgt, err := p.parseTarget(true, nsAttr)
		p.leave()
		if err != nil {
			return nil, err
		}
		return tgt, p.expectOp(")")
	}
	return nil, p.failf("can't assign to %s", t)
}

func (p *parser) isTupleEnd(extra []string) bool {
	t := p.cur()
	switch {
	case t.kind == tokVarEnd || t.kind == tokBlockEnd || t.kind == tokEOF:
		return true
	case t.kind == tokOp && t.val == ")":
		return true
	case t.kind == tokName && slices.Contains(extra, t.val):
		return true
	}
	return false
}

// parseTuple parses an expression, or a tuple when expressions are
// separated by commas. explicit: inside parentheses, where () is the
// empty tuple.
func (p *parser) parseTuple(withCond, explicit bool, extraEnd []string) (expr, error) {
	line := p.cur().line
	var items []expr
	isTuple := false
	for {
		if len(items) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, err
			}
		}
		if p.isTupleEnd(extraEnd) {
			break
		}
		e, err := p.parseExpression(withCond)
		if err != nil {
			return nil, err
		}
		items = append(items, e)
		if !p.isOp(",") {
			break
		}
		isTuple = true
	}
	if !isTuple {
		if len(items) > 0 {
			return items[0], nil
		}
		if !explicit {
			return nil, p.failf("expected an expression, got %s", p.cur())
		}
	}
	return &tupleExpr{pos: pos{line}, items: items}, nil
}

func (p *parser) parseExpression(withCond bool) (expr, error) {
	defer p.restore(p.depth)
	if err := p.enter(); err != nil {
		return nil, err
	}
	if !withCond {
		return p.parseOr()
	}
	line := p.cur().line
	e, err := p.parseOr()
	if err != nil {
		return nil, err
	}
	for p.skipName("if") {
		if err := p.enter(); err != nil {
			return nil, err
		}
		test, err := p.parseOr()
		if err != nil {
			return nil, err
		}
		c := &condExpr{pos: pos{line}, test: test, then: e}
		if p.skipName("else") {
			if c.else_, err = p.parseExpression(true); err != nil {
				return nil, err
			}
		}
		e = c
	}
	return e, nil
}

func (p *parser) parseOr() (expr, error) {
	defer p.restore(p.depth)
	l, err := p.parseAnd()
	for err == nil && p.isName("or") {
		if err = p.enter(); err != nil {
			break
		}
		t := p.next()
		var r expr
		if r, err = p.parseAnd(); err == nil {
			l = &logicExpr{pos: pos{t.line}, l: l, r: r}
		}
	}
	return l, err
}

func (p *parser) parseAnd() (expr, error) {
	defer p.restore(p.depth)
	l, err := p.parseNot()
	for err == nil && p.isName("and") {
		if err = p.enter(); err != nil {
			break
		}
		t := p.next()
		var r expr
		if r, err = p.parseNot(); err == nil {
			l = &logicExpr{pos: pos{t.line}, and: true, l: l, r: r}
		}
	}
	return l, err
}

func (p *parser) parseNot() (expr, error) {
	if p.isName("not") {
		t := p.next()
		if err := p.enter(); err != nil {
			return nil, err
		}
		defer p.leave()
		e, err := p.parseNot()
		if err != nil {
			return nil, err
		}
		return &unaryExpr{pos: pos{t.line}, op: '!', e: e}, nil
	}
	return p.parseCompare()
}

func (p *parser) parseCompare() (expr, error) {
	line := p.cur().line
	first, err := p.parseMath1()
	if err != nil {
		return nil, err
	}
	var ops []cmpOp
	for {
		t := p.cur()
		var op string
		switch {
		case t.kind == tokOp && (t.val == "==" || t.val == "!=" || t.val == "<" || t.val == "<=" || t.val == ">" || t.val == ">="):
			op = t.val
			p.next()
		case t.kind == tokName && t.val == "in":
			op = "in"
			p.next()
		case t.kind == tokName && t.val == "not" && p.peek().kind == tokName && p.peek().val == "in":
			op = "notin"
			p.next()
			p.next()
		}
		if op == "" {
			break
		}
		e, err := p.parseMath1()
		if err != nil {
			return nil, err
		}
		ops = append(ops, cmpOp{op: op, e: e})
	}
	if len(ops) == 0 {
		return first, nil
	}
	return &compareExpr{pos: pos{line}, first: first, ops: ops}, nil
}

func (p *parser) parseMath1() (expr, error) {
	defer p.restore(p.depth)
	l, err := p.parseConcat()
	for err == nil && (p.isOp("+") || p.isOp("-")) {
		if err = p.enter(); err != nil {
			break
		}
		t := p.next()
		var r expr
		if r, err = p.parseConcat(); err == nil {
			l = &binExpr{pos: pos{t.line}, op: t.val, l: l, r: r}
		}
	}
	return l, err
}

func (p *parser) parseConcat() (expr, error) {
	line := p.cur().line
	first, err := p.parseMath2()
	if err != nil || !p.isOp("~") {
		return first, err
	}
	items := []expr{first}
	for p.skipOp("~") {
		e, err := p.parseMath2()
		if err != nil {
			return nil, err
		}
		items = append(items, e)
	}
	return &concatExpr{pos: pos{line}, items: items}, nil
}

func (p *parser) parseMath2() (expr, error) {
	defer p.restore(p.depth)
	l, err := p.parsePow()
	for err == nil && (p.isOp("*") || p.isOp("/") || p.isOp("//") || p.isOp("%")) {
		if err = p.enter(); err != nil {
			break
		}
		t := p.next()
		var r expr
		if r, err = p.parsePow(); err == nil {
			l = &binExpr{pos: pos{t.line}, op: t.val, l: l, r: r}
		}
	}
	return l, err
}

func (p *parser) parsePow() (expr, error) {
	defer p.restore(p.depth)
	l, err := p.parseUnary(true)
	for err == nil && p.isOp("**") {
		if err = p.enter(); err != nil {
			break
		}
		t := p.next()
		var r expr
		if r, err = p.parseUnary(true); err == nil {
			l = &binExpr{pos: pos{t.line}, op: "**", l: l, r: r}
		}
	}
	return l, err
}

func (p *parser) parseUnary(withFilter bool) (expr, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	t := p.cur()
	var e expr
	var err error
	if t.kind == tokOp && (t.val == "-" || t.val == "+") {
		p.next()
		var inner expr
		if inner, err = p.parseUnary(false); err != nil {
			return nil, err
		}
		e = &unaryExpr{pos: pos{t.line}, op: t.val[0], e: inner}
	} else if e, err = p.parsePrimary(); err != nil {
		return nil, err
	}
	if e, err = p.parsePostfix(e); err != nil {
		return nil, err
	}
	if withFilter {
		return p.parseFilterExpr(e)
	}
	return e, nil
}

func (p *parser) parsePrimary() (expr, error) {
	t := p.cur()
	line := pos{t.line}
	switch t.kind {
	case tokName:
		p.next()
		switch t.val {
		case "true", "True":
			return &constExpr{pos: line, v: Bool(true)}, nil
		case "false", "False":
			return &constExpr{pos: line, v: Bool(false)}, nil
		case "none", "None":
			return &constExpr{pos: line, v: None()}, nil
		}
		for _, refs := range p.refs {
			refs[t.val] = true
		}
		return &nameExpr{pos: line, name: t.val}, nil
	case tokString:
		s := p.next().val
		for p.cur().kind == tokString {
			s += p.next().val
		}
		return &constExpr{pos: line, v: Str(s)}, nil
	case tokInt:
		p.next()
		return &constExpr{pos: line, v: Int(t.i)}, nil
	case tokFloat:
		p.next()
		return &constExpr{pos: line, v: Float(t.f)}, nil
	case tokOp:
		switch t.val {
		case "(":
			p.next()
			e, err := p.parseTuple(true, true, nil)
			if err != nil {
				return nil, err
			}
			return e, p.expectOp(")")
		case "[":
			p.next()
			var items []expr
			for !p.isOp("]") {
				if len(items) > 0 {
					if err := p.expectOp(","); err != nil {
						return nil, err
					}
					if p.isOp("]") {
						break
					}
				}
				e, err := p.parseExpression(true)
				if err != nil {
					return nil, err
				}
				items = append(items, e)
			}
			p.next()
			return &listExpr{pos: line, items: items}, nil
		case "{":
			p.next()
			d := &dictExpr{pos: line}
			for !p.isOp("}") {
				if len(d.keys) > 0 {
					if err := p.expectOp(","); err != nil {
						return nil, err
					}
					if p.isOp("}") {
						break
					}
				}
				k, err := p.parseExpression(true)
				if err != nil {
					return nil, err
				}
				if err := p.expectOp(":"); err != nil {
					return nil, err
				}
				v, err := p.parseExpression(true)
				if err != nil {
					return nil, err
				}
				d.keys, d.vals = append(d.keys, k), append(d.vals, v)
			}
			p.next()
			return d, nil
		}
	}
	return nil, p.failf("unexpected %s", t)
}

func (p *parser) parsePostfix(e expr) (expr, error) {
	defer p.restore(p.depth)
	for {
		if err := p.enter(); err != nil {
			return nil, err
		}
		var err error
		switch {
		case p.isOp(".") || p.isOp("["):
			e, err = p.parseSubscript(e)
		case p.isOp("("):
			e, err = p.parseCall(e)
		default:
			return e, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

func (p *parser) parseFilterExpr(e expr) (expr, error) {
	defer p.restore(p.depth)
	for {
		if err := p.enter(); err != nil {
			return nil, err
		}
		var err error
		switch {
		case p.isOp("|"):
			var chain []*filterExpr
			if chain, err = p.parseFilterChain(e, false); err == nil {
				e = chain[len(chain)-1]
			}
		case p.isName("is"):
			e, err = p.parseTest(e)
		case p.isOp("("):
			e, err = p.parseCall(e)
		default:
			return e, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

func (p *parser) parseSubscript(obj expr) (expr, error) {
	t := p.next()
	line := pos{t.line}
	if t.val == "." {
		a := p.next()
		switch a.kind {
		case tokName:
			return &getattrExpr{pos: line, obj: obj, name: a.val}, nil
		case tokInt:
			return &getitemExpr{pos: line, obj: obj, key: &constExpr{pos: line, v: Int(a.i)}}, nil
		}
		return nil, p.failf("expected name or number")
	}
	var args []expr
	var slice *sliceExpr
	for !p.isOp("]") {
		if len(args) > 0 || slice != nil {
			if err := p.expectOp(","); err != nil {
				return nil, err
			}
			slice = nil
		}
		e, s, err := p.parseSubscribed(obj, line)
		if err != nil {
			return nil, err
		}
		if s != nil {
			slice = s
			args = append(args, s)
			continue
		}
		args = append(args, e)
	}
	p.next()
	switch {
	case len(args) == 1 && slice != nil:
		return slice, nil
	case len(args) == 1:
		return &getitemExpr{pos: line, obj: obj, key: args[0]}, nil
	case len(args) == 0:
		return nil, p.failf("expected subscript expression")
	}
	for _, a := range args {
		if _, ok := a.(*sliceExpr); ok {
			return nil, p.failf("slices inside a tuple subscript are not supported")
		}
	}
	return &getitemExpr{pos: line, obj: obj, key: &tupleExpr{pos: line, items: args}}, nil
}

// parseSubscribed parses one subscript: an expression or a slice
// (a:b:c with any part omitted).
func (p *parser) parseSubscribed(obj expr, line pos) (expr, *sliceExpr, error) {
	var start expr
	if !p.isOp(":") {
		e, err := p.parseExpression(true)
		if err != nil {
			return nil, nil, err
		}
		if !p.isOp(":") {
			return e, nil, nil
		}
		start = e
	}
	p.next() // ':'
	s := &sliceExpr{pos: line, obj: obj, start: start}
	var err error
	if !p.isOp(":") && !p.isOp("]") && !p.isOp(",") {
		if s.stop, err = p.parseExpression(true); err != nil {
			return nil, nil, err
		}
	}
	if p.skipOp(":") && !p.isOp("]") && !p.isOp(",") {
		if s.step, err = p.parseExpression(true); err != nil {
			return nil, nil, err
		}
	}
	return nil, s, nil
}

func (p *parser) parseCallArgs() (callArgs, error) {
	var a callArgs
	if err := p.expectOp("("); err != nil {
		return a, err
	}
	bad := func() error { return p.failf("invalid syntax for function call expression") }
	first := true
	for !p.isOp(")") {
		if !first {
			if err := p.expectOp(","); err != nil {
				return a, err
			}
			if p.isOp(")") {
				break
			}
		}
		first = false
		switch {
		case p.isOp("*"):
			if a.dynArgs != nil || a.dynKwargs != nil {
				return a, bad()
			}
			p.next()
			e, err := p.parseExpression(true)
			if err != nil {
				return a, err
			}
			a.dynArgs = e
		case p.isOp("**"):
			if a.dynKwargs != nil {
				return a, bad()
			}
			p.next()
			e, err := p.parseExpression(true)
			if err != nil {
				return a, err
			}
			a.dynKwargs = e
		case p.cur().kind == tokName && p.peek().kind == tokOp && p.peek().val == "=":
			if a.dynKwargs != nil {
				return a, bad()
			}
			name := p.next().val
			p.next()
			e, err := p.parseExpression(true)
			if err != nil {
				return a, err
			}
			a.kwargs = append(a.kwargs, kwArg{name: name, e: e})
		default:
			if a.dynArgs != nil || a.dynKwargs != nil || len(a.kwargs) > 0 {
				return a, bad()
			}
			e, err := p.parseExpression(true)
			if err != nil {
				return a, err
			}
			a.args = append(a.args, e)
		}
	}
	p.next()
	return a, nil
}

func (p *parser) parseCall(fn expr) (expr, error) {
	line := p.cur().line
	a, err := p.parseCallArgs()
	if err != nil {
		return nil, err
	}
	return &callExpr{pos: pos{line}, fn: fn, callArgs: a}, nil
}

// parseFilterChain parses "| f(args) | g ..." applied to e (nil for a
// filter block or set block); inline: the first filter has no '|'.
func (p *parser) parseFilterChain(e expr, inline bool) ([]*filterExpr, error) {
	defer p.restore(p.depth)
	var chain []*filterExpr
	for inline || p.isOp("|") {
		if err := p.enter(); err != nil {
			return nil, err
		}
		if !inline {
			p.next()
		}
		inline = false
		t, err := p.expectKind(tokName)
		if err != nil {
			return nil, err
		}
		name, err := p.dottedName(t.val)
		if err != nil {
			return nil, err
		}
		fn := lookupFilter(name)
		if fn == nil {
			return nil, &Error{Kind: ErrSyntax, Line: t.line, Msg: fmt.Sprintf("no filter named '%s'", name)}
		}
		f := &filterExpr{pos: pos{t.line}, e: e, name: name, fn: fn}
		if p.isOp("(") {
			if f.callArgs, err = p.parseCallArgs(); err != nil {
				return nil, err
			}
		}
		chain = append(chain, f)
		e = f
	}
	return chain, nil
}

// dottedName reads the rest of a filter's or test's name (name.sub...).
func (p *parser) dottedName(name string) (string, error) {
	for p.isOp(".") {
		p.next()
		n, err := p.expectKind(tokName)
		if err != nil {
			return "", err
		}
		name += "." + n.val
	}
	return name, nil
}

func (p *parser) parseTest(e expr) (expr, error) {
	is := p.next()
	negate := p.skipName("not")
	t, err := p.expectKind(tokName)
	if err != nil {
		return nil, err
	}
	name, err := p.dottedName(t.val)
	if err != nil {
		return nil, err
	}
	fn := lookupTest(name)
	if fn == nil {
		return nil, &Error{Kind: ErrSyntax, Line: t.line, Msg: fmt.Sprintf("no test named '%s'", name)}
	}
	te := &testExpr{pos: pos{is.line}, e: e, name: name, fn: fn}
	c := p.cur()
	switch {
	case c.kind == tokOp && c.val == "(":
		if te.callArgs, err = p.parseCallArgs(); err != nil {
			return nil, err
		}
	case (c.kind == tokName && c.val != "else" && c.val != "or" && c.val != "and") ||
		c.kind == tokString || c.kind == tokInt || c.kind == tokFloat ||
		(c.kind == tokOp && (c.val == "[" || c.val == "{")):
		if c.kind == tokName && c.val == "is" {
			return nil, p.failf("you cannot chain multiple tests with is")
		}
		arg, err := p.parsePrimary()
		if err != nil {
			return nil, err
		}
		if arg, err = p.parsePostfix(arg); err != nil {
			return nil, err
		}
		te.args = []expr{arg}
	}
	if negate {
		return &unaryExpr{pos: pos{is.line}, op: '!', e: te}, nil
	}
	return te, nil
}

// assignsLoop reports whether a target binds the name loop.
func assignsLoop(t target) bool {
	switch t := t.(type) {
	case *nameTarget:
		return t.name == "loop"
	case *tupleTarget:
		for _, it := range t.items {
			if assignsLoop(it) {
				return true
			}
		}
	}
	return false
}
