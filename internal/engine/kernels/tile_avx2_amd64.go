//go:build amd64

package kernels

import "tandem/internal/engine/tensor"

//go:noescape
func dotQ4Kx8RowsAVX2(w *byte, wrb, nrows int, prep *byte, nb int, y *float32, ystride int)

//go:noescape
func dotQ5Kx8RowsAVX2(w *byte, wrb, nrows int, prep *byte, nb int, y *float32, ystride int)

//go:noescape
func dotQ6Kx8RowsAVX2(w *byte, wrb, nrows int, prep *byte, nb int, y *float32, ystride int)

// setAVX2Tiles sets the AVX2 level's eight-token tiles in k. They read the
// same prepared data as the AVX512 ones (prepareTileK8), so MatMul stages
// a tile the same way at both levels.
func setAVX2Tiles(k *kernelSet) {
	k.dot8[tensor.Q4_K] = kDot8Rows(dotQ4Kx8RowsAVX2, sizeQ4_K)
	k.dot8[tensor.Q5_K] = kDot8Rows(dotQ5Kx8RowsAVX2, sizeQ5_K)
	k.dot8[tensor.Q6_K] = kDot8Rows(dotQ6Kx8RowsAVX2, sizeQ6_K)
}
