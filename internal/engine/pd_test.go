package engine_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"tandem/internal/engine"
	"tandem/internal/engine/kvcache"
)

// pageCopy is a test KVSink: it copies every page of the prompt, layer by
// layer, as soon as the page is complete in that layer (or the prompt ends).
type pageCopy struct {
	mu    sync.Mutex
	pages [][][2][]byte // [ordinal][layer]{K, V}
	sent  []int         // per layer: pages copied
	calls int
	order []int // layers in call order, to check 0, 1, ... per step
}

func (c *pageCopy) LayerComputed(kv *kvcache.Cache, pages []int32, layer, computed int, final bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	c.order = append(c.order, layer)
	layers := kv.Config().Layers
	if c.sent == nil {
		c.sent = make([]int, layers)
	}
	pt := kv.Config().PageTokens
	full := computed / pt
	if final {
		full = kv.Config().PagesFor(computed)
	}
	for len(c.pages) < full {
		c.pages = append(c.pages, make([][2][]byte, layers))
	}
	for ord := c.sent[layer]; ord < full; ord++ {
		if pages[ord] < 0 {
			continue // a window-group page released before the window
		}
		c.pages[ord][layer] = [2][]byte{slices.Clone(kv.KPage(layer, pages[ord])), slices.Clone(kv.VPage(layer, pages[ord]))}
	}
	c.sent[layer] = max(c.sent[layer], full)
}

// TestExportImportMatchesColocated runs the prompt on one engine, ships its
// pages into another engine's preallocated pages, resumes there with the
// first token, and checks the tokens equal a colocated run.
func TestExportImportMatchesColocated(t *testing.T) {
	m := tinyModel(t)
	prefill := newEngine(t, m, engine.Config{MaxBatchTokens: 32, Pages: 64})
	decode := newEngine(t, m, engine.Config{Pages: 64})
	rng := rand.New(rand.NewPCG(11, 12))
	for _, n := range []int{5, 16, 70} {
		prompt := randomPrompt(rng, m, n)
		want := alone(t, m, prompt, 10)

		sink := &pageCopy{}
		hp, err := prefill.Submit(context.Background(), engine.Request{Prompt: prompt, MaxTokens: 1, KVSink: sink, IgnoreEOS: true})
		if err != nil {
			t.Fatal(err)
		}
		firstIDs, last := collect(t, hp)
		if len(firstIDs) != 1 || last.Finish != engine.FinishLength {
			t.Fatalf("prefill leg: ids %v final %+v", firstIDs, last)
		}
		allocated := make(chan []int32, 1)
		var kvDst *kvcache.Cache
		hd, err := decode.Submit(context.Background(), engine.Request{Prompt: prompt, MaxTokens: 10, IgnoreEOS: true,
			Import: &engine.Import{Allocated: func(kv *kvcache.Cache, t kvcache.Tables) { kvDst = kv; allocated <- t[kvcache.GroupGlobal] }}})
		if err != nil {
			t.Fatal(err)
		}
		pages := <-allocated
		if len(pages) != len(sink.pages) {
			t.Fatalf("prompt %d: decode reserved %d pages, prefill sent %d", n, len(pages), len(sink.pages))
		}
		for ord, layers := range sink.pages {
			for l, kvb := range layers {
				copy(kvDst.KPage(l, pages[ord]), kvb[0])
				copy(kvDst.VPage(l, pages[ord]), kvb[1])
			}
		}
		if err := hd.Resume(engine.Token{ID: firstIDs[0]}); err != nil {
			t.Fatal(err)
		}
		got, dl := collect(t, hd)
		if !slices.Equal(got, want) {
			t.Errorf("prompt %d tokens: disaggregated ids %v, colocated %v", n, got, want)
		}
		if dl.Finish != engine.FinishLength {
			t.Errorf("decode final update %+v", dl)
		}
		layers := m.Config.Layers
		steps := (n + 31) / 32 // MaxBatchTokens 32
		if sink.calls != steps*layers {
			t.Errorf("prompt %d: sink called %d times, want once per layer per prefill step (%d)", n, sink.calls, steps*layers)
		}
		for i, l := range sink.order {
			if l != i%layers {
				t.Errorf("prompt %d: call %d was for layer %d, want %d (layers in order each step)", n, i, l, i%layers)
				break
			}
		}
	}
}

// TestImportCancelledBeforeResume frees the reserved pages.
func TestImportCancelledBeforeResume(t *testing.T) {
	m := tinyModel(t)
	e := newEngine(t, m, engine.Config{Pages: 64})
	free := e.KVCache().FreeCount()
	got := make(chan []int32, 1)
	h, err := e.Submit(context.Background(), engine.Request{Prompt: []int32{1, 5, 6}, MaxTokens: 4,
		Import: &engine.Import{Allocated: func(_ *kvcache.Cache, t kvcache.Tables) { got <- t[kvcache.GroupGlobal] }}})
	if err != nil {
		t.Fatal(err)
	}
	<-got
	h.Cancel()
	if _, last := collect(t, h); last.Finish != engine.FinishCancelled {
		t.Errorf("final update %+v, want cancelled", last)
	}
	if err := h.Resume(engine.Token{ID: 3}); err != nil {
		t.Errorf("Resume after cancel: %v (want nil: it is a no-op)", err)
	}
	waitIdle(t, e, free)
}

// TestExportImportWindowed: on a model with sliding-window layers the
// decode side reserves global pages for the whole prompt and window pages
// for the prompt's last window only (the earlier slots -1), and K/V
// shipped into just those pages decodes as a colocated run does.
func TestExportImportWindowed(t *testing.T) {
	m := synthGemma3W8(t, 6)
	prefill := newEngine(t, m, engine.Config{PageTokens: 4, MaxBatchTokens: 7, Pages: 128})
	decode := newEngine(t, m, engine.Config{PageTokens: 4, Pages: 128})
	kc := decode.KVCache().Config()
	for _, n := range []int{5, 23, 61} {
		prompt := append(slices.Clone(llamaPrompt1), llamaPrompt1[1:]...)
		prompt = append(prompt, llamaPrompt1[1:]...)[:n]
		want := plainGreedyPrompt(t, m, prompt, 10)
		sink := &pageCopy{}
		hp, err := prefill.Submit(context.Background(), engine.Request{Prompt: prompt, MaxTokens: 1, KVSink: sink, IgnoreEOS: true})
		if err != nil {
			t.Fatal(err)
		}
		firstIDs, _ := collect(t, hp)
		allocated := make(chan kvcache.Tables, 1)
		var kvDst *kvcache.Cache
		hd, err := decode.Submit(context.Background(), engine.Request{Prompt: prompt, MaxTokens: 10, IgnoreEOS: true,
			Import: &engine.Import{Allocated: func(kv *kvcache.Cache, t kvcache.Tables) { kvDst = kv; allocated <- t }}})
		if err != nil {
			t.Fatal(err)
		}
		tabs := <-allocated
		pages, first := kc.PagesFor(n), kc.FirstNeeded(kvcache.GroupWindow, n)
		g, w := tabs[kvcache.GroupGlobal], tabs[kvcache.GroupWindow]
		if len(g) != pages || len(kvcache.Held(g)) != pages || len(w) != pages || len(kvcache.Held(w)) != pages-first ||
			slices.ContainsFunc(w[first:], func(p int32) bool { return p < 0 }) {
			t.Fatalf("prompt %d: tables global %v window %v; want %d global pages and window pages from slot %d", n, g, w, pages, first)
		}
		for ord, layers := range sink.pages {
			for l, kvb := range layers {
				tab := tabs.Layer(kvDst, l)
				if tab[ord] < 0 {
					continue // not reserved: decode never reads it
				}
				copy(kvDst.KPage(l, tab[ord]), kvb[0])
				copy(kvDst.VPage(l, tab[ord]), kvb[1])
			}
		}
		if err := hd.Resume(engine.Token{ID: firstIDs[0]}); err != nil {
			t.Fatal(err)
		}
		got, _ := collect(t, hd)
		if !slices.Equal(got, want) {
			t.Errorf("prompt %d tokens: disaggregated ids %v, colocated %v", n, got, want)
		}
	}
	waitPagesFree(t, decode)
	waitPagesFree(t, prefill)
}

// pageHold is a test KVSink that keeps the prompt's pages instead of
// copying them: a reference on each page once its every layer is done.
type pageHold struct {
	mu    sync.Mutex
	held  []int32
	bytes map[int32][]byte // a copy of layer 0's K page at hold time
}

func (h *pageHold) LayerComputed(kv *kvcache.Cache, pages []int32, layer, computed int, final bool) {
	if !final || layer != kv.Config().Layers-1 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.bytes == nil {
		h.bytes = map[int32][]byte{}
	}
	for _, p := range pages[:kv.Config().PagesFor(computed)] {
		if err := kv.Pool(kvcache.GroupGlobal).Ref([]int32{p}); err != nil {
			panic(err)
		}
		h.held = append(h.held, p)
		h.bytes[p] = slices.Clone(kv.KPage(0, p))
	}
}

// TestSinkHoldsPagesUntilReleased: pages a KVSink took references on stay
// out of the free pool, unchanged while other prompts run, after their
// sequence ended, and come back with ReleasePage.
func TestSinkHoldsPagesUntilReleased(t *testing.T) {
	m := tinyModel(t)
	e := newEngine(t, m, engine.Config{MaxBatchTokens: 32, Pages: 16})
	rng := rand.New(rand.NewPCG(21, 22))
	sink := &pageHold{}
	h, err := e.Submit(context.Background(), engine.Request{Prompt: randomPrompt(rng, m, 40), MaxTokens: 1, KVSink: sink, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	collect(t, h)
	if len(sink.held) != 3 {
		t.Fatalf("held %d pages of a 40-token prompt, want 3", len(sink.held))
	}
	// Other prompts take every free page, more than once.
	for range 4 {
		h, err := e.Submit(context.Background(), engine.Request{Prompt: randomPrompt(rng, m, 100), MaxTokens: 4, IgnoreEOS: true})
		if err != nil {
			t.Fatal(err)
		}
		collect(t, h)
	}
	for _, p := range sink.held {
		if !slices.Equal(e.KVCache().KPage(0, p), sink.bytes[p]) {
			t.Errorf("held page %d was overwritten", p)
		}
	}
	total := e.Stats().PagesTot
	waitIdle(t, e, total-3) // the 3 held pages and no other stay used
	for _, p := range sink.held {
		e.ReleasePage(kvcache.GroupGlobal, p)
	}
	// The loop gives them back before its next step: the one of this
	// prompt, after which every page is free.
	h, err = e.Submit(context.Background(), engine.Request{Prompt: randomPrompt(rng, m, 5), MaxTokens: 1, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	collect(t, h)
	waitIdle(t, e, total)
}
