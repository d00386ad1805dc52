package kernels

import (
	"tandem/internal/engine/tensor"
	"tandem/internal/invariant"
)

// Block kernels of tiled attention: a block of queries against a block of
// keys at once, so that each loaded key or value row serves every query of
// the block. Rows are stored at a stride (in elements), as the KV cache's
// pages hold one head's rows KVHeads·HeadDim elements apart.
//
// Every result equals the row kernels' bit for bit at every level, so that
// attention gives a query the same output whether it comes in a block or
// alone: at AVX-512 the F16 scores come from a 4-query x 4-key register
// tile whose every dot product is reduced by DotF16Rows's tree, and the
// value sums (AVX-512 and AVX2) run the same FMAs per element as
// AxpyF16Rows/AxpyF32 in the same order. Where a level has no such kernel
// (F32 scores everywhere, F16 scores at AVX2, all of Generic), the block
// forms call the row kernels.

// attnTileAsm is a level's assembly for the block kernels (nil fields:
// none): each handles exactly four query rows; scores need nk a positive
// multiple of 4, every form d a positive multiple of 16.
type attnTileAsm struct {
	scoresF16 func(q *float32, qs int, k *uint16, ks, nk, d int, scale float32, s *float32, ss int)
	accumF16  func(p *float32, ps int, v *uint16, vs, nk, d int, o *float32, os int)
	accumF32  func(p *float32, ps int, v *float32, vs, nk, d int, o *float32, os int)
	// softmax is SoftmaxF32 for a non-empty x (nil: softmaxGo).
	softmax func(x []float32)
}

// attnTiles holds, per level, that level's block assembly (nil: none).
var attnTiles [AVX512 + 1]*attnTileAsm

func init() {
	for l := range attnTiles {
		if sets[l] != nil {
			attnTiles[l] = archAttnTiles(Level(l))
		}
	}
}

// AttnTiled reports whether the current level has block assembly for the
// attention kernels (AVX-512: F16 scores and the value sums; AVX2: the value
// sums); without it the block forms cost what the row forms do.
func AttnTiled() bool { return attnTiles[CurrentLevel()] != nil }

func checkBlock[T any](op, what string, x []T, stride, n, d int) {
	if n > 0 && (stride < d || len(x) < (n-1)*stride+d) {
		invariant.Failf("kernels", "%s: %s: %d rows of %d elements at stride %d need %d elements, got %d",
			op, what, n, d, stride, (n-1)*stride+d, len(x))
	}
}

func checkOut(op string, s []float32, stride, n, m int) {
	if n > 0 && m > 0 && (stride < m || len(s) < (n-1)*stride+m) {
		invariant.Failf("kernels", "%s: output: %d rows of %d at stride %d need %d elements, got %d",
			op, n, m, stride, (n-1)*stride+m, len(s))
	}
}

// AttnScoresF16 sets s[i·ss+j] = (q_i · k_j)·scale for i < nq, j < nk, where
// q_i = q[i·qs : i·qs+d] and k_j = k[j·ks : j·ks+d]: the scores of nq
// queries against nk half-precision keys. The queries are float32 holding
// half-precision values (ConvertF32ToF16 then ConvertF16ToF32), and each
// score equals DotF16Rows's for that query (in half precision) and key;
// other values may or may not be rounded to half precision first.
func AttnScoresF16(q []float32, qs, nq int, k []uint16, ks, nk, d int, scale float32, s []float32, ss int) {
	checkBlock("AttnScoresF16", "queries", q, qs, nq, d)
	checkBlock("AttnScoresF16", "keys", k, ks, nk, d)
	checkOut("AttnScoresF16", s, ss, nq, nk)
	if nq <= 0 || nk <= 0 {
		return
	}
	i, n4 := 0, 0
	if a := attnTiles[CurrentLevel()]; a != nil && a.scoresF16 != nil && d%16 == 0 && d > 0 && nk >= 4 {
		n4 = nk &^ 3
		for ; i+4 <= nq; i += 4 {
			a.scoresF16(&q[i*qs], qs, &k[0], ks, n4, d, scale, &s[i*ss], ss)
		}
		if n4 == nk && i == nq {
			return
		}
	}
	var buf [256]uint16
	q16 := buf[:0]
	if d > len(buf) {
		q16 = make([]uint16, d)
	}
	q16 = q16[:d]
	for r := range nq {
		j := 0
		if r < i {
			j = n4
		}
		if j == nk {
			continue
		}
		ConvertF32ToF16(q[r*qs:r*qs+d], q16)
		DotF16Rows(q16, k[j*ks:], ks, scale, s[r*ss+j:r*ss+nk])
	}
}

// AttnScoresF32 is AttnScoresF16 for float32 queries and keys: each score
// is DotF32's (times scale), bit for bit.
func AttnScoresF32(q []float32, qs, nq int, k []float32, ks, nk, d int, scale float32, s []float32, ss int) {
	checkBlock("AttnScoresF32", "queries", q, qs, nq, d)
	checkBlock("AttnScoresF32", "keys", k, ks, nk, d)
	checkOut("AttnScoresF32", s, ss, nq, nk)
	for r := range nq {
		for j := range nk {
			s[r*ss+j] = DotF32(q[r*qs:r*qs+d], k[j*ks:j*ks+d]) * scale
		}
	}
}

// AttnAccumF16 adds Σ_j p[i·ps+j]·v_j to o[i·os : i·os+d] for every i < nq,
// with v_j = v[j·vs : j·vs+d] in half precision, taking j = 0, 1, ... nk-1
// in turn: the weighted values of nq queries. Results equal AxpyF16Rows's
// for each query bit for bit.
func AttnAccumF16(p []float32, ps, nq int, v []uint16, vs, nk, d int, o []float32, os int) {
	checkOut("AttnAccumF16", p, ps, nq, nk)
	checkBlock("AttnAccumF16", "values", v, vs, nk, d)
	checkOut("AttnAccumF16", o, os, nq, d)
	if nq <= 0 || nk <= 0 || d <= 0 {
		return
	}
	i := 0
	if a := attnTiles[CurrentLevel()]; a != nil && a.accumF16 != nil && d%16 == 0 {
		for ; i+4 <= nq; i += 4 {
			a.accumF16(&p[i*ps], ps, &v[0], vs, nk, d, &o[i*os], os)
		}
	}
	for ; i < nq; i++ {
		AxpyF16Rows(p[i*ps:i*ps+nk], v, vs, o[i*os:i*os+d])
	}
}

// AttnAccumF32 is AttnAccumF16 for float32 values; results equal AxpyF32
// called row by row, bit for bit.
func AttnAccumF32(p []float32, ps, nq int, v []float32, vs, nk, d int, o []float32, os int) {
	checkOut("AttnAccumF32", p, ps, nq, nk)
	checkBlock("AttnAccumF32", "values", v, vs, nk, d)
	checkOut("AttnAccumF32", o, os, nq, d)
	if nq <= 0 || nk <= 0 || d <= 0 {
		return
	}
	i := 0
	if a := attnTiles[CurrentLevel()]; a != nil && a.accumF32 != nil && d%16 == 0 {
		for ; i+4 <= nq; i += 4 {
			a.accumF32(&p[i*ps], ps, &v[0], vs, nk, d, &o[i*os], os)
		}
	}
	for ; i < nq; i++ {
		y := o[i*os : i*os+d]
		for j := range nk {
			AxpyF32(p[i*ps+j], v[j*vs:j*vs+d], y)
		}
	}
}

// SoftmaxF32 normalizes x in place as ggml's CPU softmax does: x[i] =
// ExpF32(x[i] - max) / sum, the sum taken in float64 (in an order of the
// level's choosing: the result may differ between levels in float64
// rounding of the sum), then x[i] *= float32(1/sum).
func SoftmaxF32(x []float32) {
	if len(x) == 0 {
		return
	}
	if a := attnTiles[CurrentLevel()]; a != nil && a.softmax != nil {
		a.softmax(x)
		return
	}
	softmaxGo(x)
}

// softmaxGo is SoftmaxF32 in Go: the maximum in two and the float64 sum in
// four interleaved partial sums, so that the additions do not wait on each
// other.
func softmaxGo(x []float32) {
	m0, m1 := x[0], x[0]
	i := 1
	for ; i+1 < len(x); i += 2 {
		if x[i] > m0 {
			m0 = x[i]
		}
		if x[i+1] > m1 {
			m1 = x[i+1]
		}
	}
	if i < len(x) && x[i] > m0 {
		m0 = x[i]
	}
	m := max(m0, m1)
	ExpShiftF32(x, m)
	var s0, s1, s2, s3 float64
	i = 0
	for ; i+4 <= len(x); i += 4 {
		s0 += float64(x[i])
		s1 += float64(x[i+1])
		s2 += float64(x[i+2])
		s3 += float64(x[i+3])
	}
	for ; i < len(x); i++ {
		s0 += float64(x[i])
	}
	inv := float32(1 / ((s0 + s1) + (s2 + s3)))
	for i := range x {
		x[i] *= inv
	}
}

// attnScoresRef is the plain Go reference of the score kernels: each dot
// product summed in float64 from the elements' float32 values.
func attnScoresRef(q []float32, qs, nq int, k []float32, ks, nk, d int, scale float32, s []float32, ss int) {
	for i := range nq {
		for j := range nk {
			var sum float64
			for e := range d {
				sum += float64(q[i*qs+e]) * float64(k[j*ks+e])
			}
			s[i*ss+j] = float32(sum) * scale
		}
	}
}

// attnAccumRef is the plain Go reference of the value kernels: o_i +=
// p_ij·v_j with one rounding per product and sum, j in order.
func attnAccumRef(p []float32, ps, nq int, v []float32, vs, nk, d int, o []float32, os int) {
	for i := range nq {
		for j := range nk {
			w := p[i*ps+j]
			for e := range d {
				o[i*os+e] += w * v[j*vs+e]
			}
		}
	}
}

// f16Floats widens half-precision values (tests and references).
func f16Floats(h []uint16) []float32 {
	f := make([]float32, len(h))
	for i, v := range h {
		f[i] = tensor.FP16ToFP32(v)
	}
	return f
}
