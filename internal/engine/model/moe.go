package model

import (
	"fmt"
	"math"
	"strings"
	"time"

	"tandem/internal/engine/gguf"
	"tandem/internal/engine/kernels"
)

// Mixture-of-experts feed-forward blocks (qwen3moe, qwen2moe), as
// llama.cpp's build_moe_ffn computes them: a router (ffn_gate_inp) gives
// each token one logit per expert; the gating turns them into
// probabilities; the ExpertsUsed most probable experts run a SwiGLU
// feed-forward each (ffn_{gate,up,down}_exps, 3-D tensors of all experts);
// their outputs are summed weighted by the probabilities (renormalized over
// the chosen ones where the family does). qwen2moe adds a shared expert
// (ffn_{gate,up,down}_shexp) that every token runs, weighted by
// sigmoid(ffn_gate_inp_shexp · x).
//
// Decode reads only the chosen experts' weights: one pool round for the
// router, one for every chosen expert's gate and up products, one for
// their down products, the threads splitting the rows of all of them
// (kernels.MatVecs). A multi-token step groups its tokens by expert, so
// each chosen expert's weights stream once per step, whatever the number of
// tokens that chose it, and each expert's products are split over the
// threads by row (kernels.Pool.MatMul). A token's expert outputs are added
// in ascending expert order in both paths, so its result does not depend
// on the step it runs in.

// Gating is how a router turns logits into expert weights.
type Gating int

const (
	// GatingSoftmax: softmax over all experts, the top ones by
	// probability (qwen3moe, qwen2moe, mixtral).
	GatingSoftmax Gating = iota
	// GatingSigmoid: a sigmoid per expert (deepseek v3 style).
	GatingSigmoid
	// GatingSoftmaxTopK: the top experts by logit, then a softmax over
	// their logits alone (gpt-oss).
	GatingSoftmaxTopK
)

// String names the gating.
func (g Gating) String() string {
	switch g {
	case GatingSigmoid:
		return "sigmoid"
	case GatingSoftmaxTopK:
		return "softmax over the chosen"
	}
	return "softmax"
}

// MoEConfig is the shape of a model's mixture-of-experts blocks; Experts
// is 0 for a dense model.
type MoEConfig struct {
	Experts int // {arch}.expert_count
	Used    int // {arch}.expert_used_count: experts per token
	FF      int // {arch}.expert_feed_forward_length (FF/Used when absent)
	// SharedFF is the shared expert's width (qwen2moe's
	// expert_shared_feed_forward_length, FF when absent); 0 when the
	// family has none.
	SharedFF int
	Gating   Gating
	// NormWeights divides the chosen experts' weights by their sum
	// (clamped below at 2^-14, as llama.cpp does).
	NormWeights bool
	// WeightScale multiplies the weights when not 0 or 1.
	WeightScale float32
}

// expertsMax is llama.cpp's LLAMA_MAX_EXPERTS.
const expertsMax = 512

// moeArchs are the mixture-of-experts architectures Tandem runs.
func moeArch(arch string) bool {
	return arch == "qwen3moe" || arch == "qwen2moe" || arch == "qwen35moe" || arch == "gpt-oss"
}

// moeFeatures reads the expert keys of a MoE architecture, and refuses
// expert keys on any other (a variant Tandem does not run).
func (c *Config) moeFeatures(md Metadata, req func(string, *int, int) error) error {
	arch := c.Arch
	if arch == "gemma4" {
		return c.gemma4MoEFeatures(md, req)
	}
	if !moeArch(arch) {
		if n, ok := md.Int(arch + ".expert_count"); ok && n > 0 {
			return fmt.Errorf("model metadata: %s.expert_count = %d: Tandem runs mixtures of experts of the architectures qwen3moe, qwen2moe, qwen35moe and gpt-oss only", arch, n)
		}
		return nil
	}
	m := &c.MoE
	if err := req("expert_count", &m.Experts, expertsMax); err != nil {
		return err
	}
	if err := req("expert_used_count", &m.Used, m.Experts); err != nil {
		return err
	}
	m.FF = c.FF / m.Used
	if _, ok := md.Int(arch + ".expert_feed_forward_length"); ok || arch == "gpt-oss" {
		if err := req("expert_feed_forward_length", &m.FF, dimMax*8); err != nil {
			return err
		}
	}
	if m.FF <= 0 {
		return fmt.Errorf("model metadata: %s expert feed-forward width %d must be positive", arch, m.FF)
	}
	m.Gating = GatingSoftmax
	switch arch {
	case "qwen3moe":
		m.NormWeights = true
	case "gpt-oss":
		m.Gating = GatingSoftmaxTopK
	case "qwen2moe", "qwen35moe":
		// qwen35moe: softmax, renormalized over the chosen, plus
		// qwen2moe's sigmoid-gated shared expert
		m.NormWeights = arch == "qwen35moe"
		m.SharedFF = c.FF
		if _, ok := md.Int(arch + ".expert_shared_feed_forward_length"); ok {
			if err := req("expert_shared_feed_forward_length", &m.SharedFF, dimMax*8); err != nil {
				return err
			}
		}
	}
	return nil
}

// MoE is one layer's mixture of experts.
type MoE struct {
	Router Linear // ffn_gate_inp: one row of Dim per expert
	// Gate, Up and Down are each expert's matrices, views into the 3-D
	// tensors ffn_{gate,up,down}_exps.
	Gate, Up, Down []Linear
	// The shared expert (qwen2moe); Data nil when there is none.
	SharedRouter                     Linear // ffn_gate_inp_shexp: one row of Dim
	SharedGate, SharedUp, SharedDown Linear
	// RouterBias is added to the router logits (ffn_gate_inp.bias,
	// gpt-oss); GateBias, UpBias and DownBias hold each expert's bias row
	// (ffn_{gate,up,down}_exps.bias: expert e's at [e*width:]). nil when
	// the file has none.
	RouterBias, GateBias, UpBias, DownBias []float32
}

// moe reads the expert tensors of block prefix p.
func (l *loader) moe(p string, c *Config) *MoE {
	mc := c.MoE
	m := &MoE{Router: l.linear(p+"ffn_gate_inp.weight", c.Dim, mc.Experts)}
	m.Gate = l.experts(p+"ffn_gate_exps.weight", c.Dim, mc.FF, mc.Experts)
	m.Up = l.experts(p+"ffn_up_exps.weight", c.Dim, mc.FF, mc.Experts)
	m.Down = l.experts(p+"ffn_down_exps.weight", mc.FF, c.Dim, mc.Experts)
	if c.Arch == "gpt-oss" {
		m.RouterBias = l.vector(p+"ffn_gate_inp.bias", mc.Experts)
		m.GateBias = l.expertBiases(p+"ffn_gate_exps.bias", mc.FF, mc.Experts)
		m.UpBias = l.expertBiases(p+"ffn_up_exps.bias", mc.FF, mc.Experts)
		m.DownBias = l.expertBiases(p+"ffn_down_exps.bias", c.Dim, mc.Experts)
	}
	if mc.SharedFF > 0 {
		if t := l.tensor(p+"ffn_gate_inp_shexp.weight", c.Dim); t != nil {
			if !kernels.Supported(t.Type) {
				l.err = fmt.Errorf("tensor %s has type %s, which has no matmul kernel", t.Name, t.Type)
			}
			m.SharedRouter = Linear{Name: t.Name, Type: t.Type, In: c.Dim, Out: 1, Data: t.Data}
		}
		m.SharedGate = l.linear(p+"ffn_gate_shexp.weight", c.Dim, mc.SharedFF)
		m.SharedUp = l.linear(p+"ffn_up_shexp.weight", c.Dim, mc.SharedFF)
		m.SharedDown = l.linear(p+"ffn_down_shexp.weight", mc.SharedFF, c.Dim)
	}
	return m
}

// experts reads a 3-D expert tensor [in, out, n] as n matrices.
func (l *loader) experts(name string, in, out, n int) []Linear {
	t := l.tensor(name, in, out, n)
	if t == nil {
		return nil
	}
	if !kernels.Supported(t.Type) {
		l.err = fmt.Errorf("tensor %s has type %s, which has no matmul kernel", name, t.Type)
		return nil
	}
	rb, err := t.Type.RowBytes(in)
	if err != nil {
		l.err = fmt.Errorf("tensor %s: %w", name, err)
		return nil
	}
	size := rb * out
	ws := make([]Linear, n)
	for e := range ws {
		ws[e] = Linear{Name: fmt.Sprintf("%s[%d]", name, e), Type: t.Type, In: in, Out: out, Data: t.Data[e*size : (e+1)*size : (e+1)*size]}
	}
	return ws
}

// moeScratch is a Runner's mixture-of-experts scratch, grown to the
// largest step seen.
type moeScratch struct {
	logits []float32 // router logits, Experts per token
	shared []float32 // shared-expert router logit per token
	probs  []float32 // one token's gating values
	// sel and wts are each token's chosen experts, ascending, and their
	// weights (Used per token).
	sel []int32
	wts []float32
	// The step's tokens grouped by expert: expert e's are
	// tok[start[e]:start[e+1]], with weights w.
	start []int32
	tok   []int32
	w     []float32
	// x, g, u, d: one expert's gathered inputs, gate, up and down rows.
	x, g, u, d []float32
	// sg, su, sd: the shared expert's gate, up and down rows.
	sg, su, sd []float32
	ops        []kernels.MatVec
}

func (s *moeScratch) grow(c *Config, n int) {
	mc := c.MoE
	s.logits = grow(s.logits, n*mc.Experts)
	s.shared = grow(s.shared, n)
	s.probs = grow(s.probs, mc.Experts)
	s.wts = grow(s.wts, n*mc.Used)
	s.w = grow(s.w, n*mc.Used)
	if cap(s.sel) < n*mc.Used {
		s.sel = make([]int32, n*mc.Used)
		s.tok = make([]int32, n*mc.Used)
	}
	s.sel, s.tok = s.sel[:n*mc.Used], s.tok[:n*mc.Used]
	if cap(s.start) < mc.Experts+1 {
		s.start = make([]int32, mc.Experts+1)
	}
	s.start = s.start[:mc.Experts+1]
	// one expert's rows: n tokens in a multi-token step, Used experts' worth
	// in a one-token step
	rows := max(n, mc.Used)
	s.x = grow(s.x, n*c.Dim)
	s.g = grow(s.g, rows*mc.FF)
	s.u = grow(s.u, rows*mc.FF)
	s.d = grow(s.d, rows*c.Dim)
	if mc.SharedFF > 0 {
		s.sg = grow(s.sg, n*mc.SharedFF)
		s.su = grow(s.su, n*mc.SharedFF)
		s.sd = grow(s.sd, n*c.Dim)
	}
}

// moeFFN computes the mixture of experts of the n normalized token rows in
// r.h into r.out.
func (r *Runner) moeFFN(m *MoE, n int) {
	c := &r.m.Config
	s := &r.moe
	s.grow(c, n)
	if n == 1 {
		r.moeOne(m)
		return
	}
	mc := c.MoE
	r.matmul(&m.Router, r.h, n, s.logits)
	r.addRowBias(s.logits[:n*mc.Experts], m.RouterBias)
	if m.SharedRouter.Data != nil {
		r.matmul(&m.SharedRouter, r.h, n, s.shared)
	}
	for t := range n {
		r.route(s.logits[t*mc.Experts:(t+1)*mc.Experts], s.sel[t*mc.Used:(t+1)*mc.Used], s.wts[t*mc.Used:(t+1)*mc.Used])
	}
	// group the tokens by expert (a counting sort: tokens ascending within
	// each expert)
	clear(s.start)
	for _, e := range s.sel {
		s.start[e+1]++
	}
	for e := range mc.Experts {
		s.start[e+1] += s.start[e]
	}
	// start[e] is expert e's fill cursor; once filled it holds the end of
	// e's tokens, which is start[e+1] after a shift
	for i, e := range s.sel {
		j := s.start[e]
		s.tok[j], s.w[j] = int32(i/mc.Used), s.wts[i]
		s.start[e]++
	}
	copy(s.start[1:], s.start[:mc.Experts])
	s.start[0] = 0
	out := r.out[:n*c.Dim]
	clear(out)
	for e := range mc.Experts {
		lo, hi := s.start[e], s.start[e+1]
		cnt := int(hi - lo)
		if cnt == 0 {
			continue
		}
		x := s.x[:cnt*c.Dim]
		for i, t := range s.tok[lo:hi] {
			copy(x[i*c.Dim:(i+1)*c.Dim], r.h[int(t)*c.Dim:(int(t)+1)*c.Dim])
		}
		g, u, d := s.g[:cnt*mc.FF], s.u[:cnt*mc.FF], s.d[:cnt*c.Dim]
		r.matmul(&m.Gate[e], x, cnt, g)
		r.matmul(&m.Up[e], x, cnt, u)
		r.addRowBias(g, expertRow(m.GateBias, e, mc.FF))
		r.addRowBias(u, expertRow(m.UpBias, e, mc.FF))
		r.expertAct(g, u)
		r.matmul(&m.Down[e], g, cnt, d)
		r.addRowBias(d, expertRow(m.DownBias, e, c.Dim))
		for i, t := range s.tok[lo:hi] {
			addScaled(out[int(t)*c.Dim:(int(t)+1)*c.Dim], d[i*c.Dim:(i+1)*c.Dim], s.w[int(lo)+i])
		}
	}
	if m.SharedGate.Data != nil {
		sg, su, sd := s.sg[:n*mc.SharedFF], s.su[:n*mc.SharedFF], s.sd[:n*c.Dim]
		r.matmul(&m.SharedGate, r.h, n, sg)
		r.matmul(&m.SharedUp, r.h, n, su)
		r.swiglu(sg, su)
		r.matmul(&m.SharedDown, sg, n, sd)
		for t := range n {
			addScaled(out[t*c.Dim:(t+1)*c.Dim], sd[t*c.Dim:(t+1)*c.Dim], sharedWeight(s, m, t))
		}
	}
}

// expertRow returns expert e's bias row of width n in b, nil when b is nil.
func expertRow(b []float32, e, n int) []float32 {
	if b == nil {
		return nil
	}
	return b[e*n : (e+1)*n]
}

// sharedWeight is token t's shared-expert weight: sigmoid of its shared
// router logit, or 1 without a shared router.
func sharedWeight(s *moeScratch, m *MoE, t int) float32 {
	if m.SharedRouter.Data == nil {
		return 1
	}
	return sigmoid(s.shared[t])
}

// moeOne is moeFFN for one token: three pool rounds, reading only the
// chosen experts' weights.
func (r *Runner) moeOne(m *MoE) {
	c := &r.m.Config
	mc := c.MoE
	s := &r.moe
	h := r.h[:c.Dim]
	ops := append(s.ops[:0], kernels.MatVec{Type: m.Router.Type, W: m.Router.Data, Out: mc.Experts, Y: s.logits[:mc.Experts]})
	if m.SharedRouter.Data != nil {
		ops = append(ops, kernels.MatVec{Type: m.SharedRouter.Type, W: m.SharedRouter.Data, Out: 1, Y: s.shared[:1]})
	}
	r.matvecOps(c.Dim, h, ops)
	addBias(s.logits[:mc.Experts], m.RouterBias, 1)
	sel, wts := s.sel[:mc.Used], s.wts[:mc.Used]
	r.route(s.logits[:mc.Experts], sel, wts)
	ops = ops[:0]
	for j, e := range sel {
		ops = append(ops,
			kernels.MatVec{Type: m.Gate[e].Type, W: m.Gate[e].Data, Out: mc.FF, Y: s.g[j*mc.FF : (j+1)*mc.FF]},
			kernels.MatVec{Type: m.Up[e].Type, W: m.Up[e].Data, Out: mc.FF, Y: s.u[j*mc.FF : (j+1)*mc.FF]})
	}
	if m.SharedGate.Data != nil {
		ops = append(ops,
			kernels.MatVec{Type: m.SharedGate.Type, W: m.SharedGate.Data, Out: mc.SharedFF, Y: s.sg[:mc.SharedFF]},
			kernels.MatVec{Type: m.SharedUp.Type, W: m.SharedUp.Data, Out: mc.SharedFF, Y: s.su[:mc.SharedFF]})
	}
	r.matvecOps(c.Dim, h, ops)
	for j, e := range sel {
		addBias(s.g[j*mc.FF:(j+1)*mc.FF], expertRow(m.GateBias, int(e), mc.FF), 1)
		addBias(s.u[j*mc.FF:(j+1)*mc.FF], expertRow(m.UpBias, int(e), mc.FF), 1)
	}
	r.expertAct(s.g[:mc.Used*mc.FF], s.u[:mc.Used*mc.FF])
	if m.SharedGate.Data != nil {
		r.swiglu(s.sg[:mc.SharedFF], s.su[:mc.SharedFF])
	}
	ops = ops[:0]
	for j, e := range sel {
		ops = append(ops, kernels.MatVec{Type: m.Down[e].Type, W: m.Down[e].Data, Out: c.Dim,
			Y: s.d[j*c.Dim : (j+1)*c.Dim], X: s.g[j*mc.FF : (j+1)*mc.FF]})
	}
	// The down products' inputs differ in width from the shared expert's
	// when SharedFF != FF, so that one runs in a round of its own.
	r.matvecOps(mc.FF, nil, ops)
	if m.SharedDown.Data != nil {
		r.matvecOps(mc.SharedFF, s.sg[:mc.SharedFF], []kernels.MatVec{{Type: m.SharedDown.Type, W: m.SharedDown.Data, Out: c.Dim, Y: s.sd[:c.Dim]}})
	}
	clear(ops[:cap(ops)])
	s.ops = ops[:0]
	for j, e := range sel {
		addBias(s.d[j*c.Dim:(j+1)*c.Dim], expertRow(m.DownBias, int(e), c.Dim), 1)
	}
	out := r.out[:c.Dim]
	clear(out)
	for j := range sel {
		addScaled(out, s.d[j*c.Dim:(j+1)*c.Dim], wts[j])
	}
	if m.SharedDown.Data != nil {
		addScaled(out, s.sd[:c.Dim], sharedWeight(s, m, 0))
	}
}

// matvecOps runs one-token products of inputs nIn wide in rounds of at most
// kernels.MaxMatVecs; x is the shared input (ops with their own X may
// leave it nil).
func (r *Runner) matvecOps(nIn int, x []float32, ops []kernels.MatVec) {
	start := time.Now()
	for len(ops) > 0 {
		k := min(len(ops), kernels.MaxMatVecs)
		xs := x
		if xs == nil {
			xs = ops[0].X
		}
		r.pool.MatVecs(nIn, xs, ops[:k]...)
		ops = ops[k:]
	}
	r.times.MatMul += time.Since(start)
}

// swiglu sets g = silu(g)·u, split over the pool when it is large.
func (r *Runner) swiglu(g, u []float32) {
	if len(g) < serialElems {
		kernels.SwiGLU(g, u)
		return
	}
	r.pool.Parallel(len(g), func(lo, hi int) { kernels.SwiGLU(g[lo:hi], u[lo:hi]) })
}

// addScaled adds w·d to out, rounding each product to float32 before the
// add (as ggml multiplies the expert outputs by their weights, then adds).
func addScaled(out, d []float32, w float32) {
	d = d[:len(out)]
	for i := range out {
		out[i] += float32(w * d[i])
	}
}

func sigmoid(x float32) float32 { return float32(1 / (1 + math.Exp(float64(-x)))) }

// route picks a token's experts from its router logits: sel gets the
// chosen experts in ascending order and wts their weights, computed as
// llama.cpp's build_moe_ffn does (gating, top-k by gating value, optional
// renormalization over the chosen, optional scale).
func (r *Runner) route(logits []float32, sel []int32, wts []float32) {
	mc := r.m.Config.MoE
	p := r.moe.probs[:len(logits)]
	switch mc.Gating {
	case GatingSigmoid:
		for i, v := range logits {
			p[i] = sigmoid(v)
		}
	case GatingSoftmaxTopK:
		copy(p, logits)
	default:
		softmaxF32(p, logits)
	}
	// top-k by value, the lower index first among equals
	k := len(sel)
	for j := range k {
		best := -1
		for i, v := range p {
			if best >= 0 && !(v > p[best]) {
				continue
			}
			taken := false
			for _, e := range sel[:j] {
				if int(e) == i {
					taken = true
					break
				}
			}
			if !taken {
				best = i
			}
		}
		sel[j], wts[j] = int32(best), p[best]
	}
	if mc.Gating == GatingSoftmaxTopK {
		softmaxF32(wts, wts)
	}
	if mc.NormWeights {
		var sum float64
		for _, w := range wts {
			sum += float64(w)
		}
		s := max(float32(sum), 6.103515625e-5)
		for j := range wts {
			wts[j] /= s
		}
	}
	if mc.WeightScale != 0 && mc.WeightScale != 1 {
		for j := range wts {
			wts[j] *= mc.WeightScale
		}
	}
	// ascending expert order, the order the outputs are added in
	for i := 1; i < k; i++ {
		for j := i; j > 0 && sel[j] < sel[j-1]; j-- {
			sel[j], sel[j-1] = sel[j-1], sel[j]
			wts[j], wts[j-1] = wts[j-1], wts[j]
		}
	}
}

// softmaxF32 writes softmax(x) into dst as ggml's soft_max does: e^(x-max)
// in float32, summed in float64, then scaled by the float32 reciprocal of
// the sum.
func softmaxF32(dst, x []float32) {
	m := float32(math.Inf(-1))
	for _, v := range x {
		m = max(m, v)
	}
	var sum float64
	for i, v := range x {
		e := float32(math.Exp(float64(v - m)))
		dst[i] = e
		sum += float64(e)
	}
	inv := float32(1 / sum)
	for i := range dst[:len(x)] {
		dst[i] *= inv
	}
}

// ActiveWeights returns the parameters and bytes of f's weights that one
// token's forward pass reads: every tensor whole, except the expert
// tensors (*_exps), of which only the used experts' share (Used/Experts)
// is read (their biases too), and token_embd, of which one row is read unless it is the
// output projection too.
func ActiveWeights(f *gguf.File, c Config) (params, bytes uint64) {
	_, hasOutput := f.Tensor("output.weight")
	tied := !hasOutput || c.TiedOutput
	for _, t := range f.Tensors {
		n, b := t.NumElements(), t.Size
		switch {
		case (strings.HasSuffix(t.Name, "_exps.weight") || strings.HasSuffix(t.Name, "_exps.bias")) && c.MoE.Experts > 0:
			n = n * uint64(c.MoE.Used) / uint64(c.MoE.Experts)
			b = b * uint64(c.MoE.Used) / uint64(c.MoE.Experts)
		case (t.Name == "token_embd.weight" && !tied || t.Name == "per_layer_token_embd.weight") && len(t.Dims) == 2 && t.Dims[1] > 0:
			n /= t.Dims[1]
			b /= t.Dims[1]
		}
		params += n
		bytes += b
	}
	return params, bytes
}
