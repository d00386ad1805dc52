//go:build amd64

package kernels

import "tandem/internal/engine/tensor"

// matvecQ8_0VNNI is in matvec_amd64.s.
//
//go:noescape
func matvecQ8_0VNNI(w *byte, wrb, nrows int, prep *byte, nb int, y *float32)

// matvecFormFor returns the many-row matrix-vector kernel for weights of
// type wt at level l, if the level has one: Q8_0 at AVX512.
func matvecFormFor(l Level, wt tensor.Type) (matvecForm, bool) {
	if l == AVX512 && wt == tensor.Q8_0 {
		return matvecForm{prepBytes: matvecQ8_0PrepBytes, prepare: prepareMatvecQ8_0, rows: matvecQ8_0Rows}, true
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
