package model_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"tandem/internal/engine/kernels"
	"tandem/internal/engine/model"
	"tandem/internal/engine/tensor"
	"tandem/internal/synth"
)

// gemma4Case is a synthesized gemma4 file (synth preset, with "+fused" the
// experts' gate and up in one tensor; type; seed) and
// llama.cpp's greedy runs of the three lowbitPrompts on it.
type gemma4Case struct {
	name, preset string
	typ          tensor.Type
	seed         uint64
	runs         [3]lowbitRun
}

// gemma4Cases: the F16 files, and one Q4_0 file picked for agreeing.
// Recorded with node-llama-cpp 3.21.1 (llama.cpp 80fb11a, one thread, F16
// KV cache, flash attention off) by TestGemma4LlamaCppLive (go test -run
// TestGemma4LlamaCppLive -v logs the runs), which drives
// testdata/llamacpp-gap.mjs. tie is the step of llama.cpp's first near tie
// (top two logits within 0.01; 24 when none came).
//
// Quantized files. One cause of the disagreements on them was llama.cpp's
// flash attention, which node-llama-cpp's default ("auto") turns on for the
// CPU: on the g4e Q8_0 file (seed 1) llama.cpp gave 200 114 250 … for
// "Once upon a time" with it and Tandem's 173 429 128 … without it;
// llamacpp-gap.mjs turns it off now. What remains is not one wrong
// operation but rounding that these files amplify: with Q8_0 activations
// (every Q8_0 and Q4_0 product) a last-bit difference flips an activation's
// rounding by a step (up to 0.8% of its block's largest value), and six
// layers, the router's x256 input scale and the x8 output norm carry that
// to the logits. The largest change of any of llama.cpp's top logits
// (relative to the top one) at the first generated step, over the three
// lowbitPrompts and "The quick brown fox jumps over the lazy dog" (seed 1):
//
//	file        llama.cpp    Tandem generic  Tandem generic  Tandem F16
//	            flash off    vs llama.cpp    vs avx2         vs F32 KV
//	            vs on        (flash off)
//	g4e f16     0.005-0.012  0.004-0.009     0.003-0.009     0.005-0.010
//	g4e q8_0    0.14-0.19    0.000-0.15      0.000-0.18      0.15-0.22
//	g4e q4_0    0.08-0.15    0.09-0.23       0.000-0.17      0.13-0.18
//	g4a4b f16   0.009-0.022  0.005-0.010     0.005-0.013     0.009-0.019
//	g4a4b q8_0  0.09-0.26    0.10-0.18       0.07-0.11       0.16-0.33
//	g4a4b q4_0  0.17-1.12    0.000-0.68      0.000-0.27      0.16-0.99
//
// On the quantized files llama.cpp's two attention paths, Tandem's kernel
// levels and Tandem's two KV types all move the logits by 10-100 times the
// near-tie bound, so whether Tandem's ids equal llama.cpp's up to its first
// near tie is chance: over seeds 1-3 of g4e and g4a4b in Q8_0 and Q4_0, 12
// of the 36 (file, prompt) pairs agree at all three levels (two of them tie
// at the first step), and one file of the 12 on all three prompts (g4a4b
// Q4_0 seed 2, recorded below as a guard on the quantized paths, not as
// evidence of agreement in general; the others part at gaps of
// 0.010-0.11).
//
// The Q4_0 "The quick brown fox…" run (g4e seed 1) that Tandem's generic
// level and llama.cpp share (88 82 219 400 56 283 190 451) and the
// AVX2/AVX-512 levels do not (88 400 471 …) is such rounding, not the
// F16-KV attention kernels: exchanging the kernel families between the
// generic and AVX2 tables one at a time, only the Q4_0 products move the
// ids (F16 dot and axpy, F16 conversions, exp, the F32 kernels and the Q8_0
// quantizer do not). Those products differ in the float order of the block
// sums (generic: d·Σ block by block, ggml's scalar order; AVX: ggml's AVX2
// order, eight float lanes then a horizontal sum). At the prefill the two
// levels' layer-0 queries differ by 2.4e-7; the F16 cache turns such
// differences in K and V into half-precision steps, so layer 0's attention
// outputs differ by 1.9e-4, layer 1's queries by 9e-3 and the logits by
// 0.16. With an F32 cache the differences stay at 3e-7 through layer 1 and
// reach 8e-4 in layer 2's queries and 0.19 in the logits, but on this
// prompt they happen not to change the ids (88 82 219 … at every level).
// llama.cpp runs neither order here: it repacks Q4_0 weights for
// ggml_gemv/gemm_q4_0_8x8_q8_0 (each block's integer sum FMAed per row),
// and that order, tried in Tandem's generic level, gives the AVX ids on
// that prompt, not llama.cpp's.
var gemma4Cases = []gemma4Case{
	// tandem model synth --preset g4e --type f16 --seed 1
	{"g4e-f16", "g4e", tensor.F16, 1, [3]lowbitRun{
		{7, []int32{167, 45, 83, 308, 92, 170, 385, 202, 45, 128, 256, 446, 84, 58, 351, 495, 337, 29, 248, 479, 437, 265, 509, 365}},
		{8, []int32{23, 368, 29, 346, 286, 444, 445, 29, 163, 241, 138, 375, 446, 38, 87, 141, 14, 112, 7, 29, 155, 202, 375, 374}},
		{9, []int32{292, 29, 203, 303, 280, 342, 396, 224, 332, 154, 21, 280, 163, 413, 464, 412, 285, 173, 29, 439, 111, 303, 176, 439}},
	}},
	// tandem model synth --preset g4a4b --type f16 --seed 1
	{"g4a4b-f16", "g4a4b", tensor.F16, 1, [3]lowbitRun{
		{24, []int32{67, 67, 69, 507, 438, 69, 453, 198, 190, 375, 507, 198, 98, 37, 235, 491, 235, 327, 67, 427, 67, 427, 289, 427}},
		{4, []int32{507, 152, 507, 239, 54, 337, 256, 110, 53, 237, 337, 189, 42, 507, 252, 39, 327, 327, 337, 327, 337, 192, 408, 160}},
		{24, []int32{431, 201, 370, 431, 321, 39, 370, 431, 24, 507, 124, 124, 124, 124, 124, 124, 477, 67, 312, 316, 137, 477, 316, 477}},
	}},
	// g4a4b with the experts' gate and up fused (ffn_gate_up_exps), seed 2
	{"g4a4b-fused-f16", "g4a4b+fused", tensor.F16, 2, [3]lowbitRun{
		{24, []int32{223, 328, 160, 185, 190, 248, 223, 371, 8, 419, 8, 340, 8, 332, 8, 249, 305, 107, 43, 340, 144, 349, 234, 183}},
		{12, []int32{30, 332, 332, 332, 495, 30, 30, 30, 244, 179, 244, 494, 30, 30, 30, 30, 30, 30, 30, 30, 510, 30, 510, 203}},
		{24, []int32{210, 89, 114, 391, 112, 295, 173, 90, 90, 90, 90, 371, 371, 371, 371, 371, 95, 95, 371, 240, 95, 95, 95, 95}},
	}},
	// tandem model synth --preset g4a4b --type q4_0 --seed 2: chosen because
	// Tandem agrees with llama.cpp on it at every level (see above)
	{"g4a4b-q4_0", "g4a4b", tensor.Q4_0, 2, [3]lowbitRun{
		{24, []int32{408, 303, 400, 30, 428, 9, 484, 9, 9, 9, 9, 9, 13, 9, 97, 471, 215, 97, 181, 237, 376, 376, 64, 36}},
		{24, []int32{460, 419, 9, 9, 9, 59, 133, 59, 321, 52, 110, 321, 110, 321, 110, 321, 292, 4, 265, 280, 421, 110, 4, 179}},
		{7, []int32{424, 424, 424, 444, 203, 362, 163, 5, 11, 411, 5, 5, 25, 207, 207, 88, 468, 438, 207, 207, 207, 405, 127, 405}},
	}},
}

// writeGemma4Case synthesizes tc's file into dir and returns its path.
func writeGemma4Case(t *testing.T, dir string, tc gemma4Case) string {
	t.Helper()
	preset, fused := strings.CutSuffix(tc.preset, "+fused")
	cfg, err := synth.Preset(preset)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Gemma4.FusedGateUp = fused
	p := filepath.Join(dir, tc.name+".gguf")
	if err := synth.Write(p, synth.Options{Config: cfg, Type: tc.typ, Seed: tc.seed}); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestGemma4MatchesLlamaCpp: on synthesized gemma4 files, an E2B-like one
// (per-layer embeddings, shared KV, windowed layers with narrower heads)
// and a 26B-A4B-like mixture of experts, Tandem's greedy continuation of
// three prompts equals llama.cpp's up to llama.cpp's first near tie, at the
// kernel level TANDEM_KERNEL_LEVEL names (run it at every level; see
// level_test.go). The 82-token prompt passes the 16-token window.
func TestGemma4MatchesLlamaCpp(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range gemma4Cases {
		t.Run(tc.name, func(t *testing.T) { checkRecorded(t, writeGemma4Case(t, dir, tc), 2, tc.runs) })
	}
}

// TestGemma4LlamaCppLive runs llama.cpp itself (node-llama-cpp under
// TANDEM_NPM_DIR) on every gemma4Cases file and checks Tandem against it as
// TestGemma4MatchesLlamaCpp does, on llama.cpp's own tokenization, and that
// the recorded runs are still llama.cpp's. It skips when node or
// node-llama-cpp is missing.
func TestGemma4LlamaCppLive(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range gemma4Cases {
		t.Run(tc.name, func(t *testing.T) { liveCompare(t, writeGemma4Case(t, dir, tc), &tc.runs) })
	}
}

// TestGemma4LlamaCppAgainstItself holds the premise of gemma4Cases'
// comment against llama.cpp alone: its runs with flash attention on and off
// (two legitimate roundings of the same attention) agree up to the earlier
// near tie on the F16 files, and part before it on at least one prompt of
// each quantized file (seed 1, Q8_0 and Q4_0 of g4e and g4a4b), so the
// near-tie bound cannot tell a wrong operation from rounding there. Should
// the quantized files stop parting, quantized cases can be recorded as the
// F16 ones are. It runs node-llama-cpp as TestGemma4LlamaCppLive does and
// skips without it.
func TestGemma4LlamaCppAgainstItself(t *testing.T) {
	dir := t.TempDir()
	cases := []gemma4Case{
		{name: "g4e-f16", preset: "g4e", typ: tensor.F16, seed: 1},
		{name: "g4a4b-f16", preset: "g4a4b", typ: tensor.F16, seed: 1},
		{name: "g4e-q8_0", preset: "g4e", typ: tensor.Q8_0, seed: 1},
		{name: "g4e-q4_0", preset: "g4e", typ: tensor.Q4_0, seed: 1},
		{name: "g4a4b-q8_0", preset: "g4a4b", typ: tensor.Q8_0, seed: 1},
		{name: "g4a4b-q4_0", preset: "g4a4b", typ: tensor.Q4_0, seed: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := writeGemma4Case(t, dir, tc)
			off := llamaCppRuns(t, path)
			on := llamaCppRunsEnv(t, path, "TANDEM_LLAMACPP_FLASH=1")
			parted := 0
			for i := range off {
				tie := min(off[i].Tie, on[i].Tie)
				d := 0
				for d < tie && off[i].IDs[d] == on[i].IDs[d] {
					d++
				}
				if d == tie {
					t.Logf("prompt %d: flash on and off agree up to the near tie at step %d", i+1, tie)
					continue
				}
				parted++
				t.Logf("prompt %d: flash on and off part at step %d, before the near tie at %d (gaps %.4f off, %.4f on)",
					i+1, d, tie, off[i].Gaps[d], on[i].Gaps[d])
			}
			switch {
			case tc.typ == tensor.F16 && parted > 0:
				t.Errorf("llama.cpp with and without flash attention part above the near-tie bound on %d prompts of an F16 file", parted)
			case tc.typ != tensor.F16 && parted == 0:
				t.Errorf("llama.cpp with and without flash attention agree up to their near ties on this quantized file: the gap gemma4Cases describes may be gone; record quantized cases")
			}
		})
	}
}

// TestGemma4ChunkedPrefill: a gemma4 prompt prefilled in chunks of 5
// tokens over pages of 4 (so chunks cross the 16-token window, pages and
// the shared-KV layers' reads) gives the same greedy ids as the whole
// prompt at once, and those equal llama.cpp's up to its near tie.
func TestGemma4ChunkedPrefill(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range gemma4Cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := model.Load(writeGemma4Case(t, dir, tc))
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			pool := kernels.NewPool(2)
			defer pool.Close()
			r := model.NewRunner(m, pool)
			for i, run := range tc.runs {
				prompt := m.Tokenizer.Encode(lowbitPrompts[i], true, true)
				pages := (len(prompt) + 24 + 3) / 4
				whole := greedy(t, r, newCache(t, m, 4, pages, tensor.F16), prompt, 24)
				chunked := greedyChunked(t, r, newCache(t, m, 4, pages, tensor.F16), prompt, 24, 5)
				if !slices.Equal(whole, chunked) {
					t.Errorf("prompt %d: chunked prefill ids %v, whole prefill %v", i+1, chunked, whole)
				}
				if n := min(run.tie, len(run.ids)); !slices.Equal(chunked[:n], run.ids[:n]) {
					t.Errorf("prompt %d: chunked prefill ids %v, llama.cpp %v (near tie at step %d)", i+1, chunked, run.ids, run.tie)
				}
			}
		})
	}
}

// TestGemma4PrefillEqualsDecode: a gemma4 prompt's logits are the same bits
// whether its 82 tokens run as one step (the grouped expert path, tiles) or
// one token at a time (one round of Q/K/V products, the chosen experts'
// rows only), with 1 and 3 threads, for each case's file (Q8_0 here, so
// the quantized products are covered too).
func TestGemma4PrefillEqualsDecode(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range gemma4Cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.typ = tensor.Q8_0
			m, err := model.Load(writeGemma4Case(t, dir, tc))
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			checkPrefillEqualsDecode(t, m)
		})
	}
}
