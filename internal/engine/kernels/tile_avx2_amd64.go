//go:build amd64

package kernels

import "tandem/internal/engine/tensor"

//go:noescape
func dotQ4Kx8RowsAVX2(w *byte, wrb, nrows int, prep *byte, nb int, y *float32, ystride int)

//go:noescape
func dotQ5Kx8RowsAVX2(w *byte, wrb, nrows int, prep *byte, nb int, y *float32, ystride int)

//go:noescape
func dotQ6Kx8RowsAVX2(w *byte, wrb, nrows int, prep *byte, nb int, y *float32, ystride int)

//go:noescape
func dotIQ4XSx8RowsAVX2(w *byte, wrb, nrows int, prep *byte, nb int, y *float32, ystride int)

//go:noescape
func dotQ3Kx8RowsAVX2(w *byte, wrb, nrows int, prep *byte, nb int, y *float32, ystride int)

//go:noescape
func dotQ2Kx8RowsAVX2(w *byte, wrb, nrows int, prep *byte, nb int, y *float32, ystride int)

//go:noescape
func dotQ8_0x8RowsAVX2(w *byte, wrb, nrows int, prep *byte, npairs int, y *float32, ystride int)

// q8Dot8RowsAVX2 checks the slice bounds dotQ8_0x8RowsAVX2 relies on and
// calls it (nb is the blocks per row, even).
func q8Dot8RowsAVX2(w []byte, wrb, nrows int, prep []byte, nb int, y []float32, ystride int) {
	if nb <= 0 || nrows <= 0 {
		return
	}
	_ = w[(nrows-1)*wrb+nb*sizeQ8_0-1]
	_ = prep[2*nb*prepQ8Half-1]
	_ = y[7*ystride+nrows-1]
	dotQ8_0x8RowsAVX2(&w[0], wrb, nrows, &prep[0], nb/2, &y[0], ystride)
}

// setAVX2Tiles sets the AVX2 level's eight-token tiles in k. The K-quant
// and IQ4_XS ones read the AVX512 tiles' prepared data (prepareTileK8);
// the Q8_0 one reads prepareTile8Signed's.
func setAVX2Tiles(k *kernelSet) {
	k.dot8[tensor.Q8_0] = q8Dot8RowsAVX2
	k.signedQ8Tile8 = true
	k.dot8[tensor.Q4_K] = kDot8Rows(dotQ4Kx8RowsAVX2, sizeQ4_K)
	k.dot8[tensor.Q5_K] = kDot8Rows(dotQ5Kx8RowsAVX2, sizeQ5_K)
	k.dot8[tensor.Q6_K] = kDot8Rows(dotQ6Kx8RowsAVX2, sizeQ6_K)
	k.dot8[tensor.IQ4_XS] = kDot8Rows(dotIQ4XSx8RowsAVX2, sizeIQ4_XS)
	k.dot8[tensor.Q3_K] = kDot8Rows(dotQ3Kx8RowsAVX2, sizeQ3_K)
	k.dot8[tensor.Q2_K] = kDot8Rows(dotQ2Kx8RowsAVX2, sizeQ2_K)
}
