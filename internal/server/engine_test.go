package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tandem/internal/api/openai"
	"tandem/internal/engine"
	"tandem/internal/engine/kernels"
	"tandem/internal/engine/model"
	"tandem/internal/engine/tensor"
	"tandem/internal/synth"
)

// newEngineServer synthesizes the tiny model and serves it through
// EngineBackend.
func newEngineServer(t *testing.T) (*Server, *engine.Engine) {
	t.Helper()
	return newEngineServerWith(t, engine.Config{PageTokens: 16, Pages: 64, PrefixCache: true})
}

// newEngineServerWith is newEngineServer with the engine configured by cfg.
func newEngineServerWith(t *testing.T, ecfg engine.Config) (*Server, *engine.Engine) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	cfg, err := synth.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	if err := synth.Write(path, synth.Options{Config: cfg, Type: tensor.Q8_0, Seed: 3}); err != nil {
		t.Fatalf("synth.Write: %v", err)
	}
	m, err := model.Load(path)
	if err != nil {
		t.Fatalf("model.Load: %v", err)
	}
	pool := kernels.NewPool(1)
	e, err := engine.New(model.NewRunner(m, pool), ecfg, nil)
	if err != nil {
		t.Fatalf("engine.New: %v", err)
	}
	t.Cleanup(func() {
		e.Close()
		pool.Close()
		m.Close()
	})
	s, _ := newTestServer(t, EngineBackend(e), Options{})
	return s, e
}

// TestEngineBackend runs requests through the real engine: greedy streamed
// text equals the non-streamed text, the context reported is the engine's,
// and a disconnected client's sequence leaves the engine.
func TestEngineBackend(t *testing.T) {
	s, e := newEngineServer(t)
	if got := s.b.ModelConfig().Context; got != e.MaxContext() {
		t.Errorf("ModelConfig().Context = %d, want the engine's %d", got, e.MaxContext())
	}
	const body = `{"prompt":"Once upon a time","max_tokens":12,"temperature":0,"ignore_eos":true%s}`
	rec := do(s.Handler(), "POST", "/v1/completions", strings.Replace(body, "%s", "", 1))
	var r openai.CompletionResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil || rec.Code != 200 || len(r.Choices) != 1 {
		t.Fatalf("completion %d %s: %v", rec.Code, rec.Body, err)
	}
	if r.Usage == nil || r.Usage.CompletionTokens != 12 || deref(r.Choices[0].FinishReason) != "length" {
		t.Errorf("completion usage %+v finish %q, want 12 tokens, length", r.Usage, deref(r.Choices[0].FinishReason))
	}
	chunks := completionChunks(t, do(s.Handler(), "POST", "/v1/completions", strings.Replace(body, "%s", `,"stream":true`, 1)))
	var streamed strings.Builder
	for _, c := range chunks {
		for _, ch := range c.Choices {
			streamed.WriteString(ch.Text)
		}
	}
	if streamed.String() != r.Choices[0].Text {
		t.Errorf("streamed greedy text %q, want the non-streamed %q", streamed.String(), r.Choices[0].Text)
	}

	rec = do(s.Handler(), "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}],"max_tokens":4,"temperature":0}`)
	if rec.Code != 200 {
		t.Errorf("chat status %d (%s), want 200", rec.Code, rec.Body)
	}

	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+"/v1/completions",
		strings.NewReader(`{"prompt":"Hi","max_tokens":1000,"stream":true,"ignore_eos":true}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	buf := make([]byte, 1)
	resp.Body.Read(buf) // generation has started
	cancel()
	resp.Body.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := e.Stats()
		if st.Running == 0 && st.Waiting == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("engine still has %d running, %d waiting 10 s after the client left", st.Running, st.Waiting)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
