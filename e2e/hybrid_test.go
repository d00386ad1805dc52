package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// The hybrid files the test synthesizes: the tiny preset (4 query and 2 KV
// heads of 64) with 8 blocks, of which every fourth is full attention (2
// keep KV pages) and the other 6 are Gated DeltaNet layers with recurrent
// state: the last 3 inputs of a 4-tap convolution over the query and key
// channels (2 heads of 64 each) and the value channels (4 heads of 64), 512
// in all, and a 64 x 64 matrix per value head.
const (
	hybridLayers    = 8
	hybridKVLayers  = 2
	hybridKVHeads   = 2
	hybridHeadDim   = 64
	hybridPageBytes = 16 * hybridKVHeads * hybridHeadDim * 2 // --page-tokens 16, --kv-type f16
	hybridGDNLayers = hybridLayers - hybridKVLayers
	hybridStateB    = hybridGDNLayers * 4 * ((4-1)*(2*2*64+4*64) + 4*64*64) // float32s
)

// hybridBytes is what one room moves for a prompt of n tokens: the
// full-attention layers' K and V pages, then the state.
func hybridBytes(n int) int64 {
	pages := (n + 15) / 16
	return int64(pages)*hybridKVLayers*2*hybridPageBytes + hybridStateB
}

// TestPDHybridMatchesServe: on synthesized qwen35 and qwen35moe files
// (recurrent state in 6 of 8 layers), greedy output through `tandem up` is
// token for token and logprob for logprob what `tandem serve` gives,
// streaming and not, with KV over TCP and through shared memory; every
// request's room moved exactly the full-attention pages and the state the
// shape computes.
func TestPDHybridMatchesServe(t *testing.T) {
	setup(t)
	for _, arch := range []string{"qwen35", "qwen35moe"} {
		t.Run(arch, func(t *testing.T) {
			model := filepath.Join(t.TempDir(), arch+".gguf")
			runTandem(t, 2*time.Minute, "model", "synth", "--arch", arch, "--layers", fmt.Sprint(hybridLayers), "-o", model)
			serve := startServe(t, model)
			want := map[string]completion{}
			for pname, p := range prompts() {
				for _, stream := range []bool{false, true} {
					want[fmt.Sprint(pname, stream)] = complete(t, serve, p, stream)
				}
			}
			for _, kv := range []string{"tcp", "shm"} {
				t.Run(kv, func(t *testing.T) {
					up := startUp(t, model, "--worker-arg=--kv-transport="+kv)
					var wantBytes []int64
					for pname, p := range prompts() {
						for _, stream := range []bool{false, true} {
							w := want[fmt.Sprint(pname, stream)]
							what := fmt.Sprintf("%s prompt, stream=%v", pname, stream)
							sameCompletion(t, what, complete(t, up, p, stream), w)
							var u struct {
								PromptTokens int `json:"prompt_tokens"`
							}
							if err := json.Unmarshal([]byte(w.Usage), &u); err != nil || u.PromptTokens == 0 {
								t.Fatalf("%s: usage %q: %v", what, w.Usage, err)
							}
							wantBytes = append(wantBytes, hybridBytes(u.PromptTokens))
						}
					}
					gotBytes := decodeRoomBytes(t, up)
					slices.Sort(wantBytes)
					slices.Sort(gotBytes)
					if !slices.Equal(gotBytes, wantBytes) {
						t.Errorf("bytes each room moved %v, want %v (pages x %d layers x K,V x %d bytes + %d bytes of state)",
							gotBytes, wantBytes, hybridKVLayers, hybridPageBytes, hybridStateB)
					}
					t.Logf("%s over %s: rooms moved %v bytes (%d of them state)", arch, kv, gotBytes, hybridStateB)
				})
			}
		})
	}
}

// decodeRoomBytes returns the bytes each succeeded room on the cluster's
// decode workers received, read from their /debug/rooms.
func decodeRoomBytes(t *testing.T, router string) []int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := &http.Client{Timeout: 10 * time.Second}
	doc, err := roomTable(ctx, c, router)
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, w := range doc.Workers {
		wd, err := roomTable(ctx, c, w.URL)
		if err != nil {
			t.Fatal(err)
		}
		if wd.Role != "decode" {
			continue
		}
		for _, r := range wd.Rooms {
			if r.State != "succeeded" {
				t.Errorf("decode room %s is %s (%s)", r.ID, r.State, r.Reason)
				continue
			}
			out = append(out, r.Bytes)
		}
	}
	return out
}
