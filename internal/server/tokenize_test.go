package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"testing"

	"tandem/internal/engine"
)

func tokenizeDoc(t *testing.T, code int, body string) TokenizeResponse {
	t.Helper()
	var r TokenizeResponse
	if code != 200 {
		t.Fatalf("/tokenize: %d %s", code, body)
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatalf("/tokenize answer %s: %v", body, err)
	}
	return r
}

// TestTokenizePrompt checks /tokenize of a prompt, with and without special
// tokens and token strings, and /detokenize back.
func TestTokenizePrompt(t *testing.T) {
	tok := testVocab(t, chatMLTemplate, true)
	b := newFake(t, tok)
	b.cfg.Context = 512
	s, _ := newTestServer(t, b, Options{})
	h := s.Handler()

	rec := do(h, "POST", "/tokenize", `{"model":"test-model","prompt":"Hello world"}`)
	r := tokenizeDoc(t, rec.Code, rec.Body.String())
	want := tok.Encode("Hello world", true, true)
	if !reflect.DeepEqual(r.Tokens, want) || r.Count != len(want) || r.MaxModelLen != 512 || r.TokenStrs != nil {
		t.Errorf("tokenize = %+v, want tokens %v, count %d, max_model_len 512, no token_strs", r, want, len(want))
	}
	if strings.Contains(rec.Body.String(), "token_strs") {
		t.Errorf("answer %s has token_strs without return_token_strs", rec.Body)
	}
	rec = do(h, "POST", "/tokenize", `{"prompt":"Hello world","add_special_tokens":false,"return_token_strs":true}`)
	r = tokenizeDoc(t, rec.Code, rec.Body.String())
	want = tok.Encode("Hello world", false, true)
	strs := make([]string, len(want))
	for i, id := range want {
		strs[i] = tok.Vocab().Tokens[id]
	}
	if !reflect.DeepEqual(r.Tokens, want) || !reflect.DeepEqual(r.TokenStrs, strs) || strs[0] != "▁" {
		t.Errorf("tokenize without specials = %+v, want %v and token strs %q", r, want, strs)
	}

	ids := tok.Encode("<|im_start|>Hello world<|im_end|>", true, true)
	body, _ := json.Marshal(map[string]any{"model": "test-model", "tokens": ids})
	rec = do(h, "POST", "/detokenize", string(body))
	var d DetokenizeResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &d); err != nil || rec.Code != 200 || d.Prompt != "<s><|im_start|> Hello world<|im_end|>" {
		t.Errorf("detokenize(%v) = %d %s, want prompt %q", ids, rec.Code, rec.Body, "<s><|im_start|> Hello world<|im_end|>")
	}
}

// TestTokenizeChat checks that /tokenize of messages gives the prompt a chat
// completion of the same messages submits, BOS once with a template that
// writes it, and that tools and chat_template_kwargs reach the template.
func TestTokenizeChat(t *testing.T) {
	for _, name := range []string{"llama3.jinja", "llama3.2.jinja"} {
		src, err := os.ReadFile("chat/testdata/templates/" + name)
		if err != nil {
			t.Fatal(err)
		}
		tok := testVocab(t, string(src), true)
		b := newFake(t, tok, append(tokens(t, tok, 0, "H"), done(engine.FinishStop)))
		b.cfg.Context = 4096
		s, _ := newTestServer(t, b, Options{})
		msgs := `[{"role":"system","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"Hi"}]}]`
		if rec := do(s.Handler(), "POST", "/v1/chat/completions", `{"messages":`+msgs+`}`); rec.Code != 200 {
			t.Fatalf("%s: chat: %d %s", name, rec.Code, rec.Body)
		}
		rec := do(s.Handler(), "POST", "/tokenize", `{"messages":`+msgs+`}`)
		r := tokenizeDoc(t, rec.Code, rec.Body.String())
		if got := b.submitted()[0].req.Prompt; !reflect.DeepEqual(r.Tokens, got) {
			t.Errorf("%s: /tokenize %v, chat completion prompt %v: want the same", name, r.Tokens, got)
		}
		bos := 0
		for _, id := range r.Tokens {
			if id == tok.BOS() {
				bos++
			}
		}
		if bos != 1 {
			t.Errorf("%s: /tokenize of messages has %d BOS tokens, want 1", name, bos)
		}
	}

	qwen3, err := os.ReadFile("chat/testdata/templates/qwen3.jinja")
	if err != nil {
		t.Fatal(err)
	}
	tok := testVocab(t, string(qwen3), true)
	s, _ := newTestServer(t, newFake(t, tok), Options{})
	rec := do(s.Handler(), "POST", "/tokenize", `{"messages":[{"role":"user","content":"Hi"}],"add_generation_prompt":true,`+
		`"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","b":1,"a":2}}}],"chat_template_kwargs":{"enable_thinking":false}}`)
	r := tokenizeDoc(t, rec.Code, rec.Body.String())
	text := tok.Decode(r.Tokens)
	for _, want := range []string{`{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "b": 1, "a": 2}}}`,
		"<think>\n\n</think>\n\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("tokenized chat %q does not contain %q", text, want)
		}
	}
	rec = do(s.Handler(), "POST", "/tokenize", `{"messages":[{"role":"user","content":"Hi"}],"add_generation_prompt":false}`)
	if text := tok.Decode(tokenizeDoc(t, rec.Code, rec.Body.String()).Tokens); strings.HasSuffix(text, "assistant\n") {
		t.Errorf("add_generation_prompt false: %q ends with the generation prompt", text)
	}
}

// TestTokenizeErrors checks the OpenAI-shaped errors of both endpoints.
func TestTokenizeErrors(t *testing.T) {
	tok := testVocab(t, "", true)
	s, _ := newTestServer(t, newFake(t, tok), Options{})
	for _, tc := range []struct {
		path, body string
		status     int
		param      string
	}{
		{"/tokenize", `{"model":"other","prompt":"x"}`, 404, "model"},
		{"/tokenize", `{}`, 400, "prompt"},
		{"/tokenize", `{"prompt":"x","messages":[{"role":"user","content":"x"}]}`, 400, "messages"},
		{"/tokenize", `{"prompt":"x","temperature":1}`, 400, "temperature"},
		{"/tokenize", `{"prompt":1}`, 400, ""},
		{"/tokenize", `{"messages":[{"content":"x"}]}`, 400, "messages[0].role"},
		{"/tokenize", `{"messages":[]}`, 400, "messages"},
		{"/detokenize", `{"tokens":[1,999999]}`, 400, "tokens"},
		{"/detokenize", `{"tokens":[-1]}`, 400, "tokens"},
		{"/detokenize", `{"model":"other","tokens":[1]}`, 404, "model"},
		{"/detokenize", `{"tokens":"abc"}`, 400, ""},
	} {
		rec := do(s.Handler(), "POST", tc.path, tc.body)
		var e struct {
			Error struct {
				Message string  `json:"message"`
				Type    string  `json:"type"`
				Param   *string `json:"param"`
			} `json:"error"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || rec.Code != tc.status || e.Error.Message == "" ||
			(tc.param != "" && deref(e.Error.Param) != tc.param) {
			t.Errorf("%s %s: %d %s, want %d with param %q", tc.path, tc.body, rec.Code, rec.Body, tc.status, tc.param)
		}
	}
	if rec := do(s.Handler(), "GET", "/tokenize", ""); rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("GET /tokenize: %d, want 405", rec.Code)
	}
}

// TestTokenizeAuth checks who may call the endpoints: with an API key its
// bearer token; on a PD worker (leg keys) the cluster credential, and no leg
// signature.
func TestTokenizeAuth(t *testing.T) {
	tok := testVocab(t, "", true)
	keys := testLegKeys(t)
	for _, tc := range []struct {
		name string
		o    Options
		auth string
		want int
	}{
		{"api key missing", Options{APIKey: "sekrit"}, "", 401},
		{"api key given", Options{APIKey: "sekrit"}, "Bearer sekrit", 200},
		{"worker without credential", Options{LegKeys: keys}, "", 401},
		{"worker with a wrong credential", Options{LegKeys: keys}, "Bearer nope", 401},
		{"worker with the credential", Options{LegKeys: keys}, keys.Credential(), 200},
		{"open server", Options{}, "", 200},
	} {
		s, _ := newTestServer(t, newFake(t, tok), tc.o)
		for _, path := range []string{"/tokenize", "/detokenize"} {
			body := `{"prompt":"Hello"}`
			if path == "/detokenize" {
				body = `{"tokens":[1]}`
			}
			req := httptest.NewRequest("POST", path, strings.NewReader(body))
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			rec := httptest.NewRecorder()
			s.Handler().ServeHTTP(rec, req)
			if rec.Code != tc.want {
				t.Errorf("%s: %s: %d %s, want %d", tc.name, path, rec.Code, rec.Body, tc.want)
			}
		}
	}
}
