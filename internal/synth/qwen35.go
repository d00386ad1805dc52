package synth

import (
	"fmt"

	"tandem/internal/engine/gguf"
	"tandem/internal/engine/tensor"
)

// The hybrid architectures qwen35 and qwen35moe (Qwen3.5/3.6): of every
// FullAttnInterval layers the last is a gated full-attention layer and the
// others Gated DeltaNet layers, as llama.cpp's loader lays them out.
//
// A full-attention layer: attn_q [dim, 2·heads·head_dim] (per head the
// query then its gate), attn_k, attn_v, attn_q_norm and attn_k_norm
// [head_dim], attn_output. A DeltaNet layer: attn_qkv [dim, channels]
// (channels = (2·k_heads + v_heads)·ssm_head_dim), attn_gate [dim,
// v_heads·ssm_head_dim], ssm_conv1d [conv, channels], ssm_dt.bias and
// ssm_a [v_heads], ssm_beta and ssm_alpha [dim, v_heads], ssm_norm
// [ssm_head_dim], ssm_out [v_heads·ssm_head_dim, dim]. Every layer has
// attn_norm and post_attention_norm (the feed-forward's input norm) and a
// dense SwiGLU (qwen35) or qwen2moe-style experts with a shared expert
// (qwen35moe). ssm_conv1d, ssm_dt, ssm_a, ssm_beta and ssm_alpha are F32.
// Keys: {arch}.ssm.conv_kernel, ssm.state_size, ssm.group_count,
// ssm.time_step_rank, ssm.inner_size, full_attention_interval,
// rope.dimension_count (RopeDims) and rope.dimension_sections (the rotary
// pairs split in three near-equal sections, as Qwen3.5's [11, 11, 10, 0]).
//
// The DeltaNet values are drawn to resemble a trained model's: ssm_a =
// -(1..16), ssm_dt = -6..-2 (softplus ≈ 0.0025..0.13, so the state decays
// slowly), convolution taps ±0.5.

// gdnArch reports whether arch is a hybrid Gated DeltaNet architecture.
func gdnArch(arch string) bool { return arch == "qwen35" || arch == "qwen35moe" }

// gdnDefaults fills the hybrid fields left zero.
func (c Config) gdnDefaults() Config {
	if !gdnArch(c.Arch) {
		return c
	}
	hd := c.HeadDim()
	if c.RopeDims == 0 {
		c.RopeDims = max(2, hd/4/2*2)
	}
	if c.SSMConv == 0 {
		c.SSMConv = 4
	}
	if c.SSMHeadDim == 0 {
		c.SSMHeadDim = hd
	}
	if c.SSMKHeads == 0 {
		c.SSMKHeads = c.KVHeads
	}
	if c.SSMVHeads == 0 {
		c.SSMVHeads = c.Heads
	}
	if c.FullAttnInterval == 0 {
		c.FullAttnInterval = min(4, max(c.Layers, 1))
	}
	return c
}

// checkGDN reports the first problem of the hybrid fields.
func (c Config) checkGDN() error {
	if !gdnArch(c.Arch) {
		if c.RopeDims != 0 || c.SSMConv != 0 || c.SSMHeadDim != 0 || c.SSMKHeads != 0 || c.SSMVHeads != 0 || c.FullAttnInterval != 0 || c.NextN != 0 {
			return fmt.Errorf("the DeltaNet fields are for qwen35 and qwen35moe, not %s", c.Arch)
		}
		return nil
	}
	switch {
	case c.RopeDims < 2 || c.RopeDims > c.HeadDim() || c.RopeDims%2 != 0:
		return fmt.Errorf("rope dims %d: want an even number in 2..%d (the head)", c.RopeDims, c.HeadDim())
	case c.SSMConv < 2 || c.SSMConv > 16:
		return fmt.Errorf("convolution taps %d out of range 2..16", c.SSMConv)
	case c.SSMHeadDim < 1 || c.SSMHeadDim > 1024:
		return fmt.Errorf("DeltaNet head length %d out of range 1..1024", c.SSMHeadDim)
	case c.SSMKHeads < 1 || c.SSMVHeads < 1 || c.SSMVHeads > 1024 || c.SSMVHeads%c.SSMKHeads != 0:
		return fmt.Errorf("DeltaNet heads %d (key) and %d (value): want value heads a multiple of key heads, at most 1024", c.SSMKHeads, c.SSMVHeads)
	case c.FullAttnInterval < 1 || c.FullAttnInterval > c.Layers:
		return fmt.Errorf("full-attention interval %d out of range 1..%d (the layers)", c.FullAttnInterval, c.Layers)
	case c.NextN < 0 || c.NextN > 4:
		return fmt.Errorf("multi-token-prediction blocks %d out of range 0..4", c.NextN)
	}
	return nil
}

// gdnRowWidths returns the row lengths (ne0) of the DeltaNet matrices.
func (c Config) gdnRowWidths() []int {
	if !gdnArch(c.Arch) {
		return nil
	}
	return []int{c.SSMVHeads * c.SSMHeadDim}
}

// recurrent reports whether layer l of a hybrid file is a DeltaNet layer
// (never a multi-token-prediction block, which is full attention).
func (c Config) recurrent(l int) bool {
	return gdnArch(c.Arch) && l < c.Layers && (l+1)%c.FullAttnInterval != 0
}

// mtpBlock returns the tensors of multi-token-prediction block l (after
// the Layers blocks, named blk.l.): a full-attention block as the trunk's,
// plus nextn.eh_proj [2·dim, dim], nextn.enorm and nextn.hnorm, as
// llama.cpp's qwen35 loader reads them.
func mtpBlock(c Config, l int, mat func(string, category, ...uint64) tensorSpec, normN func(string, uint64) tensorSpec, vec func(string, uint64) tensorSpec) []tensorSpec {
	p := fmt.Sprintf("blk.%d.", l)
	dim, ff := uint64(c.Dim), uint64(c.FF)
	specs := []tensorSpec{normN(p+"attn_norm.weight", dim)}
	specs = append(specs, gdnAttention(c, l, p, mat, normN)...) // full attention: l >= Layers
	specs = append(specs, normN(p+"post_attention_norm.weight", dim))
	if moeArch(c.Arch) {
		specs = append(specs, moeFFN(c, p, mat, vec)...)
	} else {
		specs = append(specs, mat(p+"ffn_gate.weight", catFFNGate, dim, ff), mat(p+"ffn_up.weight", catFFNUp, dim, ff), mat(p+"ffn_down.weight", catFFNDown, ff, dim))
	}
	return append(specs,
		mat(p+"nextn.eh_proj.weight", catAttnOut, 2*dim, dim),
		normN(p+"nextn.enorm.weight", dim),
		normN(p+"nextn.hnorm.weight", dim))
}

// setGDNKeys writes the hybrid keys.
func setGDNKeys(w *gguf.Writer, c Config) {
	if !gdnArch(c.Arch) {
		return
	}
	a := c.Arch + "."
	w.SetUint32(a+"ssm.conv_kernel", uint32(c.SSMConv))
	w.SetUint32(a+"ssm.state_size", uint32(c.SSMHeadDim))
	w.SetUint32(a+"ssm.group_count", uint32(c.SSMKHeads))
	w.SetUint32(a+"ssm.time_step_rank", uint32(c.SSMVHeads))
	w.SetUint32(a+"ssm.inner_size", uint32(c.SSMVHeads*c.SSMHeadDim))
	w.SetUint32(a+"full_attention_interval", uint32(c.FullAttnInterval))
	if c.NextN > 0 {
		w.SetUint32(a+"nextn_predict_layers", uint32(c.NextN))
	}
	w.SetUint32(a+"rope.dimension_count", uint32(c.RopeDims))
	pairs := c.RopeDims / 2
	s0, s1 := pairs/3, pairs/3
	if pairs%3 > 0 {
		s0++
	}
	if pairs%3 > 1 {
		s1++
	}
	w.SetInt32s(a+"rope.dimension_sections", []int32{int32(s0), int32(s1), int32(pairs / 3), 0})
}

// gdnAttention returns the attention-part tensors of hybrid block prefix p
// (layer l): a DeltaNet's or a gated full attention's.
func gdnAttention(c Config, l int, p string, mat func(string, category, ...uint64) tensorSpec, normN func(string, uint64) tensorSpec) []tensorSpec {
	dim, hd := uint64(c.Dim), uint64(c.HeadDim())
	if !c.recurrent(l) {
		qd, kv := uint64(c.Heads)*hd, uint64(c.KVHeads)*hd
		return []tensorSpec{
			mat(p+"attn_q.weight", catAttnQ, dim, 2*qd),
			mat(p+"attn_k.weight", catAttnK, dim, kv),
			mat(p+"attn_v.weight", catAttnV, dim, kv),
			normN(p+"attn_q_norm.weight", hd),
			normN(p+"attn_k_norm.weight", hd),
			mat(p+"attn_output.weight", catAttnOut, qd, dim),
		}
	}
	sh, vh := uint64(c.SSMHeadDim), uint64(c.SSMVHeads)
	inner, ch := vh*sh, (2*uint64(c.SSMKHeads)+vh)*sh
	rng := func(name string, lo, hi float32, dims ...uint64) tensorSpec {
		return tensorSpec{name: name, dims: dims, typ: tensor.F32, lo: lo, hi: hi}
	}
	return []tensorSpec{
		mat(p+"attn_qkv.weight", catAttnV, dim, ch),
		mat(p+"attn_gate.weight", catAttnQ, dim, inner),
		rng(p+"ssm_conv1d.weight", -0.5, 0.5, uint64(c.SSMConv), ch),
		rng(p+"ssm_dt.bias", -6, -2, vh),
		rng(p+"ssm_a", -16, -1, vh),
		mat(p+"ssm_beta.weight", catRouter, dim, vh),
		mat(p+"ssm_alpha.weight", catRouter, dim, vh),
		normN(p+"ssm_norm.weight", sh),
		mat(p+"ssm_out.weight", catAttnOut, inner, dim),
	}
}
