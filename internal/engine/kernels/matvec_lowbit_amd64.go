//go:build amd64

package kernels

// The many-row IQ4_XS, Q3_K and Q2_K matrix-vector kernels at AVX512
// (matvec_lowbit_amd64.s), with the arguments of matvecQ4KVNNI.

//go:noescape
func matvecIQ4XSVNNI(w *byte, wrb, off, npairs int, prep *byte, nb int, y *float32, yoff int)

//go:noescape
func matvecQ3KVNNI(w *byte, wrb, off, npairs int, prep *byte, nb int, y *float32, yoff int)

//go:noescape
func matvecQ2KVNNI(w *byte, wrb, off, npairs int, prep *byte, nb int, y *float32, yoff int)

// The low-bit K kernels with their bounds checks (see matvecKRows).
var (
	matvecIQ4XSRows = matvecKRows(matvecIQ4XSVNNI, sizeIQ4_XS)
	matvecQ3KRows   = matvecKRows(matvecQ3KVNNI, sizeQ3_K)
	matvecQ2KRows   = matvecKRows(matvecQ2KVNNI, sizeQ2_K)
)
