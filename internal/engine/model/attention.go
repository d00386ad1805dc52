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

// attnPath chooses attention's form: attnAuto (tiles for the prefill
// chunks where the kernels have block assembly), attnRows (per-query for
// every sequence), attnTiles (tiles for the prefill chunks at any level).
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

// blockKeys is about the number of keys (a whole number of pages, at least
// one) a tile meets between two softmax steps.
const blockKeys = 64

// attnPages returns the page table through which layer l reads sequence s's
// keys and values in kv. Every layer reads the sequence's one page table
// today; this is the one place a layer-specific page list would be chosen.
func attnPages(kv *kvcache.Cache, l int, s *Seq) []int32 {
	_, _ = kv, l
	return s.Pages
}

// attention computes softmax(q·Kᵀ/√d)·V for every (token, head) over the
// token's sequence positions 0..pos in the cache (from the start of its
// window on a sliding-window layer), reading the pages' rows in place.
// Sequences with two or more new tokens (prefill chunks) go by tiles
// (attentionTiled) where the kernels have block assembly; single tokens
// (decode) always go query by query (attentionRows), whose softmax weights
// are rounded to half precision before an F16 V as llama.cpp's are: tiles
// for decode, though faster with GQA, flipped greedy ids against llama.cpp
// on three of the synthesized architecture files.
func (r *Runner) attention(kv *kvcache.Cache, l int, seqs []Seq, n int) {
	tiled := attnForce == attnTiles || (attnForce == attnAuto && kernels.AttnTiled())
	if !tiled {
		r.attentionRows(kv, l, seqs, n, false)
		return
	}
	single := false
	for _, s := range seqs {
		single = single || len(s.Tokens) == 1
	}
	r.attentionTiled(kv, l, seqs, 2)
	if single {
		r.attentionRows(kv, l, seqs, n, true)
	}
}

// attentionRows is attention one query at a time: each (token, head) job
// fills the token's whole score row, normalizes it and sums the values.
// With onlySingle it leaves out the sequences of more than one new token.
func (r *Runner) attentionRows(kv *kvcache.Cache, l int, seqs []Seq, n int, onlySingle bool) {
	c := r.m.Config
	qDim := c.Heads * c.HeadDim
	f16 := kv.Config().DType == tensor.F16
	group := c.Heads / c.KVHeads
	scale := float32(1 / math.Sqrt(float64(c.HeadDim)))
	if c.QueryScale != 0 {
		scale = 1 // Q was scaled before it reached the cache's keys
	}
	window, softcap := c.Window(l), c.AttnSoftcap
	pt := kv.Config().PageTokens
	rowElems := c.KVHeads * c.HeadDim
	maxLen := 0
	for t := range n {
		maxLen = max(maxLen, r.tokPos[t]+1)
	}
	r.pool.Parallel(n*c.Heads, func(lo, hi int) {
		sc0 := r.attnPool.Get().(*attnScratch)
		defer r.attnPool.Put(sc0)
		scores, p16, q16 := sc0.grow(maxLen, c.HeadDim)
		for job := lo; job < hi; job++ {
			// Head-major: one worker's consecutive jobs are the tokens of one
			// head (and the heads of one KV head follow each other), so the
			// pages they read stay in cache from one query to the next.
			t, h := job%n, job/n
			if onlySingle && len(seqs[r.tokSeq[t]].Tokens) != 1 {
				continue
			}
			pages := attnPages(kv, l, &seqs[r.tokSeq[t]])
			q := r.q[t*qDim+h*c.HeadDim : t*qDim+(h+1)*c.HeadDim]
			out := r.attn[t*qDim+h*c.HeadDim : t*qDim+(h+1)*c.HeadDim]
			npos := r.tokPos[t] + 1
			// first position the token sees: 0, or the start of its
			// window on a sliding-window layer (llama.cpp masks p0 when
			// p1-p0 >= n_swa)
			first := 0
			if window > 0 {
				first = max(0, npos-window)
			}
			sc := scores[:npos]
			off := (h / group) * c.HeadDim
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
						sc[p0+s] = kernels.DotF32(q, page[s*rowElems+off:s*rowElems+off+c.HeadDim]) * scale
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
			softmax(sc)
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
						kernels.AxpyF32(sc[p0+s-first], page[s*rowElems+off:s*rowElems+off+c.HeadDim], out)
					}
				}
			}
		}
	})
}

// softmax normalizes x in place, summing in float64 as ggml does.
func softmax(x []float32) {
	m := x[0]
	for _, v := range x[1:] {
		m = max(m, v)
	}
	kernels.ExpShiftF32(x, m)
	var sum float64
	for _, e := range x {
		sum += float64(e)
	}
	inv := float32(1 / sum)
	for i := range x {
		x[i] *= inv
	}
}

// attnTile is a run of one sequence's new tokens whose queries attend as one
// block: tokens t0 .. t0+np-1 of the step.
type attnTile struct{ seq, t0, np int }

// tileScratch is one worker's working memory for a tile: the gathered
// queries (rounded to half precision for an F16 cache), one page's scores (then
// weights), the unnormalized outputs and each row's running max and sum.
type tileScratch struct {
	q16  []uint16
	q32  []float32
	s, o []float32
	m    []float32
	sum  []float64
}

func (ts *tileScratch) grow(rows, d, pt int) {
	if cap(ts.o) < rows*d {
		ts.q16 = make([]uint16, rows*d)
		ts.q32 = make([]float32, rows*d)
		ts.o = make([]float32, rows*d)
	}
	if cap(ts.m) < rows {
		ts.m = make([]float32, rows)
		ts.sum = make([]float64, rows)
	}
	if cap(ts.s) < rows*pt {
		ts.s = make([]float32, rows*pt)
	}
}

// attentionTiled is attention by tiles: for one KV head, the queries of all
// its query heads at a few consecutive positions of one sequence (a tile)
// meet each page's keys at once (every loaded key row serves the whole
// tile), with an online softmax: each row keeps its running maximum and
// sum, rescales its partial output when the maximum grows, and divides at
// the end. No score row longer than a block of keys exists. Sequences with
// fewer than minTokens new tokens are left out.
func (r *Runner) attentionTiled(kv *kvcache.Cache, l int, seqs []Seq, minTokens int) {
	c := r.m.Config
	per := max(1, tileRows/(c.Heads/c.KVHeads))
	r.tiles = r.tiles[:0]
	t := 0
	for si, s := range seqs {
		if len(s.Tokens) < minTokens {
			t += len(s.Tokens)
			continue
		}
		for i := 0; i < len(s.Tokens); i += per {
			r.tiles = append(r.tiles, attnTile{seq: si, t0: t + i, np: min(per, len(s.Tokens)-i)})
		}
		t += len(s.Tokens)
	}
	nt := len(r.tiles)
	r.pool.Parallel(nt*c.KVHeads, func(lo, hi int) {
		sc := r.attnPool.Get().(*attnScratch)
		defer r.attnPool.Put(sc)
		for job := lo; job < hi; job++ {
			// KV-head-major, so that a worker's consecutive tiles read the
			// same head's pages; within a head the later (longer) tiles
			// first, so the short ones even out the end.
			kvh, ti := job/nt, nt-1-job%nt
			r.attendTile(kv, l, seqs, r.tiles[ti], kvh, &sc.tile)
		}
	})
}

// attendTile computes the attention output of one tile for KV head kvh.
func (r *Runner) attendTile(kv *kvcache.Cache, l int, seqs []Seq, tl attnTile, kvh int, ts *tileScratch) {
	c := r.m.Config
	d, group := c.HeadDim, c.Heads/c.KVHeads
	qDim, rowElems := c.Heads*d, c.KVHeads*d
	rows := group * tl.np
	cc := kv.Config()
	f16, pt := cc.DType == tensor.F16, cc.PageTokens
	scale := float32(1 / math.Sqrt(float64(d)))
	if c.QueryScale != 0 {
		scale = 1 // Q was scaled before it reached the cache's keys
	}
	window, softcap := c.Window(l), c.AttnSoftcap
	pages := attnPages(kv, l, &seqs[tl.seq])
	ts.grow(rows, d, max(pt, blockKeys/pt*pt))
	// Row p·group+g is query head kvh·group+g of token t0+p: the group's
	// heads lie side by side in a token's Q row.
	for p := range tl.np {
		src := r.q[(tl.t0+p)*qDim+kvh*group*d:][:group*d]
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
	o, m, sum := ts.o[:rows*d], ts.m[:rows], ts.sum[:rows]
	clear(o)
	for i := range m {
		m[i] = float32(math.Inf(-1))
		sum[i] = 0
	}
	first, end := 0, r.tokPos[tl.t0+tl.np-1]+1
	if window > 0 {
		first = max(0, r.tokPos[tl.t0]+1-window)
	}
	off := kvh * d
	// Keys go in blocks of whole pages, about blockKeys at a time: each
	// page's scores land side by side in one row per query, the softmax
	// step runs once per row and block, and each page's values are summed
	// with its columns of the weights.
	bp := max(1, blockKeys/pt) // pages per block
	for b0 := first - first%pt; b0 < end; b0 += bp * pt {
		base := max(first, b0)          // the block's first position
		nk := min(end, b0+bp*pt) - base // its positions
		s := ts.s[:rows*nk]
		for p0 := b0; p0 < b0+bp*pt && p0 < end; p0 += pt {
			s0, e := max(first-p0, 0), min(pt, end-p0)
			col, page := p0+s0-base, pages[p0/pt]
			if f16 {
				kp := kvcache.F16(kv.KPage(l, page))[s0*rowElems+off:]
				kernels.AttnScoresF16(ts.q32, d, rows, kp, rowElems, e-s0, d, scale, s[col:], nk)
			} else {
				kp := kvcache.F32(kv.KPage(l, page))[s0*rowElems+off:]
				kernels.AttnScoresF32(ts.q32, d, rows, kp, rowElems, e-s0, d, scale, s[col:], nk)
			}
		}
		for row := range rows {
			pos := r.tokPos[tl.t0+row/group]
			// keys base+jlo .. base+jhi-1 are the ones this row sees
			jlo, jhi := 0, min(pos+1-base, nk)
			if window > 0 {
				jlo = max(pos+1-window-base, 0)
			}
			sr := s[row*nk : (row+1)*nk]
			if jlo >= jhi {
				clear(sr)
				continue
			}
			clear(sr[:jlo])
			clear(sr[jhi:])
			v := sr[jlo:jhi]
			if softcap != 0 {
				inv := 1 / softcap
				for i, x := range v {
					v[i] = float32(math.Tanh(float64(x*inv))) * softcap
				}
			}
			mPrev := m[row]
			mNew, bs := kernels.AttnSoftmaxStep(v, mPrev)
			if mNew > mPrev && sum[row] != 0 {
				// rescale what the row has so far to the new maximum
				alpha := kernels.ExpF32(mPrev - mNew)
				or := o[row*d : (row+1)*d]
				for i := range or {
					or[i] *= alpha
				}
				sum[row] *= float64(alpha)
			}
			m[row] = mNew
			sum[row] += float64(bs)
		}
		for p0 := b0; p0 < b0+bp*pt && p0 < end; p0 += pt {
			s0, e := max(first-p0, 0), min(pt, end-p0)
			col, page := p0+s0-base, pages[p0/pt]
			if f16 {
				vp := kvcache.F16(kv.VPage(l, page))[s0*rowElems+off:]
				kernels.AttnAccumF16(s[col:], nk, rows, vp, rowElems, e-s0, d, o, d)
			} else {
				vp := kvcache.F32(kv.VPage(l, page))[s0*rowElems+off:]
				kernels.AttnAccumF32(s[col:], nk, rows, vp, rowElems, e-s0, d, o, d)
			}
		}
	}
	for row := range rows {
		t, h := tl.t0+row/group, kvh*group+row%group
		out := r.attn[t*qDim+h*d:][:d]
		inv := float32(1 / sum[row])
		for i, x := range o[row*d : (row+1)*d] {
			out[i] = x * inv
		}
	}
}
