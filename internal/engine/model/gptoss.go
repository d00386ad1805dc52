package model

import (
	"fmt"
	"math"

	"tandem/internal/engine/kernels"
	"tandem/internal/engine/tensor"
)

// gpt-oss (general.architecture "gpt-oss", llama.cpp's LLM_ARCH_OPENAI_MOE)
// and the two features it brings that other families may use too: YaRN
// RoPE scaling and attention sinks.
//
// A gpt-oss block: RMS norm (attn_norm), Q/K/V projections with biases,
// NEOX RoPE with YaRN scaling, attention with a learned sink logit per
// query head (attn_sinks) and scores scaled by 1/√head_dim, the output
// projection with its bias (attn_output.bias), the residual add, an RMS
// norm (post_attention_norm: the pre-FFN norm), and a mixture of experts:
// the router ffn_gate_inp plus its bias, the top expert_used_count experts
// by biased logit, their weights a softmax over those logits alone; each
// chosen expert computes gate and up (each plus its expert's bias row of
// ffn_{gate,up}_exps.bias), the clamped activation ActSwiGLUOAI, and down
// plus its bias row; the weighted outputs are summed. Even layers (period
// attention.sliding_window_pattern, default 2) attend within
// attention.sliding_window (required); output.weight is required (never
// tied).

// YarnConfig is YaRN RoPE scaling as llama.cpp applies it (ggml's
// rope_yarn): each rotated pair i mixes the interpolated angle
// (position·RopeScale) and the extrapolated one (position) by a ramp that
// is 1 below the correction dimension low and 0 above high, times
// ExtFactor; cos and sin are multiplied by RopeAttnFactor·(1 +
// 0.1·ln(1/RopeScale)).
type YarnConfig struct {
	// ExtFactor is the extrapolation mix (llama.cpp's yarn_ext_factor: 1
	// for a YaRN file); 0 means no YaRN.
	ExtFactor float32
	// BetaFast and BetaSlow bound the correction dimensions (llama.cpp's
	// defaults 32 and 1; its loader reads no key for them).
	BetaFast, BetaSlow float32
}

// yarnAttnFactor is llama.cpp's yarn_attn_factor for a YaRN file of
// position scale scale and rope.scaling.attn_factor attn: its magnitude
// correction 1+0.1·ln(factor), cancelled by the one ggml's rope_yarn
// applies again, times attn; computed in float32 step by step as
// llama_context does.
func yarnAttnFactor(scale, attn float32) float32 {
	factor := 1 / scale
	m := float32(1)
	if factor > 1 {
		m = 0.1*logf(factor) + 1
	}
	m *= 1 / (1 + 0.1*logf(factor))
	return m * attn
}

// logf is C's logf: the natural logarithm rounded to float32.
func logf(x float32) float32 { return float32(math.Log(float64(x))) }

// yarnCorrDims returns ggml's YaRN correction dimensions for a RoPE of
// nDims rotated dimensions, base base and original context origCtx: the
// pair indices where a wavelength spans betaFast and betaSlow turns of the
// original context, floored and ceiled, clamped to 0 .. nDims-1.
func yarnCorrDims(nDims, origCtx int, base, betaFast, betaSlow float32) (low, high float32) {
	dim := func(beta float32) float32 {
		return float32(nDims) * logf(float32(origCtx)/(beta*2*float32(math.Pi))) / (2 * logf(base))
	}
	low = max(0, float32(math.Floor(float64(dim(betaFast)))))
	high = min(float32(nDims-1), float32(math.Ceil(float64(dim(betaSlow)))))
	return low, high
}

// yarnRamp is ggml's rope_yarn_ramp for pair i: 1 below low, 0 above
// high, linear between.
func yarnRamp(low, high float32, i int) float32 {
	y := (float32(i) - low) / max(0.001, high-low)
	return 1 - min(1, max(0, y))
}

// ropeYarnTable is ropeTable with YaRN scaling: for tokens [lo, hi), the
// cos/sin pairs ggml's rope cache computes with ext_factor, its
// correction dimensions and magnitude scale.
func (r *Runner) ropeYarnTable(dst []float32, lo, hi int, base, scale float32) {
	c := &r.m.Config
	half := c.RopeDim / 2
	thetaScale := float32(math.Pow(float64(base), -2.0/float64(c.RopeDim)))
	low, high := yarnCorrDims(c.RopeDim, c.RopeOrigContext, base, c.Yarn.BetaFast, c.Yarn.BetaSlow)
	ext := c.Yarn.ExtFactor
	mscale := c.RopeAttnFactor * (1 + 0.1*logf(1/scale))
	for t := lo; t < hi; t++ {
		theta := float32(r.tokPos[t])
		tab := dst[t*c.RopeDim : (t+1)*c.RopeDim]
		for i := range half {
			extrap := theta
			if r.m.RopeFreqs != nil {
				extrap /= r.m.RopeFreqs[i]
			}
			interp := scale * extrap
			mix := yarnRamp(low, high, i) * ext
			th := interp*(1-mix) + extrap*mix
			tab[2*i] = float32(math.Cos(float64(th))) * mscale
			tab[2*i+1] = float32(math.Sin(float64(th))) * mscale
			theta *= thetaScale
		}
	}
}

// gptossFeatures sets gpt-oss's configuration as llama.cpp's loader reads
// it: a required sliding window over the even layers (pattern default 2),
// the windowed layers' RoPE base rope.freq_base_swa (default freq_base)
// and the file's scaling, attention sinks, the clamped activation. The
// experts are read by moeFeatures.
func (c *Config) gptossFeatures(md Metadata, req func(string, *int, int) error, swa func(int, int) error, optFloat func(string, *float32) error) error {
	if _, ok := md.Int(c.Arch + ".attention.sliding_window"); !ok {
		return fmt.Errorf("model metadata: %s.attention.sliding_window is missing", c.Arch)
	}
	if err := swa(0, 2); err != nil {
		return err
	}
	c.RopeBaseSWA, c.RopeScaleSWA = c.RopeBase, c.RopeScale
	if err := optFloat("rope.freq_base_swa", &c.RopeBaseSWA); err != nil {
		return err
	}
	c.AttnSinks, c.Act = true, ActSwiGLUOAI
	return nil
}

// softmaxSink is softmax with a sink logit, as ggml's soft_max does with
// sinks: the maximum covers the sink too, the sink's e^(sink-max) joins
// the float64 sum after the scores', and only the scores are written.
func softmaxSink(x []float32, sink float32) {
	m := sink
	for _, v := range x {
		m = max(m, v)
	}
	kernels.ExpShiftF32(x, m)
	var sum float64
	for _, v := range x {
		sum += float64(v)
	}
	sum += float64(float32(math.Exp(float64(sink - m))))
	inv := float32(1 / sum)
	for i := range x {
		x[i] *= inv
	}
}

// attnSoftmax normalizes one query head's scores: with the head's sink
// when the layer has sinks, else softmax.
func attnSoftmax(x []float32, sinks []float32, head int) {
	if sinks != nil {
		softmaxSink(x, sinks[head])
		return
	}
	softmax(x)
}

// OAI activation constants (llama.cpp's LLM_FFN_SWIGLU_OAI_MOE).
const (
	oaiAlpha = 1.702
	oaiLimit = 7
)

// swigluOAI sets g = min(g,7)·sigmoid(1.702·min(g,7))·(clamp(u,±7)+1) as
// ggml's swiglu_oai computes it in float32.
func swigluOAI(g, u []float32) {
	u = u[:len(g)]
	for i, v := range g {
		x := min(v, oaiLimit)
		y := min(max(u[i], -oaiLimit), oaiLimit)
		glu := x / (1 + float32(math.Exp(float64(oaiAlpha*-x))))
		g[i] = glu * (y + 1)
	}
}

// gptossLayer reads the tensors of gpt-oss block prefix p that other
// architectures do not have: the sinks, the output projection's bias, and
// the pre-FFN norm, which the file calls post_attention_norm.
func (l *loader) gptossLayer(p string, ly *Layer, c *Config) {
	ly.Sinks = l.vector(p+"attn_sinks.weight", c.Heads)
	ly.OBias = l.vector(p+"attn_output.bias", c.Dim)
	ly.FFNNorm = l.vector(p+"post_attention_norm.weight", c.Dim)
}

// expertBiases reads a 2-D expert bias tensor [n, experts] as one F32
// slice, expert e's row at [e*n:(e+1)*n]; nil when the file has none.
func (l *loader) expertBiases(name string, n, experts int) []float32 {
	if !l.has(name) {
		return nil
	}
	t := l.tensor(name, n, experts)
	if t == nil {
		return nil
	}
	v := make([]float32, n*experts)
	if err := tensor.Dequantize(t.Type, t.Data, v); err != nil {
		l.err = fmt.Errorf("tensor %s: %w", name, err)
		return nil
	}
	return v
}

// addRowBias adds b to each len(b)-long row of y, split over the pool
// when y is large.
func (r *Runner) addRowBias(y, b []float32) {
	if b == nil {
		return
	}
	n := len(b)
	r.parallel(len(y), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			y[i] += b[i%n]
		}
	})
}

// expertAct computes the experts' gated activation g = act(g)·u.
func (r *Runner) expertAct(g, u []float32) {
	if r.m.Config.Act != ActSwiGLUOAI {
		r.swiglu(g, u)
		return
	}
	r.parallel(len(g), func(lo, hi int) { swigluOAI(g[lo:hi], u[lo:hi]) })
}
