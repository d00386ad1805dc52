package e2e

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
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
	serve := startServe(t, model)
	up := startUp(t, model)
	for pname, p := range prompts() {
		for _, stream := range []bool{false, true} {
			want := complete(t, serve, p, stream)
			got := complete(t, up, p, stream)
			what := fmt.Sprintf("%s prompt, stream=%v", pname, stream)
			if len(want.Tokens) != 24 {
				t.Fatalf("%s: serve returned %d tokens, want 24 (logprobs tokens)", what, len(want.Tokens))
			}
			if strings.Join(got.Tokens, "\x00") != strings.Join(want.Tokens, "\x00") || got.Text != want.Text {
				t.Errorf("%s: through the router %q %q, serve %q %q", what, got.Text, got.Tokens, want.Text, want.Tokens)
			}
			if strings.Join(got.LPs, " ") != strings.Join(want.LPs, " ") {
				t.Errorf("%s: logprobs through the router\n%v\nserve\n%v", what, got.LPs, want.LPs)
			}
			if got.Finish != want.Finish || got.Usage != want.Usage {
				t.Errorf("%s: finish %q usage %s through the router; serve finish %q usage %s", what, got.Finish, got.Usage, want.Finish, want.Usage)
			}
		}
	}
}
