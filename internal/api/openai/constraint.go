package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Limits on the structured-output and sampler-control members.
const (
	MaxLogitBias     = 100     // logit_bias values are in [-MaxLogitBias, MaxLogitBias]
	MaxLogitBiasLen  = 1024    // entries of logit_bias
	MaxChoices       = 64      // entries of a choice constraint
	MaxConstraintLen = 1 << 20 // bytes of a schema, regex, grammar or the choices together
)

// Constraint kinds (Constraint.Kind).
const (
	ConstraintJSONSchema = "json_schema" // Schema holds a JSON schema
	ConstraintJSONObject = "json_object" // any JSON object
	ConstraintRegex      = "regex"       // Regex: the whole output matches it
	ConstraintChoice     = "choice"      // Choice: the output is one of them
	ConstraintGrammar    = "grammar"     // Grammar: a GBNF grammar
)

// Constraint is a request's structured-output constraint, from whichever
// member gave it: response_format, vLLM's structured_outputs, the legacy
// guided_* members, or llama.cpp's json_schema and grammar.
type Constraint struct {
	Kind  string // one of the Constraint* kinds
	Param string // the member it came from, for error messages: "response_format.json_schema.schema", "guided_regex", ...
	// Schema is the JSON schema (ConstraintJSONSchema), as sent.
	Schema  json.RawMessage
	Regex   string
	Choice  []string
	Grammar string
	// DisableAnyWhitespace asks for compact JSON (vLLM's
	// structured_outputs.disable_any_whitespace).
	DisableAnyWhitespace bool
}

// constraintSource is one member that can carry a constraint.
type constraintSource struct {
	name   string
	decode func(raw json.RawMessage) (*Constraint, *Error)
}

// constraintSources lists them in the order errors about two of them name
// them.
var constraintSources = []constraintSource{
	{"response_format", decodeResponseFormat},
	{"structured_outputs", decodeStructuredOutputs},
	{"guided_json", func(raw json.RawMessage) (*Constraint, *Error) { return jsonConstraint("guided_json", raw) }},
	{"guided_regex", func(raw json.RawMessage) (*Constraint, *Error) { return regexConstraint("guided_regex", raw) }},
	{"guided_choice", func(raw json.RawMessage) (*Constraint, *Error) { return choiceConstraint("guided_choice", raw) }},
	{"guided_grammar", func(raw json.RawMessage) (*Constraint, *Error) { return grammarConstraint("guided_grammar", raw) }},
	// llama.cpp's server members.
	{"json_schema", func(raw json.RawMessage) (*Constraint, *Error) { return jsonConstraint("json_schema", raw) }},
	{"grammar", func(raw json.RawMessage) (*Constraint, *Error) { return grammarConstraint("grammar", raw) }},
}

// constraint decodes the structured-output members and the sampler
// controls (logit_bias, min_tokens) into c.
func (f fields) constraint(c *Common) *Error {
	var from string
	for _, src := range constraintSources {
		raw, ok := f.get(src.name)
		if !ok {
			continue
		}
		con, e := src.decode(raw)
		if e != nil {
			return e
		}
		if con == nil {
			continue // {"type": "text"}, an empty grammar string...
		}
		if c.Constraint != nil {
			return Invalid(src.name, CodeInvalidValue, "%s and %s both constrain the output; send only one of them.", from, src.name)
		}
		c.Constraint, from = con, src.name
	}
	if raw, ok := f.get("guided_whitespace_pattern"); ok && !matchesAny(raw, []string{`""`}) {
		return Invalid("guided_whitespace_pattern", CodeUnsupported, "guided_whitespace_pattern is not supported; use structured_outputs.disable_any_whitespace for compact JSON.")
	}
	if raw, ok := f.get("logit_bias"); ok {
		b, e := decodeLogitBias(raw)
		if e != nil {
			return e
		}
		c.LogitBias = b
	}
	if raw, ok := f.get("min_tokens"); ok {
		n, e := intIn("min_tokens", raw, 0, math.MaxInt32)
		if e != nil {
			return e
		}
		c.MinTokens = n
	}
	return nil
}

func decodeResponseFormat(raw json.RawMessage) (*Constraint, *Error) {
	const p = "response_format"
	var m fields
	if JSONKind(raw) != "an object" || json.Unmarshal(raw, &m) != nil {
		return nil, typeError(p, `an object {"type": "text" | "json_object" | "json_schema"}`, raw)
	}
	traw, ok := m.get("type")
	if !ok {
		return nil, Invalid(p+".type", CodeInvalidValue, "response_format.type is required: text, json_object or json_schema.")
	}
	typ, e := str(p+".type", traw)
	if e != nil {
		return nil, e
	}
	switch typ {
	case "text":
		return nil, nil
	case "json_object":
		return &Constraint{Kind: ConstraintJSONObject, Param: p}, nil
	case "json_schema":
	default:
		return nil, Invalid(p+".type", CodeUnsupported, "response_format.type %q is not supported: use text, json_object or json_schema.", clip(typ))
	}
	jraw, ok := m.get("json_schema")
	if !ok {
		return nil, Invalid(p+".json_schema", CodeInvalidValue, `response_format.json_schema is required with type json_schema: {"name": ..., "schema": {...}}.`)
	}
	var js fields
	if JSONKind(jraw) != "an object" || json.Unmarshal(jraw, &js) != nil {
		return nil, typeError(p+".json_schema", `an object {"name": ..., "schema": {...}, "strict": ...}`, jraw)
	}
	if nraw, ok := js.get("name"); ok {
		if _, e := str(p+".json_schema.name", nraw); e != nil {
			return nil, e
		}
	}
	if sraw, ok := js.get("strict"); ok {
		if _, e := boolean(p+".json_schema.strict", sraw); e != nil {
			return nil, e
		}
	}
	sraw, ok := js.get("schema")
	if !ok {
		return nil, Invalid(p+".json_schema.schema", CodeInvalidValue, "response_format.json_schema.schema is required: the JSON schema the output must follow.")
	}
	return jsonConstraint(p+".json_schema.schema", sraw)
}

// structuredKeys are the members of structured_outputs this server reads;
// the first group constrains, the rest modify. "backend" and
// "disable_fallback" change nothing here (there is one backend and it never
// falls back to unconstrained output), so they are accepted and ignored.
var structuredKeys = map[string]bool{"json": true, "regex": true, "choice": true, "grammar": true, "json_object": true,
	"disable_any_whitespace": true, "disable_additional_properties": true, "backend": true, "disable_fallback": true}

func decodeStructuredOutputs(raw json.RawMessage) (*Constraint, *Error) {
	const p = "structured_outputs"
	var m fields
	if JSONKind(raw) != "an object" || json.Unmarshal(raw, &m) != nil {
		return nil, typeError(p, `an object such as {"json": {...}}, {"regex": "..."}, {"choice": [...]} or {"grammar": "..."}`, raw)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !structuredKeys[k] && !isNull(m[k]) {
			return nil, Invalid(p+"."+k, CodeUnsupported, "structured_outputs.%s is not supported: this server takes json, regex, choice, grammar, json_object and disable_any_whitespace.", clip(k))
		}
	}
	var con *Constraint
	set := func(c *Constraint, e *Error) *Error {
		if e != nil || c == nil {
			return e
		}
		if con != nil {
			return Invalid(c.Param, CodeInvalidValue, "%s and %s both constrain the output; send only one of them.", con.Param, c.Param)
		}
		con = c
		return nil
	}
	for _, k := range []string{"json", "regex", "choice", "grammar", "json_object"} {
		r, ok := m.get(k)
		if !ok {
			continue
		}
		var e *Error
		switch k {
		case "json":
			e = set(jsonConstraint(p+".json", r))
		case "regex":
			e = set(regexConstraint(p+".regex", r))
		case "choice":
			e = set(choiceConstraint(p+".choice", r))
		case "grammar":
			e = set(grammarConstraint(p+".grammar", r))
		case "json_object":
			v, be := boolean(p+".json_object", r)
			if be != nil {
				return nil, be
			}
			if v {
				e = set(&Constraint{Kind: ConstraintJSONObject, Param: p + ".json_object"}, nil)
			}
		}
		if e != nil {
			return nil, e
		}
	}
	// disable_additional_properties and disable_fallback are checked and
	// ignored: unlisted properties are already refused unless the schema's
	// additionalProperties allows them, and there is no fallback.
	var compact bool
	for _, b := range []struct {
		name string
		dst  *bool
	}{{"disable_any_whitespace", &compact}, {"disable_additional_properties", new(bool)}, {"disable_fallback", new(bool)}} {
		if r, ok := m.get(b.name); ok {
			v, e := boolean(p+"."+b.name, r)
			if e != nil {
				return nil, e
			}
			*b.dst = v
		}
	}
	if r, ok := m.get("backend"); ok {
		if _, e := str(p+".backend", r); e != nil {
			return nil, e
		}
	}
	if con == nil {
		return nil, Invalid(p, CodeInvalidValue, "structured_outputs has no constraint: give one of json, regex, choice, grammar or json_object.")
	}
	con.DisableAnyWhitespace = compact
	return con, nil
}

// jsonConstraint reads a JSON schema given as an object (or a boolean
// schema), or as a string holding one, as vLLM accepts both.
func jsonConstraint(param string, raw json.RawMessage) (*Constraint, *Error) {
	raw = bytes.TrimSpace(raw)
	if JSONKind(raw) == "a string" {
		s, e := str(param, raw)
		if e != nil {
			return nil, e
		}
		raw = json.RawMessage(strings.TrimSpace(s))
		if !json.Valid(raw) {
			return nil, Invalid(param, CodeInvalidValue, "%s is a string that does not hold valid JSON; send the schema as an object.", param)
		}
	}
	switch JSONKind(raw) {
	case "an object", "a boolean":
	default:
		return nil, typeError(param, "a JSON schema (an object)", raw)
	}
	if len(raw) > MaxConstraintLen {
		return nil, Invalid(param, CodeInvalidValue, "%s is %d bytes; at most %d are allowed.", param, len(raw), MaxConstraintLen)
	}
	return &Constraint{Kind: ConstraintJSONSchema, Param: param, Schema: append(json.RawMessage(nil), raw...)}, nil
}

func regexConstraint(param string, raw json.RawMessage) (*Constraint, *Error) {
	s, e := str(param, raw)
	if e != nil {
		return nil, e
	}
	if s == "" {
		return nil, Invalid(param, CodeInvalidValue, "%s must not be empty.", param)
	}
	if len(s) > MaxConstraintLen {
		return nil, Invalid(param, CodeInvalidValue, "%s is %d bytes; at most %d are allowed.", param, len(s), MaxConstraintLen)
	}
	return &Constraint{Kind: ConstraintRegex, Param: param, Regex: s}, nil
}

func choiceConstraint(param string, raw json.RawMessage) (*Constraint, *Error) {
	var items []json.RawMessage
	if JSONKind(raw) != "an array" || json.Unmarshal(raw, &items) != nil {
		return nil, typeError(param, "an array of strings", raw)
	}
	if len(items) == 0 {
		return nil, Invalid(param, CodeInvalidValue, "%s must hold at least one string.", param)
	}
	if len(items) > MaxChoices {
		return nil, Invalid(param, CodeInvalidValue, "%s has %d entries; at most %d are allowed.", param, len(items), MaxChoices)
	}
	out := make([]string, len(items))
	total := 0
	for i, it := range items {
		s, e := str(fmt.Sprintf("%s[%d]", param, i), it)
		if e != nil {
			return nil, e
		}
		total += len(s)
		out[i] = s
	}
	if total > MaxConstraintLen {
		return nil, Invalid(param, CodeInvalidValue, "%s holds %d bytes; at most %d are allowed.", param, total, MaxConstraintLen)
	}
	return &Constraint{Kind: ConstraintChoice, Param: param, Choice: out}, nil
}

// grammarConstraint reads a GBNF grammar; an empty string is no grammar
// (llama.cpp's default for its grammar member).
func grammarConstraint(param string, raw json.RawMessage) (*Constraint, *Error) {
	s, e := str(param, raw)
	if e != nil {
		return nil, e
	}
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	if len(s) > MaxConstraintLen {
		return nil, Invalid(param, CodeInvalidValue, "%s is %d bytes; at most %d are allowed.", param, len(s), MaxConstraintLen)
	}
	return &Constraint{Kind: ConstraintGrammar, Param: param, Grammar: s}, nil
}

// decodeLogitBias reads OpenAI's logit_bias: an object from token ids
// (strings of decimal integers) to biases in [-100, 100]. The server checks
// the ids against the vocabulary.
func decodeLogitBias(raw json.RawMessage) (map[int32]float32, *Error) {
	var m map[string]json.RawMessage
	if JSONKind(raw) != "an object" || json.Unmarshal(raw, &m) != nil {
		return nil, typeError("logit_bias", `an object mapping token ids to biases, such as {"50256": -100}`, raw)
	}
	if len(m) > MaxLogitBiasLen {
		return nil, Invalid("logit_bias", CodeInvalidValue, "logit_bias has %d entries; at most %d are allowed.", len(m), MaxLogitBiasLen)
	}
	if len(m) == 0 {
		return nil, nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make(map[int32]float32, len(m))
	for _, k := range keys {
		id, err := strconv.ParseInt(strings.TrimSpace(k), 10, 64)
		if err != nil || id < 0 || id > maxTokenID {
			return nil, Invalid("logit_bias", CodeInvalidValue, "logit_bias keys must be token ids (non-negative integers as strings), got %q.", clip(k))
		}
		param := "logit_bias[" + strconv.Quote(k) + "]"
		x, e := number(param, m[k])
		if e != nil {
			e.Param = "logit_bias"
			return nil, e
		}
		if x < -MaxLogitBias || x > MaxLogitBias {
			return nil, Invalid("logit_bias", CodeInvalidValue, "%s must be in [-%d, %d], got %g.", param, MaxLogitBias, MaxLogitBias, x)
		}
		out[int32(id)] = float32(x)
	}
	return out, nil
}
