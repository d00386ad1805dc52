package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"tandem/internal/api/openai"
	"tandem/internal/engine"
)

type errorDoc struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

func decodeError(t *testing.T, body string) errorDoc {
	t.Helper()
	var e errorDoc
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("error body %q is not JSON: %v", body, err)
	}
	return e
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func TestBadRequests(t *testing.T) {
	tok := testVocab(t, llama2Template, true)
	long := strings.Repeat("a ", 70)
	tests := []struct {
		name       string
		method     string
		path       string
		body       string
		submitErr  error
		notReady   bool
		panicking  bool
		status     int
		typ, param string
		code       string
		substring  string
	}{
		{"malformed JSON", "POST", "/v1/completions", `{"prompt": "x",`, nil, false, false, 400, "invalid_request_error", "", "invalid_json", "parse the JSON"},
		{"wrong type", "POST", "/v1/completions", `{"prompt": "x", "max_tokens": "ten"}`, nil, false, false, 400, "invalid_request_error", "max_tokens", "invalid_type", "must be an integer"},
		{"wrong type in chat", "POST", "/v1/chat/completions", `{"messages": [{"role": "user", "content": 7}]}`, nil, false, false, 400, "invalid_request_error", "messages[0].content", "invalid_type", "a string or an array"},
		{"tools", "POST", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]}`, nil, false, false, 400, "invalid_request_error", "tools[0].function", "invalid_value", "Missing required parameter"},
		{"logit_bias outside the vocabulary", "POST", "/v1/completions", `{"prompt": "x", "logit_bias": {"99999": 5}}`, nil, false, false, 400, "invalid_request_error", "logit_bias", "invalid_value", "outside this model's vocabulary"},
		{"min_tokens over max_tokens", "POST", "/v1/completions", `{"prompt": "x", "max_tokens": 3, "min_tokens": 4}`, nil, false, false, 400, "invalid_request_error", "min_tokens", "invalid_value", "more than the 3 tokens"},
		{"schema keyword not enforceable", "POST", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": {"type": "object", "properties": {"a": {"not": {"type": "string"}}}}}}}`, nil, false, false, 400, "invalid_request_error", "response_format.json_schema.schema", "unsupported_parameter", "not"},
		{"schema keyword multipleOf", "POST", "/v1/completions", `{"prompt": "x", "guided_json": {"type": "integer", "multipleOf": 3}}`, nil, false, false, 400, "invalid_request_error", "guided_json", "unsupported_parameter", "multipleOf"},
		{"bad regex", "POST", "/v1/completions", `{"prompt": "x", "structured_outputs": {"regex": "(ab"}}`, nil, false, false, 400, "invalid_request_error", "structured_outputs.regex", "invalid_value", "cannot be compiled"},
		{"bad GBNF", "POST", "/v1/completions", `{"prompt": "x", "structured_outputs": {"grammar": "root ::= ("}}`, nil, false, false, 400, "invalid_request_error", "structured_outputs.grammar", "invalid_value", "cannot be compiled"},
		{"two constraints", "POST", "/v1/completions", `{"prompt": "x", "guided_regex": "a", "guided_choice": ["b"]}`, nil, false, false, 400, "invalid_request_error", "guided_choice", "invalid_value", "both constrain"},
		{"suffix", "POST", "/v1/completions", `{"prompt": "x", "suffix": "y"}`, nil, false, false, 400, "invalid_request_error", "suffix", "unsupported_parameter", "not supported"},
		{"prompt longer than context", "POST", "/v1/completions", `{"prompt": "` + long + `"}`, nil, false, false, 400, "invalid_request_error", "prompt", "context_length_exceeded", "maximum context length is 64 tokens"},
		{"prompt plus max_tokens over context", "POST", "/v1/completions", `{"prompt": "a", "max_tokens": 63}`, nil, false, false, 400, "invalid_request_error", "prompt", "context_length_exceeded", "maximum context length is 64 tokens"},
		{"chat over context", "POST", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "` + long + `"}]}`, nil, false, false, 400, "invalid_request_error", "messages", "context_length_exceeded", "maximum context length is 64 tokens"},
		{"max_tokens zero", "POST", "/v1/completions", `{"prompt": "x", "max_tokens": 0}`, nil, false, false, 400, "invalid_request_error", "max_tokens", "invalid_value", "at least 1"},
		{"max_tokens over context", "POST", "/v1/completions", `{"prompt": "x", "max_tokens": 65}`, nil, false, false, 400, "invalid_request_error", "max_tokens", "invalid_value", "maximum context length is 64"},
		{"max_completion_tokens over context", "POST", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": 100}`, nil, false, false, 400, "invalid_request_error", "max_completion_tokens", "invalid_value", "maximum context length is 64"},
		{"temperature", "POST", "/v1/completions", `{"prompt": "x", "temperature": 2.5}`, nil, false, false, 400, "invalid_request_error", "temperature", "invalid_value", "[0, 2]"},
		{"top_p", "POST", "/v1/completions", `{"prompt": "x", "top_p": 1.5}`, nil, false, false, 400, "invalid_request_error", "top_p", "invalid_value", "(0, 1]"},
		{"presence_penalty", "POST", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "x"}], "presence_penalty": -3}`, nil, false, false, 400, "invalid_request_error", "presence_penalty", "invalid_value", "[-2, 2]"},
		{"token id outside the vocabulary", "POST", "/v1/completions", `{"prompt": [1, 99999]}`, nil, false, false, 400, "invalid_request_error", "prompt", "invalid_value", "outside this model's vocabulary"},
		{"prompt_logprobs over 20", "POST", "/v1/completions", `{"prompt": "x", "prompt_logprobs": 21}`, nil, false, false, 400, "invalid_request_error", "prompt_logprobs", "invalid_value", "0..20"},
		{"prompt_logprobs negative", "POST", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "x"}], "prompt_logprobs": -1}`, nil, false, false, 400, "invalid_request_error", "prompt_logprobs", "invalid_value", "0..20"},
		{"prompt_logprobs a string", "POST", "/v1/completions", `{"prompt": "x", "prompt_logprobs": "x"}`, nil, false, false, 400, "invalid_request_error", "prompt_logprobs", "invalid_type", "must be an integer"},
		{"template raises", "POST", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]}`, nil, false, false, 400, "invalid_request_error", "messages", "invalid_value", "must alternate"},
		{"unknown model", "POST", "/v1/completions", `{"model": "gpt-4", "prompt": "x"}`, nil, false, false, 404, "invalid_request_error", "model", "model_not_found", `"gpt-4" does not exist`},
		{"unknown model id", "GET", "/v1/models/gpt-4", ``, nil, false, false, 404, "invalid_request_error", "model", "model_not_found", "does not exist"},
		{"unknown path", "GET", "/v2/things", ``, nil, false, false, 404, "invalid_request_error", "", "unknown_url", "Unknown endpoint"},
		{"body over the limit", "POST", "/v1/completions", `{"prompt": "` + strings.Repeat("x", 2048) + `"}`, nil, false, false, 413, "invalid_request_error", "", "request_too_large", "larger than the limit of 1024 bytes"},
		{"wrong method", "GET", "/v1/completions", ``, nil, false, false, 405, "invalid_request_error", "", "method_not_allowed", "use POST"},
		{"wrong method on models", "DELETE", "/v1/models", ``, nil, false, false, 405, "invalid_request_error", "", "method_not_allowed", "use GET, HEAD"},
		{"queue full", "POST", "/v1/completions", `{"prompt": "x"}`, fmt.Errorf("%w (3 requests waiting)", engine.ErrQueueFull), false, false, 429, "rate_limit_error", "", "rate_limit_exceeded", "overloaded"},
		{"engine says too long", "POST", "/v1/completions", `{"prompt": "x"}`, fmt.Errorf("%w: too long", engine.ErrTooLong), false, false, 400, "invalid_request_error", "prompt", "context_length_exceeded", "too long"},
		{"engine says bad request", "POST", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "x"}]}`, fmt.Errorf("%w: bad", engine.ErrBadRequest), false, false, 400, "invalid_request_error", "messages", "invalid_value", "bad"},
		{"shutting down", "POST", "/v1/completions", `{"prompt": "x"}`, engine.ErrClosed, false, false, 503, "service_unavailable_error", "", "service_unavailable", "shutting down"},
		{"not ready", "POST", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "x"}]}`, nil, true, false, 503, "service_unavailable_error", "", "service_unavailable", "not ready"},
		{"other backend failure", "POST", "/v1/completions", `{"prompt": "x"}`, errors.New("disk on fire"), false, false, 500, "server_error", "", "internal_error", "disk on fire"},
		{"handler panic", "POST", "/v1/completions", `{"prompt": "x"}`, nil, false, true, 500, "server_error", "", "internal_error", "unexpected failure"},
	}
	for _, tc := range tests {
		b := newFake(t, tok, script{done(engine.FinishStop)})
		b.submitErr, b.panicking = tc.submitErr, tc.panicking
		s, _ := newTestServer(t, b, Options{MaxBodyBytes: 1024})
		s.SetReady(!tc.notReady)
		rec := do(s.Handler(), tc.method, tc.path, tc.body)
		if rec.Code != tc.status {
			t.Errorf("%s: status %d, want %d (body %s)", tc.name, rec.Code, tc.status, rec.Body)
			continue
		}
		e := decodeError(t, rec.Body.String())
		if e.Error.Type != tc.typ || deref(e.Error.Param) != tc.param || deref(e.Error.Code) != tc.code || !strings.Contains(e.Error.Message, tc.substring) {
			t.Errorf("%s: error {type %q param %q code %q message %q}, want {%q %q %q containing %q}", tc.name,
				e.Error.Type, deref(e.Error.Param), deref(e.Error.Code), e.Error.Message, tc.typ, tc.param, tc.code, tc.substring)
		}
		if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s: Content-Type %q, want application/json", tc.name, ct)
		}
		for _, st := range b.submitted() {
			if !st.wasCancelled() {
				t.Errorf("%s: a submitted stream was not cancelled", tc.name)
			}
		}
	}
}

func TestCompletionNonStreaming(t *testing.T) {
	tok := testVocab(t, "", true)
	ups := append(tokens(t, tok, 0, "▁Hello", "▁world"), engine.Update{Done: true, Finish: engine.FinishLength, CachedTokens: 1})
	b := newFake(t, tok, ups)
	s, _ := newTestServer(t, b, Options{SystemFingerprint: "fp-test"})
	rec := do(s.Handler(), "POST", "/v1/completions", `{"model":"test-model","prompt":"Hello","max_tokens":2,"temperature":0,"seed":7}`)
	if rec.Code != 200 {
		t.Fatalf("status %d, want 200 (body %s)", rec.Code, rec.Body)
	}
	var r openai.CompletionResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
		t.Fatalf("answer %s is not a completion: %v", rec.Body, err)
	}
	if !strings.HasPrefix(r.ID, "cmpl-") || len(r.ID) != len("cmpl-")+24 || r.Object != "text_completion" || r.Model != "test-model" ||
		r.Created == 0 || r.SystemFingerprint != "fp-test" {
		t.Errorf("answer header = id %q object %q model %q created %d fp %q", r.ID, r.Object, r.Model, r.Created, r.SystemFingerprint)
	}
	if len(r.Choices) != 1 || r.Choices[0].Text != " Hello world" || deref(r.Choices[0].FinishReason) != "length" || r.Choices[0].Logprobs != nil {
		t.Errorf("choices = %+v, want one with text %q, finish length, no logprobs", r.Choices, " Hello world")
	}
	prompt := tok.Encode("Hello", true, true)
	want := openai.Usage{PromptTokens: len(prompt), CompletionTokens: 2, TotalTokens: len(prompt) + 2,
		PromptTokensDetails: &openai.PromptTokensDetails{CachedTokens: 1}}
	if r.Usage == nil || !reflect.DeepEqual(*r.Usage, want) {
		t.Errorf("usage = %+v, want %+v", r.Usage, want)
	}
	st := b.submitted()
	if len(st) != 1 {
		t.Fatalf("%d streams submitted, want 1", len(st))
	}
	q := st[0].req
	if !reflect.DeepEqual(q.Prompt, prompt) || q.MaxTokens != 2 || q.Sample.Temperature != 0 || q.Sample.Seed != 7 || q.TopLogprobs != 0 {
		t.Errorf("engine request = %+v, want prompt %v, max tokens 2, temperature 0, seed 7", q, prompt)
	}
	if !st[0].wasCancelled() {
		t.Errorf("stream not cancelled after the answer")
	}
}

func TestDefaults(t *testing.T) {
	tok := testVocab(t, "", true)
	tests := []struct {
		path, body string
		maxTokens  int
	}{
		{"/v1/completions", `{"prompt":"Hello"}`, DefaultCompletionTokens},
		{"/v1/completions", `{"prompt":[1,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34,35,36,37,38,39,40,41,42,43,44,45,46,47,48,49,50,51,52,53,54,55,56,57,58]}`, 64 - 55},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"Hello"}]}`, -1},
	}
	for _, tc := range tests {
		b := newFake(t, tok, script{done(engine.FinishStop)})
		s, _ := newTestServer(t, b, Options{})
		rec := do(s.Handler(), "POST", tc.path, tc.body)
		if rec.Code != 200 {
			t.Errorf("%s %s: status %d, want 200 (%s)", tc.path, tc.body, rec.Code, rec.Body)
			continue
		}
		q := b.submitted()[0].req
		want := tc.maxTokens
		if want < 0 {
			want = 64 - len(q.Prompt)
		}
		if q.MaxTokens != want || q.Sample.Temperature != 1 || q.Sample.TopP != 1 {
			t.Errorf("%s: engine request max tokens %d temperature %v top_p %v, want %d, 1, 1", tc.path, q.MaxTokens, q.Sample.Temperature, q.Sample.TopP, want)
		}
	}
}

// sseEvents reads a server-sent event stream, returning each data payload.
func sseEvents(t *testing.T, body string) []string {
	t.Helper()
	if !strings.HasSuffix(body, "\n\n") {
		t.Errorf("stream does not end with a blank line: %q", body)
	}
	var out []string
	for _, ev := range strings.Split(strings.TrimSuffix(body, "\n\n"), "\n\n") {
		data, ok := strings.CutPrefix(ev, "data: ")
		if !ok || strings.Contains(data, "\n") {
			t.Errorf("malformed event %q", ev)
			continue
		}
		out = append(out, data)
	}
	return out
}

// completionChunks checks a completions stream's framing and returns the
// chunks (without [DONE]).
func completionChunks(t *testing.T, rec *httptest.ResponseRecorder) []openai.CompletionResponse {
	t.Helper()
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d content type %q, want 200 text/event-stream (body %s)", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
	}
	ev := sseEvents(t, rec.Body.String())
	if len(ev) == 0 || ev[len(ev)-1] != "[DONE]" {
		t.Fatalf("stream %q does not end with [DONE]", ev)
	}
	var chunks []openai.CompletionResponse
	for _, data := range ev[:len(ev)-1] {
		var c openai.CompletionResponse
		if err := json.Unmarshal([]byte(data), &c); err != nil || c.Object != "text_completion" || !strings.HasPrefix(c.ID, "cmpl-") {
			t.Fatalf("chunk %s is not a completion chunk (%v)", data, err)
		}
		chunks = append(chunks, c)
	}
	return chunks
}

func TestCompletionStreaming(t *testing.T) {
	tok := testVocab(t, "", true)
	// "STOP" arrives over three tokens after a false start "ST O x".
	ups := append(tokens(t, tok, 0, "▁Hello", "ST", "O", "x", "<0xF0>", "<0x9F>", "<0x98>", "<0x80>", "S", "TO", "P", "▁world"),
		done(engine.FinishLength))
	b := newFake(t, tok, ups)
	s, _ := newTestServer(t, b, Options{})
	rec := do(s.Handler(), "POST", "/v1/completions", `{"prompt":"Hi","stream":true,"stop":["STOP"],"stream_options":{"include_usage":true}}`)
	chunks := completionChunks(t, rec)
	var texts []string
	for i, c := range chunks[:len(chunks)-1] {
		if len(c.Choices) != 1 || c.Usage != nil {
			t.Fatalf("chunk %d = %+v, want one choice and no usage", i, c)
		}
		texts = append(texts, c.Choices[0].Text)
		if !utf8.ValidString(c.Choices[0].Text) {
			t.Errorf("chunk %d text %q is not valid UTF-8", i, c.Choices[0].Text)
		}
		last := i == len(chunks)-2
		if (c.Choices[0].FinishReason != nil) != last {
			t.Errorf("chunk %d finish_reason %v, want it set only on the last choice chunk", i, deref(c.Choices[0].FinishReason))
		}
	}
	if want := []string{" Hello", "STOx", "😀", ""}; !reflect.DeepEqual(texts, want) {
		t.Errorf("streamed texts %q, want %q", texts, want)
	}
	if f := deref(chunks[len(chunks)-2].Choices[0].FinishReason); f != "stop" {
		t.Errorf("finish_reason %q, want stop", f)
	}
	u := chunks[len(chunks)-1]
	wantUsage := openai.Usage{PromptTokens: len(tok.Encode("Hi", true, true)), CompletionTokens: 11,
		TotalTokens: len(tok.Encode("Hi", true, true)) + 11, PromptTokensDetails: &openai.PromptTokensDetails{}}
	if len(u.Choices) != 0 || u.Usage == nil || !reflect.DeepEqual(*u.Usage, wantUsage) {
		t.Errorf("last chunk = %+v (usage %+v), want no choices and usage %+v", u, u.Usage, wantUsage)
	}
	if st := b.submitted(); len(st) != 1 || !st[0].wasCancelled() || st[0].pos != 11 {
		t.Errorf("stream cancelled %v after %d updates, want cancelled after 11 (at the stop string)", st[0].wasCancelled(), st[0].pos)
	}
}

func TestStreamingWithoutUsage(t *testing.T) {
	tok := testVocab(t, "", true)
	b := newFake(t, tok, append(tokens(t, tok, 0, "a"), done(engine.FinishStop)))
	s, _ := newTestServer(t, b, Options{})
	chunks := completionChunks(t, do(s.Handler(), "POST", "/v1/completions", `{"prompt":"Hi","stream":true}`))
	for _, c := range chunks {
		if c.Usage != nil || len(c.Choices) != 1 {
			t.Errorf("chunk %+v: want one choice and no usage without include_usage", c)
		}
	}
}

func TestCompletionLogprobs(t *testing.T) {
	tok := testVocab(t, "", true)
	b := newFake(t, tok, append(tokens(t, tok, 2, "▁Hello", "é", "!"), done(engine.FinishStop)))
	s, _ := newTestServer(t, b, Options{})
	rec := do(s.Handler(), "POST", "/v1/completions", `{"prompt":"Hi","logprobs":2}`)
	var r openai.CompletionResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil || len(r.Choices) != 1 {
		t.Fatalf("answer %s: %v", rec.Body, err)
	}
	if q := b.submitted()[0].req; q.TopLogprobs != 2 {
		t.Errorf("engine request top logprobs %d, want 2", q.TopLogprobs)
	}
	lp := r.Choices[0].Logprobs
	want := &openai.CompletionLogprobs{
		Tokens:        []string{" Hello", "é", "!"},
		TokenLogprobs: ptrs(-0.5, -1, -1.5),
		TopLogprobs:   []map[string]float64{{"a": -1, "b": -2}, {"a": -1, "b": -2}, {"a": -1, "b": -2}},
		TextOffset:    []int{0, 6, 7},
	}
	if !reflect.DeepEqual(lp, want) {
		t.Errorf("logprobs = %+v, want %+v", lp, want)
	}
	// logprobs 0: the chosen tokens only, top_logprobs entries null.
	b = newFake(t, tok, append(tokens(t, tok, 0, "a"), done(engine.FinishStop)))
	s, _ = newTestServer(t, b, Options{})
	rec = do(s.Handler(), "POST", "/v1/completions", `{"prompt":"Hi","logprobs":0}`)
	if !strings.Contains(rec.Body.String(), `"logprobs":{"tokens":["a"],"token_logprobs":[-0.5],"top_logprobs":[null],"text_offset":[0]}`) {
		t.Errorf("logprobs 0 answer %s, want tokens with null top_logprobs", rec.Body)
	}
}

func TestEcho(t *testing.T) {
	tok := testVocab(t, "", true)
	b := newFake(t, tok, append(tokens(t, tok, 0, "▁world"), done(engine.FinishStop)))
	s, _ := newTestServer(t, b, Options{})
	rec := do(s.Handler(), "POST", "/v1/completions", `{"prompt":"Hello","echo":true}`)
	var r openai.CompletionResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil || len(r.Choices) != 1 || r.Choices[0].Text != "Hello world" {
		t.Errorf("echo answer %s (%v), want text %q", rec.Body, err, "Hello world")
	}
}

// chatChunks checks a chat stream's framing and returns its chunks.
func chatChunks(t *testing.T, rec *httptest.ResponseRecorder) []openai.ChatChunk {
	t.Helper()
	if rec.Code != 200 {
		t.Fatalf("status %d, want 200 (body %s)", rec.Code, rec.Body)
	}
	ev := sseEvents(t, rec.Body.String())
	if len(ev) == 0 || ev[len(ev)-1] != "[DONE]" {
		t.Fatalf("stream %q does not end with [DONE]", ev)
	}
	var chunks []openai.ChatChunk
	for _, data := range ev[:len(ev)-1] {
		var c openai.ChatChunk
		if err := json.Unmarshal([]byte(data), &c); err != nil || c.Object != "chat.completion.chunk" || !strings.HasPrefix(c.ID, "chatcmpl-") {
			t.Fatalf("chunk %s is not a chat chunk (%v)", data, err)
		}
		chunks = append(chunks, c)
	}
	return chunks
}

func TestChatStreamingN2(t *testing.T) {
	tok := testVocab(t, chatMLTemplate, true)
	b := newFake(t, tok,
		append(tokens(t, tok, 2, "▁Hello", "!"), done(engine.FinishStop)),
		append(tokens(t, tok, 2, "▁world"), done(engine.FinishLength)))
	b.cfg.Context = 512
	s, _ := newTestServer(t, b, Options{})
	rec := do(s.Handler(), "POST", "/v1/chat/completions",
		`{"messages":[{"role":"user","content":"Hi"}],"stream":true,"n":2,"seed":100,"logprobs":true,"top_logprobs":2,"stream_options":{"include_usage":true}}`)
	chunks := chatChunks(t, rec)
	text := map[int]string{}
	roles := map[int]int{}
	finish := map[int]string{}
	ntok := map[int]int{}
	for _, c := range chunks[:len(chunks)-1] {
		if len(c.Choices) != 1 {
			t.Fatalf("chunk %+v has %d choices, want 1", c, len(c.Choices))
		}
		ch := c.Choices[0]
		if ch.Delta.Role != "" {
			roles[ch.Index]++
			if ch.Delta.Role != "assistant" || ch.Delta.Content == nil || *ch.Delta.Content != "" || text[ch.Index] != "" {
				t.Errorf("role chunk %+v, want assistant with empty content before any text", ch)
			}
		}
		if ch.Delta.Content != nil {
			text[ch.Index] += *ch.Delta.Content
		}
		if ch.Logprobs != nil {
			for _, lp := range ch.Logprobs.Content {
				ntok[ch.Index]++
				if len(lp.TopLogprobs) != 2 || len(lp.Bytes) != len(lp.Token) {
					t.Errorf("token logprob %+v, want 2 alternatives and bytes of the token", lp)
				}
			}
		}
		if ch.FinishReason != nil {
			finish[ch.Index] = *ch.FinishReason
		}
	}
	if want := map[int]string{0: " Hello!", 1: " world"}; !reflect.DeepEqual(text, want) {
		t.Errorf("texts %v, want %v", text, want)
	}
	if want := map[int]int{0: 1, 1: 1}; !reflect.DeepEqual(roles, want) {
		t.Errorf("role chunks per choice %v, want %v", roles, want)
	}
	if want := map[int]string{0: "stop", 1: "length"}; !reflect.DeepEqual(finish, want) {
		t.Errorf("finish reasons %v, want %v", finish, want)
	}
	if want := map[int]int{0: 2, 1: 1}; !reflect.DeepEqual(ntok, want) {
		t.Errorf("logprob tokens per choice %v, want %v", ntok, want)
	}
	if u := chunks[len(chunks)-1]; len(u.Choices) != 0 || u.Usage == nil || u.Usage.CompletionTokens != 3 {
		t.Errorf("usage chunk %+v, want no choices and 3 completion tokens", u)
	}
	st := b.submitted()
	if len(st) != 2 || st[0].req.Sample.Seed != 100 || st[1].req.Sample.Seed != 101 {
		t.Errorf("submitted %d streams, seeds %v, want 2 with seeds 100, 101", len(st), []uint64{st[0].req.Sample.Seed, st[len(st)-1].req.Sample.Seed})
	}
}

func TestChatNonStreaming(t *testing.T) {
	tok := testVocab(t, llama3Template, true)
	b := newFake(t, tok, append(tokens(t, tok, 1, "▁Hello", "é"), done(engine.FinishStop)))
	b.cfg.Context = 512
	s, _ := newTestServer(t, b, Options{})
	rec := do(s.Handler(), "POST", "/v1/chat/completions",
		`{"model":"test-model","messages":[{"role":"system","content":"Be nice"},{"role":"user","content":[{"type":"text","text":"Hi"}]}],"logprobs":true,"max_completion_tokens":5}`)
	var r openai.ChatResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil || rec.Code != 200 {
		t.Fatalf("answer %d %s: %v", rec.Code, rec.Body, err)
	}
	if !strings.HasPrefix(r.ID, "chatcmpl-") || r.Object != "chat.completion" || len(r.Choices) != 1 {
		t.Fatalf("answer %+v, want a chat.completion with one choice", r)
	}
	c := r.Choices[0]
	if c.Message.Role != "assistant" || c.Message.Content != " Helloé" || deref(c.FinishReason) != "stop" {
		t.Errorf("choice %+v, want assistant %q stop", c, " Helloé")
	}
	want := &openai.ChatLogprobs{Content: []openai.ChatTokenLogprob{
		{Token: " Hello", Logprob: -0.5, Bytes: []int{32, 72, 101, 108, 108, 111}, TopLogprobs: []openai.TopLogprob{{Token: "a", Logprob: -1, Bytes: []int{97}}}},
		{Token: "é", Logprob: -1, Bytes: []int{0xc3, 0xa9}, TopLogprobs: []openai.TopLogprob{{Token: "a", Logprob: -1, Bytes: []int{97}}}},
	}}
	if !reflect.DeepEqual(c.Logprobs, want) {
		t.Errorf("logprobs %+v, want %+v", c.Logprobs, want)
	}
	q := b.submitted()[0].req
	// top_logprobs not given: no alternatives asked of the engine.
	if q.TopLogprobs != 0 || q.MaxTokens != 5 {
		t.Errorf("engine request top logprobs %d max tokens %d, want 0 and 5", q.TopLogprobs, q.MaxTokens)
	}
	wantPrompt := tok.Encode("<s><|start_header_id|>system<|end_header_id|>\n\nBe nice<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n", false, true)
	if !reflect.DeepEqual(q.Prompt, wantPrompt) {
		t.Errorf("engine prompt %v, want %v", q.Prompt, wantPrompt)
	}
}

func TestFallbackChatStopString(t *testing.T) {
	tok := testVocab(t, "", false) // no <|im_end|> token: the fallback stops on the text
	b := newFake(t, tok, append(tokens(t, tok, 0, "▁Hello", "<", "|", "i", "m", "_", "e", "n", "d", "|", ">", "x"), done(engine.FinishLength)))
	s, _ := newTestServer(t, b, Options{})
	rec := do(s.Handler(), "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}]}`)
	var r openai.ChatResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil || len(r.Choices) != 1 {
		t.Fatalf("answer %s: %v", rec.Body, err)
	}
	if c := r.Choices[0]; c.Message.Content != " Hello" || deref(c.FinishReason) != "stop" {
		t.Errorf("choice %+v, want %q finished by stop", c, " Hello")
	}
}

func TestEngineErrorMidStream(t *testing.T) {
	tok := testVocab(t, "", true)
	fail := engine.Update{Done: true, Finish: engine.FinishError, Err: fmt.Errorf("engine failed: %w", engine.ErrClosed)}
	for _, stream := range []bool{false, true} {
		b := newFake(t, tok, append(tokens(t, tok, 0, "a"), fail))
		s, _ := newTestServer(t, b, Options{})
		rec := do(s.Handler(), "POST", "/v1/completions", fmt.Sprintf(`{"prompt":"Hi","stream":%v}`, stream))
		if !stream {
			if rec.Code != 503 || !strings.Contains(rec.Body.String(), "shutting down") {
				t.Errorf("non-streamed engine failure: %d %s, want 503 shutting down", rec.Code, rec.Body)
			}
			continue
		}
		ev := sseEvents(t, rec.Body.String())
		if len(ev) < 2 || ev[len(ev)-1] != "[DONE]" || !strings.Contains(ev[len(ev)-2], `"error"`) {
			t.Errorf("streamed engine failure: events %q, want an error event then [DONE]", ev)
		}
	}
}

// TestDisconnectCancels checks that a client that goes away mid-stream gets
// its engine stream cancelled promptly.
func TestDisconnectCancels(t *testing.T) {
	tok := testVocab(t, "", true)
	b := newFake(t, tok, tokens(t, tok, 0, "a")) // one token, then blocks until cancelled
	b.subm = make(chan *fakeStream, 1)
	s, _ := newTestServer(t, b, Options{})
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+"/v1/completions", strings.NewReader(`{"prompt":"Hi","stream":true,"max_tokens":10}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "data: ") {
		t.Fatalf("first line %q, %v; want a data line", line, err)
	}
	st := <-b.subm
	if st.wasCancelled() {
		t.Fatalf("stream cancelled before the client left")
	}
	cancel() // the client goes away
	select {
	case <-st.cancelled:
	case <-time.After(5 * time.Second):
		t.Fatalf("stream not cancelled 5 s after the client disconnected")
	}
}

func TestHealthAndModels(t *testing.T) {
	tok := testVocab(t, "", true)
	s, _ := newTestServer(t, newFake(t, tok), Options{})
	s.SetReady(false)
	if rec := do(s.Handler(), "GET", "/health", ""); rec.Code != 200 || strings.TrimSpace(rec.Body.String()) != `{"status":"starting"}` {
		t.Errorf("GET /health before ready = %d %s, want 200 {\"status\":\"starting\"} (alive)", rec.Code, rec.Body)
	}
	if rec := do(s.Handler(), "GET", "/ready", ""); rec.Code != 503 || strings.TrimSpace(rec.Body.String()) != `{"status":"starting"}` {
		t.Errorf("GET /ready before ready = %d %s, want 503 {\"status\":\"starting\"}", rec.Code, rec.Body)
	}
	s.SetReady(true)
	for _, path := range []string{"/health", "/ready"} {
		if rec := do(s.Handler(), "GET", path, ""); rec.Code != 200 || strings.TrimSpace(rec.Body.String()) != `{"status":"ok"}` {
			t.Errorf("GET %s when ready = %d %s, want 200 {\"status\":\"ok\"}", path, rec.Code, rec.Body)
		}
	}
	// A degraded part (a PD worker's core lease) shows, still with 200.
	degraded := true
	s2, _ := newTestServer(t, newFake(t, tok), Options{Health: func() (bool, string) { return degraded, "core lease: stuck" }})
	s2.SetReady(true)
	if rec := do(s2.Handler(), "GET", "/health", ""); rec.Code != 200 || strings.TrimSpace(rec.Body.String()) != `{"reason":"core lease: stuck","status":"degraded"}` {
		t.Errorf("GET /health when degraded = %d %s, want 200 with status degraded and the reason", rec.Code, rec.Body)
	}
	degraded = false
	if rec := do(s2.Handler(), "GET", "/health", ""); strings.TrimSpace(rec.Body.String()) != `{"status":"ok"}` {
		t.Errorf("GET /health once no longer degraded = %s, want ok", rec.Body)
	}
	rec := do(s.Handler(), "GET", "/v1/models", "")
	var list openai.ModelList
	if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil || list.Object != "list" || len(list.Data) != 1 ||
		list.Data[0].ID != "test-model" || list.Data[0].Object != "model" || list.Data[0].MaxModelLen != 64 {
		t.Errorf("GET /v1/models = %s (%v), want one model test-model", rec.Body, err)
	}
	if rec := do(s.Handler(), "GET", "/v1/models/test-model", ""); rec.Code != 200 || !strings.Contains(rec.Body.String(), `"id":"test-model"`) {
		t.Errorf("GET /v1/models/test-model = %d %s, want the model", rec.Code, rec.Body)
	}
}

func TestMetrics(t *testing.T) {
	tok := testVocab(t, "", true)
	b := newFake(t, tok, append(tokens(t, tok, 0, "a", "b"), done(engine.FinishStop)))
	s, _ := newTestServer(t, b, Options{})
	do(s.Handler(), "POST", "/v1/completions", `{"prompt":"Hi"}`)
	do(s.Handler(), "POST", "/v1/completions", `{"prompt":`)
	rec := do(s.Handler(), "GET", "/metrics", "")
	body := rec.Body.String()
	for _, want := range []string{
		"tandem_num_requests_waiting 1", "tandem_num_requests_running 2", "tandem_kv_pages_used 3", "tandem_kv_pages 40",
		"tandem_prompt_tokens_total 6", "tandem_generation_tokens_total 7", "tandem_prefix_cache_hit_tokens_total 5",
		"tandem_preemptions_total 8", "tandem_engine_steps_total 9",
		"tandem_state_slots_used 10", "tandem_state_slots 11", "tandem_state_snapshots 12",
		"tandem_state_snapshot_hits_total 13", "tandem_state_snapshot_misses_total 14",
		`tandem_http_requests_total{endpoint="completions",status="200"} 1`,
		`tandem_http_requests_total{endpoint="completions",status="400"} 1`,
		`tandem_request_finished_total{finish_reason="stop"} 1`,
		"tandem_time_to_first_token_seconds_count 1", "tandem_inter_token_latency_seconds_count 1",
		`tandem_e2e_request_latency_seconds_count{endpoint="completions"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

func TestHTTPServerSettings(t *testing.T) {
	tok := testVocab(t, "", true)
	s, _ := newTestServer(t, newFake(t, tok), Options{})
	hs := s.HTTPServer("127.0.0.1:0")
	if hs.ReadHeaderTimeout <= 0 || hs.IdleTimeout <= 0 || hs.MaxHeaderBytes <= 0 || hs.WriteTimeout != 0 || hs.ReadTimeout != 0 {
		t.Errorf("HTTPServer timeouts: read header %v idle %v max header %d write %v read %v; want the first three set, no overall read/write timeout",
			hs.ReadHeaderTimeout, hs.IdleTimeout, hs.MaxHeaderBytes, hs.WriteTimeout, hs.ReadTimeout)
	}
}

// TestPartialSubmitFailure checks that when one of n submissions fails the
// ones already submitted are cancelled.
func TestPartialSubmitFailure(t *testing.T) {
	tok := testVocab(t, "", true)
	b := newFake(t, tok, tokens(t, tok, 0, "a"))
	b.submitErr, b.failAfter = engine.ErrQueueFull, 2
	s, _ := newTestServer(t, b, Options{})
	rec := do(s.Handler(), "POST", "/v1/completions", `{"prompt":"Hi","n":3}`)
	if rec.Code != 429 {
		t.Errorf("status %d, want 429 (body %s)", rec.Code, rec.Body)
	}
	st := b.submitted()
	if len(st) != 2 {
		t.Fatalf("%d streams submitted, want 2", len(st))
	}
	for i, x := range st {
		if !x.wasCancelled() {
			t.Errorf("stream %d not cancelled after the third submission failed", i)
		}
	}
}

// TestSlowClient checks that a client that stops reading loses its request
// once a write blocks past WriteTimeout, and that its stream is cancelled.
func TestSlowClient(t *testing.T) {
	tok := testVocab(t, "", true)
	b := newFake(t, tok, nil)
	b.endless = nil
	for _, id := range tokenIDs(t, tok, slices.Repeat([]string{"▁world"}, 2000)...) {
		b.endless = append(b.endless, engine.Token{ID: id})
	}
	b.subm = make(chan *fakeStream, 1)
	s, _ := newTestServer(t, b, Options{WriteTimeout: 200 * time.Millisecond})
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	resp, err := http.Post(ts.URL+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"Hi","stream":true,"max_tokens":10}`))
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	defer resp.Body.Close() // never read
	st := <-b.subm
	select {
	case <-st.cancelled:
	case <-time.After(20 * time.Second):
		t.Fatalf("stream of a client that stopped reading not cancelled after 20 s")
	}
}
