package jinja

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Options are the settings of one Render.
type Options struct {
	// Limits are the render's budgets (zero fields: defaults).
	Limits Limits
	// Now is the clock strftime_now reads; nil: time.Now.
	Now func() time.Time
}

// Output is a rendered template: its text and the byte ranges of the text
// that came from untrusted strings (UntrustedStr, FromJSON with untrusted
// set), sorted, disjoint and not touching. Everything else is the
// template's own text (or trusted variables such as bos_token).
type Output struct {
	Text      string
	Untrusted []Span
	used      usage // what the render used of its budgets (for the tests)
}

// usage is what one render used of its budgets.
type usage struct {
	steps, alloc int64
	depth        int
}

// Segment is a piece of an Output that is wholly template text or wholly
// untrusted.
type Segment struct {
	Text      string
	Untrusted bool
}

// Segments splits the output into its trusted and untrusted pieces, in
// order; concatenated they give Text.
func (o Output) Segments() []Segment { return segments(o.Text, o.Untrusted) }

// IsBuiltin reports whether name is a global of the template environment,
// which Render does not let a variable replace: Jinja2's range, dict,
// namespace, cycler and joiner, and transformers' raise_exception and
// strftime_now (lipsum is left out).
func IsBuiltin(name string) bool { return builtins[name] != nil }

// ErrShadowsBuiltin is returned by Render for a variable named like a
// builtin (IsBuiltin): a caller's variables never replace the template's
// functions.
var ErrShadowsBuiltin = errors.New("jinja: variable shadows a template builtin")

// Render renders t with vars as the template's variables. It stops with a
// *BudgetError when the template breaks one of o.Limits, with the
// context's error (wrapped) when ctx ends (checked every
// Limits.CheckEvery steps), with ErrShadowsBuiltin (wrapped) for a
// variable named like a builtin, and with an *Error for anything the
// template does wrong (the message of its raise_exception included). It
// never panics on any template or variables, and returns within the
// budgets.
func (t *Template) Render(ctx context.Context, vars map[string]Value, o Options) (Output, error) {
	r := newRenderer(ctx, o)
	r.root = &scope{}
	for name, v := range vars {
		if IsBuiltin(name) {
			return Output{}, fmt.Errorf("variable %q: %w", name, ErrShadowsBuiltin)
		}
		r.root.set(name, v)
	}
	r.sc = r.root
	buf := &textBuf{}
	r.out, r.outMax, r.outBudget = buf, r.lim.OutputBytes, BudgetOutput
	if err := r.checkCtx(); err != nil {
		return Output{}, err
	}
	if err := r.execBody(t.body); err != nil {
		return Output{}, err
	}
	return Output{Text: buf.b.String(), Untrusted: buf.spans, used: usage{steps: r.steps, alloc: r.alloc, depth: r.maxDepth}}, nil
}

func newRenderer(ctx context.Context, o Options) *renderer {
	r := &renderer{ctx: ctx, done: ctx.Done(), lim: o.Limits.withDefaults(), now: o.Now}
	if r.now == nil {
		r.now = time.Now
	}
	r.nextCheck = min(r.lim.CheckEvery, r.lim.Steps+1)
	return r
}
