//go:build amd64

package kernels

import (
	"encoding/binary"
	"math"
)

// Eight-token F16 and BF16 tiles (tile_f_amd64.s).

//go:noescape
func dotF16x8RowsAVX512(w *byte, wrb, nrows int, prep *byte, ngroups int, y *float32, ystride int)

//go:noescape
func dotBF16x8RowsAVX512(w *byte, wrb, nrows int, prep *byte, ngroups int, y *float32, ystride int)

// floatDot8Rows adapts an eight-token F16 or BF16 kernel over the whole
// 16-element groups of rows of n elements, finishing each output with the
// elements after them in Go, exactly as the row kernel's wrapper does
// (widen converts one weight; the activations come widened in prep).
func floatDot8Rows(f func(w *byte, wrb, nrows int, prep *byte, ngroups int, y *float32, ystride int), widen func([]byte) float32) dot4RowsFunc {
	return func(w []byte, wrb, nrows int, prep []byte, n int, y []float32, ystride int) {
		if n <= 0 || nrows <= 0 {
			return
		}
		_ = w[(nrows-1)*wrb+2*n-1]
		_ = prep[prepF8Bytes(n)-1]
		_ = y[7*ystride+nrows-1]
		g := n / 16
		if g > 0 {
			f(&w[0], wrb, nrows, &prep[0], g, &y[0], ystride)
		} else {
			for t := range 8 {
				clear(y[t*ystride : t*ystride+nrows])
			}
		}
		rest := n - 16*g
		if rest == 0 {
			return
		}
		tail := prep[512*g:]
		for r := 0; r < nrows; r++ {
			wr := w[r*wrb+32*g : r*wrb+2*n]
			for t := range 8 {
				s := y[t*ystride+r]
				at := tail[4*rest*t:]
				for j := 0; j < rest; j++ {
					s += widen(wr[2*j:]) * math.Float32frombits(binary.LittleEndian.Uint32(at[4*j:]))
				}
				y[t*ystride+r] = s
			}
		}
	}
}
