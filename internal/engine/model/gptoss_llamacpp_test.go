package model_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"tandem/internal/engine/kernels"
	"tandem/internal/engine/model"
	"tandem/internal/engine/tensor"
	"tandem/internal/synth"
)

// gptossCases are synthesized gpt-oss files (the tiny preset as gpt-oss:
// 8 experts of width 256, 4 used, YaRN factor 32, attention sinks, Q/K/V/O
// and expert biases, attn-gain 5 so that positions matter) and
// llama.cpp's greedy runs of the three lowbitPrompts on them.
var gptossCases = []moeCase{
	// tandem model synth --arch gpt-oss --type mxfp4 --attn-gain 5 --seed 30:
	// MXFP4 experts, Q8_0 elsewhere; window 128 (the default), longer than
	// every prompt and its continuation (82+24 tokens)
	{"gpt-oss-mxfp4", gptoss(128), tensor.MXFP4, 30, [3]lowbitRun{}},
	// --arch gpt-oss --type f16 --attn-gain 5 --sliding-window 16 --seed 24:
	// a window shorter than the two longer prompts
	{"gpt-oss-f16-w16", gptoss(16), tensor.F16, 24, [3]lowbitRun{}},
	// --arch gpt-oss --type q8_0 --attn-gain 5 --sliding-window 8 --seed 25
	{"gpt-oss-q8_0-w8", gptoss(8), tensor.Q8_0, 25, [3]lowbitRun{}},
}

// gptoss returns a moeCase configuration of gpt-oss with sliding window w.
func gptoss(w int) func(c *synth.Config) {
	return func(c *synth.Config) { c.Arch, c.AttnGain, c.SlidingWindow = "gpt-oss", 5, w }
}

// TestGptOssLlamaCppLive runs llama.cpp itself (node-llama-cpp under
// TANDEM_NPM_DIR) on every gptossCases file and checks Tandem against it.
func TestGptOssLlamaCppLive(t *testing.T) {
	liveCases(t, gptossCases)
}

// liveCases is TestMoELlamaCppLive's body for cases.
func liveCases(t *testing.T, cases []moeCase) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node not found: the live llama.cpp comparison needs Node.js")
	}
	npm := os.Getenv("TANDEM_NPM_DIR")
	if npm == "" {
		npm = "/tmp/tandem-npm"
	}
	if _, err := os.Stat(filepath.Join(npm, "node_modules", "node-llama-cpp")); err != nil {
		t.Skipf("node-llama-cpp is not installed in %s (set TANDEM_NPM_DIR; npm i -E node-llama-cpp@3.21.1 there)", npm)
	}
	dir := t.TempDir()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := writeMoECase(t, dir, tc)
			cmd := exec.Command(node, append([]string{"testdata/llamacpp-gap.mjs", path, "24"}, lowbitPrompts[:]...)...)
			cmd.Env = append(os.Environ(), "TANDEM_NPM_DIR="+npm)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("node llamacpp-gap.mjs: %v\n%s", err, stderr.Bytes())
			}
			m, err := model.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			pool := kernels.NewPool(2)
			defer pool.Close()
			sc := bufio.NewScanner(bytes.NewReader(out))
			sc.Buffer(nil, 1<<20)
			for i := 0; sc.Scan(); i++ {
				var ref struct {
					PromptIDs []int32   `json:"prompt_ids"`
					IDs       []int32   `json:"ids"`
					Gaps      []float64 `json:"gaps"`
				}
				if err := json.Unmarshal(sc.Bytes(), &ref); err != nil {
					t.Fatal(err)
				}
				tie := len(ref.IDs)
				for s, g := range ref.Gaps {
					if g < moeNearTie {
						tie = s
						break
					}
				}
				t.Logf("prompt %d: {%d, []int32{%s}}, min gap before the tie %.4f", i+1, tie, joinIDs(ref.IDs), minGap(ref.Gaps[:tie]))
				got := greedy(t, model.NewRunner(m, pool), newCache(t, m, 16, 16, tensor.F16), ref.PromptIDs, 24)
				if !slices.Equal(got[:tie], ref.IDs[:tie]) {
					t.Errorf("prompt %d: greedy ids %v, llama.cpp %v (near tie at step %d)", i+1, got, ref.IDs, tie)
				}
				if rec := tc.runs[i]; rec.ids != nil {
					if k := min(rec.tie, tie, len(rec.ids)); !slices.Equal(rec.ids[:k], ref.IDs[:k]) {
						t.Errorf("prompt %d: the recorded run {%d, %v} is not llama.cpp's", i+1, rec.tie, rec.ids)
					}
				}
			}
		})
	}
}
