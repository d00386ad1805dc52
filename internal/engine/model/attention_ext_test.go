package model_test

import (
	"math"
	"slices"
	"testing"

	"tandem/internal/engine/kernels"
	"tandem/internal/engine/model"
	"tandem/internal/engine/tensor"
)

// TestAttentionPathsBitIdentical runs every synthesized architecture file of
// TestArchsMatchLlamaCpp with each attention form forced, at each kernel
// level with block assembly: the prompt's logits (a prefill chunk) and the
// greedy ids of 8 decode steps (per query for one KV head per query head,
// by tiles with grouped-query attention) must be the same bits, so the
// llama.cpp checks hold for the tiles exactly as for the per-query form,
// and a token's output does not depend on whether it came in a prefill
// chunk or a decode step (preemption recomputes rely on that).
func TestAttentionPathsBitIdentical(t *testing.T) {
	for _, l := range []kernels.Level{kernels.AVX2, kernels.AVX512} {
		t.Run(l.String(), func(t *testing.T) {
			if err := kernels.CheckLevel(l); err != nil {
				t.Skip(err)
			}
			if model.RaceEnabled && l != kernels.MaxLevel() {
				t.Skip("race detector: the best level only")
			}
			defer kernels.SetLevel(l)()
			pool := kernels.NewPool(2)
			defer pool.Close()
			for _, tc := range archCases {
				m := synthArch(t, tc)
				prompt := m.Tokenizer.Encode(prompt1, true, true)
				var logits [2][]float32
				var ids [2][]int32
				for i, path := range []string{"rows", "tiles"} {
					restore := model.SetAttnPath(path)
					r := model.NewRunner(m, pool)
					pages := (len(prompt) + 8 + 3) / 4
					logits[i] = allLogits(t, r, newCache(t, m, 4, pages, tensor.F16), prompt)
					ids[i] = greedy(t, r, newCache(t, m, 4, pages, tensor.F16), prompt, 8)
					restore()
				}
				for j := range logits[0] {
					if math.Float32bits(logits[0][j]) != math.Float32bits(logits[1][j]) {
						t.Fatalf("%s: logit %d: per-query %v, tiles %v", tc.name, j, logits[0][j], logits[1][j])
					}
				}
				if !slices.Equal(ids[0], ids[1]) {
					t.Errorf("%s: greedy ids per-query %v, tiles %v", tc.name, ids[0], ids[1])
				}
			}
		})
	}
}
