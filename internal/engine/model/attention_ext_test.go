package model_test

import (
	"slices"
	"testing"

	"tandem/internal/engine/kernels"
	"tandem/internal/engine/model"
	"tandem/internal/engine/tensor"
)

// TestAttentionPathsMatchLlamaCpp runs the llama.cpp equality checks with
// each attention form forced ("rows": per-query everywhere; "tiles": tiles
// for every prefill chunk, whatever the kernel level; decode per-query): the
// synthesized architectures' greedy ids (prefill at once and in chunks of 5
// over pages of 4, so windows cross chunks and pages) and the stories and
// tiny-random logits within the tolerances of TestStoriesPrompt1Logits and
// TestTinyRandomF16Greedy.
func TestAttentionPathsMatchLlamaCpp(t *testing.T) {
	for _, path := range []string{"rows", "tiles"} {
		t.Run(path, func(t *testing.T) {
			defer model.SetAttnPath(path)()
			pool := kernels.NewPool(1)
			defer pool.Close()
			for _, tc := range archCases {
				m := synthArch(t, tc)
				text := prompt1
				for range tc.reps - 1 {
					text += " " + prompt1
				}
				prompt := m.Tokenizer.Encode(text, true, true)
				r := model.NewRunner(m, pool)
				pages := (len(prompt) + len(tc.ids) + 3) / 4
				if got := greedy(t, r, newCache(t, m, 4, pages, tensor.F16), prompt, len(tc.ids)); !slices.Equal(got, tc.ids) {
					t.Errorf("%s: greedy ids\n%v\nllama.cpp\n%v", tc.name, got, tc.ids)
				}
				if got := greedyChunked(t, r, newCache(t, m, 4, pages, tensor.F16), prompt, len(tc.ids), 5); !slices.Equal(got, tc.ids) {
					t.Errorf("%s: chunked prefill: greedy ids\n%v\nllama.cpp\n%v", tc.name, got, tc.ids)
				}
			}
			stories := load(t, "models/stories260K.gguf")
			ids := stories.Tokenizer.Encode(prompt1, true, true)
			for _, lc := range []struct {
				kv  tensor.Type
				ref string
				tol float64
			}{
				{tensor.F32, "testdata/reference/stories260K.prompt1.kvf32.logits.f32", 1e-4},
				{tensor.F16, "testdata/reference/stories260K.prompt1.logits.f32", 1e-2},
			} {
				got := allLogits(t, model.NewRunner(stories, pool), newCache(t, stories, 16, 8, lc.kv), ids)
				if d, at := maxAbsDiff(got, readF32(t, lc.ref)); d > lc.tol {
					t.Errorf("stories kv %s: max |logit - llama.cpp| = %g at %d, want <= %g", lc.kv, d, at, lc.tol)
				}
			}
			tiny := load(t, "models/llama-2-tiny-random.gguf")
			prompt := readIDs(t, "testdata/reference/tinyrandom.prompt2.tokens.txt")
			got := allLogits(t, model.NewRunner(tiny, pool), newCache(t, tiny, 16, 4, tensor.F32), prompt)
			if d, at := maxAbsDiff(got, readF32(t, "testdata/reference/tinyrandom.prompt2.kvf32.logits.f32")); d > 1e-3 {
				t.Errorf("tiny-random kv f32: max |logit - llama.cpp| = %g at %d, want <= 1e-3", d, at)
			}
		})
	}
}
