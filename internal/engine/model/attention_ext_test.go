package model_test

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"tandem/internal/engine/kernels"
	"tandem/internal/engine/model"
	"tandem/internal/engine/tensor"
)

// llamaCppChecks runs the llama.cpp equality checks at the current kernel
// level and attention form and returns, per check, "" when it holds or what
// went wrong: the synthesized architectures' greedy ids (prefill at once
// and in chunks of 5 over pages of 4, so windows cross chunks and pages)
// and the stories and tiny-random logits within the tolerances of
// TestStoriesPrompt1Logits and TestTinyRandomF16Greedy.
func llamaCppChecks(t *testing.T) map[string]string {
	t.Helper()
	res := map[string]string{}
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
		res[tc.name], res[tc.name+"/chunked"] = "", ""
		if got := greedy(t, r, newCache(t, m, 4, pages, tensor.F16), prompt, len(tc.ids)); !slices.Equal(got, tc.ids) {
			res[tc.name] = fmt.Sprintf("greedy ids\n%v\nllama.cpp\n%v", got, tc.ids)
		}
		if got := greedyChunked(t, r, newCache(t, m, 4, pages, tensor.F16), prompt, len(tc.ids), 5); !slices.Equal(got, tc.ids) {
			res[tc.name+"/chunked"] = fmt.Sprintf("greedy ids\n%v\nllama.cpp\n%v", got, tc.ids)
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
		name := "stories/logits/kv-" + lc.kv.String()
		res[name] = ""
		got := allLogits(t, model.NewRunner(stories, pool), newCache(t, stories, 16, 8, lc.kv), ids)
		if d, at := maxAbsDiff(got, readF32(t, lc.ref)); d > lc.tol {
			res[name] = fmt.Sprintf("max |logit - llama.cpp| = %g at %d, want <= %g", d, at, lc.tol)
		}
	}
	tiny := load(t, "models/llama-2-tiny-random.gguf")
	prompt := readIDs(t, "testdata/reference/tinyrandom.prompt2.tokens.txt")
	res["tiny-random/logits/kv-f32"] = ""
	got := allLogits(t, model.NewRunner(tiny, pool), newCache(t, tiny, 16, 4, tensor.F32), prompt)
	if d, at := maxAbsDiff(got, readF32(t, "testdata/reference/tinyrandom.prompt2.kvf32.logits.f32")); d > 1e-3 {
		res["tiny-random/logits/kv-f32"] = fmt.Sprintf("max |logit - llama.cpp| = %g at %d, want <= 1e-3", d, at)
	}
	return res
}

// TestAttentionPathsMatchLlamaCpp runs the llama.cpp equality checks with
// each attention form forced ("rows": per-query everywhere; "tiles": tiles
// for every prefill chunk, decode per-query). At the best kernel level both
// must pass every check. At the other levels with block assembly the tiles
// must pass every check the per-query form passes there: with today's
// per-query attention a few synthesized files already part from llama.cpp
// at lower levels (near ties that the matmul kernels' rounding decides:
// gemma3-window at AVX2), which the test logs.
func TestAttentionPathsMatchLlamaCpp(t *testing.T) {
	if model.RaceEnabled {
		t.Skip("race detector: the llama.cpp checks of the automatic choice (TestArchsMatchLlamaCpp and others) cover the tiles")
	}
	for _, l := range []kernels.Level{kernels.AVX2, kernels.AVX512} {
		t.Run(l.String(), func(t *testing.T) {
			if err := kernels.CheckLevel(l); err != nil {
				t.Skip(err)
			}
			best := l == kernels.MaxLevel()
			if !best && testing.Short() {
				t.Skip("short: the best level only")
			}
			defer kernels.SetLevel(l)()
			restore := model.SetAttnPath("rows")
			rows := llamaCppChecks(t)
			restore()
			restore = model.SetAttnPath("tiles")
			tiles := llamaCppChecks(t)
			restore()
			for _, name := range slices.Sorted(maps.Keys(rows)) {
				switch {
				case rows[name] != "" && best:
					t.Errorf("%s, per-query attention: %s", name, rows[name])
				case rows[name] != "":
					t.Logf("%s: the per-query attention parts from llama.cpp at this level already: %s", name, rows[name])
				}
				if tiles[name] != "" && (best || rows[name] == "") {
					t.Errorf("%s, tiled attention: %s", name, tiles[name])
				}
			}
		})
	}
}
