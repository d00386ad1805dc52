package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// FinishReasonToolCalls is the finish reason of a choice that ended with
// tool calls.
const FinishReasonToolCalls = "tool_calls"

// ToolCall is one tool call: in an assistant message of a request, and in
// message.tool_calls of an answer. Function.Arguments is JSON text (an
// object), sent as a string as OpenAI does.
type ToolCall struct {
	ID       string           `json:"id"`
	Type     string           `json:"type"` // "function"
	Function ToolCallFunction `json:"function"`
}

// ToolCallFunction is the function a ToolCall calls.
type ToolCallFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// ToolCallDelta is a streamed piece of a tool call in delta.tool_calls:
// the first piece of call Index has ID, Type and Function.Name (and empty
// arguments), later ones only Function.Arguments text, as OpenAI streams
// them.
type ToolCallDelta struct {
	Index    int                    `json:"index"`
	ID       string                 `json:"id,omitempty"`
	Type     string                 `json:"type,omitempty"`
	Function *ToolCallFunctionDelta `json:"function,omitempty"`
}

// ToolCallFunctionDelta is the function part of a ToolCallDelta.
type ToolCallFunctionDelta struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// MarshalJSON writes the message as OpenAI does: content is null when the
// message has only tool calls.
func (m ChatMessage) MarshalJSON() ([]byte, error) {
	type plain ChatMessage
	if m.Content != "" || len(m.ToolCalls) == 0 {
		return json.Marshal(plain(m))
	}
	b, err := json.Marshal(plain(m))
	if err != nil {
		return nil, err
	}
	// Role and Content are the first members: write null for "".
	role, _ := json.Marshal(m.Role)
	prefix := []byte(`{"role":` + string(role) + `,"content":""`)
	if bytes.HasPrefix(b, prefix) {
		return append([]byte(`{"role":`+string(role)+`,"content":null`), b[len(prefix):]...), nil
	}
	return json.Marshal(struct {
		plain
		Content *string `json:"content"`
	}{plain: plain(m)})
}

// ToolFields are a chat request's tool members, decoded.
type ToolFields struct {
	// Tools are the functions offered (tools); ToolsJSON is the member as
	// the client sent it, for the chat template (nil without tools).
	Tools     []Tool
	ToolsJSON json.RawMessage
	// ToolChoice is tool_choice (auto with tools and none without, when
	// not given).
	ToolChoice Choice
	// ParallelToolCalls is parallel_tool_calls; nil when not given (true).
	ParallelToolCalls *bool
}

// Parallel reports whether the model may make several tool calls.
func (t *ToolFields) Parallel() bool { return t.ParallelToolCalls == nil || *t.ParallelToolCalls }

// decodeTools decodes tools, tool_choice and parallel_tool_calls.
func (f fields) decodeTools(t *ToolFields) *Error {
	if raw, ok := f.get("tools"); ok {
		tools, e := ParseTools(raw)
		if e != nil {
			return e
		}
		if len(tools) > 0 {
			t.Tools, t.ToolsJSON = tools, append(json.RawMessage(nil), bytes.TrimSpace(raw)...)
		}
	}
	raw, _ := f.get("tool_choice")
	c, e := ParseChoice(raw, t.Tools)
	if e != nil {
		return e
	}
	t.ToolChoice = c
	if raw, ok := f.get("parallel_tool_calls"); ok {
		v, e := boolean("parallel_tool_calls", raw)
		if e != nil {
			return e
		}
		t.ParallelToolCalls = &v
	}
	return nil
}

// rejectTools refuses the tool members on /v1/completions, which has no
// tool calling.
func (f fields) rejectTools() *Error {
	for _, name := range []string{"tools", "tool_choice", "parallel_tool_calls"} {
		if raw, ok := f.get(name); ok && !matchesAny(raw, []string{`[]`, `"none"`, `"auto"`}) {
			return Invalid(name, CodeUnsupported, "The parameter %s is only supported for chat completions.", name)
		}
	}
	return nil
}

// decodeToolMessage reads the tool members of message p (role already
// checked): an assistant's tool_calls, a tool message's tool_call_id.
func decodeToolMessage(p, role string, m fields, msg *Message) *Error {
	if r, ok := m.get("function_call"); ok && !matchesAny(r, []string{`[]`}) {
		return Invalid(p+".function_call", CodeUnsupported, "%s.function_call is deprecated and not supported; use tool_calls.", p)
	}
	raw, has := m.get("tool_calls")
	if has && role != "assistant" {
		if matchesAny(raw, []string{`[]`}) {
			has = false
		} else {
			return Invalid(p+".tool_calls", CodeInvalidValue, "%s.tool_calls is only allowed in assistant messages.", p)
		}
	}
	if has {
		calls, e := decodeToolCalls(p+".tool_calls", raw)
		if e != nil {
			return e
		}
		msg.ToolCalls = calls
	}
	if role == "tool" {
		r, ok := m.get("tool_call_id")
		if !ok {
			return Invalid(p+".tool_call_id", CodeInvalidValue, "Missing required parameter: '%s.tool_call_id'.", p)
		}
		id, e := str(p+".tool_call_id", r)
		if e != nil {
			return e
		}
		msg.ToolCallID = id
	}
	return nil
}

// decodeToolCalls reads an assistant message's tool_calls: an array of
// {"id", "type": "function", "function": {"name", "arguments"}}, arguments
// the JSON text of an object (as OpenAI sends it; an object itself is
// taken too).
func decodeToolCalls(p string, raw json.RawMessage) ([]ToolCall, *Error) {
	var items []json.RawMessage
	if JSONKind(raw) != "an array" || json.Unmarshal(raw, &items) != nil {
		return nil, typeError(p, "an array of tool calls", raw)
	}
	calls := make([]ToolCall, 0, len(items))
	for i, it := range items {
		ip := fmt.Sprintf("%s[%d]", p, i)
		var c fields
		if JSONKind(it) != "an object" || json.Unmarshal(it, &c) != nil {
			return nil, typeError(ip, "an object", it)
		}
		var tc ToolCall
		r, ok := c.get("id")
		if !ok {
			return nil, Invalid(ip+".id", CodeInvalidValue, "Missing required parameter: '%s.id'.", ip)
		}
		id, e := str(ip+".id", r)
		if e != nil {
			return nil, e
		}
		tc.ID, tc.Type = id, "function"
		if r, ok := c.get("type"); ok {
			typ, e := str(ip+".type", r)
			if e != nil {
				return nil, e
			}
			if typ != "function" {
				return nil, Invalid(ip+".type", CodeInvalidValue, "Invalid value for '%s.type': %q; the supported value is 'function'.", ip, clip(typ))
			}
		}
		fraw, ok := c.get("function")
		if !ok {
			return nil, Invalid(ip+".function", CodeInvalidValue, "Missing required parameter: '%s.function'.", ip)
		}
		var fn fields
		if JSONKind(fraw) != "an object" || json.Unmarshal(fraw, &fn) != nil {
			return nil, typeError(ip+".function", "an object", fraw)
		}
		nraw, ok := fn.get("name")
		if !ok {
			return nil, Invalid(ip+".function.name", CodeInvalidValue, "Missing required parameter: '%s.function.name'.", ip)
		}
		if tc.Function.Name, e = str(ip+".function.name", nraw); e != nil {
			return nil, e
		}
		araw, ok := fn.get("arguments")
		if !ok {
			return nil, Invalid(ip+".function.arguments", CodeInvalidValue, "Missing required parameter: '%s.function.arguments'.", ip)
		}
		switch JSONKind(araw) {
		case "a string":
			if tc.Function.Arguments, e = str(ip+".function.arguments", araw); e != nil {
				return nil, e
			}
		case "an object":
			var b bytes.Buffer
			if json.Compact(&b, araw) != nil {
				return nil, typeError(ip+".function.arguments", "a string of JSON", araw)
			}
			tc.Function.Arguments = b.String()
		default:
			return nil, typeError(ip+".function.arguments", "a string of JSON", araw)
		}
		calls = append(calls, tc)
	}
	return calls, nil
}

// checkToolResults checks that each tool message answers a call of the
// assistant message before it (other tool messages may come between), as
// OpenAI requires.
func checkToolResults(msgs []Message) *Error {
	var ids map[string]bool // the calls of the last assistant message with tool calls, while tool messages follow it
	for i, m := range msgs {
		switch {
		case m.Role == "assistant" && len(m.ToolCalls) > 0:
			ids = make(map[string]bool, len(m.ToolCalls))
			for _, c := range m.ToolCalls {
				ids[c.ID] = true
			}
		case m.Role == "tool":
			if ids == nil {
				return Invalid(fmt.Sprintf("messages[%d].role", i), CodeInvalidValue,
					"Invalid parameter: messages with role 'tool' must be a response to a preceding message with 'tool_calls'.")
			}
			if !ids[m.ToolCallID] {
				return Invalid(fmt.Sprintf("messages[%d].tool_call_id", i), CodeInvalidValue,
					"Invalid parameter: messages[%d].tool_call_id %q answers none of the tool calls of the assistant message before it.", i, clip(m.ToolCallID))
			}
		default:
			ids = nil
		}
	}
	return nil
}
