package engine_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"tandem/internal/engine"
	"tandem/internal/engine/model"
	"tandem/internal/engine/tensor"
	"tandem/internal/synth"
)

// TestSlidingWindowEnginePaths: a gemma2 file whose even layers attend to a
// 6-token window gives llama.cpp's greedy ids through the engine with every
// path that reaches attention: chunked prefill (a 7-token step budget, so
// chunks cross windows and 4-token pages), batched decode beside other
// requests, and prompts served from the prefix cache.
func TestSlidingWindowEnginePaths(t *testing.T) {
	cfg, err := synth.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Arch, cfg.SlidingWindow, cfg.AttnSoftcap, cfg.FinalSoftcap, cfg.AttnGain = "gemma2", 6, 1, 0.5, 5
	p := filepath.Join(t.TempDir(), "gemma2.gguf")
	if err := synth.Write(p, synth.Options{Config: cfg, Type: tensor.F16, Seed: 21}); err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	// llama.cpp's ids for this file: see archCases in
	// internal/engine/model/arch_llamacpp_test.go ("gemma2-window-softcap").
	prompt := []int32{1, 304, 308, 294, 311, 287, 313, 300, 294, 319, 323, 328, 332, 286, 335, 502, 297, 409, 509, 357, 293, 505, 286}
	want := []int32{156, 156, 156, 269, 269, 269, 269, 269, 269, 269, 269, 269, 505, 505, 505, 505, 505, 505, 505, 505, 505, 505, 505, 505}

	e := newEngine(t, m, engine.Config{PrefixCache: true, PageTokens: 4, Pages: 128, MaxBatchTokens: 7})
	for round := range 2 {
		// three copies at once: the first round prefills in chunks, the
		// second finds the prompt's full pages in the prefix cache
		var hs []*engine.Handle
		for range 3 {
			h, err := e.Submit(context.Background(), engine.Request{Prompt: prompt, MaxTokens: len(want), IgnoreEOS: true})
			if err != nil {
				t.Fatal(err)
			}
			hs = append(hs, h)
		}
		for i, h := range hs {
			got, last := collect(t, h)
			if !slices.Equal(got, want) {
				t.Errorf("round %d request %d: ids %v, llama.cpp %v", round, i, got, want)
			}
			if round == 1 && last.CachedTokens == 0 {
				t.Errorf("round 1 request %d: no prompt tokens came from the prefix cache", i)
			}
		}
	}
}
