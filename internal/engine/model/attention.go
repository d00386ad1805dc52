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

// attention computes softmax(q·Kᵀ/√d)·V for every (token, head) over the
// token's sequence positions 0..pos in the cache. It walks the sequence's
// pages, reading each page's rows in place.
func (r *Runner) attention(kv *kvcache.Cache, l int, seqs []Seq, n int) {
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
			pages := seqs[r.tokSeq[t]].Pages
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
