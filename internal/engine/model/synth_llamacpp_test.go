package model_test

import (
	"slices"
	"testing"

	"tandem/internal/engine/kernels"
	"tandem/internal/engine/model"
	"tandem/internal/engine/tensor"
	"tandem/internal/fixture"
)

// TestQuantizedMatchesLlamaCpp: greedy output on synthesized tiny models
// (deterministic: preset tiny, seed 21) equals what llama.cpp produced for
// the same files, recorded by hand with node-llama-cpp 3.21.1
// (shared/tools/llamacpp-greedy.mjs FILE 16 "Once upon a time"; flash
// attention on and off give the same ids). The Q4_K
// file mixes Q4_K and Q6_K as llama.cpp's Q4_K_M does.
func TestQuantizedMatchesLlamaCpp(t *testing.T) {
	for _, tc := range []struct {
		typ tensor.Type
		ids []int32
	}{
		{tensor.Q4_K, []int32{133, 361, 464, 133, 133, 133, 195, 445, 289, 195, 289, 195, 289, 195, 289, 289}},
		{tensor.Q8_0, []int32{442, 128, 214, 214, 257, 214, 257, 404, 51, 257, 51, 214, 257, 214, 257, 257}},
		{tensor.F16, []int32{442, 128, 214, 214, 257, 214, 257, 404, 51, 257, 51, 214, 257, 214, 257, 257}},
	} {
		t.Run(tc.typ.String(), func(t *testing.T) {
			m := fixture.Tiny(t, tc.typ, 21)
			pool := kernels.NewPool(1)
			defer pool.Close()
			prompt := m.Tokenizer.Encode("Once upon a time", true, true)
			got := greedy(t, model.NewRunner(m, pool), newCache(t, m, 16, 8, tensor.F16), prompt, len(tc.ids))
			if !slices.Equal(got, tc.ids) {
				t.Errorf("greedy ids %v, llama.cpp %v", got, tc.ids)
			}
		})
	}
}
