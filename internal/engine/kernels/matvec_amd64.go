//go:build amd64

package kernels

import "tandem/internal/engine/tensor"

// matvecQ8_0VNNI is in matvec_amd64.s.
//
//go:noescape
func matvecQ8_0VNNI(w *byte, wrb, nrows int, prep *byte, nb int, y *float32)

// matvecQ4KVNNI, matvecQ5KVNNI and matvecQ6KVNNI are in matvec_k_amd64.s.
//
//go:noescape
func matvecQ4KVNNI(w *byte, wrb, off, npairs int, prep *byte, nb int, y *float32, yoff int)

//go:noescape
func matvecQ5KVNNI(w *byte, wrb, off, npairs int, prep *byte, nb int, y *float32, yoff int)

//go:noescape
func matvecQ6KVNNI(w *byte, wrb, off, npairs int, prep *byte, nb int, y *float32, yoff int)

// matvecFormFor returns the many-row matrix-vector kernel for weights of
// type wt at level l, if the level has one: Q8_0, Q2_K, Q3_K, Q4_K, Q5_K,
// Q6_K and IQ4_XS at AVX512. The forms of weight types with one vec dot type share one
// prepared layout, since matVecs prepares an activation once per vec dot
// type (the K-quant kernels read the Q8_K row as it is: no prepare).
func matvecFormFor(l Level, wt tensor.Type) (matvecForm, bool) {
	if l != AVX512 {
		return matvecForm{}, false
	}
	switch wt {
	case tensor.Q8_0:
		return matvecForm{prepBytes: matvecQ8_0PrepBytes, prepare: prepareMatvecQ8_0, rows: matvecQ8_0Rows}, true
	case tensor.Q4_K:
		return matvecForm{rows: matvecQ4KRows}, true
	case tensor.Q5_K:
		return matvecForm{rows: matvecQ5KRows}, true
	case tensor.Q6_K:
		return matvecForm{rows: matvecQ6KRows}, true
	case tensor.IQ4_XS:
		return matvecForm{rows: matvecIQ4XSRows}, true
	case tensor.Q3_K:
		return matvecForm{rows: matvecQ3KRows}, true
	case tensor.Q2_K:
		return matvecForm{rows: matvecQ2KRows}, true
	}
	return matvecForm{}, false
}

// matvecQ8_0Rows checks the slice bounds the assembly relies on and runs it.
func matvecQ8_0Rows(w []byte, wrb, nrows int, prep []byte, nb int, y []float32) {
	if nrows <= 0 || nb <= 0 {
		return
	}
	_ = w[(nrows-1)*wrb+nb*sizeQ8_0-1]
	_ = prep[matvecQ8_0PrepBytes(nb)-1]
	_ = y[nrows-1]
	matvecQ8_0VNNI(&w[0], wrb, nrows, &prep[0], nb, &y[0])
}

// The K-quant kernels with their bounds checks, made once (matVecs looks
// them up on every call).
var (
	matvecQ4KRows = matvecKRows(matvecQ4KVNNI, sizeQ4_K)
	matvecQ5KRows = matvecKRows(matvecQ5KVNNI, sizeQ5_K)
	matvecQ6KRows = matvecKRows(matvecQ6KVNNI, sizeQ6_K)
)

// matvecKRows adapts a many-row K-quant kernel (super-blocks of wsize
// bytes; prep is the Q8_K activation row) to nrows rows: the first half
// of the rows paired with the second, then a last odd row with itself. It
// checks the slice bounds the assembly relies on.
func matvecKRows(f func(w *byte, wrb, off, npairs int, prep *byte, nb int, y *float32, yoff int), wsize int) matvecRowsFunc {
	return func(w []byte, wrb, nrows int, prep []byte, nb int, y []float32) {
		if nrows <= 0 || nb <= 0 {
			return
		}
		_ = w[(nrows-1)*wrb+nb*wsize-1]
		_ = prep[nb*sizeQ8_K-1]
		_ = y[nrows-1]
		h := nrows / 2
		if h > 0 {
			f(&w[0], wrb, h*wrb, h, &prep[0], nb, &y[0], h)
		}
		if nrows%2 == 1 {
			f(&w[(nrows-1)*wrb], wrb, 0, 1, &prep[0], nb, &y[nrows-1], 0)
		}
	}
}
