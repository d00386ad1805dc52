package server

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"tandem/internal/engine"
)

// TestSplitUpdate: a merged update becomes one update per token, the
// first with the prompt logprobs and queue time, the last with the end.
func TestSplitUpdate(t *testing.T) {
	boom := errors.New("boom")
	u := engine.Update{Tokens: []engine.Token{{ID: 1}, {ID: 2}, {ID: 3}}, PromptLogprobs: []float32{0, -1}, Done: true,
		Finish: engine.FinishError, Err: boom, PromptTokens: 2, CachedTokens: 1, Preempted: 1, QueueTime: time.Second}
	got := SplitUpdate(u)
	want := []engine.Update{
		{Tokens: []engine.Token{{ID: 1}}, PromptLogprobs: []float32{0, -1}, PromptTokens: 2, CachedTokens: 1, Preempted: 1, QueueTime: time.Second},
		{Tokens: []engine.Token{{ID: 2}}, PromptTokens: 2, CachedTokens: 1, Preempted: 1},
		{Tokens: []engine.Token{{ID: 3}}, Done: true, Finish: engine.FinishError, Err: boom, PromptTokens: 2, CachedTokens: 1, Preempted: 1},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("SplitUpdate =\n%+v\nwant\n%+v", got, want)
	}
	for _, one := range []engine.Update{{}, {Tokens: []engine.Token{{ID: 4}}, Done: true}} {
		if got := SplitUpdate(one); len(got) != 1 || !reflect.DeepEqual(got[0], one) {
			t.Errorf("SplitUpdate(%+v) = %+v, want it unchanged", one, got)
		}
	}
}

// mergedStream yields its updates as given (several tokens each: what a
// Handle returns to a reader that fell behind).
type mergedStream struct{ ups []engine.Update }

func (m *mergedStream) Next(context.Context) (engine.Update, error) {
	u := m.ups[0]
	m.ups = m.ups[1:]
	return u, nil
}
func (m *mergedStream) Cancel() {}

// TestOneChunkPerStep: the engine backend's stream returns one token per
// Next, and a stream of merged updates through it becomes one SSE chunk per
// token (before, an update of 5 tokens was one chunk carrying all 5).
func TestOneChunkPerStep(t *testing.T) {
	tok := testVocab(t, "", true)
	var toks []engine.Token
	for _, u := range tokens(t, tok, 0, "a", "b", "a", "b", "a") {
		toks = append(toks, u.Tokens...)
	}
	st := &stepStream{Stream: &mergedStream{ups: []engine.Update{{Tokens: toks[:3]}, {Tokens: toks[3:], Done: true, Finish: engine.FinishLength}}}}
	var n []int
	for {
		u, err := st.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		n = append(n, len(u.Tokens))
		if u.Done {
			break
		}
	}
	if !reflect.DeepEqual(n, []int{1, 1, 1, 1, 1}) {
		t.Errorf("tokens per Next %v, want 1 each", n)
	}
	b := newFake(t, tok, script{{Tokens: toks, Done: true, Finish: engine.FinishLength}})
	s, _ := newTestServer(t, stepBackend{b}, Options{})
	body := do(s.Handler(), "POST", "/v1/completions", `{"prompt":"Hi","stream":true}`).Body.String()
	if got := strings.Count(body, `"text":"`); got != 5 {
		t.Errorf("%d chunks with text for 5 tokens in one merged update, want 5:\n%s", got, body)
	}
}

// stepBackend wraps a fake's streams as the engine backend wraps the
// engine's handles.
type stepBackend struct{ *fakeBackend }

func (b stepBackend) Submit(ctx context.Context, req engine.Request) (Stream, error) {
	st, err := b.fakeBackend.Submit(ctx, req)
	if err != nil {
		return nil, err
	}
	return &stepStream{Stream: st}, nil
}

// TestEngineBackendOneTokenPerNext: a real engine's sequence read only
// after it finished (its Handle then holds every step's token merged)
// still comes out of the engine backend one token per Next.
func TestEngineBackendOneTokenPerNext(t *testing.T) {
	_, e := newEngineServer(t)
	st, err := EngineBackend(e).Submit(context.Background(), engine.Request{Prompt: []int32{1, 5, 9}, MaxTokens: 4, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for s := e.Stats(); s.Running+s.Waiting > 0 || s.GeneratedTokens < 4; s = e.Stats() {
		if time.Now().After(deadline) {
			t.Fatalf("the sequence did not finish: %+v", s)
		}
		time.Sleep(time.Millisecond)
	}
	var n []int
	for {
		u, err := st.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		n = append(n, len(u.Tokens))
		if u.Done {
			break
		}
	}
	if !reflect.DeepEqual(n, []int{1, 1, 1, 1}) {
		t.Errorf("tokens per Next %v, want one per step", n)
	}
}
