package openai

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// TestDecodeConstraints: every member that carries a constraint decodes
// into the same Constraint shape, for both endpoints.
func TestDecodeConstraints(t *testing.T) {
	schema := `{"type":"object","properties":{"a":{"type":"integer"}}}`
	tests := []struct {
		name, members string
		want          *Constraint
	}{
		{"text format", `"response_format":{"type":"text"}`, nil},
		{"json_object", `"response_format":{"type":"json_object"}`, &Constraint{Kind: ConstraintJSONObject, Param: "response_format"}},
		{"json_schema", `"response_format":{"type":"json_schema","json_schema":{"name":"x","strict":true,"schema":` + schema + `}}`,
			&Constraint{Kind: ConstraintJSONSchema, Param: "response_format.json_schema.schema", Schema: []byte(schema)}},
		{"json_schema without name", `"response_format":{"type":"json_schema","json_schema":{"schema":true}}`,
			&Constraint{Kind: ConstraintJSONSchema, Param: "response_format.json_schema.schema", Schema: []byte(`true`)}},
		{"structured json", `"structured_outputs":{"json":` + schema + `,"disable_any_whitespace":true}`,
			&Constraint{Kind: ConstraintJSONSchema, Param: "structured_outputs.json", Schema: []byte(schema), DisableAnyWhitespace: true}},
		{"structured json as a string", `"structured_outputs":{"json":"{\"type\":\"integer\"}"}`,
			&Constraint{Kind: ConstraintJSONSchema, Param: "structured_outputs.json", Schema: []byte(`{"type":"integer"}`)}},
		{"structured regex", `"structured_outputs":{"regex":"[a-z]+","backend":"xgrammar"}`,
			&Constraint{Kind: ConstraintRegex, Param: "structured_outputs.regex", Regex: "[a-z]+"}},
		{"structured choice", `"structured_outputs":{"choice":["yes","no"]}`,
			&Constraint{Kind: ConstraintChoice, Param: "structured_outputs.choice", Choice: []string{"yes", "no"}}},
		{"structured grammar", `"structured_outputs":{"grammar":"root ::= \"a\""}`,
			&Constraint{Kind: ConstraintGrammar, Param: "structured_outputs.grammar", Grammar: `root ::= "a"`}},
		{"structured json_object", `"structured_outputs":{"json_object":true}`,
			&Constraint{Kind: ConstraintJSONObject, Param: "structured_outputs.json_object"}},
		{"guided_json", `"guided_json":` + schema, &Constraint{Kind: ConstraintJSONSchema, Param: "guided_json", Schema: []byte(schema)}},
		{"guided_regex", `"guided_regex":"\\d+"`, &Constraint{Kind: ConstraintRegex, Param: "guided_regex", Regex: `\d+`}},
		{"guided_choice", `"guided_choice":["a"]`, &Constraint{Kind: ConstraintChoice, Param: "guided_choice", Choice: []string{"a"}}},
		{"guided_grammar", `"guided_grammar":"root ::= \"b\""`, &Constraint{Kind: ConstraintGrammar, Param: "guided_grammar", Grammar: `root ::= "b"`}},
		{"llama.cpp json_schema", `"json_schema":` + schema, &Constraint{Kind: ConstraintJSONSchema, Param: "json_schema", Schema: []byte(schema)}},
		{"llama.cpp grammar", `"grammar":"root ::= \"c\""`, &Constraint{Kind: ConstraintGrammar, Param: "grammar", Grammar: `root ::= "c"`}},
		{"empty llama.cpp grammar", `"grammar":""`, nil},
		{"text format and a guided regex", `"response_format":{"type":"text"},"guided_regex":"x"`, &Constraint{Kind: ConstraintRegex, Param: "guided_regex", Regex: "x"}},
		{"nulls", `"response_format":null,"structured_outputs":null,"guided_json":null`, nil},
	}
	for _, tc := range tests {
		for _, chat := range []bool{false, true} {
			var c *Common
			if chat {
				r, e := DecodeChatRequest([]byte(`{"messages":[{"role":"user","content":"x"}],` + tc.members + `}`))
				if e != nil {
					t.Errorf("%s (chat): %v", tc.name, e.Message)
					continue
				}
				c = &r.Common
			} else {
				r, e := DecodeCompletionRequest([]byte(`{"prompt":"x",` + tc.members + `}`))
				if e != nil {
					t.Errorf("%s (completions): %v", tc.name, e.Message)
					continue
				}
				c = &r.Common
			}
			if !reflect.DeepEqual(c.Constraint, tc.want) {
				t.Errorf("%s (chat %v): constraint %+v, want %+v", tc.name, chat, c.Constraint, tc.want)
			}
		}
	}
}

func TestDecodeSamplerControls(t *testing.T) {
	r, e := DecodeCompletionRequest([]byte(`{"prompt":"x","logit_bias":{"5":100,"7":-100,"9":0.5},"min_tokens":3,"ignore_eos":true}`))
	if e != nil {
		t.Fatal(e.Message)
	}
	if want := map[int32]float32{5: 100, 7: -100, 9: 0.5}; !reflect.DeepEqual(r.LogitBias, want) || r.MinTokens != 3 || !r.IgnoreEOS {
		t.Errorf("logit_bias %v min_tokens %d ignore_eos %v", r.LogitBias, r.MinTokens, r.IgnoreEOS)
	}
	r, e = DecodeCompletionRequest([]byte(`{"prompt":"x","logit_bias":{},"min_tokens":0}`))
	if e != nil || r.LogitBias != nil || r.MinTokens != 0 {
		t.Errorf("empty logit_bias and min_tokens 0: %+v %v", r, e)
	}
}

func TestDecodePromptList(t *testing.T) {
	r, e := DecodeCompletionRequest([]byte(`{"prompt":["a","b","c"],"n":2}`))
	if e != nil {
		t.Fatal(e.Message)
	}
	if want := []CompletionPrompt{{Text: "a"}, {Text: "b"}, {Text: "c"}}; !reflect.DeepEqual(r.Prompts, want) || r.Prompt != "a" {
		t.Errorf("string list: %+v", r.Prompts)
	}
	r, e = DecodeCompletionRequest([]byte(`{"prompt":[[1,2],[3]]}`))
	if e != nil {
		t.Fatal(e.Message)
	}
	if want := []CompletionPrompt{{Tokens: []int32{1, 2}, Tokenized: true}, {Tokens: []int32{3}, Tokenized: true}}; !reflect.DeepEqual(r.Prompts, want) || !r.TokenPrompt {
		t.Errorf("token lists: %+v", r.Prompts)
	}
}

func TestDecodeConstraintErrors(t *testing.T) {
	long := strings.Repeat(`"x",`, MaxChoices) + `"y"`
	var bias strings.Builder
	bias.WriteString(`{`)
	for i := range MaxLogitBiasLen + 1 {
		if i > 0 {
			bias.WriteString(",")
		}
		bias.WriteString(`"` + strconv.Itoa(i) + `":1`)
	}
	tests := []struct {
		members   string
		param     string
		substring string
	}{
		{`"response_format":"json"`, "response_format", "an object"},
		{`"response_format":{}`, "response_format.type", "required"},
		{`"response_format":{"type":"xml"}`, "response_format.type", "not supported"},
		{`"response_format":{"type":"json_schema"}`, "response_format.json_schema", "required"},
		{`"response_format":{"type":"json_schema","json_schema":{"name":"x"}}`, "response_format.json_schema.schema", "required"},
		{`"response_format":{"type":"json_schema","json_schema":{"name":3,"schema":{}}}`, "response_format.json_schema.name", "a string"},
		{`"response_format":{"type":"json_schema","json_schema":{"strict":"yes","schema":{}}}`, "response_format.json_schema.strict", "a boolean"},
		{`"response_format":{"type":"json_schema","json_schema":{"schema":[1]}}`, "response_format.json_schema.schema", "a JSON schema"},
		{`"response_format":{"type":"json_object"},"guided_regex":"a"`, "guided_regex", "both constrain"},
		{`"structured_outputs":{"regex":"a","choice":["b"]}`, "structured_outputs.choice", "both constrain"},
		{`"structured_outputs":{}`, "structured_outputs", "no constraint"},
		{`"structured_outputs":{"disable_any_whitespace":true}`, "structured_outputs", "no constraint"},
		{`"structured_outputs":{"regex":"a","whitespace_pattern":" "}`, "structured_outputs.whitespace_pattern", "not supported"},
		{`"structured_outputs":{"structural_tag":"{}"}`, "structured_outputs.structural_tag", "not supported"},
		{`"structured_outputs":{"json":"{oops"}`, "structured_outputs.json", "valid JSON"},
		{`"structured_outputs":{"regex":""}`, "structured_outputs.regex", "empty"},
		{`"structured_outputs":{"regex":5}`, "structured_outputs.regex", "a string"},
		{`"structured_outputs":{"choice":[]}`, "structured_outputs.choice", "at least one"},
		{`"structured_outputs":{"choice":["a",1]}`, "structured_outputs.choice[1]", "a string"},
		{`"structured_outputs":{"choice":[` + long + `]}`, "structured_outputs.choice", "at most 64"},
		{`"structured_outputs":{"json_object":"yes"}`, "structured_outputs.json_object", "a boolean"},
		{`"structured_outputs":{"regex":"a","disable_any_whitespace":1}`, "structured_outputs.disable_any_whitespace", "a boolean"},
		{`"structured_outputs":[1]`, "structured_outputs", "an object"},
		{`"guided_json":"nope"`, "guided_json", "valid JSON"},
		{`"guided_choice":"a"`, "guided_choice", "an array"},
		{`"guided_grammar":7`, "guided_grammar", "a string"},
		{`"guided_whitespace_pattern":"\\s*"`, "guided_whitespace_pattern", "not supported"},
		{`"json_schema":{},"grammar":"root ::= \"a\""`, "grammar", "both constrain"},
		{`"logit_bias":[1]`, "logit_bias", "an object"},
		{`"logit_bias":{"abc":1}`, "logit_bias", "token ids"},
		{`"logit_bias":{"-3":1}`, "logit_bias", "token ids"},
		{`"logit_bias":{"5":101}`, "logit_bias", "[-100, 100]"},
		{`"logit_bias":{"5":"x"}`, "logit_bias", "a number"},
		{`"logit_bias":` + bias.String() + `}`, "logit_bias", "at most 1024"},
		{`"min_tokens":-1`, "min_tokens", "0..2147483647"},
		{`"min_tokens":"3"`, "min_tokens", "an integer"},
	}
	for _, tc := range tests {
		for _, chat := range []bool{false, true} {
			var e *Error
			if chat {
				_, e = DecodeChatRequest([]byte(`{"messages":[{"role":"user","content":"x"}],` + tc.members + `}`))
			} else {
				_, e = DecodeCompletionRequest([]byte(`{"prompt":"x",` + tc.members + `}`))
			}
			if e == nil {
				t.Errorf("%.90s (chat %v) decoded, want an error about %s", tc.members, chat, tc.param)
				continue
			}
			if e.Status != 400 || e.Param != tc.param || !strings.Contains(e.Message, tc.substring) {
				t.Errorf("%.90s (chat %v): {%d param=%q %q}, want param %q containing %q", tc.members, chat, e.Status, e.Param, e.Message, tc.param, tc.substring)
			}
		}
	}
	_, e := DecodeCompletionRequest([]byte(`{"prompt":[` + strings.Repeat(`"a",`, MaxPrompts) + `"b"]}`))
	if e == nil || e.Param != "prompt" || !strings.Contains(e.Message, "at most 64") {
		t.Errorf("65 prompts: %v", e)
	}
	_, e = DecodeCompletionRequest([]byte(`{"prompt":[` + strings.Repeat(`"a",`, 10) + `"b"],"n":8}`))
	if e == nil || e.Param != "n" || !strings.Contains(e.Message, "88 choices") {
		t.Errorf("11 prompts with n 8: %v", e)
	}
}
