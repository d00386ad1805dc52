package model

import (
	"fmt"
	"math"
	"slices"

	"tandem/internal/engine/gguf"
	"tandem/internal/engine/kernels"
	"tandem/internal/engine/tensor"
	"tandem/internal/engine/tokenizer"
)

// EncoderArchitectures lists the BERT-family architectures Tandem runs as
// embedding encoders (bidirectional attention, no KV cache, no logits):
// "nomic-bert" (fused QKV, RoPE, SwiGLU) and "bert" (absolute position
// embeddings, Q/K/V biases, GELU).
var EncoderArchitectures = []string{"nomic-bert", "bert"}

// IsEncoder reports whether arch is one of EncoderArchitectures.
func IsEncoder(arch string) bool { return slices.Contains(EncoderArchitectures, arch) }

// EncoderConfig is an encoder's shape, read from GGUF metadata as
// llama.cpp's loaders for bert and nomic-bert read it.
type EncoderConfig struct {
	Arch       string
	Name       string
	Dim        int
	Layers     int
	Heads      int
	KVHeads    int
	HeadDim    int
	FF         int
	Vocab      int
	Context    int     // trained context: the longest input
	NormEps    float32 // {arch}.attention.layer_norm_epsilon
	RopeDim    int     // nomic-bert: dimensions rotated per head (NEOX pairs)
	RopeBase   float32 // nomic-bert: {arch}.rope.freq_base (10000 when absent)
	TokenTypes int     // tokenizer.ggml.token_type_count
	Pooling    Pooling
}

// EncoderLayer holds one encoder block's weights. Bias slices are nil when
// the file has none.
type EncoderLayer struct {
	QKV        Linear // nomic-bert: fused Q|K|V (Q, K, V empty)
	QKVBias    []float32
	Q, K, V    Linear // bert
	QB, KB, VB []float32
	O          Linear
	OB         []float32
	AttnNorm   []float32 // attn_output_norm (layer norm after the attention residual)
	AttnNormB  []float32
	Up         Linear
	UpB        []float32
	Gate       Linear // nomic-bert only: silu(gate)·up
	Down       Linear
	DownB      []float32
	OutNorm    []float32 // layer_output_norm
	OutNormB   []float32
}

// Encoder is a loaded BERT-family embedding model. It is immutable after
// LoadEncoder and safe for concurrent use by many EncoderRunners.
type Encoder struct {
	Config    EncoderConfig
	Tokenizer *tokenizer.Tokenizer
	File      *gguf.File

	Embed    Linear    // token_embd
	TypeRow  []float32 // row 0 of token_types (every token is "sentence A"); nil when absent
	Pos      Linear    // bert: position_embd, one row per position
	EmbNorm  []float32 // token_embd_norm
	EmbNormB []float32
	Layers   []EncoderLayer
}

// LoadEncoder maps a GGUF file of an encoder architecture.
func LoadEncoder(path string) (*Encoder, error) { return loadEncoder(path, gguf.Open) }

// LoadEncoderInMemory is LoadEncoder with the file read into process
// memory (gguf.OpenInMemory), as LoadInMemory is Load's: the encoder
// computes exactly what LoadEncoder's does.
func LoadEncoderInMemory(path string) (*Encoder, error) {
	return loadEncoder(path, gguf.OpenInMemory)
}

func loadEncoder(path string, open func(string) (*gguf.File, error)) (*Encoder, error) {
	f, err := open(path)
	if err != nil {
		return nil, fmt.Errorf("load encoder: %w", err)
	}
	e, err := EncoderFromFile(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("load encoder %s: %w", path, err)
	}
	return e, nil
}

// EncoderConfigFromMetadata reads an encoder's keys.
func EncoderConfigFromMetadata(md Metadata) (EncoderConfig, error) {
	var c EncoderConfig
	arch, ok := md.String("general.architecture")
	if !ok {
		return c, fmt.Errorf("model metadata: general.architecture is missing")
	}
	if !IsEncoder(arch) {
		return c, fmt.Errorf("model metadata: %q is not an encoder architecture (encoders: %v)", arch, EncoderArchitectures)
	}
	c.Arch = arch
	c.Name, _ = md.String("general.name")
	req := metaReq(md, arch)
	if err := readDims(md, arch, []dimKey{
		{"embedding_length", &c.Dim, dimMax},
		{"block_count", &c.Layers, layersMax},
		{"feed_forward_length", &c.FF, dimMax * 8},
		{"attention.head_count", &c.Heads, headsMax},
		{"context_length", &c.Context, contextMax},
	}, &c.Heads, &c.KVHeads); err != nil {
		return c, err
	}
	if c.Heads%c.KVHeads != 0 || c.Dim%c.Heads != 0 {
		return c, fmt.Errorf("model metadata: %d heads, %d kv heads and width %d do not divide", c.Heads, c.KVHeads, c.Dim)
	}
	c.HeadDim = c.Dim / c.Heads
	eps, ok := md.Float32(arch + ".attention.layer_norm_epsilon")
	if !ok || !(eps > 0 && eps < 1) {
		return c, fmt.Errorf("model metadata: %s.attention.layer_norm_epsilon is missing or out of range (0,1)", arch)
	}
	c.NormEps = eps
	if arch == "nomic-bert" {
		if c.HeadDim%2 != 0 {
			return c, fmt.Errorf("model metadata: head dimension %d must be even for RoPE", c.HeadDim)
		}
		c.RopeDim = c.HeadDim
		if _, ok := md.Int(arch + ".rope.dimension_count"); ok {
			if err := req("rope.dimension_count", &c.RopeDim, c.HeadDim); err != nil {
				return c, err
			}
		}
		if c.RopeDim%2 != 0 {
			return c, fmt.Errorf("model metadata: rope.dimension_count %d must be even", c.RopeDim)
		}
		c.RopeBase = 10000
		if v, ok := md.Float32(arch + ".rope.freq_base"); ok {
			if !(v > 0) {
				return c, fmt.Errorf("model metadata: rope.freq_base %v must be positive", v)
			}
			c.RopeBase = v
		}
	}
	if n, ok := md.Int(arch + ".moe_every_n_layers"); ok && n > 0 {
		return c, fmt.Errorf("model metadata: %s.moe_every_n_layers = %d (nomic-bert-moe) is not supported", arch, n)
	}
	tt, ok := md.Int("tokenizer.ggml.token_type_count")
	if !ok || tt <= 0 || tt > 1<<10 {
		return c, fmt.Errorf("model metadata: tokenizer.ggml.token_type_count is missing or out of range (llama.cpp needs it for %s too)", arch)
	}
	c.TokenTypes = tt
	p, err := PoolingFromMetadata(md, arch)
	if err != nil {
		return c, err
	}
	if p == PoolNone {
		return c, fmt.Errorf("model metadata: %s.pooling_type is none or missing; Tandem serves one pooled vector per input (mean, cls or last)", arch)
	}
	c.Pooling = p
	if toks, ok := md.Strings("tokenizer.ggml.tokens"); ok {
		c.Vocab = len(toks)
	}
	if c.Vocab <= 0 || c.Vocab > vocabMax {
		return c, fmt.Errorf("model metadata: vocabulary size %d is out of range 1..%d", c.Vocab, vocabMax)
	}
	return c, nil
}

// EncoderFromFile builds an Encoder over an open GGUF file, which it then
// owns. Like llama.cpp it refuses tensors the architecture does not use
// (a reranker's cls head, for one).
func EncoderFromFile(f *gguf.File) (*Encoder, error) {
	c, err := EncoderConfigFromMetadata(f)
	if err != nil {
		return nil, err
	}
	tok, err := tokenizerOf(f)
	if err != nil {
		return nil, err
	}
	e := &Encoder{Config: c, Tokenizer: tok, File: f}
	l := loader{f: f, used: map[string]bool{}}
	kvDim := c.KVHeads * c.HeadDim
	e.Embed = l.linear("token_embd.weight", c.Dim, c.Vocab)
	if l.has("token_types.weight") {
		types := l.linear("token_types.weight", c.Dim, c.TokenTypes)
		if l.err == nil {
			e.TypeRow = make([]float32, c.Dim)
			if err := tensor.Dequantize(types.Type, types.Row(0), e.TypeRow); err != nil {
				return nil, fmt.Errorf("tensor token_types.weight: %w", err)
			}
		}
	}
	if c.Arch == "bert" {
		e.Pos = l.linear("position_embd.weight", c.Dim, c.Context)
	}
	e.EmbNorm = l.vector("token_embd_norm.weight", c.Dim)
	e.EmbNormB = l.vector("token_embd_norm.bias", c.Dim)
	opt := func(name string, n int) []float32 {
		if l.has(name) {
			return l.vector(name, n)
		}
		return nil
	}
	e.Layers = make([]EncoderLayer, c.Layers)
	for i := range e.Layers {
		p := fmt.Sprintf("blk.%d.", i)
		ly := &e.Layers[i]
		if l.has(p + "attn_qkv.weight") {
			ly.QKV = l.linear(p+"attn_qkv.weight", c.Dim, c.Dim+2*kvDim)
			ly.QKVBias = opt(p+"attn_qkv.bias", c.Dim+2*kvDim)
		} else {
			ly.Q = l.linear(p+"attn_q.weight", c.Dim, c.Dim)
			ly.K = l.linear(p+"attn_k.weight", c.Dim, kvDim)
			ly.V = l.linear(p+"attn_v.weight", c.Dim, kvDim)
			ly.QB = opt(p+"attn_q.bias", c.Dim)
			ly.KB = opt(p+"attn_k.bias", kvDim)
			ly.VB = opt(p+"attn_v.bias", kvDim)
		}
		ly.O = l.linear(p+"attn_output.weight", c.Dim, c.Dim)
		ly.OB = opt(p+"attn_output.bias", c.Dim)
		ly.AttnNorm = l.vector(p+"attn_output_norm.weight", c.Dim)
		ly.AttnNormB = l.vector(p+"attn_output_norm.bias", c.Dim)
		ly.Up = l.linear(p+"ffn_up.weight", c.Dim, c.FF)
		ly.UpB = opt(p+"ffn_up.bias", c.FF)
		if c.Arch == "nomic-bert" {
			ly.Gate = l.linear(p+"ffn_gate.weight", c.Dim, c.FF)
		}
		ly.Down = l.linear(p+"ffn_down.weight", c.FF, c.Dim)
		ly.DownB = opt(p+"ffn_down.bias", c.Dim)
		ly.OutNorm = l.vector(p+"layer_output_norm.weight", c.Dim)
		ly.OutNormB = l.vector(p+"layer_output_norm.bias", c.Dim)
	}
	if l.err == nil {
		for _, t := range f.Tensors {
			if !l.used[t.Name] {
				l.err = fmt.Errorf("tensor %s is not part of Tandem's %s encoder (a variant it does not run, such as a reranker head)", t.Name, c.Arch)
				break
			}
		}
	}
	if l.err != nil {
		return nil, l.err
	}
	return e, nil
}

// Close unmaps the model file. No EncoderRunner may be in use.
func (e *Encoder) Close() error { return e.File.Close() }

// EncoderRunner runs an Encoder's forward pass on one thread pool, reusing
// its scratch between calls. It is not safe for concurrent use.
type EncoderRunner struct {
	e    *Encoder
	pool *kernels.Pool

	x, q, k, v, qkv, attn, out, up, gate []float32
	rope                                 []float32 // per token: cos, sin pairs (nomic-bert)
	pos                                  []int     // per token: position in its input
}

// NewRunner returns a runner of e on pool.
func (e *Encoder) NewRunner(pool *kernels.Pool) *EncoderRunner {
	return &EncoderRunner{e: e, pool: pool}
}

// Encoder returns the runner's model.
func (r *EncoderRunner) Encoder() *Encoder { return r.e }

// Embed runs the inputs (token ids, each 1..Context long) through the
// encoder as one batch, each attending to its own tokens only, and returns
// one pooled vector per input (Config.Pooling), not normalized. The
// vectors are freshly allocated.
func (r *EncoderRunner) Embed(inputs [][]int32) ([][]float32, error) {
	c := &r.e.Config
	n := 0
	for i, in := range inputs {
		if len(in) == 0 {
			return nil, fmt.Errorf("input %d is empty", i)
		}
		if len(in) > c.Context {
			return nil, fmt.Errorf("input %d has %d tokens, more than the model's context of %d", i, len(in), c.Context)
		}
		for _, t := range in {
			if t < 0 || int(t) >= c.Vocab {
				return nil, fmt.Errorf("input %d: token id %d is out of range 0..%d", i, t, c.Vocab-1)
			}
		}
		n += len(in)
	}
	if n == 0 {
		return nil, nil
	}
	r.grow(n)
	D := c.Dim
	t := 0
	for _, in := range inputs {
		for p, id := range in {
			r.pos[t] = p
			row := r.x[t*D : (t+1)*D]
			if err := tensor.Dequantize(r.e.Embed.Type, r.e.Embed.Row(int(id)), row); err != nil {
				return nil, fmt.Errorf("embed token %d: %w", id, err)
			}
			if r.e.TypeRow != nil {
				for i := range row {
					row[i] += r.e.TypeRow[i]
				}
			}
			if r.e.Pos.Data != nil {
				pe := r.out[:D]
				if err := tensor.Dequantize(r.e.Pos.Type, r.e.Pos.Row(p), pe); err != nil {
					return nil, fmt.Errorf("position %d: %w", p, err)
				}
				for i := range row {
					row[i] = pe[i] + row[i]
				}
			}
			t++
		}
	}
	r.layerNorm(r.x, r.x, r.e.EmbNorm, r.e.EmbNormB, n)
	if c.RopeDim > 0 {
		r.ropeTable(n)
	}
	for l := range r.e.Layers {
		r.layer(l, inputs, n)
	}
	res := make([][]float32, len(inputs))
	t = 0
	for i, in := range inputs {
		res[i] = make([]float32, D)
		PoolRows(c.Pooling, r.x[t*D:(t+len(in))*D], len(in), D, res[i])
		t += len(in)
	}
	return res, nil
}

func (r *EncoderRunner) grow(n int) {
	c := &r.e.Config
	kvDim := c.KVHeads * c.HeadDim
	r.x = grow(r.x, n*c.Dim)
	r.q = grow(r.q, n*c.Dim)
	r.k = grow(r.k, n*kvDim)
	r.v = grow(r.v, n*kvDim)
	r.qkv = grow(r.qkv, n*(c.Dim+2*kvDim))
	r.attn = grow(r.attn, n*c.Dim)
	r.out = grow(r.out, n*c.Dim)
	r.up = grow(r.up, n*c.FF)
	r.gate = grow(r.gate, n*c.FF)
	r.rope = grow(r.rope, n*max(c.RopeDim, 1))
	if cap(r.pos) < n {
		r.pos = make([]int, n)
	}
	r.pos = r.pos[:n]
}

func (r *EncoderRunner) matmul(w *Linear, x []float32, n int, y []float32) {
	r.pool.MatMul(w.Type, w.Data, w.Out, w.In, x[:n*w.In], n, y[:n*w.Out])
}

// layerNorm writes ggml_norm(x)·w + b of each of n rows into dst (which may
// be x): mean and variance summed in float64, as ggml's CPU norm does.
func (r *EncoderRunner) layerNorm(dst, x, w, b []float32, n int) {
	D := r.e.Config.Dim
	eps := r.e.Config.NormEps
	r.parallelRows(n, D, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			layerNormRow(dst[t*D:(t+1)*D], x[t*D:(t+1)*D], w, b, eps)
		}
	})
}

func layerNormRow(dst, x, w, b []float32, eps float32) {
	var sum float64
	for _, v := range x {
		sum += float64(v)
	}
	mean := float32(sum / float64(len(x)))
	var sum2 float64
	for i, v := range x {
		d := v - mean
		dst[i] = d
		sum2 += float64(d * d)
	}
	scale := float32(1 / math.Sqrt(float64(float32(sum2/float64(len(x)))+eps)))
	for i := range dst {
		dst[i] = dst[i] * scale * w[i]
		if b != nil {
			dst[i] += b[i]
		}
	}
}

// parallelRows runs fn over n rows of width elements on the pool, or on the
// caller when the work is small.
func (r *EncoderRunner) parallelRows(n, width int, fn func(lo, hi int)) {
	if n*width < serialElems {
		fn(0, n)
		return
	}
	r.pool.Parallel(n, fn)
}

// ropeTable fills the NEOX RoPE cos/sin of every token's position, as
// ggml's rope cache computes them (theta advanced in float32).
func (r *EncoderRunner) ropeTable(n int) {
	c := &r.e.Config
	half := c.RopeDim / 2
	thetaScale := float32(math.Pow(float64(c.RopeBase), -2.0/float64(c.RopeDim)))
	for t := range n {
		theta := float32(r.pos[t])
		tab := r.rope[t*c.RopeDim : (t+1)*c.RopeDim]
		for i := range half {
			tab[2*i] = float32(math.Cos(float64(theta)))
			tab[2*i+1] = float32(math.Sin(float64(theta)))
			theta *= thetaScale
		}
	}
}

func (r *EncoderRunner) rotate(vec []float32, heads int, tab []float32) {
	c := &r.e.Config
	half := c.RopeDim / 2
	for h := range heads {
		x := vec[h*c.HeadDim : (h+1)*c.HeadDim]
		for i := range half {
			cs, sn := tab[2*i], tab[2*i+1]
			x0, x1 := x[i], x[i+half]
			x[i] = x0*cs - x1*sn
			x[i+half] = x0*sn + x1*cs
		}
	}
}

func (r *EncoderRunner) layer(l int, inputs [][]int32, n int) {
	c := &r.e.Config
	ly := &r.e.Layers[l]
	D, kvDim := c.Dim, c.KVHeads*c.HeadDim
	if ly.QKV.Data != nil {
		w := D + 2*kvDim
		r.matmul(&ly.QKV, r.x, n, r.qkv)
		addBias(r.qkv, ly.QKVBias, n)
		for t := range n {
			row := r.qkv[t*w : (t+1)*w]
			copy(r.q[t*D:(t+1)*D], row[:D])
			copy(r.k[t*kvDim:(t+1)*kvDim], row[D:D+kvDim])
			copy(r.v[t*kvDim:(t+1)*kvDim], row[D+kvDim:])
		}
	} else {
		r.matmul(&ly.Q, r.x, n, r.q)
		r.matmul(&ly.K, r.x, n, r.k)
		r.matmul(&ly.V, r.x, n, r.v)
		addBias(r.q, ly.QB, n)
		addBias(r.k, ly.KB, n)
		addBias(r.v, ly.VB, n)
	}
	if c.RopeDim > 0 {
		for t := range n {
			tab := r.rope[t*c.RopeDim : (t+1)*c.RopeDim]
			r.rotate(r.q[t*D:(t+1)*D], c.Heads, tab)
			r.rotate(r.k[t*kvDim:(t+1)*kvDim], c.KVHeads, tab)
		}
	}
	r.attention(inputs)
	r.matmul(&ly.O, r.attn, n, r.out)
	addBias(r.out, ly.OB, n)
	// cur = attn + x; ffn_inp = norm(cur); x := ffn_inp
	for i := range n * D {
		r.out[i] += r.x[i]
	}
	r.layerNorm(r.x, r.out, ly.AttnNorm, ly.AttnNormB, n)
	r.matmul(&ly.Up, r.x, n, r.up)
	addBias(r.up, ly.UpB, n)
	g := r.gate[:n*c.FF]
	if ly.Gate.Data != nil {
		r.matmul(&ly.Gate, r.x, n, r.gate)
		r.parallelRows(n, c.FF, func(lo, hi int) { kernels.SwiGLU(g[lo*c.FF:hi*c.FF], r.up[lo*c.FF:hi*c.FF]) })
	} else {
		u := r.up[:n*c.FF]
		r.parallelRows(n, c.FF, func(lo, hi int) {
			for i := lo * c.FF; i < hi*c.FF; i++ {
				g[i] = geluF16(u[i])
			}
		})
	}
	r.matmul(&ly.Down, r.gate, n, r.out)
	addBias(r.out, ly.DownB, n)
	for i := range n * D {
		r.out[i] += r.x[i]
	}
	r.layerNorm(r.x, r.out, ly.OutNorm, ly.OutNormB, n)
}

// attention computes softmax(q·kᵀ/√d)·v per input and head, every token
// seeing every token of its own input (no causal mask), in float32 as
// llama.cpp's cache-less attention does.
func (r *EncoderRunner) attention(inputs [][]int32) {
	c := &r.e.Config
	D, kvDim, hd := c.Dim, c.KVHeads*c.HeadDim, c.HeadDim
	group := c.Heads / c.KVHeads
	scale := float32(1 / math.Sqrt(float64(hd)))
	type item struct{ off, n, head int }
	items := make([]item, 0, len(inputs)*c.Heads)
	off := 0
	for _, in := range inputs {
		for h := range c.Heads {
			items = append(items, item{off, len(in), h})
		}
		off += len(in)
	}
	run := func(lo, hi int) {
		var sc []float32
		for _, it := range items[lo:hi] {
			sc = grow(sc, it.n)
			kh := it.head / group
			for i := range it.n {
				q := r.q[(it.off+i)*D+it.head*hd:][:hd]
				mx := float32(-1e30)
				for j := range it.n {
					k := r.k[(it.off+j)*kvDim+kh*hd:][:hd]
					var s float32
					for d := range hd {
						s += q[d] * k[d]
					}
					s *= scale
					sc[j] = s
					mx = max(mx, s)
				}
				var sum float64
				for j := range it.n {
					e := float32(math.Exp(float64(sc[j] - mx)))
					sc[j] = e
					sum += float64(e)
				}
				inv := float32(1 / sum)
				o := r.attn[(it.off+i)*D+it.head*hd:][:hd]
				clear(o)
				for j := range it.n {
					p := sc[j] * inv
					v := r.v[(it.off+j)*kvDim+kh*hd:][:hd]
					for d := range hd {
						o[d] += p * v[d]
					}
				}
			}
		}
	}
	work := 0
	for _, in := range inputs {
		work += len(in) * len(in) * D
	}
	if work < serialElems {
		run(0, len(items))
		return
	}
	r.pool.Parallel(len(items), run)
}
