package model

import (
	"math"

	"tandem/internal/engine/kernels"
	"tandem/internal/engine/kvcache"
	"tandem/internal/engine/tensor"
)

// attnScratch is one attention job chunk's working memory.
type attnScratch struct {
	scores   []float32
	p16, q16 []uint16
	tile     tileScratch
}

func (a *attnScratch) grow(positions, headDim int) ([]float32, []uint16, []uint16) {
	if cap(a.scores) < positions {
		// room to grow: decode adds one position per step
		n := max(positions, 2*cap(a.scores), 256)
		a.scores = make([]float32, n)
		a.p16 = make([]uint16, n)
	}
	if cap(a.q16) < headDim {
		a.q16 = make([]uint16, headDim)
	}
	return a.scores[:positions], a.p16[:positions], a.q16[:headDim]
}

// attnPath chooses attention's form: attnAuto (tiles where the kernels have
// block assembly), attnRows (per-query for every sequence), attnTiles
// (tiles at any level). The forms give the same bits; only speed differs.
type attnPath int

const (
	attnAuto attnPath = iota
	attnRows
	attnTiles
)

// attnForce, when not attnAuto, chooses the form at every level (tests).
var attnForce attnPath

// tileRows is the number of query rows (query heads of one KV head x
// positions) a tile aims at; the block kernels take them four at a time.
const tileRows = 16

// attnPages returns the page table through which cache layer kl reads
// sequence s's keys and values in kv: the window group's on a
// sliding-window layer of a grouped cache, else the global one (see
// Seq.layerPages).
func attnPages(kv *kvcache.Cache, kl int, s *Seq) []int32 {
	return s.layerPages(kv, kl)
}

// attnShape is one layer's attention geometry: its query and KV heads and
// head dimension (gemma4's differ between sliding-window and full layers),
// the cache layer it reads (gemma4's shared-KV layers read an earlier
// layer's), the cache row width, the score scale, soft-cap and window.
type attnShape struct {
	heads, kvHeads, d int
	kl, rowElems      int
	scale, softcap    float32
	window            int
	sinks             []float32 // per head: the softmax's extra logit (gpt-oss), nil for none
}

// shape returns layer l's attention geometry over the cache kv: l is the
// model's layer, kl the cache layer it reads (its KV-layer index, which
// skips a hybrid model's recurrent layers, or the layer whose KV a gemma4
// layer shares).
func (r *Runner) shape(kv *kvcache.Cache, l int) attnShape {
	c := &r.m.Config
	kl := l
	if l < len(r.kvIdx) {
		kl = r.kvIdx[l]
	}
	s := attnShape{heads: c.Heads, kvHeads: c.KVHeads, d: c.HeadDim, kl: kl, softcap: c.AttnSoftcap, window: c.Window(l)}
	if l < len(r.m.Layers) {
		s.sinks = r.m.Layers[l].Sinks
	}
	if g := c.Gemma4; g != nil {
		s.kvHeads, s.d, s.kl = g.KVHeads[l], c.layerHeadDim(l), g.KVSource[l]
	}
	kc := kv.Config()
	s.rowElems = kc.KVHeads * kc.HeadDim
	s.scale = float32(1 / math.Sqrt(float64(s.d)))
	if c.QueryScale != 0 {
		s.scale = 1 // Q was scaled before it reached the cache's keys
	}
	return s
}

// attention computes softmax(q·Kᵀ/√d)·V for every (token, head) over the
// token's sequence positions 0..pos in the cache (from the start of its
// window on a sliding-window layer), reading the pages' rows in place: by
// tiles (attentionTiled) for the sequences whose tiles fill the block
// kernels (prefill chunks; decode with grouped-query attention), query by
// query (attentionRows) for the others. Both give the same bits.
func (r *Runner) attention(kv *kvcache.Cache, l int, seqs []Seq, n int) {
	sh := r.shape(kv, l)
	tiles, rows := false, false
	for _, s := range seqs {
		if r.tiled(len(s.Tokens), &sh) {
			tiles = true
		} else if len(s.Tokens) > 0 {
			rows = true
		}
	}
	if tiles {
		r.attentionTiled(kv, &sh, seqs)
	}
	if rows {
		r.attentionRows(kv, &sh, seqs, n, tiles)
	}
}

// attentionRows is attention one query at a time: each (token, head) job
// fills the token's whole score row, normalizes it and sums the values.
// With skipTiled it leaves out the sequences attentionTiled takes.
func (r *Runner) attentionRows(kv *kvcache.Cache, sh *attnShape, seqs []Seq, n int, skipTiled bool) {
	d, l := sh.d, sh.kl
	qDim := sh.heads * d
	f16 := kv.Config().DType == tensor.F16
	group := sh.heads / sh.kvHeads
	scale, window, softcap := sh.scale, sh.window, sh.softcap
	sinks := sh.sinks
	pt := kv.Config().PageTokens
	rowElems := sh.rowElems
	maxLen := 0
	for t := range n {
		maxLen = max(maxLen, r.tokPos[t]+1)
	}
	r.pool.Parallel(n*sh.heads, func(lo, hi int) {
		sc0 := r.attnPool.Get().(*attnScratch)
		defer r.attnPool.Put(sc0)
		scores, p16, q16 := sc0.grow(maxLen, d)
		for job := lo; job < hi; job++ {
			// Head-major: one worker's consecutive jobs are the tokens of one
			// head (and the heads of one KV head follow each other), so the
			// pages they read stay in cache from one query to the next; the
			// tokens go in late/early pairs (pairOrder), so that each chunk
			// of jobs costs about the same under the causal mask.
			t, h := pairOrder(job%n, n), job/n
			if skipTiled && r.tiled(len(seqs[r.tokSeq[t]].Tokens), sh) {
				continue
			}
			pages := attnPages(kv, l, &seqs[r.tokSeq[t]])
			q := r.qRows[t*r.qStride+h*d:][:d]
			out := r.attn[t*qDim+h*d : t*qDim+(h+1)*d]
			npos := r.tokPos[t] + 1
			// first position the token sees: 0, or the start of its
			// window on a sliding-window layer (llama.cpp masks p0 when
			// p1-p0 >= n_swa)
			first := 0
			if window > 0 {
				first = max(0, npos-window)
			}
			sc := scores[:npos]
			off := (h / group) * d
			if f16 {
				kernels.ConvertF32ToF16(q, q16)
			}
			for p0 := first - first%pt; p0 < npos; p0 += pt {
				s0, m := max(first-p0, 0), min(pt, npos-p0)
				if f16 {
					page := kvcache.F16(kv.KPage(l, pages[p0/pt]))
					kernels.DotF16Rows(q16, page[s0*rowElems+off:], rowElems, scale, sc[p0+s0:p0+m])
				} else {
					page := kvcache.F32(kv.KPage(l, pages[p0/pt]))
					for s := s0; s < m; s++ {
						sc[p0+s] = kernels.DotF32(q, page[s*rowElems+off:s*rowElems+off+d]) * scale
					}
				}
			}
			sc = sc[first:]
			if softcap != 0 {
				inv := 1 / softcap
				for i, v := range sc {
					sc[i] = float32(math.Tanh(float64(v*inv))) * softcap
				}
			}
			attnSoftmax(sc, sinks, h)
			if f16 {
				// llama.cpp rounds the attention weights to half precision
				// before they meet an F16 V.
				kernels.ConvertF32ToF16(sc, p16[:len(sc)])
				kernels.ConvertF16ToF32(p16[:len(sc)], sc)
			}
			clear(out)
			for p0 := first - first%pt; p0 < npos; p0 += pt {
				s0, m := max(first-p0, 0), min(pt, npos-p0)
				if f16 {
					page := kvcache.F16(kv.VPage(l, pages[p0/pt]))
					kernels.AxpyF16Rows(sc[p0+s0-first:p0+m-first], page[s0*rowElems+off:], rowElems, out)
				} else {
					page := kvcache.F32(kv.VPage(l, pages[p0/pt]))
					for s := s0; s < m; s++ {
						kernels.AxpyF32(sc[p0+s-first], page[s*rowElems+off:s*rowElems+off+d], out)
					}
				}
			}
		}
	})
}

// softmax normalizes x in place, summing in float64 as ggml does
// (kernels.SoftmaxF32). Both attention forms call it, so they agree bit for
// bit.
func softmax(x []float32) { kernels.SoftmaxF32(x) }

// attnTile is a run of one sequence's new tokens whose queries attend as one
// block: tokens t0 .. t0+np-1 of the step.
type attnTile struct{ seq, t0, np int }

// tileScratch is one worker's working memory for a tile: the gathered
// queries (rounded to half precision for an F16 cache), the tile's score
// rows (then weights) over the positions the tile sees, and the outputs.
type tileScratch struct {
	q16  []uint16
	q32  []float32
	s, o []float32
	p16  []uint16
}

func (ts *tileScratch) grow(rows, d, positions int) {
	if cap(ts.o) < rows*d {
		ts.q16 = make([]uint16, rows*d)
		ts.q32 = make([]float32, rows*d)
		ts.o = make([]float32, rows*d)
	}
	if cap(ts.s) < rows*positions {
		// room to grow: the next chunk's tiles see more positions
		ts.s = make([]float32, max(rows*positions, 2*cap(ts.s)))
	}
	if cap(ts.p16) < positions {
		ts.p16 = make([]uint16, max(positions, 2*cap(ts.p16)))
	}
}

// tiled reports whether a sequence of n new tokens goes by tiles: when its
// tiles hold at least four query rows (the block kernels' width), at a
// level with block assembly (or always, forced for tests).
func (r *Runner) tiled(n int, sh *attnShape) bool {
	return n*(sh.heads/sh.kvHeads) >= 4 && (attnForce == attnTiles || (attnForce == attnAuto && kernels.AttnTiled()))
}

// attentionTiled is attention by tiles for the sequences tiled accepts: for
// one KV head, the queries of all its query heads at a few consecutive
// positions of one sequence (a tile) meet each page's keys at once, every
// loaded key row and value row serving the whole tile. Each query's
// arithmetic is attentionRows's, operation for operation (the block
// kernels equal the row kernels bit for bit, the softmax is the same
// function, the weights meet the values in the same order), so a token's
// output is the same whether it comes in a prefill chunk, alone in a
// decode step, or recomputed after preemption.
func (r *Runner) attentionTiled(kv *kvcache.Cache, sh *attnShape, seqs []Seq) {
	per := max(1, tileRows/(sh.heads/sh.kvHeads))
	r.tiles = r.tiles[:0]
	t := 0
	for si, s := range seqs {
		if r.tiled(len(s.Tokens), sh) {
			for i := 0; i < len(s.Tokens); i += per {
				r.tiles = append(r.tiles, attnTile{seq: si, t0: t + i, np: min(per, len(s.Tokens)-i)})
			}
		}
		t += len(s.Tokens)
	}
	nt := len(r.tiles)
	r.pool.Parallel(nt*sh.kvHeads, func(lo, hi int) {
		sc := r.attnPool.Get().(*attnScratch)
		defer r.attnPool.Put(sc)
		for job := lo; job < hi; job++ {
			// KV-head-major, so that a worker's consecutive tiles read the
			// same head's pages; within a head the tiles go in pairs of a
			// late (long) and an early (short) one, last with first, so
			// that every run of jobs that the pool hands out in one chunk
			// costs about the same under the causal mask (a tile's cost
			// grows with its position).
			kvh, ti := job/nt, pairOrder(job%nt, nt)
			r.attendTile(kv, sh, seqs, r.tiles[ti], kvh, &sc.tile)
		}
	})
}

// pairOrder returns the tile that runs j-th of n in a head's jobs: n-1, 0,
// n-2, 1, ... (a long and a short tile in turn).
func pairOrder(j, n int) int {
	if j%2 == 0 {
		return n - 1 - j/2
	}
	return j / 2
}

// attendTile computes the attention output of one tile for KV head kvh.
func (r *Runner) attendTile(kv *kvcache.Cache, sh *attnShape, seqs []Seq, tl attnTile, kvh int, ts *tileScratch) {
	l, d, group := sh.kl, sh.d, sh.heads/sh.kvHeads
	qDim, rowElems := sh.heads*d, sh.rowElems
	rows := group * tl.np
	cc := kv.Config()
	f16, pt := cc.DType == tensor.F16, cc.PageTokens
	scale, window, softcap := sh.scale, sh.window, sh.softcap
	sinks := sh.sinks
	pages := attnPages(kv, l, &seqs[tl.seq])
	// the positions the tile sees: from the first one its first token sees
	// to its last token
	first, end := 0, r.tokPos[tl.t0+tl.np-1]+1
	if window > 0 {
		first = max(0, r.tokPos[tl.t0]+1-window)
	}
	npos := end - first
	ts.grow(rows, d, npos)
	// Row p·group+g is query head kvh·group+g of token t0+p: the group's
	// heads lie side by side in a token's Q row.
	for p := range tl.np {
		src := r.qRows[(tl.t0+p)*r.qStride+kvh*group*d:][:group*d]
		dst := ts.q32[p*group*d:][:group*d]
		if f16 {
			// llama.cpp rounds Q to half precision to meet an F16 K
			h := ts.q16[:group*d]
			kernels.ConvertF32ToF16(src, h)
			kernels.ConvertF16ToF32(h, dst)
		} else {
			copy(dst, src)
		}
	}
	s, off := ts.s[:rows*npos], kvh*d
	for p0 := first - first%pt; p0 < end; p0 += pt {
		s0, e := max(first-p0, 0), min(pt, end-p0)
		col, page := p0+s0-first, pages[p0/pt]
		if f16 {
			kp := kvcache.F16(kv.KPage(l, page))[s0*rowElems+off:]
			kernels.AttnScoresF16(ts.q32, d, rows, kp, rowElems, e-s0, d, scale, s[col:], npos)
		} else {
			kp := kvcache.F32(kv.KPage(l, page))[s0*rowElems+off:]
			kernels.AttnScoresF32(ts.q32, d, rows, kp, rowElems, e-s0, d, scale, s[col:], npos)
		}
	}
	for row := range rows {
		pos := r.tokPos[tl.t0+row/group]
		// the row sees positions lo .. pos: columns jlo .. jhi-1
		lo := 0
		if window > 0 {
			lo = max(0, pos+1-window)
		}
		jlo, jhi := lo-first, pos+1-first
		sr := s[row*npos : (row+1)*npos]
		clear(sr[:jlo])
		clear(sr[jhi:])
		v := sr[jlo:jhi]
		if softcap != 0 {
			inv := 1 / softcap
			for i, x := range v {
				v[i] = float32(math.Tanh(float64(x*inv))) * softcap
			}
		}
		attnSoftmax(v, sinks, kvh*group+row%group)
		if f16 {
			// llama.cpp rounds the attention weights to half precision
			// before they meet an F16 V.
			kernels.ConvertF32ToF16(v, ts.p16[:len(v)])
			kernels.ConvertF16ToF32(ts.p16[:len(v)], v)
		}
	}
	// A row's zero weights (positions it does not see) add exact zeros.
	o := ts.o[:rows*d]
	clear(o)
	for p0 := first - first%pt; p0 < end; p0 += pt {
		s0, e := max(first-p0, 0), min(pt, end-p0)
		col, page := p0+s0-first, pages[p0/pt]
		if f16 {
			vp := kvcache.F16(kv.VPage(l, page))[s0*rowElems+off:]
			kernels.AttnAccumF16(s[col:], npos, rows, vp, rowElems, e-s0, d, o, d)
		} else {
			vp := kvcache.F32(kv.VPage(l, page))[s0*rowElems+off:]
			kernels.AttnAccumF32(s[col:], npos, rows, vp, rowElems, e-s0, d, o, d)
		}
	}
	for row := range rows {
		t, h := tl.t0+row/group, kvh*group+row%group
		copy(r.attn[t*qDim+h*d:][:d], o[row*d:(row+1)*d])
	}
}
