package server

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"tandem/internal/api/leg"
	"tandem/internal/api/openai"
	"tandem/internal/engine"
	"tandem/internal/engine/kernels"
	"tandem/internal/engine/kvcache"
	"tandem/internal/engine/model"
	"tandem/internal/engine/sample"
	"tandem/internal/engine/tensor"
	"tandem/internal/engine/tokenizer"
)

func ptrs(xs ...float64) []*float64 {
	out := make([]*float64, len(xs))
	for i := range xs {
		out[i] = &xs[i]
	}
	return out
}

// The fake tests' prompt is the token ids of BOS, ▁Hello, ▁world (see
// plpPrompt), which echo as plpText; plpValues are the prompt logprobs the
// fake engine reports for them.
var plpValues = []float32{0, -2.5, -3}

const plpText = "Hello world"

// plpPrompt returns the prompt's ids and their JSON array (the test
// vocabulary has no merges that would encode plpText to these).
func plpPrompt(t *testing.T, tok *tokenizer.Tokenizer) ([]int32, string) {
	t.Helper()
	prompt := append([]int32{tok.BOS()}, tokenIDs(t, tok, "▁Hello", "▁world")...)
	return prompt, js(prompt)
}

// plpFixture returns a fake backend whose streams report plpValues with
// their first token, and the prompt_logprobs member the answers must carry
// for them, and the prompt's JSON.
func plpFixture(t *testing.T, chatTemplate string, scripts ...func() []engine.Update) (*fakeBackend, string, string) {
	t.Helper()
	tok := testVocab(t, chatTemplate, true)
	prompt, promptJSON := plpPrompt(t, tok)
	var ss []script
	for _, f := range scripts {
		ups := f()
		ups[0].PromptLogprobs = plpValues
		ss = append(ss, ups)
	}
	b := newFake(t, tok, ss...)
	b.cfg.Context = 512
	member := fmt.Sprintf(`"prompt_logprobs":[null,{"%d":{"logprob":-2.5,"decoded_token":" Hello"}},{"%d":{"logprob":-3,"decoded_token":" world"}}]`,
		prompt[1], prompt[2])
	return b, member, promptJSON
}

// TestPromptLogprobsCompletion: the member's shape, its place (last in the
// choice, where the router splices it), the engine asked for them, and no
// member when not asked.
func TestPromptLogprobsCompletion(t *testing.T) {
	for _, v := range []string{"0", "1", "20"} {
		b, member, pj := plpFixture(t, "", func() []engine.Update {
			return append(tokens(t, testVocab(t, "", true), 0, "!"), done(engine.FinishStop))
		})
		s, _ := newTestServer(t, b, Options{})
		rec := do(s.Handler(), "POST", "/v1/completions", `{"prompt":`+pj+`,"prompt_logprobs":`+v+`}`)
		want := `"finish_reason":"stop",` + member + `}]`
		if rec.Code != 200 || !strings.Contains(rec.Body.String(), want) {
			t.Errorf("prompt_logprobs %s: answer %d %s, want a choice ending with %s", v, rec.Code, rec.Body, want)
		}
		if q := b.submitted()[0].req; !q.PromptLogprobs {
			t.Errorf("prompt_logprobs %s: engine request has PromptLogprobs false, want true", v)
		}
	}
	for _, body := range []string{`{"prompt":"Hi"}`, `{"prompt":"Hi","prompt_logprobs":null}`, `{"prompt":"Hi","echo":true}`, `{"prompt":"Hi","logprobs":1}`} {
		tok := testVocab(t, "", true)
		b := newFake(t, tok, append(tokens(t, tok, 0, "!"), done(engine.FinishStop)))
		s, _ := newTestServer(t, b, Options{})
		rec := do(s.Handler(), "POST", "/v1/completions", body)
		if rec.Code != 200 || strings.Contains(rec.Body.String(), "prompt_logprobs") {
			t.Errorf("%s: answer %d %s, want 200 without prompt_logprobs", body, rec.Code, rec.Body)
		}
		if b.submitted()[0].req.PromptLogprobs {
			t.Errorf("%s: engine request has PromptLogprobs true, want false", body)
		}
	}
}

// TestPromptLogprobsStreamedFirstChunk: streamed, only each choice's first
// chunk carries them, for completions and chat (the role chunk), n=2.
func TestPromptLogprobsStreamedFirstChunk(t *testing.T) {
	tok := testVocab(t, chatMLTemplate, true)
	two := func() []engine.Update { return append(tokens(t, tok, 0, "▁Hello", "!"), done(engine.FinishStop)) }
	for _, path := range []string{"/v1/completions", "/v1/chat/completions"} {
		b, member, pj := plpFixture(t, chatMLTemplate, two, two)
		body := `{"prompt":` + pj + `,"prompt_logprobs":2,"n":2,"stream":true}`
		if path == "/v1/chat/completions" {
			body = `{"messages":[{"role":"user","content":"Hi"}],"prompt_logprobs":2,"n":2,"stream":true}`
			f, err := newChatFormat(tok, "")
			if err != nil {
				t.Fatal(err)
			}
			prompt, err := f.prompt(tok, []openai.Message{{Role: "user", Content: "Hi"}})
			if err != nil {
				t.Fatal(err)
			}
			plp := make([]float32, len(prompt))
			var m strings.Builder
			m.WriteString(`"prompt_logprobs":[null`)
			for i := 1; i < len(prompt); i++ {
				plp[i] = -float32(i) / 4
				fmt.Fprintf(&m, `,{"%d":{"logprob":%v,"decoded_token":%s}}`, prompt[i], plp[i], js(string(tok.TokenPiece(prompt[i]))))
			}
			member = m.String() + "]"
			b.scripts = nil
			for range 2 {
				ups := two()
				ups[0].PromptLogprobs = plp
				b.scripts = append(b.scripts, ups)
			}
		}
		s, _ := newTestServer(t, b, Options{})
		rec := do(s.Handler(), "POST", path, body)
		ev := sseEvents(t, rec.Body.String())
		if rec.Code != 200 || len(ev) == 0 || ev[len(ev)-1] != "[DONE]" {
			t.Fatalf("%s: stream %d %q, want 200 ending in [DONE]", path, rec.Code, ev)
		}
		seen := map[int]int{}
		for _, data := range ev[:len(ev)-1] {
			var c struct {
				Choices []struct {
					Index int `json:"index"`
					Delta *struct {
						Role string `json:"role"`
					} `json:"delta"`
				} `json:"choices"`
			}
			if err := json.Unmarshal([]byte(data), &c); err != nil || len(c.Choices) != 1 {
				t.Fatalf("%s: chunk %s: %v, want one choice", path, data, err)
			}
			ch := c.Choices[0]
			first := seen[ch.Index] == 0
			seen[ch.Index]++
			if first && !strings.HasSuffix(data, member+"}]}") {
				t.Errorf("%s: first chunk of choice %d = %s, want one ending with %s", path, ch.Index, data, member)
			}
			if first && ch.Delta != nil && ch.Delta.Role != "assistant" {
				t.Errorf("%s: first chunk of choice %d = %s, want the role chunk", path, ch.Index, data)
			}
			if !first && strings.Contains(data, `"prompt_logprobs"`) {
				t.Errorf("%s: a later chunk of choice %d carries prompt_logprobs: %s", path, ch.Index, data)
			}
		}
		if len(seen) != 2 || seen[0] < 2 || seen[1] < 2 {
			t.Errorf("%s: chunks per choice %v, want at least 2 for choices 0 and 1", path, seen)
		}
		for i, st := range b.submitted() {
			if !st.req.PromptLogprobs {
				t.Errorf("%s: stream %d engine request has PromptLogprobs false, want true", path, i)
			}
		}
	}
}

// TestEchoWithLogprobs: the legacy block starts with the prompt's tokens
// (first logprob null, top_logprobs null, offsets in the echoed text from
// 0), then the generated ones; non-streamed and streamed (the prompt's part
// in the opening chunk with the echoed text).
func TestEchoWithLogprobs(t *testing.T) {
	tok := testVocab(t, "", true)
	gen := func() []engine.Update { return append(tokens(t, tok, 2, "!", "é"), done(engine.FinishLength)) }
	b, member, pj := plpFixture(t, "", gen)
	s, _ := newTestServer(t, b, Options{})
	rec := do(s.Handler(), "POST", "/v1/completions", `{"prompt":`+pj+`,"echo":true,"logprobs":2,"max_tokens":2}`)
	var r openai.CompletionResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil || rec.Code != 200 || len(r.Choices) != 1 {
		t.Fatalf("answer %d %s: %v", rec.Code, rec.Body, err)
	}
	alts := map[string]float64{"a": -1, "b": -2}
	want := &openai.CompletionLogprobs{
		Tokens:        []string{"", " Hello", " world", "!", "é"},
		TokenLogprobs: append([]*float64{nil}, ptrs(-2.5, -3, -0.5, -1)...),
		TopLogprobs:   []map[string]float64{nil, nil, nil, alts, alts},
		TextOffset:    []int{0, 0, 5, 11, 12},
	}
	if c := r.Choices[0]; c.Text != plpText+"!é" || !reflect.DeepEqual(c.Logprobs, want) {
		t.Errorf("echo+logprobs choice text %q logprobs %s, want %q %s", c.Text, js(c.Logprobs), plpText+"!é", js(want))
	}
	if !strings.Contains(rec.Body.String(), `"token_logprobs":[null,-2.5,-3,-0.5,-1],"top_logprobs":[null,null,null,{`) {
		t.Errorf("answer %s: want token_logprobs [null,-2.5,-3,-0.5,-1] and null top_logprobs for the prompt", rec.Body)
	}
	if !strings.Contains(rec.Body.String(), member+"}]") {
		t.Errorf("answer %s: want the choice to end with %s (the router reads the prefill leg's there)", rec.Body, member)
	}
	if q := b.submitted()[0].req; !q.PromptLogprobs || q.TopLogprobs != 2 {
		t.Errorf("engine request PromptLogprobs %v TopLogprobs %d, want true and 2", q.PromptLogprobs, q.TopLogprobs)
	}

	b, _, pj = plpFixture(t, "", gen)
	s, _ = newTestServer(t, b, Options{})
	chunks := completionChunks(t, do(s.Handler(), "POST", "/v1/completions", `{"prompt":`+pj+`,"echo":true,"logprobs":2,"max_tokens":2,"stream":true}`))
	got := &openai.CompletionLogprobs{}
	text := ""
	for k, c := range chunks {
		ch := c.Choices[0]
		if k == 0 && (ch.Text != plpText || len(ch.PromptLogprobs) != 3) {
			t.Errorf("first chunk %s, want the echoed prompt with its prompt_logprobs", js(c))
		}
		if k > 0 && ch.PromptLogprobs != nil {
			t.Errorf("chunk %d %s carries prompt_logprobs, want them in the first only", k, js(c))
		}
		text += ch.Text
		if lp := ch.Logprobs; lp != nil {
			got.Tokens = append(got.Tokens, lp.Tokens...)
			got.TokenLogprobs = append(got.TokenLogprobs, lp.TokenLogprobs...)
			got.TopLogprobs = append(got.TopLogprobs, lp.TopLogprobs...)
			got.TextOffset = append(got.TextOffset, lp.TextOffset...)
		}
	}
	if text != plpText+"!é" || !reflect.DeepEqual(got, want) {
		t.Errorf("streamed echo+logprobs text %q logprobs %s, want %q %s", text, js(got), plpText+"!é", js(want))
	}
}

// TestPromptLogprobsTokenPromptOffsets: for a token-id prompt the echoed
// text is the tokens' decoding and the offsets point into it.
func TestPromptLogprobsTokenPromptOffsets(t *testing.T) {
	tok := testVocab(t, "", true)
	ids := tokenIDs(t, tok, "▁Hello", "é", "▁the", "!")
	ups := append(tokens(t, tok, 0, "▁world"), done(engine.FinishLength))
	ups[0].PromptLogprobs = []float32{0, -1, -2, -3}
	b := newFake(t, tok, ups)
	s, _ := newTestServer(t, b, Options{})
	rec := do(s.Handler(), "POST", "/v1/completions", fmt.Sprintf(`{"prompt":[%d,%d,%d,%d],"echo":true,"logprobs":0,"max_tokens":1}`, ids[0], ids[1], ids[2], ids[3]))
	var r openai.CompletionResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil || len(r.Choices) != 1 || r.Choices[0].Logprobs == nil {
		t.Fatalf("answer %d %s: %v", rec.Code, rec.Body, err)
	}
	c := r.Choices[0]
	if want := []int{0, 5, 6, 10, 11}; c.Text != "Helloé the! world" || !reflect.DeepEqual(c.Logprobs.TextOffset, want) {
		t.Errorf("text %q offsets %v, want %q %v", c.Text, c.Logprobs.TextOffset, "Helloé the! world", want)
	}
}

// TestPromptLogprobsDecodeLeg: a router's decode leg does not ask its
// engine (which imports the prompt's K/V and cannot compute them) and
// leaves the member out for the router to splice; a prefill leg asks.
func TestPromptLogprobsDecodeLeg(t *testing.T) {
	for _, kind := range []string{"decode", "prefill"} {
		tok := testVocab(t, "", true)
		_, pj := plpPrompt(t, tok)
		ups := append(tokens(t, tok, 0, "!"), done(engine.FinishStop))
		if kind == "prefill" {
			ups[0].PromptLogprobs = plpValues
		}
		b := newFake(t, tok, ups)
		keys := testLegKeys(t)
		s, _ := newTestServer(t, b, Options{LegKeys: keys})
		hr := signedLeg(t, keys, "/v1/completions", `{"prompt":`+pj+`,"prompt_logprobs":1,"echo":true,"logprobs":0}`,
			leg.Info{Room: strings.Repeat("ab", 16), RequestID: "req-1", Leg: kind, Prefill: "127.0.0.1:1"})
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, hr)
		if rec.Code != 200 {
			t.Fatalf("%s leg: status %d %s, want 200", kind, rec.Code, rec.Body)
		}
		q := b.submitted()[0].req
		has := strings.Contains(rec.Body.String(), `"prompt_logprobs"`)
		if kind == "decode" {
			if q.PromptLogprobs || has {
				t.Errorf("decode leg: engine PromptLogprobs %v, answer %s; want false and no prompt_logprobs", q.PromptLogprobs, rec.Body)
			}
			if want := `"token_logprobs":[null,null,null,-0.5]`; !strings.Contains(rec.Body.String(), want) {
				t.Errorf("decode leg: answer %s, want %s (the prompt's logprobs are unknown there)", rec.Body, want)
			}
		} else if !q.PromptLogprobs || !has {
			t.Errorf("prefill leg: engine PromptLogprobs %v, answer %s; want true and prompt_logprobs", q.PromptLogprobs, rec.Body)
		}
	}
}

// TestPromptLogprobsWrongCount: a backend that does not bring one value
// per prompt token fails the request instead of answering a wrong shape.
func TestPromptLogprobsWrongCount(t *testing.T) {
	for _, plp := range [][]float32{nil, {0, -1}, {0, -1, -2, -3}} {
		tok := testVocab(t, "", true)
		_, pj := plpPrompt(t, tok)
		ups := append(tokens(t, tok, 0, "!"), done(engine.FinishStop))
		ups[0].PromptLogprobs = plp
		s, _ := newTestServer(t, newFake(t, tok, ups), Options{})
		rec := do(s.Handler(), "POST", "/v1/completions", `{"prompt":`+pj+`,"prompt_logprobs":0}`)
		e := decodeError(t, rec.Body.String())
		if want := fmt.Sprintf("returned %d prompt logprobs for a 3-token prompt", len(plp)); rec.Code != 500 || !strings.Contains(e.Error.Message, want) {
			t.Errorf("%d prompt logprobs: %d %s, want 500 saying %q", len(plp), rec.Code, rec.Body, want)
		}
	}
}

// TestPromptLogprobsEngine runs the real engine on the synthesized tiny
// model: the values answered equal log-softmax of model.Runner's logits
// over the whole prompt at once (the engine prefills in chunks of 8 tokens,
// and the prompt's pages are in the prefix cache from a first request), in
// prompt_logprobs, in the echo+logprobs block, streamed and for n=2.
func TestPromptLogprobsEngine(t *testing.T) {
	s, e := newEngineServerWith(t, engine.Config{PageTokens: 16, Pages: 64, PrefixCache: true, MaxBatchTokens: 8, KVType: tensor.F16})
	m := e.Model()
	text := "Once upon a time, there was a little girl named Lily who liked to play."
	prompt := m.Tokenizer.Encode(text, true, true)
	if len(prompt) < 17 {
		t.Fatalf("prompt of %d tokens, want more than a page", len(prompt))
	}
	cc := e.KVCache().Config()
	cc.Pages = cc.PagesFor(len(prompt))
	kv, err := kvcache.New(cc)
	if err != nil {
		t.Fatal(err)
	}
	pages, _ := kv.Alloc(cc.Pages)
	pool := kernels.NewPool(1)
	defer pool.Close()
	out, err := model.NewRunner(m, pool).Forward(kv, []model.Seq{{Tokens: prompt, Pages: pages, AllLogits: true}})
	if err != nil {
		t.Fatal(err)
	}
	v := m.Config.Vocab
	want := make([]float64, len(prompt))
	for i := 1; i < len(prompt); i++ {
		want[i] = float64(sample.LogSoftmax(out[0][(i-1)*v:i*v], prompt[i]))
	}
	check := func(what string, plp openai.PromptLogprobs) {
		t.Helper()
		if len(plp) != len(prompt) || plp[0] != nil {
			t.Errorf("%s: prompt_logprobs has %d entries (first %v), want %d with null first", what, len(plp), plp, len(prompt))
			return
		}
		for i := 1; i < len(prompt); i++ {
			id := fmt.Sprint(prompt[i])
			got, ok := plp[i][id]
			if len(plp[i]) != 1 || !ok || got.Logprob != want[i] || got.DecodedToken != string(m.Tokenizer.TokenPiece(prompt[i])) {
				t.Errorf("%s: prompt_logprobs[%d] = %v, want {%s: {%v %q}}", what, i, plp[i], id, want[i], m.Tokenizer.TokenPiece(prompt[i]))
			}
		}
	}
	body := func(extra string) string {
		return `{"prompt":` + js(text) + `,"max_tokens":3,"temperature":0,"ignore_eos":true` + extra + `}`
	}
	if rec := do(s.Handler(), "POST", "/v1/completions", body("")); rec.Code != 200 {
		t.Fatalf("plain request: %d %s", rec.Code, rec.Body)
	}
	if hit := e.Stats().PrefixHitTokens; hit != 0 {
		t.Fatalf("prefix cache hits %d before any repeat, want 0", hit)
	}
	rec := do(s.Handler(), "POST", "/v1/completions", body(`,"prompt_logprobs":1,"n":2,"echo":true,"logprobs":1`))
	var r openai.CompletionResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil || rec.Code != 200 || len(r.Choices) != 2 {
		t.Fatalf("answer %d %s: %v", rec.Code, rec.Body, err)
	}
	for i, c := range r.Choices {
		check(fmt.Sprintf("choice %d", i), c.PromptLogprobs)
		lp := c.Logprobs
		if lp == nil || len(lp.TokenLogprobs) != len(prompt)+3 || lp.TokenLogprobs[0] != nil {
			t.Fatalf("choice %d: logprobs %s, want %d entries, the first null", i, js(lp), len(prompt)+3)
		}
		for j := 1; j < len(prompt); j++ {
			if got := lp.TokenLogprobs[j]; got == nil || *got != want[j] || lp.TopLogprobs[j] != nil {
				t.Errorf("choice %d: legacy prompt token %d: logprob %v top %v, want %v and null", i, j, got, lp.TopLogprobs[j], want[j])
			}
		}
	}
	if rec := do(s.Handler(), "POST", "/v1/completions", body("")); rec.Code != 200 || e.Stats().PrefixHitTokens == 0 {
		t.Fatalf("plain repeat: %d %s, prefix cache hits %d; want the prompt's pages cached", rec.Code, rec.Body, e.Stats().PrefixHitTokens)
	}
	chunks := completionChunks(t, do(s.Handler(), "POST", "/v1/completions", body(`,"prompt_logprobs":0,"stream":true`)))
	check("streamed first chunk", chunks[0].Choices[0].PromptLogprobs)
	rec = do(s.Handler(), "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi there"}],"max_tokens":2,"prompt_logprobs":0}`)
	var cr openai.ChatResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &cr); err != nil || rec.Code != 200 || len(cr.Choices) != 1 {
		t.Fatalf("chat answer %d %s: %v", rec.Code, rec.Body, err)
	}
	if plp := cr.Choices[0].PromptLogprobs; len(plp) < 2 || plp[0] != nil || len(plp[1]) != 1 {
		t.Errorf("chat prompt_logprobs %s, want null then one entry per token", js(plp))
	}
}

func js(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v (%v)", v, err)
	}
	return string(b)
}
