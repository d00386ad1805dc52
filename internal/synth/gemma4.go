package synth

import (
	"fmt"

	"tandem/internal/engine/gguf"
	"tandem/internal/engine/tensor"
)

// Gemma 4 (Config.Arch "gemma4"), kept apart from the other layouts.
//
// Layers are sliding-window or full: the last layer of every
// Gemma4Shape.Period is full (written as the bool array
// gemma4.attention.sliding_window_pattern). Full layers have heads of
// HeadDim() values (attention.key_length) and KVHeadsFull KV heads;
// windowed ones heads of HeadDimSWA (key_length_swa) and KVHeads KV heads
// (head_count_kv is then a per-layer array). Full layers rotate RotFull of
// their head ("proportional" RoPE): rope_freqs holds 1 for the rotated
// pairs and 1e30 for the others, as llama.cpp's converter writes it. The
// last SharedKV layers have no K/V of their own (attn_k, attn_v and
// attn_k_norm are left out; attention.shared_kv_layers). With KEqV the full
// layers have no attn_v (V is K's projection). PerLayer > 0 adds the
// per-layer embeddings (per_layer_token_embd, per_layer_model_proj,
// per_layer_proj_norm; per block inp_gate, proj, post_norm), as the small
// (E2B/E4B) models have. Experts > 0 makes every block the 26B-A4B's: the
// dense feed-forward (FF wide) beside a mixture of GeGLU experts, with
// ffn_gate_inp and its .scale, pre_ffw_norm_2, post_ffw_norm_1/_2,
// ffn_{gate,up,down}_exps and the per-expert ffn_down_exps.scale. Each block
// has a layer_output_scale. Every key llama.cpp's gemma4 loader requires is
// written.

// Gemma4Shape is the part of a gemma4 Config the other architectures do
// not have; zero values take the defaults gemma4Defaults gives.
type Gemma4Shape struct {
	// HeadDimSWA is the sliding-window layers' head dimension (0: half of
	// HeadDim()).
	HeadDimSWA int
	// KVHeadsFull is the full layers' KV head count (0: KVHeads/2, at
	// least 1).
	KVHeadsFull int
	// Period: the last layer of every Period layers is full (0: 3, or the
	// layer count when smaller).
	Period int
	// SharedKV is the number of last layers that read earlier layers' K/V.
	SharedKV int
	// PerLayer is the per-layer embedding width (0: none).
	PerLayer int
	// RotFull is the share of a full layer's head that RoPE rotates
	// (0: 0.25, Gemma 4's partial_rotary_factor).
	RotFull float64
	// KEqV leaves attn_v out of the full layers.
	KEqV bool
	// FusedGateUp writes the experts' gate and up as one tensor,
	// ffn_gate_up_exps [dim, 2·ExpertFF, experts] (gate rows first).
	FusedGateUp bool
}

// gemma4Presets are the gemma4 shapes Preset knows.
var gemma4Presets = map[string]Config{
	// g4e: an E2B-like dense model scaled tiny: per-layer embeddings, the
	// last 3 of 6 layers sharing K/V, windowed layers with heads half as
	// wide and twice as many KV heads as the full ones.
	"g4e": {Name: "tandem-synth-g4e", Arch: "gemma4", Dim: 256, Layers: 6, Heads: 4, KVHeads: 2, KeyLength: 64, FF: 512,
		Vocab: 512, Context: 2048, SlidingWindow: 16, FinalSoftcap: 30,
		Gemma4: Gemma4Shape{HeadDimSWA: 32, KVHeadsFull: 1, Period: 3, SharedKV: 3, PerLayer: 64}},
	// g4a4b: the 26B-A4B's block scaled tiny: 5 windowed layers then a
	// full one whose K is its V, a dense feed-forward beside 16 experts of
	// which 4 are used.
	"g4a4b": {Name: "tandem-synth-g4a4b", Arch: "gemma4", Dim: 256, Layers: 6, Heads: 4, KVHeads: 4, KeyLength: 64, FF: 256,
		Vocab: 512, Context: 2048, SlidingWindow: 16, FinalSoftcap: 30, Experts: 16, ExpertsUsed: 4, ExpertFF: 64,
		Gemma4: Gemma4Shape{HeadDimSWA: 32, KVHeadsFull: 1, Period: 6, KEqV: true}},
}

// gemma4Defaults fills a gemma4 Config's zero fields.
func (c Config) gemma4Defaults() Config {
	if c.Arch != "gemma4" {
		return c
	}
	g := &c.Gemma4
	if g.HeadDimSWA == 0 {
		g.HeadDimSWA = c.HeadDim() / 2
	}
	if g.KVHeadsFull == 0 {
		g.KVHeadsFull = max(1, c.KVHeads/2)
	}
	if g.Period == 0 {
		g.Period = c.SlidingWindowPattern
		if g.Period == 0 {
			g.Period = max(2, min(3, c.Layers))
		}
	}
	c.SlidingWindowPattern = 0 // written as gemma4's bool array instead
	if g.RotFull == 0 {
		g.RotFull = 0.25
	}
	if c.SlidingWindow == 0 {
		c.SlidingWindow = 512
	}
	if c.Experts > 0 {
		if c.ExpertsUsed == 0 {
			c.ExpertsUsed = min(2, c.Experts)
		}
		if c.ExpertFF == 0 {
			c.ExpertFF = c.FF / 2
		}
	}
	return c
}

// gemma4Full reports whether layer l is a full-attention layer.
func (c Config) gemma4Full(l int) bool { return l%c.Gemma4.Period == c.Gemma4.Period-1 }

// checkGemma4 reports the first problem of a gemma4 Config's own fields
// and the row widths its matrices need of types.
func (c Config) checkGemma4(types []tensor.Type) error {
	if c.Arch != "gemma4" {
		if c.Gemma4 != (Gemma4Shape{}) {
			return fmt.Errorf("gemma4 shape fields are for arch gemma4, not %s", c.Arch)
		}
		return nil
	}
	g := c.Gemma4
	hd := c.HeadDim()
	switch {
	case g.HeadDimSWA < 2 || g.HeadDimSWA%2 != 0 || g.HeadDimSWA > hd:
		return fmt.Errorf("gemma4: sliding-window head dim %d must be even and in 2..%d (the full layers')", g.HeadDimSWA, hd)
	case g.KVHeadsFull < 1 || c.Heads%g.KVHeadsFull != 0:
		return fmt.Errorf("gemma4: full layers' kv heads %d must divide heads %d", g.KVHeadsFull, c.Heads)
	case g.Period < 2 || g.Period > c.Layers:
		return fmt.Errorf("gemma4: period %d out of range 2..%d (layers): llama.cpp needs a sliding-window layer", g.Period, c.Layers)
	case g.PerLayer < 0 || g.PerLayer > DimMax:
		return fmt.Errorf("gemma4: per-layer embedding width %d out of range 0..%d", g.PerLayer, DimMax)
	case !(g.RotFull > 0 && g.RotFull <= 1):
		return fmt.Errorf("gemma4: full layers' rotated share %v must be in (0, 1]", g.RotFull)
	case g.SharedKV < 0 || g.SharedKV > c.Layers-2:
		return fmt.Errorf("gemma4: shared KV layers %d out of range 0..%d (layers-2)", g.SharedKV, c.Layers-2)
	}
	if g.SharedKV > 0 {
		// llama.cpp's rule: shared full layers read the last KV layer,
		// windowed ones the one before it, which must be of those kinds
		kv := c.Layers - g.SharedKV
		if !c.gemma4Full(kv-1) || c.gemma4Full(kv-2) {
			return fmt.Errorf("gemma4: with %d shared KV layers, layer %d must be full and layer %d windowed (llama.cpp's reuse rule); change the period", g.SharedKV, kv-1, kv-2)
		}
	}
	widths := []int{c.Heads * g.HeadDimSWA}
	if g.PerLayer > 0 {
		widths = append(widths, g.PerLayer)
	}
	if c.Experts > 0 {
		widths = append(widths, c.ExpertFF)
	}
	for _, t := range types {
		for _, n := range widths {
			if _, err := t.RowBytes(n); err != nil {
				return fmt.Errorf("type %s needs rows that are multiples of %d: %w", t, t.BlockSize(), err)
			}
		}
	}
	return nil
}

// setGemma4Keys writes gemma4's keys beyond the common ones.
func setGemma4Keys(w *gguf.Writer, c Config) error {
	if c.Arch != "gemma4" {
		return nil
	}
	g := c.Gemma4
	a := c.Arch + "."
	hd := c.HeadDim()
	w.SetUint32(a+"attention.key_length", uint32(hd))
	w.SetUint32(a+"attention.value_length", uint32(hd))
	w.SetUint32(a+"attention.key_length_swa", uint32(g.HeadDimSWA))
	w.SetUint32(a+"attention.value_length_swa", uint32(g.HeadDimSWA))
	w.SetUint32(a+"rope.dimension_count", uint32(hd))
	w.SetUint32(a+"rope.dimension_count_swa", uint32(g.HeadDimSWA))
	w.SetFloat32(a+"rope.freq_base_swa", 10000)
	w.SetUint32(a+"attention.shared_kv_layers", uint32(g.SharedKV))
	w.SetUint32(a+"embedding_length_per_layer_input", uint32(g.PerLayer))
	pattern := make([]gguf.Value, c.Layers)
	kvh := make([]uint32, c.Layers)
	for l := range c.Layers {
		pattern[l] = gguf.BoolValue(!c.gemma4Full(l))
		kvh[l] = uint32(c.KVHeads)
		if c.gemma4Full(l) {
			kvh[l] = uint32(g.KVHeadsFull)
		}
	}
	pv, err := gguf.ArrayValue(gguf.TypeBool, pattern...)
	if err != nil {
		return err
	}
	w.Set(a+"attention.sliding_window_pattern", pv)
	w.Set(a+"attention.head_count_kv", gguf.Uint32sValue(kvh))
	if c.Experts > 0 {
		w.SetUint32(a+"expert_count", uint32(c.Experts))
		w.SetUint32(a+"expert_used_count", uint32(c.ExpertsUsed))
		w.SetUint32(a+"expert_feed_forward_length", uint32(c.ExpertFF))
	}
	return nil
}

// Conditioning. Random weights with every norm gain ~1 made a chaotic
// network: each sandwich post-norm rescaled its sub-layer's output to RMS
// ~1 before adding it to a residual of RMS ~0.3 (the embedding, 0.02 x
// sqrt(Dim)), so every layer rewrote the residual, and the quantized files
// amplified rounding. With Q8_0 activations (every Q8_0 and Q4_0 product)
// a last-bit difference upstream flips one activation's rounding by a step
// of its block's largest value / 127, which moves that product's output by
// ~2e-3 of its size; the next quantized product of the sub-layer turns
// that into more flips, so a sub-layer's output settles ~1% away whatever
// started it, and each layer carried that into the residual at full size:
// TANDEM_KERNEL_LEVEL generic and avx2 (two float orders) gave residuals
// 2% apart after six layers and top logits 0.10-0.27 apart at the first
// generated step, and llama.cpp with flash attention on and off 0.03-0.50
// apart, parting before the near-tie bound on 17 of 36 (file, prompt)
// pairs (Q8_0 and Q4_0 of g4e and g4a4b, seeds 1-3). Three choices make
// each layer a small correction to the residual (gains ~1 are no trained
// model's; no published gains are copied here, the values are measured):
//
//   - gemma4PostGain: the post-norms' gain, so a sub-layer adds ~1.5% of
//     the embedding's size, and its rounding noise ~1% of that;
//   - layer_output_scale 0.95-0.99 (it scales the whole residual, so lower
//     values shrink the embedding against the layers after it; 0.75-0.95
//     doubled the logit differences), not 1 so that it is applied;
//   - the output matrix in F16 when the layers are quantized, as Google's
//     Gemma 3 QAT Q4_0 files keep their (tied) embedding table: the logits'
//     own product then rounds its input to F16 (2^-11 of each value)
//     rather than Q8_0, whose flips turned a relative residual difference
//     d into logit differences of ~sqrt(d/40) of the logits' spread rather
//     than ~d.
//
// With them the same measures are 0.0004-0.0035 (generic vs avx2) and
// 0.002-0.005 (llama.cpp flash on vs off, no pair parting); without the
// F16 output matrix 0.000-0.020, with it but post-norm gains ~1 0.06-0.36.
// Greedy runs still part from what a bigram model (post-norm gains ~0)
// picks within the first few steps.

// gemma4PostGain is the gain of gemma4's sandwich post-norms.
const gemma4PostGain = 0.005

// gemma4Layout returns a gemma4 file's tensors in file order.
func gemma4Layout(c Config, typ tensor.Type, pure bool, vocab int) []tensorSpec {
	g := c.Gemma4
	dim, ff := uint64(c.Dim), uint64(c.FF)
	layer := -1
	mat := func(name string, cat category, dims ...uint64) tensorSpec {
		return tensorSpec{name: name, dims: dims, typ: matrixType(typ, pure, cat, layer, c)}
	}
	normN := func(name string, n uint64) tensorSpec {
		return tensorSpec{name: name, dims: []uint64{n}, typ: tensor.F32, norm: true, jitter: true}
	}
	norm := func(name string) tensorSpec { return normN(name, dim) }
	// post: a sandwich post-norm (post_attention_norm, post_ffw_norm,
	// post_ffw_norm_1/_2, per-layer post_norm), of gain gemma4PostGain
	post := func(name string) tensorSpec {
		s := normN(name, dim)
		s.gain = gemma4PostGain
		return s
	}
	// the output matrix (output.weight, or token_embd when tied) in F16
	// beside quantized layers (see Conditioning above)
	outMat := func(name string, cat category, dims ...uint64) tensorSpec {
		s := mat(name, cat, dims...)
		if !pure && typ.BlockSize() > 1 {
			s.typ = tensor.F16
		}
		return s
	}
	hdFull := c.HeadDim()
	rot := int(float64(hdFull) * g.RotFull / 2)
	freqs := make([]float32, hdFull/2)
	for i := range freqs {
		freqs[i] = 1
		if i >= rot {
			freqs[i] = 1e30
		}
	}
	P, L := uint64(g.PerLayer), uint64(c.Layers)
	embd := mat("token_embd.weight", catTokenEmbd, dim, uint64(vocab))
	if c.Tied {
		embd = outMat("token_embd.weight", catTokenEmbd, dim, uint64(vocab))
	}
	specs := []tensorSpec{embd,
		{name: "rope_freqs.weight", dims: []uint64{uint64(hdFull / 2)}, typ: tensor.F32, data: freqs}}
	if P > 0 {
		specs = append(specs,
			mat("per_layer_token_embd.weight", catTokenEmbd, P*L, uint64(vocab)),
			mat("per_layer_model_proj.weight", catAttnQ, dim, P*L),
			normN("per_layer_proj_norm.weight", P))
	}
	kvLayers := c.Layers - g.SharedKV
	for l := range c.Layers {
		layer = l
		p := fmt.Sprintf("blk.%d.", l)
		full := c.gemma4Full(l)
		hd, kvh := uint64(g.HeadDimSWA), uint64(c.KVHeads)
		if full {
			hd, kvh = uint64(hdFull), uint64(g.KVHeadsFull)
		}
		qd, kv := uint64(c.Heads)*hd, kvh*hd
		specs = append(specs, norm(p+"attn_norm.weight"), mat(p+"attn_q.weight", catAttnQ, dim, qd))
		if l < kvLayers {
			specs = append(specs, mat(p+"attn_k.weight", catAttnK, dim, kv))
			if !(full && g.KEqV) {
				specs = append(specs, mat(p+"attn_v.weight", catAttnV, dim, kv))
			}
		}
		// Q/K norms of gain 0.35: scores of std ~sqrt(head dim)/8 instead
		// of ~sqrt(head dim), so attention is soft rather than an argmax
		// that the last bits of a product can flip
		qn, kn := normN(p+"attn_q_norm.weight", hd), normN(p+"attn_k_norm.weight", hd)
		qn.gain, kn.gain = 0.35, 0.35
		specs = append(specs, qn)
		if l < kvLayers {
			specs = append(specs, kn)
		}
		specs = append(specs,
			mat(p+"attn_output.weight", catAttnOut, qd, dim),
			post(p+"post_attention_norm.weight"),
			tensorSpec{name: p + "layer_output_scale.weight", dims: []uint64{1}, typ: tensor.F32, data: []float32{float32(0.95 + 0.01*float64(l%5))}},
			norm(p+"ffn_norm.weight"),
			mat(p+"ffn_gate.weight", catFFNGate, dim, ff),
			mat(p+"ffn_up.weight", catFFNUp, dim, ff),
			mat(p+"ffn_down.weight", catFFNDown, ff, dim),
			post(p+"post_ffw_norm.weight"))
		if c.Experts > 0 {
			n, eff := uint64(c.Experts), uint64(c.ExpertFF)
			// the router's input scale x256: its input is the normalized
			// residual / sqrt(Dim), which would leave logits of std ~0.02
			// and every expert about equally likely (a choice the last
			// bits decide); x256 gives them std ~5
			rs := norm(p + "ffn_gate_inp.scale")
			rs.gain = 256
			specs = append(specs,
				mat(p+"ffn_gate_inp.weight", catRouter, dim, n),
				rs,
				norm(p+"pre_ffw_norm_2.weight"),
				post(p+"post_ffw_norm_1.weight"),
				post(p+"post_ffw_norm_2.weight"),
			)
			if g.FusedGateUp {
				specs = append(specs, mat(p+"ffn_gate_up_exps.weight", catFFNGate, dim, 2*eff, n))
			} else {
				specs = append(specs,
					mat(p+"ffn_gate_exps.weight", catFFNGate, dim, eff, n),
					mat(p+"ffn_up_exps.weight", catFFNUp, dim, eff, n))
			}
			specs = append(specs,
				mat(p+"ffn_down_exps.weight", catFFNDown, eff, dim, n),
				normN(p+"ffn_down_exps.scale", n))
		}
		if P > 0 {
			specs = append(specs,
				mat(p+"inp_gate.weight", catFFNGate, dim, P),
				mat(p+"proj.weight", catFFNDown, P, dim),
				post(p+"post_norm.weight"))
		}
	}
	layer = -1
	// output_norm x8: logits of std ~2.5 instead of ~0.3, so greedy runs
	// have fewer near ties and the final soft-cap bends the largest
	on := norm("output_norm.weight")
	on.gain = 8
	specs = append(specs, on)
	if !c.Tied {
		specs = append(specs, outMat("output.weight", catOutput, dim, uint64(vocab)))
	}
	return specs
}
