package synth

import (
	"path/filepath"
	"slices"
	"testing"

	"tandem/internal/engine/gguf"
	"tandem/internal/engine/tensor"
)

// TestGptOssLayout: a gpt-oss file holds the tensors and keys llama.cpp's
// LLM_ARCH_OPENAI_MOE loader requires, MXFP4 experts in an mxfp4 file
// with F32 biases, sinks and router, and Q8_0 elsewhere.
func TestGptOssLayout(t *testing.T) {
	c, _ := Preset("tiny")
	c.Arch = "gpt-oss"
	p := filepath.Join(t.TempDir(), "g.gguf")
	if err := Write(p, Options{Config: c, Type: tensor.MXFP4, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for name, want := range map[string]struct {
		dims []uint64
		typ  tensor.Type
	}{
		"blk.0.attn_q.weight":              {[]uint64{256, 256}, tensor.Q8_0},
		"blk.0.attn_q.bias":                {[]uint64{256}, tensor.F32},
		"blk.0.attn_k.bias":                {[]uint64{128}, tensor.F32},
		"blk.0.attn_v.bias":                {[]uint64{128}, tensor.F32},
		"blk.0.attn_output.bias":           {[]uint64{256}, tensor.F32},
		"blk.1.attn_sinks.weight":          {[]uint64{4}, tensor.F32},
		"blk.1.post_attention_norm.weight": {[]uint64{256}, tensor.F32},
		"blk.1.ffn_gate_inp.weight":        {[]uint64{256, 8}, tensor.F32},
		"blk.1.ffn_gate_inp.bias":          {[]uint64{8}, tensor.F32},
		"blk.1.ffn_gate_exps.weight":       {[]uint64{256, 256, 8}, tensor.MXFP4},
		"blk.1.ffn_gate_exps.bias":         {[]uint64{256, 8}, tensor.F32},
		"blk.1.ffn_up_exps.bias":           {[]uint64{256, 8}, tensor.F32},
		"blk.1.ffn_down_exps.weight":       {[]uint64{256, 256, 8}, tensor.MXFP4},
		"blk.1.ffn_down_exps.bias":         {[]uint64{256, 8}, tensor.F32},
		"output.weight":                    {[]uint64{256, 512}, tensor.Q8_0},
	} {
		ti, ok := f.Tensor(name)
		if !ok || !slices.Equal(ti.Dims, want.dims) || ti.Type != want.typ {
			t.Errorf("tensor %s: present %v, %v, want %v %s", name, ok, ti, want.dims, want.typ)
		}
	}
	for _, name := range []string{"blk.0.ffn_norm.weight", "blk.0.ffn_gate.weight", "blk.0.attn_q_norm.weight"} {
		if _, ok := f.Tensor(name); ok {
			t.Errorf("tensor %s present", name)
		}
	}
	if typ, _ := f.String("gpt-oss.rope.scaling.type"); typ != "yarn" {
		t.Errorf("rope.scaling.type %q, want yarn", typ)
	}
	for k, want := range map[string]int{"gpt-oss.expert_count": 8, "gpt-oss.expert_used_count": 4, "gpt-oss.expert_feed_forward_length": 256,
		"gpt-oss.attention.sliding_window": 128, "gpt-oss.rope.scaling.original_context_length": 2048} {
		if v, ok := f.Int(k); !ok || v != want {
			t.Errorf("%s = %d (present %v), want %d", k, v, ok, want)
		}
	}
	if v, _ := f.Float32("gpt-oss.rope.scaling.factor"); v != 32 {
		t.Errorf("rope.scaling.factor %v, want 32", v)
	}
}
