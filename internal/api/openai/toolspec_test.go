package openai

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestParseTools(t *testing.T) {
	tools, e := ParseTools(json.RawMessage(`[{"type":"function","function":{"name":"get_weather","description":"d","parameters":{"type":"object"},"strict":true}},
		{"type":"function","function":{"name":"ping"}}]`))
	if e != nil {
		t.Fatal(e)
	}
	if len(tools) != 2 || tools[0].Name != "get_weather" || tools[0].Description != "d" || !tools[0].Strict ||
		string(tools[0].Parameters) != `{"type":"object"}` || tools[1].Parameters != nil {
		t.Fatalf("got %+v", tools)
	}
	for _, tc := range []struct{ body, param, msg string }{
		{`{}`, "tools", "array"},
		{`[1]`, "tools[0]", "object"},
		{`[{"function":{"name":"a"}}]`, "tools[0].type", "Missing"},
		{`[{"type":"retrieval","function":{"name":"a"}}]`, "tools[0].type", "function"},
		{`[{"type":"function"}]`, "tools[0].function", "Missing"},
		{`[{"type":"function","function":{}}]`, "tools[0].function.name", "Missing"},
		{`[{"type":"function","function":{"name":"a b"}}]`, "tools[0].function.name", "pattern"},
		{`[{"type":"function","function":{"name":"` + strings.Repeat("a", 65) + `"}}]`, "tools[0].function.name", "pattern"},
		{`[{"type":"function","function":{"name":"a"}},{"type":"function","function":{"name":"a"}}]`, "tools[1].function.name", "unique"},
		{`[{"type":"function","function":{"name":"a","parameters":"x"}}]`, "tools[0].function.parameters", "object"},
		{`[{"type":"function","function":{"name":"a","strict":"yes"}}]`, "tools[0].function.strict", "boolean"},
		{`[{"type":"function","function":{"name":"a","description":3}}]`, "tools[0].function.description", "string"},
	} {
		_, e := ParseTools(json.RawMessage(tc.body))
		if e == nil || e.Param != tc.param || !strings.Contains(e.Message, tc.msg) {
			t.Errorf("ParseTools(%s) = %+v, want param %s and %q in the message", tc.body, e, tc.param, tc.msg)
		}
	}
}

func TestParseChoice(t *testing.T) {
	tools := []Tool{{Name: "a"}, {Name: "b"}}
	for _, tc := range []struct {
		raw   string
		tools []Tool
		want  Choice
	}{
		{"", tools, Choice{Mode: ChoiceAuto}},
		{"", nil, Choice{Mode: ChoiceNone}},
		{"null", tools, Choice{Mode: ChoiceAuto}},
		{`"none"`, tools, Choice{Mode: ChoiceNone}},
		{`"auto"`, nil, Choice{Mode: ChoiceAuto}},
		{`"required"`, tools, Choice{Mode: ChoiceRequired}},
		{`{"type":"function","function":{"name":"b"}}`, tools, Choice{Mode: ChoiceFunction, Name: "b"}},
	} {
		var raw json.RawMessage
		if tc.raw != "" {
			raw = json.RawMessage(tc.raw)
		}
		got, e := ParseChoice(raw, tc.tools)
		if e != nil || got != tc.want {
			t.Errorf("ParseChoice(%s) = %+v, %v; want %+v", tc.raw, got, e, tc.want)
		}
	}
	for _, tc := range []struct {
		raw   string
		tools []Tool
		param string
	}{
		{`"required"`, nil, "tool_choice"},
		{`"always"`, tools, "tool_choice"},
		{`3`, tools, "tool_choice"},
		{`{"function":{"name":"a"}}`, tools, "tool_choice.type"},
		{`{"type":"function"}`, tools, "tool_choice.function"},
		{`{"type":"function","function":{}}`, tools, "tool_choice.function.name"},
		{`{"type":"function","function":{"name":"c"}}`, tools, "tool_choice.function.name"},
		{`{"type":"function","function":{"name":"a"}}`, nil, "tool_choice"},
	} {
		_, e := ParseChoice(json.RawMessage(tc.raw), tc.tools)
		if e == nil || e.Param != tc.param {
			t.Errorf("ParseChoice(%s) error %+v, want param %s", tc.raw, e, tc.param)
		}
	}
}
