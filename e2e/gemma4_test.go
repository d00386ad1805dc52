package e2e

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// TestPDGemma4MatchesServe: for synthesized gemma4 files, the E2B-like g4e
// (sliding-window layers with their own page pool and narrower heads,
// layers that read earlier layers' K/V, per-layer embeddings) and the
// 26B-A4B-like g4a4b (a mixture of experts beside the dense feed-forward,
// a cache row wider on the windowed layers than on the full one), greedy
// output through `tandem up` (prefill and decode workers shipping the KV
// cache's layers) is token for token what `tandem serve` gives, in F16,
// Q8_0 and Q4_0.
func TestPDGemma4MatchesServe(t *testing.T) {
	setup(t)
	for _, preset := range []string{"g4e", "g4a4b"} {
		for _, typ := range []string{"f16", "q8_0", "q4_0"} {
			t.Run(preset+"-"+typ, func(t *testing.T) {
				path := filepath.Join(t.TempDir(), preset+"-"+typ+".gguf")
				cmd := exec.CommandContext(t.Context(), binPath, "model", "synth", "--preset", preset, "--type", typ, "-o", path)
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("tandem model synth --preset %s --type %s: %v\n%s", preset, typ, err, out)
				}
				upMatchesServe(t, path)
			})
		}
	}
}
