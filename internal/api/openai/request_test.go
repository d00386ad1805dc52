package openai

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestDecodeCompletionRequest(t *testing.T) {
	f := func(x float64) *float64 { return &x }
	i64 := func(x int64) *int64 { return &x }
	in := func(x int) *int { return &x }
	tests := []struct {
		name string
		body string
		want CompletionRequest
	}{
		{"minimal", `{"prompt":"hi"}`, CompletionRequest{Common: Common{N: 1}, Prompt: "hi"}},
		{"tokens", `{"model":"m","prompt":[1,2,3]}`,
			CompletionRequest{Common: Common{Model: "m", N: 1}, PromptTokens: []int32{1, 2, 3}, TokenPrompt: true}},
		{"one string in array", `{"prompt":["hi"]}`, CompletionRequest{Common: Common{N: 1}, Prompt: "hi"}},
		{"one token list in array", `{"prompt":[[5,6]]}`,
			CompletionRequest{Common: Common{N: 1}, PromptTokens: []int32{5, 6}, TokenPrompt: true}},
		{"all fields", `{"model":"m","prompt":"p","max_tokens":7,"temperature":0.5,"top_p":0.9,"top_k":40,"min_p":0.05,
			"seed":-3,"stop":["a","bc"],"n":2,"presence_penalty":1,"frequency_penalty":-1,"repetition_penalty":1.1,
			"stream":true,"stream_options":{"include_usage":true},"ignore_eos":true,"logprobs":3,"echo":false,
			"stop_token_ids":[9],"user":"u","unknown_thing":{"x":1},"logit_bias":{},"tools":null,"response_format":{"type":"text"}}`,
			CompletionRequest{Common: Common{Model: "m", MaxTokens: 7, MaxTokensParam: "max_tokens", Temperature: f(0.5), TopP: f(0.9),
				TopK: 40, MinP: 0.05, Seed: i64(-3), Stop: []string{"a", "bc"}, StopTokenIDs: []int32{9}, N: 2, PresencePenalty: 1,
				FrequencyPenalty: -1, RepetitionPenalty: f(1.1), Stream: true, IncludeUsage: true, IgnoreEOS: true},
				Prompt: "p", Logprobs: in(3)}},
		{"stop string", `{"prompt":"p","stop":"\n"}`, CompletionRequest{Common: Common{N: 1, Stop: []string{"\n"}}, Prompt: "p"}},
		{"max_completion_tokens wins", `{"prompt":"p","max_tokens":5,"max_completion_tokens":6}`,
			CompletionRequest{Common: Common{N: 1, MaxTokens: 6, MaxTokensParam: "max_completion_tokens"}, Prompt: "p"}},
		{"integral float", `{"prompt":"p","max_tokens":16.0}`,
			CompletionRequest{Common: Common{N: 1, MaxTokens: 16, MaxTokensParam: "max_tokens"}, Prompt: "p"}},
		{"nulls", `{"prompt":"p","temperature":null,"stop":null,"n":null,"logprobs":null,"seed":null,"prompt_logprobs":null}`,
			CompletionRequest{Common: Common{N: 1}, Prompt: "p"}},
		{"prompt_logprobs 0", `{"prompt":"p","prompt_logprobs":0}`, CompletionRequest{Common: Common{N: 1, PromptLogprobs: in(0)}, Prompt: "p"}},
		{"prompt_logprobs 20 with echo and logprobs", `{"prompt":"p","prompt_logprobs":20,"echo":true,"logprobs":0}`,
			CompletionRequest{Common: Common{N: 1, PromptLogprobs: in(20)}, Prompt: "p", Echo: true, Logprobs: in(0)}},
	}
	for _, tc := range tests {
		got, err := DecodeCompletionRequest([]byte(tc.body))
		if err != nil {
			t.Errorf("%s: DecodeCompletionRequest(%s) error %v, want none", tc.name, tc.body, err)
			continue
		}
		if tc.want.Prompts == nil {
			tc.want.Prompts = []CompletionPrompt{{Text: tc.want.Prompt, Tokens: tc.want.PromptTokens, Tokenized: tc.want.TokenPrompt}}
		}
		if !reflect.DeepEqual(*got, tc.want) {
			t.Errorf("%s: DecodeCompletionRequest(%s) = %+v, want %+v", tc.name, tc.body, *got, tc.want)
		}
	}
}

func TestDecodeChatRequest(t *testing.T) {
	one := 1
	tests := []struct {
		name string
		body string
		want ChatRequest
	}{
		{"string content", `{"messages":[{"role":"system","content":"s"},{"role":"user","content":"u","name":"bob"}]}`,
			ChatRequest{Common: Common{N: 1}, Messages: []Message{{Role: "system", Content: "s"}, {Role: "user", Content: "u"}}}},
		{"parts", `{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]}`,
			ChatRequest{Common: Common{N: 1}, Messages: []Message{{Role: "user", Content: "a\nb"}}}},
		{"developer and null assistant", `{"messages":[{"role":"developer","content":"d"},{"role":"assistant","content":null},{"role":"user","content":"x"}]}`,
			ChatRequest{Common: Common{N: 1}, Messages: []Message{{Role: "system", Content: "d"}, {Role: "assistant"}, {Role: "user", Content: "x"}}}},
		{"logprobs", `{"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":5,"max_completion_tokens":3}`,
			ChatRequest{Common: Common{N: 1, MaxTokens: 3, MaxTokensParam: "max_completion_tokens"}, Messages: []Message{{Role: "user", Content: "x"}},
				Logprobs: true, TopLogprobs: 5}},
		{"prompt_logprobs", `{"messages":[{"role":"user","content":"x"}],"prompt_logprobs":1}`,
			ChatRequest{Common: Common{N: 1, PromptLogprobs: &one}, Messages: []Message{{Role: "user", Content: "x"}}}},
	}
	for _, tc := range tests {
		got, err := DecodeChatRequest([]byte(tc.body))
		if err != nil {
			t.Errorf("%s: DecodeChatRequest(%s) error %v, want none", tc.name, tc.body, err)
			continue
		}
		if !reflect.DeepEqual(*got, tc.want) {
			t.Errorf("%s: DecodeChatRequest(%s) = %+v, want %+v", tc.name, tc.body, *got, tc.want)
		}
	}
}

// TestDecodeErrors checks that each bad body is a 400 naming the right
// parameter. The HTTP-level table in package server covers the statuses
// that depend on the model and the server.
func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		chat      bool
		body      string
		param     string
		substring string
	}{
		{false, ``, "", "empty"},
		{false, `[1]`, "", "JSON object"},
		{false, `{"prompt":`, "", "parse the JSON"},
		{false, `{"prompt":"a"} x`, "", "parse the JSON"},
		{false, `{}`, "prompt", "required"},
		{false, `{"prompt":true}`, "prompt", "got a boolean"},
		{false, `{"prompt":[]}`, "prompt", "empty"},
		{false, `{"prompt":["a",[1]]}`, "prompt[1]", "only strings or only arrays"},
		{false, `{"prompt":[[1],[]]}`, "prompt[1]", "non-empty array"},
		{false, `{"prompt":[[1],[2,"x"]]}`, "prompt[1][1]", "an integer"},
		{false, `{"prompt":[1,"a"]}`, "prompt[1]", "an integer"},
		{false, `{"prompt":[1,-2]}`, "prompt[1]", "0..2147483647"},
		{false, `{"prompt":[1.5]}`, "prompt[0]", "an integer"},
		{false, `{"prompt":"a","model":3}`, "model", "must be a string"},
		{false, `{"prompt":"a","max_tokens":"5"}`, "max_tokens", "got a string"},
		{false, `{"prompt":"a","max_tokens":0}`, "max_tokens", "at least 1"},
		{false, `{"prompt":"a","max_tokens":1000000000000}`, "max_tokens", "max_tokens is 1000000000000,"}, // not clamped (finding 10c)
		{true, `{"messages":[{"role":"user","content":"a"}],"max_completion_tokens":1e15}`, "max_completion_tokens", "max_completion_tokens is 1000000000000000,"},
		{false, `{"prompt":"a","max_completion_tokens":-1}`, "max_completion_tokens", "at least 1"},
		{false, `{"prompt":"a","temperature":2.5}`, "temperature", "[0, 2]"},
		{false, `{"prompt":"a","temperature":-0.1}`, "temperature", "[0, 2]"},
		{false, `{"prompt":"a","temperature":"hot"}`, "temperature", "a number"},
		{false, `{"prompt":"a","top_p":0}`, "top_p", "(0, 1]"},
		{false, `{"prompt":"a","top_p":1.01}`, "top_p", "(0, 1]"},
		{false, `{"prompt":"a","min_p":2}`, "min_p", "[0, 1]"},
		{false, `{"prompt":"a","top_k":-2}`, "top_k", "-1..2147483647"},
		{false, `{"prompt":"a","presence_penalty":3}`, "presence_penalty", "[-2, 2]"},
		{false, `{"prompt":"a","frequency_penalty":-2.5}`, "frequency_penalty", "[-2, 2]"},
		{false, `{"prompt":"a","repetition_penalty":0}`, "repetition_penalty", "(0, inf]"},
		{false, `{"prompt":"a","n":0}`, "n", "1..8"},
		{false, `{"prompt":"a","n":9}`, "n", "1..8"},
		{false, `{"prompt":"a","seed":1.5}`, "seed", "an integer"},
		{false, `{"prompt":"a","stop":5}`, "stop", "a string or an array"},
		{false, `{"prompt":"a","stop":["a","b","c","d","e"]}`, "stop", "at most 4"},
		{false, `{"prompt":"a","stop":["a",1]}`, "stop[1]", "a string"},
		{false, `{"prompt":"a","stop":""}`, "stop", "empty"},
		{false, `{"prompt":"a","stop":"` + strings.Repeat("x", MaxStopBytes+1) + `"}`, "stop", "at most 512"},
		{false, `{"prompt":"a","logprobs":21}`, "logprobs", "0..20"},
		{false, `{"prompt":"a","logprobs":true}`, "logprobs", "an integer"},
		{false, `{"prompt":"a","prompt_logprobs":21}`, "prompt_logprobs", "0..20"},
		{false, `{"prompt":"a","prompt_logprobs":-1}`, "prompt_logprobs", "0..20"},
		{false, `{"prompt":"a","prompt_logprobs":"x"}`, "prompt_logprobs", "an integer"},
		{false, `{"prompt":"a","prompt_logprobs":1.5}`, "prompt_logprobs", "an integer"},
		{false, `{"prompt":"a","prompt_logprobs":true}`, "prompt_logprobs", "an integer"},
		{false, `{"prompt":"a","stream":"yes"}`, "stream", "a boolean"},
		{false, `{"prompt":"a","stream_options":{"include_usage":1}}`, "stream_options.include_usage", "a boolean"},
		{false, `{"prompt":"a","stream_options":[]}`, "stream_options", "an object"},
		{false, `{"prompt":"a","echo":1}`, "echo", "a boolean"},
		{false, `{"prompt":"a","suffix":"end"}`, "suffix", "not supported"},
		{false, `{"prompt":"a","best_of":2}`, "best_of", "not supported"},
		{false, `{"prompt":"a","stop_token_ids":[-1]}`, "stop_token_ids[0]", "0..2147483647"},
		{true, `{}`, "messages", "required"},
		{true, `{"messages":[]}`, "messages", "at least one"},
		{true, `{"messages":{}}`, "messages", "an array"},
		{true, `{"messages":["hi"]}`, "messages[0]", "an object"},
		{true, `{"messages":[{"content":"x"}]}`, "messages[0].role", "required"},
		{true, `{"messages":[{"role":"robot","content":"x"}]}`, "messages[0].role", "system, user, assistant or tool"},
		{true, `{"messages":[{"role":"tool","content":"x","tool_call_id":"a"}]}`, "messages[0].role", "preceding message with 'tool_calls'"},
		{true, `{"messages":[{"role":"user"}]}`, "messages[0].content", "required"},
		{true, `{"messages":[{"role":"user","content":5}]}`, "messages[0].content", "a string or an array"},
		{true, `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{}}]}]}`, "messages[0].content[0].type", "text only"},
		{true, `{"messages":[{"role":"user","content":[{"type":"text"}]}]}`, "messages[0].content[0].text", "required"},
		{true, `{"messages":[{"role":"assistant","content":"x","tool_calls":[{"id":"1"}]}]}`, "messages[0].tool_calls[0].function", "Missing"},
		{true, `{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function"}]}`, "tools[0].function", "Missing"},
		{true, `{"messages":[{"role":"user","content":"x"}],"functions":[{"name":"f"}]}`, "functions", "not supported"},
		{true, `{"messages":[{"role":"user","content":"x"}],"logprobs":1}`, "logprobs", "a boolean"},
		{true, `{"messages":[{"role":"user","content":"x"}],"top_logprobs":2}`, "top_logprobs", "requires logprobs"},
		{true, `{"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":21}`, "top_logprobs", "0..20"},
		{true, `{"messages":[{"role":"user","content":"x"}],"echo":true}`, "echo", "not supported"},
		{true, `{"messages":[{"role":"user","content":"x"}],"prompt_logprobs":21}`, "prompt_logprobs", "0..20"},
		{true, `{"messages":[{"role":"user","content":"x"}],"prompt_logprobs":"x"}`, "prompt_logprobs", "an integer"},
	}
	for _, tc := range tests {
		var err *Error
		if tc.chat {
			_, err = DecodeChatRequest([]byte(tc.body))
		} else {
			_, err = DecodeCompletionRequest([]byte(tc.body))
		}
		if err == nil {
			t.Errorf("decode(%.80s) succeeded, want an error about %q", tc.body, tc.param)
			continue
		}
		if err.Status != 400 || err.Type != TypeInvalidRequest || err.Param != tc.param || !strings.Contains(err.Message, tc.substring) {
			t.Errorf("decode(%.80s) = {%d %s param=%q %q}, want {400 %s param=%q containing %q}",
				tc.body, err.Status, err.Type, err.Param, err.Message, TypeInvalidRequest, tc.param, tc.substring)
		}
	}
}

func TestErrorBody(t *testing.T) {
	e := Invalid("", CodeInvalidJSON, "bad")
	if got, want := string(e.MarshalBody()), `{"error":{"message":"bad","type":"invalid_request_error","param":null,"code":"invalid_json"}}`; got != want {
		t.Errorf("MarshalBody() = %s, want %s", got, want)
	}
	e = ContextLengthExceeded("messages", 100, 90, 20)
	if got := string(e.MarshalBody()); !strings.Contains(got, `"param":"messages"`) || !strings.Contains(got, "maximum context length is 100 tokens") {
		t.Errorf("ContextLengthExceeded body = %s, want param messages and the context length", got)
	}
	// The input is named as the request names it: a chat's messages, a
	// completion's prompt (one of a list too).
	for _, tc := range []struct {
		param     string
		maxTokens int
		want      string
	}{
		{"messages", 20, "(90 in the messages, 20 in the completion). Please reduce the length of the messages or completion."},
		{"messages", 0, "you requested 90 tokens in the messages. Please reduce the length of the messages."},
		{"prompt", 20, "(90 in the prompt, 20 in the completion). Please reduce the length of the prompt or completion."},
		{"prompt[2]", 0, "you requested 90 tokens in the prompt. Please reduce the length of the prompt."},
	} {
		if got := ContextLengthExceeded(tc.param, 100, 90, tc.maxTokens).Message; !strings.Contains(got, tc.want) {
			t.Errorf("ContextLengthExceeded(%q, max_tokens %d) = %q, want it to contain %q", tc.param, tc.maxTokens, got, tc.want)
		}
	}
}

// checkDecoded asserts the invariants every successfully decoded request
// keeps.
func checkDecoded(t *testing.T, c *Common) {
	t.Helper()
	if c.N < 1 || c.N > MaxN {
		t.Errorf("decoded n = %d, want 1..%d", c.N, MaxN)
	}
	if len(c.Stop) > MaxStop {
		t.Errorf("decoded %d stop strings, want at most %d", len(c.Stop), MaxStop)
	}
	for _, s := range c.Stop {
		if s == "" || len(s) > MaxStopBytes {
			t.Errorf("decoded stop string of %d bytes, want 1..%d", len(s), MaxStopBytes)
		}
	}
	if c.MaxTokens < 0 {
		t.Errorf("decoded max tokens %d, want >= 0", c.MaxTokens)
	}
	if c.Temperature != nil && (*c.Temperature < 0 || *c.Temperature > MaxTemperature) {
		t.Errorf("decoded temperature %v out of range", *c.Temperature)
	}
	if c.TopP != nil && (*c.TopP <= 0 || *c.TopP > 1) {
		t.Errorf("decoded top_p %v out of range", *c.TopP)
	}
	if c.PromptLogprobs != nil && (*c.PromptLogprobs < 0 || *c.PromptLogprobs > MaxLogprobs) {
		t.Errorf("decoded prompt_logprobs %d out of range", *c.PromptLogprobs)
	}
	if len(c.LogitBias) > MaxLogitBiasLen {
		t.Errorf("decoded %d logit_bias entries", len(c.LogitBias))
	}
	for id, b := range c.LogitBias {
		if id < 0 || !(b >= -MaxLogitBias && b <= MaxLogitBias) {
			t.Errorf("decoded logit_bias %d: %v out of range", id, b)
		}
	}
	if c.MinTokens < 0 {
		t.Errorf("decoded min_tokens %d", c.MinTokens)
	}
	if k := c.Constraint; k != nil {
		ok := false
		switch k.Kind {
		case ConstraintJSONSchema:
			ok = json.Valid(k.Schema)
		case ConstraintJSONObject:
			ok = true
		case ConstraintRegex:
			ok = k.Regex != ""
		case ConstraintChoice:
			ok = len(k.Choice) > 0 && len(k.Choice) <= MaxChoices
		case ConstraintGrammar:
			ok = strings.TrimSpace(k.Grammar) != ""
		}
		if !ok || k.Param == "" {
			t.Errorf("decoded constraint %+v is not well formed", k)
		}
	}
}

func FuzzDecodeCompletionRequest(f *testing.F) {
	f.Add([]byte(`{"prompt":"hello","max_tokens":4,"stop":["\n"],"n":2,"logprobs":2}`))
	f.Add([]byte(`{"prompt":[[1,2]],"stream":true,"stream_options":{"include_usage":true}}`))
	f.Add([]byte(`{"prompt":"a","prompt_logprobs":3,"echo":true,"logprobs":1}`))
	f.Add([]byte(`{"prompt":["a","b"],"n":2,"logit_bias":{"5":-100},"min_tokens":2,"structured_outputs":{"regex":"[a-z]+","disable_any_whitespace":true}}`))
	f.Add([]byte(`{"prompt":[[1],[2,3]],"guided_json":"{\"type\":\"integer\"}","response_format":{"type":"text"}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := DecodeCompletionRequest(body)
		if err != nil {
			if err.Status != 400 || err.Message == "" {
				t.Errorf("DecodeCompletionRequest(%q) error = %+v, want a 400 with a message", body, err)
			}
			return
		}
		checkDecoded(t, &r.Common)
		if r.Logprobs != nil && (*r.Logprobs < 0 || *r.Logprobs > MaxLogprobs) {
			t.Errorf("decoded logprobs %d out of range", *r.Logprobs)
		}
		for _, id := range r.PromptTokens {
			if id < 0 {
				t.Errorf("decoded negative token id %d", id)
			}
		}
		if len(r.Prompts) == 0 || len(r.Prompts) > MaxPrompts || len(r.Prompts)*r.N > MaxCompletionChoices {
			t.Errorf("decoded %d prompts with n %d", len(r.Prompts), r.N)
		}
	})
}

func FuzzDecodeChatRequest(f *testing.F) {
	f.Add([]byte(`{"messages":[{"role":"user","content":"hi"}],"max_completion_tokens":4,"logprobs":true,"top_logprobs":2}`))
	f.Add([]byte(`{"messages":[{"role":"user","content":[{"type":"text","text":"a"}]}],"stop":"x"}`))
	f.Add([]byte(`{"messages":[{"role":"user","content":"a"}],"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object"}}},"logit_bias":{"1":1}}`))
	f.Add([]byte(`{"messages":[{"role":"user","content":"a"}],"structured_outputs":{"choice":["a","b"]},"grammar":""}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := DecodeChatRequest(body)
		if err != nil {
			if err.Status != 400 || err.Message == "" {
				t.Errorf("DecodeChatRequest(%q) error = %+v, want a 400 with a message", body, err)
			}
			return
		}
		checkDecoded(t, &r.Common)
		if len(r.Messages) == 0 {
			t.Errorf("DecodeChatRequest(%q) gave no messages", body)
		}
		for _, m := range r.Messages {
			if m.Role != "system" && m.Role != "user" && m.Role != "assistant" && m.Role != "tool" {
				t.Errorf("decoded role %q", m.Role)
			}
			if len(m.ToolCalls) > 0 && m.Role != "assistant" {
				t.Errorf("decoded tool calls in a %s message", m.Role)
			}
		}
		if r.TopLogprobs > 0 && !r.Logprobs {
			t.Errorf("decoded top_logprobs %d without logprobs", r.TopLogprobs)
		}
	})
}
