package synth

import (
	"fmt"

	"tandem/internal/engine/gguf"
	"tandem/internal/engine/tensor"
)

// gpt-oss (Config.Arch "gpt-oss"), laid out as llama.cpp's loader for
// LLM_ARCH_OPENAI_MOE expects: per block attn_norm; attn_q, attn_k, attn_v
// and attn_output, each with its bias; attn_sinks [heads] (F32, uniform
// ±sinkScale, so the sinks take a visible share of the attention);
// post_attention_norm (the pre-FFN norm); the F32 router ffn_gate_inp and
// its bias; the experts ffn_{gate,up,down}_exps and their biases [width,
// experts] (gate and up biases uniform ±expertBiasScale, wide enough that
// the activation's clamps at ±7 engage); output_norm and a required
// output. Keys: the expert keys as qwen3moe's (defaults 8 experts, 4 used,
// width FF/2), attention.sliding_window (default 128, the real files'
// window; the even layers are windowed), and YaRN scaling as the real
// files have it: rope.scaling.type yarn, factor 32 and
// original_context_length (the context length here, so a small context
// still rotates with YaRN's mixed angles).

// The oss20b preset: gpt-oss-20b's block (2880 wide, 64 query heads and 8
// KV heads of 64, RoPE base 150000, 32 experts of width 2880 of which 4
// used, window 128) with 4 layers instead of 24 and a 32000-token
// vocabulary: about 0.3B active parameters of 3.3B, 1.8 GB as mxfp4. A
// speed fixture of the real shape (its attention width, 4096, differs
// from its embedding width).
func init() {
	presets["oss20b"] = Config{Name: "tandem-synth-oss20b", Arch: gptossArch, Dim: 2880, Layers: 4, Heads: 64, KVHeads: 8, KeyLength: 64,
		FF: 2880, Vocab: 32000, Context: 4096, RopeBase: 150000, Experts: 32, ExpertsUsed: 4, ExpertFF: 2880, SlidingWindow: 128}
}

// gptossArch is gpt-oss's general.architecture.
const gptossArch = "gpt-oss"

// gptossYarnFactor is the real files' rope.scaling.factor.
const gptossYarnFactor = 32

// Scales of the synthesized sinks and expert gate/up biases, and the gain
// of the pre-FFN norm: it makes the experts' gate and up values spread
// about ±6, so that the activation's clamps at ±7 engage on some of them,
// depending on the input.
const (
	sinkScale       = 2
	expertBiasScale = 1
	ffnGain         = 20
)

// gptossDefaults fills gpt-oss's zero fields: 4 experts used (of the
// default 8) and a sliding window of 128.
func (c Config) gptossDefaults() Config {
	if c.Arch != gptossArch {
		return c
	}
	if c.ExpertsUsed == 0 {
		c.ExpertsUsed = 4
	}
	if c.SlidingWindow == 0 {
		c.SlidingWindow = 128
	}
	return c
}

// setGptOssKeys writes gpt-oss's YaRN keys.
func setGptOssKeys(w *gguf.Writer, c Config) {
	if c.Arch != gptossArch {
		return
	}
	a := c.Arch + "."
	w.SetString(a+"rope.scaling.type", "yarn")
	w.SetFloat32(a+"rope.scaling.factor", gptossYarnFactor)
	w.SetUint32(a+"rope.scaling.original_context_length", uint32(c.Context))
}

// gptossLayout is layout for gpt-oss.
func gptossLayout(c Config, typ tensor.Type, pure bool, vocab int) []tensorSpec {
	hd := uint64(c.HeadDim())
	dim, kv, qd := uint64(c.Dim), uint64(c.KVHeads)*hd, uint64(c.Heads)*hd
	eff, ne := uint64(c.ExpertFF), uint64(c.Experts)
	layer := -1
	mat := func(name string, cat category, dims ...uint64) tensorSpec {
		return tensorSpec{name: name, dims: dims, typ: matrixType(typ, pure, cat, layer, c)}
	}
	bias := func(name string, scale float32, dims ...uint64) tensorSpec {
		return tensorSpec{name: name, dims: dims, typ: tensor.F32, bias: true, gain: scale}
	}
	norm := func(name string) tensorSpec {
		return tensorSpec{name: name, dims: []uint64{dim}, typ: tensor.F32, norm: true, jitter: true}
	}
	specs := []tensorSpec{mat("token_embd.weight", catTokenEmbd, dim, uint64(vocab))}
	for l := range c.Layers {
		layer = l
		p := fmt.Sprintf("blk.%d.", l)
		an := norm(p + "attn_norm.weight")
		an.gain = c.AttnGain
		ffnNorm := norm(p + "post_attention_norm.weight")
		ffnNorm.gain = ffnGain
		specs = append(specs, an,
			mat(p+"attn_q.weight", catAttnQ, dim, qd), bias(p+"attn_q.bias", biasScale, qd),
			mat(p+"attn_k.weight", catAttnK, dim, kv), bias(p+"attn_k.bias", biasScale, kv),
			mat(p+"attn_v.weight", catAttnV, dim, kv), bias(p+"attn_v.bias", biasScale, kv),
			mat(p+"attn_output.weight", catAttnOut, qd, dim), bias(p+"attn_output.bias", biasScale, dim),
			bias(p+"attn_sinks.weight", sinkScale, uint64(c.Heads)),
			ffnNorm,
			mat(p+"ffn_gate_inp.weight", catRouter, dim, ne), bias(p+"ffn_gate_inp.bias", biasScale, ne),
			mat(p+"ffn_gate_exps.weight", catFFNGate, dim, eff, ne), bias(p+"ffn_gate_exps.bias", expertBiasScale, eff, ne),
			mat(p+"ffn_up_exps.weight", catFFNUp, dim, eff, ne), bias(p+"ffn_up_exps.bias", expertBiasScale, eff, ne),
			mat(p+"ffn_down_exps.weight", catFFNDown, eff, dim, ne), bias(p+"ffn_down_exps.bias", biasScale, dim, ne))
	}
	layer = -1
	return append(specs, norm("output_norm.weight"), mat("output.weight", catOutput, dim, uint64(vocab)))
}

// checkGptOss reports the first problem of a gpt-oss Config.
func (c Config) checkGptOss() error {
	if c.Arch != gptossArch {
		return nil
	}
	if c.Tied {
		return fmt.Errorf("gpt-oss files always have output.weight (llama.cpp requires it): --tied does not apply")
	}
	return nil
}
