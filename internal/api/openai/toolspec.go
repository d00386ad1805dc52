package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Limits on tools definitions.
const (
	MaxTools      = 128 // tools in one request (OpenAI's limit)
	MaxNameLength = 64  // bytes of a function name (OpenAI's limit)
)

// invalidTool is the 400 of a bad tools or tool_choice member: param names
// it (tools[2].function.name), the message says what is wrong in OpenAI's
// words.
func invalidTool(param, format string, args ...any) *Error {
	return Invalid(param, CodeInvalidValue, format, args...)
}

// Tool is one function a request offers the model.
type Tool struct {
	Name        string
	Description string
	// Parameters is the JSON schema of the arguments object, as the client
	// sent it; nil when not given (any object).
	Parameters json.RawMessage
	// Strict is function.strict: the arguments must follow Parameters
	// exactly.
	Strict bool
}

// validName reports whether s is a function name OpenAI accepts: 1 to
// MaxNameLength of a-z, A-Z, 0-9, '_' and '-'.
func validName(s string) bool {
	if s == "" || len(s) > MaxNameLength {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// ParseTools decodes a request's tools member: an array of
// {"type": "function", "function": {"name", "description", "parameters",
// "strict"}}. Names must be valid and distinct; parameters, when given,
// must be an object (a JSON schema; whether the grammar can honour it is
// checked when a grammar is built). It never panics.
func ParseTools(raw json.RawMessage) ([]Tool, *Error) {
	var items []json.RawMessage
	if JSONKind(raw) != "an array" || json.Unmarshal(raw, &items) != nil {
		return nil, invalidTool("tools", "tools must be an array of tool objects, got %s.", JSONKind(raw))
	}
	if len(items) > MaxTools {
		return nil, invalidTool("tools", "tools has %d entries; at most %d are allowed.", len(items), MaxTools)
	}
	tools := make([]Tool, 0, len(items))
	seen := make(map[string]int, len(items))
	for i, it := range items {
		p := fmt.Sprintf("tools[%d]", i)
		var obj map[string]json.RawMessage
		if JSONKind(it) != "an object" || json.Unmarshal(it, &obj) != nil {
			return nil, invalidTool(p, "%s must be an object, got %s.", p, JSONKind(it))
		}
		var typ string
		if r, ok := obj["type"]; !ok || isNull(r) {
			return nil, invalidTool(p+".type", "Missing required parameter: '%s.type'.", p)
		} else if JSONKind(r) != "a string" || json.Unmarshal(r, &typ) != nil {
			return nil, invalidTool(p+".type", "%s.type must be a string, got %s.", p, JSONKind(r))
		}
		if typ != "function" {
			return nil, invalidTool(p+".type", "Invalid value for '%s.type': %q; the supported value is 'function'.", p, clip(typ))
		}
		fraw, ok := obj["function"]
		if !ok || isNull(fraw) {
			return nil, invalidTool(p+".function", "Missing required parameter: '%s.function'.", p)
		}
		var fn map[string]json.RawMessage
		if JSONKind(fraw) != "an object" || json.Unmarshal(fraw, &fn) != nil {
			return nil, invalidTool(p+".function", "%s.function must be an object, got %s.", p, JSONKind(fraw))
		}
		fp := p + ".function"
		var t Tool
		nraw, ok := fn["name"]
		if !ok || isNull(nraw) {
			return nil, invalidTool(fp+".name", "Missing required parameter: '%s.name'.", fp)
		}
		if JSONKind(nraw) != "a string" || json.Unmarshal(nraw, &t.Name) != nil {
			return nil, invalidTool(fp+".name", "%s.name must be a string, got %s.", fp, JSONKind(nraw))
		}
		if !validName(t.Name) {
			return nil, invalidTool(fp+".name", "Invalid '%s.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]{1,%d}$', got %q.", fp, MaxNameLength, clip(t.Name))
		}
		if j, dup := seen[t.Name]; dup {
			return nil, invalidTool(fp+".name", "%s.name %q is also the name of tools[%d]; function names must be unique.", fp, t.Name, j)
		}
		seen[t.Name] = i
		if r, ok := fn["description"]; ok && !isNull(r) {
			if JSONKind(r) != "a string" || json.Unmarshal(r, &t.Description) != nil {
				return nil, invalidTool(fp+".description", "%s.description must be a string, got %s.", fp, JSONKind(r))
			}
		}
		if r, ok := fn["parameters"]; ok && !isNull(r) {
			if JSONKind(r) != "an object" {
				return nil, invalidTool(fp+".parameters", "%s.parameters must be an object (a JSON schema), got %s.", fp, JSONKind(r))
			}
			t.Parameters = append(json.RawMessage(nil), bytes.TrimSpace(r)...)
		}
		if r, ok := fn["strict"]; ok && !isNull(r) {
			if JSONKind(r) != "a boolean" || json.Unmarshal(r, &t.Strict) != nil {
				return nil, invalidTool(fp+".strict", "%s.strict must be a boolean, got %s.", fp, JSONKind(r))
			}
		}
		tools = append(tools, t)
	}
	return tools, nil
}

// ChoiceMode is what tool_choice asks of the model.
type ChoiceMode int

const (
	// ChoiceNone: the model must not call tools; the output is content
	// (the zero Choice, and the default without tools).
	ChoiceNone ChoiceMode = iota
	// ChoiceAuto lets the model answer or call tools (the default when
	// tools are given).
	ChoiceAuto
	// ChoiceRequired: the model must call one or more tools.
	ChoiceRequired
	// ChoiceFunction: the model must call the function Choice.Name.
	ChoiceFunction
)

// String returns tool_choice's spelling of m ("function" for a named one).
func (m ChoiceMode) String() string {
	switch m {
	case ChoiceNone:
		return "none"
	case ChoiceRequired:
		return "required"
	case ChoiceFunction:
		return "function"
	}
	return "auto"
}

// Choice is a decoded tool_choice.
type Choice struct {
	Mode ChoiceMode
	Name string // ChoiceFunction: the function to call
}

// ParseChoice decodes tool_choice against the request's tools: "none",
// "auto", "required" or {"type": "function", "function": {"name": N}}
// naming one of them. raw nil (not given) is auto with tools and none
// without, as OpenAI does. "required" and named choices need tools.
func ParseChoice(raw json.RawMessage, tools []Tool) (Choice, *Error) {
	if raw == nil || isNull(raw) {
		if len(tools) == 0 {
			return Choice{Mode: ChoiceNone}, nil
		}
		return Choice{Mode: ChoiceAuto}, nil
	}
	switch JSONKind(raw) {
	case "a string":
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return Choice{}, invalidTool("tool_choice", "tool_choice must be a string or an object.")
		}
		switch s {
		case "none":
			return Choice{Mode: ChoiceNone}, nil
		case "auto":
			return Choice{Mode: ChoiceAuto}, nil
		case "required":
			if len(tools) == 0 {
				return Choice{}, invalidTool("tool_choice", "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.")
			}
			return Choice{Mode: ChoiceRequired}, nil
		}
		return Choice{}, invalidTool("tool_choice", "Invalid value for 'tool_choice': %q. Supported values are: 'none', 'auto', 'required' and a {\"type\": \"function\", \"function\": {\"name\": ...}} object.", clip(s))
	case "an object":
	default:
		return Choice{}, invalidTool("tool_choice", "tool_choice must be a string or an object, got %s.", JSONKind(raw))
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return Choice{}, invalidTool("tool_choice", "tool_choice must be a string or an object.")
	}
	var typ string
	if r, ok := obj["type"]; !ok || isNull(r) {
		return Choice{}, invalidTool("tool_choice.type", "Missing required parameter: 'tool_choice.type'.")
	} else if JSONKind(r) != "a string" || json.Unmarshal(r, &typ) != nil || typ != "function" {
		return Choice{}, invalidTool("tool_choice.type", "Invalid value for 'tool_choice.type': the supported value is 'function'.")
	}
	fraw, ok := obj["function"]
	if !ok || isNull(fraw) {
		return Choice{}, invalidTool("tool_choice.function", "Missing required parameter: 'tool_choice.function'.")
	}
	var fn map[string]json.RawMessage
	if JSONKind(fraw) != "an object" || json.Unmarshal(fraw, &fn) != nil {
		return Choice{}, invalidTool("tool_choice.function", "tool_choice.function must be an object, got %s.", JSONKind(fraw))
	}
	var name string
	if r, ok := fn["name"]; !ok || isNull(r) {
		return Choice{}, invalidTool("tool_choice.function.name", "Missing required parameter: 'tool_choice.function.name'.")
	} else if JSONKind(r) != "a string" || json.Unmarshal(r, &name) != nil {
		return Choice{}, invalidTool("tool_choice.function.name", "tool_choice.function.name must be a string, got %s.", JSONKind(r))
	}
	if len(tools) == 0 {
		return Choice{}, invalidTool("tool_choice", "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.")
	}
	for _, t := range tools {
		if t.Name == name {
			return Choice{Mode: ChoiceFunction, Name: name}, nil
		}
	}
	return Choice{}, invalidTool("tool_choice.function.name", "Invalid value for 'tool_choice': no function named %q was specified in the 'tools' parameter.", clip(name))
}
