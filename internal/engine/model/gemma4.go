package model

import (
	"fmt"
	"math"
	"time"

	"tandem/internal/engine/gguf"
	"tandem/internal/engine/kernels"
	"tandem/internal/engine/kvcache"
	"tandem/internal/engine/tensor"
)

// Gemma 4 ("gemma4"), as llama.cpp's loader and graph for it compute it:
//
//   - Sliding-window and full layers ({arch}.attention.sliding_window_pattern,
//     one bool per layer) with their own head dimensions (key_length for the
//     full layers, key_length_swa for the windowed ones), KV head counts
//     (head_count_kv may be a per-layer array), RoPE bases (rope.freq_base,
//     rope.freq_base_swa) and rotated dimensions (rope.dimension_count and
//     _swa). The full layers rotate with the rope_freqs factors, whose huge
//     values leave the unrotated part of a head ("proportional" RoPE with a
//     partial rotary factor) as it is.
//   - Q and K per-head RMS norms with weights, V per-head RMS norm without;
//     no score scaling (the attention scale is 1); no attention soft-cap.
//   - KV shared across layers: the last attention.shared_kv_layers layers
//     compute no K/V and read those of the last KV layer of their kind (the
//     last full layer or the one before it, a windowed one).
//   - Gemma's post-attention and post-feed-forward norms, GeGLU, embeddings
//     scaled by sqrt(Dim), final logit soft-cap (30 unless the file says).
//   - Per-layer embeddings (the small models, embedding_length_per_layer_input
//     P > 0): a second embedding table gives each token P values per layer;
//     with a projection of the token's embedding they make each layer's
//     input, which gates (GELU) a P-wide projection of the layer's output
//     added back to it.
//   - The 26B-A4B mixture of experts: each layer runs a dense feed-forward
//     (the "shared expert") and a mixture of GeGLU experts side by side, each
//     with its own norms; the router reads the RMS-normalized residual
//     scaled by 1/sqrt(Dim) and by ffn_gate_inp.scale; softmax gating over
//     all experts, top-k, weights renormalized; an optional per-expert
//     output scale (ffn_down_exps.scale).
//   - An optional per-layer output scale (layer_output_scale).
//
// KV cache: only the first KVLayers layers keep K/V, so the cache has
// KVLayers layers, cache layer l being model layer l (a shared layer reads
// its source's cache layer). A cache row must hold every KV layer's row:
// CacheKVHeads x CacheHeadDim is the widest (sliding-window layers with a
// narrower row leave the rest unused). The disaggregated path ships the
// cache's layers, so it carries gemma4 unchanged.

// Gemma4Config is gemma4's per-layer geometry.
type Gemma4Config struct {
	// HeadDimSWA and RopeDimSWA are the sliding-window layers' head
	// dimension and rotated dimensions (Config.HeadDim and RopeDim are the
	// full layers').
	HeadDimSWA, RopeDimSWA int
	// KVHeads and FF are per-layer KV head counts and dense feed-forward
	// widths (Config.KVHeads and FF hold their largest).
	KVHeads, FF []int
	// KVLayers is the number of layers that keep K/V: layers 0..KVLayers-1.
	KVLayers int
	// KVSource is, per layer, the layer whose K/V it reads: itself for the
	// first KVLayers, else the last KV layer of its kind.
	KVSource []int
	// PerLayer is the per-layer embedding width P (0: none).
	PerLayer int
	// CacheKVHeads and CacheHeadDim are the KV cache's row shape.
	CacheKVHeads, CacheHeadDim int
}

// cacheShape returns the KV cache's layers (the KV layers: gemma4's layers
// that own KV, or every layer but a hybrid's recurrent ones), KV heads and
// head dimension for this model.
func (c *Config) cacheShape() (layers, kvHeads, headDim int) {
	if g := c.Gemma4; g != nil {
		return g.KVLayers, g.CacheKVHeads, g.CacheHeadDim
	}
	return c.KVLayers(), c.KVHeads, c.HeadDim
}

// layerHeadDim returns layer l's head dimension.
func (c *Config) layerHeadDim(l int) int {
	if c.Gemma4 != nil && c.Window(l) > 0 {
		return c.Gemma4.HeadDimSWA
	}
	return c.HeadDim
}

// gemma4Meta reads a per-layer array key as its largest element where a
// scalar is asked for, so the common reader takes the widest layer.
type gemma4Meta struct{ Metadata }

func (m gemma4Meta) Int(key string) (int, bool) {
	if v, ok := m.Metadata.Int(key); ok {
		return v, true
	}
	a, ok := metaArray(m.Metadata, key)
	if !ok || len(a) == 0 {
		return 0, false
	}
	best := math.MinInt
	for _, e := range a {
		v, ok := e.Int()
		if !ok {
			return 0, false
		}
		best = max(best, v)
	}
	return best, true
}

// metaArray returns the elements of an array key, when md can look values
// up (a *gguf.File can).
func metaArray(md Metadata, key string) ([]gguf.Value, bool) {
	if w, ok := md.(gemma4Meta); ok {
		md = w.Metadata
	}
	lk, ok := md.(interface {
		Lookup(string) (gguf.Value, bool)
	})
	if !ok {
		return nil, false
	}
	v, ok := lk.Lookup(key)
	if !ok || v.Type != gguf.TypeArray {
		return nil, false
	}
	return v.Array()
}

// perLayerInts reads key as either one integer for every layer or an array
// of one per layer, each in lo..hi.
func perLayerInts(md Metadata, key string, layers, lo, hi int) ([]int, error) {
	out := make([]int, layers)
	if a, ok := metaArray(md, key); ok {
		if len(a) != layers {
			return nil, fmt.Errorf("model metadata: %s has %d elements, want one per layer (%d)", key, len(a), layers)
		}
		for i, e := range a {
			v, ok := e.Int()
			if !ok || v < lo || v > hi {
				return nil, fmt.Errorf("model metadata: %s[%d] = %s is out of range %d..%d", key, i, e.Text(), lo, hi)
			}
			out[i] = v
		}
		return out, nil
	}
	v, ok := md.Int(key)
	if !ok {
		return nil, fmt.Errorf("model metadata: %s is missing", key)
	}
	if v < lo || v > hi {
		return nil, fmt.Errorf("model metadata: %s = %d is out of range %d..%d", key, v, lo, hi)
	}
	for i := range out {
		out[i] = v
	}
	return out, nil
}

// gemma4Features reads gemma4's keys as llama.cpp's loader does.
func (c *Config) gemma4Features(md Metadata, req func(string, *int, int) error) error {
	a := c.Arch + "."
	g := &Gemma4Config{}
	c.Gemma4 = g
	c.QKNorm, c.PostNorms, c.Act = true, true, ActGELU
	c.EmbedScale = float32(math.Sqrt(float64(c.Dim)))
	c.QueryScale = 1 // scores are not scaled (f_attention_scale = 1)
	c.FinalSoftcap = 30
	if v, ok := md.Float32(a + "final_logit_softcapping"); ok {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) || v < 0 {
			return fmt.Errorf("model metadata: %sfinal_logit_softcapping = %v must be a finite non-negative number", a, v)
		}
		c.FinalSoftcap = v
	}
	if err := req("attention.sliding_window", &c.SlidingWindow, contextMax); err != nil {
		return err
	}
	// the layer pattern: one bool per layer (or one value for all)
	c.SWALayers = make([]bool, c.Layers)
	key := a + "attention.sliding_window_pattern"
	if arr, ok := metaArray(md, key); ok {
		if len(arr) != c.Layers {
			return fmt.Errorf("model metadata: %s has %d elements, want one per layer (%d)", key, len(arr), c.Layers)
		}
		for l, e := range arr {
			b, ok := e.Bool()
			if !ok {
				v, iok := e.Int()
				if !iok {
					return fmt.Errorf("model metadata: %s[%d] = %s is not a bool", key, l, e.Text())
				}
				b = v != 0
			}
			c.SWALayers[l] = b
		}
	} else {
		v, ok := md.Int(key)
		if !ok {
			return fmt.Errorf("model metadata: %s is missing (want one bool per layer)", key)
		}
		for l := range c.SWALayers {
			c.SWALayers[l] = v != 0
		}
	}
	c.RopeBaseSWA, c.RopeScaleSWA = 10000, 1
	if v, ok := md.Float32(a + "rope.freq_base_swa"); ok {
		if !(v > 0) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("model metadata: %srope.freq_base_swa %v must be positive", a, v)
		}
		c.RopeBaseSWA = v
	}
	if err := req("attention.key_length_swa", &g.HeadDimSWA, dimMax); err != nil {
		return err
	}
	if v, ok := md.Int(a + "attention.value_length_swa"); !ok || v != g.HeadDimSWA {
		return fmt.Errorf("model metadata: %sattention.value_length_swa must be present and equal key_length_swa %d", a, g.HeadDimSWA)
	}
	if _, ok := md.Int(a + "attention.value_length"); !ok {
		return fmt.Errorf("model metadata: %sattention.value_length is missing", a)
	}
	g.RopeDimSWA = g.HeadDimSWA
	if _, ok := md.Int(a + "rope.dimension_count_swa"); ok {
		if err := req("rope.dimension_count_swa", &g.RopeDimSWA, g.HeadDimSWA); err != nil {
			return err
		}
	}
	if g.HeadDimSWA > c.HeadDim {
		return fmt.Errorf("model metadata: sliding-window head dimension %d is wider than the full layers' %d (not supported)", g.HeadDimSWA, c.HeadDim)
	}
	if g.HeadDimSWA%2 != 0 || g.RopeDimSWA%2 != 0 {
		return fmt.Errorf("model metadata: sliding-window head dimension %d and rotated dimensions %d must be even", g.HeadDimSWA, g.RopeDimSWA)
	}
	heads, err := perLayerInts(md, a+"attention.head_count", c.Layers, 1, headsMax)
	if err != nil {
		return err
	}
	for l, h := range heads {
		if h != c.Heads {
			return fmt.Errorf("model metadata: layer %d has %d query heads, layer 0 %d: per-layer query head counts are not supported", l, h, heads[0])
		}
	}
	if g.KVHeads, err = perLayerInts(md, a+"attention.head_count_kv", c.Layers, 1, headsMax); err != nil {
		if _, ok := md.Int(a + "attention.head_count_kv"); ok {
			return err
		}
		g.KVHeads = make([]int, c.Layers) // absent: as many as the query heads
		for l := range g.KVHeads {
			g.KVHeads[l] = c.Heads
		}
	}
	for l, h := range g.KVHeads {
		if c.Heads%h != 0 {
			return fmt.Errorf("model metadata: layer %d: head_count %d is not a multiple of head_count_kv %d", l, c.Heads, h)
		}
	}
	if g.FF, err = perLayerInts(md, a+"feed_forward_length", c.Layers, 1, dimMax*8); err != nil {
		return err
	}
	shared := 0
	if v, ok := md.Int(a + "attention.shared_kv_layers"); ok {
		if v < 0 || v > c.Layers {
			return fmt.Errorf("model metadata: %sattention.shared_kv_layers = %d is out of range 0..%d", a, v, c.Layers)
		}
		shared = v
	}
	g.KVLayers = c.Layers - shared
	g.KVSource = make([]int, c.Layers)
	for l := range g.KVSource {
		g.KVSource[l] = l
		if l < g.KVLayers {
			continue
		}
		// llama.cpp's reuse rule: the last KV layer for a full layer, the
		// one before it for a windowed one
		src := g.KVLayers - 1
		if c.SWALayers[l] {
			src = g.KVLayers - 2
		}
		if g.KVLayers < 2 || c.SWALayers[src] != c.SWALayers[l] || g.KVHeads[src] != g.KVHeads[l] {
			return fmt.Errorf("model metadata: layer %d shares the K/V of layer %d, which is not a layer of its kind and shape (%d shared KV layers of %d)", l, src, shared, c.Layers)
		}
		g.KVSource[l] = src
	}
	if v, ok := md.Int(a + "embedding_length_per_layer_input"); !ok {
		return fmt.Errorf("model metadata: %sembedding_length_per_layer_input is missing", a)
	} else if v < 0 || v > dimMax {
		return fmt.Errorf("model metadata: %sembedding_length_per_layer_input = %d is out of range 0..%d", a, v, dimMax)
	} else {
		g.PerLayer = v
	}
	// the cache row: wide enough for every KV layer's K (or V) row
	row, hd := 0, 0
	for l := range g.KVLayers {
		d := c.layerHeadDim(l)
		row, hd = max(row, g.KVHeads[l]*d), max(hd, d)
	}
	g.CacheHeadDim, g.CacheKVHeads = hd, (row+hd-1)/hd
	return nil
}

// gemma4MoEFeatures reads the expert keys of a gemma4 file, which has
// experts when expert_count is present and positive.
func (c *Config) gemma4MoEFeatures(md Metadata, req func(string, *int, int) error) error {
	a := c.Arch + "."
	if n, ok := md.Int(a + "expert_count"); !ok || n == 0 {
		return nil
	}
	m := &c.MoE
	if err := req("expert_count", &m.Experts, expertsMax); err != nil {
		return err
	}
	if err := req("expert_used_count", &m.Used, m.Experts); err != nil {
		return err
	}
	ffs, err := perLayerInts(md, a+"expert_feed_forward_length", c.Layers, 1, dimMax*8)
	if err != nil {
		return err
	}
	for l, v := range ffs {
		if v != ffs[0] {
			return fmt.Errorf("model metadata: layer %d's expert width %d differs from layer 0's %d: per-layer expert widths are not supported", l, v, ffs[0])
		}
	}
	m.FF, m.Gating, m.NormWeights = ffs[0], GatingSoftmax, true
	return nil
}

// gemma4Layer is a gemma4 block's weights beyond Layer's.
type gemma4Layer struct {
	// OutScale multiplies the block's output (layer_output_scale); 1 when
	// absent.
	OutScale float32
	// The mixture of experts (MoE layers only): the router's input scale,
	// the experts' pre-norm, the post-norms of the dense and expert
	// outputs, fused gate|up experts (nil when gate and up are apart) and
	// per-expert output scales (nil: none).
	RouterScale                    []float32
	PreNorm2, PostNorm1, PostNorm2 []float32
	GateUp                         []Linear
	DownScale                      []float32
	// Per-layer embedding: gate [Dim -> P], projection [P -> Dim], norm.
	InpGate, Proj Linear
	PostNorm      []float32
}

// gemma4Model is gemma4's model-wide weights beyond Model's.
type gemma4Model struct {
	// PerLayerEmbd has one row of Layers*P values per token;
	// PerLayerProj projects the scaled embedding to Layers*P values,
	// normalized per layer with PerLayerNorm.
	PerLayerEmbd, PerLayerProj Linear
	PerLayerNorm               []float32
	ones                       []float32 // unit weights for V's norm
}

// loadGemma4 reads a gemma4 file's tensors.
func (m *Model) loadGemma4(l *loader) error {
	c := &m.Config
	g := c.Gemma4
	m.Embed = l.linear("token_embd.weight", c.Dim, c.Vocab)
	m.OutputNorm = l.vector("output_norm.weight", c.Dim)
	m.Output = m.Embed
	if l.has("output.weight") {
		m.Output = l.linear("output.weight", c.Dim, c.Vocab)
	}
	full := false
	for _, w := range c.SWALayers {
		full = full || !w
	}
	if full || l.has("rope_freqs.weight") {
		m.RopeFreqs = l.vector("rope_freqs.weight", c.HeadDim/2)
	}
	m.g4 = &gemma4Model{ones: make([]float32, max(c.HeadDim, g.HeadDimSWA))}
	for i := range m.g4.ones {
		m.g4.ones[i] = 1
	}
	P := g.PerLayer
	if P > 0 {
		m.g4.PerLayerEmbd = l.linear("per_layer_token_embd.weight", P*c.Layers, c.Vocab)
		m.g4.PerLayerProj = l.linear("per_layer_model_proj.weight", c.Dim, P*c.Layers)
		m.g4.PerLayerNorm = l.vector("per_layer_proj_norm.weight", P)
	}
	m.Layers = make([]Layer, c.Layers)
	for i := range m.Layers {
		p := fmt.Sprintf("blk.%d.", i)
		ly := &m.Layers[i]
		x := &gemma4Layer{OutScale: 1}
		ly.g4 = x
		hd, kvh := c.layerHeadDim(i), g.KVHeads[i]
		qDim, kvDim := c.Heads*hd, kvh*hd
		ly.AttnNorm = l.vector(p+"attn_norm.weight", c.Dim)
		ly.Q = l.linear(p+"attn_q.weight", c.Dim, qDim)
		ly.QNorm = l.vector(p+"attn_q_norm.weight", hd)
		if i < g.KVLayers {
			ly.K = l.linear(p+"attn_k.weight", c.Dim, kvDim)
			if l.has(p + "attn_v.weight") { // absent: V is K's projection
				ly.V = l.linear(p+"attn_v.weight", c.Dim, kvDim)
			}
			ly.KNorm = l.vector(p+"attn_k_norm.weight", hd)
		} else {
			// a shared-KV layer computes no K/V; llama.cpp loads and
			// ignores these when a file has them
			for _, n := range []string{"attn_k.weight", "attn_v.weight", "attn_k_norm.weight"} {
				l.used[p+n] = true
			}
		}
		ly.O = l.linear(p+"attn_output.weight", qDim, c.Dim)
		ly.PostAttnNorm = l.vector(p+"post_attention_norm.weight", c.Dim)
		if l.has(p + "layer_output_scale.weight") {
			if v := l.vector(p+"layer_output_scale.weight", 1); v != nil {
				x.OutScale = v[0]
			}
		}
		ly.FFNNorm = l.vector(p+"ffn_norm.weight", c.Dim)
		ff := g.FF[i]
		ly.Gate = l.linear(p+"ffn_gate.weight", c.Dim, ff)
		ly.Up = l.linear(p+"ffn_up.weight", c.Dim, ff)
		ly.Down = l.linear(p+"ffn_down.weight", ff, c.Dim)
		ly.PostFFNNorm = l.vector(p+"post_ffw_norm.weight", c.Dim)
		if l.has(p + "ffn_gate_inp.weight") {
			if c.MoE.Experts == 0 {
				l.err = fmt.Errorf("tensor %sffn_gate_inp.weight: the file has a router but no %s.expert_count", p, c.Arch)
				return l.err
			}
			mc := c.MoE
			ly.MoE = &MoE{Router: l.linear(p+"ffn_gate_inp.weight", c.Dim, mc.Experts)}
			x.RouterScale = l.vector(p+"ffn_gate_inp.scale", c.Dim)
			x.PreNorm2 = l.vector(p+"pre_ffw_norm_2.weight", c.Dim)
			x.PostNorm1 = l.vector(p+"post_ffw_norm_1.weight", c.Dim)
			x.PostNorm2 = l.vector(p+"post_ffw_norm_2.weight", c.Dim)
			if l.has(p + "ffn_gate_up_exps.weight") {
				x.GateUp = l.experts(p+"ffn_gate_up_exps.weight", c.Dim, 2*mc.FF, mc.Experts)
			} else {
				ly.MoE.Gate = l.experts(p+"ffn_gate_exps.weight", c.Dim, mc.FF, mc.Experts)
				ly.MoE.Up = l.experts(p+"ffn_up_exps.weight", c.Dim, mc.FF, mc.Experts)
			}
			ly.MoE.Down = l.experts(p+"ffn_down_exps.weight", mc.FF, c.Dim, mc.Experts)
			if l.has(p + "ffn_down_exps.scale") {
				x.DownScale = l.vector(p+"ffn_down_exps.scale", mc.Experts)
			}
		}
		if P > 0 {
			x.InpGate = l.linear(p+"inp_gate.weight", c.Dim, P)
			x.Proj = l.linear(p+"proj.weight", P, c.Dim)
			x.PostNorm = l.vector(p+"post_norm.weight", c.Dim)
		}
	}
	return l.allUsed(c.Arch)
}

// gemma4Scratch is a Runner's gemma4 scratch, grown to the largest step.
type gemma4Scratch struct {
	ropeSWA []float32 // per token: the sliding-window layers' cos, sin pairs
	pl      []float32 // per token: Layers*P per-layer inputs
	emb     []float32 // one token's per-layer embedding row
	pg      []float32 // per token: P gate values
	mlp     []float32 // per token: the dense feed-forward output of a MoE layer
	rin     []float32 // per token: the router's input
	gu      []float32 // one expert's fused gate|up rows
}

// tokens runs fn over the step's n tokens, on the caller for a small step
// (elems values each), else split over the pool.
func (r *Runner) tokens(n, elems int, fn func(lo, hi int)) {
	if n*elems < serialElems {
		fn(0, n)
		return
	}
	r.pool.Parallel(n, fn)
}

// gemma4Inputs readies a gemma4 step after the embeddings: scratch, the
// sliding-window layers' RoPE table and the per-layer inputs.
func (r *Runner) gemma4Inputs(seqs []Seq, n int) error {
	c := &r.m.Config
	g := c.Gemma4
	s := &r.g4
	P, L := g.PerLayer, c.Layers
	s.ropeSWA = grow(s.ropeSWA, n*g.RopeDimSWA)
	s.pl = grow(s.pl, n*P*L)
	s.pg = grow(s.pg, n*P)
	s.mlp = grow(s.mlp, n*c.Dim)
	s.rin = grow(s.rin, n*c.Dim)
	s.gu = grow(s.gu, max(n, c.MoE.Used)*2*c.MoE.FF) // one token: every chosen expert's gate|up
	maxFF := 0
	for _, f := range g.FF {
		maxFF = max(maxFF, f)
	}
	r.gate = grow(r.gate, n*maxFF)
	r.up = grow(r.up, n*maxFF)
	r.ropeDims(s.ropeSWA, 0, n, g.RopeDimSWA, c.RopeBaseSWA, c.RopeScaleSWA, nil)
	if P == 0 {
		return nil
	}
	m := r.m.g4
	pl := s.pl[:n*P*L]
	r.matmul(&m.PerLayerProj, r.x, n, pl)
	projScale, embScale := float32(1/math.Sqrt(float64(c.Dim))), float32(math.Sqrt(float64(P)))
	inScale := float32(1 / math.Sqrt(2))
	s.emb = grow(s.emb, P*L)
	emb := s.emb
	for t := range n {
		sq := &seqs[r.tokSeq[t]]
		tok := sq.Tokens[r.tokPos[t]-sq.Pos]
		if err := tensor.Dequantize(m.PerLayerEmbd.Type, m.PerLayerEmbd.Row(int(tok)), emb); err != nil {
			return fmt.Errorf("per-layer embedding of token %d: %w", tok, err)
		}
		row := pl[t*P*L : (t+1)*P*L]
		for i := range row {
			row[i] *= projScale
		}
		for l := range L {
			part := row[l*P : (l+1)*P]
			rmsNorm(part, part, m.PerLayerNorm, c.NormEps)
		}
		for i := range row {
			row[i] = (row[i] + emb[i]*embScale) * inScale
		}
	}
	return nil
}

// ropeDims is ropeTable for dims rotated dimensions with base, position
// scale and frequency factors (nil: none) of its own.
func (r *Runner) ropeDims(dst []float32, lo, hi, dims int, base, scale float32, factors []float32) {
	c := &r.m.Config
	half := dims / 2
	thetaScale := float32(math.Pow(float64(base), -2.0/float64(dims)))
	mscale := c.RopeAttnFactor
	for t := lo; t < hi; t++ {
		theta := float32(r.tokPos[t])
		tab := dst[t*dims : (t+1)*dims]
		for i := range half {
			th := theta
			if factors != nil {
				th /= factors[i]
			}
			th *= scale
			tab[2*i] = float32(math.Cos(float64(th)))
			tab[2*i+1] = float32(math.Sin(float64(th)))
			if mscale != 1 && mscale != 0 {
				tab[2*i] *= mscale
				tab[2*i+1] *= mscale
			}
			theta *= thetaScale
		}
	}
}

// ropeNeox rotates the first dims values of each of the heads of d values
// of vec, NEOX style (pairs i, i+dims/2), with the cos/sin table tab.
func ropeNeox(vec []float32, heads, d, dims int, tab []float32) {
	half := dims / 2
	for h := range heads {
		x := vec[h*d : (h+1)*d]
		for i := range half {
			cos, sin := tab[2*i], tab[2*i+1]
			x0, x1 := x[i], x[i+half]
			x[i] = x0*cos - x1*sin
			x[i+half] = x0*sin + x1*cos
		}
	}
}

// gemma4Layer runs block l of a gemma4 step over the n token rows of r.x.
func (r *Runner) gemma4Layer(kv *kvcache.Cache, l int, seqs []Seq, n int) {
	c := &r.m.Config
	g := c.Gemma4
	ly := &r.m.Layers[l]
	x := ly.g4
	D := c.Dim
	hd, kvh, swa := c.layerHeadDim(l), g.KVHeads[l], c.Window(l) > 0
	qDim, kvDim := c.Heads*hd, kvh*hd
	owns := l < g.KVLayers
	rot, rope := c.RopeDim, r.rope
	if swa {
		rot, rope = g.RopeDimSWA, r.g4.ropeSWA
	}
	r.resid = false
	r.normTokens(ly.AttnNorm, n)
	switch {
	case n == 1 && owns && ly.V.Data != nil:
		r.matvecs(r.h, &ly.Q, r.q, &ly.K, r.k, &ly.V, r.v) // one pool round
	case n == 1 && owns:
		r.matvecs(r.h, &ly.Q, r.q, &ly.K, r.k, nil, nil)
		copy(r.v[:kvDim], r.k[:kvDim])
	default:
		r.matmul(&ly.Q, r.h, n, r.q)
		if owns {
			r.matmul(&ly.K, r.h, n, r.k)
			if ly.V.Data != nil {
				r.matmul(&ly.V, r.h, n, r.v)
			} else {
				copy(r.v[:n*kvDim], r.k[:n*kvDim])
			}
		}
	}
	r.setQKV(r.q, qDim, r.k, r.v, kvDim)
	dt := kv.Config().DType
	ones := r.m.g4.ones[:hd]
	r.tokens(n, qDim+2*kvDim, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			tab := rope[t*rot : (t+1)*rot]
			q := r.q[t*qDim : (t+1)*qDim]
			headNorm(q, ly.QNorm, hd, c.NormEps)
			ropeNeox(q, c.Heads, hd, rot, tab)
			if !owns {
				continue
			}
			k, v := r.k[t*kvDim:(t+1)*kvDim], r.v[t*kvDim:(t+1)*kvDim]
			headNorm(k, ly.KNorm, hd, c.NormEps)
			headNorm(v, ones, hd, c.NormEps)
			ropeNeox(k, kvh, hd, rot, tab)
			pages := seqs[r.tokSeq[t]].layerPages(kv, l)
			storeRow(kv.KRow(l, pages, r.tokPos[t]), k, dt)
			storeRow(kv.VRow(l, pages, r.tokPos[t]), v, dt)
		}
	})
	if owns && r.layerHook != nil {
		r.layerHook(l)
	}
	attStart := time.Now()
	r.attention(kv, l, seqs, n)
	r.times.Attention += time.Since(attStart)
	r.matmul(&ly.O, r.attn, n, r.out)
	r.addNormed(ly.PostAttnNorm, n)
	if ly.MoE != nil {
		r.gemma4MoE(ly, g.FF[l], n)
	} else {
		r.normTokens(ly.FFNNorm, n)
		r.gemma4Dense(ly, g.FF[l], n)
	}
	r.addNormed(ly.PostFFNNorm, n)
	if g.PerLayer > 0 {
		P, L := g.PerLayer, c.Layers
		pg := r.g4.pg[:n*P]
		r.matmul(&x.InpGate, r.x, n, pg)
		r.tokens(n, P, func(lo, hi int) {
			for t := lo; t < hi; t++ {
				in := r.g4.pl[t*P*L+l*P:][:P]
				row := pg[t*P : (t+1)*P]
				for i := range row {
					row[i] = geluF16(row[i]) * in[i]
				}
			}
		})
		r.matmul(&x.Proj, pg, n, r.out)
		r.addNormed(x.PostNorm, n)
	}
	if x.OutScale != 1 {
		xs := r.x[:n*D]
		for i := range xs {
			xs[i] *= x.OutScale
		}
	}
}

// addNormed adds each token's row of r.out, RMS-normalized with weights w,
// to its residual row of r.x.
func (r *Runner) addNormed(w []float32, n int) {
	c := &r.m.Config
	D := c.Dim
	r.tokens(n, D, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			out, x := r.out[t*D:(t+1)*D], r.x[t*D:(t+1)*D]
			rmsNorm(out, out, w, c.NormEps)
			for i := range x {
				x[i] += out[i]
			}
		}
	})
}

// gemma4Dense runs the GeGLU feed-forward of width ff over the normalized
// rows in r.h into r.out.
func (r *Runner) gemma4Dense(ly *Layer, ff, n int) {
	r.matmul(&ly.Gate, r.h, n, r.gate)
	r.matmul(&ly.Up, r.h, n, r.up)
	gs, us := r.gate[:n*ff], r.up[:n*ff]
	r.parallel(len(gs), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			gs[i] = geluF16(gs[i]) * us[i]
		}
	})
	r.matmul(&ly.Down, r.gate, n, r.out)
}

// gemma4MoE runs a MoE layer's feed-forward into r.out: the dense
// feed-forward and the experts, each normalized, summed.
func (r *Runner) gemma4MoE(ly *Layer, ff, n int) {
	c := &r.m.Config
	x := ly.g4
	D := c.Dim
	s := &r.g4
	r.normTokens(ly.FFNNorm, n)
	r.gemma4Dense(ly, ff, n)
	inv := float32(1 / math.Sqrt(float64(D)))
	r.tokens(n, 3*D, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			xr, out := r.x[t*D:(t+1)*D], r.out[t*D:(t+1)*D]
			mlp := s.mlp[t*D : (t+1)*D]
			rmsNorm(mlp, out, x.PostNorm1, c.NormEps)
			rmsNorm(r.h[t*D:(t+1)*D], xr, x.PreNorm2, c.NormEps)
			rin := s.rin[t*D : (t+1)*D]
			rmsUnit(rin, xr, c.NormEps)
			for i := range rin {
				rin[i] = rin[i] * inv * x.RouterScale[i]
			}
		}
	})
	r.gemma4Experts(ly, n)
	r.tokens(n, D, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			out, mlp := r.out[t*D:(t+1)*D], s.mlp[t*D:(t+1)*D]
			rmsNorm(out, out, x.PostNorm2, c.NormEps)
			for i := range out {
				out[i] = mlp[i] + out[i]
			}
		}
	})
}

// rmsUnit is rmsNorm without weights (ggml_rms_norm alone).
func rmsUnit(dst, x []float32, eps float32) {
	var sum float64
	for _, v := range x {
		sum += float64(v * v)
	}
	mean := float32(sum / float64(len(x)))
	scale := float32(1 / math.Sqrt(float64(mean+eps)))
	for i, v := range x {
		dst[i] = v * scale
	}
}

// gemma4Experts runs the experts of the n token rows in r.h, routed by the
// router inputs in r.g4.rin, into r.out: each chosen expert's weights
// stream once per step, for all the tokens that chose it.
func (r *Runner) gemma4Experts(ly *Layer, n int) {
	c := &r.m.Config
	m, x := ly.MoE, ly.g4
	mc := c.MoE
	D, F := c.Dim, mc.FF
	s := &r.moe
	s.grow(c, n)
	if n == 1 {
		r.gemma4ExpertsOne(ly)
		return
	}
	r.matmul(&m.Router, r.g4.rin, n, s.logits)
	for t := range n {
		r.route(s.logits[t*mc.Experts:(t+1)*mc.Experts], s.sel[t*mc.Used:(t+1)*mc.Used], s.wts[t*mc.Used:(t+1)*mc.Used])
	}
	s.groupByExpert(mc.Experts, mc.Used)
	out := r.out[:n*D]
	clear(out)
	for e := range mc.Experts {
		lo, hi := s.start[e], s.start[e+1]
		cnt := int(hi - lo)
		if cnt == 0 {
			continue
		}
		xs := s.x[:cnt*D]
		for i, t := range s.tok[lo:hi] {
			copy(xs[i*D:(i+1)*D], r.h[int(t)*D:(int(t)+1)*D])
		}
		gs, d := s.g[:cnt*F], s.d[:cnt*D]
		if x.GateUp != nil {
			gu := r.g4.gu[:cnt*2*F]
			r.matmul(&x.GateUp[e], xs, cnt, gu)
			for i := range cnt {
				row := gu[i*2*F : (i+1)*2*F]
				for j := range F {
					gs[i*F+j] = geluF16(row[j]) * row[F+j]
				}
			}
		} else {
			us := s.u[:cnt*F]
			r.matmul(&m.Gate[e], xs, cnt, gs)
			r.matmul(&m.Up[e], xs, cnt, us)
			for i := range gs {
				gs[i] = geluF16(gs[i]) * us[i]
			}
		}
		r.matmul(&m.Down[e], gs, cnt, d)
		if x.DownScale != nil {
			sc := x.DownScale[e]
			for i := range d {
				d[i] *= sc
			}
		}
		for i, t := range s.tok[lo:hi] {
			addScaled(out[int(t)*D:(int(t)+1)*D], d[i*D:(i+1)*D], s.w[int(lo)+i])
		}
	}
}

// gemma4ExpertsOne is gemma4Experts for one token: three pool rounds (the
// router; every chosen expert's gate and up; their down products), reading
// only the chosen experts' weights. Its products are the multi-token
// path's, one row each, so a token's result does not depend on the step.
func (r *Runner) gemma4ExpertsOne(ly *Layer) {
	c := &r.m.Config
	m, x := ly.MoE, ly.g4
	mc := c.MoE
	D, F := c.Dim, mc.FF
	s := &r.moe
	ops := append(s.ops[:0], kernels.MatVec{Type: m.Router.Type, W: m.Router.Data, Panels: m.Router.Panels, Out: mc.Experts, Y: s.logits[:mc.Experts]})
	r.matvecOps(D, r.g4.rin[:D], ops)
	sel, wts := s.sel[:mc.Used], s.wts[:mc.Used]
	r.route(s.logits[:mc.Experts], sel, wts)
	ops = ops[:0]
	gu := r.g4.gu[:mc.Used*2*F]
	for j, e := range sel {
		if x.GateUp != nil {
			w := &x.GateUp[e]
			ops = append(ops, kernels.MatVec{Type: w.Type, W: w.Data, Panels: w.Panels, Out: 2 * F, Y: gu[j*2*F : (j+1)*2*F]})
			continue
		}
		ops = append(ops,
			kernels.MatVec{Type: m.Gate[e].Type, W: m.Gate[e].Data, Panels: m.Gate[e].Panels, Out: F, Y: s.g[j*F : (j+1)*F]},
			kernels.MatVec{Type: m.Up[e].Type, W: m.Up[e].Data, Panels: m.Up[e].Panels, Out: F, Y: s.u[j*F : (j+1)*F]})
	}
	r.matvecOps(D, r.h[:D], ops)
	gs := s.g[:mc.Used*F]
	if x.GateUp != nil {
		for j := range sel {
			row := gu[j*2*F : (j+1)*2*F]
			for i := range F {
				gs[j*F+i] = geluF16(row[i]) * row[F+i]
			}
		}
	} else {
		us := s.u[:mc.Used*F]
		for i := range gs {
			gs[i] = geluF16(gs[i]) * us[i]
		}
	}
	ops = ops[:0]
	for j, e := range sel {
		ops = append(ops, kernels.MatVec{Type: m.Down[e].Type, W: m.Down[e].Data, Panels: m.Down[e].Panels, Out: D,
			Y: s.d[j*D : (j+1)*D], X: gs[j*F : (j+1)*F]})
	}
	r.matvecOps(F, nil, ops)
	clear(ops[:cap(ops)])
	s.ops = ops[:0]
	out := r.out[:D]
	clear(out)
	for j, e := range sel {
		d := s.d[j*D : (j+1)*D]
		if x.DownScale != nil {
			sc := x.DownScale[e]
			for i := range d {
				d[i] *= sc
			}
		}
		addScaled(out, d, wts[j])
	}
}

// groupByExpert sorts the step's (token, expert) choices in sel/wts by
// expert (a counting sort, tokens ascending within each expert): expert
// e's tokens are tok[start[e]:start[e+1]] with weights w.
func (s *moeScratch) groupByExpert(experts, used int) {
	clear(s.start)
	for _, e := range s.sel {
		s.start[e+1]++
	}
	for e := range experts {
		s.start[e+1] += s.start[e]
	}
	for i, e := range s.sel {
		j := s.start[e]
		s.tok[j], s.w[j] = int32(i/used), s.wts[i]
		s.start[e]++
	}
	copy(s.start[1:], s.start[:experts])
	s.start[0] = 0
}
