package grammar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// DefaultMaxWhitespace was the bound on the whitespace bytes of one gap
// between JSON tokens when whitespace was flexible by default; flexible
// whitespace is now asked for with Options.MaxWhitespace.
const DefaultMaxWhitespace = 16

// CompactIndentMax bounds the indentation after a newline in compact
// whitespace (the default): each gap between JSON tokens is empty, one
// space, or a newline followed by at most this many spaces or tabs, as
// llama.cpp's json-schema-to-grammar allows (which also takes a second
// newline).
const CompactIndentMax = 20

// MaxLengthBound caps minLength/maxLength/minItems/maxItems values the
// grammar expands (each unit adds automaton states).
const MaxLengthBound = 4096

// Options tune a compiled grammar. The zero value: compact whitespace
// (one space, or a newline and bounded indentation, in each gap between
// JSON tokens), no properties beyond those listed (as xgrammar's strict
// mode in vLLM).
type Options struct {
	// DisableAnyWhitespace allows no whitespace at all between JSON tokens
	// (vLLM's disable_any_whitespace): the output is compact JSON.
	DisableAnyWhitespace bool
	// MaxWhitespace, when > 0, makes whitespace flexible: each gap between
	// JSON tokens takes any run of space, tab, newline and carriage return
	// up to this many bytes. 0: compact whitespace (nothing, one space, or
	// a newline and at most CompactIndentMax spaces or tabs), which a
	// random or weak model cannot spend its tokens in.
	MaxWhitespace int
	// LooseProperties follows JSON Schema for objects that do not set
	// additionalProperties: any other property may follow the listed ones.
	// By default (false) such objects allow only their listed properties,
	// like xgrammar's strict mode in vLLM.
	LooseProperties bool
	// MaxDepth bounds automaton stack frames; 0 means DefaultMaxDepth.
	MaxDepth int
	// MaskCacheBytes and StateCacheBytes bound the mask caches (0: the
	// defaults, negative: no caching).
	MaskCacheBytes, StateCacheBytes int
	// MaxCompileBytes bounds the memory one compilation may allocate
	// (approximately, counting what the compiler builds); past it the
	// compilation fails with ErrTooLarge. 0: DefaultMaxCompileBytes;
	// negative: no bound.
	MaxCompileBytes int64

	ctx context.Context // see WithContext; never kept in a Grammar
}

// ErrUnsupported is returned (wrapped, with the keyword named) for a schema
// feature the grammar cannot honour.
var ErrUnsupported = errors.New("grammar: unsupported schema feature")

// falseKey marks a merged schema that matches nothing (allOf with false).
const falseKey = "\x00false"

// annotations are keywords that do not constrain a value.
var annotations = map[string]bool{
	"$schema": true, "$id": true, "$comment": true, "$anchor": true, "$vocabulary": true,
	"$defs": true, "definitions": true, "title": true, "description": true, "default": true,
	"examples": true, "deprecated": true, "readOnly": true, "writeOnly": true,
	"contentEncoding": true, "contentMediaType": true, "contentSchema": true, "format_hint": true,
}

// unsupported are validation keywords the grammar refuses rather than
// ignore.
var unsupported = []string{
	"not", "if", "then", "else", "dependentSchemas", "dependentRequired", "dependencies",
	"patternProperties", "propertyNames", "minProperties", "maxProperties",
	"unevaluatedProperties", "unevaluatedItems", "contains", "minContains", "maxContains",
	"multipleOf", "$dynamicRef", "$dynamicAnchor", "$recursiveRef", "$recursiveAnchor",
}

// Compile compiles a JSON schema into a grammar matching the JSON texts
// that are valid against it (see the package README for coverage and
// deliberate narrowings, such as properties in schema order).
func Compile(schema []byte, opts Options) (*Grammar, error) {
	b := newBudget(opts)
	// The decoded document: a few words per byte at most.
	if err := b.charge(16 * int64(len(schema))); err != nil {
		return nil, err
	}
	root, err := decodeOrdered(schema)
	if err != nil {
		return nil, fmt.Errorf("grammar: schema is not valid JSON: %w", err)
	}
	c := newSchemaCompiler(root, opts, b)
	top := c.rs.add("root")
	e, err := c.node(root, "#")
	if err != nil {
		return nil, err
	}
	// No whitespace before or after the document: a model that may start
	// or end with it can spend its tokens there (and streaming clients that
	// parse each partial document choke on a blank one).
	c.rs.define(top, e)
	return compileRules(c.rs, top, opts)
}

// CompileAnyObject compiles the grammar of OpenAI's
// response_format {"type":"json_object"}: any JSON object.
func CompileAnyObject(opts Options) (*Grammar, error) {
	c := newSchemaCompiler(nil, opts, newBudget(opts))
	top := c.rs.add("root")
	c.rs.define(top, c.anyObject())
	return compileRules(c.rs, top, opts)
}

// CompileRegex compiles a regular expression (the subset described at
// regexParser) that the whole output must match, as vLLM's
// structured_outputs regex.
func CompileRegex(pattern string, opts Options) (*Grammar, error) {
	rs := &ruleSet{b: newBudget(opts)}
	top := rs.add("root")
	p := &regexParser{src: []rune(pattern), chars: utf8Expr}
	e, err := p.parseTop(true, nil)
	if err != nil {
		return nil, fmt.Errorf("grammar: %w", err)
	}
	rs.define(top, e)
	return compileRules(rs, top, opts)
}

// CompileChoice compiles a grammar whose output is exactly one of choices
// (vLLM's structured_outputs choice).
func CompileChoice(choices []string, opts Options) (*Grammar, error) {
	if len(choices) == 0 {
		return nil, errors.New("grammar: choice needs at least one option")
	}
	rs := &ruleSet{b: newBudget(opts)}
	top := rs.add("root")
	var alts []*expr
	for _, s := range choices {
		alts = append(alts, lit(s))
	}
	rs.define(top, alt(alts...))
	return compileRules(rs, top, opts)
}

type schemaCompiler struct {
	root     any
	rs       *ruleSet
	opts     Options
	ws       *expr
	refRules map[string]int
	anyRule  int
	charID   int
	char     *expr
}

func newSchemaCompiler(root any, opts Options, b *budget) *schemaCompiler {
	c := &schemaCompiler{root: root, rs: &ruleSet{b: b}, opts: opts, refRules: map[string]int{}, anyRule: -1, charID: -1}
	c.ws = emptyExpr
	if !opts.DisableAnyWhitespace {
		id := c.rs.add("ws")
		c.rs.define(id, whitespaceExpr(opts.MaxWhitespace))
		c.ws = ref(id)
	}
	c.char = jsonCharExpr()
	return c
}

// whitespaceExpr is one gap between JSON tokens: flexible (any run of
// space, tab, newline and CR up to max bytes) for max > 0, else compact
// (empty, one space, or a newline and up to CompactIndentMax spaces or
// tabs).
func whitespaceExpr(max int) *expr {
	if max > 0 {
		var s byteSet
		for _, b := range []byte(" \t\n\r") {
			s.add(b)
		}
		return repeat(setExpr(s), 0, max)
	}
	var indent byteSet
	indent.add(' ')
	indent.add('\t')
	return alt(emptyExpr, byteExpr(' '), seq(byteExpr('\n'), repeat(setExpr(indent), 0, CompactIndentMax)))
}

func (c *schemaCompiler) sep() *expr { return seq(c.ws, byteExpr(','), c.ws) }

// share turns a large expression into a rule so that copies of it (in
// repeats and property chains) cost a call instead of a copy.
func (c *schemaCompiler) share(e *expr, name string) *expr {
	if e.kind == exRef || e.size(64) <= 64 {
		return e
	}
	id := c.rs.add(name)
	c.rs.define(id, e)
	return ref(id)
}

func unsupportedf(path, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrUnsupported, path, fmt.Sprintf(format, args...))
}

// node compiles the schema s found at path, within the compile budget.
func (c *schemaCompiler) node(s any, path string) (*expr, error) {
	if err := c.rs.b.charge(0); err != nil {
		return nil, err
	}
	var e *expr
	var err error
	switch x := s.(type) {
	case bool:
		if x {
			return c.anyValue(), nil
		}
		return noneExpr, nil
	case *object:
		e, err = c.objectSchema(x, path)
	default:
		return nil, fmt.Errorf("grammar: %s: a schema must be an object or a boolean", path)
	}
	if err != nil {
		return nil, err
	}
	if err := c.rs.b.exprs(e); err != nil {
		return nil, err
	}
	return e, nil
}

func checkSupported(s *object, path string) error {
	for _, k := range unsupported {
		if _, ok := s.get(k); ok {
			return unsupportedf(path, "keyword %q is not supported", k)
		}
	}
	if u, ok := s.get("uniqueItems"); ok && u == true {
		return unsupportedf(path, `keyword "uniqueItems": true is not supported`)
	}
	return nil
}

func (c *schemaCompiler) objectSchema(s *object, path string) (*expr, error) {
	if err := checkSupported(s, path); err != nil {
		return nil, err
	}
	// $ref alone becomes a rule (so recursion works); with siblings the
	// target is merged in.
	if r, ok := s.get("$ref"); ok {
		ptr, ok := r.(string)
		if !ok {
			return nil, fmt.Errorf("grammar: %s: $ref must be a string", path)
		}
		if onlyAnnotations(s, "$ref") {
			return c.refExpr(ptr, path)
		}
	}
	if needsMerge(s) {
		m, err := c.flatten(s, path, 0)
		if err != nil {
			return nil, err
		}
		if _, ok := m.get(falseKey); ok {
			return noneExpr, nil // allOf with a false branch
		}
		if err := checkSupported(m, path); err != nil {
			return nil, err
		}
		s = m
	}
	if a, ok := s.get("anyOf"); ok {
		return c.union(s, a, "anyOf", path)
	}
	if a, ok := s.get("oneOf"); ok {
		return c.union(s, a, "oneOf", path)
	}
	e, err := c.typed(s, path)
	if err != nil {
		return nil, err
	}
	if n, ok := s.get("nullable"); ok && n == true {
		e = alt(e, lit("null"))
	}
	return e, nil
}

func onlyAnnotations(s *object, except ...string) bool {
	for _, k := range s.keys {
		if !annotations[k] && !slices.Contains(except, k) {
			return false
		}
	}
	return true
}

func needsMerge(s *object) bool {
	_, all := s.get("allOf")
	_, r := s.get("$ref")
	return all || r
}

// union compiles anyOf (and oneOf, which is treated as anyOf: a value
// matching several branches is accepted), each branch merged with the
// sibling keywords.
func (c *schemaCompiler) union(s *object, branches any, kw, path string) (*expr, error) {
	list, ok := branches.([]any)
	if !ok || len(list) == 0 {
		return nil, fmt.Errorf("grammar: %s: %s must be a non-empty array", path, kw)
	}
	if _, both := s.get("oneOf"); both && kw == "anyOf" {
		return nil, unsupportedf(path, "anyOf together with oneOf is not supported")
	}
	siblings := &object{vals: map[string]any{}}
	for _, k := range s.keys {
		if k != kw && !annotations[k] {
			siblings.keys = append(siblings.keys, k)
			siblings.vals[k] = s.vals[k]
		}
	}
	var alts []*expr
	for i, b := range list {
		bp := fmt.Sprintf("%s/%s/%d", path, kw, i)
		var e *expr
		var err error
		if len(siblings.keys) == 0 {
			e, err = c.node(b, bp)
		} else {
			var m *object
			m, err = c.merge(siblings, b, bp, 0)
			if err == nil {
				e, err = c.objectSchema(m, bp)
			}
		}
		if err != nil {
			return nil, err
		}
		alts = append(alts, e)
	}
	return alt(alts...), nil
}

// refExpr returns a call of the rule for the local reference ptr.
func (c *schemaCompiler) refExpr(ptr, path string) (*expr, error) {
	if id, ok := c.refRules[ptr]; ok {
		return ref(id), nil
	}
	target, err := c.resolve(ptr, path)
	if err != nil {
		return nil, err
	}
	id := c.rs.add(ptr)
	c.refRules[ptr] = id
	e, err := c.node(target, ptr)
	if err != nil {
		return nil, err
	}
	c.rs.define(id, e)
	return ref(id), nil
}

// resolve follows a local JSON pointer reference ("#", "#/$defs/x").
func (c *schemaCompiler) resolve(ptr, path string) (any, error) {
	if !strings.HasPrefix(ptr, "#") {
		return nil, unsupportedf(path, "$ref %q: only local references (starting with #) are supported", ptr)
	}
	frag, err := url.PathUnescape(ptr[1:])
	if err != nil {
		return nil, fmt.Errorf("grammar: %s: $ref %q: %w", path, ptr, err)
	}
	if frag != "" && !strings.HasPrefix(frag, "/") {
		return nil, unsupportedf(path, "$ref %q: anchors are not supported, use a JSON pointer", ptr)
	}
	cur := c.root
	if frag == "" {
		return cur, nil
	}
	for _, tok := range strings.Split(frag[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch x := cur.(type) {
		case *object:
			v, ok := x.get(tok)
			if !ok {
				return nil, fmt.Errorf("grammar: %s: $ref %q: no %q in the schema", path, ptr, tok)
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(x) {
				return nil, fmt.Errorf("grammar: %s: $ref %q: bad index %q", path, ptr, tok)
			}
			cur = x[i]
		default:
			return nil, fmt.Errorf("grammar: %s: $ref %q: %q does not name a schema", path, ptr, tok)
		}
	}
	return cur, nil
}

// flatten inlines $ref targets and allOf branches into one schema.
func (c *schemaCompiler) flatten(s *object, path string, depth int) (*object, error) {
	if depth > 32 {
		return nil, unsupportedf(path, "$ref/allOf nested more than 32 levels without a value (circular reference?)")
	}
	out := &object{vals: map[string]any{}}
	var parts []any
	for _, k := range s.keys {
		switch k {
		case "allOf":
			list, ok := s.vals[k].([]any)
			if !ok || len(list) == 0 {
				return nil, fmt.Errorf("grammar: %s: allOf must be a non-empty array", path)
			}
			parts = append(parts, list...)
		case "$ref":
			ptr, _ := s.vals[k].(string)
			t, err := c.resolve(ptr, path)
			if err != nil {
				return nil, err
			}
			parts = append(parts, t)
		default:
			out.keys = append(out.keys, k)
			out.vals[k] = s.vals[k]
		}
	}
	for i, p := range parts {
		m, err := c.merge(out, p, fmt.Sprintf("%s/allOf/%d", path, i), depth+1)
		if err != nil {
			return nil, err
		}
		out = m
	}
	return out, nil
}

// merge combines schema a (flat) with schema b into one schema matching
// the values both match, for the keyword combinations it knows; anything
// else is refused.
func (c *schemaCompiler) merge(a *object, b any, path string, depth int) (*object, error) {
	switch x := b.(type) {
	case bool:
		if x {
			return a, nil
		}
		out := &object{keys: slices.Clone(a.keys), vals: map[string]any{falseKey: true}}
		for k, v := range a.vals {
			out.vals[k] = v
		}
		out.keys = append(out.keys, falseKey)
		return out, nil
	case *object:
		if needsMerge(x) {
			f, err := c.flatten(x, path, depth+1)
			if err != nil {
				return nil, err
			}
			x = f
		}
		out := &object{keys: slices.Clone(a.keys), vals: map[string]any{}}
		for k, v := range a.vals {
			out.vals[k] = v
		}
		set := func(k string, v any) {
			if _, ok := out.vals[k]; !ok {
				out.keys = append(out.keys, k)
			}
			out.vals[k] = v
		}
		// additionalProperties and items only see the properties and
		// prefixItems of their own schema, so merging them across branches
		// would change their meaning.
		for _, pair := range [][2]string{{"additionalProperties", "properties"}, {"items", "prefixItems"}} {
			own, other := pair[0], pair[1]
			av, aHas := a.get(own)
			bv, bHas := x.get(own)
			_, aOther := a.get(other)
			_, bOther := x.get(other)
			if (aHas && av != true && bOther) || (bHas && bv != true && aOther) {
				return nil, unsupportedf(path, "allOf or $ref with %s in one branch and %s in another is not supported", own, other)
			}
		}
		for _, k := range x.keys {
			v := x.vals[k]
			old, has := out.vals[k]
			if annotations[k] {
				continue
			}
			if !has {
				set(k, v)
				continue
			}
			switch k {
			case "properties":
				po, ok1 := old.(*object)
				pn, ok2 := v.(*object)
				if !ok1 || !ok2 {
					return nil, fmt.Errorf("grammar: %s: properties must be an object", path)
				}
				merged := &object{keys: slices.Clone(po.keys), vals: map[string]any{}}
				for pk, pv := range po.vals {
					merged.vals[pk] = pv
				}
				for _, pk := range pn.keys {
					if ov, ok := merged.vals[pk]; ok {
						merged.vals[pk] = &object{keys: []string{"allOf"}, vals: map[string]any{"allOf": []any{ov, pn.vals[pk]}}}
						continue
					}
					merged.keys = append(merged.keys, pk)
					merged.vals[pk] = pn.vals[pk]
				}
				set(k, merged)
			case "required":
				ro, _ := old.([]any)
				rn, _ := v.([]any)
				r := slices.Clone(ro)
				for _, n := range rn {
					if !slices.Contains(r, n) {
						r = append(r, n)
					}
				}
				set(k, r)
			case "type":
				t, err := intersectTypes(old, v)
				if err != nil {
					return nil, unsupportedf(path, "%v", err)
				}
				set(k, t)
			case "minLength", "minItems", "minimum", "exclusiveMinimum":
				set(k, pickNum(old, v, true))
			case "maxLength", "maxItems", "maximum", "exclusiveMaximum":
				set(k, pickNum(old, v, false))
			default:
				if !jsonEqual(old, v) {
					return nil, unsupportedf(path, "allOf with two different %q is not supported", k)
				}
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("grammar: %s: a schema must be an object or a boolean", path)
}

func pickNum(a, b any, larger bool) any {
	x, ok1 := a.(json.Number)
	y, ok2 := b.(json.Number)
	if !ok1 || !ok2 {
		return a
	}
	rx, ok1 := parseRat(x)
	ry, ok2 := parseRat(y)
	if !ok1 || !ok2 {
		return a
	}
	if (rx.Cmp(ry) < 0) == larger {
		return y
	}
	return x
}

var allTypes = []string{"object", "array", "string", "number", "boolean", "null"}

// typeList returns the types a schema allows ("integer" kept apart from
// "number").
func typeList(t any) ([]string, error) {
	switch x := t.(type) {
	case nil:
		return allTypes, nil
	case string:
		return []string{x}, nil
	case []any:
		var out []string
		for _, e := range x {
			s, ok := e.(string)
			if !ok {
				return nil, errors.New("type entries must be strings")
			}
			out = append(out, s)
		}
		return out, nil
	}
	return nil, errors.New("type must be a string or an array of strings")
}

func intersectTypes(a, b any) (any, error) {
	la, err := typeList(a)
	if err != nil {
		return nil, err
	}
	lb, err := typeList(b)
	if err != nil {
		return nil, err
	}
	var out []any
	for _, t := range la {
		switch {
		case slices.Contains(lb, t):
			out = append(out, t)
		case t == "integer" && slices.Contains(lb, "number"):
			out = append(out, "integer")
		case t == "number" && slices.Contains(lb, "integer"):
			out = append(out, "integer")
		}
	}
	if len(out) == 0 {
		return nil, errors.New("allOf branches allow no common type")
	}
	return out, nil
}

// typed compiles a schema without $ref, allOf, anyOf and oneOf.
func (c *schemaCompiler) typed(s *object, path string) (*expr, error) {
	t, _ := s.get("type")
	types, err := typeList(t)
	if err != nil {
		return nil, fmt.Errorf("grammar: %s: %w", path, err)
	}
	if _, ok := s.get("enum"); ok {
		return c.enumSchema(s, types, path)
	}
	if _, ok := s.get("const"); ok {
		return c.enumSchema(s, types, path)
	}
	var alts []*expr
	seen := map[string]bool{}
	for _, t := range types {
		if seen[t] {
			continue
		}
		seen[t] = true
		var e *expr
		var err error
		switch t {
		case "object":
			e, err = c.objectType(s, path)
		case "array":
			e, err = c.arrayType(s, path)
		case "string":
			e, err = c.stringType(s, path)
		case "number":
			e, err = c.numberType(s, path, false)
		case "integer":
			if seen["number"] || slices.Contains(types, "number") {
				continue
			}
			e, err = c.numberType(s, path, true)
		case "boolean":
			e = alt(lit("true"), lit("false"))
		case "null":
			e = lit("null")
		default:
			return nil, fmt.Errorf("grammar: %s: unknown type %q", path, t)
		}
		if err != nil {
			return nil, err
		}
		alts = append(alts, e)
	}
	return alt(alts...), nil
}

// enumSchema compiles enum and const as literal alternatives, keeping the
// values of the allowed types. Other validation keywords beside them are
// refused (they would have to be checked against each value).
func (c *schemaCompiler) enumSchema(s *object, types []string, path string) (*expr, error) {
	var values []any
	if e, ok := s.get("enum"); ok {
		list, ok := e.([]any)
		if !ok {
			return nil, fmt.Errorf("grammar: %s: enum must be an array", path)
		}
		values = list
	}
	if cv, ok := s.get("const"); ok {
		if _, both := s.get("enum"); both {
			var keep []any
			for _, v := range values {
				if jsonEqual(v, cv) {
					keep = append(keep, v)
				}
			}
			values = keep
		} else {
			values = []any{cv}
		}
	}
	for _, k := range s.keys {
		if !annotations[k] && k != "enum" && k != "const" && k != "type" && k != "nullable" {
			return nil, unsupportedf(path, "keyword %q together with enum or const is not supported", k)
		}
	}
	var alts []*expr
	for _, v := range values {
		if !valueHasType(v, types) {
			continue
		}
		alts = append(alts, c.literalValue(v))
	}
	return alt(alts...), nil
}

// literalValue matches one JSON value in compact form, whitespace between
// tokens allowed as elsewhere.
func (c *schemaCompiler) literalValue(v any) *expr {
	switch x := v.(type) {
	case []any:
		parts := []*expr{byteExpr('['), c.ws}
		for i, e := range x {
			if i > 0 {
				parts = append(parts, c.sep())
			}
			parts = append(parts, c.literalValue(e))
		}
		if len(x) > 0 {
			parts = append(parts, c.ws)
		}
		return seq(append(parts, byteExpr(']'))...)
	case *object:
		parts := []*expr{byteExpr('{'), c.ws}
		for i, k := range x.keys {
			if i > 0 {
				parts = append(parts, c.sep())
			}
			parts = append(parts, lit(string(appendJSONString(nil, k))), c.ws, byteExpr(':'), c.ws, c.literalValue(x.vals[k]))
		}
		if len(x.keys) > 0 {
			parts = append(parts, c.ws)
		}
		return seq(append(parts, byteExpr('}'))...)
	}
	if n, ok := v.(json.Number); ok {
		return numberLiteral(n)
	}
	return lit(string(appendJSON(nil, v)))
}

// numberLiteral matches the one shortest decimal spelling of n's value
// without an exponent: 1 for 1, 1.0 and 1e0; 0.5 for 0.50. Only one
// spelling, so that generation cannot run on in trailing zeros.
func numberLiteral(n json.Number) *expr {
	r, ok := parseRat(n)
	if !ok {
		return lit(string(n))
	}
	if r.IsInt() {
		return lit(r.Num().String())
	}
	for prec := 1; prec <= 400; prec++ {
		s := r.FloatString(prec)
		if back, ok := new(big.Rat).SetString(s); ok && back.Cmp(r) == 0 {
			return lit(s)
		}
	}
	return lit(string(n))
}

func valueHasType(v any, types []string) bool {
	var t string
	switch x := v.(type) {
	case nil:
		t = "null"
	case bool:
		t = "boolean"
	case string:
		t = "string"
	case json.Number:
		if isInteger(x) && slices.Contains(types, "integer") {
			return true
		}
		t = "number"
	case []any:
		t = "array"
	case *object:
		t = "object"
	}
	return slices.Contains(types, t)
}

// anyValue is a call of the rule matching any JSON value.
func (c *schemaCompiler) anyValue() *expr {
	if c.anyRule < 0 {
		c.anyRule = c.rs.add("any")
		v := ref(c.anyRule)
		str := seq(byteExpr('"'), star(c.char), byteExpr('"'))
		member := seq(str, c.ws, byteExpr(':'), c.ws, v)
		obj := seq(byteExpr('{'), c.ws, alt(byteExpr('}'), seq(member, star(seq(c.sep(), member)), c.ws, byteExpr('}'))))
		arr := seq(byteExpr('['), c.ws, alt(byteExpr(']'), seq(v, star(seq(c.sep(), v)), c.ws, byteExpr(']'))))
		c.rs.define(c.anyRule, alt(obj, arr, str, numberExpr(), lit("true"), lit("false"), lit("null")))
	}
	return ref(c.anyRule)
}

// anyObject matches any JSON object.
func (c *schemaCompiler) anyObject() *expr {
	v := c.anyValue()
	str := seq(byteExpr('"'), star(c.char), byteExpr('"'))
	member := seq(str, c.ws, byteExpr(':'), c.ws, v)
	return seq(byteExpr('{'), c.ws, alt(byteExpr('}'), seq(member, star(seq(c.sep(), member)), c.ws, byteExpr('}'))))
}

// lengthBound reads a non-negative integer keyword (-1 when absent).
func lengthBound(s *object, k, path string) (int, error) {
	v, ok := s.get(k)
	if !ok {
		return -1, nil
	}
	n, ok := v.(json.Number)
	if !ok || !isInteger(n) {
		return 0, fmt.Errorf("grammar: %s: %s must be a non-negative integer", path, k)
	}
	r, _ := parseRat(n)
	i := r.Num()
	if i.Sign() < 0 {
		return 0, fmt.Errorf("grammar: %s: %s must be a non-negative integer", path, k)
	}
	if i.Cmp(big.NewInt(MaxLengthBound)) > 0 {
		if strings.HasPrefix(k, "max") {
			return -1, nil // a bound that large is no practical limit
		}
		return 0, unsupportedf(path, "%s above %d is not supported", k, MaxLengthBound)
	}
	return int(i.Int64()), nil
}

func (c *schemaCompiler) stringType(s *object, path string) (*expr, error) {
	minL, err := lengthBound(s, "minLength", path)
	if err != nil {
		return nil, err
	}
	maxL, err := lengthBound(s, "maxLength", path)
	if err != nil {
		return nil, err
	}
	_, hasPattern := s.get("pattern")
	f, hasFormat := s.get("format")
	if (hasPattern || hasFormat) && (minL >= 0 || maxL >= 0) {
		kw := "pattern"
		if hasFormat {
			kw = "format"
		}
		return nil, unsupportedf(path, "%s together with minLength or maxLength is not supported", kw)
	}
	if hasPattern && hasFormat {
		return nil, unsupportedf(path, "pattern together with format is not supported")
	}
	var body *expr
	switch {
	case hasPattern:
		p, ok := s.vals["pattern"].(string)
		if !ok {
			return nil, fmt.Errorf("grammar: %s: pattern must be a string", path)
		}
		body, err = compilePattern(p)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrUnsupported, path, err)
		}
	case hasFormat:
		name, _ := f.(string)
		body = formatExpr(name)
		if body == nil {
			return nil, unsupportedf(path, "format %q is not supported (date, time, date-time, uuid, email are)", name)
		}
	default:
		if minL < 0 {
			minL = 0
		}
		char := c.char
		if minL > 64 || maxL > 64 {
			// Long bounds: one call per character instead of a copy of the
			// character automaton per count.
			char = c.charRule()
		}
		body = repeat(char, minL, maxL)
	}
	return c.share(seq(byteExpr('"'), body, byteExpr('"')), path), nil
}

// charRule is a call of the rule matching one JSON string character.
func (c *schemaCompiler) charRule() *expr {
	if c.charID < 0 {
		c.charID = c.rs.add("char")
		c.rs.define(c.charID, c.char)
	}
	return ref(c.charID)
}

// numberBound reads a numeric keyword as a rational (nil when absent).
func numberBound(s *object, k, path string) (*big.Rat, error) {
	v, ok := s.get(k)
	if !ok {
		return nil, nil
	}
	n, ok := v.(json.Number)
	if !ok {
		if _, isBool := v.(bool); isBool {
			return nil, nil // draft 4 boolean exclusive flags, read by the caller
		}
		return nil, fmt.Errorf("grammar: %s: %s must be a number", path, k)
	}
	r, ok := parseRat(n)
	if !ok {
		return nil, fmt.Errorf("grammar: %s: %s: bad number %q", path, k, n)
	}
	return r, nil
}

// numberType compiles number and integer with their bounds.
func (c *schemaCompiler) numberType(s *object, path string, integer bool) (*expr, error) {
	lo, err := numberBound(s, "minimum", path)
	if err != nil {
		return nil, err
	}
	hi, err := numberBound(s, "maximum", path)
	if err != nil {
		return nil, err
	}
	exLo, err := numberBound(s, "exclusiveMinimum", path)
	if err != nil {
		return nil, err
	}
	exHi, err := numberBound(s, "exclusiveMaximum", path)
	if err != nil {
		return nil, err
	}
	loStrict, hiStrict := false, false
	if b, ok := s.vals["exclusiveMinimum"].(bool); ok && b {
		loStrict = true // draft 4
	}
	if b, ok := s.vals["exclusiveMaximum"].(bool); ok && b {
		hiStrict = true
	}
	// Tightest lower and upper bounds.
	if exLo != nil && (lo == nil || exLo.Cmp(lo) >= 0) {
		lo, loStrict = exLo, true
	}
	if exHi != nil && (hi == nil || exHi.Cmp(hi) <= 0) {
		hi, hiStrict = exHi, true
	}
	if lo == nil && hi == nil {
		if integer {
			return integerExpr(), nil
		}
		return numberExpr(), nil
	}
	if integer {
		var ilo, ihi *big.Int
		if lo != nil {
			ilo = ceilRat(lo)
			if loStrict && lo.IsInt() {
				ilo.Add(ilo, big.NewInt(1))
			}
		}
		if hi != nil {
			ihi = floorRat(hi)
			if hiStrict && hi.IsInt() {
				ihi.Sub(ihi, big.NewInt(1))
			}
		}
		if ilo != nil && ihi != nil && ilo.Cmp(ihi) > 0 {
			return noneExpr, nil
		}
		return c.share(intRangeExpr(ilo, ihi), path), nil
	}
	if lo != nil && hi != nil && (lo.Cmp(hi) > 0 || (lo.Cmp(hi) == 0 && (loStrict || hiStrict))) {
		return noneExpr, nil
	}
	e, ok := boundedNumberExpr(lo, loStrict, hi, hiStrict)
	if !ok {
		return nil, unsupportedf(path, "minimum and maximum with fractional parts in the same unit interval (%s, %s) are not supported", lo.RatString(), hi.RatString())
	}
	return c.share(e, path), nil
}

func floorRat(r *big.Rat) *big.Int {
	q, m := new(big.Int).DivMod(r.Num(), r.Denom(), new(big.Int))
	_ = m
	return q // DivMod is Euclidean: floor for a positive denominator
}

func ceilRat(r *big.Rat) *big.Int {
	q := floorRat(r)
	if !r.IsInt() {
		q.Add(q, big.NewInt(1))
	}
	return q
}

func (c *schemaCompiler) arrayType(s *object, path string) (*expr, error) {
	minI, err := lengthBound(s, "minItems", path)
	if err != nil {
		return nil, err
	}
	maxI, err := lengthBound(s, "maxItems", path)
	if err != nil {
		return nil, err
	}
	if minI < 0 {
		minI = 0
	}
	var prefix []any
	var rest any = true
	if p, ok := s.get("prefixItems"); ok {
		list, ok := p.([]any)
		if !ok {
			return nil, fmt.Errorf("grammar: %s: prefixItems must be an array", path)
		}
		prefix = list
		if it, ok := s.get("items"); ok {
			rest = it
		}
	} else if it, ok := s.get("items"); ok {
		if list, isList := it.([]any); isList { // draft 4-2019 tuple form
			prefix = list
			if ai, ok := s.get("additionalItems"); ok {
				rest = ai
			}
		} else {
			rest = it
		}
	}
	prefixExprs := make([]*expr, len(prefix))
	for i, p := range prefix {
		e, err := c.node(p, fmt.Sprintf("%s/prefixItems/%d", path, i))
		if err != nil {
			return nil, err
		}
		prefixExprs[i] = c.share(e, fmt.Sprintf("%s/prefixItems/%d", path, i))
	}
	restExpr, err := c.node(rest, path+"/items")
	if err != nil {
		return nil, err
	}
	restExpr = c.share(restExpr, path+"/items")
	closeAt := func(i int) *expr {
		if i > 0 {
			return seq(c.ws, byteExpr(']'))
		}
		return byteExpr(']')
	}
	// tail(i): the elements from index i on, then the closing bracket.
	var tail func(i int) *expr
	tail = func(i int) *expr {
		if maxI >= 0 && i >= maxI {
			if i >= minI {
				return closeAt(i)
			}
			return noneExpr
		}
		if i < len(prefixExprs) {
			el := prefixExprs[i]
			if i > 0 {
				el = seq(c.sep(), el)
			}
			next := seq(el, tail(i+1))
			if i >= minI {
				return alt(next, closeAt(i))
			}
			return next
		}
		lo := max(0, minI-i)
		hi := -1
		if maxI >= 0 {
			hi = maxI - i
		}
		if i == 0 {
			more := seq(restExpr, repeat(seq(c.sep(), restExpr), max(0, lo-1), decr(hi)), c.ws, byteExpr(']'))
			if lo == 0 {
				return alt(more, byteExpr(']'))
			}
			return more
		}
		return seq(repeat(seq(c.sep(), restExpr), lo, hi), c.ws, byteExpr(']'))
	}
	return seq(byteExpr('['), c.ws, tail(0)), nil
}

func decr(n int) int {
	if n < 0 {
		return n
	}
	return n - 1
}

type property struct {
	name     string
	value    *expr
	required bool
}

func (c *schemaCompiler) objectType(s *object, path string) (*expr, error) {
	var props []property
	var required []string
	if r, ok := s.get("required"); ok {
		list, ok := r.([]any)
		if !ok {
			return nil, fmt.Errorf("grammar: %s: required must be an array", path)
		}
		for _, n := range list {
			name, ok := n.(string)
			if !ok {
				return nil, fmt.Errorf("grammar: %s: required entries must be strings", path)
			}
			if !slices.Contains(required, name) {
				required = append(required, name)
			}
		}
	}
	var names []string
	if p, ok := s.get("properties"); ok {
		po, ok := p.(*object)
		if !ok {
			return nil, fmt.Errorf("grammar: %s: properties must be an object", path)
		}
		for _, k := range po.keys {
			pp := path + "/properties/" + k
			e, err := c.node(po.vals[k], pp)
			if err != nil {
				return nil, err
			}
			props = append(props, property{k, c.share(e, pp), slices.Contains(required, k)})
			names = append(names, k)
		}
	}
	var addl any = c.opts.LooseProperties
	if a, ok := s.get("additionalProperties"); ok {
		addl = a
	}
	addlExpr, err := c.node(addl, path+"/additionalProperties")
	if err != nil {
		return nil, err
	}
	addlExpr = c.share(addlExpr, path+"/additionalProperties")
	// Required names without a property schema take the additional one.
	for _, r := range required {
		if !slices.Contains(names, r) {
			props = append(props, property{r, addlExpr, true})
			names = append(names, r)
		}
	}
	var addKV *expr
	if addlExpr.kind != exNone {
		addKV = c.share(seq(keyNotIn(names, c.char), c.ws, byteExpr(':'), c.ws, addlExpr), path+"/additionalProperties")
	}
	kv := make([]*expr, len(props))
	for i, p := range props {
		kv[i] = seq(lit(string(appendJSONString(nil, p.name))), c.ws, byteExpr(':'), c.ws, p.value)
	}
	sep := c.sep()
	end := func(emitted bool) *expr {
		if addKV == nil {
			if emitted {
				return seq(c.ws, byteExpr('}'))
			}
			return byteExpr('}')
		}
		if emitted {
			return seq(star(seq(sep, addKV)), c.ws, byteExpr('}'))
		}
		return alt(seq(addKV, star(seq(sep, addKV)), c.ws, byteExpr('}')), byteExpr('}'))
	}
	n := len(props)
	afterTrue := make([]*expr, n+1) // properties i.. once something was emitted
	afterTrue[n] = end(true)
	for i := n - 1; i >= 0; i-- {
		el := seq(sep, kv[i])
		if props[i].required {
			afterTrue[i] = seq(el, afterTrue[i+1])
		} else {
			afterTrue[i] = seq(opt(el), afterTrue[i+1])
		}
		if err := c.rs.b.exprs(afterTrue[i]); err != nil {
			return nil, err
		}
	}
	afterFalse := end(false)
	for i := n - 1; i >= 0; i-- {
		first := seq(kv[i], afterTrue[i+1])
		if props[i].required {
			afterFalse = first
		} else {
			afterFalse = alt(first, afterFalse)
		}
		if err := c.rs.b.exprs(afterFalse); err != nil {
			return nil, err
		}
		if (n-i)%8 == 0 {
			afterFalse = c.share(afterFalse, fmt.Sprintf("%s/properties#%d", path, i))
		}
	}
	return seq(byteExpr('{'), c.ws, afterFalse), nil
}

// keyNotIn matches a quoted JSON string whose literal content is none of
// names. An escaped character always counts as a difference, so a name
// written with escapes where none are needed is not recognised.
func keyNotIn(names []string, char *expr) *expr {
	if len(names) == 0 {
		return seq(byteExpr('"'), star(char), byteExpr('"'))
	}
	type node struct {
		kids     map[rune]*node
		order    []rune
		terminal bool
	}
	root := &node{kids: map[rune]*node{}}
	for _, n := range names {
		cur := root
		for _, r := range n {
			k := cur.kids[r]
			if k == nil {
				k = &node{kids: map[rune]*node{}}
				cur.kids[r] = k
				cur.order = append(cur.order, r)
			}
			cur = k
		}
		cur.terminal = true
	}
	rest := seq(star(char), byteExpr('"'))
	var build func(n *node) *expr
	build = func(n *node) *expr {
		var alts []*expr
		if !n.terminal {
			alts = append(alts, byteExpr('"'))
		}
		excl := []runeRange{{0, 0x1F}, {'"', '"'}, {'\\', '\\'}}
		for _, r := range n.order {
			excl = append(excl, runeRange{r, r})
		}
		var escaped []byte // children spelled as a short escape (\n, \")
		for _, r := range n.order {
			if e := appendJSONChar(nil, r); len(e) == 2 && e[0] == '\\' {
				escaped = append(escaped, e[1])
			}
		}
		diverge := alt(utf8Expr(complementRanges(excl)), escapeExprExcept(escaped))
		alts = append(alts, seq(diverge, rest))
		for _, r := range n.order {
			alts = append(alts, seq(lit(string(appendJSONChar(nil, r))), build(n.kids[r])))
		}
		return alt(alts...)
	}
	return seq(byteExpr('"'), build(root))
}
