//go:build amd64

package kernels

// The eight-token IQ4_XS, Q3_K and Q2_K tiles at AVX512
// (tile_lowbit_amd64.s), on the K-quant tiles' prepared data
// (prepareTileK8); kDot8Rows checks their bounds.

//go:noescape
func dotIQ4XSx8RowsVNNI(w *byte, wrb, nrows int, prep *byte, nb int, y *float32, ystride int)

//go:noescape
func dotQ3Kx8RowsVNNI(w *byte, wrb, nrows int, prep *byte, nb int, y *float32, ystride int)

//go:noescape
func dotQ2Kx8RowsVNNI(w *byte, wrb, nrows int, prep *byte, nb int, y *float32, ystride int)
