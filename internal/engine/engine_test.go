package engine_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"tandem/internal/engine"
	"tandem/internal/engine/kernels"
	"tandem/internal/engine/kvcache"
	"tandem/internal/engine/model"
	"tandem/internal/engine/sample"
	"tandem/internal/engine/tensor"
	"tandem/internal/fixture"
	"tandem/internal/generate"
	"tandem/internal/testenv"
)

// tinyModel loads the synthesized tiny Q8_0 model.
func tinyModel(t *testing.T) *model.Model {
	t.Helper()
	return fixture.Tiny(t, tensor.Q8_0, 7)
}

func newEngine(t *testing.T, m *model.Model, cfg engine.Config) *engine.Engine {
	t.Helper()
	pool := kernels.NewPool(2)
	cfg.KVType = tensor.F16 // as alone() uses
	e, err := engine.New(model.NewRunner(m, pool), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	free := e.KVCache().FreeCount() // the loop has not touched the cache yet
	t.Cleanup(func() {
		e.Close()
		pool.Close()
		// Close resets the prefix cache, so every page must be back.
		if got := e.KVCache().FreeCount(); got != free {
			t.Errorf("after Close: %d free pages, want the initial %d", got, free)
		}
		if w := e.KVCache().Pool(kvcache.GroupWindow); w.FreeCount() != w.Total() {
			t.Errorf("after Close: %d of %d window-group pages free, want all", w.FreeCount(), w.Total())
		}
		if st := e.Stats(); st.StateSlotsUsed != 0 {
			t.Errorf("after Close: %d of %d state slots held, want none", st.StateSlotsUsed, st.StateSlotsTot)
		}
	})
	return e
}

// collect drains a handle and returns its tokens and final update.
func collect(t *testing.T, h *engine.Handle) ([]int32, engine.Update) {
	t.Helper()
	return collectWithin(t, h, 2*time.Minute, "the sequence")
}

// twoRounds submits prompts together on e (greedy, want[i]'s length each,
// EOS ignored), twice, and checks that every request's ids are want[i]
// and that in the second round every prompt with a full page before its
// last token took tokens from the prefix cache (e needs PrefixCache).
// The first round prefills in chunks of e's MaxBatchTokens and decodes the
// prompts in one batch.
func twoRounds(t *testing.T, e *engine.Engine, prompts, want [][]int32) {
	t.Helper()
	for round := range 2 {
		var hs []*engine.Handle
		for i, p := range prompts {
			h, err := e.Submit(context.Background(), engine.Request{Prompt: p, MaxTokens: len(want[i]), IgnoreEOS: true})
			if err != nil {
				t.Fatal(err)
			}
			hs = append(hs, h)
		}
		for i, h := range hs {
			got, last := collect(t, h)
			if !slices.Equal(got, want[i]) {
				t.Errorf("round %d request %d: ids %v, llama.cpp %v", round, i, got, want[i])
			}
			if round == 1 && len(prompts[i])-1 >= e.Config().PageTokens && last.CachedTokens == 0 {
				t.Errorf("round 1 request %d: no prompt tokens came from the prefix cache", i)
			}
		}
	}
}

// alone generates greedily with the single-sequence path.
func alone(t *testing.T, m *model.Model, prompt []int32, n int) []int32 {
	t.Helper()
	pool := kernels.NewPool(1)
	defer pool.Close()
	kv, err := kvcache.New(m.CacheConfig(16, 64, tensor.F16))
	if err != nil {
		t.Fatal(err)
	}
	res, err := generate.RunIDs(context.Background(), model.NewRunner(m, pool), kv, prompt,
		generate.Options{MaxTokens: n, Sample: sample.Params{}, ChunkSize: 512})
	if err != nil {
		t.Fatal(err)
	}
	return res.IDs
}

func randomPrompt(rng *rand.Rand, m *model.Model, n int) []int32 {
	p := []int32{m.Tokenizer.BOS()}
	for len(p) < n {
		p = append(p, int32(3+rng.IntN(m.Config.Vocab-3)))
	}
	return p
}

func waitIdle(t *testing.T, e *engine.Engine, free int) {
	t.Helper()
	testenv.WaitFor(t, 10*time.Second, fmt.Sprintf("the engine idle with %d free pages", free), func() bool {
		st := e.Stats()
		return st.Running == 0 && st.Waiting == 0 && st.PagesTot-st.PagesUsed == free && st.StateSlotsUsed == 0
	})
}

// TestBatchingInvariance: 16 concurrent greedy requests of different
// lengths produce exactly what each produces alone, with chunked prefill
// (a budget smaller than the longest prompt) mixing prefill and decode.
func TestBatchingInvariance(t *testing.T) {
	m := tinyModel(t)
	e := newEngine(t, m, engine.Config{MaxBatchTokens: 64, Pages: 256})
	free := e.KVCache().FreeCount()
	rng := rand.New(rand.NewPCG(1, 2))
	type job struct {
		prompt []int32
		n      int
		want   []int32
		h      *engine.Handle
	}
	jobs := make([]*job, 16)
	for i := range jobs {
		j := &job{prompt: randomPrompt(rng, m, 1+rng.IntN(150)), n: 4 + rng.IntN(24)}
		j.want = alone(t, m, j.prompt, j.n)
		jobs[i] = j
	}
	for i, j := range jobs {
		h, err := e.Submit(context.Background(), engine.Request{ID: fmt.Sprint(i), Prompt: j.prompt, MaxTokens: j.n, IgnoreEOS: true})
		if err != nil {
			t.Fatal(err)
		}
		j.h = h
	}
	for i, j := range jobs {
		got, last := collect(t, j.h)
		if !slices.Equal(got, j.want) {
			t.Errorf("request %d (prompt %d tokens): batched ids %v, alone %v", i, len(j.prompt), got, j.want)
		}
		if last.Finish != engine.FinishLength || last.PromptTokens != len(j.prompt) {
			t.Errorf("request %d: final update %+v, want finish length and %d prompt tokens", i, last, len(j.prompt))
		}
	}
	waitIdle(t, e, free)
}

// TestPreemptionRecomputes: an arena too small for all sequences at once
// forces preemption; outputs stay identical and every page comes back.
func TestPreemptionRecomputes(t *testing.T) {
	m := tinyModel(t)
	e := newEngine(t, m, engine.Config{MaxBatchTokens: 256, Pages: 24, PageTokens: 16})
	free := e.KVCache().FreeCount()
	rng := rand.New(rand.NewPCG(3, 4))
	var hs []*engine.Handle
	var wants, prompts [][]int32
	const n = 80
	for range 6 {
		p := randomPrompt(rng, m, 40+rng.IntN(40))
		prompts = append(prompts, p)
		wants = append(wants, alone(t, m, p, n))
	}
	for _, p := range prompts {
		h, err := e.Submit(context.Background(), engine.Request{Prompt: p, MaxTokens: n, IgnoreEOS: true})
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	preempted := 0
	for i, h := range hs {
		got, last := collect(t, h)
		if !slices.Equal(got, wants[i]) {
			t.Errorf("request %d: ids after preemption %v, want %v", i, got, wants[i])
		}
		preempted += last.Preempted
	}
	if preempted == 0 || e.Stats().Preemptions == 0 {
		t.Errorf("no sequence was preempted; the test does not exercise preemption (stats %+v)", e.Stats())
	}
	waitIdle(t, e, free)
}

// TestCancelFreesPages aborts a request in each stage it can be in, and
// the pool returns to its initial free count. A stepped engine (its loop
// held before each step) puts the request exactly in its stage when the
// context is cancelled: "queued" behind a running request, so not yet
// admitted (Stats.Waiting); "prefill" after its first 16-token chunk of
// 200 ran and with more of its prompt in the held step; "decode" with its
// prompt done and the held step decoding it. Every wait has a deadline
// (Stepper.Step: a minute; collect; waitIdle).
func TestCancelFreesPages(t *testing.T) {
	m := tinyModel(t)
	rng := rand.New(rand.NewPCG(5, 6))
	for _, stage := range []string{"queued", "prefill", "decode"} {
		t.Run(stage, func(t *testing.T) {
			e, g := steppedEngine(t, m, engine.Config{MaxBatchTokens: 16, Pages: 128}, nil)
			free := e.KVCache().FreeCount()
			var other *engine.Handle
			if stage == "queued" {
				// A request that runs first, holding the loop at its step.
				other = submit(t, e, context.Background(), "other", randomPrompt(rng, m, 8), 500)
				if si := g.Step(t); si.Prefill["other"] != 8 {
					t.Fatalf("first step %+v, want other's 8-token prompt", si)
				}
			}
			ctx, cancel := context.WithCancel(context.Background())
			h := submit(t, e, ctx, "x", randomPrompt(rng, m, 200), 500)
			switch stage {
			case "queued":
				if st := e.Stats(); st.Waiting != 1 {
					t.Fatalf("with the loop held in other's step: %d waiting, want x", st.Waiting)
				}
			case "prefill":
				g.Step(t) // x's first chunk, held
				if si := g.Step(t); si.Prefill["x"] == 0 || e.Stats().PagesUsed == 0 {
					t.Fatalf("second step %+v, %d pages used; want x mid-prefill, holding pages", si, e.Stats().PagesUsed)
				}
			case "decode":
				for si := g.Step(t); si.Decodes == 0; si = g.Step(t) {
					if si.Prefill["x"] == 0 {
						t.Fatalf("step %+v: x neither prefills nor decodes", si)
					}
				}
			}
			cancel()
			g.Free()
			_, last := collect(t, h)
			if last.Finish != engine.FinishCancelled || !errors.Is(last.Err, context.Canceled) {
				t.Errorf("final update %+v, want finish cancelled with context.Canceled", last)
			}
			if other != nil {
				other.Cancel()
				collect(t, other)
			}
			waitIdle(t, e, free)
		})
	}
	e := newEngine(t, m, engine.Config{MaxBatchTokens: 16, Pages: 128})
	free := e.KVCache().FreeCount()
	t.Run("handle-cancel", func(t *testing.T) {
		h, err := e.Submit(context.Background(), engine.Request{Prompt: randomPrompt(rng, m, 20), MaxTokens: 500, IgnoreEOS: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.Next(context.Background()); err != nil {
			t.Fatal(err)
		}
		h.Cancel()
		if _, last := collect(t, h); last.Finish != engine.FinishCancelled {
			t.Errorf("final update %+v, want finish cancelled", last)
		}
		waitIdle(t, e, free)
	})
}

func TestQueueFullAndBadRequests(t *testing.T) {
	m := tinyModel(t)
	e := newEngine(t, m, engine.Config{MaxWaiting: 2, MaxRunning: 1, Pages: 64})
	free := e.KVCache().FreeCount()
	p := []int32{m.Tokenizer.BOS(), 5, 6}
	ctx, cancel := context.WithCancel(context.Background())
	var hs []*engine.Handle
	var full error
	for range 6 {
		h, err := e.Submit(ctx, engine.Request{Prompt: p, MaxTokens: 1000, IgnoreEOS: true})
		if err != nil {
			full = err
			break
		}
		hs = append(hs, h)
	}
	if !errors.Is(full, engine.ErrQueueFull) {
		t.Errorf("Submit past MaxWaiting: err %v, want ErrQueueFull", full)
	}
	cancel()
	for _, h := range hs {
		collect(t, h)
	}
	for _, tc := range []struct {
		req  engine.Request
		want error
	}{
		{engine.Request{MaxTokens: 1}, engine.ErrBadRequest},
		{engine.Request{Prompt: p}, engine.ErrBadRequest},
		{engine.Request{Prompt: p, MaxTokens: 1 << 20}, engine.ErrTooLong},
		{engine.Request{Prompt: []int32{int32(m.Config.Vocab)}, MaxTokens: 1}, engine.ErrBadRequest},
		{engine.Request{Prompt: p, MaxTokens: 1, TopLogprobs: 99}, engine.ErrBadRequest},
		{engine.Request{Prompt: p, MaxTokens: 1, Sample: sample.Params{TopP: 2}}, engine.ErrBadRequest},
	} {
		if _, err := e.Submit(context.Background(), tc.req); !errors.Is(err, tc.want) {
			t.Errorf("Submit(%+v) = %v, want %v", tc.req, err, tc.want)
		}
	}
	waitIdle(t, e, free)
}

func TestPrefixCacheReuse(t *testing.T) {
	m := tinyModel(t)
	e := newEngine(t, m, engine.Config{PrefixCache: true, Pages: 64})
	rng := rand.New(rand.NewPCG(7, 8))
	p := randomPrompt(rng, m, 70)
	want := alone(t, m, p, 12)
	for i := range 3 {
		h, err := e.Submit(context.Background(), engine.Request{Prompt: p, MaxTokens: 12, IgnoreEOS: true})
		if err != nil {
			t.Fatal(err)
		}
		got, last := collect(t, h)
		if !slices.Equal(got, want) {
			t.Errorf("run %d: ids %v, want %v", i, got, want)
		}
		wantCached := 0
		if i > 0 {
			wantCached = 64 // 4 full pages of the 70-token prompt
		}
		if last.CachedTokens != wantCached {
			t.Errorf("run %d: cached tokens %d, want %d", i, last.CachedTokens, wantCached)
		}
	}
	if st := e.Stats(); st.PrefixHitTokens != 128 {
		t.Errorf("PrefixHitTokens = %d, want 128", st.PrefixHitTokens)
	}
}

func TestPromptLogprobs(t *testing.T) {
	m := tinyModel(t)
	e := newEngine(t, m, engine.Config{MaxBatchTokens: 8, Pages: 64})
	rng := rand.New(rand.NewPCG(9, 10))
	p := randomPrompt(rng, m, 21)
	h, err := e.Submit(context.Background(), engine.Request{Prompt: p, MaxTokens: 2, PromptLogprobs: true, TopLogprobs: 3, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	u, err := h.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(u.PromptLogprobs) != len(p) {
		t.Fatalf("got %d prompt logprobs, want %d", len(u.PromptLogprobs), len(p))
	}
	// reference: all logits in one step
	pool := kernels.NewPool(1)
	defer pool.Close()
	kv, _ := kvcache.New(m.CacheConfig(16, 8, tensor.F16))
	pages, _ := kv.Alloc(2)
	out, err := model.NewRunner(m, pool).Forward(kv, []model.Seq{{Tokens: p, Pages: pages, AllLogits: true}})
	if err != nil {
		t.Fatal(err)
	}
	v := m.Config.Vocab
	for i := 1; i < len(p); i++ {
		want := sample.LogSoftmax(out[0][(i-1)*v:i*v], p[i])
		if got := u.PromptLogprobs[i]; got != want {
			t.Errorf("prompt logprob %d = %v, want %v", i, got, want)
		}
	}
	if len(u.Tokens) == 0 || len(u.Tokens[0].Top) != 3 {
		t.Errorf("first update %+v: want a token with 3 top logprobs", u)
	}
	collect(t, h)
}

func TestCloseFailsEverything(t *testing.T) {
	m := tinyModel(t)
	pool := kernels.NewPool(1)
	defer pool.Close()
	e, err := engine.New(model.NewRunner(m, pool), engine.Config{MaxRunning: 1, Pages: 64}, nil)
	if err != nil {
		t.Fatal(err)
	}
	free := e.KVCache().FreeCount()
	var hs []*engine.Handle
	for range 3 {
		h, err := e.Submit(context.Background(), engine.Request{Prompt: []int32{1, 5}, MaxTokens: 1000, IgnoreEOS: true})
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	e.Close()
	for i, h := range hs {
		_, last := collect(t, h)
		if !last.Done || (last.Finish != engine.FinishError && last.Finish != engine.FinishLength) {
			t.Errorf("handle %d after Close: %+v", i, last)
		}
	}
	if got := e.KVCache().FreeCount(); got != free {
		t.Errorf("after Close: %d free pages, want %d", got, free)
	}
	if _, err := e.Submit(context.Background(), engine.Request{Prompt: []int32{1}, MaxTokens: 1}); !errors.Is(err, engine.ErrClosed) {
		t.Errorf("Submit after Close = %v, want ErrClosed", err)
	}
}

// TestKVUsageCountsCachedPagesFree: once a request finished and its
// prompt's pages sit in the prefix cache alone, the engine still holds
// them (PagesUsed) but reports them evictable, and KVUsage (vLLM's
// kv_cache_usage_perc) reads 0 on the idle engine, not the cached share.
func TestKVUsageCountsCachedPagesFree(t *testing.T) {
	m := tinyModel(t)
	e := newEngine(t, m, engine.Config{PrefixCache: true, Pages: 64})
	p := randomPrompt(rand.New(rand.NewPCG(3, 4)), m, 70)
	h, err := e.Submit(context.Background(), engine.Request{Prompt: p, MaxTokens: 4, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	collect(t, h)
	testenv.WaitFor(t, 10*time.Second, "the engine idle", func() bool {
		st := e.Stats()
		return st.Running == 0 && st.Waiting == 0 && st.PagesEvictable > 0
	})
	st := e.Stats()
	if st.PagesUsed == 0 || st.PagesEvictable != st.PagesUsed {
		t.Errorf("idle engine: %d pages used, %d evictable; want the cached pages used and all of them evictable", st.PagesUsed, st.PagesEvictable)
	}
	if u := st.KVUsage(); u != 0 {
		t.Errorf("idle engine with a warm prefix cache: KVUsage %v, want 0 (cached pages are free to take)", u)
	}
}
