package synth

import (
	"encoding/binary"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"tandem/internal/engine/gguf"
	"tandem/internal/engine/tensor"
)

// TestArchLayouts: each architecture's file has the keys and the tensors
// (names and shapes) llama.cpp's loader for it expects, and nothing else.
func TestArchLayouts(t *testing.T) {
	for _, tc := range []struct {
		arch     string
		set      func(c *Config)
		has      map[string][]uint64
		lacks    []string
		keys     []string
		jittered bool
	}{
		{arch: "llama", set: func(c *Config) { c.Llama3Rope, c.RopeBase = true, 500000 },
			has:   map[string][]uint64{"rope_freqs.weight": {32}, "output.weight": {256, 512}, "blk.1.ffn_gate.weight": {256, 512}},
			lacks: []string{"blk.0.attn_q_norm.weight"}, keys: []string{"llama.rope.freq_base"}},
		{arch: "qwen3", set: func(c *Config) { c.Tied, c.KeyLength = true, 128 },
			has: map[string][]uint64{"blk.0.attn_q_norm.weight": {128}, "blk.0.attn_k_norm.weight": {128},
				"blk.0.attn_q.weight": {256, 512}, "blk.0.attn_k.weight": {256, 256}, "blk.0.attn_output.weight": {512, 256}},
			lacks: []string{"output.weight"}, keys: []string{"qwen3.attention.key_length", "qwen3.attention.value_length"}, jittered: true},
		{arch: "qwen2", set: func(c *Config) {},
			has:   map[string][]uint64{"blk.0.attn_q.bias": {256}, "blk.1.attn_k.bias": {128}, "blk.1.attn_v.bias": {128}, "blk.0.ffn_gate.weight": {256, 512}},
			lacks: []string{"blk.0.attn_q_norm.weight", "blk.0.ffn_gate_inp.weight"}, keys: []string{"qwen2.rope.freq_base"}, jittered: true},
		{arch: "qwen3moe", set: func(c *Config) { c.Experts, c.ExpertsUsed = 4, 2 },
			has: map[string][]uint64{"blk.0.attn_q_norm.weight": {64}, "blk.0.ffn_gate_inp.weight": {256, 4},
				"blk.1.ffn_gate_exps.weight": {256, 256, 4}, "blk.1.ffn_up_exps.weight": {256, 256, 4}, "blk.1.ffn_down_exps.weight": {256, 256, 4}},
			lacks: []string{"blk.0.ffn_gate.weight", "blk.0.ffn_down.weight", "blk.0.attn_q.bias", "blk.0.ffn_gate_shexp.weight"},
			keys:  []string{"qwen3moe.expert_count", "qwen3moe.expert_used_count", "qwen3moe.expert_feed_forward_length"}, jittered: true},
		{arch: "qwen2moe", set: func(c *Config) { c.ExpertFF, c.SharedFF = 512, 256 },
			has: map[string][]uint64{"blk.0.attn_q.bias": {256}, "blk.0.ffn_gate_exps.weight": {256, 512, 8},
				"blk.0.ffn_down_exps.weight": {512, 256, 8}, "blk.0.ffn_gate_inp_shexp.weight": {256},
				"blk.0.ffn_gate_shexp.weight": {256, 256}, "blk.0.ffn_down_shexp.weight": {256, 256}},
			lacks: []string{"blk.0.ffn_gate.weight", "blk.0.attn_q_norm.weight"},
			keys:  []string{"qwen2moe.expert_shared_feed_forward_length", "qwen2moe.expert_count"}, jittered: true},
		{arch: "phi3", set: func(c *Config) { c.Context, c.RopeOrigContext = 4096, 256 },
			has: map[string][]uint64{"blk.0.attn_qkv.weight": {256, 256 + 2*128}, "blk.0.ffn_up.weight": {256, 1024},
				"rope_factors_long.weight": {32}, "rope_factors_short.weight": {32}},
			lacks: []string{"blk.0.attn_q.weight", "blk.0.ffn_gate.weight"},
			keys:  []string{"phi3.rope.scaling.original_context_length", "phi3.rope.scaling.attn_factor"}, jittered: true},
		{arch: "gemma2", set: func(c *Config) { c.SlidingWindow, c.AttnSoftcap, c.FinalSoftcap = 8, 50, 30 },
			has:   map[string][]uint64{"blk.0.post_attention_norm.weight": {256}, "blk.0.post_ffw_norm.weight": {256}},
			lacks: []string{"output.weight", "blk.0.attn_q_norm.weight"},
			keys:  []string{"gemma2.attention.sliding_window", "gemma2.attn_logit_softcapping", "gemma2.final_logit_softcapping"}, jittered: true},
		{arch: "gemma3", set: func(c *Config) { c.SlidingWindow, c.SlidingWindowPattern = 8, 2 },
			has:  map[string][]uint64{"blk.1.post_ffw_norm.weight": {256}, "blk.1.attn_k_norm.weight": {64}, "output.weight": {256, 512}},
			keys: []string{"gemma3.attention.sliding_window", "gemma3.attention.sliding_window_pattern"}, jittered: true},
	} {
		t.Run(tc.arch, func(t *testing.T) {
			c, _ := Preset("tiny")
			c.Arch = tc.arch
			tc.set(&c)
			p := filepath.Join(t.TempDir(), tc.arch+".gguf")
			if err := Write(p, Options{Config: c, Type: tensor.F16, Seed: 3}); err != nil {
				t.Fatal(err)
			}
			f, err := gguf.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if a, _ := f.String("general.architecture"); a != tc.arch {
				t.Errorf("general.architecture %q", a)
			}
			for _, k := range append(tc.keys, tc.arch+".block_count", tc.arch+".rope.dimension_count") {
				if _, ok := f.Int(k); !ok {
					if _, ok := f.Float32(k); !ok {
						t.Errorf("key %s missing", k)
					}
				}
			}
			for name, dims := range tc.has {
				ti, ok := f.Tensor(name)
				if !ok || !slices.Equal(ti.Dims, dims) {
					t.Errorf("tensor %s: present %v, dims %v, want %v", name, ok, ti, dims)
				}
			}
			for _, name := range tc.lacks {
				if _, ok := f.Tensor(name); ok {
					t.Errorf("tensor %s present", name)
				}
			}
			ti, _ := f.Tensor("blk.0.ffn_norm.weight")
			v0 := math.Float32frombits(binary.LittleEndian.Uint32(ti.Data))
			v1 := math.Float32frombits(binary.LittleEndian.Uint32(ti.Data[4:]))
			if jit := v0 != 1 || v1 != 1; jit != tc.jittered || v0 < 1-normJitter || v0 > 1+normJitter {
				t.Errorf("ffn_norm starts %v %v: jittered %v, want %v", v0, v1, jit, tc.jittered)
			}
		})
	}
}

// TestLlama3Factors: the rope_freqs values follow Llama 3.1's rule: 1 for
// wavelengths under 2048, 8 above 8192, smooth in between.
func TestLlama3Factors(t *testing.T) {
	f := llama3Factors(500000, 128)
	if len(f) != 64 || f[0] != 1 || f[63] != 8 {
		t.Fatalf("factors %v", f)
	}
	for i := 1; i < len(f); i++ {
		if f[i] < f[i-1] {
			t.Fatalf("factors not increasing at %d: %v", i, f)
		}
	}
	if !slices.ContainsFunc(f, func(v float32) bool { return v > 1 && v < 8 }) {
		t.Errorf("no smoothed factor between 1 and 8: %v", f)
	}
}

// TestArchConfigErrors: options that do not fit the architecture are refused.
func TestArchConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		set  func(c *Config)
		want string
	}{
		{func(c *Config) { c.Arch = "mamba" }, `architecture "mamba" cannot be synthesized`},
		{func(c *Config) { c.Arch, c.Llama3Rope = "gemma2", true }, "llama3 rope factors are for llama and qwen3"},
		{func(c *Config) { c.RopeOrigContext = 256 }, "only phi3 files take one"},
		{func(c *Config) { c.Arch, c.KeyLength = "phi3", 128 }, "key length 128"},
		{func(c *Config) { c.AttnGain = -1 }, "attention gain"},
		{func(c *Config) { c.SlidingWindow = -1 }, "sliding window -1"},
		{func(c *Config) { c.Experts = 4 }, "experts (4, 0 used"},
		{func(c *Config) { c.Arch, c.Experts = "qwen3moe", 1 }, "experts 1 out of range"},
		{func(c *Config) { c.Arch, c.ExpertsUsed = "qwen3moe", 9 }, "experts used 9 out of range"},
		{func(c *Config) { c.Arch, c.SharedFF = "qwen3moe", 256 }, "qwen3moe and gpt-oss have none"},
		{func(c *Config) { c.Arch, c.SharedFF = "gpt-oss", 256 }, "gpt-oss have none"},
		{func(c *Config) { c.Arch, c.Tied = "gpt-oss", true }, "gpt-oss files always have output.weight"},
		{func(c *Config) { c.Arch, c.RopeOrigContext = "gpt-oss", 256 }, "only phi3 files take one"},
		{func(c *Config) { c.Arch, c.ExpertFF = "qwen3moe", DimMax+1 }, "expert feed-forward width"},
		{func(c *Config) { c.Gemma4.PerLayer = 64 }, "gemma4 shape fields are for arch gemma4"},
		{func(c *Config) { c.Arch, c.Gemma4.HeadDimSWA = "gemma4", 128 }, "sliding-window head dim 128"},
		{func(c *Config) { c.Arch, c.Gemma4.KVHeadsFull = "gemma4", 3 }, "kv heads 3 must divide"},
		{func(c *Config) { c.Arch, c.SlidingWindowPattern = "gemma4", 1 }, "period 1 out of range"},
		{func(c *Config) { c.Arch, c.Layers, c.Gemma4.SharedKV = "gemma4", 6, 2 }, "llama.cpp's reuse rule"},
		{func(c *Config) { c.Arch, c.Layers, c.Gemma4.SharedKV = "gemma4", 6, 5 }, "shared KV layers 5 out of range"},
		{func(c *Config) { c.Arch, c.Gemma4.PerLayer = "gemma4", -1 }, "per-layer embedding width -1"},
	} {
		c, _ := Preset("tiny")
		tc.set(&c)
		err := Write(filepath.Join(t.TempDir(), "x.gguf"), Options{Config: c, Type: tensor.F16})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want one containing %q", err, tc.want)
		}
	}
}
