package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestSynthHybrid: `tandem model synth --arch qwen35|qwen35moe` writes a
// hybrid file whose `model info` shows the layer mix (three DeltaNet
// layers, then a full-attention one, with 8 layers: DDDADDDA), the KV
// layers and the state bytes per sequence, in text and JSON; generate and
// bench engine run it.
func TestSynthHybrid(t *testing.T) {
	dir := t.TempDir()
	for _, arch := range []string{"qwen35", "qwen35moe"} {
		p := filepath.Join(dir, arch+".gguf")
		run(t, "model", "synth", "--preset", "tiny", "--type", "q8_0", "--arch", arch, "--layers", "8", "-o", p)
		info := run(t, "model", "info", p)
		// tiny: 2 key and 4 value heads of 64, 4 taps over 512 channels:
		// per DeltaNet layer 3·512 + 4·64·64 floats, six layers
		for _, want := range []string{"architecture  " + arch + "\n", "layer mix     6 Gated DeltaNet (D) + 2 full attention (A): DDDADDDA\n",
			"kv cache      2 of 8 layers", "state         430080 bytes per sequence"} {
			if !strings.Contains(info, want) {
				t.Errorf("model info of the %s file lacks %q:\n%s", arch, want, info)
			}
		}
		var j struct {
			RecurrentLayers int    `json:"recurrent_layers"`
			KVLayers        int    `json:"kv_layers"`
			StateBytes      int    `json:"state_bytes"`
			StateLayout     string `json:"state_layout"`
		}
		if err := json.Unmarshal([]byte(run(t, "model", "info", "--format", "json", p)), &j); err != nil {
			t.Fatal(err)
		}
		if j.RecurrentLayers != 6 || j.KVLayers != 2 || j.StateBytes != 430080 || !strings.HasPrefix(j.StateLayout, "gdn1:layers=0.1.2.4.5.6,") {
			t.Errorf("model info --format json of %s: %+v", arch, j)
		}
		// generate and bench engine carry each sequence's state slot
		out := run(t, "generate", "--model", p, "--prompt", "hello world", "--temperature", "0", "--max-tokens", "12", "--format", "json")
		var g struct{ IDs []int32 }
		if err := json.Unmarshal([]byte(out), &g); err != nil || len(g.IDs) != 12 {
			t.Errorf("generate on %s: %q (%v)", arch, out, err)
		}
		out = run(t, "bench", "engine", "--model", p, "--prompt-tokens", "20", "--gen-tokens", "4", "--batch", "2", "--format", "json")
		var b struct {
			DecodeTokS float64 `json:"decode_tok_s"`
		}
		if err := json.Unmarshal([]byte(out), &b); err != nil || b.DecodeTokS <= 0 {
			t.Errorf("bench engine on %s: %q (%v)", arch, out, err)
		}
	}
}
