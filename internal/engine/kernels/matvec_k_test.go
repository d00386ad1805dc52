package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"tandem/internal/engine/tensor"
)

// matvecKRefs are the Go references of the many-row K-quant kernels: for
// the types whose row kernels repeat ggml's (IQ4_XS, Q3_K, Q2_K), the
// generic Go row kernel row by row.
var matvecKRefs = map[tensor.Type]matvecRowsFunc{
	tensor.Q4_K:   matvecQ4KRef,
	tensor.Q5_K:   matvecQ5KRef,
	tensor.Q6_K:   matvecQ6KRef,
	tensor.IQ4_XS: rowByRow(dotIQ4_XSGo),
	tensor.Q3_K:   rowByRow(dotQ3_KGo),
	tensor.Q2_K:   rowByRow(dotQ2_KGo),
}

// rowByRow makes a many-row reference of a Q8_K row kernel.
func rowByRow(dot func(n int, w, a []byte) float32) matvecRowsFunc {
	return func(w []byte, wrb, nrows int, a []byte, nb int, y []float32) {
		for r := range nrows {
			y[r] = dot(nb*qkk, w[r*wrb:(r+1)*wrb], a)
		}
	}
}

// checkMatvecK runs the level's many-row kernel for wt over the nrows rows
// of w (nb super-blocks each) against the Q8_K activation row a, and
// checks every output against the level's VecDot bit for bit, against the
// kernel's Go reference and the float64 dot within closeTo's bound, and
// that nothing past the rows was written.
func checkMatvecK(t *testing.T, name string, f matvecForm, wt tensor.Type, w []byte, nrows, nb int, a []byte) {
	t.Helper()
	n := nb * qkk
	wrb, _ := wt.RowBytes(n)
	if f.prepare != nil {
		t.Fatalf("%s: the K-quant kernels read the Q8_K row as it is", wt)
	}
	got := make([]float32, nrows+1)
	got[nrows] = -7
	f.rows(w, wrb, nrows, a, nb, got[:nrows])
	if got[nrows] != -7 {
		t.Fatalf("%s %s nb %d: the kernel wrote past its %d rows", wt, name, nb, nrows)
	}
	ref := make([]float32, nrows)
	matvecKRefs[wt](w, wrb, nrows, a, nb, ref)
	for r := range nrows {
		row := w[r*wrb : (r+1)*wrb]
		want := VecDot(wt, n, row, a)
		if math.Float32bits(got[r]) != math.Float32bits(want) {
			t.Fatalf("%s %s nb %d, %d rows, row %d: kernel %v, VecDot %v", wt, name, nb, nrows, r, got[r], want)
		}
		exact, abs := refDot(wt, n, row, a)
		if !closeTo(got[r], exact, abs) {
			t.Fatalf("%s %s nb %d, %d rows, row %d: kernel %v, float64 dot %v (abs %g)", wt, name, nb, nrows, r, got[r], exact, abs)
		}
		if !closeTo(ref[r], exact, abs) {
			t.Fatalf("%s %s nb %d, %d rows, row %d: Go reference %v, float64 dot %v (abs %g)", wt, name, nb, nrows, r, ref[r], exact, abs)
		}
	}
}

// TestMatvecKKernel checks the many-row K-quant kernels, at every level
// that has them, on random-byte blocks (every quant pattern, negative
// Q6_K scales), blocks of extreme quants and scales (all-ones bytes; 0x80
// Q6_K scales = -128) against ±127 activations, and the ggml-quantized
// and random-byte blocks of the shared vectors, for odd and even
// super-block counts and 1 to 9 rows (odd counts run a row pair on one
// row).
func TestMatvecKKernel(t *testing.T) {
	vecs := loadVectors(t)
	tested := 0
	forEachLevel(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(16, 16))
		for _, wt := range kTileTypes {
			f, ok := matvecFormFor(active.Load().level, wt)
			if !ok {
				continue
			}
			tested++
			for _, nb := range []int{1, 2, 3, 8, 22} {
				n := nb * qkk
				for nrows := 1; nrows <= 9; nrows++ {
					w := randWeights(rng, wt, nrows*n)
					a := quantized(wt, randActivations(rng, n))
					checkMatvecK(t, "random", f, wt, w, nrows, nb, a)
				}
				w := randWeights(rng, wt, 4*n)
				wrb, _ := wt.RowBytes(n)
				for r := range 3 {
					row := w[r*wrb : (r+1)*wrb]
					fill := []byte{0xFF, 0x80, 0x00}[r]
					for b := range nb {
						blk := row[b*wt.TypeSize() : (b+1)*wt.TypeSize()]
						switch wt {
						case tensor.Q4_K:
							for i := 4; i < sizeQ4_K; i++ {
								blk[i] = fill | 0x77&byte(r)
							}
						case tensor.Q5_K:
							for i := 4; i < sizeQ5_K; i++ {
								blk[i] = fill
							}
						case tensor.Q6_K:
							for i := range 208 {
								blk[i] = fill
							}
						}
					}
				}
				unitScales(wt, w[:wrb])
				for _, sign := range []int8{1, -1} {
					q := make([]int8, n)
					for i := range q {
						q[i] = sign * []int8{127, -127}[i/32%2]
					}
					checkMatvecK(t, "extreme", f, wt, w, 4, nb, intActivations(wt, q))
				}
			}
			for _, name := range []string{wt.String() + ".q", "rnd." + wt.String() + ".q"} {
				v, ok := vecs[name]
				if !ok {
					t.Fatalf("no %s in the shared vectors", name)
				}
				const n = 512 // the vectors are [512, 4]
				a := quantized(wt, randActivations(rng, n))
				checkMatvecK(t, name, f, wt, v.data, v.n/n, n/qkk, a)
				checkMatvecK(t, name+" 3 rows", f, wt, v.data, 3, n/qkk, a)
			}
		}
	})
	if MaxLevel() >= AVX512 && tested == 0 {
		t.Error("no many-row K-quant kernel at AVX512")
	}
}

// TestMatvecKRefExact checks the Go references of the many-row K-quant
// kernels against the float64 dot of the test's own dequantizers, on
// random blocks at every level's activation quantizer.
func TestMatvecKRefExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 17))
	for _, wt := range kTileTypes {
		for _, nb := range []int{1, 4, 7} {
			n := nb * qkk
			wrb, _ := wt.RowBytes(n)
			w := randWeights(rng, wt, 3*n)
			a := quantized(wt, randActivations(rng, n))
			y := make([]float32, 3)
			matvecKRefs[wt](w, wrb, 3, a, nb, y)
			for r := range 3 {
				want, abs := refDot(wt, n, w[r*wrb:(r+1)*wrb], a)
				if !closeTo(y[r], want, abs) {
					t.Fatalf("%s nb %d row %d: reference %v, float64 dot %v", wt, nb, r, y[r], want)
				}
			}
		}
	}
}
