package jinja

import (
	"errors"
	"fmt"
)

// Limits bound what one Render may cost. A field left zero takes its
// default (DefaultLimits); a negative field is an error of the caller and
// is treated as its default too. The defaults are far above what any real
// chat template needs (the corpus tests report the highest use of each):
// they exist so that a hostile template ends with a BudgetError instead of
// taking the process down.
type Limits struct {
	// Steps is the number of evaluation steps: one per node evaluated,
	// loop iteration and call, plus one per 256 bytes or 8 items a filter,
	// method or operator walks or builds.
	Steps int64
	// OutputBytes is the size of the rendered output.
	OutputBytes int64
	// Depth is how deep calls nest (macros, caller(), recursive loops),
	// counted by the renderer, never by the Go stack; it also bounds how
	// deep a value is walked (printing, tojson, comparing).
	Depth int
	// StringBytes is the largest string a template may build (by +, ~, *,
	// join, format, a filter or a captured block).
	StringBytes int64
	// Items is the largest list, tuple or dict a template may build, and
	// the longest range.
	Items int
	// AllocBytes is the total size of the strings and containers one
	// render builds, garbage included.
	AllocBytes int64
	// CheckEvery is how many steps pass between checks of ctx.Done().
	CheckEvery int64
}

// Default budgets. The renderings of the corpus (33 real templates, 27
// conversations each) take at most 2 702 steps, 7 KiB of output and a call
// depth of 6; gpt-oss's template, whose tool-call handling is quadratic,
// takes 6.2 million steps on a 2 000-message conversation with 667 tool
// calls. At some 50 to 100 ns a step, the step budget bounds a render to a
// few seconds of CPU.
const (
	DefaultSteps       = 50_000_000
	DefaultOutputBytes = 64 << 20
	DefaultDepth       = 128
	DefaultStringBytes = 32 << 20
	DefaultItems       = 1 << 20
	DefaultAllocBytes  = 512 << 20
	DefaultCheckEvery  = 1024
)

// Parse limits: a template source over sourceBytesMax is refused, and so is
// one whose statements or expressions nest deeper than nestingMax (the
// parser and the evaluator recurse on the syntax tree, so this bounds their
// Go stack use together with Limits.Depth).
const (
	sourceBytesMax = 1 << 20
	nestingMax     = 128
)

// rangeItemsMax is the longest range() the template may make, as in
// Jinja2's sandbox (MAX_RANGE), which transformers renders with.
const rangeItemsMax = 100_000

// DefaultLimits returns the default budgets.
func DefaultLimits() Limits {
	return Limits{Steps: DefaultSteps, OutputBytes: DefaultOutputBytes, Depth: DefaultDepth,
		StringBytes: DefaultStringBytes, Items: DefaultItems, AllocBytes: DefaultAllocBytes, CheckEvery: DefaultCheckEvery}
}

// withDefaults fills zero and negative fields with the defaults.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.Steps <= 0 {
		l.Steps = d.Steps
	}
	if l.OutputBytes <= 0 {
		l.OutputBytes = d.OutputBytes
	}
	if l.Depth <= 0 {
		l.Depth = d.Depth
	}
	if l.StringBytes <= 0 {
		l.StringBytes = d.StringBytes
	}
	if l.Items <= 0 {
		l.Items = d.Items
	}
	if l.AllocBytes <= 0 {
		l.AllocBytes = d.AllocBytes
	}
	if l.CheckEvery <= 0 {
		l.CheckEvery = d.CheckEvery
	}
	return l
}

// Budget names one of the Limits.
type Budget string

// The budgets, as BudgetError names them.
const (
	BudgetSteps  Budget = "steps"
	BudgetOutput Budget = "output bytes"
	BudgetDepth  Budget = "depth"
	BudgetString Budget = "string bytes"
	BudgetItems  Budget = "items"
	BudgetAlloc  Budget = "allocated bytes"
)

// ErrBudget is matched (errors.Is) by every BudgetError.
var ErrBudget = errors.New("jinja: template budget exceeded")

// BudgetError is the error of a render that broke one of its Limits.
type BudgetError struct {
	Budget Budget
	Limit  int64
	Line   int // template line where it broke (0: unknown)
}

func (e *BudgetError) Error() string {
	where := ""
	if e.Line > 0 {
		where = fmt.Sprintf(" at line %d", e.Line)
	}
	return fmt.Sprintf("template exceeded its %s budget (%d)%s", e.Budget, e.Limit, where)
}

// Is reports whether target is ErrBudget.
func (e *BudgetError) Is(target error) bool { return target == ErrBudget }

// ErrorKind classifies the errors of Parse and Render other than budgets
// and cancellation.
type ErrorKind uint8

// Error kinds. They follow the exceptions Jinja2 raises for the same
// template: a syntax error, an undefined value used, an operation on the
// wrong types, a bad value, an attribute the sandbox refuses, and the
// template's own raise_exception.
const (
	ErrSyntax ErrorKind = iota + 1
	ErrUndefined
	ErrType
	ErrValue
	ErrSecurity
	ErrRaised
)

func (k ErrorKind) String() string {
	switch k {
	case ErrSyntax:
		return "syntax error"
	case ErrUndefined:
		return "undefined"
	case ErrType:
		return "type error"
	case ErrValue:
		return "value error"
	case ErrSecurity:
		return "security error"
	case ErrRaised:
		return "raised"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Error is a template error: a syntax error from Parse, or an error
// Render met (the template's raise_exception included, whose Msg is the
// template's message unchanged).
type Error struct {
	Kind ErrorKind
	Line int // 0: unknown
	Msg  string
}

func (e *Error) Error() string {
	switch {
	case e.Kind == ErrRaised:
		return e.Msg
	case e.Line > 0:
		return fmt.Sprintf("%s at line %d: %s", e.Kind, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.Kind, e.Msg)
}

func errorf(kind ErrorKind, format string, args ...any) *Error {
	return &Error{Kind: kind, Msg: fmt.Sprintf(format, args...)}
}
