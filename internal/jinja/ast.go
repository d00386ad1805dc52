package jinja

// The syntax tree. Statements execute (exec, eval.go), expressions
// evaluate to a Value (eval). Every node knows its template line for
// error messages.

type stmt interface {
	exec(r *renderer) error
}

type expr interface {
	eval(r *renderer) (Value, error)
	lineNo() int
}

type pos struct{ line int }

func (p pos) lineNo() int { return p.line }

// Statements.

type textStmt struct{ text string }

type outputStmt struct {
	pos
	e expr
}

type ifStmt struct {
	pos
	cond        expr
	body, else_ []stmt
}

type forStmt struct {
	pos
	target      target
	iter        expr
	cond        expr // nil: none
	body, else_ []stmt
	recursive   bool
}

type setStmt struct {
	pos
	target target
	value  expr
}

type setBlockStmt struct {
	pos
	target  target
	filters []*filterExpr // applied to the captured text, in order
	body    []stmt
}

type macroStmt struct {
	pos
	m *macroDef
}

// macroDef is a macro, or the body of a call block (the caller).
type macroDef struct {
	name     string
	params   []string
	defaults []expr // for the last len(defaults) params
	body     []stmt
	// Whether the body refers to varargs, kwargs and caller: only then
	// does the macro take extra positional arguments, extra keywords and
	// a caller, as in Jinja2.
	varargs, kwargs, caller bool
}

type callBlockStmt struct {
	pos
	caller *macroDef
	call   *callExpr
}

type filterBlockStmt struct {
	pos
	filters []*filterExpr
	body    []stmt
}

type withStmt struct {
	pos
	targets []target
	values  []expr
	body    []stmt
}

// scopeStmt runs its body in a scope of its own (transformers'
// {% generation %} block), or with shared in its parent's ({% print %}
// of several values).
type scopeStmt struct {
	body   []stmt
	shared bool
}

type breakStmt struct{ pos }

type continueStmt struct{ pos }

// Assignment targets.

type target interface{ isTarget() }

type nameTarget struct{ name string }

type tupleTarget struct {
	pos
	items []target
}

type nsTarget struct {
	pos
	ns, attr string
}

func (nameTarget) isTarget()  {}
func (tupleTarget) isTarget() {}
func (nsTarget) isTarget()    {}

// Expressions.

type constExpr struct {
	pos
	v Value
}

type nameExpr struct {
	pos
	name string
}

type getattrExpr struct {
	pos
	obj  expr
	name string
}

type getitemExpr struct {
	pos
	obj, key expr
}

type sliceExpr struct {
	pos
	obj               expr
	start, stop, step expr // nil: omitted
}

type kwArg struct {
	name string
	e    expr
}

type callArgs struct {
	args               []expr
	kwargs             []kwArg
	dynArgs, dynKwargs expr // *args, **kwargs; nil: none
}

type callExpr struct {
	pos
	fn expr
	callArgs
}

type filterExpr struct {
	pos
	e    expr // nil in filter blocks and set blocks
	name string
	fn   filterFunc
	callArgs
}

type testExpr struct {
	pos
	e    expr
	name string
	fn   testFunc
	callArgs
}

type unaryExpr struct {
	pos
	op byte // '-', '+' or '!' (not)
	e  expr
}

type binExpr struct {
	pos
	op   string // + - * / // % **
	l, r expr
}

type logicExpr struct {
	pos
	and  bool
	l, r expr
}

type concatExpr struct {
	pos
	items []expr
}

type cmpOp struct {
	op string // == != < <= > >= in notin
	e  expr
}

type compareExpr struct {
	pos
	first expr
	ops   []cmpOp
}

type condExpr struct {
	pos
	test, then, else_ expr // else_ nil: undefined
}

type listExpr struct {
	pos
	items []expr
}

type tupleExpr struct {
	pos
	items []expr
}

type dictExpr struct {
	pos
	keys, vals []expr
}
