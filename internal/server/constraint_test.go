package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

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
	post(`"guided_json":{ "type" :  "integer" }`)
	if s.grammars.compiles != 1 {
		t.Errorf("the same schema four ways (one with other whitespace): %d compilations, want 1", s.grammars.compiles)
	}
	post(`"structured_outputs":{"json":{"type":"integer"},"disable_any_whitespace":true}`)
	post(`"guided_regex":"{\"type\":\"integer\"}"`)
	if s.grammars.compiles != 3 {
		t.Errorf("after another option and another kind with the same bytes: %d compilations, want 3", s.grammars.compiles)
	}
	st := b.submitted()
	if st[0].req.Grammar == nil || st[0].req.Grammar != st[1].req.Grammar || st[3].req.Grammar != st[0].req.Grammar || st[4].req.Grammar == st[0].req.Grammar {
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
		g, _ := c.get(context.Background(), key, func(context.Context) (*grammar.Grammar, error) { close(started); <-release; return g0, nil })
		done <- g
	}()
	<-started
	for range 3 {
		go func() {
			g, _ := c.get(context.Background(), key, func(context.Context) (*grammar.Grammar, error) { t.Error("compiled twice"); return nil, nil })
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

// TestGrammarCompileSlots: with every compile slot busy, a request whose
// grammar is not cached is refused at once with 429 and a Retry-After
// (counted), one whose grammar is cached is served, and a compile that
// ends frees its slot.
func TestGrammarCompileSlots(t *testing.T) {
	tok := testVocab(t, llama2Template, true)
	b := newFake(t, tok, script{done(engine.FinishStop)})
	b.cfg.Context = 512
	s, _ := newTestServer(t, b, Options{})
	s.grammars.slots = 1
	if rec := do(s.Handler(), "POST", "/v1/completions", `{"prompt":"x","guided_json":{"type":"integer"}}`); rec.Code != 200 {
		t.Fatalf("first request: %d %s", rec.Code, rec.Body)
	}
	// A compile holds the one slot.
	release, started := make(chan struct{}), make(chan struct{})
	go s.grammars.get(context.Background(), [32]byte{9}, func(context.Context) (*grammar.Grammar, error) {
		close(started)
		<-release
		return nil, errors.New("held")
	})
	<-started
	rec := do(s.Handler(), "POST", "/v1/completions", `{"prompt":"x","guided_json":{"type":"string"}}`)
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "1" || !strings.Contains(rec.Body.String(), "compile slot") {
		t.Errorf("new grammar with no free slot: %d, Retry-After %q, %s; want 429 with Retry-After 1", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
	if m := do(s.Handler(), "GET", "/metrics", "").Body.String(); !strings.Contains(m, "tandem_grammar_compile_busy_total 1\n") {
		t.Errorf("/metrics does not count the busy refusal:\n%s", m)
	}
	if rec := do(s.Handler(), "POST", "/v1/completions", `{"prompt":"x","guided_json":{"type":"integer"}}`); rec.Code != 200 {
		t.Errorf("cached grammar while the slots are busy: %d %s", rec.Code, rec.Body)
	}
	close(release)
	for range 100 { // the held compile returns its slot as it ends
		if rec = do(s.Handler(), "POST", "/v1/completions", `{"prompt":"x","guided_json":{"type":"string"}}`); rec.Code != http.StatusTooManyRequests {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if rec.Code != 200 {
		t.Errorf("after the slot is free: %d %s", rec.Code, rec.Body)
	}
}

// TestGrammarCompileStopsWhenClientsLeave: a compile runs under a context
// that ends when the last request waiting for it leaves, and is then not
// cached; while another request still waits, it goes on and serves that
// one. A real compile through the server stops when its client leaves.
func TestGrammarCompileStopsWhenClientsLeave(t *testing.T) {
	var c grammarCache
	g0, err := grammar.CompileChoice([]string{"a"}, grammar.Options{})
	if err != nil {
		t.Fatal(err)
	}
	long := func(started chan<- struct{}, finish <-chan struct{}) func(context.Context) (*grammar.Grammar, error) {
		return func(ctx context.Context) (*grammar.Grammar, error) {
			close(started)
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-finish:
				return g0, nil
			}
		}
	}
	// Alone: leaving cancels the compile, and nothing is cached.
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	go func() { <-started; cancel() }()
	if _, err := c.get(ctx, [32]byte{1}, long(started, nil)); !errors.Is(err, context.Canceled) {
		t.Fatalf("compile whose client left: %v", err)
	}
	if c.len() != 0 || c.busy != 0 {
		t.Errorf("after an abandoned compile: %d cached, %d slots busy; want none", c.len(), c.busy)
	}
	// With a second waiter: the first leaves, the compile goes on.
	ctx1, cancel1 := context.WithCancel(context.Background())
	started, finish := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() { _, err := c.get(ctx1, [32]byte{2}, long(started, finish)); first <- err }()
	<-started
	second := make(chan *grammar.Grammar, 1)
	go func() {
		g, _ := c.get(context.Background(), [32]byte{2}, func(context.Context) (*grammar.Grammar, error) { t.Error("compiled twice"); return nil, nil })
		second <- g
	}()
	for { // the second request is waiting
		c.mu.Lock()
		w := c.m[[32]byte{2}].Value.(*grammarEntry).waiters
		c.mu.Unlock()
		if w == 2 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancel1()
	time.Sleep(20 * time.Millisecond) // the compile must not see a cancellation meanwhile
	close(finish)
	if g := <-second; g != g0 {
		t.Errorf("the request that stayed got %v", g)
	}
	<-first

	// Through the server: a regex whose automaton takes about a second.
	tok := testVocab(t, llama2Template, true)
	b := newFake(t, tok, script{done(engine.FinishStop)})
	b.cfg.Context = 512
	s, _ := newTestServer(t, b, Options{})
	rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer rcancel()
	req := httptest.NewRequestWithContext(rctx, "POST", "/v1/completions", strings.NewReader(`{"prompt":"x","guided_regex":"(a|b)*a(a|b){16}"}`))
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	s.Handler().ServeHTTP(httptest.NewRecorder(), req)
	took := time.Since(start)
	if s.grammars.len() != 0 || s.grammars.busy != 0 {
		t.Errorf("after the client left (%v): %d cached, %d slots busy; want none", took, s.grammars.len(), s.grammars.busy)
	}
}

// TestGrammarBudgetFinishThroughServer: a sequence the engine ends for its
// grammar's mask budget is answered 400 naming the constraint as too
// costly, streamed as an error event, and counted under finish reason
// grammar_budget; a Submit refused for the grammar's cost is a 400 too.
func TestGrammarBudgetFinishThroughServer(t *testing.T) {
	tok := testVocab(t, llama2Template, true)
	budgetErr := fmt.Errorf("%w: one token mask took longer than 250ms", engine.ErrGrammarTooCostly)
	b := newFake(t, tok, append(tokens(t, tok, 0, "a"), engine.Update{Done: true, Finish: engine.FinishGrammarBudget, Err: budgetErr}))
	b.cfg.Context = 512
	s, _ := newTestServer(t, b, Options{})
	rec := do(s.Handler(), "POST", "/v1/completions", `{"prompt":"x","guided_grammar":"root ::= \"a\"+"}`)
	if rec.Code != 400 || !strings.Contains(rec.Body.String(), "too costly to enforce") {
		t.Errorf("non-streamed: %d %s", rec.Code, rec.Body)
	}
	rec = do(s.Handler(), "POST", "/v1/completions", `{"prompt":"x","stream":true,"guided_grammar":"root ::= \"a\"+"}`)
	if !strings.Contains(rec.Body.String(), "too costly to enforce") {
		t.Errorf("streamed: %d %s", rec.Code, rec.Body)
	}
	if m := do(s.Handler(), "GET", "/metrics", "").Body.String(); !strings.Contains(m, `tandem_request_finished_total{finish_reason="grammar_budget"} 2`+"\n") {
		t.Errorf("/metrics does not count the two grammar_budget ends:\n%s", m)
	}
	b.submitErr = fmt.Errorf("%w: %w: grammar: the token masks of this grammar are too costly: ...", engine.ErrBadRequest, engine.ErrGrammarTooCostly)
	rec = do(s.Handler(), "POST", "/v1/completions", `{"prompt":"x","guided_grammar":"root ::= \"a\"+"}`)
	if rec.Code != 400 || !strings.Contains(rec.Body.String(), "too costly to enforce") {
		t.Errorf("refused at Submit: %d %s", rec.Code, rec.Body)
	}
}
