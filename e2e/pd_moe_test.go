package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
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
			model := synthMoE(t, arch)
			serve := startServe(t, model)
			up := startUp(t, model)
			ps := prompts()
			for _, pname := range []string{"short", "over-a-chunk"} {
				for _, stream := range []bool{false, true} {
					what := fmt.Sprintf("%s prompt, stream=%v", pname, stream)
					want := complete(t, serve, ps[pname], stream)
					got := complete(t, up, ps[pname], stream)
					if len(want.Tokens) != 24 {
						t.Fatalf("%s: serve returned %d tokens, want 24 (logprobs tokens)", what, len(want.Tokens))
					}
					if strings.Join(got.Tokens, "\x00") != strings.Join(want.Tokens, "\x00") || got.Text != want.Text {
						t.Errorf("%s: through the router %q %q, serve %q %q", what, got.Text, got.Tokens, want.Text, want.Tokens)
					}
					if strings.Join(got.Top, " ") != strings.Join(want.Top, " ") || strings.Join(got.LPs, " ") != strings.Join(want.LPs, " ") {
						t.Errorf("%s: logprobs through the router\n%v %v\nserve\n%v %v", what, got.LPs, got.Top, want.LPs, want.Top)
					}
					if got.Finish != want.Finish || got.Usage != want.Usage {
						t.Errorf("%s: finish %q usage %s through the router; serve finish %q usage %s", what, got.Finish, got.Usage, want.Finish, want.Usage)
					}
				}
			}
		})
	}
}

// synthMoE writes a tiny mixture-of-experts model of arch (8 experts, 2
// used, q4_k_m) into the test's temporary folder.
func synthMoE(t *testing.T, arch string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), arch+".gguf")
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, "model", "synth", "--preset", "tiny", "--arch", arch,
		"--experts", "8", "--experts-used", "2", "--type", "q4_k_m", "-o", path)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tandem model synth --arch %s: %v\n%s", arch, err, out)
	}
	return path
}
