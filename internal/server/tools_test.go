package server

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tandem/internal/api/openai"
	"tandem/internal/engine"
	"tandem/internal/engine/grammar"
	"tandem/internal/engine/kernels"
	"tandem/internal/engine/model"
	"tandem/internal/engine/tensor"
	"tandem/internal/server/chat"
	"tandem/internal/server/toolcall"
	"tandem/internal/synth"
)

// readTemplate reads a template of the chat package's testdata/templates.
func readTemplate(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("chat/testdata/templates", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// charTokens spells s with testVocab's one-character tokens.
func charTokens(s string) []string {
	var out []string
	for _, r := range s {
		switch r {
		case ' ':
			out = append(out, "▁")
		case '\n':
			out = append(out, "<0x0A>")
		default:
			out = append(out, string(r))
		}
	}
	return out
}

const toolsJSON = `[{"type":"function","function":{"name":"get_weather","description":"Weather in a city.",` +
	`"parameters":{"type":"object","properties":{"city":{"type":"string","maxLength":10},"unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["city"]}}},` +
	`{"type":"function","function":{"name":"search","parameters":{"type":"object","properties":{"query":{"type":"string","maxLength":8}},"required":["query"]}}}]`

// toolServer serves a fake backend whose model writes out (one token per
// character) with the Qwen 3 template (Hermes tool calls).
func toolServer(t *testing.T, out string, o Options) (*Server, *fakeBackend) {
	t.Helper()
	tok := testVocab(t, readTemplate(t, "qwen3.jinja"), true)
	fb := newFake(t, tok, script(append(tokens(t, tok, 0, charTokens(out)...), done(engine.FinishStop))))
	fb.cfg.Context = 1 << 16
	s, _ := newTestServer(t, fb, o)
	return s, fb
}

const qwenCall = "I will check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}\n</tool_call>"

// TestChatToolCalls: with tools (auto) the Hermes output of the fake model
// comes back as message.tool_calls with content, finish_reason
// tool_calls; streamed, as delta.tool_calls chunks (id and name first,
// then arguments in pieces) that add up to the same; with tool_choice none
// the text is content.
func TestChatToolCalls(t *testing.T) {
	body := `{"messages":[{"role":"user","content":"Weather in Paris?"}],"tools":` + toolsJSON + `%s}`
	s, fb := toolServer(t, qwenCall, Options{})
	rec := do(s.Handler(), "POST", "/v1/chat/completions", fmt.Sprintf(body, ""))
	var r openai.ChatResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil || rec.Code != 200 {
		t.Fatalf("status %d %s: %v", rec.Code, rec.Body, err)
	}
	ch := r.Choices[0]
	if deref(ch.FinishReason) != "tool_calls" || ch.Message.Content != "I will check." || len(ch.Message.ToolCalls) != 1 {
		t.Fatalf("choice %+v, want content, one call and finish tool_calls (%s)", ch, rec.Body)
	}
	tc := ch.Message.ToolCalls[0]
	if !strings.HasPrefix(tc.ID, "call_") || tc.Type != "function" || tc.Function.Name != "get_weather" ||
		tc.Function.Arguments != `{"city": "Paris", "unit": "celsius"}` {
		t.Fatalf("tool call %+v", tc)
	}
	if g := fb.submitted()[0].req.Grammar; g != nil {
		t.Errorf("auto without strict tools submitted a grammar")
	}
	// The template got the tools.
	prompt := fb.tok.Decode(fb.submitted()[0].req.Prompt)
	if !strings.Contains(prompt, `"name": "get_weather"`) || !strings.Contains(prompt, "<tools>") {
		t.Errorf("prompt does not list the tools: %q", prompt)
	}

	s, _ = toolServer(t, qwenCall, Options{})
	chunks := chatChunks(t, do(s.Handler(), "POST", "/v1/chat/completions", fmt.Sprintf(body, `,"stream":true`)))
	var content strings.Builder
	var calls []openai.ToolCall
	finish, pieces := "", 0
	for _, c := range chunks {
		for _, cc := range c.Choices {
			if cc.Delta.Content != nil {
				content.WriteString(*cc.Delta.Content)
			}
			for _, d := range cc.Delta.ToolCalls {
				if d.Index == len(calls) {
					if d.ID == "" || d.Type != "function" || d.Function == nil || d.Function.Name == "" {
						t.Fatalf("first delta of call %d: %+v", d.Index, d)
					}
					calls = append(calls, openai.ToolCall{ID: d.ID, Type: d.Type, Function: openai.ToolCallFunction{Name: d.Function.Name}})
				} else if d.ID != "" || d.Function.Name != "" {
					t.Fatalf("later delta carries id or name: %+v", d)
				}
				calls[d.Index].Function.Arguments += d.Function.Arguments
				pieces++
			}
			if cc.FinishReason != nil {
				finish = *cc.FinishReason
			}
		}
	}
	if content.String() != "I will check." || len(calls) != 1 || calls[0].Function.Name != "get_weather" ||
		calls[0].Function.Arguments != tc.Function.Arguments || finish != "tool_calls" {
		t.Fatalf("streamed content %q calls %+v finish %q; want those of the answer", content.String(), calls, finish)
	}
	if pieces < 5 {
		t.Errorf("arguments streamed in %d pieces, want them incremental", pieces)
	}

	s, _ = toolServer(t, qwenCall, Options{})
	rec = do(s.Handler(), "POST", "/v1/chat/completions", fmt.Sprintf(body, `,"tool_choice":"none"`))
	r = openai.ChatResponse{}
	json.Unmarshal(rec.Body.Bytes(), &r)
	if rec.Code != 200 || r.Choices[0].Message.Content != qwenCall || len(r.Choices[0].Message.ToolCalls) != 0 || deref(r.Choices[0].FinishReason) != "stop" {
		t.Fatalf("tool_choice none: %s", rec.Body)
	}

	// Without tools, nothing is parsed.
	s, _ = toolServer(t, qwenCall, Options{})
	rec = do(s.Handler(), "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}]}`)
	r = openai.ChatResponse{}
	json.Unmarshal(rec.Body.Bytes(), &r)
	if r.Choices[0].Message.Content != qwenCall {
		t.Fatalf("no tools: content %q", r.Choices[0].Message.Content)
	}
}

// TestChatToolChoiceGrammar: required and named choices, and auto with a
// strict tool, submit a grammar; an unusable schema is a 400 naming it; a
// --tool-call-parser override changes the syntax read.
func TestChatToolChoiceGrammar(t *testing.T) {
	for _, tc := range []struct{ extra, tools string }{
		{`,"tool_choice":"required"`, toolsJSON},
		{`,"tool_choice":{"type":"function","function":{"name":"search"}}`, toolsJSON},
		{``, strings.Replace(toolsJSON, `"name":"search"`, `"name":"search","strict":true`, 1)},
	} {
		s, fb := toolServer(t, qwenCall, Options{})
		rec := do(s.Handler(), "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"tools":`+tc.tools+tc.extra+`}`)
		if rec.Code != 200 || fb.submitted()[0].req.Grammar == nil {
			t.Errorf("%s: status %d, grammar %v; want 200 and a grammar", tc.extra, rec.Code, fb.submitted()[0].req.Grammar != nil)
		}
	}
	bad := `[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"not":{}}}}}}]`
	s, fb := toolServer(t, qwenCall, Options{})
	rec := do(s.Handler(), "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"tool_choice":"required","tools":`+bad+`}`)
	var e struct{ Error openai.Error }
	json.Unmarshal(rec.Body.Bytes(), &e)
	if rec.Code != 400 || e.Error.Param != "tools[0].function.parameters" || !strings.Contains(e.Error.Message, "not") || len(fb.submitted()) != 0 {
		t.Errorf("unsupported schema: %d %s", rec.Code, rec.Body)
	}

	s, fb = toolServer(t, qwenCall, Options{})
	rec = do(s.Handler(), "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"tool_choice":"required","tools":`+toolsJSON+
		`,"response_format":{"type":"json_object"}}`)
	if rec.Code != 400 || !strings.Contains(rec.Body.String(), "tool_choice") || len(fb.submitted()) != 0 {
		t.Errorf("tool_choice required with response_format: %d %s, want a 400 naming tool_choice", rec.Code, rec.Body)
	}

	llama := `{"name": "search", "parameters": {"query": "x"}}`
	s, _ = toolServer(t, llama, Options{ToolCallParser: "llama3_json"})
	rec = do(s.Handler(), "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"tools":`+toolsJSON+`}`)
	var r openai.ChatResponse
	json.Unmarshal(rec.Body.Bytes(), &r)
	if len(r.Choices) != 1 || len(r.Choices[0].Message.ToolCalls) != 1 || r.Choices[0].Message.ToolCalls[0].Function.Arguments != `{"query": "x"}` {
		t.Errorf("llama3_json override: %s", rec.Body)
	}
}

// TestToolChoiceAfterThinking: with the Qwen 3 template (reasoning parser
// on) a required call may follow a reasoning block: the submitted grammar
// accepts the model's "<think>...</think>" then the call, the answer has
// the reasoning in reasoning_content and the call in tool_calls; with
// enable_thinking false (the prompt closed the block) the grammar refuses
// a reasoning block.
func TestToolChoiceAfterThinking(t *testing.T) {
	out := "<think>\nThe user wants weather.\n</think>\n\n<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"Paris\"}}\n</tool_call>"
	body := `{"messages":[{"role":"user","content":"Weather?"}],"tools":` + toolsJSON + `,"tool_choice":"required"%s}`
	s, fb := toolServer(t, out, Options{})
	rec := do(s.Handler(), "POST", "/v1/chat/completions", fmt.Sprintf(body, ""))
	var r openai.ChatResponse
	json.Unmarshal(rec.Body.Bytes(), &r)
	if rec.Code != 200 || deref(r.Choices[0].Message.ReasoningContent) != "The user wants weather." || r.Choices[0].Message.Content != "" ||
		len(r.Choices[0].Message.ToolCalls) != 1 || deref(r.Choices[0].FinishReason) != "tool_calls" {
		t.Fatalf("answer %s", rec.Body)
	}
	v, err := grammar.FromTokenizer(fb.tok)
	if err != nil {
		t.Fatal(err)
	}
	accepts := func(g *grammar.Grammar, text string) bool {
		m := grammar.NewMatcher(g, v)
		return m.AcceptBytes([]byte(text)) == nil && m.CanEnd()
	}
	if g := fb.submitted()[0].req.Grammar; g == nil || !accepts(g, out) {
		t.Fatalf("the grammar does not accept the reasoning then the call")
	}
	s, fb = toolServer(t, out, Options{})
	do(s.Handler(), "POST", "/v1/chat/completions", fmt.Sprintf(body, `,"chat_template_kwargs":{"enable_thinking":false}`))
	call := out[strings.Index(out, "<tool_call>"):]
	if g := fb.submitted()[0].req.Grammar; g == nil || accepts(g, out) || !accepts(g, call) {
		t.Fatalf("enable_thinking false: the grammar must take the call and refuse a reasoning block")
	}
}

// TestToolMarkerControlToken: a format marker that the vocabulary has as a
// control token (decoded as nothing) is kept in the parsed output.
func TestToolMarkerControlToken(t *testing.T) {
	tok := testVocab(t, "", true)
	cfg, err := newToolConfig("", mustTemplate(t, "[TOOL_CALLS]"), tok)
	if err != nil || cfg.format != toolcall.Mistral {
		t.Fatalf("format %v, %v", cfg.format, err)
	}
	// testVocab has no [TOOL_CALLS] token: BOS, a control token, plays it.
	bos := tok.BOS()
	c := newChoiceState(tok.NewContinuationDecoder(), nil)
	c.keep = map[int32]string{bos: "[TOOL_CALLS]"}
	for _, id := range append([]int32{bos}, tokenIDs(t, tok, charTokens(`[{"name": "f", "arguments": {}}]`)...)...) {
		c.add(engine.Token{ID: id})
	}
	c.end()
	text, _ := c.take()
	r := toolcall.Parse(toolcall.Mistral, text)
	if len(r.Calls) != 1 || r.Calls[0].Name != "f" {
		t.Fatalf("text %q parsed as %+v", text, r)
	}
}

func mustTemplate(t *testing.T, src string) *chat.Template {
	t.Helper()
	ct, err := chat.NewTemplate(src, "", "")
	if err != nil {
		t.Fatal(err)
	}
	return ct
}

// newToolEngineServer serves the synthesized tiny model through the real
// engine, with chat template tmpl.
func newToolEngineServer(t *testing.T, tmpl string) *Server {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	cfg, err := synth.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	if err := synth.Write(path, synth.Options{Config: cfg, Type: tensor.Q8_0, Seed: 5}); err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	pool := kernels.NewPool(1)
	e, err := engine.New(model.NewRunner(m, pool), engine.Config{PageTokens: 16, Pages: 256, PrefixCache: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.Close()
		pool.Close()
		m.Close()
	})
	s, _ := newTestServer(t, EngineBackend(e), Options{ChatTemplate: tmpl})
	return s
}

// checkWeatherArgs validates arguments against toolsJSON's schemas.
func checkWeatherArgs(t *testing.T, c openai.ToolCall) {
	t.Helper()
	var args map[string]any
	if err := json.Unmarshal([]byte(c.Function.Arguments), &args); err != nil {
		t.Fatalf("call %s: arguments %q are not a JSON object: %v", c.Function.Name, c.Function.Arguments, err)
	}
	want := map[string][]string{"get_weather": {"city", "unit"}, "search": {"query"}}[c.Function.Name]
	if want == nil {
		t.Fatalf("call of unknown function %q", c.Function.Name)
	}
	for k, v := range args {
		s, isString := v.(string)
		if !isString || !strings.Contains(strings.Join(want, " "), k) {
			t.Fatalf("call %s: argument %s=%v not in the schema (%s)", c.Function.Name, k, v, c.Function.Arguments)
		}
		if (k == "city" && len([]rune(s)) > 10) || (k == "query" && len([]rune(s)) > 8) || (k == "unit" && s != "celsius" && s != "fahrenheit") {
			t.Fatalf("call %s: argument %s=%q breaks the schema", c.Function.Name, k, s)
		}
	}
	if _, ok := args[want[0]]; !ok {
		t.Fatalf("call %s: required %s missing in %s", c.Function.Name, want[0], c.Function.Arguments)
	}
}

// TestEngineToolChoice runs required and named tool choices through the
// real engine on a random-weight model with the Qwen 3 (Hermes) and
// Llama 3.2 (JSON) templates: every answer is exactly one call of an
// allowed function whose arguments follow its schema, with finish_reason
// tool_calls, streamed and not.
func TestEngineToolChoice(t *testing.T) {
	for _, tmpl := range []string{"qwen3.jinja", "llama3.2.jinja"} {
		s := newToolEngineServer(t, readTemplate(t, tmpl))
		for _, choice := range []string{`"required"`, `{"type":"function","function":{"name":"search"}}`} {
			for seed := range 3 {
				for _, stream := range []bool{false, true} {
					// No thinking: a random model would think until max_tokens.
					body := fmt.Sprintf(`{"messages":[{"role":"user","content":"Weather?"}],"tools":%s,"tool_choice":%s,"parallel_tool_calls":false,"max_tokens":300,"seed":%d,"stream":%v,"chat_template_kwargs":{"enable_thinking":false}}`,
						toolsJSON, choice, seed, stream)
					rec := do(s.Handler(), "POST", "/v1/chat/completions", body)
					var calls []openai.ToolCall
					var content, finish string
					if stream {
						for _, c := range chatChunks(t, rec) {
							for _, cc := range c.Choices {
								if cc.Delta.Content != nil {
									content += *cc.Delta.Content
								}
								for _, d := range cc.Delta.ToolCalls {
									if d.Index == len(calls) {
										calls = append(calls, openai.ToolCall{ID: d.ID, Type: d.Type, Function: openai.ToolCallFunction{Name: d.Function.Name}})
									}
									calls[d.Index].Function.Arguments += d.Function.Arguments
								}
								if cc.FinishReason != nil {
									finish = *cc.FinishReason
								}
							}
						}
					} else {
						var r openai.ChatResponse
						if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil || rec.Code != 200 {
							t.Fatalf("%s %s: %d %s", tmpl, choice, rec.Code, rec.Body)
						}
						calls, content, finish = r.Choices[0].Message.ToolCalls, r.Choices[0].Message.Content, deref(r.Choices[0].FinishReason)
					}
					if len(calls) != 1 || content != "" || finish != "tool_calls" {
						t.Fatalf("%s %s seed %d stream %v: content %q, %d calls, finish %q; want one call only", tmpl, choice, seed, stream, content, len(calls), finish)
					}
					if strings.Contains(choice, "search") && calls[0].Function.Name != "search" {
						t.Fatalf("%s: named search, called %s", tmpl, calls[0].Function.Name)
					}
					checkWeatherArgs(t, calls[0])
					if seed == 0 && !stream {
						t.Logf("%s %s: %s(%s)", tmpl, choice, calls[0].Function.Name, calls[0].Function.Arguments)
					}
				}
			}
		}
	}
}

// TestToolFormatOfTemplates: the tool-call syntax chosen for each template
// of the chat package's testdata.
func TestToolFormatOfTemplates(t *testing.T) {
	tok := testVocab(t, "", true)
	for tmpl, want := range map[string]toolcall.Format{
		"qwen3.jinja": toolcall.Hermes, "qwen3-gguf.jinja": toolcall.Hermes, "llama3.2.jinja": toolcall.Llama3JSON,
		"ministral3.jinja": toolcall.Mistral, "llama3.jinja": toolcall.Generic, "gemma3.jinja": toolcall.Generic,
		"phi3.jinja": toolcall.Generic,
	} {
		c, err := newToolConfig("auto", mustTemplate(t, readTemplate(t, tmpl)), tok)
		if err != nil || c.format != want {
			t.Errorf("%s: format %q (%v), want %q", tmpl, c.format, err, want)
		}
		if c.mistralNames != (tmpl == "ministral3.jinja") {
			t.Errorf("%s: Mistral name form %v", tmpl, c.mistralNames)
		}
	}
	if _, err := newToolConfig("pythonic", mustTemplate(t, ""), tok); err == nil {
		t.Error("an unknown parser name was accepted")
	}
}
