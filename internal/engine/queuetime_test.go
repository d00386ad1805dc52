package engine_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"tandem/internal/engine"
)

// TestQueueTime: the update carrying a sequence's first token reports how
// long it waited for admission (here: until the only running slot was
// freed), no more than it waited for that token; later updates report 0.
func TestQueueTime(t *testing.T) {
	m := tinyModel(t)
	e := newEngine(t, m, engine.Config{MaxRunning: 1, Pages: 128})
	rng := rand.New(rand.NewPCG(3, 4))
	ctx, cancel := context.WithCancel(context.Background())
	a, err := e.Submit(ctx, engine.Request{Prompt: randomPrompt(rng, m, 10), MaxTokens: 1900, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Next(context.Background()); err != nil { // a holds the slot
		t.Fatal(err)
	}
	submitted := time.Now()
	b, err := e.Submit(context.Background(), engine.Request{Prompt: randomPrompt(rng, m, 20), MaxTokens: 3, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	waitStats(t, e, "b waiting", func(st engine.Stats) bool { return st.Waiting == 1 })
	cancel()
	collect(t, a)
	var first engine.Update
	for first.Tokens == nil {
		if first, err = b.Next(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	waited := time.Since(submitted)
	if first.QueueTime <= 0 || first.QueueTime > waited {
		t.Errorf("first update's QueueTime = %v, want > 0 and at most the %v b waited for its first token", first.QueueTime, waited)
	}
	for {
		u, err := b.Next(context.Background())
		if err != nil {
			break
		}
		if u.QueueTime != 0 {
			t.Errorf("a later update reports QueueTime %v, want 0", u.QueueTime)
		}
	}
}
