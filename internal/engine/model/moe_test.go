package model_test

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"tandem/internal/engine/kernels"
	"tandem/internal/engine/model"
	"tandem/internal/engine/tensor"
	"tandem/internal/synth"
)

// TestMoEPrefillEqualsDecode: a mixture-of-experts model gives every
// position the same logits, bit for bit, whether the position runs in one
// multi-token step (tokens grouped by expert, each expert's products a
// batch) or one token at a time (only the chosen experts' rows, in one
// round each for gate|up and down), at 1 and 3 threads. It catches a token
// scattered to the wrong row, a weight given to the wrong expert, or
// outputs summed in another order.
func TestMoEPrefillEqualsDecode(t *testing.T) {
	for _, tc := range []struct {
		name string
		arch string
		typ  tensor.Type
		n, k int
	}{
		{"qwen3moe-q8_0-16x4", "qwen3moe", tensor.Q8_0, 16, 4},
		{"qwen2moe-q4_k-8x2", "qwen2moe", tensor.Q4_K, 8, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _ := synth.Preset("tiny")
			cfg.Arch, cfg.Experts, cfg.ExpertsUsed = tc.arch, tc.n, tc.k
			p := filepath.Join(t.TempDir(), "m.gguf")
			if err := synth.Write(p, synth.Options{Config: cfg, Type: tc.typ, Seed: 9}); err != nil {
				t.Fatal(err)
			}
			m, err := model.Load(p)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			checkPrefillEqualsDecode(t, m)
		})
	}
}

// checkPrefillEqualsDecode checks that m gives every position of
// tilePrompt the same logits, bit for bit, in one multi-token step and one
// token at a time, at 1 and 3 threads.
func checkPrefillEqualsDecode(t *testing.T, m *model.Model) {
	t.Helper()
	ids := m.Tokenizer.Encode(tilePrompt, true, true)
	for _, threads := range []int{1, 3} {
		pool := kernels.NewPool(threads)
		r := model.NewRunner(m, pool)
		all := allLogits(t, r, newCache(t, m, 16, 16, tensor.F16), ids)
		kv := newCache(t, m, 16, 16, tensor.F16)
		pages, err := kv.Alloc(kv.Config().PagesFor(len(ids)))
		if err != nil {
			t.Fatal(err)
		}
		vocab := m.Config.Vocab
		for i, id := range ids {
			out, err := r.Forward(kv, []model.Seq{{Tokens: []int32{id}, Pos: i, Pages: pages}})
			if err != nil {
				t.Fatal(err)
			}
			want := all[i*vocab : (i+1)*vocab]
			for j, v := range out[0] {
				if math.Float32bits(v) != math.Float32bits(want[j]) {
					t.Fatalf("threads %d position %d logit %d: one token at a time %v, in the %d-token step %v", threads, i, j, v, len(ids), want[j])
				}
			}
		}
		kv.Release(pages)
		pool.Close()
	}
}

// TestMoEConfig: the expert keys as llama.cpp reads them, and the files
// Tandem refuses.
func TestMoEConfig(t *testing.T) {
	md := baseMD("qwen3moe")
	md.i["qwen3moe.expert_count"] = 64
	md.i["qwen3moe.expert_used_count"] = 8
	c, err := model.ConfigFromMetadata(md)
	if err != nil {
		t.Fatal(err)
	}
	// no expert_feed_forward_length: FF / used, as llama.cpp's loader
	if mc := c.MoE; mc.Experts != 64 || mc.Used != 8 || mc.FF != 512/8 || !mc.NormWeights || mc.Gating != model.GatingSoftmax || mc.SharedFF != 0 || !c.QKNorm {
		t.Errorf("qwen3moe: %+v (qk norm %v)", mc, c.QKNorm)
	}
	md = baseMD("qwen2moe")
	md.i["qwen2moe.expert_count"] = 60
	md.i["qwen2moe.expert_used_count"] = 4
	md.i["qwen2moe.expert_feed_forward_length"] = 1408
	if c, err = model.ConfigFromMetadata(md); err != nil {
		t.Fatal(err)
	}
	if mc := c.MoE; mc.FF != 1408 || mc.SharedFF != 512 || mc.NormWeights {
		t.Errorf("qwen2moe: %+v", mc)
	}
	for _, bad := range []struct {
		arch string
		set  map[string]int
		want string
	}{
		{"qwen3moe", map[string]int{"expert_count": 8}, "expert_used_count is missing"},
		{"qwen3moe", map[string]int{"expert_count": 8, "expert_used_count": 9}, "expert_used_count = 9 is out of range 1..8"},
		{"qwen3moe", map[string]int{"expert_count": 1000, "expert_used_count": 2}, "expert_count = 1000 is out of range"},
		{"qwen3moe", map[string]int{"expert_used_count": 2}, "expert_count is missing"},
		{"llama", map[string]int{"expert_count": 8, "expert_used_count": 2}, "mixtures of experts of the architectures qwen3moe, qwen2moe, qwen35moe and gpt-oss only"},
	} {
		md := baseMD(bad.arch)
		for k, v := range bad.set {
			md.i[bad.arch+"."+k] = v
		}
		if _, err := model.ConfigFromMetadata(md); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s %v: %v, want %q", bad.arch, bad.set, err, bad.want)
		}
	}
}

// TestLoadInMemoryEqualsLoad: a mixture-of-experts model read into memory
// (LoadInMemory) gives every position the logits the mapped one (Load)
// gives, bit for bit: only where the weights live differs.
func TestLoadInMemoryEqualsLoad(t *testing.T) {
	cfg, _ := synth.Preset("tiny")
	cfg.Arch, cfg.Experts, cfg.ExpertsUsed = "qwen3moe", 8, 2
	p := filepath.Join(t.TempDir(), "m.gguf")
	if err := synth.Write(p, synth.Options{Config: cfg, Type: tensor.Q4_K, Seed: 4}); err != nil {
		t.Fatal(err)
	}
	var logits [2][]float32
	for i, load := range []func(string) (*model.Model, error){model.Load, model.LoadInMemory} {
		m, err := load(p)
		if err != nil {
			t.Fatal(err)
		}
		pool := kernels.NewPool(2)
		logits[i] = allLogits(t, model.NewRunner(m, pool), newCache(t, m, 16, 16, tensor.F16), m.Tokenizer.Encode(tilePrompt, true, true))
		pool.Close()
		m.Close()
	}
	for j, v := range logits[1] {
		if math.Float32bits(v) != math.Float32bits(logits[0][j]) {
			t.Fatalf("logit %d: read into memory %v, mapped %v", j, v, logits[0][j])
		}
	}
}
