//go:build amd64

package kernels

//go:noescape
func dotQ4Kx8RowsVNNI(w *byte, wrb, nrows int, prep *byte, nb int, y *float32, ystride int)

// kDot8Rows adapts an eight-token K-quant kernel over many rows (blocks of
// wsize bytes), checking the slice bounds the assembly relies on.
func kDot8Rows(f func(w *byte, wrb, nrows int, prep *byte, nb int, y *float32, ystride int), wsize int) dot4RowsFunc {
	return func(w []byte, wrb, nrows int, prep []byte, nb int, y []float32, ystride int) {
		if nb <= 0 || nrows <= 0 {
			return
		}
		_ = w[(nrows-1)*wrb+nb*wsize-1]
		_ = prep[nb*prepK8Bytes-1]
		_ = y[7*ystride+nrows-1]
		f(&w[0], wrb, nrows, &prep[0], nb, &y[0], ystride)
	}
}

//go:noescape
func dotQ6Kx8RowsVNNI(w *byte, wrb, nrows int, prep *byte, nb int, y *float32, ystride int)

//go:noescape
func dotQ5Kx8RowsVNNI(w *byte, wrb, nrows int, prep *byte, nb int, y *float32, ystride int)
