package model_test

import (
	"math"
	"strings"
	"testing"

	"tandem/internal/engine/kernels"
	"tandem/internal/engine/model"
	"tandem/internal/engine/tensor"
	"tandem/internal/synth"
)

// hybrid is the tiny preset as a 4-layer hybrid of arch: three Gated
// DeltaNet layers, then one gated full-attention layer (the synthesized
// default interval of 4), attention norms ×3 so positions matter.
func hybrid(arch string) func(c *synth.Config) {
	return func(c *synth.Config) { c.Arch, c.Layers, c.AttnGain = arch, 4, 3 }
}

// hybridCases are synthesized qwen35 and qwen35moe files and llama.cpp's
// greedy runs of the three lowbitPrompts on them, recorded with
// node-llama-cpp 3.21.1 (llama.cpp 80fb11a, one thread, F16 KV cache, flash
// attention off) by
// TestHybridLlamaCppLive (go test -run TestHybridLlamaCppLive -v logs the
// runs). The seeds were picked among 21-30 by llama.cpp's gaps on the Q8_0
// files alone (a late first near tie over the three prompts), before
// comparing with Tandem; the F32 files reuse them. Seed 22 was first
// chosen for the qwen35 Q8_0 file and parted from llama.cpp at the third
// prompt's step 9, where llama.cpp's gap was 0.0106; on its F32 file
// both engines agree there (gaps within 1e-4), so the parting is Q8_0
// activation rounding, and 25, the next best by gaps, is used.
var hybridCases = []moeCase{
	// tandem model synth --arch qwen35 (4 layers, attention gain 3) --type f32 --seed 22
	{"qwen35-f32", hybrid("qwen35"), tensor.F32, 22, [3]lowbitRun{
		{24, []int32{223, 472, 113, 266, 222, 188, 192, 9, 240, 229, 316, 282, 500, 10, 104, 234, 135, 17, 97, 223, 350, 144, 458, 329}},
		{4, []int32{236, 206, 242, 308, 465, 77, 226, 444, 116, 150, 1, 313, 509, 441, 46, 34, 237, 449, 19, 180, 422, 451, 0, 152}},
		{11, []int32{302, 104, 167, 87, 320, 27, 77, 281, 482, 383, 282, 346, 321, 261, 462, 282, 6, 171, 451, 125, 466, 178, 486, 221}},
	}},
	// the same with a multi-token-prediction block (--nextn 1), which both
	// engines load and leave out of the forward pass: llama.cpp's runs are
	// the plain file's
	{"qwen35-f32-mtp", func(c *synth.Config) { hybrid("qwen35")(c); c.NextN = 1 }, tensor.F32, 22, [3]lowbitRun{
		{24, []int32{223, 472, 113, 266, 222, 188, 192, 9, 240, 229, 316, 282, 500, 10, 104, 234, 135, 17, 97, 223, 350, 144, 458, 329}},
		{4, []int32{236, 206, 242, 308, 465, 77, 226, 444, 116, 150, 1, 313, 509, 441, 46, 34, 237, 449, 19, 180, 422, 451, 0, 152}},
		{11, []int32{302, 104, 167, 87, 320, 27, 77, 281, 482, 383, 282, 346, 321, 261, 462, 282, 6, 171, 451, 125, 466, 178, 486, 221}},
	}},
	// --arch qwen35 --type q8_0 --seed 25
	{"qwen35-q8_0", hybrid("qwen35"), tensor.Q8_0, 25, [3]lowbitRun{
		{7, []int32{75, 342, 79, 137, 340, 149, 41, 15, 323, 388, 30, 495, 414, 365, 414, 228, 327, 156, 402, 176, 81, 277, 237, 72}},
		{24, []int32{339, 258, 495, 368, 180, 410, 131, 502, 94, 156, 35, 495, 342, 321, 378, 312, 438, 296, 99, 48, 399, 205, 453, 182}},
		{22, []int32{366, 16, 187, 312, 188, 490, 208, 487, 278, 333, 244, 12, 102, 194, 321, 340, 206, 114, 242, 344, 460, 38, 510, 217}},
	}},
	// --arch qwen35 --type q4_k_m --seed 21 (seeds 21-25 scanned): Q4_K
	// DeltaNet and attention matrices, Q6_K ssm_out/attn_v/ffn_down where
	// llama-quantize's mix puts them
	{"qwen35-q4_k", hybrid("qwen35"), tensor.Q4_K, 21, [3]lowbitRun{
		{5, []int32{381, 282, 136, 290, 116, 182, 117, 319, 401, 213, 331, 378, 29, 168, 37, 246, 430, 266, 199, 80, 374, 19, 199, 325}},
		{9, []int32{88, 136, 472, 69, 454, 459, 231, 489, 359, 478, 342, 488, 331, 300, 488, 482, 511, 31, 113, 307, 20, 284, 314, 1}},
		{24, []int32{425, 82, 436, 144, 338, 339, 189, 252, 449, 79, 352, 349, 5, 88, 278, 345, 101, 64, 326, 182, 218, 71, 477, 317}},
	}},
	// --arch qwen35moe --type f32 --seed 23: 8 experts, 2 used, width 256,
	// a shared expert of 512
	{"qwen35moe-f32", hybrid("qwen35moe"), tensor.F32, 23, [3]lowbitRun{
		{1, []int32{220, 33, 400, 382, 269, 334, 395, 312, 193, 333, 288, 212, 24, 125, 31, 330, 116, 109, 353, 204, 145, 183, 184, 278}},
		{11, []int32{178, 123, 480, 20, 481, 230, 11, 164, 143, 108, 106, 375, 126, 47, 97, 500, 58, 159, 362, 429, 72, 253, 413, 115}},
		{3, []int32{222, 49, 509, 21, 18, 107, 392, 72, 438, 412, 239, 186, 214, 62, 154, 173, 222, 5, 205, 200, 259, 450, 472, 410}},
	}},
	// --arch qwen35moe --type q8_0 --seed 23
	{"qwen35moe-q8_0", hybrid("qwen35moe"), tensor.Q8_0, 23, [3]lowbitRun{
		{17, []int32{220, 52, 164, 33, 229, 208, 477, 302, 159, 168, 165, 366, 468, 124, 204, 195, 399, 350, 167, 475, 293, 402, 351, 117}},
		{11, []int32{178, 123, 480, 20, 481, 230, 11, 164, 143, 108, 106, 375, 126, 47, 97, 500, 58, 159, 362, 429, 72, 253, 413, 115}},
		{14, []int32{222, 49, 509, 21, 18, 107, 392, 72, 438, 412, 239, 186, 214, 62, 259, 340, 230, 317, 325, 322, 304, 166, 380, 51}},
	}},
}

// hybridGaps are llama.cpp's top-two logit gaps at the greedy steps of the
// F32 cases before their near tie (at most gapSteps), logged by
// TestHybridLlamaCppLive with the runs (a "-mtp" case uses its plain
// file's).
var hybridGaps = map[string][3][]float64{
	"qwen35-f32": {
		{0.07998, 0.24889, 0.02945, 0.13456, 0.01723, 0.06095, 0.04643, 0.12573, 0.04395, 0.06221, 0.18213, 0.02352},
		{0.10552, 0.05629, 0.03712, 0.04420},
		{0.25860, 0.04945, 0.03566, 0.23964, 0.07102, 0.10016, 0.01122, 0.19007, 0.11229, 0.01415, 0.08864},
	},
	"qwen35moe-f32": {
		{0.24152},
		{0.03487, 0.06476, 0.03144, 0.04793, 0.05602, 0.25519, 0.03524, 0.13236, 0.10164, 0.16284, 0.10724},
		{0.07559, 0.03737, 0.09747},
	},
}

// gapSteps is how many of llama.cpp's top-two gaps an F32 case records
// per prompt (fewer where its near tie comes first), and f32GapTol how far
// Tandem's may be from them: with F32 weights neither engine rounds
// activations to a quantized type, and the gaps agreed within 1.1e-4
// against llama.cpp with flash attention, within 4e-5 without it (as they
// are recorded now; 0.005-0.013 with Q8_0, where a rounding flip in one
// activation block moves the logits).
const (
	gapSteps  = 12
	f32GapTol = 1e-3
)

// TestHybridMatchesLlamaCpp: Tandem's greedy continuations on the
// hybridCases files equal llama.cpp's up to its first near tie, at the
// kernel level TANDEM_KERNEL_LEVEL names (run it at every level). The
// prompts' prefill runs the DeltaNet over up to 82 tokens in one step, the
// continuations one token at a time.
func TestHybridMatchesLlamaCpp(t *testing.T) { matchesRecorded(t, hybridCases) }

// TestHybridGapsMatchLlamaCpp: on the F32 hybrid files the top-two logit
// gap of every greedy step before the near tie is within f32GapTol of
// llama.cpp's, a check of the logits themselves, not only of their
// argmax.
func TestHybridGapsMatchLlamaCpp(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range hybridCases {
		want, ok := hybridGaps[strings.TrimSuffix(tc.name, "-mtp")]
		if !ok {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			m, err := model.Load(writeMoECase(t, dir, tc))
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			pool := kernels.NewPool(2)
			defer pool.Close()
			for i, w := range want {
				prompt := m.Tokenizer.Encode(lowbitPrompts[i], true, true)
				_, gaps := greedyGaps(t, model.NewRunner(m, pool), newCache(t, m, 16, 16, tensor.F16), prompt, len(w))
				for s, g := range w {
					if d := math.Abs(gaps[s] - g); d > f32GapTol {
						t.Errorf("prompt %d step %d: top-two gap %.5f, llama.cpp's %.5f", i+1, s, gaps[s], g)
					}
				}
			}
		})
	}
}

// TestHybridLlamaCppLive runs llama.cpp itself on the hybridCases files
// (see TestMoELlamaCppLive); on the F32 files it also holds the gaps to
// f32GapTol.
func TestHybridLlamaCppLive(t *testing.T) { matchesLive(t, hybridCases) }
