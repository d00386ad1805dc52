package engine_test

import (
	"testing"

	"tandem/internal/engine"
	"tandem/internal/engine/tensor"
	"tandem/internal/fixture"
	"tandem/internal/synth"
)

// TestGemma4Engine: the g4e gemma4 file (windowed layers of 16 tokens with
// their own page pool, the last three layers reading earlier layers' K/V,
// per-layer embeddings) gives llama.cpp's greedy ids through the engine
// with chunked prefill (7-token steps over 4-token pages), batched decode
// of three copies, and, in a second round, prompts served from the prefix
// cache.
func TestGemma4Engine(t *testing.T) {
	cfg, err := synth.Preset("g4e")
	if err != nil {
		t.Fatal(err)
	}
	m := fixture.Synth(t, cfg, tensor.F16, 1)
	// llama.cpp's ids for the 82-token prompt: gemma4Cases "g4e-f16" in
	// internal/engine/model/gemma4_llamacpp_test.go (the same 24 ids with
	// and without flash attention, no near tie among them)
	text := "Once upon a time there was a little girl who lived in a village near the forest. " +
		"Every day she walked to the river to fetch water for her mother, and one morning she saw"
	want := []int32{272, 494, 82, 394, 278, 181, 41, 285, 164, 237, 190, 65, 157, 114, 293, 360, 127, 383, 430, 383, 430, 383, 430, 383}
	prompt := m.Tokenizer.Encode(text, true, true)
	e := newEngine(t, m, engine.Config{PrefixCache: true, PageTokens: 4, Pages: 256, MaxBatchTokens: 7})
	if kc := e.KVCache().Config(); kc.Layers != 3 || kc.Window != 16 {
		t.Fatalf("kv cache of %d layers, window %d: want the 3 KV layers and a 16-token window group", kc.Layers, kc.Window)
	}
	twoRounds(t, e, [][]int32{prompt, prompt, prompt}, [][]int32{want, want, want})
}
