package router_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"tandem/internal/api/leg"
	"tandem/internal/api/openai"
	"tandem/internal/engine"
	"tandem/internal/engine/model"
	"tandem/internal/engine/tokenizer"
	"tandem/internal/router"
	"tandem/internal/router/pool"
	"tandem/internal/server"
)

// scriptBackend generates a fixed token sequence for every request and
// hands each request to got.
type scriptBackend struct {
	tok *tokenizer.Tokenizer
	ids []int32
	got chan engine.Request
}

type scriptStream struct {
	ids  []int32
	pos  int
	done bool
}

func (s *scriptStream) Next(ctx context.Context) (engine.Update, error) {
	if s.done {
		return engine.Update{}, io.EOF
	}
	if s.pos < len(s.ids) {
		s.pos++
		return engine.Update{Tokens: []engine.Token{{ID: s.ids[s.pos-1]}}}, nil
	}
	s.done = true
	return engine.Update{Done: true, Finish: engine.FinishStop}, nil
}
func (s *scriptStream) Cancel() {}

func (b *scriptBackend) Submit(_ context.Context, req engine.Request) (server.Stream, error) {
	b.got <- req
	ids := b.ids
	if req.MaxTokens < len(ids) {
		ids = ids[:req.MaxTokens]
	}
	return &scriptStream{ids: ids}, nil
}

// SubmitLeg serves a verified leg as Submit serves a request: the test's
// workers script their answer whatever the leg.
func (b *scriptBackend) SubmitLeg(ctx context.Context, _ leg.Info, req engine.Request) (server.Stream, error) {
	return b.Submit(ctx, req)
}

func (b *scriptBackend) Stats() engine.Stats { return engine.Stats{} }
func (b *scriptBackend) ModelConfig() model.Config {
	return model.Config{Name: "m", Context: 1 << 16, Vocab: b.tok.VocabSize()}
}
func (b *scriptBackend) Tokenizer() *tokenizer.Tokenizer { return b.tok }

// spell returns the ids of byteVocab's one-character tokens for s.
func spell(t *testing.T, tok *tokenizer.Tokenizer, s string) []int32 {
	t.Helper()
	var ids []int32
	for _, r := range s {
		text := string(r)
		switch r {
		case ' ':
			text = "▁"
		case '\n':
			text = "<0x0A>"
		}
		found := false
		for id, x := range tok.Vocab().Tokens {
			if x == text {
				ids, found = append(ids, int32(id)), true
				break
			}
		}
		if !found {
			t.Fatalf("no token for %q", text)
		}
	}
	return ids
}

// TestToolCallsThroughRouter: tool fields reach both legs of a
// disaggregated request through the router; both workers constrain with
// the grammar (tool_choice required); the decode worker, which writes the
// answer, parses its output into tool calls, streamed and not, as a
// colocated server does.
func TestToolCallsThroughRouter(t *testing.T) {
	keys, err := leg.NewKeys([]byte("router-test-cluster-token-0123456789"))
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := os.ReadFile("../server/chat/testdata/templates/qwen3.jinja")
	if err != nil {
		t.Fatal(err)
	}
	tok := byteVocab(t)
	out := "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"
	backends := map[string]*scriptBackend{}
	workers := map[string]*httptest.Server{}
	for _, role := range []string{"prefill", "decode"} {
		pd := http.NewServeMux()
		pd.HandleFunc("GET /pd/status", func(w http.ResponseWriter, r *http.Request) {
			json.NewEncoder(w).Encode(pool.Status{Role: role})
		})
		pd.HandleFunc("GET /pd/info", func(w http.ResponseWriter, r *http.Request) {
			json.NewEncoder(w).Encode(pool.Info{Role: role, TransferAddr: "127.0.0.1:9", Model: "m"})
		})
		b := &scriptBackend{tok: tok, ids: spell(t, tok, out), got: make(chan engine.Request, 8)}
		backends[role] = b
		s := server.New(b, server.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), ChatTemplate: string(tmpl),
			Registry: prometheus.NewRegistry(), LegKeys: keys, Legs: b, Mounts: map[string]http.Handler{"/pd/": keys.RequireCredential(pd)}})
		s.SetReady(true)
		workers[role] = httptest.NewServer(s.Handler())
		t.Cleanup(workers[role].Close)
	}
	c := newCluster(t, nil, nil, func(o *router.Options) {
		o.Prefill, o.Decode, o.LegKeys = []string{workers["prefill"].URL}, []string{workers["decode"].URL}, keys
	})
	tools := `[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]`
	body := `{"model":"m","messages":[{"role":"user","content":"Weather?"}],"tools":` + tools + `,"tool_choice":"required"%s}`

	status, resp := c.post(t, "/v1/chat/completions", strings.Replace(body, "%s", "", 1))
	var r openai.ChatResponse
	if err := json.Unmarshal([]byte(resp), &r); err != nil || status != 200 || len(r.Choices) != 1 {
		t.Fatalf("POST through the router = %d %s (%v)", status, resp, err)
	}
	ch := r.Choices[0]
	if len(ch.Message.ToolCalls) != 1 || ch.Message.ToolCalls[0].Function.Name != "get_weather" ||
		ch.Message.ToolCalls[0].Function.Arguments != `{"city": "Paris"}` || ch.Message.Content != "" || deref(ch.FinishReason) != "tool_calls" {
		t.Fatalf("answer %s: want one get_weather call, no content, finish tool_calls", resp)
	}
	if !strings.Contains(resp, `"content":null`) {
		t.Errorf("answer %s: want content null", resp)
	}
	for role, b := range backends {
		req := <-b.got // the prefill leg may still be answering
		if req.Grammar == nil {
			t.Errorf("%s leg: no grammar submitted", role)
		}
		if p := tok.Decode(req.Prompt); !strings.Contains(p, "<tools>") {
			t.Errorf("%s leg: the prompt does not carry the tools: %q", role, p)
		}
	}

	status, resp = c.post(t, "/v1/chat/completions", strings.Replace(body, "%s", `,"stream":true`, 1))
	if status != 200 {
		t.Fatalf("stream: %d %s", status, resp)
	}
	var args, name, finish string
	for _, line := range strings.Split(resp, "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var chunk openai.ChatChunk
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			t.Fatalf("chunk %s: %v", data, err)
		}
		for _, cc := range chunk.Choices {
			for _, d := range cc.Delta.ToolCalls {
				if d.Function != nil {
					name += d.Function.Name
					args += d.Function.Arguments
				}
			}
			if cc.FinishReason != nil {
				finish = *cc.FinishReason
			}
		}
	}
	if name != "get_weather" || args != `{"city": "Paris"}` || finish != "tool_calls" {
		t.Fatalf("streamed through the router: name %q args %q finish %q", name, args, finish)
	}
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
