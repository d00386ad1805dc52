package toolcall

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"tandem/internal/api/openai"
	"tandem/internal/engine/grammar"
)

// anyObject is the arguments schema of a tool without parameters, and of
// non-strict tools in an auto grammar: any JSON object.
const anyObject = `{"type":"object","additionalProperties":true}`

// GrammarSpec says what a tool-call grammar allows.
type GrammarSpec struct {
	Format Format
	Tools  []openai.Tool
	Choice openai.Choice
	// Parallel is parallel_tool_calls: one or more calls; else exactly one.
	// A named function always gets exactly one call.
	Parallel bool
	// Options are the grammar options (whitespace inside arguments).
	Options grammar.Options
	// Think lets the output start with a reasoning block before the calls
	// (a model whose reasoning the server splits off, as Qwen 3).
	Think ThinkMode
	// MistralNames writes Mistral calls in the v11 tokenizer's name form,
	// [TOOL_CALLS]name[ARGS]{...} per call (templates that write [ARGS]),
	// instead of the array form.
	MistralNames bool
}

// ThinkMode is how a reasoning block may precede constrained tool calls.
type ThinkMode int

const (
	// ThinkNone: the calls start the output.
	ThinkNone ThinkMode = iota
	// ThinkOptional: the output may start with <think>...</think>.
	ThinkOptional
	// ThinkOpen: the prompt opened <think>; the output starts inside the
	// block and closes it with </think> before the calls.
	ThinkOpen
)

// Reasoning block markers.
const (
	thinkOpen  = "<think>"
	thinkClose = "</think>"
)

// thinkPart is the reasoning prefix of mode m: text without </think>,
// </think>, and a little whitespace.
func thinkPart(m ThinkMode) grammar.Part {
	block := grammar.Seq(grammar.Regex(withoutMarker(thinkClose)), grammar.Lit(thinkClose), grammar.Regex(`[ \t\r\n]{0,8}`))
	if m == ThinkOpen {
		return block
	}
	return grammar.Optional(grammar.Seq(grammar.Lit(thinkOpen), block))
}

// Grammar builds the grammar of the model's output for spec, in the
// format's syntax, exactly as the Parser reads it back:
//
//   - Choice required: one or more calls (one without Parallel) of any of
//     the tools; a named function: exactly one call of it. The output is
//     only the calls.
//   - Choice auto: free content, then optionally calls (Hermes and Mistral:
//     content that does not contain the opening marker; Llama 3 and
//     generic: content that does not open like a call, or only calls).
//     Strict tools' arguments follow their schema, other tools' are any
//     object. Used when a tool is strict; it also limits call names to the
//     tools.
//   - Choice none: nil (no constraint).
//
// Arguments follow each tool's parameters schema (any object when it has
// none), written as Compile writes JSON: properties in schema order,
// listed properties only unless the schema allows more. A schema the
// grammar cannot honour is an *Error naming tools[i].function.parameters.
//
// The Mistral syntax is the v0.3 array form, [TOOL_CALLS][{...}, ...]: in a
// vocabulary where [TOOL_CALLS] is a control token the grammar has the
// model spell it with ordinary tokens.
func Grammar(spec GrammarSpec) (*grammar.Grammar, *Error) {
	if spec.Choice.Mode == openai.ChoiceNone || len(spec.Tools) == 0 {
		return nil, nil
	}
	var (
		alts    []grammar.Part
		indexes []int          // tools index of each alternative
		schemas []grammar.Part // its arguments' schema part
	)
	for i, t := range spec.Tools {
		if spec.Choice.Mode == openai.ChoiceFunction && t.Name != spec.Choice.Name {
			continue
		}
		schema := []byte(anyObject)
		if t.Parameters != nil && (spec.Choice.Mode != openai.ChoiceAuto || t.Strict) {
			schema = t.Parameters
		}
		sp := grammar.Schema(schema)
		alts = append(alts, callPart(spec.Format, t.Name, sp))
		indexes = append(indexes, i)
		schemas = append(schemas, sp)
	}
	if len(alts) == 0 {
		return nil, errorf("tool_choice.function.name", "Invalid value for 'tool_choice': no function named %q was specified in the 'tools' parameter.", clip(spec.Choice.Name))
	}
	call := grammar.Alt(alts...)
	many := spec.Parallel && spec.Choice.Mode != openai.ChoiceFunction
	calls := callsPart(spec.Format, call, many)
	if spec.Format == Mistral && spec.MistralNames {
		calls = mistralNamesPart(spec.Tools, indexes, schemas, many)
	}
	top := calls
	if spec.Choice.Mode == openai.ChoiceAuto {
		top = autoPart(spec.Format, calls)
	} else if spec.Think != ThinkNone {
		top = grammar.Seq(thinkPart(spec.Think), calls)
	}
	g, err := grammar.CompileParts(top, spec.Options)
	if err == nil {
		return g, nil
	}
	// The tool whose schema part failed (or, for a grammar too large as a
	// whole, whose part is the largest), from the part the error names:
	// compiled once, never schema by schema.
	var pe *grammar.PartError
	if errors.As(err, &pe) {
		for k, sp := range schemas {
			if pe.Part == sp {
				t := spec.Tools[indexes[k]]
				return nil, errorf(fmt.Sprintf("tools[%d].function.parameters", indexes[k]),
					"The parameters schema of function %q cannot be used to constrain tool calls: %v.", t.Name, trimGrammarPrefix(err))
			}
		}
	}
	return nil, errorf("tools", "The tools cannot be used to constrain tool calls: %v.", trimGrammarPrefix(err))
}

func trimGrammarPrefix(err error) string {
	s := strings.TrimPrefix(err.Error(), "grammar: ")
	if errors.Is(err, grammar.ErrTooLarge) {
		s += " (simplify the schema)"
	}
	return s
}

// callPart is one call of the named function with arguments following
// schema, in the format's call-object syntax.
func callPart(f Format, name string, schema grammar.Part) grammar.Part {
	key := "arguments"
	if f == Llama3JSON {
		key = "parameters"
	}
	q, _ := json.Marshal(name) // names are [A-Za-z0-9_-]: no escapes
	return grammar.Seq(grammar.Lit(`{"name": `+string(q)+`, "`+key+`": `), schema, grammar.Lit("}"))
}

// callsPart is the calls of a whole answer: one, or with many one or more.
func callsPart(f Format, call grammar.Part, many bool) grammar.Part {
	max := 1
	if many {
		max = -1
	}
	switch f {
	case Hermes:
		block := grammar.Seq(grammar.Lit(hermesOpen+"\n"), call, grammar.Lit("\n"+hermesClose))
		return grammar.Repeat(block, 1, max, grammar.Lit("\n"))
	case Llama3JSON:
		return grammar.Repeat(call, 1, max, grammar.Lit("; "))
	case Mistral:
		return grammar.Seq(grammar.Lit(mistralCall+"["), grammar.Repeat(call, 1, max, grammar.Lit(", ")), grammar.Lit("]"))
	}
	if !many {
		return call
	}
	return grammar.Seq(grammar.Lit("["), grammar.Repeat(call, 1, max, grammar.Lit(", ")), grammar.Lit("]"))
}

// mistralNamesPart is the v11 name form of the calls:
// [TOOL_CALLS]name[ARGS]{...}, one block per call, no separator.
func mistralNamesPart(tools []openai.Tool, indexes []int, schemas []grammar.Part, many bool) grammar.Part {
	var alts []grammar.Part
	for k, i := range indexes {
		alts = append(alts, grammar.Seq(grammar.Lit(mistralCall+tools[i].Name+mistralArgs), schemas[k]))
	}
	max := 1
	if many {
		max = -1
	}
	return grammar.Repeat(grammar.Alt(alts...), 1, max, grammar.Part{})
}

// autoPart lets the model answer with content or call tools: Hermes and
// Mistral content free of the opening marker, then optionally the calls;
// Llama 3 and generic either content that does not open like a call, or
// the calls.
func autoPart(f Format, calls grammar.Part) grammar.Part {
	switch f {
	case Hermes:
		return grammar.Seq(grammar.Regex(withoutMarker(hermesOpen)), grammar.Optional(calls))
	case Mistral:
		return grammar.Seq(grammar.Regex(withoutMarker(mistralCall)), grammar.Optional(calls))
	}
	// Content: empty, or whitespace then a first character that opens no
	// call ({, and [ for generic; < could start <|python_tag|>, which the
	// vocabulary writes as a control token, so it stays allowed).
	first := `^{ \t\r\n`
	if f == Generic {
		first = `^{\[ \t\r\n`
	}
	return grammar.Alt(grammar.Regex(`[ \t\r\n]*(?:[`+first+`][\s\S]*)?`), calls)
}

// withoutMarker returns a regular expression for text in which marker
// (whose first byte occurs nowhere else in it) does not occur: the
// automaton that looks for marker, by state elimination. From the start
// state, any byte but the first returns to it; the first byte leads to
// "matched 1", from which (Q<)* (a partial match then the first byte
// again) loops and X (a partial match then a byte that continues nothing)
// returns to the start. Text may end in any state but the last.
func withoutMarker(marker string) string {
	esc := func(c byte) string {
		if strings.IndexByte(`\^$.|?*+()[]{}-/`, c) >= 0 {
			return `\` + string(c)
		}
		return string(c)
	}
	first := esc(marker[0])
	n := len(marker)
	// x(k): having matched marker[:k], a byte other than the first that
	// breaks the match, possibly after matching more.
	var x func(k int) string
	x = func(k int) string {
		if k == n-1 {
			return `[^` + first + esc(marker[k]) + `]`
		}
		return `(?:[^` + first + esc(marker[k]) + `]|` + esc(marker[k]) + x(k+1) + `)`
	}
	// q: a partial match after the first byte, marker[1:k] for k < n-1.
	q := ""
	for k := n - 2; k >= 1; k-- {
		q = `(?:` + esc(marker[k]) + q + `)?`
	}
	loop := `(?:` + q + first + `)*`
	return `(?:[^` + first + `]|` + first + loop + x(1) + `)*(?:` + first + loop + q + `)?`
}
