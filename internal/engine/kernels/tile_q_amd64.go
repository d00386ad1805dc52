//go:build amd64

package kernels

import "tandem/internal/invariant"

// Eight-token tiles for Q4_0, Q5_0, IQ4_NL, MXFP4, Q4_1 and Q5_1
// (tile_q_amd64.s).

//go:noescape
func dotQ4_0x8RowsVNNI(w *byte, wrb, nrows int, prep *byte, npairs int, y *float32, ystride int)

//go:noescape
func dotQ5_0x8RowsVNNI(w *byte, wrb, nrows int, prep *byte, npairs int, y *float32, ystride int)

//go:noescape
func dotIQ4NLx8RowsVNNI(w *byte, wrb, nrows int, prep *byte, npairs int, y *float32, ystride int)

//go:noescape
func dotMXFP4x8RowsVNNI(w *byte, wrb, nrows int, prep *byte, npairs int, y *float32, ystride int)

//go:noescape
func dotQ4_1x8RowsVNNI(w *byte, wrb, nrows int, prep *byte, nb int, y *float32, ystride int)

//go:noescape
func dotQ5_1x8RowsVNNI(w *byte, wrb, nrows int, prep *byte, nb int, y *float32, ystride int)

// q8PairDot8Rows adapts an eight-token kernel for a weight type dotted with
// Q8_0 that reads prepareTile8's block pairs (blocks of wsize bytes, nb
// even), checking the slice bounds the assembly relies on.
func q8PairDot8Rows(f func(w *byte, wrb, nrows int, prep *byte, npairs int, y *float32, ystride int), wsize int) dot4RowsFunc {
	return func(w []byte, wrb, nrows int, prep []byte, nb int, y []float32, ystride int) {
		if nb <= 0 || nrows <= 0 {
			return
		}
		if nb%2 != 0 {
			invariant.Failf("kernels", "eight-token Q8_0 tile: odd block count %d", nb)
		}
		_ = w[(nrows-1)*wrb+nb*wsize-1]
		_ = prep[nb/2*prep8PairBytes-1]
		_ = y[7*ystride+nrows-1]
		f(&w[0], wrb, nrows, &prep[0], nb/2, &y[0], ystride)
	}
}

// q81Dot8Rows adapts an eight-token kernel for a weight type dotted with
// Q8_1 (blocks of wsize bytes; prepared by prepareTileQ8_1x8), checking the
// slice bounds the assembly relies on.
func q81Dot8Rows(f func(w *byte, wrb, nrows int, prep *byte, nb int, y *float32, ystride int), wsize int) dot4RowsFunc {
	return func(w []byte, wrb, nrows int, prep []byte, nb int, y []float32, ystride int) {
		if nb <= 0 || nrows <= 0 {
			return
		}
		_ = w[(nrows-1)*wrb+nb*wsize-1]
		_ = prep[nb*prepQ81Bytes-1]
		_ = y[7*ystride+nrows-1]
		f(&w[0], wrb, nrows, &prep[0], nb, &y[0], ystride)
	}
}
