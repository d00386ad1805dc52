package engine_test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"tandem/internal/engine"
	"tandem/internal/engine/kernels"
	"tandem/internal/engine/model"
	"tandem/internal/engine/tensor"
)

// pacedEngine starts an engine inside the calling synctest bubble with a
// one-thread pool (no helper goroutines spinning on the clock) and
// DecodePace returning *pace.
func pacedEngine(t *testing.T, m *model.Model, pace *atomic.Int64) (*engine.Engine, func()) {
	t.Helper()
	pool := kernels.NewPool(1)
	cfg := engine.Config{Pages: 256, KVType: tensor.F16,
		DecodePace: func() time.Duration { return time.Duration(pace.Load()) }}
	e, err := engine.New(model.NewRunner(m, pool), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return e, func() { e.Close(); pool.Close() }
}

// tokenTimes drains h, returning the (bubble) time each generated token
// arrived.
func tokenTimes(t *testing.T, h *engine.Handle) []time.Time {
	t.Helper()
	var at []time.Time
	for {
		u, err := h.Next(context.Background())
		if err == io.EOF {
			return at
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		for range u.Tokens {
			at = append(at, time.Now())
		}
	}
}

// pacedDecoding starts a paced engine (pacedEngine) in the calling bubble
// and submits a 12-token prompt generating n tokens, with a random source
// seeded by seed for the test's further prompts.
func pacedDecoding(t *testing.T, m *model.Model, d time.Duration, seed uint64, n int) (*engine.Engine, *engine.Handle, *rand.Rand, *atomic.Int64, func()) {
	t.Helper()
	pace := new(atomic.Int64)
	pace.Store(int64(d))
	e, stop := pacedEngine(t, m, pace)
	rng := rand.New(rand.NewPCG(seed, seed+1))
	h, err := e.Submit(context.Background(), engine.Request{Prompt: randomPrompt(rng, m, 12), MaxTokens: n, IgnoreEOS: true})
	if err != nil {
		stop()
		t.Fatal(err)
	}
	return e, h, rng, pace, stop
}

// wantPaced checks that n tokens came at times at, exactly pace apart.
func wantPaced(t *testing.T, at []time.Time, n int, pace time.Duration) {
	t.Helper()
	if len(at) != n {
		t.Fatalf("got %d tokens, want %d", len(at), n)
	}
	for i := 1; i < len(at); i++ {
		if gap := at[i].Sub(at[i-1]); gap != pace {
			t.Errorf("token %d came %v after token %d, want the %v pace", i, gap, i-1, pace)
		}
	}
}

// TestDecodePaceSpacesDecodeSteps: with a pace, steps that only decode
// start one pace apart (in the bubble, compute takes no time, so tokens
// arrive exactly a pace apart), the wait is counted in Stats.PacedWait,
// and a pace of 0 runs them back to back.
func TestDecodePaceSpacesDecodeSteps(t *testing.T) {
	m := tinyModel(t)
	synctest.Test(t, func(t *testing.T) {
		e, h, rng, pace, stop := pacedDecoding(t, m, 40*time.Millisecond, 5, 6)
		defer stop()
		wantPaced(t, tokenTimes(t, h), 6, 40*time.Millisecond)
		if got := e.Stats().PacedWait; got != 5*40*time.Millisecond {
			t.Errorf("Stats.PacedWait = %v, want 5 waits of 40ms", got)
		}

		pace.Store(0)
		h, err := e.Submit(context.Background(), engine.Request{Prompt: randomPrompt(rng, m, 12), MaxTokens: 6, IgnoreEOS: true})
		if err != nil {
			t.Fatal(err)
		}
		if at := tokenTimes(t, h); at[len(at)-1] != at[0] {
			t.Errorf("with a pace of 0 the tokens took %v, want no waiting", at[len(at)-1].Sub(at[0]))
		}
	})
}

// TestDecodePaceYieldsToNewWork: a submission while the loop waits out a
// pace is prefilled at once (its first token does not wait for the pace),
// and a cancellation or Close during a wait ends the sequences without
// waiting for it either.
func TestDecodePaceYieldsToNewWork(t *testing.T) {
	m := tinyModel(t)
	synctest.Test(t, func(t *testing.T) {
		var pace atomic.Int64
		pace.Store(int64(time.Hour))
		e, stop := pacedEngine(t, m, &pace)
		rng := rand.New(rand.NewPCG(7, 8))
		ctx, cancel := context.WithCancel(context.Background())
		a, err := e.Submit(ctx, engine.Request{Prompt: randomPrompt(rng, m, 12), MaxTokens: 100, IgnoreEOS: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Next(context.Background()); err != nil { // a's first token; its next step waits an hour
			t.Fatal(err)
		}
		synctest.Wait()
		start := time.Now()
		b, err := e.Submit(context.Background(), engine.Request{Prompt: randomPrompt(rng, m, 20), MaxTokens: 1, IgnoreEOS: true})
		if err != nil {
			t.Fatal(err)
		}
		if at := tokenTimes(t, b); len(at) != 1 || at[0] != start {
			t.Errorf("b's token came at %v after its submission, want at once (a submission ends the wait)", at[0].Sub(start))
		}
		cancel()
		if _, last := collect(t, a); last.Finish != engine.FinishCancelled {
			t.Errorf("a ended with %v, want cancelled", last.Finish)
		}
		if waited := time.Since(start); waited >= time.Hour {
			t.Errorf("cancelling a paced sequence took %v, want no pace wait", waited)
		}

		c, err := e.Submit(context.Background(), engine.Request{Prompt: randomPrompt(rng, m, 12), MaxTokens: 100, IgnoreEOS: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Next(context.Background()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		stop() // Close during a wait
		if _, last := collect(t, c); last.Err == nil {
			t.Errorf("c ended with %v (%v) after Close, want an error", last.Finish, last.Err)
		}
		if waited := time.Since(start); waited >= time.Hour {
			t.Errorf("Close of a paced engine took %v, want no pace wait", waited)
		}
	})
}

// TestDecodePaceKeepsPromptsOutOfDecodeSteps: under a pace, prompts that
// arrive between decode steps are prefilled at once in steps of their own
// (each gets its first token at its submission), while the decoding
// sequence still gets exactly one token a pace: a prompt neither pulls its
// decode step early (the step would carry the whole batch, and on a core
// lease at the urgent priority) nor pushes it back.
func TestDecodePaceKeepsPromptsOutOfDecodeSteps(t *testing.T) {
	m := tinyModel(t)
	synctest.Test(t, func(t *testing.T) {
		e, a, rng, _, stop := pacedDecoding(t, m, 40*time.Millisecond, 9, 8)
		defer stop()
		prompts := make([][]int32, 12)
		for i := range prompts {
			prompts[i] = randomPrompt(rng, m, 6+i%5)
		}
		late := make(chan string, len(prompts))
		go func() { // a short prompt every 15 ms, off the decode steps' 40 ms grid
			defer close(late)
			for i, p := range prompts {
				time.Sleep(15 * time.Millisecond)
				start := time.Now()
				b, err := e.Submit(context.Background(), engine.Request{Prompt: p, MaxTokens: 1, IgnoreEOS: true})
				if err != nil {
					late <- err.Error()
					return
				}
				if at := tokenTimes(t, b); len(at) != 1 || at[0] != start {
					late <- fmt.Sprintf("prompt %d's token came %v after its submission, want at once", i, at[0].Sub(start))
				}
			}
		}()
		wantPaced(t, tokenTimes(t, a), 8, 40*time.Millisecond)
		for msg := range late {
			t.Error(msg)
		}
	})
}
