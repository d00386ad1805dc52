package grammar

import (
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"
)

// This file builds grammars from parts: literal text, JSON schemas, regular
// expressions, sequences, alternatives and bounded repetition with a
// separator. Tool calling uses it to constrain the model's tool-call syntax
// around the tools' parameter schemas, for example Hermes'
//
//	Repeat(Seq(Lit("<tool_call>\n"), call, Lit("\n</tool_call>")), 1, -1, Lit("\n"))
//
// where call is an Alt of one Seq(Lit(`{"name": "f", "arguments": `),
// Schema(params), Lit("}")) per tool.

// MaxPartRepeat bounds the counts of a Repeat part.
const MaxPartRepeat = MaxLengthBound

// Part is a piece of a grammar for CompileParts, made by Lit, Schema,
// Regex, Seq, Alt and Repeat. The zero Part is invalid (CompileParts
// refuses it), except as the separator of Repeat, where it means none.
// Parts are immutable values; one Part may appear in several places and is
// compiled once.
type Part struct{ n *partNode }

type partKind uint8

const (
	partLit partKind = iota + 1
	partSchema
	partRegex
	partSeq
	partAlt
	partRepeat
)

type partNode struct {
	kind     partKind
	text     string // literal text or regex pattern
	schema   []byte
	subs     []Part
	min, max int
	sep      Part
}

// Lit matches exactly the bytes of s (which need not be UTF-8).
func Lit(s string) Part { return Part{&partNode{kind: partLit, text: s}} }

// Schema matches one JSON value valid against the JSON schema, as Compile
// does but without whitespace before or after the value (whitespace inside
// it follows Options). Local $ref pointers resolve within this schema.
func Schema(schema []byte) Part {
	return Part{&partNode{kind: partSchema, schema: append([]byte(nil), schema...)}}
}

// Regex matches text that the whole regular expression matches (as
// CompileRegex; ^ and $ are allowed and change nothing).
func Regex(pattern string) Part { return Part{&partNode{kind: partRegex, text: pattern}} }

// Seq matches its parts one after another; Seq() matches the empty text.
func Seq(parts ...Part) Part {
	return Part{&partNode{kind: partSeq, subs: append([]Part(nil), parts...)}}
}

// Alt matches any one of its parts (at least one is required).
func Alt(parts ...Part) Part {
	return Part{&partNode{kind: partAlt, subs: append([]Part(nil), parts...)}}
}

// Repeat matches p between min and max times (max -1: no upper bound),
// with sep between consecutive repetitions; a zero sep (Part{}) means
// nothing between them. Counts are at most MaxPartRepeat.
func Repeat(p Part, min, max int, sep Part) Part {
	return Part{&partNode{kind: partRepeat, subs: []Part{p}, min: min, max: max, sep: sep}}
}

// Optional matches p or nothing: Repeat(p, 0, 1, Part{}).
func Optional(p Part) Part { return Repeat(p, 0, 1, Part{}) }

// CompileParts compiles the grammar of text that p matches exactly (no
// whitespace is added around parts). Errors from a Schema or Regex part
// wrap the part's own error (ErrUnsupported naming a keyword, ErrTooLarge)
// and say which part, numbered in depth-first order from 1. An error one
// part caused is a *PartError naming it: a Schema or Regex part that does
// not compile, or, when the whole grammar is too large (ErrTooLarge), the
// Schema or Regex part whose automaton takes the most of it.
func CompileParts(p Part, opts Options) (*Grammar, error) {
	pc := &partCompiler{opts: opts, done: map[*partNode]*expr{}}
	pc.sc = newSchemaCompiler(nil, opts, newBudget(opts))
	rs := pc.sc.rs
	rs.owners = &ruleOwners{}
	top := rs.add("root")
	e, err := pc.part(p, 0)
	if err != nil {
		return nil, err
	}
	rs.define(top, e)
	return compileRules(rs, top, opts)
}

// PartError is an error of CompileParts that one part caused (see there).
// Part is the part as it was given (compare it with ==), Index its number.
type PartError struct {
	Part  Part
	Index int
	Err   error
}

func (e *PartError) Error() string { return e.Err.Error() }
func (e *PartError) Unwrap() error { return e.Err }

// ruleOwners records which Schema or Regex part made each rule, to name
// the part a too-large grammar comes from.
type ruleOwners struct {
	parts []Part
	nums  []int
	kinds []string
	owner []int // per rule: index in parts, -1 for none
}

// own marks rules [first, end) as made by part p (number num).
func (o *ruleOwners) own(first, end int, p Part, num int, kind string, skip ...int) {
	o.parts, o.nums, o.kinds = append(o.parts, p), append(o.nums, num), append(o.kinds, kind)
	for len(o.owner) < end {
		o.owner = append(o.owner, -1)
	}
	for r := first; r < end; r++ {
		if !slices.Contains(skip, r) {
			o.owner[r] = len(o.parts) - 1
		}
	}
}

// blame wraps err (a grammar too large) as a *PartError of the part whose
// rules have the largest share of size (per rule), or returns err as is
// when no part made any.
func (o *ruleOwners) blame(err error, size []int) error {
	if o == nil || len(o.parts) == 0 {
		return err
	}
	share := make([]int, len(o.parts))
	total := 0
	for r, n := range size {
		total += n
		if r < len(o.owner) && o.owner[r] >= 0 {
			share[o.owner[r]] += n
		}
	}
	best := 0
	for i := range share {
		if share[i] > share[best] {
			best = i
		}
	}
	if share[best] == 0 {
		return err
	}
	return &PartError{Part: o.parts[best], Index: o.nums[best],
		Err: fmt.Errorf("%w; %s part %d takes the most of it (%d of %d automaton states)", err, o.kinds[best], o.nums[best], share[best], total)}
}

// maxPartDepth bounds the nesting of parts.
const maxPartDepth = 256

type partCompiler struct {
	opts Options
	sc   *schemaCompiler // shared by every Schema part: one rule set, one ws and any rule
	done map[*partNode]*expr
	n    int // parts numbered so far
}

func (pc *partCompiler) part(p Part, depth int) (*expr, error) {
	if p.n == nil {
		return nil, errors.New("grammar: parts: a zero Part (use Lit, Schema, Regex, Seq, Alt or Repeat)")
	}
	if depth > maxPartDepth {
		return nil, fmt.Errorf("grammar: parts: nested deeper than %d levels", maxPartDepth)
	}
	if e, ok := pc.done[p.n]; ok {
		return e, nil
	}
	pc.n++
	num := pc.n
	n := p.n
	rs := pc.sc.rs
	var e *expr
	switch n.kind {
	case partLit:
		e = lit(n.text)
	case partRegex:
		if !utf8.ValidString(n.text) {
			return nil, &PartError{p, num, fmt.Errorf("grammar: parts: regex part %d: pattern is not valid UTF-8", num)}
		}
		rp := &regexParser{src: []rune(n.text), chars: utf8Expr}
		re, err := rp.parseTop(true, nil)
		if err != nil {
			return nil, &PartError{p, num, fmt.Errorf("grammar: parts: regex part %d: %w", num, err)}
		}
		first := len(rs.names)
		e = pc.sc.share(re, fmt.Sprintf("regex part %d", num))
		rs.owners.own(first, len(rs.names), p, num, "regex")
	case partSchema:
		if err := rs.b.charge(16 * int64(len(n.schema))); err != nil {
			return nil, &PartError{p, num, fmt.Errorf("grammar: parts: schema part %d: %w", num, err)}
		}
		root, err := decodeOrdered(n.schema)
		if err != nil {
			return nil, &PartError{p, num, fmt.Errorf("grammar: parts: schema part %d is not valid JSON: %w", num, err)}
		}
		// Each schema resolves its own $ref pointers; the rule set, the
		// whitespace rule and the any-value rule are shared.
		pc.sc.root = root
		pc.sc.refRules = map[string]int{}
		first := len(pc.sc.rs.names)
		id := pc.sc.rs.add("#")
		v, err := pc.sc.node(root, "#")
		if err != nil {
			return nil, &PartError{p, num, fmt.Errorf("grammar: parts: schema part %d: %w", num, err)}
		}
		pc.sc.rs.define(id, v)
		// Name the schema's rules after the part, for error messages.
		for i := first; i < len(pc.sc.rs.names); i++ {
			if i == pc.sc.anyRule || i == pc.sc.charID {
				continue
			}
			pc.sc.rs.names[i] = fmt.Sprintf("schema part %d %s", num, pc.sc.rs.names[i])
		}
		rs.owners.own(first, len(rs.names), p, num, "schema", pc.sc.anyRule, pc.sc.charID)
		e = ref(id)
	case partSeq:
		subs := make([]*expr, 0, len(n.subs))
		for _, s := range n.subs {
			x, err := pc.part(s, depth+1)
			if err != nil {
				return nil, err
			}
			subs = append(subs, x)
		}
		e = seq(subs...)
	case partAlt:
		if len(n.subs) == 0 {
			return nil, fmt.Errorf("grammar: parts: alternative part %d has no alternatives", num)
		}
		subs := make([]*expr, 0, len(n.subs))
		for _, s := range n.subs {
			x, err := pc.part(s, depth+1)
			if err != nil {
				return nil, err
			}
			subs = append(subs, x)
		}
		e = alt(subs...)
	case partRepeat:
		if n.min < 0 || n.max < -1 || (n.max >= 0 && n.min > n.max) {
			return nil, fmt.Errorf("grammar: parts: repeat part %d: bad counts min %d, max %d (want 0 <= min <= max, or max -1 for no bound)", num, n.min, n.max)
		}
		if n.min > MaxPartRepeat || n.max > MaxPartRepeat {
			return nil, fmt.Errorf("%w: repeat part %d: counts above %d", ErrTooLarge, num, MaxPartRepeat)
		}
		item, err := pc.part(n.subs[0], depth+1)
		if err != nil {
			return nil, err
		}
		sep := emptyExpr
		if n.sep.n != nil {
			if sep, err = pc.part(n.sep, depth+1); err != nil {
				return nil, err
			}
		}
		e = repeatSep(pc.sc.share(item, fmt.Sprintf("repeat part %d", num)), sep, n.min, n.max)
	default:
		return nil, fmt.Errorf("grammar: parts: part %d has an unknown kind", num)
	}
	pc.done[n] = e
	return e, nil
}

// repeatSep matches item between min and max times (max < 0: unbounded)
// with sep between consecutive items.
func repeatSep(item, sep *expr, min, max int) *expr {
	if max == 0 {
		return emptyExpr
	}
	restMin := 0
	if min > 0 {
		restMin = min - 1
	}
	restMax := -1
	if max > 0 {
		restMax = max - 1
	}
	one := seq(item, repeat(seq(sep, item), restMin, restMax))
	if min == 0 {
		return opt(one)
	}
	return one
}
