package openai

import (
	"encoding/json"
	"strings"
	"testing"
)

const weatherTool = `{"type":"function","function":{"name":"get_weather","description":"Weather.","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]},"strict":true}}`

func TestDecodeChatTools(t *testing.T) {
	body := `{"messages":[
		{"role":"user","content":"Weather in Paris and Rome?"},
		{"role":"assistant","content":null,"tool_calls":[
			{"id":"call_a","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}},
			{"id":"call_b","type":"function","function":{"name":"get_weather","arguments":{"city":"Rome"}}}]},
		{"role":"tool","tool_call_id":"call_a","content":"rain"},
		{"role":"tool","tool_call_id":"call_b","content":[{"type":"text","text":"sun"}]}],
		"tools":[` + weatherTool + `],"tool_choice":{"type":"function","function":{"name":"get_weather"}},"parallel_tool_calls":false}`
	r, e := DecodeChatRequest([]byte(body))
	if e != nil {
		t.Fatal(e)
	}
	if len(r.Tools) != 1 || r.Tools[0].Name != "get_weather" || !r.Tools[0].Strict {
		t.Fatalf("tools %+v", r.Tools)
	}
	if !json.Valid(r.ToolsJSON) || !strings.HasPrefix(string(r.ToolsJSON), `[{"type":"function"`) {
		t.Fatalf("ToolsJSON %s", r.ToolsJSON)
	}
	if r.ToolChoice != (Choice{Mode: ChoiceFunction, Name: "get_weather"}) || r.Parallel() {
		t.Fatalf("choice %+v parallel %v", r.ToolChoice, r.Parallel())
	}
	a := r.Messages[1]
	if a.Role != "assistant" || a.Content != "" || len(a.ToolCalls) != 2 ||
		a.ToolCalls[0] != (ToolCall{ID: "call_a", Type: "function", Function: ToolCallFunction{Name: "get_weather", Arguments: `{"city": "Paris"}`}}) ||
		a.ToolCalls[1].Function.Arguments != `{"city":"Rome"}` {
		t.Fatalf("assistant message %+v", a)
	}
	if m := r.Messages[3]; m.Role != "tool" || m.ToolCallID != "call_b" || m.Content != "sun" {
		t.Fatalf("tool message %+v", m)
	}

	r, e = DecodeChatRequest([]byte(`{"messages":[{"role":"user","content":"x"}],"tools":[` + weatherTool + `]}`))
	if e != nil || r.ToolChoice.Mode != ChoiceAuto || !r.Parallel() {
		t.Fatalf("defaults: %+v %v", r, e)
	}
	r, e = DecodeChatRequest([]byte(`{"messages":[{"role":"user","content":"x"}],"tools":[],"tool_choice":"auto"}`))
	if e != nil || r.Tools != nil || r.ToolChoice.Mode != ChoiceAuto {
		t.Fatalf("empty tools: %+v %v", r, e)
	}
}

func TestDecodeToolErrors(t *testing.T) {
	user := `{"role":"user","content":"x"}`
	call := `{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}`
	for _, tc := range []struct {
		chat             bool
		body, param, msg string
	}{
		{false, `{"prompt":"a","tools":[` + weatherTool + `]}`, "tools", "only supported for chat"},
		{false, `{"prompt":"a","tool_choice":"required"}`, "tool_choice", "only supported for chat"},
		{true, `{"messages":[` + user + `],"tools":{}}`, "tools", "array"},
		{true, `{"messages":[` + user + `],"tool_choice":"required"}`, "tool_choice", "only allowed when 'tools'"},
		{true, `{"messages":[` + user + `],"tools":[` + weatherTool + `],"tool_choice":{"type":"function","function":{"name":"nope"}}}`, "tool_choice.function.name", "nope"},
		{true, `{"messages":[` + user + `],"tools":[` + weatherTool + `],"parallel_tool_calls":"yes"}`, "parallel_tool_calls", "a boolean"},
		{true, `{"messages":[` + user + `,` + call + `,{"role":"tool","content":"r"}]}`, "messages[2].tool_call_id", "Missing"},
		{true, `{"messages":[` + user + `,` + call + `,{"role":"tool","tool_call_id":"c2","content":"r"}]}`, "messages[2].tool_call_id", "answers none"},
		{true, `{"messages":[` + user + `,` + call + `,` + user + `,{"role":"tool","tool_call_id":"c1","content":"r"}]}`, "messages[3].role", "preceding"},
		{true, `{"messages":[` + user + `,{"role":"tool","tool_call_id":"c1","content":"r"}]}`, "messages[1].role", "preceding"},
		{true, `{"messages":[{"role":"user","content":"x","tool_calls":[{"id":"c"}]}]}`, "messages[0].tool_calls", "only allowed in assistant"},
		{true, `{"messages":[{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"f","arguments":"{}"}}]}]}`, "messages[0].tool_calls[0].id", "Missing"},
		{true, `{"messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"code","function":{"name":"f","arguments":"{}"}}]}]}`, "messages[0].tool_calls[0].type", "function"},
		{true, `{"messages":[{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f"}}]}]}`, "messages[0].tool_calls[0].function.arguments", "Missing"},
		{true, `{"messages":[{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":3}}]}]}`, "messages[0].tool_calls[0].function.arguments", "a string"},
		{true, `{"messages":[{"role":"assistant","content":"x","function_call":{"name":"f"}}]}`, "messages[0].function_call", "deprecated"},
		{true, `{"messages":[{"role":"function","content":"x"}]}`, "messages[0].role", "deprecated"},
		{true, `{"messages":[` + user + `],"functions":[{"name":"f"}]}`, "functions", "not supported"},
	} {
		var e *Error
		if tc.chat {
			_, e = DecodeChatRequest([]byte(tc.body))
		} else {
			_, e = DecodeCompletionRequest([]byte(tc.body))
		}
		if e == nil || e.Status != 400 || e.Param != tc.param || !strings.Contains(e.Message, tc.msg) {
			t.Errorf("decode(%s) = %+v, want 400 param %s containing %q", tc.body, e, tc.param, tc.msg)
		}
	}
}

func TestToolCallDocuments(t *testing.T) {
	m := ChatMessage{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "call_1", Type: "function", Function: ToolCallFunction{Name: "f", Arguments: `{"a":1}`}}}}
	b, _ := json.Marshal(m)
	if want := `{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]}`; string(b) != want {
		t.Errorf("message with only tool calls:\n got %s\nwant %s", b, want)
	}
	m.Content = "Checking."
	b, _ = json.Marshal(m)
	if !strings.Contains(string(b), `"content":"Checking."`) {
		t.Errorf("message with content and calls: %s", b)
	}
	b, _ = json.Marshal(ChatMessage{Role: RoleAssistant})
	if string(b) != `{"role":"assistant","content":""}` {
		t.Errorf("plain empty message: %s", b)
	}
	d := ChatDelta{ToolCalls: []ToolCallDelta{{Index: 0, ID: "call_1", Type: "function", Function: &ToolCallFunctionDelta{Name: "f"}},
		{Index: 1, Function: &ToolCallFunctionDelta{Arguments: `{"`}}}}
	b, _ = json.Marshal(d)
	if want := `{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":""}},{"index":1,"function":{"arguments":"{\""}}]}`; string(b) != want {
		t.Errorf("delta:\n got %s\nwant %s", b, want)
	}
}
