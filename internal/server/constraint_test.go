package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	"tandem/internal/api/leg"
	"tandem/internal/api/openai"
	"tandem/internal/engine"
	"tandem/internal/engine/grammar"
)

// serverSchema is bounded everywhere, so random weights finish it.
const serverSchema = `{"type":"object","properties":{"city":{"type":"string","maxLength":8},
"temp":{"type":"integer","minimum":-40,"maximum":50},"sky":{"enum":["sun","rain","snow"]},
"hours":{"type":"array","items":{"enum":["am","pm"]},"minItems":1,"maxItems":3}},
"required":["city","temp","sky","hours"],"additionalProperties":false}`

// checkServerSchema validates doc against serverSchema by hand.
func checkServerSchema(doc string) error {
	var v struct {
		City  *string  `json:"city"`
		Temp  *float64 `json:"temp"`
		Sky   *string  `json:"sky"`
		Hours []string `json:"hours"`
	}
	dec := json.NewDecoder(strings.NewReader(doc))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("data after the object")
	}
	switch {
	case v.City == nil || len([]rune(*v.City)) > 8:
		return fmt.Errorf("city %v", v.City)
	case v.Temp == nil || *v.Temp < -40 || *v.Temp > 50 || *v.Temp != math.Trunc(*v.Temp):
		return fmt.Errorf("temp %v", v.Temp)
	case v.Sky == nil || !slices.Contains([]string{"sun", "rain", "snow"}, *v.Sky):
		return fmt.Errorf("sky %v", v.Sky)
	case len(v.Hours) < 1 || len(v.Hours) > 3:
		return fmt.Errorf("hours %v", v.Hours)
	}
	for _, h := range v.Hours {
		if h != "am" && h != "pm" {
			return fmt.Errorf("hour %q", h)
		}
	}
	return nil
}

// generateText posts body and returns every choice's text (by index) and
// finish reason, streamed or not.
func generateText(t *testing.T, s *Server, path, body string, stream bool) (map[int]string, map[int]string) {
	t.Helper()
	if stream {
		body = strings.TrimSuffix(strings.TrimSpace(body), "}") + `,"stream":true}`
	}
	rec := do(s.Handler(), "POST", path, body)
	if rec.Code != 200 {
		t.Fatalf("%s %s: status %d %s", path, body, rec.Code, rec.Body)
	}
	text, finish := map[int]string{}, map[int]string{}
	switch {
	case path == "/v1/completions" && stream:
		for _, c := range completionChunks(t, rec) {
			for _, ch := range c.Choices {
				text[ch.Index] += ch.Text
				if ch.FinishReason != nil {
					finish[ch.Index] = *ch.FinishReason
				}
			}
		}
	case path == "/v1/completions":
		var r openai.CompletionResponse
		if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		for _, ch := range r.Choices {
			text[ch.Index], finish[ch.Index] = ch.Text, deref(ch.FinishReason)
		}
	case stream:
		for _, c := range chatChunks(t, rec) {
			for _, ch := range c.Choices {
				if ch.Delta.Content != nil {
					text[ch.Index] += *ch.Delta.Content
				}
				if ch.FinishReason != nil {
					finish[ch.Index] = *ch.FinishReason
				}
			}
		}
	default:
		var r openai.ChatResponse
		if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		for _, ch := range r.Choices {
			text[ch.Index], finish[ch.Index] = ch.Message.Content, deref(ch.FinishReason)
		}
	}
	return text, finish
}

// TestStructuredOutputsThroughServer: on the random-weight model, every
// way of asking for a constraint gives output that satisfies it, on both
// endpoints, streamed and not, greedy and sampled.
func TestStructuredOutputsThroughServer(t *testing.T) {
	s, _ := newEngineServerWith(t, engine.Config{PageTokens: 16, Pages: 256})
	type tc struct {
		name    string
		members string
		check   func(string) error
	}
	schemaCheck := func(doc string) error { return checkServerSchema(doc) }
	cases := []tc{
		{"response_format json_schema", `"response_format":{"type":"json_schema","json_schema":{"name":"w","strict":true,"schema":` + serverSchema + `}}`, schemaCheck},
		{"structured_outputs json compact", `"structured_outputs":{"json":` + serverSchema + `,"disable_any_whitespace":true}`, func(doc string) error {
			if err := checkServerSchema(doc); err != nil {
				return err
			}
			var c bytes.Buffer
			if json.Compact(&c, []byte(doc)) != nil || c.String() != doc {
				return fmt.Errorf("not compact")
			}
			return nil
		}},
		{"guided_json", `"guided_json":` + serverSchema, schemaCheck},
		// Random weights need not finish an unbounded object: json_object
		// outputs are checked when they stop (below).
		{"json_object", `"response_format":{"type":"json_object"},"structured_outputs":null`, func(doc string) error {
			var m map[string]any
			return json.Unmarshal([]byte(doc), &m)
		}},
		{"regex", `"structured_outputs":{"regex":"[A-Z][a-z]{1,6} [0-9]{2}"}`, func(doc string) error {
			if !regexp.MustCompile(`^[A-Z][a-z]{1,6} [0-9]{2}$`).MatchString(doc) {
				return fmt.Errorf("no match")
			}
			return nil
		}},
		{"choice", `"guided_choice":["left","right","up or down"]`, func(doc string) error {
			if !slices.Contains([]string{"left", "right", "up or down"}, doc) {
				return fmt.Errorf("not a choice")
			}
			return nil
		}},
		{"gbnf", `"structured_outputs":{"grammar":"root ::= \"<\" item (\",\" item)* \">\"\nitem ::= [a-c] | \"zz\""}`, func(doc string) error {
			if !regexp.MustCompile(`^<([a-c]|zz)(,([a-c]|zz))*>$`).MatchString(doc) {
				return fmt.Errorf("no match")
			}
			return nil
		}},
	}
	for _, c := range cases {
		for _, path := range []string{"/v1/completions", "/v1/chat/completions"} {
			for _, stream := range []bool{false, true} {
				for _, sampling := range []string{`"temperature":0`, `"temperature":1,"seed":7,"n":2`} {
					input := `"prompt":"Weather:"`
					if path != "/v1/completions" {
						input = `"messages":[{"role":"user","content":"Weather?"}]`
					}
					body := `{` + input + `,"max_tokens":600,` + sampling + `,` + c.members + `}`
					text, finish := generateText(t, s, path, body, stream)
					if len(text) == 0 {
						t.Errorf("%s %s stream %v: no choices", c.name, path, stream)
					}
					for i, doc := range text {
						if c.name == "json_object" && finish[i] == "length" {
							continue
						}
						if err := c.check(doc); err != nil || finish[i] != "stop" {
							t.Errorf("%s %s stream %v %s choice %d: %q finish %q: %v", c.name, path, stream, sampling, i, doc, finish[i], err)
						}
					}
				}
			}
		}
	}
}

// TestGrammarCache: the same constraint compiles once, a different
// option or schema compiles again, and the cache stays bounded.
func TestGrammarCache(t *testing.T) {
	tok := testVocab(t, llama2Template, true)
	b := newFake(t, tok, script{done(engine.FinishStop)})
	b.cfg.Context = 512
	s, _ := newTestServer(t, b, Options{})
	post := func(members string) {
		t.Helper()
		if rec := do(s.Handler(), "POST", "/v1/completions", `{"prompt":"x",`+members+`}`); rec.Code != 200 {
			t.Fatalf("%s: %d %s", members, rec.Code, rec.Body)
		}
	}
	post(`"guided_json":{"type":"integer"}`)
	post(`"response_format":{"type":"json_schema","json_schema":{"schema":{"type":"integer"}}}`)
	post(`"structured_outputs":{"json":"{\"type\":\"integer\"}"}`)
	if s.grammars.compiles != 1 {
		t.Errorf("the same schema three ways: %d compilations, want 1", s.grammars.compiles)
	}
	post(`"structured_outputs":{"json":{"type":"integer"},"disable_any_whitespace":true}`)
	post(`"guided_regex":"{\"type\":\"integer\"}"`)
	if s.grammars.compiles != 3 {
		t.Errorf("after another option and another kind with the same bytes: %d compilations, want 3", s.grammars.compiles)
	}
	st := b.submitted()
	if st[0].req.Grammar == nil || st[0].req.Grammar != st[1].req.Grammar || st[3].req.Grammar == st[0].req.Grammar {
		t.Errorf("engine requests do not share the cached grammar as expected")
	}
	for i := range GrammarCacheEntries + 5 {
		post(fmt.Sprintf(`"guided_choice":["c%d"]`, i))
	}
	if n := s.grammars.len(); n != GrammarCacheEntries {
		t.Errorf("cache holds %d grammars, want the bound %d", n, GrammarCacheEntries)
	}
	// An error is cached too and answered the same.
	for range 2 {
		rec := do(s.Handler(), "POST", "/v1/completions", `{"prompt":"x","guided_json":{"not":{}}}`)
		if rec.Code != 400 || !strings.Contains(rec.Body.String(), "not") {
			t.Errorf("unsupported keyword: %d %s", rec.Code, rec.Body)
		}
	}
}

// TestGrammarCacheConcurrent: concurrent requests for one new grammar
// compile it once.
func TestGrammarCacheConcurrent(t *testing.T) {
	var c grammarCache
	key := [32]byte{1}
	release := make(chan struct{})
	started := make(chan struct{})
	done := make(chan *grammar.Grammar, 4)
	g0, err := grammar.CompileChoice([]string{"a"}, grammar.Options{})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		g, _ := c.get(context.Background(), key, func() (*grammar.Grammar, error) { close(started); <-release; return g0, nil })
		done <- g
	}()
	<-started
	for range 3 {
		go func() {
			g, _ := c.get(context.Background(), key, func() (*grammar.Grammar, error) { t.Error("compiled twice"); return nil, nil })
			done <- g
		}()
	}
	close(release)
	for range 4 {
		if g := <-done; g != g0 {
			t.Errorf("got %p, want the one grammar %p", g, g0)
		}
	}
	if c.compiles != 1 {
		t.Errorf("%d compilations", c.compiles)
	}
}

// TestSamplerControlsReachEngine: logit_bias, min_tokens and ignore_eos
// become the engine request's fields.
func TestSamplerControlsReachEngine(t *testing.T) {
	tok := testVocab(t, llama2Template, true)
	b := newFake(t, tok, script{done(engine.FinishStop)})
	b.cfg.Context = 512
	s, _ := newTestServer(t, b, Options{})
	for _, path := range []string{"/v1/completions", "/v1/chat/completions"} {
		input := `"prompt":"x"`
		if path != "/v1/completions" {
			input = `"messages":[{"role":"user","content":"x"}]`
		}
		rec := do(s.Handler(), "POST", path, `{`+input+`,"logit_bias":{"5":-100,"7":2.5},"min_tokens":4,"ignore_eos":true,"max_tokens":9}`)
		if rec.Code != 200 {
			t.Fatalf("%s: %d %s", path, rec.Code, rec.Body)
		}
		st := b.submitted()
		q := st[len(st)-1].req
		if q.LogitBias[5] != -100 || q.LogitBias[7] != 2.5 || len(q.LogitBias) != 2 || q.MinTokens != 4 || !q.IgnoreEOS || q.Grammar != nil {
			t.Errorf("%s: engine request bias %v min %d ignore_eos %v grammar %v", path, q.LogitBias, q.MinTokens, q.IgnoreEOS, q.Grammar)
		}
	}
}

// TestLogitBiasAndMinTokensThroughServer on the real engine: +100 on a
// token makes it every generated token; min_tokens holds off a forced EOS.
func TestLogitBiasAndMinTokensThroughServer(t *testing.T) {
	s, _ := newEngineServer(t)
	tok := s.b.Tokenizer()
	id := tok.Encode("x", false, false)
	x := id[len(id)-1]
	text, finish := generateText(t, s, "/v1/completions", fmt.Sprintf(`{"prompt":"Hi","max_tokens":5,"ignore_eos":true,"logit_bias":{"%d":100}}`, x), false)
	if want := strings.Repeat(string(tok.TokenPiece(x)), 5); text[0] != want || finish[0] != "length" {
		t.Errorf("bias +100 on %q: %q (%s), want %q", tok.TokenPiece(x), text[0], finish[0], want)
	}
	body := fmt.Sprintf(`{"prompt":"Hi","max_tokens":20,"min_tokens":6,"logit_bias":{"%d":100}}`, tok.EOS())
	rec := do(s.Handler(), "POST", "/v1/completions", body)
	var r openai.CompletionResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil || rec.Code != 200 {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	if r.Usage.CompletionTokens != 7 || deref(r.Choices[0].FinishReason) != "stop" {
		t.Errorf("min_tokens 6 with EOS forced: %d completion tokens, finish %q; want 7 (6 then EOS), stop", r.Usage.CompletionTokens, deref(r.Choices[0].FinishReason))
	}
}

// TestListPrompts: a list of prompts gets n choices per prompt, choice
// i*n+j for prompt i, each the same as that prompt alone; usage counts
// every prompt.
func TestListPrompts(t *testing.T) {
	s, _ := newEngineServer(t)
	prompts := []string{"Once upon", "a time there", "was"}
	var single []string
	var promptTokens int
	for _, p := range prompts {
		text, _ := generateText(t, s, "/v1/completions", fmt.Sprintf(`{"prompt":%q,"max_tokens":6,"temperature":0,"ignore_eos":true}`, p), false)
		single = append(single, text[0])
		promptTokens += len(s.b.Tokenizer().Encode(p, true, true))
	}
	list, _ := json.Marshal(prompts)
	for _, stream := range []bool{false, true} {
		text, finish := generateText(t, s, "/v1/completions", fmt.Sprintf(`{"prompt":%s,"max_tokens":6,"temperature":0,"ignore_eos":true,"n":2}`, list), stream)
		if len(text) != 6 {
			t.Fatalf("stream %v: %d choices, want 6", stream, len(text))
		}
		for i := range 6 {
			if text[i] != single[i/2] || finish[i] != "length" {
				t.Errorf("stream %v choice %d: %q (%s), want prompt %d's %q", stream, i, text[i], finish[i], i/2, single[i/2])
			}
		}
	}
	rec := do(s.Handler(), "POST", "/v1/completions", fmt.Sprintf(`{"prompt":%s,"max_tokens":2,"ignore_eos":true}`, list))
	var r openai.CompletionResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if r.Usage == nil || r.Usage.PromptTokens != promptTokens || r.Usage.CompletionTokens != 6 {
		t.Errorf("usage %+v, want %d prompt tokens and 6 completion tokens", r.Usage, promptTokens)
	}
	// Token-id lists, with echo.
	ids := [][]int32{s.b.Tokenizer().Encode(prompts[0], true, true), s.b.Tokenizer().Encode(prompts[1], true, true)}
	idl, _ := json.Marshal(ids)
	text, _ := generateText(t, s, "/v1/completions", fmt.Sprintf(`{"prompt":%s,"max_tokens":6,"temperature":0,"ignore_eos":true,"echo":true}`, idl), false)
	for i := range 2 {
		if want := s.b.Tokenizer().Decode(ids[i]) + single[i]; text[i] != want {
			t.Errorf("token prompt %d with echo: %q, want %q", i, text[i], want)
		}
	}
	rec = do(s.Handler(), "POST", "/v1/completions", `{"prompt":[[1,2],[3,99999]]}`)
	if rec.Code != 400 || !strings.Contains(rec.Body.String(), "prompt[1][1]") {
		t.Errorf("token outside the vocabulary in the second prompt: %d %s", rec.Code, rec.Body)
	}
}

// TestLegRefusesSeveralSequences: a router leg is one room, so a list of
// prompts on a leg is a 400 rather than several sequences in one room.
func TestLegRefusesSeveralSequences(t *testing.T) {
	tok := testVocab(t, llama2Template, true)
	keys := testLegKeys(t)
	b := &legBackend{fakeBackend: newFake(t, tok, append(tokens(t, tok, 0, "▁Hello"), done(engine.FinishStop)))}
	s, _ := newTestServer(t, b, Options{LegKeys: keys})
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, signedLeg(t, keys, "/v1/completions", `{"prompt":["a","b"],"max_tokens":2}`, testDecodeLeg))
	if rec.Code != 400 || !strings.Contains(rec.Body.String(), "one request per prompt") || len(b.submitted()) != 0 {
		t.Errorf("list prompt on a leg: %d %s, %d submitted", rec.Code, rec.Body, len(b.submitted()))
	}
}

// TestPrefillLegClampsMinTokens: the router's prefill body asks for one
// token; a min_tokens meant for the whole answer must not make it a 400,
// and still holds off an end as that first token.
func TestPrefillLegClampsMinTokens(t *testing.T) {
	tok := testVocab(t, llama2Template, true)
	keys := testLegKeys(t)
	b := &legBackend{fakeBackend: newFake(t, tok, append(tokens(t, tok, 0, "▁Hello"), done(engine.FinishLength)))}
	s, _ := newTestServer(t, b, Options{LegKeys: keys})
	prefill := leg.Info{Room: strings.Repeat("ab", 16), RequestID: "req-8", Leg: leg.KindPrefill}
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, signedLeg(t, keys, "/v1/completions", `{"prompt":"a","max_tokens":1,"min_tokens":5,"guided_regex":"[a-z]+"}`, prefill))
	st := b.submitted()
	if rec.Code != 200 || len(st) != 1 || st[0].req.MinTokens != 1 || st[0].req.Grammar == nil {
		t.Fatalf("prefill leg with min_tokens 5: %d %s, requests %d", rec.Code, rec.Body, len(st))
	}
	// Not on a decode leg or colocated: there it is the client's error.
	rec = do(s.Handler(), "POST", "/v1/completions", `{"prompt":"a","max_tokens":1,"min_tokens":5}`)
	if rec.Code != 401 {
		t.Errorf("unsigned request to a worker: %d, want 401", rec.Code)
	}
	rec = httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, signedLeg(t, keys, "/v1/completions", `{"prompt":"a","max_tokens":1,"min_tokens":5}`, testDecodeLeg))
	if rec.Code != 400 || !strings.Contains(rec.Body.String(), "min_tokens") {
		t.Errorf("decode leg with min_tokens over max_tokens: %d %s, want 400", rec.Code, rec.Body)
	}
}
