package model

import (
	"cmp"
	"fmt"
	"math"
	"sync"
	"time"

	"tandem/internal/engine/kernels"
	"tandem/internal/engine/kvcache"
	"tandem/internal/engine/tensor"
	"tandem/internal/invariant"
)

// Seq is one sequence's share of a forward step.
type Seq struct {
	// Tokens are the new tokens to run, at positions Pos, Pos+1, ...
	Tokens []int32
	// Pos is the number of positions of this sequence already in the KV
	// cache; the new tokens attend to those and to each other (causally).
	Pos int
	// Pages is the sequence's page table; it must cover Pos+len(Tokens)
	// positions. The step writes K/V of the new tokens into it. With a
	// cache that has a window group (kvcache.Config.Window), Pages is the
	// global group's table and WinPages the window group's, which must
	// cover the same positions; slots before the step's window may hold
	// anything (released pages).
	Pages    []int32
	WinPages []int32
	// AllLogits asks for the logits of every new token (prompt logprobs,
	// tests); otherwise only the last token's logits are computed.
	AllLogits bool
	// State is the sequence's recurrent-state slot, Model.StateSize()
	// float32s, for models with recurrent layers (nil for the others):
	// on entry the state after the sequence's first Pos positions, on
	// return the state after Pos+len(Tokens). A sequence at Pos 0 passes
	// a zeroed slot. Forward does not keep it after returning, and no
	// two sequences of one call may share a slot.
	State []float32
}

// StateSize is the number of float32s of one sequence's recurrent state
// slot (Seq.State): 0 for models whose every layer keeps KV pages.
func (m *Model) StateSize() int { return m.Config.State.Floats }

// StateLayout names the layout of the state slot (StateConfig.Layout);
// "" when StateSize is 0.
func (m *Model) StateLayout() string { return m.Config.State.Layout }

// Runner runs forward steps of one Model on one thread pool, reusing its
// scratch buffers across steps. A Runner is not safe for concurrent use.
type Runner struct {
	m    *Model
	pool *kernels.Pool

	// scratch, grown to the largest step seen
	x, h, q, k, v, attn, gate, up, out []float32
	qkv                                []float32 // fused Q|K|V projection (attn_qkv models)
	logits                             []float32
	rope                               []float32 // per token: cos, sin pairs
	ropeSWA                            []float32 // the same for sliding-window layers with their own RoPE
	tokPos                             []int     // per token: position
	tokSeq                             []int     // per token: sequence index

	// The step's projections as attention and the cache writes read them
	// (setQKV): token t's query at qRows[t*qStride:], key and value at
	// kRows/vRows[t*kvStride:]; they alias q, k, v or the fused qkv.
	qRows, kRows, vRows []float32
	qStride, kvStride   int
	// resid says that r.out holds a block output not yet added to r.x,
	// to be normalized with post first when post is not nil (pendingOut).
	resid bool
	post  []float32
	// embedErr is the first error of the embedding round (embedMu).
	embedMu  sync.Mutex
	embedErr error

	mvOps [kernels.MaxMatVecs]kernels.MatVec // matvecs' argument scratch

	layerHook func(layer int)
	// times accumulates where Forward spends its time (see Times).
	times PhaseTimes
	// attnPool recycles attention scratch between steps and layers, so a
	// decode step allocates nothing per layer.
	attnPool sync.Pool
	// tiles is attentionTiled's list of query tiles, reused between layers.
	tiles []attnTile
	// moe is the mixture-of-experts scratch (moe.go).
	moe moeScratch
	// gdnS is the Gated DeltaNet scratch (gdn.go); qg holds the gated
	// attention's query|gate rows and attnGate the gates (AttnGate).
	gdnS         gdnScratch
	qg, attnGate []float32
	// kvIdx maps a layer to its KV-layer index (-1: recurrent).
	kvIdx []int
	// hidden makes output return the final-norm hidden states instead of
	// logits (ForwardHidden).
	hidden bool
	// g4 is gemma4's scratch (gemma4.go).
	g4 gemma4Scratch
}

// SetLayerHook makes Forward call hook(l) as soon as KV layer l's K/V rows
// of the step are in the cache, before that layer's attention runs (nil: no
// hook). l is the KV-layer index, 0..KVLayers()-1 in order: the cache's
// layer, which for a hybrid model (qwen35) skips the recurrent layers, so
// the hook runs once per full-attention layer and not for recurrent ones. It runs on the caller's goroutine between layers, so it may read
// the step's pages of layer l but must not block for long: the next layers
// wait for it. Disaggregated prefill uses it to ship each layer's pages
// while the rest of the step computes.
func (r *Runner) SetLayerHook(hook func(layer int)) { r.layerHook = hook }

// NewRunner returns a Runner that computes on pool.
func NewRunner(m *Model, pool *kernels.Pool) *Runner {
	r := &Runner{m: m, pool: pool, kvIdx: m.Config.kvLayerIndex()}
	r.attnPool.New = func() any { return new(attnScratch) }
	return r
}

// Model returns the runner's model.
func (r *Runner) Model() *Model { return r.m }

// CheckCache reports whether kv has the shape this model writes.
func (r *Runner) CheckCache(kv *kvcache.Cache) error {
	c := kv.Config()
	layers, kvHeads, headDim := r.m.Config.cacheShape()
	if c.Layers != layers || c.KVHeads != kvHeads || c.HeadDim != headDim {
		return fmt.Errorf("kv cache shape %d layers x %d kv heads x %d dims does not match the model's %d x %d x %d",
			c.Layers, c.KVHeads, c.HeadDim, layers, kvHeads, headDim)
	}
	return nil
}

// CacheConfig returns the KV cache configuration this model needs for the
// given page size, page count and element type. Its Layers are the KV
// layers (Config.KVLayers): every layer but the recurrent ones of a hybrid
// model, which keep their state in Seq.State instead.
func (m *Model) CacheConfig(pageTokens, pages int, dtype tensor.Type) kvcache.Config {
	layers, kvHeads, headDim := m.Config.cacheShape()
	return kvcache.Config{Layers: layers, KVHeads: kvHeads, HeadDim: headDim,
		PageTokens: pageTokens, Pages: pages, DType: dtype}
}

// GroupedCacheConfig is CacheConfig with the model's sliding-window layers
// in the cache's window group, of windowPages pages (kvcache layer
// groups). A model without windowed layers gets CacheConfig's one group.
// When every layer is windowed the global group is empty (pages is
// ignored).
func (m *Model) GroupedCacheConfig(pageTokens, pages, windowPages int, dtype tensor.Type) kvcache.Config {
	c := m.CacheConfig(pageTokens, pages, dtype)
	if m.Config.SlidingWindow <= 0 {
		return c
	}
	c.Window, c.WindowLayers, c.WindowPages = m.Config.SlidingWindow, make([]bool, c.Layers), windowPages
	global := 0
	for l := range c.Layers {
		c.WindowLayers[l] = m.Config.Window(l) > 0
		if !c.WindowLayers[l] {
			global++
		}
	}
	if global == c.Layers {
		c.Window, c.WindowLayers, c.WindowPages = 0, nil, 0
	}
	if global == 0 {
		c.Pages = 0
	}
	return c
}

// layerPages returns the page table that layer l reads and writes: s's
// table of the layer's group in kv.
func (s *Seq) layerPages(kv *kvcache.Cache, l int) []int32 {
	if kv.Group(l) == kvcache.GroupWindow {
		return s.WinPages
	}
	return s.Pages
}

// FirstNeededPos returns the earliest cache position that a step whose
// first new token is at position pos reads: 0, unless every layer is a
// sliding-window layer, when positions before pos-SlidingWindow+1 are never
// read again. A caller may release a sequence's pages that lie wholly
// before FirstNeededPos of its next step; Forward then accepts any value
// (such as -1) in those page-table slots.
func (m *Model) FirstNeededPos(pos int) int {
	if !m.Config.AllWindowed() {
		return 0
	}
	return max(0, pos-m.Config.SlidingWindow+1)
}

// Forward runs one step over seqs and returns, per sequence, its logits:
// len(Tokens)*Vocab floats when AllLogits, else Vocab floats for the last
// token. The returned slices alias the runner's scratch and are valid until
// the next call.
func (r *Runner) Forward(kv *kvcache.Cache, seqs []Seq) ([][]float32, error) {
	start := time.Now()
	defer func() { r.times.Total += time.Since(start) }()
	if err := r.CheckCache(kv); err != nil {
		return nil, err
	}
	n, nOut, err := r.validate(kv, seqs)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return make([][]float32, len(seqs)), nil
	}
	r.grow(n, nOut)
	t := 0
	for si, s := range seqs {
		for i := range s.Tokens {
			r.tokPos[t] = s.Pos + i
			r.tokSeq[t] = si
			t++
		}
	}
	// token embeddings and RoPE tables, token by token
	if n < serialTokens {
		err = r.embedRange(seqs, 0, n)
	} else {
		r.embedErr = nil
		r.pool.Parallel(n, func(lo, hi int) {
			if err := r.embedRange(seqs, lo, hi); err != nil {
				r.embedMu.Lock()
				r.embedErr = cmp.Or(r.embedErr, err)
				r.embedMu.Unlock()
			}
		})
		err, r.embedErr = r.embedErr, nil
	}
	if err != nil {
		return nil, err
	}
	if r.m.Config.Gemma4 != nil {
		r.gemma4Inputs(seqs, n)
		for l := range r.m.Layers {
			r.gemma4Layer(kv, l, seqs, n)
		}
		return r.output(seqs, n, nOut), nil
	}
	for l := range r.m.Layers {
		r.layer(kv, l, seqs, n)
	}
	return r.output(seqs, n, nOut), nil
}

// serialTokens is the step size (tokens) under which Forward computes the
// embeddings and RoPE tables on its own goroutine (about a microsecond per
// token each).
const serialTokens = 32

// embedRange writes the embeddings of tokens [lo, hi) of the step into r.x
// and their RoPE cos/sin into the tables.
func (r *Runner) embedRange(seqs []Seq, lo, hi int) error {
	c := &r.m.Config
	for t := lo; t < hi; t++ {
		s := &seqs[r.tokSeq[t]]
		tok := s.Tokens[r.tokPos[t]-s.Pos]
		row := r.x[t*c.Dim : (t+1)*c.Dim]
		if err := tensor.Dequantize(r.m.Embed.Type, r.m.Embed.Row(int(tok)), row); err != nil {
			return fmt.Errorf("embed token %d: %w", tok, err)
		}
		if c.EmbedScale != 0 {
			for i := range row {
				row[i] *= c.EmbedScale
			}
		}
	}
	r.ropeTable(r.rope, lo, hi, c.RopeBase, c.RopeScale)
	if c.swaRopeDiffers() {
		r.ropeTable(r.ropeSWA, lo, hi, c.RopeBaseSWA, c.RopeScaleSWA)
	}
	return nil
}

func (r *Runner) validate(kv *kvcache.Cache, seqs []Seq) (n, nOut int, err error) {
	c := r.m.Config
	pt := kv.Config().PageTokens
	for si, s := range seqs {
		if s.Pos < 0 {
			return 0, 0, fmt.Errorf("sequence %d: negative position %d", si, s.Pos)
		}
		end := s.Pos + len(s.Tokens)
		kc := kv.Config()
		for g, tab := range [kvcache.Groups][]int32{s.Pages, s.WinPages} {
			if kc.GroupLayers(g) == 0 {
				continue
			}
			if end > len(tab)*pt {
				return 0, 0, fmt.Errorf("sequence %d: %d positions need %d %s pages, page table has %d", si, end, (end+pt-1)/pt, kvcache.GroupName(g), len(tab))
			}
			// Pages wholly before the first position the step reads may
			// have been released: window-group pages before the window,
			// and any page before FirstNeededPos (models whose every
			// layer is windowed, with one group).
			first := max(kc.FirstNeeded(g, s.Pos), r.m.FirstNeededPos(s.Pos)/pt)
			if kc.Window > 0 && g == kvcache.GroupGlobal {
				first = 0
			}
			for i := first; i < (end+pt-1)/pt; i++ {
				if kv.Pool(g).Refs(tab[i]) == 0 {
					return 0, 0, fmt.Errorf("sequence %d: %s page %d is not allocated", si, kvcache.GroupName(g), tab[i])
				}
			}
		}
		if len(s.State) != c.State.Floats {
			return 0, 0, fmt.Errorf("sequence %d: state slot has %d floats, the model's state has %d", si, len(s.State), c.State.Floats)
		}
		for _, tok := range s.Tokens {
			if tok < 0 || int(tok) >= c.Vocab {
				return 0, 0, fmt.Errorf("sequence %d: token id %d is out of range 0..%d", si, tok, c.Vocab-1)
			}
		}
		n += len(s.Tokens)
		switch {
		case len(s.Tokens) == 0:
		case s.AllLogits:
			nOut += len(s.Tokens)
		default:
			nOut++
		}
	}
	return n, nOut, nil
}

func grow(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}

func (r *Runner) grow(n, nOut int) {
	c := r.m.Config
	qDim, kvDim := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	r.x = grow(r.x, n*c.Dim)
	r.h = grow(r.h, n*max(c.Dim, qDim))
	// Q|K|V and gate|up go through one matrix (qkvWeights, gateUpWeights)
	// or apart, layer by layer (a mixed-type file may span some layers
	// only): the scratch covers whichever the layers use.
	fusedQKV, apartQKV, fusedFF := false, false, false
	for i := range r.m.Layers {
		ly := &r.m.Layers[i]
		if ly.qkvWeights(n) != nil {
			fusedQKV = true
		} else {
			apartQKV = true
		}
		fusedFF = fusedFF || ly.gateUpWeights(n) != nil
	}
	if apartQKV {
		r.q = grow(r.q, n*qDim)
		r.k = grow(r.k, n*kvDim)
		r.v = grow(r.v, n*kvDim)
	}
	if fusedQKV {
		r.qkv = grow(r.qkv, n*(qDim+2*kvDim))
	}
	r.attn = grow(r.attn, n*qDim)
	if c.AttnGate {
		r.q = grow(r.q, n*qDim)
		r.qg = grow(r.qg, n*2*qDim)
		r.attnGate = grow(r.attnGate, n*qDim)
	}
	ff := c.FF
	if c.MoE.Experts > 0 {
		ff = 0 // every layer is a mixture of experts, with its own scratch
	}
	r.gate = grow(r.gate, n*ff)
	r.up = grow(r.up, n*ff)
	if fusedFF {
		r.up = grow(r.up, n*2*ff) // gate|up rows
	}
	r.out = grow(r.out, n*c.Dim)
	if !r.hidden { // ForwardHidden needs no logits (a mean-pooled batch would need nOut of every token)
		r.logits = grow(r.logits, nOut*c.Vocab)
	}
	r.rope = grow(r.rope, n*c.RopeDim)
	if c.swaRopeDiffers() {
		r.ropeSWA = grow(r.ropeSWA, n*c.RopeDim)
	}
	if cap(r.tokPos) < n {
		r.tokPos = make([]int, n)
		r.tokSeq = make([]int, n)
	}
	r.tokPos, r.tokSeq = r.tokPos[:n], r.tokSeq[:n]
}

// ropeTable fills dst with cos/sin for tokens [lo, hi)'s positions, computed as
// ggml's rope cache does: theta advances by base^(-2/n_rot) in float32, is
// divided by the frequency factor, multiplied by the position scale, and
// cos and sin are multiplied by the attention factor.
func (r *Runner) ropeTable(dst []float32, lo, hi int, base, scale float32) {
	if r.m.Config.Yarn.ExtFactor != 0 {
		r.ropeYarnTable(dst, lo, hi, base, scale)
		return
	}
	c := r.m.Config
	half := c.RopeDim / 2
	thetaScale := float32(math.Pow(float64(base), -2.0/float64(c.RopeDim)))
	mscale := c.RopeAttnFactor
	for t := lo; t < hi; t++ {
		theta := float32(r.tokPos[t])
		tab := dst[t*c.RopeDim : (t+1)*c.RopeDim]
		for i := range half {
			th := theta
			if c.imropeFourth(i) {
				th = 0 // the fourth axis' position is 0 for text
			}
			if r.m.RopeFreqs != nil {
				th /= r.m.RopeFreqs[i]
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

// applyRope rotates each head of vec (n heads of HeadDim) in place.
func (r *Runner) applyRope(vec []float32, heads int, tab []float32) {
	c := r.m.Config
	half := c.RopeDim / 2
	for h := range heads {
		x := vec[h*c.HeadDim : (h+1)*c.HeadDim]
		for i := range half {
			cos, sin := tab[2*i], tab[2*i+1]
			a, b := 2*i, 2*i+1
			if c.RopeStyle == RopeNeox {
				a, b = i, i+half
			}
			x0, x1 := x[a], x[b]
			x[a] = x0*cos - x1*sin
			x[b] = x0*sin + x1*cos
		}
	}
}

// rmsNorm writes x / sqrt(mean(x^2)+eps) * w into dst, summing squares in
// float64 as ggml does.
func rmsNorm(dst, x, w []float32, eps float32) {
	var sum float64
	for _, v := range x {
		sum += float64(v * v)
	}
	mean := float32(sum / float64(len(x)))
	scale := float32(1 / math.Sqrt(float64(mean+eps)))
	for i, v := range x {
		dst[i] = v * scale * w[i]
	}
}

func (r *Runner) matmul(w *Linear, x []float32, n int, y []float32) {
	start := time.Now()
	if w.Panels != nil {
		r.pool.MatMulQ8Panels(w.Data, w.Panels, w.Out, w.In, x[:n*w.In], n, y[:n*w.Out])
	} else {
		r.pool.MatMul(w.Type, w.Data, w.Out, w.In, x[:n*w.In], n, y[:n*w.Out])
	}
	r.times.MatMul += time.Since(start)
}

// serialElems is the elementwise work (elements) under which Forward runs
// a loop on its own goroutine instead of a pool round: waking the helpers
// and waiting for them costs more than the loop.
const serialElems = 1 << 14

// parallel is r.pool.Parallel, or fn(0, n) on the caller when n is under
// serialElems.
func (r *Runner) parallel(n int, fn func(lo, hi int)) {
	if n < serialElems {
		fn(0, n)
		return
	}
	r.pool.Parallel(n, fn)
}

// matvecs runs up to three one-token products of the input x in one pool
// round (kernels.MatVecs): y1 = w1·x, y2 = w2·x and, unless w3 is nil,
// y3 = w3·x. The products must share their input width.
func (r *Runner) matvecs(x []float32, w1 *Linear, y1 []float32, w2 *Linear, y2 []float32, w3 *Linear, y3 []float32) {
	start := time.Now()
	ops := r.mvOps[:0]
	for _, p := range [...]struct {
		w *Linear
		y []float32
	}{{w1, y1}, {w2, y2}, {w3, y3}} {
		if p.w == nil {
			continue
		}
		if p.w.In != w1.In {
			invariant.Failf("model", "matvecs: input widths %d and %d differ", w1.In, p.w.In)
		}
		ops = append(ops, kernels.MatVec{Type: p.w.Type, W: p.w.Data, Panels: p.w.Panels, Out: p.w.Out, Y: p.y[:p.w.Out]})
	}
	r.pool.MatVecs(w1.In, x[:w1.In], ops...)
	clear(r.mvOps[:])
	r.times.MatMul += time.Since(start)
}

// PhaseTimes is the wall time Forward spent in all, in matrix
// multiplications (every linear layer and the output projection) and in
// attention (scores, softmax, weighted values), summed over calls.
type PhaseTimes struct {
	Total, MatMul, Attention time.Duration
}

// Times returns the time spent in Forward since the runner was made or
// the last ResetTimes. A Runner is used by one goroutine at a time, so the
// counters need no lock.
func (r *Runner) Times() PhaseTimes { return r.times }

// ResetTimes zeroes the counters Times returns.
func (r *Runner) ResetTimes() { r.times = PhaseTimes{} }

func addBias(y, b []float32, n int) {
	if b == nil {
		return
	}
	for t := range n {
		row := y[t*len(b) : (t+1)*len(b)]
		for i := range row {
			row[i] += b[i]
		}
	}
}

// normTokens writes the RMS norm of each of the n token rows of r.x, with
// weights w, into r.h, first adding a pending block output (see
// pendingOut): on the caller for a small step (no pool round, no closure),
// else split over the pool by token.
func (r *Runner) normTokens(w []float32, n int) {
	c := &r.m.Config
	if n*c.Dim < serialElems {
		r.normRange(w, 0, n)
	} else {
		r.pool.Parallel(n, func(lo, hi int) { r.normRange(w, lo, hi) })
	}
	r.resid = false
}

// normRange is normTokens for tokens [lo, hi).
func (r *Runner) normRange(w []float32, lo, hi int) {
	c := &r.m.Config
	for t := lo; t < hi; t++ {
		x := r.x[t*c.Dim : (t+1)*c.Dim]
		r.addPending(x, t)
		rmsNorm(r.h[t*c.Dim:(t+1)*c.Dim], x, w, c.NormEps)
	}
}

// pendingOut records that the block output in r.out (attention's or the
// feed-forward's) is still to be added to the residual stream r.x, after
// an RMS norm with weights post when post is not nil (gemma's post-block
// norms). The next pass over the tokens' rows (normTokens, or output after
// the last layer) does it token by token, inside its own pool round, so
// the step has no serial pass over all of r.x per block.
func (r *Runner) pendingOut(post []float32) { r.resid, r.post = true, post }

// addPending adds token t's pending block output to its residual row x,
// if there is one (pendingOut).
func (r *Runner) addPending(x []float32, t int) {
	if !r.resid {
		return
	}
	c := &r.m.Config
	out := r.out[t*c.Dim : (t+1)*c.Dim]
	if r.post != nil {
		rmsNorm(out, out, r.post, c.NormEps)
	}
	for i := range x {
		x[i] += out[i]
	}
}

// setQKV points the attention inputs at the step's projections: token t's
// query at q[t*qStride:], its key and value at k[t*kvStride:] and
// v[t*kvStride:].
func (r *Runner) setQKV(q []float32, qStride int, k, v []float32, kvStride int) {
	r.qRows, r.kRows, r.vRows, r.qStride, r.kvStride = q, k, v, qStride, kvStride
}

func (r *Runner) layer(kv *kvcache.Cache, l int, seqs []Seq, n int) {
	c := &r.m.Config // a pointer: the closures below must not copy Config to the heap
	ly := &r.m.Layers[l]
	r.normTokens(ly.AttnNorm, n)
	if ly.GDN != nil {
		r.gdn(ly.GDN, seqs, n)
		r.pendingOut(nil)
	} else {
		r.attnBlock(kv, l, seqs, n)
	}
	r.normTokens(ly.FFNNorm, n)
	if ly.MoE != nil {
		r.moeFFN(ly.MoE, n)
		r.pendingOut(ly.PostFFNNorm)
		return
	}
	r.ffn(ly, c, n)
}

// attnBlock runs the attention of layer l (KV layer r.kvIdx[l]) over the
// normed inputs in r.h, leaving its output in r.out.
func (r *Runner) attnBlock(kv *kvcache.Cache, l int, seqs []Seq, n int) {
	c := &r.m.Config
	ly := &r.m.Layers[l]
	kl := r.kvIdx[l]
	qDim, kvDim := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	switch qkv := ly.qkvWeights(n); {
	case c.AttnGate && n == 1:
		r.matvecs(r.h, &ly.Q, r.qg, &ly.K, r.k, &ly.V, r.v)
		r.setQKV(r.q, qDim, r.k, r.v, kvDim)
	case c.AttnGate:
		r.matmul(&ly.Q, r.h, n, r.qg)
		r.matmul(&ly.K, r.h, n, r.k)
		r.matmul(&ly.V, r.h, n, r.v)
		r.setQKV(r.q, qDim, r.k, r.v, kvDim)
	case qkv != nil:
		// one product for Q|K|V; the rows are read in place
		r.matmul(qkv, r.h, n, r.qkv)
		w := qDim + 2*kvDim
		r.setQKV(r.qkv, w, r.qkv[qDim:], r.qkv[qDim+kvDim:], w)
	case n == 1:
		// one round for the three products of one input
		r.matvecs(r.h, &ly.Q, r.q, &ly.K, r.k, &ly.V, r.v)
		r.setQKV(r.q, qDim, r.k, r.v, kvDim)
	default:
		r.matmul(&ly.Q, r.h, n, r.q)
		r.matmul(&ly.K, r.h, n, r.k)
		r.matmul(&ly.V, r.h, n, r.v)
		r.setQKV(r.q, qDim, r.k, r.v, kvDim)
	}
	// biases, Q/K norms, RoPE and the K/V cache rows, token by token
	if n*(qDim+2*kvDim) < serialElems {
		r.prepRange(kv, l, seqs, 0, n)
	} else {
		r.pool.Parallel(n, func(lo, hi int) { r.prepRange(kv, l, seqs, lo, hi) })
	}
	if r.layerHook != nil {
		r.layerHook(kl)
	}
	attStart := time.Now()
	// attention reads the cache's layer kl (Runner.shape maps l to it)
	r.attention(kv, l, seqs, n)
	r.times.Attention += time.Since(attStart)
	if c.AttnGate {
		a, g := r.attn[:n*qDim], r.attnGate[:n*qDim]
		for i := range a {
			a[i] *= sigmoid(g[i])
		}
	}
	r.matmul(&ly.O, r.attn, n, r.out)
	r.addRowBias(r.out[:n*c.Dim], ly.OBias)
	r.pendingOut(ly.PostAttnNorm)
}

// ffn runs layer ly's dense feed-forward block over the normed inputs in
// r.h, leaving its output in r.out.
func (r *Runner) ffn(ly *Layer, c *Config, n int) {
	switch gu := ly.gateUpWeights(n); {
	case gu != nil:
		// one product for gate|up: each token's row holds FF gate values,
		// then FF up values
		r.matmul(gu, r.h, n, r.up)
		if n*c.FF < serialElems {
			r.actRange(0, n)
		} else {
			r.pool.Parallel(n, r.actRange)
		}
	default:
		if n == 1 {
			r.matvecs(r.h, &ly.Gate, r.gate, &ly.Up, r.up, nil, nil)
		} else {
			r.matmul(&ly.Gate, r.h, n, r.gate)
			r.matmul(&ly.Up, r.h, n, r.up)
		}
		g, u := r.gate[:n*c.FF], r.up[:n*c.FF]
		if c.Act == ActGELU {
			r.parallel(len(g), func(lo, hi int) {
				for i := lo; i < hi; i++ {
					g[i] = geluF16(g[i]) * u[i]
				}
			})
		} else if len(g) < serialElems {
			kernels.SwiGLU(g, u)
		} else {
			r.pool.Parallel(len(g), func(lo, hi int) { kernels.SwiGLU(g[lo:hi], u[lo:hi]) })
		}
	}
	r.matmul(&ly.Down, r.gate, n, r.out)
	r.pendingOut(ly.PostFFNNorm)
}

// prepRange readies tokens [lo, hi) of layer l for attention: it adds the
// Q/K/V biases, applies the Q/K norms, rotates Q and K (RoPE), scales Q
// and writes K and V into the sequence's cache rows. Each token's
// operations are independent of the others', so any split of the tokens
// gives the same bits.
func (r *Runner) prepRange(kv *kvcache.Cache, l int, seqs []Seq, lo, hi int) {
	c := &r.m.Config
	ly := &r.m.Layers[l]
	qDim, kvDim := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	rope := r.rope
	if c.Window(l) > 0 && c.swaRopeDiffers() {
		rope = r.ropeSWA
	}
	dt := kv.Config().DType
	kl := r.kvIdx[l]
	for t := lo; t < hi; t++ {
		if c.AttnGate {
			// split the query|gate rows of each head
			qg := r.qg[t*2*qDim : (t+1)*2*qDim]
			for h := range c.Heads {
				copy(r.q[t*qDim+h*c.HeadDim:][:c.HeadDim], qg[2*h*c.HeadDim:])
				copy(r.attnGate[t*qDim+h*c.HeadDim:][:c.HeadDim], qg[(2*h+1)*c.HeadDim:])
			}
		}
		q := r.qRows[t*r.qStride:][:qDim]
		k := r.kRows[t*r.kvStride:][:kvDim]
		v := r.vRows[t*r.kvStride:][:kvDim]
		if ly.QKVBias != nil {
			addBias(r.qkv[t*(qDim+2*kvDim):], ly.QKVBias, 1)
		}
		addBias(q, ly.QBias, 1)
		addBias(k, ly.KBias, 1)
		addBias(v, ly.VBias, 1)
		if ly.QNorm != nil {
			headNorm(q, ly.QNorm, c.HeadDim, c.NormEps)
			headNorm(k, ly.KNorm, c.HeadDim, c.NormEps)
		}
		tab := rope[t*c.RopeDim : (t+1)*c.RopeDim]
		r.applyRope(q, c.Heads, tab)
		if c.QueryScale != 0 {
			for i := range q {
				q[i] *= c.QueryScale
			}
		}
		r.applyRope(k, c.KVHeads, tab)
		pages := seqs[r.tokSeq[t]].layerPages(kv, kl)
		storeRow(kv.KRow(kl, pages, r.tokPos[t]), k, dt)
		storeRow(kv.VRow(kl, pages, r.tokPos[t]), v, dt)
	}
}

// actRange computes the gated activation of tokens [lo, hi) from the fused
// gate|up rows in r.up into r.gate: g = act(gate)·up, as the separate
// products' path computes it element by element.
func (r *Runner) actRange(lo, hi int) {
	c := &r.m.Config
	ff := c.FF
	for t := lo; t < hi; t++ {
		row, g := r.up[t*2*ff:(t+1)*2*ff], r.gate[t*ff:(t+1)*ff]
		if c.Act == ActGELU {
			u := row[ff:]
			for i := range g {
				g[i] = geluF16(row[i]) * u[i]
			}
			continue
		}
		copy(g, row[:ff])
		kernels.SwiGLU(g, row[ff:])
	}
}

// headNorm RMS-normalizes every head (headDim values) of x in place with
// weights w: the Q/K norms of qwen3 and gemma3.
func headNorm(x, w []float32, headDim int, eps float32) {
	for h := 0; h < len(x); h += headDim {
		row := x[h : h+headDim]
		rmsNorm(row, row, w, eps)
	}
}

// geluTable is ggml's GELU lookup: for every half-precision input, the
// tanh-approximated GELU of it rounded to half precision.
var geluTable = sync.OnceValue(func() *[1 << 16]uint16 {
	var t [1 << 16]uint16
	const sqrt2OverPi, coefA = float32(0.79788456080286535587989211986876), float32(0.044715)
	for i := range t {
		x := tensor.FP16ToFP32(uint16(i))
		g := 0.5 * x * (1 + float32(math.Tanh(float64(sqrt2OverPi*x*(1+coefA*x*x)))))
		t[i] = tensor.FP32ToFP16(g)
	}
	return &t
})

// geluF16 is ggml's CPU GELU (GGML_GELU_FP16): inputs at or below -10 give 0,
// at or above 10 themselves, and the rest are rounded to half precision and
// looked up in geluTable.
func geluF16(x float32) float32 {
	switch {
	case x <= -10:
		return 0
	case x >= 10:
		return x
	}
	return tensor.FP16ToFP32(geluTable()[tensor.FP32ToFP16(x)])
}

func storeRow(dst []byte, src []float32, dt tensor.Type) {
	if dt == tensor.F16 {
		kernels.ConvertF32ToF16(src, kvcache.F16(dst))
		return
	}
	copy(kvcache.F32(dst), src)
}

// output gathers the rows that need logits, normalizes them and projects
// them onto the vocabulary.
func (r *Runner) output(seqs []Seq, n, nOut int) [][]float32 {
	c := r.m.Config
	rows := r.h[:nOut*c.Dim]
	o, t := 0, 0
	for _, s := range seqs {
		for i := range s.Tokens {
			if s.AllLogits || i == len(s.Tokens)-1 {
				// the last layer's feed-forward output joins the residual
				// stream here, for the rows that need it
				r.addPending(r.x[t*c.Dim:(t+1)*c.Dim], t)
				rmsNorm(rows[o*c.Dim:(o+1)*c.Dim], r.x[t*c.Dim:(t+1)*c.Dim], r.m.OutputNorm, c.NormEps)
				o++
			}
			t++
		}
	}
	r.resid = false
	if r.hidden {
		return r.hiddenRows(seqs, rows)
	}
	r.matmul(&r.m.Output, rows, nOut, r.logits)
	if capv := c.FinalSoftcap; capv != 0 {
		inv := 1 / capv
		lg := r.logits[:nOut*c.Vocab]
		r.pool.Parallel(len(lg), func(lo, hi int) {
			for i := lo; i < hi; i++ {
				lg[i] = float32(math.Tanh(float64(lg[i]*inv))) * capv
			}
		})
	}
	res := make([][]float32, len(seqs))
	o = 0
	for si, s := range seqs {
		k := 0
		switch {
		case len(s.Tokens) == 0:
		case s.AllLogits:
			k = len(s.Tokens)
		default:
			k = 1
		}
		res[si] = r.logits[o*c.Vocab : (o+k)*c.Vocab]
		o += k
	}
	return res
}
