package engine_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"tandem/internal/engine"
	"tandem/internal/engine/kernels"
	"tandem/internal/engine/kvcache"
	"tandem/internal/engine/model"
	"tandem/internal/engine/sample"
	"tandem/internal/engine/tensor"
	"tandem/internal/fixture"
	"tandem/internal/synth"
	"tandem/internal/testenv"
)

// synthHybrid is a tiny hybrid file (the tiny preset with 4 layers: three
// Gated DeltaNet layers and one gated full-attention layer).
func synthHybrid(t *testing.T, arch string) *model.Model {
	t.Helper()
	cfg, err := synth.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Arch, cfg.Layers, cfg.AttnGain = arch, 4, 3
	m := fixture.Synth(t, cfg, tensor.Q8_0, 7)
	if m.StateSize() == 0 || m.Config.KVLayers() != 1 {
		t.Fatalf("%s: state %d floats, %d KV layers; want a hybrid with state and one KV layer", arch, m.StateSize(), m.Config.KVLayers())
	}
	return m
}

// hybridGreedy is the reference: one sequence through the runner, the whole
// prompt in one step and then one token per step, its state in a slot of
// its own, greedy.
func hybridGreedy(t *testing.T, m *model.Model, prompt []int32, n int) []int32 {
	t.Helper()
	pool := kernels.NewPool(1)
	defer pool.Close()
	r := model.NewRunner(m, pool)
	kv, err := kvcache.New(m.CacheConfig(16, (len(prompt)+n+15)/16, tensor.F16))
	if err != nil {
		t.Fatal(err)
	}
	pages, err := kv.Alloc(kv.Config().Pages)
	if err != nil {
		t.Fatal(err)
	}
	state := make([]float32, m.StateSize())
	smp := sample.New(sample.Params{})
	toks := slices.Clone(prompt)
	var ids []int32
	for pos := 0; len(ids) < n; {
		out, err := r.Forward(kv, []model.Seq{{Tokens: toks[pos:], Pos: pos, Pages: pages, State: state}})
		if err != nil {
			t.Fatal(err)
		}
		pos = len(toks)
		id, _ := smp.Sample(out[0], toks)
		ids = append(ids, id)
		toks = append(toks, id)
	}
	return ids
}

var hybridArchs = []string{"qwen35", "qwen35moe"}

// TestHybridEngineBatchedChunked: concurrent greedy requests on a hybrid,
// prefilled in 7-token chunks beside each other's decodes, each in its own
// state slot, give what each gives alone; every slot comes back.
func TestHybridEngineBatchedChunked(t *testing.T) {
	for _, arch := range hybridArchs {
		t.Run(arch, func(t *testing.T) {
			m := synthHybrid(t, arch)
			e := newEngine(t, m, engine.Config{MaxBatchTokens: 7, Pages: 256, StateSlots: 4})
			rng := rand.New(rand.NewPCG(71, 72))
			type job struct {
				prompt []int32
				want   []int32
				h      *engine.Handle
			}
			jobs := make([]*job, 6)
			for i := range jobs {
				p := randomPrompt(rng, m, 1+rng.IntN(40))
				jobs[i] = &job{prompt: p, want: hybridGreedy(t, m, p, 10)}
			}
			for _, j := range jobs {
				h, err := e.Submit(context.Background(), engine.Request{Prompt: j.prompt, MaxTokens: 10, IgnoreEOS: true})
				if err != nil {
					t.Fatal(err)
				}
				j.h = h
			}
			for i, j := range jobs {
				if got, _ := collect(t, j.h); !slices.Equal(got, j.want) {
					t.Errorf("request %d (%d prompt tokens): ids %v, alone %v", i, len(j.prompt), got, j.want)
				}
			}
			waitIdle(t, e, e.Stats().PagesTot)
		})
	}
}

// TestHybridPreemption: a KV arena too small for every sequence at once
// preempts some; they restart from their tokens in a zeroed slot
// (recompute) and end with what they give alone.
func TestHybridPreemption(t *testing.T) {
	m := synthHybrid(t, "qwen35")
	e := newEngine(t, m, engine.Config{MaxBatchTokens: 16, Pages: 10, PageTokens: 8})
	rng := rand.New(rand.NewPCG(81, 82))
	var prompts [][]int32
	var hs []*engine.Handle
	for range 5 {
		p := randomPrompt(rng, m, 10+rng.IntN(20))
		prompts = append(prompts, p)
		h, err := e.Submit(context.Background(), engine.Request{Prompt: p, MaxTokens: 30, IgnoreEOS: true})
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	for i, h := range hs {
		got, last := collect(t, h)
		if want := hybridGreedy(t, m, prompts[i], 30); !slices.Equal(got, want) {
			t.Errorf("request %d (preempted %d times): ids %v, alone %v", i, last.Preempted, got, want)
		}
	}
	if e.Stats().Preemptions == 0 {
		t.Error("no preemption: the arena is not small enough for the test to cover it")
	}
	waitIdle(t, e, e.Stats().PagesTot)
}

// TestHybridPrefixCacheSharedSystemPrompt: one system prompt served to
// many requests. The first is computed whole; the second finds the shared
// pages but no state snapshot within them (a miss: recomputed from 0) and
// leaves a snapshot where it branches off; every later one resumes there
// (a hit) and a repeat resumes at its own last full page. Every output
// equals the one without the cache.
func TestHybridPrefixCacheSharedSystemPrompt(t *testing.T) {
	for _, arch := range hybridArchs {
		t.Run(arch, func(t *testing.T) {
			m := synthHybrid(t, arch)
			e := newEngine(t, m, engine.Config{MaxBatchTokens: 64, Pages: 128, PrefixCache: true})
			rng := rand.New(rand.NewPCG(91, 92))
			sys := randomPrompt(rng, m, 50) // 3 full 16-token pages
			var prompts [][]int32
			for i := range 8 {
				prompts = append(prompts, append(slices.Clone(sys), randomPrompt(rng, m, 20+3*i)[1:]...)) // past the system prompt's last page
			}
			prompts = append(prompts, prompts[7]) // a repeat: 50+40 = 90 tokens, its own snapshot at 80
			for i, p := range prompts {
				h, err := e.Submit(context.Background(), engine.Request{Prompt: p, MaxTokens: 8, IgnoreEOS: true})
				if err != nil {
					t.Fatal(err)
				}
				got, last := collect(t, h)
				if want := hybridGreedy(t, m, p, 8); !slices.Equal(got, want) {
					t.Errorf("request %d (%d cached tokens): ids %v, without the cache %v", i, last.CachedTokens, got, want)
				}
				wantCached := 48
				switch {
				case i < 2:
					wantCached = 0
				case i == len(prompts)-1:
					wantCached = 80
				}
				if last.CachedTokens != wantCached {
					t.Errorf("request %d: %d cached tokens, want %d", i, last.CachedTokens, wantCached)
				}
			}
			st := e.Stats()
			if st.StateSnapshotHits != uint64(len(prompts)-2) || st.StateSnapshotMisses != 1 {
				t.Errorf("snapshot hits %d, misses %d; want %d and 1", st.StateSnapshotHits, st.StateSnapshotMisses, len(prompts)-2)
			}
			if st.PrefixHitTokens != uint64(48*(len(prompts)-3)+80) {
				t.Errorf("prefix hit tokens %d", st.PrefixHitTokens)
			}
			waitIdleCached(t, e)
		})
	}
}

// TestHybridPrefixCacheConcurrent: many requests sharing a system prompt,
// submitted at once onto a small arena (eviction takes snapshots with
// their pages), all equal their outputs without the cache.
func TestHybridPrefixCacheConcurrent(t *testing.T) {
	m := synthHybrid(t, "qwen35")
	e := newEngine(t, m, engine.Config{MaxBatchTokens: 24, Pages: 24, PageTokens: 8, PrefixCache: true, StateSnapshots: 3})
	rng := rand.New(rand.NewPCG(101, 102))
	sys := randomPrompt(rng, m, 30)
	var wg sync.WaitGroup
	for i := range 12 {
		p := append(slices.Clone(sys), randomPrompt(rng, m, 2+rng.IntN(20))[1:]...)
		want := hybridGreedy(t, m, p, 6)
		h, err := e.Submit(context.Background(), engine.Request{Prompt: p, MaxTokens: 6, IgnoreEOS: true})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			got, last := collect(t, h)
			if !slices.Equal(got, want) {
				t.Errorf("request %d (%d cached tokens, preempted %d): ids %v, without the cache %v", i, last.CachedTokens, last.Preempted, got, want)
			}
		})
	}
	wg.Wait()
	st := e.Stats()
	if st.StateSnapshotHits == 0 || st.StateSnapshots > 3 {
		t.Errorf("snapshot hits %d, held %d (bound 3)", st.StateSnapshotHits, st.StateSnapshots)
	}
	waitIdleCached(t, e)
}

// TestHybridExportImportMatchesColocated is TestExportImportMatchesColocated
// with state: the prefill engine ships the full-attention layer's pages and,
// through its StateSink, the state after the prompt; the decode engine
// writes the pages, resumes with ResumeState and decodes what a colocated
// run does. Resumed with a zero state instead, the same pages give other
// tokens: the state carries what the pages do not.
func TestHybridExportImportMatchesColocated(t *testing.T) {
	for _, arch := range hybridArchs {
		t.Run(arch, func(t *testing.T) {
			m := synthHybrid(t, arch)
			prefill := newEngine(t, m, engine.Config{MaxBatchTokens: 32, Pages: 64})
			decode := newEngine(t, m, engine.Config{Pages: 64})
			rng := rand.New(rand.NewPCG(111, 112))
			differs := false
			for _, n := range []int{5, 16, 70} {
				prompt := randomPrompt(rng, m, n)
				want := hybridGreedy(t, m, prompt, 10)
				sink := &stateCopy{}
				hp, err := prefill.Submit(context.Background(), engine.Request{Prompt: prompt, MaxTokens: 1, KVSink: sink, IgnoreEOS: true})
				if err != nil {
					t.Fatal(err)
				}
				first, _ := collect(t, hp)
				if len(sink.states) != 1 || len(sink.states[0]) != 4*m.StateSize() || !sink.finalSeen {
					t.Fatalf("prompt %d: %d PromptState calls (sizes %v, after the final layer %v), want one of %d bytes after it",
						n, len(sink.states), lens(sink.states), sink.finalSeen, 4*m.StateSize())
				}
				if steps := (n + 31) / 32; sink.calls != steps*m.Config.KVLayers() {
					t.Errorf("prompt %d: %d LayerComputed calls, want one per KV layer per step (%d)", n, sink.calls, steps*m.Config.KVLayers())
				}
				run := func(state []byte) []int32 {
					allocated := make(chan kvcache.Tables, 1)
					var kvDst *kvcache.Cache
					hd, err := decode.Submit(context.Background(), engine.Request{Prompt: prompt, MaxTokens: 10, IgnoreEOS: true,
						Import: &engine.Import{Allocated: func(kv *kvcache.Cache, t kvcache.Tables) { kvDst = kv; allocated <- t }}})
					if err != nil {
						t.Fatal(err)
					}
					pages := (<-allocated)[kvcache.GroupGlobal]
					if len(pages) != len(sink.pages) {
						t.Fatalf("prompt %d: decode reserved %d pages, prefill sent %d", n, len(pages), len(sink.pages))
					}
					for ord, layers := range sink.pages {
						for l, kvb := range layers {
							copy(kvDst.KPage(l, pages[ord]), kvb[0])
							copy(kvDst.VPage(l, pages[ord]), kvb[1])
						}
					}
					if err := hd.ResumeState(engine.Token{ID: first[0]}, state); err != nil {
						t.Fatal(err)
					}
					got, last := collect(t, hd)
					if last.Finish != engine.FinishLength {
						t.Errorf("prompt %d: decode final update %+v", n, last)
					}
					return got
				}
				if got := run(sink.states[0]); !slices.Equal(got, want) {
					t.Errorf("prompt %d: disaggregated ids %v, colocated %v", n, got, want)
				}
				if got := run(make([]byte, len(sink.states[0]))); !slices.Equal(got, want) {
					differs = true
				}
			}
			if !differs {
				t.Error("a zero state decoded as the shipped one for every prompt: the test cannot tell whether the state travels")
			}
			waitIdle(t, decode, decode.Stats().PagesTot)
			waitIdle(t, prefill, prefill.Stats().PagesTot)
		})
	}
}

// TestHybridStateSlotBytes: Stats reports the slots and their size.
func TestHybridStateSlotBytes(t *testing.T) {
	m := synthHybrid(t, "qwen35")
	e := newEngine(t, m, engine.Config{Pages: 16, MaxRunning: 5})
	st := e.Stats()
	if st.StateSlotsTot != 5 || st.StateSlotBytes != 4*int64(m.StateSize()) || st.StateSlotsUsed != 0 {
		t.Errorf("stats %s, want 5 slots (MaxRunning) of %d bytes", fmt.Sprint(st.StateSlotsTot, st.StateSlotBytes, st.StateSlotsUsed), 4*m.StateSize())
	}
	if got := e.Config().StateSnapshots; got != 5 {
		t.Errorf("default state snapshots %d, want 5 (the slots: %d bytes each fit in the default budget)", got, 4*m.StateSize())
	}
}

// waitIdleCached waits until e is idle with no state slot held and every
// page in use held by the prefix cache alone (evictable).
func waitIdleCached(t *testing.T, e *engine.Engine) {
	t.Helper()
	testenv.WaitFor(t, 10*time.Second, "the engine idle with only the prefix cache holding pages", func() bool {
		st := e.Stats()
		return st.Running == 0 && st.Waiting == 0 && st.StateSlotsUsed == 0 && st.PagesUsed == st.PagesEvictable
	})
}

// TestHybridRandomized mixes everything at once on a hybrid: prompts from a
// few shared prefixes, a small arena (preemption, eviction), fewer state
// slots than sequences, a snapshot bound of 2, the prefix cache and
// cancellations. Every request that is not cancelled gives what it gives
// alone, and the engine ends idle with no slot held and only the prefix
// cache holding pages.
func TestHybridRandomized(t *testing.T) {
	m := synthHybrid(t, "qwen35")
	e := newEngine(t, m, engine.Config{MaxBatchTokens: 13, Pages: 12, PageTokens: 8, PrefixCache: true,
		MaxRunning: 6, StateSlots: 3, StateSnapshots: 2})
	rng := rand.New(rand.NewPCG(121, 122))
	bases := [][]int32{randomPrompt(rng, m, 20), randomPrompt(rng, m, 27), randomPrompt(rng, m, 9)}
	var wg sync.WaitGroup
	for i := range 24 {
		p := append(slices.Clone(bases[rng.IntN(len(bases))]), randomPrompt(rng, m, 1+rng.IntN(20))[1:]...)
		n := 1 + rng.IntN(30)
		cancel := rng.IntN(5) == 0
		want := hybridGreedy(t, m, p, n)
		h, err := e.Submit(context.Background(), engine.Request{Prompt: p, MaxTokens: n, IgnoreEOS: true})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			if cancel {
				h.Cancel()
				collect(t, h)
				return
			}
			got, last := collect(t, h)
			if !slices.Equal(got, want) {
				t.Errorf("request %d (%d cached tokens, preempted %d): ids %v, alone %v", i, last.CachedTokens, last.Preempted, got, want)
			}
		})
	}
	wg.Wait()
	st := e.Stats()
	t.Logf("preemptions %d, snapshot hits %d, misses %d", st.Preemptions, st.StateSnapshotHits, st.StateSnapshotMisses)
	if st.StateSnapshotHits == 0 {
		t.Error("no snapshot hit: the test does not cover resuming")
	}
	waitIdleCached(t, e)
}
