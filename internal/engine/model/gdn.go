package model

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"tandem/internal/engine/kernels"
	"tandem/internal/engine/tensor"
)

// Gated DeltaNet layers (qwen35, qwen35moe), as llama.cpp 80fb11a runs
// them on the CPU (its fused gated-delta-net op, token after token):
//
//	qkv = W_qkv·h          (2·KHeads·HeadDim + VHeads·HeadDim channels)
//	z = W_gate·h, β = sigmoid(W_β·h), g = softplus(W_α·h + dt)·a
//	c = silu(causal depthwise convolution of qkv over the last Conv
//	    tokens, the Conv-1 before this one coming from the state)
//	q, k = l2norm per head of c's first two parts; v = its last part
//	per value head h (key head h mod KHeads), with S its HeadDim² state:
//	    S ← e^g·S;  S ← S + k⊗(v − Sᵀk)·β;  o = Sᵀq/√HeadDim
//	out = W_out·(rmsnorm(o per head)·ssm_norm · silu(z))
//
// The state of one layer is the convolution's last Conv-1 inputs and S
// for every value head; a token's update reads only the previous token's
// state, so a prompt run in one step, in chunks or token by token gives
// the same bits. A step runs the projections for all its tokens as one
// matrix product, then the convolution split over the pool by channel and
// the recurrence split by (sequence, value head), each worker running its
// tokens in order; decode is the same with one token.

// GDNConfig is the shape of the Gated DeltaNet layers.
type GDNConfig struct {
	Conv    int // {arch}.ssm.conv_kernel: taps of the causal convolution
	KHeads  int // {arch}.ssm.group_count: query and key heads
	VHeads  int // {arch}.ssm.time_step_rank: value heads
	HeadDim int // {arch}.ssm.state_size: key and value head length
}

// Channels is the width of the convolution: Q, K and V.
func (g GDNConfig) Channels() int { return (2*g.KHeads + g.VHeads) * g.HeadDim }

// Inner is the width of the value heads (ssm.inner_size).
func (g GDNConfig) Inner() int { return g.VHeads * g.HeadDim }

// ConvFloats is one layer's convolution state: Conv-1 inputs of Channels.
func (g GDNConfig) ConvFloats() int { return (g.Conv - 1) * g.Channels() }

// RecurrentFloats is one layer's recurrent state: a HeadDim² matrix per
// value head.
func (g GDNConfig) RecurrentFloats() int { return g.VHeads * g.HeadDim * g.HeadDim }

// LayerFloats is one recurrent layer's share of the state slot.
func (g GDNConfig) LayerFloats() int { return g.ConvFloats() + g.RecurrentFloats() }

// gdnArch reports whether arch has Gated DeltaNet layers.
func gdnArch(arch string) bool { return arch == "qwen35" || arch == "qwen35moe" }

// gdn limits against hostile files.
const (
	gdnConvMax = 64
	gdnHeadMax = 1024
)

// gdnFeatures reads the Gated DeltaNet keys, the layer mix and the RoPE
// sections of a hybrid architecture, and sets the state slot's size and
// layout.
func (c *Config) gdnFeatures(md Metadata, req func(string, *int, int) error) error {
	arch := c.Arch
	if !gdnArch(arch) {
		return nil
	}
	g := &c.GDN
	for _, k := range []struct {
		key string
		dst *int
		max int
	}{
		{"ssm.conv_kernel", &g.Conv, gdnConvMax},
		{"ssm.state_size", &g.HeadDim, gdnHeadMax},
		{"ssm.group_count", &g.KHeads, headsMax},
		{"ssm.time_step_rank", &g.VHeads, headsMax},
	} {
		if err := req(k.key, k.dst, k.max); err != nil {
			return err
		}
	}
	var inner int
	if err := req("ssm.inner_size", &inner, dimMax*8); err != nil {
		return err
	}
	if inner != g.Inner() {
		return fmt.Errorf("model metadata: %s.ssm.inner_size %d != time_step_rank %d × state_size %d (value heads of the state size are the only kind llama.cpp runs)", arch, inner, g.VHeads, g.HeadDim)
	}
	if g.VHeads%g.KHeads != 0 {
		return fmt.Errorf("model metadata: %s.ssm.time_step_rank %d is not a multiple of ssm.group_count %d", arch, g.VHeads, g.KHeads)
	}
	// Multi-token-prediction blocks (Qwen3.5's converter writes one unless
	// told not to) are the last nextn_predict_layers blocks; like
	// llama.cpp's main pass, Tandem loads past them and runs the others.
	if n, ok := md.Int(arch + ".nextn_predict_layers"); ok && n != 0 {
		if n < 0 || n >= c.Layers {
			return fmt.Errorf("model metadata: %s.nextn_predict_layers = %d is out of range 0..%d (the blocks but one)", arch, n, c.Layers-1)
		}
		c.NextN = n
		c.Layers -= n
	}
	if _, ok := md.Int(arch + ".attention.recurrent_layers"); ok {
		return fmt.Errorf("model metadata: %s.attention.recurrent_layers is not supported; Tandem reads the layer mix from full_attention_interval", arch)
	}
	interval := 4 // llama.cpp's default
	if _, ok := md.Int(arch + ".full_attention_interval"); ok {
		if err := req("full_attention_interval", &interval, layersMax); err != nil {
			return err
		}
	}
	c.Recurrent = make([]bool, c.Layers)
	rec := 0
	for l := range c.Recurrent {
		c.Recurrent[l] = (l+1)%interval != 0
		if c.Recurrent[l] {
			rec++
		}
	}
	secs, ok := int32s(md, arch+".rope.dimension_sections")
	if !ok {
		return fmt.Errorf("model metadata: %s.rope.dimension_sections is missing", arch)
	}
	if len(secs) > 4 {
		return fmt.Errorf("model metadata: %s.rope.dimension_sections has %d values, want at most 4", arch, len(secs))
	}
	sum := 0
	for i, v := range secs {
		if v < 0 || int(v) > c.RopeDim {
			return fmt.Errorf("model metadata: %s.rope.dimension_sections[%d] = %d is out of range 0..%d", arch, i, v, c.RopeDim)
		}
		c.RopeSections[i] = int(v)
		sum += int(v)
	}
	if sum == 0 || 2*sum > c.HeadDim {
		return fmt.Errorf("model metadata: %s.rope.dimension_sections %v must sum to 1..%d (half the head)", arch, secs, c.HeadDim/2)
	}
	c.State.Floats = rec * g.LayerFloats()
	if rec > 0 {
		c.State.Layout = c.stateLayout()
	}
	return nil
}

// stateLayout names the state slot's layout: the recurrent layers in
// order, each its convolution state (Conv-1 rows of Channels float32s,
// oldest first, channels Q|K|V) then its recurrent state (per value head
// a HeadDim×HeadDim matrix, row j holding S[·][j], llama.cpp's order).
func (c *Config) stateLayout() string {
	var rl []string
	for l, r := range c.Recurrent {
		if r {
			rl = append(rl, strconv.Itoa(l))
		}
	}
	g := c.GDN
	return fmt.Sprintf("gdn1:layers=%s,conv=%d,channels=%d,kheads=%d,vheads=%d,head=%d;conv[tap][channel],state[vhead][v][k];f32",
		strings.Join(rl, "."), g.Conv, g.Channels(), g.KHeads, g.VHeads, g.HeadDim)
}

// imropeFourth reports whether rotary pair i takes the fourth axis'
// position under interleaved multi-axis RoPE (RopeSections; ggml's
// IMROPE: pair i's sector i mod Σsections goes to axis 1, 2 or 0 by
// sector mod 3 while within 3× that axis' section, else to axis 3).
func (c *Config) imropeFourth(i int) bool {
	s := c.RopeSections
	n := s[0] + s[1] + s[2] + s[3]
	if n == 0 {
		return false
	}
	sec := i % n
	switch sec % 3 {
	case 0:
		return sec >= 3*s[0]
	case 1:
		return sec >= 3*s[1]
	default:
		return sec >= 3*s[2]
	}
}

// int32s reads an integer array key, where md can.
func int32s(md Metadata, key string) ([]int32, bool) {
	if a, ok := md.(interface{ Int32s(string) ([]int32, bool) }); ok {
		return a.Int32s(key)
	}
	return nil, false
}

// GDNLayer is one Gated DeltaNet layer's weights.
type GDNLayer struct {
	QKV   Linear    // attn_qkv: Dim → Channels
	Z     Linear    // attn_gate: Dim → Inner
	Beta  Linear    // ssm_beta: Dim → VHeads
	Alpha Linear    // ssm_alpha: Dim → VHeads
	Conv  []float32 // ssm_conv1d transposed: per tap (oldest first), Channels weights
	DT    []float32 // ssm_dt.bias: VHeads
	A     []float32 // ssm_a: VHeads (−e^A_log)
	Norm  []float32 // ssm_norm: HeadDim
	Out   Linear    // ssm_out: Inner → Dim
	// state is the layer's offset in the state slot.
	state int
}

// gdnLayer reads the tensors of recurrent block prefix p.
func (l *loader) gdnLayer(p string, c *Config, state int) *GDNLayer {
	g := c.GDN
	d := &GDNLayer{state: state}
	d.QKV = l.linear(p+"attn_qkv.weight", c.Dim, g.Channels())
	d.Z = l.linear(p+"attn_gate.weight", c.Dim, g.Inner())
	d.Beta = l.linear(p+"ssm_beta.weight", c.Dim, g.VHeads)
	d.Alpha = l.linear(p+"ssm_alpha.weight", c.Dim, g.VHeads)
	if t := l.tensor(p+"ssm_conv1d.weight", g.Conv, g.Channels()); t != nil {
		// the file holds per channel its taps; keep per tap its channels
		byChannel := make([]float32, g.Conv*g.Channels())
		if err := tensor.Dequantize(t.Type, t.Data, byChannel); err != nil {
			l.err = fmt.Errorf("tensor %s: %w", t.Name, err)
		}
		d.Conv = make([]float32, len(byChannel))
		for c := range g.Channels() {
			for j := range g.Conv {
				d.Conv[j*g.Channels()+c] = byChannel[c*g.Conv+j]
			}
		}
	}
	d.DT = l.vector(p+"ssm_dt.bias", g.VHeads)
	d.A = l.vector(p+"ssm_a", g.VHeads)
	d.Norm = l.vector(p+"ssm_norm.weight", g.HeadDim)
	d.Out = l.linear(p+"ssm_out.weight", g.Inner(), c.Dim)
	return d
}

// gdnScratch is a Runner's Gated DeltaNet scratch, grown to the largest
// step seen.
type gdnScratch struct {
	qkv, conv, z, beta, alpha, o []float32
	ops                          [4]kernels.MatVec
	jobs                         []gdnJob
	ones                         []float32 // Channels ones: silu as SwiGLU(x, 1)
}

// gdnJob is one sequence of a step: its index and its first token's.
type gdnJob struct{ seq, t0 int }

func (s *gdnScratch) grow(c *Config, n int) {
	g := c.GDN
	s.qkv = grow(s.qkv, n*g.Channels())
	s.conv = grow(s.conv, n*g.Channels())
	s.z = grow(s.z, n*g.Inner())
	s.o = grow(s.o, n*g.Inner())
	s.beta = grow(s.beta, n*g.VHeads)
	s.alpha = grow(s.alpha, n*g.VHeads)
	if len(s.ones) != g.Channels() {
		s.ones = make([]float32, g.Channels())
		for i := range s.ones {
			s.ones[i] = 1
		}
	}
}

// gdn runs recurrent layer d over the step's n tokens, whose normed
// inputs are in r.h, and leaves its output (before the residual add) in
// r.out. Each sequence's state is read and rewritten in its slot.
func (r *Runner) gdn(d *GDNLayer, seqs []Seq, n int) {
	c := &r.m.Config
	g := c.GDN
	s := &r.gdnS
	s.grow(c, n)
	ch := g.Channels()
	if n == 1 {
		start := time.Now()
		ops := s.ops[:0]
		for _, p := range [...]struct {
			w *Linear
			y []float32
		}{{&d.QKV, s.qkv}, {&d.Z, s.z}, {&d.Beta, s.beta}, {&d.Alpha, s.alpha}} {
			ops = append(ops, kernels.MatVec{Type: p.w.Type, W: p.w.Data, Panels: p.w.Panels, Out: p.w.Out, Y: p.y[:p.w.Out]})
		}
		r.pool.MatVecs(c.Dim, r.h[:c.Dim], ops...)
		s.ops = [4]kernels.MatVec{}
		r.times.MatMul += time.Since(start)
	} else {
		r.matmul(&d.QKV, r.h, n, s.qkv)
		r.matmul(&d.Z, r.h, n, s.z)
		r.matmul(&d.Beta, r.h, n, s.beta)
		r.matmul(&d.Alpha, r.h, n, s.alpha)
	}
	// gates: β = sigmoid, g = softplus(α + dt)·a (in place in s.alpha)
	for t := range n {
		b := s.beta[t*g.VHeads : (t+1)*g.VHeads]
		a := s.alpha[t*g.VHeads : (t+1)*g.VHeads]
		for h := range b {
			b[h] = sigmoid(b[h])
			a[h] = softplus(a[h]+d.DT[h]) * d.A[h]
		}
	}
	// the sequences with tokens, and where their tokens start in the step
	s.jobs = s.jobs[:0]
	t0 := 0
	for si := range seqs {
		if nt := len(seqs[si].Tokens); nt > 0 {
			s.jobs = append(s.jobs, gdnJob{si, t0})
			t0 += nt
		}
	}
	// the causal convolution and silu, one round split by channel; each
	// sequence's tokens in order
	conv := func(lo, hi int) {
		for _, jb := range s.jobs {
			sq := &seqs[jb.seq]
			cs := sq.State[d.state : d.state+g.ConvFloats()]
			gdnConvRange(d.Conv, cs, s.qkv, s.conv, s.ones, g, jb.t0, len(sq.Tokens), lo, hi)
		}
	}
	if ch*n*g.Conv < serialElems {
		conv(0, ch)
	} else {
		r.pool.Parallel(ch, conv)
	}
	// per (sequence, value head): the delta rule over the sequence's tokens
	r.pool.Parallel(len(s.jobs)*g.VHeads, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			jb, h := s.jobs[i/g.VHeads], i%g.VHeads
			sq := &seqs[jb.seq]
			st := sq.State[d.state+g.ConvFloats()+h*g.HeadDim*g.HeadDim:][:g.HeadDim*g.HeadDim]
			gdnHead(st, s.conv, s.z, s.beta, s.alpha, s.o, d.Norm, g, h, jb.t0, len(sq.Tokens), c.NormEps)
		}
	})
	r.matmul(&d.Out, s.o, n, r.out)
}

// gdnConvRange runs the causal convolution and silu of channels [lo, hi)
// for the nt tokens from t0 of one sequence, whose convolution state is
// cs, reading qkv and writing out, and leaves the last Conv-1 inputs in
// cs. w is [tap][channel]; ones holds at least hi-lo ones. Each output
// sums its taps oldest first in float32, as ggml's ssm_conv does.
func gdnConvRange(w, cs, qkv, out, ones []float32, g GDNConfig, t0, nt, lo, hi int) {
	ch, k := g.Channels(), g.Conv
	// input returns the channels of the input i tokens after the step's
	// first (negative: from the state)
	input := func(i int) []float32 {
		if i >= 0 {
			return qkv[(t0+i)*ch+lo : (t0+i)*ch+hi]
		}
		return cs[(k-1+i)*ch+lo : (k-1+i)*ch+hi]
	}
	for i := range nt {
		o := out[(t0+i)*ch+lo : (t0+i)*ch+hi]
		for j := range k {
			x, wj := input(i-(k-1-j)), w[j*ch+lo:j*ch+hi]
			if j == 0 {
				for c := range o {
					o[c] = x[c] * wj[c]
				}
				continue
			}
			for c := range o {
				o[c] += x[c] * wj[c]
			}
		}
		kernels.SwiGLU(o, ones) // silu
	}
	// the new state: the last k-1 inputs, oldest first (row r takes a
	// later row or a new input, so ascending rows read before they change)
	for r := range k - 1 {
		copy(cs[r*ch+lo:r*ch+hi], input(nt-(k-1)+r))
	}
}

// gdnHead runs value head h of one sequence over its nt tokens from t0:
// the l2 norms of its query and key, the delta rule on its state st, the
// gated RMS norm of its output into o. Row j of the state (S[·][j]) meets
// only δ_j, so each row runs its four vector passes (decay, Sᵀk, the rank-1
// update, Sᵀq) while it sits in the first-level cache. Every token's
// arithmetic is the same wherever the step boundaries fall.
func gdnHead(st, conv, z, beta, gate, o, norm []float32, g GDNConfig, h, t0, nt int, eps float32) {
	hd, ch := g.HeadDim, g.Channels()
	kh := h % g.KHeads
	scale := float32(1 / math.Sqrt(float64(hd)))
	var qb, kb [gdnHeadMax]float32
	q, k := qb[:hd], kb[:hd]
	for t := t0; t < t0+nt; t++ {
		row := conv[t*ch : (t+1)*ch]
		l2norm(q, row[kh*hd:(kh+1)*hd], eps)
		l2norm(k, row[(g.KHeads+kh)*hd:(g.KHeads+kh+1)*hd], eps)
		v := row[(2*g.KHeads+h)*hd : (2*g.KHeads+h+1)*hd]
		b := beta[t*g.VHeads+h]
		// S·e^g as S + (e^g-1)·S, one vector pass
		dm := float32(math.Exp(float64(gate[t*g.VHeads+h]))) - 1
		out := o[t*g.Inner()+h*hd : t*g.Inner()+(h+1)*hd]
		for j := range hd {
			m := st[j*hd : (j+1)*hd]
			kernels.AxpyF32(dm, m, m)
			dj := (v[j] - kernels.DotF32(m, k)) * b
			kernels.AxpyF32(dj, k, m)
			out[j] = kernels.DotF32(m, q) * scale
		}
		// gated norm: rmsnorm(out)·norm·silu(z), through z's scratch row
		rmsNorm(out, out, norm, eps)
		zr := z[t*g.Inner()+h*hd : t*g.Inner()+(h+1)*hd]
		kernels.SwiGLU(zr, out)
		copy(out, zr)
	}
}

// l2norm writes x/max(‖x‖, eps) into dst, summing squares in float64 as
// ggml does.
func l2norm(dst, x []float32, eps float32) {
	var sum float64
	for _, v := range x {
		sum += float64(v * v)
	}
	s := 1 / max(float32(math.Sqrt(sum)), eps)
	for i, v := range x {
		dst[i] = v * s
	}
}

// softplus is ggml's: x above 20, else log(1+e^x).
func softplus(x float32) float32 {
	if x > 20 {
		return x
	}
	return float32(math.Log(float64(1 + float32(math.Exp(float64(x))))))
}
