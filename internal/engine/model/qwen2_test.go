package model_test

import (
	"encoding/binary"
	"flag"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"tandem/internal/engine/gguf"
	"tandem/internal/engine/kernels"
	"tandem/internal/engine/model"
	"tandem/internal/engine/tensor"
	"tandem/internal/fixture"
)

var qwen2Out = flag.String("qwen2-out", "", "write the synthesized qwen2 test model to this path (to run llama.cpp on it by hand)")

// writeQwen2 turns the synthesized tiny llama model into a qwen2 one: the
// arch keys renamed, and random biases on Q, K and V. Everything is
// deterministic, so llama.cpp's greedy output for it can be recorded once.
func writeQwen2(t *testing.T, path string) {
	t.Helper()
	src, err := gguf.Open(fixture.TinyPath(t, tensor.F32, 11))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	w := gguf.NewWriter()
	for _, kv := range src.KV {
		key := kv.Key
		switch {
		case key == "general.architecture":
			w.SetString(key, "qwen2")
			continue
		case key == "general.alignment":
			continue
		case strings.HasPrefix(key, "llama."):
			key = "qwen2." + strings.TrimPrefix(key, "llama.")
		}
		w.Set(key, kv.Value)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, ti := range src.Tensors {
		if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, ti.Data); err != nil {
			t.Fatal(err)
		}
		for _, qkv := range []string{"q", "k", "v"} {
			if strings.HasSuffix(ti.Name, ".attn_"+qkv+".weight") {
				n := ti.Dims[1]
				b := make([]byte, 4*n)
				for i := range n {
					binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(rng.NormFloat64()*0.5)))
				}
				if err := w.AddTensor(strings.TrimSuffix(ti.Name, "weight")+"bias", tensor.F32, []uint64{n}, b); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
}

// qwen2Greedy holds llama.cpp's greedy ids for the model writeQwen2 makes,
// prompt "Once upon a time" (node-llama-cpp 3.21.1, 1 thread, F16 KV,
// shared/tools/llamacpp-greedy.mjs), recorded by hand with -qwen2-out.
var qwen2Greedy = struct{ prompt, ids []int32 }{
	prompt: []int32{1, 304, 308, 294, 311},
	ids:    []int32{432, 432, 373, 373, 373, 272, 272, 272, 272, 272, 272, 272, 272, 272, 272, 272},
}

func TestQwen2MatchesLlamaCpp(t *testing.T) {
	path := filepath.Join(t.TempDir(), "qwen2.gguf")
	if *qwen2Out != "" {
		path = *qwen2Out
	}
	writeQwen2(t, path)
	m, err := model.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Config.Arch != "qwen2" || m.Config.RopeStyle != model.RopeNeox || m.Layers[0].QBias == nil {
		t.Fatalf("loaded %+v: want qwen2 with half-split rope and Q/K/V biases", m.Config)
	}
	pool := kernels.NewPool(1)
	defer pool.Close()
	r := model.NewRunner(m, pool)
	ids := m.Tokenizer.Encode("Once upon a time", true, true)
	got := greedy(t, r, newCache(t, m, 16, 8, tensor.F16), ids, 16)
	t.Logf("prompt %v greedy %v", ids, got)
	if !slices.Equal(ids, qwen2Greedy.prompt) || !slices.Equal(got, qwen2Greedy.ids) {
		t.Errorf("qwen2 greedy: prompt %v ids %v, llama.cpp %v %v", ids, got, qwen2Greedy.prompt, qwen2Greedy.ids)
	}
}

// TestQwen2FixtureDiscriminates: the llama model the qwen2 fixture is made
// from generates something else, so the qwen2 test really exercises the
// half-split RoPE and the biases.
func TestQwen2FixtureDiscriminates(t *testing.T) {
	m := fixture.Tiny(t, tensor.F32, 11)
	pool := kernels.NewPool(1)
	defer pool.Close()
	got := greedy(t, model.NewRunner(m, pool), newCache(t, m, 16, 8, tensor.F16), qwen2Greedy.prompt, 16)
	if slices.Equal(got, qwen2Greedy.ids) {
		t.Errorf("the llama original generates the qwen2 fixture's ids %v: the qwen2 test would not notice a missing bias or rope style", got)
	}
}
