package synth

import (
	"fmt"
	"math/rand/v2"

	"tandem/internal/engine/gguf"
)

// The mixture-of-experts architectures and qwen2 (Config.Arch "qwen2",
// "qwen3moe", "qwen2moe"), kept apart from the dense layouts of synth.go.
//
// qwen2 is llama with NEOX RoPE and required Q/K/V biases. qwen3moe is
// qwen3 (Q/K norms) whose every feed-forward block is a mixture of
// experts: a router ffn_gate_inp [dim, experts] (F32, as llama-quantize
// leaves it) and the experts' matrices stacked in 3-D tensors
// ffn_gate_exps and ffn_up_exps [dim, expert_ff, experts] and
// ffn_down_exps [expert_ff, dim, experts]. qwen2moe is qwen2 (biases) with
// the same experts plus a shared expert ffn_{gate,up,down}_shexp of
// SharedFF rows, gated by sigmoid(ffn_gate_inp_shexp · x) (a [dim] vector).
// The keys are {arch}.expert_count, expert_used_count,
// expert_feed_forward_length and, for qwen2moe,
// expert_shared_feed_forward_length, as llama.cpp's converters write them.

// moeArch reports whether arch is a mixture-of-experts architecture.
func moeArch(arch string) bool {
	return arch == "qwen3moe" || arch == "qwen2moe" || arch == "qwen35moe" || arch == gptossArch
}

// sharedExpertArch reports whether arch's experts include a shared one.
func sharedExpertArch(arch string) bool { return arch == "qwen2moe" || arch == "qwen35moe" }

// biasArch reports whether arch requires attention Q/K/V biases.
func biasArch(arch string) bool { return arch == "qwen2" || arch == "qwen2moe" }

// qkNormArch reports whether arch has per-head Q/K norms.
func qkNormArch(arch string) bool {
	return arch == "qwen3" || arch == "qwen3moe" || arch == "gemma3" || gdnArch(arch)
}

// moeDefaults fills the expert fields left zero for a MoE architecture: 8
// experts, 2 used, ExpertFF half of FF, and (qwen2moe) SharedFF = FF.
func (c Config) moeDefaults() Config {
	if !moeArch(c.Arch) {
		return c
	}
	if c.Experts == 0 {
		c.Experts = 8
	}
	if c.ExpertsUsed == 0 {
		c.ExpertsUsed = min(2, c.Experts)
	}
	if c.ExpertFF == 0 {
		c.ExpertFF = c.FF / 2
	}
	if sharedExpertArch(c.Arch) && c.SharedFF == 0 {
		c.SharedFF = c.FF
	}
	return c
}

// ExpertsMax bounds Config.Experts (llama.cpp's LLAMA_MAX_EXPERTS is 512).
const ExpertsMax = 512

// checkMoE reports the first problem of the expert fields.
func (c Config) checkMoE() error {
	if c.Arch == "gemma4" && c.Experts == 0 && c.ExpertsUsed == 0 && c.ExpertFF == 0 && c.SharedFF == 0 {
		return nil // a dense gemma4
	}
	if !moeArch(c.Arch) && c.Arch != "gemma4" {
		if c.Experts != 0 || c.ExpertsUsed != 0 || c.ExpertFF != 0 || c.SharedFF != 0 {
			return fmt.Errorf("experts (%d, %d used, width %d, shared %d) are for the mixture-of-experts architectures qwen3moe, qwen2moe and gpt-oss, not %s",
				c.Experts, c.ExpertsUsed, c.ExpertFF, c.SharedFF, c.Arch)
		}
		return nil
	}
	if c.Experts < 2 || c.Experts > ExpertsMax {
		return fmt.Errorf("experts %d out of range: want 2..%d", c.Experts, ExpertsMax)
	}
	if c.ExpertsUsed < 1 || c.ExpertsUsed > c.Experts {
		return fmt.Errorf("experts used %d out of range: want 1..%d (the expert count)", c.ExpertsUsed, c.Experts)
	}
	if c.ExpertFF < 1 || c.ExpertFF > DimMax {
		return fmt.Errorf("expert feed-forward width %d out of range: want 1..%d", c.ExpertFF, DimMax)
	}
	if c.SharedFF < 0 || c.SharedFF > DimMax || (c.SharedFF > 0) != sharedExpertArch(c.Arch) {
		return fmt.Errorf("shared expert width %d: qwen2moe and qwen35moe need one in 1..%d, qwen3moe and gpt-oss have none", c.SharedFF, DimMax)
	}
	return nil
}

// rowWidths returns the row lengths (ne0) of the expert matrices.
func (c Config) moeRowWidths() []int {
	if !moeArch(c.Arch) {
		return nil
	}
	w := []int{c.ExpertFF}
	if c.SharedFF > 0 {
		w = append(w, c.SharedFF)
	}
	return w
}

// setMoEKeys writes the expert keys.
func setMoEKeys(w *gguf.Writer, c Config) {
	if !moeArch(c.Arch) {
		return
	}
	a := c.Arch + "."
	w.SetUint32(a+"expert_count", uint32(c.Experts))
	w.SetUint32(a+"expert_used_count", uint32(c.ExpertsUsed))
	w.SetUint32(a+"expert_feed_forward_length", uint32(c.ExpertFF))
	if c.SharedFF > 0 {
		w.SetUint32(a+"expert_shared_feed_forward_length", uint32(c.SharedFF))
	}
}

// moeFFN returns the feed-forward tensors of block prefix p of a MoE
// file, made with mat (matrices of the file's mix) and vec (1-D random
// F32 weights).
func moeFFN(c Config, p string, mat func(string, category, ...uint64) tensorSpec, vec func(string, uint64) tensorSpec) []tensorSpec {
	dim, eff, n := uint64(c.Dim), uint64(c.ExpertFF), uint64(c.Experts)
	specs := []tensorSpec{
		mat(p+"ffn_gate_inp.weight", catRouter, dim, n),
		mat(p+"ffn_gate_exps.weight", catFFNGate, dim, eff, n),
		mat(p+"ffn_up_exps.weight", catFFNUp, dim, eff, n),
		mat(p+"ffn_down_exps.weight", catFFNDown, eff, dim, n),
	}
	if c.SharedFF > 0 {
		sff := uint64(c.SharedFF)
		specs = append(specs,
			vec(p+"ffn_gate_inp_shexp.weight", dim),
			mat(p+"ffn_gate_shexp.weight", catFFNGate, dim, sff),
			mat(p+"ffn_up_shexp.weight", catFFNUp, dim, sff),
			mat(p+"ffn_down_shexp.weight", catFFNDown, sff, dim))
	}
	return specs
}

// biasValues returns n little-endian float32s uniform in ±scale.
func biasValues(n int, scale float32, p *rand.PCG) []byte {
	v := make([]float32, n)
	for i := range v {
		u := float64(p.Uint64()>>11) / (1 << 53)
		v[i] = scale * float32(2*u-1)
	}
	return f32Bytes(v)
}
