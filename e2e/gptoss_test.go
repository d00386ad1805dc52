package e2e

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// TestPDMatchesServeGptOss is TestPDMatchesServe on a synthesized gpt-oss
// file (MXFP4 experts, attention sinks, YaRN, a window of 16 on the even
// layers, shorter than two of the prompts, so the disaggregated transfer
// carries the window group's pages): greedy output through `tandem up` is
// token for token what `tandem serve` gives, with the same logprobs,
// streaming and not.
func TestPDMatchesServeGptOss(t *testing.T) {
	setup(t)
	model := filepath.Join(t.TempDir(), "gpt-oss.gguf")
	synth := exec.Command(binPath, "model", "synth", "--arch", "gpt-oss", "--type", "mxfp4", "--attn-gain", "5",
		"--sliding-window", "16", "--seed", "24", "-o", model)
	if out, err := synth.CombinedOutput(); err != nil {
		t.Fatalf("tandem model synth --arch gpt-oss: %v\n%s", err, out)
	}
	upMatchesServe(t, model)
}
