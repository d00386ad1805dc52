package model_test

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"tandem/internal/engine/gguf"
	"tandem/internal/engine/kernels"
	"tandem/internal/engine/kvcache"
	"tandem/internal/engine/model"
	"tandem/internal/engine/tensor"
	"tandem/internal/fixture"
	"tandem/internal/synth"
)

// archCase is one synthesized file of an architecture and llama.cpp's greedy
// continuation of prompt1 on it.
type archCase struct {
	name string
	cfg  func(c *synth.Config)
	// reps repeats prompt1 (joined by spaces) to reach long positions; 0
	// means once.
	reps int
	ids  []int32
	// quant, when set, is the weight type instead of F16.
	quant tensor.Type
}

// archSeeds are the synthesis seeds of the cases that do not use seed 21
// (see archCases).
var archSeeds = map[string]uint64{"phi3-q4_k": 74, "gemma3-window": 27}

// archCases: every file is the tiny preset in F16, seed 21 (or the case's
// seed in archSeeds), changed as cfg says. The ids were recorded with
// node-llama-cpp 3.21.1 (llama.cpp 80fb11a, context 512, F16 KV cache):
//
//	tandem model synth --preset tiny --type f16 --seed SEED FLAGS -o F.gguf
//	node llamacpp-greedy.mjs F.gguf 24 "Once upon a time, there was a little girl named Lily. She loved to play outside in the park."
//
// with the FLAGS in each case's comment (llamacpp-greedy.mjs leaves flash
// attention at node-llama-cpp's default, on for the CPU;
// TestArchsLlamaCppLive holds the ids against llama.cpp with it off, the
// way the newer cases are recorded: all 24 ids of every case are the
// same). Two files are left out because
// their greedy paths reach near ties where Tandem and llama.cpp part: gemma2
// --type q8_0 --head-dim 128 (step 4, where llama.cpp's top two logits are
// 0.0007 apart and Tandem's 0.0024 the other way) and gemma3 --type q4_k
// --head-dim 128 (token 21); the F16 files of those shapes match.
//
// The ids must match at every kernel level (TANDEM_KERNEL_LEVEL), whose
// logits differ by about 0.001 on F16 files and up to 0.03 on quantized
// ones (a rounding difference flips an activation quant, and the flips add
// up over the layers). Two cases use
// another seed because seed 21 led to near ties at some level, not to kernel
// defects: phi3-q4_k's last step (450 over 250 by 0.0024 at AVX2 and
// AVX-512, 250 over 450 by 0.0021 at generic; the levels' logits there differ
// by up to 0.016) and gemma3-window's step 11 (115 over 480 by 0.0003 at
// AVX-512, 480 over 115 by 0.00005 at AVX2; levels differ by up to 0.0011).
// Seeds 74 and 27 give paths whose top two logits are at least 0.024 and
// 0.015 apart at every step and level, and llama.cpp's ids equal Tandem's.
//
// --attn-gain 5 scales the attention scores by 25 so that RoPE and windows
// change the output (with plain random weights attention is nearly uniform
// and blind to positions).
var archCases = []archCase{
	// --llama3-rope --context 131072 --rope-base 500000 --attn-gain 5, with
	// prompt1 20 times (441 tokens): the factors change only the slow
	// rotations, which need long positions to matter.
	{"llama3-rope", func(c *synth.Config) {
		c.Llama3Rope, c.Context, c.RopeBase, c.AttnGain = true, 131072, 500000, 5
	}, 20, []int32{317, 272, 45, 330, 14, 272, 277, 272, 277, 272, 296, 253, 296, 384, 338, 277, 386, 338, 277, 386, 338, 136, 427, 69}, 0},
	// --sliding-window 6 --attn-gain 5: llama.cpp ignores the window for
	// arch llama (Mistral-style files); the ids equal those without the key.
	{"llama-sliding-window-ignored", func(c *synth.Config) {
		c.SlidingWindow, c.AttnGain = 6, 5
	}, 0, []int32{372, 333, 127, 270, 271, 129, 91, 345, 465, 145, 223, 385, 43, 270, 145, 106, 188, 129, 334, 471, 248, 298, 129, 206}, 0},
	// --arch qwen3
	{"qwen3", func(c *synth.Config) { c.Arch = "qwen3" }, 0,
		[]int32{392, 102, 240, 240, 240, 508, 392, 468, 509, 508, 392, 468, 468, 468, 504, 508, 392, 156, 89, 168, 240, 508, 392, 508}, 0},
	// --arch qwen3 --tied
	{"qwen3-tied", func(c *synth.Config) { c.Arch, c.Tied = "qwen3", true }, 0,
		[]int32{286, 286, 286, 286, 286, 286, 286, 286, 286, 286, 286, 286, 286, 286, 286, 286, 286, 286, 286, 286, 286, 286, 286, 286}, 0},
	// --arch phi3 --attn-gain 5
	{"phi3", func(c *synth.Config) { c.Arch, c.AttnGain = "phi3", 5 }, 0,
		[]int32{130, 384, 430, 428, 204, 468, 375, 237, 311, 396, 136, 459, 461, 133, 136, 195, 428, 334, 265, 434, 100, 136, 376, 130}, 0},
	// --arch phi3 --context 4096 --rope-orig-context 256 --attn-gain 5:
	// LongRoPE, long factors (llama.cpp: context 512 > 256; Tandem: 4096 > 256)
	{"phi3-longrope-long", func(c *synth.Config) {
		c.Arch, c.Context, c.RopeOrigContext, c.AttnGain = "phi3", 4096, 256, 5
	}, 0, []int32{153, 295, 57, 327, 238, 217, 272, 237, 75, 428, 354, 477, 143, 214, 156, 428, 61, 209, 345, 173, 57, 182, 198, 368}, 0},
	// --arch phi3 --context 4096 --rope-orig-context 4096 --attn-gain 5: short factors
	{"phi3-longrope-short", func(c *synth.Config) {
		c.Arch, c.Context, c.RopeOrigContext, c.AttnGain = "phi3", 4096, 4096, 5
	}, 0, []int32{153, 153, 153, 153, 57, 422, 153, 57, 75, 214, 309, 349, 57, 247, 419, 9, 284, 341, 275, 114, 57, 113, 417, 323}, 0},
	// --arch gemma2 --sliding-window 6 --attn-softcap 1 --final-softcap 0.5 --attn-gain 5
	{"gemma2-window-softcap", func(c *synth.Config) {
		c.Arch, c.SlidingWindow, c.AttnSoftcap, c.FinalSoftcap, c.AttnGain = "gemma2", 6, 1, 0.5, 5
	}, 0, []int32{156, 156, 156, 269, 269, 269, 269, 269, 269, 269, 269, 269, 505, 505, 505, 505, 505, 505, 505, 505, 505, 505, 505, 505}, 0},
	// --arch gemma2 --attn-gain 5 (llama.cpp's defaults: window 4096, caps 50 and 30)
	{"gemma2", func(c *synth.Config) { c.Arch, c.AttnGain = "gemma2", 5 }, 0,
		[]int32{286, 286, 423, 423, 423, 423, 423, 186, 186, 186, 186, 186, 186, 186, 186, 186, 186, 186, 186, 186, 186, 94, 94, 94}, 0},
	// --seed 27 --arch gemma3 --layers 6 --sliding-window 6 --rope-base 1000000:
	// layers 0-4 local (rope base 10000), layer 5 global (base 1e6)
	{"gemma3-window", func(c *synth.Config) {
		c.Arch, c.Layers, c.SlidingWindow, c.RopeBase = "gemma3", 6, 6, 1e6
	}, 0, []int32{215, 216, 67, 215, 206, 28, 105, 471, 418, 28, 350, 357, 350, 350, 312, 273, 290, 217, 290, 460, 490, 311, 153, 85}, 0},
	// Quantized files, and head dimensions with heads·head_dim != Dim (as
	// in Qwen3 and Gemma): --type q8_0 --arch qwen3 --head-dim 128
	{"qwen3-q8_0-headdim128", func(c *synth.Config) { c.Arch, c.KeyLength = "qwen3", 128 }, 0,
		[]int32{302, 479, 479, 479, 479, 479, 479, 479, 330, 273, 326, 330, 330, 330, 330, 330, 330, 330, 330, 330, 330, 330, 330, 330}, tensor.Q8_0},
	// --arch gemma3 --layers 6 --sliding-window 6 --rope-base 1000000 --head-dim 128
	{"gemma3-headdim128", func(c *synth.Config) {
		c.Arch, c.Layers, c.SlidingWindow, c.RopeBase, c.KeyLength = "gemma3", 6, 6, 1e6, 128
	}, 0, []int32{44, 198, 22, 342, 502, 18, 166, 211, 400, 232, 503, 208, 22, 44, 253, 226, 367, 423, 423, 199, 448, 266, 472, 469}, 0},
	// --seed 74 --type q4_k --arch phi3 --attn-gain 5
	{"phi3-q4_k", func(c *synth.Config) { c.Arch, c.AttnGain = "phi3", 5 }, 0,
		[]int32{191, 411, 395, 191, 78, 256, 80, 425, 191, 80, 389, 191, 411, 434, 76, 233, 453, 185, 202, 145, 190, 434, 80, 155}, tensor.Q4_K},
	// --arch gemma2 --sliding-window 6 --attn-gain 5 --head-dim 128
	{"gemma2-headdim128", func(c *synth.Config) {
		c.Arch, c.SlidingWindow, c.AttnGain, c.KeyLength = "gemma2", 6, 5, 128
	}, 0, []int32{323, 350, 350, 350, 492, 492, 492, 492, 492, 492, 29, 29, 214, 214, 214, 214, 343, 343, 343, 343, 343, 343, 343, 343}, 0},
	// The 27B models' query scale 1/sqrt(dim/heads), which llama.cpp picks by
	// layer count (46 for gemma2, 62 for gemma3): Dim 128, 2 heads of 128
	// (dim/heads 64), 1 KV head, FF 256, window 6, attention gain 5 (written
	// with synth.Write; the CLI has no --dim).
	{"gemma2-27b-shape", func(c *synth.Config) {
		*c = synth.Config{Arch: "gemma2", Dim: 128, Layers: 46, Heads: 2, KVHeads: 1, FF: 256, Vocab: 512, Context: 2048,
			KeyLength: 128, AttnGain: 5, SlidingWindow: 6, Name: "g27"}
	}, 0, []int32{57, 240, 242, 57, 233, 472, 482, 84, 91, 57, 335, 347, 57, 57, 0, 374, 374, 500, 240, 50, 99, 221, 84, 181}, 0},
	{"gemma3-27b-shape", func(c *synth.Config) {
		*c = synth.Config{Arch: "gemma3", Dim: 128, Layers: 62, Heads: 2, KVHeads: 1, FF: 256, Vocab: 512, Context: 2048,
			KeyLength: 128, AttnGain: 5, SlidingWindow: 6, Name: "g27"}
	}, 0, []int32{360, 297, 283, 36, 165, 355, 283, 219, 97, 97, 97, 97, 130, 93, 398, 102, 408, 408, 408, 408, 176, 97, 97, 114}, 0},
	// --type q8_0 --arch gemma2 --sliding-window 6 --attn-gain 5
	{"gemma2-q8_0", func(c *synth.Config) { c.Arch, c.SlidingWindow, c.AttnGain = "gemma2", 6, 5 }, 0,
		[]int32{66, 66, 66, 336, 336, 382, 396, 396, 396, 396, 396, 396, 191, 191, 191, 191, 191, 191, 191, 191, 191, 191, 191, 191}, tensor.Q8_0},
}

// llamaCppPromptIDs is how llama.cpp tokenized prompt1 with the synthesized
// vocabulary (BOS first).
var llamaCppPromptIDs = []int32{1, 304, 308, 294, 311, 287, 313, 300, 294, 319, 323, 328, 332, 286, 335, 502, 297, 409, 509, 357, 293, 505, 286}

// casePrompt is llama.cpp's tokenization of the case's prompt: BOS, then
// prompt1's pieces reps times.
// caseText is tc's prompt: prompt1, tc.reps times (joined by spaces).
func caseText(tc archCase) string {
	text := prompt1
	for range tc.reps - 1 {
		text += " " + prompt1
	}
	return text
}

func casePrompt(tc archCase) []int32 {
	ids := slices.Clone(llamaCppPromptIDs)
	for range tc.reps - 1 {
		ids = append(ids, llamaCppPromptIDs[1:]...)
	}
	return ids
}

func synthArch(t *testing.T, tc archCase) *model.Model {
	t.Helper()
	m, err := model.Load(synthArchPath(t, tc))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// synthArchPath synthesizes tc's file into the test's temporary folder.
func synthArchPath(t *testing.T, tc archCase) string {
	t.Helper()
	cfg, err := synth.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	tc.cfg(&cfg)
	p := filepath.Join(t.TempDir(), tc.name+".gguf")
	typ := tensor.F16
	if tc.quant != 0 {
		typ = tc.quant
	}
	seed := uint64(21)
	if s, ok := archSeeds[tc.name]; ok {
		seed = s
	}
	if err := synth.Write(p, synth.Options{Config: cfg, Type: typ, Seed: seed}); err != nil {
		t.Fatal(err)
	}
	return p
}

// greedyChunked is greedy with the prompt prefilled in chunks of chunk
// tokens, each its own Forward step.
func greedyChunked(t *testing.T, r *model.Runner, kv *kvcache.Cache, ids []int32, n, chunk int) []int32 {
	t.Helper()
	pages, err := kv.Alloc(kv.Config().PagesFor(len(ids) + n))
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Release(pages)
	var out [][]float32
	for p := 0; p < len(ids); p += chunk {
		end := min(p+chunk, len(ids))
		if out, err = r.Forward(kv, []model.Seq{{Tokens: ids[p:end], Pos: p, Pages: pages}}); err != nil {
			t.Fatal(err)
		}
	}
	var gen []int32
	for i := range n {
		id := argmax(out[0])
		gen = append(gen, id)
		if i == n-1 {
			break
		}
		if out, err = r.Forward(kv, []model.Seq{{Tokens: []int32{id}, Pos: len(ids) + i, Pages: pages}}); err != nil {
			t.Fatal(err)
		}
	}
	return gen
}

// TestArchsMatchLlamaCpp: on each synthesized architecture file Tandem's
// greedy ids equal llama.cpp's, with the prompt prefilled at once and in
// chunks of 5 tokens (so sliding windows cross chunk and page boundaries:
// pages of 4 tokens, window 6).
func TestArchsMatchLlamaCpp(t *testing.T) {
	for _, tc := range archCases {
		t.Run(tc.name, func(t *testing.T) {
			m := synthArch(t, tc)
			prompt := m.Tokenizer.Encode(caseText(tc), true, true)
			if want := casePrompt(tc); !slices.Equal(prompt, want) {
				t.Fatalf("prompt ids %v, llama.cpp %v", prompt, want)
			}
			pool := kernels.NewPool(1)
			defer pool.Close()
			r := model.NewRunner(m, pool)
			pages := (len(prompt) + len(tc.ids) + 3) / 4
			if got := greedy(t, r, newCache(t, m, 4, pages, tensor.F16), prompt, len(tc.ids)); !slices.Equal(got, tc.ids) {
				t.Errorf("greedy ids\n%v\nllama.cpp\n%v\n%s", got, tc.ids, divergence(t, r, newCache(t, m, 4, pages, tensor.F16), prompt, tc.ids, got))
			}
			if got := greedyChunked(t, r, newCache(t, m, 4, pages, tensor.F16), prompt, len(tc.ids), 5); !slices.Equal(got, tc.ids) {
				t.Errorf("chunked prefill: greedy ids\n%v\nllama.cpp\n%v\n%s", got, tc.ids, divergence(t, r, newCache(t, m, 4, pages, tensor.F16), prompt, tc.ids, got))
			}
		})
	}
}

// TestArchsLlamaCppLive runs llama.cpp itself (testdata/llamacpp-gap.mjs:
// flash attention off, F16 KV cache, one thread) on every archCases file
// and checks that it tokenizes the case's prompt as recorded, that the
// recorded ids are still its greedy ids up to its first near tie (top two
// logits within 0.01), and that Tandem's equal them that far at the
// kernel level TANDEM_KERNEL_LEVEL names. It skips when node or
// node-llama-cpp is missing.
func TestArchsLlamaCppLive(t *testing.T) {
	for _, tc := range archCases {
		t.Run(tc.name, func(t *testing.T) {
			path := synthArchPath(t, tc)
			ref := llamaCppRunsFor(t, path, []string{caseText(tc)})[0]
			if want := casePrompt(tc); !slices.Equal(ref.PromptIDs, want) {
				t.Fatalf("llama.cpp tokenizes the prompt %v, recorded %v", ref.PromptIDs, want)
			}
			n := min(ref.Tie, len(tc.ids))
			if !slices.Equal(ref.IDs[:n], tc.ids[:n]) {
				t.Errorf("llama.cpp's greedy ids\n%v\nrecorded\n%v\n(near tie at step %d)", ref.IDs, tc.ids, ref.Tie)
			}
			m, err := model.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			pool := kernels.NewPool(1)
			defer pool.Close()
			pages := (len(ref.PromptIDs) + 24 + 3) / 4
			got := greedy(t, model.NewRunner(m, pool), newCache(t, m, 4, pages, tensor.F16), ref.PromptIDs, 24)
			if !slices.Equal(got[:n], ref.IDs[:n]) {
				t.Errorf("greedy ids\n%v\nllama.cpp\n%v\n(near tie at step %d)", got, ref.IDs, ref.Tie)
			}
		})
	}
}

// divergence describes the first step where got leaves want: the logits
// of both tokens there, with want's ids fed before it (so that a near tie,
// which calls for another case, can be told from a wrong kernel, whose
// logits are far apart).
func divergence(t *testing.T, r *model.Runner, kv *kvcache.Cache, prompt, want, got []int32) string {
	t.Helper()
	i := 0
	for i < min(len(want), len(got)) && want[i] == got[i] {
		i++
	}
	if i == min(len(want), len(got)) {
		return "no divergent step"
	}
	ids := append(slices.Clone(prompt), want[:i]...)
	logits := allLogits(t, r, kv, ids)
	last := logits[len(logits)-len(logits)/len(ids):]
	return fmt.Sprintf("step %d (%s kernels): logit of Tandem's %d %.6f, of llama.cpp's %d %.6f, gap %.6f",
		i, kernels.CurrentLevel(), got[i], last[got[i]], want[i], last[want[i]], last[got[i]]-last[want[i]])
}

// TestArchFeaturesDiscriminate: turning off one feature of an architecture
// changes the greedy ids away from llama.cpp's, so TestArchsMatchLlamaCpp
// checks each feature and not only the shared Llama path. (Final logit
// soft-capping is monotonic and cannot change greedy ids; it is covered by
// TestFinalSoftcap.)
func TestArchFeaturesDiscriminate(t *testing.T) {
	byName := map[string]archCase{}
	for _, tc := range archCases {
		byName[tc.name] = tc
	}
	for _, d := range []struct {
		arch, feature string
		off           func(m *model.Model)
	}{
		{"llama3-rope", "rope_freqs", func(m *model.Model) { m.RopeFreqs = nil }},
		{"qwen3", "QK norm", func(m *model.Model) {
			for i := range m.Layers {
				m.Layers[i].QNorm, m.Layers[i].KNorm = nil, nil
			}
		}},
		{"phi3-longrope-long", "long factors", func(m *model.Model) { m.RopeFreqs = nil }},
		{"phi3-longrope-long", "attention factor", func(m *model.Model) { m.Config.RopeAttnFactor = 1 }},
		{"gemma2-window-softcap", "sliding window", func(m *model.Model) { m.Config.SlidingWindow = 0 }},
		{"gemma2-window-softcap", "attention soft-cap", func(m *model.Model) { m.Config.AttnSoftcap = 0 }},
		{"gemma2", "GELU", func(m *model.Model) { m.Config.Act = model.ActSiLU }},
		{"gemma2", "embedding scale", func(m *model.Model) { m.Config.EmbedScale = 0 }},
		{"gemma2", "post norms", func(m *model.Model) {
			for i := range m.Layers {
				m.Layers[i].PostAttnNorm, m.Layers[i].PostFFNNorm = nil, nil
			}
		}},
		{"gemma3-window", "sliding window", func(m *model.Model) { m.Config.SlidingWindow = 0 }},
		{"gemma2-27b-shape", "27B query scale", func(m *model.Model) { m.Config.QueryScale = float32(1 / math.Sqrt(128)) }},
		{"gemma3-27b-shape", "27B query scale", func(m *model.Model) { m.Config.QueryScale = float32(1 / math.Sqrt(128)) }},
		{"gemma3-window", "local rope base", func(m *model.Model) { m.Config.RopeBaseSWA = m.Config.RopeBase }},
	} {
		t.Run(d.arch+"/"+d.feature, func(t *testing.T) {
			tc := byName[d.arch]
			m := synthArch(t, tc)
			d.off(m)
			pool := kernels.NewPool(1)
			defer pool.Close()
			prompt := casePrompt(tc)
			got := greedy(t, model.NewRunner(m, pool), newCache(t, m, 16, 32, tensor.F16), prompt, len(tc.ids))
			if slices.Equal(got, tc.ids) {
				t.Errorf("without %s the ids still equal llama.cpp's: the test does not check it", d.feature)
			}
		})
	}
}

// TestFinalSoftcap: with a final soft-cap the logits are cap·tanh(l/cap) of
// the uncapped ones (which greedy ids cannot show: tanh keeps the order).
func TestFinalSoftcap(t *testing.T) {
	m := synthArch(t, archCases[slices.IndexFunc(archCases, func(c archCase) bool { return c.name == "gemma2-window-softcap" })])
	pool := kernels.NewPool(1)
	defer pool.Close()
	capv := m.Config.FinalSoftcap
	if capv != 0.5 {
		t.Fatalf("final soft-cap %v, the file says 0.5", capv)
	}
	capped := allLogits(t, model.NewRunner(m, pool), newCache(t, m, 16, 4, tensor.F16), llamaCppPromptIDs)
	m.Config.FinalSoftcap = 0
	raw := allLogits(t, model.NewRunner(m, pool), newCache(t, m, 16, 4, tensor.F16), llamaCppPromptIDs)
	var big int
	for i := range raw {
		want := float32(math.Tanh(float64(raw[i]/capv))) * capv
		if math.Abs(float64(capped[i]-want)) > 1e-6 {
			t.Fatalf("logit %d: %v, want cap·tanh(%v/cap) = %v", i, capped[i], raw[i], want)
		}
		if math.Abs(float64(raw[i])) > float64(capv)/2 {
			big++
		}
	}
	if big == 0 {
		t.Fatalf("no logit is large enough for the cap to bend it: the check is empty")
	}
}

// mapMD is Metadata from maps.
type mapMD struct {
	s map[string]string
	i map[string]int
	f map[string]float32
}

func (m mapMD) String(k string) (string, bool)    { v, ok := m.s[k]; return v, ok }
func (m mapMD) Int(k string) (int, bool)          { v, ok := m.i[k]; return v, ok }
func (m mapMD) Float32(k string) (float32, bool)  { v, ok := m.f[k]; return v, ok }
func (m mapMD) Strings(k string) ([]string, bool) { return nil, false }

func baseMD(arch string) mapMD {
	return mapMD{
		s: map[string]string{"general.architecture": arch},
		i: map[string]int{arch + ".embedding_length": 256, arch + ".block_count": 6, arch + ".feed_forward_length": 512,
			arch + ".attention.head_count": 4, arch + ".vocab_size": 512},
		f: map[string]float32{},
	}
}

// TestConfigArchKeys: architecture defaults and keys as llama.cpp reads them.
func TestConfigArchKeys(t *testing.T) {
	md := baseMD("mamba")
	_, err := model.ConfigFromMetadata(md)
	var ue *model.UnsupportedArchError
	if !errors.As(err, &ue) || ue.Arch != "mamba" || !strings.Contains(err.Error(), "supported: llama, qwen2, qwen3, phi3, gemma2, gemma3") {
		t.Errorf("unsupported arch: %v", err)
	}

	cfg := func(md mapMD) model.Config {
		t.Helper()
		c, err := model.ConfigFromMetadata(md)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	// RoPE scaling: a factor without a type is linear (llama.cpp's default
	// type); "none" ignores the factor; "llama3" is no GGUF type.
	md = baseMD("llama")
	md.f["llama.rope.scaling.factor"] = 4
	if c := cfg(md); c.RopeScale != 0.25 {
		t.Errorf("factor 4 without a type: scale %v, want 0.25", c.RopeScale)
	}
	md.s["llama.rope.scaling.type"] = "none"
	if c := cfg(md); c.RopeScale != 1 {
		t.Errorf("type none: scale %v, want 1", c.RopeScale)
	}
	md.s["llama.rope.scaling.type"] = "llama3"
	if _, err := model.ConfigFromMetadata(md); err == nil || !strings.Contains(err.Error(), `"llama3" is not supported`) {
		t.Errorf("type llama3: %v", err)
	}
	// llama ignores sliding_window, as llama.cpp's llama loader does.
	md = baseMD("llama")
	md.i["llama.attention.sliding_window"] = 4096
	if c := cfg(md); c.SlidingWindow != 0 || c.Window(0) != 0 {
		t.Errorf("llama with sliding_window: window %d", c.SlidingWindow)
	}

	g2 := cfg(baseMD("gemma2"))
	if g2.SlidingWindow != 4096 || !slices.Equal(g2.SWALayers, []bool{true, false, true, false, true, false}) ||
		g2.AttnSoftcap != 50 || g2.FinalSoftcap != 30 || !g2.TiedOutput || g2.Act != model.ActGELU ||
		g2.EmbedScale != 16 || g2.QueryScale != 0.125 || g2.RopeBaseSWA != g2.RopeBase {
		t.Errorf("gemma2 defaults: %+v", g2)
	}
	md = baseMD("gemma3")
	if c := cfg(md); c.SlidingWindow != 0 || c.AllWindowed() || !c.QKNorm {
		t.Errorf("gemma3 without sliding_window: %+v", c)
	}
	md.i["gemma3.attention.sliding_window"] = 512
	md.f["gemma3.rope.freq_base"] = 1e6
	g3 := cfg(md)
	if g3.SlidingWindow != 512 || !slices.Equal(g3.SWALayers, []bool{true, true, true, true, true, false}) ||
		g3.RopeBaseSWA != 10000 || g3.RopeBase != 1e6 || g3.FinalSoftcap != 0 || g3.Window(5) != 0 || g3.Window(4) != 512 {
		t.Errorf("gemma3 with a window: %+v", g3)
	}
	md.i["gemma3.attention.sliding_window_pattern"] = 0
	if c := cfg(md); !c.AllWindowed() {
		t.Errorf("pattern 0 should window every layer: %v", c.SWALayers)
	}
	md.i["gemma3.attention.sliding_window_pattern"] = 1
	if c := cfg(md); slices.Contains(c.SWALayers, true) {
		t.Errorf("pattern 1 should window no layer: %v", c.SWALayers)
	}
	md = baseMD("phi3")
	md.i["phi3.attention.sliding_window"] = 2047
	md.i["phi3.context_length"] = 131072
	md.i["phi3.rope.scaling.original_context_length"] = 4096
	md.f["phi3.rope.scaling.attn_factor"] = 1.19
	if c := cfg(md); c.SlidingWindow != 0 || c.RopeOrigContext != 4096 || c.RopeAttnFactor != 1.19 || c.QueryScale != 0.125 {
		t.Errorf("phi3: %+v", c)
	}
}

// TestAllWindowedReleasesPages: on a model whose every layer is windowed
// (gemma3 with 2 layers: pattern 6 leaves no global layer), releasing the
// pages that fall before FirstNeededPos as decoding goes leaves the greedy
// ids unchanged and Forward accepts the released slots; with a global layer
// (6 layers) FirstNeededPos stays 0.
func TestAllWindowedReleasesPages(t *testing.T) {
	six := synthArch(t, archCase{name: "gemma3-6", cfg: func(c *synth.Config) { c.Arch, c.Layers, c.SlidingWindow = "gemma3", 6, 6 }})
	if six.Config.AllWindowed() || six.FirstNeededPos(100) != 0 {
		t.Fatalf("6-layer gemma3: all windowed %v, FirstNeededPos(100) = %d, want false, 0", six.Config.AllWindowed(), six.FirstNeededPos(100))
	}
	m := synthArch(t, archCase{name: "gemma3-2", cfg: func(c *synth.Config) {
		c.Arch, c.SlidingWindow, c.RopeBase = "gemma3", 6, 1e6
	}})
	if !m.Config.AllWindowed() || m.FirstNeededPos(100) != 95 {
		t.Fatalf("2-layer gemma3: all windowed %v, FirstNeededPos(100) = %d, want true, 95", m.Config.AllWindowed(), m.FirstNeededPos(100))
	}
	pool := kernels.NewPool(1)
	defer pool.Close()
	r := model.NewRunner(m, pool)
	const n = 40
	want := greedy(t, r, newCache(t, m, 4, 32, tensor.F16), llamaCppPromptIDs, n)

	kv := newCache(t, m, 4, 32, tensor.F16)
	pages, err := kv.Alloc(kv.Config().PagesFor(len(llamaCppPromptIDs) + n))
	if err != nil {
		t.Fatal(err)
	}
	released := 0
	release := func(next int) {
		for i := released; (i+1)*4 <= m.FirstNeededPos(next); i++ {
			// poison the page (0xffff is a half-precision NaN), so a read
			// of it after the release would show in the ids
			for l := range m.Config.Layers {
				for _, b := range [][]byte{kv.KPage(l, pages[i]), kv.VPage(l, pages[i])} {
					for j := range b {
						b[j] = 0xff
					}
				}
			}
			if err := kv.Release(pages[i : i+1]); err != nil {
				t.Fatal(err)
			}
			pages[i] = -1
			released = i + 1
		}
	}
	out, err := r.Forward(kv, []model.Seq{{Tokens: llamaCppPromptIDs, Pages: pages}})
	if err != nil {
		t.Fatal(err)
	}
	var got []int32
	for i := range n {
		id := argmax(out[0])
		got = append(got, id)
		pos := len(llamaCppPromptIDs) + i
		release(pos)
		if i == n-1 {
			break
		}
		if out, err = r.Forward(kv, []model.Seq{{Tokens: []int32{id}, Pos: pos, Pages: pages}}); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("with released pages: %v, want %v", got, want)
	}
	if held := (len(llamaCppPromptIDs) + n + 3) / 4; released < held-3 {
		t.Errorf("released %d of %d pages; a 6-token window needs at most 3", released, held)
	}
	for _, p := range pages[released:] {
		kv.Release([]int32{p})
	}
	if kv.FreeCount() != 32 {
		t.Errorf("free pages %d, want 32", kv.FreeCount())
	}
}

// TestUnusedTensorRefused: a file with a tensor the architecture does not
// use (here an FFN bias on a llama file) is refused, as llama.cpp refuses
// it, instead of running without that weight.
func TestUnusedTensorRefused(t *testing.T) {
	src, err := gguf.Open(fixture.TinyPath(t, tensor.F32, 11))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	w := gguf.NewWriter()
	for _, kv := range src.KV {
		if kv.Key != "general.alignment" {
			w.Set(kv.Key, kv.Value)
		}
	}
	for _, ti := range src.Tensors {
		if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, ti.Data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.AddTensor("blk.0.ffn_up.bias", tensor.F32, []uint64{512}, make([]byte, 4*512)); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "extra.gguf")
	if err := w.WriteFile(p); err != nil {
		t.Fatal(err)
	}
	_, err = model.Load(p)
	if err == nil || !strings.Contains(err.Error(), "tensor blk.0.ffn_up.bias is not part of Tandem's llama architecture") {
		t.Errorf("Load: %v", err)
	}
}
