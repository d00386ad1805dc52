package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestPDMatchesServeMoE: greedy output and logprobs through `tandem up`
// (prefill and decode on separate workers, the KV cache handed between
// them) are token for token what `tandem serve` gives on synthesized
// mixture-of-experts files: qwen3moe (8 experts, 2 used, weights
// renormalized over the chosen) and qwen2moe (a shared expert beside
// them), both q4_k_m, so the prefill worker runs the grouped-by-expert
// path and the decode worker the one-token path of the same layers.
func TestPDMatchesServeMoE(t *testing.T) {
	setup(t)
	for _, arch := range []string{"qwen3moe", "qwen2moe"} {
		t.Run(arch, func(t *testing.T) {
			t.Parallel()
			upMatchesServe(t, synthTiny(t, arch, "q4_k_m"), "short", "over-a-chunk")
		})
	}
}

// TestPDMatchesServeQuantTypes: the same on the tiny llama preset in each
// low-bit file type synth writes (its mix of the type with Q8_0/Q6_K where
// llama.cpp's mixes put them), so both workers run those types' kernels:
// prefill the eight-token tiles, decode the row kernels.
func TestPDMatchesServeQuantTypes(t *testing.T) {
	setup(t)
	for _, typ := range []string{"mxfp4", "iq4_nl", "iq4_xs", "q3_k_m", "q2_k"} {
		t.Run(typ, func(t *testing.T) {
			t.Parallel()
			upMatchesServe(t, synthTiny(t, "llama", typ), "short", "over-a-chunk")
		})
	}
}

// synthTiny writes a tiny model of arch in file type typ into the test's
// temporary folder: 8 experts, 2 used, for a mixture-of-experts arch.
func synthTiny(t *testing.T, arch, typ string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), arch+"-"+typ+".gguf")
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	args := []string{"model", "synth", "--preset", "tiny", "--arch", arch, "--type", typ, "-o", path}
	if arch != "llama" {
		args = append(args, "--experts", "8", "--experts-used", "2")
	}
	cmd := exec.CommandContext(ctx, binPath, args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tandem model synth --arch %s: %v\n%s", arch, err, out)
	}
	return path
}
