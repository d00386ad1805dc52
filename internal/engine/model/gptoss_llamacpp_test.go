package model_test

import (
	"os"
	"testing"

	"tandem/internal/engine/tensor"
	"tandem/internal/synth"
)

// gptossCases are synthesized gpt-oss files (the tiny preset as gpt-oss:
// 8 experts of width 256, 4 used, YaRN factor 32, attention sinks, Q/K/V/O
// and expert biases, attn-gain 5 so that positions matter) and
// llama.cpp's greedy runs of the three lowbitPrompts on them. The seeds
// were picked among 21-38 (the last case's among 21-30) by llama.cpp's
// gaps alone (the latest first near tie over the three prompts), before
// comparing with Tandem. Recorded with
// node-llama-cpp 3.21.1 (llama.cpp 80fb11a, one thread, F16 KV cache, flash
// attention off) by
// TestGptOssLlamaCppLive (TANDEM_NPM_DIR=... go test -run
// TestGptOssLlamaCppLive -v logs the runs). tie is the step of llama.cpp's
// first near tie (24 when none came).
var gptossCases = []moeCase{
	// tandem model synth --arch gpt-oss --type mxfp4 --attn-gain 5 --seed 29:
	// MXFP4 experts, Q8_0 elsewhere; window 128 (the default), longer than
	// every prompt and its continuation (82+24 tokens)
	{"gpt-oss-mxfp4", gptoss(128), tensor.MXFP4, 29, [3]lowbitRun{
		{9, []int32{79, 284, 259, 166, 222, 267, 504, 443, 127, 210, 206, 114, 324, 55, 352, 107, 230, 349, 247, 177, 330, 329, 436, 265}},
		{8, []int32{397, 193, 309, 116, 444, 144, 190, 442, 129, 202, 346, 200, 87, 153, 179, 86, 504, 294, 230, 53, 323, 489, 41, 270}},
		{16, []int32{189, 33, 92, 157, 487, 78, 179, 459, 313, 381, 47, 313, 417, 468, 460, 382, 439, 234, 332, 417, 484, 391, 269, 439}},
	}},
	// --arch gpt-oss --type f16 --attn-gain 5 --sliding-window 16 --seed 29:
	// a window shorter than the two longer prompts
	{"gpt-oss-f16-w16", gptoss(16), tensor.F16, 29, [3]lowbitRun{
		{24, []int32{79, 495, 331, 427, 179, 389, 301, 420, 505, 329, 158, 160, 417, 430, 130, 222, 160, 20, 37, 300, 375, 55, 303, 21}},
		{15, []int32{40, 460, 368, 147, 292, 443, 268, 494, 176, 361, 125, 460, 146, 249, 371, 213, 300, 53, 311, 265, 229, 243, 290, 73}},
		{19, []int32{486, 37, 306, 94, 303, 206, 505, 486, 423, 52, 318, 163, 246, 18, 408, 367, 79, 270, 313, 331, 151, 230, 314, 129}},
	}},
	// --arch gpt-oss --type q8_0 --attn-gain 5 --sliding-window 8 --seed 33
	{"gpt-oss-q8_0-w8", gptoss(8), tensor.Q8_0, 33, [3]lowbitRun{
		{24, []int32{71, 173, 505, 213, 432, 339, 344, 440, 385, 93, 292, 29, 492, 476, 284, 107, 111, 330, 297, 250, 149, 374, 389, 347}},
		{15, []int32{161, 257, 340, 51, 87, 86, 373, 158, 13, 500, 254, 492, 283, 8, 292, 52, 289, 383, 238, 138, 107, 85, 139, 363}},
		{20, []int32{344, 233, 342, 415, 127, 234, 358, 99, 241, 74, 255, 364, 246, 331, 232, 299, 54, 222, 42, 74, 18, 289, 38, 39}},
	}},
	// --arch gpt-oss --type q8_0 --attn-gain 5 --sliding-window 32
	// --head-dim 128 --seed 27: attention 512 wide (4 heads of 128) on a
	// 256-wide model, as gpt-oss's 4096 on 2880
	{"gpt-oss-q8_0-hd128-w32", func(c *synth.Config) { gptoss(32)(c); c.KeyLength = 128 }, tensor.Q8_0, 27, [3]lowbitRun{
		{1, []int32{387, 283, 365, 24, 184, 252, 267, 254, 229, 45, 186, 36, 385, 262, 358, 78, 209, 167, 297, 15, 495, 308, 388, 312}},
		{9, []int32{328, 188, 240, 39, 309, 124, 353, 430, 428, 308, 430, 412, 423, 184, 481, 133, 445, 42, 145, 236, 209, 197, 51, 153}},
		{24, []int32{241, 176, 472, 148, 187, 131, 358, 342, 453, 433, 459, 472, 244, 20, 119, 230, 314, 52, 150, 388, 218, 487, 509, 182}},
	}},
}

// gptoss returns a moeCase configuration of gpt-oss with sliding window w.
func gptoss(w int) func(c *synth.Config) {
	return func(c *synth.Config) { c.Arch, c.AttnGain, c.SlidingWindow = "gpt-oss", 5, w }
}

// TestGptOssMatchesLlamaCpp: on the synthesized gpt-oss files, Tandem's
// greedy continuation of three prompts equals llama.cpp's up to its first
// near tie, at the kernel level TANDEM_KERNEL_LEVEL names (run it at every
// level). The windows: 128, longer than every prompt and continuation; 16
// and 8, shorter than the two longer prompts (23 and 82 tokens).
func TestGptOssMatchesLlamaCpp(t *testing.T) { matchesRecorded(t, gptossCases) }

// TestGptOssLlamaCppLive runs llama.cpp itself (node-llama-cpp under
// TANDEM_NPM_DIR) on every gptossCases file and checks Tandem against it.
func TestGptOssLlamaCppLive(t *testing.T) { matchesLive(t, gptossCases) }

// TestGptOssFileLlamaCppLive is TestGptOssLlamaCppLive on the file
// TANDEM_GPTOSS_FILE names (a larger synthesized one, such as tandem model
// synth --preset oss20b, or a downloaded gpt-oss); it skips when unset.
func TestGptOssFileLlamaCppLive(t *testing.T) {
	path := os.Getenv("TANDEM_GPTOSS_FILE")
	if path == "" {
		t.Skip("TANDEM_GPTOSS_FILE is not set")
	}
	liveCompare(t, path, nil, 0)
}
