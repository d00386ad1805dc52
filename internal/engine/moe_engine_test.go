package engine_test

import (
	"testing"

	"tandem/internal/engine"
	"tandem/internal/engine/tensor"
	"tandem/internal/fixture"
	"tandem/internal/synth"
)

// TestMoEEnginePaths: a qwen3moe file (16 experts, 4 used per token, Q8_0)
// gives llama.cpp's greedy ids, up to llama.cpp's first near tie, through
// the engine with every path that reaches the experts: prefill in 7-token
// chunks over 4-token pages, three sequences decoding in one batch (their
// tokens grouped by expert together), and prompts served from the prefix
// cache. llama.cpp's runs: see moeCases in
// internal/engine/model/moe_llamacpp_test.go ("qwen3moe-q8_0-16x4").
func TestMoEEnginePaths(t *testing.T) {
	cfg, err := synth.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Arch, cfg.Experts, cfg.ExpertsUsed = "qwen3moe", 16, 4
	m := fixture.Synth(t, cfg, tensor.Q8_0, 28)
	prompts := []string{
		"Once upon a time",
		"Once upon a time, there was a little girl named Lily. She loved to play outside in the park.",
		"Once upon a time there was a little girl who lived in a village near the forest. " +
			"Every day she walked to the river to fetch water for her mother, and one morning she saw",
	}
	want := [][]int32{ // llama.cpp's ids up to its first near tie
		{450, 372, 372, 21, 415, 323, 372, 397, 394, 321, 400, 425, 342},
		{75, 116, 110, 110, 110},
		{117, 75, 75, 75, 75, 75, 75, 75, 75, 75, 75, 370, 496, 75, 75, 75},
	}
	e := newEngine(t, m, engine.Config{PrefixCache: true, PageTokens: 4, Pages: 256, MaxBatchTokens: 7})
	var ids [][]int32
	for _, p := range prompts {
		ids = append(ids, m.Tokenizer.Encode(p, true, true))
	}
	twoRounds(t, e, ids, want)
}
