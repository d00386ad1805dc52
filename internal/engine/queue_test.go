package engine_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"tandem/internal/engine"
)

// waitStats polls Stats until ok accepts it; the test's own deadline bounds
// the wait.
func waitStats(t *testing.T, e *engine.Engine, what string, ok func(engine.Stats) bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for st := e.Stats(); !ok(st); st = e.Stats() {
		if time.Now().After(deadline) {
			t.Fatalf("stats never showed %s: %+v", what, st)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestPrefillQueueTokens: Stats counts the uncomputed prompt tokens of
// waiting sequences as soon as they are submitted, nothing for a decoding
// one, and drops back to zero when the queue drains.
func TestPrefillQueueTokens(t *testing.T) {
	m := tinyModel(t)
	e := newEngine(t, m, engine.Config{MaxRunning: 1, Pages: 128})
	free := e.KVCache().FreeCount()
	rng := rand.New(rand.NewPCG(11, 12))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, err := e.Submit(ctx, engine.Request{Prompt: randomPrompt(rng, m, 30), MaxTokens: 1900, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Next(context.Background()); err != nil { // a decodes now
		t.Fatal(err)
	}
	b, err := e.Submit(context.Background(), engine.Request{Prompt: randomPrompt(rng, m, 100), MaxTokens: 2, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	c, err := e.Submit(context.Background(), engine.Request{Prompt: randomPrompt(rng, m, 50), MaxTokens: 2, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := e.Stats().PrefillQueueTokens; got < 150 {
		t.Errorf("right after submitting 100+50 prompt tokens: PrefillQueueTokens %d, want >= 150", got)
	}
	// a holds the only running slot, so b and c wait; once a's prefill is
	// published the count is exactly theirs.
	waitStats(t, e, "150 queued prefill tokens", func(st engine.Stats) bool { return st.PrefillQueueTokens == 150 })
	cancel()
	collect(t, a)
	collect(t, b)
	collect(t, c)
	waitStats(t, e, "an empty prefill queue", func(st engine.Stats) bool { return st.PrefillQueueTokens == 0 })
	waitIdle(t, e, free)
}
